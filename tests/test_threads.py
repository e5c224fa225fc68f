"""The XLA:CPU setting that ends the hang of eigh/QR inside vmapped scans (jaxlab._src.threads).

The program below is the shape of the deva experiment's toy (SOAP's eigenbasis kept with eigh on
the first step and QR after, inside a ``lax.scan``, vmapped over many lanes), which hung on a
quiet 2-core machine with XLA:CPU's multi-threaded Eigen (issue 44). It runs in a subprocess with
a timeout so that a hang fails the test instead of stalling the suite. Without the setting the
same program did not hang on a loaded 2-core machine (0 of 12 runs), so this test guards the
library setting against a hang; it is not a proof that the setting is what prevents it.
"""

import os
import subprocess
import sys
import textwrap

import jax
import pytest

from jaxlab._src import threads

PROGRAM = textwrap.dedent(
    """
    import sys
    import jax, jax.numpy as jnp, numpy as np
    from jaxlab._src import threads

    n, steps, lanes = 9, 50, 128

    def one(key):
        x0 = jax.random.normal(key, (n, n))

        def step(carry, t):
            x, basis = carry
            left = x @ x.T
            basis = jax.lax.cond(
                t == 0,
                lambda: jnp.linalg.eigh(left)[1],
                lambda: jnp.linalg.qr(left @ basis)[0],
            )
            x = x - 0.01 * basis.T @ x @ basis
            return (x, basis), jnp.sum(x * x)

        return jax.lax.scan(step, (x0, jnp.eye(n)), jnp.arange(steps))[1]

    keys = jax.random.split(jax.random.key(0), lanes)
    mode = sys.argv[1]
    if mode == "library":
        program = threads.compile_program(jax.vmap(one), keys)
    else:
        program = jax.jit(jax.vmap(one)).lower(keys).compile()
    out = np.asarray(program(keys))
    lane = np.asarray(jax.jit(one)(keys[3]))  # one lane, no vmap: an independent path
    np.testing.assert_allclose(out[3], lane, rtol=1e-4)
    assert np.all(np.isfinite(out)), "non-finite trace"
    print("finished", out.shape)
    """
)
# Far above the program's few seconds (plus JAX's import) on a loaded 2-core CPU; a hang never
# finishes.
TIMEOUT_S = 120


def test_the_library_setting_is_single_threaded_eigen_on_cpu_only():
    assert threads.CPU_COMPILER_OPTIONS == {"xla_cpu_multi_thread_eigen": False}
    assert threads.cpu_compiler_options("cpu") == threads.CPU_COMPILER_OPTIONS
    assert threads.cpu_compiler_options("gpu") is None
    assert threads.cpu_compiler_options("tpu") is None


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the hang is XLA:CPU's")
def test_eigh_and_qr_in_vmapped_scans_finish_with_the_library_setting():
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    try:
        proc = subprocess.run(
            [sys.executable, "-c", PROGRAM, "library"],
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"eigh/QR in vmapped scans hung past {TIMEOUT_S} s with the library setting")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "finished (128, 50)" in proc.stdout
