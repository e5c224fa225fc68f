"""Step time of ``jaxlab.optim.deva`` against ``optax.contrib.muon`` and ``optax.adam``.

All three update the same parameter pytree, the shapes of a pre-norm GPT block stack (q, k, v, o
``d×d``, SwiGLU ``d×f``, ``f×d``, norms ``d``, embedding ``V×d``, head ``d×V``), with the same
embedding/head/vector split for DeVA and Muon (AdamW on those leaves). A timed call runs
``steps_per_call`` optimizer updates in one jitted ``lax.scan`` on fixed gradients, starting past
DeVA's silent first call, so DeVA's basis refresh (every 10 steps: an eigenvalue sort and one QR
per side) is included at its real frequency. ``step_time_s`` is per update; ``ratio`` =
DeVA / peer, timed interleaved in one run.

Target: DeVA at most 1.3x Muon's step time. DeVA does Muon's Newton–Schulz plus two basis
rotations per side and matrix (``O(n²m + nm²)`` extra matmuls) and the periodic QR, so on CPU it
is expected to sit above Muon; the ratio against Adam is reported without a target.

Run: ``python -m benchmarks deva`` or ``python -m benchmarks.bench_deva``.
"""

from __future__ import annotations

import json
import sys

import jax
import optax

from benchmarks._timing import compiled_and_compile_time, interleaved_times, median_times
from jaxlab import optim
from jaxlab._src.threads import single_threaded_blas

__all__ = ["run"]

# size -> (d_model, ffn width, layers, vocab, steps per timed call, repeats, warmup)
_SIZES = {
    "smoke": (64, 192, 1, 256, 10, 3, 1),
    "default": (256, 704, 4, 256, 10, 7, 2),
}
_TARGET_VS_MUON = 1.3


def _shapes(d: int, f: int, layers: int, vocab: int) -> dict:
    block = {
        "q": (d, d), "k": (d, d), "v": (d, d), "o": (d, d),
        "w1": (d, f), "w3": (d, f), "w2": (f, d),
        "attention_norm": (d,), "ffn_norm": (d,),
    }  # fmt: skip
    return {
        "embedding": (vocab, d),
        "blocks": [dict(block) for _ in range(layers)],
        "final_norm": (d,),
        "head": (d, vocab),
    }


def _muon(learning_rate):
    def dimension_numbers(params):
        labels = optim.deva_matrix_labels(params)
        hidden = lambda label: optax.contrib.MuonDimensionNumbers() if label == "deva" else None
        return jax.tree.map(hidden, labels)

    return optax.contrib.muon(
        learning_rate, muon_weight_dimension_numbers=dimension_numbers, consistent_rms=0.2
    )


class _Steps:
    """``steps`` updates in one jitted scan from a state one call in (DeVA's bases built)."""

    def __init__(self, tx, params, grads, steps):
        def many(params, state):
            def body(carry, _):
                params, state = carry
                updates, state = tx.update(grads, state, params)
                return (optax.apply_updates(params, updates), state), None

            return jax.lax.scan(body, (params, state), None, length=steps)[0]

        state = tx.init(params)
        _, state = jax.jit(tx.update)(grads, state, params)
        self.params, self.state = params, state
        self.fn, self.compile_time_s = compiled_and_compile_time(jax.jit(many), params, state)

    def __call__(self):
        return self.fn(self.params, self.state)


def _time_all(params, grads, steps, repeats, warmup):
    runners = {
        "deva": _Steps(optim.deva(1e-3), params, grads, steps),
        "muon": _Steps(_muon(1e-3), params, grads, steps),
        "adam": _Steps(optax.adam(1e-3), params, grads, steps),
    }
    times = median_times(interleaved_times(runners, repeats, warmup))
    return times, runners


def run(size: str = "default") -> dict:
    """Times DeVA, Muon and Adam updates on transformer-shaped parameters; returns the report.

    Args:
      size: ``"default"`` (d = 256, 4 blocks) or ``"smoke"`` (d = 64, 1 block: seconds).

    Returns:
      ``{"name", "peer", "size", "rows": [{"case", "step_time_s", "peer_step_time_s", "ratio",
      "target_ratio"?, "meets_target"?, "compile_time_s", "peer_compile_time_s"}, ...]}``.

    Examples:
      >>> report = run("smoke")  # doctest: +SKIP
      >>> [row["case"] for row in report["rows"]]  # doctest: +SKIP
      ['deva vs muon', 'deva vs adam']
    """
    if size not in _SIZES:
        raise ValueError(f"size must be one of {sorted(_SIZES)}, got {size!r}")
    d, f, layers, vocab, steps, repeats, warmup = _SIZES[size]
    shapes = _shapes(d, f, layers, vocab)
    is_shape = lambda x: isinstance(x, tuple)
    leaves, treedef = jax.tree.flatten(shapes, is_leaf=is_shape)
    keys = jax.random.split(jax.random.key(0), 2 * len(leaves))
    params = treedef.unflatten(
        [0.02 * jax.random.normal(k, s) for k, s in zip(keys[::2], leaves, strict=True)]
    )
    grads = treedef.unflatten(
        [jax.random.normal(k, s) for k, s in zip(keys[1::2], leaves, strict=True)]
    )
    # One BLAS thread: see jaxlab._src.threads.single_threaded_blas (OpenBLAS threads spin
    # on a loaded CPU and make the LAPACK QR of DeVA's refresh 100x slower; XLA's matmuls and
    # hence Muon and Adam are unaffected).
    with single_threaded_blas():
        times, runners = _time_all(params, grads, steps, repeats, warmup)
    rows = []
    for peer in ("muon", "adam"):
        row = {
            "case": f"deva vs {peer}",
            "step_time_s": times["deva"] / steps,
            "peer_step_time_s": times[peer] / steps,
            "ratio": times["deva"] / times[peer],
            "compile_time_s": runners["deva"].compile_time_s,
            "peer_compile_time_s": runners[peer].compile_time_s,
        }
        if peer == "muon":
            row["target_ratio"] = _TARGET_VS_MUON
            row["meets_target"] = row["ratio"] <= _TARGET_VS_MUON
        rows.append(row)
    return {
        "name": "deva",
        "peer": "optax.contrib.muon (target), optax.adam",
        "size": size,
        "shapes": f"d={d}, ffn={f}, layers={layers}, vocab={vocab}",
        "rows": rows,
    }


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1] if len(sys.argv) > 1 else "default"), indent=2))
