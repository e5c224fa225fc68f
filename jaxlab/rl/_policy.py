"""A small any-order autoregressive policy in flax.nnx, and generation orders.

:class:`AutoregressivePolicy` samples a discrete sequence under any generation order
(:func:`sample_sequences`) and scores it under any order (:func:`sequence_log_probs`);
:func:`split_policy` gives the functional ``(params, sample_fn, log_prob_fn)`` that
:func:`jaxlab.rl.grpo` takes. Split from ``_grpo.py`` only to keep files short.

References:
  B. Uria, I. Murray, H. Larochelle, *A Deep and Tractable Density Estimator*, ICML 2014;
  O. Goudet et al., *Black-Box Combinatorial Optimization with Order-Invariant Reinforcement
  Learning*, ICML 2026, arXiv 2510.01824.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.typing import ArrayLike

from jaxlab._src.validation import (
    check_array,
    check_indices,
    check_int,
    check_key,
    check_positive_int,
    is_concrete,
)

__all__ = [
    "AutoregressivePolicy",
    "identity_orders",
    "order_masks",
    "random_orders",
    "sample_sequences",
    "sequence_log_probs",
    "split_policy",
]


# --------------------------------------------------------------------------------------------
# Generation orders.


def identity_orders(num: int, length: int) -> jax.Array:
    """``num`` copies of the left-to-right order ``(0, 1, ..., length - 1)``, int32 ``[num, L]``.

    Examples:
      >>> identity_orders(2, 3).tolist()
      [[0, 1, 2], [0, 1, 2]]
    """
    num = check_positive_int(num, "num")
    length = check_positive_int(length, "length")
    return jnp.broadcast_to(jnp.arange(length, dtype=jnp.int32), (num, length))


def random_orders(rng_key: jax.Array, num: int, length: int) -> jax.Array:
    """``num`` independent uniformly random generation orders (permutations), int32 ``[num, L]``.

    ``orders[n, k]`` is the position generated at step ``k`` of sample ``n``.

    Examples:
      >>> orders = random_orders(jax.random.key(0), 4, 5)
      >>> sorted(orders[0].tolist())
      [0, 1, 2, 3, 4]
    """
    check_key(rng_key)
    num = check_positive_int(num, "num")
    length = check_positive_int(length, "length")
    keys = jax.random.split(rng_key, num)
    return jax.vmap(lambda k: jax.random.permutation(k, length))(keys).astype(jnp.int32)


def _ranks(orders: jax.Array) -> jax.Array:
    # rank[n, position] = the step at which that position is generated (inverse permutation).
    steps = jnp.broadcast_to(jnp.arange(orders.shape[-1], dtype=jnp.int32), orders.shape)
    return jnp.zeros_like(orders).at[jnp.arange(orders.shape[0])[:, None], orders].set(steps)


def _check_permutations(orders: jax.Array, length: int, length_name: str) -> None:
    """A concrete ``orders [N, L]`` holds one permutation of ``range(L)`` per row."""
    if is_concrete(orders) and not np.all(np.sort(np.asarray(orders), -1) == np.arange(length)):
        raise ValueError(f"orders must hold one permutation of range({length_name}) per row")


def order_masks(orders: ArrayLike) -> jax.Array:
    """The order masks ``M[g, i, j] = 1[pos_σg(j) < pos_σg(i)]``, float32 ``[N, n, n]``.

    Row ``i`` of sample ``g`` marks the positions generated before ``i`` under ``σ_g``: the
    inputs of position ``i``'s conditional. ``M[g, i, i] = 0``: a position never sees itself.

    Every row of ``orders`` must be a permutation of ``range(n)``: a concrete row that is not
    raises a ``ValueError``; a traced one gets a NaN mask, so the log-probabilities built on it
    are NaN and :func:`jaxlab.rl.grpo` skips and counts that step (``skips.log_probs``).

    Args:
      orders: int ``[N, n]``, ``orders[g, k]`` = the position generated at step ``k``.

    Examples:
      >>> order_masks(jnp.array([[2, 0, 1]]))[0].tolist()  # x_2 first, then x_0, then x_1
      [[0.0, 0.0, 1.0], [1.0, 0.0, 1.0], [0.0, 0.0, 0.0]]
      >>> order_masks(jnp.array([[0, 0, 1]]))
      Traceback (most recent call last):
      ...
      ValueError: orders must hold one permutation of range(n) per row
    """
    o = check_array(orders, "orders", kind="integer", ndim=2).astype(jnp.int32)
    _check_permutations(o, o.shape[-1], "n")
    ranks = _ranks(o)
    masks = (ranks[:, None, :] < ranks[:, :, None]).astype(jnp.float32)
    if is_concrete(o):
        return masks
    valid = jnp.all(jnp.sort(o, axis=-1) == jnp.arange(o.shape[-1], dtype=o.dtype)[None], axis=-1)
    return jnp.where(valid[:, None, None], masks, jnp.nan)


# --------------------------------------------------------------------------------------------
# A small any-order autoregressive policy.


class AutoregressivePolicy(nnx.Module):
    """An any-order autoregressive policy over ``length`` tokens from a vocabulary of ``V``.

    One MLP maps the revealed part of a sequence and a prompt embedding to logits for every
    position: input ``[onehot(x) ⊙ m, m, e(q)]`` (``m`` the 0/1 mask of revealed positions),
    output ``[L, V]``. Under a generation order σ,
    ``π(x | q, σ) = Π_k softmax(ℓ_{σ_k}(x ⊙ m_k, m_k, q))[x_{σ_k}]`` with ``m_k`` the indicator
    of ``{σ_1, ..., σ_{k-1}}``: a position never sees itself, so every order gives a proper
    distribution, and the left-to-right order gives an ordinary autoregressive model. Sample with
    :func:`sample_sequences`, score with :func:`sequence_log_probs`, train with :func:`grpo`
    through :func:`split_policy`.

    Args:
      vocab_size: ``V >= 2``.
      length: ``L >= 1`` tokens per sequence.
      num_prompts: prompts are integers in ``[0, num_prompts)`` (1: unconditional).
      hidden: widths of the MLP's hidden layers (GELU).
      prompt_features: size of the prompt embedding.
      rngs: ``nnx.Rngs`` for the initialisation (the last layer starts at 0: a uniform policy).

    Examples:
      >>> policy = AutoregressivePolicy(3, 4, num_prompts=2, hidden=(8,), rngs=nnx.Rngs(0))
      >>> tokens = jnp.zeros((1, 4), jnp.int32)
      >>> policy(tokens, jnp.zeros((1, 4)), jnp.array([1])).shape
      (1, 4, 3)

    References:
      B. Uria, I. Murray, H. Larochelle, *A Deep and Tractable Density Estimator* (order-agnostic
      training), ICML 2014; O. Goudet et al., *Black-Box Combinatorial Optimization with
      Order-Invariant Reinforcement Learning*, ICML 2026, arXiv 2510.01824.
    """

    def __init__(
        self,
        vocab_size: int,
        length: int,
        *,
        num_prompts: int = 1,
        hidden: Sequence[int] = (64,),
        prompt_features: int = 8,
        rngs: nnx.Rngs,
    ):
        self.vocab_size = check_int(vocab_size, "vocab_size", minimum=2)
        self.length = check_positive_int(length, "length")
        self.num_prompts = check_positive_int(num_prompts, "num_prompts")
        prompt_features = check_positive_int(prompt_features, "prompt_features")
        if isinstance(hidden, int) or not isinstance(hidden, Sequence):
            raise TypeError(f"hidden must be a sequence of ints (widths), got {hidden!r}")
        widths = [check_positive_int(h, f"hidden[{i}]") for i, h in enumerate(hidden)]
        self.embedding = nnx.Embed(self.num_prompts, prompt_features, rngs=rngs)
        sizes = [self.length * (self.vocab_size + 1) + prompt_features, *widths]
        self.layers = nnx.List(
            [nnx.Linear(a, b, rngs=rngs) for a, b in zip(sizes[:-1], sizes[1:], strict=True)]
        )
        self.head = nnx.Linear(
            sizes[-1], self.length * self.vocab_size, kernel_init=nnx.initializers.zeros, rngs=rngs
        )

    def __call__(self, tokens: jax.Array, revealed: jax.Array, prompts: jax.Array) -> jax.Array:
        """Logits ``[N, L, V]`` for every position from tokens ``[N, L]``, 0/1 ``revealed``."""
        onehot = jax.nn.one_hot(tokens, self.vocab_size) * revealed[..., None]
        h = jnp.concatenate(
            [onehot.reshape(tokens.shape[0], -1), revealed, self.embedding(prompts)], axis=-1
        )
        for layer in self.layers:
            h = jax.nn.gelu(layer(h))
        return self.head(h).reshape(tokens.shape[0], self.length, self.vocab_size)


def _check_policy_call(policy, prompts, orders, tokens=None):
    if not isinstance(policy, AutoregressivePolicy):
        raise TypeError(f"policy must be an AutoregressivePolicy, got {type(policy).__name__}")
    p = check_array(prompts, "prompts", kind="integer", ndim=1)
    check_indices(p, "prompts", policy.num_prompts, "num_prompts")
    shape = (p.shape[0], policy.length)
    o = jnp.broadcast_to(jnp.arange(policy.length), shape) if orders is None else orders
    o = check_array(o, "orders", kind="integer", ndim=2).astype(jnp.int32)
    if o.shape != shape:
        raise ValueError(f"orders must have shape (len(prompts), length) = {shape}, got {o.shape}")
    _check_permutations(o, policy.length, "length")
    if tokens is None:
        return p, o
    t = check_array(tokens, "tokens", kind="integer", ndim=2)
    if t.shape != shape:
        raise ValueError(f"tokens must have shape (len(prompts), length) = {shape}, got {t.shape}")
    check_indices(t, "tokens", policy.vocab_size, "vocab_size")
    return p, o, t


def sample_sequences(
    policy: AutoregressivePolicy,
    rng_key: jax.Array,
    prompts: ArrayLike,
    orders: ArrayLike | None = None,
) -> jax.Array:
    """Ancestral sampling of one sequence per prompt, position ``orders[n, k]`` at step ``k``.

    ``L`` steps in a ``lax.scan``, vectorised over the ``N`` prompts.

    Args:
      policy: an :class:`AutoregressivePolicy`.
      rng_key: a JAX PRNG key.
      prompts: int ``[N]``.
      orders: int ``[N, L]`` permutations (:func:`random_orders`); ``None``: left to right.

    Returns:
      int32 tokens ``[N, L]``.

    Examples:
      >>> policy = AutoregressivePolicy(3, 4, hidden=(8,), rngs=nnx.Rngs(0))
      >>> sample_sequences(policy, jax.random.key(0), jnp.zeros(2, jnp.int32)).shape
      (2, 4)
    """
    check_key(rng_key)
    p, o = _check_policy_call(policy, prompts, orders)
    ranks = _ranks(o)
    n, length = o.shape
    rows = jnp.arange(n)

    def body(tokens, xs):
        k, key = xs
        logits = policy(tokens, (ranks < k).astype(jnp.float32), p)[rows, o[:, k]]
        new = jax.random.categorical(key, logits).astype(jnp.int32)
        return tokens.at[rows, o[:, k]].set(new), None

    keys = jax.random.split(rng_key, length)
    tokens, _ = jax.lax.scan(body, jnp.zeros((n, length), jnp.int32), (jnp.arange(length), keys))
    return tokens


def sequence_log_probs(
    policy: AutoregressivePolicy,
    tokens: ArrayLike,
    prompts: ArrayLike,
    orders: ArrayLike | None = None,
) -> jax.Array:
    """Per-position log-probs ``log π(x_i | q, x_{revealed before i under σ})``, ``[N, L]``.

    All ``L`` conditionals of a sample are computed in one batched call (``N L`` masked inputs);
    their sum over positions is ``log π(x | q, σ)``.

    Examples:
      >>> policy = AutoregressivePolicy(3, 4, hidden=(8,), rngs=nnx.Rngs(0))
      >>> lp = sequence_log_probs(policy, jnp.zeros((1, 4), jnp.int32), jnp.zeros(1, jnp.int32))
      >>> round(float(lp.sum()), 4) == round(4 * float(jnp.log(1 / 3)), 4)  # uniform at init
      True
    """
    p, o, t = _check_policy_call(policy, prompts, orders, tokens)
    n, length = t.shape
    revealed = order_masks(o)  # row (n, i): the tokens revealed before position i
    flat_tokens = jnp.repeat(t, length, axis=0)
    logits = policy(flat_tokens, revealed.reshape(n * length, length), jnp.repeat(p, length))
    logits = logits.reshape(n, length, length, -1)
    own = jnp.take_along_axis(
        logits[:, jnp.arange(length), jnp.arange(length)], t[..., None], axis=-1
    )[..., 0]
    return own - jax.nn.logsumexp(logits[:, jnp.arange(length), jnp.arange(length)], axis=-1)


@functools.lru_cache(maxsize=32)
def _policy_fns(graphdef):
    def sample_fn(params, rng_key, prompts, orders):
        return sample_sequences(nnx.merge(graphdef, params), rng_key, prompts, orders)

    def log_prob_fn(params, tokens, prompts, orders):
        return sequence_log_probs(nnx.merge(graphdef, params), tokens, prompts, orders)

    return sample_fn, log_prob_fn


def split_policy(policy: AutoregressivePolicy) -> tuple[Any, Callable, Callable]:
    """``(params, sample_fn, log_prob_fn)`` of an nnx policy (the form :func:`grpo` takes).

    ``sample_fn(params, rng_key, prompts, orders) -> tokens`` and
    ``log_prob_fn(params, tokens, prompts, orders) -> [N, L]`` merge the policy's graph with
    ``params`` (its ``nnx.State``); the same functions are returned for policies with the same
    graph, so compiled programs are shared.

    Examples:
      >>> params, sample_fn, log_prob_fn = split_policy(
      ...     AutoregressivePolicy(3, 2, hidden=(8,), rngs=nnx.Rngs(0)))
      >>> x = sample_fn(params, jax.random.key(1), jnp.zeros(5, jnp.int32), None)
      >>> log_prob_fn(params, x, jnp.zeros(5, jnp.int32), None).shape
      (5, 2)
    """
    if not isinstance(policy, AutoregressivePolicy):
        raise TypeError(f"policy must be an AutoregressivePolicy, got {type(policy).__name__}")
    graphdef, params = nnx.split(policy)
    return (params, *_policy_fns(graphdef))
