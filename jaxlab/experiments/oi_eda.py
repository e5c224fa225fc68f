"""Experiment ``oi-eda``: the order-invariant EDA against classical black-box baselines.

Goudet et al. (ICML 2026): an autoregressive model trained with GRPO over random generation
orders (σ) and random training orders (σ′) "frequently achieves the best performance and
consistently avoids catastrophic failures".

Measured (``notes/oi_eda.md``): :func:`jaxlab.rl.binary_benchmark_suite` at ``n = 64`` (OneMax,
LeadingOnes, trap-4, NK with K = 4, max-cut on G(64, 0.1); the random instances drawn once from
``instance_seed``), a budget of 20,000 evaluations, 5 seeds. Arms: the linear any-order model
(:func:`jaxlab.rl.oi_eda`, G = 64, 4 epochs, ε_c = 0.2, Adam 0.01) with ``fixed``, ``sigma``
and ``sigma_sigmap`` orders (z-score advantages) and ``sigma_sigmap`` with rank advantages;
the baselines (1+1)-EA, UMDA (λ 64, μ 32), PBIL (λ 64, μ 2, η 0.1) and the GA (λ 64,
p_c 0.9, one elite). Metric: the best value found; anytime curves (best so far against
evaluations) in the figure. ``full`` is the note's: the MLP model (:class:`jaxlab.rl.AnyOrderMLP`,
Adam 1e-3) at n = 256 with 10^5 evaluations and 30 seeds, an accelerator's budget.

Verdict (the note's rule gates): (a) sigma_sigmap's mean beats fixed's on LeadingOnes, NK and
max-cut, and is >= sigma's on at least two of them; (b) sigma_sigmap's mean is within 2% of
the best baseline mean on each of the three; (c) no sigma_sigmap run on NK or max-cut falls
below 0.95 x the best value known (the maximum over every arm and seed): *supported* if all
three, *partly supported* if (a) only, else *not supported*. The issue's target, reported as its
own part: (d) sigma_sigmap is the best arm or within 2% of it on most (>= 3 of 5) problems and
no run falls below 0.9 x the median baseline mean (a catastrophic failure). (e) The note's
reference checks 1, 2, 4 and 5. The rank against z-score comparison is reported, not gated.
"""

from __future__ import annotations

import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from matplotlib.figure import Figure

from jaxlab._src import parts as _parts
from jaxlab._src.experiments import (
    ExperimentConfig,
    Progress,
    Result,
    check,
    register,
    skipped_steps_check,
)
from jaxlab.rl import (
    AnyOrderLogistic,
    MaxCut,
    binary_benchmark_suite,
    deceptive_trap,
    genetic_algorithm,
    group_advantages,
    leading_ones,
    log_prob_any_order,
    num_steps_for_budget,
    oi_eda,
    one_plus_one_ea,
    onemax,
    pbil,
    random_orders,
    run_optimizer,
    umda,
)

__all__ = ["OIEDAConfig", "run"]

CLAIM = (
    "Goudet et al. (ICML 2026): an autoregressive model trained with GRPO over random generation "
    "and training orders, used as an EDA, frequently achieves the best performance across "
    "black-box combinatorial benchmarks and consistently avoids catastrophic failures."
)

# The note's calibrated rule (its numpy prototype, 4 seeds: sigma_sigmap 63.3 vs fixed 23.3 on
# LeadingOnes, 0.770 vs 0.746 on NK, 149.8 vs 143.5 on max-cut).
NOTE_PROBLEMS = ("leading_ones", "nk4", "maxcut")  # where the order effect shows
MIN_SIGMA_WINS = 2  # (a) sigma_sigmap >= sigma on at least two of NOTE_PROBLEMS
BASELINE_TOLERANCE = 0.02  # (b) within 2% of the best baseline mean
CATASTROPHE_PROBLEMS = ("nk4", "maxcut")  # (c)
CATASTROPHE_FRACTION = 0.95  # (c) a run below 0.95 x the best known value
# The issue's target.
ISSUE_BEST_TOLERANCE = 0.02  # "the best or within 2% of the best"
ISSUE_MOST = 3  # "on most instances": at least 3 of the 5
ISSUE_CATASTROPHE = 0.9  # "below the median baseline by more than 10%"
REFERENCE_TOL = 1e-4  # the note's four-decimal advantages, float32
# The GRPO core's fidelity on the note's own setting (LeadingOnes at n = 64, 20,000 evaluations):
# the note's numpy prototype reports 63.3 +/- 1.3 over 4 seeds for sigma_sigmap; issue 37 asks
# for a 5-seed mean >= 62 once no update is lost (the previous core's 55.4 skipped 75-88 of 312).
PROTOTYPE_LEADING_ONES_MEAN = 62.0
PROTOTYPE_SETTING = {"num_variables": 64, "budget": 20_000}

EDA_ARMS = {  # name -> (order_mode, advantage)
    "eda_fixed": ("fixed", "zscore"),
    "eda_sigma": ("sigma", "zscore"),
    "eda_sigma_sigmap": ("sigma_sigmap", "zscore"),
    "eda_sigma_sigmap_rank": ("sigma_sigmap", "rank"),
}
BASELINES = ("one_plus_one_ea", "umda", "pbil", "genetic_algorithm")
METHOD = "eda_sigma_sigmap"


@dataclasses.dataclass(frozen=True)
class OIEDAConfig(ExperimentConfig):
    """Sizes of ``oi-eda``.

    Attributes:
      num_variables: ``n`` of every benchmark.
      budget: objective evaluations per run.
      seeds: runs per arm and problem (vmapped).
      population: the EDA's group ``G`` and the population of UMDA, PBIL and the GA.
      num_epochs, clip_epsilon, learning_rate: the EDA's PPO epochs, clip and Adam step.
      model, hidden: the EDA's any-order model (``"linear"``: :class:`jaxlab.rl.AnyOrderLogistic`;
        ``"mlp"``: :class:`jaxlab.rl.AnyOrderMLP` with ``hidden``, the note's ``full`` model).
      umda_selected, pbil_selected, pbil_learning_rate: the baselines' ``μ`` and ``η``.
      nk_k, edge_probability, trap_block: the suite's instances.
      instance_seed: the seed of the NK and max-cut instances (fixed across runs).
      curve_points: points of the anytime curves kept in the result.
    """

    num_variables: int = 64
    budget: int = 20_000
    seeds: int = 5
    population: int = 64
    num_epochs: int = 4
    clip_epsilon: float = 0.2
    learning_rate: float = 0.01
    model: str = "linear"
    hidden: tuple[int, ...] = (128, 128)
    umda_selected: int = 32
    pbil_selected: int = 2
    pbil_learning_rate: float = 0.1
    nk_k: int = 4
    edge_probability: float = 0.1
    trap_block: int = 4
    instance_seed: int = 2024
    curve_points: int = 60

    @classmethod
    def smoke(cls):
        return cls(
            num_variables=16, budget=256, seeds=2, population=16, umda_selected=8, curve_points=8
        )

    @classmethod
    def quick(cls):
        return cls()

    @classmethod
    def full(cls):
        # The note's full: the MLP model (Adam 1e-3), n = 256, 10^5 evaluations, 30 runs.
        return cls(num_variables=256, budget=100_000, seeds=30, model="mlp", learning_rate=1e-3)


def _algorithm(config: OIEDAConfig, arm: str, objective):
    n, lam = config.num_variables, config.population
    if arm in EDA_ARMS:
        order_mode, advantage = EDA_ARMS[arm]
        return oi_eda(
            objective,
            n,
            population=lam,
            num_epochs=config.num_epochs,
            clip_epsilon=config.clip_epsilon,
            order_mode=order_mode,
            advantage=advantage,
            optimizer=optax.adam(config.learning_rate),
            model=config.model,
            hidden=config.hidden,
        )
    if arm == "umda":
        return umda(objective, n, population=lam, num_selected=config.umda_selected)
    if arm == "pbil":
        return pbil(
            objective,
            n,
            population=lam,
            num_selected=config.pbil_selected,
            learning_rate=config.pbil_learning_rate,
        )
    if arm == "genetic_algorithm":
        return genetic_algorithm(objective, n, population=lam)
    return one_plus_one_ea(objective, n)


def _program(config: OIEDAConfig, arm: str, names: tuple[str, ...], plain: dict):
    """One jitted program per arm: every seed (vmapped) of one problem picked by a traced index.

    ``plain`` holds the suite's functions; the random instances arrive as arguments, so the
    same program serves all five problems.
    """

    def run(keys, problem, instances):
        # Plain closures: lax.switch cannot weak-reference the NamedTuple instances themselves.
        functions = [instances[name] if name in instances else plain[name] for name in names]
        branches = [lambda x, f=f: f(x) for f in functions]
        algorithm = _algorithm(config, arm, lambda x: jax.lax.switch(problem, branches, x))
        steps = num_steps_for_budget(algorithm, config.budget)

        def one(key):
            state, curve, counts = run_optimizer(algorithm, key, steps)
            # The GRPO core's skipped updates (any cause); the baselines have no update to skip.
            skipped = getattr(state.search, "skipped_count", jnp.zeros([], jnp.int32))
            return (
                state.best_value,
                curve,
                counts,
                state.nonfinite_count,
                state.evaluations,
                skipped,
            )

        return jax.vmap(one)(keys)

    return jax.jit(run)


def _run_arms(config: OIEDAConfig, rng_key, progress: Progress) -> dict:
    suite = binary_benchmark_suite(
        jax.random.key(config.instance_seed),
        config.num_variables,
        nk_k=config.nk_k,
        edge_probability=config.edge_probability,
        trap_block=config.trap_block,
    )
    names = tuple(suite)
    instances = {k: v for k, v in suite.items() if isinstance(v, tuple)}
    plain = {k: v for k, v in suite.items() if k not in instances}
    keys = jax.random.split(rng_key, config.seeds)
    arms = (*EDA_ARMS, *BASELINES)
    out: dict = {name: {} for name in names}
    seconds = {}
    for arm in progress.track(arms, total=len(arms), description="arms"):
        start = time.perf_counter()
        program = _program(config, arm, names, plain)
        for index, name in enumerate(names):

            def one(index=index, program=program):  # one unit of work (issue 45)
                best, curve, counts, nonfinite, evaluations, skipped = program(
                    keys, jnp.int32(index), instances
                )
                curve, counts = np.asarray(curve), np.asarray(counts)[0]  # the same per seed
                keep = np.linspace(0, curve.shape[1] - 1, config.curve_points).astype(int)
                keep = np.unique(keep)
                return {
                    "per_seed": np.asarray(best).tolist(),
                    "mean": float(np.mean(best)),
                    "std": float(np.std(best)),
                    "evaluations": int(np.max(evaluations)),
                    "curve_evaluations": counts[keep].tolist(),
                    "curve_mean": curve[:, keep].mean(0).tolist(),
                    "nonfinite_steps": int(np.sum(nonfinite)),
                    "skipped_updates_per_seed": np.asarray(skipped).tolist(),
                    "steps": int(counts.shape[0]),
                }

            out[name][arm] = _parts.unit({"arm": arm, "problem": name}, one)
        seconds[arm] = time.perf_counter() - start
    return {"problems": out, "seconds_per_arm": seconds}


def note_parts(problems: dict) -> dict[str, bool]:
    """The note's (a), (b), (c) from the per-problem, per-arm results."""
    mean = lambda p, a: problems[p][a]["mean"]  # noqa: E731
    beats_fixed = all(mean(p, METHOD) > mean(p, "eda_fixed") for p in NOTE_PROBLEMS)
    over_sigma = sum(mean(p, METHOD) >= mean(p, "eda_sigma") for p in NOTE_PROBLEMS)
    a = beats_fixed and over_sigma >= MIN_SIGMA_WINS
    b = all(
        mean(p, METHOD) >= (1 - BASELINE_TOLERANCE) * max(mean(p, b) for b in BASELINES)
        for p in NOTE_PROBLEMS
    )
    c = all(
        min(problems[p][METHOD]["per_seed"]) >= CATASTROPHE_FRACTION * best_known(problems[p])
        for p in CATASTROPHE_PROBLEMS
    )
    return {"a": a, "b": b, "c": c}


def best_known(results: dict) -> float:
    """The best value any arm reached in any seed on one problem."""
    return max(max(arm["per_seed"]) for arm in results.values())


def issue_part(problems: dict) -> tuple[bool, int, list[str]]:
    """(d): near-best on most problems, no run below 0.9 x the median baseline mean."""
    near = 0
    failures = []
    for name, results in problems.items():
        top = max(arm["mean"] for arm in results.values())
        near += results[METHOD]["mean"] >= (1 - ISSUE_BEST_TOLERANCE) * top
        median = float(np.median([results[b]["mean"] for b in BASELINES]))
        if min(results[METHOD]["per_seed"]) < ISSUE_CATASTROPHE * median:
            failures.append(name)
    return near >= ISSUE_MOST and not failures, near, failures


def _reference_checks(n: int = 16) -> dict:
    x = jnp.array([1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 1, 0, 1, 1, 1, 0])
    values = [
        float(onemax(x)),
        float(leading_ones(x)),
        float(deceptive_trap(x)),
        float(leading_ones(jnp.array([1, 1, 0, 1]))),
    ]
    cycle = jnp.roll(jnp.eye(4), 1, axis=1)
    cut = MaxCut(cycle + cycle.T)
    cuts = [float(cut(jnp.array([0, 1, 0, 1]))), float(cut(jnp.array([0, 0, 1, 1])))]
    f = jnp.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0])
    z = np.array([-0.3404, -1.1183, 0.0486, -1.1183, 0.4376, 1.9935, -0.7293, 0.8266])
    r = np.array([-0.2195, -1.3172, 0.2195, -1.3172, 0.6586, 1.5367, -0.6586, 1.0976])
    advantage_error = max(
        float(np.max(np.abs(group_advantages(f) - z))),
        float(np.max(np.abs(group_advantages(10 * f + 3) - z))),
        float(np.max(np.abs(group_advantages(f, kind="rank") - r))),
        float(np.max(np.abs(group_advantages(jnp.exp(f), kind="rank") - r))),
    )
    points = jax.random.bernoulli(jax.random.key(0), 0.5, (8, n)).astype(jnp.int32)
    logp = log_prob_any_order(AnyOrderLogistic(n), points, random_orders(jax.random.key(1), 8, n))
    uniform_error = float(np.max(np.abs(np.asarray(logp) + n * np.log(2))))
    passed = (
        values == [9.0, 4.0, 8.0, 2.0]
        and cuts == [4.0, 2.0]
        and advantage_error <= REFERENCE_TOL
        and uniform_error <= 1e-4
    )
    return {
        "values": values,
        "cuts": cuts,
        "advantage_error": advantage_error,
        "uniform_log_prob_error": uniform_error,
        "passed": bool(passed),
    }


_LABELS = {
    "eda_fixed": "EDA fixed",
    "eda_sigma": "EDA σ",
    "eda_sigma_sigmap": "EDA σσ′",
    "eda_sigma_sigmap_rank": "EDA σσ′ rank",
    "one_plus_one_ea": "(1+1)-EA",
    "umda": "UMDA",
    "pbil": "PBIL",
    "genetic_algorithm": "GA",
}


def _figure(problems: dict) -> dict[str, Figure]:
    names = list(problems)
    fig = Figure(figsize=(3.2 * len(names), 6.0))
    axes = fig.subplots(2, len(names), squeeze=False)
    for j, name in enumerate(names):
        top, bottom = axes[0, j], axes[1, j]
        known = best_known(problems[name])
        for i, (arm, result) in enumerate(problems[name].items()):
            style = "-" if arm.startswith("eda") else "--"
            top.plot(
                result["curve_evaluations"],
                result["curve_mean"],
                style,
                color=f"C{i}",
                label=_LABELS[arm],
                lw=1.2,
            )
            seeds = np.asarray(result["per_seed"]) / known
            bottom.scatter(np.full(seeds.shape, i), seeds, s=10, color=f"C{i}")
            bottom.plot([i - 0.3, i + 0.3], [result["mean"] / known] * 2, color=f"C{i}")
        top.set_title(name)
        top.set_xlabel("evaluations")
        top.set_xscale("log")
        bottom.axhline(CATASTROPHE_FRACTION, color="grey", ls=":", lw=0.8)
        bottom.set_xticks(range(len(_LABELS)), list(_LABELS.values()), rotation=90, fontsize=7)
    axes[0, 0].set_ylabel("best so far (mean over seeds)")
    axes[1, 0].set_ylabel("final best / best known")
    axes[0, 0].legend(fontsize=6)
    fig.tight_layout()
    return {"oi_eda": fig}


@register("oi-eda", config=OIEDAConfig, claim=CLAIM)
def run(config: OIEDAConfig, rng_key: jax.Array, progress: Progress) -> Result:
    """Runs every arm on every benchmark; the note's verdict part by part, the issue's beside."""
    start = time.perf_counter()
    reference = _reference_checks()
    runs = _run_arms(config, rng_key, progress)
    problems = runs["problems"]
    note = note_parts(problems)
    level = (
        "supported" if all(note.values()) else "partly supported" if note["a"] else "not supported"
    )

    def line(name, arms=(METHOD, "eda_sigma", "eda_fixed", *BASELINES)):
        results = problems[name]
        body = ", ".join(
            f"{_LABELS[a]} {results[a]['mean']:.4g} ± {results[a]['std']:.2g}" for a in arms
        )
        return f"{name}: {body}"

    note_lines = "; ".join(line(p) for p in NOTE_PROBLEMS)
    worst = {
        p: (min(problems[p][METHOD]["per_seed"]), best_known(problems[p]))
        for p in CATASTROPHE_PROBLEMS
    }
    d_ok, near, failures = issue_part(problems)
    skipped = {
        f"{arm}/{p}": problems[p][arm]["skipped_updates_per_seed"]
        for p in problems
        for arm in EDA_ARMS
    }
    steps = problems[NOTE_PROBLEMS[0]][METHOD]["steps"]
    parts = [
        check(
            "(note a) σσ′ beats the fixed order on LeadingOnes, NK and max-cut, and is >= σ "
            f"on at least {MIN_SIGMA_WINS} of them",
            note_lines,
            note["a"],
        ),
        check(
            f"(note b) σσ′ is within {BASELINE_TOLERANCE:.0%} of the best baseline mean on "
            "LeadingOnes, NK and max-cut",
            note_lines,
            note["b"],
        ),
        check(
            f"(note c) no σσ′ run on NK or max-cut below {CATASTROPHE_FRACTION} x the best known",
            "; ".join(
                f"{p}: worst σσ′ run {w:.4g}, best known {k:.4g} (ratio {w / k:.3f})"
                for p, (w, k) in worst.items()
            ),
            note["c"],
        ),
        check(
            f"(issue) σσ′ is the best arm or within {ISSUE_BEST_TOLERANCE:.0%} of it on at least "
            f"{ISSUE_MOST} of {len(problems)} problems, and no run falls below "
            f"{ISSUE_CATASTROPHE} x the median baseline mean",
            f"near-best on {near} of {len(problems)}; catastrophic on "
            f"{', '.join(failures) or 'none'}; " + "; ".join(line(p) for p in problems),
            d_ok,
        ),
        skipped_steps_check(skipped, steps),
        check(
            "the note's reference checks (benchmark values, max-cut, advantages, uniform "
            "likelihood)",
            f"values {reference['values']}, cuts {reference['cuts']}, advantage error "
            f"{reference['advantage_error']:.1e}, log-prob error "
            f"{reference['uniform_log_prob_error']:.1e}",
            reference["passed"],
        ),
    ]
    at_prototype = all(getattr(config, k) == v for k, v in PROTOTYPE_SETTING.items())
    leading = problems["leading_ones"][METHOD]
    if at_prototype and config.model == "linear":
        parts.append(
            check(
                "(fidelity) σσ′ on LeadingOnes-64 matches the note's numpy prototype "
                f"(5-seed mean >= {PROTOTYPE_LEADING_ONES_MEAN:g}; the note: 63.3 ± 1.3)",
                f"{leading['mean']:.4g} ± {leading['std']:.2g} over {len(leading['per_seed'])} "
                f"seeds, skipped updates per seed {leading['skipped_updates_per_seed']}",
                leading["mean"] >= PROTOTYPE_LEADING_ONES_MEAN,
            )
        )
    rank_vs_z = {
        p: {
            "zscore": problems[p][METHOD]["mean"],
            "rank": problems[p]["eda_sigma_sigmap_rank"]["mean"],
        }
        for p in problems
    }
    reason = f"note's rule: {level}; rank vs z-score (σσ′ means): " + "; ".join(
        f"{p} {v['rank']:.4g} vs {v['zscore']:.4g}" for p, v in rank_vs_z.items()
    )
    failed = [p.claim for p in parts if not p.passed]
    if failed:
        reason += "; failed: " + "; ".join(failed)
    metrics = {
        "note_verdict": level,
        "note_parts": note,
        "issue_near_best": near,
        "issue_catastrophic": failures,
        "rank_vs_zscore": rank_vs_z,
        "reference_checks": reference,
        "runs": runs,
        "nonfinite_steps": sum(a["nonfinite_steps"] for r in problems.values() for a in r.values()),
        "skipped_updates": skipped,
        "seconds": time.perf_counter() - start,
        "config": dataclasses.asdict(config),
    }
    return Result(metrics=metrics, parts=parts, figures=_figure(problems), reason=reason)
