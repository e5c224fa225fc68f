"""DenseQP (OSQP-style ADMM): solutions vs scipy, infeasibility, polishing, implicit gradients."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize

import jaxlab.solvers
from jaxlab.solvers import DenseQP, QPSolution, SolverStatus


def _problem():
    # A strictly convex 3-D QP with one equality, two inequalities and a box row.
    P = jnp.array([[2.0, 0.5, 0.0], [0.5, 1.0, 0.2], [0.0, 0.2, 1.5]])
    q = jnp.array([-1.0, 0.5, -2.0])
    A = jnp.array([[1.0, 1.0, 1.0], [1.0, -1.0, 0.0], [0.0, 1.0, 2.0], [1.0, 0.0, 0.0]])
    lower = jnp.array([1.0, -jnp.inf, -jnp.inf, 0.0])
    upper = jnp.array([1.0, 0.3, 1.2, jnp.inf])
    return P, q, A, lower, upper


def _scipy_solution(P, q, A, lower, upper):
    P, q, A, lower, upper = (np.asarray(v, np.float64) for v in (P, q, A, lower, upper))
    constraints = []
    for a, lo, hi in zip(A, lower, upper, strict=True):
        if lo == hi:
            constraints.append({"type": "eq", "fun": lambda v, a=a, lo=lo: a @ v - lo})
            continue
        if np.isfinite(lo):
            constraints.append({"type": "ineq", "fun": lambda v, a=a, lo=lo: a @ v - lo})
        if np.isfinite(hi):
            constraints.append({"type": "ineq", "fun": lambda v, a=a, hi=hi: hi - a @ v})
    out = minimize(
        lambda v: 0.5 * v @ P @ v + q @ v,
        np.zeros(len(q)),
        jac=lambda v: P @ v + q,
        constraints=constraints,
        method="SLSQP",
        options={"ftol": 1e-14, "maxiter": 500},
    )
    return out.x


def test_solution_matches_scipy_and_polish_reaches_rounding_level():
    with jax.enable_x64(True):
        data = _problem()
        solver = DenseQP(tol=1e-5, maxiter=5000)
        init = QPSolution(jnp.zeros(3), jnp.zeros(4))
        out = solver.run(init, *data)
        assert int(out.state.status) == SolverStatus.CONVERGED
        reference = _scipy_solution(*data)
        np.testing.assert_allclose(out.params.primal, reference, atol=1e-4)
        polished, kept = solver.polish(out.params, *data)
        assert bool(kept)
        np.testing.assert_allclose(polished.primal, reference, atol=1e-8)
        assert float(solver.primal_violation(polished, *data[2:])) < 1e-10


def test_infeasible_problem_is_certified():
    P, q = jnp.eye(2), jnp.zeros(2)
    A = jnp.array([[1.0, 0.0], [1.0, 0.0]])
    out = DenseQP().run(
        QPSolution(jnp.zeros(2), jnp.zeros(2)),
        P,
        q,
        A,
        jnp.array([1.0, -jnp.inf]),
        jnp.array([jnp.inf, 0.0]),
    )
    assert int(out.state.status) == SolverStatus.PRIMAL_INFEASIBLE


# OSQP's own dual infeasibility instances (osqp/tests: dual_infeasibility), as jaxopt's OSQP tests
# do: an LP unbounded along v₂ ≥ 0, and a QP whose P is singular along the unbounded direction.
_DUAL_INFEASIBLE = {
    "lp": (
        jnp.zeros((2, 2)),
        jnp.array([2.0, -1.0]),
        jnp.eye(2),
        jnp.zeros(2),
        jnp.full(2, jnp.inf),
    ),
    "qp": (
        jnp.diag(jnp.array([4.0, 0.0])),
        jnp.array([0.0, 2.0]),
        jnp.array([[1.0, 1.0], [-1.0, 1.0]]),
        jnp.full(2, -jnp.inf),
        jnp.array([2.0, 3.0]),
    ),
}


@pytest.mark.parametrize("name", sorted(_DUAL_INFEASIBLE))
def test_unbounded_problem_is_certified_dual_infeasible(name):
    data = P, q, A, lower, upper = _DUAL_INFEASIBLE[name]
    out = DenseQP(maxiter=2000).run(QPSolution(jnp.zeros(2), jnp.zeros(2)), *data)
    assert int(out.state.status) == SolverStatus.DUAL_INFEASIBLE, int(out.state.iter_num)
    assert int(out.state.iter_num) < 2000  # stopped by the certificate, not by maxiter
    # An independent check of the certificate: the last step (from the iterate one update
    # earlier) is a feasible descent direction along which the objective is linear.
    init, steps = QPSolution(jnp.zeros(2), jnp.zeros(2)), int(out.state.iter_num)
    before = init if steps == 1 else DenseQP(maxiter=steps - 1).run(init, *data).params
    direction = np.asarray(out.params.primal - before.primal, np.float64)
    direction /= np.max(np.abs(direction))
    assert float(q @ direction) < -0.1
    np.testing.assert_allclose(np.asarray(P) @ direction, 0.0, atol=1e-4)
    ad = np.asarray(A) @ direction
    assert np.all(ad[np.isfinite(np.asarray(upper))] <= 1e-4)
    assert np.all(ad[np.isfinite(np.asarray(lower))] >= -1e-4)


def test_bounded_lp_is_not_reported_dual_infeasible():
    # The same LP with an upper bound on v₂: bounded, optimum (0, 1); P = 0 so only the cone
    # test can reject the descent steps ADMM takes on the way.
    P, q, A, lower, _ = _DUAL_INFEASIBLE["lp"]
    out = DenseQP(tol=1e-6, maxiter=4000).run(
        QPSolution(jnp.zeros(2), jnp.zeros(2)), P, q, A, lower, jnp.array([jnp.inf, 1.0])
    )
    assert int(out.state.status) == SolverStatus.CONVERGED
    np.testing.assert_allclose(out.params.primal, [0.0, 1.0], atol=1e-4)


def test_qp_primal_infeasible_is_a_deprecated_alias():
    with pytest.warns(DeprecationWarning, match="SolverStatus.PRIMAL_INFEASIBLE"):
        value = jaxlab.solvers.QP_PRIMAL_INFEASIBLE
    assert value == SolverStatus.PRIMAL_INFEASIBLE == 5


def test_implicit_gradient_matches_central_differences():
    with jax.enable_x64(True):
        P, q, A, lower, upper = _problem()
        solver = DenseQP(tol=1e-11, maxiter=20000)
        init = QPSolution(jnp.zeros(3), jnp.zeros(4))
        weights = jnp.array([0.3, -1.0, 0.7])

        def f(q, upper):
            return weights @ solver.run(init, P, q, A, lower, upper).params.primal

        grad_q, grad_u = jax.grad(f, argnums=(0, 1))(q, upper)
        forward = jax.jit(lambda q, u: f(q, u))
        h = 1e-6
        for i in range(3):
            e = jnp.zeros(3).at[i].set(h)
            numeric = (forward(q + e, upper) - forward(q - e, upper)) / (2 * h)
            assert float(grad_q[i]) == pytest.approx(float(numeric), abs=1e-6)
        e = jnp.zeros(4).at[2].set(h)  # the active inequality's bound
        numeric = (forward(q, upper + e) - forward(q, upper - e)) / (2 * h)
        assert float(grad_u[2]) == pytest.approx(float(numeric), abs=1e-6)
        assert abs(float(grad_u[2])) > 1e-3  # the row binds: the test can fail


def test_shape_mismatch_raises():
    P, q, A, lower, upper = _problem()
    with pytest.raises(ValueError, match="lower"):
        DenseQP().run(QPSolution(jnp.zeros(3), jnp.zeros(4)), P, q, A, lower[:3], upper)


def test_solution_and_gradient_match_jaxopt_osqp():
    """The peer the issue names: jaxopt's OSQP (its own ADMM and implicit differentiation)."""
    jaxopt = pytest.importorskip("jaxopt")
    with jax.enable_x64(True):
        P, q, A, lower, upper = _problem()
        # jaxopt's OSQP takes A_eq x = b and G x <= h: split the rows by their finite sides.
        eq = np.asarray(lower == upper)
        hi = np.asarray(jnp.isfinite(upper)) & ~eq
        lo = np.asarray(jnp.isfinite(lower)) & ~eq
        G = jnp.concatenate([A[hi], -A[lo]])
        peer = jaxopt.OSQP(tol=1e-10, maxiter=20000)
        solver = DenseQP(tol=1e-11, maxiter=20000)
        init = QPSolution(jnp.zeros(3), jnp.zeros(4))
        weights = jnp.array([0.3, -1.0, 0.7])

        def ours(q, upper):
            return solver.run(init, P, q, A, lower, upper).params.primal

        def theirs(q, upper):
            h = jnp.concatenate([upper[hi], -lower[lo]])
            return peer.run(
                params_obj=(P, q), params_eq=(A[eq], lower[eq]), params_ineq=(G, h)
            ).params.primal

        # Each solve and each gradient is one compiled program (eagerly, the code around the
        # solvers' loops compiles op by op).
        np.testing.assert_allclose(jax.jit(ours)(q, upper), jax.jit(theirs)(q, upper), atol=1e-7)
        # The solution is a vertex (the equality and two rows bind): its derivative is in the
        # active bounds, not in q.
        g_ours = jax.jit(jax.grad(lambda u: weights @ ours(q, u)))(upper)
        g_theirs = jax.jit(jax.grad(lambda u: weights @ theirs(q, u)))(upper)
        np.testing.assert_allclose(g_ours, g_theirs, atol=1e-6)
        assert float(jnp.abs(g_ours).max()) > 0.1
