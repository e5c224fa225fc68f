"""The layer-wise quantization objective: calibration Hessian, its preparation, orders, Schur forms.

A linear layer ``y = W x`` with ``W ∈ ℝ^{r×d}`` (rows = outputs, columns = inputs) sees
calibration inputs ``x_1..x_n``. Its Hessian is ``H = (2/n) Σ_t x_t x_tᵀ`` and the output error of
a perturbed weight ``Ŵ`` is ``(2/n) Σ_t ‖(W − Ŵ) x_t‖² = tr(Δ H Δᵀ)``, ``Δ = W − Ŵ``.

GPTQ and STLA work with ``U``, the **upper** Cholesky factor of ``H⁻¹`` (``H⁻¹ = UᵀU``). With the
columns ordered ``(done, c, R)`` (``c`` the current cluster, ``R`` the later columns), fixing the
error ``e_c`` of ``c`` and re-optimising ``R`` by least squares leaves the residual
``e_c S_c e_cᵀ`` with the Schur complement::

    S_c = H_cc − H_cR H_RR⁻¹ H_Rc = (U_ccᵀ U_cc)⁻¹,

and the optimal compensation is GPTQ's block update ``w̃_R ← w̃_R − (w̃_c − q_c) U_cc⁻¹ U_cR``.

The Hessian is prepared on the host in NumPy float64 (the Cholesky factorisations need it, and
JAX's float64 is off by default): dead columns (``H_jj = 0``) get ``W[:, j] = 0`` and
``H_jj = 1/2048``, then ``H ← H + p · mean(diag H) · I`` (``p = 0.01``). A Hessian that is not
positive definite after damping raises a ``ValueError`` naming ``h`` (increase ``damp``).

References:
  Frantar et al., "GPTQ", ICLR 2023 (arXiv 2210.17323); Zhang et al., "STLA: Spatiotemporal
  Lookahead Alignment for Post-Training Quantization", ICML 2026.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg
from jax.typing import ArrayLike

from jaxlab._src.threads import one_blas_thread
from jaxlab._src.validation import (
    check_array,
    check_choice,
    check_int,
    check_nonnegative,
    check_positive,
    check_weighting_matrix,
)

__all__ = [
    "ORDERS",
    "column_order",
    "hessian_from_inputs",
    "inverse_hessian_cholesky",
    "layer_output_error",
    "prepare_hessian",
    "schur_complement",
    "schur_complement_metric",
    "schur_complement_objective",
    "spin_cluster_order",
]

ORDERS = ("none", "act", "spin")
# The reference's dead-column diagonal and damping fraction (note's defaults table).
DEAD_VALUE = 1.0 / 2048.0
DAMP = 0.01
# SpinCluster's guards: 1/(√d_j + 1e-6) in the normalisation, √(d_j + 1e-8) as the energy.
_SPIN_NORM_EPS = 1e-6
_SPIN_ENERGY_EPS = 1e-8


def check_hessian(h: Any, size: int | None = None, name: str = "h") -> np.ndarray:
    """``h`` as a finite, symmetric ``[d, d]`` float64 host array (``d = size`` when given)."""
    h = check_array(h, name, kind="real", ndim=2, host=True).astype(np.float64)
    if h.shape[0] != h.shape[1]:
        raise ValueError(f"{name} must be square [d, d], got shape {h.shape}")
    if size is not None and h.shape[0] != size:
        raise ValueError(
            f"{name} must have shape ({size}, {size}) to match the {size} columns of w, "
            f"got {h.shape}"
        )
    # One sum first (a NaN or inf makes it non-finite; an overflow falls through to the count).
    if not np.isfinite(np.sum(h)) and not np.all(np.isfinite(h)):
        raise ValueError(f"{name} must be finite, got {int(np.sum(~np.isfinite(h)))} NaN/inf")
    scale = max(float(np.max(np.abs(h))), 1e-300)
    asymmetry = float(np.max(np.abs(h - h.T)))
    if asymmetry > 1e-5 * scale:
        raise ValueError(
            f"{name} must be symmetric (H = (2/n) Xᵀ X), got max |H − Hᵀ| > 1e-5 max|H|"
        )
    # ``h`` is already a float64 copy; an exactly symmetric one is its own symmetrisation.
    return h if asymmetry == 0 else 0.5 * (h + h.T)


def check_weight(w: Any, name: str = "w") -> np.ndarray:
    """``w`` as a finite ``[r, d]`` floating host array (its dtype kept)."""
    w = check_array(w, name, kind="floating", ndim=2, host=True)
    if 0 in w.shape:
        raise ValueError(f"{name} must be a non-empty [r, d] matrix, got shape {w.shape}")
    if not np.all(np.isfinite(w)):
        raise ValueError(f"{name} must be finite, got {int(np.sum(~np.isfinite(w)))} NaN/inf")
    return w


def hessian_from_inputs(x: ArrayLike) -> jax.Array:
    """The layer Hessian ``H = (2/n) Xᵀ X`` of calibration inputs ``X ∈ ℝ^{n×d}``.

    Leading axes of ``x`` are flattened into the ``n`` tokens. Computed at the highest matmul
    precision in ``x``'s dtype (at least float32).

    Args:
      x: ``[..., d]`` floating inputs of the layer.

    Returns:
      ``[d, d]`` symmetric PSD ``H``.

    Examples:
      >>> import jax.numpy as jnp
      >>> x = jnp.array([[1.0, 0.0], [1.0, 2.0]])
      >>> hessian_from_inputs(x).tolist()                 # (2/2) XᵀX
      [[2.0, 2.0], [2.0, 4.0]]
    """
    x = check_array(x, "x", kind="floating")
    if x.ndim < 1 or x.size == 0:
        raise ValueError(f"x must be a non-empty [..., d] array, got shape {x.shape}")
    x = jnp.reshape(x.astype(jnp.promote_types(x.dtype, jnp.float32)), (-1, x.shape[-1]))
    return (2.0 / x.shape[0]) * jnp.matmul(x.T, x, precision=jax.lax.Precision.HIGHEST)


def _prepare(w: np.ndarray, h: np.ndarray, damp: float, dead_value: float):
    dead = np.diag(h) == 0
    w = w.copy()
    h = h.copy()
    w[:, dead] = 0
    h[dead, dead] = dead_value
    damping = damp * float(np.mean(np.diag(h)))
    h[np.diag_indices_from(h)] += damping
    return w, h, dead, damping


def prepare_hessian(
    w: ArrayLike, h: ArrayLike, *, damp: float = DAMP, dead_value: float = DEAD_VALUE
) -> tuple[np.ndarray, np.ndarray]:
    """Dead columns and damping: the preprocessing every Hessian-based method applies.

    A column ``j`` with ``H_jj = 0`` never receives input: ``W[:, j] ← 0`` and
    ``H_jj ← dead_value``. Then ``H ← H + damp · mean(diag H) · I``. Computed on the host.

    Args:
      w: ``[r, d]`` weights.
      h: ``[d, d]`` Hessian ``(2/n) XᵀX``.
      damp: the relative damping ``p >= 0``.
      dead_value: the diagonal given to dead columns, ``> 0``.

    Returns:
      ``(w, h)`` as NumPy arrays (``w`` in its dtype, ``h`` float64).

    Examples:
      >>> import numpy as np
      >>> w, h = prepare_hessian(np.ones((1, 2), np.float32), np.diag([2.0, 0.0]), damp=0.5)
      >>> w.tolist(), np.diag(h).round(4).tolist()     # mean diag (2 + 1/2048)/2
      ([[1.0, 0.0]], [2.5001, 0.5006])
    """
    w = check_weight(w)
    h = check_hessian(h, w.shape[1])
    check_nonnegative(damp, "damp")
    check_positive(dead_value, "dead_value")
    w, h, _, _ = _prepare(w, h, float(damp), float(dead_value))
    return w, h


def inverse_hessian_cholesky(h: ArrayLike) -> np.ndarray:
    """``U``, the upper Cholesky factor of ``H⁻¹`` (``H⁻¹ = UᵀU``), in NumPy float64.

    ``H`` must be positive definite (damp it first, :func:`prepare_hessian`); otherwise a
    ``ValueError`` naming ``h`` says so instead of returning NaNs.

    Args:
      h: ``[d, d]`` symmetric positive definite matrix.

    Returns:
      ``[d, d]`` upper-triangular float64 ``U``.

    Examples:
      >>> import numpy as np
      >>> h = np.array([[4.0, 2.0], [2.0, 3.0]])
      >>> u = inverse_hessian_cholesky(h)
      >>> bool(np.allclose(u.T @ u, np.linalg.inv(h))), bool(np.allclose(np.tril(u, -1), 0))
      (True, True)
    """
    h = check_hessian(h)
    return _inverse_cholesky(h)


def _inverse_cholesky(h: np.ndarray, damp: float | None = None) -> np.ndarray:
    """``U`` with ``H⁻¹ = UᵀU`` from one Cholesky factorisation and one triangular inverse.

    With ``J`` the reversal permutation, ``J H J = L Lᵀ`` gives ``H = R Rᵀ`` with the *upper*
    triangular ``R = J L J``, so ``H⁻¹ = R⁻ᵀ R⁻¹`` and ``U = R⁻¹`` (upper, positive diagonal):
    about ``2d³/3`` flops instead of an explicit inverse and a second factorisation.

    Both LAPACK calls run on one OpenBLAS thread (``jaxlab._src.threads.single_threaded_blas``
    through a cached controller, ``one_blas_thread``): next to XLA's
    own threads on a small CPU, OpenBLAS's workers spin against them, and a 256-wide
    factorisation was measured at 15 ms on two threads and 3 ms on one.
    """
    with one_blas_thread():
        return _inverse_cholesky_one_thread(h, damp)


def _inverse_cholesky_one_thread(h: np.ndarray, damp: float | None) -> np.ndarray:
    remedy = "increase damp" if damp is not None else "damp it (prepare_hessian)"
    after = f" after damping (damp={damp:g})" if damp is not None else ""
    try:
        lower = np.linalg.cholesky(np.ascontiguousarray(h[::-1, ::-1]))  # J H J = L Lᵀ
    except np.linalg.LinAlgError as err:
        raise ValueError(
            f"h is not positive definite{after}: its Cholesky factorisation failed; {remedy}, "
            "or check that h = (2/n) XᵀX is positive semidefinite"
        ) from err
    # U = R⁻¹ = J L⁻¹ J; LAPACK inverts Lᵀ (Fortran-ordered, no copy) into L⁻ᵀ.
    inverse_t, info = scipy.linalg.lapack.dtrtri(lower.T, lower=0)
    if info != 0 or not np.all(np.isfinite(inverse_t)):
        raise ValueError(
            f"h is numerically singular: the inverse's Cholesky factor is not finite; {remedy}"
        )
    return np.triu(inverse_t.T[::-1, ::-1])


def _blocks(matrix: np.ndarray, size: int) -> np.ndarray:
    """The diagonal ``size x size`` blocks of ``matrix`` (``[count, size, size]``)."""
    count = matrix.shape[0] // size
    return np.stack(
        [matrix[i * size : (i + 1) * size, i * size : (i + 1) * size] for i in range(count)]
    )


def _schur_blocks(u: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Per block of ``size`` columns: ``U_cc⁻¹`` and ``S_c = U_cc⁻¹ U_cc⁻ᵀ`` (float64)."""
    with one_blas_thread():  # small LAPACK calls: see _inverse_cholesky
        inverse = np.stack(
            [
                scipy.linalg.lapack.dtrtri(np.ascontiguousarray(b), lower=0)[0]
                for b in _blocks(u, size)
            ]
        )
    inverse = np.triu(inverse)
    return inverse, inverse @ np.transpose(inverse, (0, 2, 1))


def spin_cluster_order(h: ArrayLike, cluster_size: int) -> np.ndarray:
    """SpinCluster: a column order that groups strongly coupled columns into clusters.

    With ``d_j = H_jj``, the normalised coupling ``C = D^{-1/2} H D^{-1/2}`` (``diag C = 0``) and
    energies ``e_j = √d_j``: repeat until every column is used: seed a cluster with the unused
    column of largest ``d_j``, set the potential ``φ = C[seed]``, and grow the cluster to
    ``cluster_size`` columns by taking the unused ``j`` maximising ``|φ_j| e_j`` and updating
    ``φ ← φ + σ C[j]`` with the spin ``σ = −1`` if ``φ_j > 0`` else ``+1``. Clusters are
    concatenated in creation order; ties go to the first index.

    Args:
      h: ``[d, d]`` Hessian.
      cluster_size: columns per cluster, ``>= 1``.

    Returns:
      ``[d]`` int32 permutation (processing position -> original column).

    Examples:
      The note's check 4 (``H_ij = 0.5^|i−j| √(a_i a_j)``, ``a = (1, 3, 2, 6, 4, 5)``):

      >>> import numpy as np
      >>> a = np.array([1.0, 3, 2, 6, 4, 5]); i = np.arange(6)
      >>> h = 0.5 ** np.abs(i[:, None] - i[None, :]) * np.sqrt(np.outer(a, a))
      >>> spin_cluster_order(h, 3).tolist(), spin_cluster_order(h, 2).tolist()
      ([3, 4, 5, 1, 2, 0], [3, 4, 5, 2, 1, 0])

    References:
      Zhang et al., "STLA", ICML 2026 (SpinCluster, from the reference code).
    """
    h = check_hessian(h)
    cluster_size = check_int(cluster_size, "cluster_size", minimum=1)
    return _spin_order(h, cluster_size)


def _spin_order(h: np.ndarray, cluster_size: int) -> np.ndarray:
    d = h.shape[0]
    diag = np.diag(h).copy()
    inv_sqrt = 1.0 / (np.sqrt(np.maximum(diag, 0.0)) + _SPIN_NORM_EPS)
    coupling = h * inv_sqrt[:, None] * inv_sqrt[None, :]
    np.fill_diagonal(coupling, 0.0)
    energy = np.sqrt(np.maximum(diag, 0.0) + _SPIN_ENERGY_EPS)
    used = np.zeros(d, bool)
    order: list[int] = []
    while len(order) < d:
        seed = int(np.argmax(np.where(used, -np.inf, diag)))
        used[seed] = True
        order.append(seed)
        potential = coupling[seed].copy()
        for _ in range(cluster_size - 1):
            if used.all():
                break
            score = np.where(used, -np.inf, np.abs(potential) * energy)
            j = int(np.argmax(score))
            used[j] = True
            order.append(j)
            spin = -1.0 if potential[j] > 0 else 1.0
            potential += spin * coupling[j]
    return np.asarray(order, np.int32)


def column_order(h: ArrayLike, order: str = "none", cluster_size: int = 1) -> np.ndarray:
    """The processing order of the columns: ``"none"``, ``"act"`` or ``"spin"``.

    ``"none"``: natural order; ``"act"``: ``diag H`` descending (stable, GPTQ's act-order);
    ``"spin"``: :func:`spin_cluster_order` with ``cluster_size``.

    Args:
      h: ``[d, d]`` Hessian.
      order: one of :data:`ORDERS`.
      cluster_size: cluster size of the ``"spin"`` order.

    Returns:
      ``[d]`` int32 permutation.

    Examples:
      >>> import numpy as np
      >>> column_order(np.diag([1.0, 3.0, 2.0, 3.0]), "act").tolist()
      [1, 3, 2, 0]
    """
    h = check_hessian(h)
    return _order(h, check_order(order), cluster_size)


def check_order(order: Any) -> str:
    return check_choice(order, "order", ORDERS)


def _order(h: np.ndarray, order: str, cluster_size: int) -> np.ndarray:
    if order == "act":
        return np.argsort(-np.diag(h), kind="stable").astype(np.int32)
    if order == "spin":
        cluster_size = check_int(cluster_size, "cluster_size", minimum=1)
        return _spin_order(h, cluster_size)
    return np.arange(h.shape[0], dtype=np.int32)


def _check_span(start: Any, stop: Any, d: int) -> tuple[int, int]:
    start = check_int(start, "start", minimum=0)
    stop = check_int(stop, "stop", minimum=1, maximum=d)
    if stop <= start:
        raise ValueError(f"stop must exceed start, got start={start}, stop={stop}")
    return start, stop


def schur_complement(h: ArrayLike, start: int, stop: int) -> np.ndarray:
    """``S_c = H_cc − H_cR H_RR⁻¹ H_Rc`` for ``c = [start, stop)``, ``R = [stop, d)`` (float64).

    The columns before ``start`` are already quantized and take no part; this is the defining
    formula, computed directly (compare :func:`schur_complement_metric`, which reads it off the
    Cholesky factor of ``H⁻¹``).

    Args:
      h: ``[d, d]`` positive definite Hessian, columns in processing order.
      start: first column of the cluster.
      stop: one past its last column.

    Returns:
      ``[stop − start, stop − start]`` float64 ``S_c``.

    Examples:
      >>> import numpy as np
      >>> h = np.array([[2.0, 1.0], [1.0, 2.0]])
      >>> schur_complement(h, 0, 1).tolist()             # 2 − 1·(1/2)·1
      [[1.5]]
    """
    h = check_hessian(h)
    start, stop = _check_span(start, stop, h.shape[0])
    c, rest = slice(start, stop), slice(stop, None)
    if stop == h.shape[0]:
        return h[c, c].copy()
    return h[c, c] - h[c, rest] @ np.linalg.solve(h[rest, rest], h[rest, c])


def schur_complement_metric(u: ArrayLike, start: int, stop: int) -> np.ndarray:
    """``S_c = (U_ccᵀ U_cc)⁻¹`` from the upper Cholesky factor ``U`` of ``H⁻¹`` (float64).

    Equal to :func:`schur_complement` of ``H`` (the note's identity): the trailing block of an
    upper Cholesky factor of ``H⁻¹`` factors the inverse of ``H``'s trailing block.

    Args:
      u: ``[d, d]`` upper-triangular factor (:func:`inverse_hessian_cholesky`).
      start: first column of the cluster.
      stop: one past its last column.

    Returns:
      ``[stop − start, stop − start]`` float64 ``S_c``.

    Examples:
      >>> import numpy as np
      >>> h = np.array([[4.0, 2.0, 1.0], [2.0, 3.0, 0.5], [1.0, 0.5, 2.0]])
      >>> u = inverse_hessian_cholesky(h)
      >>> bool(np.allclose(schur_complement_metric(u, 0, 2), schur_complement(h, 0, 2)))
      True
    """
    u = check_array(u, "u", kind="real", ndim=2, host=True).astype(np.float64)
    if u.shape[0] != u.shape[1]:
        raise ValueError(f"u must be square [d, d], got shape {u.shape}")
    start, stop = _check_span(start, stop, u.shape[0])
    block = u[start:stop, start:stop]
    if np.any(np.diag(block) == 0) or not np.all(np.isfinite(block)):
        raise ValueError("u must be an upper Cholesky factor with a nonzero, finite diagonal")
    inv = np.linalg.solve(block, np.eye(stop - start))  # U_cc⁻¹
    return inv @ inv.T


def schur_complement_objective(error: ArrayLike, h: ArrayLike, start: int, stop: int) -> jax.Array:
    """STLA's global loss ``Σ_rows e_c S_c e_cᵀ`` of a cluster's rounding error ``e_c``.

    The output error that remains when the cluster ``c = [start, stop)`` keeps the rounding
    error ``e_c = q_c − w̃_c`` and every later column is re-optimised by least squares (GPTQ's
    compensation): the "lookahead" price of a rounding decision.

    Args:
      error: ``[r, stop − start]`` rounding errors of the cluster's columns.
      h: ``[d, d]`` positive definite Hessian, columns in processing order.
      start: first column of the cluster.
      stop: one past its last column.

    Returns:
      A scalar (float32; float64 under x64).

    Examples:
      >>> import numpy as np
      >>> h = np.array([[2.0, 1.0], [1.0, 2.0]])
      >>> float(schur_complement_objective(np.array([[0.5]]), h, 0, 1))   # 0.25 · 1.5
      0.375
    """
    h = check_hessian(h)
    start, stop = _check_span(start, stop, h.shape[0])
    error = check_array(error, "error", kind="floating", ndim=2)
    if error.shape[1] != stop - start:
        raise ValueError(
            f"error must have {stop - start} columns (stop − start), got shape {error.shape}"
        )
    s = jnp.asarray(schur_complement(h, start, stop), error.dtype)
    return jnp.sum((error @ s) * error)


def layer_output_error(w: ArrayLike, q: ArrayLike, h: ArrayLike) -> jax.Array:
    """The layer objective ``tr(Δ H Δᵀ)``, ``Δ = W − Q``: output error ``(2/n) Σ ‖Δ x_t‖²``.

    Args:
      w: ``[r, d]`` original weights.
      q: ``[r, d]`` quantized weights.
      h: ``[d, d]`` Hessian.

    Returns:
      A scalar in ``w``'s dtype (at least float32).

    Examples:
      >>> import jax.numpy as jnp
      >>> float(layer_output_error(jnp.ones((1, 2)), jnp.zeros((1, 2)), jnp.eye(2)))
      2.0
    """
    w = check_array(w, "w", kind="floating", ndim=2)
    q = check_array(q, "q", kind="floating", ndim=2)
    if q.shape != w.shape:
        raise ValueError(f"q must have the shape of w {w.shape}, got {q.shape}")
    h = check_array(h, "h", kind="real", ndim=2)
    if h.shape != (w.shape[1], w.shape[1]):
        raise ValueError(
            f"h must have shape ({w.shape[1]}, {w.shape[1]}) to match w, got {h.shape}"
        )
    check_weighting_matrix(h, "h")
    dtype = jnp.promote_types(w.dtype, jnp.float32)
    delta = (w - q).astype(dtype)
    return jnp.sum(jnp.matmul(delta, h.astype(dtype), precision="highest") * delta)
