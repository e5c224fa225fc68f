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


# --------------------------------------------------------------------------------------------
# Issue 37: the KL term, skipped updates by cause, aggregation, prompt and order checks.


def _counting_tabular(num_prompts=2, num_actions=3):
    policy = TabularPolicy(num_prompts, num_actions)
    calls = []

    def log_prob_fn(params, tokens, prompts, orders):
        calls.append(1)
        return policy.log_prob(params, tokens, prompts, orders)

    return policy, log_prob_fn, calls


@pytest.mark.parametrize(("kl_coef", "calls_expected"), [(0.0, 2), (0, 2), (0.1, 3)])
def test_a_zero_kl_coef_computes_no_reference_log_probs(kl_coef, calls_expected):
    policy, log_prob_fn, calls = _counting_tabular()
    reward = lambda k, t, p: t[..., 0].astype(jnp.float32)  # noqa: E731
    optimizer = grpo(policy.sample, log_prob_fn, reward, optax.sgd(0.1), kl_coef=kl_coef)
    state = optimizer.init(policy.init())
    assert (state.reference_params is None) == (kl_coef == 0)
    jax.jit(optimizer.step).lower(jax.random.key(0), state, jnp.arange(2))
    # π_old once, the loss once, and π_ref only with the KL term on.
    assert len(calls) == calls_expected


def _log_k3_float64(d: float) -> float:
    d = np.float64(d)
    if d > 30:  # e^d - d - 1 = e^d (1 - (1 + d) e^-d)
        return float(d + np.log1p(-(1 + d) * np.exp(-d)))
    return float(np.log(np.expm1(d) - d))


@pytest.mark.parametrize("d", [-300.0, -20.0, -1.5, -0.05, 1e-4, 0.3, 1.0, 7.0, 88.0, 300.0])
def test_the_kl_estimate_is_formed_in_log_space_and_matches_float64(d):
    # d = log π_ref - log π_θ: float32 e^300 overflows, its log does not.
    new = jnp.full((2,), -350.0, jnp.float32)
    ref = new + jnp.float32(d)
    d = float(np.float64(ref[0]) - np.float64(new[0]))  # the log-ratio float32 can hold
    loss, info = grpo_policy_loss(new, new, jnp.ones(2), kl_coef=0.1, logp_ref=ref)
    assert info.log_kl.dtype == jnp.float32
    assert np.isfinite(float(info.log_kl))
    assert float(info.log_kl) == pytest.approx(_log_k3_float64(d), rel=2e-6, abs=2e-6)
    if d < 88.0:  # the estimate itself is representable: the loss and gradient are finite
        kl64 = np.exp(_log_k3_float64(d))
        assert float(info.kl) == pytest.approx(kl64, rel=1e-5)
        grad = jax.grad(
            lambda x: grpo_policy_loss(x, new, jnp.ones(2), kl_coef=0.1, logp_ref=ref)[0]
        )(new)
        assert np.all(np.isfinite(np.asarray(grad)))
    else:
        assert not np.isfinite(float(loss)) or d == 88.0


def test_a_zero_kl_coef_keeps_the_loss_finite_whatever_the_reference():
    new = jnp.full((2,), -350.0)
    loss, info = grpo_policy_loss(new, new, jnp.array([1.0, -1.0]), kl_coef=0.0, logp_ref=new + 300)
    assert float(loss) == 0.0 and float(info.log_kl) == pytest.approx(300.0, rel=1e-6)


def test_leading_ones_under_random_training_orders_skips_no_update():
    # The setting where GRPO computed 0 x inf = NaN in a KL term it did not use and skipped up to
    # a quarter of its updates (issue 37): LeadingOnes-64, G = 64, sigma_sigmap, 4 epochs. The
    # previous core skipped 1-4 of these 100 updates in each of the three seeds.
    from jaxlab.rl import leading_ones, oi_eda, run_optimizer

    algorithm = oi_eda(leading_ones, 64, population=64, num_epochs=4, order_mode="sigma_sigmap")

    def skipped(key):
        state, _, _ = run_optimizer(algorithm, key, 100)
        return state.search.skipped_count, state.search.skips.kl, state.best_value

    count, kl, best = jax.jit(jax.vmap(skipped))(jax.random.split(jax.random.key(0), 3))
    assert np.asarray(count).tolist() == [0, 0, 0] and np.asarray(kl).tolist() == [0, 0, 0]
    assert float(np.min(best)) >= 20.0  # it learned (the fixed order reaches about 20 here)


def test_a_kl_overflow_is_skipped_and_counted_as_such():
    # A sequence the policy gives log-prob -300 and the reference 0: d = +300, k3 = e^300 - 301,
    # beyond float32. The log of the estimate stays finite; the update is skipped as "kl".
    sample_fn = lambda params, key, prompts, orders: jnp.zeros((prompts.shape[0], 1), jnp.int32)  # noqa: E731
    log_prob_fn = lambda params, tokens, prompts, orders: params["logp"] + 0.0 * tokens[:, 0]  # noqa: E731
    reward = lambda k, t, p: jnp.arange(t.shape[1], dtype=jnp.float32)[None].repeat(t.shape[0], 0)  # noqa: E731
    optimizer = grpo(sample_fn, log_prob_fn, reward, optax.sgd(0.1), kl_coef=0.1, group_size=4)
    state = optimizer.init({"logp": jnp.float32(-300.0)})
    state = state._replace(reference_params={"logp": jnp.float32(0.0)})
    new, info = optimizer.step(jax.random.key(0), state, jnp.zeros(1, jnp.int32))
    assert float(info.log_kl) == pytest.approx(300.0, rel=1e-6)
    assert bool(info.skipped) and bool(info.skips.kl) and not bool(info.skips.update)
    assert int(new.skips.kl) == 1 and int(new.skipped_count) == 1
    assert float(new.params["logp"]) == -300.0
    # The same step with the KL term off trains.
    off = grpo(sample_fn, log_prob_fn, reward, optax.sgd(0.1), group_size=4)
    new, info = off.step(jax.random.key(0), off.init(state.params), jnp.zeros(1, jnp.int32))
    assert not bool(info.skipped) and int(new.skipped_count) == 0


def test_token_and_sequence_aggregation_match_hand_values():
    # Ratio 1 everywhere: the surrogate is the mask-weighted mean of the advantages.
    adv = jnp.array([1.0, -2.0])
    mask = jnp.array([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    zeros = jnp.zeros((2, 3))
    token, _ = grpo_policy_loss(zeros, zeros, adv, mask, aggregation="token")
    sequence, _ = grpo_policy_loss(zeros, zeros, adv, mask, aggregation="sequence")
    assert float(token) == pytest.approx(-(3 * 1.0 - 2.0) / 4)  # every valid token weighs 1/4
    assert float(sequence) == pytest.approx(-(1.0 - 2.0) / 2)  # every response weighs 1/2
    # DeepSeekMath eq. (3)'s KL part: (1/G) Σ_i (1/|o_i|) Σ_t k3, by hand at d = log 2 and 0.
    ref = jnp.array([[np.log(2.0), 0.0, 0.0], [np.log(2.0), 0.0, 0.0]])
    k3 = 2.0 - np.log(2.0) - 1.0
    _, tok = grpo_policy_loss(zeros, zeros, adv, mask, kl_coef=1.0, logp_ref=ref)
    _, seq = grpo_policy_loss(
        zeros, zeros, adv, mask, kl_coef=1.0, logp_ref=ref, aggregation="sequence"
    )
    assert float(tok.kl) == pytest.approx(2 * k3 / 4, rel=1e-5)
    assert float(seq.kl) == pytest.approx((k3 / 3 + k3 / 1) / 2, rel=1e-5)
    # One log-prob per response: the two aggregations coincide.
    a, _ = grpo_policy_loss(jnp.zeros(2), jnp.zeros(2), adv, aggregation="token")
    b, _ = grpo_policy_loss(jnp.zeros(2), jnp.zeros(2), adv, aggregation="sequence")
    assert float(a) == float(b) == pytest.approx(0.5)


def test_grpo_takes_the_aggregation_and_returns_a_policy_optimizer():
    from jaxlab.rl import BlackBoxOptimizer, OptimizationAlgorithm, PolicyOptimizer

    policy = TabularPolicy(2, 3)
    reward = lambda k, t, p: t[..., 0].astype(jnp.float32)  # noqa: E731
    opt = grpo(policy.sample, policy.log_prob, reward, optax.sgd(0.1), aggregation="sequence")
    # One optimizer type for jaxlab.rl (issue 43); the old names are aliases of it.
    assert PolicyOptimizer is BlackBoxOptimizer is OptimizationAlgorithm
    assert type(opt) is OptimizationAlgorithm and opt._fields == ("init", "step")
    assert opt.initial_evaluations is None and opt.evaluations_per_step is None
    token = grpo(policy.sample, policy.log_prob, reward, optax.sgd(0.1))
    key, prompts = jax.random.key(3), jnp.arange(2)
    a, _ = opt.step(key, opt.init(policy.init()), prompts)
    b, _ = token.step(key, token.init(policy.init()), prompts)
    # Length-1 responses: both aggregations give the same update.
    np.testing.assert_allclose(a.params["logits"], b.params["logits"], rtol=1e-6)


def test_out_of_range_prompts_raise_when_concrete_and_are_counted_when_traced():
    policy = TabularPolicy(4, 3)
    reward = lambda k, t, p: t[..., 0].astype(jnp.float32)  # noqa: E731
    checked = grpo(policy.sample, policy.log_prob, reward, optax.sgd(0.1), num_prompts=4)
    state = checked.init(policy.init())
    with pytest.raises(ValueError, match="prompts must lie in"):
        checked.step(jax.random.key(0), state, jnp.array([0, 7]))
    new, info = jax.jit(checked.step)(jax.random.key(0), state, jnp.array([0, 7]))
    assert int(info.invalid_prompts) == 1 and bool(info.skips.prompts)
    assert int(new.skips.prompts) == 1 and int(new.skipped_count) == 1
    np.testing.assert_array_equal(new.params["logits"], state.params["logits"])
    # Without num_prompts the table itself reads NaN for the traced index: skipped, not clamped.
    plain = grpo(policy.sample, policy.log_prob, reward, optax.sgd(0.1))
    with pytest.raises(ValueError, match="prompts must lie in"):
        plain.step(jax.random.key(0), state, jnp.array([0, 7]))
    new, info = jax.jit(plain.step)(jax.random.key(0), state, jnp.array([0, 7]))
    assert bool(info.skipped) and bool(info.skips.log_probs) and int(new.skipped_count) == 1
    np.testing.assert_array_equal(new.params["logits"], state.params["logits"])
    # In range: trained, nothing skipped.
    new, info = jax.jit(checked.step)(jax.random.key(0), state, jnp.array([0, 3]))
    assert not bool(info.skipped) and int(info.invalid_prompts) == 0


def test_non_permutation_orders_raise_when_concrete_and_read_nan_when_traced():
    from jaxlab.rl import order_masks

    with pytest.raises(ValueError, match="orders must hold one permutation"):
        order_masks(jnp.array([[0, 1, 2], [0, 0, 1]]))
    masks = jax.jit(order_masks)(jnp.array([[0, 1, 2], [0, 0, 1]]))
    assert np.all(np.isfinite(np.asarray(masks[0]))) and np.all(np.isnan(np.asarray(masks[1])))
    np.testing.assert_array_equal(masks[0], order_masks(jnp.array([[0, 1, 2]]))[0])


def test_out_of_range_ternary_actions_raise_or_skip_the_update():
    from jaxlab.rl import INVALID, TernaryBandit, ternary_labels, ternary_rewards

    bandit = TernaryBandit(jnp.array([1, 0]), jnp.array([1.0, 0.5]), 3)
    with pytest.raises(ValueError, match="actions must lie in"):
        ternary_labels(jax.random.key(0), bandit, jnp.array([0, 1]), jnp.array([3, 4]))
    with pytest.raises(ValueError, match="prompts must lie in"):
        ternary_labels(jax.random.key(0), bandit, jnp.array([0, 2]), jnp.array([3, 1]))
    labels = jax.jit(ternary_labels)(
        jax.random.key(0), bandit, jnp.array([0, 1]), jnp.array([3, 4])
    )
    assert np.asarray(labels).tolist() == [2, INVALID]  # abstain, then out of range
    rewards = jax.jit(lambda lab: ternary_rewards(lab, uncertain_reward=0.3))(labels)
    assert float(rewards[0]) == pytest.approx(0.3) and np.isnan(float(rewards[1]))
