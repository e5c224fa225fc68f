"""Experiment ``simplegpt-lr``: does normalizing after every linear map allow larger LRs?

A byte-level language model (V = 256) on the Python standard library's own sources (sorted by
path, first 2 MB, 90/10 split; no download) is trained with the paper code's recipe (AdamW
(0.9, 0.95, 1e-8), weight decay 0.1 on all parameters, clipping at 1, linear warmup and decay)
in three placements of one code path: SimpleGPT (``"simple"``), PreNorm Llama (``"pre"``) and
PreNorm + QKNorm (``"pre_qk"``), over the note's peak-LR grid and seeds. Quick profile: d = 64,
L = 2, 4 heads, seq 64, batch 16, 300 steps, warmup 15, LRs {1e-3, 3e-3, 1e-2, 3e-2, 1e-1},
2 seeds. All (LR, seed) lanes of one placement train together under ``jax.vmap`` (one compiled
program per placement); seed ``s`` sees the same batches and, where shapes agree, the same
initial draws in every placement and LR.

Measured: loss curves, final validation loss (mean over fixed validation windows), the note's
stability rule per run (finite throughout; final train loss, the mean of the last ``tail_steps``
steps, below the first step's loss minus 0.5; after warmup no train loss more than 1.0 above the
running minimum), ``lr*_max`` = the largest LR at which every seed is stable, the dominant
eigenvalue of the parameter Hessian (power iteration, 20 Hessian-vector products, fixed
validation batch; re-run with a shift when it comes out negative, so the value is the most
positive eigenvalue) at init, mid-training and the end for the matched LR 3e-3, and per-sublayer
activation RMS at the end.

Verdict (the issue's two parts): (1) ``lr*_max(simple) >= 3·lr*_max(pre)``; (2) SimpleGPT's
``λ_max`` (median over seeds) is below PreNorm's at each checkpoint. The note's calibrated
three-level rule is reported in the metrics: *supported* if (1) holds and the best validation
loss of SimpleGPT is at most PreNorm's + 0.02, *partly* if ``lr*_max(simple) >= lr*_max(pre)``
and ``λ_max(simple) < λ_max(pre)`` at the end, *not supported* otherwise. ``λ_max`` is the raw
parameter Hessian's (the GD threshold 2/λ); AdamW's effective limit involves the preconditioned
Hessian, not measured here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import sys
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from matplotlib.figure import Figure

from jaxlab._src.experiments import ExperimentConfig, Progress, Result, check, register
from jaxlab._src.validation import check_positive_int
from jaxlab.nn import (
    GPTConfig,
    SimpleGPT,
    language_model_loss,
    loss_curve_stability,
    sample_batch,
    scan_train,
    simplegpt_optimizer,
    simplegpt_schedule,
    split_corpus,
    stdlib_byte_corpus,
    top_eigenvalue,
)

__all__ = ["SimpleGPTLRConfig", "run"]

CLAIM = (
    "Chen et al. (ICML 2026, SimpleGPT): normalizing the output of every linear map (SimpleNorm) "
    "keeps activations at scale Θ(√d), lowers the spectral norm of the loss Hessian and so allows "
    "3x-10x larger stable learning rates than PreNorm Llama, at equal or better loss."
)
_CHECKPOINTS = ("init", "mid", "end")
_LR_RATIO = 3.0


@dataclasses.dataclass(frozen=True)
class SimpleGPTLRConfig(ExperimentConfig):
    """Sizes of the ``simplegpt-lr`` experiment (``smoke``, ``quick``, ``full``).

    Attributes:
      placements: norm placements compared (``"simple"`` and ``"pre"`` are judged).
      learning_rates: peak LRs of the sweep (ascending).
      seeds: independent seeds (init and batches) per LR.
      d_model: residual width.
      num_layers: blocks.
      num_heads: attention heads.
      multiple_of: FFN width rounding.
      seq_len: tokens per row.
      batch_size: rows per step.
      steps: optimizer steps (even: the mid checkpoint is ``steps // 2``).
      warmup_steps: linear warmup steps.
      weight_decay: AdamW decay (all parameters).
      corpus_bytes: bytes of the stdlib corpus.
      val_fraction: held-out tail of the corpus.
      eval_batches: validation batches (``batch_size`` rows each) of the final val loss.
      matched_lr: the LR at which ``λ_max`` is compared (must be in ``learning_rates``).
      hessian_iters: Hessian-vector products per power iteration.
      hessian_batch_size: rows of the fixed validation batch of the Hessian.
      min_drop: a stable run ends at least this far below its first loss.
      spike_threshold: a stable run never rises more than this above its running minimum
        after warmup.
      tail_steps: steps averaged into the final train loss.
      lanes_per_call: (LR, seed) lanes trained per compiled call (None: all at once).
    """

    placements: tuple[str, ...] = ("simple", "pre", "pre_qk")
    learning_rates: tuple[float, ...] = (1e-3, 3e-3, 1e-2, 3e-2, 1e-1)
    seeds: int = 2
    d_model: int = 64
    num_layers: int = 2
    num_heads: int = 4
    multiple_of: int = 32
    seq_len: int = 64
    batch_size: int = 16
    steps: int = 300
    warmup_steps: int = 15
    weight_decay: float = 0.1
    corpus_bytes: int = 2_000_000
    val_fraction: float = 0.1
    eval_batches: int = 8
    matched_lr: float = 3e-3
    hessian_iters: int = 20
    hessian_batch_size: int = 16
    min_drop: float = 0.5
    spike_threshold: float = 1.0
    tail_steps: int = 10
    lanes_per_call: int | None = None

    def __post_init__(self):
        if "simple" not in self.placements or "pre" not in self.placements:
            raise ValueError(f"placements must include 'simple' and 'pre', got {self.placements}")
        if list(self.learning_rates) != sorted(self.learning_rates):
            raise ValueError(f"learning_rates must be ascending, got {self.learning_rates}")
        check_positive_int(self.steps, "steps")
        if self.steps % 2:
            raise ValueError(f"steps must be even (mid checkpoint at steps/2), got {self.steps}")
        if not any(math.isclose(lr, self.matched_lr) for lr in self.learning_rates):
            raise ValueError(f"matched_lr={self.matched_lr} is not in {self.learning_rates}")

    @classmethod
    def smoke(cls) -> SimpleGPTLRConfig:
        # Compile time dominates: one layer, and only the two judged placements.
        return cls(
            placements=("simple", "pre"),
            learning_rates=(3e-3, 3e-2),
            seeds=1,
            num_layers=1,
            d_model=32,
            num_heads=2,
            seq_len=32,
            batch_size=8,
            steps=20,
            warmup_steps=2,
            corpus_bytes=100_000,
            eval_batches=2,
            hessian_iters=4,
            hessian_batch_size=4,
            tail_steps=3,
        )

    @classmethod
    def quick(cls) -> SimpleGPTLRConfig:
        # The note's grid stops at 0.1, where every placement was still stable after 300 steps
        # (measured: lr*_max = 0.1 for all three, so the ratio was censored at 1). Two more
        # half-decade steps let the sweep find where each placement breaks.
        return cls(learning_rates=(1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0))

    @classmethod
    def full(cls) -> SimpleGPTLRConfig:
        # LR grid in ×√3 steps from 3e-4 (3e-4·3^(k/2), k = 0..12, up to 0.22); 2.7e-3 matched.
        return cls(
            learning_rates=tuple(3e-4 * 3.0 ** (k / 2) for k in range(13)),
            seeds=3,
            d_model=256,
            num_layers=6,
            num_heads=8,
            seq_len=256,
            batch_size=32,
            steps=3000,
            warmup_steps=150,
            corpus_bytes=8_000_000,
            eval_batches=16,
            matched_lr=3e-4 * 9.0,
            hessian_batch_size=32,
            tail_steps=50,
            lanes_per_call=13,
        )


def _gpt_config(config: SimpleGPTLRConfig, placement: str) -> GPTConfig:
    return GPTConfig(
        vocab_size=256,
        d_model=config.d_model,
        num_layers=config.num_layers,
        num_heads=config.num_heads,
        multiple_of=config.multiple_of,
        max_len=config.seq_len,
        norm_placement=placement,
    )


def _train_placement(
    config: SimpleGPTLRConfig,
    placement: str,
    train: jax.Array,
    eval_windows: tuple[jax.Array, jax.Array],
    rng_key: jax.Array,
):
    """Trains every (LR, seed) lane of one placement; returns curves, val losses, checkpoints.

    One jitted, vmapped program per placement does everything for a lane: draws the initial
    parameters, trains (:func:`jaxlab.nn.scan_train`, checkpointed after each half: the mid and
    end parameters; the peak LR is a traced lane argument) and evaluates the final validation
    loss.
    """
    gpt = _gpt_config(config, placement)
    graphdef, _ = nnx.split(nnx.eval_shape(lambda: SimpleGPT(gpt, rngs=nnx.Rngs(0))))
    half = config.steps // 2

    def loss_of(params, batch):
        return language_model_loss(nnx.merge(graphdef, params), *batch)

    def lane(init_key, peak_lr, data_key):
        params0 = nnx.state(SimpleGPT(gpt, rngs=nnx.Rngs(params=init_key)), nnx.Param)
        schedule = simplegpt_schedule(peak_lr, config.warmup_steps, config.steps)

        def batch(step_id):
            key = jax.random.fold_in(data_key, step_id)
            return sample_batch(key, train, config.batch_size, config.seq_len)

        trained = scan_train(
            loss_of,
            params0,
            simplegpt_optimizer(schedule, config.weight_decay),
            batch,
            config.steps,
            checkpoint_every=half,  # the parameters after each half: mid and end checkpoints
        )
        params_mid = jax.tree.map(lambda x: x[0], trained.checkpoints)
        val = jnp.mean(jax.lax.map(lambda b: loss_of(trained.params, b), eval_windows))
        return params0, params_mid, trained.params, trained.losses, val

    run_lanes = jax.jit(jax.vmap(lane))
    seed_keys = jax.random.split(rng_key, config.seeds)
    lanes = [(i, s) for i in range(len(config.learning_rates)) for s in range(config.seeds)]
    per_call = config.lanes_per_call or len(lanes)
    out = {"losses": {}, "val": {}, "params": {}}
    for start in range(0, len(lanes), per_call):
        group = lanes[start : start + per_call]
        init_keys = jnp.stack([jax.random.fold_in(seed_keys[s], 0) for _, s in group])
        data_keys = jnp.stack([jax.random.fold_in(seed_keys[s], 1) for _, s in group])
        lrs = jnp.asarray([config.learning_rates[i] for i, _ in group], jnp.float32)
        params0, params_mid, params_end, losses, vals = run_lanes(init_keys, lrs, data_keys)
        losses, vals = np.asarray(losses), np.asarray(vals)
        for j, lane_id in enumerate(group):
            out["losses"][lane_id] = losses[j]
            out["val"][lane_id] = float(vals[j])
            out["params"][lane_id] = {
                name: jax.tree.map(lambda x, j=j: x[j], p)
                for name, p in (("init", params0), ("mid", params_mid), ("end", params_end))
            }
    return out, graphdef


def _hessian_fn(graphdef, batch, num_iters):
    """Jitted ``(params, key, shift) -> dominant eigenvalue of ∇²L − shift·I, plus shift``."""

    def dominant(params, key, shift):
        def loss(p):
            return language_model_loss(nnx.merge(graphdef, p), *batch)

        return top_eigenvalue(loss, params, rng_key=key, num_iters=num_iters, shift=shift)[0]

    return jax.jit(dominant)


def _figures(config, placements, summary, hessian):
    lrs = np.asarray(config.learning_rates)
    fig = Figure(figsize=(11, 4))
    left, right = fig.subplots(1, 2)
    for placement in placements:
        rows = summary[placement]["per_lr"]
        val = np.asarray([r["val_loss_median"] for r in rows], dtype=float)
        stable = np.asarray([r["stable_all_seeds"] for r in rows])
        val_plot = np.where(np.isfinite(val), np.minimum(val, 8.0), 8.0)
        (line,) = left.semilogx(lrs, val_plot, "-", label=placement)
        left.semilogx(lrs[stable], val_plot[stable], "o", color=line.get_color())
        left.semilogx(lrs[~stable], val_plot[~stable], "x", color=line.get_color(), ms=9)
        curve = np.asarray(summary[placement]["matched_lr_curve_seed0"], dtype=float)
        right.plot(
            np.arange(1, curve.size + 1), curve, label=f"{placement}, lr {config.matched_lr}"
        )
        top = summary[placement]["largest_lr_curve_seed0"]
        right.plot(
            np.arange(1, len(top) + 1),
            np.minimum(np.asarray(top, dtype=float), 8.0),
            "--",
            color=line.get_color(),
            label=f"{placement}, lr {lrs[-1]:g}",
        )
    left.set_xlabel("peak learning rate")
    left.set_ylabel("final validation loss (median over seeds, capped at 8)")
    left.set_title("LR sweep (o stable, x unstable)")
    left.legend()
    right.set_xlabel("step")
    right.set_ylabel("train loss (seed 0, capped at 8)")
    right.legend(fontsize=7)
    fig.tight_layout()

    fig_h = Figure(figsize=(6, 4))
    ax = fig_h.subplots()
    x = np.arange(len(_CHECKPOINTS))
    width = 0.8 / max(len(placements), 1)
    for i, placement in enumerate(placements):
        values = [hessian[placement][c]["lambda_max_median"] for c in _CHECKPOINTS]
        ax.bar(x + i * width, values, width, label=placement)
    ax.set_xticks(x + width * (len(placements) - 1) / 2, _CHECKPOINTS)
    ax.set_yscale("log")
    ax.set_ylabel("λ_max of the parameter Hessian (median over seeds)")
    ax.set_title(f"top Hessian eigenvalue, lr {config.matched_lr}")
    ax.legend()
    fig_h.tight_layout()
    return {"lr_sweep": fig, "hessian": fig_h}


@register("simplegpt-lr", config=SimpleGPTLRConfig, claim=CLAIM)
def run(config: SimpleGPTLRConfig, rng_key: jax.Array, progress: Progress) -> Result:
    """Runs the LR sweep of every placement and computes the verdict (module docstring)."""
    matched = next(
        i for i, lr in enumerate(config.learning_rates) if math.isclose(lr, config.matched_lr)
    )
    corpus = stdlib_byte_corpus(config.corpus_bytes)
    train_np, val_np = split_corpus(corpus, config.val_fraction)
    train, val = jnp.asarray(train_np), jnp.asarray(val_np)
    data_key, hessian_key, train_key = jax.random.split(rng_key, 3)
    eval_key, batch_key = jax.random.split(data_key)
    windows = sample_batch(eval_key, val, config.eval_batches * config.batch_size, config.seq_len)
    eval_windows = jax.tree.map(
        lambda x: jnp.reshape(x, (config.eval_batches, config.batch_size, config.seq_len)),
        windows,
    )
    hessian_batch = sample_batch(batch_key, val, config.hessian_batch_size, config.seq_len)
    rule = dict(
        warmup_steps=config.warmup_steps,
        min_drop=config.min_drop,
        spike_threshold=config.spike_threshold,
        tail_steps=config.tail_steps,
    )

    summary: dict[str, Any] = {}
    hessian: dict[str, Any] = {}
    activation_rms: dict[str, Any] = {}
    for placement in progress.track(config.placements, description="placements"):
        trained, graphdef = _train_placement(config, placement, train, eval_windows, train_key)
        per_lr = []
        for i, lr in enumerate(config.learning_rates):
            runs = [
                loss_curve_stability(trained["losses"][(i, s)], **rule) for s in range(config.seeds)
            ]
            vals = [trained["val"][(i, s)] for s in range(config.seeds)]
            per_lr.append(
                {
                    "lr": lr,
                    "stable_all_seeds": all(r["stable"] for r in runs) and all(np.isfinite(vals)),
                    "val_loss_median": float(np.median(vals)),
                    "val_loss": vals,
                    "runs": runs,
                }
            )
        stable_lrs = [r["lr"] for r in per_lr if r["stable_all_seeds"]]
        stable_vals = [r["val_loss_median"] for r in per_lr if r["stable_all_seeds"]]
        summary[placement] = {
            "per_lr": per_lr,
            "largest_stable_lr": max(stable_lrs) if stable_lrs else 0.0,
            "best_val_loss": min(stable_vals) if stable_vals else float("nan"),
            "matched_lr_curve_seed0": trained["losses"][(matched, 0)],
            "largest_lr_curve_seed0": trained["losses"][(len(config.learning_rates) - 1, 0)],
            "train_loss_curves": {
                f"{lr:g}": [trained["losses"][(i, s)] for s in range(config.seeds)]
                for i, lr in enumerate(config.learning_rates)
            },
        }

        hess = _hessian_fn(graphdef, hessian_batch, config.hessian_iters)
        hessian[placement] = {}
        for checkpoint in _CHECKPOINTS:
            dominant, top = [], []
            for s in range(config.seeds):
                params = trained["params"][(matched, s)][checkpoint]
                key = jax.random.fold_in(hessian_key, s)
                value = float(hess(params, key, 0.0))
                dominant.append(value)
                # A negative dominant eigenvalue: shift by it to reach the most positive one.
                top.append(float(hess(params, key, value)) if value < 0 else value)
            hessian[placement][checkpoint] = {
                "lambda_max": top,
                "lambda_max_median": float(np.median(top)),
                "dominant_eigenvalue": dominant,
            }
        model_end = nnx.merge(graphdef, trained["params"][(matched, 0)]["end"])
        activation_rms[placement] = {
            name: float(v) for name, v in model_end.activation_rms(hessian_batch[0]).items()
        }

    lr_simple = summary["simple"]["largest_stable_lr"]
    lr_pre = summary["pre"]["largest_stable_lr"]
    ratio = lr_simple / lr_pre if lr_pre > 0 else (math.inf if lr_simple > 0 else float("nan"))
    # Grid LRs are ratios like 0.03/0.01 = 2.9999999999999996 in floating point.
    part1_ok = lr_pre > 0 and lr_simple > 0 and ratio >= _LR_RATIO * (1 - 1e-9)
    edge = " (SimpleGPT stable at the grid's top: the ratio is a lower bound)" * (
        lr_simple == config.learning_rates[-1]
    )
    qk = summary.get("pre_qk", {}).get("largest_stable_lr")
    part1 = check(
        "(1) SimpleGPT's largest stable peak LR >= 3x PreNorm Llama's",
        f"lr*_max simple {lr_simple:g}, pre {lr_pre:g}, ratio {ratio:.3g}{edge}"
        + (f"; pre_qk {qk:g}" if qk is not None else "")
        + f" ({config.seeds} seeds, every seed stable)",
        part1_ok,
    )
    lam = {p: [hessian[p][c]["lambda_max_median"] for c in _CHECKPOINTS] for p in hessian}
    lower = [s < p for s, p in zip(lam["simple"], lam["pre"], strict=True)]
    part2 = check(
        f"(2) SimpleGPT's top Hessian eigenvalue is lower than PreNorm's at matched steps "
        f"(lr {config.matched_lr:g}; init, mid, end)",
        "; ".join(
            f"{c}: simple {s:.4g} vs pre {p:.4g}"
            + (f", pre_qk {lam['pre_qk'][k]:.4g}" if "pre_qk" in lam else "")
            for k, (c, s, p) in enumerate(zip(_CHECKPOINTS, lam["simple"], lam["pre"], strict=True))
        ),
        all(lower),
    )
    best_simple = summary["simple"]["best_val_loss"]
    best_pre = summary["pre"]["best_val_loss"]
    if part1_ok and best_simple <= best_pre + 0.02:
        level = "supported"
    elif lr_simple >= lr_pre and lam["simple"][-1] < lam["pre"][-1]:
        level = "partly supported"
    else:
        level = "not supported"

    metrics = {
        "python_version": sys.version,
        "corpus_bytes": int(corpus.size),
        "corpus_sha256": hashlib.sha256(corpus.tobytes()).hexdigest(),
        "train_tokens": int(train_np.size),
        "val_tokens": int(val_np.size),
        "largest_stable_lr": {p: summary[p]["largest_stable_lr"] for p in summary},
        "lr_ratio_simple_over_pre": ratio,
        "best_val_loss": {p: summary[p]["best_val_loss"] for p in summary},
        "lambda_max_median": {p: dict(zip(_CHECKPOINTS, v, strict=True)) for p, v in lam.items()},
        "note_three_level_verdict": level,
        "sweep": summary,
        "hessian": hessian,
        "activation_rms_end_matched_lr_seed0": activation_rms,
        "gd_stability_threshold_2_over_lambda_end": {p: 2.0 / v[-1] for p, v in lam.items()},
    }
    return Result(
        metrics=metrics,
        parts=[part1, part2],
        figures=_figures(config, list(summary), summary, hessian),
    )
