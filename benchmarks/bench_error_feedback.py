"""Step time of EF / EF21 with compression against ``optax.sgd`` on the same ~10M-parameter tree.

One training step is ``tx.update`` followed by ``optax.apply_updates``, jitted, on a pytree of 4
float32 leaves of 2.5M entries (10M parameters; ``size="smoke"``: 4 x 25k). Each candidate is
timed interleaved with its peer (``candidate, sgd, candidate, sgd, ...``) and the row reports the
ratio of medians, plus the candidate's compile time.

Two buffer regimes are measured, because they change the peer's time several-fold on a CPU:

- ``donated``: params and optimizer state are donated (``jax.jit(..., donate_argnums=(0, 1))``),
  as an efficient training loop does; sgd then runs at memory bandwidth (read g and p, write p).
- ``fresh``: no donation, every step allocates its outputs; this is how the issue's orientation
  figure ("exact top-k of 1% costs ~6.6x an sgd step") was taken, and allocation then dominates
  sgd's time.

Targets (issue 3): at most 2x sgd for top-k 1% (exact ``top_k`` or the linear-time
``block_top_k(1, 100)`` and ``threshold_top_k(ratio=0.01)``, which keep at least the same 1%),
at most 1.2x for scaled sign. With donation these are below what memory traffic allows: EF21
reads g, the estimate and p and writes the estimate and p (5 array passes against sgd's 3, i.e.
>= 1.67x) and any magnitude selection or l1 norm needs one more read pass over its input before
the write pass (>= 2.33x).
``threshold_top_k(ratio=0.01)`` adds to EF21's passes one read for the count ``m`` (the sampled
quantile reads only ``sample_size`` entries) and, because its exact fallback sits under a
``lax.cond`` that takes the compressed vector as operand, one write and read of that vector
(>= 3x with donation).

Run: ``python -m benchmarks error_feedback`` or ``python -m benchmarks.bench_error_feedback``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax

from benchmarks._timing import compiled_and_compile_time, interleaved_times, median_times
from jaxlab import optim

__all__ = ["run"]

_SIZES = {
    # leaves x entries per leaf, timed rounds, warm-up rounds, buffer regimes (donate?)
    "smoke": (4, 25_000, 3, 1, (True,)),
    "default": (4, 2_500_000, 11, 2, (True, False)),
}
_LEARNING_RATE = 0.01
_TOP_K_TARGET = 2.0
_SIGN_TARGET = 1.2


def _cases() -> list[tuple[str, Callable[[], optax.GradientTransformation], float]]:
    """(case name, transform factory, target ratio) for every candidate."""
    lr = _LEARNING_RATE
    top_1pct = optim.top_k(ratio=0.01)
    block_1pct = optim.block_top_k(1, 100)
    threshold_1pct = optim.threshold_top_k(ratio=0.01)
    sign = optim.scaled_sign()
    return [
        (
            "error_feedback_21(top_k 1%)",
            lambda: optim.error_feedback_21(lr, top_1pct),
            _TOP_K_TARGET,
        ),
        (
            "error_feedback_21(block_top_k 1 of 100)",
            lambda: optim.error_feedback_21(lr, block_1pct),
            _TOP_K_TARGET,
        ),
        ("error_feedback(top_k 1%)", lambda: optim.error_feedback(lr, top_1pct), _TOP_K_TARGET),
        (
            "error_feedback(block_top_k 1 of 100)",
            lambda: optim.error_feedback(lr, block_1pct),
            _TOP_K_TARGET,
        ),
        (
            "error_feedback_21(threshold_top_k 1%)",
            lambda: optim.error_feedback_21(lr, threshold_1pct),
            _TOP_K_TARGET,
        ),
        (
            "error_feedback(threshold_top_k 1%)",
            lambda: optim.error_feedback(lr, threshold_1pct),
            _TOP_K_TARGET,
        ),
        ("error_feedback(scaled_sign)", lambda: optim.error_feedback(lr, sign), _SIGN_TARGET),
    ]


def _tree(num_leaves: int, size: int, seed: int) -> dict[str, jax.Array]:
    key = jax.random.PRNGKey(seed)
    return {
        f"w{i}": jax.random.normal(jax.random.fold_in(key, i), (size,), jnp.float32)
        for i in range(num_leaves)
    }


class _Stepper:
    """Runs one jitted training step per call on its own params and state (zero-arg callable)."""

    def __init__(self, tx: optax.GradientTransformation, grads: Any, donate: bool):
        def step(params, state, grads):
            updates, state = tx.update(grads, state, params)
            return optax.apply_updates(params, updates), state

        jitted = jax.jit(step, donate_argnums=(0, 1) if donate else ())
        self.grads = grads
        self.params = jax.tree.map(jnp.zeros_like, grads)
        self.state = tx.init(self.params)
        # Compiled ahead of time once: the measured compile is the one the steps then run.
        self.step, self.compile_time_s = compiled_and_compile_time(
            jitted, self.params, self.state, grads
        )

    def __call__(self):
        self.params, self.state = self.step(self.params, self.state, self.grads)
        return self.params


def run(size: str = "default") -> dict:
    """Measures every candidate against ``optax.sgd`` and returns the JSON-able report.

    Args:
      size: ``"default"`` (4 x 2.5M float32 parameters, both buffer regimes) or ``"smoke"``
        (4 x 25k, donated buffers only: a few seconds).

    Returns:
      ``{"name", "peer", "size", "parameters", "rows": [{"case", "step_time_s",
      "peer_step_time_s", "ratio", "compile_time_s", "target_ratio", "meets_target",
      "buffers"}, ...]}``; ``ratio`` is the candidate's median step time over the peer's, both
      measured interleaved in this run.

    Examples:
      >>> report = run("smoke")  # doctest: +SKIP
      >>> sorted(report["rows"][0])  # doctest: +SKIP
      ['buffers', 'case', 'compile_time_s', 'meets_target', 'peer_step_time_s', 'ratio', ...]
    """
    if size not in _SIZES:
        raise ValueError(f"size must be one of {sorted(_SIZES)}, got {size!r}")
    num_leaves, leaf_size, repeats, warmup, regimes = _SIZES[size]
    grads = _tree(num_leaves, leaf_size, seed=0)
    rows = []
    for donate in regimes:
        buffers = "donated" if donate else "fresh"
        peer = _Stepper(optax.sgd(_LEARNING_RATE), grads, donate)  # timed afresh in every row
        for case, factory, target in _cases():
            candidate = _Stepper(factory(), grads, donate)
            times = median_times(
                interleaved_times({"candidate": candidate, "peer": peer}, repeats, warmup)
            )
            ratio = times["candidate"] / times["peer"]
            rows.append(
                {
                    "case": f"{case} [{buffers}]",
                    "step_time_s": times["candidate"],
                    "peer_step_time_s": times["peer"],
                    "ratio": ratio,
                    "compile_time_s": candidate.compile_time_s,
                    "target_ratio": target,
                    "meets_target": ratio <= target,
                    "buffers": buffers,
                }
            )
            del candidate
    return {
        "name": "error_feedback",
        "peer": "optax.sgd",
        "size": size,
        "parameters": num_leaves * leaf_size,
        "device": str(jax.devices()[0].platform),
        "rows": rows,
    }


if __name__ == "__main__":
    json.dump(run(sys.argv[1] if len(sys.argv) > 1 else "default"), sys.stdout, indent=2)
    print()
