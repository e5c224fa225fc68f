"""The synthetic order-2 Markov language (jaxlab/nn/_markov.py) and its entropy rate."""

from __future__ import annotations

import numpy as np
import pytest

from jaxlab.nn import latin_markov_language, markov_language


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


# --- latin_markov_language: exact entropy rate and loss floor -----------------------------------


def _plug_in_conditional_entropy(tokens, vocab, order):
    contexts = np.zeros(tokens.size - order, np.int64)
    for k in range(order):
        contexts = contexts * vocab + tokens[k : tokens.size - order + k]
    joint = np.zeros((vocab**order, vocab))
    np.add.at(joint, (contexts, tokens[order:]), 1.0)
    conditional = joint / np.maximum(joint.sum(axis=1, keepdims=True), 1.0)
    logs = np.log(np.where(conditional > 0, conditional, 1.0))
    return -np.sum(joint * logs) / joint.sum(), joint


def test_latin_markov_language_entropy_rate_is_the_closed_form():
    """H(p) exactly; the plug-in estimate from order-k counts (a second path) agrees."""
    probs = np.array([0.7, 0.2, 0.1])
    closed_form = -np.sum(probs * np.log(probs))
    for order in (1, 2, 3):
        language = latin_markov_language(6, probs, 150_000, order=order, seed=order)
        assert language.entropy_rate == pytest.approx(closed_form, rel=1e-12)
        plug_in, joint = _plug_in_conditional_entropy(language.tokens, 6, order)
        assert plug_in == pytest.approx(closed_form, rel=0.03)
        # Each context has at most len(p) successors, exactly its candidates.
        assert np.max(np.sum(joint > 0, axis=1)) <= probs.size
    # A deterministic profile has entropy 0, a uniform one log m.
    assert latin_markov_language(5, [1.0], 50).entropy_rate == 0.0
    uniform = latin_markov_language(8, np.full(4, 0.25), 50)
    assert uniform.entropy_rate == pytest.approx(np.log(4), rel=1e-12)


def test_latin_markov_language_stationary_law_is_uniform():
    """The dense pair-transition matrix has the uniform law as a left eigenvector (eigenvalue 1),
    every context's candidates are distinct, and the stream's pair frequencies are uniform."""
    vocab, probs = 5, np.array([0.6, 0.3, 0.1])
    language = latin_markov_language(vocab, probs, 200_000, seed=4)
    candidates = language.candidates  # (b, a, j)
    assert candidates.shape == (vocab, vocab, probs.size)
    assert all(len(set(row)) == probs.size for row in candidates.reshape(-1, probs.size))
    transition = np.zeros((vocab * vocab, vocab * vocab))  # state (a, b) -> (b, c)
    for a in range(vocab):
        for b in range(vocab):
            for j, c in enumerate(candidates[b, a]):
                transition[a * vocab + b, b * vocab + c] += probs[j]
    np.testing.assert_allclose(transition.sum(axis=1), 1.0)
    uniform = np.full(vocab * vocab, 1.0 / vocab**2)
    np.testing.assert_allclose(uniform @ transition, uniform, atol=1e-12)
    tokens = language.tokens
    pairs = np.bincount(tokens[:-1] * vocab + tokens[1:], minlength=vocab * vocab) / (
        tokens.size - 1
    )
    np.testing.assert_allclose(pairs, uniform, atol=0.004)  # ~4.5 binomial SEs at n = 2e5


def test_latin_markov_language_window_floor_is_the_bayes_loss():
    """The closed-form floor equals the Monte Carlo loss of the true predictor on windows."""
    vocab, probs, seq_len = 8, np.array([0.85, 0.1, 0.05]), 6
    language = latin_markov_language(vocab, probs, 100_000, seed=2)
    tokens, candidates = language.tokens, language.candidates
    # The Bayes predictor: -log p_j for a target with two tokens of context; for the first
    # target of a window (one token of context) the conditional law is uniform (checked here).
    follow = np.bincount(tokens[:-1] * vocab + tokens[1:], minlength=vocab * vocab)
    conditional = follow.reshape(vocab, vocab) / follow.reshape(vocab, vocab).sum(1, keepdims=True)
    np.testing.assert_allclose(conditional, 1.0 / vocab, atol=0.015)
    losses = np.empty(tokens.size - 2)
    for i in range(2, tokens.size):
        j = list(candidates[tokens[i - 1], tokens[i - 2]]).index(tokens[i])
        losses[i - 2] = -np.log(probs[j])
    starts = np.random.default_rng(0).integers(0, tokens.size - seq_len - 2, 20_000)
    per_window = np.array(
        [(np.log(vocab) + losses[s : s + seq_len - 1].sum()) / seq_len for s in starts]
    )
    floor = language.window_loss_floor(seq_len)
    assert floor == pytest.approx((np.log(vocab) + (seq_len - 1) * language.entropy_rate) / seq_len)
    assert abs(per_window.mean() - floor) < 4 * per_window.std() / np.sqrt(starts.size)
    # Order 1: every target has its full context; order k > T: all targets are uniform.
    assert latin_markov_language(8, probs, 20, order=1).window_loss_floor(4) == pytest.approx(
        language.entropy_rate
    )
    assert latin_markov_language(3, probs, 20, order=4).window_loss_floor(2) == pytest.approx(
        np.log(3)
    )


def test_latin_markov_language_is_reproducible_and_checks_input():
    one = latin_markov_language(6, [0.5, 0.5], 300, seed=1)
    two = latin_markov_language(6, [0.5, 0.5], 300, seed=1)
    np.testing.assert_array_equal(one.tokens, two.tokens)
    assert one.tokens.dtype == np.int32 and one.tokens.min() >= 0 and one.tokens.max() < 6
    with pytest.raises(ValueError, match="next_token_probs must sum to 1"):
        latin_markov_language(4, [0.5, 0.4], 10)
    with pytest.raises(ValueError, match="next_token_probs"):
        latin_markov_language(2, [0.2, 0.3, 0.5], 10)
    with pytest.raises(ValueError, match="num_tokens"):
        latin_markov_language(4, [1.0], 2)
