"""A synthetic language with a known entropy rate: a fixed random sparse order-2 Markov chain.

Used by the ``async-delay`` experiment (and handy for any language-model test): the entropy rate
is the lowest loss (nats/token) any model can reach, so a training curve can be read against it.
"""

from __future__ import annotations

import numpy as np

from jaxlab._src.validation import check_int, check_seed

__all__ = ["markov_language"]


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
