"""TSRL rewards against exact expectations for a known judge, the baselines, and the toy tasks."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import expit

from jaxlab.rl import (
    TabularPolicy,
    hidden_quality_win_rate,
    normalized_quality,
    pointwise_reward,
    round_robin_reward,
    select_anchors,
    single_pairwise_reward,
    synthetic_pairwise_judge,
    synthetic_rubric_judge,
    tournament_bandit,
    win_rate_reward,
)

IDENT = lambda q, x: x  # noqa: E731  (the response is its own quality)


def _exact(delta, tau, beta, eps):
    """E r for quality gaps ``delta`` [G, K]: ε + (1 - 2ε) ½[σ(Δ/τ + β) + σ(Δ/τ - β)], K-mean."""
    clean = 0.5 * (expit(delta / tau + beta) + expit(delta / tau - beta))
    return (eps + (1 - 2 * eps) * clean).mean(-1)


@pytest.mark.parametrize(
    ("tau", "beta", "eps"), [(0.5, 0.5, 0.0), (1.0, -0.3, 0.2), (2.0, 1.0, 0.4)]
)
def test_expected_win_rate_matches_the_closed_form(tau, beta, eps):
    judge = synthetic_pairwise_judge(IDENT, temperature=tau, position_bias=beta, flip_prob=eps)
    responses = np.array([-1.0, 0.0, 0.5, 2.0])
    anchors = np.array([0.0, 0.3, -0.7])
    r, info = win_rate_reward(jax.random.key(0), judge, responses, anchors, sample=False)
    exact = _exact(responses[:, None] - anchors[None, :], tau, beta, eps)
    np.testing.assert_allclose(r, exact, rtol=1e-5)
    assert int(info.num_calls) == 4 * 3 * 2 and int(info.invalid_count) == 0
    # Equal qualities give ½ whatever the bias and the corruption (the bias cancels).
    tie, _ = win_rate_reward(jax.random.key(0), judge, anchors[:1], anchors[:1], sample=False)
    assert float(tie[0]) == pytest.approx(0.5, abs=1e-6)


def test_sampled_rewards_have_the_exact_mean_and_variance():
    tau, beta, k, draws = 0.5, 0.5, 4, 40_000
    judge = synthetic_pairwise_judge(IDENT, temperature=tau, position_bias=beta)
    o, anchors = jnp.array([0.4]), jnp.array([0.0, 0.2, -0.5, 1.0])
    run = jax.jit(jax.vmap(lambda key: win_rate_reward(key, judge, o, anchors)[0][0]))
    r = np.asarray(run(jax.random.split(jax.random.key(1), draws)))
    delta = 0.4 - np.asarray(anchors, np.float64)
    p_fwd, p_back = expit(delta / tau + beta), expit(-delta / tau + beta)
    mean = 0.5 * (p_fwd + 1 - p_back).mean()
    var = (p_fwd * (1 - p_fwd) + p_back * (1 - p_back)).sum() / (2 * k) ** 2
    assert r.mean() == pytest.approx(mean, abs=4 * np.sqrt(var / draws))
    assert r.var() == pytest.approx(var, rel=0.03)
    assert var <= 1 / (8 * k)


def test_an_anchor_mask_equals_fewer_anchors_and_keys_reproduce():
    judge = synthetic_pairwise_judge(IDENT)
    o, a = jnp.array([0.1, -0.2, 0.9]), jnp.array([0.0, 1.0, -1.0, 0.5])
    masked, info = win_rate_reward(
        jax.random.key(3), judge, o, a, anchor_mask=jnp.array([1, 1, 0, 0])
    )
    short, _ = win_rate_reward(jax.random.key(3), judge, o, a[:2], sample=False)
    exact, _ = win_rate_reward(
        jax.random.key(3), judge, o, a, sample=False, anchor_mask=jnp.array([1, 1, 0, 0])
    )
    np.testing.assert_allclose(exact, short, rtol=1e-6)
    assert int(info.num_calls) == 3 * 2 * 2
    again, _ = win_rate_reward(jax.random.key(3), judge, o, a, anchor_mask=jnp.array([1, 1, 0, 0]))
    np.testing.assert_array_equal(masked, again)
    draws = [win_rate_reward(jax.random.key(s), judge, o, a)[0] for s in range(4)]
    assert any(not np.array_equal(draws[0], d) for d in draws[1:])


def test_single_pairwise_averages_to_the_round_robin():
    # Over the uniform choice of the opponent, E[single pairwise] = the round robin's value.
    judge = synthetic_pairwise_judge(IDENT, temperature=1.0, position_bias=0.3)
    group = jnp.array([0.0, 0.5, -1.0, 2.0])
    robin, info = round_robin_reward(jax.random.key(0), judge, group, sample=False)
    exact = _exact(np.asarray(group)[:, None] - np.asarray(group)[None, :], 1.0, 0.3, 0.0)
    # the round robin leaves out the self-comparison (which scores ½)
    np.testing.assert_allclose(robin, (exact * 4 - 0.5) / 3, rtol=1e-5)
    assert int(info.num_calls) == 4 * 3 * 2
    run = jax.jit(jax.vmap(lambda k: single_pairwise_reward(k, judge, group, sample=False)[0]))
    single = np.asarray(run(jax.random.split(jax.random.key(1), 6000))).mean(0)
    np.testing.assert_allclose(single, robin, atol=0.01)


def test_pointwise_rubric_scores():
    rubric = synthetic_rubric_judge(IDENT, lambda q: 0.5 * q, noise_std=0.0)
    r, info = pointwise_reward(jax.random.key(0), rubric, jnp.array([0.0, 9.0]), 2.0)
    expected = np.clip(np.round(10 * expit(np.tanh([0.0, 9.0]) + 1.0)), 1, 10)
    np.testing.assert_array_equal(r, expected)
    assert int(info.invalid_count) == 0
    noisy = synthetic_rubric_judge(IDENT, noise_std=1.0)
    scores = pointwise_reward(jax.random.key(1), noisy, jnp.zeros(2000))[0]
    assert 1.0 <= float(scores.min()) and float(scores.max()) <= 10.0 and float(scores.std()) > 1.0


def test_a_judge_outside_the_unit_interval_raises_or_is_reported():
    bad = lambda q, x, y: 1.0 + x - y  # noqa: E731
    o, a = jnp.array([0.5, 0.0]), jnp.array([0.0])
    with pytest.raises(ValueError, match="judge_fn"):
        win_rate_reward(jax.random.key(0), bad, o, a)
    rewards, info = jax.jit(lambda k: win_rate_reward(k, bad, o, a))(jax.random.key(0))
    assert int(info.invalid_count) == 1  # 1.5 forward (the backward 0.5 is valid)
    assert np.isnan(rewards[0]) and np.isfinite(rewards[1])


def test_anchors_come_from_the_sampler_and_are_reproducible():
    policy = TabularPolicy(3, 5)
    params = policy.init()
    draw = lambda k, q: policy.sample(params, k, q[None])[0]  # noqa: E731
    anchors = select_anchors(jax.random.key(0), draw, jnp.arange(3), 6)
    assert anchors.shape == (3, 6, 1) and int(anchors.max()) < 5
    np.testing.assert_array_equal(
        anchors, select_anchors(jax.random.key(0), draw, jnp.arange(3), 6)
    )
    assert not np.array_equal(anchors, select_anchors(jax.random.key(1), draw, jnp.arange(3), 6))


def test_toy_metrics_against_hand_values():
    bandit = tournament_bandit(jax.random.key(0), 4, 5)
    again = tournament_bandit(jax.random.key(0), 4, 5)
    np.testing.assert_array_equal(bandit.quality, again.quality)
    q = np.asarray(bandit.quality)
    best = np.eye(5)[q.argmax(-1)]
    assert float(normalized_quality(best, q)) == pytest.approx(1.0)
    uniform = np.full((4, 5), 0.2)
    assert float(normalized_quality(uniform, q)) == pytest.approx(0.0, abs=1e-6)
    # The best response beats every other candidate: win rate (1 + 3 x 1 + ½)/5 per prompt... by
    # hand: against uniform it wins 4 of 5 and ties 1: 0.9.
    assert float(hidden_quality_win_rate(best, uniform, q)) == pytest.approx(0.9)
    assert float(hidden_quality_win_rate(uniform, uniform, q)) == pytest.approx(0.5)
