"""Quantization problem instances: synthetic layers with correlated inputs and the note's checks.

* :func:`correlated_layer`: a random layer whose inputs are strongly correlated (a low-rank
  signal plus noise, each feature rescaled), the regime where compensating rounding errors
  (GPTQ) and pricing the compensation (STLA) matter most.
* :func:`reference_instance`: the fixed 2 × 6 instances of the STLA note with values re-derived
  in float64 (Schur identity, post-compensation loss, the global < local < GPTQ < RTN chain).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab._src.validation import check_int, check_key, check_nonnegative, check_positive

__all__ = ["LayerProblem", "ReferenceInstance", "correlated_layer", "reference_instance"]


class LayerProblem(NamedTuple):
    """A layer to quantize: weights, calibration inputs and their Hessian.

    Attributes:
      weight: ``[r, d]`` weights.
      inputs: ``[n, d]`` calibration inputs ``X``.
      hessian: ``[d, d]`` ``H = (2/n) XᵀX`` (undamped).

    Examples:
      >>> import jax
      >>> problem = correlated_layer(jax.random.key(0), rows=4, cols=8, num_tokens=32, rank=2)
      >>> problem.weight.shape, problem.inputs.shape, problem.hessian.shape
      ((4, 8), (32, 8), (8, 8))
    """

    weight: jax.Array
    inputs: jax.Array
    hessian: jax.Array


def correlated_layer(
    rng_key: jax.Array,
    *,
    rows: int = 64,
    cols: int = 128,
    num_tokens: int = 2048,
    rank: int = 16,
    noise: float = 0.5,
    feature_log_std: float = 0.75,
    weight_std: float = 0.5,
) -> LayerProblem:
    """A random layer with strongly correlated inputs (the STLA note's synthetic layer).

    ``x = (A z + noise · ε) ⊙ exp(f)`` with ``A ∈ ℝ^{d×rank}``, ``z, ε`` standard normal per token
    and one fixed ``f_j ~ N(0, feature_log_std²)`` per feature; ``W ~ N(0, weight_std²)``;
    ``H = (2/n) XᵀX``.

    Args:
      rng_key: a ``jax.random`` key (same key, same layer).
      rows: ``r``.
      cols: ``d``.
      num_tokens: ``n``.
      rank: rank of the shared signal.
      noise: the noise scale.
      feature_log_std: the spread of per-feature scales (log-normal).
      weight_std: the weights' standard deviation.

    Returns:
      A :class:`LayerProblem` (float32).

    Examples:
      >>> import jax, numpy as np
      >>> p = correlated_layer(jax.random.key(0))
      >>> corr = np.corrcoef(np.asarray(p.inputs).T)
      >>> bool(np.mean(np.abs(corr[np.triu_indices(128, 1)])) > 0.2)   # strongly correlated
      True
    """
    check_key(rng_key)
    rows = check_int(rows, "rows", minimum=1)
    cols = check_int(cols, "cols", minimum=1)
    num_tokens = check_int(num_tokens, "num_tokens", minimum=1)
    rank = check_int(rank, "rank", minimum=1)
    noise = check_nonnegative(noise, "noise")
    feature_log_std = check_nonnegative(feature_log_std, "feature_log_std")
    weight_std = check_positive(weight_std, "weight_std")
    k_a, k_z, k_n, k_f, k_w = jax.random.split(rng_key, 5)
    mixing = jax.random.normal(k_a, (cols, rank))
    signal = jax.random.normal(k_z, (num_tokens, rank)) @ mixing.T
    x = signal + noise * jax.random.normal(k_n, (num_tokens, cols))
    x = x * jnp.exp(feature_log_std * jax.random.normal(k_f, (cols,)))[None, :]
    w = weight_std * jax.random.normal(k_w, (rows, cols))
    h = (2.0 / num_tokens) * jnp.matmul(x.T, x, precision=jax.lax.Precision.HIGHEST)
    return LayerProblem(w, x, h)


class ReferenceInstance(NamedTuple):
    """One of the note's fixed check instances (float64 NumPy).

    Attributes:
      weight: ``[2, 6]`` weights.
      hessian: ``[6, 6]`` ``H_ij = ρ^|i−j| √(a_i a_j)``, ``a = (1, 3, 2, 6, 4, 5)``.
      bits: 2.
      scale: ``[2]`` min-max scales of the weights.
      zero: ``[2]`` min-max zero points.
      cluster_size: 3.
      values: the note's reference values (layer errors) for this instance.

    Examples:
      >>> reference_instance(3).values["gptq"]
      1.472654
    """

    weight: np.ndarray
    hessian: np.ndarray
    bits: int
    scale: np.ndarray
    zero: np.ndarray
    cluster_size: int
    values: dict


_A = np.array([1.0, 3.0, 2.0, 6.0, 4.0, 5.0])
_CHECKS = {
    # Checks 1-2 share ρ = 0.5 and this W; check 3 uses ρ = 0.8 and its own W.
    2: (
        0.5,
        [[0.31, -0.72, 0.15, 0.98, -0.44, 0.57], [-0.26, 0.83, -0.91, 0.12, 0.64, -0.05]],
        {
            "rtn": 0.930921,
            "gptq": 0.507787,
            "cluster0_compensated": 0.476834,
            "cluster0_local": 0.540663,
        },
    ),
    3: (
        0.8,
        [[0.27, -0.46, -0.92, -0.97, 0.63, 0.83], [0.21, 0.46, 0.09, 0.87, 0.63, -0.99]],
        {"rtn": 4.139823, "gptq": 1.472654, "local": 1.069729, "global": 0.749994},
    ),
}
_CHECKS[1] = (
    _CHECKS[2][0],
    _CHECKS[2][1],
    {"diag_u": [1.154701, 0.666667, 0.816497, 0.471405, 0.577350, 0.447214]},
)


def reference_instance(check: int) -> ReferenceInstance:
    """The STLA note's reference check ``check`` (1, 2 or 3) as a fixed instance.

    Check 1 (Schur identity, ``ρ = 0.5``), check 2 (post-compensation loss of the first cluster,
    ``ρ = 0.5``) and check 3 (global < local < GPTQ < RTN, ``ρ = 0.8``; exhaustive rounding
    per cluster stands in for AdaRound) all use 2 bits, min-max parameters of ``W``, natural
    order, clusters of 3 and no damping. ``values`` holds the note's numbers.

    Args:
      check: 1, 2 or 3.

    Returns:
      A :class:`ReferenceInstance`.

    Examples:
      >>> inst = reference_instance(2)
      >>> inst.scale.round(6).tolist(), inst.zero.tolist()
      ([0.566667, 0.58], [1.0, 2.0])
    """
    check = check_int(check, "check", minimum=1, maximum=3)
    rho, weight, values = _CHECKS[check]
    i = np.arange(6)
    hessian = rho ** np.abs(i[:, None] - i[None, :]) * np.sqrt(np.outer(_A, _A))
    weight = np.asarray(weight, np.float64)
    # Min-max parameters in float64 (the note's rule: range widened to contain 0).
    w_max = np.maximum(weight.max(axis=1), 0.0)
    w_min = np.minimum(weight.min(axis=1), 0.0)
    scale = (w_max - w_min) / 3.0
    zero = np.round(-w_min / scale)
    return ReferenceInstance(weight, hessian, 2, scale, zero, 3, dict(values))
