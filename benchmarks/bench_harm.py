"""Step time of the harm-minimising update against its base optimizer as the model widens.

One training step of an MLP ``64 → W → W → 10`` on a batch of 64 (fixed inputs and labels), SGD
with momentum 0.9: the candidates are :func:`jaxlab.optim.harm_train_step` (reweight mode: the
batch-sized dual on the last layer, 100 iterations, and one weighted backward pass) and
:func:`jaxlab.optim.harm` (head mode), the peer is the plain ``optax.sgd`` step (forward,
backward, update). A timed call runs ``steps`` steps in one jitted ``lax.scan``; ``step_time_s``
is per step, ``ratio`` = candidate / base, timed interleaved in one run, at three widths.

The claim (issue 21, the paper's abstract): the relative overhead shrinks as the model grows,
since the dual costs ``O(B²(C + H) + iterations·B²)`` whatever the body. No fixed target.

Run: ``python -m benchmarks harm`` or ``python -m benchmarks.bench_harm``.
"""

from __future__ import annotations

import json
import sys

import jax
import jax.numpy as jnp
import optax

from benchmarks._timing import interleaved_times, median_times
from jaxlab.optim import harm, harm_train_step

__all__ = ["run"]

# size -> (widths, batch, steps per timed call, repeats, warmup)
_SIZES = {
    "smoke": ((16, 32, 64), 16, 2, 2, 1),
    "default": ((128, 512, 2048), 64, 10, 7, 2),
}


def _init(key, width):
    sizes = (64, width, width, 10)
    keys = jax.random.split(key, len(sizes) - 1)
    return [
        {"kernel": jax.random.normal(k, (a, b)) * (2.0 / a) ** 0.5, "bias": jnp.zeros(b)}
        for k, a, b in zip(keys, sizes[:-1], sizes[1:], strict=True)
    ]


def _model(params, x):
    h = x
    for layer in params[:-1]:
        h = jax.nn.relu(h @ layer["kernel"] + layer["bias"][None])
    return h @ params[-1]["kernel"] + params[-1]["bias"][None], h


def _ce(logits, labels):
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels)


def _programs(params, x, y, steps):
    opt = optax.sgd(0.01, momentum=0.9)
    head = ((2, "kernel"), (2, "bias"))
    reweight = harm_train_step(lambda p, b: _model(p, b[0]), lambda z, b: _ce(z, b[1]), opt,
                               kernel_path=head[0], bias_path=head[1])  # fmt: skip
    head_tx = harm(opt, kernel_path=head[0], bias_path=head[1])
    loss = lambda p: jnp.mean(_ce(_model(p, x)[0], y))  # noqa: E731

    def base_step(p, s):
        updates, s = opt.update(jax.grad(loss)(p), s, p)
        return optax.apply_updates(p, updates), s

    def head_step(p, s):
        logits, h = _model(p, x)
        delta = jax.nn.softmax(logits) - jax.nn.one_hot(y, 10)
        updates, s = head_tx.update(jax.grad(loss)(p), s, p, features=h, logit_grads=delta)
        return optax.apply_updates(p, updates), s

    def reweight_step(p, s):
        p, s, _ = reweight(p, s, (x, y))
        return p, s

    def scanned(step):
        return jax.jit(lambda p, s: jax.lax.scan(lambda c, _: (step(*c), None), (p, s), None,
                                                 length=steps)[0])  # fmt: skip

    out = {}
    for name, step, state in (("base", base_step, opt.init(params)),
                              ("reweight", reweight_step, opt.init(params)),
                              ("head", head_step, head_tx.init(params))):  # fmt: skip
        program = scanned(step)
        out[name] = lambda program=program, state=state: program(params, state)
    return out


def run(size: str = "default") -> dict:
    """Times base, reweight and head steps at three widths.

    Args:
      size: ``"default"`` (widths 128, 512, 2048; batch 64) or ``"smoke"`` (tiny, seconds).

    Returns:
      ``{"name", "peer", "size", "rows": [{"case", "width", "step_time_s", "peer_step_time_s",
      "ratio", "target_ratio", "meets_target"}, ...]}``.
    """
    if size not in _SIZES:
        raise ValueError(f"size must be one of {sorted(_SIZES)}, got {size!r}")
    widths, batch, steps, repeats, warmup = _SIZES[size]
    key = jax.random.key(0)
    x = jax.random.uniform(key, (batch, 64))
    y = jax.random.randint(jax.random.fold_in(key, 1), (batch,), 0, 10)
    rows = []
    for width in widths:
        fns = _programs(_init(jax.random.fold_in(key, width), width), x, y, steps)
        times = median_times(interleaved_times(fns, repeats, warmup))
        for arm in ("reweight", "head"):
            rows.append({
                "case": f"width {width}: harm {arm} vs SGD-m step",
                "width": width,
                "step_time_s": times[arm] / steps,
                "peer_step_time_s": times["base"] / steps,
                "ratio": times[arm] / times["base"],
                "target_ratio": None,
                "meets_target": None,
            })  # fmt: skip
    return {
        "name": "harm",
        "peer": "optax.sgd(momentum=0.9) training step (forward, backward, update)",
        "size": size,
        "shape": {"batch": batch, "widths": list(widths), "classes": 10},
        "rows": rows,
    }


if __name__ == "__main__":
    json.dump(run(sys.argv[1] if len(sys.argv) > 1 else "default"), sys.stdout, indent=2)
    print()
