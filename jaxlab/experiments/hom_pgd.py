"""Experiment ``hom-pgd``: Hom-PGD⁺, projected gradient through a homeomorphism onto the ball.

Two measurements (Liu, Liang & Chen, ICML 2026; the note's quick profile), on problems and
baselines from ``jaxlab.solvers``:

(a) **Star toy, exact map** (``star_*``, float64). From seeded starts z₀ ~ N(0, I) mapped into
    the disk, Hom-PGD runs against projected gradient with an exact projection onto K, both
    with the public code's adaptive step and |Δf| stopping rule; a quadratic penalty and an
    augmented Lagrangian (Adam inner steps) are reported beside.
(b) **Non-convex QCQPs, learned map.** One conditional invertible network per candidate
    penalty weight w_pen (the note's knob between ε_inn and coverage of K), trained with the
    homeomorphism loss on fresh instances; the weight with the smallest median gap on separate
    validation instances is kept. Hom-PGD with bisection repair solves held-out instances from
    the centre and uniform latent starts (best feasible end point); reference: SLSQP
    multi-start; timing against PGD whose projection is an SLSQP solve each step.
"""

from __future__ import annotations

import dataclasses
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from matplotlib.figure import Figure

from jaxlab import solvers
from jaxlab._src.experiments import ExperimentConfig, Progress, Result, check, register
from jaxlab.nn import sample_latents, train_homeomorphism

__all__ = ["HomPGDConfig", "run"]

CLAIM = (
    "Liu, Liang & Chen (ICML 2026): projected gradient in the latent ball of a (learned) "
    "homeomorphism onto a non-convex ball-homeomorphic set (Hom-PGD+) keeps every iterate "
    "feasible by construction at one VJP per step and is faster than projected gradient with an "
    "exact projection (up to 10x). Note's check: on the 2-D star toy with the exact map, zero "
    "violation, the global optimum from >= 30% of starts, faster per run than exact-projection "
    "PGD; on non-convex QCQPs (n=2, m=3) with a trained conditional INN, >= 95% of instances "
    "feasible with median gap <= 5% to multi-start SLSQP."
)

# Verdict thresholds (the note's rule) and the protocol's fixed numbers.
STAR_SUCCESS = 0.0312  # "reached the global optimum": f within 1.6% of f* = 0.0307132
STAR_GLOBAL_FRACTION = 0.30  # share of starts that must reach it (four boundary basins)
ZERO_VIOLATION = 1e-10  # "zero" in float64 with the exact map (rounding of Φ only)
FEASIBILITY_TOL = 1e-5  # a QCQP end point is feasible at this residual (the code's tolerance)
FEASIBLE_FRACTION = 0.95  # share of QCQP test instances that must end feasible
MEDIAN_GAP = 0.05  # median relative gap to multi-start SLSQP allowed on the QCQPs
GOAL_SPEEDUP = 5.0  # the goal (reported beside): >= 5x faster than exact-projection PGD
STAR_STEPSIZE = 0.005  # the code's star-toy η₀ (both methods; the trajectories' fixed step)
STOP_TOL = 1e-5  # the code's |Δf| stopping tolerance


@dataclasses.dataclass(frozen=True)
class HomPGDConfig(ExperimentConfig):
    """Sizes of the ``hom-pgd`` experiment.

    Attributes:
      star_starts, star_maxiter, star_angles: seeded starts on the star toy, the iteration cap
        of Hom-PGD and exact-projection PGD there, the exact projection's angular grid.
      baseline_outer: rounds of the penalty / augmented-Lagrangian baselines (100 Adam steps each).
      timing_repeats: interleaved repeats of the per-run timings (the median is kept).
      qcqp_sizes: (n, m) problem sizes; quick is the note's toy (2, 3).
      qcqp_seed: seed of the held-out test instances (2030 for the toy, 2025 for the sweep).
      train_steps, batch_size, latent_pool: INN training steps, latents and fresh instances per
        step, size of the fixed latent sample pool.
      penalty_weights: candidate w_pen of the homeomorphism loss (the note's default is 10). With
        several, one INN is trained per weight and the one with the smallest median gap on
        ``validation_instances`` instances (seed ``qcqp_seed + 1``, never the test ones) is used.
      encoder_hidden, hidden: QuadMixer encoder width (and embedding size); MADE width (None:
        max(n + 1, 64)).
      test_instances: held-out instances per size.
      hom_starts: Hom-PGD starts per instance (the centre and uniform latents, one vmapped
        solve; the best feasible end point is kept). SLSQP gets ``slsqp_starts``.
      hom_maxiter: Hom-PGD iteration cap on the QCQPs (None: 500 for n = 2, 10 n above).
      exact_pgd_instances, exact_pgd_time_limit_s: instances solved by SLSQP-projection PGD for
        the time ratio, and its wall-clock limit (a capped run makes the speed-up a lower bound).
      eps_samples: latent samples per instance for ε_inn.
    """

    star_starts: int = 50
    star_maxiter: int = 2000
    star_angles: int = 2048
    baseline_outer: int = 80
    timing_repeats: int = 3
    qcqp_sizes: tuple[tuple[int, int], ...] = ((2, 3),)
    qcqp_seed: int = 2030
    train_steps: int = 3000
    penalty_weights: tuple[float, ...] = (1.0, 3.0, 10.0)
    validation_instances: int = 20
    batch_size: int = 256
    latent_pool: int = 10_000
    encoder_hidden: int = 64
    hidden: int | None = None
    test_instances: int = 20
    hom_starts: int = 20
    hom_maxiter: int | None = None
    slsqp_starts: int = 20
    exact_pgd_instances: int = 5
    exact_pgd_time_limit_s: float = 60.0
    eps_samples: int = 2000

    @classmethod
    def smoke(cls):
        return cls(
            star_starts=6,
            star_maxiter=400,
            star_angles=512,
            baseline_outer=3,
            timing_repeats=1,
            train_steps=40,
            batch_size=32,
            latent_pool=512,
            encoder_hidden=8,
            hidden=8,
            test_instances=3,
            penalty_weights=(10.0,),
            hom_starts=3,
            hom_maxiter=50,
            slsqp_starts=2,
            exact_pgd_instances=1,
            eps_samples=64,
        )

    @classmethod
    def quick(cls):
        return cls()

    @classmethod
    def full(cls):
        sizes = tuple((n, m) for n in (10, 30, 50) for m in (10, 100, 1000))
        return cls(
            star_starts=200,
            qcqp_sizes=sizes,
            qcqp_seed=2025,
            train_steps=10_000,
            batch_size=64,
            test_instances=3,
            validation_instances=3,
            slsqp_starts=5,
            exact_pgd_instances=2,
        )


# --------------------------------------------------------------------------------------------
# (a) The star toy.


def _timed(fn, *args, **kwargs):
    start = time.perf_counter()
    out = jax.block_until_ready(fn(*args, **kwargs))
    return out, time.perf_counter() - start


def _run_star(config: HomPGDConfig, rng_key, progress: Progress) -> tuple[dict, list]:
    with jax.enable_x64(True):
        # z₀ ~ N(0, I) mapped into the disk by Π_𝔹 (points outside land on the circle).
        z0s = solvers.project_ball(jax.random.normal(rng_key, (config.star_starts, 2)))
        z0s = z0s.astype(jnp.float64)
        solver = solvers.star_hom_pgd(config.star_maxiter)
        projection = lambda y: solvers.star_projection(y, config.star_angles)  # noqa: E731
        outer, star = config.baseline_outer, (solvers.star_objective, solvers.star_constraint)
        methods = {
            "hom_pgd": jax.jit(solver.run),
            "exact_pgd": jax.jit(
                lambda x0: solvers.exact_projection_pgd(
                    solvers.star_objective, projection, x0, maxiter=config.star_maxiter
                )
            ),
            "penalty": jax.jit(lambda x0: solvers.penalty_method(*star, x0, outer=outer)),
            "alm": jax.jit(lambda x0: solvers.augmented_lagrangian(*star, x0, outer=outer)),
        }
        x0s = jax.vmap(solvers.star_homeomorphism)(z0s)
        compile_start = time.perf_counter()
        for name, fn in methods.items():
            jax.block_until_ready(fn((z0s if name == "hom_pgd" else x0s)[0]))
        compile_s = time.perf_counter() - compile_start

        rows = {name: [] for name in methods}
        times = {name: [] for name in methods}
        starts = progress.track(
            range(config.star_starts), total=config.star_starts, description="star toy: starts"
        )
        for i in starts:
            per = {name: [] for name in methods}
            outs = {}
            # Interleaved: the two timed methods alternate, the penalty baselines run once.
            for name in ["hom_pgd", "exact_pgd"] * config.timing_repeats + ["penalty", "alm"]:
                outs[name], elapsed = _timed(methods[name], (z0s if name == "hom_pgd" else x0s)[i])
                per[name].append(elapsed)
            z, state = outs.pop("hom_pgd")
            hom = (float(state.value), int(state.iter_num), float(state.violation))
            rows["hom_pgd"].append((solvers.star_homeomorphism(z), *hom))
            for name, out in outs.items():
                violation = max(0.0, float(solvers.star_constraint(out.x)[0]))
                rows[name].append((out.x, float(out.value), int(out.iterations), violation))
            for name in rows:
                times[name].append(float(np.median(per[name])))

        summary = {}
        for name, runs in rows.items():
            values = np.array([r[1] for r in runs])
            violations = np.array([r[3] for r in runs])
            reached = (values <= STAR_SUCCESS) & (violations <= ZERO_VIOLATION)
            summary[name] = {
                "best_f": float(values.min()),
                "median_f": float(np.median(values)),
                "fraction_global": float(np.mean(reached)),
                "max_violation": float(violations.max()),
                "median_iterations": float(np.median([r[2] for r in runs])),
                "median_time_per_run_s": float(np.median(times[name])),
                "values": values.tolist(),
            }
        best = int(np.argmin([r[1] for r in rows["hom_pgd"]]))
        summary["hom_pgd"]["best_x"] = np.asarray(rows["hom_pgd"][best][0]).tolist()
        summary["compile_time_s"] = compile_s
        summary["speedup_vs_exact_pgd"] = (
            summary["exact_pgd"]["median_time_per_run_s"]
            / summary["hom_pgd"]["median_time_per_run_s"]
        )
        summary["starts_z0"] = np.asarray(z0s).tolist()
        trajectories = _star_trajectories(solver, projection, z0s[: min(4, len(z0s))])
    return summary, trajectories


def _star_trajectories(solver, projection, z0s, steps: int = 300):
    """Iterates of both methods (fixed η = 0.005) from a few starts, for the figure."""

    @jax.jit
    def paths(z0):
        def hom_step(carry, _):
            z, state = solver.update(*carry)
            return (z, state), solvers.star_homeomorphism(z)

        def pgd_step(x, _):
            x = projection(x - STAR_STEPSIZE * jax.grad(solvers.star_objective)(x))
            return x, x

        x0 = solvers.star_homeomorphism(z0)
        _, hom = jax.lax.scan(hom_step, (z0, solver.init_state(z0)), None, steps)
        _, pgd = jax.lax.scan(pgd_step, x0, None, steps)
        return jnp.concatenate([x0[None], hom]), jnp.concatenate([x0[None], pgd])

    return [tuple(np.asarray(p) for p in paths(z0)) for z0 in z0s]


def _star_figure(summary, trajectories) -> Figure:
    fig = Figure(figsize=(11, 4.8))
    axes = fig.subplots(1, 2)
    theta = np.linspace(0, 2 * np.pi, 800)
    boundary = np.asarray(solvers.star_boundary(jnp.asarray(theta)))
    ax = axes[0]
    ax.fill(boundary[:, 0], boundary[:, 1], color="lightblue", alpha=0.6, label="K (star)")
    grid = np.linspace(-1.8, 1.8, 200)
    gx, gy = np.meshgrid(grid, grid)
    ax.contour(gx, gy, 0.3 * (gx - 1) ** 2 + 0.7 * (gy - 1) ** 2, 15, colors="gray", linewidths=0.5)
    for i, (hom, pgd) in enumerate(trajectories):
        ax.plot(hom[:, 0], hom[:, 1], "C3-", lw=1.2, label="Hom-PGD" if i == 0 else None)
        ax.plot(
            pgd[:, 0], pgd[:, 1], "C0--", lw=1.2, label="exact-projection PGD" if i == 0 else None
        )
        ax.plot(hom[0, 0], hom[0, 1], "ko", ms=3)
    ax.plot(*solvers.STAR_OPTIMUM, "k*", ms=12, label="global optimum")
    ax.set_aspect("equal")
    ax.legend(loc="lower left", fontsize=8)
    ax.set_title("star toy: trajectories (x-space)")
    ax = axes[1]
    labels = {"hom_pgd": "Hom-PGD", "exact_pgd": "exact PGD", "penalty": "penalty", "alm": "ALM"}
    data = [np.maximum(np.array(summary[k]["values"]), 1e-3) for k in labels]
    ax.boxplot(data)
    ax.set_xticks(range(1, len(labels) + 1), list(labels.values()))
    ax.axhline(solvers.STAR_OPTIMUM_VALUE, color="k", ls=":", label="f*")
    ax.set_yscale("log")
    ax.set_ylabel("final f")
    ax.set_title("final objective over starts")
    ax.legend()
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------------------------
# (b) QCQPs with a learned map.


def _train_qcqp_net(n, m, config: HomPGDConfig, rng_key, penalty_weight, progress):
    """One conditional INN trained on fresh instances; the same init and keys for every weight."""
    train_key, latent_key, net_key = jax.random.split(rng_key, 3)
    rngs = nnx.Rngs(int(jax.random.randint(net_key, (), 0, 2**30)))
    net = solvers.qcqp_homeomorphism_net(
        n, encoder_hidden=config.encoder_hidden, hidden=config.hidden, rngs=rngs
    )
    start = time.perf_counter()
    trained = train_homeomorphism(
        net,
        solvers.qcqp_constraints_from_condition,
        sample_latents(latent_key, config.latent_pool, n),
        rng_key=train_key,
        num_steps=config.train_steps,
        batch_size=config.batch_size,
        sample_conditions=solvers.qcqp_condition_sampler(n, m),
        penalty_weight=penalty_weight,
        chunk_size=min(100, config.train_steps),
        progress=progress,
    )
    return trained, time.perf_counter() - start


def _relative_gap(value: float, reference: float) -> float | None:
    defined = np.isfinite(reference) and reference != 0
    return (value - reference) / abs(reference) if defined else None


def _multistart(model, config: HomPGDConfig, cache: dict):
    """``(solver, solve_many(z0s, weights, instance))``: one compiled vmapped solve per network
    architecture (the weights are an argument, so every w_pen's network shares it)."""
    graphdef = nnx.split(model, nnx.Param, ...)[0]
    if graphdef not in cache:
        solver = solvers.qcqp_hom_pgd(model, maxiter=config.hom_maxiter)
        cache[graphdef] = solver, jax.jit(jax.vmap(solver.run, in_axes=(0, None, None)))
    return cache[graphdef]


def _weights(model):  # what qcqp_hom_pgd's solver takes: (params, rest) of the network
    return nnx.split(model, nnx.Param, ...)[1:]


def _solve_instance(multistart, weights, instance, z0s, repeats: int = 1) -> dict:
    """Hom-PGD from every start in ``z0s`` (one vmapped run); best feasible and centre-only."""
    solver, solve_many = multistart
    times = []
    for _ in range(repeats):
        (zs, states), elapsed = _timed(solve_many, z0s, weights, instance)
        times.append(elapsed)
    values, violations = np.asarray(states.value), np.asarray(states.violation)
    best, feasible = solvers.best_feasible_start(values, violations, FEASIBILITY_TOL)
    return {
        "x": np.asarray(solver.homeomorphism(zs[best], weights, instance)).tolist(),
        "value": float(values[best]),
        "violation": float(violations[best]),
        "feasible": feasible,
        "iterations": int(np.asarray(states.iter_num)[best]),
        "time_s": float(np.median(times)),
        "centre_value": float(values[0]),
        "centre_violation": float(violations[0]),
    }


def _validation_gap(multistart, model, n, m, config, z0s, progress) -> float:
    """Median best-of-starts gap on the validation instances (seed ``qcqp_seed + 1``)."""
    keys = jax.random.split(jax.random.key(config.qcqp_seed + 1), config.validation_instances)
    gaps = []
    for i in progress.track(
        range(len(keys)), total=len(keys), description=f"QCQP n={n} m={m}: validation"
    ):
        instance = solvers.sample_qcqp(keys[i], n, m)
        ref = solvers.slsqp_multistart(instance, config.slsqp_starts, seed=10_000 + i)["value"]
        out = _solve_instance(multistart, _weights(model), instance, z0s)
        gap = _relative_gap(out["value"], ref) if out["feasible"] else None
        gaps.append(np.inf if gap is None else gap)
    return float(np.median(gaps))


def _run_qcqp(n: int, m: int, config: HomPGDConfig, rng_key, progress: Progress) -> dict:
    train_key, eps_key, start_key = jax.random.split(rng_key, 3)
    z0s = solvers.latent_starts(start_key, config.hom_starts, n)

    # Model selection on validation instances (never the test ones): one INN per w_pen.
    trained, train_times, validation, cache = {}, {}, {}, {}
    for weight in config.penalty_weights:
        trained[weight], train_times[weight] = _train_qcqp_net(
            n, m, config, train_key, weight, progress
        )
        if len(config.penalty_weights) > 1:
            model = trained[weight].model
            multistart = _multistart(model, config, cache)
            validation[weight] = _validation_gap(multistart, model, n, m, config, z0s, progress)
    weight = solvers.select_penalty_weight(validation) if validation else config.penalty_weights[0]
    model = trained[weight].model
    weights = _weights(model)
    solver, solve_many = multistart = _multistart(model, config, cache)

    keys = jax.random.split(jax.random.key(config.qcqp_seed), config.test_instances)
    instances = [solvers.sample_qcqp(k, n, m) for k in keys]
    jax.block_until_ready(solve_many(z0s, weights, instances[0]))  # compile once
    eps_latents = sample_latents(eps_key, config.eps_samples, n)
    outside_fraction = jax.jit(functools.partial(solver.outside_fraction, eps_latents))

    rows = []
    for i in progress.track(
        range(len(instances)), total=len(instances), description=f"QCQP n={n} m={m}: instances"
    ):
        instance = instances[i]
        row = _solve_instance(multistart, weights, instance, z0s, repeats=config.timing_repeats)
        reference = solvers.slsqp_multistart(instance, config.slsqp_starts, seed=i)
        ref = reference["value"]
        row["slsqp_x"] = None if reference["x"] is None else np.asarray(reference["x"]).tolist()
        row["slsqp_value"] = ref
        row["slsqp_time_s"] = reference["time_s"]
        row["gap"] = _relative_gap(row["value"], ref)
        centre_ok = row["centre_violation"] <= FEASIBILITY_TOL
        row["centre_gap"] = _relative_gap(row["centre_value"], ref) if centre_ok else None
        row["eps_inn"] = float(outside_fraction(weights, instance))
        if i < config.exact_pgd_instances:
            pgd, row["exact_pgd_time_s"] = _timed(
                solvers.slsqp_projection_pgd,
                instance,
                np.zeros(n),
                stepsize=0.1,
                maxiter=solver.maxiter,
                tol=STOP_TOL,
                time_limit_s=config.exact_pgd_time_limit_s,
                feasibility_tol=FEASIBILITY_TOL,
            )
            for key in ("value", "violation", "iterations", "capped"):
                row[f"exact_pgd_{key}"] = pgd[key]
            row["exact_pgd_gap"] = _relative_gap(pgd["value"], ref)
        rows.append(row)

    def column(key):
        return np.array([r[key] for r in rows], dtype=float)

    timed = [r for r in rows if "exact_pgd_time_s" in r]
    hom_time = float(np.mean([r["time_s"] for r in timed]))
    pgd_time = float(np.mean([r["exact_pgd_time_s"] for r in timed]))
    history = trained[weight].history
    return {
        "n": n,
        "m": m,
        "penalty_weight": weight,
        "validation_median_gap": {str(w): g for w, g in validation.items()},
        "train_time_s": train_times[weight],
        "train_steps": config.train_steps,
        "final_train_loss": float(np.mean(history["loss"][-100:])),
        "train_violation_fraction": float(np.mean(history["violation_fraction"][-100:])),
        "hom_starts": int(z0s.shape[0]),
        "feasible_fraction": float(np.mean([r["feasible"] for r in rows])),
        "median_gap": float(np.nanmedian(column("gap"))),
        "mean_gap": float(np.nanmean(column("gap"))),
        "centre_median_gap": float(np.nanmedian(column("centre_gap"))),
        "eps_inn": float(np.mean([r["eps_inn"] for r in rows])),
        "hom_time_per_instance_s": hom_time,
        "exact_pgd_time_per_instance_s": pgd_time,
        "speedup_vs_exact_pgd": pgd_time / hom_time,
        "exact_pgd_median_gap": float(
            np.nanmedian(np.array([r["exact_pgd_gap"] for r in timed], dtype=float))
        ),
        "exact_pgd_capped": any(r["exact_pgd_capped"] for r in timed),
        "instances": rows,
        "loss_history": history["loss"][:: max(1, config.train_steps // 200)].tolist(),
        "_model": model,
        "_instances": instances,
    }


def _qcqp_figure(results) -> Figure:
    res = results[0]
    fig = Figure(figsize=(15, 4.5))
    axes = fig.subplots(1, 3)
    ax = axes[0]
    ax.plot(np.linspace(0, res["train_steps"], len(res["loss_history"])), res["loss_history"])
    ax.set_xlabel("training step")
    ax.set_ylabel("homeomorphism loss")
    ax.set_yscale("symlog", linthresh=1.0)
    ax.set_title(f"INN training (n={res['n']}, m={res['m']})")
    ax = axes[1]
    gaps = [np.nan if r["gap"] is None else r["gap"] for r in res["instances"]]
    ax.bar(
        range(len(gaps)),
        gaps,
        color=["C2" if r["violation"] <= FEASIBILITY_TOL else "C3" for r in res["instances"]],
    )
    ax.axhline(MEDIAN_GAP, color="k", ls=":", label="5% target")
    ax.set_xlabel("test instance")
    ax.set_ylabel("relative gap to SLSQP multi-start")
    ax.set_title(f"median gap {res['median_gap']:.1%}, ε_inn {res['eps_inn']:.1%}")
    ax.legend()
    if res["n"] == 2:
        _draw_qcqp_instance(axes[2], res["_model"], res["_instances"][0], res["instances"][0])
    fig.tight_layout()
    return fig


def _draw_qcqp_instance(ax, model, instance, row):
    grid = np.linspace(-5.2, 5.2, 240)
    gx, gy = np.meshgrid(grid, grid)
    points = jnp.asarray(np.stack([gx.ravel(), gy.ravel()], 1), jnp.float32)

    @jax.jit
    def evaluate(points, instance):
        inside = jax.vmap(lambda x: jnp.max(solvers.qcqp_constraints(x, instance)) <= 0)(points)
        return inside, jax.vmap(lambda x: solvers.qcqp_objective(x, instance))(points)

    inside, values = evaluate(points, instance)
    ax.contourf(
        gx, gy, np.asarray(inside).reshape(gx.shape), levels=[0.5, 1.5], colors=["lightblue"]
    )
    ax.contour(gx, gy, np.asarray(values).reshape(gx.shape), 15, colors="gray", linewidths=0.5)
    theta = jnp.linspace(0, 2 * jnp.pi, 400)
    condition = solvers.qcqp_condition(instance)
    graphdef, state = nnx.split(model)
    decode = jax.jit(lambda state, z, c: nnx.merge(graphdef, state)(z, c)[0])
    for radius, style in ((1.0, "r-"), (0.5, "r:")):
        circle = radius * jnp.stack([jnp.cos(theta), jnp.sin(theta)], 1)
        edge = np.asarray(decode(state, circle, condition))
        ax.plot(edge[:, 0], edge[:, 1], style, lw=1.2, label="Φ(∂𝔹)" if radius == 1.0 else "Φ(½∂𝔹)")
    if row.get("x") is not None:
        ax.plot(*row["x"], "r*", ms=12, label="Hom-PGD")
    if row.get("slsqp_x") is not None:
        ax.plot(*row["slsqp_x"], "k+", ms=12, mew=2, label="SLSQP multi-start")
    ax.set_aspect("equal")
    ax.set_title(f"instance 0: Hom-PGD {row['value']:.3f}, SLSQP {row['slsqp_value']:.3f}")
    ax.legend(loc="lower left", fontsize=8)


# --------------------------------------------------------------------------------------------
# The experiment.


@register("hom-pgd", config=HomPGDConfig, claim=CLAIM)
def run(config: HomPGDConfig, rng_key: jax.Array, progress: Progress) -> Result:
    """Runs (a) the star toy and (b) the QCQPs, and checks the note's verdict rule."""
    star_key, qcqp_key = jax.random.split(rng_key)
    star, trajectories = _run_star(config, star_key, progress)
    qcqp = [
        _run_qcqp(n, m, config, jax.random.fold_in(qcqp_key, 1000 * n + m), progress)
        for n, m in config.qcqp_sizes
    ]
    figures = {"star": _star_figure(star, trajectories), "qcqp": _qcqp_figure(qcqp)}

    hom, pgd = star["hom_pgd"], star["exact_pgd"]
    speedup = star["speedup_vs_exact_pgd"]
    goal = "met" if speedup >= GOAL_SPEEDUP else "not met"
    parts = [
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
    for res in qcqp:
        label = f"(b) QCQP n={res['n']} m={res['m']}"
        parts.append(
            check(
                f"{label}: >= 95% of instances end feasible (violation <= 1e-5)",
                f"{res['feasible_fraction']:.0%} of {len(res['instances'])} instances "
                f"(ε_inn = {res['eps_inn']:.1%} of Φ(latent samples) outside K)",
                res["feasible_fraction"] >= FEASIBLE_FRACTION,
            )
        )
        parts.append(
            check(
                f"{label}: median relative gap to multi-start SLSQP <= 5%",
                f"median gap {res['median_gap']:.1%} (mean {res['mean_gap']:.1%}; centre start "
                f"alone {res['centre_median_gap']:.1%}) over {res['hom_starts']} starts, w_pen "
                f"{res['penalty_weight']:g} chosen on validation instances "
                f"{res['validation_median_gap']}, {res['train_steps']} training steps; "
                f"SLSQP-projection PGD gap "
                f"{res['exact_pgd_median_gap']:.1%}; Hom-PGD {res['speedup_vs_exact_pgd']:.0f}x "
                "faster per instance",
                res["median_gap"] <= MEDIAN_GAP,
            )
        )

    qcqp_metrics = [{k: v for k, v in res.items() if not k.startswith("_")} for res in qcqp]
    metrics = {
        "star": star,
        "qcqp": qcqp_metrics,
        "goal_speedup_star": speedup,
        "goal_speedup_star_met": bool(speedup >= GOAL_SPEEDUP),
        "goal_speedup_qcqp": [res["speedup_vs_exact_pgd"] for res in qcqp],
        "eps_inn": [res["eps_inn"] for res in qcqp],
    }
    return Result(metrics=metrics, parts=parts, figures=figures)
