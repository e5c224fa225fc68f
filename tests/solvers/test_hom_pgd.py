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

from jaxlab.experiments.hom_pgd import (
    STAR_OPTIMUM,
    STAR_OPTIMUM_VALUE,
    star_constraint,
    star_homeomorphism,
    star_objective,
)
from jaxlab.nn import InvertibleNet, sample_latents, train_homeomorphism
from jaxlab.solvers import HomPGD, HomPGDState, bisection_repair, project_ball


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
    assert 0.0 <= alpha <= 1.0  # between the two ends
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
