"""Host BLAS thread settings for programs that call LAPACK (``eigh``, ``qr``) on CPU.

Small LAPACK calls hand work to OpenBLAS's own threads, which spin against XLA's on a loaded
CPU (:func:`single_threaded_blas`, :func:`one_blas_thread`).

The hang of eigh/QR inside vmapped scans (issue 44) is not a thread setting: it is jaxlib
0.10's batched LAPACK kernels blocking XLA:CPU's intra-op pool, avoided by handing LAPACK one
matrix per call (:mod:`jaxlab._src.linalg`). The compiler option this module used to pass for it
(``xla_cpu_multi_thread_eigen=False``) was measured not to prevent it and is gone.
"""

from __future__ import annotations

import functools
from typing import Any

import threadpoolctl

__all__ = ["one_blas_thread", "single_threaded_blas"]


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
