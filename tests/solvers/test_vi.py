"""Stochastic VI solvers (jaxlab/solvers/_vi.py) against closed forms and hand-written loops.

Independent truths used here: the planted solutions of the test problems, the spectral radius of
the deterministic one-step matrix computed with numpy (and the note's table), hand-written numpy
loops of each method, and Monte-Carlo moments of the oracles. Everything runs in float64.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from optax.projections import projection_box

from jaxlab import solvers as vi

pytestmark = pytest.mark.usefixtures("x64")


def tree_l2_norm(tree) -> float:
    """The Euclidean norm of a pytree in NumPy float64 (independent of the solvers' optax.tree)."""
    return float(
        np.sqrt(sum(np.sum(np.asarray(x, np.float64) ** 2) for x in jax.tree.leaves(tree)))
    )


def _run_seeds(solver, init_params, seeds, *args):
    """``solver.run`` for several oracle seeds at once (one compile)."""
    keys = jax.random.split(jax.random.key(1234), seeds)
    plain = dataclasses.replace(solver, jit=False)
    return jax.jit(jax.vmap(lambda key: plain.run(init_params, *args, rng_key=key)))(keys)


def _distance(a, b) -> float:
    return float(tree_l2_norm(jax.tree.map(jnp.subtract, a, b)))


# --------------------------------------------------------------------------------------------
# Monotone bilinear games converge to the known solution.


def test_bilinear_interior_converges_to_planted_solution():
    # y* > 0: the solution is unique; noise variance 0.25 * 10 * ||z||^2 per call.
    problem = vi.bilinear_nonnegative(jax.random.key(1), 10, 0.5, active_constraints=False)
    init = jax.tree.map(jnp.zeros_like, problem.solution)
    solver = vi.StochasticExtragradient(
        operator_fn=problem.operator_fn,
        exact_operator_fn=problem.exact_operator_fn,
        projection=problem.projection,
        stepsize=0.5 / problem.lipschitz,
        batch_schedule=vi.polynomial_batch_schedule(1, 2),
        maxiter=300,
    )
    out = _run_seeds(solver, init, 3)
    scale = float(tree_l2_norm(problem.solution))
    for seed in range(3):
        feasible = jax.tree.map(lambda x, i=seed: x[i], out.state.feasible_params)
        assert _distance(feasible, problem.solution) <= 0.02 * scale  # measured 0.4-0.7%
    # Two batches of (k+1)^2 per step: sum_k 2 (k+1)^2 = K(K+1)(2K+1)/3 calls.
    np.testing.assert_array_equal(out.state.oracle_calls, 300 * 301 * 601 // 3)


def test_bilinear_with_active_constraints_converges_to_solution_set():
    # y* has zeros with positive slack: y* is unique, x* is not (any x with the right slack).
    problem = vi.bilinear_nonnegative(jax.random.key(2), 6, 0.0, active_constraints=True)
    init = jax.tree.map(jnp.zeros_like, problem.solution)
    solver = vi.StochasticExtragradient(
        operator_fn=problem.operator_fn,
        exact_operator_fn=problem.exact_operator_fn,
        projection=problem.projection,
        stepsize=0.5 / problem.lipschitz,
        maxiter=3000,
        tol=1e-10,
    )
    out = solver.run(init, rng_key=jax.random.key(0))
    x, y = out.state.feasible_params
    assert float(out.state.error) <= 1e-10
    np.testing.assert_allclose(y, problem.solution[1], atol=1e-8)
    assert bool(jnp.all(y >= 0))
    # The x-part satisfies A^T x = c - s' with s' >= 0 supported where y* = 0 (via F(z) = 0 there).
    _, gap = problem.exact_operator_fn((x, y))
    zero = np.asarray(problem.solution[1]) == 0
    np.testing.assert_allclose(np.asarray(gap)[~zero], 0.0, atol=1e-8)
    assert np.all(np.asarray(gap)[zero] >= -1e-8)


def test_noiseless_fbf_equals_eg_and_a_numpy_extragradient_loop():
    # Note's check 2: with σ = 0 and no active projection, FBF (α = 1) is EG step for step.
    problem = vi.bilinear_nonnegative(jax.random.key(3), 5, 0.0, active_constraints=False)
    init = (jnp.ones(5), jnp.ones(5))
    gamma, steps = 0.2, 25
    runs = {}
    for variant in ("fbf", "eg"):
        solver = vi.StochasticExtragradient(
            operator_fn=problem.operator_fn, stepsize=gamma, variant=variant, maxiter=steps
        )
        runs[variant] = solver.run(init, rng_key=jax.random.key(0)).params
    z = np.concatenate([np.asarray(v) for v in init])

    def F(z):
        out = problem.exact_operator_fn((jnp.asarray(z[:5]), jnp.asarray(z[5:])))
        return np.concatenate([np.asarray(v) for v in out])

    for _ in range(steps):
        z = z - gamma * F(z - gamma * F(z))
    for variant, params in runs.items():
        np.testing.assert_allclose(
            np.concatenate(params), z, rtol=1e-12, atol=1e-12, err_msg=variant
        )


def _numpy_loops(problem, init, gamma, steps, alpha):
    """Hand-written numpy versions of the three methods on a noiseless problem."""
    d = init[0].shape[0]

    def F(z):
        out = problem.exact_operator_fn((jnp.asarray(z[:d]), jnp.asarray(z[d:])))
        return np.concatenate([np.asarray(v) for v in out])

    def P(z):
        return np.concatenate([z[:d], np.maximum(z[d:], 0.0)])

    z0 = np.concatenate([np.asarray(v) for v in init])
    sgda, fbf, halpern = z0.copy(), z0.copy(), z0.copy()
    for k in range(steps):
        sgda = P(sgda - gamma * F(sgda))
        bar = P(fbf - gamma * F(fbf))
        fbf = fbf + alpha * (bar - gamma * (F(bar) - F(fbf)) - fbf)
        bar = P(halpern - gamma * F(halpern))
        beta = 1.0 / (k + 2)
        halpern = beta * z0 + (1 - beta) * (bar - gamma * (F(bar) - F(halpern)))
    return {"sgda": sgda, "fbf": fbf, "halpern": halpern}


def test_solvers_match_numpy_loops_with_projection():
    problem = vi.bilinear_nonnegative(jax.random.key(4), 4, 0.0)
    init = (jnp.linspace(-1.0, 1.0, 4), jnp.linspace(-0.5, 1.5, 4))  # y infeasible at the start
    gamma, steps, alpha = 0.2, 30, 0.7
    common = dict(operator_fn=problem.operator_fn, projection=problem.projection, stepsize=gamma)
    solvers = {
        "sgda": vi.StochasticGradientDescentAscent(maxiter=steps, **common),
        "fbf": vi.StochasticExtragradient(relaxation=alpha, maxiter=steps, **common),
        "halpern": vi.HalpernExtragradient(maxiter=steps, **common),
    }
    expected = _numpy_loops(problem, init, gamma, steps, alpha)
    for name, solver in solvers.items():
        params = solver.run(init, rng_key=jax.random.key(0)).params
        np.testing.assert_allclose(
            np.concatenate(params), expected[name], rtol=1e-11, atol=1e-11, err_msg=name
        )


# --------------------------------------------------------------------------------------------
# The 2-D weak-Minty example.

# Note's table (b = 1): spectral radius of one deterministic step.
_NOTE_TABLE = {
    -0.1: {"gda": 1.0148, "eg": 1.1990, "eg+0.5": 0.8180, "eg+0.25": 0.8349},
    -0.3: {"gda": 1.0332, "eg": 1.5747, "eg+0.5": 1.0470, "eg+0.25": 0.9419},
}
_RADIUS_STEPS = 30


def _numpy_radius(a, gamma, alpha, method="eg"):
    M = np.array([[a, 1.0], [-1.0, a]])
    identity = np.eye(2)
    if method == "gda":
        step = identity - gamma * M
    else:
        step = identity - alpha * gamma * M @ (identity - gamma * M)
    return float(np.max(np.abs(np.linalg.eigvals(step))))


def _measured_radii(a, method, gammas, alphas):
    """(||z_K|| / ||z_0||)^(1/K) of the solver's deterministic iterates, one compile per call.

    M is a scaled rotation, so every one-step map is normal with conjugate eigenvalues and the
    norm is multiplied by exactly the spectral radius each step.
    """
    problem = vi.weak_minty_2d(a, 1.0, noise=0.0)

    def radius(gamma, alpha):
        if method == "gda":
            solver = vi.StochasticGradientDescentAscent(
                operator_fn=problem.operator_fn, stepsize=gamma, maxiter=_RADIUS_STEPS, jit=False
            )
        else:
            solver = vi.StochasticExtragradient(
                operator_fn=problem.operator_fn,
                stepsize=gamma,
                relaxation=alpha,
                maxiter=_RADIUS_STEPS,
                jit=False,
            )
        out = solver.run(jnp.asarray([1.0, 0.0]), rng_key=jax.random.key(0))
        return jnp.linalg.norm(out.params) ** (1.0 / _RADIUS_STEPS)

    return np.asarray(jax.jit(jax.vmap(radius))(jnp.asarray(gammas), jnp.asarray(alphas)))


@pytest.mark.parametrize("a", [-0.1, -0.3])
def test_weak_minty_radii_match_note_table_and_closed_form(a):
    L = vi.weak_minty_2d(a, 1.0).lipschitz
    rows = [("eg", 1.0 / L, 1.0), ("eg+0.5", 1.0 / L, 0.5), ("eg+0.25", 1.0 / L, 0.25)]
    measured = _measured_radii(a, "eg", [r[1] for r in rows], [r[2] for r in rows])
    (gda,) = _measured_radii(a, "gda", [0.1 / L], [1.0])
    for (name, gamma, alpha), value in zip(rows, measured, strict=True):
        assert value == pytest.approx(_NOTE_TABLE[a][name], abs=6e-5), name
        assert value == pytest.approx(_numpy_radius(a, gamma, alpha), rel=1e-9), name
    assert gda == pytest.approx(_NOTE_TABLE[a]["gda"], abs=6e-5)
    assert gda == pytest.approx(_numpy_radius(a, 0.1 / L, 1.0, "gda"), rel=1e-9)


def test_eg_plus_switches_where_rho_equals_gamma_times_one_minus_alpha():
    problem = vi.weak_minty_2d(-0.3, 1.0)
    L, rho = problem.lipschitz, problem.weak_minty_rho
    gamma = 1.0 / L
    threshold = 1.0 - rho / gamma  # ρ < γ(1 - α)  <=>  α < 1 - ρ/γ
    # Independently: bisect the numpy spectral radius for the α where it crosses 1.
    low, high = 0.1, 0.9
    for _ in range(60):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if _numpy_radius(-0.3, gamma, mid) < 1 else (low, mid)
    assert threshold == pytest.approx(low, abs=1e-10)
    assert threshold == pytest.approx(0.4252, abs=2e-4)  # the note's (truncated) 0.4252
    alphas = [threshold - 0.05, threshold - 0.005, threshold + 0.005, threshold + 0.05]
    radii = _measured_radii(-0.3, "eg", [gamma] * 4, alphas)
    np.testing.assert_array_less(radii[:2], 1.0)
    np.testing.assert_array_less(1.0, radii[2:])


def test_plain_eg_diverges_for_every_step_on_the_separating_example():
    # a = -0.3: EG (α = 1) diverges for every γ ∈ (0, 2/L] (its radius tends to 1 from above as
    # γ -> 0), while for a = -0.1 a small step converges (the note: 0.9714 at γL = 0.555).
    L = vi.weak_minty_2d(-0.3, 1.0).lipschitz
    gammas = np.linspace(0.01, 2.0, 200) / L
    radii = _measured_radii(-0.3, "eg", gammas, np.ones_like(gammas))
    assert radii.min() > 1.0
    closed_form = [_numpy_radius(-0.3, gamma, 1.0) for gamma in gammas]
    np.testing.assert_allclose(radii, closed_form, rtol=1e-9)
    L1 = vi.weak_minty_2d(-0.1, 1.0).lipschitz
    (small,) = _measured_radii(-0.1, "eg", [0.555 / L1], [1.0])
    assert small == pytest.approx(0.9714, abs=1e-4)


def test_stochastic_weak_minty_eg_plus_converges_where_eg_blows_up():
    problem = vi.weak_minty_2d(-0.3, 1.0, noise=0.1)
    init = jnp.asarray([1.0, 0.0])
    results = {}
    for alpha in (1.0, 0.25):
        solver = vi.StochasticExtragradient(
            operator_fn=problem.operator_fn,
            exact_operator_fn=problem.exact_operator_fn,
            stepsize=1.0 / problem.lipschitz,
            relaxation=alpha,
            batch_schedule=vi.polynomial_batch_schedule(1, 2),
            maxiter=300,
        )
        results[alpha] = _run_seeds(solver, init, 3)
    initial = problem.lipschitz  # res(z_0) = ||M z_0|| with ||z_0|| = 1
    assert np.all(np.asarray(results[0.25].state.error) < 1e-6 * initial)
    assert np.all(np.linalg.norm(np.asarray(results[1.0].params), axis=-1) > 1e6)


# --------------------------------------------------------------------------------------------
# Unbounded domain, variance growing like ||z||^2: the residual keeps falling.


@jax.jit
def _residual_by_calls(keys):
    problem = vi.bilinear_nonnegative(jax.random.key(0), 10, 0.5)
    init = jax.tree.map(jnp.zeros_like, problem.solution)
    solver = vi.StochasticExtragradient(
        operator_fn=problem.operator_fn,
        exact_operator_fn=problem.exact_operator_fn,
        projection=problem.projection,
        stepsize=0.25,
        batch_schedule=vi.polynomial_batch_schedule(1, 1),
    )

    def one(key):
        state = solver.init_state(init, rng_key=key)

        def body(carry, _):
            params, state = solver.update(*carry)
            return (params, state), (state.error, state.oracle_calls)

        _, (errors, calls) = jax.lax.scan(body, (init, state), None, length=1000)
        return errors, calls

    return jax.vmap(one)(keys)


def test_unbounded_bilinear_residual_keeps_falling_with_growing_batches():
    errors, calls = _residual_by_calls(jax.random.split(jax.random.key(5), 3))
    errors, calls = np.asarray(errors), np.asarray(calls)
    # p = 1: K steps cost K(K+1) calls: 10^4, 10^5, 10^6 calls at K ~ 100, 316, 1000.
    at = [int(np.searchsorted(calls[0], c)) for c in (10**4, 10**5, 10**6 - 1)]
    medians = np.median(errors[:, at], axis=0)
    assert medians[1] <= 0.8 * medians[0] and medians[2] <= 0.8 * medians[1], medians
    assert np.all(np.isfinite(errors))
    assert calls[0, -1] == 1000 * 1001


def test_oracle_variance_grows_like_norm_squared_and_batches_average():
    # E||F̂(z) - F(z)||^2 = σ² d ||z||² / b, for the closed-form batch and for minibatch_operator.
    sigma, d = 0.5, 3
    problem = vi.bilinear_nonnegative(jax.random.key(6), d, sigma)
    z = (jnp.asarray([1.0, -2.0, 0.5]), jnp.asarray([0.0, 3.0, 1.0]))
    exact = problem.exact_operator_fn(z)
    one_call = vi.minibatch_operator(lambda z, key: problem.operator_fn(z, key, 1))
    keys = jax.random.split(jax.random.key(7), 3000)

    @jax.jit
    def squared_errors(batch):
        def error(operator_fn, key):
            estimate = operator_fn(z, key, batch)
            return sum(jnp.sum((e - f) ** 2) for e, f in zip(estimate, exact, strict=True))

        closed_form = jax.vmap(lambda k: error(problem.operator_fn, k))(keys)
        averaged = jax.vmap(lambda k: error(one_call, k))(keys)
        return closed_form, averaged

    norm_sq = float(tree_l2_norm(z) ** 2)
    for batch in (1, 8):
        expected = sigma**2 * d * norm_sq / batch
        for err in squared_errors(jnp.int32(batch)):
            err = np.asarray(err)
            standard_error = err.std() / np.sqrt(err.size)
            assert abs(err.mean() - expected) <= 4 * standard_error, (batch, err.mean(), expected)


# --------------------------------------------------------------------------------------------
# Manual loop, counting, estimators.


def test_manual_update_loop_equals_run_on_noisy_projected_problem():
    problem = vi.bilinear_nonnegative(jax.random.key(8), 4, 0.5)
    init = (jnp.ones(4), -jnp.ones(4))
    solver = vi.HalpernExtragradient(
        operator_fn=problem.operator_fn,
        exact_operator_fn=problem.exact_operator_fn,
        projection=problem.projection,
        stepsize=0.2,
        estimator="recursive",
        restart_every=3,
        recursive_batch_size=2,
        maxiter=20,
    )
    key = jax.random.key(9)
    out = solver.run(init, rng_key=key)
    params, state = init, solver.init_state(init, rng_key=key)
    update = jax.jit(solver.update)
    for _ in range(20):
        params, state = update(params, state)
    np.testing.assert_allclose(np.concatenate(out.params), np.concatenate(params), rtol=1e-12)
    assert int(out.state.oracle_calls) == int(state.oracle_calls)
    # Restarts at k = 0, 3, ..., 18 cost 2 (k+1) calls; the other steps 4 x 2.
    restarts = [k for k in range(20) if k % 3 == 0]
    expected = sum(2 * (k + 1) for k in restarts) + 4 * 2 * (20 - len(restarts))
    assert int(state.oracle_calls) == expected


def test_recursive_estimator_is_exact_without_noise():
    problem = vi.bilinear_nonnegative(jax.random.key(10), 4, 0.0)
    init = (jnp.ones(4), jnp.ones(4))
    common = dict(
        operator_fn=problem.operator_fn, projection=problem.projection, stepsize=0.2, maxiter=15
    )
    minibatch = vi.HalpernExtragradient(**common).run(init, rng_key=jax.random.key(0))
    recursive = vi.HalpernExtragradient(estimator="recursive", restart_every=4, **common).run(
        init, rng_key=jax.random.key(0)
    )
    np.testing.assert_allclose(
        np.concatenate(recursive.params), np.concatenate(minibatch.params), rtol=1e-10, atol=1e-12
    )


def test_error_without_exact_operator_is_the_step_length():
    problem = vi.weak_minty_2d(-0.1, 1.0)
    gamma = 0.5
    solver = vi.StochasticExtragradient(operator_fn=problem.operator_fn, stepsize=gamma, maxiter=1)
    z0 = jnp.asarray([1.0, 2.0])
    out = solver.run(z0, rng_key=jax.random.key(0))
    M = np.array([[-0.1, 1.0], [-1.0, -0.1]])
    bar = np.asarray(z0) - gamma * M @ np.asarray(z0)
    hat = np.asarray(z0) - gamma * M @ bar
    assert float(out.state.error) == pytest.approx(np.linalg.norm(hat - np.asarray(z0)) / gamma)
    assert np.isinf(float(solver.init_state(z0, rng_key=jax.random.key(0)).error))


def test_natural_residual_is_zero_exactly_at_planted_solutions():
    for key in range(3):
        problem = vi.bilinear_nonnegative(jax.random.key(key), 6, 0.5)
        for gamma in (0.1, 1.0, 3.0):
            res = vi.natural_residual(
                problem.exact_operator_fn,
                problem.solution,
                projection=problem.projection,
                stepsize=gamma,
            )
            assert float(res) <= 1e-12
        shifted = (problem.solution[0] + 0.01, problem.solution[1])
        assert (
            float(
                vi.natural_residual(
                    problem.exact_operator_fn, shifted, projection=problem.projection
                )
            )
            > 1e-3
        )


@settings(max_examples=25, deadline=None)
@given(
    b0=st.integers(1, 50),
    power=st.integers(0, 3),
    k=st.integers(0, 500),
)
def test_polynomial_batch_schedule_is_the_exact_ceiling(b0, power, k):
    value = int(vi.polynomial_batch_schedule(b0, power)(k))
    assert value == min(b0 * (k + 1) ** power, 2**31 - 1)
    assert int(vi.polynomial_batch_schedule(b0, power)(k + 1)) >= value


@settings(max_examples=20, deadline=None)
@given(b0=st.floats(1.0, 20.0), power=st.floats(0.0, 2.5), k=st.integers(0, 300))
def test_polynomial_batch_schedule_real_parameters(b0, power, k):
    value = int(vi.polynomial_batch_schedule(b0, power)(k))
    exact = b0 * (k + 1) ** power
    assert exact <= value + 1e-6 * exact and value < exact + 1 + 1e-6 * exact


# --------------------------------------------------------------------------------------------
# Bad input fails early, naming the argument.


def _operator(z, key, batch_size):
    return -z


@pytest.mark.parametrize("cls", [vi.StochasticExtragradient, vi.HalpernExtragradient])
@pytest.mark.parametrize(
    "stepsize", [0.0, -0.1, float("nan"), float("inf"), np.float64(-1.0), np.array(float("nan"))]
)
def test_non_positive_step_raises(cls, stepsize):
    with pytest.raises(ValueError, match="stepsize"):
        cls(operator_fn=_operator, stepsize=stepsize)


@pytest.mark.parametrize("relaxation", [0.0, -0.5, 1.01, 2.0, np.array(1.5), float("nan")])
def test_relaxation_outside_unit_interval_raises(relaxation):
    with pytest.raises(ValueError, match=r"relaxation must be finite and in \(0.0, 1.0\]"):
        vi.StochasticExtragradient(operator_fn=_operator, stepsize=0.1, relaxation=relaxation)


def test_relaxation_one_is_allowed():
    solver = vi.StochasticExtragradient(operator_fn=_operator, stepsize=0.1, relaxation=1.0)
    assert solver.relaxation == 1.0  # the closed end of (0, 1] is accepted, not clamped


@pytest.mark.parametrize(
    "cls", [vi.StochasticExtragradient, vi.HalpernExtragradient, vi.StochasticGradientDescentAscent]
)
def test_operator_output_shape_mismatch_raises(cls):
    solver = cls(operator_fn=lambda z, key, b: jnp.zeros(3), stepsize=0.1, maxiter=2)
    with pytest.raises(ValueError, match=r"operator_fn.*shapes.*float64\[3\].*float64\[2\]"):
        solver.run(jnp.zeros(2), rng_key=jax.random.key(0))
    with pytest.raises(ValueError, match="operator_fn"):
        solver.init_state(jnp.zeros(2), rng_key=jax.random.key(0))


def test_operator_structure_and_dtype_mismatch_raise():
    solver = vi.StochasticExtragradient(operator_fn=lambda z, key, b: z[0], stepsize=0.1)
    with pytest.raises(ValueError, match="operator_fn"):
        solver.init_state((jnp.zeros(2), jnp.zeros(2)), rng_key=jax.random.key(0))
    solver = vi.StochasticExtragradient(
        operator_fn=lambda z, key, b: z.astype(jnp.float32), stepsize=0.1
    )
    with pytest.raises(ValueError, match="operator_fn"):
        solver.init_state(jnp.zeros(2), rng_key=jax.random.key(0))
    solver = vi.StochasticExtragradient(
        operator_fn=_operator, exact_operator_fn=lambda z: z[:1], stepsize=0.1
    )
    with pytest.raises(ValueError, match="exact_operator_fn"):
        solver.init_state(jnp.zeros(2), rng_key=jax.random.key(0))
    solver = vi.StochasticExtragradient(
        operator_fn=_operator, projection=lambda z: z[:1], stepsize=0.1
    )
    with pytest.raises(ValueError, match="projection"):
        solver.init_state(jnp.zeros(2), rng_key=jax.random.key(0))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"variant": "ogda"}, ValueError, "variant"),
        ({"operator_fn": None}, TypeError, "operator_fn"),
        ({"batch_schedule": 4}, TypeError, "batch_schedule"),
        ({"implicit_diff": True}, ValueError, "exact_operator_fn"),
        ({"residual_stepsize": 0.0}, ValueError, "residual_stepsize"),
        ({"maxiter": 0}, ValueError, "maxiter"),
        ({"stepsize": "0.1"}, TypeError, "stepsize"),
    ],
)
def test_extragradient_rejects_bad_fields(kwargs, error, match):
    fields = {"operator_fn": _operator, "stepsize": 0.1, **kwargs}
    with pytest.raises(error, match=match):
        vi.StochasticExtragradient(**fields)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"estimator": "saga"}, ValueError, "estimator"),
        ({"restart_every": 0}, ValueError, "restart_every"),
        ({"restart_every": 2.5}, TypeError, "restart_every"),
        ({"recursive_batch_size": 0}, ValueError, "recursive_batch_size"),
        ({"anchor_schedule": 0.5}, TypeError, "anchor_schedule"),
    ],
)
def test_halpern_rejects_bad_fields(kwargs, error, match):
    with pytest.raises(error, match=match):
        vi.HalpernExtragradient(operator_fn=_operator, stepsize=0.1, **kwargs)


def test_missing_key_and_missing_exact_operator_raise():
    solver = vi.StochasticExtragradient(operator_fn=_operator, stepsize=0.1)
    with pytest.raises(TypeError, match="rng_key"):
        solver.run(jnp.zeros(2))
    with pytest.raises(ValueError, match="exact_operator_fn"):
        solver.optimality_fun(jnp.zeros(2))


def test_schedules_and_problems_reject_bad_input():
    with pytest.raises(ValueError, match="initial_batch_size"):
        vi.polynomial_batch_schedule(0.5, 1)
    with pytest.raises(ValueError, match="power"):
        vi.polynomial_batch_schedule(1, -1)
    with pytest.raises(ValueError, match="batch_size"):
        vi.constant_batch_schedule(0)
    with pytest.raises(TypeError, match="batch_size"):
        vi.constant_batch_schedule(2.5)
    with pytest.raises(ValueError, match="dim"):
        vi.bilinear_nonnegative(jax.random.key(0), 0, 0.1)
    with pytest.raises(ValueError, match="noise"):
        vi.bilinear_nonnegative(jax.random.key(0), 3, -0.1)
    with pytest.raises(ValueError, match="singular_values"):
        vi.bilinear_nonnegative(jax.random.key(0), 3, 0.1, singular_values=(2.0, 1.0))
    with pytest.raises(ValueError, match="noise"):
        vi.weak_minty_2d(-0.3, 1.0, noise=-1.0)
    with pytest.raises(ValueError, match="natural_residual|stepsize"):
        vi.natural_residual(lambda z: z, jnp.zeros(2), stepsize=0.0)
    with pytest.raises(TypeError, match="integer"):
        solver = vi.StochasticExtragradient(
            operator_fn=_operator, stepsize=0.1, batch_schedule=lambda k: 1.5, maxiter=1
        )
        solver.run(jnp.zeros(2), rng_key=jax.random.key(0))


def test_traced_hyperparameters_are_accepted_and_match_python_numbers():
    problem = vi.weak_minty_2d(-0.1, 1.0, noise=0.1)

    def final(stepsize, relaxation):
        solver = vi.StochasticExtragradient(
            operator_fn=problem.operator_fn,
            stepsize=stepsize,
            relaxation=relaxation,
            maxiter=10,
            jit=False,
        )
        return solver.run(jnp.asarray([1.0, 0.0]), rng_key=jax.random.key(0)).params

    traced = jax.jit(final)(jnp.asarray(0.5), jnp.asarray(0.5))
    np.testing.assert_allclose(traced, final(0.5, 0.5), rtol=1e-12)


def test_box_projection_keeps_reported_points_feasible():
    problem = vi.weak_minty_2d(-0.3, 1.0, noise=0.5)
    solver = vi.StochasticExtragradient(
        operator_fn=problem.operator_fn,
        projection=lambda z: projection_box(z, -0.5, 0.5),
        stepsize=1.0 / problem.lipschitz,
        maxiter=50,
        batch_schedule=vi.constant_batch_schedule(1),
    )
    out = _run_seeds(solver, jnp.asarray([0.5, 0.5]), 4)
    assert np.all(np.abs(np.asarray(out.state.feasible_params)) <= 0.5)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_solvers_keep_dtypes_under_strict_promotion(dtype):
    # jaxlab code must not rely on implicit dtype promotion (float32 stays float32).
    M = jnp.asarray([[0.5, 1.0], [-1.0, 0.5]], dtype)

    def operator_fn(z, key, batch_size):
        noise = jax.random.normal(key, (2, 2), dtype) / jnp.sqrt(batch_size.astype(dtype))
        return (M + jnp.asarray(0.1, dtype) * noise) @ z

    common = dict(operator_fn=operator_fn, exact_operator_fn=lambda z: M @ z, maxiter=40)
    solvers = [
        vi.StochasticExtragradient(stepsize=0.4, relaxation=0.5, **common),
        vi.HalpernExtragradient(stepsize=0.2, estimator="recursive", **common),
        vi.StochasticGradientDescentAscent(stepsize=0.2, **common),
    ]
    init = jnp.ones(2, dtype)
    with jax.numpy_dtype_promotion("strict"):
        for solver in solvers:
            out = solver.run(init, rng_key=jax.random.key(0))
            assert out.params.dtype == dtype and out.state.error.dtype == dtype
            assert float(out.state.error) < 0.5 * float(jnp.linalg.norm(M @ init))


# --------------------------------------------------------------------------------------------
# Status, batch sizes and exact call counts (issue 14).


@pytest.mark.parametrize("x64_mode", [False, True])
def test_oracle_calls_count_exactly_past_two_to_the_31(x64_mode):
    # Three EG steps of two batches of 2^31 - 1: int32 would read -6 (wrapped twice over).
    with jax.enable_x64(x64_mode):
        solver = vi.StochasticExtragradient(
            operator_fn=_operator,
            stepsize=0.1,
            maxiter=3,
            batch_schedule=vi.constant_batch_schedule(2**31 - 1),
        )
        out = solver.run(jnp.ones(2), rng_key=jax.random.key(0))
    expected = 3 * 2 * (2**31 - 1)  # Python integers: the independent truth
    assert int(out.state.oracle_calls) == expected == 12_884_901_882
    assert np.asarray(out.state.oracle_calls).dtype == np.int64
    assert out.state.oracle_calls.less_than(expected + 1)
    assert not out.state.oracle_calls.less_than(expected)


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=12), st.integers(1, 4))
def test_oracle_count_add_matches_python_integers(increments, times):
    count = vi.OracleCount.zeros()
    for value in increments:
        count = count.add(jnp.int32(value), times=times)
    assert int(count) == times * sum(increments)


def test_run_to_checkpoints_compares_call_counts_past_two_to_the_31_exactly():
    with jax.enable_x64(False):
        build = lambda lane: vi.StochasticExtragradient(  # noqa: E731
            operator_fn=_operator,
            stepsize=lane["stepsize"],
            batch_schedule=vi.constant_batch_schedule(2**30),
        )
        out = vi.run_to_checkpoints(
            build,
            {"eg": {"stepsize": 0.1}},
            jax.random.split(jax.random.key(0), 1),
            jnp.ones(2),
            np.asarray([3 * 10**9, 5 * 10**9]),
        )
    # Each step costs 2 * 2^30 = 2^31 calls: 2 steps pass 3e9 (2^32), 3 steps pass 5e9.
    np.testing.assert_array_equal(out["eg"]["calls"], [[2**32, 3 * 2**31]])
    np.testing.assert_array_equal(out["eg"]["iterations"], [[2, 3]])
    np.testing.assert_array_equal(out["eg"]["status"], [[0, 0]])


@pytest.mark.parametrize(
    ("schedule", "k", "size"),
    [
        (lambda k: k, 0, 0),
        (lambda k: 5 - 2 * k, 3, -1),
        (lambda k: jnp.int64(2**31) + 0 * k, 0, 2**31),
    ],
)
def test_concrete_bad_batch_sizes_are_rejected_before_the_run(schedule, k, size):
    solver = vi.StochasticExtragradient(
        operator_fn=_operator, stepsize=0.1, maxiter=10, batch_schedule=schedule
    )
    with pytest.raises(ValueError, match=rf"batch_schedule\({k}\) = {size}"):
        solver.run(jnp.ones(2), rng_key=jax.random.key(0))


@pytest.mark.parametrize(
    "cls", [vi.StochasticExtragradient, vi.HalpernExtragradient, vi.StochasticGradientDescentAscent]
)
def test_traced_bad_batch_size_stops_with_status_and_keeps_the_last_valid_step(cls):
    problem = vi.weak_minty_2d(-0.1, 1.0, noise=0.1)

    def run(offset, maxiter):
        solver = cls(
            operator_fn=problem.operator_fn,
            stepsize=0.3,
            maxiter=maxiter,
            jit=False,
            batch_schedule=lambda k: 4 - k - offset,  # 4, 3, 2, 1, then 0 at k = 4
        )
        return solver.run(jnp.asarray([1.0, 0.5]), rng_key=jax.random.key(2))

    bad = jax.jit(lambda offset: run(offset, 20))(jnp.int32(0))
    valid = run(0, 4)  # the same four valid steps, stopped by maxiter instead
    assert int(bad.state.status) == vi.SolverStatus.BAD_BATCH_SIZE
    assert int(valid.state.status) == vi.SolverStatus.MAXITER
    assert int(bad.state.iter_num) == 4 and int(bad.state.oracle_calls) == int(
        valid.state.oracle_calls
    )
    np.testing.assert_array_equal(bad.params, valid.params)


def test_nan_mid_run_stops_with_nonfinite_status_not_as_converged():
    # F = -z with γ = 1e200 (float64): z grows by 1e200 per half-step, inf then NaN.
    solver = vi.StochasticExtragradient(
        operator_fn=_operator,
        exact_operator_fn=lambda z: -z,
        stepsize=1e200,
        maxiter=100,
        tol=1e-3,
        batch_schedule=vi.constant_batch_schedule(1),
    )
    out = solver.run(jnp.ones(2), rng_key=jax.random.key(0))
    assert int(out.state.status) == vi.SolverStatus.NONFINITE
    assert int(out.state.iter_num) == 1
    assert not bool(jnp.all(jnp.isfinite(out.params)))
    converging = dataclasses.replace(solver, stepsize=0.5).run(
        jnp.ones(2), rng_key=jax.random.key(0)
    )
    assert int(converging.state.status) == vi.SolverStatus.MAXITER  # F = -z: no solution


def test_converged_status_when_the_residual_reaches_tol():
    problem = vi.weak_minty_2d(-0.1, 1.0)
    solver = vi.StochasticExtragradient(
        operator_fn=problem.operator_fn,
        exact_operator_fn=problem.exact_operator_fn,
        stepsize=0.5 / problem.lipschitz,
        maxiter=5000,
        tol=1e-8,
    )
    out = solver.run(jnp.asarray([1.0, 0.0]), rng_key=jax.random.key(0))
    assert int(out.state.status) == vi.SolverStatus.CONVERGED
    assert float(out.state.error) <= 1e-8 < 5000 - int(out.state.iter_num)


@pytest.mark.parametrize("k", [-2, -1.5, float("nan"), np.array([0, -3])])
def test_halpern_anchor_schedule_rejects_negative_iterations(k):
    with pytest.raises(ValueError, match="iter_num"):
        vi.halpern_anchor_schedule(k)


def test_rng_key_none_or_int_is_named():
    solver = vi.StochasticExtragradient(operator_fn=_operator, stepsize=0.1)
    with pytest.raises(TypeError, match="rng_key"):
        solver.run(jnp.zeros(2), rng_key=None)
    with pytest.raises(TypeError, match="rng_key must be a JAX PRNG key"):
        solver.run(jnp.zeros(2), rng_key=7)
