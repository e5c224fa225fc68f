"""Uniform integer quantizers: codes, dequantization, min-max and Hessian-weighted grid search.

A row ``w ∈ ℝ^g`` (one output channel, or one group of its input columns) is quantized to ``b``
bits, ``q_max = 2^b − 1``, with a scale ``s > 0`` and an integer zero point ``z``::

    code = clip(round(w / s) + z, 0, q_max)        (round half to even)
    Q(w; s, z) = s · (code − z)

* **asymmetric** (default): min-max ``w_max = max(max_j w_j, 0)``, ``w_min = min(min_j w_j, 0)``
  (both zero: ``±1``), ``s = (w_max − w_min)/q_max``, ``z = round(−w_min/s)``;
* **symmetric**: ``m = max_j |w_j|`` (zero: 1), ``s = 2m/q_max``, ``z = (q_max + 1)/2``.

:func:`search_quant_params` shrinks the min-max range by ``r_k = (100 − k)/100``, ``k = 0..99``,
tries both integer zeros ``⌊z₀⌋, ⌈z₀⌉`` around ``z₀ = −w_min q_max/(w_max − w_min)`` (the same for
every ratio), and keeps per row the first strict minimum of ``e M eᵀ`` with ``e = Q(w) − w``: the
output error of the rounding under a metric ``M`` (a Hessian block or a Schur complement).

Scales and zeros carry the leading shape of ``w`` (one per row); the last axis is quantized.

References:
  Frantar, Ashkboos, Hoefler, Alistarh, "GPTQ: Accurate Post-Training Quantization for
  Generative Pre-trained Transformers", ICLR 2023 (arXiv 2210.17323), the min-max quantizer;
  Zhang et al., "STLA: Spatiotemporal Lookahead Alignment for Post-Training Quantization",
  ICML 2026 (the grid search).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from jaxlab._src.validation import (
    check_array,
    check_bool,
    check_finite_array,
    check_int,
    check_weighting_matrix,
    is_concrete,
)

__all__ = [
    "dequantize",
    "minmax_params",
    "quantize",
    "quantize_uniform",
    "search_quant_params",
]

# The note's grid: 100 shrink ratios (100 - k)/100, k = 0..99, exact (the reference builds them
# with a float32 arange, which can move a tie in rare cases).
NUM_RATIOS = 100


def check_bits(bits: Any) -> int:
    """Bit width: a static int in ``[1, 8]`` (codes are stored as uint8)."""
    return check_int(bits, "bits", minimum=1, maximum=8)


def _check_params(
    w: jax.Array, scale: Any, zero: Any, w_name: str = "w", bits: int | None = None
) -> tuple[jax.Array, jax.Array]:
    scale = check_array(scale, "scale", kind="real")
    zero = check_array(zero, "zero", kind="real")
    lead = w.shape[:-1]
    for name, value in (("scale", scale), ("zero", zero)):
        if value.shape != lead:
            raise ValueError(
                f"{name} must have the leading shape of {w_name} {lead} (one per row), got "
                f"{value.shape}"
            )
    # Concrete values on the host (under jit a closed-over array is traced and left unchecked):
    # a zero or negative scale divides or flips every code, a zero point outside the code range
    # [0, 2^b - 1] clips a whole side of the row to one code.
    if is_concrete(scale):
        s = np.asarray(scale, np.float64)
        if not np.all(np.isfinite(s) & (s > 0)):
            bad = int(np.sum(~(np.isfinite(s) & (s > 0))))
            raise ValueError(f"scale must be finite and > 0: {bad} entries are not")
    if is_concrete(zero):
        z = np.asarray(zero, np.float64)
        check_finite_array(z, "zero")
        if bits is not None and z.size and (z.min() < 0 or z.max() > 2**bits - 1):
            raise ValueError(
                f"zero must lie in the code range [0, 2^bits - 1 = {2**bits - 1}], got values in "
                f"[{z.min()}, {z.max()}]"
            )
    return scale.astype(w.dtype), zero.astype(w.dtype)


def _codes(w, scale, zero, qmax):
    return jnp.clip(jnp.round(w / scale[..., None]) + zero[..., None], 0.0, qmax)


def _values(codes, scale, zero):
    return scale[..., None] * (codes - zero[..., None])


def _minmax(w, qmax, symmetric: bool):
    """Per-row (scale, zero) of the min-max quantizer (traceable; ``qmax`` may be traced)."""
    w_max = jnp.maximum(jnp.max(w, axis=-1), 0.0)
    w_min = jnp.minimum(jnp.min(w, axis=-1), 0.0)
    if symmetric:
        m = jnp.maximum(-w_min, w_max)
        m = jnp.where(m == 0, 1.0, m)
        return 2.0 * m / qmax, jnp.full_like(m, 0.0) + (qmax + 1.0) / 2.0
    both_zero = (w_max == 0) & (w_min == 0)
    w_max = jnp.where(both_zero, 1.0, w_max)
    w_min = jnp.where(both_zero, -1.0, w_min)
    scale = (w_max - w_min) / qmax
    return scale, jnp.round(-w_min / scale)


def _grid_search(w, metric, qmax, symmetric: bool, num_ratios: int = NUM_RATIOS):
    """Per-row (scale, zero) minimising ``e M eᵀ`` over the note's grid (traceable).

    ``w`` is ``[r, g]`` and ``metric`` ``[g, g]``; candidates are ordered (largest ratio first,
    floor before ceil), so ``argmin`` returns the first strict minimum.
    """
    w_max = jnp.maximum(jnp.max(w, axis=-1), 0.0)
    w_min = jnp.minimum(jnp.min(w, axis=-1), 0.0)
    ratios = (num_ratios - jnp.arange(num_ratios, dtype=w.dtype)) / num_ratios
    if symmetric:
        m = jnp.maximum(-w_min, w_max)
        m = jnp.where(m == 0, 1.0, m)
        scales = ratios[:, None] * (2.0 * m / qmax)[None, :]  # [K, r]
        z = jnp.broadcast_to((qmax + 1.0) / 2.0, m.shape).astype(w.dtype)
        zeros = jnp.stack([z, z])  # [2, r]
    else:
        both_zero = (w_max == 0) & (w_min == 0)
        w_max = jnp.where(both_zero, 1.0, w_max)
        w_min = jnp.where(both_zero, -1.0, w_min)
        scales = ratios[:, None] * ((w_max - w_min) / qmax)[None, :]
        z0 = -w_min * qmax / (w_max - w_min)  # = -r w_min / s for every ratio r
        zeros = jnp.stack([jnp.floor(z0), jnp.ceil(z0)])
    # Candidates [K, 2, r]: ratio-major, floor before ceil.
    s = jnp.broadcast_to(scales[:, None, :], (num_ratios, 2, w.shape[0]))
    z = jnp.broadcast_to(zeros[None, :, :], (num_ratios, 2, w.shape[0]))
    s, z = jnp.reshape(s, (-1, w.shape[0])), jnp.reshape(z, (-1, w.shape[0]))

    def score(scale, zero):
        e = _values(_codes(w, scale, zero, qmax), scale, zero) - w
        return jnp.sum((e @ metric) * e, axis=-1)  # [r]

    scores = jax.vmap(score)(s, z)  # [2K, r]: one batched product with M, not 2K small ones
    best = jnp.argmin(scores, axis=0)
    rows = jnp.arange(w.shape[0])
    return s[best, rows], z[best, rows]


def quantize(
    w: ArrayLike,
    scale: ArrayLike,
    zero: ArrayLike,
    *,
    bits: int,
    return_nonfinite: bool = False,
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """Integer codes ``clip(round(w/s) + z, 0, 2^b − 1)`` of the last axis of ``w`` (uint8).

    Args:
      w: ``[..., g]`` floating weights.
      scale: ``[...]`` per-row scales ``s > 0``.
      zero: ``[...]`` per-row integer zero points.
      bits: ``b`` in ``[1, 8]``.
      return_nonfinite: also return the int32 count of weights that have no code (the way to
        see them under ``jit``, where the checks below cannot run).

    Returns:
      uint8 codes of ``w``'s shape, in ``[0, 2^b − 1]``; with ``return_nonfinite``, the pair
      ``(codes, nonfinite)``. A weight with no code (``w`` NaN/inf, or ``w/s + z`` NaN/inf
      from a zero or non-finite scale) gets code 0 and is counted in ``nonfinite``.

    Raises:
      ValueError: on concrete input, ``w`` holds a NaN or infinite entry (it has no integer
        code: a cast would make a NaN code 0 and clip an inf to the end of the grid), or a
        ``scale`` is not finite and ``> 0``, or a ``zero`` is not finite. Traced arrays are not
        checked: ask for ``return_nonfinite`` there.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> w = jnp.array([[0.31, -0.72, 0.15, 0.98]])
      >>> scale, zero = minmax_params(w, bits=2)
      >>> quantize(w, scale, zero, bits=2).tolist()
      [[2, 0, 1, 3]]
      >>> coded = jax.jit(lambda w: quantize(w, scale, zero, bits=2, return_nonfinite=True))
      >>> codes, nonfinite = coded(w.at[0, 1].set(jnp.nan))
      >>> codes.tolist(), int(nonfinite)
      ([[2, 0, 1, 3]], 1)
    """
    bits = check_bits(bits)
    return_nonfinite = check_bool(return_nonfinite, "return_nonfinite")
    w = check_array(w, "w", kind="floating")
    if w.ndim < 1:
        raise ValueError(f"w must have at least one axis, got shape {w.shape}")
    # Concrete values are checked on the host: under jit a JAX op on a closed-over array is
    # traced, and a traced value cannot be checked.
    check_finite_array(w, "w", reason="a NaN/inf weight has no integer code")
    for name, value in (("scale", scale), ("zero", zero)):
        if is_concrete(value):  # the kind first, then the values (on the host: see above)
            check_finite_array(check_array(value, name, kind="real", host=True), name)
    if is_concrete(scale) and not np.all(np.asarray(scale) > 0):
        bad = int(np.sum(~(np.asarray(scale) > 0)))
        raise ValueError(f"scale must be finite and > 0: {bad} entries are not (one per row of w)")
    scale, zero = _check_params(w, scale, zero, bits=bits)
    unclipped = jnp.round(w / scale[..., None]) + zero[..., None]
    coded = jnp.isfinite(unclipped)  # False exactly where the weight has no code
    codes = jnp.where(coded, jnp.clip(unclipped, 0.0, float(2**bits - 1)), 0.0)
    codes = codes.astype(jnp.uint8)
    if return_nonfinite:
        return codes, jnp.sum(~coded, dtype=jnp.int32)
    return codes


def dequantize(codes: ArrayLike, scale: ArrayLike, zero: ArrayLike) -> jax.Array:
    """Weights ``s · (code − z)`` of integer codes (float32, or float64 scales' dtype).

    Args:
      codes: ``[..., g]`` integer codes.
      scale: ``[...]`` per-row scales.
      zero: ``[...]`` per-row zero points.

    Returns:
      The dequantized weights, ``codes``' shape.

    Examples:
      >>> import jax.numpy as jnp
      >>> w = jnp.array([[0.31, -0.72, 0.15, 0.98]])
      >>> scale, zero = minmax_params(w, bits=2)
      >>> q = dequantize(quantize(w, scale, zero, bits=2), scale, zero)
      >>> bool(jnp.allclose(q, quantize_uniform(w, scale, zero, bits=2)))
      True
    """
    codes = check_array(codes, "codes", kind="integer")
    if codes.ndim < 1:
        raise ValueError(f"codes must have at least one axis, got shape {codes.shape}")
    if is_concrete(codes) and codes.size and int(np.min(np.asarray(codes))) < 0:
        raise ValueError(f"codes must be >= 0, got a minimum of {int(np.min(np.asarray(codes)))}")
    scale = check_array(scale, "scale", kind="floating")
    dtype = jnp.promote_types(scale.dtype, jnp.float32)
    scale, zero = _check_params(codes.astype(dtype), scale, zero, "codes")
    return _values(codes.astype(dtype), scale, zero)


def quantize_uniform(w: ArrayLike, scale: ArrayLike, zero: ArrayLike, *, bits: int) -> jax.Array:
    """Fake quantization ``Q(w; s, z) = s · (clip(round(w/s) + z, 0, 2^b − 1) − z)``.

    The round trip :func:`dequantize` ∘ :func:`quantize`, in ``w``'s dtype.

    Args:
      w: ``[..., g]`` floating weights.
      scale: ``[...]`` per-row scales.
      zero: ``[...]`` per-row integer zero points.
      bits: ``b`` in ``[1, 8]``.

    Returns:
      The quantized weights, ``w``'s shape and dtype.

    Examples:
      >>> import jax.numpy as jnp, numpy as np
      >>> w = jnp.array([[0.31, -0.72, 0.15, 0.98]])
      >>> scale, zero = minmax_params(w, bits=2)          # s = 1.7/3, z = round(0.72/s) = 1
      >>> np.round(np.asarray(quantize_uniform(w, scale, zero, bits=2), np.float64), 4).tolist()
      [[0.5667, -0.5667, 0.0, 1.1333]]
    """
    bits = check_bits(bits)
    w = check_array(w, "w", kind="floating")
    if w.ndim < 1:
        raise ValueError(f"w must have at least one axis, got shape {w.shape}")
    scale, zero = _check_params(w, scale, zero, bits=bits)
    qmax = float(2**bits - 1)
    return _values(_codes(w, scale, zero, qmax), scale, zero)


def minmax_params(
    w: ArrayLike, *, bits: int, symmetric: bool = False
) -> tuple[jax.Array, jax.Array]:
    """Per-row min-max scale and zero point (RTN's and GPTQ's quantizer).

    Asymmetric: ``s = (w_max − w_min)/q_max``, ``z = round(−w_min/s)`` with the range widened to
    contain 0 (an all-zero row gets ``[−1, 1]``); symmetric: ``s = 2 max|w|/q_max``,
    ``z = (q_max + 1)/2``.

    Args:
      w: ``[..., g]`` floating weights (each row of the last axis gets its own parameters).
      bits: ``b`` in ``[1, 8]``.
      symmetric: the symmetric grid.

    Returns:
      ``(scale, zero)``, each of shape ``w.shape[:-1]``.

    Examples:
      >>> import jax.numpy as jnp, numpy as np
      >>> w = jnp.array([[0.31, -0.72, 0.15, 0.98, -0.44, 0.57],
      ...                [-0.26, 0.83, -0.91, 0.12, 0.64, -0.05]])
      >>> scale, zero = minmax_params(w, bits=2)          # the note's check 2
      >>> np.round(np.asarray(scale, np.float64), 6).tolist(), zero.tolist()
      ([0.566667, 0.58], [1.0, 2.0])
    """
    bits = check_bits(bits)
    symmetric = check_bool(symmetric, "symmetric")
    w = check_array(w, "w", kind="floating")
    if w.ndim < 1:
        raise ValueError(f"w must have at least one axis, got shape {w.shape}")
    return _minmax(w, float(2**bits - 1), symmetric)


def search_quant_params(
    w: ArrayLike,
    metric: ArrayLike,
    *,
    bits: int,
    num_ratios: int = NUM_RATIOS,
    symmetric: bool = False,
) -> tuple[jax.Array, jax.Array]:
    """Per-row (scale, zero) minimising the weighted rounding error ``e M eᵀ`` on a grid.

    For ``r_k = (num_ratios − k)/num_ratios``, ``k = 0..num_ratios−1``, the candidate scale is
    ``s = r_k (w_max − w_min)/q_max`` and the zero ``⌊z₀⌋`` or ``⌈z₀⌉``, ``z₀ = −w_min q_max /
    (w_max − w_min)`` (independent of ``r_k``); each candidate is scored per row by
    ``e M eᵀ``, ``e = Q(w; s, z) − w``, and the first strict minimum is kept (largest ratio
    first, floor before ceil). Symmetric: ``s = r_k · 2 max|w|/q_max`` with the fixed zero.

    Args:
      w: ``[r, g]`` floating weights.
      metric: ``[g, g]`` symmetric PSD weighting (``H_gg``, or a Schur complement ``S_g``).
      bits: ``b`` in ``[1, 8]``.
      num_ratios: grid points (100 in the note).
      symmetric: the symmetric grid.

    Returns:
      ``(scale, zero)`` of shape ``[r]``.

    Examples:
      The note's check 5 (local metric ``H_ij = 0.5^|i−j| √(a_i a_j)``, 2 bits):

      >>> import jax.numpy as jnp, numpy as np
      >>> a = jnp.array([1.0, 3, 2, 6, 4, 5])
      >>> i = jnp.arange(6)
      >>> h = 0.5 ** jnp.abs(i[:, None] - i[None, :]) * jnp.sqrt(a[:, None] * a[None, :])
      >>> w = jnp.array([[0.31, -0.72, 0.15, 0.98, -0.44, 0.57],
      ...                [-0.26, 0.83, -0.91, 0.12, 0.64, -0.05]])
      >>> scale, zero = search_quant_params(w, h, bits=2)
      >>> np.round(np.asarray(scale, np.float64), 3).tolist(), zero.tolist()  # r = 0.93, 1
      ([0.527, 0.58], [1.0, 1.0])

    References:
      Zhang et al., "STLA: Spatiotemporal Lookahead Alignment for Post-Training Quantization",
      ICML 2026 (the reference code's per-group grid search).
    """
    bits = check_bits(bits)
    symmetric = check_bool(symmetric, "symmetric")
    num_ratios = check_int(num_ratios, "num_ratios", minimum=1)
    w = check_array(w, "w", kind="floating", ndim=2)
    metric = check_array(metric, "metric", kind="real", ndim=2)
    g = w.shape[1]
    if metric.shape != (g, g):
        raise ValueError(f"metric must have shape ({g}, {g}) to match w {w.shape}")
    check_weighting_matrix(metric, "metric")
    return _grid_search_jit(w, metric.astype(w.dtype), float(2**bits - 1), symmetric, num_ratios)


_grid_search_jit = jax.jit(_grid_search, static_argnums=(3, 4))
