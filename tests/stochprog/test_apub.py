"""APUB, Efron's and the CLT bound against the exact bootstrap law and the note's values."""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.stochprog import (
    apub,
    apub_exact,
    bootstrap_multiplicities,
    clt_upper_bound,
    cvar_weights,
    efron_upper_bound,
)
from tests.conftest import EXECUTION_BOUND

ALPHAS = (0.05, 0.1, 0.2, 0.5, 1.0)
# The note's reference check 1 (re-derived there by enumeration).
EXACT = {
    (1.0, 2.0, 3.0): (2.913580, 2.790123, 2.641975, 2.370370, 2.000000),
    (1.0, 2.0, 3.0, 10.0): (8.160156, 7.275391, 6.653320, 5.382812, 4.000000),
    (0.0, 0.0, 1.0, 5.0, 7.0): (5.346560, 4.941120, 4.456640, 3.629632, 2.600000),
}


def _all_sequences(n: int) -> np.ndarray:
    """The N^N equally likely index sequences as multiplicities: the exact bootstrap law."""
    return np.array([np.bincount(s, minlength=n) for s in itertools.product(range(n), repeat=n)])


@pytest.mark.parametrize("data", list(EXACT), ids=lambda d: f"N{len(d)}")
def test_exact_values_match_the_note(data):
    for alpha, expected in zip(ALPHAS, EXACT[data], strict=True):
        assert apub_exact(data, alpha) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("data", list(EXACT)[:2], ids=lambda d: f"N{len(d)}")
def test_monte_carlo_path_over_all_sequences_equals_the_enumeration(x64, data):
    # Every index sequence once is the exact law with equal weights: the Monte-Carlo formula
    # (equal atoms, fractional CVaR weight) and the enumeration (weighted atoms) must agree,
    # including levels where alpha * N^N is not an integer.
    v = _all_sequences(len(data))
    for alpha in (*ALPHAS, 1 / 3, 0.37):
        got = float(apub(jnp.array(data), alpha, multiplicities=v))
        assert got == pytest.approx(apub_exact(data, alpha), rel=1e-12)
    assert float(apub(jnp.array([1.0, 2, 3]), 1 / 3, multiplicities=_all_sequences(3))) == (
        pytest.approx(68 / 27, rel=1e-12)
    )


def test_efron_bound_is_below_apub_at_the_same_level(x64):
    v = _all_sequences(3)
    x = jnp.array([1.0, 2.0, 3.0])
    assert float(efron_upper_bound(x, 0.05, multiplicities=v)) == pytest.approx(8 / 3)
    assert float(efron_upper_bound(x, 0.05, multiplicities=v)) < apub_exact([1, 2, 3], 0.05)


def test_cvar_weights_equal_the_rockafellar_uryasev_minimum(x64):
    # CVaR_α = min_t t + E(r - t)_+ / α, attained at an atom: an independent formula.
    r = jax.random.normal(jax.random.key(3), (37,))
    for alpha in (0.01, 0.1, 0.25, 0.333, 0.9, 1.0):
        w = cvar_weights(r, alpha)
        assert float(w.sum()) == pytest.approx(1.0, rel=1e-12)
        assert float(w.min()) >= 0 and float(w.max()) <= 1 / (alpha * 37) + 1e-12
        ru = min(float(t + jnp.mean(jnp.maximum(r - t, 0.0)) / alpha) for t in r)
        assert float(w @ r) == pytest.approx(ru, rel=1e-12)


def test_apub_is_at_least_the_mean_non_increasing_and_translation_equivariant(x64):
    x = jax.random.gamma(jax.random.key(0), 2.0, (40,))
    v = bootstrap_multiplicities(jax.random.key(1), 40, 2000)
    bounds = [float(apub(x, a, multiplicities=v)) for a in (0.05, 0.1, 0.3, 0.6, 1.0)]
    assert all(b1 >= b2 for b1, b2 in zip(bounds, bounds[1:], strict=False))
    # alpha = 1 is the mean of the bootstrap means, which is the sample mean up to V's noise.
    assert bounds[-1] == pytest.approx(float(jnp.mean(v @ x / 40)), rel=1e-12)
    assert bounds[-1] == pytest.approx(float(x.mean()), rel=0.01)
    assert bounds[1] > float(x.mean())
    shifted = float(apub(x + 7.5, 0.1, multiplicities=v))
    assert shifted == pytest.approx(bounds[1] + 7.5, rel=1e-12)
    # At least Efron's percentile bound at the same level.
    assert bounds[1] >= float(efron_upper_bound(x, 0.1, multiplicities=v))


def test_apub_tends_to_the_mean_at_rate_one_over_root_n(x64):
    # Gamma(2, 1): the excess over the sample mean shrinks like N^(-1/2) (about a constant
    # times sd / sqrt(N) for a fixed level).
    excess = []
    for i, n in enumerate((25, 100, 400, 1600)):
        x = jax.random.gamma(jax.random.key(10 + i), 2.0, (n,))
        bound = apub(x, 0.1, rng_key=jax.random.key(20 + i), num_resamples=2000)
        excess.append(float(bound - x.mean()) * np.sqrt(n) / float(x.std()))
    assert all(e > 0 for e in excess)
    # The normalised excess is the CVaR of a standard normal at 10% (1.755) for large N.
    assert excess[-1] == pytest.approx(1.755, rel=0.1)
    assert max(excess) / min(excess) < 1.5


def test_coverage_on_gamma_samples_is_nominal_and_above_efron():
    # The note's reference check 5 at N = 80, alpha = 0.05: APUB 0.965, Efron 0.930, CLT 0.933
    # (1000 trials of 1000 resamples); 500 trials here (3 standard errors: 0.029). Gamma(2, 1)
    # has mean 2.
    trials, n, m, alpha = 500, 80, 1000, 0.05
    keys = jax.random.split(jax.random.key(2026), trials)

    @functools.partial(jax.jit, compiler_options=EXECUTION_BOUND)
    @jax.vmap
    def bounds(key):
        data_key, boot_key = jax.random.split(key)
        x = jax.random.gamma(data_key, 2.0, (n,))
        v = bootstrap_multiplicities(boot_key, n, m)
        return (
            apub(x, alpha, multiplicities=v),
            efron_upper_bound(x, alpha, multiplicities=v),
            clt_upper_bound(x, alpha),
        )

    apub_b, efron_b, clt_b = bounds(keys)
    coverage = {
        k: float(jnp.mean(b >= 2.0))
        for k, b in (("apub", apub_b), ("efron", efron_b), ("clt", clt_b))
    }
    se = np.sqrt(0.95 * 0.05 / trials)
    assert coverage["apub"] >= 0.95 - 3 * se, coverage
    assert coverage["apub"] > coverage["efron"], coverage
    assert coverage["apub"] > coverage["clt"], coverage


def test_apub_jits_with_a_traced_level(x64):
    x = jnp.array([1.0, 2.0, 3.0, 10.0])
    v = _all_sequences(4)
    traced = jax.jit(lambda a: apub(x, a, multiplicities=v))
    for alpha in (0.1, 0.5):
        assert float(traced(alpha)) == pytest.approx(apub_exact(x, alpha), rel=1e-12)


def test_bootstrap_multiplicities_are_multinomial_rows_and_deterministic():
    v = bootstrap_multiplicities(jax.random.key(4), 30, 5000)
    assert v.dtype == jnp.int32 and v.shape == (5000, 30)
    assert bool(jnp.all(v.sum(axis=1) == 30))
    # Each count is Binomial(30, 1/30): mean 1, variance 29/30.
    assert float(v.mean()) == pytest.approx(1.0)
    assert float(v.var()) == pytest.approx(29 / 30, rel=0.03)
    assert bool(jnp.all(v == bootstrap_multiplicities(jax.random.key(4), 30, 5000)))


def test_apub_exact_refuses_large_samples():
    with pytest.raises(ValueError, match="N <= 10"):
        apub_exact(np.arange(11.0), 0.1)


def test_bootstrap_multiplicities_do_not_depend_on_the_x64_flag():
    # Issue 40: with the default index dtype the same key gave a different matrix with x64 on
    # (int64 draws) than off (int32 draws). Both flags are set explicitly, scoped to this test.
    key = jax.random.key(7)
    with jax.enable_x64(False):
        off = np.asarray(bootstrap_multiplicities(key, 30, 400))
        jitted_off = np.asarray(
            jax.jit(bootstrap_multiplicities, static_argnums=(1, 2))(key, 30, 400)
        )
    with jax.enable_x64(True):
        on = np.asarray(bootstrap_multiplicities(key, 30, 400))
        jitted_on = np.asarray(
            jax.jit(bootstrap_multiplicities, static_argnums=(1, 2))(key, 30, 400)
        )
    assert off.dtype == on.dtype == np.int32
    np.testing.assert_array_equal(on, off)
    np.testing.assert_array_equal(jitted_on, jitted_off)
    np.testing.assert_array_equal(on, jitted_on)
    # The matrix is a multinomial draw, not a constant: rows differ and each sums to N.
    assert (off.sum(axis=1) == 30).all() and len({r.tobytes() for r in off}) == 400
