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


def test_compare_group_medians_and_steps_saving_by_hand():
    finals = {"a": np.array([1.0, 1.2, 0.8, 1.1]), "b": np.array([2.0, 0.5, 2.2, 2.1])}
    everything = np.tile(np.arange(4), (1, 1))  # the one resample equal to the sample
    out = stats.compare_group_medians(finals, ("a",), ("b",), everything, 0.95)
    assert (out["left_median"], out["right_median"]) == (1.05, 2.05)
    assert out["bootstrap_share"] == 1.0 and out["decision"] == "holds"
    only_seed_1 = np.ones((3, 4), int)  # b's seed 1 (0.5) beats a's (1.2)
    assert (
        stats.compare_group_medians(finals, ("a",), ("b",), only_seed_1, 0.95)["decision"]
        == "contradicted"
    )
    saving = stats.steps_saving([3.0, np.nan, 1.0], [2.0, 1.5, 1.2], 3)
    assert saving == (1.0, 3, None, pytest.approx(-100 / 3))  # not reached: counted as step 4
    finite = stats.finite_or_inf([np.inf, -np.inf, 2.0])
    np.testing.assert_array_equal(finite, [np.inf, np.inf, 2.0])


def test_bracketed_grid_search_extends_until_bracketed_or_out_of_extensions():
    from jaxlab._src.tuning import bracketed_grid_search

    calls = []

    def score(lr):
        calls.append(lr)
        return (np.log10(lr) + 3) ** 2  # minimum at 1e-3

    search = bracketed_grid_search(score, [1e-1, 1e-2], factor=10.0, max_extensions=5)
    assert calls == [1e-1, 1e-2, 1e-3, 1e-4]
    assert search.best == pytest.approx(1e-3) and search.bracketed and search.extensions == 2
    capped = bracketed_grid_search(score, [1e-1, 1e-2], factor=10.0, max_extensions=1)
    assert not capped.bracketed and capped.extensions == 1
    nan_low = bracketed_grid_search(lambda lr: np.nan if lr < 0.5 else lr, [0.1, 1.0, 2.0])
    assert nan_low.best == 1.0 and nan_low.bracketed  # NaN counts as +inf
    assert bracketed_grid_search(lambda lr: None, [0.1, 1.0]) is None


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
