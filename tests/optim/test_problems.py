"""Distributed problems, the compressed-GD baseline, the simulated-workers loop and the worst-case
search (jaxlab/optim/_problems.py).

Independent truths: numpy's least squares and eigensolvers, scikit-learn's logistic regression
and scipy's BFGS, Hessians from ``jax.hessian``, a hand-written loop over the workers, and the
closed-form tight rate of :func:`jaxlab.optim.ef_tight_rate`.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxlab import optim

AXIS = "workers"


# --------------------------------------------------------------------------------------------
# Least squares.


@pytest.mark.parametrize("noise", [0.0, 1.0])
def test_least_squares_optimum_and_constants_match_numpy(x64, noise):
    problem = optim.distributed_least_squares(jax.random.key(3), 4, rows=15, dim=6, noise=noise)
    a, b = np.asarray(problem.features), np.asarray(problem.targets)
    # f = mean_i ||A_i x - b_i||^2 / (2 rows) = ||A x - b||^2 / (2 n rows) for the stacked data.
    x_lstsq = np.linalg.lstsq(a.reshape(-1, 6), b.reshape(-1), rcond=None)[0]
    np.testing.assert_allclose(problem.optimum, x_lstsq, rtol=1e-10, atol=1e-12)
    f = lambda x: float(np.sum((a.reshape(-1, 6) @ x - b.reshape(-1)) ** 2) / (2 * 60))  # noqa: E731
    assert problem.optimal_value == pytest.approx(f(x_lstsq), rel=1e-10, abs=1e-20)
    assert problem.initial_value == pytest.approx(f(np.zeros(6)), rel=1e-12)
    if noise == 0.0:
        assert problem.optimal_value < 1e-25  # a shared minimiser
    else:
        assert problem.optimal_value > 0.1
    # L_i, mu_i from the singular values of A_i / sqrt(rows); L, mu from the stacked data.
    sv = np.linalg.svd(a / np.sqrt(15), compute_uv=False)
    np.testing.assert_allclose(problem.smoothness, sv[:, 0] ** 2, rtol=1e-10)
    np.testing.assert_allclose(problem.strong_convexity, sv[:, -1] ** 2, rtol=1e-10)
    sv_all = np.linalg.svd(a.reshape(-1, 6) / np.sqrt(60), compute_uv=False)
    assert problem.global_smoothness == pytest.approx(sv_all[0] ** 2, rel=1e-10)
    assert problem.global_strong_convexity == pytest.approx(sv_all[-1] ** 2, rel=1e-10)
    # value and grad agree with the numpy objective and with jax.grad of one worker's f_i.
    x = np.random.default_rng(0).normal(size=6)
    assert float(problem.value(jnp.asarray(x), problem.features, problem.targets)) == (
        pytest.approx(f(x), rel=1e-12)
    )
    f0 = lambda z: jnp.sum((problem.features[0] @ z - problem.targets[0]) ** 2) / 30  # noqa: E731
    np.testing.assert_allclose(
        problem.grad(jnp.asarray(x), problem.features[0], problem.targets[0]),
        jax.grad(f0)(jnp.asarray(x)),
        rtol=1e-12,
    )


def test_least_squares_is_reproducible_and_checks_arguments():
    one = optim.distributed_least_squares(jax.random.key(0), 2, 5, 3)
    two = optim.distributed_least_squares(jax.random.key(0), 2, 5, 3)
    np.testing.assert_array_equal(one.features, two.features)
    with pytest.raises(ValueError, match="num_workers"):
        optim.distributed_least_squares(jax.random.key(0), 0, 5, 3)
    with pytest.raises(ValueError, match="noise"):
        optim.distributed_least_squares(jax.random.key(0), 2, 5, 3, noise=-1.0)
    with pytest.raises(TypeError, match="dim"):
        optim.distributed_least_squares(jax.random.key(0), 2, 5, 3.0)


# --------------------------------------------------------------------------------------------
# Logistic regression.


def test_breast_cancer_workers_split_by_label():
    from sklearn.datasets import load_breast_cancer

    features, labels = optim.breast_cancer_workers(8)
    assert features.shape == (8, 71, 31) and labels.shape == (8, 71)
    flat = labels.reshape(-1)
    assert np.all(np.diff(flat) >= 0)  # sorted by label: each worker one class but one
    assert sum(len(set(w.tolist())) > 1 for w in labels) == 1
    np.testing.assert_array_equal(features[..., -1], 1.0)  # the bias column
    data = load_breast_cancer()
    standard = (data.data - data.data.mean(0)) / data.data.std(0)
    # Every row is a standardised row of the data set with its own label.
    order = np.argsort(2.0 * data.target - 1.0, kind="stable")[: 8 * 71]
    np.testing.assert_allclose(features.reshape(-1, 31)[:, :-1], standard[order], rtol=1e-12)
    np.testing.assert_array_equal(flat, 2.0 * data.target[order] - 1.0)


def test_logistic_reference_matches_sklearn_and_scipy(x64):
    import scipy.optimize
    from sklearn.linear_model import LogisticRegression

    features, labels = optim.breast_cancer_workers(8)
    mu = 0.1
    x = optim.logistic_reference_minimiser(features, labels, mu)
    a, b = features.reshape(-1, 31), labels.reshape(-1)
    # sklearn minimises ||w||^2 / 2 + C sum_j log(1 + exp(-b_j a_j.w)): C = 1 / (mu rows).
    clf = LogisticRegression(
        C=1.0 / (mu * a.shape[0]), fit_intercept=False, tol=1e-12, max_iter=10_000
    )
    clf.fit(a, b)
    np.testing.assert_allclose(x, clf.coef_[0], atol=1e-6)

    def value(w):
        return np.mean(np.logaddexp(0.0, -b * (a @ w))) + 0.5 * mu * w @ w

    def grad(w):
        return a.T @ (-b / (1 + np.exp(b * (a @ w)))) / a.shape[0] + mu * w

    bfgs = scipy.optimize.minimize(
        value, np.zeros(31), jac=grad, method="BFGS", options={"gtol": 1e-10}
    ).x
    np.testing.assert_allclose(x, bfgs, atol=1e-5)
    assert value(x) <= value(bfgs) + 1e-15
    problem = optim.logistic_regression_problem(features, labels, mu)
    grad = jax.grad(problem.value)(jnp.asarray(x), problem.features, problem.targets)
    assert float(jnp.max(jnp.abs(grad))) < 1e-12  # Newton-polished: stationary to rounding
    assert problem.optimal_value == pytest.approx(value(x), rel=1e-12)


def test_logistic_problems_constants_bound_the_hessians(x64):
    # Any labelled data will do (the bounds are generic): small random data compiles fast.
    rng = np.random.default_rng(1)
    features = rng.normal(size=(4, 12, 5))
    labels = np.where(rng.random((4, 12)) < 0.5, -1.0, 1.0)
    convex = optim.logistic_regression_problem(features, labels, 0.1)
    nonconvex = optim.nonconvex_logistic_regression_problem(features, labels, 0.1)
    points = jnp.asarray(3 * rng.normal(size=(3, 5)))
    for problem, low in ((convex, 0.1), (nonconvex, -0.05)):
        # Hessians of every f_i (and of f) at three random points, in one compiled call each.
        per_worker = jax.vmap(jax.hessian(_worker_loss(problem)), in_axes=(None, 0, 0))
        hess = jax.jit(jax.vmap(per_worker, in_axes=(0, None, None)))(
            points, problem.features, problem.targets
        )
        eig = np.linalg.eigvalsh(np.asarray(hess))  # (points, workers, 5)
        assert np.all(eig[..., -1] <= problem.smoothness[None, :] * (1 + 1e-10))
        assert np.all(eig[..., 0] >= low - 1e-10)
        total = jax.jit(jax.vmap(jax.hessian(problem.value), in_axes=(0, None, None)))(
            points, problem.features, problem.targets
        )
        assert np.all(
            np.linalg.eigvalsh(np.asarray(total))[:, -1] <= problem.global_smoothness * (1 + 1e-10)
        )
    assert convex.strong_convexity.tolist() == [0.1] * 4
    assert nonconvex.strong_convexity is None and nonconvex.optimum is None
    assert nonconvex.initial_value == pytest.approx(np.log(2.0))
    with pytest.raises(ValueError, match="l2"):
        optim.logistic_regression_problem(features, labels, 0.0)
    with pytest.raises(ValueError, match="labels"):
        optim.logistic_regression_problem(features, labels[:, :-1], 0.1)


def _worker_loss(problem):
    """f_i recovered from the problem's value on a single worker's data."""
    return lambda x, a, b: problem.value(x, a[None], b[None])


# --------------------------------------------------------------------------------------------
# Compressed GD and the simulated-workers loop.


def test_compressed_gradient_descent_is_minus_eta_mean_of_compressed_gradients():
    grads = jnp.array([[3.0, -1.0, 0.5], [0.1, 0.2, -4.0]])
    tx = optim.compressed_gradient_descent(0.5, optim.top_k(1), axis_name=AXIS)
    state = tx.init(jnp.zeros(3))
    updates, _ = jax.vmap(lambda g: tx.update(g, state), axis_name=AXIS)(grads)
    expected = -0.5 * np.mean([[3.0, 0.0, 0.0], [0.0, 0.0, -4.0]], axis=0)
    np.testing.assert_allclose(updates, np.broadcast_to(expected, (2, 3)))
    # The same per-worker update under jax.pmap, one worker per device.
    by_pmap, _ = jax.pmap(lambda g: tx.update(g, state), axis_name=AXIS)(grads)
    np.testing.assert_allclose(by_pmap, updates, rtol=1e-6)
    # With the identity compressor on one worker it is optax.sgd.
    sgd_updates, _ = optax.sgd(0.5).update(grads[0], optax.sgd(0.5).init(grads[0]))
    cgd = optim.compressed_gradient_descent(0.5, optim.identity())
    np.testing.assert_allclose(cgd.update(grads[0], cgd.init(grads[0]))[0], sgd_updates)
    with pytest.raises(TypeError, match="deterministic"):
        optim.compressed_gradient_descent(0.5, optim.rand_k(1))
    with pytest.raises(ValueError, match="learning_rate"):
        optim.compressed_gradient_descent(jnp.array(-1.0), optim.top_k(1))


@dataclasses.dataclass(frozen=True)
class _CountingEF21:
    """EF21 factory that counts how often it is called (once per trace plus once for init)."""

    compressor: optim.Compressor
    calls: list = dataclasses.field(default_factory=list, compare=False, hash=False)

    def __call__(self, step_size):
        self.calls.append(step_size)
        return optim.error_feedback_21(step_size, self.compressor, axis_name=AXIS)


def _manual_ef21(problem, step_size, compressor, steps):
    """The same run, one step at a time in Python: every worker's update, then x <- x + u."""
    tx = optim.error_feedback_21(step_size, compressor, axis_name=AXIS)
    workers, _, dim = problem.features.shape
    x = jnp.zeros(dim)
    state = jax.vmap(lambda _: tx.init(x), axis_name=AXIS)(jnp.arange(workers))

    def worker(x, s, a, b):
        return tx.update(problem.grad(x, a, b), s, x)

    step = jax.jit(jax.vmap(worker, in_axes=(None, 0, 0, 0), axis_name=AXIS))
    gap0 = problem.initial_value - problem.optimal_value
    values = []
    for _ in range(steps):
        updates, state = step(x, state, problem.features, problem.targets)
        x = x + updates[0]
        f = problem.value(x, problem.features, problem.targets)
        values.append((float(f) - problem.optimal_value) / gap0)
    return np.array(values), state


def test_run_distributed_matches_a_manual_loop_and_compiles_once(x64):
    problem = optim.distributed_least_squares(jax.random.key(1), 4, rows=20, dim=10)
    compressor = optim.top_k(2)
    eta = float(
        optim.ef_optimal_step_size(
            problem.smoothness, problem.strong_convexity, compressor.alpha(10)
        )
    )
    factory = _CountingEF21(compressor)
    run = optim.run_distributed(
        problem, factory, eta, tolerance=1e-30, max_steps=60, chunk=30, axis_name=AXIS
    )
    expected, state = _manual_ef21(problem, eta, compressor, 60)
    np.testing.assert_allclose(run.values, expected, rtol=1e-9, atol=1e-15)
    assert not run.reached and run.iterations is None and run.values.size == 60
    # Bits per worker from EF21's counter: a dense first message, then top-2 messages.
    assert run.bits[0] == optim.identity().bits(10)
    np.testing.assert_allclose(np.diff(run.bits), compressor.bits(10))
    assert run.bits[-1] == float(np.mean(state[0].bits))
    # A second step size and a second problem of the same shape reuse the compiled chunk.
    traces = len(factory.calls) - 1  # minus the init call
    other = optim.distributed_least_squares(jax.random.key(2), 4, rows=20, dim=10, noise=1.0)
    optim.run_distributed(
        other, factory, 0.5 * eta, tolerance=1e-30, max_steps=30, chunk=30, axis_name=AXIS
    )
    assert len(factory.calls) - 2 == traces == 1


def test_run_distributed_stops_at_the_tolerance(x64):
    problem = optim.distributed_least_squares(jax.random.key(0), 4, rows=20, dim=5)
    eta = 2 / (problem.global_smoothness + problem.global_strong_convexity)
    gd = optim.run_distributed(
        problem,
        optax.sgd,
        eta,
        tolerance=1e-8,
        max_steps=10_000,
        chunk=50,
        average_gradient=True,
        bits_per_step=7.0,
    )
    assert gd.reached and gd.values[gd.iterations - 1] <= 1e-8 < gd.values[gd.iterations - 2]
    assert gd.values.size % 50 == 0 and gd.values.size - gd.iterations < 50  # stopped after it
    assert gd.bits_per_worker == 7.0 * gd.iterations
    # GD on a quadratic at 2/(L+mu): ||x - x*|| contracts by (kappa-1)/(kappa+1) per step.
    kappa = problem.global_smoothness / problem.global_strong_convexity
    bound = np.log(1e-8 * problem.global_strong_convexity / problem.global_smoothness)
    assert gd.iterations <= int(np.ceil(bound / (2 * np.log((kappa - 1) / (kappa + 1))))) + 1


def test_run_distributed_grad_sq_on_the_nonconvex_problem(x64):
    features, labels = optim.breast_cancer_workers(8)
    problem = optim.nonconvex_logistic_regression_problem(features, labels, 0.1)
    run = optim.run_distributed(
        problem,
        optax.sgd,
        1.0 / problem.global_smoothness,
        tolerance=1e-3,
        max_steps=400,
        chunk=100,
        measure="grad_sq",
        average_gradient=True,
        bits_per_step=1.0,
    )
    x0 = jnp.zeros(31)
    g0 = jax.grad(problem.value)(x0, problem.features, problem.targets)
    # GD with step 1/L decreases f, so ||grad f||^2 / ||grad f(0)||^2 falls below 1.
    assert run.reached and run.values[-1] < 1.0
    assert float(jnp.sum(g0 * g0)) > 0
    with pytest.raises(ValueError, match="optimal_value"):
        optim.run_distributed(problem, optax.sgd, 0.1, tolerance=1e-3, max_steps=10)
    with pytest.raises(ValueError, match="measure"):
        optim.run_distributed(problem, optax.sgd, 0.1, tolerance=1e-3, max_steps=10, measure="f")


# --------------------------------------------------------------------------------------------
# Worst cases over the rotation instances.


def test_rotation_instance_rates_match_numpy_per_instance(x64):
    rng = np.random.default_rng(0)
    lam = rng.uniform(0.1, 1.0, (70, 2))  # 70 rows: padded to a batch of 128
    theta = rng.uniform(0.0, 2 * np.pi, (70, 2))
    for method in ("ef", "ef21"):
        rates = optim.rotation_instance_rates(method, lam, theta, 0.3, 0.5)
        for j in (0, 69):
            m = np.asarray(optim.linear_one_step_matrix(method, lam[j], theta[j], 0.3, 0.5))
            assert rates[j] == pytest.approx(np.max(np.abs(np.linalg.eigvals(m))) ** 2, rel=1e-12)
        # Splitting the batch (other padding) gives the same rates.
        parts = [
            optim.rotation_instance_rates(method, lam[s], theta[s], 0.3, 0.5)
            for s in (slice(0, 5), slice(5, 70))
        ]
        np.testing.assert_allclose(np.concatenate(parts), rates, rtol=1e-13)
    with pytest.raises(ValueError, match="instances"):
        optim.rotation_instance_rates("ef", lam[0], theta[0], 0.3, 0.5)


@pytest.mark.parametrize("method", ["ef", "ef21"])
def test_worst_case_rate_attains_the_tight_rate(x64, method):
    kappa, alpha = 10.0, 0.5
    eta = float(optim.ef_optimal_step_size(1.0, 1 / kappa, alpha))
    rho = float(optim.ef_tight_rate(kappa, alpha))
    rng = np.random.default_rng(0)
    worst, lam, theta = optim.worst_case_rate(
        method, [0.1], [1.0], eta, alpha, rng, grid_curvatures=5, grid_angles=19
    )
    assert worst == pytest.approx(rho, abs=1e-12)
    # Two workers: the search never exceeds the proven bound, and it reports its instance.
    worst2, lam2, theta2 = optim.worst_case_rate(
        method,
        [0.1, 0.1],
        [1.0, 1.0],
        eta,
        alpha,
        rng,
        grid_curvatures=5,
        grid_angles=19,
        random_points=200,
    )
    assert rho - 1e-3 <= worst2 <= rho + 1e-12
    again = optim.rotation_instance_rates(method, lam2[None], theta2[None], eta, alpha)[0]
    assert again == pytest.approx(worst2, rel=1e-12)
    assert np.all((0.1 <= lam2) & (lam2 <= 1.0))
    # A step away from eta* has a worse worst case.
    worse, _, _ = optim.worst_case_rate(
        method, [0.1], [1.0], 0.7 * eta, alpha, rng, grid_curvatures=5, grid_angles=19
    )
    assert worse > rho
    with pytest.raises(ValueError, match="workers"):
        optim.worst_case_rate(method, 0.1, 1.0, eta, alpha, rng)


def test_problem_helpers_reject_bad_input_eagerly():
    with pytest.raises(TypeError, match="learning_rate must be a number"):
        optim.compressed_gradient_descent(lambda count: 0.1, optim.top_k(1))
    with pytest.raises(ValueError, match="alpha must be finite"):
        optim.rotation_instance_rates("ef", [[1.0]], [[0.0]], 0.1, float("nan"))
    with pytest.raises(ValueError, match="curvature must be finite"):
        optim.rotation_instance_rates("ef", [[float("nan")]], [[0.0]], 0.1, 0.5)
    with pytest.raises(TypeError, match="rng must be a numpy Generator"):
        optim.worst_case_rate("ef", [0.1], [1.0], 0.1, 0.5, 0)
    with pytest.raises(ValueError, match="labels"):
        optim.logistic_reference_minimiser(np.ones((2, 3, 4)), np.ones((2, 4)), 0.1)
    with pytest.raises(TypeError, match="rng_key must be a JAX PRNG key"):
        optim.distributed_least_squares(None, 2, 3, 4)
    with pytest.raises(ValueError, match="tolerance"):
        problem = optim.distributed_least_squares(jax.random.key(0), 2, rows=3, dim=2)
        optim.run_distributed(problem, optax.sgd, 0.1, tolerance=float("nan"), max_steps=5)


def test_step_size_keyword_is_a_deprecated_alias_of_learning_rate():
    """The theory functions took ``step_size=``; it still works, warns, and gives the same."""
    lam, theta = jnp.array([[0.5, 1.0]]), jnp.array([[0.3, 1.2]])
    expected = optim.rotation_instance_rates("ef", lam, theta, learning_rate=0.3, alpha=0.5)
    with pytest.warns(DeprecationWarning, match="step_size= is deprecated, use learning_rate="):
        old = optim.rotation_instance_rates("ef", lam, theta, step_size=0.3, alpha=0.5)
    np.testing.assert_array_equal(old, expected)
    matrix = optim.linear_one_step_matrix("ef21", 1.0, 0.2, learning_rate=0.3, alpha=0.5)
    with pytest.warns(DeprecationWarning, match="step_size= is deprecated"):
        again = optim.linear_one_step_matrix("ef21", 1.0, 0.2, step_size=0.3, alpha=0.5)
    np.testing.assert_array_equal(again, matrix)
