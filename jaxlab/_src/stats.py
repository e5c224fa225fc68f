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

__all__ = [
    "compare_group_medians",
    "crossed_bootstrap_interval",
    "finite_or_inf",
    "steps_saving",
    "steps_to_reach",
    "t_interval",
    "trailing_mean",
]


def finite_or_inf(values) -> np.ndarray:
    """Diverged runs (NaN or ±inf) count as +inf: worse than any finite value (float64).

    Examples:
      >>> finite_or_inf([1.0, float("nan"), -float("inf")]).tolist()
      [1.0, inf, inf]
    """
    values = np.asarray(values, np.float64)
    return np.where(np.isfinite(values), values, np.inf)


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


def compare_group_medians(
    finals: dict, smaller, larger, resamples: np.ndarray, confidence: float
) -> dict:
    """Is ``min_a median(finals[a]) < min_b median(finals[b])`` (a in smaller, b in larger)?

    Decided by a paired bootstrap over seeds: ``resamples`` ``(B, seeds)`` are seed indices
    shared by every entry of ``finals`` (name -> per-seed values). The comparison ``holds`` when
    it holds in at least ``1 − (1 − confidence)/2`` of the resamples, is ``contradicted`` when it
    holds in at most ``(1 − confidence)/2`` (a two-sided interval that excludes equality), and is
    ``undecided`` otherwise.

    Examples:
      >>> import numpy as np
      >>> finals = {"a": np.array([1.0, 1.1, 0.9]), "b": np.array([2.0, 2.1, 1.9])}
      >>> resamples = np.random.default_rng(0).integers(0, 3, (200, 3))
      >>> compare_group_medians(finals, ("a",), ("b",), resamples, 0.95)["decision"]
      'holds'
    """
    confidence = check_in_range(confidence, "confidence", 0.0, 1.0)

    def group_median(names, idx):
        return np.min([np.median(finals[n][idx], -1) for n in names], 0)

    left, right = group_median(smaller, slice(None)), group_median(larger, slice(None))
    share = float(np.mean(group_median(smaller, resamples) < group_median(larger, resamples)))
    tail = (1.0 - confidence) / 2.0
    decision = "holds" if share >= 1 - tail else "contradicted" if share <= tail else "undecided"
    return {
        "smaller": list(smaller),
        "larger": list(larger),
        "left_median": float(left),
        "right_median": float(right),
        "bootstrap_share": share,
        "decision": decision,
    }


def steps_saving(reference_curve, candidate_curve, budget: int):
    """The candidate's saving in steps to reach the reference's best (smoothed) loss.

    The target is the reference curve's minimum, reached at 1-based step ``n_ref``; the candidate
    reaches it at ``n`` (:func:`steps_to_reach`; None when it does not within the curve, then
    counted as ``budget + 1``: an upper bound on the saving). Non-finite values count as ``+inf``.

    Returns:
      ``(target, n_ref, n, saving_percent)`` with ``saving_percent = 100 (1 − n/n_ref)``.

    Examples:
      >>> target, n_ref, n, saving = steps_saving([3.0, 2.0, 1.0, 1.5], [2.5, 1.0, 0.9, 0.8], 4)
      >>> target, n_ref, n, round(saving, 2)
      (1.0, 3, 2, 33.33)
    """
    reference = finite_or_inf(reference_curve)
    target = float(np.min(reference))
    reference_steps = int(np.argmin(reference)) + 1
    candidate_steps = steps_to_reach(candidate_curve, target)
    counted = candidate_steps if candidate_steps is not None else budget + 1
    return target, reference_steps, candidate_steps, 100.0 * (1.0 - counted / reference_steps)


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
