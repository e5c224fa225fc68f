"""Group-relative policy optimisation (GRPO) over sampled discrete sequences.

The shared core of :mod:`jaxlab.rl`: group-relative advantages (z-score and rank), the clipped
surrogate with a KL penalty to a reference policy (token or sequence aggregation), and the
:func:`grpo` update in blackjax's ``(init, step)`` shape (an :class:`OptimizationAlgorithm`,
the type of every optimizer in :mod:`jaxlab.rl`, also named :class:`PolicyOptimizer`: any
discrete sequence policy, any reward function, any generation order; the small any-order nnx
policy :class:`jaxlab.rl.AutoregressivePolicy` lives in ``_policy.py``).

References:
  Z. Shao et al., *DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language
  Models* (GRPO), arXiv 2402.03300, 2024.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.typing import ArrayLike

from jaxlab._src.optimization import OptimizationAlgorithm
from jaxlab._src.validation import (
    check_array,
    check_callable,
    check_choice,
    check_indices,
    check_int,
    check_key,
    check_nonnegative,
    check_positive_int,
    concrete_float,
    is_concrete,
    tree_all_finite,
)

__all__ = [
    "GRPOInfo",
    "GRPOSkips",
    "GRPOState",
    "LossInfo",
    "PolicyOptimizer",
    "group_advantages",
    "grpo",
    "grpo_policy_loss",
]

_ADVANTAGES = ("zscore", "rank", "center")


def _check_groups(rewards: Any, name: str) -> jax.Array:
    r = check_array(rewards, name, kind="real")
    if r.ndim < 1:
        raise ValueError(f"{name} must have a group axis (last), got a scalar")
    if r.shape[-1] < 2:
        raise ValueError(
            f"{name} must hold groups of at least 2 samples (last axis), got group size "
            f"{r.shape[-1]}: a group of one has no relative advantage"
        )
    return r.astype(jnp.result_type(r.dtype, jnp.float32))


def _average_ranks(values: jax.Array) -> jax.Array:
    # rank_i = #{j: v_j < v_i} + (#{j: v_j = v_i} + 1)/2: 1-based, ties share their mean rank.
    less = jnp.sum(values[..., None, :] < values[..., :, None], axis=-1)
    equal = jnp.sum(values[..., None, :] == values[..., :, None], axis=-1)
    return (less + (equal + 1) / 2).astype(values.dtype)


def group_advantages(
    rewards: ArrayLike,
    *,
    kind: str = "zscore",
    epsilon: ArrayLike = 1e-6,
    ddof: int = 0,
) -> jax.Array:
    """Group-relative advantages of rewards ``[..., G]`` (the last axis is the group).

    * ``"zscore"`` (GRPO): ``Â_i = (r_i - mean r)/(std r + ε)``; a group whose rewards all tie
      gets 0 (never a division by a bare std).
    * ``"rank"``: the z-score of the average ranks (ties share their mean rank), invariant to
      every increasing transform of the rewards.
    * ``"center"`` (Dr. GRPO): ``r_i - mean r``, no std normalisation.

    ``std`` is the population std (``ddof = 0``; ``ddof = 1`` is torch's default; the signs of
    the advantages do not depend on it). NaN rewards give NaN advantages (reported, never
    dropped: :func:`grpo` counts them).

    Args:
      rewards: real array ``[..., G]`` with ``G >= 2``.
      kind: ``"zscore"``, ``"rank"`` or ``"center"``.
      epsilon: std floor ``ε >= 0`` (traceable).
      ddof: 0 or 1.

    Returns:
      Advantages with the shape of ``rewards``.

    Examples:
      >>> f = jnp.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0])
      >>> [round(float(a), 4) for a in group_advantages(f)[:3]]
      [-0.3404, -1.1183, 0.0486]
      >>> [round(float(a), 4) for a in group_advantages(jnp.exp(f), kind="rank")[:3]]
      [-0.2195, -1.3172, 0.2195]
      >>> group_advantages(jnp.ones((2, 4))).tolist()
      [[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]

    References:
      Z. Shao et al., DeepSeekMath (GRPO), arXiv 2402.03300; Z. Liu et al., *Understanding
      R1-Zero-Like Training* (Dr. GRPO), arXiv 2503.20783.
    """
    r = _check_groups(rewards, "rewards")
    check_choice(kind, "kind", _ADVANTAGES)
    check_nonnegative(epsilon, "epsilon")
    ddof = check_int(ddof, "ddof", minimum=0, maximum=1)
    if kind == "rank":
        r = _average_ranks(r)
    centred = r - jnp.mean(r, axis=-1, keepdims=True)
    if kind == "center":
        return centred
    std = jnp.std(r, axis=-1, keepdims=True, ddof=ddof)
    return centred / (std + epsilon)


AGGREGATIONS = ("token", "sequence")

# |d| below this: the k3 estimator e^d - d - 1 by its Taylor series to d^6 (truncation under
# 1e-8 relative at the edge), where expm1(d) - d would cancel; above it expm1(d) - d is accurate
# to a few ulps (the relative error is about eps |d| / (d^2 / 2)).
_K3_SERIES_LIMIT = 0.1


def _k3(d: jax.Array) -> jax.Array:
    """``e^d - d - 1`` without cancellation near 0 (``+inf`` when ``e^d`` leaves the dtype)."""
    small = jnp.abs(d) < _K3_SERIES_LIMIT
    s = jnp.where(small, d, 0.0)  # safe operand: the unused branch gets no inf/NaN gradient
    series = s * s * (0.5 + s * (1 / 6 + s * (1 / 24 + s * (1 / 120 + s / 720))))
    b = jnp.where(small, 1.0, d)
    return jnp.where(small, series, jnp.expm1(b) - b)


def _log_k3(d: jax.Array) -> jax.Array:
    """``log(e^d - d - 1)``, finite for every finite ``d != 0`` (``-inf`` at 0), in any dtype.

    For ``d > 1``: ``d + log1p(-(1 + d) e^{-d})`` (no ``e^d`` formed); otherwise the log of
    :func:`_k3`, whose value lies in ``(0, e - 2]`` there, or grows like ``-d`` for ``d < -1``.
    """
    large = d > 1.0
    big = jnp.where(large, d, 2.0)
    log_large = big + jnp.log1p(-(1.0 + big) * jnp.exp(-big))
    rest = jnp.where(large, 0.5, d)
    return jnp.where(large, log_large, jnp.log(_k3(rest)))


class LossInfo(NamedTuple):
    """Diagnostics of :func:`grpo_policy_loss` (aggregated like the loss).

    Attributes:
      surrogate: the clipped surrogate ``mean min(ρÂ, clip(ρ)Â)`` (maximised).
      kl: the KL estimate to the reference policy, ``exp(log_kl)`` (0 without ``logp_ref``;
        ``+inf`` only when the estimate itself exceeds the dtype's range).
      log_kl: its logarithm, computed in log space: finite for all finite log-probabilities
        (``-inf`` when the policies agree on every token or without ``logp_ref``).
      clip_fraction: fraction of tokens whose ratio lies outside ``[1 - ε_c, 1 + ε_c]``.
      ratio_mean: mean ratio ``ρ``.
      nonfinite_count: number of non-finite inputs (log-probs or advantages).

    Examples:
      >>> _, info = grpo_policy_loss(jnp.zeros(2), jnp.zeros(2), jnp.array([1.0, jnp.nan]))
      >>> int(info.nonfinite_count), float(info.ratio_mean)
      (1, 1.0)
    """

    surrogate: jax.Array
    kl: jax.Array
    log_kl: jax.Array
    clip_fraction: jax.Array
    ratio_mean: jax.Array
    nonfinite_count: jax.Array


def _check_aggregation(aggregation: Any) -> str:
    check_choice(aggregation, "aggregation", AGGREGATIONS)
    return aggregation


def _kl_is_off(kl_coef: Any) -> bool:
    """Whether ``kl_coef`` is a concrete 0 (then no reference log-probs are computed at all)."""
    return concrete_float(kl_coef, "kl_coef") == 0.0


def grpo_policy_loss(
    logp_new: ArrayLike,
    logp_old: ArrayLike,
    advantages: ArrayLike,
    token_mask: ArrayLike | None = None,
    *,
    clip_epsilon: ArrayLike = 0.2,
    kl_coef: ArrayLike = 0.0,
    logp_ref: ArrayLike | None = None,
    aggregation: str = "token",
) -> tuple[jax.Array, LossInfo]:
    """GRPO's clipped surrogate loss with a KL penalty to a reference policy.

    With the token ratio ``ρ_{i,t} = exp(log π_θ(o_{i,t}) - log π_old(o_{i,t}))``, the outcome
    advantage ``Â_i`` broadcast to every token of response ``i`` and the per-token objective
    ``ℓ_{i,t} = min(ρ_{i,t} Â_i, clip(ρ_{i,t}, 1 - ε_c, 1 + ε_c) Â_i) - β_KL k3_{i,t}``, where
    ``k3 = e^{d} - d - 1``, ``d = log π_ref - log π_θ`` (the unbiased, non-negative "k3" KL
    estimator of DeepSeekMath eq. (4)), the loss is ``L = -agg(ℓ)`` over the mask ``m``:

    * ``aggregation="token"`` (the default): ``agg(ℓ) = Σ_{i,t} m ℓ / Σ_{i,t} m``, every valid
      token weighs the same. This is the default because it is what jaxlab's experiments were
      calibrated with and because the per-sequence mean gives each token of a short response
      more weight than one of a long response (the length bias Dr. GRPO and DAPO remove).
    * ``aggregation="sequence"``: DeepSeekMath's eq. (3),
      ``agg(ℓ) = (1/N) Σ_i (1/|o_i|) Σ_t m ℓ`` with ``|o_i| = Σ_t m_{i,t}``, over the ``N``
      responses with at least one valid token.

    With one log-prob per response (no token axis) the two coincide. The KL estimate is formed
    in log space (``log k3`` per token, then a weighted log-sum-exp), so ``LossInfo.log_kl`` is
    finite for any finite log-probabilities; the loss's KL term is its exponential, which is
    ``+inf`` exactly when the estimate exceeds the dtype's range (``e^{88.7}`` in float32). A
    concrete ``kl_coef`` of 0 leaves the KL term out of the loss altogether (no ``0 · inf``).

    Args:
      logp_new: log-probs under the policy being optimised, shape ``advantages.shape`` (one per
        response) or ``advantages.shape + (T,)`` (one per token).
      logp_old: log-probs under the sampling policy, the same shape (held constant).
      advantages: ``Â``, one per response.
      token_mask: 0/1 (or bool) weights like ``logp_new``; ``None``: every token counts.
      clip_epsilon: ``ε_c >= 0`` (traceable).
      kl_coef: ``β_KL >= 0`` (traceable).
      logp_ref: reference log-probs like ``logp_new``; ``None``: no KL term.
      aggregation: ``"token"`` or ``"sequence"`` (above).

    Returns:
      ``(loss, LossInfo)``.

    Examples:
      >>> adv = jnp.array([1.0, -1.0])
      >>> logp_old = jnp.log(jnp.array([0.5, 0.5]))
      >>> loss, info = grpo_policy_loss(logp_old + jnp.log(1.5), logp_old, adv)
      >>> round(float(loss), 4), float(info.clip_fraction)  # (-1.2 + 1.5)/2: ratio 1.5 clipped
      (0.15, 1.0)
      >>> _, info = grpo_policy_loss(jnp.full(1, -400.0), jnp.full(1, -400.0), jnp.ones(1),
      ...                            kl_coef=0.1, logp_ref=jnp.full(1, -100.0))
      >>> round(float(info.log_kl), 2)  # log(e^300 - 301): no overflow in float32
      300.0

    References:
      Z. Shao et al., DeepSeekMath (GRPO), arXiv 2402.03300, eq. (3)-(4); Z. Liu et al.,
      *Understanding R1-Zero-Like Training* (Dr. GRPO), arXiv 2503.20783, on the length bias.
    """
    adv = check_array(advantages, "advantages", kind="real")
    new = check_array(logp_new, "logp_new", kind="floating")
    old = check_array(logp_old, "logp_old", kind="floating")
    if new.shape != old.shape:
        raise ValueError(f"logp_old must have logp_new's shape {new.shape}, got {old.shape}")
    if new.shape not in (adv.shape, (*adv.shape, *new.shape[adv.ndim :])) or (
        new.ndim > adv.ndim + 1
    ):
        raise ValueError(
            f"logp_new must have shape advantages.shape {adv.shape} or advantages.shape + (T,), "
            f"got {new.shape}"
        )
    check_nonnegative(clip_epsilon, "clip_epsilon")
    check_nonnegative(kl_coef, "kl_coef")
    _check_aggregation(aggregation)
    if token_mask is None:
        mask = jnp.ones(new.shape, new.dtype)
    else:
        is_bool = getattr(token_mask, "dtype", None) == np.bool_
        mask = jnp.asarray(token_mask) if is_bool else check_array(token_mask, "token_mask")
        if not is_bool and is_concrete(mask) and not bool(jnp.all((mask == 0) | (mask == 1))):
            raise ValueError("token_mask must hold 0/1 (or bool) weights, got other values")
        if mask.shape != new.shape:
            raise ValueError(f"token_mask must have logp_new's shape {new.shape}, got {mask.shape}")
        mask = mask.astype(new.dtype)
    per_token_axis = new.ndim > adv.ndim
    if per_token_axis:
        adv = adv[..., None]
    adv = jnp.broadcast_to(adv, new.shape).astype(new.dtype)
    # Weights w with Σ w = 1 that turn a per-token quantity into the chosen mean.
    if aggregation == "sequence" and per_token_axis:
        lengths = jnp.sum(mask, axis=-1, keepdims=True)
        nonempty = jnp.maximum(jnp.sum(lengths > 0), 1).astype(new.dtype)
        weights = mask / jnp.maximum(lengths, 1.0) / nonempty
    else:
        weights = mask / jnp.maximum(jnp.sum(mask), 1.0)
    mean = lambda v: jnp.sum(v * weights)  # noqa: E731
    ratio = jnp.exp(new - jax.lax.stop_gradient(old))
    clipped = jnp.clip(ratio, 1.0 - clip_epsilon, 1.0 + clip_epsilon)
    surrogate = mean(jnp.minimum(ratio * adv, clipped * adv))
    loss = -surrogate
    if logp_ref is None:
        kl = jnp.zeros((), new.dtype)
        log_kl = jnp.full((), -jnp.inf, new.dtype)
        inputs = (new, old, adv)
    else:
        ref = check_array(logp_ref, "logp_ref", kind="floating")
        if ref.shape != new.shape:
            raise ValueError(f"logp_ref must have logp_new's shape {new.shape}, got {ref.shape}")
        d = jax.lax.stop_gradient(ref).astype(new.dtype) - new
        used = weights > 0
        log_terms = jnp.where(used, _log_k3(d) + jnp.log(jnp.where(used, weights, 1.0)), -jnp.inf)
        log_kl = jax.lax.stop_gradient(jax.nn.logsumexp(log_terms))
        kl = jnp.exp(log_kl)
        if not _kl_is_off(kl_coef):
            loss = loss + kl_coef * mean(_k3(d))
        inputs = (new, old, adv, ref)
    outside = (ratio < 1.0 - clip_epsilon) | (ratio > 1.0 + clip_epsilon)
    nonfinite = sum(jnp.sum(~jnp.isfinite(v)) for v in inputs).astype(jnp.int32)
    info = LossInfo(
        surrogate=surrogate,
        kl=kl,
        log_kl=log_kl,
        clip_fraction=mean(outside.astype(new.dtype)),
        ratio_mean=mean(ratio),
        nonfinite_count=nonfinite,
    )
    return loss, info


# --------------------------------------------------------------------------------------------
# The GRPO update.


class GRPOSkips(NamedTuple):
    """Why :func:`grpo` skipped updates: one entry per cause (a step may have several).

    In :class:`GRPOState` each entry is an int32 count of steps; in :class:`GRPOInfo` a bool for
    the step just taken.

    Attributes:
      rewards: a reward was NaN or infinite.
      advantages: an advantage was NaN or infinite (with finite rewards: a custom
        ``advantage`` callable's output).
      log_probs: a log-probability under the sampling or the reference policy was not finite
        (for example a prompt index out of a table's range under ``jit``).
      kl: the KL estimate to the reference policy exceeded the dtype's range (its log,
        ``GRPOInfo.log_kl``, stays finite); only with a nonzero ``kl_coef``.
      update: the loss, a gradient or the optimizer's update was not finite otherwise.
      prompts: a prompt index was outside ``[0, num_prompts)`` (with ``num_prompts`` given).

    Examples:
      >>> GRPOSkips(*[0] * 6)._fields
      ('rewards', 'advantages', 'log_probs', 'kl', 'update', 'prompts')
    """

    rewards: Any
    advantages: Any
    log_probs: Any
    kl: Any
    update: Any
    prompts: Any


class GRPOState(NamedTuple):
    """State of :func:`grpo`.

    Attributes:
      params: the policy's parameters.
      opt_state: the optax optimizer's state.
      reference_params: the reference policy of the KL term (the initial parameters), or
        ``None`` when ``kl_coef`` is a concrete 0 (no reference is kept or evaluated).
      count: int32 number of steps taken.
      skipped_count: int32 number of steps whose update was skipped (nothing is silently
        absorbed: the parameters and optimizer state are left as they were).
      skips: a :class:`GRPOSkips` of int32 counts, why those steps were skipped.

    Examples:
      >>> from jaxlab.rl import TabularPolicy
      >>> policy = TabularPolicy(1, 2)
      >>> nan_reward = lambda key, tokens, prompts: jnp.full(tokens.shape[:2], jnp.nan)
      >>> init, step = grpo(policy.sample, policy.log_prob, nan_reward, optax.sgd(1.0),
      ...                   group_size=2)
      >>> state, info = step(jax.random.key(0), init(policy.init()), jnp.zeros(1, jnp.int32))
      >>> int(state.skipped_count), int(state.skips.rewards), bool(info.skipped)
      (1, 1, True)
    """

    params: Any
    opt_state: Any
    reference_params: Any
    count: jax.Array
    skipped_count: jax.Array
    skips: GRPOSkips


class GRPOInfo(NamedTuple):
    """Diagnostics of one :func:`grpo` step.

    Attributes:
      rewards: the reward function's output ``[B, G]`` (as returned).
      advantages: ``[B, G]``.
      tokens: the sampled responses ``[B, G, ...]``.
      loss: the loss at the last epoch.
      kl: its KL estimate to the reference policy (0 with the KL term off).
      log_kl: the estimate's logarithm, finite for finite log-probs (``-inf`` with it off).
      clip_fraction: its fraction of clipped tokens.
      skipped: whether this step's update was skipped.
      skips: a :class:`GRPOSkips` of bools, why.
      invalid_prompts: int32 number of prompt indices outside ``[0, num_prompts)`` (0 without
        ``num_prompts``).

    Examples:
      >>> from jaxlab.rl import TabularPolicy
      >>> policy = TabularPolicy(3, 4)
      >>> reward = lambda key, tokens, prompts: tokens[..., 0].astype(jnp.float32)
      >>> init, step = grpo(policy.sample, policy.log_prob, reward, optax.sgd(1.0), group_size=5)
      >>> _, info = step(jax.random.key(0), init(policy.init()), jnp.arange(3))
      >>> info.rewards.shape, info.advantages.shape, info.tokens.shape
      ((3, 5), (3, 5), (3, 5, 1))
    """

    rewards: jax.Array
    advantages: jax.Array
    tokens: Any
    loss: jax.Array
    kl: jax.Array
    log_kl: jax.Array
    clip_fraction: jax.Array
    skipped: jax.Array
    skips: GRPOSkips
    invalid_prompts: jax.Array


# The one optimizer type of jaxlab.rl (issue 43): ``grpo`` returns the black-box optimisers' type.
PolicyOptimizer = OptimizationAlgorithm


def grpo(
    sample_fn: Callable,
    log_prob_fn: Callable,
    reward_fn: Callable,
    optimizer: optax.GradientTransformation,
    *,
    group_size: int = 8,
    advantage: str | Callable = "zscore",
    clip_epsilon: ArrayLike = 0.2,
    kl_coef: ArrayLike = 0.0,
    epsilon: ArrayLike = 1e-6,
    num_epochs: int = 1,
    aggregation: str = "token",
    order_fn: Callable | None = None,
    training_order_fn: Callable | None = None,
    num_prompts: int | None = None,
) -> PolicyOptimizer:
    """GRPO over any discrete sequence policy, reward function and generation order.

    One ``step(rng_key, state, prompts)``: tile each of the ``B`` prompts ``G`` times, draw
    generation orders ``σ = order_fn(key, B G)`` (``None``: left to right), sample
    ``o = sample_fn(params, key, prompts, σ)``, score the groups
    ``r = reward_fn(key, o[B, G, ...], prompts) -> [B, G]``, compute group advantages ``Â``
    (:func:`group_advantages`, or ``advantage(r)`` for a callable, e.g. UCPO's), fix
    ``log π_old`` under the training orders ``σ′`` (``training_order_fn``; ``None``: σ′ = σ),
    then take ``num_epochs`` optimizer steps on :func:`grpo_policy_loss` (ratios to ``π_old``,
    KL to the initial policy, ``aggregation`` over tokens or sequences). All of it is one
    traceable function: ``jax.jit(step)``, and vmap over seeds.

    With ``kl_coef`` a concrete 0 (the default) no reference log-probabilities are computed and
    no reference parameters are stored. A step whose rewards, advantages, log-probabilities,
    KL estimate, loss, gradients or prompt indices are invalid is skipped as a whole (the
    parameters and optimizer state are kept) and counted, by cause, in ``state.skipped_count``
    and ``state.skips`` (``info.skipped`` and ``info.skips`` for the step).

    Args:
      sample_fn: ``(params, rng_key, prompts[N], orders[N, L] | None) -> tokens [N, ...]``.
      log_prob_fn: ``(params, tokens, prompts, orders) -> log-probs [N]`` or ``[N, T]``.
      reward_fn: ``(rng_key, tokens [B, G, ...], prompts [B]) -> rewards [B, G]`` (group-aware:
        a reward may compare group members).
      optimizer: an optax transformation (learning rate included).
      group_size: ``G >= 2``.
      advantage: ``"zscore"``, ``"rank"``, ``"center"`` or a callable ``rewards -> [B, G]``.
      clip_epsilon, kl_coef, epsilon: ``ε_c``, ``β_KL``, the std floor (traceable; finite and
        ``>= 0``).
      num_epochs: optimizer steps per sampled batch (1: ratio 1, plain policy gradient).
      aggregation: ``"token"`` (default) or ``"sequence"``, see :func:`grpo_policy_loss`.
      order_fn: ``(rng_key, N) -> orders [N, L]`` (e.g. ``partial(random_orders, length=L)``).
      training_order_fn: the same for the training orders σ′.
      num_prompts: when given, ``prompts`` must be an integer array of indices in
        ``[0, num_prompts)``: concrete ones are checked (``ValueError``), traced ones counted
        in ``info.invalid_prompts`` (that step is skipped).

    Returns:
      An :class:`OptimizationAlgorithm` ``(init, step)``: ``init(params) -> GRPOState``,
      ``step(rng_key, state, prompts) -> (GRPOState, GRPOInfo)``.

    Examples:
      >>> from flax import nnx
      >>> from jaxlab.rl import AutoregressivePolicy, split_policy
      >>> policy = AutoregressivePolicy(2, 3, hidden=(8,), rngs=nnx.Rngs(0))
      >>> params, sample_fn, log_prob_fn = split_policy(policy)
      >>> reward_fn = lambda key, tokens, prompts: tokens.sum(-1).astype(jnp.float32)
      >>> init, step = grpo(sample_fn, log_prob_fn, reward_fn, optax.adam(0.05), group_size=8)
      >>> state = init(params)
      >>> run = jax.jit(step)
      >>> for k in jax.random.split(jax.random.key(0), 60):
      ...     state, info = run(k, state, jnp.zeros(4, jnp.int32))
      >>> bool(info.rewards.mean() > 2.5), int(state.skipped_count)  # all ones: reward 3
      (True, 0)

    References:
      Z. Shao et al., DeepSeekMath (GRPO), arXiv 2402.03300.
    """
    named = dict(sample_fn=sample_fn, log_prob_fn=log_prob_fn, reward_fn=reward_fn)
    for name, fn in named.items():
        check_callable(fn, name)
    if not hasattr(optimizer, "init") or not hasattr(optimizer, "update"):
        raise TypeError(f"optimizer must be an optax GradientTransformation, got {optimizer!r}")
    group_size = check_int(group_size, "group_size", minimum=2)
    num_epochs = check_positive_int(num_epochs, "num_epochs")
    if not callable(advantage):  # a callable rewards -> advantages is the other option
        check_choice(advantage, "advantage (a callable, or a name)", _ADVANTAGES)
    check_nonnegative(clip_epsilon, "clip_epsilon")
    check_nonnegative(kl_coef, "kl_coef")
    check_nonnegative(epsilon, "epsilon")
    _check_aggregation(aggregation)
    if num_prompts is not None:
        num_prompts = check_positive_int(num_prompts, "num_prompts")
    for fn, name in ((order_fn, "order_fn"), (training_order_fn, "training_order_fn")):
        check_callable(fn, name, allow_none=True)
    advantage_fn = (
        advantage
        if callable(advantage)
        else functools.partial(group_advantages, kind=advantage, epsilon=epsilon)
    )
    use_kl = not _kl_is_off(kl_coef)

    def init(params) -> GRPOState:
        zero = jnp.zeros([], jnp.int32)
        reference = params if use_kl else None
        return GRPOState(
            params, optimizer.init(params), reference, zero, zero, GRPOSkips(*[zero] * 6)
        )

    def invalid_prompt_count(prompts) -> jax.Array:
        if num_prompts is None:
            return jnp.zeros([], jnp.int32)
        p = check_array(prompts, "prompts", kind="integer")
        check_indices(p, "prompts", num_prompts, "num_prompts")
        return jnp.sum((p < 0) | (p >= num_prompts)).astype(jnp.int32)

    def step(rng_key, state: GRPOState, prompts):
        check_key(rng_key)
        leaves = jax.tree.leaves(prompts)
        if not leaves:
            raise ValueError("prompts must hold at least one array with a leading batch axis")
        invalid_prompts = invalid_prompt_count(prompts)
        b = leaves[0].shape[0]
        tiled = jax.tree.map(lambda v: jnp.repeat(v, group_size, axis=0), prompts)
        order_key, sample_key, reward_key, train_key = jax.random.split(rng_key, 4)
        orders = None if order_fn is None else order_fn(order_key, b * group_size)
        tokens = sample_fn(state.params, sample_key, tiled, orders)
        grouped = jax.tree.map(lambda v: v.reshape(b, group_size, *v.shape[1:]), tokens)
        rewards = reward_fn(reward_key, grouped, prompts)
        if jnp.shape(rewards) != (b, group_size):
            raise ValueError(
                f"reward_fn must return rewards of shape (B, G) = {(b, group_size)}, got "
                f"{jnp.shape(rewards)}"
            )
        adv = jax.lax.stop_gradient(advantage_fn(rewards)).reshape(b * group_size)
        train_orders = (
            orders if training_order_fn is None else training_order_fn(train_key, b * group_size)
        )
        logp_old = jax.lax.stop_gradient(log_prob_fn(state.params, tokens, tiled, train_orders))
        logp_ref = (
            jax.lax.stop_gradient(log_prob_fn(state.reference_params, tokens, tiled, train_orders))
            if use_kl
            else None
        )

        def loss_fn(params):
            logp = log_prob_fn(params, tokens, tiled, train_orders)
            return grpo_policy_loss(
                logp,
                logp_old,
                adv,
                clip_epsilon=clip_epsilon,
                kl_coef=kl_coef,
                logp_ref=logp_ref,
                aggregation=aggregation,
            )

        def epoch(carry, _):
            params, opt_state, kl_bad, update_bad = carry
            (loss, info), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            finite = tree_all_finite(grads) & tree_all_finite(updates) & jnp.isfinite(loss)
            kl_bad = kl_bad | ~jnp.isfinite(info.kl)
            update_bad = update_bad | ~finite
            params = optax.apply_updates(params, updates)
            return (params, opt_state, kl_bad, update_bad), (loss, info)

        false = jnp.zeros([], bool)
        (params, opt_state, kl_bad, update_bad), (losses, infos) = jax.lax.scan(
            epoch, (state.params, state.opt_state, false, false), None, num_epochs
        )
        log_probs_bad = ~tree_all_finite(logp_old) | ~tree_all_finite(logp_ref)
        kl_bad = kl_bad & ~log_probs_bad
        update_bad = update_bad & ~(kl_bad | log_probs_bad)
        skips = GRPOSkips(
            rewards=~tree_all_finite(rewards),
            advantages=~tree_all_finite(adv),
            log_probs=log_probs_bad,
            kl=kl_bad,
            update=update_bad,
            prompts=invalid_prompts > 0,
        )
        skipped = functools.reduce(jnp.logical_or, skips)
        # A skipped step keeps the parameters and the optimizer state as they were.
        params, opt_state = optax.tree.where(
            skipped, (state.params, state.opt_state), (params, opt_state)
        )
        counts = jax.tree.map(lambda c, s: c + s.astype(jnp.int32), state.skips, skips)
        new_state = GRPOState(
            params,
            opt_state,
            state.reference_params,
            state.count + 1,
            state.skipped_count + skipped.astype(jnp.int32),
            counts,
        )
        info = GRPOInfo(
            rewards=rewards,
            advantages=adv.reshape(b, group_size),
            tokens=grouped,
            loss=losses[-1],
            kl=infos.kl[-1],
            log_kl=infos.log_kl[-1],
            clip_fraction=infos.clip_fraction[-1],
            skipped=skipped,
            skips=skips,
            invalid_prompts=invalid_prompts,
        )
        return new_state, info

    return OptimizationAlgorithm(init, step)
