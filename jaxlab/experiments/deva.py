"""Experiment ``deva``: decoupled variance adaptation (Song et al., ICML 2026).

Two measurements, the note's rule (``notes/deva.md``) with the fair peers of issue 27:

(a) **The authors' quadratic toy.** ``f(X) = ½ tr(XᵀHX)``, ``X ∈ ℝ^{9×9}``, ``H`` block-diagonal
    with three 3×3 blocks ``Q_k diag(e_k) Q_kᵀ`` (:func:`jaxlab.optim.quadratic_toy_hessian`);
    heterogeneous blocks ``e = {1,2,3}, {99,100,101}, {4998,4999,5000}``, homogeneous
    ``{1,99,4998}, {2,100,4999}, {3,101,5000}``. The stochastic loss samples 3 rows of ``H^{1/2}``
    with replacement, ``½·3·‖A_b X‖_F`` (not squared, as in the reference; the squared loss is run
    and reported apart). 400 steps, lr constant for 200 then linear to 0, ``β₁ = 0``,
    ``β₂ = 0.99``, the authors' lr 0.1 for Adam, Muon, SOAP, DeVA-ℓ∞ and DeVA-S∞ (frequency 10)
    and full-batch GD at 1e-4. The gating Muon is the authors': ``3·msign(g)`` on a 9×9 matrix
    (``√max(rows, cols)``), momentum 0, no Nesterov; optax's default Muon (scale 1 on a square
    matrix) is reported beside it, not gating. Every method is also swept over learning rates
    (a second figure: does the ordering depend on the lr convention?). Median final ``f`` over
    64 seeds; each comparison of medians is decided by a paired bootstrap over seeds. Pass if on
    the heterogeneous Hessian ``DeVA-S∞ < Muon < min(Adam, SOAP, DeVA-ℓ∞) < GD`` and SOAP is best
    on the homogeneous one.
(b) **A small language model.** The same :class:`jaxlab.nn.SimpleGPT` (pre-norm), byte corpus,
    batches and lr schedule (linear warmup, linear decay) for Muon and DeVA (AdamW too in
    ``full``), each at its own best peak lr on a grid that brackets it (extended when the best
    sits at an edge), 3 seeds. Per seed, the saving is ``1 − steps_DeVA/steps_Muon`` to reach
    Muon's best smoothed training loss; the verdict takes its mean with a 95 % t-interval over
    seeds: pass above 0, fail below, ``unresolved`` when the interval contains 0 (the paper
    reports 6.6 % fewer tokens than Muon at 275M parameters, reported beside).

SOAP is DeVA-S∞'s eigenbasis bookkeeping with Adam's step (:func:`jaxlab.optim.scale_by_soap`).
The paper's blockwise-smoothness diagnostic is not computed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from matplotlib.figure import Figure

from jaxlab import nn as jnn
from jaxlab import optim
from jaxlab._src.experiments import ExperimentConfig, Progress, Result, check, register
from jaxlab._src.parts import unit
from jaxlab._src.stats import (
    compare_group_medians,
    finite_or_inf,
    steps_saving,
    t_interval,
    trailing_mean,
)
from jaxlab._src.threads import single_threaded_blas
from jaxlab._src.tuning import bracketed_grid_search

__all__ = ["DevaConfig", "run"]

CLAIM = (
    "Song et al. (ICML 2026): decoupling Adam's variance adaptation from its sign direction and "
    "pairing it with the spectral direction (DeVA) beats Muon, SOAP and Adam on the authors' "
    "heterogeneous-Hessian quadratic and reaches Muon's language-model loss with fewer tokens "
    "(6.6 % fewer on a 275M NanoGPT)."
)

# ``muon``: the authors' Muon (gating); ``muon_optax``: optax's default scale (reported only).
TOY_METHODS = optim.QUADRATIC_TOY_METHODS
TOY_GATED = tuple(m for m in TOY_METHODS if m != "muon_optax")
# The note's ordering on the heterogeneous Hessian, as (smaller, larger) groups of medians:
# DeVA-S∞ < Muon < min(Adam, SOAP, DeVA-ℓ∞) < GD.
_MIDDLE = ("adam", "soap", "deva_vector")
HETEROGENEOUS_CHAIN = ((("deva_matrix",), ("muon",)), (("muon",), _MIDDLE), (_MIDDLE, ("gd",)))
# Issue 27: "gate on the median with its spread". A comparison of medians holds when it holds
# in at least 97.5 % of paired bootstrap resamples over seeds, is contradicted when it holds in
# at most 2.5 % (a two-sided 95 % interval that excludes equality), and is undecided otherwise.
TOY_CONFIDENCE = 0.95
# The note's LM rule: DeVA reaches Muon's loss in fewer steps, i.e. a saving above 0. The part
# is unresolved when the 95 % interval of the mean saving over seeds contains 0.
LM_SAVING_THRESHOLD_PERCENT = 0.0
LM_CONFIDENCE = 0.95
# The paper's NanoGPT result (tokens to val loss 3.31: DeVA 1.268B vs Muon 1.357B), reported
# beside the gate, not gating: issue 27 names it as the saving to resolve.
PAPER_SAVING_PERCENT = 6.6


@dataclasses.dataclass(frozen=True)
class DevaConfig(ExperimentConfig):
    """Sizes of the ``deva`` experiment (``smoke``, ``quick``, ``full``).

    Attributes:
      toy_seeds: seeds of the quadratic toy (Hessian blocks, start and row samples).
      toy_steps: toy iterations (lr constant for the first half, then linear to 0).
      toy_batch: rows of ``H^{1/2}`` sampled per step.
      toy_lr: the authors' lr for every adaptive method (must be in ``toy_sweep_lrs``).
      toy_gd_lr: the authors' lr of full-batch GD (must be in ``toy_sweep_gd_lrs``).
      toy_sweep_lrs: lrs of the per-method sweep (second figure), adaptive methods.
      toy_sweep_gd_lrs: lrs of GD's sweep.
      toy_b2: ``β₂`` on the toy (``β₁ = 0``).
      toy_frequency: SOAP/DeVA-S∞ basis refresh period.
      toy_squared: also run the squared-loss variant (reported, not judged).
      toy_bootstrap: paired bootstrap resamples over seeds for each comparison of medians.
      lm_methods: language-model methods (``muon`` and ``deva`` are required; ``adamw`` is an
        optional reference).
      lm_d_model: GPT width.
      lm_layers: GPT blocks.
      lm_heads: attention heads.
      lm_seq_len: tokens per row.
      lm_batch: rows per batch.
      lm_steps: optimizer steps per run.
      lm_warmup: warmup steps.
      lm_lrs_muon: Muon's initial peak-lr grid (ascending).
      lm_lrs_deva: DeVA's initial peak-lr grid (ascending).
      lm_lrs_adamw: AdamW's initial peak-lr grid (used only when ``adamw`` is in ``lm_methods``).
      lm_lr_factor: ratio of a grid extension beyond an edge optimum.
      lm_max_extensions: at most this many extensions per method; an optimum still on the edge
        after them leaves the part unresolved.
      lm_weight_decay: decoupled decay on the hidden matrices (AdamW: on all parameters).
      lm_corpus_bytes: bytes of the stdlib corpus.
      lm_smooth: window of the trailing mean of the training loss.
      lm_seeds: seeds (init and batches, shared by every method and lr: paired runs).
      lm_eval_batches: held-out batches of the final evaluation of each run.
    """

    # Issue 27 asks for at least 20; at 20 the Muon-vs-middle comparison is within the seed
    # noise, 64 cost a few seconds more.
    toy_seeds: int = 64
    toy_steps: int = 400
    toy_batch: int = 3
    toy_lr: float = 0.1
    toy_gd_lr: float = 1e-4
    toy_sweep_lrs: tuple[float, ...] = (0.01, 0.03, 0.1, 0.3, 1.0)
    toy_sweep_gd_lrs: tuple[float, ...] = (1e-5, 3e-5, 1e-4, 3e-4)
    toy_b2: float = 0.99
    toy_frequency: int = 10
    toy_squared: bool = True
    toy_bootstrap: int = 2000
    lm_methods: tuple[str, ...] = ("muon", "deva")
    lm_d_model: int = 64
    lm_layers: int = 2
    lm_heads: int = 4
    lm_seq_len: int = 64
    lm_batch: int = 16
    lm_steps: int = 1500
    lm_warmup: int = 75
    # Centred on a one-seed pilot at this size (both optima near 1.6e-2, Muon flat to 3.2e-2).
    lm_lrs_muon: tuple[float, ...] = (8e-3, 1.6e-2, 3.2e-2)
    lm_lrs_deva: tuple[float, ...] = (8e-3, 1.6e-2, 3.2e-2)
    lm_lrs_adamw: tuple[float, ...] = (2e-3, 4e-3, 8e-3, 1.6e-2)
    lm_lr_factor: float = 2.0
    lm_max_extensions: int = 2
    lm_weight_decay: float = 0.01
    lm_corpus_bytes: int = 2_000_000
    lm_smooth: int = 50
    lm_seeds: int = 3
    lm_eval_batches: int = 8

    @classmethod
    def smoke(cls) -> DevaConfig:
        return cls(
            toy_seeds=3,
            toy_steps=20,
            toy_sweep_lrs=(0.1, 1.0),
            toy_sweep_gd_lrs=(1e-4,),
            toy_squared=False,
            toy_bootstrap=200,
            lm_d_model=32,
            lm_layers=1,
            lm_heads=2,
            lm_seq_len=32,
            lm_batch=4,
            lm_steps=20,
            lm_warmup=5,
            lm_lrs_muon=(1e-2, 3e-2, 1e-1),
            lm_lrs_deva=(1e-2, 3e-2, 1e-1),
            lm_lr_factor=3.0,
            lm_max_extensions=1,
            lm_corpus_bytes=100_000,
            lm_smooth=5,
            lm_seeds=2,
            lm_eval_batches=2,
        )

    @classmethod
    def quick(cls) -> DevaConfig:
        return cls()

    @classmethod
    def full(cls) -> DevaConfig:
        return cls(
            lm_methods=("adamw", "muon", "deva"),
            lm_d_model=256,
            lm_layers=6,
            lm_heads=8,
            lm_seq_len=256,
            lm_batch=32,
            lm_steps=5000,
            lm_warmup=200,
            lm_lrs_muon=(1e-3, 2e-3, 4e-3, 8e-3),
            lm_lrs_deva=(1e-3, 2e-3, 4e-3, 8e-3),
            lm_lrs_adamw=(5e-4, 1e-3, 2e-3, 4e-3),
            lm_max_extensions=3,
            lm_corpus_bytes=20_000_000,
            lm_smooth=200,
        )


# --------------------------------------------------------------------------------------------
# (a) The quadratic toy.


def _toy(config: DevaConfig, rng_key: jax.Array, progress: Progress) -> dict[str, Any]:
    keys = jax.random.split(rng_key, config.toy_seeds)
    problems, eigenvalues, squared = optim.quadratic_toy_problems(squared=config.toy_squared)
    out: dict[str, Any] = {p: {} for p in problems}
    for method in progress.track(TOY_METHODS, total=len(TOY_METHODS), description="toy"):
        lrs = config.toy_sweep_gd_lrs if method == "gd" else config.toy_sweep_lrs
        authors_lr = config.toy_gd_lr if method == "gd" else config.toy_lr
        at = list(lrs).index(authors_lr)
        curves = optim.quadratic_toy_sweep(
            method,
            keys,
            eigenvalues,
            squared,
            jnp.asarray(lrs),
            steps=config.toy_steps,
            batch_size=config.toy_batch,
            b2=config.toy_b2,
            precondition_frequency=config.toy_frequency,
        )
        curves = np.asarray(curves)  # (problems, lrs, seeds, steps + 1)
        for problem, curves_by_lr in zip(problems, curves, strict=True):
            final = finite_or_inf(curves_by_lr[..., -1])  # (lrs, seeds)
            curve = curves_by_lr[at]
            out[problem][method] = {
                "lr": authors_lr,
                "final_f": final[at],
                "median_final_f": float(np.median(final[at])),
                "iqr_final_f": np.percentile(final[at], [25, 75]).tolist(),
                "nonfinite_seeds": int(np.sum(~np.isfinite(final[at]))),
                "median_curve": np.median(curve, axis=0),
                "iqr_curve": np.percentile(curve, [25, 75], axis=0),
                "sweep": {
                    "lrs": list(lrs),
                    "median_final_f": np.median(final, axis=1).tolist(),
                    "iqr_final_f": np.percentile(final, [25, 75], axis=1).T.tolist(),
                    "nonfinite_seeds": np.sum(~np.isfinite(final), axis=1).tolist(),
                },
            }
    return out


def _toy_verdict(toy: dict[str, Any], config: DevaConfig, rng_key: jax.Array):
    """Decides the note's ordering comparison by comparison; returns (status, text, details)."""
    resamples = np.asarray(
        jax.random.randint(rng_key, (config.toy_bootstrap, config.toy_seeds), 0, config.toy_seeds)
    )
    het = {m: e["final_f"] for m, e in toy["heterogeneous_frobenius"].items()}
    hom = {m: e["final_f"] for m, e in toy["homogeneous_frobenius"].items()}
    compare = lambda finals, a, b: compare_group_medians(finals, a, b, resamples, TOY_CONFIDENCE)
    comparisons = [compare(het, a, b) for a, b in HETEROGENEOUS_CHAIN]
    comparisons += [compare(hom, ("soap",), (m,)) for m in TOY_GATED if m != "soap"]
    decisions = {c["decision"] for c in comparisons}
    status = "pass"
    if "contradicted" in decisions:
        status = "fail"
    elif "undecided" in decisions:
        status = "unresolved"

    def fmt(problem):
        entries = sorted(toy[problem].items(), key=lambda kv: kv[1]["median_final_f"])
        return ", ".join(
            f"{m} {e['median_final_f']:.3g} [{e['iqr_final_f'][0]:.3g}, {e['iqr_final_f'][1]:.3g}]"
            for m, e in entries
        )

    def best_lr(problem):
        rows = []
        for m in TOY_METHODS:
            sweep = toy[problem][m]["sweep"]
            i = int(np.argmin(sweep["median_final_f"]))
            value = sweep["median_final_f"][i]
            rows.append((value, f"{m} {value:.3g} (lr {sweep['lrs'][i]:g})"))
        return ", ".join(text for _, text in sorted(rows))

    said = "; ".join(
        f"{'/'.join(c['smaller'])} {c['left_median']:.3g} < {'/'.join(c['larger'])} "
        f"{c['right_median']:.3g}: {c['decision']} ({100 * c['bootstrap_share']:.1f} % of "
        "resamples)"
        for c in comparisons
    )
    measured = (
        f"median final f [IQR] over {config.toy_seeds} seeds at the authors' lr, heterogeneous: "
        f"{fmt('heterogeneous_frobenius')}; homogeneous: {fmt('homogeneous_frobenius')}. "
        f"Comparisons (paired bootstrap over seeds, {config.toy_bootstrap} resamples, two-sided "
        f"{100 * TOY_CONFIDENCE:.0f} %): {said}. muon is the authors' Muon (3·msign, gating); "
        "muon_optax is optax's default scale (1·msign, not gating). Not gating, each method at "
        f"its best swept lr, heterogeneous: {best_lr('heterogeneous_frobenius')}; homogeneous: "
        f"{best_lr('homogeneous_frobenius')}. The note's numpy re-run of the reference, "
        "heterogeneous: DeVA-S∞ 0.026, Muon 0.12, DeVA-ℓ∞ 0.27, Adam 0.28, SOAP 0.35, GD 24.7"
    )
    return status, measured, comparisons


# --------------------------------------------------------------------------------------------
# (b) The small language model.


def _lm_method(config, method, program, seed_keys, progress) -> dict[str, Any]:
    """Runs ``method``'s grid on every seed, extending it while the best lr sits on an edge."""
    runs: dict[float, list[dict[str, Any]]] = {}

    def score(lr):
        runs[lr] = []
        for s, key in enumerate(seed_keys):
            init_key, data_key = jax.random.fold_in(key, 0), jax.random.fold_in(key, 1)
            losses, held_out = unit(  # one unit per run (issue 45: the full profile in parts)
                {"lm": method, "lr": float(lr), "seed": s},
                lambda init_key=init_key, data_key=data_key: jax.device_get(
                    program(init_key, jnp.float32(lr), data_key)
                ),
                skipped=(None, None),
            )
            if losses is None:  # a run outside this part (issue 45)
                runs[lr].append(None)
                continue
            losses = np.asarray(losses, np.float64)
            smoothed = trailing_mean(losses, config.lm_smooth)
            runs[lr].append(
                {
                    "smoothed": smoothed,
                    "final_smoothed_loss": float(smoothed[-1]),
                    "held_out_loss": float(held_out),
                    "nonfinite_steps": int(np.sum(~np.isfinite(losses))),
                }
            )
        if any(r is None for r in runs[lr]):
            return None  # runs outside this part: no bracket to extend (issue 45)
        return np.mean(finite_or_inf([r["final_smoothed_loss"] for r in runs[lr]]))

    grid = list(getattr(config, f"lm_lrs_{method}"))
    search = bracketed_grid_search(
        score,
        progress.track(grid, total=len(grid), description=f"language model: {method}"),
        factor=config.lm_lr_factor,
        max_extensions=config.lm_max_extensions,
    )
    if search is None:
        return None
    return {
        "runs": runs,
        "best_lr": search.best,
        "bracketed": search.bracketed,
        "extensions": search.extensions,
    }


def _language_model(config: DevaConfig, rng_key: jax.Array, progress: Progress) -> dict[str, Any]:
    corpus = jnn.stdlib_byte_corpus(config.lm_corpus_bytes)
    train, val = jnn.split_corpus(corpus, 0.1)
    train, val = jnp.asarray(train), jnp.asarray(val)
    gpt = jnn.GPTConfig(
        256,
        config.lm_d_model,
        config.lm_layers,
        config.lm_heads,
        max_len=config.lm_seq_len,
        multiple_of=32,
        norm_placement="pre",
    )
    eval_key, seeds_key = jax.random.split(rng_key)
    eval_windows = jnn.sample_eval_batches(
        eval_key, val, config.lm_eval_batches, config.lm_batch, config.lm_seq_len
    )
    seed_keys = list(jax.random.split(seeds_key, config.lm_seeds))
    methods = {}
    for method in config.lm_methods:
        # One jitted run (init_key, peak_lr, data_key) -> (train losses, held-out loss) per
        # method: the peak lr is traced, so one compilation serves the grid and its extensions;
        # runs go one after another (on CPU a vmapped batch of small models is slower than the
        # same runs in sequence, and DeVA's eigh/QR refresh stays a real branch).
        def optimizer(peak_lr, method=method):
            schedule = jnn.simplegpt_schedule(peak_lr, config.lm_warmup, config.lm_steps)
            return optim.deva_lm_optimizer(method, schedule, weight_decay=config.lm_weight_decay)

        program = jnn.language_model_program(
            gpt,
            optimizer,
            train,
            eval_windows,
            steps=config.lm_steps,
            batch_size=config.lm_batch,
            seq_len=config.lm_seq_len,
        )
        program = jax.jit(lambda *keys_and_lr, program=program: program(*keys_and_lr)[1:])
        methods[method] = _lm_method(config, method, program, seed_keys, progress)

    muon, deva = methods["muon"], methods["deva"]
    per_seed = []
    for s in range(config.lm_seeds):
        muon_curve = muon["runs"][muon["best_lr"]][s]["smoothed"]
        deva_curve = deva["runs"][deva["best_lr"]][s]["smoothed"]
        # Not reached within the budget: counted as one step past it (an upper bound on the
        # saving), and flagged by deva_steps None.
        saving = steps_saving(muon_curve, deva_curve, config.lm_steps)
        keys = ("target_loss", "muon_steps", "deva_steps", "saving_percent")
        per_seed.append(dict(zip(keys, saving, strict=True)))
    mean, low, high = t_interval([s["saving_percent"] for s in per_seed], LM_CONFIDENCE)
    return {
        "methods": methods,
        "seeds": per_seed,
        "saving_percent": {"mean": mean, "low": low, "high": high},
    }


def _lm_verdict(lm: dict[str, Any], config: DevaConfig):
    """The saving's interval against 0, given both optima are bracketed; (status, text)."""
    methods, saving = lm["methods"], lm["saving_percent"]
    bracketed = all(methods[m]["bracketed"] for m in ("muon", "deva"))
    lo, hi = saving["low"], saving["high"]
    if not bracketed:
        status = "unresolved"
    elif lo > LM_SAVING_THRESHOLD_PERCENT:
        status = "pass"
    elif hi < LM_SAVING_THRESHOLD_PERCENT:
        status = "fail"
    else:
        status = "unresolved"
    tuning = []
    for name, entry in methods.items():
        scores = ", ".join(
            f"{lr:g}: {np.mean([r['final_smoothed_loss'] for r in rs]):.4f}"
            for lr, rs in sorted(entry["runs"].items())
        )
        held = np.mean([r["held_out_loss"] for r in entry["runs"][entry["best_lr"]]])
        edge = "" if entry["bracketed"] else ", OPTIMUM ON THE GRID EDGE"
        tuning.append(
            f"{name} best lr {entry['best_lr']:g} (held-out {held:.4f}; mean final smoothed loss "
            f"by lr {scores}; {entry['extensions']} extension(s){edge})"
        )
    missed = f"not within {config.lm_steps} (counted {config.lm_steps + 1})"
    seeds = "; ".join(
        f"target {s['target_loss']:.4f}: DeVA {s['deva_steps'] or missed} vs Muon "
        f"{s['muon_steps']} steps ({s['saving_percent']:.1f} %)"
        for s in lm["seeds"]
    )
    paper = "inside" if lo <= PAPER_SAVING_PERCENT <= hi else "outside"
    measured = (
        f"DeVA's saving in steps to reach Muon's best smoothed training loss, each at its best "
        f"lr: mean {saving['mean']:.1f} %, {100 * LM_CONFIDENCE:.0f} % t-interval over "
        f"{config.lm_seeds} seeds [{lo:.1f}, {hi:.1f}] % (threshold "
        f"{LM_SAVING_THRESHOLD_PERCENT:g} %; the paper's {PAPER_SAVING_PERCENT} % is {paper} "
        f"it); per seed: {seeds}. Tuning ({config.lm_steps} steps, d={config.lm_d_model}, "
        f"{config.lm_layers} layers): " + "; ".join(tuning)
    )
    return status, measured


# --------------------------------------------------------------------------------------------
# Figures and the registered run.


def _figures(config: DevaConfig, toy: dict[str, Any], lm: dict[str, Any]):
    hessians = ("heterogeneous", "homogeneous")
    fig_t = Figure(figsize=(11, 4))
    for ax, hessian in zip(fig_t.subplots(1, 2), hessians, strict=True):
        for method, entry in toy[f"{hessian}_frobenius"].items():
            style = "--" if method == "muon_optax" else "-"
            (line,) = ax.semilogy(entry["median_curve"], style, label=method)
            steps = np.arange(entry["median_curve"].size)
            ax.fill_between(steps, *entry["iqr_curve"], color=line.get_color(), alpha=0.15)
        ax.set_title(f"{hessian}, non-squared loss, authors' lr ({config.toy_seeds} seeds)")
        ax.set_xlabel("step")
        ax.set_ylabel("median f(X) − f* (IQR band)")
        ax.legend(fontsize=7)
    fig_t.tight_layout()

    fig_s = Figure(figsize=(11, 4))
    for ax, hessian in zip(fig_s.subplots(1, 2), hessians, strict=True):
        for method, entry in toy[f"{hessian}_frobenius"].items():
            sweep = entry["sweep"]
            iqr = np.asarray(sweep["iqr_final_f"]).T
            med = np.asarray(sweep["median_final_f"])
            err = np.where(np.isfinite(iqr), np.abs(iqr - med), 0.0)
            style = "--o" if method == "muon_optax" else "-o"
            ax.errorbar(sweep["lrs"], med, yerr=err, fmt=style, ms=3, capsize=2, label=method)
        ax.axvline(config.toy_lr, color="k", lw=0.7, ls=":")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{hessian}: lr sweep (dotted: authors' lr; GD full batch)")
        ax.set_xlabel("peak learning rate")
        ax.set_ylabel("median final f (IQR)")
        ax.legend(fontsize=7)
    fig_s.tight_layout()

    fig_l = Figure(figsize=(11, 4.5))
    ax_lr, ax_curve = fig_l.subplots(1, 2)
    for name, entry in lm["methods"].items():
        lrs = sorted(entry["runs"])
        finals = np.asarray([[r["final_smoothed_loss"] for r in entry["runs"][lr]] for lr in lrs])
        (line,) = ax_lr.plot(lrs, finals.mean(1), "-o", label=f"{name} (best {entry['best_lr']:g})")
        for col in finals.T:
            ax_lr.plot(lrs, col, ".", color=line.get_color(), alpha=0.5)
        if name in ("muon", "deva"):
            steps = np.arange(1, config.lm_steps + 1)
            for s, r in enumerate(entry["runs"][entry["best_lr"]]):
                label = f"{name} at lr {entry['best_lr']:g}" if s == 0 else None
                ax_curve.plot(steps, r["smoothed"], color=line.get_color(), lw=0.8, label=label)
    for s in lm["seeds"]:
        ax_curve.axhline(s["target_loss"], color="k", lw=0.5, ls=":")
    ax_lr.set_xscale("log")
    ax_lr.set_xlabel("peak learning rate")
    ax_lr.set_ylabel(f"final training loss (trailing mean of {config.lm_smooth})")
    ax_lr.set_title(f"lr tuning, {config.lm_seeds} seeds (dots) and their mean")
    ax_lr.legend(fontsize=7)
    low = min(s["target_loss"] for s in lm["seeds"])
    ax_curve.set_ylim(low - 0.05, low + 0.5)
    ax_curve.set_xlim(config.lm_steps // 3, config.lm_steps)
    ax_curve.set_xlabel("step")
    ax_curve.set_ylabel("smoothed training loss")
    saving = lm["saving_percent"]
    ax_curve.set_title(
        f"best lr per method; dotted: Muon's best per seed; saving {saving['mean']:.1f} % "
        f"[{saving['low']:.1f}, {saving['high']:.1f}]",
        fontsize=9,
    )
    ax_curve.legend(fontsize=7)
    fig_l.tight_layout()
    return {"quadratic_toy": fig_t, "quadratic_toy_lr_sweep": fig_s, "language_model": fig_l}


def _metrics(toy, comparisons, lm) -> dict[str, Any]:
    """JSON-able metrics (the result writer stores non-finite floats as "inf"/"nan" strings)."""
    curves = ("median_curve", "iqr_curve")
    toy = {
        p: {m: {k: v for k, v in e.items() if k not in curves} for m, e in d.items()}
        for p, d in toy.items()
    }
    fields = ("final_smoothed_loss", "held_out_loss", "nonfinite_steps")
    methods = {
        name: {k: e[k] for k in ("best_lr", "bracketed", "extensions")}
        | {
            "by_lr": {
                f"{lr:g}": {k: [r[k] for r in rs] for k in fields}
                for lr, rs in sorted(e["runs"].items())
            }
        }
        for name, e in lm["methods"].items()
    }
    return {
        "toy": toy,
        "toy_comparisons": comparisons,
        "language_model": {
            "methods": methods,
            "seeds": lm["seeds"],
            "saving_percent": lm["saving_percent"],
        },
    }


@register("deva", config=DevaConfig, claim=CLAIM)
def run(config: DevaConfig, rng_key: jax.Array, progress: Progress) -> Result:
    """Runs the toy and the language-model comparison and computes the note's verdict."""
    if config.toy_lr not in config.toy_sweep_lrs or config.toy_gd_lr not in config.toy_sweep_gd_lrs:
        raise ValueError(
            f"toy_lr={config.toy_lr} must be in toy_sweep_lrs={config.toy_sweep_lrs} and "
            f"toy_gd_lr={config.toy_gd_lr} in toy_sweep_gd_lrs={config.toy_sweep_gd_lrs}"
        )
    if not {"muon", "deva"} <= set(config.lm_methods):
        raise ValueError(f"lm_methods must contain 'muon' and 'deva', got {config.lm_methods}")
    toy_key, lm_key, bootstrap_key = jax.random.split(rng_key, 3)
    with single_threaded_blas():
        toy = _toy(config, toy_key, progress)
        lm = _language_model(config, lm_key, progress)
    toy_status, toy_measured, comparisons = _toy_verdict(toy, config, bootstrap_key)
    lm_status, lm_measured = _lm_verdict(lm, config)
    parts = [
        check(
            "toy: median final f at the authors' lr, heterogeneous Hessian, DeVA-S∞ < Muon "
            "(the authors' 3·msign) < min(Adam, SOAP, DeVA-ℓ∞) < GD, and SOAP best on the "
            "homogeneous Hessian (non-squared loss; each comparison decided by a paired "
            "bootstrap over seeds)",
            toy_measured,
            toy_status == "pass",
            resolved=toy_status != "unresolved",
        ),
        check(
            "language model: DeVA reaches Muon's best loss in fewer steps (same model, data and "
            "schedule, each at its own tuned lr; 95 % interval of the mean saving over seeds "
            "above 0)",
            lm_measured,
            lm_status == "pass",
            resolved=lm_status != "unresolved",
        ),
    ]
    metrics = _metrics(toy, comparisons, lm)
    return Result(metrics=metrics, parts=parts, figures=_figures(config, toy, lm))
