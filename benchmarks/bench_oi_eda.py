"""Order-invariant EDA steps: the jitted step against the same step as a Python loop over the group.

One step of :func:`jaxlab.rl.oi_eda` (the linear any-order model, σσ′ orders, G = 64, 4 PPO
epochs, Adam) on an NK landscape (K = 4): draw G generation and training orders, sample G points
under their generation orders, evaluate them, z-score the values, and take 4 clipped-surrogate
Adam steps under the training orders. The candidate is the library's step, jitted: the whole
group is sampled, evaluated and differentiated in one program. The peer is the same step
written as a Python loop over the group: a jitted one-point sampler and a jitted one-point
objective called G times, the points stacked in Python, then one jitted update (advantages,
the old log-probabilities and the 4 epochs) built from the public pieces
(:func:`jaxlab.rl.sample_any_order`, :func:`jaxlab.rl.log_prob_any_order`,
:func:`jaxlab.rl.group_advantages`, :func:`jaxlab.rl.grpo_policy_loss`). Both are timed
interleaved (medians).

Rows: ``ratio`` = candidate step time / peer step time at n = 64 and n = 256 (below 1: the
jitted step is faster), with ``evaluations_per_s`` for both. There is no target (the issue
names none).

Run: ``python -m benchmarks oi_eda`` or ``python -m benchmarks.bench_oi_eda``.
"""

from __future__ import annotations

import json
import sys

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from benchmarks._timing import interleaved_times, median_times
from jaxlab.rl import (
    AnyOrderLogistic,
    group_advantages,
    grpo_policy_loss,
    log_prob_any_order,
    nk_landscape,
    oi_eda,
    random_orders,
    sample_any_order,
)

__all__ = ["run"]

_SIZES = {
    # variables, group, epochs, timed rounds, warm-up
    "smoke": ((16,), 8, 2, 3, 1),
    "default": ((64, 256), 64, 4, 7, 2),
}


def _peer(objective, n, group, epochs, tx):
    graphdef, _ = nnx.split(AnyOrderLogistic(n))

    @jax.jit
    def sample_one(params, key):
        order_key, sample_key = jax.random.split(key)
        order = random_orders(order_key, 1, n)
        return sample_any_order(nnx.merge(graphdef, params), sample_key, order)[0]

    @jax.jit
    def evaluate_one(x):
        return objective(x[None])[0]

    @jax.jit
    def update(params, opt_state, points, values, key):
        orders = random_orders(key, group, n)  # σ′, independent of the generation orders
        adv = group_advantages(values)
        old = jax.lax.stop_gradient(log_prob_any_order(nnx.merge(graphdef, params), points, orders))

        def loss(p):
            return grpo_policy_loss(log_prob_any_order(nnx.merge(graphdef, p), points, orders),
                                    old, adv)[0]  # fmt: skip

        def epoch(carry, _):
            p, s = carry
            updates, s = tx.update(jax.grad(loss)(p), s, p)
            return (optax.apply_updates(p, updates), s), None

        return jax.lax.scan(epoch, (params, opt_state), None, epochs)[0]

    def step(key, params, opt_state):
        keys = jax.random.split(key, group + 1)
        points, values = [], []
        for k in keys[:group]:  # the Python loop over the group
            x = sample_one(params, k)
            points.append(x)
            values.append(evaluate_one(x))
        return update(params, opt_state, jnp.stack(points), jnp.stack(values), keys[group])

    return step


def run(size: str = "default") -> dict:
    """Times one jitted EDA step against the Python loop over the group, at each size.

    Args:
      size: ``"default"`` (n = 64 and 256, G = 64, 4 epochs) or ``"smoke"`` (n = 16, G = 8).

    Returns:
      ``{"name", "peer", "size", "shape", "rows": [{"case", "step_time_s", "peer_step_time_s",
      "ratio", "target_ratio", "meets_target", "evaluations_per_s",
      "peer_evaluations_per_s", "num_variables"}, ...]}``.
    """
    if size not in _SIZES:
        raise ValueError(f"size must be one of {sorted(_SIZES)}, got {size!r}")
    sizes, group, epochs, repeats, warmup = _SIZES[size]
    rows = []
    for n in sizes:
        objective = nk_landscape(jax.random.key(0), n, 4)
        tx = optax.adam(1e-2)
        algorithm = oi_eda(objective, n, population=group, num_epochs=epochs, optimizer=tx)
        state = algorithm.init(jax.random.key(1))
        step = jax.jit(algorithm.step)
        peer_step = _peer(objective, n, group, epochs, tx)
        params = state.search.params
        opt_state = tx.init(params)
        key = jax.random.key(2)
        fns = {
            "eda": lambda s=state, st=step: st(key, s),
            "loop": lambda p=params, o=opt_state, ps=peer_step: ps(key, p, o),
        }
        times = median_times(interleaved_times(fns, repeats, warmup))
        rows.append(
            {
                "case": f"n={n}, G={group}: jitted EDA step vs Python loop over the group",
                "num_variables": n,
                "step_time_s": times["eda"],
                "peer_step_time_s": times["loop"],
                "ratio": times["eda"] / times["loop"],
                "target_ratio": None,
                "meets_target": None,
                "evaluations_per_s": group / times["eda"],
                "peer_evaluations_per_s": group / times["loop"],
            }
        )
    return {
        "name": "oi_eda",
        "peer": "the same EDA step as a Python loop over the group (jitted one-point programs)",
        "size": size,
        "shape": {"group": group, "epochs": epochs, "objective": "NK landscape, K = 4"},
        "rows": rows,
    }


if __name__ == "__main__":
    json.dump(run(sys.argv[1] if len(sys.argv) > 1 else "default"), sys.stdout, indent=2)
    print()
