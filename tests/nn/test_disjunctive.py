"""Disjunctive rule layers: hand-computed hulls, reference projections, exactness, gradients."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize

from jaxlab.nn import (
    Disjunct,
    Disjunction,
    DisjunctiveLayer,
    RuleSet,
    gap_rules,
    hull_size,
    input_decided_regression_task,
    input_decided_toy_rules,
    output_only_regression_task,
    pinned_fractions,
    rule_satisfaction,
    rule_violation,
    tightness_rules,
)

# ε small enough that the lifted regularisation moves y by < 1e-6 (float64, the note's ε -> 0).
_EPS = 1e-8
_TIGHT = dict(lift_regularization=_EPS, tol=1e-8, admm_tol=1e-7, maxiter=20000)


def _scipy_hull_projection(y_hat, rows):
    """Projection onto {box [0,1]², lo <= a y <= hi} by SLSQP (the reference solver)."""
    constraints = []
    for a, lo, hi in rows:
        a = np.asarray(a)
        constraints.append({"type": "ineq", "fun": lambda y, a=a, lo=lo: a @ y - lo})
        constraints.append({"type": "ineq", "fun": lambda y, a=a, hi=hi: hi - a @ y})
    out = minimize(
        lambda y: 0.5 * np.sum((y - y_hat) ** 2),
        np.clip(y_hat, 0, 1),
        jac=lambda y: y - y_hat,
        bounds=[(0, 1), (0, 1)],
        constraints=constraints,
        method="SLSQP",
        options={"ftol": 1e-15, "maxiter": 500},
    )
    return out.x


# The note's hand-computed hulls of tightness_rules: DNF {2.8 <= 4y1 + 7y2 <= 8.2},
# CNF {0.4 <= y1 + y2 <= 1.6}, both within the box.
_HULLS = {"dnf": [((4.0, 7.0), 2.8, 8.2)], "cnf": [((1.0, 1.0), 0.4, 1.6)]}


@pytest.mark.parametrize("formulation", ["dnf", "cnf"])
def test_hull_projection_matches_reference_and_membership(formulation):
    with jax.enable_x64(True):
        layer = DisjunctiveLayer(tightness_rules(), formulation=formulation, **_TIGHT)
        points = jax.random.uniform(jax.random.key(0), (12, 2), jnp.float64, -0.2, 1.2)
        y, info = layer(points)
    assert bool(info.projected.all())
    rows = _HULLS[formulation]
    for y_hat, y_out in zip(np.asarray(points), np.asarray(y), strict=True):
        reference = _scipy_hull_projection(y_hat, rows)
        np.testing.assert_allclose(y_out, reference, atol=1e-5)
        inside = all(lo <= np.dot(a, y_hat) <= hi for a, lo, hi in rows) and np.all(
            (0 <= y_hat) & (y_hat <= 1)
        )
        # Membership: the projection leaves exactly the hull's points in place.
        assert (np.max(np.abs(y_out - y_hat)) < 1e-5) == inside


def test_note_reference_values():
    with jax.enable_x64(True):
        gap = gap_rules()
        for formulation in ("dnf", "cnf", "partial_dnf"):
            layer = DisjunctiveLayer(gap, formulation=formulation, **_TIGHT)
            y, _ = layer(jnp.array([[0.5, 0.1], [0.3, 0.3], [0.5, 0.5]]))
            np.testing.assert_allclose(y, [[0.6, 0.2], [0.4, 0.4], [0.5, 0.5]], atol=1e-5)
        union = DisjunctiveLayer(gap, mode="union", **_TIGHT)
        y, _ = union(jnp.array([[0.5, 0.1]]))
        np.testing.assert_allclose(y, [[0.75, 0.1]], atol=1e-6)
        tight = tightness_rules()
        y, _ = DisjunctiveLayer(tight, **_TIGHT)(jnp.array([[0.5, 0.0], [0.5, 0.9]]))
        np.testing.assert_allclose(y, [[0.549231, 0.086154], [0.493846, 0.889231]], atol=2e-6)
        y, _ = DisjunctiveLayer(tight, mode="union", **_TIGHT)(jnp.array([[0.5, 0.0]]))
        np.testing.assert_allclose(y, [[0.7, 0.0]], atol=1e-6)
        toy = DisjunctiveLayer(input_decided_toy_rules(), **_TIGHT)
        y, _ = toy(jnp.full((3, 2), jnp.array([5.0, 3.0])), jnp.array([[0.6], [0.1], [0.0]]))
        np.testing.assert_allclose(y, [[1, 5], [1, 2], [5, 2]], atol=1e-5)
        sat = rule_satisfaction(toy.rule_set, jnp.array([[0.6], [0.1], [0.0]]), y)
        assert sat.tolist() == [True, True, False]  # x = 0: both antecedents hold


def test_layer_outputs_satisfy_rules_feasible_points_stay_and_dnf_is_tightest():
    with jax.enable_x64(True):
        task = input_decided_regression_task(jax.random.key(1), num_train=2, num_test=40)
        raw = jax.random.uniform(jax.random.key(2), (40, 2), jnp.float64, -0.3, 1.3)
        for formulation in ("dnf", "cnf"):
            layer = DisjunctiveLayer(task.rule_set, formulation=formulation, **_TIGHT)
            y, info = layer(raw, task.x_test)
            assert bool(info.projected.all())
            assert float(rule_violation(task.rule_set, task.x_test, y).max()) <= 1e-6
            # The projection of a feasible point is itself.
            again, _ = layer(y, task.x_test)
            np.testing.assert_allclose(again, y, atol=1e-6)
        out = output_only_regression_task(jax.random.key(3), num_train=2, num_test=2)
        union = DisjunctiveLayer(out.rule_set, mode="union", **_TIGHT)
        y, info = union(raw)
        assert bool(info.projected.all())
        assert float(rule_violation(out.rule_set, None, y).max()) <= 1e-6
        np.testing.assert_allclose(union(out.y_test)[0], out.y_test, atol=1e-6)
        # DNF hull ⊆ CNF hull: DNF moves every point at least as far.
        d_dnf = jnp.linalg.norm(DisjunctiveLayer(out.rule_set, **_TIGHT)(raw)[0] - raw, axis=-1)
        cnf = DisjunctiveLayer(out.rule_set, formulation="cnf", **_TIGHT)
        d_cnf = jnp.linalg.norm(cnf(raw)[0] - raw, axis=-1)
        assert bool(jnp.all(d_dnf >= d_cnf - 1e-6)) and bool(jnp.any(d_dnf > d_cnf + 1e-3))


@pytest.mark.parametrize("mode", ["hull", "union"])
def test_gradients_match_finite_differences(mode):
    with jax.enable_x64(True):
        layer = DisjunctiveLayer(tightness_rules(), mode=mode, **_TIGHT)
        y_hat = jnp.array([[0.5, 0.05], [0.45, 0.9]])  # away from active-set changes
        weights = jnp.array([[1.0, -0.5], [0.3, 0.8]])
        f = lambda v: jnp.sum(weights * layer(v)[0])  # noqa: E731
        grad = jax.grad(f)(y_hat)
        h = 1e-6
        for i in range(2):
            for j in range(2):
                e = jnp.zeros_like(y_hat).at[i, j].set(h)
                numeric = (f(y_hat + e) - f(y_hat - e)) / (2 * h)
                assert float(grad[i, j]) == pytest.approx(float(numeric), abs=1e-5)
        assert float(jnp.abs(grad).max()) > 0.1  # the map is not constant: the test can fail


# Input-decided rules (task A's): x = (0.7, 0.2, 0.2) selects y1 <= 0.3 and y2 <= 0.5, so the
# projection is the clip onto [0, 0.3] x [0, 0.5] with Jacobian diag(y1 free, y2 free).
_TASK_A_X = (0.7, 0.2, 0.2)
_PINNED_POINTS = {
    "none active": ((0.2, 0.4), (1.0, 1.0)),
    "y1 <= 0.3 active": ((0.5, 0.4), (0.0, 1.0)),
    "both active": ((0.5, 0.7), (0.0, 0.0)),
}
# Central differences of a map that is linear within 0.1 of each point: h = 1e-2 never crosses
# a kink, and float32 rounding of the differenced outputs (~6e-8) over 2h stays below 1e-5.
_FD_STEP = 1e-2
_JACOBIAN_TOL = 1e-5


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_reverse_mode_jacobian_matches_finite_differences_with_pinned_constraints(dtype):
    # The issue's check: the layer's Jacobian is right with none, one and both rules' faces
    # active, so a zero gradient along a pinned direction is the projection's, not a bug.
    with jax.enable_x64(dtype == "float64"):
        task = input_decided_regression_task(jax.random.key(0), num_train=2, num_test=2)
        layer = DisjunctiveLayer(task.rule_set)
        names = list(_PINNED_POINTS)
        y_hat = jnp.array([_PINNED_POINTS[n][0] for n in names], dtype)
        x = jnp.broadcast_to(jnp.array(_TASK_A_X, dtype), (len(names), 3))
        project = lambda v: layer(v, x)[0]  # noqa: E731
        jacobian = jax.jacrev(project)(y_hat)  # (3, 2, 3, 2)
        assert jacobian.dtype == jnp.dtype(dtype)
        assert bool(layer(y_hat, x)[1].projected.all())
        for i, name in enumerate(names):
            numeric = np.zeros((2, 2))
            for j in range(2):
                e = jnp.zeros_like(y_hat).at[i, j].set(_FD_STEP)
                diff = (project(y_hat + e) - project(y_hat - e))[i] / (2 * _FD_STEP)
                numeric[:, j] = np.asarray(diff, np.float64)
            np.testing.assert_allclose(
                jacobian[i, :, i, :], numeric, atol=_JACOBIAN_TOL, err_msg=name
            )
            # ... and both equal the clip's Jacobian (the test can fail: a wrong face or a
            # leaked gradient through a pinned coordinate shows here).
            np.testing.assert_allclose(numeric, np.diag(_PINNED_POINTS[name][1]), atol=1e-5)
        off_diagonal = jacobian.at[jnp.arange(3), :, jnp.arange(3), :].set(0.0)
        assert float(jnp.abs(off_diagonal).max()) == 0.0  # outputs do not mix across samples


def test_pinned_fractions_count_violated_consequents_by_hand():
    task = input_decided_regression_task(jax.random.key(1), num_train=2, num_test=400)
    y_hat = jax.random.uniform(jax.random.key(2), (400, 2))
    got = np.asarray(pinned_fractions(task.rule_set, task.x_test, y_hat))
    x, y = np.asarray(task.x_test), np.asarray(y_hat)
    s = x[:, 1] + x[:, 2]
    # Task A's rules written out: (antecedent, consequent violated by more than 1e-4).
    branches = [
        [(x[:, 0] >= 0.5, y[:, 0] > 0.3 + 1e-4), (x[:, 0] <= 0.5, y[:, 0] < 0.6 - 1e-4)],
        [(s >= 1.0, y[:, 1] < 0.3 - 1e-4), (s <= 1.0, y[:, 1] > 0.5 + 1e-4)],
    ]
    expected = [[np.mean(bad[cond]) for cond, bad in rule] for rule in branches]
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    # The task's own targets satisfy the rules: nothing is pinned.
    clean = pinned_fractions(task.rule_set, task.x_test, task.y_test)
    assert float(jnp.max(clean)) == 0.0


def test_input_with_no_applicable_disjunct_returns_raw_output_inside_jit():
    rules = RuleSet(
        [0.0],
        [1.0],
        [Disjunction([Disjunct([[1.0]], [0.5], condition=([[-1.0]], [0.0]))], "x >= 0 -> y <= .5")],
        input_size=1,
    )
    for mode in ("hull", "union"):
        layer = DisjunctiveLayer(rules, mode=mode)

        @jax.jit
        def project(y_hat, x, layer=layer):
            return layer(y_hat, x)

        y_hat, x = jnp.array([[0.9], [0.9]]), jnp.array([[1.0], [-1.0]])
        y, info = project(y_hat, x)
        assert info.status.tolist() == [1, 5]
        np.testing.assert_allclose(y, [[0.5], [0.9]], atol=1e-4)
        grad = jax.grad(lambda v, layer=layer: layer(v, x)[0].sum())(y_hat)
        assert float(grad[1, 0]) == 0.0  # the fallback has zero gradient


def test_infeasible_rule_sets_are_rejected_naming_the_rule():
    empty = Disjunction([Disjunct([[1.0]], [-0.5])], "below zero")
    with pytest.raises(ValueError, match="below zero"):
        RuleSet([0.0], [1.0], [empty])
    low = Disjunction([Disjunct([[1.0]], [0.2])], "low")
    high = Disjunction([Disjunct([[-1.0]], [-0.8])], "high")
    with pytest.raises(ValueError, match="'high' contradicts"):
        RuleSet([0.0], [1.0], [low, high])
    with pytest.raises(ValueError, match="y"):
        DisjunctiveLayer(gap_rules())(jnp.zeros((3, 3)))


def test_sizes_of_the_note():
    def rule(k, i):
        return Disjunction([Disjunct([[1.0, 0.0, 0.0]], [0.5])] * k, f"r{i}")

    rules = RuleSet([0.0] * 3, [1.0] * 3, [rule(k, i) for i, k in enumerate([2, 2, 3, 2, 3])])
    assert hull_size(rules) == {"blocks": 1, "scenarios": 72, "variables": 291}
    assert hull_size(rules, formulation="cnf")["variables"] == 51
    assert hull_size(rules, formulation="partial_dnf", num_dnf_rules=2)["scenarios"] == 4 + 8


def test_hull_layer_matches_cvxpylayers_forward_and_backward():
    """The peer the issue names: cvxpylayers (conic solver + diffcp) on the same lifted QP."""
    pytest.importorskip("cvxpylayers")
    from benchmarks.bench_disjunctive import cvxpylayers_hull_projection

    task = input_decided_regression_task(jax.random.key(4), num_train=2, num_test=6)
    raw = jax.random.uniform(jax.random.key(5), (6, 2), minval=-0.2, maxval=1.2)
    weights = jax.random.normal(jax.random.key(6), raw.shape)
    layer = DisjunctiveLayer(task.rule_set, formulation="cnf")
    peer = cvxpylayers_hull_projection(layer)
    y, info = layer(raw, task.x_test)
    assert bool(info.projected.all())
    np.testing.assert_allclose(y, peer(raw, task.x_test), atol=2e-4)
    g = jax.grad(lambda v: jnp.sum(weights * layer(v, task.x_test)[0]))(raw)
    g_peer = jax.grad(lambda v: jnp.sum(weights * peer(v, task.x_test)))(raw)
    np.testing.assert_allclose(g, g_peer, atol=2e-3)
    assert float(jnp.abs(g).max()) > 0.1


@pytest.mark.parametrize("arm", ["mlp", "penalty", "hull"])
def test_rule_network_trainer_equals_a_hand_written_adam_loop(arm):
    """scan_train's loop against plain ``jax.grad`` + Adam steps in a scan (the same arithmetic)."""
    import optax

    from jaxlab.nn import (
        DisjunctiveLayer,
        rule_network_apply,
        rule_network_init,
        rule_network_trainer,
        rule_penalty,
    )

    task = input_decided_regression_task(jax.random.key(0), num_train=16, num_test=4)
    layer = DisjunctiveLayer(task.rule_set) if arm == "hull" else None
    rules = task.rule_set if arm == "penalty" else None
    params = rule_network_init(jax.random.key(1), 8)
    x, y = task.x_train, task.y_train

    def loss(p):
        raw = rule_network_apply(p, x)
        if layer is not None:
            raw, _ = layer(raw, x)
        value = jnp.mean(jnp.sum((raw - y) ** 2, axis=-1))
        if rules is not None:
            value = value + 0.5 * jnp.mean(rule_penalty(rules, x, raw))
        return value

    tx = optax.adam(1e-2)

    def step(carry, _):
        p, s = carry
        updates, s = tx.update(jax.grad(loss)(p), s, p)
        return (optax.apply_updates(p, updates), s), None

    (want, _), _ = jax.lax.scan(step, (params, tx.init(params)), None, 5)
    got = rule_network_trainer(layer, rules, 5, uses_input=True)(params, x, y, 1e-2, 0.5)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7), got, want)
