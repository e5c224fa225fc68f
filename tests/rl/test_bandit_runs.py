"""The bandit training programs and the UCPO reference table (``jaxlab.rl._bandit_runs``)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import rl


def test_ternary_program_at_lr_zero_keeps_the_start_and_learns_with_a_step():
    run = rl.ternary_bandit_program(4, 3, (0.0, 1.0), batch_prompts=2, group_size=4, steps=4)
    keys = jax.random.split(jax.random.key(1), 3)
    kinds, zeros, ones = jnp.array([0, 1, 2]), jnp.zeros(3), jnp.ones(3)
    warm = jnp.array([0.0, 1.0, 1.0])
    probs, curve, skipped, key_answers = run(
        keys, kinds, zeros + 0.2, ones, ones > 0, warm, 0.0, 0.0
    )
    # Closed form of the starts: uniform (cold); softmax(1 on the key, -2 on abstain) (warm).
    np.testing.assert_allclose(probs[0], np.full((4, 4), 0.25), rtol=1e-6)
    logits = np.zeros((4, 4))
    logits[np.arange(4), np.asarray(key_answers[1])] = 1.0
    logits[:, 3] = -2.0
    expected = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    np.testing.assert_allclose(probs[1], expected, rtol=1e-6)
    assert curve.shape == (3, 4, 2) and skipped.tolist() == [0, 0, 0]
    moved, *_ = run(keys, kinds, zeros + 0.2, ones, ones > 0, warm, 0.5, 0.5)
    assert np.abs(np.asarray(moved) - np.asarray(probs)).max() > 1e-3
    with pytest.raises(ValueError, match="steps"):
        rl.ternary_bandit_program(4, 3, (0.0,), batch_prompts=2, group_size=4, steps=0)


def test_seed_answer_metrics_means_the_per_seed_metrics():
    bandit = rl.TernaryBandit(jnp.array([0, 1]), jnp.array([0.0, 1.0]), 2)
    pis = jnp.array([[[0.2, 0.3, 0.5], [0.1, 0.8, 0.1]], [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]])
    out = rl.seed_answer_metrics([bandit, bandit], pis)
    each = [rl.expected_answer_metrics(bandit, p) for p in pis]
    assert out["mean"]["paq"] == pytest.approx(np.mean([m["paq"] for m in each]))
    assert out["per_seed"][1]["abstain_by_knowability"] == [1.0, 0.0]


def test_ucpo_reference_checks_pass_at_the_tables_precision_and_not_below_it():
    assert rl.ucpo_reference_checks(1.5e-4)["passed"]
    # The table has four decimals: a tolerance below half a unit of the last must fail.
    out = rl.ucpo_reference_checks(1e-7)
    assert not out["passed"] and 1e-7 < out["table_error"] <= 1.5e-4
