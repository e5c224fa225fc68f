"""Experiment ``deva``: decoupled variance adaptation (Song et al., ICML 2026).

Two measurements, the note's rule (``notes/deva.md``):

(a) **The authors' quadratic toy.** ``f(X) = ½ tr(XᵀHX)``, ``X ∈ ℝ^{9×9}``, ``H`` block-diagonal
    with three 3×3 blocks ``Q_k diag(e_k) Q_kᵀ`` (``Q_k`` the eigenvectors of ``AAᵀ``,
    ``A ~ N(0, 1)^{3×3}``, column signs with ``diag(Q_k) >= 0``); heterogeneous blocks
    ``e = {1,2,3}, {99,100,101}, {4998,4999,5000}``, homogeneous ``{1,99,4998}, {2,100,4999},
    {3,101,5000}``. The stochastic loss samples 3 rows of ``H^{1/2}`` with replacement,
    ``½·3·‖A_b X‖_F`` (not squared, as in the reference; the squared loss is run and reported
    apart). 400 steps, lr constant for 200 then linear to 0, ``β₁ = 0``, ``β₂ = 0.99``, lr 0.1 for
    Adam, Muon (``optax.contrib.muon``), SOAP, DeVA-ℓ∞ and DeVA-S∞ (frequency 10), full-batch GD at
    lr 1e-4. Median final ``f`` over seeds. Pass if on the heterogeneous Hessian
    ``DeVA-S∞ < Muon < min(Adam, SOAP, DeVA-ℓ∞) < GD`` and SOAP is best on the homogeneous one.
(b) **A small language model.** The same :class:`jaxlab.nn.SimpleGPT` (pre-norm), byte corpus,
    batches and lr schedule (linear warmup, linear decay) for AdamW, Muon (``optax.contrib.muon``
    with the Moonlight RMS matching 0.2·√max(n, m) so that one lr serves all, embeddings and head
    on AdamW) and DeVA (:func:`jaxlab.optim.deva`, same split). The training loss is smoothed
    with a trailing mean; per seed, the saving is ``1 − steps_DeVA/steps_Muon`` to reach Muon's
    final smoothed loss; pass if the median saving over seeds is positive (the paper reports
    6.6 % fewer tokens than Muon at 275M parameters). The note expects only a noisy ordering on
    a tiny CPU model.

SOAP is DeVA-S∞'s eigenbasis bookkeeping with Adam's step (:func:`jaxlab.optim.scale_by_soap`).
The paper's blockwise-smoothness diagnostic is not computed.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from matplotlib.figure import Figure

from jaxlab import nn as jnn
from jaxlab import optim
from jaxlab._src.experiments import ExperimentConfig, Progress, Result, check, register
from jaxlab._src.threads import single_threaded_blas
from jaxlab.optim import quadratic_toy_hessian

__all__ = ["DevaConfig", "run", "steps_to_reach", "trailing_mean"]

CLAIM = (
    "Song et al. (ICML 2026): decoupling Adam's variance adaptation from its sign direction and "
    "pairing it with the spectral direction (DeVA) beats Muon, SOAP and Adam on the authors' "
    "heterogeneous-Hessian quadratic and reaches Muon's language-model loss with fewer tokens "
    "(6.6 % fewer on a 275M NanoGPT)."
)

_HETEROGENEOUS = ((1.0, 2.0, 3.0), (99.0, 100.0, 101.0), (4998.0, 4999.0, 5000.0))
_HOMOGENEOUS = ((1.0, 99.0, 4998.0), (2.0, 100.0, 4999.0), (3.0, 101.0, 5000.0))
TOY_METHODS = ("gd", "adam", "muon", "soap", "deva_vector", "deva_matrix")
LM_METHODS = ("adamw", "muon", "deva")


@dataclasses.dataclass(frozen=True)
class DevaConfig(ExperimentConfig):
    """Sizes of the ``deva`` experiment (``smoke``, ``quick``, ``full``).

    Attributes:
      toy_seeds: seeds of the quadratic toy (Hessian blocks, start and row samples).
      toy_steps: toy iterations (lr constant for the first half, then linear to 0).
      toy_batch: rows of ``H^{1/2}`` sampled per step.
      toy_lr: lr of the adaptive methods on the toy.
      toy_gd_lr: lr of full-batch GD on the toy.
      toy_b2: ``β₂`` on the toy (``β₁ = 0``).
      toy_frequency: SOAP/DeVA-S∞ basis refresh period.
      toy_squared: also run the squared-loss variant (reported, not judged).
      lm_d_model: GPT width.
      lm_layers: GPT blocks.
      lm_heads: attention heads.
      lm_seq_len: tokens per row.
      lm_batch: rows per batch.
      lm_steps: optimizer steps per method.
      lm_warmup: warmup steps.
      lm_lr: peak lr of every method (the paper uses one lr for all).
      lm_weight_decay: decoupled decay on the hidden matrices (AdamW: on all parameters).
      lm_corpus_bytes: bytes of the stdlib corpus.
      lm_smooth: window of the trailing mean of the training loss.
      lm_seeds: seeds (init and batches); the verdict uses the median saving.
    """

    toy_seeds: int = 20
    toy_steps: int = 400
    toy_batch: int = 3
    toy_lr: float = 0.1
    toy_gd_lr: float = 1e-4
    toy_b2: float = 0.99
    toy_frequency: int = 10
    toy_squared: bool = True
    lm_d_model: int = 64
    lm_layers: int = 2
    lm_heads: int = 4
    lm_seq_len: int = 64
    lm_batch: int = 16
    lm_steps: int = 600
    lm_warmup: int = 30
    lm_lr: float = 3e-3
    lm_weight_decay: float = 0.01
    lm_corpus_bytes: int = 2_000_000
    lm_smooth: int = 50
    lm_seeds: int = 2

    @classmethod
    def smoke(cls) -> DevaConfig:
        return cls(
            toy_seeds=2,
            toy_steps=20,
            toy_squared=False,
            lm_d_model=32,
            lm_layers=1,
            lm_heads=2,
            lm_seq_len=32,
            lm_batch=4,
            lm_steps=20,
            lm_warmup=5,
            lm_corpus_bytes=100_000,
            lm_smooth=5,
            lm_seeds=1,
        )

    @classmethod
    def quick(cls) -> DevaConfig:
        return cls()

    @classmethod
    def full(cls) -> DevaConfig:
        return cls(
            lm_d_model=256,
            lm_layers=6,
            lm_heads=8,
            lm_seq_len=256,
            lm_batch=32,
            lm_steps=5000,
            lm_warmup=200,
            lm_lr=1e-3,
            lm_corpus_bytes=20_000_000,
            lm_smooth=200,
            lm_seeds=3,
        )


# --------------------------------------------------------------------------------------------
# (a) The quadratic toy.


def _toy_schedule(peak: float, steps: int) -> optax.Schedule:
    half = steps // 2
    return optax.join_schedules(
        [optax.constant_schedule(peak), optax.linear_schedule(peak, 0.0, steps - half)], [half]
    )


def _toy_transform(method: str, config: DevaConfig, peak_lr, gd_lr) -> optax.GradientTransformation:
    """``method``'s transform; the peak lrs may be traced (one compile for any lr)."""
    lr = _toy_schedule(peak_lr, config.toy_steps)
    b2, freq = config.toy_b2, config.toy_frequency
    if method == "gd":
        return optax.sgd(_toy_schedule(gd_lr, config.toy_steps))
    if method == "adam":
        return optax.adam(lr, b1=0.0, b2=b2)
    if method == "muon":
        return optax.contrib.muon(lr, beta=0.0)
    if method == "soap":
        return optax.chain(
            optim.scale_by_soap(0.0, b2, precondition_frequency=freq),
            optax.scale_by_learning_rate(lr),
        )
    if method == "deva_vector":
        return optim.deva_vector(lr, b1=0.0, b2=b2)
    if method == "deva_matrix":
        return optax.chain(
            optim.scale_by_deva_matrix(0.0, b2, precondition_frequency=freq),
            optax.scale_by_learning_rate(lr),
        )
    raise ValueError(f"unknown toy method {method!r}")


def _toy_runs(method: str, config: DevaConfig, keys, eigenvalues, squared) -> np.ndarray:
    """``f(X_t)``, ``t = 0..T``, ``(problems, seeds, T + 1)``; one compile per method.

    ``eigenvalues`` is ``(problems, K, b)`` and ``squared`` ``(problems,)`` (1.0: squared loss).
    """
    dim = int(np.prod(np.shape(eigenvalues)[1:]))
    batch = config.toy_batch

    def one(key, eig, sq, peak_lr, gd_lr):
        tx = _toy_transform(method, config, peak_lr, gd_lr)
        h_key, x_key, sample_key = jax.random.split(key, 3)
        h = quadratic_toy_hessian(h_key, eig)
        values, vectors = jnp.linalg.eigh(h)
        root = (vectors * jnp.sqrt(jnp.maximum(values, 0.0))[None, :]) @ vectors.T
        f = lambda x: 0.5 * jnp.trace(x.T @ h @ x)

        def stochastic_loss(x, rows):
            ax = root[rows] @ x
            norm2 = jnp.sum(ax * ax)  # > 0 almost surely, so both branches have finite grads
            return 0.5 * (dim / batch) * jnp.where(sq > 0.5, norm2, jnp.sqrt(norm2))

        def step(carry, t):
            x, state = carry
            if method == "gd":
                grad = h @ x
            else:
                rows = jax.random.randint(jax.random.fold_in(sample_key, t), (batch,), 0, dim)
                grad = jax.grad(stochastic_loss)(x, rows)
            updates, state = tx.update(grad, state, x)
            x = optax.apply_updates(x, updates)
            return (x, state), f(x)

        x0 = jax.random.normal(x_key, (dim, dim), jnp.float32)
        _, trace = jax.lax.scan(step, (x0, tx.init(x0)), jnp.arange(config.toy_steps))
        return jnp.concatenate([f(x0)[None], trace])

    over_seeds = jax.vmap(one, in_axes=(0, None, None, None, None))
    over_problems = jax.vmap(over_seeds, in_axes=(None, 0, 0, None, None))
    lrs = jnp.float32(config.toy_lr), jnp.float32(config.toy_gd_lr)
    return np.asarray(jax.jit(over_problems)(keys, eigenvalues, squared, *lrs))


def _toy(config: DevaConfig, rng_key: jax.Array, progress: Progress) -> dict[str, Any]:
    keys = jax.random.split(rng_key, config.toy_seeds)
    problems = [
        (hessian, loss)
        for hessian in ("heterogeneous", "homogeneous")
        for loss in (("frobenius", "squared") if config.toy_squared else ("frobenius",))
    ]
    eigenvalues = jnp.asarray(
        [_HETEROGENEOUS if h == "heterogeneous" else _HOMOGENEOUS for h, _ in problems]
    )
    squared = jnp.asarray([float(loss == "squared") for _, loss in problems])
    out: dict[str, Any] = {f"{h}_{loss}": {} for h, loss in problems}
    for method in progress.track(TOY_METHODS, total=len(TOY_METHODS), description="toy"):
        curves = _toy_runs(method, config, keys, eigenvalues, squared)
        for (hessian, loss), curve in zip(problems, curves, strict=True):
            final = curve[:, -1]
            out[f"{hessian}_{loss}"][method] = {
                "median_final_f": float(np.median(final)),
                "iqr_final_f": [float(np.percentile(final, 25)), float(np.percentile(final, 75))],
                "median_curve": np.median(curve, axis=0),
            }
    return out


def _toy_verdict(toy: dict[str, Any]) -> tuple[bool, str]:
    het = {m: v["median_final_f"] for m, v in toy["heterogeneous_frobenius"].items()}
    hom = {m: v["median_final_f"] for m, v in toy["homogeneous_frobenius"].items()}
    middle = min(het["adam"], het["soap"], het["deva_vector"])
    ordered = het["deva_matrix"] < het["muon"] < middle < het["gd"]
    soap_best = hom["soap"] <= min(hom.values())
    fmt = lambda d: ", ".join(f"{m} {v:.3g}" for m, v in sorted(d.items(), key=lambda kv: kv[1]))
    measured = (
        f"median final f, heterogeneous: {fmt(het)}; homogeneous: {fmt(hom)} "
        f"(ordering {'holds' if ordered else 'fails'}; SOAP best on homogeneous: {soap_best}; "
        "the note's numpy re-run of the reference, heterogeneous: DeVA-S∞ 0.026, Muon 0.12, "
        "DeVA-ℓ∞ 0.27, Adam 0.28, SOAP 0.35, GD 24.7; homogeneous: SOAP 0.28 best)"
    )
    return bool(ordered and soap_best), measured


# --------------------------------------------------------------------------------------------
# (b) The small language model.


def _lm_transform(method: str, config: DevaConfig) -> optax.GradientTransformation:
    schedule = jnn.simplegpt_schedule(config.lm_lr, config.lm_warmup, config.lm_steps)
    wd = config.lm_weight_decay
    if method == "adamw":
        return optax.adamw(schedule, b1=0.9, b2=0.95, weight_decay=wd)
    if method == "muon":

        def dimension_numbers(params):
            labels = optim.deva_matrix_labels(params)
            hidden = lambda label: optax.contrib.MuonDimensionNumbers() if label == "deva" else None
            return jax.tree.map(hidden, labels)

        return optax.contrib.muon(
            schedule,
            beta=0.95,
            weight_decay=wd,
            adam_b1=0.9,
            adam_b2=0.95,
            muon_weight_dimension_numbers=dimension_numbers,
            consistent_rms=0.2,
        )
    if method == "deva":
        return optim.deva(schedule, weight_decay=wd)
    raise ValueError(f"unknown language-model method {method!r}")


def trailing_mean(values, window: int) -> np.ndarray:
    """``s_t = mean(values[max(0, t − w + 1) : t + 1])``: the smoothed loss curve.

    Examples:
      >>> trailing_mean([4.0, 2.0, 0.0, 2.0], 2).tolist()
      [4.0, 3.0, 1.0, 1.0]
    """
    values = np.asarray(values, np.float64)
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    sums = np.cumsum(np.concatenate([[0.0], values]))
    idx = np.arange(values.size)
    low = np.maximum(0, idx - window + 1)
    return (sums[idx + 1] - sums[low]) / (idx + 1 - low)


def steps_to_reach(curve, target: float) -> int | None:
    """The first (1-based) step at which ``curve <= target``, or None if never.

    Examples:
      >>> steps_to_reach([3.0, 2.5, 1.9, 2.1], 2.0), steps_to_reach([3.0], 2.0)
      (3, None)
    """
    hits = np.flatnonzero(np.asarray(curve) <= target)
    return int(hits[0]) + 1 if hits.size else None


def _lm_seed(config, gpt, train, val, rng_key, progress) -> dict[str, Any]:
    """One seed: every method from the same init and the same batches."""
    init_seed = int(jax.random.randint(rng_key, (), 0, 2**30))
    data_key = jax.random.fold_in(rng_key, 1)
    out: dict[str, Any] = {}
    for method in progress.track(LM_METHODS, total=len(LM_METHODS), description="language model"):
        model = jnn.SimpleGPT(gpt, rngs=nnx.Rngs(init_seed))
        start = time.perf_counter()
        history = jnn.train_language_model(
            model,
            _lm_transform(method, config),
            train,
            steps=config.lm_steps,
            batch_size=config.lm_batch,
            seq_len=config.lm_seq_len,
            rng_key=data_key,
            eval_data=val,
            eval_every=max(config.lm_steps // 4, 1),
        )
        loss = np.asarray(history["train_loss"], np.float64)
        out[method] = {
            "train_loss": loss,
            "smoothed": trailing_mean(loss, config.lm_smooth),
            "final_eval_loss": float(history["eval_loss"][-1]),
            "wall_s": time.perf_counter() - start,
        }
    target = float(out["muon"]["smoothed"][-1])
    for entry in out.values():
        entry["steps_to_muon_final"] = steps_to_reach(entry["smoothed"], target)
    out["target_loss"] = target
    deva_steps, muon_steps = out["deva"]["steps_to_muon_final"], out["muon"]["steps_to_muon_final"]
    out["saving_percent"] = (
        100.0 * (1.0 - deva_steps / muon_steps) if deva_steps is not None else -math.inf
    )
    return out


def _language_model(config: DevaConfig, rng_key: jax.Array, progress: Progress) -> dict[str, Any]:
    corpus = jnn.stdlib_byte_corpus(config.lm_corpus_bytes)
    train, val = jnn.split_corpus(corpus, 0.1)
    gpt = jnn.GPTConfig(
        256,
        config.lm_d_model,
        config.lm_layers,
        config.lm_heads,
        max_len=config.lm_seq_len,
        multiple_of=32,
        norm_placement="pre",
    )
    seeds = [
        _lm_seed(config, gpt, train, val, jax.random.fold_in(rng_key, seed), progress)
        for seed in range(config.lm_seeds)
    ]
    return {
        "seeds": seeds,
        "median_saving_percent": float(np.median([s["saving_percent"] for s in seeds])),
    }


def _lm_verdict(lm: dict[str, Any], steps: int) -> tuple[bool, str]:
    per_seed = []
    for run in lm["seeds"]:
        deva_steps = run["deva"]["steps_to_muon_final"]
        reached = deva_steps if deva_steps is not None else f"not within {steps}"
        finals = ", ".join(
            f"{m} {run[m]['smoothed'][-1]:.4f} (eval {run[m]['final_eval_loss']:.4f})"
            for m in LM_METHODS
        )
        per_seed.append(
            f"target {run['target_loss']:.4f}: DeVA {reached} vs Muon "
            f"{run['muon']['steps_to_muon_final']} steps, saving {run['saving_percent']:.1f} %; "
            f"final smoothed losses {finals}"
        )
    saving = lm["median_saving_percent"]
    measured = (
        f"median saving over {len(lm['seeds'])} seed(s) {saving:.1f} % of steps to reach "
        f"Muon's final smoothed train loss (paper: 6.6 % of tokens at 275M); per seed: "
        + "; ".join(per_seed)
    )
    return bool(saving > 0.0), measured


def _figures(config: DevaConfig, toy: dict[str, Any], lm: dict[str, Any]):
    fig_t = Figure(figsize=(11, 4))
    axes = fig_t.subplots(1, 2)
    for ax, hessian in zip(axes, ("heterogeneous", "homogeneous"), strict=True):
        for method, entry in toy[f"{hessian}_frobenius"].items():
            ax.semilogy(entry["median_curve"], label=method)
        ax.set_title(f"{hessian} Hessian, non-squared loss ({config.toy_seeds} seeds)")
        ax.set_xlabel("step")
        ax.set_ylabel("median f(X) − f*")
        ax.legend(fontsize=7)
    fig_t.tight_layout()

    fig_l = Figure(figsize=(7, 4.5))
    ax = fig_l.subplots()
    lm = lm["seeds"][0]
    for method in LM_METHODS:
        ax.plot(np.arange(1, config.lm_steps + 1), lm[method]["smoothed"], label=method)
    ax.axhline(lm["target_loss"], color="k", lw=0.7, ls=":", label="Muon final")
    ax.set_xlabel("step")
    ax.set_ylabel(f"training loss (trailing mean of {config.lm_smooth})")
    ax.set_title(f"byte-level GPT d={config.lm_d_model}, L={config.lm_layers} (seed 0)")
    ax.legend()
    fig_l.tight_layout()
    return {"quadratic_toy": fig_t, "language_model": fig_l}


@register("deva", config=DevaConfig, claim=CLAIM)
def run(config: DevaConfig, rng_key: jax.Array, progress: Progress) -> Result:
    """Runs the toy and the language-model comparison and computes the note's verdict."""
    toy_key, lm_key = jax.random.split(rng_key)
    with single_threaded_blas():
        toy = _toy(config, toy_key, progress)
        lm = _language_model(config, lm_key, progress)
    toy_pass, toy_measured = _toy_verdict(toy)
    lm_pass, lm_measured = _lm_verdict(lm, config.lm_steps)
    finite = lambda x: x if math.isfinite(x) else None  # JSON has no infinity
    metrics = {
        "toy": {
            name: {m: {k: v for k, v in e.items() if k != "median_curve"} for m, e in d.items()}
            for name, d in toy.items()
        },
        "language_model": {
            "median_saving_percent": finite(lm["median_saving_percent"]),
            "seeds": [
                {
                    "target_loss": run["target_loss"],
                    "saving_percent": finite(run["saving_percent"]),
                    **{
                        m: {
                            "final_smoothed_loss": float(run[m]["smoothed"][-1]),
                            "final_eval_loss": run[m]["final_eval_loss"],
                            "steps_to_muon_final": run[m]["steps_to_muon_final"],
                            "wall_s": run[m]["wall_s"],
                        }
                        for m in LM_METHODS
                    },
                }
                for run in lm["seeds"]
            ],
        },
    }
    parts = [
        check(
            "toy: median f at the end, heterogeneous Hessian, DeVA-S∞ < Muon < min(Adam, SOAP, "
            "DeVA-ℓ∞) < GD, and SOAP best on the homogeneous Hessian (non-squared loss)",
            toy_measured,
            toy_pass,
        ),
        check(
            "language model: DeVA reaches Muon's final loss in fewer steps (same model, data, "
            "lr schedule and budget; median over seeds)",
            lm_measured,
            lm_pass,
        ),
    ]
    return Result(metrics=metrics, parts=parts, figures=_figures(config, toy, lm))
