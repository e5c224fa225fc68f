"""GRPO policy-update steps with jitted group sampling against a Python loop over groups.

One GRPO update of :class:`jaxlab.rl.AutoregressivePolicy` (vocabulary 8, length 8, one hidden
layer of 64) on ``B`` prompts x ``G = 8`` samples, rewarded by TSRL's win rate against ``K = 8``
fixed anchors under the synthetic Bradley-Terry judge (both orders, sampled verdicts). The
candidate is :func:`jaxlab.rl.grpo`'s step, jitted: all ``B`` groups are sampled, judged and
differentiated in one program. The peer is the same update written as a Python loop over the
groups: a jitted per-group program (sample ``G``, judge, z-score, gradient of the group's clipped
loss) called ``B`` times, the gradients averaged in Python, then one jitted optimizer update (the
candidate also scores the reference policy for its KL term, which the peer skips). Both are
timed interleaved (medians).

Rows: ``ratio`` = candidate step time / peer step time for each ``B`` (below 1: the jitted
group sampling is faster), and ``steps_per_s`` for both. There is no target (the issue names
none).

Run: ``python -m benchmarks rl`` or ``python -m benchmarks.bench_rl``.
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
    AutoregressivePolicy,
    group_advantages,
    grpo,
    grpo_policy_loss,
    hidden_quality_sequences,
    select_anchors,
    split_policy,
    synthetic_pairwise_judge,
    win_rate_reward,
)

__all__ = ["run"]

_SIZES = {
    # vocabulary, length, hidden, group size, anchors, batch grid (prompts), timed rounds, warm-up
    "smoke": (4, 3, (8,), 4, 2, (2,), 3, 1),
    "default": (8, 8, (64,), 8, 8, (4, 16, 64), 7, 2),
}


def _setup(vocab, length, hidden, group, anchors_per_prompt, prompts):
    policy = AutoregressivePolicy(vocab, length, num_prompts=prompts, hidden=hidden,
                                  rngs=nnx.Rngs(0))  # fmt: skip
    params, sample_fn, log_prob_fn = split_policy(policy)
    task = hidden_quality_sequences(jax.random.key(1), prompts, length, vocab)
    judge = synthetic_pairwise_judge(task.quality_fn)
    draw = lambda k, q: sample_fn(params, k, q[None], None)[0]  # noqa: E731
    anchors = select_anchors(jax.random.key(2), draw, jnp.arange(prompts), anchors_per_prompt)

    def group_reward(key, tokens, prompt):
        return win_rate_reward(key, judge, tokens, anchors[prompt], prompt)[0]

    return params, sample_fn, log_prob_fn, group_reward


def _candidate(params, sample_fn, log_prob_fn, group_reward, group, tx):
    def reward_fn(key, tokens, prompts):
        keys = jax.random.split(key, prompts.shape[0])
        return jax.vmap(group_reward)(keys, tokens, prompts)

    init, step = grpo(sample_fn, log_prob_fn, reward_fn, tx, group_size=group)
    return init(params), jax.jit(step)


def _peer(sample_fn, log_prob_fn, group_reward, group, tx):
    @jax.jit
    def group_grad(params, key, prompt):
        prompts = jnp.full(group, prompt)
        sample_key, reward_key = jax.random.split(key)
        tokens = sample_fn(params, sample_key, prompts, None)
        adv = group_advantages(group_reward(reward_key, tokens, prompt))
        old = jax.lax.stop_gradient(log_prob_fn(params, tokens, prompts, None))
        loss = lambda p: grpo_policy_loss(log_prob_fn(p, tokens, prompts, None), old, adv)[0]  # noqa: E731
        return jax.grad(loss)(params)

    @jax.jit
    def apply(params, opt_state, grads):
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    def step(key, params, opt_state, prompts):
        keys = jax.random.split(key, len(prompts))
        total = None
        for k, prompt in zip(keys, prompts, strict=True):  # the Python loop over groups
            g = group_grad(params, k, prompt)
            total = g if total is None else jax.tree.map(jnp.add, total, g)
        grads = jax.tree.map(lambda v: v / len(prompts), total)
        return apply(params, opt_state, grads)

    return step


def run(size: str = "default") -> dict:
    """Times one jitted GRPO step against the Python loop over groups, for each batch size.

    Args:
      size: ``"default"`` (vocabulary 8, length 8, B = 4, 16, 64 prompts x G = 8, K = 8) or
        ``"smoke"`` (a tiny policy, B = 2: seconds).

    Returns:
      ``{"name", "peer", "size", "shape", "rows": [{"case", "step_time_s", "peer_step_time_s",
      "ratio", "target_ratio", "meets_target", "steps_per_s", "peer_steps_per_s",
      "prompts"}, ...]}``.
    """
    if size not in _SIZES:
        raise ValueError(f"size must be one of {sorted(_SIZES)}, got {size!r}")
    vocab, length, hidden, group, k, batches, repeats, warmup = _SIZES[size]
    rows = []
    for b in batches:
        tx = optax.adam(1e-2)
        params, sample_fn, log_prob_fn, group_reward = _setup(vocab, length, hidden, group, k, b)
        state, step = _candidate(params, sample_fn, log_prob_fn, group_reward, group, tx)
        peer_step = _peer(sample_fn, log_prob_fn, group_reward, group, tx)
        prompts = jnp.arange(b)
        prompt_list = list(range(b))
        opt_state = tx.init(params)
        key = jax.random.key(3)
        fns = {
            "grpo": lambda state=state, step=step, prompts=prompts: step(key, state, prompts),
            "loop": lambda pl=prompt_list, s=opt_state, p=params, ps=peer_step: ps(key, p, s, pl),
        }
        times = median_times(interleaved_times(fns, repeats, warmup))
        rows.append(
            {
                "case": f"B={b} x G={group}: jitted grpo step vs Python loop over groups",
                "prompts": b,
                "step_time_s": times["grpo"],
                "peer_step_time_s": times["loop"],
                "ratio": times["grpo"] / times["loop"],
                "target_ratio": None,
                "meets_target": None,
                "steps_per_s": 1.0 / times["grpo"],
                "peer_steps_per_s": 1.0 / times["loop"],
            }
        )
    return {
        "name": "rl",
        "peer": "the same GRPO update as a Python loop over groups (a jitted per-group program)",
        "size": size,
        "shape": {
            "vocab": vocab,
            "length": length,
            "hidden": list(hidden),
            "group": group,
            "anchors": k,
        },  # fmt: skip
        "rows": rows,
    }


if __name__ == "__main__":
    json.dump(run(sys.argv[1] if len(sys.argv) > 1 else "default"), sys.stdout, indent=2)
    print()
