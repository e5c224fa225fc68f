"""Toy policy-optimisation problems with known answers: tabular policies and synthetic tasks.

* :class:`TabularPolicy`: softmax logits per prompt (plus an optional shared bias), a policy over
  length-1 "sequences" in the functional form of :func:`jaxlab.rl.grpo`.
* TSRL (non-verifiable tasks with a hidden quality): :func:`tournament_bandit` (candidate
  responses of latent quality ``Q ~ N(0, 1)`` per prompt, the note's calibrated toy),
  :func:`hidden_quality_sequences` (token sequences scored by a hidden function, for the
  sequence policy), :func:`normalized_quality`, :func:`hidden_quality_win_rate`.
* UCPO (answer or abstain): :func:`ternary_bandit` (prompts of knowability κ, key answers),
  :func:`ternary_labels` (right / wrong / uncertain per sampled action) and
  :func:`expected_answer_metrics` (exact expectations under a tabular policy).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from jaxlab._src.validation import (
    check_array,
    check_bool,
    check_distribution,
    check_indices,
    check_int,
    check_key,
    check_last_axis,
    check_positive_int,
    check_probability,
    check_real_array,
    is_concrete,
)
from jaxlab.rl._ucpo import INVALID, RIGHT, UNCERTAIN, WRONG, metrics_from_counts

__all__ = [
    "QUBO",
    "MaxCut",
    "NKLandscape",
    "SequenceQualityTask",
    "TabularPolicy",
    "TernaryBandit",
    "TournamentBandit",
    "binary_benchmark_suite",
    "deceptive_trap",
    "expected_answer_metrics",
    "hidden_quality_sequences",
    "hidden_quality_win_rate",
    "leading_ones",
    "nk_landscape",
    "normalized_quality",
    "onemax",
    "random_maxcut",
    "random_qubo",
    "ternary_bandit",
    "ternary_labels",
    "tournament_bandit",
]


@dataclasses.dataclass(frozen=True)
class TabularPolicy:
    """Softmax policy ``π(a | q) = softmax(θ_q + b)`` over ``num_actions`` actions per prompt.

    Responses are length-1 sequences (tokens ``[N, 1]``), so the policy plugs into
    :func:`jaxlab.rl.grpo` unchanged (generation orders are ignored: there is one position).
    ``params = {"logits": [P, A], "bias": [A]}``; with ``shared_bias=False`` the bias is left
    out of the logits (its gradient is 0, it never moves).

    Args:
      num_prompts: ``P``.
      num_actions: ``A >= 2``.
      shared_bias: add the shared bias vector ``b`` (cross-prompt spill-over, UCPO's toy).

    Examples:
      >>> policy = TabularPolicy(2, 3)
      >>> params = policy.init()
      >>> policy.probabilities(params).tolist()[0]  # uniform at init  # doctest: +ELLIPSIS
      [0.333..., 0.333..., 0.333...]
      >>> tokens = policy.sample(params, jax.random.key(0), jnp.array([0, 1, 1]), None)
      >>> tokens.shape, policy.log_prob(params, tokens, jnp.array([0, 1, 1]), None).shape
      ((3, 1), (3, 1))
    """

    num_prompts: int
    num_actions: int
    shared_bias: bool = False

    def __post_init__(self):
        check_positive_int(self.num_prompts, "num_prompts")
        check_int(self.num_actions, "num_actions", minimum=2)
        check_bool(self.shared_bias, "shared_bias")

    def init(self, logits: ArrayLike | None = None, bias: ArrayLike | None = None) -> dict:
        """Parameters: ``logits`` ``[P, A]`` (default 0: uniform) and ``bias`` ``[A]`` (0)."""
        shape = (self.num_prompts, self.num_actions)
        theta = (
            jnp.zeros(shape) if logits is None else check_array(logits, "logits", kind="floating")
        )
        if theta.shape != shape:
            raise ValueError(
                f"logits must have shape (num_prompts, num_actions) = {shape}, got {theta.shape}"
            )
        b = (
            jnp.zeros(self.num_actions)
            if bias is None
            else check_array(bias, "bias", kind="floating")
        )
        if b.shape != (self.num_actions,):
            raise ValueError(f"bias must have shape ({self.num_actions},), got {b.shape}")
        return {"logits": theta, "bias": b}

    def _logits(self, params, prompts):
        # Concrete prompt indices are checked; a traced one outside [0, P) reads NaN logits (no
        # clamping to the last row), so its log-probabilities are NaN and grpo skips and counts
        # that step.
        check_indices(prompts, "prompts", self.num_prompts, "num_prompts")
        logits = (
            params["logits"]
            .at[prompts]
            .get(mode="fill", fill_value=jnp.nan, wrap_negative_indices=False)
        )
        return logits + params["bias"][None, :] if self.shared_bias else logits

    def probabilities(self, params) -> jax.Array:
        """``π(· | q)`` for every prompt, ``[P, A]``."""
        return jax.nn.softmax(self._logits(params, jnp.arange(self.num_prompts)), axis=-1)

    def sample(self, params, rng_key, prompts, orders=None) -> jax.Array:
        """One action per prompt, int32 tokens ``[N, 1]`` (``orders`` ignored)."""
        check_key(rng_key)
        logits = self._logits(params, prompts)
        return jax.random.categorical(rng_key, logits).astype(jnp.int32)[:, None]

    def log_prob(self, params, tokens, prompts, orders=None) -> jax.Array:
        """``log π(a | q)`` per token, ``[N, 1]``."""
        logp = jax.nn.log_softmax(self._logits(params, prompts), axis=-1)
        return jnp.take_along_axis(logp, tokens[:, :1], axis=-1)


# --------------------------------------------------------------------------------------------
# TSRL tasks.


class TournamentBandit(NamedTuple):
    """The note's TSRL toy: ``P`` prompts with ``M`` candidate responses of hidden quality.

    Attributes:
      quality: ``Q[q, j] ~ N(0, 1)``, ``[P, M]``.
      rubric_bias: ``b_q ~ N(0, 1)``, a per-prompt offset of the pointwise rubric judge.

    Examples:
      >>> bandit = TournamentBandit(jnp.array([[0.0, 2.0]]), jnp.zeros(1))
      >>> float(bandit.quality_fn(0, jnp.array([1])))
      2.0
    """

    quality: jax.Array
    rubric_bias: jax.Array

    def quality_fn(self, context, response):
        """``Q[context, response[0]]`` (responses are length-1 token arrays)."""
        return self.quality[context, response[..., 0]]


def tournament_bandit(rng_key: jax.Array, num_prompts: int = 32, num_candidates: int = 16):
    """The note's calibrated TSRL toy (``P = 32`` prompts, ``M = 16`` candidates each).

    Examples:
      >>> bandit = tournament_bandit(jax.random.key(0), 4, 6)
      >>> bandit.quality.shape, bandit.rubric_bias.shape
      ((4, 6), (4,))
    """
    check_key(rng_key)
    p = check_positive_int(num_prompts, "num_prompts")
    m = check_int(num_candidates, "num_candidates", minimum=2)
    k1, k2 = jax.random.split(rng_key)
    return TournamentBandit(jax.random.normal(k1, (p, m)), jax.random.normal(k2, (p,)))


class SequenceQualityTask(NamedTuple):
    """Token sequences whose quality is a hidden function (TSRL with a sequence policy).

    ``Q(q, x) = (Σ_t W[q, t, x_t] + Σ_t U[x_t, x_{t+1}]) / sqrt(2 L)``: a prompt-specific
    per-position score plus a shared pairwise (bigram) term, so the best sequence is not the
    best token per position. ``W, U ~ N(0, 1)``.

    Attributes:
      position_scores: ``W`` ``[P, L, V]``.
      pair_scores: ``U`` ``[V, V]``.
      rubric_bias: per-prompt offset of the rubric judge ``[P]``.

    Examples:
      >>> task = SequenceQualityTask(jnp.ones((1, 2, 2)), jnp.zeros((2, 2)), jnp.zeros(1))
      >>> float(task.quality_fn(0, jnp.array([0, 1])))  # (1 + 1 + 0)/sqrt(4)
      1.0
    """

    position_scores: jax.Array
    pair_scores: jax.Array
    rubric_bias: jax.Array

    def quality_fn(self, context, tokens):
        """``Q(context, tokens)`` for tokens ``[..., L]``."""
        w = self.position_scores[context]
        length, vocab = w.shape[-2:]
        onehot = jax.nn.one_hot(tokens, vocab, dtype=w.dtype)
        w = w.reshape((1,) * (onehot.ndim - w.ndim) + w.shape)  # explicit rank promotion
        per_pos = jnp.sum(onehot * w, axis=(-1, -2))
        pairs = self.pair_scores[tokens[..., :-1], tokens[..., 1:]].sum(-1)
        return (per_pos + pairs) / jnp.sqrt(2.0 * length)

    def evaluate(self, samples):
        """Normalised quality and win rate over the uniform policy of samples ``[P, S, L]``.

        Exact over the ``V^L`` sequences (enumerated; keep ``V^L`` small): per prompt,
        ``(mean_s Q(x_s) - mean Q)/(max Q - mean Q)`` and ``mean_s F(Q(x_s))`` with ``F`` the
        fraction of all sequences of lower quality (ties ½); both averaged over prompts.

        Examples:
          >>> task = hidden_quality_sequences(jax.random.key(0), 1, 2, 2)
          >>> best = jnp.array([[[0, 0], [0, 1], [1, 0], [1, 1]]])  # all 4 sequences once
          >>> [round(float(v), 4) for v in task.evaluate(best)]
          [0.0, 0.5]
        """
        p, length, v = self.position_scores.shape
        grid = jnp.stack(jnp.meshgrid(*[jnp.arange(v)] * length, indexing="ij"), -1)
        grid = grid.reshape(-1, length)
        q_all = jax.vmap(lambda q: self.quality_fn(q, grid))(jnp.arange(p))
        q_samples = jax.vmap(self.quality_fn)(jnp.arange(p), samples)
        mean, best = q_all.mean(-1), q_all.max(-1)
        quality = jnp.mean((q_samples.mean(-1) - mean) / (best - mean))
        ranked = jnp.sort(q_all, axis=-1)
        search = jax.vmap(jnp.searchsorted, in_axes=(0, 0, None))
        below, upto = search(ranked, q_samples, "left"), search(ranked, q_samples, "right")
        return quality, jnp.mean((below + upto) / (2.0 * ranked.shape[-1]))


def hidden_quality_sequences(
    rng_key: jax.Array, num_prompts: int = 8, length: int = 6, vocab_size: int = 6
) -> SequenceQualityTask:
    """A :class:`SequenceQualityTask` with random scores.

    Examples:
      >>> task = hidden_quality_sequences(jax.random.key(0), 2, 3, 4)
      >>> task.quality_fn(1, jnp.array([0, 3, 2])).shape
      ()
    """
    check_key(rng_key)
    p = check_positive_int(num_prompts, "num_prompts")
    length = check_int(length, "length", minimum=2)
    v = check_int(vocab_size, "vocab_size", minimum=2)
    k1, k2, k3 = jax.random.split(rng_key, 3)
    return SequenceQualityTask(
        jax.random.normal(k1, (p, length, v)),
        jax.random.normal(k2, (v, v)),
        jax.random.normal(k3, (p,)),
    )


def _check_probs(probs, quality):
    pi = check_array(probs, "probs", kind="floating", ndim=2)
    q = check_array(quality, "quality", kind="real", ndim=2)
    if pi.shape != q.shape:
        raise ValueError(f"probs must have quality's shape {q.shape}, got {pi.shape}")
    check_distribution(pi, "probs")
    return pi, q


def normalized_quality(probs: ArrayLike, quality: ArrayLike) -> jax.Array:
    """``mean_q (E_π Q_q - mean_j Q_q) / (max_j Q_q - mean_j Q_q)``: 0 uniform, 1 the best.

    Examples:
      >>> q = jnp.array([[0.0, 1.0, 2.0]])
      >>> float(normalized_quality(jnp.array([[0.0, 0.0, 1.0]]), q))
      1.0
      >>> float(normalized_quality(jnp.full((1, 3), 1 / 3), q))
      0.0
    """
    pi, q = _check_probs(probs, quality)
    mean = q.mean(-1)
    return jnp.mean(((pi * q).sum(-1) - mean) / (q.max(-1) - mean))


def hidden_quality_win_rate(probs: ArrayLike, base_probs: ArrayLike, quality: ArrayLike):
    """Exact win rate of ``π`` over ``π_base`` under the hidden quality, ties ½, mean over prompts.

    ``mean_q Σ_{j, j'} π(j|q) π_base(j'|q) (1[Q_j > Q_j'] + ½ 1[Q_j = Q_j'])``.

    Examples:
      >>> q = jnp.array([[0.0, 1.0]])
      >>> float(hidden_quality_win_rate(jnp.array([[0.0, 1.0]]), jnp.full((1, 2), 0.5), q))
      0.75
    """
    pi, q = _check_probs(probs, quality)
    base, _ = _check_probs(base_probs, quality)
    diff = q[:, :, None] - q[:, None, :]
    beats = (diff > 0) + 0.5 * (diff == 0)
    return jnp.mean(jnp.einsum("qj,qk,qjk->q", pi, base, beats))


# --------------------------------------------------------------------------------------------
# UCPO's answer-or-abstain task.


class TernaryBandit(NamedTuple):
    """Prompts with a key answer among ``K`` and a knowability κ; action ``K`` abstains.

    A rollout's correct answer is the key with probability κ, otherwise uniform over the ``K``
    answers, so answering the key is right with probability ``κ + (1 - κ)/K``.

    Attributes:
      key_answer: int32 ``[Q]``.
      knowability: κ per prompt ``[Q]``.
      num_answers: ``K``.

    Examples:
      >>> bandit = TernaryBandit(jnp.array([1]), jnp.array([0.5]), 4)
      >>> probs = jnp.array([[0.0, 1.0, 0.0, 0.0, 0.0]])  # always answers the key
      >>> expected_answer_metrics(bandit, probs)["accuracy"]  # 0.5 + 0.5/4
      0.625
    """

    key_answer: jax.Array
    knowability: jax.Array
    num_answers: int


def ternary_bandit(
    rng_key: jax.Array,
    num_prompts: int = 64,
    num_answers: int = 4,
    knowability: ArrayLike = (0.0, 1 / 3, 2 / 3, 1.0),
) -> TernaryBandit:
    """UCPO's toy: ``num_prompts`` split evenly over the ``knowability`` levels, random keys.

    Examples:
      >>> bandit = ternary_bandit(jax.random.key(0), 8, 4)
      >>> bandit.knowability.tolist()[:3], bandit.num_answers
      ([0.0, 0.0, 0.3333333432674408], 4)
    """
    check_key(rng_key)
    q = check_positive_int(num_prompts, "num_prompts")
    k = check_int(num_answers, "num_answers", minimum=2)
    levels = check_real_array(knowability, "knowability", minimum=0.0, maximum=1.0)
    if levels is None or levels.ndim != 1 or levels.size == 0 or q % levels.size:
        raise ValueError(
            f"knowability must be a non-empty 1-D list of levels dividing num_prompts={q}, got "
            f"{knowability!r}"
        )
    kappa = jnp.repeat(jnp.asarray(levels, jnp.float32), q // levels.size)
    keys = jax.random.randint(rng_key, (q,), 0, k).astype(jnp.int32)
    return TernaryBandit(keys, kappa, k)


def ternary_labels(
    rng_key: jax.Array, bandit: TernaryBandit, prompts: ArrayLike, actions: ArrayLike
) -> jax.Array:
    """Labels (0 right, 1 wrong, 2 uncertain) of sampled ``actions`` for ``prompts``.

    Each rollout draws its own correct answer (the key with probability κ, else uniform).
    Actions are answers ``0..K-1`` or ``K`` (abstain); prompts index the bandit's ``Q`` prompts.
    Concrete out-of-range values raise a ``ValueError`` naming the argument; a traced one is
    labelled :data:`INVALID` (-1), which :func:`jaxlab.rl.ternary_rewards` and
    :func:`jaxlab.rl.ucpo_advantages` turn into NaN, so :func:`jaxlab.rl.grpo` skips and counts
    that step (``skips.rewards`` or ``skips.advantages``).

    Examples:
      >>> bandit = TernaryBandit(jnp.array([2]), jnp.array([1.0]), 4)
      >>> ternary_labels(jax.random.key(0), bandit, jnp.zeros(3, jnp.int32),
      ...                jnp.array([2, 1, 4])).tolist()
      [0, 1, 2]
      >>> ternary_labels(jax.random.key(0), bandit, jnp.zeros(1, jnp.int32), jnp.array([5]))
      Traceback (most recent call last):
      ...
      ValueError: actions must lie in [0, num_answers + 1=5), got values in [5, 5]
    """
    check_key(rng_key)
    p = check_array(prompts, "prompts", kind="integer")
    a = check_array(actions, "actions", kind="integer")
    if p.shape != a.shape:
        raise ValueError(f"actions must have prompts' shape {p.shape}, got {a.shape}")
    num_prompts = bandit.key_answer.shape[0]
    check_indices(p, "prompts", num_prompts, "num_prompts")
    check_indices(a, "actions", bandit.num_answers + 1, "num_answers + 1")
    k1, k2 = jax.random.split(rng_key)
    knows = jax.random.uniform(k1, a.shape) < bandit.knowability[p]
    guess = jax.random.randint(k2, a.shape, 0, bandit.num_answers)
    correct = jnp.where(knows, bandit.key_answer[p], guess)
    labels = jnp.where(a == correct, RIGHT, WRONG)
    labels = jnp.where(a == bandit.num_answers, UNCERTAIN, labels)
    valid = (a >= 0) & (a <= bandit.num_answers) & (p >= 0) & (p < num_prompts)
    return jnp.where(valid, labels, INVALID).astype(jnp.int32)


def expected_answer_metrics(bandit: TernaryBandit, probs: ArrayLike) -> dict[str, Any]:
    """Exact accuracy, PAQ, F1, abstention (overall and per κ) of a tabular policy ``[Q, K+1]``.

    ``P(R | q) = Σ_a π(a|q)(κ_q 1[a = key_q] + (1 - κ_q)/K)``, ``P(U | q) = π(K | q)``; the
    metrics of :func:`jaxlab.rl.answer_metrics` from the expected counts.

    Examples:
      >>> bandit = TernaryBandit(jnp.array([0, 0]), jnp.array([0.0, 1.0]), 2)
      >>> m = expected_answer_metrics(bandit, jnp.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]))
      >>> m["accuracy"], m["paq"], m["abstain_by_knowability"]
      (0.5, 1.0, {0.0: 1.0, 1.0: 0.0})
    """
    pi = check_array(probs, "probs", kind="floating", ndim=2)
    check_distribution(pi, "probs")
    k = bandit.num_answers
    if pi.shape != (bandit.key_answer.shape[0], k + 1):
        raise ValueError(
            f"probs must have shape (num_prompts, num_answers + 1) = "
            f"{(bandit.key_answer.shape[0], k + 1)}, got {pi.shape}"
        )
    metrics, right, unsure = _expected_outcomes(bandit.key_answer, bandit.knowability, pi, k)
    out = {name: float(v) for name, v in metrics.items()}
    # Grouped on the host: one compiled program per shape, not one eager op per level.
    kappa, right, unsure = (np.asarray(v) for v in (bandit.knowability, right, unsure))
    levels = sorted({round(float(v), 6) for v in kappa.tolist()})
    out["abstain_by_knowability"] = {
        lv: float(np.mean(unsure[np.abs(kappa - lv) < 1e-6], dtype=np.float32)) for lv in levels
    }
    out["accuracy_by_knowability"] = {
        lv: float(np.mean(right[np.abs(kappa - lv) < 1e-6], dtype=np.float32)) for lv in levels
    }
    return out


@functools.partial(jax.jit, static_argnums=3)
def _expected_outcomes(key_answer, kappa, pi, k):
    """The metrics of the expected counts, and each prompt's P(R) and P(U)."""
    answer = pi[:, :k]
    key_prob = jnp.take_along_axis(answer, key_answer[:, None], axis=-1)[:, 0]
    right = kappa * key_prob + (1 - kappa) * answer.sum(-1) / k
    unsure = pi[:, k]
    wrong = 1.0 - right - unsure
    counts = jnp.stack([right.sum(), wrong.sum(), unsure.sum()])
    return metrics_from_counts(counts), right, unsure


# --------------------------------------------------------------------------------------------
# Black-box pseudo-Boolean benchmarks (maximised), for the order-invariant EDA and its baselines.
# Each takes x ``[..., n]`` with 0/1 entries (any real, integer or bool dtype) and returns a
# float32 value per point ``[...]``; NK, MaxCut and QUBO instances are NamedTuples (pytrees: pass
# them through jit and vmap) that are called like functions.


def _binary(x: Any, name: str = "x") -> jax.Array:
    if getattr(x, "dtype", None) == jnp.bool_:
        x = jnp.asarray(x)
    else:
        x = check_array(x, name, kind="real")
    if x.ndim < 1:
        raise ValueError(f"{name} must have a variable axis (last), got a scalar")
    if is_concrete(x) and not np.all(np.isin(np.asarray(x), (0, 1))):
        raise ValueError(f"{name} must be a binary (0/1) array, got other values")
    return x.astype(jnp.float32)


def onemax(x: ArrayLike) -> jax.Array:
    """OneMax ``f(x) = Σ_i x_i`` (optimum ``n`` at all ones).

    Examples:
      >>> x = jnp.array([1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 1, 0, 1, 1, 1, 0])
      >>> float(onemax(x))
      9.0
    """
    return jnp.sum(_binary(x), axis=-1)


def leading_ones(x: ArrayLike) -> jax.Array:
    """LeadingOnes ``f(x) = Σ_i Π_{j <= i} x_j``, the length of the all-ones prefix (optimum ``n``).

    Examples:
      >>> float(leading_ones(jnp.array([1, 1, 0, 1]))), float(leading_ones(jnp.ones(5)))
      (2.0, 5.0)
    """
    return jnp.sum(jnp.cumprod(_binary(x), axis=-1), axis=-1)


def deceptive_trap(x: ArrayLike, *, block_size: int = 4) -> jax.Array:
    """Concatenated deceptive traps: blocks of ``k`` bits with ``u`` ones score ``k`` if ``u = k``
    else ``k - 1 - u``.

    The optimum (all ones) scores ``n``; the deceptive attractor (all zeros) scores
    ``n (k - 1)/k``, and every block's slope points to it.

    Args:
      x: ``[..., n]`` 0/1 with ``n`` a multiple of ``block_size``.
      block_size: ``k >= 2`` (static).

    Examples:
      >>> x = jnp.array([1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 1, 0, 1, 1, 1, 0])
      >>> float(deceptive_trap(x))  # 4 + 3 + 1 + 0
      8.0
    """
    k = check_int(block_size, "block_size", minimum=2)
    v = _binary(x)
    if v.shape[-1] % k:
        raise ValueError(
            f"x's last axis ({v.shape[-1]} variables) must be a multiple of block_size={k}"
        )
    u = jnp.sum(v.reshape(*v.shape[:-1], v.shape[-1] // k, k), axis=-1)
    return jnp.sum(jnp.where(u == k, float(k), k - 1.0 - u), axis=-1)


class NKLandscape(NamedTuple):
    """An NK landscape ``f(x) = (1/n) Σ_i T_i[x_i, x_{j_1(i)}, ..., x_{j_K(i)}]`` (maximised).

    Attributes:
      neighbours: int32 ``[n, K + 1]``, row ``i`` = ``(i, j_1(i), ..., j_K(i))``.
      tables: float32 ``[n, 2^(K+1)]``, ``T_i`` indexed by the neighbourhood's bits read as a
        binary number (the first neighbour is the most significant bit).

    Examples:
      >>> landscape = NKLandscape(jnp.array([[0, 1], [1, 0]]), jnp.array([[0.0, 1, 2, 3],
      ...                                                                 [4.0, 5, 6, 7]]))
      >>> float(landscape(jnp.array([1, 0])))  # (T_0[10] + T_1[01]) / 2 = (2 + 5) / 2
      3.5
    """

    neighbours: jax.Array
    tables: jax.Array

    def __call__(self, x: ArrayLike) -> jax.Array:
        v = _binary(x)
        n = self.neighbours.shape[0]
        check_last_axis(v, n, "x", "num_variables")
        bits = v[..., self.neighbours].astype(jnp.int32)  # [..., n, K + 1]
        weights = 2 ** jnp.arange(self.neighbours.shape[1] - 1, -1, -1, dtype=jnp.int32)
        index = bits @ weights  # [..., n]
        rows = jnp.broadcast_to(jnp.arange(n), index.shape)
        return jnp.mean(self.tables[rows, index], axis=-1)


def nk_landscape(rng_key: jax.Array, num_variables: int, k: int) -> NKLandscape:
    """A random NK landscape: each variable with ``K`` distinct random others, tables ``U[0, 1]``.

    Args:
      rng_key: a JAX PRNG key.
      num_variables: ``n > k``.
      k: the epistasis ``K >= 0`` (tables of ``2^(K+1)`` entries).

    Examples:
      >>> landscape = nk_landscape(jax.random.key(0), 8, 2)
      >>> landscape.neighbours.shape, landscape.tables.shape
      ((8, 3), (8, 8))
      >>> 0.0 <= float(landscape(jnp.zeros(8))) <= 1.0
      True

    References:
      S. Kauffman, E. Weinberger, *The NK model of rugged fitness landscapes*, J. Theor. Biol.,
      1989.
    """
    check_key(rng_key)
    n = check_int(num_variables, "num_variables", minimum=1)
    k = check_int(k, "k", minimum=0)
    if k >= n:
        raise ValueError(f"k must be < num_variables={n}, got {k}")
    pick_key, table_key = jax.random.split(rng_key)

    def others(key, i):
        # K distinct variables other than i: a random permutation of the n - 1 others.
        perm = jax.random.permutation(key, n - 1)[:k]
        return jnp.where(perm >= i, perm + 1, perm)

    rest = jax.vmap(others)(jax.random.split(pick_key, n), jnp.arange(n))
    neighbours = jnp.concatenate([jnp.arange(n)[:, None], rest], axis=1).astype(jnp.int32)
    tables = jax.random.uniform(table_key, (n, 2 ** (k + 1)), jnp.float32)
    return NKLandscape(neighbours, tables)


class MaxCut(NamedTuple):
    """Max-cut ``f(x) = Σ_{u < v} A_uv [x_u ≠ x_v] = d·x - xᵀ A x`` (``d`` the degrees).

    Attributes:
      adjacency: float32 ``[n, n]`` symmetric edge weights with a zero diagonal.

    Examples:
      >>> cycle = jnp.array([[0, 1, 0, 1], [1, 0, 1, 0], [0, 1, 0, 1], [1, 0, 1, 0]], jnp.float32)
      >>> [float(MaxCut(cycle)(jnp.array(x))) for x in ([0, 1, 0, 1], [0, 0, 1, 1])]
      [4.0, 2.0]
    """

    adjacency: jax.Array

    def __call__(self, x: ArrayLike) -> jax.Array:
        v = _binary(x)
        check_last_axis(v, self.adjacency.shape[0], "x", "num_variables")
        degrees = jnp.sum(self.adjacency, axis=-1)
        return v @ degrees - jnp.sum((v @ self.adjacency) * v, axis=-1)


def random_maxcut(rng_key: jax.Array, num_variables: int, edge_probability: float) -> MaxCut:
    """Max-cut on an Erdős–Rényi graph ``G(n, p)`` with unit weights.

    Examples:
      >>> problem = random_maxcut(jax.random.key(0), 16, 0.3)
      >>> bool(jnp.all(problem.adjacency == problem.adjacency.T))
      True
    """
    check_key(rng_key)
    n = check_int(num_variables, "num_variables", minimum=2)
    p = check_probability(edge_probability, "edge_probability")
    upper = jnp.triu(jax.random.bernoulli(rng_key, p, (n, n)), k=1).astype(jnp.float32)
    return MaxCut(upper + upper.T)


class QUBO(NamedTuple):
    """Quadratic unconstrained binary optimisation ``f(x) = xᵀ Q x`` (maximised).

    Attributes:
      q: float32 ``[n, n]``.

    Examples:
      >>> float(QUBO(jnp.array([[1.0, -2.0], [-2.0, 3.0]]))(jnp.array([1, 1])))
      0.0
    """

    q: jax.Array

    def __call__(self, x: ArrayLike) -> jax.Array:
        v = _binary(x)
        check_last_axis(v, self.q.shape[0], "x", "num_variables")
        return jnp.sum((v @ self.q) * v, axis=-1)


def random_qubo(rng_key: jax.Array, num_variables: int) -> QUBO:
    """A QUBO with a symmetric ``Q`` of standard normal entries (``(G + Gᵀ)/√2``).

    Examples:
      >>> problem = random_qubo(jax.random.key(0), 5)
      >>> bool(jnp.allclose(problem.q, problem.q.T))
      True
    """
    check_key(rng_key)
    n = check_int(num_variables, "num_variables", minimum=1)
    g = jax.random.normal(rng_key, (n, n), jnp.float32)
    return QUBO((g + g.T) / jnp.sqrt(2.0))


def binary_benchmark_suite(
    rng_key: jax.Array,
    num_variables: int,
    *,
    nk_k: int = 4,
    edge_probability: float = 0.1,
    trap_block: int = 4,
) -> dict[str, Any]:
    """The order-invariant EDA's benchmark suite at size ``n``, all maximised.

    ``{"onemax", "leading_ones", "trap<k>", "nk<K>", "maxcut"}``: OneMax, LeadingOnes,
    deceptive traps of ``trap_block`` bits, an NK landscape (:func:`nk_landscape`) and max-cut
    on ``G(n, edge_probability)`` (:func:`random_maxcut`), the two random instances drawn from
    ``rng_key``. Values are callables ``f(x [..., n]) -> [...]``; the NK and max-cut instances
    are pytrees, so they can be passed through ``jax.jit`` as arguments.

    Examples:
      >>> suite = binary_benchmark_suite(jax.random.key(2024), 8)
      >>> list(suite)
      ['onemax', 'leading_ones', 'trap4', 'nk4', 'maxcut']
      >>> [float(suite[name](jnp.ones(8))) for name in ("onemax", "leading_ones", "trap4")]
      [8.0, 8.0, 8.0]
    """
    check_key(rng_key)
    n = check_int(num_variables, "num_variables", minimum=2)
    block = check_int(trap_block, "trap_block", minimum=2)
    if n % block:
        raise ValueError(f"trap_block={block} must divide num_variables={n} (whole trap blocks)")
    nk_key, cut_key = jax.random.split(rng_key)
    return {
        "onemax": onemax,
        "leading_ones": leading_ones,
        f"trap{block}": functools.partial(deceptive_trap, block_size=block),
        f"nk{nk_k}": nk_landscape(nk_key, n, nk_k),
        "maxcut": random_maxcut(cut_key, n, edge_probability),
    }
