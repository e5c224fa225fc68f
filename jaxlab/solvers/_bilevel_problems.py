"""Distributed bilevel problems with exact (centralised) references, for FAB and its baselines.

- :class:`BilevelProblem`: per-agent ``f_i(x, y, *data_i)``, ``g_i(x, y, *data_i)`` with the
  agents on the leading axis of ``data``; ``f = (1/n) Σ f_i``, ``g = (1/n) Σ g_i``.
- :func:`lower_level_solution` and :func:`exact_hypergradient`: ``y*(x)`` by Newton's method and
  ``∇F(x)`` by implicit differentiation (the exact quantities FAB approximates).
- :func:`centralized_penalty_trajectory`: the centralised value-function penalty method (pooled
  gradients, FAB's three-block steps), the baseline FAB must match at equal rounds.
- :func:`exact_bilevel_solution`: L-BFGS on ``F`` with the exact hypergradient.
- :func:`diabetes_ridge_tuning` and :func:`digits_hyper_cleaning`: the two instances of FAB's
  experiments, built from scikit-learn's bundled datasets (no download).

References:
  Ma, Wang, Yao, Zhang, "FAB: A First-Order AB-based Gradient Algorithm for Distributed Bilevel
  Optimization over Time-Varying Directed Graphs", ICML 2026 (arXiv 2605.06328).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize
from jax.flatten_util import ravel_pytree

from jaxlab._src import validation

__all__ = [
    "BilevelProblem",
    "BilevelSolution",
    "centralized_penalty_trajectory",
    "diabetes_ridge_tuning",
    "digits_hyper_cleaning",
    "exact_bilevel_solution",
    "exact_hypergradient",
    "lower_level_solution",
]


@dataclasses.dataclass(frozen=True)
class BilevelProblem:
    """A distributed bilevel problem: per-agent ``f_i(x, y, *data_i)``, ``g_i(x, y, *data_i)``.

    ``min_x F(x) = f(x, y*(x))``, ``y*(x) = argmin_y g(x, y)``, with ``f = (1/n) Σ f_i`` and
    ``g = (1/n) Σ g_i`` (``g`` strongly convex in ``y``).

    Attributes:
      upper: ``f_i(x, y, *data_i)``, one agent's upper-level objective (a scalar).
      lower: ``g_i(x, y, *data_i)``, one agent's lower-level objective.
      data: a tuple of arrays with the agents on the leading axis.
      x0: one agent's starting upper variable.
      y0: one agent's starting lower variable (also the start of Newton's method for ``y*``).

    Examples:
      >>> problem = BilevelProblem(
      ...     upper=lambda x, y, c: 0.5 * (y - c) ** 2 + 0.5 * x**2,
      ...     lower=lambda x, y, c: 0.5 * (y - x) ** 2,
      ...     data=(jnp.array([0.0, 2.0]),), x0=jnp.zeros(()), y0=jnp.zeros(()))
      >>> problem.num_agents
      2
      >>> float(problem.pooled_upper(1.0, 1.0))  # mean of (1 - c)²/2, plus 1/2
      1.0
    """

    upper: Callable[..., jax.Array]
    lower: Callable[..., jax.Array]
    data: tuple
    x0: Any
    y0: Any

    def __post_init__(self):
        for name in ("upper", "lower"):
            validation.check_callable(getattr(self, name), name, signature=f"{name}(x, y, *data_i)")
        if not isinstance(self.data, tuple) or not self.data:
            raise TypeError(
                f"data must be a non-empty tuple of arrays (agents on the leading axis), got "
                f"{type(self.data).__name__}"
            )
        sizes = set()
        for i, leaf in enumerate(self.data):
            shape = tuple(np.shape(leaf))
            if not shape:
                raise ValueError(f"data[{i}] must carry the agents on a leading axis, got a scalar")
            sizes.add(shape[0])
        if len(sizes) != 1:
            raise ValueError(
                f"data arrays must share one leading (agent) size, got {sorted(sizes)}"
            )
        validation.check_floating_tree(self.x0, "x0")
        validation.check_floating_tree(self.y0, "y0")

    @property
    def num_agents(self) -> int:
        """``n``, the leading size of ``data``."""
        return int(self.data[0].shape[0])

    def pooled_upper(self, x, y):
        """``f(x, y) = (1/n) Σ_i f_i(x, y, *data_i)``."""
        return jnp.mean(jax.vmap(lambda *d: self.upper(x, y, *d))(*self.data))

    def pooled_lower(self, x, y):
        """``g(x, y) = (1/n) Σ_i g_i(x, y, *data_i)``."""
        return jnp.mean(jax.vmap(lambda *d: self.lower(x, y, *d))(*self.data))

    def grad_fns(self):
        """``(∇f_i, ∇g_i)``, each ``(x, y, *data_i) -> (∇_x, ∇_y)``: FAB's gradient functions."""
        upper = jax.grad(self.upper, argnums=(0, 1))
        lower = jax.grad(self.lower, argnums=(0, 1))
        return upper, lower


class BilevelSolution(NamedTuple):
    """What :func:`exact_bilevel_solution` returns.

    Attributes:
      x: the upper variable found (a pytree like ``problem.x0``, float64 NumPy leaves).
      value: ``F(x)``.
      grad_norm: ``||∇F(x)||`` (exact hypergradient).
      iterations: L-BFGS iterations used.

    Examples:
      >>> BilevelSolution(x=0.5, value=0.75, grad_norm=0.0, iterations=3).value
      0.75
    """

    x: Any
    value: float
    grad_norm: float
    iterations: int


def _check_problem(problem) -> None:
    if not isinstance(problem, BilevelProblem):
        raise TypeError(f"problem must be a BilevelProblem, got {type(problem).__name__}")


def lower_level_solution(problem: BilevelProblem, x, *, newton_steps: int = 8, init=None):
    """``y*(x) = argmin_y g(x, y)`` by ``newton_steps`` Newton steps (flattened ``y``).

    Exact after one step when ``g`` is quadratic in ``y``; Newton converges quadratically on the
    strongly convex ``g`` otherwise.

    Args:
      problem: the :class:`BilevelProblem`.
      x: the upper variable.
      newton_steps: Newton steps, ``>= 0`` (static).
      init: the start (default ``problem.y0``).

    Returns:
      ``y*(x)``, a pytree like ``problem.y0``.

    Examples:
      >>> problem = BilevelProblem(
      ...     upper=lambda x, y, c: 0.5 * (y - c) ** 2,
      ...     lower=lambda x, y, c: 0.5 * (y - x - c) ** 2,
      ...     data=(jnp.array([0.0, 2.0]),), x0=jnp.zeros(()), y0=jnp.zeros(()))
      >>> float(lower_level_solution(problem, jnp.asarray(0.5), newton_steps=1))  # x + mean(c)
      1.5
    """
    steps = validation.check_int(newton_steps, "newton_steps", minimum=0)
    _check_problem(problem)
    validation.check_tree_like(x, problem.x0, "x", "problem.x0")
    if init is not None:
        validation.check_tree_like(init, problem.y0, "init", "problem.y0")
    flat, unravel = ravel_pytree(problem.y0 if init is None else init)
    objective = lambda v: problem.pooled_lower(x, unravel(v))

    def body(_, v):
        return v - jnp.linalg.solve(jax.hessian(objective)(v), jax.grad(objective)(v))

    return unravel(jax.lax.fori_loop(0, steps, body, flat))


def exact_hypergradient(problem: BilevelProblem, x, newton_steps: int = 8):
    """``(F(x), ∇F(x), y*(x))`` by Newton's method and implicit differentiation.

    ``∇F(x) = ∇_x f(x, y*) - ∇²_{xy} g(x, y*) v`` with ``∇²_{yy} g(x, y*) v = ∇_y f(x, y*)``
    (dense Hessian solve: meant for the small lower levels of the experiments).

    Args:
      problem: the :class:`BilevelProblem`.
      x: the upper variable.
      newton_steps: Newton steps of :func:`lower_level_solution` from ``problem.y0``.

    Returns:
      ``(value, grad, y_star)``: ``F(x)``, ``∇F(x)`` (a pytree like ``x``) and ``y*(x)``.

    Examples:
      >>> problem = BilevelProblem(
      ...     upper=lambda x, y, c: 0.5 * (y - c) ** 2 + 0.5 * x**2,
      ...     lower=lambda x, y, c: 0.5 * (y - x) ** 2,
      ...     data=(jnp.array([0.0, 2.0]),), x0=jnp.zeros(()), y0=jnp.zeros(()))
      >>> value, grad, y = exact_hypergradient(problem, jnp.asarray(0.5))
      >>> float(value), float(grad), float(y)  # F(x) = (x - 1)²/2 + 1/2 + x²/2
      (0.75, 0.0, 0.5)

    References:
      Ghadimi & Wang, "Approximation methods for bilevel programming", arXiv 1802.02246 (2018)
      (the implicit hypergradient).
    """
    _check_problem(problem)
    y = lower_level_solution(problem, x, newton_steps=newton_steps)
    flat, unravel = ravel_pytree(y)
    value = problem.pooled_upper(x, y)
    fx, fy = jax.grad(problem.pooled_upper, argnums=(0, 1))(x, y)
    hessian = jax.hessian(lambda v: problem.pooled_lower(x, unravel(v)))(flat)
    v = unravel(jnp.linalg.solve(hessian, ravel_pytree(fy)[0]))
    cross = jax.grad(
        lambda x_: sum(
            jnp.vdot(a, b)
            for a, b in zip(
                jax.tree.leaves(jax.grad(problem.pooled_lower, argnums=1)(x_, y)),
                jax.tree.leaves(v),
                strict=True,
            )
        )
    )(x)
    return value, jax.tree.map(jnp.subtract, fx, cross), y


def centralized_penalty_trajectory(
    problem: BilevelProblem,
    *,
    penalty: float,
    upper_stepsize: float,
    lower_stepsize: float,
    steps: int,
    record_every: int,
):
    """The centralised value-function penalty method: FAB's steps on pooled gradients.

    With ``λ`` fixed, from ``(x0, y0, y0)`` (Jacobi, all blocks from the same iterate)::

        x <- x - α (∇_x f(x, y) + λ (∇_x g(x, y) - ∇_x g(x, z)))
        y <- y - β (∇_y f(x, y) / λ + ∇_y g(x, y))
        z <- z - β ∇_y g(x, z)

    the iteration :class:`jaxlab.solvers.FAB` runs per agent, written here directly on the pooled
    ``f``, ``g`` (independent of the solver code), so FAB at consensus must match it.

    Args:
      problem: the :class:`BilevelProblem`.
      penalty: ``λ > 0``.
      upper_stepsize: ``α > 0``.
      lower_stepsize: ``β > 0``.
      steps: iterations (``steps // record_every`` records of ``record_every`` are run).
      record_every: iterations between records, ``>= 1``.

    Returns:
      ``(xs, ys)``: ``x`` and ``y`` after every ``record_every`` iterations, stacked on a leading
      axis of ``steps // record_every`` records.

    Examples:
      >>> problem = BilevelProblem(
      ...     upper=lambda x, y, c: 0.5 * (y - c) ** 2 + 0.5 * x**2,
      ...     lower=lambda x, y, c: 0.5 * (y - x) ** 2,
      ...     data=(jnp.array([0.0, 2.0]),), x0=jnp.zeros(()), y0=jnp.zeros(()))
      >>> xs, ys = centralized_penalty_trajectory(problem, penalty=10.0, upper_stepsize=0.1,
      ...     lower_stepsize=0.5, steps=2000, record_every=1000)
      >>> xs.shape, round(float(xs[-1]), 4), round(10 / 21, 4)  # x_λ = λ c̄ / (1 + 2λ)
      ((2,), 0.4762, 0.4762)

    References:
      Kwon et al., "A fully first-order method for stochastic bilevel optimization", ICML 2023
      (the value-function penalty).
    """
    validation.check_positive(penalty, "penalty")
    validation.check_positive(upper_stepsize, "upper_stepsize")
    validation.check_positive(lower_stepsize, "lower_stepsize")
    every = validation.check_positive_int(record_every, "record_every")
    records = validation.check_positive_int(steps, "steps") // every
    _check_problem(problem)
    lam, alpha, beta = penalty, upper_stepsize, lower_stepsize

    def step(carry, _):
        x, y, z = carry
        fx, fy = jax.grad(problem.pooled_upper, argnums=(0, 1))(x, y)
        gx_y, gy_y = jax.grad(problem.pooled_lower, argnums=(0, 1))(x, y)
        gx_z, gy_z = jax.grad(problem.pooled_lower, argnums=(0, 1))(x, z)
        dx = jax.tree.map(lambda a, b, c: a + lam * (b - c), fx, gx_y, gx_z)
        dy = jax.tree.map(lambda a, b: a / lam + b, fy, gy_y)
        move = lambda v, d, s: jax.tree.map(lambda vi, di: vi - s * di, v, d)
        return (move(x, dx, alpha), move(y, dy, beta), move(z, gy_z, beta)), None

    @jax.jit
    def go():
        def chunk(carry, _):
            carry, _ = jax.lax.scan(step, carry, None, every)
            return carry, (carry[0], carry[1])

        _, out = jax.lax.scan(chunk, (problem.x0, problem.y0, problem.y0), None, records)
        return out

    return go()


def exact_bilevel_solution(
    problem: BilevelProblem, *, maxiter: int = 500, newton_steps: int = 8
) -> BilevelSolution:
    """The centralised bilevel solution: L-BFGS (scipy) on ``F`` with the exact hypergradient.

    Runs in the float precision JAX is in (call it under ``jax.enable_x64(True)`` for the
    reference); ``F`` and ``∇F`` come from :func:`exact_hypergradient` (jitted once), the loop is
    scipy's ``L-BFGS-B`` (``gtol = 1e-10``, ``ftol = 1e-15``) on the host.

    Args:
      problem: the :class:`BilevelProblem`, started from ``problem.x0``.
      maxiter: L-BFGS iterations, ``>= 1``.
      newton_steps: Newton steps of the lower level per evaluation.

    Returns:
      A :class:`BilevelSolution`.

    Examples:
      >>> problem = BilevelProblem(
      ...     upper=lambda x, y, c: 0.5 * (y - c) ** 2 + 0.5 * x**2,
      ...     lower=lambda x, y, c: 0.5 * (y - x) ** 2,
      ...     data=(jnp.array([0.0, 2.0]),), x0=jnp.zeros(()), y0=jnp.zeros(()))
      >>> solution = exact_bilevel_solution(problem, maxiter=50)
      >>> round(float(solution.x), 4), round(solution.value, 4)  # x* = c̄ / 2, F = 3/4
      (0.5, 0.75)
    """
    validation.check_positive_int(maxiter, "maxiter")
    validation.check_int(newton_steps, "newton_steps", minimum=0)
    _check_problem(problem)
    flat0, unravel = ravel_pytree(problem.x0)
    value_and_grad = jax.jit(lambda v: exact_hypergradient(problem, unravel(v), newton_steps)[:2])

    def fun(v):
        value, grad = value_and_grad(jnp.asarray(v))
        return float(value), np.asarray(ravel_pytree(grad)[0], np.float64)

    result = scipy.optimize.minimize(
        fun,
        np.asarray(flat0, np.float64),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": maxiter, "gtol": 1e-10, "ftol": 1e-15},
    )
    value, grad = fun(result.x)
    x = jax.tree.map(np.asarray, unravel(jnp.asarray(result.x)))
    return BilevelSolution(
        x=x, value=value, grad_norm=float(np.linalg.norm(grad)), iterations=int(result.nit)
    )


def _split_rows(num_rows: int, num_agents: int, train_rows: int, val_rows: int, rng):
    n, m, v = (
        validation.check_positive_int(num_agents, "num_agents"),
        validation.check_positive_int(train_rows, "train_rows"),
        validation.check_positive_int(val_rows, "val_rows"),
    )
    order = rng.permutation(num_rows)
    needed = n * (m + v)
    if needed >= num_rows:
        raise ValueError(f"num_agents * (train_rows + val_rows) = {needed} >= {num_rows} rows")
    return order[: n * m], order[n * m : needed], order[needed:]


def diabetes_ridge_tuning(
    num_agents: int = 8, train_rows: int = 20, val_rows: int = 20, *, seed: int = 0
) -> tuple[BilevelProblem, dict[str, np.ndarray]]:
    """Per-feature ridge tuning on ``load_diabetes`` split over agents (FAB's first experiment).

    Features and target are standardised on the training rows; agent ``i`` holds ``train_rows``
    training rows ``(A_i, b_i)`` and ``val_rows`` validation rows ``(V_i, w_i)``; the upper
    variable ``x ∈ R^10`` holds log-penalties::

        g_i(x, y) = ||A_i y - b_i||² / (2m) + Σ_j e^{x_j} y_j² / 2
        f_i(x, y) = ||V_i y - w_i||² / (2v)

    Args:
      num_agents: ``n >= 1``.
      train_rows: ``m``, training rows per agent.
      val_rows: ``v``, validation rows per agent (the rest of the 442 rows is the test set).
      seed: the split's seed.

    Returns:
      ``(problem, test)``: the :class:`BilevelProblem` (``x0 = y0 = 0``) and the held-out rows
      ``{"features": (t, 10), "targets": (t,)}`` (standardised like the training rows).

    Examples:
      >>> problem, test = diabetes_ridge_tuning(num_agents=4, train_rows=10, val_rows=10)
      >>> problem.num_agents, problem.x0.shape, test["features"].shape
      (4, (10,), (362, 10))

    References:
      Ma, Wang, Yao, Zhang, "FAB", ICML 2026 (arXiv 2605.06328), hyperparameter-tuning experiment;
      Efron, Hastie, Johnstone, Tibshirani, "Least angle regression", Ann. Stat. 2004 (the data).
    """
    from sklearn.datasets import load_diabetes

    features, target = load_diabetes(return_X_y=True)
    rng = np.random.default_rng(validation.check_int(seed, "seed"))
    train, val, test = _split_rows(len(target), num_agents, train_rows, val_rows, rng)
    n, m, v = num_agents, train_rows, val_rows
    mean, scale = features[train].mean(0), features[train].std(0)
    t_mean, t_scale = target[train].mean(), target[train].std()
    X = (features - mean) / scale
    t = (target - t_mean) / t_scale
    A, b = X[train].reshape(n, m, -1), t[train].reshape(n, m)
    V, w = X[val].reshape(n, v, -1), t[val].reshape(n, v)

    def lower(x, y, A_i, b_i, V_i, w_i):
        residual = A_i @ y - b_i
        return 0.5 * jnp.sum(residual**2) / m + 0.5 * jnp.sum(jnp.exp(x) * y**2)

    def upper(x, y, A_i, b_i, V_i, w_i):
        return 0.5 * jnp.sum((V_i @ y - w_i) ** 2) / v

    dim = X.shape[1]
    problem = BilevelProblem(
        upper=upper,
        lower=lower,
        data=tuple(jnp.asarray(d) for d in (A, b, V, w)),
        x0=jnp.zeros(dim),
        y0=jnp.zeros(dim),
    )
    return problem, {"features": X[test], "targets": t[test]}


def _softmax_cross_entropy(params, features, labels):
    logits = features @ params["w"] + params["b"][None]
    return jax.nn.logsumexp(logits, axis=1) - jnp.take_along_axis(logits, labels[:, None], 1)[:, 0]


def digits_hyper_cleaning(
    num_agents: int = 8,
    train_rows: int = 40,
    val_rows: int = 20,
    *,
    flip_fraction: float = 0.3,
    components: int = 10,
    ridge: float = 0.01,
    seed: int = 0,
) -> tuple[BilevelProblem, dict[str, np.ndarray]]:
    """Data hyper-cleaning on ``load_digits`` split over agents (FAB's second experiment).

    Pixels are projected on the first ``components`` principal components of the training rows
    and scaled so that every training row has norm ``<= 2`` (then the weighted cross-entropy has
    ``L_g <= (1/2)(4 + 1) + μ``: softmax Hessian ``<= I/2`` per sample, bias feature 1, so
    ``β = 0.4`` is a safe lower-level step). A ``flip_fraction`` of the training labels is
    replaced by a random other class. The upper variable ``x`` has one weight logit per training
    sample (agent ``i`` weighs its own samples); the lower variable is a linear softmax model
    ``y = {"w": (components, 10), "b": (10,)}``::

        g_i(x, y) = (1/m) Σ_s σ(x_s) CE(y; a_s, noisy label_s) + μ/2 ||y||²
        f_i(x, y) = mean CE(y; clean validation rows of agent i)

    Args:
      num_agents: ``n >= 1``.
      train_rows: ``m``, training rows per agent.
      val_rows: validation rows per agent (the rest of the 1797 rows is the test set).
      flip_fraction: probability that a training label is flipped, in ``[0, 1]``.
      components: principal components kept, ``>= 1``.
      ridge: ``μ >= 0``.
      seed: the split's and flips' seed.

    Returns:
      ``(problem, test)``: the :class:`BilevelProblem` (``x0 = 0``: weights ``σ(0) = 1/2``,
      ``y0 = 0``) and ``{"features", "labels"}`` of the held-out rows plus ``"flipped"``, the
      boolean mask of flipped training samples (in the order of ``x``).

    Examples:
      >>> problem, test = digits_hyper_cleaning(num_agents=2, train_rows=6, val_rows=5)
      >>> problem.x0.shape, problem.y0["w"].shape, test["flipped"].shape
      ((12,), (10, 10), (12,))

    References:
      Ma, Wang, Yao, Zhang, "FAB", ICML 2026 (arXiv 2605.06328), data hyper-cleaning experiment;
      Franceschi et al., "Forward and reverse gradient-based hyperparameter optimization",
      ICML 2017 (hyper-cleaning).
    """
    from sklearn.datasets import load_digits

    flip = validation.check_probability(flip_fraction, "flip_fraction")
    mu = validation.check_nonnegative(ridge, "ridge")
    k = validation.check_positive_int(components, "components")
    features, labels = load_digits(return_X_y=True)
    rng = np.random.default_rng(validation.check_int(seed, "seed"))
    train, val, test = _split_rows(len(labels), num_agents, train_rows, val_rows, rng)
    n, m, v = num_agents, train_rows, val_rows
    centre = features[train].mean(axis=0)
    _, _, basis = np.linalg.svd(features[train] - centre, full_matrices=False)
    projected = (features - centre) @ basis[:k].T
    features = 2.0 * projected / np.linalg.norm(projected[train], axis=1).max()
    features = np.clip(features, -2.0, 2.0)
    noisy = labels[train].copy()
    flipped = rng.random(len(train)) < flip
    noisy[flipped] = (noisy[flipped] + rng.integers(1, 10, flipped.sum())) % 10
    classes, dim = 10, features.shape[1]
    owner = np.arange(n * m).reshape(n, m)  # agent i weighs training samples owner[i]

    def lower(x, y, A_i, b_i, idx_i, V_i, c_i):
        weights = jax.nn.sigmoid(x[idx_i])
        loss = jnp.sum(weights * _softmax_cross_entropy(y, A_i, b_i)) / m
        return loss + 0.5 * mu * (jnp.sum(y["w"] ** 2) + jnp.sum(y["b"] ** 2))

    def upper(x, y, A_i, b_i, idx_i, V_i, c_i):
        return jnp.mean(_softmax_cross_entropy(y, V_i, c_i))

    data = (
        features[train].reshape(n, m, dim),
        noisy.reshape(n, m),
        owner,
        features[val].reshape(n, v, dim),
        labels[val].reshape(n, v),
    )
    problem = BilevelProblem(
        upper=upper,
        lower=lower,
        data=tuple(jnp.asarray(d) for d in data),
        x0=jnp.zeros(n * m),
        y0={"w": jnp.zeros((dim, classes)), "b": jnp.zeros(classes)},
    )
    return problem, {"features": features[test], "labels": labels[test], "flipped": flipped}
