"""The solver base: loops, the compiled-run cache and implicit differentiation."""

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxlab._src import solver as solver_base
from jaxlab._src.solver import IterativeSolver, OptStep
from jaxlab.solvers import (
    cg_tangent_solve,
    default_tangent_solve,
    dense_tangent_solve,
    gmres_tangent_solve,
)


class _State(NamedTuple):
    iter_num: jax.Array
    error: jax.Array


TRACES = {"update": 0}


@dataclasses.dataclass(eq=False)
class _Ridge(IterativeSolver):
    """Gradient descent on 0.5||Ax - b||^2 + 0.5 lam ||x||^2 (closed-form solution)."""

    stepsize: float = 0.1

    def init_state(self, params, matrix, target, lam):
        return _State(jnp.asarray(0), jnp.asarray(jnp.inf, params.dtype))

    def optimality_fun(self, params, matrix, target, lam):
        return matrix.T @ (matrix @ params - target) + lam * params

    def update(self, params, state, matrix, target, lam):
        TRACES["update"] += 1
        grad = self.optimality_fun(params, matrix, target, lam)
        return OptStep(
            params - self.stepsize * grad, _State(state.iter_num + 1, optax.tree.norm(grad))
        )


def _problem():
    matrix = jax.random.normal(jax.random.key(0), (6, 3)) / 2
    target = jax.random.normal(jax.random.key(1), (6,))
    return matrix, target, jnp.asarray(0.5)


def _closed_form(matrix, target, lam):
    return jnp.linalg.solve(matrix.T @ matrix + lam * jnp.eye(3), matrix.T @ target)


def test_run_matches_closed_form_and_unrolled_scan(x64):
    matrix, target, lam = _problem()
    solver = _Ridge(maxiter=2000, tol=1e-12)
    step = solver.run(jnp.zeros(3), matrix, target, lam)
    np.testing.assert_allclose(step.params, _closed_form(matrix, target, lam), atol=1e-10)
    assert 0 < int(step.state.iter_num) < 2000 and float(step.state.error) <= 1e-12
    unrolled = dataclasses.replace(solver, unroll=True).run(jnp.zeros(3), matrix, target, lam)
    np.testing.assert_allclose(unrolled.params, step.params, atol=1e-14)
    assert int(unrolled.state.iter_num) == int(step.state.iter_num)


def test_repeated_runs_do_not_retrace():
    matrix, target, lam = _problem()
    solver = _Ridge(maxiter=50)
    TRACES["update"] = 0
    for shift in range(3):
        solver.run(jnp.zeros(3), matrix, target + shift, lam)
    assert TRACES["update"] == 1


def test_implicit_gradient_equals_closed_form_derivative(x64):
    matrix, target, lam = _problem()
    solver = _Ridge(maxiter=5000, tol=1e-13)

    def solution_sum(lam):
        return jnp.sum(solver.run(jnp.zeros(3), matrix, target, lam).params)

    expected = jax.grad(lambda lam: jnp.sum(_closed_form(matrix, target, lam)))(lam)
    np.testing.assert_allclose(jax.grad(solution_sum)(lam), expected, rtol=1e-8)
    grad_target = jax.grad(lambda t: jnp.sum(solver.run(jnp.zeros(3), matrix, t, lam).params))
    expected_t = jax.grad(lambda t: jnp.sum(_closed_form(matrix, t, lam)))(target)
    np.testing.assert_allclose(grad_target(target), expected_t, rtol=1e-8)


def test_dense_tangent_solve_on_a_pytree(x64):
    rhs = {"a": jnp.array([1.0, 2.0]), "b": jnp.array(3.0)}
    out = dense_tangent_solve(lambda t: {"a": 2 * t["a"] + t["b"], "b": 4 * t["b"]}, rhs)
    np.testing.assert_allclose(out["b"], 0.75)
    np.testing.assert_allclose(out["a"], (rhs["a"] - 0.75) / 2)


@pytest.mark.parametrize(
    "kwargs,error",
    [
        ({"maxiter": 0}, ValueError),
        ({"maxiter": 2.5}, TypeError),  # jaxlab._src.validation: a float is not an int
        ({"tol": -1.0}, ValueError),
        ({"implicit_diff_solve": "gmres"}, TypeError),
    ],
)
def test_bad_settings_raise(kwargs, error):
    with pytest.raises(error, match=next(iter(kwargs))):
        _Ridge(**kwargs)


def test_base_fields_are_keyword_only_so_subclass_fields_come_first():
    with pytest.raises(TypeError):
        IterativeSolver(100)  # maxiter is keyword-only
    solver = _Ridge(0.2, maxiter=10)
    assert (solver.stepsize, solver.maxiter, solver.implicit_diff_solve) == (0.2, 10, None)


def _lam_gradient(solver):
    matrix, target, lam = _problem()
    return jax.grad(lambda lam: jnp.sum(solver.run(jnp.zeros(3), matrix, target, lam).params))(lam)


@pytest.mark.parametrize(
    "solve",
    [
        functools.partial(gmres_tangent_solve, tol=1e-12),
        functools.partial(cg_tangent_solve, tol=1e-12),  # ∂₁F = AᵀA + λI is SPD
    ],
    ids=["gmres", "cg"],
)
def test_matrix_free_implicit_solves_equal_the_dense_one(x64, solve):
    matrix, target, lam = _problem()
    dense = _lam_gradient(_Ridge(maxiter=5000, tol=1e-13))
    krylov = _lam_gradient(_Ridge(maxiter=5000, tol=1e-13, implicit_diff_solve=solve))
    expected = jax.grad(lambda lam: jnp.sum(_closed_form(matrix, target, lam)))(lam)
    np.testing.assert_allclose(dense, expected, rtol=1e-8)
    np.testing.assert_allclose(krylov, dense, rtol=1e-8)


def test_a_user_supplied_solve_is_used(x64):
    calls = []

    def solve(matvec, b):
        calls.append(jax.tree.structure(b))
        return dense_tangent_solve(matvec, b)

    grad = _lam_gradient(_Ridge(maxiter=5000, tol=1e-13, implicit_diff_solve=solve))
    assert calls, "implicit_diff_solve was not called"
    np.testing.assert_allclose(grad, _lam_gradient(_Ridge(maxiter=5000, tol=1e-13)), rtol=1e-10)


def test_default_solve_is_dense_when_small_and_gmres_above_the_threshold(x64, monkeypatch):
    diagonal = jnp.arange(1.0, 1202.0)  # 1201 unknowns > DENSE_SOLVE_MAX_SIZE = 1000
    rhs = {"a": jnp.ones(1200), "b": jnp.ones(1)}
    scale = {"a": diagonal[:-1], "b": diagonal[-1:]}
    matvec = lambda v: jax.tree.map(jnp.multiply, scale, v)  # noqa: E731
    used = []
    monkeypatch.setattr(
        solver_base,
        "gmres_tangent_solve",
        lambda f, b: used.append("gmres") or gmres_tangent_solve(f, b, tol=1e-12),
    )
    monkeypatch.setattr(
        solver_base,
        "dense_tangent_solve",
        lambda f, b: used.append("dense") or dense_tangent_solve(f, b),
    )
    out = default_tangent_solve(matvec, rhs)
    np.testing.assert_allclose(out["a"], 1.0 / diagonal[:-1], rtol=1e-10)
    np.testing.assert_allclose(out["b"], 1.0 / diagonal[-1:], rtol=1e-10)
    small = default_tangent_solve(lambda v: 2.0 * v, jnp.ones(3))
    np.testing.assert_allclose(small, 0.5)
    assert used == ["gmres", "dense"]


# --------------------------------------------------------------------------------------------
# Stopping status: converged / reached maxiter / non-finite are told apart (issue 14).


class _StatusState(NamedTuple):
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array


@dataclasses.dataclass(eq=False)
class _Scaling(IterativeSolver):
    """x <- factor * x with error |x|: converges for |factor| < 1, overflows for a huge one."""

    factor: float = 0.5

    def init_state(self, params):
        return _StatusState(jnp.asarray(0), jnp.asarray(jnp.inf), jnp.int32(0))

    def optimality_fun(self, params):
        return params

    def update(self, params, state):
        new = self.factor * params
        new_state = _StatusState(state.iter_num + 1, jnp.abs(new), jnp.int32(0))
        return OptStep(new, self._with_status(new, new_state))


@pytest.mark.parametrize("unroll", [False, True])
def test_status_tells_converged_maxiter_and_nonfinite_apart(unroll):
    Status = solver_base.SolverStatus
    common = dict(implicit_diff=False, unroll=unroll)
    # 0.5^k <= 1e-3 first at k = 10 (0.5^10 = 9.8e-4): closed form of the stopping iteration.
    converged = _Scaling(factor=0.5, maxiter=50, tol=1e-3, **common).run(jnp.asarray(1.0))
    assert int(converged.state.status) == Status.CONVERGED
    assert int(converged.state.iter_num) == 10
    assert float(converged.params) == 0.5**10
    capped = _Scaling(factor=0.99, maxiter=7, tol=1e-3, **common).run(jnp.asarray(1.0))
    assert int(capped.state.status) == Status.MAXITER and int(capped.state.iter_num) == 7
    # float32: 1e20^2 = 1e40 overflows to inf at the second update; the loop stops there
    # (it used to stop only on a NaN error, reading it as converged).
    blown = _Scaling(factor=1e20, maxiter=50, tol=1e-3, **common).run(jnp.asarray(1.0))
    assert int(blown.state.status) == Status.NONFINITE
    assert int(blown.state.iter_num) == 2 and np.isinf(float(blown.params))


def test_a_nan_error_is_nonfinite_not_converged():
    nan_solver = dataclasses.replace(_Scaling(maxiter=50, tol=1e-3), implicit_diff=False)
    out = nan_solver.run(jnp.asarray(jnp.nan))
    assert int(out.state.status) == solver_base.SolverStatus.NONFINITE
    assert int(out.state.iter_num) == 1


def test_state_without_status_field_still_stops_on_nonfinite():
    # _Ridge's state has no status field: the loop stops on the non-finite iterate all the same.
    matrix, target, lam = _problem()
    out = _Ridge(stepsize=1e20, maxiter=500, implicit_diff=False).run(
        jnp.ones(3), matrix, target, lam
    )
    assert int(out.state.iter_num) < 10
    assert not bool(jnp.all(jnp.isfinite(out.params)))


@pytest.mark.parametrize("tol", [float("nan"), np.float32("nan"), float("inf"), -1.0, "1e-6"])
def test_non_finite_or_bad_tol_is_rejected(tol):
    with pytest.raises((ValueError, TypeError), match="tol"):
        _Scaling(tol=tol)


def test_traced_nan_tol_runs_to_maxiter_instead_of_stopping_after_one_step():
    def run(tol):
        solver = _Scaling(factor=0.9, maxiter=12, tol=tol, implicit_diff=False, jit=False)
        return solver.run(jnp.asarray(1.0)).state

    state = jax.jit(run)(jnp.asarray(jnp.nan))
    assert int(state.iter_num) == 12 and int(state.status) == solver_base.SolverStatus.MAXITER


def test_tangent_solves_check_their_arguments():
    with pytest.raises(TypeError, match="linear_fn"):
        dense_tangent_solve(None, jnp.ones(2))
    with pytest.raises(ValueError, match=r"linear_fn\(rhs\) has shape \(1,\).*rhs"):
        gmres_tangent_solve(lambda v: v[:1], jnp.ones(2))
    with pytest.raises(ValueError, match="restart"):
        gmres_tangent_solve(lambda v: v, jnp.ones(2), restart=0)
    with pytest.raises(TypeError, match="rhs"):
        cg_tangent_solve(lambda v: v, jnp.ones(2, jnp.int32))
