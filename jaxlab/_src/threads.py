"""Host thread settings for programs that call LAPACK (``eigh``, ``qr``) from XLA on CPU.

Two separate problems, two settings:

- **A hang** (reported in issue 44): on a quiet 2-core machine, the deva experiment's toy
  program (SOAP and DeVA-S∞, whose eigenbasis is kept with ``eigh`` and ``qr`` inside vmapped
  ``lax.scan`` loops) hung in every quick run, the host waiting for the result in
  ``np.asarray`` while every XLA worker thread sat idle on its futex. Compiled with
  ``xla_cpu_multi_thread_eigen=False`` it ran in seconds. That option stops XLA:CPU from
  handing the program's work to its intra-op thread pool (Eigen's pool, shared by
  multi-threaded matmuls and the runtime's concurrent execution of independent operations), so
  no task can wait on a pool whose threads all wait in turn (the likely mechanism; the hang did
  not recur on a loaded machine, where threads are scheduled differently, so it is not proven).
  Programs that run these decompositions are compiled with :data:`CPU_COMPILER_OPTIONS`
  (:func:`jit`, :func:`compile_program`); on a GPU or TPU the options are not passed.
- **A slowdown**: small LAPACK calls hand work to OpenBLAS's own threads, which spin against
  XLA's on a loaded CPU (:func:`single_threaded_blas`).

Users of ``jaxlab.optim.scale_by_soap`` and ``jaxlab.optim.deva`` under ``vmap`` on a CPU can do
the same: ``jax.jit(step, compiler_options=cpu_compiler_options())``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import threadpoolctl

__all__ = [
    "CPU_COMPILER_OPTIONS",
    "compile_program",
    "cpu_compiler_options",
    "jit",
    "one_blas_thread",
    "single_threaded_blas",
]

# XLA:CPU options for programs that call eigh/QR inside vmapped scans (see the module docstring):
# single-threaded Eigen, the smallest setting found that ends the hang. XLA's own matmuls then
# run on the calling thread: at the sizes these programs use (matrices up to a few hundred on a
# side, batched by vmap) that costs little, and on a 2-core CPU nothing was measured slower.
CPU_COMPILER_OPTIONS: dict[str, Any] = {"xla_cpu_multi_thread_eigen": False}


def cpu_compiler_options(backend: str | None = None) -> dict[str, Any] | None:
    """:data:`CPU_COMPILER_OPTIONS` when compiling for the CPU, ``None`` for any other backend.

    Args:
      backend: the platform compiled for (default: ``jax.default_backend()``).

    Examples:
      >>> cpu_compiler_options("cpu")
      {'xla_cpu_multi_thread_eigen': False}
      >>> cpu_compiler_options("gpu") is None
      True
    """
    backend = jax.default_backend() if backend is None else backend
    return dict(CPU_COMPILER_OPTIONS) if backend == "cpu" else None


def jit(fn: Callable[..., Any], **jit_kwargs: Any) -> Callable[..., Any]:
    """``jax.jit(fn)`` compiled with :func:`cpu_compiler_options` (for programs with eigh/QR).

    Examples:
      >>> import jax.numpy as jnp
      >>> basis = jit(lambda s: jnp.linalg.eigh(s)[1])
      >>> basis(jnp.eye(2)).shape
      (2, 2)
    """
    return jax.jit(fn, compiler_options=cpu_compiler_options(), **jit_kwargs)


def compile_program(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``jax.jit(fn).lower(*args, **kwargs).compile(...)`` with :func:`cpu_compiler_options`.

    Examples:
      >>> import jax.numpy as jnp
      >>> program = compile_program(lambda s: jnp.linalg.qr(s)[0], jnp.eye(3))
      >>> program(jnp.eye(3)).shape
      (3, 3)
    """
    return jax.jit(fn).lower(*args, **kwargs).compile(compiler_options=cpu_compiler_options())


def single_threaded_blas() -> threadpoolctl.threadpool_limits:
    """A context manager that limits OpenBLAS (LAPACK behind ``eigh``/``qr`` on CPU) to one thread.

    Small LAPACK calls inside jitted code (DeVA's eigenbasis refresh) hand work to OpenBLAS's
    worker threads; on a loaded 2-core CPU those threads spin against XLA's own, and a 192x192 QR
    was measured at 0.3-1 s instead of 1 ms. XLA's own matmuls do not go through OpenBLAS, so
    comparisons with optimizers that never call LAPACK stay fair.

    Examples:
      >>> with single_threaded_blas():
      ...     pass
    """
    return threadpoolctl.threadpool_limits(limits=1, user_api="blas")


@functools.cache
def _controller() -> threadpoolctl.ThreadpoolController:
    return threadpoolctl.ThreadpoolController()


def one_blas_thread() -> Any:
    """:func:`single_threaded_blas` through one cached controller, for calls in a hot path.

    ``threadpool_limits`` scans the process's loaded libraries on every entry (about 1-3 ms,
    reading ``/proc/self/maps``); a controller built once and reused costs about 0.02 ms. It
    limits the BLAS libraries loaded when it is first used (NumPy's and SciPy's OpenBLAS once
    ``scipy.linalg`` is imported), so call it from modules that import what they call.

    Examples:
      >>> import numpy as np
      >>> with one_blas_thread():
      ...     float(np.linalg.cholesky(np.eye(2))[0, 0])
      1.0
    """
    return _controller().limit(limits=1, user_api="blas")
