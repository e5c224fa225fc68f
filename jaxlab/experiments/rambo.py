"""Experiment ``rambo``: a Dirichlet-process mixture of GPs for multi-regime objectives.

RAMBO (:func:`jaxlab.bo.bayes_opt` with ``surrogate="rambo"``: collapsed Gibbs sampling of a
DP mixture of GPs, mixture EI) against single-GP EI (``"sgp"``, the released baseline: one
ARD-RBF GP by L-BFGS, EI with ``ξ = 0.1``) and random search, on the note's two-regime function
(a smooth bowl for ``x₁ < 0``, a rough regime holding the optimum for ``x₁ >= 0``), Levy and
Schwefel. Every arm of a seed starts from the same scrambled-Sobol design. Metric: simple
regret ``best observed - optimum`` after each evaluation; the verdict reads the mean over seeds
of ``log10`` final regret (floored at ``1e-12``). GP maths in float64 (``jax.enable_x64``
scoped to the run), as the note chooses.

Quick (the note's): 2-D problems, 10 initial points + 40 iterations, 3 seeds, 40 sweeps / 15
burn-in, MAP refits every 5 sweeps, constant ``α = 2``, 2048 Sobol candidates refined from the
best 5 by 25 Adam steps (the note's quick acquisition). Full: the paper's 6-D and 10-D Levy and
Schwefel (20 + 200 evaluations, 5 seeds, 1000 / 500 sweeps) with both concentration schedules
(linear 0.5 → 5 and sqrtlog ``α₀ = 2``), 20 acquisition starts refined by Adam then 60 L-BFGS
iterations (the released code's optimizer); the verdict reads the first RAMBO arm.

Verdict (the note's calibrated rule, two parts, then the issue's target as a third):

1. on the two-regime function RAMBO's mean log10 final regret is below SGP's by at least
   ``REGIME_GAP``;
2. on Levy and Schwefel it is at most SGP's ``+ TIE_MARGIN`` (no loss where there is one regime);
3. (issue) on the two-regime function RAMBO's mean final regret is below SGP's, and on every
   function it is not above random search's.

The note names the level: *supported* (1 and 2), *partly supported* (1 alone, or every gap
within ``± TIE_MARGIN``), *not supported* otherwise (RAMBO worse by more than the margin on the
two-regime function, or the gap there inside the margin while another function is outside
it). The number of regimes RAMBO finds at the end is reported (the note expects at least 2 on
the two-regime function).
"""

from __future__ import annotations

import dataclasses
import time

import jax
import numpy as np
from matplotlib.figure import Figure

from jaxlab._src.experiments import ExperimentConfig, Progress, Result, check, register
from jaxlab.bo import AcquisitionConfig, RamboConfig, bayes_opt, bo_problem

__all__ = ["RamboExperimentConfig", "run"]

CLAIM = (
    "Zhang et al. (ICML 2026): modelling a multi-regime objective by a Dirichlet-process mixture "
    "of GPs (collapsed Gibbs sampling, per-regime hyper-parameters, mixture acquisition with "
    "intra/inter-regime uncertainty) finds better optima than a single stationary GP where the "
    "objective has regimes, without losing where it has one."
)

# The note's calibrated rule: gaps in mean log10 final simple regret over seeds.
REGIME_GAP = 0.2  # RAMBO below SGP by >= 0.2 decades on the two-regime function
TIE_MARGIN = 0.2  # "roughly tied": within 0.2 decades on Levy and Schwefel
REGRET_FLOOR = 1e-12  # log10 of an exact optimum would be -inf
TWO_REGIME = "two_regime"


@dataclasses.dataclass(frozen=True)
class RamboExperimentConfig(ExperimentConfig):
    """Sizes of the ``rambo`` experiment.

    Attributes:
      problems: ``(name, dim)`` pairs (the two-regime function must be among them).
      num_init, num_iters, seeds: design size, BO iterations and seeds.
      num_sweeps, burn_in: RAMBO's Gibbs sweeps per fit and the burn-in.
      schedules: RAMBO's concentration schedules, one arm each (the verdict reads the first).
      num_candidates, num_starts, adam_steps, lbfgs_steps: the acquisition optimizer.
      gp_steps: L-BFGS iterations of the single-GP fit.
    """

    problems: tuple[tuple[str, int], ...] = ((TWO_REGIME, 2), ("levy", 2), ("schwefel", 2))
    num_init: int = 10
    num_iters: int = 40
    seeds: int = 3
    num_sweeps: int = 40
    burn_in: int = 15
    schedules: tuple[str, ...] = ("constant",)
    num_candidates: int = 2048
    num_starts: int = 5
    adam_steps: int = 25
    lbfgs_steps: int = 60
    gp_steps: int = 50

    @classmethod
    def smoke(cls):
        # The sizes of tests/bo/test_loop.py, the notebook's and the benchmark's smoke runs: one
        # compiled program per surrogate, shared through the suite's compilation cache.
        return cls(
            num_init=4,
            num_iters=3,
            seeds=1,
            num_sweeps=3,
            burn_in=1,
            num_candidates=64,
            num_starts=2,
            adam_steps=2,
            lbfgs_steps=2,
            gp_steps=5,
        )

    @classmethod
    def quick(cls):
        # The note's quick acquisition: Sobol candidates and Adam refinement, no L-BFGS stage.
        return cls(lbfgs_steps=0)

    @classmethod
    def full(cls):
        return cls(
            problems=(
                (TWO_REGIME, 2),
                ("levy", 6),
                ("schwefel", 6),
                ("levy", 10),
                ("schwefel", 10),
            ),
            num_init=20,
            num_iters=200,
            seeds=5,
            num_sweeps=1000,
            burn_in=500,
            schedules=("linear", "sqrtlog"),
            num_starts=20,
        )


def _arms(config):
    return [f"rambo-{s}" for s in config.schedules] + ["sgp", "random"]


def _log_regret(regret):
    return float(np.log10(max(regret, REGRET_FLOOR)))


def _run_problem(config, name, dim, key, progress):
    problem = bo_problem(name, dim)
    acq = AcquisitionConfig(
        num_candidates=config.num_candidates,
        num_starts=config.num_starts,
        adam_steps=config.adam_steps,
        lbfgs_steps=config.lbfgs_steps,
    )
    out = {arm: [] for arm in _arms(config)}
    for seed in range(config.seeds):
        seed_key = jax.random.fold_in(key, seed)  # the same design for every arm of a seed
        for arm in out:
            surrogate, _, schedule = arm.partition("-")
            rambo = RamboConfig(
                num_sweeps=config.num_sweeps,
                burn_in=config.burn_in,
                schedule=schedule or "constant",
                alpha0=2.0,
            )
            result = bayes_opt(
                seed_key,
                problem.objective,
                problem.bounds,
                surrogate=surrogate,
                num_init=config.num_init,
                num_iters=config.num_iters,
                rambo=rambo,
                acquisition=acq,
                gp_steps=config.gp_steps,
                progress=progress,
            )
            regret = np.maximum(result.best_so_far - problem.optimal_value, 0.0)
            out[arm].append(
                {
                    "regret": regret.tolist(),
                    "final_regret": float(regret[-1]),
                    "log10_final_regret": _log_regret(float(regret[-1])),
                    "num_clusters": result.num_clusters.tolist(),
                    "seconds_per_iteration": float(np.mean(result.seconds))
                    if config.num_iters
                    else 0.0,
                    "nonfinite": int(result.nonfinite),
                }
            )
    summary = {
        arm: {
            "mean_log10_final_regret": float(np.mean([r["log10_final_regret"] for r in runs])),
            "mean_final_regret": float(np.mean([r["final_regret"] for r in runs])),
            "final_clusters": [r["num_clusters"][-1] if r["num_clusters"] else 0 for r in runs],
            "seconds_per_iteration": float(np.mean([r["seconds_per_iteration"] for r in runs])),
        }
        for arm, runs in out.items()
    }
    return {
        "name": name,
        "dim": dim,
        "optimal_value": problem.optimal_value,
        "runs": out,
        "summary": summary,
    }


def _key(name, dim):
    return f"{name}-{dim}d"


def verdict_inputs(tasks: dict, arm: str) -> dict:
    """Per task: RAMBO's (``arm``) and the baselines' mean log10 / mean final regret."""
    rows = {}
    for task, out in tasks.items():
        s = out["summary"]
        rows[task] = {
            "rambo_log10": s[arm]["mean_log10_final_regret"],
            "sgp_log10": s["sgp"]["mean_log10_final_regret"],
            "rambo_regret": s[arm]["mean_final_regret"],
            "sgp_regret": s["sgp"]["mean_final_regret"],
            "random_regret": s["random"]["mean_final_regret"],
            "rambo_clusters": s[arm]["final_clusters"],
        }
    return rows


def _figures(config, tasks):
    fig = Figure(figsize=(5 * len(tasks), 4))
    axes = np.atleast_1d(fig.subplots(1, len(tasks)))
    evals = np.arange(1, config.num_init + config.num_iters + 1)
    for ax, (task, out) in zip(axes, tasks.items(), strict=True):
        for arm, runs in out["runs"].items():
            curves = np.maximum(np.array([r["regret"] for r in runs]), REGRET_FLOOR)
            mean = 10 ** np.mean(np.log10(curves), axis=0)
            ax.semilogy(evals, mean, label=arm)
        ax.axvline(config.num_init + 0.5, color="grey", lw=0.5)
        ax.set_title(task)
        ax.set_xlabel("evaluations")
        ax.set_ylabel("simple regret (geometric mean over seeds)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    regimes = Figure(figsize=(5, 4))
    ax = regimes.subplots()
    for task, out in tasks.items():
        for arm, runs in out["runs"].items():
            if arm.startswith("rambo") and runs[0]["num_clusters"]:
                k = np.mean([r["num_clusters"] for r in runs], axis=0)
                ax.plot(np.arange(1, len(k) + 1), k, label=f"{task} {arm}")
    ax.set_xlabel("BO iteration")
    ax.set_ylabel("active regimes after the fit (mean over seeds)")
    ax.legend(fontsize=7)
    regimes.tight_layout()
    return {"regret": fig, "regimes": regimes}


@register("rambo", config=RamboExperimentConfig, claim=CLAIM)
def run(config: RamboExperimentConfig, rng_key: jax.Array, progress: Progress) -> Result:
    if TWO_REGIME not in [name for name, _ in config.problems]:
        raise ValueError(f"problems must include {TWO_REGIME!r}, got {config.problems}")
    start = time.perf_counter()
    tasks = {}
    with jax.enable_x64(True):  # GP maths in float64 (the note's choice), scoped to the run
        for i, (name, dim) in enumerate(config.problems):
            tasks[_key(name, dim)] = _run_problem(
                config, name, dim, jax.random.fold_in(rng_key, i), progress
            )
    arm = _arms(config)[0]
    rows = verdict_inputs(tasks, arm)
    two = rows[_key(TWO_REGIME, 2)]
    others = {t: r for t, r in rows.items() if not t.startswith(TWO_REGIME)}
    gap = two["sgp_log10"] - two["rambo_log10"]
    part1 = check(
        f"on the two-regime function RAMBO's mean log10 final regret is below single-GP EI's "
        f"by >= {REGIME_GAP} (the note's rule)",
        f"{arm} {two['rambo_log10']:.2f} vs SGP {two['sgp_log10']:.2f} (gap {gap:.2f} decades); "
        f"regimes at the end per seed {two['rambo_clusters']}",
        gap >= REGIME_GAP,
    )
    part2 = check(
        f"on single-regime functions RAMBO is at most SGP + {TIE_MARGIN} decades (the note's rule)",
        "; ".join(
            f"{t}: {r['rambo_log10']:.2f} vs {r['sgp_log10']:.2f}" for t, r in others.items()
        ),
        all(r["rambo_log10"] <= r["sgp_log10"] + TIE_MARGIN for r in others.values()),
    )
    never_worse = {t: r["rambo_regret"] <= r["random_regret"] for t, r in rows.items()}
    part3 = check(
        "issue: on the two-regime function RAMBO's mean final regret is below SGP's, and on "
        "every function it is not above random search's",
        f"two-regime {two['rambo_regret']:.4g} vs SGP {two['sgp_regret']:.4g}; vs random: "
        + "; ".join(
            f"{t} {r['rambo_regret']:.4g} vs {r['random_regret']:.4g}" for t, r in rows.items()
        ),
        two["rambo_regret"] < two["sgp_regret"] and all(never_worse.values()),
    )
    within = all(abs(r["rambo_log10"] - r["sgp_log10"]) <= TIE_MARGIN for r in rows.values())
    level = (
        "supported"
        if part1.passed and part2.passed
        else "partly supported"
        if part1.passed or within
        else "not supported"
    )
    metrics = {
        "note_verdict": level,
        "verdict_arm": arm,
        "verdict_inputs": rows,
        "tasks": tasks,
        "seconds": time.perf_counter() - start,
    }
    reason = f"note's rule: {level}; issue's target: {'held' if part3.passed else 'not held'}"
    return Result(
        metrics=metrics, parts=[part1, part2, part3], figures=_figures(config, tasks), reason=reason
    )
