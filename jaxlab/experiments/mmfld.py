"""Experiment ``mmfld``: mirror mean-field Langevin dynamics (Gu & Kim, ICML 2026).

Three measurements (the note ``notes/mmfld.md``; float64 throughout, ``jax.enable_x64`` scoped
to the run):

(a) **Closed-form stationary laws** (the note's checks 2–4, one step size each, ``N = 20000``):
    the linear potential on ``[0, 1]`` (``c = 0.3``, ``λ = 0.1``; exact mean 0.280938) with the
    primal MMFLD scheme, the paper's dual scheme, the split dual scheme (``"dual_split"``,
    issue 42) and projected Langevin; the interacting box (``d = 5``) against its bisection
    fixed point; the simplex ``Δ_2`` against quadrature. Pass (note's calibrated rule) if every
    primal mean is within ``4·SE + 0.003`` of the exact one, no primal particle is ever on the
    boundary, projected Langevin has > 1 % of its mass on it, and the dual scheme's bias exceeds
    the primal one's. Reported beside the primal scheme, not gating: the paper's dual scheme and
    the split one on the 1-D check and on the interacting box (same start, key and horizon).
(b) **Constrained mean-field two-layer network** (``p = 5``, ``n = 500``, teacher of three tanh
    neurons, ``N = 256`` neurons in ``[-2, 2] × [-1, 1]^p``, ``λ = 1e-3``, ``η = 0.05``):
    ``𝓛 = F + λ Ent`` (nearest-neighbour ``Ent``) against time for MMFLD (primal), projected and
    unconstrained MFLD. Pass (note) if MMFLD's final loss is ``≤ 0.1×`` its initial loss with
    every neuron strictly inside, while the projected run has a positive boundary fraction. The
    issue's parts: a linear (log-straight) phase of ``𝓛_t - 𝓛_∞`` (fit of ``log(𝓛_t - 𝓛_∞)`` on
    ``t``, ``R² ≥ 0.9``, while the gap falls from 50 % to 3 % of its start, ``𝓛_∞`` the mean of
    the last 10 %), and unconstrained MFLD leaving the box.
(c) **Propagation of chaos** on the interacting box (``d = 5``): its ``N``-particle stationary law
    is the Gibbs law ``π_N ∝ exp(-N F(μ̂)/λ)``, with exact mean (bias ``≈ 0.040/N`` against the
    mean-field limit) and pair correlation ``N E‖m_N - m̄‖²`` (0.199 as ``N → ∞``; 0.340 for
    independent particles): :func:`~jaxlab.particles.interacting_box_finite_particle_moments`.
    For ``N ∈ {4, 8, 16, 32}`` (bias above the Monte Carlo error), thousands of systems in
    antithetic noise pairs (:func:`~jaxlab.particles.ensemble_step`) start from exact ``π_N``
    samples; each system's time averages after a burn-in, averaged within its pair, are the
    independent units of the estimates (float32 dynamics, rounding 1e-7 against errors of 1e-4;
    float64 sums). Two seeds. Pass (issue) if (c1) the bias, resolved (> 3 SE) at every size
    (else ``unresolved``), falls like ``1/N``: weighted log-log slope in ``[-1.3, -0.7]`` for both
    seeds; (c2) the pair correlation is within 3 SE of its exact value at every size and seed and
    at least 5 SE from the independent value. Means against the exact ``E_N[m_N]``: reported.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from matplotlib.figure import Figure

from jaxlab import particles
from jaxlab._src.experiments import ExperimentConfig, Progress, Result, check, register

__all__ = ["MMFLDConfig", "run"]

CLAIM = (
    "Gu & Kim (ICML 2026): mirror mean-field Langevin dynamics minimises F(μ) + λ·Ent(μ) over "
    "measures on a convex constrained domain, converging linearly to the entropic minimiser "
    "while every particle stays feasible (where projected MFLD puts mass on the boundary and "
    "unconstrained MFLD leaves the domain), with uniform-in-time propagation of chaos (the "
    "finite-N bias falls like 1/N)."
)

# The note's instances.
LINEAR_C, LINEAR_LAMBDA = 0.3, 0.1
BOX_C = (0.3, -0.2, 0.5, 0.0, 0.1)
BOX_TARGET = (0.5, 0.5, 0.2, 0.8, 0.5)
BOX_KAPPA, BOX_LAMBDA = 1.0, 0.1
SIMPLEX_C, SIMPLEX_LAMBDA = (0.0, 1.0, -0.5), 0.5
TEACHER_OUTPUT = (1.5, -1.0, 1.2)
# The note's calibrated tolerance of a moment check: |mean - exact| <= 4 SE + 0.003 (4 SE: a
# false alarm under 1e-4 per coordinate; 0.003: the Euler step's O(η) bias at the note's steps).
_SE_MULTIPLE, _BIAS_ALLOWANCE = 4.0, 0.003
# Projected Langevin "puts mass on the boundary" when more than 1 % of its particles end exactly on
# {0, 1} (MMFLD's boundary fraction is exactly 0, so any clear positive level separates them).
_PROJECTED_BOUNDARY_MASS = 0.01
# The note's training criterion of (b): the final loss at most a tenth of the initial one.
_LOSS_REDUCTION = 0.1
# A log-gap curve counts as straight (a linear phase) when a line explains 90 % of its variance.
_LINEAR_PHASE_R2 = 0.9
# The 1/N rate: the fitted log-log slope of |bias| against N within 0.3 of -1.
_CHAOS_SLOPE_RANGE = (-1.3, -0.7)
# A size's bias counts as resolved when it exceeds three standard errors of its estimate (below
# that the slope would fit noise: the old design's sizes from 64 up measured only noise).
_RESOLVED_SE_MULTIPLE = 3.0
# The pair correlation agrees with the exact π_N value when within 3 SE (a false alarm 0.27 % per
# size and seed), and is told apart from independent particles when at least 5 SE away (issue).
_PAIR_CORRELATION_SE_MULTIPLE, _INDEPENDENT_SE_MULTIPLE = 3.0, 5.0


@dataclasses.dataclass(frozen=True)
class MMFLDConfig(ExperimentConfig):
    """Sizes of the ``mmfld`` experiment (``smoke``, ``quick``, ``full``).

    Attributes:
      moment_particles: ``N`` of the closed-form checks (a).
      linear_step, linear_horizon: ``η`` and ``T`` of the 1-D linear check.
      box_step, box_horizon: of the interacting box check.
      simplex_step, simplex_horizon: of the simplex check.
      network_dim, network_samples, network_particles: ``p``, ``n``, ``N`` of (b).
      network_step, network_weight, network_steps: ``η``, ``λ`` and the steps of (b).
      chaos_sizes: the particle numbers ``N`` of (c).
      chaos_particles_per_size: ``N × systems`` for every ``N`` (systems = this / N, even).
      chaos_steps: steps of every system in (c); the first ``chaos_burn_in`` are discarded.
      chaos_step: ``η`` of (c).
      chaos_seeds: independent repetitions of (c), each with its own slope.
    """

    moment_particles: int = 20_000
    linear_step: float = 3e-3
    linear_horizon: float = 20.0
    box_step: float = 2e-3
    box_horizon: float = 10.0
    simplex_step: float = 2e-3
    simplex_horizon: float = 20.0
    network_dim: int = 5
    network_samples: int = 500
    network_particles: int = 256
    network_step: float = 0.05
    network_weight: float = 1e-3
    network_steps: int = 4000
    chaos_sizes: tuple[int, ...] = (4, 8, 16, 32)
    chaos_particles_per_size: int = 65_536
    chaos_steps: int = 3400
    chaos_burn_in: int = 400
    chaos_step: float = 5e-3
    chaos_seeds: int = 2

    @classmethod
    def smoke(cls) -> MMFLDConfig:
        return cls(
            moment_particles=1000,
            linear_step=1e-2,
            linear_horizon=2.0,
            box_step=1e-2,
            box_horizon=1.0,
            simplex_step=1e-2,
            simplex_horizon=1.0,
            network_samples=100,
            network_particles=64,
            network_steps=200,
            chaos_sizes=(4, 8),
            chaos_particles_per_size=256,
            chaos_steps=40,
            chaos_burn_in=10,
        )

    @classmethod
    def quick(cls) -> MMFLDConfig:
        return cls()

    @classmethod
    def full(cls) -> MMFLDConfig:
        return cls(
            network_steps=20_000,
            chaos_sizes=(4, 8, 16, 32, 64),
            chaos_particles_per_size=1_048_576,
            chaos_steps=20_000,
            chaos_burn_in=1_000,
        )


def _summary(positions, exact, info) -> dict[str, Any]:
    x = np.asarray(positions)
    mean = x.mean(axis=0)
    se = x.std(axis=0) / math.sqrt(x.shape[0])
    error = np.abs(mean - np.asarray(exact))
    return {
        "mean": mean.tolist(),
        "exact": np.asarray(exact).tolist(),
        "abs_error": error.tolist(),
        "standard_error": se.tolist(),
        "within_tolerance": bool(np.all(error <= _SE_MULTIPLE * se + _BIAS_ALLOWANCE)),
        "max_boundary_fraction": float(np.max(info["boundary_fraction"])),
        "final_boundary_fraction": float(info["boundary_fraction"][-1]),
        "min_boundary_distance": float(np.min(info["boundary_distance"])),
        "clip_rate": float(np.sum(info["clip_count"]) / (x.shape[0] * len(info["clip_count"]))),
    }


def _boundary_record(info, names=("boundary_fraction", "boundary_distance", "clip_count")):
    return {name: getattr(info, name) for name in names}


# --------------------------------------------------------------------------------------------
# (a) Closed-form stationary laws.


def _closed_form_checks(config: MMFLDConfig, key: jax.Array, progress: Progress) -> dict:
    n = config.moment_particles
    keys = jax.random.split(key, 5)
    box = particles.box_mirror_map(0.0, 1.0)
    out: dict[str, Any] = {}
    linear = particles.linear_potential_functional(jnp.asarray([LINEAR_C]))
    exact_linear, _ = particles.truncated_exponential_moments(
        jnp.asarray([LINEAR_C / LINEAR_LAMBDA])
    )
    steps = int(round(config.linear_horizon / config.linear_step))
    for scheme in progress.track(("primal", "projected", "dual", "dual_split"), description="1-D"):
        algorithm = particles.mmfld(linear, box, config.linear_step, LINEAR_LAMBDA, scheme=scheme)
        state, info = particles.run_sampler(
            algorithm, jnp.full((n, 1), 0.5), keys[0], steps, _boundary_record
        )
        out[f"linear_{scheme}"] = _summary(state.positions, exact_linear, info)

    c, m = jnp.asarray(BOX_C), jnp.asarray(BOX_TARGET)
    fixed = particles.interacting_box_fixed_point(c, BOX_KAPPA, m, BOX_LAMBDA)
    start = jax.random.uniform(keys[1], (n, len(BOX_C)), jnp.float64, 0.05, 0.95)
    steps = int(round(config.box_horizon / config.box_step))
    every = max(1, int(round(2.0 / config.box_step)))
    # The primal scheme gates (a); the paper's dual scheme and the split one are reported beside
    # it (issue 42): the same start, noise key and horizon.
    for scheme in progress.track(("primal", "dual", "dual_split"), description="box"):
        algorithm = particles.mmfld(
            particles.interacting_box_functional(c, BOX_KAPPA, m),
            box,
            config.box_step,
            BOX_LAMBDA,
            scheme=scheme,
        )
        state, info = particles.run_sampler(
            algorithm,
            start,
            keys[2],
            steps,
            lambda i: {**_boundary_record(i), "mean": i.statistics},
        )
        out[f"box_{scheme}"] = _summary(state.positions, fixed.mean, info)
        mean_path = np.asarray(info["mean"])
        out[f"box_{scheme}"]["max_error_every_2_time_units"] = [
            float(np.max(np.abs(mean_path[k] - np.asarray(fixed.mean))))
            for k in range(every - 1, steps, every)
        ]

    reference = particles.simplex_linear_potential_mean(SIMPLEX_C, SIMPLEX_LAMBDA)
    simplex = particles.linear_potential_functional(jnp.asarray(SIMPLEX_C))
    algorithm = particles.mmfld(
        simplex, particles.simplex_mirror_map(), config.simplex_step, SIMPLEX_LAMBDA
    )
    steps = int(round(config.simplex_horizon / config.simplex_step))
    start = jnp.full((n, 3), 1.0 / 3.0)
    state, info = particles.run_sampler(algorithm, start, keys[3], steps, _boundary_record)
    out["simplex_primal"] = _summary(state.positions, reference, info)

    primal = [out[k] for k in ("linear_primal", "box_primal", "simplex_primal")]
    out["passed"] = bool(
        all(p["within_tolerance"] for p in primal)
        and all(p["max_boundary_fraction"] == 0.0 for p in primal)
        and out["linear_projected"]["final_boundary_fraction"] > _PROJECTED_BOUNDARY_MASS
        and out["linear_dual"]["abs_error"][0] > out["linear_primal"]["abs_error"][0]
    )
    return out


# --------------------------------------------------------------------------------------------
# (b) The constrained mean-field two-layer network.


def _network(config: MMFLDConfig, key: jax.Array, progress: Progress) -> dict:
    data_key, init_key, run_key = jax.random.split(key, 3)
    inputs, targets = particles.teacher_network_data(
        data_key, config.network_samples, config.network_dim, TEACHER_OUTPUT
    )
    functional = particles.two_layer_network_functional(inputs, targets)
    p = config.network_dim
    lower = jnp.asarray([-2.0] + [-1.0] * p)
    upper = -lower
    box = particles.box_mirror_map(lower, upper)
    # Uniformly in the middle half of the box.
    start = jax.random.uniform(init_key, (config.network_particles, p + 1), minval=-0.5, maxval=0.5)
    start = start * (upper - lower)[None, :]
    hyper = (config.network_step, config.network_weight)
    common = dict(entropy_queries=config.network_particles)
    algorithms = {
        "mmfld": particles.mmfld(functional, box, *hyper, **common),
        "projected": particles.mmfld(functional, box, *hyper, scheme="projected", **common),
        "mfld": particles.mfld(functional, *hyper, **common),
    }

    def record(info):
        names = ("objective", "entropy", "boundary_fraction", "boundary_distance")
        return {"loss": info.energy, **_boundary_record(info, names)}

    out: dict[str, Any] = {}
    times = config.network_step * np.arange(config.network_steps)
    for name in progress.track(list(algorithms), description="network"):
        state, info = particles.run_sampler(
            algorithms[name], start, run_key, config.network_steps, record
        )
        theta = np.asarray(state.positions)
        outside = np.mean(np.any((theta < np.asarray(lower)) | (theta > np.asarray(upper)), axis=1))
        on_faces = np.mean((theta == np.asarray(lower)) | (theta == np.asarray(upper)))
        loss = np.asarray(info["loss"])
        objective = np.asarray(info["objective"])
        out[name] = {
            "loss_initial": float(loss[0]),
            "loss_final": float(loss[-1]),
            "objective_initial": float(objective[0]),
            "objective_final": float(objective[-1]),
            "max_boundary_fraction": float(np.max(info["boundary_fraction"])),
            "final_boundary_fraction": float(info["boundary_fraction"][-1]),
            "min_boundary_distance": float(np.min(info["boundary_distance"])),
            "fraction_of_coordinates_on_faces": float(on_faces),
            "fraction_of_neurons_outside": float(outside),
            "loss_curve": loss[:: max(1, len(loss) // 400)].tolist(),
            "objective_curve": objective[:: max(1, len(loss) // 400)].tolist(),
            "curve_times": times[:: max(1, len(loss) // 400)].tolist(),
            "linear_phase": particles.linear_phase_fit(times, objective).as_dict(),
        }
    mmfld_run, projected = out["mmfld"], out["projected"]
    out["passed"] = bool(
        mmfld_run["loss_final"] <= _LOSS_REDUCTION * mmfld_run["loss_initial"]
        and mmfld_run["min_boundary_distance"] > 0
        and mmfld_run["max_boundary_fraction"] == 0.0
        and projected["final_boundary_fraction"] > 0
    )
    phase = mmfld_run["linear_phase"]
    out["linear_phase_passed"] = bool(phase["r2"] >= _LINEAR_PHASE_R2 and phase["slope"] < 0)
    out["mfld_leaves_passed"] = bool(out["mfld"]["fraction_of_neurons_outside"] > 0)
    return out


# --------------------------------------------------------------------------------------------
# (c) Propagation of chaos.


def _chaos_row(n: int, means, pairs, exact, limit: np.ndarray) -> dict[str, Any]:
    """One size's estimates: antithetic pairs averaged first (the independent units)."""
    means = np.asarray(means).reshape(-1, 2, limit.size).mean(axis=1)
    pairs = np.asarray(pairs).reshape(-1, 2).mean(axis=1)
    units = means.shape[0]
    mean, mean_se = means.mean(axis=0), means.std(axis=0, ddof=1) / math.sqrt(units)
    bias = mean - limit
    norm = float(np.linalg.norm(bias))
    # The standard error of |bias| (delta method: the coordinates are independent).
    norm_se = float(np.sqrt(np.sum((bias / norm) ** 2 * mean_se**2)))
    pair, pair_se = float(pairs.mean()), float(pairs.std(ddof=1) / math.sqrt(units))
    exact_pair = float(exact.pair_correlation.sum())
    independent = float(exact.independent_pair_correlation.sum())
    return {
        "num_particles": n,
        "antithetic_pairs": units,
        "mean": mean.tolist(),
        "mean_standard_error": mean_se.tolist(),
        "exact_mean": exact.mean.tolist(),
        "max_abs_z_vs_exact_mean": float(np.max(np.abs(mean - exact.mean) / mean_se)),
        "bias_norm": norm,
        "bias_norm_standard_error": norm_se,
        "exact_bias_norm": float(np.linalg.norm(exact.mean - limit)),
        "resolved": norm > _RESOLVED_SE_MULTIPLE * norm_se,
        "pair_correlation": pair,
        "pair_correlation_standard_error": pair_se,
        "exact_pair_correlation": exact_pair,
        "mean_field_pair_correlation": float(exact.mean_field_pair_correlation.sum()),
        "independent_pair_correlation": independent,
        "z_vs_exact_pair_correlation": (pair - exact_pair) / pair_se,
        "z_vs_independent": (pair - independent) / pair_se,
    }


def _chaos(config: MMFLDConfig, key: jax.Array, progress: Progress) -> dict:
    sizes, instance = config.chaos_sizes, (BOX_C, BOX_KAPPA, BOX_TARGET, BOX_LAMBDA)
    exact = {n: particles.interacting_box_finite_particle_moments(*instance, n) for n in sizes}
    limit = exact[sizes[0]].mean_field_mean
    c, m = (jnp.asarray(v, jnp.float32) for v in (BOX_C, BOX_TARGET))
    functional = particles.interacting_box_functional(c, BOX_KAPPA, m)
    box = particles.box_mirror_map(0.0, 1.0)
    algorithm = particles.mmfld(functional, box, config.chaos_step, BOX_LAMBDA)
    ensemble = particles.ensemble_step(algorithm.step)  # antithetic pairs

    def statistic(n: int):
        def averaged(info):  # m_N of the measure each step starts from, per system
            mean = info.statistics.astype(jnp.float64)
            return mean, n * jnp.sum((mean - limit[None, :]) ** 2, axis=1)

        return averaged

    statistics = {n: statistic(n) for n in sizes}  # one object per N: one compiled scan per N
    # float32 positions strictly inside (the sampler's closed box may touch 0 or 1).
    inside = float(np.finfo(np.float32).eps)
    runs = [[] for _ in range(config.chaos_seeds)]
    cases = [(seed, i) for seed in range(config.chaos_seeds) for i in range(len(sizes))]
    for seed, i in progress.track(cases, description="chaos (seed, N)"):
        n = sizes[i]
        systems = 2 * max(1, config.chaos_particles_per_size // (2 * n))
        start_key, run_key = jax.random.split(jax.random.fold_in(jax.random.fold_in(key, seed), i))
        start = particles.interacting_box_stationary_sample(start_key, *instance, n, systems)
        start = jnp.clip(start, inside, 1.0 - inside).astype(jnp.float32)
        _, (means, pairs) = particles.time_average(
            ensemble,
            particles.MFLDState(start),
            run_key,
            config.chaos_steps,
            statistics[n],
            burn_in=config.chaos_burn_in,
        )
        runs[seed].append(_chaos_row(n, means, pairs, exact[n], limit))

    def fit(rows, key, error_key=None):
        errors = None if error_key is None else [r[error_key] for r in rows]
        return particles.power_law_fit(sizes, [r[key] for r in rows], errors)

    fits = [fit(rows, "bias_norm", "bias_norm_standard_error") for rows in runs]
    slope_keys = ("bias_slope", "bias_slope_standard_error")
    seeds = [
        {"rows": rows, **dict(zip(slope_keys, f[:2], strict=True))}
        for rows, f in zip(runs, fits, strict=True)
    ]
    every = [r for s in seeds for r in s["rows"]]
    return {
        "limit": limit.tolist(),
        "sizes": list(sizes),
        "seeds": seeds,
        "exact_bias_slope": fit(runs[0], "exact_bias_norm").exponent,
        "bias_resolved": all(r["resolved"] for r in every),
        "slope_passed": all(
            _CHAOS_SLOPE_RANGE[0] <= s["bias_slope"] <= _CHAOS_SLOPE_RANGE[1] for s in seeds
        ),
        "pair_correlation_passed": all(
            abs(r["z_vs_exact_pair_correlation"]) <= _PAIR_CORRELATION_SE_MULTIPLE
            and abs(r["z_vs_independent"]) >= _INDEPENDENT_SE_MULTIPLE
            for r in every
        ),
    }


# --------------------------------------------------------------------------------------------
# Figures.


def _figures(network: dict, chaos: dict, checks: dict):
    fig_n = Figure(figsize=(11, 4))
    left, right = fig_n.subplots(1, 2)
    for name, style in (("mmfld", "-"), ("projected", "--"), ("mfld", ":")):
        run = network[name]
        times = np.asarray(run["curve_times"])
        left.semilogy(times, run["loss_curve"], style, label=f"{name} loss F")
        floor = run["linear_phase"]["floor"]
        gap = np.asarray(run["objective_curve"]) - floor
        ok = gap > 0
        right.semilogy(times[ok], gap[ok], style, label=name)
    left.set_xlabel("time t = η k")
    left.set_ylabel("training loss F(μ̂_t)")
    left.set_title("constrained mean-field two-layer network")
    left.legend()
    right.set_xlabel("time t")
    right.set_ylabel("L(μ̂_t) - L_∞ (L = F + λ Ent, NN entropy estimate)")
    right.set_title("objective gap (log scale: straight = linear convergence)")
    right.legend()
    fig_n.tight_layout()

    fig_c = Figure(figsize=(11, 4.5))
    panels = fig_c.subplots(1, 2)
    sizes, first = np.asarray(chaos["sizes"]), chaos["seeds"][0]["rows"]
    titles = (f"|E m_N - m̄| (exact slope {chaos['exact_bias_slope']:.2f})", "N E‖m_N - m̄‖²")
    for ax, value, title in zip(panels, ("bias_norm", "pair_correlation"), titles, strict=True):
        for k, seed in enumerate(chaos["seeds"]):
            ax.errorbar(
                sizes * (1.0 + 0.03 * k),  # the seeds side by side
                [r[value] for r in seed["rows"]],
                yerr=[3 * r[value + "_standard_error"] for r in seed["rows"]],
                fmt="o",
                label=f"seed {k}: slope {seed['bias_slope']:.2f} ± "
                f"{seed['bias_slope_standard_error']:.2f}"
                if value == "bias_norm"
                else f"seed {k}",
            )
        ax.plot(sizes, [r["exact_" + value] for r in first], "k--", label="exact (Gibbs law π_N)")
        ax.set(xscale="log", xticks=sizes, xticklabels=sizes, xlabel="particles N")
        ax.set(title=title + " (bars: 3 SE)")
        ax.tick_params(which="minor", labelbottom=False)
    panels[0].set_yscale("log")
    for key, style in (
        ("mean_field_pair_correlation", ":"),
        ("independent_pair_correlation", "-."),
    ):
        panels[1].axhline(first[0][key], color="gray", ls=style, label=key.replace("_", " "))
    for ax in panels:
        ax.legend(fontsize=8)
    fig_c.tight_layout()

    fig_m = Figure(figsize=(6, 4))
    ax = fig_m.subplots()
    names = ["linear_primal", "linear_projected", "linear_dual", "linear_dual_split"]
    errors = [checks[k]["abs_error"][0] for k in names]
    mass = [checks[k]["final_boundary_fraction"] for k in names]
    ax.bar(np.arange(4) - 0.2, errors, 0.4, label="|mean - exact|")
    ax.bar(np.arange(4) + 0.2, mass, 0.4, label="mass on the boundary")
    ax.set_xticks(range(4), ["primal MMFLD", "projected", "dual (paper)", "dual split"])
    ax.set_title("1-D linear potential on [0, 1] (exact mean 0.2809)")
    ax.legend()
    fig_m.tight_layout()
    return {"network_objective": fig_n, "propagation_of_chaos": fig_c, "closed_forms": fig_m}


# --------------------------------------------------------------------------------------------


@register("mmfld", config=MMFLDConfig, claim=CLAIM)
def run(config: MMFLDConfig, rng_key: jax.Array, progress: Progress) -> Result:
    """Runs the three measurements and computes the verdict (see the module docstring)."""
    keys = jax.random.split(rng_key, 3)
    with jax.enable_x64(True):
        checks = _closed_form_checks(config, keys[0], progress)
        network = _network(config, keys[1], progress)
        chaos = _chaos(config, keys[2], progress)

    lin = {k: checks[f"linear_{k}"] for k in ("primal", "projected", "dual")}
    box, simplex = checks["box_primal"], checks["simplex_primal"]
    part_a = check(
        "(a) note: primal MMFLD means within 4·SE + 0.003 of the closed forms (1-D, box d=5, "
        "simplex), no primal particle on the boundary, projected Langevin > 1 % of its mass on "
        "it, the dual (paper) scheme more biased than the primal one",
        f"|error| 1-D {lin['primal']['abs_error'][0]:.4f} (SE "
        f"{lin['primal']['standard_error'][0]:.4f}), box max {max(box['abs_error']):.4f}, simplex "
        f"max {max(simplex['abs_error']):.4f}; primal boundary mass "
        + "/".join(f"{c['max_boundary_fraction']:.3g}" for c in (lin["primal"], box, simplex))
        + f"; projected boundary mass {lin['projected']['final_boundary_fraction']:.1%}; dual "
        f"error {lin['dual']['abs_error'][0]:.4f} vs primal {lin['primal']['abs_error'][0]:.4f}"
        f" (reported: dual split {checks['linear_dual_split']['abs_error'][0]:.4f}; interacting "
        f"box max error primal {max(box['abs_error']):.4f}, dual (paper) "
        f"{max(checks['box_dual']['abs_error']):.4f}, dual split "
        f"{max(checks['box_dual_split']['abs_error']):.4f}, SE "
        f"{max(box['standard_error']):.4f})",
        checks["passed"],
    )
    mm, proj, free = network["mmfld"], network["projected"], network["mfld"]
    part_b = check(
        "(b) note: on the constrained two-layer network MMFLD's final loss <= 0.1 x initial with "
        "every neuron strictly inside, while projected MFLD has a positive boundary fraction",
        f"MMFLD loss {mm['loss_initial']:.4g} -> {mm['loss_final']:.4g}, min boundary distance "
        f"{mm['min_boundary_distance']:.3g}, boundary fraction {mm['max_boundary_fraction']:.3g}; "
        f"projected loss -> {proj['loss_final']:.4g}, neurons on the boundary "
        f"{proj['final_boundary_fraction']:.1%} (coordinates on faces "
        f"{proj['fraction_of_coordinates_on_faces']:.1%})",
        network["passed"],
    )
    phase = mm["linear_phase"]
    part_c = check(
        "(issue) MMFLD's objective F + λ Ent decreases to its entropic minimum with a linear "
        "(log-scale straight) phase: fit of log(gap) on t with R² >= 0.9 and negative slope",
        f"gap from 50 % to 3 % over t in [{phase.get('t_start', float('nan')):.1f}, "
        f"{phase.get('t_end', float('nan')):.1f}] ({phase['points']} points): slope "
        f"{phase['slope']:.3g} per unit time, R² {phase['r2']:.3f}; objective "
        f"{mm['objective_initial']:.4g} -> floor {phase['floor']:.4g}",
        network["linear_phase_passed"],
    )
    part_d = check(
        "(issue) feasibility: MMFLD stays strictly inside while projected MFLD puts mass on the "
        "boundary and unconstrained MFLD leaves the domain",
        f"MMFLD boundary fraction {mm['max_boundary_fraction']:.3g}; projected "
        f"{proj['final_boundary_fraction']:.1%} of neurons on the boundary; unconstrained MFLD "
        f"{free['fraction_of_neurons_outside']:.1%} of neurons outside the box (loss "
        f"{free['loss_final']:.4g})",
        network["passed"] and network["mfld_leaves_passed"],
    )
    seeds, first = chaos["seeds"], chaos["seeds"][0]["rows"]

    def listed(rows, key, spec):
        return ", ".join(format(r[key], spec) for r in rows)

    part_e = check(
        "(issue) propagation of chaos: the finite-N bias of the interacting box's stationary mean "
        "(against the mean-field limit, resolved > 3 SE at every N) falls like 1/N: weighted "
        f"log-log slope in [-1.3, -0.7] for N in {list(config.chaos_sizes)}, both seeds",
        "; ".join(
            f"seed {k}: slope {seed['bias_slope']:.2f} ± {seed['bias_slope_standard_error']:.2f}, "
            f"|bias| {listed(seed['rows'], 'bias_norm', '.2e')} (SE "
            f"{listed(seed['rows'], 'bias_norm_standard_error', '.1e')}), max |z| against the "
            f"exact E_N[m_N] {listed(seed['rows'], 'max_abs_z_vs_exact_mean', '.1f')}"
            for k, seed in enumerate(seeds)
        )
        + f"; exact |bias| {listed(first, 'exact_bias_norm', '.2e')} (slope "
        f"{chaos['exact_bias_slope']:.2f})",
        chaos["slope_passed"],
        resolved=chaos["bias_resolved"],
    )
    part_f = check(
        "(issue) chaos as vanishing pair correlations: N E‖m_N - m̄‖² within 3 SE of its exact "
        "finite-N value at every N and seed, and at least 5 SE from the independent particles' "
        "value",
        "; ".join(
            f"seed {k}: {listed(seed['rows'], 'pair_correlation', '.4f')} (SE "
            f"{listed(seed['rows'], 'pair_correlation_standard_error', '.4f')}; z against exact "
            f"{listed(seed['rows'], 'z_vs_exact_pair_correlation', '+.1f')}; against "
            f"independent {listed(seed['rows'], 'z_vs_independent', '.0f')})"
            for k, seed in enumerate(seeds)
        )
        + f"; exact {listed(first, 'exact_pair_correlation', '.4f')}, mean-field limit "
        f"{first[0]['mean_field_pair_correlation']:.4f}, independent particles "
        f"{first[0]['independent_pair_correlation']:.4f}",
        chaos["pair_correlation_passed"],
    )
    metrics = {"closed_form_checks": checks, "network": network, "propagation_of_chaos": chaos}
    return Result(
        metrics=metrics,
        parts=[part_a, part_b, part_c, part_d, part_e, part_f],
        figures=_figures(network, chaos, checks),
    )
