"""Experiments ``fab-hyperparameter`` and ``fab-hypercleaning``: FAB over time-varying digraphs.

Both split a scikit-learn bundled dataset (no download) over ``n`` agents and solve a bilevel
problem ``min_x F(x) = f(x, y*(x))``, ``y*(x) = argmin_y g(x, y)``, with ``f = (1/n) Σ f_i``,
``g = (1/n) Σ g_i``, by the value-function penalty (``λ`` fixed) with five arms:

* ``fab``: :class:`jaxlab.solvers.FAB` on unbalanced time-varying digraphs (directed ring plus
  i.i.d. extra edges, ``p = 0.2``, redrawn every round), Push-Pull matrices;
* ``no_tracking``: the same updates without gradient trackers (decentralised gradient bilevel);
* ``undirected_gt``: the same penalty method with gradient tracking on the *symmetrised* graphs
  with doubly stochastic Metropolis weights (a balanced, undirected network);
* ``central``: the centralised penalty method (pooled gradients, the same steps), written
  directly here, independent of the solver code;
* ``exact``: the centralised bilevel solution, L-BFGS on ``F`` with the exact hypergradient
  ``∇F = ∇_x f - ∇²_{xy} g [∇²_{yy} g]⁻¹ ∇_y f`` (implicit differentiation, lower level solved by
  Newton's method).

Per arm and communication round: ``F(x̄)`` (``x̄`` the agents' mean, the lower level solved
exactly), ``||∇F(x̄)||``, the consensus error ``sqrt((1/n) Σ_i ||v_i - v̄||²)`` over ``(x, y, z)``
and, for hyper-cleaning, the test accuracy of the agents' mean model ``ȳ``.

``fab-hyperparameter``: per-feature ridge penalties ``e^{x_j}`` on ``load_diabetes`` (10
features): ``g_i = ||A_i y - b_i||²/(2m) + Σ_j e^{x_j} y_j²/2``, ``f_i = ||V_i y - w_i||²/(2m)``.
It also runs the note's reference checks 2-3 (Push-Pull on a quadratic, FAB on a scalar bilevel
toy with the closed-form penalty solution ``λ/(1 + 2λ)``).

``fab-hypercleaning``: ``load_digits`` with a fraction of flipped training labels, per-sample
weights ``σ(x_s)`` on a softmax cross-entropy (``g_i``, plus ``μ/2 ||y||²``), clean validation
cross-entropy (``f_i``).

Verdict (the note's calibrated thresholds, then the issue's stricter ones as their own part):
FAB's ``F(x̄)`` within ``1e-4`` of the centralised penalty method's, consensus ``<= 1e-3`` and
``||∇F(x̄)|| <= 2 ||∇F(x_central)|| + 1e-4``; the no-tracking variant's consensus error at least
``10x`` FAB's; issue: ``|F_FAB - F_central| <= 1e-4 |F_central|`` with consensus ``< 1e-4``.
Objectives and hypergradient norms are compared, not coordinates (the landscape is flat).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize
from jax.flatten_util import ravel_pytree

from jaxlab._src.experiments import ExperimentConfig, Progress, Result, check, register
from jaxlab.distributed import metropolis_weights, time_varying_digraph
from jaxlab.solvers import FAB, FABParams, PushPull

__all__ = [
    "FABCleaningConfig",
    "FABHyperparameterConfig",
    "BilevelProblem",
    "exact_hypergradient",
    "run_cleaning",
    "run_hyperparameter",
]

CLAIM_HYPERPARAMETER = (
    "Ma, Wang, Yao & Zhang (ICML 2026): FAB, Push-Pull (row-stochastic pull of decisions, "
    "column-stochastic push of gradient trackers) on a first-order value-function penalty, solves "
    "distributed bilevel problems over time-varying directed graphs: on per-feature ridge tuning "
    "it reaches the centralised upper-level objective with vanishing consensus error, while the "
    "variant without gradient tracking stays far from consensus."
)
CLAIM_CLEANING = (
    "Ma, Wang, Yao & Zhang (ICML 2026): on data hyper-cleaning (per-sample weights on a weighted "
    "logistic loss, clean validation loss) over time-varying directed graphs, FAB reaches the "
    "centralised upper-level objective with vanishing consensus error, while the variant without "
    "gradient tracking stays far from consensus."
)

# The note's calibrated thresholds (reference check 4) and the issue's stricter ones.
_F_ABS_TOL = 1e-4
_CONSENSUS_TOL = 1e-3
_GRAD_FACTOR, _GRAD_SLACK = 2.0, 1e-4
_NO_TRACKING_FACTOR = 10.0
_ISSUE_F_REL_TOL = 1e-4
_ISSUE_CONSENSUS_TOL = 1e-4


# --------------------------------------------------------------------------------------------
# A bilevel problem split over agents, and its exact (centralised) quantities.


@dataclasses.dataclass(frozen=True)
class BilevelProblem:
    """A distributed bilevel problem: per-agent ``f_i(x, y, *data_i)``, ``g_i(x, y, *data_i)``.

    ``data`` is a tuple of arrays with the agents on the leading axis; ``f = (1/n) Σ f_i`` and
    ``g = (1/n) Σ g_i`` (``g`` strongly convex in ``y``); ``x0``/``y0`` are one agent's start.

    Examples:
      >>> import jax.numpy as jnp
      >>> problem = BilevelProblem(
      ...     upper=lambda x, y, c: 0.5 * (y - c) ** 2 + 0.5 * x**2,
      ...     lower=lambda x, y, c: 0.5 * (y - x) ** 2,
      ...     data=(jnp.array([0.0, 2.0]),), x0=jnp.zeros(()), y0=jnp.zeros(()))
      >>> float(problem.pooled_upper(1.0, 1.0))  # mean of (1 - c)²/2, plus 1/2
      1.0
    """

    upper: Callable[..., jax.Array]
    lower: Callable[..., jax.Array]
    data: tuple
    x0: Any
    y0: Any

    @property
    def num_agents(self) -> int:
        return int(self.data[0].shape[0])

    def pooled_upper(self, x, y):
        return jnp.mean(jax.vmap(lambda *d: self.upper(x, y, *d))(*self.data))

    def pooled_lower(self, x, y):
        return jnp.mean(jax.vmap(lambda *d: self.lower(x, y, *d))(*self.data))

    def grad_fns(self):
        upper = jax.grad(self.upper, argnums=(0, 1))
        lower = jax.grad(self.lower, argnums=(0, 1))
        return upper, lower


def _flat_newton(problem: BilevelProblem, x, y, steps: int):
    """Newton's method on ``y -> g(x, y)`` (flattened), from ``y``."""
    flat, unravel = ravel_pytree(y)
    objective = lambda v: problem.pooled_lower(x, unravel(v))

    def body(_, v):
        return v - jnp.linalg.solve(jax.hessian(objective)(v), jax.grad(objective)(v))

    return unravel(jax.lax.fori_loop(0, steps, body, flat))


def exact_hypergradient(problem: BilevelProblem, x, newton_steps: int = 8):
    """``(F(x), ∇F(x), y*(x))`` by Newton's method and implicit differentiation.

    ``∇F(x) = ∇_x f(x, y*) - ∇²_{xy} g(x, y*) v``, ``∇²_{yy} g(x, y*) v = ∇_y f(x, y*)``.

    Examples:
      >>> import jax.numpy as jnp
      >>> problem = BilevelProblem(
      ...     upper=lambda x, y, c: 0.5 * (y - c) ** 2 + 0.5 * x**2,
      ...     lower=lambda x, y, c: 0.5 * (y - x) ** 2,
      ...     data=(jnp.array([0.0, 2.0]),), x0=jnp.zeros(()), y0=jnp.zeros(()))
      >>> value, grad, y = exact_hypergradient(problem, jnp.asarray(0.5))
      >>> float(value), float(grad), float(y)  # F(x) = (x - 1)²/2 + 1/2 + x²/2
      (0.75, 0.0, 0.5)
    """
    y = _flat_newton(problem, x, problem.y0, newton_steps)
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


# --------------------------------------------------------------------------------------------
# Arms.


def _stack(tree, n):
    return jax.tree.map(lambda v: jnp.broadcast_to(v, (n, *jnp.shape(v))), tree)


def _fab_solver(problem, config, arm: str) -> FAB:
    n = problem.num_agents
    upper, lower = problem.grad_fns()
    common = dict(
        upper_grad_fn=upper,
        lower_grad_fn=lower,
        penalty=config.penalty,
        upper_stepsize=config.upper_stepsize,
        lower_stepsize=config.lower_stepsize,
        maxiter=config.steps,
        tol=0.0,
        implicit_diff=False,
        jit=False,
    )
    digraph = lambda key, k: time_varying_digraph(key, n, extra_edge_prob=config.extra_edge_prob)
    if arm == "fab":
        return FAB(graph_fn=digraph, **common)
    if arm == "no_tracking":
        return FAB(graph_fn=digraph, tracking=False, **common)
    if arm == "undirected_gt":
        undirected = lambda key, k: (lambda a: a | a.T)(digraph(key, k))
        weights = lambda adj: (metropolis_weights(adj), metropolis_weights(adj))
        return FAB(graph_fn=undirected, weights_fn=weights, **common)
    raise ValueError(f"unknown arm {arm!r}")


def _record_decentralised(problem, config, arm, rng_key):
    """Runs one decentralised arm; records x̄, ȳ and the consensus error every ``record_every``."""
    solver = _fab_solver(problem, config, arm)
    n = problem.num_agents
    init = FABParams(_stack(problem.x0, n), _stack(problem.y0, n), _stack(problem.y0, n))
    every, records = config.record_every, config.steps // config.record_every

    @jax.jit
    def go(key):
        state = solver.init_state(init, *problem.data, rng_key=key)

        def chunk(carry, _):
            carry = jax.lax.fori_loop(
                0, every, lambda _, c: tuple(solver.update(*c, *problem.data)), carry
            )
            params, state = carry
            mean = lambda t: jax.tree.map(lambda v: jnp.mean(v, axis=0), t)
            return carry, (mean(params.x), mean(params.y), state.consensus_error)

        _, out = jax.lax.scan(chunk, (init, state), None, records)
        return out

    return go(rng_key)


def _record_central(problem, config):
    """The centralised penalty method: the same three-block gradient steps on pooled gradients."""
    lam = config.penalty
    alpha, beta = config.upper_stepsize, config.lower_stepsize
    every, records = config.record_every, config.steps // config.record_every

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


def _exact_solution(problem, config):
    """L-BFGS on F with the exact hypergradient (float64, scipy)."""
    flat0, unravel = ravel_pytree(problem.x0)
    value_and_grad = jax.jit(lambda v: exact_hypergradient(problem, unravel(v))[:2])

    def fun(v):
        value, grad = value_and_grad(jnp.asarray(v))
        return float(value), np.asarray(ravel_pytree(grad)[0], np.float64)

    result = scipy.optimize.minimize(
        fun,
        np.asarray(flat0, np.float64),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": config.exact_maxiter, "gtol": 1e-10, "ftol": 1e-15},
    )
    value, grad = fun(result.x)
    return {"F": value, "grad_norm": float(np.linalg.norm(grad)), "iterations": int(result.nit)}


def _evaluator(problem, newton_steps):
    """Jitted: recorded x̄s -> (F(x̄), ||∇F(x̄)||), vmapped exact hypergradients (compiled once)."""

    @jax.jit
    def evaluate(xs):
        values, grads = jax.vmap(lambda x: exact_hypergradient(problem, x, newton_steps)[:2])(xs)
        flat = jax.vmap(lambda g: ravel_pytree(g)[0])(grads)
        return values, jnp.linalg.norm(flat, axis=1)

    return lambda xs: tuple(np.asarray(v) for v in evaluate(xs))


def _run_arms(problem, config, rng_key, progress, newton_steps, extra_metric=None):
    arms: dict[str, dict[str, Any]] = {}
    timings = {}
    evaluate = _evaluator(problem, newton_steps)
    for arm in progress.track(
        ("fab", "no_tracking", "undirected_gt", "central"), description="arms"
    ):
        start = time.perf_counter()
        if arm == "central":
            xs, ys = _record_central(problem, config)
            consensus = np.zeros(config.steps // config.record_every)
        else:
            xs, ys, consensus = _record_decentralised(problem, config, arm, rng_key)
        values, norms = evaluate(xs)
        arms[arm] = {
            "F": values.tolist(),
            "grad_norm": norms.tolist(),
            "consensus": np.asarray(consensus).tolist(),
        }
        if extra_metric is not None:
            arms[arm].update(extra_metric(xs, ys))
        timings[arm] = time.perf_counter() - start
    start = time.perf_counter()
    exact = _exact_solution(problem, config)
    timings["exact"] = time.perf_counter() - start
    rounds = (np.arange(1, config.steps // config.record_every + 1) * config.record_every).tolist()
    return {"rounds": rounds, "arms": arms, "exact": exact, "seconds": timings}


def _verdict_parts(runs, label: str):
    arms = runs["arms"]
    fab, central, free = arms["fab"], arms["central"], arms["no_tracking"]
    f_fab, f_central = fab["F"][-1], central["F"][-1]
    gap = abs(f_fab - f_central)
    cons_fab, cons_free = fab["consensus"][-1], free["consensus"][-1]
    g_fab, g_central = fab["grad_norm"][-1], central["grad_norm"][-1]
    rounds = runs["rounds"][-1]
    part_match = check(
        f"({label}) FAB on time-varying digraphs matches the centralised penalty method at equal "
        f"rounds: |ΔF| <= {_F_ABS_TOL:g}, consensus <= {_CONSENSUS_TOL:g}, ||∇F|| <= "
        f"{_GRAD_FACTOR:g}x central + {_GRAD_SLACK:g} (note's calibrated thresholds)",
        f"after {rounds} rounds: F_FAB {f_fab:.7g} vs F_central {f_central:.7g} (|ΔF| {gap:.3g}); "
        f"consensus {cons_fab:.3g}; ||∇F|| FAB {g_fab:.3g} vs central {g_central:.3g}; exact "
        f"bilevel optimum F {runs['exact']['F']:.7g}",
        gap <= _F_ABS_TOL
        and cons_fab <= _CONSENSUS_TOL
        and g_fab <= _GRAD_FACTOR * g_central + _GRAD_SLACK,
    )
    ratio = cons_free / max(cons_fab, 1e-300)
    part_free = check(
        f"({label}) without gradient tracking the consensus error stays >= "
        f"{_NO_TRACKING_FACTOR:g}x FAB's",
        f"consensus no-tracking {cons_free:.3g} vs FAB {cons_fab:.3g} (ratio {ratio:.3g}); "
        f"F no-tracking {free['F'][-1]:.7g}, ||∇F|| {free['grad_norm'][-1]:.3g}",
        ratio >= _NO_TRACKING_FACTOR,
    )
    relative = gap / max(abs(f_central), 1e-300)
    part_issue = check(
        f"({label}, issue's stricter target) FAB's F within {_ISSUE_F_REL_TOL:g} relative of the "
        f"centralised (penalty) objective with consensus < {_ISSUE_CONSENSUS_TOL:g}",
        f"relative |ΔF| {relative:.3g}, consensus {cons_fab:.3g} (last records: "
        + ", ".join(f"{c:.2g}" for c in fab["consensus"][-5:])
        + f"; it fluctuates with the random graphs); relative gap to the exact "
        f"bilevel optimum {abs(f_fab - runs['exact']['F']) / abs(runs['exact']['F']):.3g}",
        relative <= _ISSUE_F_REL_TOL and cons_fab < _ISSUE_CONSENSUS_TOL,
    )
    return [part_match, part_free, part_issue]


def _figures(runs, title: str, accuracy: bool = False):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = 3 if accuracy else 2
    fig, axes = plt.subplots(1, panels, figsize=(5 * panels, 4))
    rounds = np.asarray(runs["rounds"])
    f_exact = runs["exact"]["F"]
    names = {
        "fab": "FAB (Push-Pull, digraphs)",
        "no_tracking": "no gradient tracking",
        "undirected_gt": "GT, undirected Metropolis",
        "central": "centralised penalty",
    }
    for arm, label in names.items():
        run = runs["arms"][arm]
        gap = np.abs(np.asarray(run["F"]) - f_exact) / abs(f_exact)
        axes[0].semilogy(rounds, np.maximum(gap, 1e-16), label=label)
        if arm != "central":
            axes[1].semilogy(rounds, np.maximum(np.asarray(run["consensus"]), 1e-16), label=label)
        if accuracy:
            axes[2].plot(rounds, run["test_accuracy"], label=label)
    axes[0].set_ylabel("|F(x̄) - F*| / |F*| (F*: exact bilevel optimum)")
    axes[1].set_ylabel("consensus error")
    for ax in axes:
        ax.set_xlabel("communication rounds")
        ax.legend(fontsize=7)
    if accuracy:
        axes[2].set_ylabel("test accuracy of the mean model ȳ")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------------------------
# Reference checks 2-3 of the note (a runnable demo inside fab-hyperparameter).


def _reference_checks(steps: int) -> dict[str, float]:
    n = 8
    rng = np.random.default_rng(0)
    a, b = jnp.asarray(rng.uniform(1, 3, n)), jnp.asarray(rng.normal(size=n))
    x_star = float(jnp.sum(a * b) / jnp.sum(a))
    graph = lambda key, k: time_varying_digraph(key, n)
    out = {}
    for tracking in (True, False):
        solver = PushPull(
            grad_fn=lambda x, a_i, b_i: a_i * (x - b_i),
            graph_fn=graph,
            stepsize=0.2,
            tracking=tracking,
            maxiter=steps,
            tol=0.0,
            implicit_diff=False,
        )
        x = solver.run(jnp.zeros(n), a, b, rng_key=jax.random.key(0)).params
        out["push_pull" if tracking else "no_tracking"] = float(jnp.max(jnp.abs(x - x_star)))
    c, e = rng.normal(size=n), rng.normal(size=n)
    c, e = jnp.asarray(c - c.mean() + 1), jnp.asarray(e - e.mean())
    lam = 10.0
    fab = FAB(
        upper_grad_fn=lambda x, y, c_i, e_i: (x, y - c_i),
        lower_grad_fn=lambda x, y, c_i, e_i: (x + e_i - y, y - x - e_i),
        graph_fn=graph,
        penalty=lam,
        upper_stepsize=0.1,
        lower_stepsize=0.3,
        maxiter=steps,
        tol=0.0,
        implicit_diff=False,
    )
    zeros = jnp.zeros(n)
    x = fab.run(FABParams(zeros, zeros, zeros), c, e, rng_key=jax.random.key(0)).params.x
    out["fab_toy"] = float(jnp.max(jnp.abs(x - lam / (1 + 2 * lam))))
    return out


# --------------------------------------------------------------------------------------------
# fab-hyperparameter.


@dataclasses.dataclass(frozen=True)
class FABHyperparameterConfig(ExperimentConfig):
    """Sizes of ``fab-hyperparameter``.

    Attributes:
      num_agents: agents (rows of ``load_diabetes`` split evenly).
      train_rows, val_rows: rows per agent (the rest of the 442 rows is the test set).
      penalty: ``λ``; upper_stepsize ``α``; lower_stepsize ``β``.
      extra_edge_prob: ``p`` of the digraph generator.
      steps: communication rounds; record_every: rounds between records.
      exact_maxiter: L-BFGS iterations of the exact bilevel solution.
      reference_steps: steps of the reference checks 2-3.
      seed: data split seed (the run key draws the graphs).

    Examples:
      >>> FABHyperparameterConfig.smoke().steps < FABHyperparameterConfig.quick().steps
      True
    """

    num_agents: int = 8
    train_rows: int = 20
    val_rows: int = 20
    penalty: float = 10.0
    upper_stepsize: float = 0.5
    # β = 0.1, not the note's 0.2: single agents' Gram matrices on load_diabetes reach
    # eigenvalue 7 (pooled 4.5), and at β = 0.2 the baseline without trackers (which steps on
    # local directions) diverges (measured: consensus 1e134 after 2000 rounds); FAB is stable
    # at both.
    lower_stepsize: float = 0.1
    extra_edge_prob: float = 0.2
    steps: int = 20000
    record_every: int = 500
    exact_maxiter: int = 500
    reference_steps: int = 3000
    seed: int = 0

    @classmethod
    def smoke(cls):
        return cls(steps=1000, record_every=250, exact_maxiter=30, reference_steps=500)

    @classmethod
    def quick(cls):
        return cls()

    @classmethod
    def full(cls):
        return cls(steps=100_000, record_every=2000, exact_maxiter=2000)


def _diabetes_problem(config: FABHyperparameterConfig) -> tuple[BilevelProblem, dict]:
    from sklearn.datasets import load_diabetes

    features, target = load_diabetes(return_X_y=True)
    rng = np.random.default_rng(config.seed)
    order = rng.permutation(len(target))
    n, m, v = config.num_agents, config.train_rows, config.val_rows
    needed = n * (m + v)
    if needed >= len(target):
        raise ValueError(f"num_agents * (train_rows + val_rows) = {needed} >= {len(target)} rows")
    train, val, test = order[: n * m], order[n * m : needed], order[needed:]
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
    return problem, {"X_test": X[test], "t_test": t[test], "dim": dim}


@register("fab-hyperparameter", config=FABHyperparameterConfig, claim=CLAIM_HYPERPARAMETER)
def run_hyperparameter(config: FABHyperparameterConfig, rng_key: jax.Array, progress: Progress):
    """Per-feature ridge tuning on load_diabetes; see the module docstring.

    Examples:
      >>> FABHyperparameterConfig.quick().penalty
      10.0
    """
    with jax.enable_x64(True):
        reference = _reference_checks(config.reference_steps)
        problem, test = _diabetes_problem(config)

        def test_mse(xs, ys):
            preds = np.asarray(ys) @ test["X_test"].T
            return {"test_mse": np.mean((preds - test["t_test"][None]) ** 2, axis=1).tolist()}

        runs = _run_arms(problem, config, rng_key, progress, newton_steps=2, extra_metric=test_mse)
    part_reference = check(
        "(reference checks 2-3) Push-Pull reaches x* (error <= 1e-8) where plain decentralised "
        "gradient stays >= 1e-2 away; FAB reaches the closed-form penalty solution λ/(1+2λ) "
        "within 1e-8",
        f"Push-Pull {reference['push_pull']:.3g}, no tracking {reference['no_tracking']:.3g}, "
        f"FAB toy {reference['fab_toy']:.3g} after {config.reference_steps} steps",
        reference["push_pull"] <= 1e-8
        and reference["no_tracking"] >= 1e-2
        and reference["fab_toy"] <= 1e-8,
    )
    parts = [part_reference, *_verdict_parts(runs, "ridge")]
    metrics = {"reference_checks": reference, **runs}
    figure = _figures(runs, "fab-hyperparameter: per-feature ridge on load_diabetes, 8 agents")
    return Result(metrics=metrics, parts=parts, figures={"fab_hyperparameter": figure})


# --------------------------------------------------------------------------------------------
# fab-hypercleaning.


@dataclasses.dataclass(frozen=True)
class FABCleaningConfig(ExperimentConfig):
    """Sizes of ``fab-hypercleaning``.

    Attributes:
      num_agents: agents; train_rows / val_rows: rows per agent of ``load_digits`` (the rest is
        the test set); flip_fraction: fraction of training labels replaced by a random other
        class; ridge: ``μ`` of the lower level; the rest as in ``FABHyperparameterConfig``.

    Examples:
      >>> FABCleaningConfig.smoke().steps < FABCleaningConfig.quick().steps
      True
    """

    num_agents: int = 8
    train_rows: int = 40
    val_rows: int = 20
    flip_fraction: float = 0.3
    components: int = 10
    ridge: float = 0.01
    penalty: float = 10.0
    upper_stepsize: float = 20.0
    lower_stepsize: float = 0.4
    extra_edge_prob: float = 0.2
    steps: int = 20000
    record_every: int = 1000
    exact_maxiter: int = 200
    seed: int = 0

    @classmethod
    def smoke(cls):
        return cls(train_rows=10, val_rows=5, steps=500, record_every=250, exact_maxiter=10)

    @classmethod
    def quick(cls):
        # FAB's consensus error falls slowly on these graphs and fluctuates with them (measured:
        # 1.7e-4 after 20 000 rounds, 4.0e-5 after 60 000, records between 4e-5 and 2.6e-4 from
        # 35 000 on), so quick runs 60 000 rounds.
        return cls(steps=60_000, record_every=5000)

    @classmethod
    def full(cls):
        return cls(
            train_rows=100, val_rows=50, steps=100_000, record_every=5000, exact_maxiter=1000
        )


def _softmax_cross_entropy(params, features, labels):
    logits = features @ params["w"] + params["b"][None]
    return jax.nn.logsumexp(logits, axis=1) - jnp.take_along_axis(logits, labels[:, None], 1)[:, 0]


def _digits_problem(config: FABCleaningConfig) -> tuple[BilevelProblem, dict]:
    from sklearn.datasets import load_digits

    features, labels = load_digits(return_X_y=True)
    rng = np.random.default_rng(config.seed)
    order = rng.permutation(len(labels))
    n, m, v = config.num_agents, config.train_rows, config.val_rows
    needed = n * (m + v)
    if needed >= len(labels):
        raise ValueError(f"num_agents * (train_rows + val_rows) = {needed} >= {len(labels)} rows")
    train, val, test = order[: n * m], order[n * m : needed], order[needed:]
    # Principal components of the training pixels, scaled so that every row has norm <= 2:
    # then the weighted cross-entropy has L_g <= (1/2)(4 + 1) + μ (softmax Hessian <= I/2 per
    # sample, bias feature 1), so β = 0.4 is a safe lower-level step, and y has 11 x 10 entries.
    centre = features[train].mean(axis=0)
    _, _, components = np.linalg.svd(features[train] - centre, full_matrices=False)
    projected = (features - centre) @ components[: config.components].T
    features = 2.0 * projected / np.linalg.norm(projected[train], axis=1).max()
    features = np.clip(features, -2.0, 2.0)
    noisy = labels[train].copy()
    flipped = rng.random(len(train)) < config.flip_fraction
    noisy[flipped] = (noisy[flipped] + rng.integers(1, 10, flipped.sum())) % 10
    classes, dim = 10, features.shape[1]
    mu = config.ridge
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
    return problem, {"X_test": features[test], "y_test": labels[test], "flipped": flipped}


@register("fab-hypercleaning", config=FABCleaningConfig, claim=CLAIM_CLEANING)
def run_cleaning(config: FABCleaningConfig, rng_key: jax.Array, progress: Progress):
    """Data hyper-cleaning on load_digits; see the module docstring.

    Examples:
      >>> FABCleaningConfig.quick().flip_fraction
      0.3
    """
    with jax.enable_x64(True):
        problem, test = _digits_problem(config)
        X_test, y_test = jnp.asarray(test["X_test"]), np.asarray(test["y_test"])

        def accuracy(xs, ys):
            logits = jnp.einsum("sd,rdc->rsc", X_test, ys["w"]) + ys["b"][:, None, :]
            hits = np.asarray(jnp.argmax(logits, axis=2)) == y_test[None]
            weights = np.asarray(jax.nn.sigmoid(xs))
            flipped = test["flipped"]
            return {
                "test_accuracy": hits.mean(axis=1).tolist(),
                "mean_weight_flipped": weights[:, flipped].mean(axis=1).tolist(),
                "mean_weight_clean": weights[:, ~flipped].mean(axis=1).tolist(),
            }

        runs = _run_arms(problem, config, rng_key, progress, newton_steps=10, extra_metric=accuracy)
        # The uncleaned model: uniform weights σ(0) = 1/2 on every (noisy) sample.
        baseline_y = _flat_newton(problem, problem.x0, problem.y0, 10)
        baseline = accuracy(problem.x0[None], jax.tree.map(lambda v: v[None], baseline_y))
    runs["uncleaned_test_accuracy"] = baseline["test_accuracy"][0]
    parts = _verdict_parts(runs, "hyper-cleaning")
    figure = _figures(runs, "fab-hypercleaning: load_digits, 30% flipped labels", accuracy=True)
    return Result(metrics=runs, parts=parts, figures={"fab_hypercleaning": figure})
