"""The GRPO core: advantages and the clipped loss against hand computations, the any-order policy
against enumeration, and the update's reproducibility and non-finite handling."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from jaxlab.rl import (
    AutoregressivePolicy,
    TabularPolicy,
    group_advantages,
    grpo,
    grpo_policy_loss,
    identity_orders,
    random_orders,
    sample_sequences,
    sequence_log_probs,
    split_policy,
)

F = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0])
# The order-invariant EDA note's check 4 (re-derived there with numpy).
ZSCORE = [-0.3404, -1.1183, 0.0486, -1.1183, 0.4376, 1.9935, -0.7293, 0.8266]
RANK = [-0.2195, -1.3172, 0.2195, -1.3172, 0.6586, 1.5367, -0.6586, 1.0976]


def test_zscore_and_rank_advantages_match_the_hand_values():
    np.testing.assert_allclose(group_advantages(F), ZSCORE, atol=1e-4)
    np.testing.assert_allclose(group_advantages(10 * F + 3), ZSCORE, atol=1e-4)
    np.testing.assert_allclose(group_advantages(F, kind="rank"), RANK, atol=1e-4)
    np.testing.assert_allclose(group_advantages(np.exp(F), kind="rank"), RANK, atol=1e-4)
    # ddof = 1 and Dr. GRPO's centring, against numpy; ties give exactly zero.
    np.testing.assert_allclose(
        group_advantages(F, ddof=1), (F - F.mean()) / (F.std(ddof=1) + 1e-6), rtol=1e-5
    )
    np.testing.assert_allclose(group_advantages(F, kind="center"), F - F.mean(), rtol=1e-6)
    assert np.all(np.asarray(group_advantages(jnp.full((3, 4), 0.7))) == 0.0)


def _numpy_loss(new, old, adv, mask, clip, kl_coef, ref):
    ratio = np.exp(new - old)
    a = adv[:, None]
    surrogate = np.minimum(ratio * a, np.clip(ratio, 1 - clip, 1 + clip) * a)
    d = ref - new
    kl = (np.exp(d) - d - 1) * mask
    return -(surrogate * mask).sum() / mask.sum() + kl_coef * kl.sum() / mask.sum()


def test_clipped_loss_matches_a_hand_computation():
    rng = np.random.default_rng(0)
    new, old, ref = (np.log(rng.uniform(0.1, 0.9, (4, 3))) for _ in range(3))
    adv = np.array([1.5, -0.5, 0.2, -1.0])
    mask = np.array([[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 0]], float)
    loss, info = grpo_policy_loss(
        new, old, adv, mask, clip_epsilon=0.2, kl_coef=0.1, logp_ref=jnp.asarray(ref)
    )
    assert float(loss) == pytest.approx(_numpy_loss(new, old, adv, mask, 0.2, 0.1, ref), rel=1e-5)
    ratio = np.exp(new - old)
    outside = ((ratio < 0.8) | (ratio > 1.2)) * mask
    assert float(info.clip_fraction) == pytest.approx(outside.sum() / mask.sum(), rel=1e-6)
    # kl_coef and clip_epsilon are traceable: the jitted loss equals the eager one.
    jitted = jax.jit(
        lambda c, k: grpo_policy_loss(new, old, adv, mask, clip_epsilon=c, kl_coef=k,
                                      logp_ref=jnp.asarray(ref))[0]
    )  # fmt: skip
    assert float(jitted(0.2, 0.1)) == pytest.approx(float(loss), rel=1e-6)


def test_loss_gradient_at_ratio_one_is_reinforce():
    # At logp_new = logp_old the surrogate's gradient is mean(Â ∇log π) (per-sequence log-probs).
    policy = TabularPolicy(1, 3)
    params = policy.init(jnp.array([[0.3, -0.2, 0.5]]))
    tokens = jnp.array([[0], [2], [2], [1]])
    prompts = jnp.zeros(4, jnp.int32)
    adv = jnp.array([1.0, -0.5, 0.25, 2.0])
    old = policy.log_prob(params, tokens, prompts)
    grad = jax.grad(lambda p: grpo_policy_loss(policy.log_prob(p, tokens, prompts), old, adv)[0])(
        params
    )
    probs = np.asarray(jax.nn.softmax(params["logits"][0]))
    score = np.eye(3)[np.asarray(tokens[:, 0])] - probs[None, :]  # ∇ log softmax
    expected = -(np.asarray(adv)[:, None] * score).mean(0)
    np.testing.assert_allclose(np.asarray(grad["logits"][0]), expected, rtol=1e-5)


def _perturbed_policy(vocab, length, seed=0):
    policy = AutoregressivePolicy(vocab, length, num_prompts=2, hidden=(8,), rngs=nnx.Rngs(seed))
    graphdef, state = nnx.split(policy)
    leaves, treedef = jax.tree.flatten(state)
    keys = jax.random.split(jax.random.key(seed + 1), len(leaves))
    leaves = [v + jax.random.normal(k, v.shape) for v, k in zip(leaves, keys, strict=True)]
    return nnx.merge(graphdef, jax.tree.unflatten(treedef, leaves))


def test_any_order_likelihood_sums_to_one_and_a_position_never_sees_itself():
    policy = _perturbed_policy(2, 3)
    seqs = jnp.array(list(itertools.product(range(2), repeat=3)), jnp.int32)
    n = seqs.shape[0]
    for order in ([0, 1, 2], [2, 0, 1], [1, 2, 0]):
        orders = jnp.broadcast_to(jnp.array(order, jnp.int32), (n, 3))
        logp = sequence_log_probs(policy, seqs, jnp.ones(n, jnp.int32), orders).sum(-1)
        assert float(jnp.exp(logp).sum()) == pytest.approx(1.0, abs=1e-5)
    # The logit of position i does not depend on x_i, whatever else is revealed.
    x = jnp.array([[0, 1, 1], [1, 1, 1]], jnp.int32)
    revealed = jnp.ones((2, 3))
    logits = policy(x, revealed.at[:, 1].set(0.0), jnp.zeros(2, jnp.int32))
    changed = policy(x.at[:, 1].set(0), revealed.at[:, 1].set(0.0), jnp.zeros(2, jnp.int32))
    np.testing.assert_allclose(np.asarray(changed[:, 1]), np.asarray(logits[:, 1]), atol=1e-6)


def test_sampling_under_an_order_matches_the_likelihood():
    policy = _perturbed_policy(2, 2, seed=3)
    n = 6000
    orders = jnp.broadcast_to(jnp.array([1, 0], jnp.int32), (n, 2))
    prompts = jnp.zeros(n, jnp.int32)
    x = np.asarray(sample_sequences(policy, jax.random.key(0), prompts, orders))
    seqs = jnp.array([[0, 0], [0, 1], [1, 0], [1, 1]], jnp.int32)
    exact = np.exp(
        np.asarray(sequence_log_probs(policy, seqs, jnp.zeros(4, jnp.int32), orders[:4]).sum(-1))
    )
    freq = np.array([np.mean((x == np.asarray(s)).all(-1)) for s in seqs])
    se = np.sqrt(exact * (1 - exact) / n)
    assert np.all(np.abs(freq - exact) <= 4 * se + 1e-3), (freq, exact)


def test_orders_and_sampling_are_reproducible_from_their_keys():
    a, b = random_orders(jax.random.key(0), 8, 5), random_orders(jax.random.key(0), 8, 5)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, random_orders(jax.random.key(1), 8, 5))
    assert np.array_equal(np.sort(np.asarray(a), -1), np.asarray(identity_orders(8, 5)))
    policy = _perturbed_policy(3, 4)
    prompts = jnp.zeros(16, jnp.int32)
    x1 = sample_sequences(policy, jax.random.key(5), prompts)
    assert np.array_equal(x1, sample_sequences(policy, jax.random.key(5), prompts))
    assert not np.array_equal(x1, sample_sequences(policy, jax.random.key(6), prompts))


def _onemax_run(key, orders: bool):
    policy = AutoregressivePolicy(2, 6, hidden=(16,), rngs=nnx.Rngs(0))
    params, sample_fn, log_prob_fn = split_policy(policy)
    reward_fn = lambda k, tokens, prompts: tokens.sum(-1).astype(jnp.float32)  # noqa: E731
    order_fn = (lambda k, n: random_orders(k, n, 6)) if orders else None
    init, step = grpo(
        sample_fn, log_prob_fn, reward_fn, optax.adam(0.05), group_size=8, num_epochs=2,
        order_fn=order_fn, training_order_fn=order_fn, kl_coef=0.01,
    )  # fmt: skip

    def body(state, k):
        state, info = step(k, state, jnp.zeros(4, jnp.int32))
        return state, info.rewards.mean()

    state, rewards = jax.lax.scan(body, init(params), jax.random.split(key, 40))
    return state, rewards


def test_grpo_learns_onemax_under_random_orders_and_is_reproducible():
    run = jax.jit(_onemax_run, static_argnums=1)
    state, rewards = run(jax.random.key(0), True)
    assert float(rewards[-5:].mean()) > float(rewards[:5].mean()) + 1.0  # of 6 bits
    assert int(state.skipped_count) == 0 and int(state.count) == 40
    again, rewards_again = run(jax.random.key(0), True)
    assert np.array_equal(rewards, rewards_again)
    _, other = run(jax.random.key(1), True)
    assert not np.array_equal(rewards, other)


def test_a_non_finite_reward_is_counted_and_the_update_skipped():
    policy = TabularPolicy(2, 3)
    nan_for_action_2 = lambda k, tokens, prompts: jnp.where(  # noqa: E731
        tokens[..., 0] == 2, jnp.nan, tokens[..., 0].astype(jnp.float32)
    )
    init, step = grpo(policy.sample, policy.log_prob, nan_for_action_2, optax.sgd(1.0),
                      group_size=8)  # fmt: skip
    state = init(policy.init())
    new, info = step(jax.random.key(0), state, jnp.arange(2))
    assert bool(info.skipped) and int(new.skipped_count) == 1 and int(new.skips.rewards) == 1
    np.testing.assert_array_equal(new.params["logits"], state.params["logits"])
