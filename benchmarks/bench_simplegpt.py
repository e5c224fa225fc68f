"""Training throughput of SimpleGPT against PreNorm Llama at equal size (peer = PreNorm).

Both models come from the same code path (``jaxlab.nn.SimpleGPT`` with ``norm_placement``
``"simple"`` and ``"pre"``), at the same width, depth, heads, FFN width, sequence length and
batch; SimpleGPT has one RMSNorm after every linear map (7 per block instead of PreNorm's 2). A
step is the full training step — forward, backward, clipping and AdamW
(:func:`jaxlab.nn.simplegpt_optimizer`) — jitted once, timed interleaved with the peer over
repeated calls. ``ratio`` = SimpleGPT's step time / PreNorm's (above 1: SimpleGPT is slower);
``tokens_per_second`` = batch·seq / step time. No target: the paper reports no throughput
number. The extra norms are elementwise, memory-bound work that weighs most on tiny models:
measured on a shared, loaded 2-core CPU, 1.97x at d = 64, L = 2 and 1.49x at d = 128, L = 4
(SimpleGPT slower), falling as the matmuls grow.

Run: ``python -m benchmarks simplegpt`` or ``python -m benchmarks.bench_simplegpt``.
"""

from __future__ import annotations

import json
import sys

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from benchmarks._timing import compiled_and_compile_time, interleaved_times, median_times
from jaxlab.nn import (
    GPTConfig,
    SimpleGPT,
    language_model_loss,
    sample_batch,
    simplegpt_optimizer,
    stdlib_byte_corpus,
)

__all__ = ["run"]

_SIZES = {
    # (d_model, num_layers, num_heads, seq_len, batch) cases, steps per timed call, rounds, warmup
    "smoke": ([(32, 1, 2, 32, 4)], 3, 3, 1),
    "default": ([(64, 2, 4, 64, 16), (128, 4, 4, 128, 16)], 10, 7, 2),
}


class _TrainStep:
    """One jitted training step of a placement, called ``steps`` times per timed call."""

    def __init__(self, config: GPTConfig, tokens, targets, steps: int):
        model = SimpleGPT(config, rngs=nnx.Rngs(0))
        graphdef, params = nnx.split(model, nnx.Param)
        tx = simplegpt_optimizer(1e-3)

        def step(params, opt_state, tokens, targets):
            loss, grads = jax.value_and_grad(
                lambda p: language_model_loss(nnx.merge(graphdef, p), tokens, targets)
            )(params)
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, loss

        self.state = (params, tx.init(params))
        self.batch = (tokens, targets)
        self.steps = steps
        self.step, self.compile_time_s = compiled_and_compile_time(
            jax.jit(step), *self.state, *self.batch
        )

    def __call__(self):
        params, opt_state = self.state
        for _ in range(self.steps):
            params, opt_state, loss = self.step(params, opt_state, *self.batch)
        return loss


def run(size: str = "default") -> dict:
    """Times SimpleGPT's training step against PreNorm's at each size; returns the report.

    Args:
      size: ``"default"`` (d = 64, L = 2, seq 64 and d = 128, L = 4, seq 128; batch 16) or
        ``"smoke"`` (d = 32, L = 1: seconds).

    Returns:
      ``{"name", "peer", "size", "rows": [{"case", "step_time_s", "peer_step_time_s", "ratio",
      "tokens_per_second", "peer_tokens_per_second", "compile_time_s", "peer_compile_time_s",
      "target_ratio", "meets_target"}, ...]}``.

    Examples:
      >>> report = run("smoke")  # doctest: +SKIP
      >>> report["rows"][0]["ratio"] > 0  # doctest: +SKIP
      True
    """
    if size not in _SIZES:
        raise ValueError(f"size must be one of {sorted(_SIZES)}, got {size!r}")
    cases, steps, repeats, warmup = _SIZES[size]
    data = jnp.asarray(stdlib_byte_corpus(200_000))
    rows = []
    for d, layers, heads, seq, batch in cases:
        tokens, targets = sample_batch(jax.random.key(0), data, batch, seq)
        fns = {}
        for placement in ("simple", "pre"):
            config = GPTConfig(
                256, d, layers, heads, multiple_of=32, max_len=seq, norm_placement=placement
            )
            fns[placement] = _TrainStep(config, tokens, targets, steps)
        times = median_times(interleaved_times(fns, repeats, warmup))
        step, peer_step = times["simple"] / steps, times["pre"] / steps
        rows.append(
            {
                "case": f"d={d} L={layers} H={heads} seq={seq} batch={batch}",
                "step_time_s": step,
                "peer_step_time_s": peer_step,
                "ratio": step / peer_step,
                "tokens_per_second": batch * seq / step,
                "peer_tokens_per_second": batch * seq / peer_step,
                "compile_time_s": fns["simple"].compile_time_s,
                "peer_compile_time_s": fns["pre"].compile_time_s,
                "target_ratio": None,
                "meets_target": None,
            }
        )
    return {
        "name": "simplegpt",
        "peer": "PreNorm Llama (same code path, norm_placement='pre'), equal size",
        "size": size,
        "steps_per_call": steps,
        "rows": rows,
    }


if __name__ == "__main__":
    json.dump(run(sys.argv[1] if len(sys.argv) > 1 else "default"), sys.stdout, indent=2)
    print()
