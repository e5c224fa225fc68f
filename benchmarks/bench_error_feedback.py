"""Step time of EF / EF21 with compression: against ``optax.sgd``, against its memory-traffic floor,
and inside a whole language-model training step.

**Optimizer step** (issue 24). One step is ``tx.update`` followed by ``optax.apply_updates``,
jitted, on a pytree of 4 float32 leaves of 2.5M entries (10M parameters; ``size="smoke"``:
2 x 25k and two of the cases). Every case runs in two buffer regimes, timed interleaved in the
same rounds as its peers (``optax.sgd`` and a copy of the same tree, in both regimes) and
compared by medians; calls alternate between two gradient trees:

- ``donated``: params and optimizer state donated (``jax.jit(..., donate_argnums=(0, 1))``), as
  an efficient training loop does;
- ``fresh``: no donation, every step allocates its outputs.

**Memory-traffic floor.** Each case lists the full-tree reads ``R`` and writes ``W`` its maths
needs (below), and its floor is ``R t_pass + W t_write``: ``t_pass`` is half of a jitted
in-place ``tree * s`` (one read and one write of the tree, donated), ``t_write`` is ``t_pass``
for donated buffers and, for fresh ones, a fresh ``tree * s`` less one read (a write to newly
allocated memory), all measured in the same rounds as the case. ``optax.sgd`` reads g and p and
writes p (R 2, W 1).
EF21 reads g, its estimate e and p and writes e and p (R 3, W 2); a compressor that needs a
statistic of the compressed vector before selecting (the threshold's count, scaled sign's l1
norm, a global top-k) reads g and e once more (R 5, W 2). Block top-k selects within blocks of
100 entries that fit in cache, so one streaming pass suffices (R 3, W 2). EF has the same counts
with its residual in place of the estimate.

**What XLA:CPU does** (jax 0.10, measured with ``jax.profiler`` per thunk): the elementwise passes
that write in place run near the copy bandwidth; what costs is every full-size *temporary* (a
materialised ``g - e``, a boolean mask, a scatter target): XLA allocates it afresh in every
execution and the first write to that memory page-faults, at several times the cost of a read pass.
Reductions run as YNNPACK fusions that fuse an arithmetic producer (sub, abs, sign) but not a
compare or select, which is then materialised, and they read at about a third of the copy
bandwidth. So the threshold's count is a sum of signs (``jaxlab.optim``), and EF21 compresses ``g -
e`` read from ``g`` and ``e`` (the count over ``|e - g|``, the select over ``g - e``, the exact
fallback under a cond whose operands are ``g`` and ``e``), with no temporary at all; its
``nonfinite_count`` reads the new estimate once more (the count's NaN flag stands in for the
gradient).

**EF (classic)** keeps one temporary on purpose, ``p = e + u``: the message ``C(p)`` and the new
residual ``p - C(p)`` both depend on the old residual and XLA:CPU computes the parameter update and
the residual in two fusions; with ``p`` materialised the donated residual is overwritten in place,
while reading ``(e, u)`` directly made XLA copy the residual first and materialise ``u = -lr g``
anyway (scaled sign took 31 ms instead of 8).

**Donated slower than fresh**, the issue's question: without donation the previous step's buffers
are freed and the allocator can hand their already-touched pages to the next step's temporaries;
with donation there is nothing to recycle and every temporary page-faults (per thunk, exact top-k's
``|g - e|`` temporary took 21 ms donated against 3 ms fresh in one profile). A case without
temporaries (EF21 with the threshold) is faster donated. Fresh outputs page-fault too when glibc
returns freed memory to the system: with ``MALLOC_TRIM_THRESHOLD_``/``MALLOC_MMAP_THRESHOLD_``
raised (an environment setting, not set here) EF21's fresh step fell from 23.6 to 14.0 ms in one
measurement.

**Exact top-k** stays a sort: ``lax.top_k`` lowers to XLA:CPU's ``TopK`` custom call
(a partial sort of the 2.5M magnitudes, several ms per leaf) and the result is a scatter into a
fresh zero vector; no linear-time formulation with the same output exists. The candidate
``jax.lax.approx_max_k`` (recall target 0.95) lowers to a partial reduction followed by the same
``TopK`` call; it is measured as ``approx_max_k`` below, benchmark-only (its set is not the
top-k set, so the compressor's contraction bound does not hold for it). The linear-time choices
are :func:`jaxlab.optim.threshold_top_k` and :func:`jaxlab.optim.block_top_k`.

**Training step.** The figure a user sees: the full step (forward, backward, update) of a small
PreNorm :class:`jaxlab.nn.SimpleGPT` language model under ``optax.adam`` against the same step
with ``scale_by_error_feedback_21(threshold_top_k(ratio=0.01))`` chained in front of the same
Adam (params and state donated in both), with the compressor's default ``scope="leaf"`` (one
message per leaf) and with ``scope="global"`` (one message for the whole tree).

Goals (issue 24), each row reporting its own: every compressor case within 1.5x of its floor;
EF21 with ``threshold_top_k`` 1% at most 2.5x sgd on fresh buffers; donated never slower than
fresh; the compressed training step at most 1.10x Adam's.

Run: ``python -m benchmarks error_feedback`` or ``python -m benchmarks.bench_error_feedback``.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import optax

from benchmarks._models import LanguageModelStep
from benchmarks._timing import compiled_and_compile_time, interleaved_times, median_times
from jaxlab import optim
from jaxlab.nn import GPTConfig, sample_batch, stdlib_byte_corpus
from jaxlab.optim._compressors import FLOAT_BITS, Compressor, _check_vector, _index_bits, _k_from

__all__ = ["run"]

_SIZES = {
    # leaves x entries per leaf, timed rounds, warm-up rounds, training-step models
    # (d, layers, heads, seq, batch), optimizer cases (None: all)
    "smoke": (
        2,
        25_000,
        3,
        1,
        [(32, 1, 2, 32, 4)],
        ("error_feedback_21(threshold_top_k 1%)", "error_feedback(scaled_sign)"),
    ),
    "default": (4, 2_500_000, 11, 2, [(64, 2, 4, 64, 16), (256, 4, 4, 128, 16)], None),
}
_LEARNING_RATE = 0.01
# Goals of issue 24.
_FLOOR_TARGET = 1.5  # every compressor case within 1.5x of its own memory-traffic floor
_THRESHOLD_FRESH_TARGET = 2.5  # EF21 + threshold_top_k 1% vs sgd, fresh buffers
_TRAINING_STEP_TARGET = 1.10  # compression adds at most 10% to a whole training step
# The training step's compressor scopes: one message per leaf (the default) and one for the
# whole tree (a small model has many small leaves, each a few kernel launches per step).
_TRAINING_SCOPES = ("leaf", "global")
_APPROX_RECALL = 0.95  # approx_max_k's recall target (its documented default)
# Full-tree reads and writes of one step (module docstring).
_SGD_PASSES = (2, 1)
_STATISTIC_PASSES = (5, 2)  # a statistic of the compressed vector, then the update
_STREAMING_PASSES = (3, 2)  # selection within cache-sized blocks: the update pass alone


@dataclasses.dataclass(frozen=True, kw_only=True, repr=False)
class _ApproxTopK(Compressor):
    """``jax.lax.approx_max_k`` selection: a measured candidate, not a library compressor."""

    name: ClassVar[str] = "approx_max_k"

    ratio: float = 0.01

    def compress(self, v, rng_key=None):
        v = _check_vector(v)
        k = _k_from(None, self.ratio, v.shape[0])
        _, index = jax.lax.approx_max_k(jnp.abs(v), k, recall_target=_APPROX_RECALL)
        return jnp.zeros_like(v).at[index].set(v[index])

    def alpha(self, dim):  # nominal: the approximate set carries no such guarantee
        return _k_from(None, self.ratio, dim) / dim

    def bits(self, dim):
        return _k_from(None, self.ratio, dim) * (FLOAT_BITS + _index_bits(dim))


def _cases() -> list[tuple[str, Callable[[], optax.GradientTransformation], tuple[int, int]]]:
    """(case name, transform factory, (reads, writes) of its floor) for every candidate."""
    lr = _LEARNING_RATE
    top = optim.top_k(ratio=0.01)
    approx = _ApproxTopK(ratio=0.01)
    block = optim.block_top_k(1, 100)
    threshold = optim.threshold_top_k(ratio=0.01)
    sign = optim.scaled_sign()
    ef21, ef = optim.error_feedback_21, optim.error_feedback
    return [
        ("error_feedback_21(threshold_top_k 1%)", lambda: ef21(lr, threshold), _STATISTIC_PASSES),
        ("error_feedback(threshold_top_k 1%)", lambda: ef(lr, threshold), _STATISTIC_PASSES),
        ("error_feedback(scaled_sign)", lambda: ef(lr, sign), _STATISTIC_PASSES),
        ("error_feedback_21(block_top_k 1 of 100)", lambda: ef21(lr, block), _STREAMING_PASSES),
        ("error_feedback(block_top_k 1 of 100)", lambda: ef(lr, block), _STREAMING_PASSES),
        ("error_feedback_21(top_k 1%)", lambda: ef21(lr, top), _STATISTIC_PASSES),
        ("error_feedback(top_k 1%)", lambda: ef(lr, top), _STATISTIC_PASSES),
        ("error_feedback_21(approx_max_k 1%)", lambda: ef21(lr, approx), _STATISTIC_PASSES),
    ]


def _tree(num_leaves: int, size: int, seed: int) -> dict[str, jax.Array]:
    key = jax.random.PRNGKey(seed)
    return {
        f"w{i}": jax.random.normal(jax.random.fold_in(key, i), (size,), jnp.float32)
        for i in range(num_leaves)
    }


class _Stepper:
    """Runs one jitted training step per call on its own params and state (zero-arg callable).

    Calls alternate between two gradient trees: with one fixed gradient EF21's ``g - e`` is zero
    after the first step, a degenerate input no training run sees.
    """

    def __init__(self, tx: optax.GradientTransformation, grads: list[Any], donate: bool):
        def step(params, state, grads):
            updates, state = tx.update(grads, state, params)
            return optax.apply_updates(params, updates), state

        jitted = jax.jit(step, donate_argnums=(0, 1) if donate else ())
        self.grads, self.calls = grads, 0
        self.params = jax.tree.map(jnp.zeros_like, grads[0])
        self.state = tx.init(self.params)
        # Compiled ahead of time once: the measured compile is the one the steps then run.
        self.step, self.compile_time_s = compiled_and_compile_time(
            jitted, self.params, self.state, grads[0]
        )

    def __call__(self):
        grads = self.grads[self.calls % len(self.grads)]
        self.calls += 1
        self.params, self.state = self.step(self.params, self.state, grads)
        return self.params


class _Copier:
    """``tree * s`` (``s`` a runtime scalar, so nothing folds): one read and one write pass."""

    def __init__(self, tree: Any, donate: bool):
        self.tree = jax.tree.map(jnp.copy, tree)
        self.scale = jnp.float32(1.0)
        jitted = jax.jit(
            lambda t, s: jax.tree.map(lambda x: x * s, t), donate_argnums=(0,) if donate else ()
        )
        self.copy = jitted.lower(self.tree, self.scale).compile()

    def __call__(self):
        self.tree = self.copy(self.tree, self.scale)
        return self.tree


def _optimizer_rows(
    num_leaves: int, leaf_size: int, repeats: int, warmup: int, names: tuple[str, ...] | None
) -> list[dict]:
    grads = [_tree(num_leaves, leaf_size, seed=seed) for seed in (0, 1)]
    peers = {
        "sgd donated": _Stepper(optax.sgd(_LEARNING_RATE), grads, True),
        "sgd fresh": _Stepper(optax.sgd(_LEARNING_RATE), grads, False),
        "copy donated": _Copier(grads[0], True),
        "copy fresh": _Copier(grads[0], False),
    }
    rows = []
    for case, factory, (reads, writes) in _cases():
        if names is not None and case not in names:
            continue
        candidates = {
            "donated": _Stepper(factory(), grads, True),
            "fresh": _Stepper(factory(), grads, False),
        }
        fns = {f"candidate {b}": c for b, c in candidates.items()} | peers
        times = median_times(interleaved_times(fns, repeats, warmup))
        # One pass (a read or an in-place write) from the donated copy; a write to fresh memory
        # is the fresh copy less its read.
        t_pass = times["copy donated"] / 2
        for buffers in ("donated", "fresh"):
            step, peer = times[f"candidate {buffers}"], times[f"sgd {buffers}"]
            t_write = t_pass if buffers == "donated" else times["copy fresh"] - t_pass
            floor = reads * t_pass + writes * t_write
            sgd_floor = _SGD_PASSES[0] * t_pass + _SGD_PASSES[1] * t_write
            target = (
                _THRESHOLD_FRESH_TARGET
                if case.startswith("error_feedback_21(threshold") and buffers == "fresh"
                else None
            )
            row = {
                "case": f"{case} [{buffers}]",
                "buffers": buffers,
                "step_time_s": step,
                "peer_step_time_s": peer,
                "ratio": step / peer,
                "compile_time_s": candidates[buffers].compile_time_s,
                "target_ratio": target,
                "meets_target": None if target is None else step / peer <= target,
                "reads": reads,
                "writes": writes,
                "read_pass_s": t_pass,
                "write_pass_s": t_write,
                "floor_time_s": floor,
                "floor_ratio": step / floor,
                "floor_target": _FLOOR_TARGET,
                "meets_floor_target": step / floor <= _FLOOR_TARGET,
                "peer_floor_ratio": peer / sgd_floor,
            }
            if buffers == "donated":
                fresh = times["candidate fresh"]
                row["fresh_step_time_s"] = fresh
                row["donated_over_fresh"] = step / fresh
                row["donated_not_slower"] = step <= fresh
            rows.append(row)
        del candidates
    return rows


def _training_rows(models: list[tuple[int, ...]], repeats: int, warmup: int) -> list[dict]:
    data = jnp.asarray(stdlib_byte_corpus(200_000))
    rows = []
    for d, layers, heads, seq, batch_size in models:
        config = GPTConfig(256, d, layers, heads, multiple_of=32, max_len=seq, norm_placement="pre")
        batch = sample_batch(jax.random.key(0), data, batch_size, seq)
        fns = {"peer": LanguageModelStep(config, optax.adam(1e-3), batch, donate=True)}
        for scope in _TRAINING_SCOPES:
            compressed = optax.chain(
                optim.scale_by_error_feedback_21(optim.threshold_top_k(ratio=0.01, scope=scope)),
                optax.adam(1e-3),
            )
            fns[scope] = LanguageModelStep(config, compressed, batch, donate=True)
        times = median_times(interleaved_times(fns, repeats, warmup))
        for scope in _TRAINING_SCOPES:
            ratio = times[scope] / times["peer"]
            rows.append(
                {
                    "case": (
                        f"training step, PreNorm d={d} L={layers} seq={seq} batch={batch_size}: "
                        f"EF21(threshold_top_k 1%, scope={scope}) + adam vs adam"
                    ),
                    "buffers": "donated",
                    "peer": "optax.adam",
                    "parameters": fns["peer"].num_parameters,
                    "leaves": len(jax.tree.leaves(fns["peer"].params)),
                    "step_time_s": times[scope],
                    "peer_step_time_s": times["peer"],
                    "ratio": ratio,
                    "compile_time_s": fns[scope].compile_time_s,
                    "target_ratio": _TRAINING_STEP_TARGET,
                    "meets_target": ratio <= _TRAINING_STEP_TARGET,
                }
            )
    return rows


def run(size: str = "default") -> dict:
    """Measures every case against ``optax.sgd`` and its floor, and the training step; a report.

    Args:
      size: ``"default"`` (4 x 2.5M float32 parameters; training steps at d = 64, 2 layers and
        d = 256, 4 layers) or ``"smoke"`` (2 x 25k, two cases, one tiny model: seconds).

    Returns:
      ``{"name", "peer", "size", "parameters", "device", "rows": [...]}``. Optimizer rows have
      ``case``, ``buffers``, ``step_time_s``, ``peer_step_time_s`` (sgd, same regime),
      ``ratio``, ``reads``/``writes``, ``floor_time_s``, ``floor_ratio`` and
      ``meets_floor_target``, the goal's ``target_ratio``/``meets_target`` where one applies,
      and on donated rows ``donated_over_fresh``; training rows compare against ``optax.adam``
      (``peer`` in the row).

    Examples:
      >>> report = run("smoke")  # doctest: +SKIP
      >>> report["rows"][0]["floor_ratio"] > 0  # doctest: +SKIP
      True
    """
    if size not in _SIZES:
        raise ValueError(f"size must be one of {sorted(_SIZES)}, got {size!r}")
    num_leaves, leaf_size, repeats, warmup, models, names = _SIZES[size]
    rows = _optimizer_rows(num_leaves, leaf_size, repeats, warmup, names)
    # The compression is a few percent of a training step: three times the rounds, so that the
    # medians resolve a 10% goal on a shared CPU.
    rows += _training_rows(models, 3 * repeats, warmup)
    return {
        "name": "error_feedback",
        "peer": "optax.sgd (optimizer rows), optax.adam (training-step rows)",
        "size": size,
        "parameters": num_leaves * leaf_size,
        "device": str(jax.devices()[0].platform),
        "rows": rows,
    }


if __name__ == "__main__":
    json.dump(run(sys.argv[1] if len(sys.argv) > 1 else "default"), sys.stdout, indent=2)
    print()
