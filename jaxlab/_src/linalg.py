"""``eigh``, ``qr`` and ``cholesky`` that hand XLA:CPU one matrix per LAPACK call.

The hang this avoids (issue 44). jaxlib 0.10's CPU LAPACK kernels (``geqrf``/``orgqr`` behind
``jnp.linalg.qr``, ``syevd`` behind ``eigh``, ``potrf`` behind ``cholesky``) split a *batch* of
matrices into pieces, queue the pieces on XLA:CPU's intra-op thread pool and block the calling
thread until they finish (``jax::ParallelBatchMap``). XLA's thunk runtime itself runs
independent operations on that same pool, continuing on whichever pool thread finished the
previous kernel. When as many batched LAPACK calls as the pool has threads (two on a 2-core
CPU) start at once on the pool's own threads, each waits for pieces queued behind the other:
the program hangs with every XLA thread idle on its futex and the host waiting in
``np.asarray``. SOAP and DeVA keep two eigenbases (left and right) per matrix, so under ``vmap``
(or for parameters with leading axes) every refresh issues two independent batched QRs.

Captured with ``gdb`` on this project's 2-core machine: both ``tf_XLAEigen`` threads in
``jax::ParallelBatchMap`` under ``QrFactorization::Kernel``, each reached from
``Worker::Parallelize``'s continuation. A vmapped ``lax.scan`` with two independent QRs per step
(512 lanes of 16x16, 1,000 steps) hung in 7 of 19 runs; compiled with
``xla_cpu_multi_thread_eigen=False`` (the setting this project used before) it hung in 7 of 13
(the same stacks), because that option does not take the pool away from LAPACK kernels. With
the functions below it never hung (0 of 13 runs). Releases from jaxlib 0.11.1 compile this
parallel path out; 0.10.2 is the newest this project's registry offers.

The fix is structural rather than a compiler option: on the CPU, a batch (leading axes, or a
``vmap`` axis, handled by :func:`jax.custom_batching.custom_vmap`) runs as a ``lax.map`` of
single-matrix calls, and a single matrix gives LAPACK nothing to split. On a GPU or TPU the
batched call is kept (``lax.platform_dependent``). Derivatives are those of the plain
``jnp.linalg`` function (a ``custom_jvp`` whose rule is ``jax.jvp`` of it), so differentiated
code takes the batched path; the optimizers that refresh eigenbases never differentiate them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

__all__ = ["cholesky", "eigh", "per_matrix", "qr"]


def per_matrix(decomposition: Callable[[jax.Array], Any]) -> Callable[[jax.Array], Any]:
    """``decomposition`` of ``(..., n, n)`` arrays, one matrix per LAPACK call on the CPU.

    Args:
      decomposition: a function of one ``(n, n)`` matrix that also accepts leading batch axes
        (``jnp.linalg.eigh``, ``jnp.linalg.qr``, ``jnp.linalg.cholesky``).

    Returns:
      A function with the same values and derivatives. On the CPU, leading axes and ``vmap``
      axes are looped over with ``lax.map`` instead of handed to LAPACK as a batch (see the
      module docstring for the hang this avoids); elsewhere the batched call is kept.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> lower = per_matrix(jnp.linalg.cholesky)
      >>> spd = jnp.eye(3) * jnp.arange(1.0, 5.0)[:, None, None]
      >>> bool(jnp.allclose(jax.vmap(lower)(spd), jnp.linalg.cholesky(spd)))
      True
    """

    def loop(a: jax.Array) -> Any:
        lead = a.shape[:-2]
        out = jax.lax.map(decomposition, a.reshape((-1, *a.shape[-2:])))
        return jax.tree.map(lambda o: o.reshape(lead + o.shape[1:]), out)

    @jax.custom_batching.custom_vmap
    def one_at_a_time(a: jax.Array) -> Any:
        if a.ndim == 2:
            return decomposition(a)
        return jax.lax.platform_dependent(a, cpu=loop, default=decomposition)

    @one_at_a_time.def_vmap
    def _batched(axis_size, in_batched, a):  # the vmap axis is a's leading axis here
        del axis_size
        out = one_at_a_time(a)
        return out, jax.tree.map(lambda _: bool(in_batched[0]), out)

    @jax.custom_jvp
    def safe(a: jax.Array) -> Any:
        return one_at_a_time(a)

    @safe.defjvp
    def _jvp(primals, tangents):
        return jax.jvp(decomposition, primals, tangents)

    return safe


eigh = per_matrix(jnp.linalg.eigh)
eigh.__doc__ = """``jnp.linalg.eigh`` (eigenvalues ascending), one matrix per LAPACK call on CPU.

Examples:
  >>> import jax.numpy as jnp
  >>> values, vectors = eigh(jnp.diag(jnp.array([2.0, 1.0])))
  >>> values.tolist()
  [1.0, 2.0]
"""
qr = per_matrix(jnp.linalg.qr)
qr.__doc__ = """``jnp.linalg.qr`` (reduced), one matrix per LAPACK call on CPU.

Examples:
  >>> import jax.numpy as jnp
  >>> q, r = qr(jnp.eye(2) * 3.0)
  >>> (q @ r).tolist()
  [[3.0, 0.0], [0.0, 3.0]]
"""
cholesky = per_matrix(jnp.linalg.cholesky)
cholesky.__doc__ = """``jnp.linalg.cholesky`` (lower), one matrix per LAPACK call on CPU.

Examples:
  >>> import jax.numpy as jnp
  >>> cholesky(jnp.eye(2) * 4.0).tolist()
  [[2.0, 0.0], [0.0, 2.0]]
"""
