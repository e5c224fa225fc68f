"""Experiment ``hom-pgd``: Hom-PGD⁺, projected gradient through a homeomorphism onto the ball.

Three measurements (Liu, Liang & Chen, ICML 2026) on problems and baselines of ``jaxlab.solvers``:
(a) the 2-D star toy through its exact map (float64), Hom-PGD against projected gradient with an
exact projection (the code's step rule), penalty and augmented Lagrangian beside; (b) QCQPs
n = 2, m = 3 in the authors' setting (10,000 training steps at batch 256, w_pen 10; Hom-PGD with
bisection repair from the latent centre, one start per instance; gaps to a local SLSQP solve from
x = 0, the CPU stand-in for the authors' IPOPT), with SLSQP-projection PGD (one start against one
start) and the best of several starts on each side (a second figure) beside; (c) n = 10 (50 in
``full``), m ∈ {10, 100}: Hom-PGD against multi-start SLSQP, the penalty method and the augmented
Lagrangian (the authors' conventions: x = 0, 10 n rounds of 100 gradient steps at rate 1e-3),
batched over instances where they can be, on gap and time per instance. The measurements are
``jaxlab.solvers``' studies (``compare_star_methods``, ``compare_qcqp_methods``, ...).
"""

from __future__ import annotations

import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from matplotlib.figure import Figure

from jaxlab import solvers
from jaxlab._src.experiments import ExperimentConfig, Progress, Result, check, register
from jaxlab.nn import sample_latents

__all__ = ["HomPGDConfig", "run"]

CLAIM = (
    "Liu, Liang & Chen (ICML 2026): projected gradient in the latent ball of a (learned) "
    "homeomorphism onto a non-convex ball-homeomorphic set (Hom-PGD+) keeps iterates feasible at "
    "one VJP per step, lands within a few percent of a local solver on non-convex QCQPs and is "
    "faster than solver-based and Lagrangian baselines. Checks: star toy (exact map) zero "
    "violation, global optimum from >= 30% of starts, faster than exact-projection PGD; QCQPs "
    "n=2, m=3 in the authors' setting: >= 95% feasible; at every QCQP size the gap split in two "
    "(issue 41): coverage (best point reachable through the learned map) within 5% of the best "
    "SLSQP reference, unresolved while it still falls between half and full training budget by "
    "more than its margin to the gate, and optimizer (Hom-PGD's end point against that reachable "
    "point) within 1%; a part whose 95% interval over instances contains its gate, or a miss at "
    "a size trained below the authors' budget, is unresolved; n=10, m in {10, 100}: less time "
    "per instance than every baseline that reaches a median end-to-end gap <= 5%."
)

# Verdict thresholds (the note's and the rules) and the protocol's fixed numbers.
STAR_SUCCESS = 0.0312  # "reached the global optimum": f within 1.6% of f* = 0.0307132
STAR_GLOBAL_FRACTION = 0.30  # share of starts that must reach it (four boundary basins)
ZERO_VIOLATION = 1e-10  # "zero" in float64 with the exact map (rounding of Φ only)
FEASIBILITY_TOL = 1e-5  # a QCQP end point is feasible at this residual (the code's tolerance)
FEASIBLE_FRACTION = 0.95  # share of QCQP test instances that must end feasible
MEDIAN_GAP = 0.05  # median relative gap to the local reference (the paper's tables: 1-5%)
# Issue 41's split of that gap. Coverage (the best point reachable through the learned map
# against the best reference) gates at the note's 5%; the optimizer part (Hom-PGD's end point
# against that reachable point) at 1%: the latent descent itself should lose next to nothing.
COVERAGE_GAP = MEDIAN_GAP
OPTIMIZER_GAP = 0.01
REACH_REFINE = 8  # Hom-PGD refinements of the best feasible latent samples (reachable value)
BOOTSTRAP_RESAMPLES = 2000  # for the 95% interval of each median over instances
GOAL_SPEEDUP = 5.0  # the goal on the star toy (reported): >= 5x faster than exact PGD
STOP_TOL = 1e-5  # feasibility tolerance; the reference PGD's |Δf| stop (Hom-PGD runs every step)
# The authors' training (scripts/inn_pgd/_configs.py, run_qcqp_inn_toy.py): 10,000 steps, batch
# 256 for the 2-D toy and 64 for the sweep, width 64, w_pen 10.
AUTHORS_STEPS = 10_000
AUTHORS_BATCH = {2: 256}  # n -> batch (64 above n = 2)
AUTHORS_WIDTH = 64
AUTHORS_PENALTY = 10.0
# A size trained below the authors' budget did not run the paper's setting, and every quality
# part (feasibility, coverage, optimizer) is measured on its map: the optimizer part too, against
# the best point *that* map reaches through *its* latent landscape (12.7% median at 500 of 10,000
# steps of n = 10, m = 100, 0.00% at 10,000 steps of n = 10, m = 10). A fair test uses the
# authors' budget, so such a size can pass a quality part but a miss there is `unresolved`,
# never `fail`: the budget, not the method, may have decided it.
UNDER_BUDGET_CAN_FAIL = False


@dataclasses.dataclass(frozen=True)
class HomPGDConfig(ExperimentConfig):
    """Sizes of the ``hom-pgd`` experiment.

    Attributes:
      star_starts, star_maxiter, star_angles, baseline_outer: (a)'s seeded starts, iteration cap,
        exact projection's angular grid, and rounds of its penalty / augmented Lagrangian.
      timing_repeats: repeats of every timing (the median is kept).
      qcqp_size, qcqp_seed, test_instances: (b)'s (n, m), test seed and instance count.
      train_steps, batch_size, encoder_hidden: (b)'s training (steps, latents and fresh instances
        per step, QuadMixer width); penalty_weight (w_pen), hidden (MADE width, None: max(n + 1,
        64)) and latent_pool hold for (c) too.
      hom_starts, slsqp_starts: starts of (b)'s second figure (Hom-PGD: the centre and uniform
        latents) and of multi-start SLSQP (a baseline, and that figure's reference).
      exact_pgd_instances, exact_pgd_time_limit_s: (b)'s SLSQP-projection PGD runs (one start
        against one start) and their wall-clock limit (a capped run is flagged).
      eps_samples: latent samples per instance for ε_inn.
      speed_cases: (c)'s (n, m, training steps, QuadMixer width), trained at speed_batch_size,
        tested on speed_instances instances of seed speed_seed.
      baseline_inner, baseline_learning_rate: the QCQP penalty / ALM inner gradient steps.
      reach_samples: dense latent sample per instance for the best value reachable through the
        map (then Hom-PGD from its best feasible points); every size is also trained at half
        its budget (a snapshot of the same run) to see whether coverage is still falling.
    """

    star_starts: int = 50
    star_maxiter: int = 2000
    star_angles: int = 2048
    baseline_outer: int = 80
    timing_repeats: int = 3
    qcqp_size: tuple[int, int] = (2, 3)
    qcqp_seed: int = 2030
    test_instances: int = 20
    train_steps: int = AUTHORS_STEPS
    batch_size: int = 256
    encoder_hidden: int = AUTHORS_WIDTH
    penalty_weight: float = AUTHORS_PENALTY
    hidden: int | None = None
    latent_pool: int = 10_000
    hom_starts: int = 20
    slsqp_starts: int = 20
    exact_pgd_instances: int = 5
    exact_pgd_time_limit_s: float = 60.0
    eps_samples: int = 2000
    speed_cases: tuple[tuple[int, int, int, int], ...] = ((10, 10, AUTHORS_STEPS, AUTHORS_WIDTH),)
    speed_batch_size: int = 64
    speed_seed: int = 2025
    speed_instances: int = 20
    baseline_inner: int = 100
    baseline_learning_rate: float = 1e-3
    reach_samples: int = 20_000

    @classmethod
    def smoke(cls):
        # (c) repeats (b)'s size, budget and instances: its network and programs are reused.
        star = dict(star_starts=6, star_maxiter=400, star_angles=512, baseline_outer=3)
        training = dict(train_steps=40, batch_size=32, encoder_hidden=8, hidden=8, latent_pool=512)
        starts = dict(test_instances=3, hom_starts=3, slsqp_starts=2, exact_pgd_instances=1)
        speed = dict(speed_cases=((2, 3, 40, 8),), speed_batch_size=32, speed_seed=2030)
        samples = dict(eps_samples=64, baseline_inner=10, reach_samples=256, speed_instances=3)
        return cls(timing_repeats=1, **star, **training, **starts, **speed, **samples)

    @classmethod
    def quick(cls):
        """(a), (b), and (c) at n = 10, m = 10, at the authors' budget. n = 10, m = 100 is full's:
        in 10 CPU-min quick trained it 1% of that budget, so its quality parts could not fail
        (``UNDER_BUDGET_CAN_FAIL``) and only its speed part decided, as n = 10, m = 10's does."""
        return cls()

    @classmethod
    def full(cls):
        cases = tuple((n, m, AUTHORS_STEPS, AUTHORS_WIDTH) for n in (10, 50) for m in (10, 100))
        return cls(star_starts=200, speed_cases=cases, speed_instances=50)


# --------------------------------------------------------------------------------------------
# (a) The star toy.


def _run_star(config: HomPGDConfig, rng_key, progress: Progress) -> tuple[dict, dict]:
    with jax.enable_x64(True):  # z₀ ~ N(0, I), mapped into the disk by Π_𝔹 in the study
        z0s = jax.random.normal(rng_key, (config.star_starts, 2), jnp.float64)
    out = solvers.compare_star_methods(
        z0s,
        maxiter=config.star_maxiter,
        num_angles=config.star_angles,
        outer=config.baseline_outer,
        timing_repeats=config.timing_repeats,
        progress=progress,
    )
    summary = out.summary(STAR_SUCCESS, ZERO_VIOLATION)
    best = int(np.argmin(out.values["hom_pgd"]))
    summary["hom_pgd"]["best_x"] = out.end_points["hom_pgd"][best].tolist()
    summary["compile_time_s"] = out.compile_time_s
    hom_time, pgd_time = (summary[k]["median_time_per_run_s"] for k in ("hom_pgd", "exact_pgd"))
    summary["speedup_vs_exact_pgd"] = pgd_time / hom_time
    summary["starts_z0"] = out.latent_starts.tolist()
    return summary, {
        "start": out.starts,
        **{k: out.end_points[k] for k in ("hom_pgd", "exact_pgd")},
    }


def _star_figure(summary, points) -> Figure:
    fig = Figure(figsize=(11, 4.8))
    axes = fig.subplots(1, 2)
    theta = np.linspace(0, 2 * np.pi, 800)
    boundary = np.asarray(solvers.star_boundary(jnp.asarray(theta)))
    ax = axes[0]
    ax.fill(boundary[:, 0], boundary[:, 1], color="lightblue", alpha=0.6, label="K (star)")
    gx, gy = np.meshgrid(np.linspace(-1.8, 1.8, 200), np.linspace(-1.8, 1.8, 200))
    ax.contour(gx, gy, 0.3 * (gx - 1) ** 2 + 0.7 * (gy - 1) ** 2, 15, colors="gray", linewidths=0.5)
    ax.plot(*points["start"].T, "ko", ms=3, label="starts Φ(z₀)")
    ax.plot(*points["hom_pgd"].T, "C3x", ms=8, label="Hom-PGD ends")
    ax.plot(*points["exact_pgd"].T, "C0+", ms=10, label="exact-projection PGD ends")
    ax.plot(*solvers.STAR_OPTIMUM, "k*", ms=12, label="global optimum")
    ax.set(aspect="equal", title="star toy: where each start ends (x-space)")
    ax.legend(loc="lower left", fontsize=8)
    ax = axes[1]
    labels = {"hom_pgd": "Hom-PGD", "exact_pgd": "exact PGD", "penalty": "penalty", "alm": "ALM"}
    ax.boxplot([np.maximum(np.array(summary[k]["values"]), 1e-3) for k in labels])
    ax.set_xticks(range(1, len(labels) + 1), list(labels.values()))
    ax.axhline(solvers.STAR_OPTIMUM_VALUE, color="k", ls=":", label="f*")
    ax.set(yscale="log", ylabel="final f", title="final objective over starts")
    ax.legend()
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------------------------
# (b) and (c): one network per QCQP size, Hom-PGD from the centre against the baselines.


def _train(case, config: HomPGDConfig, rng_key, progress, nets: dict):
    """The network of ``case = (n, m, steps, batch, width)``, trained once per case."""
    if case not in nets:
        n, m, steps, batch, width = case
        start = time.perf_counter()
        options = dict(
            num_steps=steps, batch_size=batch, encoder_hidden=width, hidden=config.hidden
        )
        options.update(penalty_weight=config.penalty_weight, latent_pool=config.latent_pool)
        half = (steps // 2,) if steps >= 2 else ()  # a snapshot at half the budget
        trained = solvers.train_qcqp_homeomorphism(
            rng_key, n, m, progress=progress, snapshot_steps=half, **options
        )
        nets[case] = trained, time.perf_counter() - start
    return nets[case]


def _programs(model, programs: dict):
    """Per network architecture (the weights are an argument): the solver (the studies compile
    its runs once per solver) and ε_inn per instance."""
    graphdef = nnx.split(model, nnx.Param, ...)[0]
    if graphdef not in programs:
        solver = solvers.qcqp_hom_pgd(model)
        outside = jax.jit(jax.vmap(solver.outside_fraction, in_axes=(None, None, 0)))
        programs[graphdef] = solver, outside
    return programs[graphdef]


def _run_size(case, seed, count, config, rng_key, progress, nets, programs) -> dict:
    """One (n, m) size: Hom-PGD from the latent centre (one start per instance, batched over
    ``count`` instances) against the local SLSQP solve from x = 0 (the gaps' reference),
    multi-start SLSQP, and the penalty and augmented-Lagrangian baselines."""
    (n, m, steps, batch, width), label = case, f"QCQP n={case[0]} m={case[1]}"
    train_key, eps_key = jax.random.split(rng_key)
    trained, train_s = _train(case, config, train_key, progress, nets)
    # What qcqp_hom_pgd's solver takes: the network's (params, rest).
    model, weights = trained.model, nnx.split(trained.model, nnx.Param, ...)[1:]
    solver, outside = _programs(model, programs)
    instances = solvers.sample_qcqp_batch(jax.random.key(seed), n, m, count)
    options = dict(slsqp_starts=config.slsqp_starts, timing_repeats=config.timing_repeats)
    options.update(baseline_inner=config.baseline_inner, progress=progress, label=label)
    options["baseline_learning_rate"] = config.baseline_learning_rate
    compared = solvers.compare_qcqp_methods(solver, weights, instances, **options)
    methods, reference, states = compared["methods"], compared["reference"], compared["states"]
    hom, local_time = methods["hom_pgd"], compared["local_time_per_instance_s"]
    eps = outside(sample_latents(eps_key, config.eps_samples, n), weights, instances)
    # Issue 41's split, at the full budget and (coverage only) at half of it: a snapshot of the
    # same run (one per run), to see whether coverage is still falling.
    half = list(trained.snapshots.items())[:1]
    ends = (states.value, states.violation, reference, compared["multistart_values"], instances)
    other = {"half": half[0][1]} if half else {}
    options = dict(num_refine=REACH_REFINE, maxiter=2 * solver.maxiter, other_models=other)
    options["resamples"] = BOOTSTRAP_RESAMPLES
    latents = sample_latents(eps_key, config.reach_samples, n)
    split = solvers.qcqp_gap_split(solver, model, *ends, latents, **options)
    history, w_pen = trained.history, config.penalty_weight
    authors = (AUTHORS_STEPS, AUTHORS_BATCH.get(n, 64), AUTHORS_WIDTH, AUTHORS_PENALTY)
    out = dict(n=n, m=m, train_steps=steps, batch_size=batch, encoder_hidden=width)
    out.update(penalty_weight=w_pen, authors_budget=(steps, batch, width, w_pen) == authors)
    out.update(train_time_s=train_s, final_train_loss=float(np.mean(history["loss"][-100:])))
    out["train_violation_fraction"] = float(np.mean(history["violation_fraction"][-100:]))
    out["loss_history"] = history["loss"][:: max(1, steps // 200)].tolist()
    out.update(test_instances=count, slsqp_starts=config.slsqp_starts, eps_inn=float(np.mean(eps)))
    out.update(slsqp_values=reference.tolist(), reference_failures=int(np.isnan(reference).sum()))
    out["violations"] = np.asarray(states.violation, float).tolist()
    out["iterations"] = np.asarray(states.iter_num).tolist()
    out["local_slsqp_time_per_instance_s"] = local_time
    out["speedup_vs_local_slsqp"] = local_time / hom["time_per_instance_s"]
    out.update(methods=methods, **split, half_budget_steps=half[0][0] if half else None)
    return {**out, "_model": model, "_weights": weights, "_instances": instances}


def _run_qcqp(config: HomPGDConfig, rng_key, progress, nets, programs) -> dict:
    """(b): the authors' setting at (2, 3), plus one start against one start for
    SLSQP-projection PGD and, for the second figure, the best of several Hom-PGD starts."""
    (n, m), count = config.qcqp_size, config.test_instances
    size_key, start_key = jax.random.split(rng_key)
    case = (n, m, config.train_steps, config.batch_size, config.encoder_hidden)
    res = _run_size(case, config.qcqp_seed, count, config, size_key, progress, nets, programs)
    hom, multi = res["methods"]["hom_pgd"], res["methods"]["slsqp_multistart"]
    solver = _programs(res["_model"], programs)[0]
    references = (res["slsqp_values"], multi["values"])
    z0s = solvers.latent_starts(start_key, config.hom_starts, n)
    options = dict(exact_pgd_instances=config.exact_pgd_instances, tol=STOP_TOL, progress=progress)
    options["time_limit_s"] = config.exact_pgd_time_limit_s
    args = (solver, res["_weights"], res["_instances"], *references, z0s)
    starts = solvers.compare_qcqp_starts(*args, **options)
    speedup = starts["exact_pgd_time_per_instance_s"] / hom["time_per_instance_s"]
    return {**res, **starts, "speedup_vs_exact_pgd": speedup, "hom_starts": config.hom_starts}


# --------------------------------------------------------------------------------------------
# Figures of (b) and (c).


def _qcqp_figures(res) -> tuple[Figure, Figure]:
    """(b)'s training and single-start gaps, and the second figure (best of several starts)."""
    hom, figures = res["methods"]["hom_pgd"], (Figure(figsize=(10, 4.5)), Figure(figsize=(8, 4.5)))
    loss, bars = figures[0].subplots(1, 2)
    loss.plot(np.linspace(0, res["train_steps"], len(res["loss_history"])), res["loss_history"])
    loss.set(xlabel="training step", ylabel="homeomorphism loss", yscale="symlog")
    loss.set_title(f"INN training (n={res['n']}, m={res['m']}, w_pen {res['penalty_weight']:g})")
    colors = ["C2" if v <= FEASIBILITY_TOL else "C3" for v in res["violations"]]
    bars.bar(range(len(hom["gaps"])), hom["gaps"], color=colors)
    bars.set(xlabel="test instance (red: infeasible end)", ylabel="gap to local SLSQP from x = 0")
    bars.set_title(f"one start: median gap {hom['median_gap']:.1%}, ε_inn {res['eps_inn']:.1%}")
    ax, index, width = figures[1].subplots(), np.arange(len(hom["gaps"])), 0.4
    ax.bar(index - width / 2, hom["gaps"], width, label="one start vs local SLSQP from x = 0")
    label = f"best of {res['hom_starts']} starts vs best of {res['slsqp_starts']} SLSQP starts"
    ax.bar(index + width / 2, res["multistart_gaps"], width, label=label)
    ax.set(xlabel="test instance", ylabel="relative gap")
    ax.set_title(
        f"QCQP n={res['n']} m={res['m']}: median {hom['median_gap']:.1%} (one start), "
        f"{res['multistart_median_gap']:.1%} (multi-start)"
    )
    for panel in (bars, ax):
        panel.axhline(MEDIAN_GAP, color="k", ls=":", label="5%")
        panel.set_yscale("symlog", linthresh=0.1)  # one local solve can be far worse than Hom-PGD
        panel.legend(fontsize=8)
    for fig in figures:
        fig.tight_layout()
    return figures


_LABELS = dict(hom_pgd="Hom-PGD", slsqp_multistart="multistart SLSQP", penalty="penalty", alm="ALM")


def _speed_figure(speed) -> Figure:
    fig = Figure(figsize=(5 * len(speed), 4.5))
    for ax, res in zip(np.atleast_1d(fig.subplots(1, len(speed))), speed, strict=True):
        for i, (name, row) in enumerate(res["methods"].items()):
            point = row["time_per_instance_s"], row["median_gap"]
            ax.scatter(*point, s=120, marker="*o"[i > 0], color=f"C{i}", label=_LABELS[name])
        local = res["local_slsqp_time_per_instance_s"]
        ax.scatter(local, 0.0, s=120, marker="+", color="k", label="local SLSQP (reference)")
        ax.axhline(MEDIAN_GAP, color="k", ls=":")
        ax.set_xscale("log")
        ax.minorticks_off()  # one decade or less: minor-tick labels would overlap
        ax.set(xlabel="time per instance (s)", ylabel="median gap to local SLSQP from x = 0")
        ax.set_title(f"n={res['n']} m={res['m']} ({res['train_steps']} training steps)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------------------------
# The verdict and the experiment.


def _star_parts(config, star) -> list:
    hom, pgd = star["hom_pgd"], star["exact_pgd"]
    speedup = star["speedup_vs_exact_pgd"]
    goal = "met" if speedup >= GOAL_SPEEDUP else "not met"
    return [
        check(
            "(a) star toy, exact map: Hom-PGD iterates have zero violation",
            f"max violation {hom['max_violation']:.1e} over {config.star_starts} starts "
            "(float64; zero = below 1e-10)",
            hom["max_violation"] <= ZERO_VIOLATION,
        ),
        check(
            "(a) Hom-PGD reaches the global optimum (f <= 0.0312) from >= 30% of starts",
            f"{hom['fraction_global']:.0%} of starts (best f {hom['best_f']:.6f}; exact PGD "
            f"{pgd['fraction_global']:.0%}, penalty {star['penalty']['fraction_global']:.0%}, "
            f"ALM {star['alm']['fraction_global']:.0%})",
            hom["fraction_global"] >= STAR_GLOBAL_FRACTION,
        ),
        check(
            "(a) Hom-PGD time per run is below exact-projection PGD",
            f"median {hom['median_time_per_run_s'] * 1e3:.3f} ms vs "
            f"{pgd['median_time_per_run_s'] * 1e3:.3f} ms per run ({speedup:.1f}x faster; "
            f"issue goal >= 5x at equal quality: {goal})",
            hom["median_time_per_run_s"] < pgd["median_time_per_run_s"],
        ),
    ]


def _budget(res) -> str:
    below = "BELOW the authors' budget: a miss is unresolved"
    kept = "the authors' budget" if res["authors_budget"] else below
    return (
        f"{res['train_steps']} training steps at batch {res['batch_size']}, width "
        f"{res['encoder_hidden']}, w_pen {res['penalty_weight']:g} ({kept})"
    )


def _coverage_still_falling(res) -> bool:
    """The coverage rule's budget test: between half and full budget the median coverage gap
    fell by more than what separates it from the gate, so more training may well cross it."""
    if "coverage_half" not in res:
        return True
    drop = res["coverage_half"][0] - res["coverage"][0]
    return drop > res["coverage"][0] - COVERAGE_GAP


def _gate(median, low, high, gate, authors_budget, still_falling=False) -> tuple[bool, bool]:
    """``(passed, resolved)`` of a median-over-instances part against its gate (<= passes).

    One rule for every quality part: unresolved when the 95% interval of the median contains
    the gate; a miss is also unresolved when the budget may have decided it (coverage still
    falling by more than its margin to the gate, or a size trained below the authors' budget,
    see ``UNDER_BUDGET_CAN_FAIL``).
    """
    passed = bool(median <= gate)
    resolved = not (low <= gate < high)
    if not passed and (still_falling or not (authors_budget or UNDER_BUDGET_CAN_FAIL)):
        resolved = False
    return passed, resolved


def _split_parts(label, res, extra: str = ""):
    """The gap split into its two parts (issue 41): coverage of the learned map, then the
    latent optimizer against the best point that map reaches."""
    hom = res["methods"]["hom_pgd"]
    coverage, low, high = res["coverage"]
    optimizer, o_low, o_high = res["optimizer"]
    half = res.get("coverage_half", (np.nan,) * 3)[0]
    falling = coverage > COVERAGE_GAP and _coverage_still_falling(res)
    budget = res["authors_budget"]
    coverage_ok, coverage_resolved = _gate(coverage, low, high, COVERAGE_GAP, budget, falling)
    optimizer_ok, optimizer_resolved = _gate(optimizer, o_low, o_high, OPTIMIZER_GAP, budget)
    end_to_end = (
        f"end to end: median {hom['median_gap']:.1%} vs a local SLSQP solve from x = 0, "
        f"{res['gap_vs_multistart']:.1%} vs the best of {res['slsqp_starts']} SLSQP starts; "
        f"{hom['feasible_fraction']:.0%} feasible, ε_inn {res['eps_inn']:.1%}, INN round-trip "
        f"error <= {res['inverse_error_max']:.1e}; {_budget(res)}"
    )
    return [
        check(
            f"{label}: coverage: the best point reachable through the learned map is within "
            f"{COVERAGE_GAP:.0%} of the best reference (median)",
            f"median coverage gap {coverage:.1%} [95% interval {low:.1%}, {high:.1%}] at "
            f"{res['train_steps']} steps, {half:.1%} at {res['half_budget_steps']} steps"
            + ("; still falling by more than the margin to the gate" if falling else "")
            + f"; {end_to_end}"
            + extra,
            coverage_ok,
            resolved=coverage_resolved,
        ),
        check(
            f"{label}: optimizer: Hom-PGD from the centre ends within {OPTIMIZER_GAP:.0%} of the "
            "best point its map reaches (median)",
            f"median optimizer gap {optimizer:.2%} [95% interval {o_low:.2%}, {o_high:.2%}]",
            optimizer_ok,
            resolved=optimizer_resolved,
        ),
    ]


def _qcqp_parts(res) -> list:
    label, hom = f"(b) QCQP n={res['n']} m={res['m']}, authors' setting", res["methods"]["hom_pgd"]
    feasible = hom["feasible_fraction"] >= FEASIBLE_FRACTION
    extra = (
        f"; second figure: best of {res['hom_starts']} starts vs best of {res['slsqp_starts']} "
        f"SLSQP starts {res['multistart_median_gap']:.1%}; one start against one start: Hom-PGD "
        f"{hom['time_per_instance_s'] * 1e3:.2f} ms vs SLSQP-projection PGD "
        f"{res['exact_pgd_time_per_instance_s'] * 1e3:.1f} ms per instance "
        f"({res['speedup_vs_exact_pgd']:.0f}x; its gap {res['exact_pgd_median_gap']:.1%})"
    )
    return [
        check(
            f"{label}: >= 95% of instances end feasible (violation <= 1e-5), one start each",
            f"{hom['feasible_fraction']:.0%} of {res['test_instances']} instances (ε_inn = "
            f"{res['eps_inn']:.1%} of Φ(latent samples) outside K; {_budget(res)})",
            feasible,
            resolved=feasible or res["authors_budget"] or UNDER_BUDGET_CAN_FAIL,
        ),
        *_split_parts(label, res, extra),
    ]


def _speed_parts(res) -> list:
    label, methods = f"(c) QCQP n={res['n']} m={res['m']}", res["methods"]
    hom = methods["hom_pgd"]
    baselines = {k: r for k, r in methods.items() if k != "hom_pgd"}
    qualified = [k for k, r in baselines.items() if r["median_gap"] <= MEDIAN_GAP]
    rows = "; ".join(
        f"{_LABELS[k]} gap {r['median_gap']:.1%}, {r['feasible_fraction']:.0%} feasible, "
        f"{r['time_per_instance_s'] * 1e3:.2f} ms ({r['speedup']:.1f}x)"
        for k, r in baselines.items()
    )
    return [
        *_split_parts(label, res),
        check(
            f"{label}: Hom-PGD's time per instance is below every baseline that reaches a "
            "median gap <= 5%",
            f"Hom-PGD {hom['time_per_instance_s'] * 1e3:.2f} ms per instance (one start, batched "
            f"over {res['test_instances']} instances); {rows} (speed-up = baseline time / "
            f"Hom-PGD's); reaching 5%: {', '.join(_LABELS[k] for k in qualified) or 'none'}; "
            f"local SLSQP from x = 0 (the reference) "
            f"{res['local_slsqp_time_per_instance_s'] * 1e3:.2f} ms "
            f"({res['speedup_vs_local_slsqp']:.1f}x)",
            all(
                hom["time_per_instance_s"] < baselines[k]["time_per_instance_s"] for k in qualified
            ),
            resolved=bool(qualified),
        ),
    ]


@register("hom-pgd", config=HomPGDConfig, claim=CLAIM)
def run(config: HomPGDConfig, rng_key: jax.Array, progress: Progress) -> Result:
    """Runs (a) the star toy, (b) the authors' QCQP setting and (c) the speed comparison."""
    star_key, qcqp_key, speed_key = jax.random.split(rng_key, 3)
    star, points = _run_star(config, star_key, progress)
    nets, programs = {}, {}  # one training per (size, budget); one compile per architecture
    qcqp = _run_qcqp(config, qcqp_key, progress, nets, programs)
    speed = []
    for i, (n, m, steps, width) in enumerate(config.speed_cases):
        case, key = (n, m, steps, config.speed_batch_size, width), jax.random.fold_in(speed_key, i)
        sample = (config.speed_seed, config.speed_instances)  # the test instances' seed, count
        speed.append(_run_size(case, *sample, config, key, progress, nets, programs))
    figures = {
        "star": _star_figure(star, points),
        **dict(zip(("qcqp", "qcqp_multistart"), _qcqp_figures(qcqp), strict=True)),
        "qcqp_speed": _speed_figure([qcqp, *speed]),
    }
    parts = _star_parts(config, star) + _qcqp_parts(qcqp)
    for res in speed:
        parts += _speed_parts(res)
    metrics = {
        "star": star,
        "qcqp": {k: v for k, v in qcqp.items() if not k.startswith("_")},
        "speed": [{k: v for k, v in r.items() if not k.startswith("_")} for r in speed],
        "goal_speedup_star": star["speedup_vs_exact_pgd"],
        "goal_speedup_star_met": bool(star["speedup_vs_exact_pgd"] >= GOAL_SPEEDUP),
        "speedups": {
            f"n={r['n']} m={r['m']}": {k: v["speedup"] for k, v in r["methods"].items()}
            for r in speed
        },
    }
    return Result(metrics=metrics, parts=parts, figures=figures)
