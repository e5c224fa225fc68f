"""Experiment ``stla-ptq``: STLA against GPTQ and RTN on correlated layers and a small LM.

STLA (Zhang et al., ICML 2026) rounds clusters of columns jointly with AdaRound on a
Schur-complement objective that prices the compensation of the columns still to come, and orders
the columns by SpinCluster (Hessian-guided). We measure (``notes/stla.md``):

* **Synthetic layers** (the note's gating check): ``r = 64, d = 128``, ``n = 2048`` tokens of
  :func:`jaxlab.quant.correlated_layer` (rank-16 signal plus noise, log-normal feature scales),
  3 bits, per-row (scale, zero) from one grid search with metric ``H`` shared by every arm,
  clusters of 16, 1 % damping, 3 seeds. Arms: RTN, GPTQ (natural / act order) and STLA
  {local, global} x {none, spin}. Metric: relative output error ``tr(ΔHΔᵀ)/tr(WHWᵀ)``. Also per
  group (group = cluster = 32) at 4, 3 and 2 bits for RTN, GPTQ, GPTQ-act and STLA.
* **Small transformer**: a byte-level PreNorm :class:`jaxlab.nn.SimpleGPT` (2 layers, d = 128,
  d_ff = 352) trained on the Python standard library's sources, every linear layer quantized
  block-sequentially by :func:`jaxlab.quant.quantize_model` (each stage sees the quantized
  model's activations) at 4, 3 and 2 bits, group = cluster = 32, from 64 calibration windows of
  64 tokens, 3 calibration seeds: validation loss (nats/byte; perplexity ``e^loss``) for RTN,
  GPTQ, GPTQ-act, STLA-global-spin and, at 3 bits, its ablations (local loss; no ordering),
  quantization wall time (compilation excluded: every kernel is compiled before timing). The
  model trains for 500 steps of 32 x 64 bytes (about a minute on 2 cores).

**Verdict** (the note's rule gates): (1) global < local for STLA in both orders, (2) spin < none
for STLA-global, (3) STLA-global-spin ≤ 1.02 x GPTQ-act, each in at least 2 of 3 seeds on the
synthetic layer; the note calls (1)+(2)+(3) *supported* and (1)+(2) alone *partly supported*.
(4) The issue's target, reported beside it as its own part: on the language model at 3 and 2
bits the seed-mean validation loss orders STLA < GPTQ (both orders) < RTN. STLA's time as a
multiple of GPTQ's is reported. The prototype in the note expected (1), (2) and near parity in (3).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import jax
import numpy as np
from flax import nnx
from matplotlib.figure import Figure

from jaxlab._src.experiments import ExperimentConfig, Progress, Result, check, register
from jaxlab._src.validation import check_int
from jaxlab.nn import (
    GPTConfig,
    SimpleGPT,
    language_model_loss,
    sample_batch,
    simplegpt_optimizer,
    simplegpt_schedule,
    split_corpus,
    stdlib_byte_corpus,
    train_language_model,
)
from jaxlab.quant import (
    correlated_layer,
    gptq,
    prepare_hessian,
    quantize_model,
    rtn,
    search_quant_params,
    stla,
)

__all__ = ["STLAConfig", "run"]

CLAIM = (
    "Zhang et al. (ICML 2026): STLA, cluster-wise learned rounding on a Schur-complement "
    "(lookahead) objective with Hessian-guided SpinCluster ordering, quantizes weights with less "
    "output error than GPTQ; its global objective beats the local one and its ordering beats "
    "no ordering; at 3 and 2 bits a quantized transformer's validation loss orders "
    "STLA < GPTQ (with and without act-order) < RTN."
)

# The note's rule: each comparison must hold in at least this fraction of the seeds (2 of 3).
MIN_SEED_FRACTION = 2 / 3
# Part 3: STLA-global-spin within 2 % of GPTQ-act counts as matching it (the note's tolerance;
# its prototype found parity at 200 AdaRound iterations).
PARITY_FACTOR = 1.02
# Part 4 (the issue's target) is judged at these bit widths.
ISSUE_BITS = (3, 2)
SYNTHETIC_ARMS = (
    "rtn",
    "gptq",
    "gptq_act",
    "stla_local_none",
    "stla_global_none",
    "stla_local_spin",
    "stla_global_spin",
)
GROUPED_ARMS = ("rtn", "gptq", "gptq_act", "stla_global_spin")
LM_METHODS = ("rtn", "gptq", "gptq_act", "stla_global_spin")
# The ablations of STLA on the language model, at one bit width (they cost a model pass each).
LM_ABLATIONS = ("stla_local_spin", "stla_global_none")
ABLATION_BITS = 3


@dataclasses.dataclass(frozen=True)
class STLAConfig(ExperimentConfig):
    """Sizes of the ``stla-ptq`` experiment (``smoke``, ``quick``, ``full``).

    Attributes:
      seeds: synthetic-layer seeds and calibration seeds of the language model.
      syn_rows, syn_cols, syn_tokens, syn_rank: the synthetic layer (r, d, n, signal rank).
      syn_bits: bit width of the per-channel synthetic check.
      syn_cluster: STLA cluster size on the synthetic layer.
      syn_group: group (= cluster) size of the per-group synthetic sweep.
      bits_grid: bit widths of the per-group sweeps (synthetic and language model).
      num_iters, learning_rate, round_weight, qkv_round_weight: AdaRound (λ = 1.5 for q/k/v).
      lm_d_model, lm_layers, lm_heads, lm_seq_len: the SimpleGPT (PreNorm).
      lm_steps, lm_batch, lm_peak_lr, lm_warmup: its training.
      lm_corpus_bytes: standard-library bytes (90/10 train/validation split).
      lm_group: group = cluster size of the model quantization.
      calib_windows: calibration windows (of ``lm_seq_len`` tokens) per seed.
      eval_windows: validation windows of the final loss.
      stage_eval_windows: validation windows of the per-stage loss.
    """

    seeds: int = 3
    syn_rows: int = 64
    syn_cols: int = 128
    syn_tokens: int = 2048
    syn_rank: int = 16
    syn_bits: int = 3
    syn_cluster: int = 16
    syn_group: int = 32
    bits_grid: tuple[int, ...] = (4, 3, 2)
    num_iters: int = 200
    learning_rate: float = 0.015
    round_weight: float = 1.0
    qkv_round_weight: float = 1.5
    lm_d_model: int = 128
    lm_layers: int = 2
    lm_heads: int = 4
    lm_seq_len: int = 64
    lm_ffn_multiplier: float = 1.0
    lm_steps: int = 500
    lm_batch: int = 32
    lm_peak_lr: float = 3e-3
    lm_warmup: int = 25
    lm_corpus_bytes: int = 1_000_000
    lm_group: int = 32
    calib_windows: int = 64
    eval_windows: int = 64
    stage_eval_windows: int = 8

    @classmethod
    def smoke(cls) -> STLAConfig:
        return cls(
            seeds=2,
            syn_rows=8,
            syn_cols=16,
            syn_tokens=64,
            syn_rank=4,
            syn_cluster=4,
            syn_group=8,
            bits_grid=(3, 2),
            num_iters=20,
            lm_d_model=32,
            lm_layers=1,
            lm_heads=2,
            lm_seq_len=8,
            lm_ffn_multiplier=0.375,
            lm_steps=20,
            lm_batch=8,
            lm_warmup=2,
            lm_corpus_bytes=20_000,
            lm_group=8,
            calib_windows=4,
            eval_windows=4,
            stage_eval_windows=4,
        )

    @classmethod
    def quick(cls) -> STLAConfig:
        return cls()

    @classmethod
    def full(cls) -> STLAConfig:
        # Accelerator: a wider, deeper model trained longer, the note's 128 calibration windows,
        # the reference's group = cluster = 128-wide blocks and 2000 AdaRound iterations.
        return cls(
            lm_d_model=256,
            lm_layers=4,
            lm_heads=8,
            lm_seq_len=256,
            lm_steps=4000,
            lm_batch=64,
            lm_corpus_bytes=4_000_000,
            lm_group=128,
            calib_windows=128,
            eval_windows=256,
            num_iters=2000,
        )

    def __post_init__(self):
        check_int(self.seeds, "seeds", minimum=2)
        if self.syn_cols % self.syn_cluster or self.syn_cols % self.syn_group:
            raise ValueError("syn_cluster and syn_group must divide syn_cols")
        if self.lm_d_model % self.lm_group:
            raise ValueError(f"lm_group={self.lm_group} must divide lm_d_model={self.lm_d_model}")
        if not set(ISSUE_BITS) <= set(self.bits_grid):
            raise ValueError(f"bits_grid must contain {ISSUE_BITS}, got {self.bits_grid}")


# ------------------------------------------------------------------------------------------------
# Synthetic layers.


def _arm(name: str, w, h, *, bits, group, cluster, config, params=None):
    """One arm on one layer (``params``: fixed per-row grid; ``group`` None = per channel)."""
    if name == "rtn":
        return rtn(w, h, bits=bits, group_size=group, params=params)
    if name.startswith("gptq"):
        order = "act" if name == "gptq_act" else "none"
        return gptq(w, h, bits=bits, group_size=group, order=order, params=params)
    _, loss, order = name.split("_")
    return stla(
        w,
        h,
        bits=bits,
        group_size=group,
        cluster_size=cluster,
        loss=loss,
        order=order,
        params=params,
        num_iters=config.num_iters,
        learning_rate=config.learning_rate,
        round_weight=config.round_weight,
    )


def _synthetic(config: STLAConfig, rng_key, progress) -> dict[str, Any]:
    per_channel = {arm: [] for arm in SYNTHETIC_ARMS}
    grouped = {str(b): {arm: [] for arm in GROUPED_ARMS} for b in config.bits_grid}
    for seed in progress.track(range(config.seeds), total=config.seeds, description="layers"):
        p = correlated_layer(
            jax.random.fold_in(rng_key, seed),
            rows=config.syn_rows,
            cols=config.syn_cols,
            num_tokens=config.syn_tokens,
            rank=config.syn_rank,
        )
        w, h = np.asarray(p.weight), np.asarray(p.hessian, np.float64)
        # One grid search with metric H per row, before the column loop, shared by every arm.
        _, h_damped = prepare_hessian(w, h)
        scale, zero = search_quant_params(w, h_damped, bits=config.syn_bits)
        params = (np.asarray(scale), np.asarray(zero))
        for arm in SYNTHETIC_ARMS:
            out = _arm(
                arm,
                w,
                h,
                bits=config.syn_bits,
                group=None,
                cluster=config.syn_cluster,
                config=config,
                params=params,
            )
            per_channel[arm].append(float(out.info.relative_error))
        for bits in config.bits_grid:
            for arm in GROUPED_ARMS:
                g = config.syn_group
                out = _arm(arm, w, h, bits=bits, group=g, cluster=g, config=config)
                grouped[str(bits)][arm].append(float(out.info.relative_error))
    return {"per_channel": per_channel, "grouped": grouped}


def _wins(a: list[float], b: list[float]) -> int:
    return int(sum(x < y for x, y in zip(a, b, strict=True)))


# ------------------------------------------------------------------------------------------------
# Language model.


def _train_model(config: STLAConfig, rng_key, progress):
    gpt = GPTConfig(
        256,
        config.lm_d_model,
        config.lm_layers,
        config.lm_heads,
        max_len=config.lm_seq_len,
        multiple_of=32,
        ffn_multiplier=config.lm_ffn_multiplier,
        norm_placement="pre",
    )
    train, val = split_corpus(stdlib_byte_corpus(config.lm_corpus_bytes))
    init_key, data_key = jax.random.split(rng_key)
    model = SimpleGPT(gpt, rngs=nnx.Rngs(int(jax.random.randint(init_key, (), 0, 2**30))))
    tx = simplegpt_optimizer(
        simplegpt_schedule(config.lm_peak_lr, config.lm_warmup, config.lm_steps)
    )
    start = time.perf_counter()
    history = train_language_model(
        model,
        tx,
        train,
        steps=config.lm_steps,
        batch_size=config.lm_batch,
        seq_len=config.lm_seq_len,
        rng_key=data_key,
        progress=progress,
    )
    return model, train, val, history, time.perf_counter() - start


def _evaluator(model, val, windows: int, seq_len: int, key):
    """A jitted validation loss of models with ``model``'s structure (compiled once)."""
    tokens, targets = sample_batch(key, val, windows, seq_len)
    graphdef = nnx.graphdef(model)

    @jax.jit
    def loss(state):
        return language_model_loss(nnx.merge(graphdef, state), tokens, targets)

    return lambda m: float(loss(nnx.state(m)))


def _lm_method(name: str, config: STLAConfig, bits: int):
    g = config.lm_group

    def method(layer: str, w, h):
        if name in ("rtn", "gptq", "gptq_act"):
            return _arm(name, w, h, bits=bits, group=g, cluster=g, config=config)
        _, loss, order = name.split("_")
        qkv = layer.rsplit(".", 1)[-1] in ("q", "k", "v")
        return stla(
            w,
            h,
            bits=bits,
            group_size=g,
            cluster_size=g,
            loss=loss,
            order=order,
            num_iters=config.num_iters,
            learning_rate=config.learning_rate,
            round_weight=config.qkv_round_weight if qkv else config.round_weight,
        )

    return method


def _language_model(config: STLAConfig, rng_key, progress) -> dict[str, Any]:
    train_key, eval_key, calib_key = jax.random.split(rng_key, 3)
    model, train, val, history, train_s = _train_model(config, train_key, progress)
    final_loss = _evaluator(model, val, config.eval_windows, config.lm_seq_len, eval_key)
    stage_loss = _evaluator(
        model, val, config.stage_eval_windows, config.lm_seq_len, jax.random.fold_in(eval_key, 1)
    )
    calib = [
        sample_batch(
            jax.random.fold_in(calib_key, s), train, config.calib_windows, config.lm_seq_len
        )[0]
        for s in range(config.seeds)
    ]
    # Compile the quantizer kernels of every layer shape before timing anything.
    shapes = {
        tuple(v.shape)
        for path, v in nnx.to_flat_state(nnx.state(model, nnx.Param))
        if path[-1] == "kernel"
    }
    for d_in, d_out in shapes:
        w = np.asarray(jax.random.normal(jax.random.key(0), (d_out, d_in)))
        for name in ("rtn", "gptq", "stla_global_spin"):
            _lm_method(name, config, 3)("warm-up", w, np.eye(d_in))
    fp_loss = final_loss(model)
    runs: dict[str, dict[str, Any]] = {str(b): {} for b in config.bits_grid}
    jobs = [(b, m) for b in config.bits_grid for m in LM_METHODS]
    jobs += [(ABLATION_BITS, m) for m in LM_ABLATIONS]
    for bits, name in progress.track(jobs, total=len(jobs), description="quantizing the LM"):
        seeds = 1 if name == "rtn" else config.seeds  # RTN uses no calibration data
        entries = []
        for s in range(seeds):
            out = quantize_model(
                model, calib[s], _lm_method(name, config, bits), loss_fn=stage_loss
            )
            layer_errors = [float(r.info.relative_error) for r in out.layers.values()]
            entries.append(
                {
                    "val_loss": final_loss(out.model),
                    "stage_losses": [out.initial_loss] + [st.loss for st in out.stages],
                    "seconds": out.quantization_seconds,
                    "mean_layer_relative_error": float(np.nanmean(layer_errors)),
                    "nonfinite": int(sum(int(r.info.nonfinite_count) for r in out.layers.values())),
                }
            )
        losses = [e["val_loss"] for e in entries]
        runs[str(bits)][name] = {
            "per_seed": entries,
            "val_loss": losses * (config.seeds if name == "rtn" else 1),
            "mean": float(np.mean(losses)),
            "perplexity": float(math.exp(np.mean(losses))),
            "seconds": float(np.mean([e["seconds"] for e in entries])),
        }
    return {
        "full_precision_val_loss": fp_loss,
        "full_precision_perplexity": math.exp(fp_loss),
        "train_seconds": train_s,
        "final_train_loss": float(np.mean(history["train_loss"][-20:])),
        "num_params": int(sum(v.size for v in jax.tree.leaves(nnx.state(model, nnx.Param)))),
        "runs": runs,
    }


# ------------------------------------------------------------------------------------------------
# Verdict and figures.


def _note_parts(syn: dict[str, Any], seeds: int):
    pc = syn["per_channel"]
    need = math.ceil(MIN_SEED_FRACTION * seeds - 1e-9)
    both = [
        gl_n < lo_n and gl_s < lo_s
        for gl_n, lo_n, gl_s, lo_s in zip(
            pc["stla_global_none"],
            pc["stla_local_none"],
            pc["stla_global_spin"],
            pc["stla_local_spin"],
            strict=True,
        )
    ]
    spin = _wins(pc["stla_global_spin"], pc["stla_global_none"])
    parity = int(
        sum(
            s <= PARITY_FACTOR * a
            for s, a in zip(pc["stla_global_spin"], pc["gptq_act"], strict=True)
        )
    )
    fmt = lambda arm: "/".join(f"{v:.5f}" for v in pc[arm])
    ratio = [s / a for s, a in zip(pc["stla_global_spin"], pc["gptq_act"], strict=True)]
    parts = [
        check(
            f"(note) global < local Schur objective for STLA in both orders, in >= {need} of "
            f"{seeds} seeds (synthetic layer, relative output error)",
            f"{int(sum(both))}/{seeds} seeds; global-none {fmt('stla_global_none')} vs local-none "
            f"{fmt('stla_local_none')}; global-spin {fmt('stla_global_spin')} vs local-spin "
            f"{fmt('stla_local_spin')}",
            sum(both) >= need,
        ),
        check(
            f"(note) SpinCluster order < no order for STLA-global, in >= {need} of {seeds} seeds",
            f"{spin}/{seeds} seeds; spin {fmt('stla_global_spin')} vs none "
            f"{fmt('stla_global_none')}",
            spin >= need,
        ),
        check(
            f"(note) STLA-global-spin <= {PARITY_FACTOR} x GPTQ-act, in >= {need} of {seeds} seeds",
            f"{parity}/{seeds} seeds; ratios STLA/GPTQ-act "
            + "/".join(f"{r:.3f}" for r in ratio)
            + f"; RTN {fmt('rtn')}, GPTQ {fmt('gptq')}, GPTQ-act {fmt('gptq_act')}",
            parity >= need,
        ),
    ]
    return parts, {
        "seed_wins": {
            "global_lt_local_both_orders": int(sum(both)),
            "spin_lt_none": spin,
            "parity_with_gptq_act": parity,
        },
        "needed": need,
        "stla_over_gptq_act": ratio,
    }


def _issue_part(lm: dict[str, Any]):
    runs = lm["runs"]
    held, lines = [], []
    for bits in ISSUE_BITS:
        m = {name: runs[str(bits)][name]["mean"] for name in LM_METHODS}
        ok = (
            m["stla_global_spin"] < min(m["gptq"], m["gptq_act"])
            and max(m["gptq"], m["gptq_act"]) < m["rtn"]
        )
        held.append(ok)
        lines.append(f"{bits} bits: " + ", ".join(f"{k} {v:.4f}" for k, v in m.items()))
    ablation = runs[str(ABLATION_BITS)]
    lines.append(
        f"ablations at {ABLATION_BITS} bits: "
        + ", ".join(f"{k} {ablation[k]['mean']:.4f}" for k in LM_ABLATIONS)
    )
    time_ratio = {
        str(b): runs[str(b)]["stla_global_spin"]["seconds"] / runs[str(b)]["gptq"]["seconds"]
        for b in runs
    }
    return check(
        "(issue) at 3 and 2 bits the seed-mean validation loss of the quantized LM orders "
        "STLA-global-spin < GPTQ (none and act order) < RTN",
        "; ".join(lines)
        + f" (full precision {lm['full_precision_val_loss']:.4f} nats/byte); STLA time / GPTQ "
        "time " + ", ".join(f"{b} bits {r:.1f}x" for b, r in time_ratio.items()),
        all(held),
    ), time_ratio


def _figures(config: STLAConfig, syn, lm):
    fig = Figure(figsize=(12, 4.2))
    left, middle, right = fig.subplots(1, 3)
    pc = syn["per_channel"]
    means = [np.mean(pc[a]) for a in SYNTHETIC_ARMS]
    low = [np.mean(pc[a]) - np.min(pc[a]) for a in SYNTHETIC_ARMS]
    high = [np.max(pc[a]) - np.mean(pc[a]) for a in SYNTHETIC_ARMS]
    left.bar(range(len(SYNTHETIC_ARMS)), means, yerr=[low, high], capsize=3)
    left.set_xticks(range(len(SYNTHETIC_ARMS)), SYNTHETIC_ARMS, rotation=45, ha="right")
    left.set_yscale("log")
    left.set_ylabel("relative output error (mean, seed range)")
    left.set_title(f"synthetic layer, {config.syn_bits} bits per channel")
    for arm in GROUPED_ARMS:
        values = [np.mean(syn["grouped"][str(b)][arm]) for b in config.bits_grid]
        middle.plot(config.bits_grid, values, marker="o", label=arm)
    middle.set_yscale("log")
    middle.set_xlabel("bits")
    middle.set_title(f"synthetic layer, groups of {config.syn_group}")
    middle.legend(fontsize=7)
    for name in LM_METHODS:
        values = [lm["runs"][str(b)][name]["mean"] for b in config.bits_grid]
        right.plot(config.bits_grid, values, marker="o", label=name)
    right.axhline(lm["full_precision_val_loss"], color="k", ls=":", label="full precision")
    right.set_yscale("log")
    right.set_xlabel("bits")
    right.set_ylabel("validation loss (nats/byte)")
    right.set_title(f"SimpleGPT, groups of {config.lm_group}")
    right.legend(fontsize=7)
    fig.tight_layout()
    stages = Figure(figsize=(6, 4))
    ax = stages.subplots()
    for name in LM_METHODS + LM_ABLATIONS:
        ax.plot(lm["runs"]["3"][name]["per_seed"][0]["stage_losses"], marker=".", label=name)
    ax.set_xlabel("quantization stage (0 = full precision)")
    ax.set_ylabel("validation loss (subset)")
    ax.set_title("3 bits, first calibration seed")
    ax.legend(fontsize=7)
    stages.tight_layout()
    return {"stla_ptq": fig, "stages": stages}


@register("stla-ptq", config=STLAConfig, claim=CLAIM)
def run(config: STLAConfig, rng_key: jax.Array, progress: Progress) -> Result:
    """Runs the synthetic-layer check and the language-model sweep; the note's verdict."""
    syn_key, lm_key = jax.random.split(rng_key)
    start = time.perf_counter()
    syn = _synthetic(config, syn_key, progress)
    syn_seconds = time.perf_counter() - start
    lm = _language_model(config, lm_key, progress)
    parts, wins = _note_parts(syn, config.seeds)
    issue, time_ratio = _issue_part(lm)
    held = [p.passed for p in parts]
    level = (
        "supported" if all(held) else "partly supported" if held[0] and held[1] else "not supported"
    )
    failed = [p.claim for p in [*parts, issue] if not p.passed]
    reason = f"note's rule: {level}; issue's LM target: {'held' if issue.passed else 'not held'}"
    if failed:
        reason += "; failed: " + "; ".join(failed)
    metrics = {
        "synthetic": syn,
        "synthetic_seconds": syn_seconds,
        "note_verdict": level,
        "note_counts": wins,
        "language_model": lm,
        "stla_time_over_gptq": time_ratio,
    }
    return Result(
        metrics=metrics, parts=[*parts, issue], figures=_figures(config, syn, lm), reason=reason
    )
