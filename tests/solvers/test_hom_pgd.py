"""Hom-PGD⁺: latent projected gradient through a homeomorphism (exact and learned maps)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxlab.nn import InvertibleNet, sample_latents, train_homeomorphism
from jaxlab.solvers import (
    STAR_OPTIMUM,
    STAR_OPTIMUM_VALUE,
    GapSplit,
    HomPGD,
    HomPGDState,
    SolverStatus,
    augmented_lagrangian,
    best_feasible_start,
    bisection_repair,
    exact_projection_pgd,
    gmres_tangent_solve,
    latent_starts,
    penalty_method,
    project_ball,
    qcqp_condition,
    qcqp_condition_sampler,
    qcqp_constraints,
    qcqp_constraints_from_condition,
    qcqp_hom_pgd,
    qcqp_homeomorphism_net,
    qcqp_objective,
    sample_qcqp,
    select_penalty_weight,
    slsqp_multistart,
    slsqp_projection_pgd,
    split_gap,
    star_constraint,
    star_hom_pgd,
    star_homeomorphism,
    star_objective,
    star_projection,
)


def _dense_star_minimum(num_angles: int = 400_000) -> tuple[float, np.ndarray]:
    """Independent truth: min of f over the star's boundary by a dense scan (float64, numpy).

    The interior has no stationary point ((1, 1), the unconstrained minimiser, is outside K),
    so the constrained minimum is on the boundary.
    """
    theta = np.linspace(0.0, 2.0 * np.pi, num_angles, endpoint=False)
    radius = 1.0 + 0.6 * np.sin(4.0 * theta)
    x = radius[:, None] * np.stack([np.cos(theta), np.sin(theta)], 1)
    values = 0.3 * (x[:, 0] - 1.0) ** 2 + 0.7 * (x[:, 1] - 1.0) ** 2
    best = int(np.argmin(values))
    return float(values[best]), x[best]


# --------------------------------------------------------------------------------------------
# The star toy with the exact radial map (the note's checks 1 and 2).


def test_star_exact_map_finds_the_global_optimum(x64):
    f_scan, x_scan = _dense_star_minimum()
    assert f_scan == pytest.approx(STAR_OPTIMUM_VALUE, abs=2e-7)  # the note's check 1
    solver = HomPGD(
        star_objective,
        star_homeomorphism,
        star_constraint,
        stepsize=0.005,
        adaptive_decay=1.0,
        maxiter=20_000,
        tol=1e-9,
    )
    z, state = solver.run(jnp.array([0.3, 0.3]))
    x = np.asarray(star_homeomorphism(z))
    assert float(state.value) == pytest.approx(f_scan, abs=1e-8)
    assert np.allclose(x, x_scan, atol=1e-4)
    assert np.allclose(x, STAR_OPTIMUM, atol=1e-5)
    assert float(state.violation) <= 1e-12
    assert float(jnp.linalg.norm(z)) == pytest.approx(1.0, abs=1e-12)  # optimum on ∂K = Φ(∂𝔹)
    assert float(state.error) <= 1e-9
    assert int(state.iter_num) < 20_000


def test_star_code_stopping_rule_reproduces_note_check_2(x64):
    """Adaptive step + |Δf| <= 1e-5 stop: the note's values per start (two basins)."""
    solver = HomPGD(
        star_objective,
        star_homeomorphism,
        star_constraint,
        stepsize=0.005,
        stopping="objective_change",
        maxiter=5000,
        tol=1e-5,
        jit=False,
    )
    starts = jnp.array([[0.3, 0.3], [0.5, 0.1], [0.9, 0.2], [0.0, 0.1], [0.1, 0.5]])
    z, state = jax.jit(jax.vmap(solver.run))(starts)
    # A second path: the library's factory of the code's configuration (the same program).
    _, factory_state = jax.jit(jax.vmap(star_hom_pgd(5000).run))(starts)
    assert np.array_equal(factory_state.value, state.value)
    expected = [0.030886, 0.030882, 0.030878, 0.284327, 0.284327]
    assert np.allclose(np.asarray(state.value), expected, atol=2e-6)
    assert abs(int(state.iter_num[0]) - 258) <= 2  # "0.030886 after 258 steps"
    assert np.all(np.asarray(state.violation) <= 1e-12)
    assert np.all(np.asarray(state.error) <= 1e-5)


# --------------------------------------------------------------------------------------------
# Solver mechanics on problems with closed-form or reference answers.


def _ball_problem(x, target):
    return 0.5 * jnp.sum((x - target) ** 2) + 0.1 * x[0] * x[1]


def _scaled(z, target):
    return 2.0 * z  # a homeomorphism from the unit ball onto the ball of radius 2


@functools.cache
def _ball_solver(**kwargs):
    options = dict(stepsize=0.1, adaptive_decay=1.0, maxiter=3000, tol=1e-6)
    options.update(kwargs)
    return HomPGD(_ball_problem, _scaled, **options)


def test_matches_jaxopt_projected_gradient_on_a_convex_ball(x64):
    # float64: both solvers stop on their own tolerances, and float32 rounding (which depends on
    # XLA's codegen) would otherwise decide the last digits compared here.
    from jaxopt import ProjectedGradient
    from jaxopt.projection import projection_l2_ball

    target = jnp.array([3.0, -1.0, 0.5])
    reference = ProjectedGradient(_ball_problem, projection_l2_ball, tol=1e-8, maxiter=3000)
    x_ref = reference.run(jnp.zeros(3), hyperparams_proj=2.0, target=target).params
    z, state = _ball_solver().run(jnp.zeros(3), target)
    assert np.allclose(2.0 * z, x_ref, atol=1e-5)
    assert float(jnp.linalg.norm(2.0 * z)) == pytest.approx(2.0, abs=1e-5)


def test_run_equals_the_manual_update_loop():
    solver = _ball_solver(maxiter=40, tol=0.0)
    target = jnp.array([3.0, -1.0, 0.5])
    z = jnp.array([0.1, 0.2, 0.0])
    state = solver.init_state(z, target)
    update = jax.jit(solver.update)
    # The manual twin of run's while loop: step while error > tol (= 0, so only an exact float
    # fixed point stops early) and fewer than maxiter steps were taken.
    while int(state.iter_num) < 40 and float(state.error) > 0.0:
        z, state = update(z, state, target)
    z_run, state_run = solver.run(jnp.array([0.1, 0.2, 0.0]), target)
    assert int(state_run.iter_num) == int(state.iter_num) >= 20
    assert np.allclose(z_run, z, atol=1e-6)
    assert float(state_run.value) == pytest.approx(float(state.value), abs=1e-6)


def test_optimality_fun_vanishes_at_the_solution_and_not_elsewhere():
    solver = _ball_solver()
    target = jnp.array([3.0, -1.0, 0.5])
    z, state = solver.run(jnp.zeros(3), target)
    assert float(jnp.linalg.norm(solver.optimality_fun(z, target))) <= 1e-6
    assert float(state.error) <= 1e-6
    assert int(state.iter_num) < 3000
    assert float(jnp.linalg.norm(solver.optimality_fun(0.5 * z, target))) > 0.1


def test_implicit_gradient_matches_closed_form_and_central_differences(x64):
    """x*(c) = 2c/||c|| for ||c|| > 2 (projection onto the radius-2 ball): d z*/dc known."""

    def fun(x, c):
        return 0.5 * jnp.sum((x - c) ** 2)

    solver = HomPGD(fun, _scaled, stepsize=0.2, adaptive_decay=1.0, maxiter=2000, tol=1e-12)
    c = jnp.array([3.0, -2.0, 1.0])
    jac = jax.jacobian(lambda c: solver.run(jnp.zeros(3), c).params)(c)
    norm = jnp.linalg.norm(c)
    closed_form = (jnp.eye(3) - jnp.outer(c, c) / norm**2) / norm
    assert np.allclose(jac, closed_form, atol=1e-8)
    h = 1e-5
    central = jnp.stack(
        [
            (
                solver.run(jnp.zeros(3), c + h * e).params
                - solver.run(jnp.zeros(3), c - h * e).params
            )
            / (2 * h)
            for e in jnp.eye(3)
        ],
        axis=1,
    )
    assert np.allclose(jac, central, atol=1e-6)


def test_vmap_over_instances_matches_single_runs():
    solver = _ball_solver()
    targets = jnp.array([[3.0, -1.0, 0.5], [0.5, 0.2, 0.1], [-2.0, 2.0, 2.0]])
    z0 = jnp.zeros((3, 3))
    z_batch, state_batch = jax.vmap(solver.run)(z0, targets)
    for i in range(3):
        z, state = solver.run(z0[i], targets[i])
        assert np.allclose(z_batch[i], z, atol=1e-6)
        assert float(state_batch.value[i]) == pytest.approx(float(state.value), abs=1e-6)
    # The second target lies inside the radius-2 ball: an interior optimum, ||z|| < 1.
    assert float(jnp.linalg.norm(z_batch[1])) < 1.0


def _disk(x):
    return jnp.sum(x**2, keepdims=True) - 1.0


def _towards(x):
    return jnp.sum((x - jnp.array([2.0, 0.5])) ** 2)


def test_bisection_repair_keeps_iterates_feasible_when_the_map_overshoots():
    overshoot = lambda z: 1.3 * z  # noqa: E731  Φ(𝔹) is larger than K = unit disk
    kwargs = dict(stepsize=0.05, adaptive_decay=1.0, maxiter=300, tol=0.0)
    repaired = HomPGD(
        _towards,
        overshoot,
        _disk,
        repair="bisection",
        bisection_steps=30,
        bisection_tol=1e-9,
        **kwargs,
    )
    z, state = jnp.zeros(2), repaired.init_state(jnp.zeros(2))
    update = jax.jit(repaired.update)
    worst = 0.0
    for _ in range(300):
        z, state = update(z, state)
        worst = max(worst, float(state.violation))
    assert worst <= repaired.feasibility_tol
    x = 1.3 * z
    # The best feasible point of K = unit disk for this objective: the boundary point toward
    # (2, 0.5); the iterates creep toward it along the boundary.
    x_star = np.array([2.0, 0.5]) / np.linalg.norm([2.0, 0.5])
    assert float(jnp.linalg.norm(x)) == pytest.approx(1.0, abs=1e-4)
    assert np.allclose(x, x_star, atol=2e-2)
    plain = HomPGD(_towards, overshoot, _disk, **kwargs)
    z_plain, state_plain = plain.run(jnp.zeros(2))
    # Without repair the iterate leaves K, and the state reports by how much.
    norm2 = float(jnp.sum((1.3 * z_plain) ** 2))
    assert norm2 > 1.5
    assert float(state_plain.violation) == pytest.approx(norm2 - 1.0, rel=1e-5)


def test_repair_without_a_feasible_anchor_keeps_the_less_violated_point():
    shifted = lambda z: z + jnp.array([3.0, 0.0])  # noqa: E731  Φ(𝔹) misses K entirely
    away = lambda x: jnp.sum((x - jnp.array([5.0, 0.0])) ** 2)  # noqa: E731
    z = jnp.array([-0.5, 0.0])  # x = (2.5, 0): violation ||x||² - 1 = 5.25
    for objective, expected in ((away, [-0.5, 0.0]), (_towards, [-0.6, 0.1])):
        solver = HomPGD(objective, shifted, _disk, repair="bisection", stepsize=0.1, maxiter=5)
        state = solver.init_state(z)
        assert float(state.violation) == pytest.approx(5.25)
        new_z, new_state = solver.update(z, state)
        # Away from K the candidate is more violated and z is kept; toward (2, 0.5) the
        # candidate x = (2.4, 0.1) is less violated (4.77) and is taken.
        assert np.allclose(new_z, expected, atol=1e-6)
        assert float(new_state.violation) <= float(state.violation)


def test_box_and_no_projection():
    linear = lambda x: -jnp.sum(x)  # noqa: E731
    identity = lambda z: z  # noqa: E731
    box = HomPGD(linear, identity, projection="box", stepsize=0.1, maxiter=100, tol=1e-6)
    z, _ = box.run(jnp.array([0.0, 0.5, -0.5]))
    assert np.allclose(z, 1.0)  # the corner of [-1, 1]^3
    ball = HomPGD(linear, identity, stepsize=0.1, maxiter=200, tol=1e-6)
    z, _ = ball.run(jnp.array([0.0, 0.5, -0.5]))
    assert np.allclose(z, 1.0 / np.sqrt(3.0), atol=1e-5)
    free = HomPGD(linear, identity, projection="none", stepsize=0.1, maxiter=10, tol=0.0)
    z, state = free.run(jnp.zeros(3))
    assert np.allclose(z, 1.0)  # 10 unprojected steps of size 0.1
    assert float(state.error) == pytest.approx(np.sqrt(3.0), rel=1e-6)  # ||∇|| (no projection)


def test_adaptive_step_decays_only_when_the_objective_increases():
    # On f = z², a step η multiplies z by (1 - 2η): η = 3 and 1.5 overshoot (f grows), η = 1
    # (the floor) flips the sign (f unchanged), so the step decays twice, then stays.
    solver = HomPGD(
        lambda x: jnp.sum(x**2),
        lambda z: z,
        projection="none",
        stepsize=3.0,
        adaptive_decay=0.5,
        min_stepsize=1.0,
        maxiter=10,
        tol=0.0,
    )
    z, state = jnp.array([0.1]), solver.init_state(jnp.array([0.1]))
    steps, values = [], []
    for _ in range(5):
        z, state = solver.update(z, state)
        steps.append(float(state.stepsize))
        values.append(float(state.value))
    assert steps == pytest.approx([1.5, 1.0, 1.0, 1.0, 1.0])
    assert values == pytest.approx([0.25, 1.0, 1.0, 1.0, 1.0])  # z: 0.1, -0.5, 1, -1, 1, -1
    assert isinstance(state, HomPGDState)


def test_update_is_jittable_with_stable_state_types():
    solver = _ball_solver()
    target = jnp.array([3.0, -1.0, 0.5])
    state = solver.init_state(jnp.zeros(3), target)
    traces = []

    @jax.jit
    def step(z, state):
        traces.append(1)
        return solver.update(z, state, target)

    z = jnp.zeros(3)
    for _ in range(3):
        z, new_state = step(z, state)
        same = jax.tree.map(lambda a, b: (a.shape, a.dtype) == (b.shape, b.dtype), state, new_state)
        assert all(jax.tree.leaves(same))
        state = new_state
    assert len(traces) == 1


# --------------------------------------------------------------------------------------------
# Property tests of the projection and the repair.


@settings(max_examples=40, deadline=None)
@given(
    values=st.lists(st.floats(-10, 10, allow_nan=False), min_size=8, max_size=8),
    radius=st.floats(0.1, 5.0),
)
def test_project_ball_is_feasible_idempotent_nonexpansive(values, radius):
    points = np.asarray(values, np.float32).reshape(2, 4)
    p = np.asarray(project_ball(points, radius))
    assert np.all(np.linalg.norm(p, axis=1) <= radius * (1 + 1e-6))
    assert np.allclose(project_ball(p, radius), p, atol=1e-6 * max(1.0, radius))
    gap_in = np.linalg.norm(points[0] - points[1])
    assert np.linalg.norm(p[0] - p[1]) <= gap_in + 1e-5
    reference = optax.projections.projection_l2_ball(jnp.asarray(points[0]), radius)
    assert np.allclose(p[0], reference, atol=1e-5)
    inside = np.linalg.norm(points, axis=1) <= radius
    assert np.allclose(p[inside], points[inside])


@functools.partial(jax.jit, static_argnums=4)
def _repair_in_disk(z_f, z_c, center, radius, num_steps):
    inside = lambda z: jnp.sum((z - center) ** 2) <= radius**2  # noqa: E731
    return bisection_repair(z_f, z_c, inside, num_steps, tol=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    center=st.tuples(st.floats(-1, 1), st.floats(-1, 1)),
    radius=st.floats(0.5, 2.0),
    anchor=st.tuples(st.floats(-0.4, 0.4), st.floats(-0.4, 0.4)),
    target=st.tuples(st.floats(-6, 6), st.floats(-6, 6)),
    num_steps=st.sampled_from([1, 4, 25]),
)
def test_bisection_output_is_feasible_and_on_the_segment(center, radius, anchor, target, num_steps):
    center = np.asarray(center)
    z_f = center + radius * np.asarray(anchor)  # strictly inside the disk
    z_c = np.asarray(target, np.float64)
    with jax.enable_x64(True):
        out = np.asarray(_repair_in_disk(z_f, z_c, center, radius, num_steps))
    assert np.sum((out - center) ** 2) <= radius**2  # feasible
    d = z_c - z_f
    if np.linalg.norm(d) < 1e-9:
        assert np.allclose(out, z_f)
        return
    alpha = float(np.dot(out - z_f, d) / np.dot(d, d))
    assert np.linalg.norm(out - (z_f + alpha * d)) <= 1e-9 * (1 + np.linalg.norm(d))  # on the line
    assert -1e-12 <= alpha <= 1.0 + 1e-12  # between the two ends (to rounding: subnormal anchors)
    # Independent truth: the exact crossing of the segment with the circle (a quadratic).
    w = z_f - center
    a, b, c = np.dot(d, d), 2 * np.dot(w, d), np.dot(w, w) - radius**2
    crossing = min(1.0, (-b + np.sqrt(b * b - 4 * a * c)) / (2 * a))
    assert alpha <= crossing + 1e-12
    assert crossing - alpha <= 2.0**-num_steps + 1e-12


# --------------------------------------------------------------------------------------------
# The star toy through a learned invertible network.


def test_learned_map_on_the_star_lands_within_tolerance():
    """A small INN trained on the star; Hom-PGD with bisection repair from 16 starts.

    Tolerance (the note's learned-map rule): the best feasible run is within 5% of f*; no
    feasible point can beat f* (an independent lower bound); runs that end feasible have zero
    violation of the true constraint.
    """
    net = InvertibleNet(2, hidden=32, rngs=nnx.Rngs(1))
    latents = sample_latents(jax.random.key(0), 4096, 2)
    trained = train_homeomorphism(
        net,
        star_constraint,
        latents,
        rng_key=jax.random.key(3),
        num_steps=1500,
        batch_size=256,
        chunk_size=500,
    )
    graphdef, params, rest = nnx.split(trained.model, nnx.Param, ...)

    def learned(z, params):
        return nnx.merge(graphdef, params, rest)(z)[0]

    solver = HomPGD(
        lambda x, params: star_objective(x),
        learned,
        lambda x, params: star_constraint(x),
        stepsize=0.005,
        repair="bisection",
        stopping="objective_change",
        bisection_steps=20,
        maxiter=2000,
        implicit_diff=False,
        jit=False,
    )
    starts = project_ball(jax.random.normal(jax.random.key(9), (16, 2)))
    z, state = jax.jit(jax.vmap(solver.run, in_axes=(0, None)))(starts, params)
    values, violations = np.asarray(state.value), np.asarray(state.violation)
    feasible = violations <= solver.feasibility_tol
    assert feasible.sum() >= 8
    assert values[feasible].min() <= 1.05 * STAR_OPTIMUM_VALUE
    assert values[feasible].min() >= STAR_OPTIMUM_VALUE - 1e-5
    # The decoded points, checked against the star in numpy (not the solver's bookkeeping).
    x = np.asarray(jax.vmap(learned, in_axes=(0, None))(z, params), np.float64)[feasible]
    radius = 1.0 + 0.6 * np.sin(4.0 * np.arctan2(x[:, 1], x[:, 0]))
    assert np.all(np.linalg.norm(x, axis=1) <= radius + 2e-5)  # feasibility_tol + float32
    f = 0.3 * (x[:, 0] - 1.0) ** 2 + 0.7 * (x[:, 1] - 1.0) ** 2
    assert np.allclose(f, values[feasible], atol=1e-5)


# --------------------------------------------------------------------------------------------
# Bad input.


def test_bad_input_raises_naming_the_argument():
    f, phi = (lambda x: jnp.sum(x**2)), (lambda z: z)
    with pytest.raises(ValueError, match="stepsize"):
        HomPGD(f, phi, stepsize=0.0)
    with pytest.raises(ValueError, match="adaptive_decay"):
        HomPGD(f, phi, adaptive_decay=1.5)
    with pytest.raises(ValueError, match="min_stepsize"):
        HomPGD(f, phi, stepsize=0.1, min_stepsize=0.2)
    with pytest.raises(ValueError, match="repair"):
        HomPGD(f, phi, repair="clip")
    with pytest.raises(ValueError, match="projection"):
        HomPGD(f, phi, projection="sphere")
    with pytest.raises(ValueError, match="stopping"):
        HomPGD(f, phi, stopping="never")
    with pytest.raises(ValueError, match="constraint_fn"):
        HomPGD(f, phi, repair="bisection")
    with pytest.raises(ValueError, match="bisection_steps"):
        HomPGD(f, phi, _disk, repair="bisection", bisection_steps=0)
    with pytest.raises(ValueError, match="maxiter"):
        HomPGD(f, phi, maxiter=0)
    with pytest.raises(TypeError, match="fun must be callable"):
        HomPGD(1.0, phi)
    with pytest.raises(TypeError, match="homeomorphism must be callable"):
        HomPGD(f, None)
    solver = HomPGD(f, phi)
    with pytest.raises(ValueError, match=r"params must be a latent vector of shape \(n,\)"):
        solver.run(jnp.zeros((2, 2)))
    with pytest.raises(TypeError, match="params must be a floating"):
        solver.init_state(jnp.zeros(2, jnp.int32))
    with pytest.raises(ValueError, match="fun must return a scalar"):
        HomPGD(lambda x: x, phi).init_state(jnp.zeros(2))
    with pytest.raises(ValueError, match="radius"):
        project_ball(jnp.ones(2), radius=0.0)
    with pytest.raises(TypeError, match="z must be a floating"):
        project_ball(jnp.ones(2, jnp.int32))
    with pytest.raises(ValueError, match="same shape"):
        bisection_repair(jnp.zeros(2), jnp.zeros(3), lambda z: True)
    with pytest.raises(ValueError, match="num_steps"):
        bisection_repair(jnp.zeros(2), jnp.ones(2), lambda z: True, num_steps=0)
    with pytest.raises(ValueError, match="is_feasible must return a scalar"):
        bisection_repair(jnp.zeros(2), jnp.ones(2), lambda z: z > 0)


# --------------------------------------------------------------------------------------------
# The problems (star toy, QCQP family) and the multi-start helpers.


def test_sample_qcqp_follows_the_note_and_the_centre_is_feasible():
    keys = jax.random.split(jax.random.key(2030), 200)
    instances = jax.vmap(lambda k: sample_qcqp(k, 4, 5))(keys)
    # x = 0 strictly feasible for every instance (b_j = ||p_j|| + max λ² > 0).
    residuals = jax.vmap(lambda inst: qcqp_constraints(jnp.zeros(4), inst))(instances)
    assert residuals.shape == (200, 5 + 4 + 1)
    assert bool(jnp.all(residuals < 0))
    one = jax.tree.map(lambda a: a[0], instances)
    # Q_j symmetric of rank r = n // 2 = 2, indefinite across the family.
    assert np.allclose(one.constraint_quad, np.transpose(one.constraint_quad, (0, 2, 1)), atol=1e-6)
    ranks = [np.linalg.matrix_rank(np.asarray(q), tol=1e-6) for q in one.constraint_quad]
    assert ranks == [2] * 5
    eigs = np.linalg.eigvalsh(np.asarray(instances.constraint_quad).reshape(-1, 4, 4))
    assert (eigs < -1e-3).any() and (eigs > 1e-3).any()
    # b_j = ||p_j|| + max_k λ_jk² > ||p_j||; p_j ~ N(0, I)/n has E||p_j||² = 1/n.
    norms = np.linalg.norm(np.asarray(instances.constraint_linear), axis=-1)
    assert np.all(np.asarray(instances.constraint_bound) > norms)
    assert np.mean(norms**2) == pytest.approx(1.0 / 4, rel=0.1)
    # U_j has unit-norm columns: trace(n Q_j) = sum_k λ_jk, λ ~ N(0, 1) (mean 0, var r = 2).
    traces = np.trace(4 * np.asarray(instances.constraint_quad), axis1=-2, axis2=-1)
    assert abs(np.mean(traces)) < 0.1 and np.var(traces) == pytest.approx(2.0, rel=0.15)
    condition = qcqp_condition(one)
    assert condition.shape == (5, 4 * 4 + 4 + 1)
    x = jnp.array([0.3, -0.2, 0.1, 0.5])
    assert float(qcqp_objective(x, one)) == pytest.approx(
        float(0.5 * x @ one.quad @ x + one.linear @ x)
    )
    with pytest.raises(ValueError, match="n must be an int >= 2"):
        sample_qcqp(jax.random.key(0), 1, 3)
    with pytest.raises(ValueError, match="m must be an int >= 1"):
        sample_qcqp(jax.random.key(0), 2, 0)


def test_star_projection_is_exact(x64):
    """Against a brute-force nearest boundary point (1e6 angles, numpy)."""
    theta = np.linspace(0.0, 2.0 * np.pi, 1_000_000, endpoint=False)
    radius = 1.0 + 0.6 * np.sin(4.0 * theta)
    boundary = radius[:, None] * np.stack([np.cos(theta), np.sin(theta)], 1)
    project = jax.jit(star_projection)
    rng = np.random.default_rng(0)
    for y in rng.uniform(-2.5, 2.5, (12, 2)):
        x = np.asarray(project(jnp.asarray(y)))
        if float(star_constraint(jnp.asarray(y))[0]) <= 0:
            assert np.allclose(x, y)
            continue
        brute = np.min(np.linalg.norm(boundary - y[None, :], axis=1))
        assert np.linalg.norm(x - y) == pytest.approx(brute, abs=1e-9)
        assert abs(float(star_constraint(jnp.asarray(x))[0])) <= 1e-12


def test_penalty_weight_selection_and_best_feasible_start():
    assert select_penalty_weight({1.0: 0.04, 3.0: 0.09, 10.0: 0.30}) == 1.0
    assert select_penalty_weight({1.0: 0.05, 10.0: 0.05}) == 10.0  # tie: smaller ε_inn
    assert select_penalty_weight({3.0: np.inf, 10.0: 0.2}) == 10.0  # infeasible validation
    with pytest.raises(ValueError, match="validation_gaps"):
        select_penalty_weight({})
    # Best feasible wins even when an infeasible start has a lower value.
    values = np.array([0.5, -3.0, 0.1])
    assert best_feasible_start(values, np.array([0.0, 1.0, 0.0])) == (2, True)
    assert best_feasible_start(values, np.array([3.0, 1.0, 2.0])) == (1, False)
    starts = np.asarray(latent_starts(jax.random.key(0), 5, 2))
    assert starts.shape == (5, 2) and np.all(starts[0] == 0)
    assert np.all(np.linalg.norm(starts, axis=1) <= 0.9 + 1e-6)


def test_qcqp_problem_pieces_agree():
    # The condition-based constraints (what the INN is trained on) equal the direct ones.
    inst = sample_qcqp(jax.random.key(3), 3, 4)
    x = jnp.array([0.4, -1.2, 2.0])
    assert np.allclose(
        qcqp_constraints_from_condition(x, qcqp_condition(inst)), qcqp_constraints(x, inst)
    )
    # The sampler draws sample_qcqp instances (same keys, same conditions).
    keys = jax.random.split(jax.random.key(5), 3)
    expected = jnp.stack([qcqp_condition(sample_qcqp(k, 3, 4)) for k in keys])
    assert np.allclose(qcqp_condition_sampler(3, 4)(jax.random.key(5), 3), expected)
    with pytest.raises(ValueError, match="num_angles"):
        star_projection(jnp.ones(2), num_angles=0)


def test_outside_fraction_matches_the_closed_form_share_of_an_overshooting_map():
    """Φ(z) = 1.5 z on the unit disk, K = unit disk: Φ(z) ∉ K iff ||z|| > 2/3, which uniform
    latents do with probability 1 - (2/3)² = 5/9."""
    solver = HomPGD(lambda x: jnp.sum(x), lambda z: 1.5 * z, _disk)
    latents = sample_latents(jax.random.key(0), 20_000, 2)
    share = float(solver.outside_fraction(latents))
    assert share == pytest.approx(5.0 / 9.0, abs=0.015)  # 4 binomial standard errors
    with pytest.raises(ValueError, match="constraint_fn"):
        HomPGD(lambda x: jnp.sum(x), lambda z: z).outside_fraction(latents)


def test_qcqp_hom_pgd_takes_the_weights_as_an_argument():
    """Two networks of one architecture share one compiled multi-start solve; its end points,
    decoded and checked in numpy, carry the violation the state reports."""
    small = dict(encoder_hidden=4, hidden=4, num_layers=1)  # compile time dominates
    nets = [qcqp_homeomorphism_net(2, **small, rngs=nnx.Rngs(seed)) for seed in (0, 1)]
    solver = qcqp_hom_pgd(nets[0], maxiter=10)
    # The authors' INN-PGD: unprojected steps, bisection repair; the paper's ball on request.
    assert (solver.repair, solver.projection, solver.bisection_steps) == ("radial", "none", 20)
    assert qcqp_hom_pgd(nets[0], projection="ball").projection == "ball"
    with pytest.raises(ValueError, match="projection"):
        qcqp_hom_pgd(nets[0], projection="sphere")
    assert qcqp_hom_pgd(nets[0]).stopping == "none"  # the authors' loop: every step runs
    for bad in (dict(repair="none"), dict(stopping="never")):
        with pytest.raises(ValueError, match=next(iter(bad))):
            qcqp_hom_pgd(nets[0], **bad)
    assert qcqp_hom_pgd(qcqp_homeomorphism_net(3, rngs=nnx.Rngs(0))).maxiter == 30  # 10 n
    traces = []

    def many(z0s, weights, instance):
        traces.append(1)  # runs once per trace: one compiled program for both networks
        return jax.vmap(solver.run, in_axes=(0, None, None))(z0s, weights, instance)

    solve_many = jax.jit(many)
    instance = sample_qcqp(jax.random.key(2030), 2, 3)
    z0s = latent_starts(jax.random.key(1), 4, 2)
    for net in nets:
        weights = nnx.split(net, nnx.Param, ...)[1:]
        zs, states = solve_many(z0s, weights, instance)
        x = np.asarray(jax.vmap(lambda z: net(z, qcqp_condition(instance))[0])(zs), np.float64)
        q, p, qc, pc, bc = (np.asarray(a, np.float64) for a in instance)
        rows = 0.5 * np.einsum("si,mij,sj->sm", x, qc, x) + x @ pc.T - bc
        residuals = np.concatenate(
            [rows, np.abs(x) - 5.0, np.sum(x * x, axis=1, keepdims=True) - 25.0], axis=1
        )
        assert np.allclose(np.maximum(residuals.max(axis=1), 0.0), states.violation, atol=1e-5)
        values = 0.5 * np.einsum("si,ij,sj->s", x, q, x) + x @ p
        assert np.allclose(values, states.value, atol=1e-5)
    assert len(traces) == 1


# --------------------------------------------------------------------------------------------
# The baselines, against closed forms and known optima.


def _ball(y):
    return y / jnp.maximum(1.0, jnp.linalg.norm(y))


def test_exact_projection_pgd_on_a_ball_matches_the_closed_form(x64):
    """min ½||x - c||² over the unit ball: x* = c / ||c||, f* = ½(||c|| - 1)²."""
    c = jnp.array([2.0, -1.0, 2.0])  # ||c|| = 3
    fun = lambda x: 0.5 * jnp.sum((x - c) ** 2)  # noqa: E731
    out = exact_projection_pgd(fun, _ball, jnp.zeros(3), stepsize=0.5, decay=1.0, tol=1e-14)
    assert np.allclose(out.x, c / 3.0, atol=1e-7)
    assert float(out.value) == pytest.approx(2.0, abs=1e-12)
    assert 0 < int(out.iterations) < 2000
    # The step size is an argument of one compiled program (traced), with the same result.
    traces = []

    def solve(eta):
        traces.append(1)  # runs once per trace
        return exact_projection_pgd(fun, _ball, jnp.zeros(3), stepsize=eta)

    run = jax.jit(solve)
    for eta in (0.005, 0.05):
        eager = exact_projection_pgd(fun, _ball, jnp.zeros(3), stepsize=eta)
        assert np.allclose(run(eta).x, eager.x, atol=1e-12)
    assert len(traces) == 1
    with pytest.raises(ValueError, match="stepsize"):
        exact_projection_pgd(fun, _ball, jnp.zeros(3), stepsize=-1.0)


def test_penalty_and_augmented_lagrangian_on_a_known_optimum(x64):
    """min (x - 2)² s.t. x <= 1. The penalty's minimiser at ρ is (4 + ρ)/(2 + ρ) (ρ of the last
    round: 1e3 after the cap); the ALM's multiplier tends to λ* = 2 and x to 1."""
    fun = lambda x: jnp.sum((x - 2.0) ** 2)  # noqa: E731
    constraint = lambda x: x - 1.0  # noqa: E731
    options = dict(outer=80, inner=300, learning_rate=0.01)
    penalty = penalty_method(fun, constraint, jnp.zeros(1), **options)
    assert float(penalty.x[0]) == pytest.approx(1004.0 / 1002.0, abs=2e-3)
    assert int(penalty.iterations) == 80
    alm = augmented_lagrangian(fun, constraint, jnp.zeros(1), **options)
    assert float(alm.x[0]) == pytest.approx(1.0, abs=2e-3)
    assert float(alm.value) == pytest.approx(1.0, abs=5e-3)
    with pytest.raises(ValueError, match="growth"):
        penalty_method(fun, constraint, jnp.zeros(1), growth=0.5)


def _ball_qcqp(radius2: float = 4.0):
    """min -x₁ s.t. ½ xᵀ(2I)x <= radius2 (||x||² <= radius2), box and outer ball inactive."""
    return sample_qcqp(jax.random.key(0), 2, 1)._replace(
        quad=jnp.zeros((2, 2)),
        linear=jnp.array([-1.0, 0.0]),
        constraint_quad=2.0 * jnp.eye(2)[None],
        constraint_linear=jnp.zeros((1, 2)),
        constraint_bound=jnp.array([radius2]),
    )


def test_slsqp_reference_and_slsqp_projection_pgd_find_the_known_optimum():
    instance = _ball_qcqp()  # optimum x* = (2, 0), f* = -2
    best = slsqp_multistart(instance, num_starts=4, seed=0)
    assert best["value"] == pytest.approx(-2.0, abs=1e-6)
    assert np.allclose(best["x"], [2.0, 0.0], atol=1e-4)
    assert best["violation"] <= 1e-6 and best["time_s"] > 0
    pgd = slsqp_projection_pgd(
        instance, np.zeros(2), stepsize=0.1, maxiter=200, tol=1e-9, time_limit_s=60.0
    )
    assert pgd["value"] == pytest.approx(-2.0, abs=1e-5)
    assert pgd["violation"] <= 1e-5 and not pgd["capped"] and pgd["iterations"] < 200
    with pytest.raises(ValueError, match="num_starts"):
        slsqp_multistart(instance, num_starts=0, seed=0)


def test_implicit_gradient_with_gmres_equals_the_dense_one(x64):
    """The same closed-form Jacobian as above through matrix-free GMRES."""

    def fun(x, c):
        return 0.5 * jnp.sum((x - c) ** 2)

    options = dict(stepsize=0.2, adaptive_decay=1.0, maxiter=2000, tol=1e-12)
    dense = HomPGD(fun, _scaled, **options)
    solve = functools.partial(gmres_tangent_solve, tol=1e-12)
    gmres = HomPGD(fun, _scaled, implicit_diff_solve=solve, **options)
    c = jnp.array([3.0, -2.0, 1.0])
    jac_dense = jax.jacobian(lambda c: dense.run(jnp.zeros(3), c).params)(c)
    jac_gmres = jax.jacobian(lambda c: gmres.run(jnp.zeros(3), c).params)(c)
    norm = jnp.linalg.norm(c)
    closed_form = (jnp.eye(3) - jnp.outer(c, c) / norm**2) / norm
    assert np.allclose(jac_dense, closed_form, atol=1e-8)
    assert np.allclose(jac_gmres, closed_form, atol=1e-8)
    # Forward mode goes through the same matrix-free solve.
    jac_forward = jax.jacfwd(lambda c: gmres.run(jnp.zeros(3), c).params)(c)
    assert np.allclose(jac_forward, closed_form, atol=1e-8)


# --------------------------------------------------------------------------------------------
# Status and eager input checks (issue 14).


def test_hom_pgd_status_converged_maxiter_and_nonfinite():
    from jaxlab.solvers import SolverStatus

    # min ||x - c||² over Φ(𝔹) = 2𝔹 with c inside: converged at z = c / 2.
    target = jnp.array([0.5, -0.25])
    fun = lambda x: jnp.sum((x - target) ** 2)  # noqa: E731
    converged = HomPGD(fun, lambda z: 2.0 * z, stepsize=0.1, maxiter=500, tol=1e-6).run(
        jnp.zeros(2)
    )
    assert int(converged.state.status) == SolverStatus.CONVERGED
    np.testing.assert_allclose(converged.params, target / 2, atol=1e-6)
    capped = HomPGD(fun, lambda z: 2.0 * z, stepsize=0.01, maxiter=4).run(jnp.zeros(2))
    assert int(capped.state.status) == SolverStatus.MAXITER and int(capped.state.iter_num) == 4
    # log(1 - x₁) pushes x₁ = 2 z₁ past 1 in one step: the value is NaN there.
    blown = HomPGD(lambda x: jnp.log(1.0 - x[0]), lambda z: 2.0 * z, stepsize=1.0).run(
        jnp.array([0.1, 0.0])
    )
    assert int(blown.state.status) == SolverStatus.NONFINITE
    assert int(blown.state.iter_num) == 1 and np.isnan(float(blown.state.value))


def test_objective_change_rule_with_infinite_error_is_not_nonfinite():
    # An infeasible iterate has error = inf under "objective_change": that is "not feasible yet".
    from jaxlab.solvers import SolverStatus

    solver = HomPGD(
        lambda x: -x[0],
        lambda z: 2.0 * z,  # overshoots the unit disk K
        lambda x: jnp.sum(x**2, keepdims=True) - 1.0,
        stopping="objective_change",
        stepsize=0.5,
        maxiter=5,
    )
    out = solver.run(jnp.array([0.9, 0.0]))
    assert np.isinf(float(out.state.error))
    assert int(out.state.status) == SolverStatus.MAXITER


def test_problem_functions_name_the_mismatched_argument():
    from jaxlab.solvers import qcqp_objective, sample_qcqp, star_objective, star_projection

    instance = sample_qcqp(jax.random.key(0), 3, 2)
    with pytest.raises(ValueError, match=r"x must have shape \(n,\) = \(3,\)"):
        qcqp_objective(jnp.zeros(2), instance)
    with pytest.raises(TypeError, match="rng_key must be a JAX PRNG key"):
        sample_qcqp(None, 3, 2)
    with pytest.raises(ValueError, match=r"x must be a point of the plane"):
        star_objective(jnp.zeros(3))
    with pytest.raises(ValueError, match=r"y must be a point of the plane"):
        star_projection(jnp.zeros((2, 2)))


# --------------------------------------------------------------------------------------------
# The gap split: coverage of the map against the optimizer (issue 41).


def test_split_gap_parts_add_up_and_match_hand_values():
    """coverage + optimizer = gap to the best reference; values against a hand computation."""
    hom = np.array([-0.9, -2.0, 1.0])
    reach = np.array([-0.95, -2.1, 0.5])
    local = np.array([-0.97, -2.0, 0.4])
    multi = np.array([-1.0, -2.2, 0.5])
    split = split_gap(hom, reach, local, multi)
    assert isinstance(split, GapSplit)
    reference = np.minimum(local, multi)  # [-1.0, -2.2, 0.4]
    np.testing.assert_allclose(
        split.coverage + split.optimizer, (hom - reference) / np.abs(reference)
    )
    np.testing.assert_allclose(split.coverage, [0.05, 0.1 / 2.2, 0.25])
    np.testing.assert_allclose(split.optimizer, [0.05, 0.1 / 2.2, 1.25])
    np.testing.assert_allclose(split.end_to_end_local, [0.07 / 0.97, 0.0, 1.5])
    np.testing.assert_allclose(split.end_to_end_multistart, [0.1, 0.2 / 2.2, 1.0])
    # No feasible point anywhere (inf) gives NaN gaps, never a silent number.
    assert np.isnan(split_gap(np.inf, -1.0, -1.0, -1.0).coverage)
    with pytest.raises(ValueError, match="reachable"):
        split_gap(-1.0, np.nan, -1.0, -1.0)


def test_reachable_value_finds_the_best_point_of_the_covered_set():
    """Φ(z) = 0.9 z onto part of the unit disk K: the best point of Φ(𝔹) ∩ K for a linear f is
    known in closed form (-0.9 c/||c||), and a map that overshoots K is cut back to K."""
    c = jnp.array([1.0, 2.0])
    disk = lambda x: jnp.sum(x**2, keepdims=True) - 1.0  # noqa: E731
    latents = sample_latents(jax.random.key(0), 512, 2)
    inner = HomPGD(lambda x: c @ x, lambda z: 0.9 * z, disk, maxiter=200, stepsize=0.05)
    value, x = inner.reachable_value(latents)
    assert float(value) == pytest.approx(-0.9 * float(jnp.linalg.norm(c)), abs=2e-3)
    np.testing.assert_allclose(x, -0.9 * c / jnp.linalg.norm(c), atol=2e-2)
    # Φ(𝔹) = disk of radius 1.5 ⊃ K: reachable = the best feasible point, min over K (-||c||).
    outer = HomPGD(
        lambda x: c @ x, lambda z: 1.5 * z, disk, repair="bisection", maxiter=200, stepsize=0.05
    )
    value, _ = outer.reachable_value(latents)
    assert float(value) == pytest.approx(-float(jnp.linalg.norm(c)), abs=5e-3)
    # A map entirely outside K reaches nothing.
    far = HomPGD(lambda x: c @ x, lambda z: z + 3.0, disk)
    assert float(far.reachable_value(latents)[0]) == np.inf
    with pytest.raises(ValueError, match="num_refine"):
        inner.reachable_value(latents, num_refine=0)


def test_authors_qcqp_rule_slides_where_the_last_iterate_anchor_stalls():
    """Issue 41: f = ||x - (0, 2)||² over the unit disk (Φ = identity, so f* = 1 at (0, 1)).
    The last-iterate bisection anchor stalls where the first step hits the circle (every later
    step points out of K and is cut back to nothing), and the |Δf| rule stops right after that
    cut step; running the whole budget (the authors' loop) alone changes nothing there. The
    authors' radial repair toward z = 0 keeps the step's tangential part and reaches f*."""
    target = jnp.array([0.0, 2.0])

    def fun(x):
        return jnp.sum((x - target) ** 2)

    z0 = jnp.array([0.9, -0.3])
    common = dict(stepsize=0.1, projection="none", maxiter=60, tol=1e-5)

    def solve(repair, stopping):
        return HomPGD(fun, lambda z: z, _disk, repair=repair, stopping=stopping, **common).run(z0)

    z_old, old = solve("bisection", "objective_change")  # jaxlab's earlier QCQP rule
    assert int(old.status) == SolverStatus.CONVERGED and int(old.iter_num) < 10
    assert float(jnp.linalg.norm(z_old)) == pytest.approx(1.0, abs=1e-4)  # on the circle
    # The next plain step from there leaves K: the stop came after a repaired (cut) step.
    assert float(jnp.linalg.norm(z_old - 0.1 * jax.grad(fun)(z_old))) > 1.0
    assert float(old.value) == pytest.approx(1.3873, abs=1e-3)  # stalled at (0.429, 0.903)
    _, full_budget = solve("bisection", "none")
    assert int(full_budget.status) == SolverStatus.MAXITER and int(full_budget.iter_num) == 60
    assert float(full_budget.value) == pytest.approx(float(old.value), abs=1e-6)
    z_new, new = solve("radial", "none")  # the authors' rule (qcqp_hom_pgd's default)
    assert int(new.status) == SolverStatus.MAXITER and int(new.iter_num) == 60
    assert float(new.violation) == 0.0  # the feasible end of the bracket
    assert float(new.value) < 1.001 < float(old.value) - 0.3
    np.testing.assert_allclose(np.asarray(z_new), [0.0, 1.0], atol=1e-3)
    assert float(new.error) == np.inf  # "none" never stops early
    with pytest.raises(ValueError, match="constraint_fn"):
        HomPGD(fun, lambda z: z, repair="radial")


def test_split_gap_counts_the_hom_pgd_end_point_as_reachable():
    """A Hom-PGD end point better than the sampled reachable value: the optimizer part is 0
    (never negative) and coverage is measured from Hom-PGD's point; the parts still add up."""
    split = split_gap([-0.96, -0.9], [-0.95, -0.95], [-0.97, -0.97], [-1.0, -1.0])
    np.testing.assert_allclose(split.optimizer, [0.0, 0.05])
    np.testing.assert_allclose(split.coverage, [0.04, 0.05])
    np.testing.assert_allclose(split.coverage + split.optimizer, [0.04, 0.1])
    assert np.isnan(split_gap(np.inf, -0.95, -0.97, -1.0).optimizer)  # infeasible end: no gap
