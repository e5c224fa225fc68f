"""Rounds per second of FAB for 8 agents: shard_map against the vmap path and against numpy.

The problem is per-feature ridge tuning (``d = 10`` features, 20 training and 20 validation rows
per agent, synthetic, float64), ``λ = 10``, ``α = 0.5``, ``β = 0.1``, on unbalanced time-varying
digraphs (ring plus i.i.d. extra edges, ``p = 0.2``). Three implementations of the same rounds:

* candidate: :class:`jaxlab.solvers.FAB` per agent under ``jax.shard_map`` (one agent per CPU
  device, dense mixing through ``all_gather``), all rounds in one compiled ``lax.while_loop``;
* peer 1: the same per-agent solver under ``jax.vmap`` on one device (the vmap path);
* peer 2: the same updates written in numpy (stacked agents, closed-form ridge gradients, the same
  ``A_k``, ``B_k`` precomputed outside the timed region), a Python loop over rounds.

``step_time_s`` is seconds per communication round; ``ratio`` = candidate / peer, timed
interleaved in one run. No target: on simulated CPU devices shard_map pays for cross-device
collectives that the vmap path does not, and the numbers are reported as measured.

A process that wants 8 CPU devices must set ``jax_num_cpu_devices`` before any JAX operation;
importing this module tries to, and when JAX is already running with fewer devices it uses the
devices that exist and records the count.

Run: ``python -m benchmarks fab`` or ``python -m benchmarks.bench_fab``.
"""

from __future__ import annotations

import contextlib
import json
import sys

import jax

with contextlib.suppress(RuntimeError):  # already initialised: use what exists (recorded below)
    jax.config.update("jax_num_cpu_devices", 8)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks._timing import compiled_and_compile_time, interleaved_times, median_times  # noqa: E402
from jaxlab.distributed import (  # noqa: E402
    pull_push_weights,
    run_sharded,
    run_vmapped,
    sample_graph_sequence,
    time_varying_digraph,
    worker_mesh,
)
from jaxlab.solvers import FAB, FABParams  # noqa: E402

__all__ = ["run"]

_SIZES = {
    # rounds per timed call, timed repeats, warm-up repeats
    "smoke": (50, 3, 1),
    "default": (2000, 5, 1),
}
_AXIS = "agents"
_DIM, _ROWS = 10, 20
_PENALTY, _ALPHA, _BETA = 10.0, 0.5, 0.1


def _data(num_agents: int):
    rng = np.random.default_rng(0)
    truth = rng.normal(size=_DIM) * np.linspace(2.0, 0.0, _DIM)
    A = rng.normal(size=(num_agents, _ROWS, _DIM))
    b = A @ truth + rng.normal(size=(num_agents, _ROWS))
    V = rng.normal(size=(num_agents, _ROWS, _DIM))
    w = V @ truth + rng.normal(size=(num_agents, _ROWS))
    return A, b, V, w


def _upper(x, y, A_i, b_i, V_i, w_i):
    return jnp.zeros_like(x), V_i.T @ (V_i @ y - w_i) / _ROWS


def _lower(x, y, A_i, b_i, V_i, w_i):
    return 0.5 * jnp.exp(x) * y**2, A_i.T @ (A_i @ y - b_i) / _ROWS + jnp.exp(x) * y


def _solver(num_agents: int, rounds: int) -> FAB:
    return FAB(
        upper_grad_fn=_upper,
        lower_grad_fn=_lower,
        graph_fn=lambda key, k: time_varying_digraph(key, num_agents),
        penalty=_PENALTY,
        upper_stepsize=_ALPHA,
        lower_stepsize=_BETA,
        maxiter=rounds,
        tol=0.0,
        axis_name=_AXIS,
        implicit_diff=False,
        jit=False,
    )


class _NumpyFAB:
    """FAB's rounds in numpy: stacked agents, the same matrices, closed-form gradients."""

    def __init__(self, data, matrices):
        self.A, self.b, self.V, self.w = data
        self.pulls, self.pushes = matrices
        self.n = self.A.shape[0]

    def _directions(self, x, y, z):
        ex = np.exp(x)
        fy = np.einsum("irj,ir->ij", self.V, np.einsum("irj,ij->ir", self.V, y) - self.w) / _ROWS
        gy = lambda u: (
            np.einsum("irj,ir->ij", self.A, np.einsum("irj,ij->ir", self.A, u) - self.b) / _ROWS
            + ex * u
        )
        dx = _PENALTY * 0.5 * ex * (y**2 - z**2)
        return dx, fy / _PENALTY + gy(y), gy(z)

    def __call__(self):
        x = y = z = np.zeros((self.n, _DIM))
        d = self._directions(x, y, z)
        s = d
        for pull, push in zip(self.pulls, self.pushes, strict=True):
            x = pull @ (x - _ALPHA * s[0])
            y = pull @ (y - _BETA * s[1])
            z = pull @ (z - _BETA * s[2])
            new = self._directions(x, y, z)
            s = tuple(push @ si + ni - di for si, ni, di in zip(s, new, d, strict=True))
            d = new
        return x


def run(size: str = "default") -> dict:
    """Times FAB rounds under shard_map, vmap and numpy; returns the report.

    Args:
      size: ``"default"`` (2000 rounds per call) or ``"smoke"`` (50 rounds: seconds).

    Returns:
      ``{"name", "peer", "size", "num_agents", "device_count", "rows": [{"case", "step_time_s",
      "peer_step_time_s", "ratio", "rounds_per_second", "peer_rounds_per_second",
      "compile_time_s"}, ...]}``.

    Examples:
      >>> report = run("smoke")  # doctest: +SKIP
      >>> [row["case"] for row in report["rows"]]  # doctest: +SKIP
      ['shard_map vs vmap', 'shard_map vs numpy', 'vmap vs numpy']
    """
    if size not in _SIZES:
        raise ValueError(f"size must be one of {sorted(_SIZES)}, got {size!r}")
    rounds, repeats, warmup = _SIZES[size]
    num_agents = min(8, jax.device_count())
    key = jax.random.key(0)
    with jax.enable_x64(True):
        data = _data(num_agents)
        args = tuple(jnp.asarray(v) for v in data)
        start = FABParams(*(jnp.zeros((num_agents, _DIM)),) * 3)
        solver = _solver(num_agents, rounds)

        def per_agent(params, *agent_data):
            return solver.run(params, *agent_data, rng_key=key).params.x

        mesh = worker_mesh(num_agents, axis_name=_AXIS)
        sharded = lambda: run_sharded(per_agent, mesh, _AXIS, start, *args)
        vmapped_fn = jax.jit(lambda p, *a: run_vmapped(per_agent, _AXIS, p, *a))
        vmapped_compiled, vmap_compile = compiled_and_compile_time(vmapped_fn, start, *args)
        vmapped = lambda: vmapped_compiled(start, *args)
        graphs = sample_graph_sequence(
            lambda k, s: time_varying_digraph(k, num_agents), key, rounds
        )
        matrices = jax.vmap(pull_push_weights)(graphs)
        numpy_fab = _NumpyFAB(data, tuple(np.asarray(m, np.float64) for m in matrices))
        # The three agree (same graphs, same updates) before anything is timed.
        x_sharded, x_vmapped = np.asarray(sharded()), np.asarray(vmapped())
        np.testing.assert_allclose(x_sharded, x_vmapped, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(numpy_fab(), x_vmapped, rtol=1e-8, atol=1e-10)
        times = median_times(
            interleaved_times(
                {"shard_map": sharded, "vmap": vmapped, "numpy": numpy_fab}, repeats, warmup
            )
        )
    per_round = {name: t / rounds for name, t in times.items()}
    rows = []
    for candidate, peer in (("shard_map", "vmap"), ("shard_map", "numpy"), ("vmap", "numpy")):
        rows.append(
            {
                "case": f"{candidate} vs {peer}",
                "step_time_s": per_round[candidate],
                "peer_step_time_s": per_round[peer],
                "ratio": per_round[candidate] / per_round[peer],
                "rounds_per_second": 1.0 / per_round[candidate],
                "peer_rounds_per_second": 1.0 / per_round[peer],
                "target_ratio": None,
                "meets_target": None,
            }
        )
    return {
        "name": "fab",
        "peer": "the vmap path (one device) and a numpy implementation of the same rounds",
        "size": size,
        "rounds": rounds,
        "num_agents": num_agents,
        "device_count": jax.device_count(),
        "vmap_compile_time_s": vmap_compile,
        "rows": rows,
    }


if __name__ == "__main__":
    json.dump(run(sys.argv[1] if len(sys.argv) > 1 else "default"), sys.stdout, indent=2)
    print()
