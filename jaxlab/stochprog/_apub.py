"""The Average Percentile Upper Bound (APUB) and the bounds it is compared with.

S. Liu, M. Gao, J. Hu, *Minimizing Upper Confidence Bounds: A Data-Driven Framework for
Stochastic Programming*, ICML 2026 (arXiv 2403.08966).

Data ``f_1..f_N``; bootstrap multiplicities ``V ~ Multinomial(N; 1/N, ..., 1/N)``; bootstrap
mean ``μ* = (1/N) Σ_n V_n f_n``. Efron's percentile bound at level ``τ`` is the ``(1-τ)``-quantile
of ``μ*``; APUB averages it over ``τ ∈ (0, α]``:

    APUB_α = (1/α) ∫_0^α U_τ dτ = min_t { t + (1/α) E*[(μ* - t)_+] },

the upper-tail CVaR at level ``α`` of the bootstrap-mean distribution. ``APUB_1`` is the sample
mean, APUB is non-increasing in ``α``, at least Efron's bound at the same level and translation
equivariant; it tends to the population mean at rate ``O(N^{-1/2})`` and covers it with probability
at least ``1 - α + O(N^{-1/2})``.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from scipy import special, stats

from jaxlab._src import validation
from jaxlab._src.risk import tail_weights

__all__ = [
    "apub",
    "apub_exact",
    "bootstrap_multiplicities",
    "clt_upper_bound",
    "cvar_weights",
    "efron_upper_bound",
]

# Enumeration of the exact bootstrap law visits C(2N-1, N) compositions (92,378 at N = 10).
_EXACT_MAX_SAMPLES = 10


def _check_alpha(alpha: Any, name: str = "alpha") -> float | None:
    # alpha = 1 is allowed: APUB_1 is the sample mean (the SAA end of the family).
    return validation.check_real(alpha, name, minimum=0.0, maximum=1.0, include_minimum=False)


def _check_values(values: Any, name: str = "values", *, host: bool = False) -> jax.Array:
    """A non-empty 1-D real sample, finite where concrete; floating (float64 with ``host``)."""
    array = validation.check_array(values, name, kind="real", ndim=1, host=host)
    if array.shape[0] == 0:
        raise ValueError(f"{name} must hold at least one sample, got an empty array")
    if validation.is_concrete(values):
        finite = np.isfinite(np.asarray(array))
        bad = int(np.sum(~finite))
    else:
        bad = 0
    if bad:
        raise ValueError(f"{name} must be finite, got {bad} non-finite of {array.shape[0]}")
    if host:
        return array.astype(np.float64)
    if not jnp.issubdtype(array.dtype, jnp.floating):
        array = array.astype(jnp.result_type(float))
    return array


def bootstrap_multiplicities(rng_key: jax.Array, num_samples: int, num_resamples: int):
    """Bootstrap multiplicities ``V ∈ ℕ^{M×N}``: each row ~ Multinomial(N; 1/N, ..., 1/N).

    Row ``m`` counts how often each of the ``N`` samples is drawn into resample ``m``, so every
    row sums to ``N``. Draw the matrix once and reuse it for a whole optimization: with a fixed
    ``V`` the bootstrap LP is one deterministic problem.

    Args:
      rng_key: a ``jax.random.key``.
      num_samples: ``N``, the data set's size.
      num_resamples: ``M``, the number of bootstrap resamples.

    Returns:
      An int32 array of shape ``(num_resamples, num_samples)``, the same for a given key whether
      or not float64 (``jax_enable_x64``) is on.

    Examples:
      >>> v = bootstrap_multiplicities(jax.random.key(0), 5, 3)
      >>> v.shape, v.sum(axis=1).tolist()
      ((3, 5), [5, 5, 5])
    """
    validation.check_key(rng_key)
    n = validation.check_positive_int(num_samples, "num_samples")
    m = validation.check_positive_int(num_resamples, "num_resamples")
    # The index dtype is fixed: with the default (int64 under x64, int32 otherwise) the same key
    # gave a different matrix in 69% of entries depending on the x64 flag (issue 40).
    draws = jax.random.randint(rng_key, (m, n), 0, n, dtype=jnp.int32)
    return jax.vmap(lambda row: jnp.bincount(row, length=n))(draws).astype(jnp.int32)


def cvar_weights(values: Any, alpha: Any, probabilities: Any = None) -> jax.Array:
    """Weights of the upper-tail CVaR at level ``alpha``, aligned with ``values``.

    For ``M`` equally likely atoms sorted in decreasing order, the ``⌊αM⌋`` largest get weight
    ``1/(αM)``, the next one ``(αM - ⌊αM⌋)/(αM)`` and the rest 0; so ``Σ_m w_m r_m`` is the CVaR
    and the weights sum to 1. With ``probabilities`` ``p_m`` (an exact discrete law), the atom at
    sorted position ``k`` gets ``clip(α - Σ_{j<k} p_j, 0, p_k)/α``. Ties do not change the CVaR.

    Args:
      values: ``r``, shape ``(M,)``.
      alpha: the tail mass in ``(0, 1]``; ``alpha = 1`` gives the mean's weights.
      probabilities: optional atom probabilities (shape ``(M,)``, summing to 1); uniform if None.

    Returns:
      The weights, shape ``(M,)``, in ``values``' floating dtype.

    Examples:
      >>> cvar_weights(jnp.array([3.0, 1.0, 2.0, 0.0]), 0.375).tolist()
      [0.6666666865348816, 0.0, 0.3333333432674408, 0.0]
    """
    values = _check_values(values)
    _check_alpha(alpha)
    if probabilities is not None:
        probabilities = validation.check_array(probabilities, "probabilities", kind="real", ndim=1)
        validation.check_last_axis(probabilities, values.shape[0], "probabilities", "len(values)")
        validation.check_distribution(probabilities, "probabilities")
        probabilities = probabilities.astype(values.dtype)
    return tail_weights(jnp, values, alpha, probabilities)


def _bootstrap_means(values, rng_key, multiplicities, num_resamples):
    n = values.shape[0]
    if multiplicities is None:
        if rng_key is None:
            raise TypeError(
                "pass rng_key (to draw num_resamples bootstrap resamples) or multiplicities "
                "(a fixed (M, N) bootstrap matrix)"
            )
        multiplicities = bootstrap_multiplicities(rng_key, n, num_resamples)
    elif rng_key is not None:
        raise TypeError("pass rng_key or multiplicities, not both")
    v = validation.check_array(multiplicities, "multiplicities", kind="real", ndim=2)
    validation.check_last_axis(v, n, "multiplicities", "len(values)")
    validation.check_bootstrap_counts(v, n, "multiplicities")
    return v.astype(values.dtype) @ values / n


def apub(
    values: Any,
    alpha: Any,
    *,
    rng_key: jax.Array | None = None,
    multiplicities: Any = None,
    num_resamples: int = 1000,
) -> jax.Array:
    """APUB_α of the sample mean of ``values``, by Monte-Carlo bootstrap.

    ``APUB_α = Σ_m w_m μ*_m`` with ``μ*_m = (1/N) Σ_n V_mn f_n`` and ``w`` the exact upper-tail
    CVaR weights of :func:`cvar_weights` (including the fractional atom when ``αM`` is not an
    integer). An upper confidence bound on the population mean that is also a coherent risk
    measure of the sample mean.

    Args:
      values: ``f_1..f_N``, shape ``(N,)``, finite.
      alpha: level in ``(0, 1]`` (``1`` gives the sample mean up to bootstrap noise; with the
        exact law, exactly).
      rng_key: key to draw ``num_resamples`` resamples; or pass ``multiplicities``.
      multiplicities: a fixed bootstrap matrix ``V`` of shape ``(M, N)``
        (:func:`bootstrap_multiplicities`).
      num_resamples: ``M`` when drawing.

    Returns:
      A scalar.

    Examples:
      >>> x = jnp.array([1.0, 2.0, 3.0, 10.0])
      >>> bound = apub(x, 0.1, rng_key=jax.random.key(0), num_resamples=4000)
      >>> bool(bound > x.mean())
      True
    """
    values = _check_values(values)
    _check_alpha(alpha)
    validation.check_positive_int(num_resamples, "num_resamples")
    means = _bootstrap_means(values, rng_key, multiplicities, num_resamples)
    return jnp.sum(cvar_weights(means, alpha) * means)


def efron_upper_bound(
    values: Any,
    tau: Any,
    *,
    rng_key: jax.Array | None = None,
    multiplicities: Any = None,
    num_resamples: int = 1000,
) -> jax.Array:
    """Efron's percentile upper bound ``U_τ = inf{t : P*(μ* <= t) >= 1 - τ}``.

    The ``⌈(1-τ)M⌉``-th smallest of the ``M`` bootstrap means (the empirical ``(1-τ)``-quantile).

    Examples:
      >>> x = jnp.array([1.0, 2.0, 3.0])
      >>> v = 3 * jnp.eye(3, dtype=int)  # three resamples: all 1s, all 2s, all 3s
      >>> float(efron_upper_bound(x, 0.5, multiplicities=v))
      2.0
    """
    values = _check_values(values)
    tau = validation.check_real(tau, "tau", minimum=0.0, maximum=1.0, include_minimum=False)
    validation.check_positive_int(num_resamples, "num_resamples")
    means = jnp.sort(_bootstrap_means(values, rng_key, multiplicities, num_resamples))
    m = means.shape[0]
    index = min(max(math.ceil((1.0 - tau) * m - 1e-9), 1), m) - 1
    return means[index]


def clt_upper_bound(values: Any, tau: Any) -> jax.Array:
    """The normal-approximation bound ``mean + z_{1-τ} s / √N`` (``s`` the sample deviation).

    Examples:
      >>> round(float(clt_upper_bound(jnp.array([1.0, 2.0, 3.0]), 0.5)), 6)
      2.0
    """
    values = _check_values(values)
    tau = validation.check_real(
        tau, "tau", minimum=0.0, maximum=1.0, include_minimum=False, include_maximum=False
    )
    n = values.shape[0]
    if n < 2:
        raise ValueError(f"values must hold at least 2 samples for a deviation, got {n}")
    z = float(stats.norm.ppf(1.0 - tau))
    return values.mean() + z * values.std(ddof=1) / math.sqrt(n)


def _compositions(n: int) -> np.ndarray:
    """All vectors of ``n`` non-negative integers summing to ``n`` (stars and bars)."""
    rows = []
    # Choose the n-1 bar positions among 2n-1 slots.
    for bars in itertools.combinations(range(2 * n - 1), n - 1):
        edges = (-1, *bars, 2 * n - 1)
        rows.append([edges[i + 1] - edges[i] - 1 for i in range(n)])
    return np.asarray(rows, dtype=np.int64)


def apub_exact(values: Any, alpha: Any) -> float:
    """APUB_α under the exact bootstrap law, by enumeration (``N <= 10``), in NumPy float64.

    Enumerates the ``C(2N-1, N)`` compositions ``v`` of ``N`` with probability
    ``N! / (Π_n v_n! · N^N)`` and atom ``v·f/N``, then takes the exact weighted upper-tail CVaR.

    Args:
      values: ``f_1..f_N`` with ``1 <= N <= 10``.
      alpha: level in ``(0, 1]``.

    Returns:
      A Python float.

    Raises:
      ValueError: for more than 10 samples (use :func:`apub`).

    Examples:
      >>> round(apub_exact([1.0, 2.0, 3.0], 0.1), 6)
      2.790123
    """
    f = _check_values(values, host=True)
    alpha = _check_alpha(alpha)
    n = f.shape[0]
    if n > _EXACT_MAX_SAMPLES:
        raise ValueError(
            f"values: apub_exact enumerates C(2N-1, N) resamples and allows N <= "
            f"{_EXACT_MAX_SAMPLES}, got N = {n}; use apub with a bootstrap matrix"
        )
    v = _compositions(n)
    log_p = special.gammaln(n + 1) - special.gammaln(v + 1).sum(axis=1) - n * math.log(n)
    atoms = v @ f / n
    return float(tail_weights(np, atoms, alpha, np.exp(log_p)) @ atoms)
