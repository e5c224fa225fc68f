"""Experiment ``disjunctive-rules``: hard disjunctive rules by projection layers (DisjunctiveNet).

Two regression tasks made in code (:func:`jaxlab.nn.input_decided_regression_task`, the note's
quick A: the input decides the disjunct of both rules;
:func:`jaxlab.nn.output_only_regression_task`,
quick B: the rules of the note's example 2, on outputs only). Backbone MLP 3 → 64 → 64 → 2 with a
sigmoid output, Adam, full batch, seeds vmapped. Arms:

* ``mlp``: unconstrained;
* ``penalty``: MSE + ``penalty_weight`` × :func:`jaxlab.nn.rule_penalty` (smallest disjunct
  violation per rule);
* ``posthoc_hull`` / ``posthoc_union``: the ``mlp`` network, projected at test time only by
  :class:`jaxlab.nn.DisjunctiveLayer` in hull mode (DNF) or exact union mode;
* ``e2e_hull`` (hull mode, ``formulation``) and ``e2e_union``: the layer trained end to end from
  a fresh network (the cold start; the post-hoc arms use the same two layers, the note's "same
  layer at test time only");
* ``e2e_hull_warm`` (task A): the hull layer trained end to end for ``warm_steps`` from the
  trained ``mlp`` network (the fair end-to-end arm of issue 40).

Why the warm start. The sigmoid head starts near 0.5, outside both allowed ranges of ``y₁``
(``≤ 0.3`` and ``≥ 0.6``), so most raw outputs start pinned to a face of the selected disjunct,
where the projection's derivative along the face's normal is zero (the layer's Jacobian is
right: ``tests/nn/test_disjunctive.py`` compares it with finite differences at such points). A
branch whose samples stay pinned never learns. The fraction pinned per rule branch, at the start
and end of each end-to-end arm's training (:func:`jaxlab.nn.pinned_fractions`, training inputs),
is in ``result.json`` under ``pinned_fraction``.

Metrics per arm and seed: test MSE, original-rule satisfaction (:func:`jaxlab.nn.rule_satisfaction`,
τ = 1e-4, the rules as written, not hull membership), and the fraction of test outputs the layer
projected (status ``CONVERGED``).

Verdict (the note's rule, on the fair arm). Part 1 (gating): on task A the warm-started
end-to-end hull layer satisfies the original rules on ≥ 99.9 % of test inputs in every seed;
part 2: its mean test MSE is ≤ 1.05 × that of the post-hoc hull projection of the MLP (issue 40's
reference; the note compared with the raw MLP, whose MSE includes its violations); satisfaction
without part 2 is the note's "partly supported". The cold-start arm is reported beside it. Part 3
(an earlier issue's target, reported beside it): the exact union projection reaches ≥ 99.9 % on
both tasks in every seed, and the end-to-end layers' MSE (warm hull on A, union on A and B) is no
worse than the soft-penalty network's. The hull-mode limitation on task B (hull projection is
feasible for the hull but does not create satisfaction) is measured and reported, not gated.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from matplotlib.figure import Figure

from jaxlab._src.experiments import ExperimentConfig, Progress, Result, check, register
from jaxlab.nn import (
    DisjunctiveLayer,
    input_decided_regression_task,
    output_only_regression_task,
    pinned_fractions,
    rule_network_apply,
    rule_network_init,
    rule_network_trainer,
    rule_satisfaction,
)

__all__ = ["DisjunctiveConfig", "run"]

CLAIM = (
    "Pal & Li (ICML 2026, DisjunctiveNet): input-dependent mixed-integer rules written as "
    "disjunctions, relaxed to their convex hulls and used as differentiable projection layers, "
    "make a network's outputs satisfy the rules exactly, end to end, without losing accuracy."
)

# The note's thresholds: satisfaction in every seed, and accuracy within 5 % of a reference MSE.
MIN_SATISFACTION = 0.999
# Issue 40 moves the reference from the raw MLP (whose MSE includes its rule violations) to the
# post-hoc hull projection of the same MLP: the layer trained end to end should at least match
# projecting the unconstrained fit, within the note's 5 %.
MAX_MSE_RATIO_TO_POSTHOC = 1.05
# Satisfaction tolerance τ: the QP's own tolerance (the note's default).
SATISFACTION_TOL = 1e-4
# The issue's second line: end-to-end MSE no worse than the soft-penalty network's.
MAX_MSE_RATIO_TO_PENALTY = 1.0


@dataclasses.dataclass(frozen=True)
class DisjunctiveConfig(ExperimentConfig):
    """Sizes of ``disjunctive-rules``.

    Attributes:
      num_train, num_test: task sizes (the note: 100 and 2000).
      noise_std: training-target noise.
      hidden: MLP width (two hidden layers).
      steps: Adam steps (full batch).
      learning_rate: Adam's learning rate.
      penalty_weight: weight of the soft penalty.
      seeds: vmapped seeds.
      formulation: hull formulation of the hull arms (end to end and post hoc): DNF, the
        reference's default and the tightest hull.
      warm_steps: Adam steps of the warm-started end-to-end hull arm (task A), which starts
        from the trained ``mlp`` network instead of a fresh one.
    """

    num_train: int = 100
    num_test: int = 2000
    noise_std: float = 0.02
    hidden: int = 64
    steps: int = 2000
    learning_rate: float = 1e-3
    penalty_weight: float = 10.0
    seeds: int = 5
    formulation: str = "dnf"
    warm_steps: int = 500

    @classmethod
    def smoke(cls) -> DisjunctiveConfig:
        # warm_steps = steps: the warm arm reuses the cold hull arm's compiled program.
        return cls(num_train=16, num_test=64, hidden=8, steps=4, seeds=2, warm_steps=4)

    @classmethod
    def quick(cls) -> DisjunctiveConfig:
        return cls()

    @classmethod
    def full(cls) -> DisjunctiveConfig:
        return cls(num_train=400, num_test=8000, steps=4000, seeds=10, warm_steps=1000)


def _train(config, task, arm, layer, start, steps, programs):
    """Trains one arm for every seed (vmapped) from ``start`` (every seed's initial parameters:
    a fresh network, or the trained ``mlp`` for a warm start) and returns the parameters.

    The data, initial parameters, learning rate and penalty weight are arguments of the compiled
    program, kept in ``programs`` (one run's cache), so the unconstrained arm compiles once for
    both tasks and a warm start with the cold start's step count reuses its program.
    """
    uses_input = bool(task.rule_set.input_size)
    rule_set = task.rule_set if arm == "penalty" else None
    key = (id(layer), id(rule_set), config.hidden, steps, uses_input)
    if key not in programs:
        programs[key] = jax.jit(
            jax.vmap(
                rule_network_trainer(layer, rule_set, steps, uses_input=uses_input),
                in_axes=(0, None, None, None, None),
            )
        )
    return programs[key](
        start, task.x_train, task.y_train, config.learning_rate, config.penalty_weight
    )


# Test predictions of every seed's network: one program for every arm and task (same shapes).
_predict = jax.jit(jax.vmap(rule_network_apply, in_axes=(0, None)))


def _evaluate(task, params, layer):
    """Test MSE, original-rule satisfaction and the projected fraction, per seed."""
    pred = _predict(params, task.x_test)
    seeds = pred.shape[0]
    xs = None
    if task.rule_set.input_size:
        xs = jnp.broadcast_to(task.x_test, (seeds, *task.x_test.shape))
    projected = jnp.ones(pred.shape[:2], bool)
    if layer is not None:
        # The layer's own compiled program (shared by the arms that use the same layer).
        pred, info = layer(pred, xs)
        projected = info.projected
    mse = jnp.mean(jnp.sum((pred - task.y_test[None]) ** 2, axis=-1), axis=-1)
    sat = jnp.mean(rule_satisfaction(task.rule_set, xs, pred, tol=SATISFACTION_TOL), axis=-1)
    projected = jnp.mean(projected, axis=-1)
    return {
        "mse": np.asarray(mse).tolist(),
        "satisfaction": np.asarray(sat).tolist(),
        "projected": np.asarray(projected).tolist(),
        "mse_mean": float(np.mean(mse)),
        "satisfaction_min": float(np.min(sat)),
    }


def _pinned(task, params_by_seed):
    """Per seed, rule and disjunct: the fraction of training inputs whose raw output the
    applicable consequent pins to a face (:func:`jaxlab.nn.pinned_fractions`)."""
    raw = _predict(params_by_seed, task.x_train)
    fractions = jax.vmap(
        lambda y: pinned_fractions(task.rule_set, task.x_train, y, tol=SATISFACTION_TOL)
    )(raw)
    return np.asarray(fractions).tolist()


def _run_task(config, task, name, keys, progress_note, programs, *, warm):
    hull = DisjunctiveLayer(task.rule_set, formulation=config.formulation)
    union = DisjunctiveLayer(task.rule_set, mode="union")
    results, timings = {}, {}
    trained = {}
    fresh = jax.vmap(lambda k: rule_network_init(k, config.hidden))(keys)
    arms = [("mlp", None), ("penalty", None), ("e2e_hull", hull), ("e2e_union", union)]
    for arm, layer in arms:
        begin = time.perf_counter()
        trained[arm] = jax.block_until_ready(
            _train(config, task, arm, layer, fresh, config.steps, programs)
        )
        timings[arm] = time.perf_counter() - begin
        results[arm] = _evaluate(task, trained[arm], layer)
        progress_note(f"{name}/{arm}")
    pinned = {}
    if warm:
        # The fair end-to-end arm: the same hull layer, trained from the unconstrained fit, whose
        # raw outputs already sit on the applicable side of most rules (few are pinned).
        begin = time.perf_counter()
        trained["e2e_hull_warm"] = jax.block_until_ready(
            _train(config, task, "e2e_hull_warm", hull, trained["mlp"], config.warm_steps, programs)
        )
        timings["e2e_hull_warm"] = time.perf_counter() - begin
        results["e2e_hull_warm"] = _evaluate(task, trained["e2e_hull_warm"], hull)
        progress_note(f"{name}/e2e_hull_warm")
        for arm, start in (
            ("e2e_hull", fresh),
            ("e2e_union", fresh),
            ("e2e_hull_warm", trained["mlp"]),
        ):
            pinned[arm] = {"start": _pinned(task, start), "end": _pinned(task, trained[arm])}
    results["posthoc_hull"] = _evaluate(task, trained["mlp"], hull)
    results["posthoc_union"] = _evaluate(task, trained["mlp"], union)
    return results, timings, pinned


def _figure(per_task):
    fig = Figure(figsize=(10, 4))
    axes = fig.subplots(1, 2)
    for ax, (name, results) in zip(axes, per_task.items(), strict=True):
        arms = list(results)
        for i, arm in enumerate(arms):
            sat = np.asarray(results[arm]["satisfaction"])
            mse = np.asarray(results[arm]["mse"])
            ax.scatter(mse, sat, label=arm, marker="os^v<>"[i % 6])
        ax.axhline(MIN_SATISFACTION, color="k", ls=":", lw=1)
        ax.set_xscale("log")
        ax.set_xlabel("test MSE (per seed)")
        ax.set_ylabel("original-rule satisfaction")
        ax.set_title(name)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return {"satisfaction_vs_mse": fig}


@register("disjunctive-rules", config=DisjunctiveConfig, claim=CLAIM)
def run(config: DisjunctiveConfig, rng_key: jax.Array, progress: Progress) -> Result:
    """Trains every arm on both tasks and computes the note's verdict (and the issue's target)."""
    key_a, key_b, key_init = jax.random.split(rng_key, 3)
    sizes = dict(num_train=config.num_train, num_test=config.num_test, noise_std=config.noise_std)
    tasks = {
        "input_decided": input_decided_regression_task(key_a, **sizes),
        "output_only": output_only_regression_task(key_b, **sizes),
    }
    keys = jax.random.split(key_init, config.seeds)
    per_task, timings, pinned = {}, {}, {}
    done = []
    programs: dict[tuple, Any] = {}  # compiled training programs, shared across the tasks
    for name, task in progress.track(list(tasks.items()), total=2, description="tasks"):
        per_task[name], timings[name], found = _run_task(
            config, task, name, keys, done.append, programs, warm=name == "input_decided"
        )
        if found:
            pinned[name] = found

    a, b = per_task["input_decided"], per_task["output_only"]
    fair, cold = a["e2e_hull_warm"], a["e2e_hull"]
    sat_ok = fair["satisfaction_min"] >= MIN_SATISFACTION
    ratio_posthoc = fair["mse_mean"] / a["posthoc_hull"]["mse_mean"]
    mse_ok = ratio_posthoc <= MAX_MSE_RATIO_TO_POSTHOC
    union_ok = min(a["e2e_union"]["satisfaction_min"], b["e2e_union"]["satisfaction_min"]) >= (
        MIN_SATISFACTION
    )
    issue_ratios = {
        f"{task}/{arm}": per_task[task][arm]["mse_mean"] / per_task[task]["penalty"]["mse_mean"]
        for task, arm in (
            ("input_decided", "e2e_hull_warm"),
            ("input_decided", "e2e_union"),
            ("output_only", "e2e_union"),
        )
    }
    issue_ok = union_ok and all(r <= MAX_MSE_RATIO_TO_PENALTY for r in issue_ratios.values())
    level = "supported" if sat_ok and mse_ok else "partly supported" if sat_ok else "not supported"

    def fmt(results, arm):
        r = results[arm]
        return f"{arm}: sat min {r['satisfaction_min']:.4f}, MSE {r['mse_mean']:.4g}"

    def per_seed(values, digits=4):
        return "/".join(f"{v:.{digits}f}" for v in values)

    def pinned_line(arm, when):
        # Mean over seeds of rule 1's two branches and rule 2's two branches.
        table = np.nanmean(np.asarray(pinned["input_decided"][arm][when]), axis=0)
        return ", ".join(
            f"R{r + 1}.{t + 1} {table[r][t]:.0%}"
            for r in range(table.shape[0])
            for t in range(table.shape[1])
            if np.isfinite(table[r][t])
        )

    part_sat = check(
        f"task A (input-decided rules): the end-to-end hull layer ({config.formulation}), "
        "warm-started from the unconstrained fit, satisfies the original rules on >= "
        f"{MIN_SATISFACTION:.1%} of test inputs in every seed",
        "; ".join(
            fmt(a, arm) for arm in ("e2e_hull_warm", "e2e_hull", "mlp", "penalty", "posthoc_hull")
        ),
        sat_ok,
    )
    part_mse = check(
        f"task A: the warm-started end-to-end hull layer's mean test MSE <= "
        f"{MAX_MSE_RATIO_TO_POSTHOC} x post-hoc hull projection of the MLP's",
        f"e2e_hull_warm {fair['mse_mean']:.4g} (per seed {per_seed(fair['mse'])}) / posthoc_hull "
        f"{a['posthoc_hull']['mse_mean']:.4g} = {ratio_posthoc:.3f}; cold start e2e_hull "
        f"{cold['mse_mean']:.4g} (per seed {per_seed(cold['mse'])}), "
        f"mlp {a['mlp']['mse_mean']:.4g}; "
        f"training outputs pinned to a face (rule.branch, mean over seeds), cold start "
        f"{pinned_line('e2e_hull', 'start')} -> {pinned_line('e2e_hull', 'end')}, warm start "
        f"{pinned_line('e2e_hull_warm', 'start')} -> {pinned_line('e2e_hull_warm', 'end')}",
        mse_ok,
    )
    part_issue = check(
        f"earlier issue's target: exact union projection >= {MIN_SATISFACTION:.1%} satisfaction "
        "on both tasks in every seed, and end-to-end MSE <= the soft-penalty network's",
        "; ".join(
            [fmt(a, "e2e_union") + " (A)", fmt(b, "e2e_union") + " (B)"]
            + [f"MSE/penalty {k} = {v:.3f}" for k, v in issue_ratios.items()]
        )
        + f"; hull limitation on B: {fmt(b, 'e2e_hull')}, {fmt(b, 'posthoc_hull')}",
        issue_ok,
    )
    metrics = {
        "note_verdict": level,
        "results": per_task,
        "pinned_fraction": pinned,
        "pinned_fraction_layout": "[seed][rule][disjunct] on the training inputs, at the start "
        "and end of each end-to-end arm's training (NaN: no input selects the disjunct)",
        "train_seconds": timings,
        "mse_ratio_e2e_hull_warm_to_posthoc": ratio_posthoc,
        "mse_ratio_e2e_hull_cold_to_mlp": cold["mse_mean"] / a["mlp"]["mse_mean"],
        "mse_ratio_to_penalty": issue_ratios,
        "satisfaction_tol": SATISFACTION_TOL,
        "config": dataclasses.asdict(config),
    }
    metrics_any: Any = metrics
    return Result(
        metrics=metrics_any,
        parts=[part_sat, part_mse, part_issue],
        figures=_figure(per_task),
        reason=f"note's rule (fair, warm-started arm): {level}",
    )
