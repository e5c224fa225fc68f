"""The synthetic order-2 Markov language (jaxlab/nn/_markov.py) and its entropy rate."""

from __future__ import annotations

import numpy as np
import pytest

from jaxlab.nn import markov_language


def test_markov_language_entropy_rate():
    """The entropy rate bounds the empirical next-token entropy from below (a second estimate).

    The plug-in conditional entropy from order-2 counts is biased low on a finite sample, the
    model entropy is exact: on a long stream they agree within a few percent, and a uniform
    vocabulary-size branching gives at most log(branching).
    """
    vocab, branching = 8, 3
    tokens, entropy = markov_language(vocab, branching, 60_000, seed=3)
    assert tokens.min() >= 0 and tokens.max() < vocab
    contexts = tokens[:-2] * vocab + tokens[1:-1]
    joint = np.zeros((vocab * vocab, vocab))
    np.add.at(joint, (contexts, tokens[2:]), 1.0)
    totals = joint.sum(axis=1, keepdims=True)
    conditional = np.divide(joint, totals, out=np.zeros_like(joint), where=totals > 0)
    logs = np.log(np.where(conditional > 0, conditional, 1.0))
    plug_in = -np.sum(joint * logs) / joint.sum()
    assert plug_in == pytest.approx(entropy, rel=0.03)
    assert 0 < entropy < np.log(branching)
    # Each context has at most `branching` successors.
    assert np.max(np.sum(joint > 0, axis=1)) <= branching
    with pytest.raises(ValueError, match="branching"):
        markov_language(4, 5, 100)


def test_markov_language_is_reproducible_and_checks_sizes():
    one, h_one = markov_language(6, 2, 500, seed=1)
    two, h_two = markov_language(6, 2, 500, seed=1)
    np.testing.assert_array_equal(one, two)
    assert h_one == h_two and one.dtype == np.int32
    # branching = 1: the chain is deterministic given its first two tokens, entropy 0.
    tokens, entropy = markov_language(5, 1, 200)
    assert entropy == 0.0
    pairs = {(a, b): c for a, b, c in zip(tokens[:-2], tokens[1:-1], tokens[2:], strict=True)}
    assert all(
        pairs[(a, b)] == c for a, b, c in zip(tokens[:-2], tokens[1:-1], tokens[2:], strict=True)
    )
    with pytest.raises(ValueError, match="vocab_size"):
        markov_language(1, 1, 100)
    with pytest.raises(ValueError, match="num_tokens"):
        markov_language(4, 2, 2)
    with pytest.raises(TypeError, match="num_tokens"):
        markov_language(4, 2, 100.0)


def test_negative_seed_is_named():
    with pytest.raises(ValueError, match="seed must be an int >= 0"):
        markov_language(4, 2, 10, seed=-1)  # numpy's own error before
