"""Small statistics the experiments share: smoothed curves, first hitting steps, t-intervals,
crossed-bootstrap intervals.

Host-side NumPy/SciPy on measured numbers (loss curves, per-seed values), never traced.
"""

from __future__ import annotations

import math

import jax
import numpy as np
import scipy.stats

from jaxlab._src.validation import check_in_range, check_positive_int

__all__ = ["crossed_bootstrap_interval", "steps_to_reach", "t_interval", "trailing_mean"]


def trailing_mean(values, window: int) -> np.ndarray:
    """``s_t = mean(values[max(0, t − w + 1) : t + 1])``: the smoothed loss curve.

    Examples:
      >>> trailing_mean([4.0, 2.0, 0.0, 2.0], 2).tolist()
      [4.0, 3.0, 1.0, 1.0]
    """
    window = check_positive_int(window, "window")
    values = np.asarray(values, np.float64)
    sums = np.cumsum(np.concatenate([[0.0], values]))
    idx = np.arange(values.size)
    low = np.maximum(0, idx - window + 1)
    return (sums[idx + 1] - sums[low]) / (idx + 1 - low)


def steps_to_reach(curve, target: float) -> int | None:
    """The first (1-based) step at which ``curve <= target``, or None if never.

    Examples:
      >>> steps_to_reach([3.0, 2.5, 1.9, 2.1], 2.0), steps_to_reach([3.0], 2.0)
      (3, None)
    """
    hits = np.flatnonzero(np.asarray(curve) <= target)
    return int(hits[0]) + 1 if hits.size else None


def t_interval(values, confidence: float) -> tuple[float, float, float]:
    """Mean and two-sided Student-t ``confidence`` interval of the mean (infinite with one value).

    Examples:
      >>> mean, low, high = t_interval([1.0, 2.0, 3.0], 0.95)
      >>> mean, round(low, 4), round(high, 4)
      (2.0, -0.4841, 4.4841)
    """
    confidence = check_in_range(confidence, "confidence", 0.0, 1.0)
    values = np.asarray(values, np.float64)
    mean = float(np.mean(values))
    if values.size < 2:
        return mean, -math.inf, math.inf
    half = scipy.stats.t.ppf(0.5 + confidence / 2, values.size - 1) * np.std(values, ddof=1)
    half /= math.sqrt(values.size)
    return mean, float(mean - half), float(mean + half)


def crossed_bootstrap_interval(
    table, *, rng_key, resamples: int, confidence: float
) -> tuple[float, float, float]:
    """Mean and crossed-bootstrap percentile interval of a ``[rows, cols]`` table's mean.

    Each resample draws rows and columns independently with replacement (two crossed sources of
    sampling variation, e.g. calibration seeds and held-out blocks) and averages the table over
    the drawn rows and columns; the interval is the two-sided ``confidence`` percentile range of
    those means. The NumPy generator is seeded from ``rng_key``'s data, so a result is
    reproducible from the key.

    Examples:
      >>> import jax
      >>> table = [[0.0, 1.0], [2.0, 3.0]]
      >>> mean, low, high = crossed_bootstrap_interval(
      ...     table, rng_key=jax.random.key(0), resamples=200, confidence=0.9)
      >>> mean, 0.0 <= low <= mean <= high <= 3.0
      (1.5, True)
    """
    resamples = check_positive_int(resamples, "resamples")
    confidence = check_in_range(confidence, "confidence", 0.0, 1.0)
    d = np.asarray(table, np.float64)
    if d.ndim != 2 or 0 in d.shape:
        raise ValueError(f"table must be a non-empty [rows, cols] array, got shape {d.shape}")
    rng = np.random.default_rng(np.asarray(jax.random.key_data(rng_key)).ravel().tolist())
    rows = rng.integers(0, d.shape[0], (resamples, d.shape[0]))
    cols = rng.integers(0, d.shape[1], (resamples, d.shape[1]))
    means = np.array([d[np.ix_(r, c)].mean() for r, c in zip(rows, cols, strict=True)])
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return float(d.mean()), float(low), float(high)
