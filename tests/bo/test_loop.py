"""The BO loop, the acquisition optimizer and the test functions (the note's check 10)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize

from jaxlab.bo import (
    TWO_REGIME_MINIMIZER,
    TWO_REGIME_MINIMUM,
    AcquisitionConfig,
    RamboConfig,
    bayes_opt,
    bo_problem,
    levy,
    maximize_acquisition,
    schwefel,
    sobol_points,
    two_regime,
)

# The loop tests' sizes: the experiment's smoke profile (float64, 4 + 3 evaluations), so each
# surrogate's step compiles once in the suite (the compilation cache shares it).
_ACQ = AcquisitionConfig(num_candidates=64, num_starts=2, adam_steps=2, lbfgs_steps=2)
_RAMBO = RamboConfig(num_sweeps=3, burn_in=1)

_LEVY = {
    2: (0.715845, 95.382809, 64.016591),
    6: (1.079223, 414.414045, 277.582956),
    10: (1.442601, 733.445281, 491.149320),
}
_SCHWEFEL = {
    2: (837.9658, 476.787483, 1199.144117),
    6: (2513.8974, 1430.362449, 3597.432351),
    10: (4189.829, 2383.937415, 5995.720585),
}


@pytest.mark.parametrize("d", [2, 6, 10])
def test_note_check_10_benchmark_values(d):
    with jax.enable_x64(True):
        assert float(levy(jnp.ones(d))) == pytest.approx(0.0, abs=1e-12)
        for value, x in zip(_LEVY[d], (0.0, -10.0, 10.0), strict=True):
            assert float(levy(jnp.full(d, x))) == pytest.approx(value, abs=1e-6)
        for value, x in zip(_SCHWEFEL[d], (0.0, -500.0, 500.0), strict=True):
            assert float(schwefel(jnp.full(d, x))) == pytest.approx(value, abs=1e-3)
        assert float(schwefel(jnp.full(d, 420.9687))) == pytest.approx(1.2728e-5 * d, rel=1e-3)
        assert bo_problem("schwefel", d).optimal_value == pytest.approx(1.2728e-5 * d, rel=1e-3)


def test_two_regime_values_and_optimum():
    with jax.enable_x64(True):
        assert [
            float(two_regime(jnp.array(p))) for p in ([-0.5, 0.0], [0.0, 0.0], [0.5, 0.0])
        ] == pytest.approx([0.0, -0.25, -0.5])
        assert float(two_regime(jnp.array(TWO_REGIME_MINIMIZER))) == pytest.approx(
            TWO_REGIME_MINIMUM, abs=1e-6
        )
        # an independent search: the best of a grid, polished by SciPy's L-BFGS-B
        g = np.linspace(-1, 1, 401)
        grid = np.stack(np.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
        start = grid[np.argmin(np.asarray(two_regime(jnp.asarray(grid))))]
        res = minimize(
            lambda p: float(two_regime(jnp.asarray(p))),
            start,
            method="L-BFGS-B",
            bounds=[(-1, 1)] * 2,
        )
        assert res.fun == pytest.approx(TWO_REGIME_MINIMUM, abs=1e-5)


def test_sobol_points_are_reproducible_and_inside():
    a = sobol_points(jax.random.key(0), 10, [[-2.0, 3.0]])
    np.testing.assert_array_equal(a, sobol_points(jax.random.key(0), 10, [[-2.0, 3.0]]))
    assert not np.array_equal(a, sobol_points(jax.random.key(1), 10, [[-2.0, 3.0]]))
    assert a.min() >= -2.0 and a.max() <= 3.0


def test_maximize_acquisition_finds_a_known_maximum():
    box = jnp.array([[-1.0, 1.0], [-1.0, 1.0]])
    pts = jnp.asarray(sobol_points(jax.random.key(0), 32, box))

    def bumpy(z):  # maximum 1 at (0.6, -0.4)
        return jnp.exp(-20 * jnp.sum((z - jnp.array([0.6, -0.4])) ** 2))

    x, info = maximize_acquisition(bumpy, box, pts, num_starts=3)
    np.testing.assert_allclose(x, [0.6, -0.4], atol=1e-3)
    assert float(info.value) >= float(info.candidate_value) and int(info.nonfinite) == 0


@pytest.mark.parametrize(
    "surrogate",
    # sgp_botorch compiles a vmapped multi-start L-BFGS (~10 s on 2 cores): slow profile
    ["rambo", "sgp", pytest.param("sgp_botorch", marks=pytest.mark.slow), "random"],
)
def test_bayes_opt_runs_and_is_reproducible(surrogate):
    problem = bo_problem("two_regime")
    acq = dataclasses.replace(_ACQ, kind="log_ei", xi=0.0) if surrogate == "sgp_botorch" else _ACQ
    kwargs = dict(
        surrogate=surrogate,
        num_init=4,
        num_iters=3,
        rambo=_RAMBO,
        acquisition=acq,
        gp_steps=5,
        gp_restarts=2,
    )
    with jax.enable_x64(True):
        a = bayes_opt(jax.random.key(0), problem.objective, problem.bounds, **kwargs)
        b = bayes_opt(jax.random.key(0), problem.objective, problem.bounds, **kwargs)
        c = bayes_opt(jax.random.key(1), problem.objective, problem.bounds, **kwargs)
        values = np.asarray(problem.objective(jnp.asarray(a.x)))
    np.testing.assert_array_equal(a.x, b.x)
    assert a.x.shape == (7, 2) and a.y.shape == (7,)
    np.testing.assert_allclose(a.y, values, rtol=1e-12)
    np.testing.assert_array_equal(a.best_so_far, np.minimum.accumulate(a.y))
    assert np.all(np.abs(a.x) <= 1.0) and a.nonfinite == 0
    assert len(np.unique(a.x.round(8), axis=0)) == 7  # every proposal is a new point
    if surrogate == "rambo":
        assert np.all(a.num_clusters >= 1)
    assert not np.array_equal(a.x, c.x)


def test_rambo_accepts_log_ei_and_traces_the_mixture_log_ei_branch():
    """``surrogate="rambo"`` with ``kind="log_ei"`` (the mixture log EI): the step traces to a
    proposal of the box's dimension and its acquisition is the log of the mixture EI
    (``tests/bo/test_rambo.py`` checks its values). Traced, not compiled: a compile of another
    RAMBO step would cost the suite ~10 s."""
    from jaxlab.bo._loop import _rambo_step

    acq = dataclasses.replace(_ACQ, kind="log_ei")
    n, d = 7, 2
    with jax.enable_x64(True):
        args = (
            jax.random.key(0),
            jnp.zeros((n, d)),
            jnp.zeros(n),
            jnp.arange(n) < 4,
            jnp.array([[-1.0, 1.0]] * d),
            jnp.zeros((acq.num_candidates, d)),
            jnp.asarray(2.0),
        )
        x_next, clusters, nonfinite = jax.eval_shape(_rambo_step(_RAMBO, acq), *args)
        problem = bo_problem("two_regime")  # no longer refused by bayes_opt's checks
        run = bayes_opt(jax.random.key(0), problem.objective, problem.bounds, num_init=3,
                        num_iters=0, rambo=_RAMBO, acquisition=acq)  # fmt: skip
    assert x_next.shape == (d,) and x_next.dtype == jnp.float64 and clusters.shape == ()
    assert nonfinite.shape == () and run.x.shape == (3, d)
