"""jaxlab._src.stats against loops and SciPy's own interval."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from jaxlab._src import stats


def test_trailing_mean_and_steps_to_reach_against_loops():
    values = np.random.default_rng(0).normal(size=37)
    smoothed = stats.trailing_mean(values, 5)
    loop = [values[max(0, t - 4) : t + 1].mean() for t in range(values.size)]
    np.testing.assert_allclose(smoothed, loop, rtol=1e-12)
    target = float(np.median(smoothed))
    first = next(t + 1 for t, v in enumerate(smoothed) if v <= target)
    assert stats.steps_to_reach(smoothed, target) == first
    assert stats.steps_to_reach(smoothed, smoothed.min() - 1.0) is None
    with pytest.raises(ValueError, match="window must be"):
        stats.trailing_mean(values, 0)


def test_t_interval_matches_scipy():
    values = np.random.default_rng(1).normal(2.0, 3.0, size=7)
    mean, low, high = stats.t_interval(values, 0.9)
    expected = scipy.stats.t.interval(0.9, 6, loc=values.mean(), scale=scipy.stats.sem(values))
    np.testing.assert_allclose((low, high), expected, rtol=1e-12)
    assert mean == pytest.approx(values.mean())
    assert stats.t_interval([1.5], 0.9) == (1.5, -np.inf, np.inf)
    with pytest.raises(ValueError, match="confidence"):
        stats.t_interval(values, 1.0)


def test_examples_run():
    import doctest

    result = doctest.testmod(stats, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 3 and result.failed == 0


def test_crossed_bootstrap_interval_against_a_loop_and_its_limits():
    import jax

    rng = np.random.default_rng(0)
    table = rng.normal(size=(3, 5))
    key = jax.random.key(4)
    mean, low, high = stats.crossed_bootstrap_interval(
        table, rng_key=key, resamples=300, confidence=0.9
    )
    # An independent loop over the same draws (the generator seeded from the key's data).
    draws = np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel().tolist())
    rows, cols = draws.integers(0, 3, (300, 3)), draws.integers(0, 5, (300, 5))
    pairs = zip(rows, cols, strict=True)
    means = [np.mean([[table[r, c] for c in cs] for r in rs]) for rs, cs in pairs]
    assert mean == pytest.approx(table.mean())
    assert (low, high) == pytest.approx(tuple(np.quantile(means, [0.05, 0.95])))
    # A constant table has a zero-width interval; a wider confidence never narrows it.
    assert stats.crossed_bootstrap_interval(
        np.ones((2, 2)), rng_key=key, resamples=10, confidence=0.9
    ) == (1.0, 1.0, 1.0)
    _, low99, high99 = stats.crossed_bootstrap_interval(
        table, rng_key=key, resamples=300, confidence=0.99
    )
    assert low99 <= low and high99 >= high
    with pytest.raises(ValueError, match="table"):
        stats.crossed_bootstrap_interval(np.ones(3), rng_key=key, resamples=10, confidence=0.9)
