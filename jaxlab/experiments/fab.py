"""Experiments ``fab-hyperparameter`` and ``fab-hypercleaning``: FAB over time-varying digraphs.

Both split a scikit-learn bundled dataset (no download) over ``n`` agents and solve a bilevel
problem ``min_x F(x) = f(x, y*(x))``, ``y*(x) = argmin_y g(x, y)``, with ``f = (1/n) Σ f_i``,
``g = (1/n) Σ g_i``, by the value-function penalty (``λ`` fixed) with five arms:

* ``fab``: :class:`jaxlab.solvers.FAB` on unbalanced time-varying digraphs (directed ring plus
  i.i.d. extra edges, ``p = 0.2``, redrawn every round), Push-Pull matrices;
* ``no_tracking``: the same updates without gradient trackers (decentralised gradient bilevel);
* ``undirected_gt``: the same penalty method with gradient tracking on the *symmetrised* graphs
  with doubly stochastic Metropolis weights (a balanced, undirected network);
* ``central``: the centralised penalty method (pooled gradients, the same steps),
  :func:`jaxlab.solvers.centralized_penalty_trajectory`, independent of the solver code;
* ``exact``: the centralised bilevel solution, :func:`jaxlab.solvers.exact_bilevel_solution`
  (L-BFGS on ``F`` with the exact hypergradient ``∇F = ∇_x f - ∇²_{xy} g [∇²_{yy} g]⁻¹ ∇_y f``,
  implicit differentiation, lower level solved by Newton's method).

The instances are :func:`jaxlab.solvers.diabetes_ridge_tuning` and
:func:`jaxlab.solvers.digits_hyper_cleaning`.

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
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from matplotlib.figure import Figure

from jaxlab._src.experiments import ExperimentConfig, Progress, Result, check, register
from jaxlab.distributed import metropolis_weights, time_varying_digraph
from jaxlab.solvers import (
    FAB,
    FABParams,
    PushPull,
    centralized_penalty_trajectory,
    diabetes_ridge_tuning,
    digits_hyper_cleaning,
    exact_bilevel_solution,
    exact_hypergradient,
    lower_level_solution,
)

__all__ = [
    "FABCleaningConfig",
    "FABHyperparameterConfig",
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
            xs, ys = centralized_penalty_trajectory(
                problem,
                penalty=config.penalty,
                upper_stepsize=config.upper_stepsize,
                lower_stepsize=config.lower_stepsize,
                steps=config.steps,
                record_every=config.record_every,
            )
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
    solution = exact_bilevel_solution(problem, maxiter=config.exact_maxiter)
    exact = {
        "F": solution.value,
        "grad_norm": solution.grad_norm,
        "iterations": solution.iterations,
    }
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
    panels = 3 if accuracy else 2
    fig = Figure(figsize=(5 * panels, 4))
    axes = fig.subplots(1, panels)
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


@register("fab-hyperparameter", config=FABHyperparameterConfig, claim=CLAIM_HYPERPARAMETER)
def run_hyperparameter(config: FABHyperparameterConfig, rng_key: jax.Array, progress: Progress):
    """Per-feature ridge tuning on load_diabetes; see the module docstring.

    Examples:
      >>> FABHyperparameterConfig.quick().penalty
      10.0
    """
    with jax.enable_x64(True):
        reference = _reference_checks(config.reference_steps)
        problem, test = diabetes_ridge_tuning(
            config.num_agents, config.train_rows, config.val_rows, seed=config.seed
        )

        def test_mse(xs, ys):
            preds = np.asarray(ys) @ test["features"].T
            return {"test_mse": np.mean((preds - test["targets"][None]) ** 2, axis=1).tolist()}

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


@register("fab-hypercleaning", config=FABCleaningConfig, claim=CLAIM_CLEANING)
def run_cleaning(config: FABCleaningConfig, rng_key: jax.Array, progress: Progress):
    """Data hyper-cleaning on load_digits; see the module docstring.

    Examples:
      >>> FABCleaningConfig.quick().flip_fraction
      0.3
    """
    with jax.enable_x64(True):
        problem, test = digits_hyper_cleaning(
            config.num_agents,
            config.train_rows,
            config.val_rows,
            flip_fraction=config.flip_fraction,
            components=config.components,
            ridge=config.ridge,
            seed=config.seed,
        )
        X_test, y_test = jnp.asarray(test["features"]), np.asarray(test["labels"])

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
        baseline_y = lower_level_solution(problem, problem.x0, newton_steps=10)
        baseline = accuracy(problem.x0[None], jax.tree.map(lambda v: v[None], baseline_y))
    runs["uncleaned_test_accuracy"] = baseline["test_accuracy"][0]
    parts = _verdict_parts(runs, "hyper-cleaning")
    figure = _figures(runs, "fab-hypercleaning: load_digits, 30% flipped labels", accuracy=True)
    return Result(metrics=runs, parts=parts, figures={"fab_hypercleaning": figure})
