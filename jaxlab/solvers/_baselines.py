"""Baselines that Hom-PGD⁺ is measured against: exact-projection PGD, penalty, ALM, SLSQP.

- :func:`exact_projection_pgd`: projected gradient in x with an exact projection onto K and the
  public code's adaptive step and stopping rule (jit-compatible; the projection is the user's).
- :func:`penalty_method` and :func:`augmented_lagrangian`: quadratic-penalty and augmented
  Lagrangian methods whose inner minimisations are a fixed number of Adam or plain gradient
  steps (one ``lax.scan``; ``vmap`` them over instances through ``*args``).
- :func:`slsqp_local_solve`: one SLSQP solve of a :class:`QCQPInstance` from a given start (the
  CPU stand-in for the authors' local IPOPT reference).
- :func:`slsqp_multistart`: the best feasible SLSQP (scipy, float64, host) solution over uniform
  starts in the box (near-global).
- :func:`slsqp_projection_pgd`: projected gradient whose projection onto the QCQP's feasible
  set is an SLSQP solve each step (the paper's exact-projection PGD on the QCQPs).

The SLSQP baselines run with one OpenBLAS thread (as ``jaxlab._src.threads`` explains): on a
loaded 2-core CPU OpenBLAS's worker threads spin against XLA's and a 3 ms solve was measured at
20-300 ms, which would inflate every speed-up measured against them.

References:
  C. Liu, E. Liang, M. Chen, "Hom-PGD⁺: Fast Reparameterized Optimization over Non-convex
  Ball-Homeomorphic Set", ICML 2026 (the baselines of its experiments).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import scipy.optimize

from jaxlab._src.threads import one_blas_thread
from jaxlab._src.validation import (
    check_array,
    check_callable,
    check_choice,
    check_int,
    check_nonnegative,
    check_positive,
    check_positive_int,
    check_real,
)
from jaxlab.solvers._hom_pgd_problems import QCQPInstance, _numpy_problem

__all__ = [
    "BaselineRun",
    "augmented_lagrangian",
    "exact_projection_pgd",
    "penalty_method",
    "slsqp_local_solve",
    "slsqp_multistart",
    "slsqp_projection_pgd",
]


class BaselineRun(NamedTuple):
    """What the jit-compatible baselines return.

    Attributes:
      x: the final point.
      value: the objective there.
      iterations: number of steps (outer rounds for the penalty and ALM methods).

    Examples:
      >>> BaselineRun._fields
      ('x', 'value', 'iterations')
    """

    x: jax.Array
    value: jax.Array
    iterations: jax.Array


def _check_callable(fn, name: str) -> None:
    check_callable(fn, name)


def _check_like_x0(out, x0, what: str) -> None:
    if getattr(out, "shape", None) != x0.shape or getattr(out, "dtype", None) != x0.dtype:
        raise ValueError(
            f"{what} must return an array like x0 ({x0.dtype}{list(x0.shape)}), got "
            f"{getattr(out, 'dtype', type(out).__name__)}{list(getattr(out, 'shape', ()))}"
        )


def _check_instance(instance) -> None:
    if not isinstance(instance, QCQPInstance):
        raise TypeError(
            f"instance must be a QCQPInstance (from sample_qcqp), got {type(instance).__name__}"
        )
    if np.ndim(instance.linear) != 1:
        raise ValueError(
            "instance must be one QCQP instance (linear of shape (n,)), got linear of shape "
            f"{np.shape(instance.linear)}: pick instance i of a batch with "
            "jax.tree.map(lambda a: a[i], batch)"
        )


def _check_step_rule(stepsize, decay, min_stepsize, maxiter, tol) -> None:
    check_positive(stepsize, "stepsize")
    check_real(decay, "decay", minimum=0.0, maximum=1.0, include_minimum=False)
    check_nonnegative(min_stepsize, "min_stepsize")
    check_positive_int(maxiter, "maxiter")
    check_nonnegative(tol, "tol")


def exact_projection_pgd(
    fun: Callable[[jax.Array], jax.Array],
    projection: Callable[[jax.Array], jax.Array],
    x0: jax.typing.ArrayLike,
    *,
    stepsize: jax.typing.ArrayLike = 0.005,
    decay: float = 0.999,
    min_stepsize: float = 1e-6,
    maxiter: int = 2000,
    tol: float = 1e-5,
) -> BaselineRun:
    """Projected gradient in x with an exact projection, the code's adaptive step and stop rule.

    ``x_{k+1} = Π_K(x_k - η_k ∇f(x_k))``; η decays by ``decay`` (floored at ``min_stepsize``)
    when f increased; stops when ``|f_{k+1} - f_k| <= tol`` (the projection keeps every iterate
    feasible) or at ``maxiter``. One ``lax.while_loop``; ``stepsize`` may be traced, so one
    compiled program serves every step size.

    Args:
      fun: objective ``fun(x) -> scalar``.
      projection: Euclidean projection onto K, ``projection(y) -> x``.
      x0: start (projected first).
      stepsize: initial step η₀ > 0.
      decay: factor in (0, 1] applied to η when f increased.
      min_stepsize: floor of η.
      maxiter: maximum number of steps.
      tol: stop when the objective changes by at most this.

    Returns:
      A :class:`BaselineRun` (``iterations``: steps taken).

    Examples:
      >>> from jaxlab.solvers import star_objective, star_projection
      >>> out = exact_projection_pgd(star_objective, star_projection, jnp.array([0.9, 0.3]))
      >>> round(float(out.value), 4)  # stops at |Δf| <= 1e-5, short of f* = 0.0307
      0.0318

    References:
      C. Liu, E. Liang, M. Chen, "Hom-PGD⁺", ICML 2026 (the exact-projection PGD baseline).
    """
    _check_step_rule(stepsize, decay, min_stepsize, maxiter, tol)
    _check_callable(fun, "fun")
    _check_callable(projection, "projection")
    x0 = check_array(x0, "x0", kind="floating")
    _check_like_x0(jax.eval_shape(projection, x0), x0, "projection(x0)")
    x0 = projection(x0)
    value_and_grad = jax.value_and_grad(fun)

    def cond(carry):
        _, _, _, k, change = carry
        return (k == 0) | ((k < maxiter) & (change > tol))

    def body(carry):
        x, value, eta, k, _ = carry
        new_x = projection(x - eta * jax.grad(fun)(x))
        new_value = fun(new_x)
        eta = jnp.where(new_value > value, jnp.maximum(decay * eta, min_stepsize), eta)
        return new_x, new_value, eta, k + 1, jnp.abs(new_value - value)

    value = value_and_grad(x0)[0]
    init = (x0, value, jnp.asarray(stepsize, x0.dtype), jnp.asarray(0), jnp.asarray(jnp.inf))
    x, value, _, k, _ = jax.lax.while_loop(cond, body, init)
    return BaselineRun(x, value, k)


_INNER_SOLVERS = ("adam", "gd")


def _inner_steps(objective, x, steps, learning_rate, inner_solver):
    """``steps`` Adam or gradient-descent steps on ``objective`` from ``x`` (one ``lax.scan``)."""
    tx = optax.adam(learning_rate) if inner_solver == "adam" else optax.sgd(learning_rate)

    def step(carry, _):
        x, state = carry
        grad = jax.grad(objective)(x)
        updates, state = tx.update(grad, state, x)
        return (optax.apply_updates(x, updates), state), None

    (x, _), _ = jax.lax.scan(step, (x, tx.init(x)), None, steps)
    return x


def _check_penalty_schedule(
    outer, inner, learning_rate, penalty, growth, max_penalty, inner_solver
) -> None:
    check_choice(inner_solver, "inner_solver", _INNER_SOLVERS)
    check_positive_int(outer, "outer")
    check_positive_int(inner, "inner")
    check_positive(learning_rate, "learning_rate")
    check_positive(penalty, "penalty")
    check_real(growth, "growth", minimum=1.0)
    check_positive(max_penalty, "max_penalty")


def _check_problem(fun, constraint_fn, x0):
    _check_callable(fun, "fun")
    _check_callable(constraint_fn, "constraint_fn")
    return check_array(x0, "x0", kind="floating")


def penalty_method(
    fun: Callable[..., jax.Array],
    constraint_fn: Callable[..., jax.Array],
    x0: jax.typing.ArrayLike,
    *args,
    outer: int = 80,
    inner: int = 100,
    learning_rate: jax.typing.ArrayLike = 0.1,
    penalty: jax.typing.ArrayLike = 1.0,
    growth: float = 1.1,
    max_penalty: float = 1e3,
    inner_solver: Literal["adam", "gd"] = "adam",
) -> BaselineRun:
    """Quadratic penalty: ``outer`` rounds of ``inner`` steps on f + (ρ/2) Σ [g_j]₊².

    Round k minimises ``P_ρ(x) = f(x) + (ρ_k/2) Σ_j max(0, g_j(x))²`` by ``inner`` Adam
    (``inner_solver="adam"``) or plain gradient steps (``"gd"``, the authors' baselines: rate
    1e-3, 100 steps, as many rounds as Hom-PGD has iterations) from the last iterate, then
    ρ_{k+1} = min(growth ρ_k, max_penalty). Iterates need not be feasible: the penalty only
    discourages violation. ``fun`` and ``constraint_fn`` take ``(x, *args)``, so the method maps
    over a batch of instances with ``jax.vmap``.

    Args:
      fun: objective ``fun(x, *args) -> scalar``.
      constraint_fn: residuals ``constraint_fn(x, *args) -> (m,)`` (<= 0 feasible).
      x0: start.
      *args: extra arguments of ``fun`` and ``constraint_fn`` (e.g. a problem instance).
      outer: number of penalty rounds.
      inner: inner steps per round.
      learning_rate: the inner solver's learning rate.
      penalty: initial ρ > 0.
      growth: factor >= 1 applied to ρ after each round.
      max_penalty: cap of ρ.
      inner_solver: ``"adam"`` or ``"gd"`` (gradient descent).

    Returns:
      A :class:`BaselineRun` (``iterations``: ``outer``).

    Examples:
      >>> from jaxlab.solvers import star_constraint, star_objective
      >>> out = penalty_method(star_objective, star_constraint, jnp.array([0.9, 0.3]))
      >>> float(star_constraint(out.x)[0]) < 0.05
      True

    References:
      C. Liu, E. Liang, M. Chen, "Hom-PGD⁺", ICML 2026 (the penalty baseline).
    """
    _check_penalty_schedule(outer, inner, learning_rate, penalty, growth, max_penalty, inner_solver)
    x0 = _check_problem(fun, constraint_fn, x0)

    def round_(carry, _):
        x, rho = carry

        def objective(y):
            return fun(y, *args) + 0.5 * rho * jnp.sum(jax.nn.relu(constraint_fn(y, *args)) ** 2)

        x = _inner_steps(objective, x, inner, learning_rate, inner_solver)
        return (x, jnp.minimum(growth * rho, max_penalty)), None

    init = (x0, jnp.asarray(penalty, x0.dtype))
    (x, _), _ = jax.lax.scan(round_, init, None, outer)
    return BaselineRun(x, fun(x, *args), jnp.asarray(outer))


def augmented_lagrangian(
    fun: Callable[..., jax.Array],
    constraint_fn: Callable[..., jax.Array],
    x0: jax.typing.ArrayLike,
    *args,
    outer: int = 80,
    inner: int = 100,
    learning_rate: jax.typing.ArrayLike = 0.1,
    penalty: jax.typing.ArrayLike = 1.0,
    growth: float = 1.1,
    max_penalty: float = 1e3,
    dual_learning_rate: jax.typing.ArrayLike = 1.0,
    inner_solver: Literal["adam", "gd"] = "adam",
) -> BaselineRun:
    """Augmented Lagrangian: minimise f + λᵀg + (ρ/2) Σ [g_j]₊², then λ <- [λ + lr_dual g]₊.

    ``outer`` rounds; round k takes ``inner`` Adam (``inner_solver="adam"``) or plain gradient
    (``"gd"``) steps on ``L_ρ(x, λ_k) = f(x) + Σ_j λ_kj g_j(x) + (ρ_k/2) Σ_j max(0, g_j(x))²``,
    then the multipliers take a projected dual ascent step
    ``λ_{k+1} = max(0, λ_k + dual_learning_rate g(x_{k+1}))`` and
    ρ_{k+1} = min(growth ρ_k, max_penalty). ``fun`` and ``constraint_fn`` take ``(x, *args)``.

    Args:
      fun: objective ``fun(x, *args) -> scalar``.
      constraint_fn: residuals ``constraint_fn(x, *args) -> (m,)`` (<= 0 feasible).
      x0: start.
      *args: extra arguments of ``fun`` and ``constraint_fn`` (e.g. a problem instance).
      outer: number of rounds.
      inner: inner steps per round.
      learning_rate: the inner solver's learning rate.
      penalty: initial ρ > 0.
      growth: factor >= 1 applied to ρ after each round.
      max_penalty: cap of ρ.
      dual_learning_rate: step of the multiplier update.
      inner_solver: ``"adam"`` or ``"gd"`` (gradient descent).

    Returns:
      A :class:`BaselineRun` (``iterations``: ``outer``).

    Examples:
      >>> from jaxlab.solvers import star_constraint, star_objective
      >>> out = augmented_lagrangian(star_objective, star_constraint, jnp.array([0.9, 0.3]))
      >>> float(star_constraint(out.x)[0]) < 0.05
      True

    References:
      C. Liu, E. Liang, M. Chen, "Hom-PGD⁺", ICML 2026 (the augmented-Lagrangian baseline).
    """
    _check_penalty_schedule(outer, inner, learning_rate, penalty, growth, max_penalty, inner_solver)
    check_positive(dual_learning_rate, "dual_learning_rate")
    x0 = _check_problem(fun, constraint_fn, x0)
    multipliers = jnp.zeros_like(constraint_fn(x0, *args))

    def round_(carry, _):
        x, lam, rho = carry

        def objective(y):
            g = constraint_fn(y, *args)
            return fun(y, *args) + jnp.sum(lam * g) + 0.5 * rho * jnp.sum(jax.nn.relu(g) ** 2)

        x = _inner_steps(objective, x, inner, learning_rate, inner_solver)
        lam = jax.nn.relu(lam + dual_learning_rate * constraint_fn(x, *args))
        return (x, lam, jnp.minimum(growth * rho, max_penalty)), None

    init = (x0, multipliers, jnp.asarray(penalty, x0.dtype))
    (x, _, _), _ = jax.lax.scan(round_, init, None, outer)
    return BaselineRun(x, fun(x, *args), jnp.asarray(outer))


_SLSQP_FEASIBILITY_TOL = 1e-6  # an SLSQP end point counts as feasible at this violation


def _slsqp(problem, x0: np.ndarray, n: int, maxiter: int, ftol: float):
    """One SLSQP run on ``_numpy_problem``'s pieces; returns (result, violation, seconds)."""
    fun, grad, constraints, violation = problem
    start = time.perf_counter()
    res = scipy.optimize.minimize(
        fun,
        x0,
        jac=grad,
        method="SLSQP",
        bounds=[(-5.0, 5.0)] * n,
        constraints=constraints,
        options={"maxiter": maxiter, "ftol": ftol},
    )
    return res, violation(res.x), time.perf_counter() - start


def slsqp_local_solve(
    instance: QCQPInstance,
    x0: jax.typing.ArrayLike | None = None,
    *,
    maxiter: int = 200,
    ftol: float = 1e-10,
) -> dict:
    """One local SLSQP solve of a QCQP from ``x0`` (default x = 0, strictly feasible).

    Sequential least squares QP (scipy, float64, host): each iteration solves the QP of a
    quadratic model of f with the constraints ½xᵀQ_jx + p_jᵀx <= b_j and ||x||² <= 25
    linearised at x_k (analytic gradients and Jacobians), the box ``|x_i| <= 5`` as bounds, then
    a line search on an L1 merit function. It stops at a KKT point of the instance, so from one
    start it is a local solve: the CPU stand-in for the local IPOPT reference of the paper's QCQP
    tables, and the "from the same start" reference of a single-start Hom-PGD run (z = 0 maps
    near x = 0). One OpenBLAS thread; ``time_s`` times the solve alone.

    Args:
      instance: a :class:`QCQPInstance`.
      x0: start, shape (n,) (None: zeros).
      maxiter: SLSQP's iteration cap.
      ftol: SLSQP's tolerance on the objective.

    Returns:
      ``{"value", "x", "violation", "feasible", "success", "iterations", "time_s"}``;
      ``feasible`` means a violation of at most 1e-6.

    Examples:
      >>> from jaxlab.solvers import sample_qcqp
      >>> out = slsqp_local_solve(sample_qcqp(jax.random.key(0), 2, 3))
      >>> out["feasible"], out["success"], out["value"] < 0.0
      (True, True, True)

    References:
      D. Kraft, "A software package for sequential quadratic programming", DFVLR 1988;
      C. Liu, E. Liang, M. Chen, "Hom-PGD⁺", ICML 2026 (the local reference of its QCQP tables).
    """
    _check_instance(instance)
    maxiter = check_positive_int(maxiter, "maxiter")
    check_positive(ftol, "ftol")
    n = np.shape(instance.linear)[-1]
    if x0 is None:
        x0 = np.zeros(n)
    x0 = np.asarray(check_array(x0, "x0", kind="floating", host=True), np.float64)
    if x0.shape != (n,):
        raise ValueError(f"x0 must have shape (n,) = ({n},) for this instance, got {x0.shape}")
    problem = _numpy_problem(instance)
    with one_blas_thread():
        res, violation, seconds = _slsqp(problem, x0, n, maxiter, ftol)
    return {
        "value": float(res.fun),
        "x": res.x,
        "violation": violation,
        "feasible": violation <= _SLSQP_FEASIBILITY_TOL,
        "success": bool(res.success),
        "iterations": int(res.nit),
        "time_s": seconds,
    }


def slsqp_multistart(instance: QCQPInstance, num_starts: int, seed: int) -> dict:
    """Best feasible SLSQP solution of a QCQP from ``num_starts`` uniform starts in the box.

    :func:`slsqp_local_solve` (200 iterations, ftol 1e-10) from each of ``num_starts`` starts
    drawn uniformly in [-5, 5]^n; the lowest objective among the runs with a violation of at
    most 1e-6 is kept (a near-global reference, or the multi-start solver-based baseline).

    Args:
      instance: a :class:`QCQPInstance`.
      num_starts: number of starts, uniform in [-5, 5]^n.
      seed: seed of the starts (``numpy.random.default_rng``).

    Returns:
      ``{"value", "x", "violation", "time_s"}``: the best feasible run (``value`` inf and ``x``
      None when none is feasible) and the summed solve time of all runs.

    Examples:
      >>> from jaxlab.solvers import sample_qcqp
      >>> out = slsqp_multistart(sample_qcqp(jax.random.key(0), 2, 3), num_starts=3, seed=0)
      >>> out["violation"] <= 1e-6
      True

    References:
      C. Liu, E. Liang, M. Chen, "Hom-PGD⁺", ICML 2026 (the multi-start reference solver).
    """
    num_starts = check_positive_int(num_starts, "num_starts")
    check_int(seed, "seed", minimum=0)
    _check_instance(instance)
    problem = _numpy_problem(instance)
    n = np.asarray(instance.linear).shape[0]
    rng = np.random.default_rng(seed)
    best = {"value": np.inf, "x": None, "violation": np.inf}
    total = 0.0
    with one_blas_thread():
        for _ in range(num_starts):
            res, violation, seconds = _slsqp(problem, rng.uniform(-5.0, 5.0, n), n, 200, 1e-10)
            total += seconds
            if violation <= _SLSQP_FEASIBILITY_TOL and res.fun < best["value"]:
                best = {"value": float(res.fun), "x": res.x, "violation": violation}
    best["time_s"] = total
    return best


def slsqp_projection_pgd(
    instance: QCQPInstance,
    x0: np.ndarray,
    *,
    stepsize: float,
    maxiter: int,
    tol: float,
    time_limit_s: float,
    decay: float = 0.999,
    feasibility_tol: float = 1e-5,
) -> dict:
    """Projected gradient on a QCQP whose projection is an SLSQP solve each step (float64, host).

    ``x_{k+1} = argmin_{x ∈ K} ||x - (x_k - η_k ∇f(x_k))||²`` by SLSQP warm-started at x_k; η
    decays by ``decay`` (floored at 1e-6) when f increased. The code's stopping rule:
    ``maxiter`` steps, ``|Δf| <= tol`` while feasible, or a wall-clock limit.

    Args:
      instance: a :class:`QCQPInstance`.
      x0: start, shape (n,).
      stepsize: initial step η₀ > 0.
      maxiter: maximum number of steps.
      tol: stop when the objective changes by at most this at a feasible point.
      time_limit_s: wall-clock limit (a capped run is flagged).
      decay: factor in (0, 1] applied to η when f increased.
      feasibility_tol: violation allowed by the stopping rule.

    Returns:
      ``{"value", "violation", "iterations", "capped", "time_s"}`` (``time_s``: the loop's wall
      time, with one OpenBLAS thread).

    Examples:
      >>> from jaxlab.solvers import sample_qcqp
      >>> out = slsqp_projection_pgd(sample_qcqp(jax.random.key(0), 2, 3), np.zeros(2),
      ...                            stepsize=0.1, maxiter=20, tol=1e-5, time_limit_s=10.0)
      >>> out["violation"] <= 1e-5, out["iterations"] <= 20
      (True, True)

    References:
      C. Liu, E. Liang, M. Chen, "Hom-PGD⁺", ICML 2026 (exact-projection PGD on the QCQPs).
    """
    _check_step_rule(stepsize, decay, 0.0, maxiter, tol)
    check_positive(time_limit_s, "time_limit_s")
    check_nonnegative(feasibility_tol, "feasibility_tol")
    _check_instance(instance)
    n = np.shape(instance.linear)[-1]
    x0 = check_array(x0, "x0", kind="floating", host=True)
    if x0.shape != (n,):
        raise ValueError(f"x0 must have shape (n,) = ({n},) for this instance, got {x0.shape}")
    fun, grad, constraints, violation = _numpy_problem(instance)

    def project(y, warm):
        res = scipy.optimize.minimize(
            lambda x: 0.5 * np.sum((x - y) ** 2),
            warm,
            jac=lambda x: x - y,
            method="SLSQP",
            bounds=[(-5.0, 5.0)] * n,
            constraints=constraints,
            options={"maxiter": 100, "ftol": 1e-12},
        )
        return res.x

    with one_blas_thread():
        start = time.perf_counter()
        x = project(np.asarray(x0, np.float64), np.asarray(x0, np.float64))
        value, eta, k, capped = fun(x), stepsize, 0, False
        while k < maxiter:
            if time.perf_counter() - start > time_limit_s:
                capped = True
                break
            new_x = project(x - eta * grad(x), x)
            new_value = fun(new_x)
            if new_value > value:
                eta = max(decay * eta, 1e-6)
            k += 1
            change, x, value = abs(new_value - value), new_x, new_value
            if change <= tol and violation(x) <= feasibility_tol:
                break
        seconds = time.perf_counter() - start
    return {
        "value": float(value),
        "violation": violation(x),
        "iterations": k,
        "capped": capped,
        "time_s": seconds,
    }
