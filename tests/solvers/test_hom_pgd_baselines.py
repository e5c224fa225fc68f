"""The QCQP batch, the local SLSQP reference and the batched Lagrangian baselines (issue 23)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

from jaxlab.solvers import (
    QCQPInstance,
    augmented_lagrangian,
    penalty_method,
    qcqp_constraints,
    qcqp_objective,
    sample_qcqp,
    sample_qcqp_batch,
    slsqp_local_solve,
    slsqp_multistart,
    slsqp_projection_pgd,
)


def _host(instance) -> QCQPInstance:
    return QCQPInstance(*(np.asarray(a, np.float64) for a in instance))


def test_sample_qcqp_batch_stacks_the_single_instances():
    """Second path: instance i of the batch is sample_qcqp on the i-th split key."""
    key = jax.random.key(2025)
    batch = sample_qcqp_batch(key, 10, 7, 3)
    assert batch.constraint_quad.shape == (3, 7, 10, 10) and batch.linear.shape == (3, 10)
    sample = jax.jit(sample_qcqp, static_argnums=(1, 2))  # one program instead of op by op
    for i, k in enumerate(jax.random.split(key, 3)):
        single = sample(k, 10, 7)
        for got, want in zip(batch, single, strict=True):
            np.testing.assert_allclose(got[i], want, rtol=1e-6, atol=1e-7)
    # Every instance of the family has x = 0 strictly feasible.
    residuals = jax.jit(jax.vmap(lambda inst: qcqp_constraints(jnp.zeros(10), inst)))(batch)
    assert bool(jnp.all(residuals < 0))


def _kkt_residual(instance: QCQPInstance, x: np.ndarray, active_tol: float = 1e-6) -> float:
    """Independent truth for a local solve: the first-order KKT residual at x, with multipliers
    of the active constraints fitted by non-negative least squares (numpy/scipy, float64)."""
    q, p, qc, pc, bc = _host(instance)
    grad = 0.5 * (q + q.T) @ x + p
    rows = 0.5 * np.einsum("i,mij,j->m", x, qc, x) + pc @ x - bc
    jac_rows = np.einsum("mij,j->mi", 0.5 * (qc + np.transpose(qc, (0, 2, 1))), x) + pc
    n = x.shape[0]
    residuals = np.concatenate([rows, x - 5.0, -x - 5.0, [x @ x - 25.0]])
    jacobian = np.concatenate([jac_rows, np.eye(n), -np.eye(n), 2.0 * x[None]])
    active = residuals >= -active_tol
    if not active.any():
        return float(np.linalg.norm(grad))
    _, misfit = scipy.optimize.nnls(jacobian[active].T, -grad)
    return float(misfit)


def test_slsqp_local_solve_returns_a_kkt_point_from_x0():
    sizes = ((2, 3), (10, 10), (10, 100))
    for key, (n, m) in zip(jax.random.split(jax.random.key(3), 3), sizes, strict=True):
        instance = sample_qcqp(key, n, m)
        out = slsqp_local_solve(instance)
        assert out["success"] and out["feasible"] and out["violation"] <= 1e-6
        assert out["time_s"] > 0 and out["iterations"] >= 1
        assert _kkt_residual(instance, out["x"]) <= 1e-5
        assert out["value"] == pytest.approx(float(_objective(instance, out["x"])), abs=1e-12)
        assert out["value"] < 0.0  # descends from f(0) = 0
        # The default start is x = 0; an explicit start gives that run back.
        again = slsqp_local_solve(instance, np.zeros(n))
        np.testing.assert_allclose(again["x"], out["x"], atol=1e-10)


def _objective(instance, x):
    q, p, *_ = _host(instance)
    return 0.5 * x @ q @ x + p @ x


def test_slsqp_local_solve_on_a_closed_form_and_the_multistart_agrees():
    """min -x₁ s.t. ||x||² <= 4: x* = (2, 0), f* = -2, from any feasible start."""
    instance = sample_qcqp(jax.random.key(0), 2, 1)._replace(
        quad=jnp.zeros((2, 2)),
        linear=jnp.array([-1.0, 0.0]),
        constraint_quad=2.0 * jnp.eye(2)[None],
        constraint_linear=jnp.zeros((1, 2)),
        constraint_bound=jnp.array([4.0]),
    )
    out = slsqp_local_solve(instance, np.array([0.5, -1.0]))
    assert out["value"] == pytest.approx(-2.0, abs=1e-8)
    np.testing.assert_allclose(out["x"], [2.0, 0.0], atol=1e-5)
    best = slsqp_multistart(instance, num_starts=3, seed=0)
    assert best["value"] == pytest.approx(-2.0, abs=1e-8) and best["time_s"] > 0
    pgd = slsqp_projection_pgd(
        instance, np.zeros(2), stepsize=0.1, maxiter=200, tol=1e-9, time_limit_s=60.0
    )
    assert pgd["value"] == pytest.approx(-2.0, abs=1e-5) and pgd["time_s"] > 0


def test_penalty_and_alm_gradient_steps_and_instance_args(x64):
    """min (x - 2)² s.t. x <= 1 with plain gradient inner steps: the penalty's minimiser at the
    capped ρ = 1e3 is (4 + ρ)/(2 + ρ); the ALM's x tends to 1 (λ* = 2). The rate 1e-3 keeps
    gradient descent stable up to curvature 2 + ρ = 1002."""
    fun = lambda x, c: jnp.sum((x - c) ** 2)  # noqa: E731
    constraint = lambda x, c: x - 1.0  # noqa: E731
    options = dict(outer=80, inner=300, learning_rate=1e-3, inner_solver="gd")
    penalty = penalty_method(fun, constraint, jnp.zeros(1), 2.0, **options)
    assert float(penalty.x[0]) == pytest.approx(1004.0 / 1002.0, abs=1e-6)
    alm = augmented_lagrangian(fun, constraint, jnp.zeros(1), 2.0, **options)
    assert float(alm.x[0]) == pytest.approx(1.0, abs=1e-4)
    with pytest.raises(ValueError, match="inner_solver"):
        penalty_method(fun, constraint, jnp.zeros(1), 2.0, inner_solver="newton")


def test_baselines_vmap_over_instances_like_single_calls():
    batch = sample_qcqp_batch(jax.random.key(1), 4, 3, 3)
    options = dict(outer=5, inner=20, learning_rate=1e-2, inner_solver="gd")

    def run(instance):
        return penalty_method(qcqp_objective, qcqp_constraints, jnp.zeros(4), instance, **options)

    batched = jax.jit(jax.vmap(run))(batch)

    @jax.jit
    def closure_path(instance):  # the instance closed over instead of passed through *args
        fun = lambda x: qcqp_objective(x, instance)  # noqa: E731
        return penalty_method(fun, lambda x: qcqp_constraints(x, instance), jnp.zeros(4), **options)

    for i in range(3):
        single = closure_path(jax.tree.map(lambda a, i=i: a[i], batch))
        np.testing.assert_allclose(batched.x[i], single.x, rtol=1e-5, atol=1e-6)
        assert float(batched.value[i]) == pytest.approx(float(single.value), rel=1e-5)
