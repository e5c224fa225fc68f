"""Experiment ``error-feedback``: the tight theory of EF and EF21 (Berg Thomsen et al., ICML 2026).

Three measurements, each a part of the verdict:

1. **Tightness.** On the worst-case instances (``f_i = (lambda_i/2)||x||^2`` in 2-D with the
   rotation compressor) the largest squared spectral radius of the one-step matrix at the optimal
   step ``eta*`` equals the closed-form rate ``rho*`` for EF and EF21 and ``n = 1, 2, 4`` workers,
   and a scan of the step shows ``eta*`` minimises the worst case.
2. **The optimal step pays off.** On the note's distributed least squares (8 workers, shared
   minimiser, top-5 of 50) EF21 and EF at ``eta*`` need fewer iterations to reach relative
   suboptimality 1e-10 than at Richtarik et al.'s older step ``gamma_R``.
3. **Feedback is needed.** With noisy targets (no shared minimiser) naive compressed gradient
   descent stalls above the target while EF21 reaches it.

The full profile adds logistic regression on scikit-learn's breast-cancer data split by label
across 8 workers (reported, not part of the verdict; the smoke profile runs it at tiny size):

- strongly convex, logistic loss + ``(mu/2)||x||^2`` with per-worker ``L_i`` from the data: EF21
  and EF at ``eta*``, EF21 at ``gamma_R``, uncompressed GD at ``2/(L+mu)`` and naive compressed GD
  at its step, all with top-k, to a target relative suboptimality against a float64 reference
  minimiser (scipy's L-BFGS polished by Newton steps), in iterations and bits per worker;
- nonconvex, with the regulariser ``sum x^2/(1+x^2)``: EF21 at its nonconvex step with top-k,
  scaled-sign and natural compression, to a target ``||grad f||^2`` relative to its value at 0.

Everything runs in float64 (``jax.enable_x64`` scoped to the run): a rate of 0.999 is below the
resolution of float32 ratios, and 1e-10 relative suboptimality is below float32 precision.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np
import optax
from matplotlib.figure import Figure

from jaxlab import optim
from jaxlab._src.experiments import ExperimentConfig, Progress, Result, check, register

__all__ = ["ErrorFeedbackConfig", "run"]

AXIS = "workers"
# Part 1: |worst - rho*| allowed over the rotation instances. Where the worst case is on the
# search's grid the gap is float64 eigenvalue rounding (~1e-15); 1e-3 leaves room for the random
# search of n > 1 workers to fall short of the supremum.
TIGHTNESS_TOLERANCE = 1e-3
# Part 1: the step-size scan's argmin must lie within 5% of eta* (the quick scan's spacing, 0.01
# near eta* ~ 0.31, is 3%).
SCAN_RELATIVE_DISTANCE = 0.05
# Part 2: eta* must need at least 1.25x fewer iterations than gamma_R (the note measured 1.40,
# the ratio eta*/gamma_R of this instance; 1.25 is the margin that still shows the gain).
MIN_ITERATION_RATIO = 1.25
# Plot floor of the relative suboptimality: float64 rounding of f(x) - f* relative to f(0) - f*.
_FLOOR = 1e-16
CLAIM = (
    "Berg Thomsen, Taylor, Dieuleveut (ICML 2026): EF and EF21 with an alpha-contractive "
    "compressor converge at the tight rate rho* = s + (1-s)/2 q^2 [1 - s + sqrt((1+s)^2 + "
    "16 s kappa/(kappa-1)^2)] (s = sqrt(1-alpha), q = (kappa-1)/(kappa+1)) with the optimal "
    "step eta* = 2/mean(L_i+mu_i) (1-s)/(1+s), attained by rotation-compressor quadratics for "
    "any number of workers; eta* beats the older EF21 step of Richtarik et al. (2021), and error "
    "feedback is what makes compressed gradient descent reach high accuracy on heterogeneous data."
)


@dataclasses.dataclass(frozen=True)
class ErrorFeedbackConfig(ExperimentConfig):
    """Sizes of the ``error-feedback`` experiment (``smoke``, ``quick``, ``full``).

    Attributes:
      epsilons: compressor distortions ``epsilon = 1 - alpha`` of the tightness table.
      condition_numbers: ``kappa = L / mu`` of the tightness table.
      workers: numbers of workers of the tightness table.
      grid_curvatures: curvatures per worker in the symmetric ``(lambda, theta)`` grid.
      grid_angles: angles in that grid (``linspace(0, 2 pi)``, so pi is on it when odd).
      random_points: random per-worker ``(lambda_i, theta_i)`` points for ``n > 1``.
      scan_steps: ``(start, stop, step)`` of the step-size scan (EF21, eps 0.5, kappa 10).
      scan_angles: angles per curvature endpoint in the scan.
      ls_workers, ls_dim, ls_rows, ls_keep: the least-squares problem and the top-k size.
      ls_tolerance: target relative suboptimality on the shared-minimiser problem.
      ls_max_steps: step budget per method there.
      het_noise: standard deviation of the target noise of the heterogeneous problem.
      het_tolerance: its target relative suboptimality.
      het_max_steps: step budget per method there.
      chunk: steps per compiled ``lax.scan`` chunk (the progress bar advances per chunk).
      logistic_steps: step budget per logistic-regression run (0 skips them).
      logistic_regularization: weight of ``sum x^2 / (1 + x^2)`` (nonconvex runs).
      logistic_l2: ``mu``, weight of ``(mu/2)||x||^2`` (strongly convex runs).
      logistic_keep: ``k`` of top-k on the 31 logistic coordinates (30 features and a bias).
      logistic_tolerance: target relative suboptimality (strongly convex) and target
        ``||grad f(x)||^2 / ||grad f(0)||^2`` (nonconvex).
    """

    epsilons: tuple[float, ...] = (0.1, 0.5, 0.9)
    condition_numbers: tuple[float, ...] = (10.0, 100.0)
    workers: tuple[int, ...] = (1, 2, 4)
    grid_curvatures: int = 101
    grid_angles: int = 181
    random_points: int = 20_000
    scan_steps: tuple[float, float, float] = (0.2, 0.45, 0.01)
    scan_angles: int = 181
    ls_workers: int = 8
    ls_dim: int = 50
    ls_rows: int = 100
    ls_keep: int = 5
    ls_tolerance: float = 1e-10
    ls_max_steps: int = 12_000
    het_noise: float = 1.0
    het_tolerance: float = 1e-6
    het_max_steps: int = 6_000
    chunk: int = 500
    logistic_steps: int = 0
    logistic_regularization: float = 0.1
    logistic_l2: float = 0.1
    logistic_keep: int = 3
    logistic_tolerance: float = 1e-10

    @classmethod
    def smoke(cls) -> ErrorFeedbackConfig:
        return cls(
            epsilons=(0.5,),
            condition_numbers=(10.0,),
            workers=(1, 2),
            grid_curvatures=5,
            grid_angles=19,
            random_points=200,
            scan_steps=(0.28, 0.34, 0.02),
            scan_angles=19,
            ls_workers=4,
            ls_dim=10,
            ls_rows=20,
            ls_keep=2,
            ls_max_steps=200,
            het_max_steps=200,
            chunk=100,
            logistic_steps=100,
        )

    @classmethod
    def quick(cls) -> ErrorFeedbackConfig:
        return cls()

    @classmethod
    def full(cls) -> ErrorFeedbackConfig:
        return cls(
            random_points=100_000, ls_max_steps=20_000, het_max_steps=20_000, logistic_steps=20_000
        )


# --------------------------------------------------------------------------------------------
# (a) Tightness on the rotation instances (the search: jaxlab.optim.worst_case_rate).


def _tightness(config: ErrorFeedbackConfig, rng: np.random.Generator, progress: Progress):
    cases = [
        (e, k, n) for e in config.epsilons for k in config.condition_numbers for n in config.workers
    ]
    search = {
        "grid_curvatures": config.grid_curvatures,
        "grid_angles": config.grid_angles,
        "random_points": config.random_points,
    }
    rows = []
    for eps, kappa, n in progress.track(cases, total=len(cases), description="worst cases"):
        alpha = 1.0 - eps
        small, big = np.full(n, 1.0 / kappa), np.ones(n)
        eta = float(optim.ef_optimal_step_size(1.0, 1.0 / kappa, alpha))
        rho = float(optim.ef_tight_rate(kappa, alpha))
        row = {"epsilon": eps, "kappa": kappa, "workers": n, "eta_star": eta, "rho_star": rho}
        for method in ("ef", "ef21"):
            worst, lam, theta = optim.worst_case_rate(method, small, big, eta, alpha, rng, **search)
            row[f"worst_{method}"] = worst
            row[f"gap_{method}"] = worst - rho
            row[f"argmax_{method}"] = {"curvature": lam.tolist(), "theta": theta.tolist()}
        rows.append(row)

    # The step-size scan of the note (check 2): EF21, eps = 0.5, kappa = 10.
    start, stop, step = config.scan_steps
    etas = np.round(np.arange(start, stop + step / 2, step), 10)
    alpha, small = 0.5, 0.1
    lam, ang = np.meshgrid(
        [small, 1.0], np.linspace(0, 2 * np.pi, config.scan_angles), indexing="ij"
    )
    lam, ang = lam.reshape(-1, 1), ang.reshape(-1, 1)
    scan = [
        float(optim.rotation_instance_rates("ef21", lam, ang, eta, alpha).max())
        for eta in progress.track(etas, total=len(etas), description="step-size scan")
    ]
    eta_star = float(optim.ef_optimal_step_size(1.0, small, alpha))
    argmin = float(etas[int(np.argmin(scan))])
    scan_metrics = {
        "epsilon": 0.5,
        "kappa": 10.0,
        "etas": etas.tolist(),
        "worst_rate": scan,
        "argmin": argmin,
        "minimum": float(np.min(scan)),
        "eta_star": eta_star,
        "relative_distance": abs(argmin - eta_star) / eta_star,
    }

    # Two heterogeneous workers against the paper's cubic law (note, check 4), reported.
    bigs, smalls = np.array([1.0, 2.0]), np.array([0.1, 0.5])
    eta_h = float(optim.ef_optimal_step_size(bigs, smalls, 0.5))
    cubic = float(optim.ef21_two_worker_rate(bigs, smalls, 0.5))
    het = {
        "smoothness": bigs.tolist(),
        "strong_convexity": smalls.tolist(),
        "epsilon": 0.5,
        "eta_star": eta_h,
        "cubic": cubic,
    }
    for method in ("ef", "ef21"):
        worst, _, _ = optim.worst_case_rate(method, smalls, bigs, eta_h, 0.5, rng, **search)
        het[f"worst_{method}"] = worst
        het[f"cubic_minus_worst_{method}"] = cubic - worst
    return rows, scan_metrics, het


# --------------------------------------------------------------------------------------------
# (b, c) Compressed methods on the distributed problems (jaxlab.optim.run_distributed).


@dataclasses.dataclass(frozen=True)
class _Transform:
    """``step_size -> transform``, hashable by value: runs of one kind share a compiled program."""

    kind: str  # "ef", "ef21", "gd" or "cgd"
    compressor: optim.Compressor

    def __call__(self, step_size):
        if self.kind == "ef":
            return optim.error_feedback(step_size, self.compressor, axis_name=AXIS)
        if self.kind == "ef21":
            return optim.error_feedback_21(step_size, self.compressor, axis_name=AXIS)
        if self.kind == "gd":
            return optax.sgd(step_size)
        return optim.compressed_gradient_descent(step_size, self.compressor, axis_name=AXIS)


def _run_method(
    label: str,
    transform: _Transform,
    step_size: float,
    problem: optim.DistributedProblem,
    tolerance: float,
    max_steps: int,
    chunk: int,
    progress: Progress,
    *,
    measure: str = "suboptimality",
) -> dict[str, Any]:
    """One run to ``measure <= tolerance``, reported with thinned traces.

    GD sees the averaged gradient and sends dense messages; CGD sends one compressed message per
    step; EF and EF21 count their bits in their state.
    """
    dim = problem.features.shape[2]
    bits_per_step = {"gd": optim.identity().bits(dim), "cgd": transform.compressor.bits(dim)}
    run = optim.run_distributed(
        problem,
        transform,
        step_size,
        tolerance=tolerance,
        max_steps=max_steps,
        chunk=chunk,
        measure=measure,
        average_gradient=transform.kind == "gd",
        bits_per_step=bits_per_step.get(transform.kind),
        axis_name=AXIS,
        track=lambda chunks: progress.track(chunks, total=len(chunks), description=label),
    )
    return {
        "label": label,
        "reached": run.reached,
        "iterations": run.iterations,
        "bits_per_worker": run.bits_per_worker,
        "steps_run": int(run.values.size),
        f"final_{measure}": float(run.values[-1]),
        f"best_{measure}": float(np.nanmin(run.values)),
        f"trace_{measure}": _thin(run.values),
        "trace_bits": _thin(run.bits),
    }


def _thin(values: np.ndarray, keep: int = 400) -> list[float]:
    """Every k-th value of a trace (and the last), so the JSON stays small."""
    stride = max(1, values.size // keep)
    idx = np.unique(np.concatenate([np.arange(0, values.size, stride), [values.size - 1]]))
    return [[int(i + 1), float(values[i])] for i in idx]


def _comparison_runs(
    problem: optim.DistributedProblem,
    keep: int,
    tolerance: float,
    max_steps: int,
    chunk: int,
    progress: Progress,
    old_step: tuple[str, ...],
):
    """EF21 and EF at eta*, the methods in ``old_step`` at gamma_R, GD and CGD, with top-k."""
    dim = problem.features.shape[2]
    compressor = optim.top_k(keep)
    alpha = compressor.alpha(dim)
    big, small = problem.smoothness, problem.strong_convexity
    eta = float(optim.ef_optimal_step_size(big, small, alpha))
    gamma = float(
        optim.richtarik_ef21_step_size(
            big, small, alpha, global_smoothness=problem.global_smoothness
        )
    )
    eta_cgd = float(optim.cgd_optimal_step_size(big, small, alpha))
    eta_gd = 2.0 / (problem.global_smoothness + problem.global_strong_convexity)
    methods = {
        "ef21_eta_star": ("EF21, eta*", _Transform("ef21", compressor), eta),
        "ef_eta_star": ("EF, eta*", _Transform("ef", compressor), eta),
    }
    if "ef21" in old_step:
        methods["ef21_gamma_r"] = ("EF21, gamma_R", _Transform("ef21", compressor), gamma)
    if "ef" in old_step:
        methods["ef_gamma_r"] = ("EF, gamma_R", _Transform("ef", compressor), gamma)
    methods["gd"] = ("GD, 2/(L+mu)", _Transform("gd", compressor), eta_gd)
    methods["cgd"] = (f"CGD ({compressor.name}), eta_CGD", _Transform("cgd", compressor), eta_cgd)
    runs = {
        key: _run_method(label, tx, step, problem, tolerance, max_steps, chunk, progress)
        for key, (label, tx, step) in methods.items()
    }
    steps = {
        "alpha": alpha,
        "eta_star": eta,
        "gamma_r": gamma,
        "eta_cgd": eta_cgd,
        "eta_gd": eta_gd,
        "eta_star_over_gamma_r": eta / gamma,
    }
    constants = {
        "smoothness": problem.smoothness.tolist(),
        "strong_convexity": problem.strong_convexity.tolist(),
        "global_smoothness": problem.global_smoothness,
        "global_strong_convexity": problem.global_strong_convexity,
    }
    return {"steps": steps, "constants": constants, "tolerance": tolerance, "runs": runs}


# --------------------------------------------------------------------------------------------
# Full profile: logistic regression on heterogeneous workers (breast cancer split by label).


def _logistic(config: ErrorFeedbackConfig, progress: Progress) -> dict[str, Any]:
    features, labels = optim.breast_cancer_workers()
    workers, rows, dim = features.shape
    keep = config.logistic_keep
    out = {"workers": workers, "dim": dim, "rows_per_worker": rows}

    # Strongly convex: f_i = mean log(1 + exp(-b a.x)) + (mu/2)||x||^2, L_i = curv_i + mu.
    mu = config.logistic_l2
    convex = optim.logistic_regression_problem(features, labels, mu)
    budget = (keep, config.logistic_tolerance, config.logistic_steps, config.chunk, progress)
    out["strongly_convex"] = {
        "l2": mu,
        "keep": keep,
        "optimal_value": convex.optimal_value,
        "reference": "scipy L-BFGS-B + 5 Newton steps, float64",
        **_comparison_runs(convex, *budget, old_step=("ef21",)),
    }

    # Nonconvex: regulariser reg sum x^2 / (1 + x^2), second derivative in [-reg/2, 2 reg].
    reg = config.logistic_regularization
    nonconvex = optim.nonconvex_logistic_regression_problem(features, labels, reg)
    big, big_f = nonconvex.smoothness, nonconvex.global_smoothness
    compressors = {
        "top_k": optim.top_k(keep),
        "scaled_sign": optim.scaled_sign(),
        "natural": optim.natural_compression(),
    }
    runs = {}
    for name, comp in compressors.items():
        alpha = comp.alpha(dim)
        gamma = float(
            optim.richtarik_ef21_step_size(
                big, None, alpha, nonconvex=True, global_smoothness=big_f
            )
        )
        runs[name] = {
            "alpha": alpha,
            "step": gamma,
            **_run_method(
                f"EF21 ({name}), gamma_R nonconvex",
                _Transform("ef21", comp),
                gamma,
                nonconvex,
                config.logistic_tolerance,
                config.logistic_steps,
                config.chunk,
                progress,
                measure="grad_sq",
            ),
        }
    out["nonconvex"] = {
        "regularization": reg,
        "smoothness": big.tolist(),
        "global_smoothness": big_f,
        "tolerance": config.logistic_tolerance,
        "runs": runs,
    }
    return out


# --------------------------------------------------------------------------------------------
# Figures.


def _plot_runs(ax, ax2, runs, measure: str, tolerance: float) -> None:
    """Each run's trace of ``measure`` against iterations (``ax``) and bits per worker (``ax2``)."""
    for run in runs.values():
        it, val = np.array(run[f"trace_{measure}"]).T
        _, bits = np.array(run["trace_bits"]).T
        val = np.maximum(val, _FLOOR)  # below ~1e-16 the value is rounding noise
        ax.semilogy(it, val, label=run["label"])
        ax2.loglog(np.maximum(bits, 1.0), val, label=run["label"])
    ylabel = {
        "suboptimality": "relative suboptimality",
        "grad_sq": "||grad f||^2 / ||grad f(0)||^2",
    }
    for a in (ax, ax2):
        a.axhline(tolerance, color="k", lw=0.8, ls=":")
        a.set_ylabel(ylabel[measure])
        # The gradient norm may grow at first; the suboptimality starts at 1.
        a.set_ylim(_FLOOR / 2, 2.0 if measure == "suboptimality" else None)
    ax.set_xlabel("iterations")
    ax2.set_xlabel("bits sent per worker")
    ax.legend(fontsize=8)


def _figures(rows, scan, ls, het, logistic) -> dict[str, Figure]:
    figs = {}
    fig = Figure(figsize=(12, 4.2))
    ax, ax2 = fig.subplots(1, 2)
    labels = [f"e{r['epsilon']:g} k{r['kappa']:g} n{r['workers']}" for r in rows]
    pos = np.arange(len(rows))
    ax.plot(pos, [1 - r["rho_star"] for r in rows], "k_", ms=18, mew=2, label="1 - rho* (theory)")
    ax.plot(pos, [1 - r["worst_ef"] for r in rows], "o", mfc="none", label="1 - worst (EF)")
    ax.plot(pos, [1 - r["worst_ef21"] for r in rows], "x", label="1 - worst (EF21)")
    ax.set_yscale("log")
    ax.set_xticks(pos, labels, rotation=70, fontsize=7)
    ax.set_ylabel("1 - rate")
    ax.set_title("worst case on rotation instances vs tight rate")
    ax.legend(fontsize=8)
    ax2.plot(scan["etas"], scan["worst_rate"], "o-", label="worst case (EF21)")
    ax2.axvline(scan["eta_star"], color="k", ls="--", label="eta*")
    ax2.set_xlabel("step size eta")
    ax2.set_ylabel("worst-case rate")
    ax2.set_title("step-size scan, eps=0.5, kappa=10")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    figs["tightness"] = fig

    for key, res in (("least_squares", ls), ("heterogeneous", het)):
        fig = Figure(figsize=(12, 4.2))
        ax, ax2 = fig.subplots(1, 2)
        _plot_runs(ax, ax2, res["runs"], "suboptimality", res["tolerance"])
        ax.set_title(f"{key.replace('_', ' ')}: suboptimality vs iterations")
        ax2.set_title("vs communication")
        fig.tight_layout()
        figs[key] = fig

    if logistic:
        fig = Figure(figsize=(12, 8.4))
        axes = fig.subplots(2, 2)
        sc, nc = logistic["strongly_convex"], logistic["nonconvex"]
        _plot_runs(*axes[0], sc["runs"], "suboptimality", sc["tolerance"])
        _plot_runs(*axes[1], nc["runs"], "grad_sq", nc["tolerance"])
        axes[0, 0].set_title(
            f"logistic + ({sc['l2']:g}/2)||x||^2, top-{sc['keep']} (breast cancer, "
            f"{logistic['workers']} workers)"
        )
        axes[0, 1].set_title("vs communication")
        axes[1, 0].set_title(f"nonconvex regulariser {nc['regularization']:g} sum x^2/(1+x^2)")
        axes[1, 1].set_title("vs communication")
        fig.tight_layout()
        figs["logistic"] = fig
    return figs


# --------------------------------------------------------------------------------------------


@register("error-feedback", config=ErrorFeedbackConfig, claim=CLAIM)
def run(config: ErrorFeedbackConfig, rng_key: jax.Array, progress: Progress) -> Result:
    """Runs the ``error-feedback`` experiment (see the module docstring).

    Args:
      config: the profile's sizes.
      rng_key: ``jax.random`` key for the data and the random search.
      progress: progress reporter (``track``).

    Returns:
      The :class:`~jaxlab.experiments.Result` with the three verdict parts.

    Examples:
      >>> from jaxlab.experiments import get
      >>> experiment = get("error-feedback")  # run with `jaxlab run error-feedback`
      >>> experiment.make_config("smoke").ls_workers
      4

    References:
      D. Berg Thomsen, A. Taylor, A. Dieuleveut, "A Tight Theory of Error Feedback Algorithms in
      Distributed Optimization", ICML 2026 (arXiv 2605.31594).
    """
    with jax.enable_x64(True):
        return _run(config, rng_key, progress)


def _run(config: ErrorFeedbackConfig, rng_key: jax.Array, progress: Progress) -> Result:
    key_search, key_ls, key_het = jax.random.split(rng_key, 3)
    rng = np.random.default_rng(np.asarray(jax.random.key_data(key_search)).ravel())

    rows, scan, het_two = _tightness(config, rng, progress)

    sizes = (config.ls_workers, config.ls_rows, config.ls_dim)
    ls_problem = optim.distributed_least_squares(key_ls, *sizes, 0.0)
    het_problem = optim.distributed_least_squares(key_het, *sizes, config.het_noise)
    budget = (config.ls_keep, config.ls_tolerance, config.ls_max_steps, config.chunk, progress)
    ls = _comparison_runs(ls_problem, *budget, old_step=("ef21", "ef"))
    budget = (config.ls_keep, config.het_tolerance, config.het_max_steps, config.chunk, progress)
    het = _comparison_runs(het_problem, *budget, old_step=())
    logistic = _logistic(config, progress) if config.logistic_steps > 0 else None

    # Part 1: tightness.
    max_gap = max(max(abs(r["gap_ef"]), abs(r["gap_ef21"])) for r in rows)
    max_excess = max(max(r["gap_ef"], r["gap_ef21"]) for r in rows)
    tight = max_gap <= TIGHTNESS_TOLERANCE
    scan_ok = scan["relative_distance"] <= SCAN_RELATIVE_DISTANCE
    part1 = check(  # the claim's "1e-3" is TIGHTNESS_TOLERANCE (":g" would print 0.001)
        "the worst case over rotation instances equals rho* (|worst - rho*| <= 1e-3 for EF and "
        f"EF21, every (eps, kappa) and n in the table) and the step-size scan is minimised within "
        f"{100 * SCAN_RELATIVE_DISTANCE:g}% of eta*",
        f"max |worst - rho*| = {max_gap:.2e} over {len(rows)} cases x 2 methods (largest excess "
        f"{max_excess:.1e}); scan argmin {scan['argmin']:.2f} vs eta* {scan['eta_star']:.4f} "
        f"({100 * scan['relative_distance']:.1f}% away, minimum {scan['minimum']:.4f}); n=2 "
        f"heterogeneous: cubic {het_two['cubic']:.6f}, worst found {het_two['worst_ef21']:.6f}",
        tight and scan_ok,
    )

    # Part 2: eta* versus gamma_R on the shared-minimiser least squares.
    def ratio(slow, fast):
        a, b = ls["runs"][slow]["iterations"], ls["runs"][fast]["iterations"]
        return a / b if a is not None and b is not None else float("nan")

    ratio_ef21 = ratio("ef21_gamma_r", "ef21_eta_star")
    ratio_ef = ratio("ef_gamma_r", "ef_eta_star")
    its = {k: r["iterations"] for k, r in ls["runs"].items()}
    part2 = check(
        f"on distributed least squares (shared minimiser, top-{config.ls_keep}) eta* needs at "
        f"least {MIN_ITERATION_RATIO:g}x fewer iterations than gamma_R to reach relative "
        f"suboptimality {config.ls_tolerance:g}, for EF21 and EF (note measured 1.40)",
        f"EF21 {its['ef21_eta_star']} (eta*) vs {its['ef21_gamma_r']} (gamma_R), ratio "
        f"{ratio_ef21:.2f}; EF {its['ef_eta_star']} vs {its['ef_gamma_r']}, ratio {ratio_ef:.2f}; "
        f"eta*/gamma_R = {ls['steps']['eta_star_over_gamma_r']:.2f}",
        ratio_ef21 >= MIN_ITERATION_RATIO and ratio_ef >= MIN_ITERATION_RATIO,
    )

    # Part 3: feedback is needed on heterogeneous data.
    cgd, ef21 = het["runs"]["cgd"], het["runs"]["ef21_eta_star"]
    part3 = check(
        f"with noisy targets (no shared minimiser) naive compressed GD does not reach relative "
        f"suboptimality {config.het_tolerance:g} within {config.het_max_steps} steps while EF21 "
        f"at eta* does",
        f"CGD best {cgd['best_suboptimality']:.2e} after {cgd['steps_run']} steps; EF21 reached "
        f"it in {ef21['iterations']} iterations ({ef21['bits_per_worker']} bits per worker); EF "
        f"best {het['runs']['ef_eta_star']['best_suboptimality']:.2e}",
        (not cgd["reached"]) and ef21["reached"],
    )

    metrics = {
        "tightness": rows,
        "tightness_max_abs_gap": max_gap,
        "step_size_scan": scan,
        "two_heterogeneous_workers": het_two,
        "least_squares": ls,
        "least_squares_ratio_ef21": ratio_ef21,
        "least_squares_ratio_ef": ratio_ef,
        "heterogeneous": het,
    }
    if logistic is not None:
        metrics["logistic"] = logistic
    figures = _figures(rows, scan, ls, het, logistic)
    return Result(metrics=metrics, parts=[part1, part2, part3], figures=figures)
