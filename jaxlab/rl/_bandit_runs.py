"""GRPO training programs on the known-answer bandits (UCPO's ternary bandit), each one compiled
program vmapped over runs, and the UCPO note's reference table.

The experiments' arms are arguments of one program (a run's advantage kind, its hyperparameters,
its start and its seed all vmapped along one axis), so a grid of arms compiles once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxlab._src.validation import check_positive, check_positive_int
from jaxlab.rl._grpo import group_advantages, grpo
from jaxlab.rl._problems import (
    TabularPolicy,
    TernaryBandit,
    expected_answer_metrics,
    ternary_bandit,
    ternary_labels,
)
from jaxlab.rl._ucpo import (
    RIGHT,
    UNCERTAIN,
    WRONG,
    dynamic_uncertainty_gain,
    ternary_rewards,
    ucpo_advantages,
)

__all__ = [
    "TERNARY_ADVANTAGE_KINDS",
    "UCPO_REFERENCE_TABLE",
    "seed_answer_metrics",
    "ternary_bandit_program",
    "ucpo_reference_checks",
]

# The advantage kinds of :func:`ternary_bandit_program` (its ``kind`` argument indexes them).
TERNARY_ADVANTAGE_KINDS = ("grpo", "grpo_uc", "ucpo")


def ternary_bandit_program(
    num_prompts: int,
    num_answers: int,
    knowability: Sequence[float],
    *,
    batch_prompts: int,
    group_size: int,
    steps: int,
    record_every: int = 1,
    warm_key_logit: float = 1.0,
    warm_abstain_logit: float = -2.0,
):
    """GRPO on a :func:`ternary_bandit` with a tabular policy, as one program vmapped over runs.

    Each run draws its bandit from its key (``num_prompts`` prompts, ``num_answers`` answers
    plus abstention, the prompts spread evenly over the ``knowability`` levels) and trains a
    :class:`TabularPolicy` with a shared abstention bias for ``steps`` GRPO steps of
    ``batch_prompts`` prompts x ``group_size`` rollouts. The advantage is GRPO's binary one
    (``kind`` 0), GRPO-UC's with a fixed uncertainty reward ``r_u`` (1) or UCPO's (2, with
    suppression weight ``w`` and non-ternary filtering when ``ntf``); the loss is the mean over
    ``B G`` tokens, so ``sgd(lr_prompt B)`` on the logits is a per-prompt step ``lr (1/G) Σ`` and
    ``sgd(lr_bias)`` on the shared bias ``lr (1/(BG)) Σ`` over the batch. ``warm`` (0 or 1)
    starts from the pretrained logits (``warm_key_logit`` on the key answer,
    ``warm_abstain_logit`` on abstention).

    Args:
      num_prompts, num_answers, knowability: the bandit's sizes.
      batch_prompts, group_size, steps: GRPO's.
      record_every: steps between the recorded abstention-by-level curve's points.
      warm_key_logit, warm_abstain_logit: the warm start's logits.

    Returns:
      A jitted ``run(keys, kind, r_u, w, ntf, warm, lr_prompt, lr_bias)``, vmapped over the
      first six arguments (one run per row), returning per run the final probabilities ``[Q,
      K+1]``, the abstention curve by level ``[steps / record_every, levels]``, the skipped
      updates and the bandit's key answers.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> run = ternary_bandit_program(4, 2, (0.0, 1.0), batch_prompts=2, group_size=4, steps=3)
      >>> ones = jnp.ones(2)
      >>> probs, curve, skipped, keys = run(jax.random.split(jax.random.key(0), 2),
      ...                                   jnp.array([0, 2]), 0 * ones, ones, ones > 0,
      ...                                   0 * ones, 0.1, 0.1)
      >>> probs.shape, curve.shape, skipped.tolist()
      ((2, 4, 3), (2, 3, 2), [0, 0])
    """
    q, k = (
        check_positive_int(num_prompts, "num_prompts"),
        check_positive_int(num_answers, "num_answers"),
    )
    b, g = (
        check_positive_int(batch_prompts, "batch_prompts"),
        check_positive_int(group_size, "group_size"),
    )
    steps = check_positive_int(steps, "steps")
    record_every = check_positive_int(record_every, "record_every")
    policy = TabularPolicy(q, k + 1, shared_bias=True)
    levels = jnp.asarray(knowability, jnp.float32)
    labels_tree = {"logits": "logits", "bias": "bias"}

    def one(key, kind, uncertain_reward, weight, ntf, warm, lr_prompt, lr_bias):
        task_key, run_key = jax.random.split(key)
        bandit = ternary_bandit(task_key, q, k, knowability)

        def reward_fn(kk, tokens, prompts):
            prompt_grid = jnp.broadcast_to(prompts[:, None], tokens.shape[:2])
            return ternary_labels(kk, bandit, prompt_grid, tokens[..., 0])

        def advantage_fn(labels):
            binary = group_advantages((labels == RIGHT).astype(jnp.float32))
            fixed = group_advantages(ternary_rewards(labels, uncertain_reward=uncertain_reward))
            kept = ucpo_advantages(labels, suppression_weight=weight)[0]
            unfiltered = ucpo_advantages(
                labels, suppression_weight=weight, filter_non_ternary=False
            )
            ucpo = jnp.where(ntf, kept, unfiltered[0])
            return jnp.stack([binary, fixed, ucpo])[kind]

        tx = optax.multi_transform(
            {"logits": optax.sgd(lr_prompt * b), "bias": optax.sgd(lr_bias)}, labels_tree
        )
        optimizer = grpo(
            policy.sample, policy.log_prob, reward_fn, tx, group_size=g, advantage=advantage_fn
        )
        logits = jnp.zeros((q, k + 1))
        logits = logits.at[jnp.arange(q), bandit.key_answer].set(warm * warm_key_logit)
        logits = logits.at[:, k].set(warm * warm_abstain_logit)

        def body(state, kk):
            pk, sk = jax.random.split(kk)
            state, _ = optimizer.step(sk, state, jax.random.permutation(pk, q)[:b])
            unsure = policy.probabilities(state.params)[:, k]
            by_level = jnp.array(
                [jnp.mean(unsure, where=bandit.knowability == lv) for lv in levels]
            )
            return state, by_level

        state, curve = jax.lax.scan(
            body, optimizer.init(policy.init(logits)), jax.random.split(run_key, steps)
        )
        return (
            policy.probabilities(state.params),
            curve[::record_every],
            state.skipped_count,
            bandit.key_answer,
        )

    return jax.jit(jax.vmap(one, in_axes=(0,) * 6 + (None, None)))


def seed_answer_metrics(bandits: Sequence[TernaryBandit], probs: jax.typing.ArrayLike) -> dict:
    """:func:`expected_answer_metrics` per seed (``bandits[s]``, ``probs[s]``) and their means.

    Returns:
      ``{"mean": {accuracy, paq, f1, uncertainty_ratio, abstain_by_knowability (a list by
      level)}, "per_seed": [the same per seed]}``.

    Examples:
      >>> import jax.numpy as jnp
      >>> bandit = TernaryBandit(jnp.array([0, 0]), jnp.array([0.0, 1.0]), 2)
      >>> pi = jnp.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
      >>> seed_answer_metrics([bandit, bandit], jnp.stack([pi, pi]))["mean"]["paq"]
      1.0
    """
    if len(bandits) != np.shape(probs)[0]:
        raise ValueError(
            f"probs must hold one row per bandit ({len(bandits)}), got shape {np.shape(probs)}"
        )
    per_seed = [
        expected_answer_metrics(bandit, jnp.asarray(p))
        for bandit, p in zip(bandits, probs, strict=True)
    ]
    levels = list(per_seed[0]["abstain_by_knowability"])
    mean = {
        m: float(np.mean([r[m] for r in per_seed]))
        for m in ("accuracy", "paq", "f1", "uncertainty_ratio")
    }
    mean["abstain_by_knowability"] = [
        float(np.mean([r["abstain_by_knowability"][lv] for r in per_seed])) for lv in levels
    ]
    return {
        "mean": mean,
        "per_seed": [
            {
                **{m: r[m] for m in mean if m != "abstain_by_knowability"},
                "abstain_by_knowability": list(r["abstain_by_knowability"].values()),
            }
            for r in per_seed
        ],
    }


# The UCPO note's reference table: (n_R, n_W, n_U) -> Â_U (r_u 0.2), Â_U (r_u 0.5), TAD Â_R, Â_W,
# γ, UCPO Â_U (R = 1, W = 0, population std, ε = 1e-6, w = 1, G = 8).
UCPO_REFERENCE_TABLE = {
    (6, 1, 1): (-1.4635, -0.8980, 0.4082, -2.4495, 0.3304, 0.1349),
    (1, 6, 1): (0.1525, 0.8980, 2.4495, -0.4082, 0.7321, 1.7934),
    (3, 3, 2): (-0.4977, 0.0000, 1.0000, -1.0000, 0.3250, 0.3250),
    (4, 2, 2): (-0.7683, -0.3015, 0.7071, -1.4142, 0.2083, 0.1473),
    (2, 2, 4): (-0.3906, 0.0000, 1.0000, -1.0000, -0.0833, -0.0833),
    (1, 1, 6): (-0.2662, 0.0000, 1.0000, -1.0000, -0.3393, -0.3393),
    (2, 1, 5): (-0.4774, -0.2085, 0.7071, -1.4142, -0.3542, -0.2504),
}


@jax.jit
def _reference_advantages(table, plain, ntf_groups):
    """Everything the reference checks evaluate, in one compiled program."""
    uc = [group_advantages(ternary_rewards(table, uncertain_reward=ru)) for ru in (0.2, 0.5)]
    binary = group_advantages((plain == RIGHT).astype(jnp.float32))
    return (
        uc[0],
        uc[1],
        ucpo_advantages(table)[0],
        dynamic_uncertainty_gain(table),
        jnp.max(jnp.abs(ucpo_advantages(plain)[0] - binary)),
        ucpo_advantages(ntf_groups)[1],
    )


def ucpo_reference_checks(tolerance: float) -> dict[str, Any]:
    """The UCPO note's reference table and two properties, against this library's advantages.

    The table (:data:`UCPO_REFERENCE_TABLE`, GRPO-UC at ``r_u`` 0.2 and 0.5, TAD, the gain ``γ``
    and UCPO's ``Â_U``) must match within ``tolerance``; without an uncertain rollout TAD equals
    GRPO (within 1e-5); non-ternary filtering masks exactly the groups with ``n_R n_W = 0``.

    Returns:
      ``{"table_error", "tad_equals_grpo_error", "ntf_mask_ok", "passed"}``.

    Examples:
      >>> ucpo_reference_checks(1.5e-4)["passed"]
      True
    """
    check_positive(tolerance, "tolerance")
    rows = list(UCPO_REFERENCE_TABLE)
    labels = jnp.array([[RIGHT] * r + [WRONG] * w + [UNCERTAIN] * u for r, w, u in rows], jnp.int32)
    # Properties: no uncertain rollout -> TAD equals GRPO; NTF masks n_R n_W = 0 exactly.
    plain = jnp.array([[RIGHT, WRONG, WRONG, RIGHT, RIGHT, WRONG, RIGHT, RIGHT]])
    ntf_groups = jnp.array([[RIGHT, UNCERTAIN], [WRONG, UNCERTAIN], [RIGHT, WRONG]])
    uc_low, uc_high, tad, gain, grpo_gap, masks = map(
        np.asarray, _reference_advantages(labels, plain, ntf_groups)
    )
    last = -1  # an uncertain rollout sits last in every row
    got = [
        (uc_low[i, last], uc_high[i, last], tad[i, 0], tad[i, r], gain[i], tad[i, last])
        for i, (r, _, _) in enumerate(rows)
    ]
    expected = np.array(list(UCPO_REFERENCE_TABLE.values()))
    error = float(np.max(np.abs(np.array(got, np.float64) - expected)))
    grpo_gap = float(grpo_gap)
    mask_ok = masks.tolist() == [False, False, True]
    return {
        "table_error": error,
        "tad_equals_grpo_error": grpo_gap,
        "ntf_mask_ok": mask_ok,
        "passed": bool(error <= tolerance and grpo_gap <= 1e-5 and mask_ok),
    }
