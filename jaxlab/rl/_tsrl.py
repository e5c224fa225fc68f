"""TSRL: tournament-style rewards, the win rate of a response against fixed anchors.

For a prompt ``q`` with anchors ``a_1..a_K`` (fixed for the whole run) and a pairwise judge
``J(q, x, y) = P(x preferred to y | x shown first)``, a response ``o`` earns

``r(o) = (1/K) Σ_k ½ [J(q, o, a_k) + 1 - J(q, a_k, o)] ∈ [0, 1]``

(both presentation orders, so a position bias cancels; ties count ½). Baselines on the same
interfaces: a pointwise rubric score, one comparison against a random other group member, and a
round robin within the group. Judges are any callables returning a preference probability;
:func:`synthetic_pairwise_judge` is the Bradley-Terry judge of the note's toy (temperature,
position bias, a fraction of corrupted verdicts).

Judges cost ``G K (2 if both orders)`` calls per prompt; they are vmapped over the
``(response, anchor)`` grid.

References:
  Juneja, Phal, She, Wang, Sadigh, Dragan, Wang, *Reinforcement Learning for Non-Verifiable
  Problems* (Tournament Style RL), ICML 2026, https://icml.cc/virtual/2026/poster/62722.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from jaxlab._src.validation import (
    check_bool,
    check_callable,
    check_callback_shape,
    check_key,
    check_nonnegative,
    check_positive,
    check_positive_int,
    check_probability,
    check_real,
    is_concrete,
)

__all__ = [
    "JudgeInfo",
    "pointwise_reward",
    "round_robin_reward",
    "select_anchors",
    "single_pairwise_reward",
    "synthetic_pairwise_judge",
    "synthetic_rubric_judge",
    "win_rate_reward",
]


class JudgeInfo(NamedTuple):
    """Judge bookkeeping of a reward call.

    Attributes:
      num_calls: int32 judge calls made (the cost).
      invalid_count: int32 judge outputs that were not a probability in ``[0, 1]`` (NaN
        included). Their comparisons are NaN, so the rewards they enter are NaN: reported here
        and by :func:`jaxlab.rl.grpo`'s ``skips.rewards``, never clipped away. Concrete
        (non-traced) calls raise instead.

    Examples:
      >>> bad_judge = lambda q, x, y: 2.0 * jax.nn.sigmoid(x - y)  # not a probability
      >>> run = jax.jit(lambda k, o, a: win_rate_reward(k, bad_judge, o, a))
      >>> rewards, info = run(jax.random.key(0), jnp.array([1.0, 0.0]), jnp.array([0.0]))
      >>> int(info.invalid_count), bool(jnp.isnan(rewards[0]))
      (1, True)
    """

    num_calls: jax.Array
    invalid_count: jax.Array


def _check_callable(fn, name):
    check_callable(fn, name)


def _leading(tree: Any, name: str, minimum: int) -> int:
    leaves = jax.tree.leaves(tree)
    if not leaves:
        raise ValueError(f"{name} must hold arrays with a leading axis, got {tree!r}")
    shapes = {np.shape(v)[:1] for v in leaves}
    if len(shapes) != 1 or () in shapes:
        raise ValueError(f"{name} must have one leading axis shared by its arrays, got {shapes}")
    (size,) = shapes.pop()
    if size < minimum:
        what = "anchor" if name == "anchors" else "response"
        raise ValueError(f"{name} must hold at least {minimum} {what}(s), got {size}")
    return size


def _probabilities(judge_fn, context, first, second):
    """``J(context, first_i, second_j)`` on the grid, ``[len(first), len(second)]``."""
    row = jax.vmap(lambda x, y: judge_fn(context, x, y), in_axes=(None, 0))
    p = jax.vmap(row, in_axes=(0, None))(first, second)
    grid = tuple(jax.tree.leaves(v)[0].shape[0] for v in (first, second))
    check_callback_shape(p, grid, "judge_fn", "of one probability (a scalar) per pair: grid")
    return p.astype(jnp.float32)


def _verdicts(rng_key, p, sample):
    invalid = ~((p >= 0) & (p <= 1))  # NaN fails both comparisons
    if is_concrete(p) and bool(jnp.any(invalid)):
        bad = np.asarray(p)[np.asarray(invalid)]
        raise ValueError(
            "judge_fn must return preference probabilities in [0, 1], got "
            f"{bad.size} of {p.size} outside (e.g. {float(bad.flat[0])!r})"
        )
    v = jax.random.bernoulli(rng_key, jnp.clip(p, 0.0, 1.0)).astype(p.dtype) if sample else p
    return jnp.where(invalid, jnp.nan, v), invalid


def _pair_scores(rng_key, judge_fn, context, responses, opponents, both_orders, sample):
    """``s[g, k] = ½[v(o_g ≻ a_k) + 1 - v(a_k ≻ o_g)]`` (or the first order alone)."""
    k_fwd, k_bwd = jax.random.split(rng_key)
    fwd, bad_fwd = _verdicts(k_fwd, _probabilities(judge_fn, context, responses, opponents), sample)
    if not both_orders:
        return fwd, bad_fwd
    back, bad_back = _verdicts(
        k_bwd, _probabilities(judge_fn, context, opponents, responses).T, sample
    )
    return 0.5 * (fwd + 1.0 - back), bad_fwd | bad_back


def _check_common(rng_key, judge_fn, both_orders, sample):
    check_key(rng_key)
    _check_callable(judge_fn, "judge_fn")
    return check_bool(both_orders, "both_orders"), check_bool(sample, "sample")


def win_rate_reward(
    rng_key: jax.Array,
    judge_fn: Callable,
    responses: Any,
    anchors: Any,
    context: Any = None,
    *,
    both_orders: bool = True,
    sample: bool = True,
    anchor_mask: ArrayLike | None = None,
) -> tuple[jax.Array, JudgeInfo]:
    """TSRL's reward: each response's win rate against the fixed anchors.

    ``r(o_g) = Σ_k m_k s_gk / Σ_k m_k`` with ``s_gk = ½[v(o_g ≻ a_k) + 1 - v(a_k ≻ o_g)]``,
    ``v`` a Bernoulli verdict of the judge's probability (``sample=True``) or the probability
    itself (``sample=False``: the noise-free expectation). With independent verdicts
    ``Var[r | o] <= 1/(8K)``. A judge of the form ``σ(Δ/τ + β)`` gives ``E r = ½`` at
    ``Δ = 0`` for every position bias ``β``; a judge corrupted with flip probability ``ε`` gives
    ``E r = ε + (1 - 2ε) E_0 r``, which GRPO's z-score undoes.

    Args:
      rng_key: a JAX PRNG key (the verdicts).
      judge_fn: ``(context, first, second) -> P(first preferred)`` for single responses.
      responses: ``G`` responses (arrays with a leading axis ``G``).
      anchors: ``K >= 1`` anchors (leading axis ``K``), e.g. from :func:`select_anchors`.
      context: what the judge needs besides the two responses (the prompt), passed as is.
      both_orders: judge both presentation orders (position-bias control).
      sample: draw verdicts (True) or use probabilities (False).
      anchor_mask: optional 0/1 ``[K]``: use only these anchors (so several ``K`` share one
        compiled program with padded anchors).

    Returns:
      ``(rewards [G], JudgeInfo)``.

    Examples:
      >>> judge = synthetic_pairwise_judge(lambda q, x: x, temperature=0.5, position_bias=0.5)
      >>> r, info = win_rate_reward(jax.random.key(0), judge, jnp.array([0.5]),
      ...                           jnp.array([0.0]), sample=False)
      >>> round(float(r[0]), 6), int(info.num_calls)  # ½[σ(1.5) + σ(0.5)]
      (0.720017, 2)

    References:
      Juneja et al., *Reinforcement Learning for Non-Verifiable Problems* (TSRL), ICML 2026.
    """
    both_orders, sample = _check_common(rng_key, judge_fn, both_orders, sample)
    g = _leading(responses, "responses", 1)
    k = _leading(anchors, "anchors", 1)
    if anchor_mask is None:
        weights = jnp.ones(k, jnp.float32)
    else:
        weights = jnp.asarray(anchor_mask, jnp.float32)
        if weights.shape != (k,):
            raise ValueError(
                f"anchor_mask must have shape ({k},) (one per anchor), got {weights.shape}"
            )
        if is_concrete(weights) and not bool(jnp.any(weights > 0)):
            raise ValueError("anchor_mask must keep at least one anchor (an empty anchor set)")
    scores, invalid = _pair_scores(
        rng_key, judge_fn, context, responses, anchors, both_orders, sample
    )
    # Masked anchors are never judged in spirit: their (possibly NaN) scores are dropped.
    used = weights > 0
    scores = jnp.where(used[None, :], scores, 0.0)
    rewards = (scores * weights[None, :]).sum(-1) / jnp.maximum(weights.sum(), 1e-30)
    calls = (2 if both_orders else 1) * g * jnp.sum(used).astype(jnp.int32)
    info = JudgeInfo(calls, jnp.sum(invalid & used[None, :]).astype(jnp.int32))
    return rewards, info


def single_pairwise_reward(
    rng_key: jax.Array,
    judge_fn: Callable,
    responses: Any,
    context: Any = None,
    *,
    both_orders: bool = True,
    sample: bool = True,
) -> tuple[jax.Array, JudgeInfo]:
    """Baseline: each response against one uniformly random *other* member of its group.

    ``r(o_g) = ½[v(o_g ≻ o_j) + 1 - v(o_j ≻ o_g)]``, ``j ≠ g`` redrawn every call.

    Examples:
      >>> judge = synthetic_pairwise_judge(lambda q, x: x, temperature=0.5, position_bias=0.0)
      >>> r, _ = single_pairwise_reward(jax.random.key(0), judge, jnp.array([0.0, 0.0]),
      ...                               sample=False)
      >>> r.tolist()
      [0.5, 0.5]
    """
    both_orders, sample = _check_common(rng_key, judge_fn, both_orders, sample)
    g = _leading(responses, "responses", 2)
    pick_key, judge_key = jax.random.split(rng_key)
    offsets = jax.random.randint(pick_key, (g,), 1, g)
    opponents_idx = (jnp.arange(g) + offsets) % g
    opponents = jax.tree.map(lambda v: v[opponents_idx], responses)
    k_fwd, k_bwd = jax.random.split(judge_key)
    pair = jax.vmap(lambda x, y: judge_fn(context, x, y))
    probs = pair(responses, opponents)
    check_callback_shape(probs, (g,), "judge_fn", "of one probability (a scalar) per pair: batch")
    fwd, bad = _verdicts(k_fwd, probs.astype(jnp.float32), sample)
    if both_orders:
        back, bad_back = _verdicts(k_bwd, pair(opponents, responses).astype(jnp.float32), sample)
        fwd, bad = 0.5 * (fwd + 1.0 - back), bad | bad_back
    calls = jnp.asarray((2 if both_orders else 1) * g, jnp.int32)
    return fwd, JudgeInfo(calls, jnp.sum(bad).astype(jnp.int32))


def round_robin_reward(
    rng_key: jax.Array,
    judge_fn: Callable,
    responses: Any,
    context: Any = None,
    *,
    both_orders: bool = True,
    sample: bool = True,
) -> tuple[jax.Array, JudgeInfo]:
    """Baseline (Tournament-GRPO style): each response's win rate against the other ``G - 1``.

    Examples:
      >>> judge = synthetic_pairwise_judge(lambda q, x: 100.0 * x, position_bias=0.0)
      >>> r, info = round_robin_reward(jax.random.key(0), judge, jnp.array([0.0, 1.0, 2.0]),
      ...                              sample=False)
      >>> [round(float(v), 4) for v in r], int(info.num_calls)
      ([0.0, 0.5, 1.0], 12)
    """
    both_orders, sample = _check_common(rng_key, judge_fn, both_orders, sample)
    g = _leading(responses, "responses", 2)
    scores, invalid = _pair_scores(
        rng_key, judge_fn, context, responses, responses, both_orders, sample
    )
    off = ~jnp.eye(g, dtype=bool)
    rewards = jnp.where(off, scores, 0.0).sum(-1) / (g - 1)
    calls = jnp.asarray((2 if both_orders else 1) * g * (g - 1), jnp.int32)
    return rewards, JudgeInfo(calls, jnp.sum(invalid & off).astype(jnp.int32))


def pointwise_reward(
    rng_key: jax.Array, score_fn: Callable, responses: Any, context: Any = None
) -> tuple[jax.Array, JudgeInfo]:
    """Baseline: one pointwise (rubric) score per response, ``score_fn(key, context, o_g)``.

    Non-finite scores are counted in ``invalid_count`` (and left as they are).

    Examples:
      >>> rubric = synthetic_rubric_judge(lambda q, x: x, noise_std=0.0)
      >>> r, _ = pointwise_reward(jax.random.key(0), rubric, jnp.array([-9.0, 0.0, 9.0]))
      >>> r.tolist()  # round(10 σ(tanh Q)), clipped to [1, 10]
      [3.0, 5.0, 7.0]
    """
    check_key(rng_key)
    _check_callable(score_fn, "score_fn")
    g = _leading(responses, "responses", 1)
    keys = jax.random.split(rng_key, g)
    scores = jax.vmap(lambda k, x: score_fn(k, context, x))(keys, responses)
    check_callback_shape(scores, (g,), "score_fn", "of one score per response: shape")
    scores = jnp.asarray(scores, jnp.float32)
    return scores, JudgeInfo(
        jnp.asarray(g, jnp.int32), jnp.sum(~jnp.isfinite(scores)).astype(jnp.int32)
    )


def synthetic_pairwise_judge(
    quality_fn: Callable,
    *,
    temperature: ArrayLike = 0.5,
    position_bias: ArrayLike = 0.5,
    flip_prob: ArrayLike = 0.0,
) -> Callable:
    """A noisy Bradley-Terry judge on a hidden quality, with position bias and corruption.

    ``J(q, x, y) = ε + (1 - 2ε) σ((Q(q, x) - Q(q, y))/τ + β)``: the probability that ``x``
    (shown first) wins, each verdict flipped with probability ``ε``.

    Args:
      quality_fn: ``(context, response) -> Q`` (hidden from the policy).
      temperature: ``τ > 0`` (large: a weak judge).
      position_bias: ``β`` (the first response's advantage in logits).
      flip_prob: ``ε ∈ [0, 1]``, the fraction of corrupted verdicts.

    Returns:
      ``judge_fn(context, first, second) -> probability``.

    Examples:
      >>> judge = synthetic_pairwise_judge(lambda q, x: x, flip_prob=0.2)
      >>> round(float(judge(None, 0.0, 0.0)), 4)  # 0.2 + 0.6 σ(0.5)
      0.5735
    """
    _check_callable(quality_fn, "quality_fn")
    check_positive(temperature, "temperature")
    check_real(position_bias, "position_bias")
    check_probability(flip_prob, "flip_prob")

    def judge_fn(context, first, second):
        delta = quality_fn(context, first) - quality_fn(context, second)
        p = jax.nn.sigmoid(delta / temperature + position_bias)
        return flip_prob + (1.0 - 2.0 * flip_prob) * p

    return judge_fn


def synthetic_rubric_judge(
    quality_fn: Callable,
    offset_fn: Callable | None = None,
    *,
    noise_std: ArrayLike = 1.0,
    scale: ArrayLike = 10.0,
) -> Callable:
    """The note's noisy pointwise rubric: ``clip(round(10 σ(tanh Q + b_q + σ_n ξ)), 1, 10)``.

    ``b_q = offset_fn(context)`` is a per-prompt offset (a judge calibrated differently on every
    prompt), ``ξ ~ N(0, 1)``. Scores live in 1..10.

    Returns:
      ``score_fn(rng_key, context, response) -> score``.

    Examples:
      >>> rubric = synthetic_rubric_judge(lambda q, x: x, noise_std=0.0)
      >>> float(rubric(jax.random.key(0), None, 0.0))
      5.0
    """
    _check_callable(quality_fn, "quality_fn")
    if offset_fn is not None:
        _check_callable(offset_fn, "offset_fn")
    check_nonnegative(noise_std, "noise_std")
    check_positive(scale, "scale")

    def score_fn(rng_key, context, response):
        offset = 0.0 if offset_fn is None else offset_fn(context)
        noise = noise_std * jax.random.normal(rng_key, ())
        logit = jnp.tanh(quality_fn(context, response)) + offset + noise
        return jnp.clip(jnp.round(scale * jax.nn.sigmoid(logit)), 1.0, scale)

    return score_fn


def select_anchors(
    rng_key: jax.Array, sampler: Callable, contexts: ArrayLike, num_anchors: int
) -> Any:
    """``num_anchors`` fixed anchors per context, drawn once from ``sampler(key, context)``.

    Draw them from the initial (reference) policy with a key of their own, so that every arm of
    an experiment shares them; store them with the run.

    Returns:
      Anchors with leading axes ``[num_contexts, num_anchors]``.

    Examples:
      >>> draw = lambda key, q: jax.random.randint(key, (1,), 0, 16)
      >>> select_anchors(jax.random.key(0), draw, jnp.arange(3), 4).shape
      (3, 4, 1)
    """
    check_key(rng_key)
    _check_callable(sampler, "sampler")
    k = check_positive_int(num_anchors, "num_anchors")
    c = _leading(contexts, "contexts", 1)
    keys = jax.random.split(rng_key, (c, k))
    per_context = jax.vmap(lambda ks, q: jax.vmap(lambda kk: sampler(kk, q))(ks))
    return per_context(keys, contexts)
