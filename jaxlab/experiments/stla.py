"""Experiment ``stla-ptq``: STLA against GPTQ and RTN on correlated layers and a small LM.

STLA (Zhang et al., ICML 2026) rounds clusters of columns jointly with AdaRound on a
Schur-complement objective that prices the compensation of the columns still to come, and orders
the columns by SpinCluster (Hessian-guided). We measure (``notes/stla.md``):

* **Synthetic layers** (the note's gating check): ``r = 64, d = 128``, ``n = 2048`` tokens of
  :func:`jaxlab.quant.correlated_layer` (rank-16 signal plus noise, log-normal feature scales),
  3 bits, per-row (scale, zero) from one grid search with metric ``H`` shared by every arm,
  clusters of 16, 1 % damping, 3 seeds, STLA at the reference's rounding budget (2000 AdaRound
  iterations at lr 0.015). Arms: RTN, GPTQ (natural / act order) and STLA {local, global} x
  {none, spin}; beside them RTN/GPTQ/GPTQ-act on their own min-max grids. Metric: relative
  output error ``tr(ΔHΔᵀ)/tr(WHWᵀ)``. Also per group (group = cluster = 32) at 4, 3 and 2 bits,
  every arm on the same grid rule (each group's grid searched against the Hessian when the group
  starts: ``S_g`` for the compensating methods, ``H_gg`` for RTN), min-max beside.
* **Language model**: a byte-level PreNorm :class:`jaxlab.nn.SimpleGPT` (quick: d = 128, 4
  layers, 400 steps of 16 x 64 bytes; full: d = 256, 4 layers) trained on the Python standard
  library's sources, every linear layer quantized block-sequentially by
  :func:`jaxlab.quant.quantize_model` at 3 and 2 bits, group = cluster = 32, on the searched grid
  for every arm (RTN, GPTQ, GPTQ-act, STLA-global-spin; min-max RTN and GPTQ-act beside), from 5
  calibration sets, each scored on 8 held-out byte blocks of the validation split.

**Verdict**: (1) global < local for STLA in both orders and (2) spin < none for STLA-global, each
in at least 2 of 3 seeds (the note's rule; *supported* needs (3) too, *partly supported* (1) and
(2)); (3) STLA-global-spin <= act-order GPTQ on the per-channel layer in at least 2 of 3 seeds;
(4, 5) at 3 and at 2 bits the language model orders STLA < GPTQ (both orders) < RTN: every
difference's 95 % paired interval (crossed bootstrap over calibration seeds and held-out blocks)
excludes 0 in the claimed direction (pass), one excludes it the other way (fail), else
``unresolved``. STLA's quantization time as a multiple of GPTQ's is reported.
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

from jaxlab._src import parts as _parts
from jaxlab._src.experiments import ExperimentConfig, Progress, Result, check, register
from jaxlab._src.stats import crossed_bootstrap_interval
from jaxlab._src.validation import check_int
from jaxlab.nn import sample_batch
from jaxlab.quant import (
    Quantizer,
    byte_language_model,
    correlated_layer,
    gptq,
    held_out_losses,
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
# Part 3 (the issue's gate at the reference's rounding budget): STLA-global-spin at most this
# multiple of act-order GPTQ's error on the per-channel layer. 1.00: STLA must match or beat it;
# the note's prototype found 0.95 at 2000 iterations, and the note's own 2 % slack (1.02) was
# set for the 200-iteration budget that could not make the rounding hard.
MAX_RATIO_TO_GPTQ_ACT = 1.00
# The language-model parts are judged at these bit widths.
ISSUE_BITS = (3, 2)
# Paired intervals on the language model: two-sided 95 % percentile intervals of the mean
# difference in validation loss, from a crossed bootstrap that resamples calibration seeds and
# held-out byte blocks independently (both are sampling variation the claim must survive).
CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 4000
SYNTHETIC_ARMS = (
    "rtn",
    "gptq",
    "gptq_act",
    "stla_local_none",
    "stla_global_none",
    "stla_local_spin",
    "stla_global_spin",
)
# Every compared arm uses the Hessian-searched grid; min-max grids are reported beside them.
MINMAX_ARMS = ("rtn_minmax", "gptq_minmax", "gptq_act_minmax")
GROUPED_ARMS = ("rtn", "gptq", "gptq_act", "stla_global_spin")
LM_METHODS = ("rtn", "gptq", "gptq_act", "stla_global_spin")
LM_BESIDE = ("rtn_minmax", "gptq_act_minmax")
# The claimed order on the language model: (better, worse) pairs.
LM_PAIRS = (
    ("stla_global_spin", "gptq"),
    ("stla_global_spin", "gptq_act"),
    ("gptq", "rtn"),
    ("gptq_act", "rtn"),
)


@dataclasses.dataclass(frozen=True)
class STLAConfig(ExperimentConfig):
    """Sizes of the ``stla-ptq`` experiment (``smoke``, ``quick``, ``full``).

    Attributes:
      seeds: synthetic-layer seeds.
      syn_rows, syn_cols, syn_tokens, syn_rank: the synthetic layer (r, d, n, signal rank).
      syn_bits: bit width of the per-channel synthetic check.
      syn_cluster: STLA cluster size on the synthetic layer.
      syn_group: group (= cluster) size of the per-group synthetic sweep.
      bits_grid: bit widths of the per-group synthetic sweep.
      lm_bits: bit widths of the language-model comparison.
      num_iters, learning_rate, round_weight, qkv_round_weight: AdaRound on the synthetic
        layers (the reference's 2000 iterations at lr 0.015; λ = 1.5 for q/k/v).
      lm_num_iters, lm_learning_rate: AdaRound on the language model. Quick uses 300 steps at
        lr 0.1, a schedule with the same summed step (0.65 lr T = 19.5) as the reference's,
        far beyond the ln 11 ≈ 2.40 a rounding logit must travel; full uses the reference's.
      lm_d_model, lm_layers, lm_heads, lm_seq_len: the SimpleGPT (PreNorm).
      lm_steps, lm_batch, lm_peak_lr, lm_warmup: its training.
      lm_corpus_bytes: standard-library bytes (90/10 train/validation split).
      lm_group: group = cluster size of the model quantization.
      calib_seeds: calibration sets (independent draws of training windows) per method.
      calib_windows: calibration windows (of ``lm_seq_len`` tokens) per calibration set.
      eval_blocks: held-out byte blocks (contiguous, equal parts of the validation split).
      eval_windows: validation windows drawn from each block.
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
    lm_bits: tuple[int, ...] = (3, 2)
    num_iters: int = 2000
    learning_rate: float = 0.015
    round_weight: float = 1.0
    qkv_round_weight: float = 1.5
    lm_num_iters: int = 300
    lm_learning_rate: float = 0.1
    lm_d_model: int = 128
    lm_layers: int = 4
    lm_heads: int = 4
    lm_seq_len: int = 64
    lm_ffn_multiplier: float = 1.0
    lm_steps: int = 400
    lm_batch: int = 16
    lm_peak_lr: float = 3e-3
    lm_warmup: int = 30
    lm_corpus_bytes: int = 1_000_000
    lm_group: int = 32
    calib_seeds: int = 5
    calib_windows: int = 32
    eval_blocks: int = 8
    eval_windows: int = 16

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
            lm_num_iters=20,
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
            calib_seeds=2,
            calib_windows=4,
            eval_blocks=3,
            eval_windows=2,
        )

    @classmethod
    def quick(cls) -> STLAConfig:
        return cls()

    @classmethod
    def full(cls) -> STLAConfig:
        # Accelerator: the issue's larger model (d = 256, 4 layers) trained longer, the note's
        # 128 calibration windows and group = cluster = 128.
        return cls(
            lm_d_model=256,
            lm_layers=4,
            lm_heads=8,
            lm_seq_len=256,
            lm_steps=4000,
            lm_batch=64,
            lm_num_iters=2000,
            lm_learning_rate=0.015,
            lm_corpus_bytes=4_000_000,
            lm_group=128,
            calib_windows=128,
            eval_blocks=16,
            eval_windows=32,
        )

    def __post_init__(self):
        check_int(self.seeds, "seeds", minimum=2)
        check_int(self.calib_seeds, "calib_seeds", minimum=2)
        check_int(self.eval_blocks, "eval_blocks", minimum=2)
        if self.syn_cols % self.syn_cluster or self.syn_cols % self.syn_group:
            raise ValueError("syn_cluster and syn_group must divide syn_cols")
        if self.lm_d_model % self.lm_group:
            raise ValueError(f"lm_group={self.lm_group} must divide lm_d_model={self.lm_d_model}")
        if not set(ISSUE_BITS) <= set(self.lm_bits):
            raise ValueError(f"lm_bits must contain {ISSUE_BITS}, got {self.lm_bits}")


# ------------------------------------------------------------------------------------------------
# Synthetic layers.


def _arm(name: str, w, h, *, bits, group, cluster, config, params=None, round_weight=None):
    """One arm on one layer: the Hessian-searched grid unless the name ends in ``_minmax``.

    ``params`` fixes a per-row grid shared by every arm (``group`` None = per channel).
    """
    grid = "minmax" if name.endswith("_minmax") else "search"
    quantizer = Quantizer(bits=bits, group_size=group, grid=grid)
    name = name.removesuffix("_minmax")
    if name == "rtn":
        return rtn(w, h, quantizer, params=params)
    if name.startswith("gptq"):
        return gptq(w, h, quantizer, order="act" if name == "gptq_act" else "none", params=params)
    _, loss, order = name.split("_")
    return stla(
        w,
        h,
        quantizer,
        cluster_size=cluster,
        loss=loss,
        order=order,
        params=params,
        num_iters=config.num_iters,
        learning_rate=config.learning_rate,
        round_weight=config.round_weight if round_weight is None else round_weight,
    )


def _synthetic(config: STLAConfig, rng_key, progress) -> dict[str, Any]:
    per_channel = {arm: [] for arm in SYNTHETIC_ARMS + MINMAX_ARMS}
    hard = []
    grouped = {str(b): {arm: [] for arm in GROUPED_ARMS + MINMAX_ARMS} for b in config.bits_grid}
    for seed in progress.track(range(config.seeds), total=config.seeds, description="layers"):
        p = correlated_layer(
            jax.random.fold_in(rng_key, seed),
            rows=config.syn_rows,
            cols=config.syn_cols,
            num_tokens=config.syn_tokens,
            rank=config.syn_rank,
        )
        w, h = np.asarray(p.weight), np.asarray(p.hessian, np.float64)
        # One grid search with metric H per row, before the column loop, shared by every arm
        # (per-channel quantization); the min-max arms use the min-max grid of W instead.
        _, h_damped = prepare_hessian(w, h)
        scale, zero = search_quant_params(w, h_damped, bits=config.syn_bits)
        params = (np.asarray(scale), np.asarray(zero))
        for arm in SYNTHETIC_ARMS + MINMAX_ARMS:
            out = _arm(
                arm,
                w,
                h,
                bits=config.syn_bits,
                group=None,
                cluster=config.syn_cluster,
                config=config,
                params=None if arm.endswith("_minmax") else params,
            )
            per_channel[arm].append(float(out.info.relative_error))
            if arm == "stla_global_spin":
                hard.append(float(np.mean(out.info.hard_fraction)))
        for bits in config.bits_grid:
            for arm in GROUPED_ARMS + MINMAX_ARMS:
                g = config.syn_group
                out = _arm(arm, w, h, bits=bits, group=g, cluster=g, config=config)
                grouped[str(bits)][arm].append(float(out.info.relative_error))
    return {"per_channel": per_channel, "hard_fraction": hard, "grouped": grouped}


def _wins(*pairs: tuple[list[float], list[float]]) -> int:
    """The number of seeds in which ``a < b`` for every pair ``(a, b)`` of per-seed values."""
    return int(np.sum(np.all([np.less(a, b) for a, b in pairs], axis=0)))


# ------------------------------------------------------------------------------------------------
# Language model.


def _train_model(config: STLAConfig, rng_key, progress):
    lm = byte_language_model(
        rng_key,
        d_model=config.lm_d_model,
        num_layers=config.lm_layers,
        num_heads=config.lm_heads,
        seq_len=config.lm_seq_len,
        ffn_multiplier=config.lm_ffn_multiplier,
        steps=config.lm_steps,
        batch_size=config.lm_batch,
        peak_lr=config.lm_peak_lr,
        warmup=config.lm_warmup,
        corpus_bytes=config.lm_corpus_bytes,
        progress=progress,
    )
    return lm.model, lm.train, lm.val, lm.history, lm.train_seconds


def _lm_method(name: str, config: STLAConfig, bits: int):
    """``(layer, w, h) -> QuantizedWeight`` of one arm on the LM (λ = 1.5 for q/k/v in STLA)."""
    lm = dataclasses.replace(
        config, num_iters=config.lm_num_iters, learning_rate=config.lm_learning_rate
    )

    def method(layer: str, w, h):
        qkv = layer.rsplit(".", 1)[-1] in ("q", "k", "v")
        weight = config.qkv_round_weight if qkv else config.round_weight
        g = config.lm_group
        return _arm(name, w, h, bits=bits, group=g, cluster=g, config=lm, round_weight=weight)

    return method


def _language_model(config: STLAConfig, rng_key, progress) -> dict[str, Any]:
    train_key, eval_key, calib_key, boot_key = jax.random.split(rng_key, 4)
    model, train, val, history, train_s = _train_model(config, train_key, progress)
    block_losses = held_out_losses(
        model,
        val,
        num_blocks=config.eval_blocks,
        windows=config.eval_windows,
        seq_len=config.lm_seq_len,
        rng_key=eval_key,
    )
    calib = [
        sample_batch(
            jax.random.fold_in(calib_key, s), train, config.calib_windows, config.lm_seq_len
        )[0]
        for s in range(config.calib_seeds)
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
    fp = block_losses(model)
    runs: dict[str, dict[str, Any]] = {str(b): {} for b in config.lm_bits}
    jobs = [(b, m) for b in config.lm_bits for m in LM_METHODS + LM_BESIDE]

    def job(bits, name):  # one unit of work (issue 45: the full profile in parts)
        # RTN's searched grid depends on the calibration Hessian; its min-max grid does not.
        seeds = 1 if name == "rtn_minmax" else config.calib_seeds
        table, seconds, nonfinite = [], [], 0
        for s in range(seeds):
            out = quantize_model(model, calib[s], _lm_method(name, config, bits))
            table.append(block_losses(out.model).tolist())
            seconds.append(out.quantization_seconds)
            nonfinite += sum(int(r.info.nonfinite_count) for r in out.layers.values())
        table = table * (config.calib_seeds // seeds)
        return {
            "block_losses": table,  # [calibration seed][held-out block]
            "mean": float(np.mean(table)),
            "perplexity": float(math.exp(np.mean(table))),
            "seconds": float(np.mean(seconds)),
            "nonfinite": nonfinite,
        }

    for bits, name in progress.track(jobs, total=len(jobs), description="quantizing the LM"):
        runs[str(bits)][name] = _parts.unit(
            {"quantize": f"{bits}/{name}"}, lambda bits=bits, name=name: job(bits, name)
        )
    intervals = {}
    for bits in config.lm_bits:
        for k, (better, worse) in enumerate(LM_PAIRS):
            diff = np.asarray(runs[str(bits)][better]["block_losses"]) - np.asarray(
                runs[str(bits)][worse]["block_losses"]
            )
            mean, low, high = crossed_bootstrap_interval(
                diff,
                rng_key=jax.random.fold_in(boot_key, 10 * bits + k),
                resamples=BOOTSTRAP_RESAMPLES,
                confidence=CONFIDENCE,
            )
            intervals[f"{bits}:{better}-{worse}"] = {"mean": mean, "low": low, "high": high}
    return {
        "full_precision_block_losses": fp.tolist(),
        "full_precision_val_loss": float(np.mean(fp)),
        "train_seconds": train_s,
        "final_train_loss": float(np.mean(history["train_loss"][-20:])),
        "num_params": int(sum(v.size for v in jax.tree.leaves(nnx.state(model, nnx.Param)))),
        "runs": runs,
        "intervals": intervals,
    }


# ------------------------------------------------------------------------------------------------
# Verdict and figures.


def _note_parts(syn: dict[str, Any], seeds: int):
    pc = syn["per_channel"]
    need = math.ceil(MIN_SEED_FRACTION * seeds - 1e-9)
    global_spin, global_none = pc["stla_global_spin"], pc["stla_global_none"]
    both = _wins((global_none, pc["stla_local_none"]), (global_spin, pc["stla_local_spin"]))
    spin = _wins((global_spin, global_none))
    ratio = [s / a for s, a in zip(pc["stla_global_spin"], pc["gptq_act"], strict=True)]
    parity = int(sum(r <= MAX_RATIO_TO_GPTQ_ACT for r in ratio))
    fmt = lambda arm: "/".join(f"{v:.5f}" for v in pc[arm])
    parts = [
        check(
            f"(note) global < local Schur objective for STLA in both orders, in >= {need} of "
            f"{seeds} seeds (synthetic layer, relative output error)",
            f"{both}/{seeds} seeds; global-none {fmt('stla_global_none')} vs local-none "
            f"{fmt('stla_local_none')}; global-spin {fmt('stla_global_spin')} vs local-spin "
            f"{fmt('stla_local_spin')}",
            both >= need,
        ),
        check(
            f"(note) SpinCluster order < no order for STLA-global, in >= {need} of {seeds} seeds",
            f"{spin}/{seeds} seeds; spin {fmt('stla_global_spin')} vs none "
            f"{fmt('stla_global_none')}",
            spin >= need,
        ),
        check(
            f"(issue) STLA-global-spin <= {MAX_RATIO_TO_GPTQ_ACT:.2f} x act-order GPTQ on the "
            f"per-channel layer (one searched grid for every arm), in >= {need} of {seeds} seeds",
            f"{parity}/{seeds} seeds; ratios STLA/GPTQ-act "
            + "/".join(f"{r:.3f}" for r in ratio)
            + f"; RTN {fmt('rtn')}, GPTQ {fmt('gptq')}, GPTQ-act {fmt('gptq_act')}; beside, "
            f"min-max grids: GPTQ-act {fmt('gptq_act_minmax')}; STLA hard fraction "
            + "/".join(f"{v:.3f}" for v in syn["hard_fraction"]),
            parity >= need,
        ),
    ]
    return parts, {
        "seed_wins": {
            "global_lt_local_both_orders": both,
            "spin_lt_none": spin,
            "stla_le_gptq_act": parity,
        },
        "needed": need,
        "stla_over_gptq_act": ratio,
    }


def _lm_parts(lm: dict[str, Any], config: STLAConfig):
    runs, intervals = lm["runs"], lm["intervals"]
    parts = []
    for bits in ISSUE_BITS:
        lines, claimed, contradicted = [], True, False
        for better, worse in LM_PAIRS:
            iv = intervals[f"{bits}:{better}-{worse}"]
            claimed &= iv["high"] < 0
            contradicted |= iv["low"] > 0
            lines.append(
                f"{better} - {worse} {iv['mean']:+.5f} [{iv['low']:+.5f}, {iv['high']:+.5f}]"
            )
        means = ", ".join(f"{k} {runs[str(bits)][k]['mean']:.4f}" for k in LM_METHODS + LM_BESIDE)
        parts.append(
            check(
                f"(issue) {bits} bits: validation loss of the quantized LM orders "
                "STLA-global-spin < GPTQ (none and act order) < RTN, every arm on the searched "
                f"grid; each difference's {CONFIDENCE:.0%} paired interval over "
                f"{config.calib_seeds} calibration seeds x {config.eval_blocks} held-out blocks "
                "excludes 0 (fail when one excludes it the other way)",
                "; ".join(lines) + f" (nats/byte); means: {means}; full precision "
                f"{lm['full_precision_val_loss']:.4f}",
                not contradicted and claimed,
                resolved=claimed or contradicted,
            )
        )
    time_ratio = {
        str(b): runs[str(b)]["stla_global_spin"]["seconds"] / runs[str(b)]["gptq"]["seconds"]
        for b in runs
    }
    return parts, time_ratio


def _figures(config: STLAConfig, syn, lm):
    fig = Figure(figsize=(12, 4.2))
    left, middle, right = fig.subplots(1, 3)
    pc = syn["per_channel"]
    arms = SYNTHETIC_ARMS + MINMAX_ARMS
    means = [np.mean(pc[a]) for a in arms]
    low = [np.mean(pc[a]) - np.min(pc[a]) for a in arms]
    high = [np.max(pc[a]) - np.mean(pc[a]) for a in arms]
    left.bar(range(len(arms)), means, yerr=[low, high], capsize=3)
    left.set_xticks(range(len(arms)), arms, rotation=45, ha="right")
    left.set_yscale("log")
    left.set_ylabel("relative output error (mean, seed range)")
    left.set_title(f"synthetic layer, {config.syn_bits} bits per channel")

    def by_bits(ax, bits, arms, value, title):  # one line per arm (min-max grids dotted)
        for arm in arms:
            style = ":" if arm.endswith("_minmax") else "-"
            ax.plot(bits, [value(b, arm) for b in bits], style, marker="o", label=arm)
        ax.set(yscale="log", xlabel="bits", title=title)

    grouped = lambda b, arm: np.mean(syn["grouped"][str(b)][arm])  # noqa: E731
    title = f"synthetic layer, groups of {config.syn_group}"
    by_bits(middle, config.bits_grid, GROUPED_ARMS + MINMAX_ARMS, grouped, title)
    lm_loss = lambda b, arm: lm["runs"][str(b)][arm]["mean"]  # noqa: E731
    title = f"SimpleGPT d={config.lm_d_model} x {config.lm_layers}, groups of {config.lm_group}"
    by_bits(right, config.lm_bits, LM_METHODS + LM_BESIDE, lm_loss, title)
    right.axhline(lm["full_precision_val_loss"], color="k", ls=":", label="full precision")
    right.set_ylabel("validation loss (nats/byte)")
    middle.legend(fontsize=7)
    right.legend(fontsize=7)
    fig.tight_layout()
    return {"stla_ptq": fig}


@register("stla-ptq", config=STLAConfig, claim=CLAIM)
def run(config: STLAConfig, rng_key: jax.Array, progress: Progress) -> Result:
    """Runs the synthetic-layer check and the language-model comparison; their verdict."""
    syn_key, lm_key = jax.random.split(rng_key)
    start = time.perf_counter()
    syn = _synthetic(config, syn_key, progress)
    syn_seconds = time.perf_counter() - start
    lm = _language_model(config, lm_key, progress)
    parts, wins = _note_parts(syn, config.seeds)
    lm_parts, time_ratio = _lm_parts(lm, config)
    held = [p.passed for p in parts]
    level = (
        "supported" if all(held) else "partly supported" if held[0] and held[1] else "not supported"
    )
    reason = f"note's rule: {level}; language model: " + ", ".join(
        f"{b} bits {p.status}" for b, p in zip(ISSUE_BITS, lm_parts, strict=True)
    )
    failed = [p.claim for p in [*parts, *lm_parts] if p.status == "fail"]
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
        metrics=metrics,
        parts=[*parts, *lm_parts],
        figures=_figures(config, syn, lm),
        reason=reason,
    )
