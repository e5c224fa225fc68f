"""Every experiment's ``full`` profile in parts, in one table keyed by experiment name (issue 45).

:data:`TABLE` maps an experiment's name to its :class:`Entry`: the function ``config -> list of
RunPart`` (the parts in their fixed merge order, with their estimates) and the module functions
the run calls that are units of work (:class:`Unit`: rebound with
:func:`jaxlab._src.parts.as_unit`, so that the run function itself is unchanged). Kept apart from
the experiment modules so that a module holds its claim's run and nothing about how the run is
cut for an accelerator.

:func:`declare_all` declares the table's parts for every registered experiment
(``jaxlab.experiments`` calls it once every module is imported). The declaration is a picklable
:class:`Declared`, so a part run in a child process (``spawn``) finds it by reference, and calling
it rebinds the units in that process too (the runner reads the parts before it runs one).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from typing import Any

import jax
import numpy as np

from jaxlab._src import parts as _parts
from jaxlab._src.experiments import REGISTRY
from jaxlab._src.parts import CPU_FLOPS_PER_S, QUICK_BUDGET_S, RunPart, device_seconds

__all__ = ["TABLE", "Declared", "Entry", "Unit", "bind_units", "declare_all"]


@dataclasses.dataclass(frozen=True)
class Unit:
    """A module-level function of an experiment's module whose every call is a unit of work.

    Args:
      attribute: the function's name in the experiment's module.
      coords: the function's arguments -> the unit's coordinates.
      outputs: for a function returning a tuple the run unpacks, its length (``as_unit``).
    """

    attribute: str
    coords: Callable[..., Mapping[str, Any]]
    outputs: int | None = None


@dataclasses.dataclass(frozen=True)
class Entry:
    """One experiment's row: its parts function and the units to rebind in its module."""

    parts: Callable[[Any], list[RunPart]]
    units: tuple[Unit, ...] = ()


# --- One part: the whole run, scaled from quick ---------------------------------------------------


def _apub(config) -> list[RunPart]:
    return _parts.whole_run_parts(
        config,
        quick_cpu_s=432.0,
        source="README: 7.2 min on the shared 2-core machine",
        work=lambda c: (
            c.num_products
            * c.num_stations
            * c.num_resamples
            * c.trials
            * sum(c.sample_sizes)
            * len(c.alphas)
        ),
        work_text="LP size x bootstrap resamples x data sets x sample sizes x alphas",
        kind="host",
    )


def _credro(config) -> list[RunPart]:
    return _parts.whole_run_parts(
        config,
        quick_cpu_s=72.0,
        source="README: 1.0-1.2 CPU-minutes",
        work=lambda c: (
            c.seeds
            * c.batch_size
            * (3 * sum(set(c.sweep_steps) | {c.steps}) + c.steps)
            * sum(a * b for a, b in zip((64, *c.hidden), (*c.hidden, 10), strict=False))
        ),
        work_text="seeds x batch x training steps of every arm and budget x MLP weights",
        kind="small",
    )


def _error_feedback(config) -> list[RunPart]:
    return _parts.whole_run_parts(
        config,
        quick_cpu_s=QUICK_BUDGET_S,
        source="not in the README: the issues' quick budget",
        work=lambda c: c.random_points / 10 + c.ls_max_steps + c.het_max_steps + c.logistic_steps,
        work_text="worst-case search points / 10 + the three runs' step limits",
        kind="small",
    )


def _fab_hyperparameter(config) -> list[RunPart]:
    return _parts.whole_run_parts(
        config,
        quick_cpu_s=QUICK_BUDGET_S,
        source="not in the README: the issues' quick budget",
        work=lambda c: c.steps + 10 * c.exact_maxiter,
        work_text="rounds + 10 x exact iterations",
        kind="small",
    )


def _fab_hypercleaning(config) -> list[RunPart]:
    return _parts.whole_run_parts(
        config,
        quick_cpu_s=QUICK_BUDGET_S,
        source="not in the README: the issues' quick budget",
        work=lambda c: (c.steps + 10 * c.exact_maxiter) * (c.train_rows + c.val_rows),
        work_text="(rounds + 10 x exact iterations) x rows per agent",
        kind="small",
    )


def _harm(config) -> list[RunPart]:
    return _parts.whole_run_parts(
        config,
        quick_cpu_s=246.0,
        source="README: 4.1 CPU-minutes",
        work=lambda c: (
            c.seeds
            * c.steps
            * c.batch_size
            * sum(a * b for a, b in zip((64, *c.hidden), (*c.hidden, 10), strict=False))
        ),
        work_text="seeds x steps x batch x MLP weights",
        kind="small",
    )


def _mmfld(config) -> list[RunPart]:
    return _parts.whole_run_parts(
        config,
        quick_cpu_s=374.0,
        source="README: 374 CPU-seconds",
        work=lambda c: (
            c.chaos_seeds * sum(c.chaos_sizes) * c.chaos_particles_per_size * c.chaos_steps
        ),
        work_text="chaos seeds x particles x steps, the dominant term",
        kind="small",
        device_measured_s=94.0,
    )


def _msflow(config) -> list[RunPart]:
    return _parts.whole_run_parts(
        config,
        quick_cpu_s=318.0,
        source="README: 5.3 min on a quiet 2-core CPU",
        work=lambda c: (
            c.train_steps
            * c.batch_size
            * sum(
                a * b
                for a, b in zip(
                    (64 * c.image_scale**2, *c.hidden),
                    (*c.hidden, 64 * c.image_scale**2),
                    strict=False,
                )
            )
        ),
        work_text="flow training: steps x batch x MLP weights (the solves scale alike)",
        kind="dense",
    )


def _rambo(config) -> list[RunPart]:
    return _parts.whole_run_parts(
        config,
        quick_cpu_s=2700.0,
        source="README: quick unfinished after 45 CPU-minutes, a lower bound",
        work=lambda c: (
            len(c.problems)
            * c.seeds
            * c.num_iters
            * c.num_sweeps
            * len(c.schedules)
            * max(d for _, d in c.problems)
        ),
        work_text="problems x seeds x iterations x sweeps x schedules x dimension",
        kind="small",
    )


def _ucpo(config) -> list[RunPart]:
    return _parts.whole_run_parts(
        config,
        quick_cpu_s=44.0,
        source="README: 44 s of CPU",
        work=lambda c: (
            c.seeds * c.steps * (c.num_prompts + c.held_out_num_prompts) * (5 if c.ablations else 1)
        ),
        work_text="seeds x steps x prompts of both bandits x (1 + four ablation arms)",
        kind="small",
    )


# --- Split into units -----------------------------------------------------------------------------


def _async_delay(config) -> list[RunPart]:
    """One part per (optimizer, delay, lane); lanes are (λ, lr, seed) in that order."""
    flops = _parts.transformer_train_flops(
        config.d_model,
        config.num_layers,
        config.seq_len,
        config.batch_size,
        config.steps,
        vocab=config.vocab_size,
    )
    lanes = 2 * len(config.learning_rates) * config.seeds
    per_unit = config.lanes_per_unit or lanes
    out = []
    for name in config.optimizers:
        # DeVA's step costs 1.32x Muon's (README, the step-time benchmark).
        cpu = (1.32 if name == "deva" else 1.0) * per_unit * flops / CPU_FLOPS_PER_S
        for delay in (0, 1):
            for u in range(-(-lanes // per_unit)):
                out.append(
                    RunPart(
                        f"{name.replace('_', '-').replace('.', 'p')}-delay{delay}-lanes-{u}",
                        f"{name}, delay {delay}, lanes {u * per_unit}..{(u + 1) * per_unit - 1} "
                        f"of {lanes} (λ, lr, seed)",
                        {"arm": (f"{name}/delay{delay}",), "lanes": (u,)},
                        cpu_s=cpu,
                        device_s=device_seconds(cpu, "dense"),
                        estimate="6 P T FLOPs per step x steps at CPU_FLOPS_PER_S, over "
                        "DEVICE_SPEEDUP['dense'] on the device, plus DEVICE_START_S",
                    )
                )
    return out


# The toy is quick's own (64 seeds); quick took 9.4 min in all on a quiet 2-core CPU (README), the
# toy about half of it (not timed apart).
_DEVA_TOY_CPU_S = 280.0
# DeVA's step costs 1.32x Muon's (README, the step-time benchmark); AdamW's and Muon's are counted
# as 1x.
_DEVA_STEP_COST = {"deva": 1.32}


def _deva(config) -> list[RunPart]:
    """The toy, then one part per language-model run, the lr extensions last.

    An extension part computes its run only when the bracket of the runs before it asks for that
    lr (run it after the base grid's parts; when no extension is needed it computes nothing).
    """
    flops = _parts.transformer_train_flops(
        config.lm_d_model, config.lm_layers, config.lm_seq_len, config.lm_batch, config.lm_steps
    )
    how = (
        "6 P T FLOPs per step x steps at CPU_FLOPS_PER_S (x the step-time ratio), over "
        "DEVICE_SPEEDUP['dense'] on the device, plus DEVICE_START_S"
    )
    out = [
        RunPart(
            "toy",
            "the quadratic toy (64 seeds, every method and lr)",
            {"toy": ("all",)},
            cpu_s=_DEVA_TOY_CPU_S,
            device_s=device_seconds(_DEVA_TOY_CPU_S, "small"),
            estimate="about half of quick's 9.4 min (README), DEVICE_SPEEDUP['small']",
        )
    ]
    factor = config.lm_lr_factor
    for extension in (False, True):
        for method in config.lm_methods:
            grid = sorted(getattr(config, f"lm_lrs_{method}"))
            lrs = grid
            if extension:  # divided and multiplied step by step, as the bracket does
                low, high, lrs = grid[0], grid[-1], []
                for _ in range(config.lm_max_extensions):
                    low, high = low / factor, high * factor
                    lrs += [low, high]
            cpu = _DEVA_STEP_COST.get(method, 1.0) * flops / CPU_FLOPS_PER_S
            for lr in lrs:
                for s in range(config.lm_seeds):
                    out.append(
                        RunPart(
                            f"lm-{method}-{lr:.6g}-seed-{s}".replace(".", "p"),
                            f"language model, {method} at lr {lr:g}, seed {s}"
                            + (" (an lr extension: only if the bracket needs it)" * extension),
                            {"lm": (method,), "lr": (float(lr),), "seed": (s,)},
                            cpu_s=cpu,
                            device_s=device_seconds(cpu, "dense"),
                            estimate=how,
                            optional=extension,
                        )
                    )
    return out


def _disjunctive(config) -> list[RunPart]:
    quick = type(config).quick()

    def work(c):
        return c.seeds * c.num_train * (c.steps + c.warm_steps) * c.hidden**2

    # Quick took 9.0 min on a quiet 2-core CPU (README), half of it per task (assumed).
    cpu = 540.0 / 2 * work(config) / work(quick)
    how = "half of quick's 9.0 min (README) x seeds x points x steps x width² ratio"
    return [
        RunPart(
            f"task-{name.replace('_', '-')}",
            f"every arm on the {name} task",
            {"task": (name,)},
            cpu_s=cpu,
            device_s=device_seconds(cpu, "small"),
            estimate=how,
        )
        for name in ("input_decided", "output_only")
    ]


# Quick took 16.8 min on the shared CPU (README) for the star, two 10,000-step trainings with
# their solves and one 500-step one; assumed: the star ~100 s at 50 starts, a 10,000-step case
# ~400 s at (10, 10), scaling with the constraint work n m + n² (not timed apart).
_HOM_PGD_CASE_CPU_S, _HOM_PGD_CASE_WORK, _HOM_PGD_STAR_CPU_S = 400.0, 200.0, 100.0


def _hom_pgd_size_coords(case, seed, count, config, rng_key, *args, **kwargs):
    # The key tells (b)'s size from a speed case of the same size (smoke: both 2x3).
    return {
        "size": f"{case[0]}x{case[1]}",
        "key": "-".join(str(v) for v in np.asarray(jax.random.key_data(rng_key)).ravel()),
    }


def _hom_pgd(config) -> list[RunPart]:
    from jaxlab.experiments.hom_pgd import AUTHORS_STEPS

    def case_cpu(n, m, steps):
        return _HOM_PGD_CASE_CPU_S * (n * m + n * n) / _HOM_PGD_CASE_WORK * steps / AUTHORS_STEPS

    star = _HOM_PGD_STAR_CPU_S * config.star_starts / 50
    (n, m) = config.qcqp_size
    qcqp = case_cpu(n, m, config.train_steps) + _HOM_PGD_STAR_CPU_S
    how = "quick's 16.8 min split by assumption (module comment), scaled by n m + n² and steps"
    out = [
        RunPart(
            "star",
            f"(a) the star toy, {config.star_starts} starts",
            {"star": ("all",)},
            cpu_s=star,
            device_s=device_seconds(star, "host"),
            estimate=how,
        ),
        RunPart(
            "qcqp",
            f"(b) the authors' setting at n={n}, m={m}",
            {"qcqp": ("all",)},
            cpu_s=qcqp,
            device_s=device_seconds(qcqp, "small"),
            estimate=how,
        ),
    ]
    for n, m, steps, _ in config.speed_cases:
        cpu = case_cpu(n, m, steps)
        out.append(
            RunPart(
                f"speed-{n}x{m}",
                f"(c) the speed case n={n}, m={m}, {steps} training steps",
                {"size": (f"{n}x{m}",)},
                cpu_s=cpu,
                device_s=device_seconds(cpu, "small"),
                estimate=how,
            )
        )
    return out


def _moe_topk(config) -> list[RunPart]:
    """The full profile (the MoE language model) in one part per K, from its training FLOPs.

    Per token and layer, forward FLOPs are ``c0 = 8 d² + 4 seq d`` (attention) plus ``K x 4 d
    d_ff`` for K active experts (``d_ff = 4 d x lm_ffn_multiplier``), and the head's ``2 x 256
    d``; training costs 3x the forward. Runs: every (seed, K, T) of the fixed-T sweep and the
    fixed-FLOP arm's ``budget_steps_at_max_k x M / K`` steps at each K.
    """
    d, seq, layers = config.in_features, config.lm_seq_len, config.lm_layers
    d_ff = 4 * d * config.lm_ffn_multiplier
    tokens = config.batch_size * seq

    def step_flops(k):
        return 3 * tokens * (layers * (8 * d * d + 4 * seq * d + k * 4 * d * d_ff) + 512 * d)

    out = []
    for k in config.top_k_grid:
        # One run per K, evaluated at each T on the way: the longest of the fixed-T grid and the
        # fixed-FLOP arm's steps.
        steps = max(*config.step_grid, config.budget_steps_at_max_k * config.num_experts / k)
        cpu = config.seeds * step_flops(k) * steps / CPU_FLOPS_PER_S
        out.append(
            RunPart(
                f"top-k-{k}",
                f"K = {k}: every seed, trained to the longest fixed-T or fixed-FLOP length",
                {"top_k": (k,)},
                cpu_s=cpu,
                device_s=device_seconds(cpu, "dense"),
                estimate="training FLOPs (docstring of _parts_table._moe_topk) at "
                "CPU_FLOPS_PER_S; DEVICE_SPEEDUP['dense'] plus DEVICE_START_S",
            )
        )
    return out


def _oi_eda(config) -> list[RunPart]:
    """One part per (arm, problem), each a share of the scaled whole run (equal shares assumed)."""
    from jaxlab.experiments.oi_eda import BASELINES, EDA_ARMS

    quick = type(config).quick()

    def work(c):
        return c.seeds * c.budget * c.num_variables**2

    arms = (*EDA_ARMS, *BASELINES)
    # The suite's names (binary_benchmark_suite's keys), without building its instances.
    problems = ("onemax", "leading_ones", f"trap{config.trap_block}", f"nk{config.nk_k}", "maxcut")
    cpu = 216.0 * work(config) / work(quick) / (len(arms) * len(problems))
    how = (
        "quick's 3.6 min on a quiet CPU (README) x seeds x evaluations x n² ratio, shared "
        "equally among (arm, problem); DEVICE_SPEEDUP['small'] plus DEVICE_START_S"
    )
    return [
        RunPart(
            f"{arm}-{name}".replace("_", "-").lower(),
            f"arm {arm} on {name}, every seed",
            {"arm": (arm,), "problem": (name,)},
            cpu_s=cpu,
            device_s=device_seconds(cpu, "small"),
            estimate=how,
        )
        for arm in arms
        for name in problems
    ]


def _simplegpt(config) -> list[RunPart]:
    """The full profile in parts: the sweep's compiled calls two lanes at a time, the depth
    point's one lane each.

    Each compiled call of ``lanes_per_call`` lanes is one unit (``lanes_per_call=1`` at full); a
    lane's cost is :func:`jaxlab._src.parts.transformer_train_flops` at the CPU's and the
    device's assumed rates.
    """
    how = (
        "6 P T FLOPs per step x steps at CPU_FLOPS_PER_S, over DEVICE_SPEEDUP['dense'] on the "
        "device, plus DEVICE_START_S"
    )

    def parts_of(kind, placement, d, layers, steps, lanes, per_part_lanes):
        per_call = config.lanes_per_call or lanes
        calls = -(-lanes // per_call)
        step = max(1, per_part_lanes // per_call)
        flops = _parts.transformer_train_flops(d, layers, config.seq_len, config.batch_size, steps)
        out = []
        for first in range(0, calls, step):
            groups = tuple(range(first, min(first + step, calls)))
            count = min(lanes, (groups[-1] + 1) * per_call) - groups[0] * per_call
            cpu = count * flops / CPU_FLOPS_PER_S
            out.append(
                RunPart(
                    f"{kind}-{placement.replace('_', '-')}-{first}",
                    f"{kind}, {placement}: compiled calls {groups} of {calls} ({count} of {lanes} "
                    "(LR, seed) lanes)" + (" (Hessians in the merge)" * (kind == "depth")),
                    {"model": (f"{placement}/{d}x{layers}/{steps}",), "group": groups},
                    cpu_s=cpu,
                    device_s=device_seconds(cpu, "dense"),
                    estimate=how,
                )
            )
        return out

    lanes = len(config.learning_rates) * config.seeds
    out = []
    for placement in config.placements:
        out += parts_of(
            "sweep", placement, config.d_model, config.num_layers, config.steps, lanes, 2
        )
    if not config.depth_is_sweep:
        for placement in config.depth_placements:
            out += parts_of(
                "depth",
                placement,
                config.depth_d_model,
                config.depth_num_layers,
                config.depth_steps,
                config.depth_seeds,
                1,
            )
    return out


def _stla(config) -> list[RunPart]:
    """Synthetic layers, the LM's training, then its quantization per bit width.

    A quantization part reads the trained model from the training part on disk (run them in the
    declared order, as ``reproduce --resume`` does). A quantization job's cost: calibration seeds
    x iterations x 2 d_out d_in² FLOPs over the LM's kernels (an upper bound: GPTQ and RTN do
    one pass).
    """
    from jaxlab.experiments.stla import LM_BESIDE, LM_METHODS

    d, ffn = config.lm_d_model, int(4 * config.lm_d_model * config.lm_ffn_multiplier)
    kernels = [(d, d)] * 4 + [(ffn, d), (d, ffn)]
    per_iter = config.lm_layers * sum(2 * o * i * i for o, i in kernels)
    methods = len(LM_METHODS) + len(LM_BESIDE)
    quantize = methods * config.calib_seeds * config.lm_num_iters * per_iter
    train = _parts.transformer_train_flops(
        d, config.lm_layers, config.lm_seq_len, config.lm_batch, config.lm_steps
    )
    syn = QUICK_BUDGET_S / 2
    how = "FLOPs (docstring) at CPU_FLOPS_PER_S; DEVICE_SPEEDUP plus DEVICE_START_S"
    out = [
        RunPart(
            "synthetic",
            "the synthetic layers (quick's own)",
            {"synthetic": ("all",)},
            cpu_s=syn,
            device_s=device_seconds(syn, "small"),
            estimate="half the issues' quick budget (not timed apart); DEVICE_SPEEDUP['small']",
        ),
        RunPart(
            "lm-train",
            f"the LM's training, {config.lm_steps} steps",
            {"lm": ("train",)},
            cpu_s=train / CPU_FLOPS_PER_S,
            device_s=device_seconds(train / CPU_FLOPS_PER_S, "dense"),
            estimate=how,
        ),
    ]
    for bits in config.lm_bits:
        cpu = quantize / CPU_FLOPS_PER_S
        out.append(
            RunPart(
                f"lm-quantize-{bits}bit",
                f"every method's quantization of the LM at {bits} bits",
                {"quantize": tuple(f"{bits}/{m}" for m in (*LM_METHODS, *LM_BESIDE))},
                cpu_s=cpu,
                device_s=device_seconds(cpu, "dense"),
                estimate=how,
            )
        )
    return out


def _deva_toy(*args, **kwargs):
    return {"toy": "all"}


def _disjunctive_task(config, task, name, *args, **kwargs):
    return {"task": name}


# The weak-Minty runs: a 2-D operator whose noise is one Gaussian draw per oracle call whatever
# the batch (O(1) per iteration), so compile-bound; assumed (not timed apart).
_STOCHASTIC_VI_MINTY_CPU_S = 60.0


def _stochastic_vi(config) -> list[RunPart]:
    """The weak-Minty runs, then one part per bilinear setting (dimension, noise).

    A setting's cost: 8 arms x oracle calls x 4 d² FLOPs (two matrix-vector products with ``A``,
    each way) over its seeds, in float64 at half the CPU's float32 rate.
    """
    how = (
        "8 arms x budget x 4 d² FLOPs x seeds (docstring of _parts_table._stochastic_vi) at "
        "CPU_FLOPS_PER_S / 2 (float64); DEVICE_SPEEDUP['small'] plus DEVICE_START_S"
    )
    out = [
        RunPart(
            "minty",
            f"the weak-Minty runs (a in {config.minty_a}, {config.minty_seeds} seeds)",
            {"minty": tuple(float(a) for a in config.minty_a)},
            cpu_s=_STOCHASTIC_VI_MINTY_CPU_S,
            device_s=device_seconds(_STOCHASTIC_VI_MINTY_CPU_S, "small"),
            estimate="compile-bound 2-D runs, an assumed minute (module comment); "
            "DEVICE_SPEEDUP['small'] plus DEVICE_START_S",
        )
    ]
    for d in config.dims:
        for noise in config.noises:
            cpu = 8 * 4 * d * d * config.budget * config.seeds / (CPU_FLOPS_PER_S / 2)
            out.append(
                RunPart(
                    f"bilinear-d{d}-noise{noise:g}".replace(".", "p"),
                    f"the bilinear game at d = {d}, noise {noise:g}: every arm and seed",
                    {"dim": (d,), "noise": (float(noise),)},
                    cpu_s=cpu,
                    device_s=device_seconds(cpu, "small"),
                    estimate=how,
                )
            )
    return out


def _stochastic_vi_minty(config, a, *args, **kwargs):
    return {"minty": float(a)}


def _stochastic_vi_bilinear(config, dim, noise, *args, **kwargs):
    return {"dim": int(dim), "noise": float(noise)}


# tsrl's quick sections (seconds on the 2-core CPU): the reference checks, the tabular toy, and each
# sequence arm (its lr bracket on the tuning seeds and its held-out run) with how many runs it
# made. ASSUMED: quick's 153 CPU-seconds in all (README) shared out by guess, not timed apart.
_TSRL_QUICK_REFERENCE_S = 8.0
_TSRL_QUICK_TABULAR_S = 45.0
_TSRL_QUICK_ARM_S = {  # the arm's reward (TSRL at quick's K) -> (seconds, runs)
    "pointwise": (15.0, 7),
    "single": (15.0, 7),
    "tsrl": (25.0, 7),
    "single_equal_calls": (45.0, 7),
}


def _tsrl_tabular_work(c) -> float:
    """Seeds x arms x steps x (the rewards' judge calls, B G (1 + K_max), + the quality, P M)."""
    arms = 3 + len(c.anchors) + 2 * len(c.flips)
    per_step = (
        c.batch_prompts * c.group_size * (1 + max(c.anchors)) + c.num_prompts * c.num_candidates
    )
    return c.seeds * arms * c.steps * per_step


def _tsrl_run_work(c, steps: int) -> float:
    """One sequence run (every seed): samples x policy weights, training and evaluation."""
    sizes = [c.seq_length * (c.seq_vocab + 1) + 8, *c.seq_hidden, c.seq_length * c.seq_vocab]
    weights = sum(a * b for a, b in zip(sizes[:-1], sizes[1:], strict=False))
    samples = steps * c.seq_batch_prompts * c.group_size + c.seq_prompts * c.seq_eval_samples
    return c.seq_seeds * samples * c.seq_length * weights


def _tsrl(config) -> list[RunPart]:
    """The reference checks, the tabular toy, then one part per sequence arm.

    Each is quick's measured section scaled by the ratio of its work (``_tsrl_tabular_work``,
    ``_tsrl_run_work`` x runs: the arm's lr grid with every extension, and its held-out run).
    """
    quick = type(config).quick()
    how = "quick's section (assumed share of 153 CPU-s) x work ratio ({}); DEVICE_SPEEDUP['small']"
    tab = _TSRL_QUICK_TABULAR_S * _tsrl_tabular_work(config) / _tsrl_tabular_work(quick)
    out = [
        RunPart(
            "reference",
            "the note's reference checks (the same draws at every profile)",
            {"tsrl": ("reference",)},
            cpu_s=_TSRL_QUICK_REFERENCE_S,
            device_s=device_seconds(_TSRL_QUICK_REFERENCE_S, "small"),
            estimate=how.format("the same work"),
        ),
        RunPart(
            "tabular",
            f"the tabular toy: every arm, {config.seeds} seeds",
            {"tsrl": ("tabular",)},
            cpu_s=tab,
            device_s=device_seconds(tab, "small"),
            estimate=how.format("seeds x arms x steps x (B G (1 + K) + P M)"),
        ),
    ]
    # Judge calls per step (closed form, checked in tests/rl): single 2 B G, TSRL 2 B G K.
    equal_steps = config.seq_steps * config.seq_anchors
    runs = len(config.seq_lrs) + config.seq_max_extensions + 1
    arms = {
        "pointwise": ("pointwise", config.seq_steps),
        "single": ("single", config.seq_steps),
        f"tsrl_k{config.seq_anchors}": ("tsrl", config.seq_steps),
        "single_equal_calls": ("single_equal_calls", equal_steps),
    }
    quick_equal = quick.seq_steps * quick.seq_anchors
    for name, (role, steps) in arms.items():
        quick_s, quick_runs = _TSRL_QUICK_ARM_S[role]
        quick_steps = quick_equal if role == "single_equal_calls" else quick.seq_steps
        ratio = (
            runs * _tsrl_run_work(config, steps) / (quick_runs * _tsrl_run_work(quick, quick_steps))
        )
        cpu = quick_s * ratio
        out.append(
            RunPart(
                f"sequence-{name.replace('_', '-')}",
                f"the sequence policy's arm {name}: its lr bracket ({config.seq_seeds} tuning "
                f"seeds) and its held-out run ({steps} steps)",
                {"sequence": (name,)},
                cpu_s=cpu,
                device_s=device_seconds(cpu, "small"),
                estimate=how.format(f"seeds x runs (at most {runs}) x samples x policy weights"),
            )
        )
    return out


def _tsrl_section(*args, **kwargs):
    return {"tsrl": "tabular"}


def _tsrl_reference(*args, **kwargs):
    return {"tsrl": "reference"}


def _tsrl_sequence(run_arm, name, *args, **kwargs):
    return {"sequence": name}


def _hom_pgd_star(*args, **kwargs):
    return {"star": "all"}


def _hom_pgd_qcqp(*args, **kwargs):
    return {"qcqp": "all"}


def _stla_synthetic(*args, **kwargs):
    return {"synthetic": "all"}


def _stla_train(*args, **kwargs):
    return {"lm": "train"}


# name -> its parts and units, in the registry's (alphabetical) order.
TABLE: dict[str, Entry] = {
    "apub-product-mix": Entry(_apub),
    "async-delay": Entry(_async_delay),  # units: async_delay._lane_units, in the run
    "credro": Entry(_credro),
    # The toy is one unit; each language-model run (method, lr, seed) another (in the run).
    "deva": Entry(_deva, (Unit("_toy", _deva_toy),)),
    # Each task's arms.
    "disjunctive-rules": Entry(_disjunctive, (Unit("_run_task", _disjunctive_task),)),
    "error-feedback": Entry(_error_feedback),
    "fab-hypercleaning": Entry(_fab_hypercleaning),
    "fab-hyperparameter": Entry(_fab_hyperparameter),
    "harm": Entry(_harm),
    # The star toy, the QCQP setting (b), and each speed case's size.
    "hom-pgd": Entry(
        _hom_pgd,
        (
            Unit("_run_star", _hom_pgd_star, outputs=2),
            Unit("_run_qcqp", _hom_pgd_qcqp),
            Unit("_run_size", _hom_pgd_size_coords),
        ),
    ),
    "mmfld": Entry(_mmfld),
    "moe-topk": Entry(_moe_topk),  # units: one per K, in the run
    "msflow": Entry(_msflow),
    "oi-eda": Entry(_oi_eda),  # units: one per (arm, problem), in the run
    "rambo": Entry(_rambo),
    "simplegpt-lr": Entry(_simplegpt),  # units: one per compiled call, in the run
    # The synthetic layers, the LM's training; each (bits, method) quantization is in the run.
    "stla-ptq": Entry(
        _stla,
        (Unit("_synthetic", _stla_synthetic), Unit("_train_model", _stla_train, outputs=5)),
    ),
    # Each weak-Minty run, each bilinear setting (dimension, noise).
    "stochastic-vi": Entry(
        _stochastic_vi,
        (
            Unit("_weak_minty", _stochastic_vi_minty),
            Unit("_bilinear", _stochastic_vi_bilinear),
        ),
    ),
    # The reference checks, the tabular toy, each sequence arm.
    "tsrl": Entry(
        _tsrl,
        (
            Unit("tsrl_reference_checks", _tsrl_reference),
            Unit("_run_tabular", _tsrl_section),
            Unit("_sequence_arm", _tsrl_sequence),
        ),
    ),
    "ucpo": Entry(_ucpo),
}


def bind_units(name: str) -> None:
    """Rebinds experiment ``name``'s :class:`Unit` functions in its module (once per process)."""
    module = importlib.import_module(REGISTRY[name].module)
    for u in TABLE[name].units:
        fn = getattr(module, u.attribute)
        if not hasattr(fn, "__wrapped_unit__"):
            setattr(module, u.attribute, _parts.as_unit(fn, u.coords, outputs=u.outputs))


@dataclasses.dataclass(frozen=True)
class Declared:
    """The table's parts of experiment ``name`` (picklable: a child process finds them by name).

    Calling it binds the experiment's units in this process, then returns its parts.
    """

    name: str

    def __call__(self, config) -> list[RunPart]:
        bind_units(self.name)
        return TABLE[self.name].parts(config)


def declare_all() -> None:
    """Declares the table's parts of every registered experiment and binds their units."""
    for name in TABLE:
        bind_units(name)  # a name no module registered: KeyError (a typo in the table)
        _parts.declare_parts(name, Declared(name))
