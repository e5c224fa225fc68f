"""Distributed bilevel problems and their exact references (jaxlab/solvers/_bilevel_problems.py).

Every check compares with an independent truth: the ridge closed form, jaxopt's implicit
differentiation, central differences, or the scalar toy's closed-form penalty solution.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jaxopt
import numpy as np
import pytest

from jaxlab.solvers import (
    FAB,
    BilevelProblem,
    FABParams,
    centralized_penalty_trajectory,
    diabetes_ridge_tuning,
    digits_hyper_cleaning,
    exact_bilevel_solution,
    exact_hypergradient,
    lower_level_solution,
)


def _small_ridge():
    rng = np.random.default_rng(0)
    n, m, d = 3, 6, 2
    A, b = rng.normal(size=(n, m, d)), rng.normal(size=(n, m))
    V, w = rng.normal(size=(n, m, d)), rng.normal(size=(n, m))

    def lower(x, y, A_i, b_i, V_i, w_i):
        return 0.5 * jnp.sum((A_i @ y - b_i) ** 2) / m + 0.5 * jnp.sum(jnp.exp(x) * y**2)

    def upper(x, y, A_i, b_i, V_i, w_i):
        return 0.5 * jnp.sum((V_i @ y - w_i) ** 2) / m

    problem = BilevelProblem(
        upper=upper,
        lower=lower,
        data=tuple(jnp.asarray(v) for v in (A, b, V, w)),
        x0=jnp.zeros(d),
        y0=jnp.zeros(d),
    )
    return problem, (A, b, V, w, m)


def _ridge_closed_form(x, A, b, V, w, m):
    """y*(x), F(x) and ∇F(x) of the small ridge problem, by hand."""
    n = A.shape[0]
    H = np.einsum("irj,irk->jk", A, A) / (n * m)
    h = np.einsum("irj,ir->j", A, b) / (n * m)
    G = np.einsum("irj,irk->jk", V, V) / (n * m)
    q = np.einsum("irj,ir->j", V, w) / (n * m)
    K = H + np.diag(np.exp(np.asarray(x)))
    y_star = np.linalg.solve(K, h)
    grad_f = G @ y_star - q
    grad = -np.exp(np.asarray(x)) * y_star * np.linalg.solve(K, grad_f)
    value = 0.5 * np.mean([np.sum((V[i] @ y_star - w[i]) ** 2) / m for i in range(n)])
    return y_star, value, grad


def test_exact_hypergradient_matches_the_ridge_closed_form_and_jaxopt(x64):
    problem, (A, b, V, w, m) = _small_ridge()
    x = jnp.asarray([0.3, -0.7])
    value, grad, y = jax.jit(lambda t: exact_hypergradient(problem, t))(x)
    # Closed form: y* = (H + diag e^x)⁻¹ h, ∇F = -e^x ⊙ y* ⊙ (H + diag e^x)⁻¹ ∇f(y*).
    y_star, F, expected = _ridge_closed_form(x, A, b, V, w, m)
    np.testing.assert_allclose(np.asarray(y), y_star, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(grad), expected, rtol=1e-8, atol=1e-12)
    assert float(value) == pytest.approx(F, rel=1e-10)

    # jaxopt (reference only): implicit differentiation of its ridge solve.
    def inner(theta):
        solver = jaxopt.GradientDescent(
            fun=lambda y, t: problem.pooled_lower(t, y), maxiter=5000, tol=1e-12, implicit_diff=True
        )
        return solver.run(jnp.zeros(2), theta).params

    jaxopt_grad = jax.jit(jax.grad(lambda t: problem.pooled_upper(t, inner(t))))(x)
    np.testing.assert_allclose(np.asarray(grad), np.asarray(jaxopt_grad), rtol=1e-6, atol=1e-10)


def test_exact_hypergradient_matches_central_differences_on_hypercleaning(x64):
    problem, _ = digits_hyper_cleaning(num_agents=2, train_rows=6, val_rows=5)
    x = jnp.asarray(np.random.default_rng(1).normal(size=12))
    evaluate = jax.jit(lambda v: exact_hypergradient(problem, v, newton_steps=12)[:2])
    _, grad = evaluate(x)
    direction = jnp.asarray(np.random.default_rng(2).normal(size=12))
    h = 1e-5
    plus, minus = evaluate(x + h * direction)[0], evaluate(x - h * direction)[0]
    numeric = (float(plus) - float(minus)) / (2 * h)
    assert float(jnp.vdot(grad, direction)) == pytest.approx(numeric, rel=1e-6)


def test_lower_level_solution_is_stationary_on_hypercleaning(x64):
    problem, _ = digits_hyper_cleaning(num_agents=2, train_rows=6, val_rows=5)
    x = jnp.asarray(np.random.default_rng(3).normal(size=12))
    y = jax.jit(lambda v: lower_level_solution(problem, v, newton_steps=12))(x)
    grad = jax.grad(problem.pooled_lower, argnums=1)(x, y)
    assert max(float(jnp.max(jnp.abs(g))) for g in jax.tree.leaves(grad)) < 1e-12


def test_exact_bilevel_solution_is_a_stationary_point_of_the_ridge_closed_form(x64):
    problem, (A, b, V, w, m) = _small_ridge()
    solution = exact_bilevel_solution(problem, maxiter=200)
    _, value, grad = _ridge_closed_form(solution.x, A, b, V, w, m)
    assert solution.value == pytest.approx(value, rel=1e-10)
    assert np.linalg.norm(grad) < 1e-6 and solution.grad_norm < 1e-6
    # A descent from x0 = 0: F at the solution is below F(0).
    assert solution.value <= _ridge_closed_form(np.zeros(2), A, b, V, w, m)[1]


def test_centralized_penalty_trajectory_matches_fab_on_a_complete_graph_and_the_closed_form(x64):
    # f_i = (y - c_i)²/2 + x²/2, g_i = (y - x - e_i)²/2: x_λ = λ (c̄ - ē) / (1 + 2λ).
    c, e = jnp.array([0.0, 2.0, 1.5, 0.5]), jnp.array([0.3, -0.3, 0.1, -0.1])
    problem = BilevelProblem(
        upper=lambda x, y, c_i, e_i: 0.5 * (y - c_i) ** 2 + 0.5 * x**2,
        lower=lambda x, y, c_i, e_i: 0.5 * (y - x - e_i) ** 2,
        data=(c, e),
        x0=jnp.zeros(()),
        y0=jnp.zeros(()),
    )
    lam, alpha, beta = 10.0, 0.1, 0.3
    xs, ys = centralized_penalty_trajectory(
        problem,
        penalty=lam,
        upper_stepsize=alpha,
        lower_stepsize=beta,
        steps=3000,
        record_every=1000,
    )
    assert xs.shape == ys.shape == (3,)
    x_lam = lam * float(jnp.mean(c) - jnp.mean(e)) / (1 + 2 * lam)
    assert float(xs[-1]) == pytest.approx(x_lam, abs=1e-10)
    # FAB on the complete graph (exact averaging every round) takes the same steps.
    upper, lower = problem.grad_fns()
    fab = FAB(
        upper_grad_fn=upper,
        lower_grad_fn=lower,
        graph_fn=lambda key, k: jnp.ones((4, 4), bool),
        penalty=lam,
        upper_stepsize=alpha,
        lower_stepsize=beta,
        maxiter=1000,
        tol=0.0,
        implicit_diff=False,
    )
    zeros = jnp.zeros(4)
    out = fab.run(FABParams(zeros, zeros, zeros), c, e, rng_key=jax.random.key(0))
    np.testing.assert_allclose(np.asarray(out.params.x), float(xs[0]), rtol=1e-10)


def test_instances_have_the_documented_shapes_and_splits():
    problem, test = diabetes_ridge_tuning(num_agents=8, train_rows=20, val_rows=20)
    assert problem.num_agents == 8 and problem.x0.shape == (10,)
    assert test["features"].shape == (442 - 320, 10) and test["targets"].shape == (122,)
    problem, test = digits_hyper_cleaning(num_agents=4, train_rows=10, val_rows=5)
    assert problem.x0.shape == (40,) and test["flipped"].shape == (40,)
    assert problem.y0["w"].shape == (10, 10) and problem.y0["b"].shape == (10,)
    # Row norms of the training features are at most 2 (the lower level's step-size bound).
    assert float(jnp.max(jnp.linalg.norm(problem.data[0], axis=-1))) <= 2.0 + 1e-12
    # About flip_fraction of the training labels are flipped.
    assert 0.1 < test["flipped"].mean() < 0.5


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: diabetes_ridge_tuning(num_agents=20, train_rows=20), ValueError, ">= 442 rows"),
        (lambda: diabetes_ridge_tuning(num_agents=0), ValueError, "num_agents"),
        (lambda: digits_hyper_cleaning(flip_fraction=1.5), ValueError, "flip_fraction"),
        (lambda: digits_hyper_cleaning(ridge=float("nan")), ValueError, "ridge"),
        (lambda: digits_hyper_cleaning(components=2.0), TypeError, "components"),
        (
            lambda: centralized_penalty_trajectory(
                _small_ridge()[0],
                penalty=0.0,
                upper_stepsize=0.1,
                lower_stepsize=0.1,
                steps=10,
                record_every=5,
            ),
            ValueError,
            "penalty must be finite and > 0",
        ),
        (
            lambda: centralized_penalty_trajectory(
                _small_ridge()[0],
                penalty=1.0,
                upper_stepsize=jnp.array(-0.1),
                lower_stepsize=0.1,
                steps=10,
                record_every=5,
            ),
            ValueError,
            "upper_stepsize",
        ),
        (lambda: exact_bilevel_solution(_small_ridge()[0], maxiter=0), ValueError, "maxiter"),
    ],
)
def test_bad_inputs_raise_clear_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()
