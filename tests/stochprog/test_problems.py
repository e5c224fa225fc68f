"""The product-mix scenario law: the exact positive-stable and Gumbel-copula samplers."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from scipy import stats

from jaxlab.stochprog import (
    gumbel_copula,
    positive_stable,
    product_mix_config,
    product_mix_model,
    sample_product_mix,
)


def test_positive_stable_has_the_stated_laplace_transform(x64):
    # The note's check 6: a = 1/2, E exp(-2S) = exp(-sqrt 2) = 0.24312 (the reference code's
    # approximate draw gives 0.276).
    s = np.asarray(positive_stable(jax.random.key(0), (400_000,), 0.5))
    for lam in (0.5, 2.0, 5.0):
        assert np.mean(np.exp(-lam * s)) == pytest.approx(np.exp(-np.sqrt(lam)), abs=2e-3)


@pytest.mark.parametrize("theta", [1.0, 2.0, 5.0])
def test_gumbel_copula_has_uniform_marginals_and_kendalls_tau(theta):
    u = np.asarray(gumbel_copula(jax.random.key(1), 3000, 3, theta), np.float64)
    for k in range(3):
        assert stats.kstest(u[:, k], "uniform").pvalue > 1e-3
    # Kendall's tau of the Gumbel copula is 1 - 1/θ.
    tau = stats.kendalltau(u[:, 0], u[:, 1]).statistic
    assert tau == pytest.approx(1 - 1 / theta, abs=0.04)


def test_product_mix_scenarios_follow_the_regime_law():
    config = product_mix_config()
    s = sample_product_mix(jax.random.key(2), 4000, config)
    regular = np.asarray(s.regime) == 1
    assert regular.mean() == pytest.approx(0.9, abs=0.015)
    h, q, w = (np.asarray(a) for a in (s.hours, s.cost, s.efficiency))
    assert np.all((h[regular] >= 5000) & (h[regular] <= 6000))
    assert np.all((h[~regular] >= 500) & (h[~regular] <= 600))
    assert np.all((q[~regular] >= 20) & (q[~regular] <= 25))
    assert np.all((w[regular] >= 0.8) & (w[regular] <= 1.0))
    again = sample_product_mix(jax.random.key(2), 4000, config)
    assert np.array_equal(np.asarray(again.hours), h)


def test_other_instance_sizes_build_models():
    for i, j in ((20, 8), (10, 4)):
        config = product_mix_config(i, j)
        assert config.num_products == i and config.num_stations == j
        model = product_mix_model(sample_product_mix(jax.random.key(3), 5, config), config)
        assert model.W.shape == (5, j + 1, 3 * j) and model.T.shape == (5, j + 1, i)
    assert product_mix_config(20, 8).profit[5] == 40.0
    assert product_mix_config(20, 8).hours == product_mix_config(20, 8).hours
