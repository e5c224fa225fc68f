"""The L-shaped method against the extensive form (the independent path), single vs multi cuts,
HiGHS vs closed-form recourse, and its stopping statuses."""

from __future__ import annotations

import itertools

import jax
import numpy as np
import pytest

from jaxlab.solvers import LShaped, SolverStatus
from jaxlab.stochprog import (
    TwoStageLP,
    bootstrap_multiplicities,
    product_mix_config,
    product_mix_model,
    product_mix_recourse,
    product_mix_reference_scenarios,
    sample_product_mix,
    solve_extensive_form,
)

CONFIG = product_mix_config()
HOURS = np.asarray(CONFIG.hours)
AGREE = 1e-6  # the agreement between the L-shaped method and the extensive form


def _relative(a, b):
    return abs(a - b) / max(1.0, abs(b))


@pytest.fixture(scope="module")
def instance():
    with jax.enable_x64(True):
        scenarios = sample_product_mix(jax.random.key(0), 30, CONFIG)
        v = np.asarray(bootstrap_multiplicities(jax.random.key(1), 30, 300))
    return scenarios, product_mix_model(scenarios, CONFIG), v


@pytest.mark.parametrize("alpha", [0.1, 0.5])
def test_single_and_multi_cuts_agree_with_the_extensive_form(instance, alpha):
    scenarios, model, v = instance
    reference = solve_extensive_form(model, alpha=alpha, multiplicities=v)
    closed_form = lambda x: product_mix_recourse(x, scenarios, HOURS)
    for cuts in ("single", "multi"):
        for recourse_fun in (None, closed_form):
            out = LShaped(
                model, alpha=alpha, multiplicities=v, cuts=cuts, recourse_fun=recourse_fun
            ).run()
            assert out.state.status == SolverStatus.CONVERGED
            assert _relative(out.state.value, reference.value) <= AGREE
            # value (master, lower) and upper_bound bracket the optimum.
            assert out.state.value <= reference.value + 1e-6 * abs(reference.value)
            assert out.state.upper_bound >= reference.value - 1e-6 * abs(reference.value)
            np.testing.assert_allclose(out.params, reference.x, atol=1e-3 * CONFIG.x_upper)


def test_saa_by_cuts_equals_the_saa_extensive_form(instance):
    _, model, _ = instance
    reference = solve_extensive_form(model)
    for cuts in ("single", "multi"):
        out = LShaped(model, cuts=cuts).run()
        assert _relative(out.state.value, reference.value) <= AGREE


def test_tiny_bootstrap_instance_of_the_note():
    model = product_mix_model(product_mix_reference_scenarios(), CONFIG)
    v = np.array([np.bincount(s, minlength=4) for s in itertools.product(range(4), repeat=4)])
    for alpha, value in ((1.0, -5729.1667), (0.5, -3666.6667)):
        for cuts in ("single", "multi"):
            out = LShaped(model, alpha=alpha, multiplicities=v, cuts=cuts).run()
            assert out.state.value == pytest.approx(value, rel=1e-6)


def test_run_equals_the_update_loop(instance):
    _, model, v = instance
    solver = LShaped(model, alpha=0.2, multiplicities=v)
    state = solver.init_state()
    x = solver._start(None, state)
    while state.status == SolverStatus.RUNNING:
        x, state = solver.update(x, state)
    out = solver.run()
    np.testing.assert_array_equal(x, out.params)
    assert state.value == out.state.value and state.iter_num == out.state.iter_num
    assert out.state.cut_slopes.shape == (out.state.iter_num - 1, 4)


def test_statuses_maxiter_nonfinite_and_an_invalid_lower_bound(instance):
    scenarios, model, v = instance
    out = LShaped(model, alpha=0.1, multiplicities=v, maxiter=2).run()
    assert out.state.status == SolverStatus.MAXITER and out.state.iter_num == 2
    nan = lambda x: (np.full(30, np.nan), np.zeros((30, 4)))
    out = LShaped(model, recourse_fun=nan).run()
    assert out.state.status == SolverStatus.NONFINITE and out.state.num_nonfinite == 1
    with pytest.raises(ValueError, match="eta_lower_bound"):
        LShaped(model, eta_lower_bound=1e9).run()
    # The computed bound is valid: the product mix's recourse is >= 0 and 0 at x = 0.
    assert LShaped(model).init_state().eta_lower_bound == pytest.approx(0.0, abs=1e-9)


def test_a_general_model_with_first_stage_rows(x64):
    # Two products sharing a budget row x1 + x2 <= 5; random recourse costs per scenario.
    rng = np.random.default_rng(3)
    n = 8
    demand = rng.uniform(1, 6, size=(n, 2))
    model = TwoStageLP(
        c=[1.0, 1.5],
        W=np.broadcast_to(np.array([[1.0, 0, -1, 0], [0, 1, 0, -1]]), (n, 2, 4)),
        T=np.eye(2),
        h=demand,
        q=np.concatenate([rng.uniform(2, 4, size=(n, 2)), np.zeros((n, 2))], axis=1),
        x_upper=[10.0, 10.0],
        A=[[1.0, 1.0]],
        b=[5.0],
    )
    v = np.asarray(bootstrap_multiplicities(jax.random.key(4), n, 100))
    reference = solve_extensive_form(model, alpha=0.3, multiplicities=v)
    assert reference.x.sum() <= 5.0 + 1e-9
    for cuts in ("single", "multi"):
        out = LShaped(model, alpha=0.3, multiplicities=v, cuts=cuts).run()
        assert _relative(out.state.value, reference.value) <= AGREE
