"""UCPO's advantage cases on hand-made groups, the gain's properties, and the answer task."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.rl import (
    RIGHT,
    UNCERTAIN,
    WRONG,
    TernaryBandit,
    answer_metrics,
    dynamic_uncertainty_gain,
    expected_answer_metrics,
    group_advantages,
    ternary_bandit,
    ternary_labels,
    ternary_rewards,
    ucpo_advantages,
)

# The note's table: (n_R, n_W, n_U) -> GRPO-UC Â_U (r_u 0.2, 0.5), TAD Â_R, Â_W, γ, UCPO Â_U.
TABLE = {
    (6, 1, 1): (-1.4635, -0.8980, 0.4082, -2.4495, 0.3304, 0.1349),
    (1, 6, 1): (0.1525, 0.8980, 2.4495, -0.4082, 0.7321, 1.7934),
    (3, 3, 2): (-0.4977, 0.0000, 1.0000, -1.0000, 0.3250, 0.3250),
    (4, 2, 2): (-0.7683, -0.3015, 0.7071, -1.4142, 0.2083, 0.1473),
    (2, 2, 4): (-0.3906, 0.0000, 1.0000, -1.0000, -0.0833, -0.0833),
    (1, 1, 6): (-0.2662, 0.0000, 1.0000, -1.0000, -0.3393, -0.3393),
    (2, 1, 5): (-0.4774, -0.2085, 0.7071, -1.4142, -0.3542, -0.2504),
}


def _group(n_r, n_w, n_u):
    return [RIGHT] * n_r + [WRONG] * n_w + [UNCERTAIN] * n_u


@pytest.mark.parametrize("counts", sorted(TABLE))
def test_hand_made_groups_match_the_note_table(counts):
    n_r, n_w, _ = counts
    lab = jnp.array(_group(*counts))
    uc02, uc05, a_r, a_w, gamma, a_u = TABLE[counts]
    got_uc = [
        float(group_advantages(ternary_rewards(lab, uncertain_reward=r))[-1]) for r in (0.2, 0.5)
    ]
    adv, kept = ucpo_advantages(lab)
    assert got_uc == pytest.approx([uc02, uc05], abs=1.5e-4)
    assert float(adv[0]) == pytest.approx(a_r, abs=1.5e-4)
    assert float(adv[n_r]) == pytest.approx(a_w, abs=1.5e-4)
    assert float(dynamic_uncertainty_gain(lab)) == pytest.approx(gamma, abs=1.5e-4)
    assert float(adv[-1]) == pytest.approx(a_u, abs=1.5e-4)
    assert bool(kept)


def test_gain_by_hand_and_its_range_over_every_group_of_eight():
    # (3, 3, 2): (3/5)(3/4) - (3/6)(2/8) = 0.45 - 0.125.
    assert float(dynamic_uncertainty_gain(jnp.array(_group(3, 3, 2)))) == pytest.approx(
        0.325, abs=1e-5
    )
    groups = [(r, w, 8 - r - w) for r in range(9) for w in range(9 - r)]
    lab = jnp.array([_group(*g) for g in groups])
    for weight in (0.5, 1.0, 2.0):
        gamma = np.asarray(dynamic_uncertainty_gain(lab, suppression_weight=weight))
        assert np.all(gamma >= -weight - 1e-6) and np.all(gamma <= 1 + 1e-6)
    # NTF keeps exactly the groups with a right and a wrong rollout.
    _, kept = ucpo_advantages(lab)
    assert np.asarray(kept).tolist() == [r * w > 0 for r, w, _ in groups]
    # With no uncertain rollout, TAD is GRPO on the binary reward.
    plain = jnp.array([_group(r, 8 - r, 0) for r in range(1, 8)])
    np.testing.assert_allclose(
        ucpo_advantages(plain)[0], group_advantages((plain == RIGHT) * 1.0), atol=1e-5
    )


def test_without_filtering_a_group_with_no_right_rollout_explodes():
    lab = jnp.array(_group(0, 6, 2))
    adv, kept = ucpo_advantages(lab, filter_non_ternary=False)
    gamma = float(dynamic_uncertainty_gain(lab))
    assert bool(kept) and float(adv[-1]) == pytest.approx(gamma / 1e-6, rel=1e-4)
    filtered, kept = ucpo_advantages(lab)
    assert not bool(kept) and np.all(np.asarray(filtered) == 0)


def test_low_resource_placeholder_with_no_smoothing_is_tanh_of_the_gain():
    lab = jnp.array([_group(3, 3, 2), _group(6, 1, 1)])
    adv, _ = ucpo_advantages(lab, low_resource=True, batch_smoothing=1.0, tanh_scale=2.0)
    base, _ = ucpo_advantages(lab)
    gamma = np.asarray(dynamic_uncertainty_gain(lab))
    a_right = np.asarray(base)[:, 0]
    np.testing.assert_allclose(np.asarray(adv)[:, -1], np.tanh(2 * gamma) * a_right, rtol=1e-5)


def test_answer_metrics_by_hand():
    m = answer_metrics(jnp.array([RIGHT] * 3 + [WRONG] + [UNCERTAIN] * 4))
    assert float(m["accuracy"]) == pytest.approx(3 / 8)
    assert float(m["paq"]) == pytest.approx(3 / 4)
    assert float(m["uncertainty_ratio"]) == pytest.approx(0.5)
    assert float(m["f1"]) == pytest.approx(2 * 0.75 * 0.375 / 1.125)
    assert np.isnan(float(answer_metrics(jnp.array([UNCERTAIN, UNCERTAIN]))["paq"]))


def test_expected_metrics_match_sampled_labels():
    bandit = ternary_bandit(jax.random.key(0), 8, 4)
    again = ternary_bandit(jax.random.key(0), 8, 4)
    np.testing.assert_array_equal(bandit.key_answer, again.key_answer)
    probs = jax.nn.softmax(jax.random.normal(jax.random.key(1), (8, 5)), axis=-1)
    exact = expected_answer_metrics(bandit, probs)
    n = 4000
    prompts = jnp.repeat(jnp.arange(8), n)
    actions = jax.random.categorical(jax.random.key(2), jnp.log(probs)[prompts])
    labels = ternary_labels(jax.random.key(3), bandit, prompts, actions)
    sampled = answer_metrics(labels)
    for name in ("accuracy", "paq", "uncertainty_ratio"):
        assert float(sampled[name]) == pytest.approx(exact[name], abs=0.015), name
    same = ternary_labels(jax.random.key(3), bandit, prompts, actions)
    np.testing.assert_array_equal(labels, same)
    assert not np.array_equal(labels, ternary_labels(jax.random.key(4), bandit, prompts, actions))


def test_answering_the_key_is_right_with_probability_kappa_plus_a_guess():
    bandit = TernaryBandit(jnp.array([1, 1]), jnp.array([0.0, 2 / 3]), 4)
    n = 20_000
    prompts = jnp.repeat(jnp.arange(2), n)
    labels = np.asarray(
        ternary_labels(jax.random.key(0), bandit, prompts, jnp.ones(2 * n, jnp.int32))
    )
    right = (labels == RIGHT).reshape(2, n).mean(-1)
    np.testing.assert_allclose(right, [0.25, 2 / 3 + 1 / 12], atol=0.015)


def test_expected_metrics_match_a_numpy_computation_per_level():
    bandit = ternary_bandit(jax.random.key(5), 12, 3, (0.0, 0.5, 1.0))
    probs = np.asarray(jax.nn.softmax(jax.random.normal(jax.random.key(6), (12, 4)), axis=-1))
    kappa, key = np.asarray(bandit.knowability, np.float64), np.asarray(bandit.key_answer)
    p = probs.astype(np.float64)
    right = kappa * p[np.arange(12), key] + (1 - kappa) * p[:, :3].sum(-1) / 3
    unsure = p[:, 3]
    acc, paq = right.mean(), right.sum() / (12 - unsure.sum())
    got = expected_answer_metrics(bandit, probs)
    assert got["accuracy"] == pytest.approx(acc, rel=1e-5)
    assert got["paq"] == pytest.approx(paq, rel=1e-5)
    assert got["uncertainty_ratio"] == pytest.approx(unsure.mean(), rel=1e-5)
    assert got["f1"] == pytest.approx(2 * paq * acc / (paq + acc), rel=1e-5)
    for level in (0.0, 0.5, 1.0):
        rows = np.isclose(kappa, level)
        assert got["abstain_by_knowability"][level] == pytest.approx(unsure[rows].mean(), rel=1e-5)
        assert got["accuracy_by_knowability"][level] == pytest.approx(right[rows].mean(), rel=1e-5)
