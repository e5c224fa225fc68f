"""Host thread settings for experiments that call LAPACK from XLA on CPU."""

from __future__ import annotations

import threadpoolctl


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
