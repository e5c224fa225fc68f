"""Two-stage LPs: closed-form recourse = LP recourse, extensive forms against a second model
built here for scipy's linprog, the note's tiny bootstrap instance, and errors that name the
stage and scenario."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import linprog

from jaxlab.stochprog import (
    TwoStageLP,
    bootstrap_multiplicities,
    product_mix_config,
    product_mix_model,
    product_mix_recourse,
    product_mix_reference_scenarios,
    recourse_lp,
    sample_product_mix,
    solve_extensive_form,
)

CONFIG = product_mix_config()
HOURS = np.asarray(CONFIG.hours)
X0 = np.array([100.0, 200.0, 300.0, 400.0])
# The note's reference check 3: four scenarios (h, q, w), Q at X0 and the station duals π.
CHECK = product_mix_reference_scenarios()
CHECK_Q = [26444.444444444, 17400.0, 19700.0, 208750.0]
CHECK_PI = [[7.777777778, 7.777777778], [6.0, 6.0], [8.75, 6.0], [25.0, 25.0]]


def _all_sequences(n):
    return np.array([np.bincount(s, minlength=n) for s in itertools.product(range(n), repeat=n)])


def test_closed_form_and_lp_recourse_match_the_note(x64):
    values, grads = product_mix_recourse(X0, CHECK, HOURS)
    np.testing.assert_allclose(values, CHECK_Q, rtol=1e-8)
    np.testing.assert_allclose(grads, np.asarray(CHECK_PI) @ HOURS, rtol=1e-8)
    lp_values, lp_grads = recourse_lp(product_mix_model(CHECK, CONFIG))(X0)
    np.testing.assert_allclose(lp_values, CHECK_Q, rtol=1e-8)
    np.testing.assert_allclose(lp_grads, np.asarray(grads), rtol=1e-8)


def test_closed_form_recourse_equals_the_lp_on_random_scenarios_and_decisions(x64):
    scenarios = sample_product_mix(jax.random.key(0), 60, CONFIG)
    evaluate = recourse_lp(product_mix_model(scenarios, CONFIG))
    rng = np.random.default_rng(0)
    recourse = jax.jit(product_mix_recourse)  # one program for the 16 calls (eagerly: per op)
    for x in rng.uniform(0, 900, size=(8, 4)):
        values, grads = recourse(x, scenarios, HOURS)
        lp_values, lp_grads = evaluate(x)
        np.testing.assert_allclose(values, lp_values, rtol=1e-9, atol=1e-7)
        # Both are subgradients; away from ties in κ and exact hour balances they are equal.
        np.testing.assert_allclose(grads, lp_grads, rtol=1e-7, atol=1e-6)
        # Supporting plane at another point: Q(x') >= Q(x) + g·(x' - x).
        other = rng.uniform(0, 900, size=4)
        at_other, _ = recourse(other, scenarios, HOURS)
        assert np.all(np.asarray(at_other) >= np.asarray(values + grads @ (other - x)) - 1e-6)


def _linprog_apub(model: TwoStageLP, alpha, v):
    """APUB as a second model: no z variables, dense rows, scipy's linprog."""
    n, n1, n2 = model.num_scenarios, model.first_stage_dim, model.recourse_dim
    m = v.shape[0]
    # Variables [x, t, s (M), y (N n2)].
    size = n1 + 1 + m + n * n2
    cost = np.concatenate([model.c, [1.0], np.full(m, 1 / (alpha * m)), np.zeros(n * n2)])
    a_ub = np.zeros((m, size))
    a_ub[:, n1] = -1.0
    a_ub[:, n1 + 1 : n1 + 1 + m] = -np.eye(m)
    for k in range(n):
        a_ub[:, n1 + 1 + m + k * n2 : n1 + 1 + m + (k + 1) * n2] = np.outer(v[:, k] / n, model.q[k])
    a_eq = np.zeros((n * model.h.shape[1], size))
    for k in range(n):
        rows = slice(k * model.h.shape[1], (k + 1) * model.h.shape[1])
        a_eq[rows, :n1] = model.T[k]
        a_eq[rows, n1 + 1 + m + k * n2 : n1 + 1 + m + (k + 1) * n2] = model.W[k]
    bounds = (
        list(zip(model.x_lower, model.x_upper, strict=True))
        + [(None, None)]
        + [(0, None)] * (m + n * n2)
    )
    out = linprog(cost, a_ub, np.zeros(m), a_eq, model.h.reshape(-1), bounds, method="highs")
    assert out.status == 0, out.message
    return out.fun, out.x[:n1]


def test_extensive_form_equals_a_second_model_solved_by_linprog(x64):
    scenarios = sample_product_mix(jax.random.key(1), 12, CONFIG)
    model = product_mix_model(scenarios, CONFIG)
    v = np.asarray(bootstrap_multiplicities(jax.random.key(2), 12, 60))
    for alpha in (0.1, 0.45):
        ours = solve_extensive_form(model, alpha=alpha, multiplicities=v)
        value, _ = _linprog_apub(model, alpha, v)
        assert ours.value == pytest.approx(value, rel=1e-9)
        # The certificate is c·x + APUB of the recourse at the solution.
        values, _ = product_mix_recourse(ours.x, scenarios, HOURS)
        means = v @ np.asarray(values) / 12
        top = np.sort(means)[::-1]
        k = alpha * 60
        tail = (top[: int(k)].sum() + (k - int(k)) * top[int(k)]) / k
        assert ours.value == pytest.approx(float(model.c @ ours.x) + tail, rel=1e-9)


def test_tiny_bootstrap_instance_of_the_note(x64):
    model = product_mix_model(CHECK, CONFIG)
    v = _all_sequences(4)
    saa_like = solve_extensive_form(model, alpha=1.0, multiplicities=v)
    assert saa_like.value == pytest.approx(-5729.1667, rel=1e-6)
    np.testing.assert_allclose(saa_like.x, [0, 0, 0, 916.6667], atol=1e-3)
    saa = solve_extensive_form(model)
    assert saa.value == pytest.approx(-5729.1667, rel=1e-6)
    assert np.isnan(saa.threshold)
    for alpha in (0.9, 0.5, 0.1):
        hedged = solve_extensive_form(model, alpha=alpha, multiplicities=v)
        assert hedged.value == pytest.approx(-3666.6667, rel=1e-6)
        np.testing.assert_allclose(hedged.x, [0, 0, 0, 550 / 6], atol=1e-3)


def test_models_broadcast_fixed_recourse_and_solve_a_newsvendor(x64):
    # Newsvendor: order x at 1, sell min(x, d) at 3: Q = -3 min(x, d) = -3 d + 3 (d - x)_+ ...
    # as an LP: y = (sold, short), sold + short = d, sold <= x via a slack.
    demand = np.array([2.0, 4.0, 6.0, 8.0])
    model = TwoStageLP(
        c=[1.0],
        W=[[1.0, 1.0, 0.0], [1.0, 0.0, 1.0]],  # sold + short = d; sold + slack = x
        T=[[0.0], [-1.0]],
        h=np.stack([demand, np.zeros(4)], axis=1),
        q=[-3.0, 0.0, 0.0],
        x_upper=[100.0],
    )
    assert model.W.shape == (4, 2, 3) and model.q.shape == (4, 3)
    sol = solve_extensive_form(model)
    # Critical ratio (3 - 1)/3 = 2/3: any x in [d_(3), d_(3)] = 6 minimises the sample problem.
    np.testing.assert_allclose(sol.x, [6.0], atol=1e-9)
    assert sol.value == pytest.approx(6.0 - 3 * (2 + 4 + 6 + 6) / 4)


def test_infeasible_and_unbounded_models_name_the_stage_and_scenario():
    base = dict(c=[1.0], W=[[1.0, -1.0]], T=[[1.0]], q=[3.0, 0.0])
    # Scenario 1 demands y1 - y2 = h - x with y2 bounded by nothing: always feasible, so make
    # the second scenario's recourse impossible: W = [1, 1] with h - x < 0 for every x >= 0.
    infeasible = TwoStageLP(
        c=[1.0],
        W=[[[1.0, -1.0]], [[1.0, 1.0]]],
        T=[[1.0]],
        h=[[2.0], [-1.0]],
        q=[3.0, 0.0],
        x_upper=[10.0],
    )
    with pytest.raises(ValueError, match="second stage, scenario 1"):
        solve_extensive_form(infeasible)
    with pytest.raises(ValueError, match="scenario 1"):
        recourse_lp(infeasible)([0.0])
    first = TwoStageLP(h=[[2.0]], x_lower=[0.0], x_upper=[1.0], A=[[-1.0]], b=[-5.0], **base)
    with pytest.raises(ValueError, match="first stage"):
        solve_extensive_form(first)
    unbounded = TwoStageLP(
        c=[1.0], W=[[1.0, -1.0]], T=[[1.0]], h=[[2.0]], q=[-1.0, 0.0], x_upper=[1.0]
    )
    with pytest.raises(ValueError, match="scenario 0.*unbounded"):
        solve_extensive_form(unbounded)


def test_mismatched_scenario_shapes_are_named():
    base = dict(c=[1.0], W=[[1.0, -1.0]], T=[[1.0]], h=[[2.0], [4.0]], q=[3.0, 0.0])
    with pytest.raises(ValueError, match="T must have shape"):
        TwoStageLP(**{**base, "T": np.ones((3, 1, 1))})
    with pytest.raises(ValueError, match="q must have shape"):
        TwoStageLP(**{**base, "q": np.ones((2, 3))})
    with pytest.raises(ValueError, match="W must have shape"):
        TwoStageLP(**{**base, "W": np.ones((2, 2, 2))})
    with pytest.raises(ValueError, match="multiplicities"):
        solve_extensive_form(TwoStageLP(**base), alpha=0.1, multiplicities=np.ones((5, 3)))
    with pytest.raises(ValueError, match="alpha"):
        solve_extensive_form(TwoStageLP(**base), alpha=0.0, multiplicities=np.ones((5, 2)))


def test_product_mix_recourse_is_jittable_and_batched(x64):
    scenarios = sample_product_mix(jax.random.key(5), 7, CONFIG)
    jitted = jax.jit(product_mix_recourse)
    values, grads = jitted(jnp.asarray(X0), scenarios, jnp.asarray(HOURS))
    eager, _ = product_mix_recourse(X0, scenarios, HOURS)
    np.testing.assert_allclose(values, eager, rtol=1e-12)
    assert grads.shape == (7, 4)
