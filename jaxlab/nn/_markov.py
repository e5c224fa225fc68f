"""Synthetic languages with a known entropy rate: random sparse Markov chains over tokens.

:func:`markov_language` draws an order-2 chain with Dirichlet next-token probabilities (its
entropy rate is estimated from the stream). :func:`latin_markov_language` builds an order-k chain
whose stationary law is uniform by construction, so its entropy rate and the lowest loss a model
reading windows of the stream can reach are exact closed forms (used by ``async-delay``). The
entropy rate is the lowest loss (nats/token) any model can reach, so a training curve can be
read against it.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from jaxlab._src.validation import check_int, check_positive_int, check_real_array, check_seed

__all__ = ["LatinMarkovLanguage", "latin_markov_language", "markov_language"]


def markov_language(
    vocab_size: int, branching: int, num_tokens: int, seed: int = 0
) -> tuple[np.ndarray, float]:
    """A token stream from a fixed random sparse order-2 Markov chain, and its entropy rate.

    For each context ``(a, b)`` the next token is one of ``branching`` distinct tokens drawn
    uniformly, with probabilities from a ``Dirichlet(1, …, 1)``. The entropy rate
    ``H = Σ_{a,b} π(a,b) H(P(·|a,b))`` is estimated with the empirical context frequencies of the
    stream: it is the lowest loss (nats/token) any model can reach.

    Args:
      vocab_size: ``V >= 2``.
      branching: candidates per context, in ``[1, V]``.
      num_tokens: stream length, ``>= 3``.
      seed: numpy seed of the chain and the stream.

    Returns:
      ``(tokens, entropy_rate)``: an ``int32`` array of ``num_tokens`` tokens in ``[0, V)`` and a
      float.

    Raises:
      ValueError: a size outside its range (``branching`` above ``vocab_size``, ...).
      TypeError: a size that is not an integer.

    Examples:
      >>> from jaxlab.nn import markov_language
      >>> tokens, entropy = markov_language(16, 2, 5000)
      >>> tokens.shape, tokens.dtype, 0.0 < entropy < float(np.log(2))
      ((5000,), dtype('int32'), True)
    """
    vocab_size = check_int(vocab_size, "vocab_size", minimum=2)
    branching = check_int(branching, "branching", minimum=1, maximum=vocab_size)
    num_tokens = check_int(num_tokens, "num_tokens", minimum=3)
    check_seed(seed)
    seed = check_int(seed, "seed", minimum=0)  # numpy's generator takes seeds >= 0
    rng = np.random.default_rng(seed)
    contexts = vocab_size * vocab_size
    candidates = np.stack(
        [rng.choice(vocab_size, branching, replace=False) for _ in range(contexts)]
    )
    probs = rng.dirichlet(np.ones(branching), size=contexts)
    cumulative = np.cumsum(probs, axis=1)
    uniforms = rng.random(num_tokens)
    tokens = np.empty(num_tokens, np.int64)
    tokens[:2] = rng.integers(0, vocab_size, 2)
    counts = np.zeros(contexts)
    for i in range(2, num_tokens):
        context = tokens[i - 2] * vocab_size + tokens[i - 1]
        counts[context] += 1
        choice = min(int(np.searchsorted(cumulative[context], uniforms[i])), branching - 1)
        tokens[i] = candidates[context, choice]
    entropies = -np.sum(probs * np.log(probs), axis=1)
    entropy_rate = float(np.sum(counts * entropies) / counts.sum())
    return tokens.astype(np.int32), entropy_rate


class LatinMarkovLanguage(NamedTuple):
    """What :func:`latin_markov_language` returns.

    Attributes:
      tokens: ``(num_tokens,)`` ``int32`` tokens in ``[0, V)``.
      entropy_rate: ``H(p) = −Σ_j p_j log p_j`` in nats/token, exact.
      candidates: ``(V**(k−1), V, m)`` ``int32``: ``candidates[b, a, j]`` is the token that
        follows the context ``(a, b)`` with probability ``p_j`` (``a`` the oldest token, ``b``
        the newer ``k − 1`` tokens read as a base-``V`` number).
      next_token_probs: ``(m,)`` the profile ``p``.
      order: ``k``.

    Examples:
      >>> language = latin_markov_language(8, [0.9, 0.1], 100, order=1)
      >>> language.candidates.shape, round(language.window_loss_floor(4), 4)
      ((1, 8, 2), 0.3251)
    """

    tokens: np.ndarray
    entropy_rate: float
    candidates: np.ndarray
    next_token_probs: np.ndarray
    order: int

    def window_loss_floor(self, seq_len: int) -> float:
        """The lowest mean loss over ``seq_len`` next-token targets of a window of the stream.

        A window ``tokens[s : s + T + 1]`` (``T = seq_len``) gives targets ``x_{s+1..s+T}``;
        the first ``k − 1`` of them have fewer than ``k`` tokens of context. The stationary law
        is uniform on ``k``-tuples, so a target with fewer than ``k`` tokens of context is
        uniform (entropy ``log V``) and the others have entropy ``H(p)``:
        ``floor_T = (min(k−1, T)·log V + max(T−k+1, 0)·H(p)) / T``.

        Args:
          seq_len: ``T >= 1``.

        Returns:
          The floor in nats/token (the Bayes predictor's expected loss).
        """
        seq_len = check_positive_int(seq_len, "seq_len")
        vocab_size = self.candidates.shape[1]
        short = min(self.order - 1, seq_len)
        total = short * np.log(vocab_size) + (seq_len - short) * self.entropy_rate
        return float(total / seq_len)


def latin_markov_language(
    vocab_size: int,
    next_token_probs,
    num_tokens: int,
    *,
    order: int = 2,
    seed: int = 0,
) -> LatinMarkovLanguage:
    """An order-``k`` Markov language with a uniform stationary law and an exact entropy rate.

    Every context has the same next-token profile ``p = (p_1, …, p_m)`` placed on its own
    ``m`` distinct candidates, taken from a random Latin square per newer context: with the
    context ``(a, b)`` (``a`` the oldest token, ``b`` the ``k − 1`` newer ones) and random
    permutations ``τ_b, υ_b`` of ``[0, V)``,

    ``P(x = τ_b[(υ_b[a] + j) mod V] | a, b) = p_j``,  ``j = 0, …, m − 1``.

    For fixed ``b`` and ``j`` the map ``a ↦ τ_b[(υ_b[a] + j) mod V]`` is a bijection, so
    ``Σ_a P(c | a, b) = 1`` for every ``(b, c)``: the uniform law on ``k``-tuples is stationary.
    The stream starts from it, so it is stationary from its first token, every context carries
    the conditional entropy ``H(p)``, and the entropy rate is exactly ``H(p) = −Σ_j p_j log p_j``
    (no estimate from counts). A peaked profile gives a low-entropy language whose floor a small
    model can approach; :meth:`LatinMarkovLanguage.window_loss_floor` gives the exact floor of a
    windowed loss.

    Args:
      vocab_size: ``V >= 2``.
      next_token_probs: the profile ``p``: ``m`` in ``[1, V]`` entries ``>= 0`` summing to 1
        (within 1e-6; renormalized).
      num_tokens: stream length, ``> order``.
      order: ``k >= 1`` (``V**(k−1)`` Latin squares of ``V × V``; keep it small).
      seed: numpy seed of the squares and the stream.

    Returns:
      A :class:`LatinMarkovLanguage` ``(tokens, entropy_rate, candidates, next_token_probs,
      order)``.

    Raises:
      ValueError: a size outside its range, or a profile that is not a probability vector.
      TypeError: a size that is not an integer.

    Examples:
      >>> import numpy as np
      >>> language = latin_markov_language(16, [0.85, 0.1, 0.05], 20_000, seed=1)
      >>> language.tokens.shape, round(language.entropy_rate, 4)
      ((20000,), 0.5182)
      >>> round(language.window_loss_floor(16), 4)  # (log 16 + 15 H) / 16
      0.6591

    References:
      Cover & Thomas, *Elements of Information Theory*, 2nd ed., Thm. 4.2.4 (entropy rate of a
      stationary Markov chain); the ``async-delay`` experiment (Zmushko et al., ICML 2026) trains
      on it close to the floor.
    """
    vocab_size = check_int(vocab_size, "vocab_size", minimum=2)
    order = check_int(order, "order", minimum=1)
    num_tokens = check_int(num_tokens, "num_tokens", minimum=order + 1)
    check_seed(seed)
    seed = check_int(seed, "seed", minimum=0)
    probs = check_real_array(next_token_probs, "next_token_probs", minimum=0.0, maximum=1.0)
    if probs is None or probs.ndim != 1 or not 1 <= probs.size <= vocab_size:
        raise ValueError(
            f"next_token_probs must be a concrete 1-D vector of 1 to vocab_size={vocab_size} "
            f"entries, got {next_token_probs!r}"
        )
    if abs(probs.sum() - 1.0) > 1e-6:
        raise ValueError(f"next_token_probs must sum to 1, got sum {probs.sum()!r}")
    if vocab_size ** (order - 1) > 1_000_000:
        raise ValueError(
            f"order={order} needs vocab_size**(order-1) = {vocab_size ** (order - 1)} Latin "
            "squares; keep it at most 1e6"
        )
    probs = probs / probs.sum()
    rng = np.random.default_rng(seed)
    newer = vocab_size ** (order - 1)
    tau = np.argsort(rng.random((newer, vocab_size)), axis=1)
    upsilon = np.argsort(rng.random((newer, vocab_size)), axis=1)
    shifts = (upsilon[:, :, None] + np.arange(probs.size)) % vocab_size  # (newer, V, m)
    candidates = np.take_along_axis(tau[:, :, None], shifts, axis=1)
    cumulative = np.cumsum(probs)
    choices = np.minimum(
        np.searchsorted(cumulative, rng.random(num_tokens), side="right"), probs.size - 1
    )
    tokens = np.empty(num_tokens, np.int64)
    tokens[:order] = rng.integers(0, vocab_size, order)  # uniform: the stationary law
    flat = candidates.reshape(-1, probs.size)  # row b * V + a
    base = vocab_size ** (order - 1)
    b = 0
    for token in tokens[1:order]:
        b = b * vocab_size + int(token)
    for i in range(order, num_tokens):
        a = int(tokens[i - order])
        nxt = int(flat[b * vocab_size + a, choices[i]])
        tokens[i] = nxt
        b = (b * vocab_size + nxt) % base if order > 1 else 0
    positive = probs[probs > 0]
    entropy_rate = float(-np.sum(positive * np.log(positive)))
    return LatinMarkovLanguage(
        tokens.astype(np.int32), entropy_rate, candidates.astype(np.int32), probs, order
    )
