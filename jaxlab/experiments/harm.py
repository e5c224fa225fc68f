"""Experiment ``harm``: the harm-minimising update against its base optimizer (SGD-m, AdamW).

"Mitigating Per-Sample Harm in Stochastic Optimization" (ICML 2026; abstract only): a step that
solves a batch-sized no-harm problem on the last layer's statistics lowers per-sample
interference and improves generalisation, at a relative overhead that shrinks as the model grows.
The method is the note's reconstruction (``notes/harm.md``, :mod:`jaxlab.optim._harm`).

Setting: an MLP 64-128-128-10 (ReLU) on scikit-learn's bundled digits (70/30 split, 539 test
images), clean and with 20% of the training labels flipped (the harder variant), batch 64, 1200
steps; arms ``base`` (the optimizer alone), ``reweight`` (the last-layer proxy,
:func:`jaxlab.optim.harm_train_step`, the note's default), ``head`` (:func:`jaxlab.optim.harm`)
and ``exact`` (the full-model QP, :func:`jaxlab.optim.mlp_exact_harm_train_step`: the reference
the proxy approximates, trained in every cell), for SGD-m (β = 0.9) and AdamW, two learning
rates each, 10 paired seeds (initialisations and batches shared by the arms); seeds x learning
rates x data sets are vmapped, so each (optimizer, arm) is one program. Measured: the realised
harm rate (the fraction of the batch whose loss rises after the step, on the same batch), test
accuracy, and on probe batches of the reweight arm at steps 0, 400, 800 and 1200 the first-order
harm on the full model (exact per-sample gradients) of the base direction, of the proxy's
corrections (reweight, head, and reweight at each ridge of ``RIDGES``) and of the full-model QP:
the harmed fraction and the harm *mass* ``(1/B) Σ_i max(0, −⟨g_i, d⟩)``, reported as a ratio to
the base direction's at the same point. Overhead: the step time of reweight and head over the
base step at three widths.

Verdict (issue 40: every accuracy decision by a paired 95% Student-t interval over the 10 seeds;
one test image is 0.19 points). The note's calibrated rule gates: (a) "harm reduced" if
reweight's realised harm rate <= 0.7 x base at SGD-m lr 0.005 (clean data, seed means); (b)
"generalisation improved": ``unresolved`` when the interval of reweight's accuracy gain there
contains both 0 and +0.5 points, otherwise the note's rule on the mean (gain >= 0.5 points). The
issue's target, each half on its own and per cell by its interval: (c) lower realised harm than
base in every cell (both optimizers, learning rates and data sets), (d) higher test accuracy in
every cell (the count of cells resolved higher / lower / unresolved is the robust form of "higher
in k of 8 cells"), (e) relative overhead that shrinks as the width grows. (f) The full-model QP
leaves <= 1% first-order harm on the probes (the proxy's harm-mass ratios beside it). (g) The
exact-QP arm under gate (b), with exact − base and exact − proxy in every cell. (h) The library's
default ridge is the measured minimiser of the proxy's harm-mass ratio (or tied with it).
"""

from __future__ import annotations

import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from matplotlib.figure import Figure

from jaxlab._src.experiments import ExperimentConfig, Progress, Result, check, register
from jaxlab._src.stats import t_interval
from jaxlab.optim import (
    HARM_ARMS,
    mlp_accuracy,
    mlp_harm_step_seconds,
    mlp_harm_training,
)
from jaxlab.optim._harm import DEFAULT_RIDGE, RIDGE_CHOICE_NOTE
from jaxlab.uncertainty import digits_shift_splits, flip_labels, mlp_init

__all__ = ["HarmConfig", "run"]

CLAIM = (
    "Mitigating Per-Sample Harm in Stochastic Optimization (ICML 2026): posing the update as a "
    "batch-sized problem on the last linear layer's statistics, solved by a few iterations inside "
    "SGD or AdamW, reduces per-sample interference (samples whose loss rises after a step) and "
    "improves generalisation, with a relative overhead that shrinks as the model grows."
)

# The note's calibrated rule.
HARM_RATIO = 0.7  # (a) "harm reduced": reweight's realised harm <= 0.7 x base ...
NOTE_LEARNING_RATE = 0.005  # ... at SGD-m lr 0.005, where the note's toy saw 0.32 -> 0.16
MIN_ACCURACY_GAIN = 0.005  # (b) "generalisation improved": >= 0.5 accuracy points
# Issue 40: decisions by paired 95% Student-t intervals over >= 10 seeds (one test image of 539
# is 0.19 points; 3 seeds gave a standard error of 0.28-0.56 points against the 0.5 threshold).
CONFIDENCE = 0.95
FULL_QP_MAX_HARM = 0.01  # (f) the exact QP is feasible at tau = 0: <= 1% left is solver slack
# The probes' reference is exact: no ridge (a ridge relaxes memorised samples' constraints, which
# left up to 31% of a late-training probe batch "harmed" at this tolerance in a trial run; without
# it 100 iterations matched scipy's NNLS to correlation 0.999999), and well past the proxy's budget.
FULL_QP_ITERATIONS = 1000
# The exact arm trains with the full-model dual at the proxy's iteration budget and no ridge.
EXACT_ARM_RIDGE = 0.0
# Ridges whose proxy corrections the probes measure (the library default is chosen among them).
RIDGES = (0.0, 1e-6, 1e-4, 1e-2, 1.0)
# First-order harm ⟨g_i, d⟩ < -1e-4 ‖g_i‖‖d‖ (float32 leaves tiny negatives on active constraints).
HARM_TOL = 1e-4
LABEL_NOISE = 0.2  # the harder variant: 20% of the training labels flipped
ARMS = HARM_ARMS
OPTIMIZERS = ("sgdm", "adamw")
# Directions compared on the probes (first-order harm rate and mass on the full model).
DIRECTIONS = ("base", "reweight", "head", "full_qp")


@dataclasses.dataclass(frozen=True)
class HarmConfig(ExperimentConfig):
    """Sizes of the ``harm`` experiment.

    Attributes:
      hidden: the MLP's hidden widths.
      steps, batch_size: training steps and batch.
      sgdm_learning_rates, adamw_learning_rates: two each (the first enters the note's rule
        for SGD-m); momentum 0.9, AdamW (0.9, 0.999), weight decay 1e-4.
      seeds: paired seeds per cell (initialisation and batches shared by the arms).
      num_iterations: dual iterations of the harm solvers (proxy and exact arm).
      probe_every: steps between full-model probes (exact per-sample gradients); the probes run
        at steps 0, probe_every, ..., and after the last step.
      overhead_widths, overhead_steps, overhead_repeats: the timing grid (hidden width of both
        layers), steps per timed call and timed calls.
    """

    hidden: tuple[int, ...] = (128, 128)
    steps: int = 1200
    batch_size: int = 64
    sgdm_learning_rates: tuple[float, ...] = (0.005, 0.02)
    adamw_learning_rates: tuple[float, ...] = (3e-4, 1e-3)
    seeds: int = 10
    num_iterations: int = 100
    probe_every: int = 400
    overhead_widths: tuple[int, ...] = (64, 256, 1024)
    overhead_steps: int = 20
    overhead_repeats: int = 9

    @classmethod
    def smoke(cls):
        # Compile-bound: a tiny net, few steps; the same number of programs as quick.
        return cls(
            hidden=(16,),
            steps=20,
            batch_size=16,
            seeds=2,
            num_iterations=10,
            probe_every=10,
            overhead_widths=(8, 32),
            overhead_steps=2,
            overhead_repeats=1,
        )

    @classmethod
    def quick(cls):
        return cls()

    @classmethod
    def full(cls):
        return cls(
            hidden=(512, 512, 512),
            steps=10_000,
            batch_size=128,
            seeds=10,
            probe_every=2500,
            overhead_widths=(256, 1024, 4096),
        )


# --------------------------------------------------------------------------------------------
# Arms: glue from the library's steps to (params, state, realised harm rate).


def _optimizer(name, lr):
    if name == "sgdm":
        return optax.sgd(lr, momentum=0.9)
    return optax.adamw(lr, b1=0.9, b2=0.999, weight_decay=1e-4)


def _ridge(arm):
    return EXACT_ARM_RIDGE if arm == "exact" else DEFAULT_RIDGE


# Test accuracy of each member (one program for every arm and optimizer).
_accuracy = jax.jit(jax.vmap(mlp_accuracy, in_axes=(0, None, None)))


def _run_optimizer(config, name, data, labels_by_set, rng_key, progress):
    """All arms of one optimizer: per-member realised harm, accuracy and (reweight) probes."""
    lrs = config.sgdm_learning_rates if name == "sgdm" else config.adamw_learning_rates
    sets = list(labels_by_set)
    grid = [(s, i, seed) for s in sets for i in range(len(lrs)) for seed in range(config.seeds)]
    lr = jnp.asarray([lrs[i] for _, i, _ in grid], jnp.float32)
    labels = jnp.stack([labels_by_set[s] for s, _, _ in grid])
    # Seed k initialises and samples the same way in every cell and arm (paired comparisons).
    seed_keys = jax.random.split(rng_key, config.seeds)
    init_keys = jnp.stack([jax.random.fold_in(seed_keys[seed], 0) for *_, seed in grid])
    out = {}
    chunks = max(config.steps // config.probe_every, 1)
    probe_steps = [c * config.probe_every for c in range(chunks + 1)]
    for arm in progress.track(ARMS, total=len(ARMS), description=f"{name} arms"):
        programs = mlp_harm_training(
            arm,
            lambda lr: _optimizer(name, lr),
            lambda key: mlp_init(key, (64, *config.hidden, 10)),
            data.train_x,
            batch_size=config.batch_size,
            chunk_steps=config.probe_every,
            num_iterations=config.num_iterations,
            ridge=_ridge(arm),
            probe_ridges=RIDGES,
            full_qp_iterations=FULL_QP_ITERATIONS,
            tol=HARM_TOL,
        )
        keys = [
            jnp.stack([jax.random.fold_in(seed_keys[seed], c + 1) for *_, seed in grid])
            for c in range(chunks + 1)
        ]
        params, _, rates, probes = programs.train(
            init_keys, keys, lr, labels, probe=arm == "reweight"
        )
        bins = max(rates.shape[1] // 30, 1)
        out[arm] = {
            "harm_rate": rates.mean(axis=1).tolist(),
            "harm_rate_curve": rates[:, : rates.shape[1] // bins * bins]
            .reshape(len(grid), -1, bins)
            .mean(-1)
            .mean(0)
            .tolist(),
            "test_accuracy": np.asarray(_accuracy(params, data.test_x, data.test_y)).tolist(),
            "nonfinite_members": int(np.sum(~np.isfinite(rates.mean(axis=1)))),
        }
        if probes is not None:  # (members, probe times) per measured quantity
            out[arm]["probes"] = {k: v.tolist() for k, v in probes.items()}
            out[arm]["probe_steps"] = probe_steps
    cells = [{"data": s, "learning_rate": lrs[i], "seed": seed} for s, i, seed in grid]
    return {"cells": cells, "arms": out}


def _overhead(config, rng_key):
    """Median seconds per step of each arm (SGD-m, one model) at each width; ratios to base.

    The arms are timed in turn (base, reweight, head, base, ...) so that a slow spell of a shared
    machine hits all of them, as the benchmarks do.
    """
    rows = []
    for width in config.overhead_widths:
        params = mlp_init(rng_key, (64, width, width, 10))
        x = jax.random.uniform(rng_key, (config.batch_size, 64))
        y = jax.random.randint(rng_key, (config.batch_size,), 0, 10)
        times = mlp_harm_step_seconds(
            _optimizer("sgdm", 0.01),
            params,
            x,
            y,
            num_iterations=config.num_iterations,
            ridges={arm: _ridge(arm) for arm in ARMS},
            steps=config.overhead_steps,
            repeats=config.overhead_repeats,
        )
        rows.append(
            {
                "width": width,
                "seconds": times,
                "reweight_ratio": times["reweight"] / times["base"],
                "head_ratio": times["head"] / times["base"],
            }
        )
    return rows


# --------------------------------------------------------------------------------------------
# Summaries, verdict, figures.


def _interval(values):
    mean, low, high = t_interval(values, CONFIDENCE)
    return [mean, low, high]


def _sign(interval):
    """'higher' / 'lower' when the interval excludes 0, else 'unresolved'."""
    if interval[1] > 0:
        return "higher"
    if interval[2] < 0:
        return "lower"
    return "unresolved"


def accuracy_gate(interval) -> str:
    """The note's (b) decided by a paired interval of the accuracy gain (fractions, not points).

    ``unresolved`` when the interval contains both 0 and ``MIN_ACCURACY_GAIN`` (issue 40);
    otherwise the note's rule on the mean: ``pass`` if it gains at least ``MIN_ACCURACY_GAIN``.
    """
    _, low, high = interval
    if low <= 0.0 <= high and low <= MIN_ACCURACY_GAIN <= high:
        return "unresolved"
    return "pass" if interval[0] >= MIN_ACCURACY_GAIN else "fail"


def _mass_ratio(probes, name, members=slice(None), times=None):
    """Σ mass(name) / Σ mass(base) over ``members`` and probe ``times`` (None: all)."""
    times = slice(None) if times is None else times
    num = np.asarray(probes[f"{name}_mass"], float)[members][:, times]
    den = np.asarray(probes["base_mass"], float)[members][:, times]
    return float(np.sum(num) / max(np.sum(den), 1e-30))


def _cell_summary(result):
    """(data, lr) -> per-arm seed means, paired intervals and (reweight) probe mass ratios."""
    cells = result["cells"]
    keys = sorted({(c["data"], c["learning_rate"]) for c in cells}, key=str)
    arms = result["arms"]
    probes = arms["reweight"]["probes"]
    steps = arms["reweight"]["probe_steps"]
    out = {}
    for data, lr in keys:
        idx = [i for i, c in enumerate(cells) if (c["data"], c["learning_rate"]) == (data, lr)]
        acc = {arm: np.asarray(arms[arm]["test_accuracy"])[idx] for arm in ARMS}
        rate = {arm: np.asarray(arms[arm]["harm_rate"])[idx] for arm in ARMS}
        row = {
            arm: {"harm_rate": float(rate[arm].mean()), "test_accuracy": float(acc[arm].mean())}
            for arm in ARMS
        }
        row["accuracy_gain"] = {
            "reweight": _interval(acc["reweight"] - acc["base"]),
            "exact": _interval(acc["exact"] - acc["base"]),
            "exact_minus_reweight": _interval(acc["exact"] - acc["reweight"]),
            "head": _interval(acc["head"] - acc["base"]),
        }
        row["harm_change"] = {
            arm: _interval(rate[arm] - rate["base"]) for arm in ("reweight", "head", "exact")
        }
        row["probe_rate"] = {
            d: float(np.mean(np.asarray(probes[d], float)[idx])) for d in DIRECTIONS
        }
        row["mass_ratio"] = {
            d: [_mass_ratio(probes, d, idx, [t]) for t in range(len(steps))] for d in DIRECTIONS[1:]
        }
        row["weight_correlation"] = float(np.nanmean(np.asarray(probes["weight_correlation"])[idx]))
        out[f"{data}@{lr:g}"] = row
    return out


def _ridge_choice(results):
    """Per member (both optimizers), the proxy's harm-mass ratio at each ridge, paired."""
    per_member = {ridge: [] for ridge in RIDGES}
    for name in OPTIMIZERS:
        probes = results[name]["arms"]["reweight"]["probes"]
        for i in range(len(results[name]["cells"])):
            for ridge in RIDGES:
                per_member[ridge].append(_mass_ratio(probes, f"ridge_{ridge:g}", [i]))
    means = {ridge: float(np.mean(v)) for ridge, v in per_member.items()}
    best = min(RIDGES, key=lambda r: means[r])
    default_minus_best = _interval(
        np.asarray(per_member[DEFAULT_RIDGE]) - np.asarray(per_member[best])
    )
    consistent = best == DEFAULT_RIDGE or default_minus_best[1] <= 0.0
    return {
        "mean_mass_ratio": {f"{r:g}": means[r] for r in RIDGES},
        "best": best,
        "default": DEFAULT_RIDGE,
        "default_minus_best": default_minus_best,
        "default_is_best_or_tied": bool(consistent),
    }


def _figures(summary, overhead, curves, mass_by_time, probe_steps):
    fig = Figure(figsize=(18, 4.2))
    left, middle, masses, right = fig.subplots(1, 4)
    labels, x = [], 0
    for name in OPTIMIZERS:
        for cell, row in summary[name].items():
            for j, arm in enumerate(ARMS):
                left.bar(
                    x + 0.2 * j,
                    row[arm]["harm_rate"],
                    0.2,
                    color=f"C{j}",
                    label=arm if x == 0 else None,
                )
            for j, arm in enumerate(("reweight", "exact")):
                mean, low, high = (100 * v for v in row["accuracy_gain"][arm])
                middle.errorbar(
                    x + 0.2 * j,
                    mean,
                    yerr=[[mean - low], [high - mean]],
                    fmt="o",
                    color=f"C{j + 1 if arm == 'reweight' else 3}",
                    capsize=3,
                    label=f"{arm} − base" if x == 0 else None,
                )
            labels.append(f"{name}\n{cell}")
            x += 1
    for ax, title in (
        (left, "realised harm rate"),
        (middle, "test accuracy gain, points (95% interval)"),
    ):
        ax.set_xticks(np.arange(len(labels)) + 0.2, labels, fontsize=6)
        ax.set_title(title)
    middle.axhline(0.0, color="k", lw=0.6)
    middle.axhline(100 * MIN_ACCURACY_GAIN, color="k", lw=0.6, ls="--")
    left.legend(fontsize=8)
    middle.legend(fontsize=8)
    for name in OPTIMIZERS:
        for j, d in enumerate(DIRECTIONS[1:]):
            masses.plot(
                probe_steps,
                mass_by_time[name][d],
                "o-" if name == "sgdm" else "s--",
                color=f"C{j + 1}",
                label=f"{name} {d}",
            )
    masses.set_xlabel("training step of the probe")
    masses.set_ylabel("first-order harm mass / base's")
    masses.set_title("full-model harm mass ratio")
    masses.legend(fontsize=7)
    widths = [r["width"] for r in overhead]
    right.plot(widths, [r["reweight_ratio"] for r in overhead], "o-", label="reweight / base")
    right.plot(widths, [r["head_ratio"] for r in overhead], "s--", label="head / base")
    right.set_xscale("log", base=2)
    right.set_xlabel("hidden width")
    right.set_ylabel("step time ratio")
    right.legend(fontsize=8)
    fig.tight_layout()
    curve_fig = Figure(figsize=(6, 4))
    ax = curve_fig.subplots()
    for j, arm in enumerate(ARMS):
        ax.plot(curves[arm], color=f"C{j}", label=arm)
    ax.set_xlabel("training progress (bins)")
    ax.set_ylabel("realised harm rate (SGD-m, mean of members)")
    ax.legend(fontsize=8)
    curve_fig.tight_layout()
    return {"harm": fig, "harm_curves": curve_fig}


def _fmt(interval, scale=1.0, digits=2):
    mean, low, high = (scale * v for v in interval)
    return f"{mean:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"


def _sign_counts(rows, key, arm):
    signs = [_sign(r[key][arm]) for r in rows]
    return {s: signs.count(s) for s in ("higher", "lower", "unresolved")}


@register("harm", config=HarmConfig, claim=CLAIM)
def run(config: HarmConfig, rng_key: jax.Array, progress: Progress) -> Result:
    """Trains every arm (paired seeds), probes the full model, times the overhead."""
    if NOTE_LEARNING_RATE not in config.sgdm_learning_rates:
        raise ValueError(f"sgdm_learning_rates must include the note's {NOTE_LEARNING_RATE}")
    if config.steps % config.probe_every:
        raise ValueError("steps must be a multiple of probe_every")
    start = time.perf_counter()
    data_key, noise_key, train_key, time_key = jax.random.split(rng_key, 4)
    data = digits_shift_splits(data_key, in_classes=tuple(range(10)), noise_std=0.0)
    noisy = flip_labels(noise_key, data.train_y, LABEL_NOISE, 10)
    labels = {"clean": data.train_y, "noisy": noisy}
    results = {
        name: _run_optimizer(config, name, data, labels, jax.random.fold_in(train_key, i), progress)
        for i, name in enumerate(OPTIMIZERS)
    }
    overhead = _overhead(config, time_key)
    seconds = time.perf_counter() - start
    summary = {name: _cell_summary(results[name]) for name in OPTIMIZERS}
    probe_steps = results["sgdm"]["arms"]["reweight"]["probe_steps"]
    times = range(len(probe_steps))
    probes = {name: results[name]["arms"]["reweight"]["probes"] for name in OPTIMIZERS}
    mass_by_time = {  # every member of an optimizer, at each probe step
        name: {d: [_mass_ratio(probes[name], d, times=[t]) for t in times] for d in DIRECTIONS[1:]}
        for name in OPTIMIZERS
    }
    ridge = _ridge_choice(results)

    note_key = f"clean@{NOTE_LEARNING_RATE:g}"
    note_cell = summary["sgdm"][note_key]
    base, reweight = note_cell["base"], note_cell["reweight"]
    harm_ok = reweight["harm_rate"] <= HARM_RATIO * base["harm_rate"]
    gate_b = accuracy_gate(note_cell["accuracy_gain"]["reweight"])
    gate_g = accuracy_gate(note_cell["accuracy_gain"]["exact"])

    def status_check(claim, measured, status):
        return check(claim, measured, status == "pass", resolved=status != "unresolved")

    part_a = check(
        f"(note a) reweight's realised harm rate <= {HARM_RATIO} x base at SGD-m lr "
        f"{NOTE_LEARNING_RATE} (clean digits, mean of {config.seeds} seeds)",
        f"base {base['harm_rate']:.3f}, reweight {reweight['harm_rate']:.3f} (ratio "
        f"{reweight['harm_rate'] / max(base['harm_rate'], 1e-12):.2f}; paired change "
        f"{_fmt(note_cell['harm_change']['reweight'], digits=3)}), head "
        f"{note_cell['head']['harm_rate']:.3f}, exact QP {note_cell['exact']['harm_rate']:.3f}",
        harm_ok,
    )
    part_b = status_check(
        f"(note b) reweight's test accuracy >= base + {100 * MIN_ACCURACY_GAIN:g} points there, "
        f"by the paired {CONFIDENCE:.0%} interval over {config.seeds} seeds (unresolved when it "
        f"contains both 0 and +{100 * MIN_ACCURACY_GAIN:g}; else the note's rule on the mean)",
        f"{gate_b}: gain {_fmt(note_cell['accuracy_gain']['reweight'], 100)} points (base "
        f"{base['test_accuracy']:.4f}, reweight {reweight['test_accuracy']:.4f}, head "
        f"{note_cell['head']['test_accuracy']:.4f}, exact QP "
        f"{note_cell['exact']['test_accuracy']:.4f})",
        gate_b,
    )
    rows = [row for name in OPTIMIZERS for row in summary[name].values()]
    names = [f"{name} {cell}" for name in OPTIMIZERS for cell in summary[name]]
    harm_signs = _sign_counts(rows, "harm_change", "reweight")
    part_c = check(
        "(issue, interference) reweight's realised harm rate below base in every cell (SGD-m and "
        "AdamW, both learning rates, clean and 20% label noise), each by its paired "
        f"{CONFIDENCE:.0%} interval",
        f"resolved lower in {harm_signs['lower']}/{len(rows)} cells, higher in "
        f"{harm_signs['higher']}, unresolved in {harm_signs['unresolved']}: "
        + "; ".join(
            f"{n}: base {r['base']['harm_rate']:.3f}, reweight {r['reweight']['harm_rate']:.3f} "
            f"({_fmt(r['harm_change']['reweight'], digits=3)}), head {r['head']['harm_rate']:.3f}"
            f", exact {r['exact']['harm_rate']:.3f}"
            for n, r in zip(names, rows, strict=True)
        ),
        harm_signs["lower"] == len(rows),
        resolved=harm_signs["higher"] > 0 or harm_signs["unresolved"] == 0,
    )

    def gain_text(arm):
        return "; ".join(
            f"{n}: {_fmt(r['accuracy_gain'][arm], 100)}" for n, r in zip(names, rows, strict=True)
        )

    acc_signs = _sign_counts(rows, "accuracy_gain", "reweight")
    exact_signs = _sign_counts(rows, "accuracy_gain", "exact")
    part_d = check(
        "(issue, generalisation) reweight's test accuracy above base in every cell, each by its "
        f"paired {CONFIDENCE:.0%} interval (points)",
        f"resolved higher in {acc_signs['higher']}/{len(rows)} cells, lower in "
        f"{acc_signs['lower']}, unresolved in {acc_signs['unresolved']}: " + gain_text("reweight"),
        acc_signs["higher"] == len(rows),
        resolved=acc_signs["lower"] > 0 or acc_signs["unresolved"] == 0,
    )
    ratios = [r["reweight_ratio"] for r in overhead]
    shrinking = all(b < a for a, b in zip(ratios, ratios[1:], strict=False))
    part_e = check(
        "(issue, overhead) the relative overhead per step shrinks as the model widens",
        ", ".join(
            f"width {r['width']}: reweight {r['reweight_ratio']:.2f}x, head "
            f"{r['head_ratio']:.2f}x ({1e3 * r['seconds']['base']:.2f} ms base)"
            for r in overhead
        ),
        shrinking,
    )
    worst_full = max(r["probe_rate"]["full_qp"] for r in rows)
    part_f = check(
        f"the full-model QP (exact per-sample gradients) leaves <= {FULL_QP_MAX_HARM:.0%} "
        "first-order harm on the probe batches; the proxy's harm, as a mass ratio to the base "
        f"direction at the probe steps {probe_steps}, beside it",
        f"worst cell's full-QP harm rate {worst_full:.3f}; mass ratio to base by probe step: "
        + "; ".join(
            f"{name} {d} " + "/".join(f"{v:.2f}" for v in mass_by_time[name][d])
            for name in OPTIMIZERS
            for d in DIRECTIONS[1:]
        )
        + "; harm rate base/reweight/head/full QP and corr(proxy, full QP weights) per cell: "
        + "; ".join(
            f"{n}: "
            + "/".join(f"{r['probe_rate'][d]:.3f}" for d in DIRECTIONS)
            + f", {r['weight_correlation']:.2f}"
            for n, r in zip(names, rows, strict=True)
        ),
        worst_full <= FULL_QP_MAX_HARM,
    )
    part_g = status_check(
        "(issue) the exact full-model QP trained as an arm: the note's (b) applied to it (test "
        f"accuracy >= base + {100 * MIN_ACCURACY_GAIN:g} points at SGD-m lr {NOTE_LEARNING_RATE}, "
        "clean, by the paired interval); every cell's gain and exact − proxy beside it",
        f"{gate_g}: gain {_fmt(note_cell['accuracy_gain']['exact'], 100)} points; per cell "
        f"exact − base (resolved higher {exact_signs['higher']}, lower {exact_signs['lower']}, "
        f"unresolved {exact_signs['unresolved']}): "
        + gain_text("exact")
        + "; exact − reweight: "
        + gain_text("exact_minus_reweight"),
        gate_g,
    )
    part_h = check(
        f"the library's default ridge ({DEFAULT_RIDGE:g}) minimises the proxy's first-order harm "
        f"mass ratio among {RIDGES} (paired over members and probe times; ties by the "
        f"{CONFIDENCE:.0%} interval of default − best)",
        "mean mass ratio "
        + ", ".join(f"ρ={k}: {v:.3f}" for k, v in ridge["mean_mass_ratio"].items())
        + f"; best {ridge['best']:g}, default − best {_fmt(ridge['default_minus_best'], 1, 4)}"
        + f" ({RIDGE_CHOICE_NOTE})",
        ridge["default_is_best_or_tied"],
    )
    parts = [part_a, part_b, part_c, part_d, part_e, part_f, part_g, part_h]
    level = f"harm {'reduced' if harm_ok else 'not reduced'}, generalisation gate {gate_b}"
    reason = f"note's rule: {level}; exact-QP arm's gate: {gate_g}"
    failed = [p.claim for p in parts if p.status == "fail"]
    if failed:
        reason += "; failed: " + "; ".join(failed)
    curves = {arm: results["sgdm"]["arms"][arm]["harm_rate_curve"] for arm in ARMS}
    metrics = {
        "note_verdict": level,
        "verdict_inputs": {
            "note_cell": note_cell,
            "summary": summary,
            "overhead": overhead,
            "mass_ratio_by_probe_step": mass_by_time,
            "probe_steps": probe_steps,
            "ridge_choice": ridge,
        },
        "runs": results,
        "seconds": seconds,
    }
    figures = _figures(summary, overhead, curves, mass_by_time, probe_steps)
    return Result(metrics=metrics, parts=parts, figures=figures, reason=reason)
