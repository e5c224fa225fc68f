"""Bad-input probes for jaxlab.rl (every public callable of its ``__all__``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxlab import rl as R
from tests.bad_input import no_probes, probes, raises, status

NAN = float("nan")
_P = "jaxlab.rl."
_IDENT = lambda q, x: x  # noqa: E731
_JUDGE = R.synthetic_pairwise_judge(_IDENT)
_BAD_JUDGE = lambda q, x, y: 1.0 + x - y  # noqa: E731  (1.5 for a gap of 0.5: not a probability)
_O, _A = jnp.array([0.5, 0.0]), jnp.array([0.0])


def _key():
    return jax.random.key(0)


def _policy():
    return R.AutoregressivePolicy(3, 2, num_prompts=2, hidden=(4,), rngs=nnx.Rngs(0))


def _tabular_grpo(reward_fn, **kwargs):
    policy = R.TabularPolicy(2, 3)
    init, step = R.grpo(policy.sample, policy.log_prob, reward_fn, optax.sgd(0.1), **kwargs)
    return step(_key(), init(policy.init()), jnp.arange(2))


_GRPO4 = R.grpo(
    R.TabularPolicy(4, 3).sample,
    R.TabularPolicy(4, 3).log_prob,
    lambda k, t, p: t[..., 0] * 1.0,
    optax.sgd(0.1),
    num_prompts=4,
)


def _grpo(**overrides):
    policy = R.TabularPolicy(2, 3)
    kwargs = dict(
        sample_fn=policy.sample,
        log_prob_fn=policy.log_prob,
        reward_fn=lambda k, t, p: t[..., 0] * 1.0,
        optimizer=optax.sgd(0.1),
    )
    kwargs.update(overrides)
    return R.grpo(**kwargs)


for _name, _reason in {
    "GRPOInfo": "a NamedTuple returned by grpo's step",
    "GRPOState": "a state NamedTuple built by grpo's init",
    "GRPOSkips": "a NamedTuple of counts built by grpo",
    "PolicyOptimizer": "the NamedTuple grpo returns",
    "LossInfo": "a NamedTuple returned by grpo_policy_loss",
    "JudgeInfo": "a NamedTuple returned by the reward functions",
    "SequenceQualityTask": "a NamedTuple built by hidden_quality_sequences, which validates",
    "TernaryBandit": "a NamedTuple built by ternary_bandit, which validates",
    "TournamentBandit": "a NamedTuple built by tournament_bandit, which validates",
}.items():
    no_probes(_P + _name, _reason)

probes(
    _P + "group_advantages",
    raises("rewards", lambda: R.group_advantages(jnp.ones((3, 1))), ValueError, "group size 1"),
    raises("rewards", lambda: R.group_advantages(jnp.ones(())), ValueError, "scalar"),
    raises("rewards", lambda: R.group_advantages("1, 2"), TypeError),
    raises("kind", lambda: R.group_advantages(jnp.ones(4), kind="softmax"), ValueError),
    raises("epsilon", lambda: R.group_advantages(jnp.ones(4), epsilon=-1.0), ValueError),
    raises("ddof", lambda: R.group_advantages(jnp.ones(4), ddof=2), ValueError),
)
probes(
    _P + "grpo_policy_loss",
    raises("logp_old", lambda: R.grpo_policy_loss(jnp.zeros(3), jnp.zeros(2), jnp.ones(3))),
    raises(
        "logp_new",
        lambda: R.grpo_policy_loss(jnp.zeros((3, 2, 2)), jnp.zeros((3, 2, 2)), jnp.ones(3)),
        ValueError,
        "two extra axes",
    ),  # fmt: skip
    raises(
        "logp_new",
        lambda: R.grpo_policy_loss(jnp.zeros(3, jnp.int32), jnp.zeros(3), jnp.ones(3)),
        TypeError,
    ),  # fmt: skip
    raises(
        "clip_epsilon",
        lambda: R.grpo_policy_loss(jnp.zeros(2), jnp.zeros(2), jnp.ones(2), clip_epsilon=-0.1),
        ValueError,
    ),  # fmt: skip
    raises(
        "kl_coef",
        lambda: R.grpo_policy_loss(jnp.zeros(2), jnp.zeros(2), jnp.ones(2), kl_coef=NAN),
        ValueError,
    ),  # fmt: skip
    raises(
        "token_mask",
        lambda: R.grpo_policy_loss(jnp.zeros((2, 3)), jnp.zeros((2, 3)), jnp.ones(2), jnp.ones(3)),
        ValueError,
    ),  # fmt: skip
    raises("advantages", lambda: R.grpo_policy_loss(jnp.zeros(2), jnp.zeros(2), None), TypeError),
    status(
        "advantages",
        lambda: R.grpo_policy_loss(jnp.zeros(2), jnp.zeros(2), jnp.array([NAN, 1.0]))[1],
        lambda info: int(info.nonfinite_count) == 1,
        "NaN advantage counted",
    ),
)
probes(
    _P + "grpo",
    raises("group_size", lambda: _grpo(group_size=1), ValueError, "a group of one"),
    raises("sample_fn", lambda: _grpo(sample_fn=None), TypeError),
    raises("reward_fn", lambda: _grpo(reward_fn="judge"), TypeError),
    raises("optimizer", lambda: _grpo(optimizer=0.1), TypeError),
    raises("advantage", lambda: _grpo(advantage="ranked"), ValueError),
    raises("clip_epsilon", lambda: _grpo(clip_epsilon=-0.2), ValueError),
    raises("kl_coef", lambda: _grpo(kl_coef=-1.0), ValueError),
    raises("kl_coef", lambda: _grpo(kl_coef=NAN), ValueError),
    raises("kl_coef", lambda: _grpo(kl_coef=float("inf")), ValueError),
    raises("aggregation", lambda: _grpo(aggregation="group"), ValueError),
    raises("num_prompts", lambda: _grpo(num_prompts=0), ValueError),
    raises(
        "prompts",
        lambda: _GRPO4.step(_key(), _GRPO4.init(R.TabularPolicy(4, 3).init()), jnp.array([0, 7])),
        ValueError,
        "prompt index past the end",
    ),
    status(
        "prompts",
        lambda: jax.jit(_GRPO4.step)(
            _key(), _GRPO4.init(R.TabularPolicy(4, 3).init()), jnp.array([0, 7])
        ),
        lambda out: int(out[1].invalid_prompts) == 1 and int(out[0].skips.prompts) == 1,
        "traced prompt past the end counted, update skipped",
    ),
    raises("num_epochs", lambda: _grpo(num_epochs=0), ValueError),
    raises("order_fn", lambda: _grpo(order_fn=3), TypeError),
    raises(
        "reward_fn",
        lambda: _tabular_grpo(lambda k, t, p: jnp.ones(3), group_size=4),
        ValueError,
        "rewards of the wrong shape",
    ),
    status(
        "reward_fn",
        lambda: _tabular_grpo(lambda k, t, p: jnp.full(t.shape[:2], NAN), group_size=4)[0],
        lambda state: int(state.skipped_count) == 1 and int(state.skips.rewards) == 1,
        "NaN rewards counted, update skipped",
    ),
)
probes(
    _P + "identity_orders",
    raises("num", lambda: R.identity_orders(0, 3), ValueError),
    raises("length", lambda: R.identity_orders(2, "3"), TypeError),
)
probes(
    _P + "random_orders",
    raises("rng_key", lambda: R.random_orders(None, 2, 3), TypeError),
    raises("length", lambda: R.random_orders(_key(), 2, 0), ValueError),
)
probes(
    _P + "AutoregressivePolicy",
    raises("vocab_size", lambda: R.AutoregressivePolicy(1, 3, rngs=nnx.Rngs(0)), ValueError),
    raises("length", lambda: R.AutoregressivePolicy(2, 0, rngs=nnx.Rngs(0)), ValueError),
    raises("num_prompts", lambda: R.AutoregressivePolicy(2, 3, num_prompts=0, rngs=nnx.Rngs(0))),
    raises("hidden", lambda: R.AutoregressivePolicy(2, 3, hidden=8, rngs=nnx.Rngs(0)), TypeError),
    raises("hidden[1]", lambda: R.AutoregressivePolicy(2, 3, hidden=(8, 0), rngs=nnx.Rngs(0))),
)
probes(
    _P + "sample_sequences",
    raises("policy", lambda: R.sample_sequences("policy", _key(), jnp.zeros(2, jnp.int32))),
    raises("rng_key", lambda: R.sample_sequences(_policy(), None, jnp.zeros(2, jnp.int32))),
    raises("prompts", lambda: R.sample_sequences(_policy(), _key(), jnp.array([0, 2])), ValueError),
    raises("prompts", lambda: R.sample_sequences(_policy(), _key(), jnp.zeros(2)), TypeError),
    raises(
        "orders",
        lambda: R.sample_sequences(_policy(), _key(), jnp.zeros(2, jnp.int32), jnp.zeros((2, 2))),
        TypeError,
    ),
    raises(
        "orders",
        lambda: R.sample_sequences(_policy(), _key(), jnp.zeros(1, jnp.int32), jnp.array([[0, 0]])),
        ValueError,
        "not a permutation",
    ),
    raises(
        "orders",
        lambda: R.sample_sequences(_policy(), _key(), jnp.zeros(2, jnp.int32), jnp.array([[0, 1]])),
        ValueError,
        "wrong shape",
    ),
)
probes(
    _P + "sequence_log_probs",
    raises(
        "tokens",
        lambda: R.sequence_log_probs(_policy(), jnp.array([[0, 3]]), jnp.zeros(1, jnp.int32)),
        ValueError,
        "outside the vocabulary",
    ),
    raises(
        "tokens",
        lambda: R.sequence_log_probs(
            _policy(), jnp.zeros((1, 3), jnp.int32), jnp.zeros(1, jnp.int32)
        ),
        ValueError,
        "wrong length",
    ),
    raises(
        "policy", lambda: R.sequence_log_probs(None, jnp.zeros((1, 2), jnp.int32), jnp.zeros(1))
    ),
)
probes(
    _P + "split_policy",
    raises("policy", lambda: R.split_policy(nnx.Linear(2, 2, rngs=nnx.Rngs(0))), TypeError),
)

probes(
    _P + "win_rate_reward",
    raises(
        "anchors",
        lambda: R.win_rate_reward(_key(), _JUDGE, _O, jnp.zeros(0)),
        ValueError,
        "empty anchor set",
    ),  # fmt: skip
    raises(
        "judge_fn",
        lambda: R.win_rate_reward(_key(), _BAD_JUDGE, _O, _A),
        ValueError,
        "judge outside [0, 1]",
    ),  # fmt: skip
    raises(
        "judge_fn",
        lambda: R.win_rate_reward(_key(), lambda q, x, y: jnp.nan, _O, _A),
        ValueError,
        "NaN judge",
    ),  # fmt: skip
    raises("judge_fn", lambda: R.win_rate_reward(_key(), "judge", _O, _A), TypeError),
    raises(
        "anchor_mask",
        lambda: R.win_rate_reward(_key(), _JUDGE, _O, _A, anchor_mask=jnp.zeros(1)),
        ValueError,
    ),  # fmt: skip
    raises(
        "anchor_mask",
        lambda: R.win_rate_reward(_key(), _JUDGE, _O, _A, anchor_mask=jnp.ones(2)),
        ValueError,
    ),  # fmt: skip
    raises("both_orders", lambda: R.win_rate_reward(_key(), _JUDGE, _O, _A, both_orders=1)),
    raises("rng_key", lambda: R.win_rate_reward(None, _JUDGE, _O, _A), TypeError),
    raises("responses", lambda: R.win_rate_reward(_key(), _JUDGE, jnp.zeros(0), _A), ValueError),
    status(
        "judge_fn",
        lambda: jax.jit(lambda k: R.win_rate_reward(k, _BAD_JUDGE, _O, _A))(_key()),
        lambda out: int(out[1].invalid_count) == 1 and bool(jnp.isnan(out[0][0])),
        "traced judge outside [0, 1]: counted, reward NaN",
    ),
)
probes(
    _P + "single_pairwise_reward",
    raises(
        "responses",
        lambda: R.single_pairwise_reward(_key(), _JUDGE, _A),
        ValueError,
        "group size 1",
    ),  # fmt: skip
    raises("judge_fn", lambda: R.single_pairwise_reward(_key(), _BAD_JUDGE, _O), ValueError),
    raises("sample", lambda: R.single_pairwise_reward(_key(), _JUDGE, _O, sample="no")),
    status(
        "judge_fn",
        lambda: jax.jit(lambda k: R.single_pairwise_reward(k, _BAD_JUDGE, _O))(_key())[1],
        lambda info: int(info.invalid_count) >= 1,
        "traced judge outside [0, 1] counted",
    ),
)
probes(
    _P + "round_robin_reward",
    raises(
        "responses", lambda: R.round_robin_reward(_key(), _JUDGE, _A), ValueError, "group size 1"
    ),  # fmt: skip
    raises("judge_fn", lambda: R.round_robin_reward(_key(), _BAD_JUDGE, _O), ValueError),
    raises("judge_fn", lambda: R.round_robin_reward(_key(), None, _O), TypeError),
)
probes(
    _P + "pointwise_reward",
    raises("score_fn", lambda: R.pointwise_reward(_key(), 10, _O), TypeError),
    raises("responses", lambda: R.pointwise_reward(_key(), lambda k, q, x: x, jnp.zeros(0))),
    raises("rng_key", lambda: R.pointwise_reward(1, lambda k, q, x: x, _O), TypeError),
    status(
        "score_fn",
        lambda: R.pointwise_reward(_key(), lambda k, q, x: x / 0.0, _O)[1],
        lambda info: int(info.invalid_count) == 2,
        "non-finite scores counted",
    ),
)
probes(
    _P + "synthetic_pairwise_judge",
    raises("temperature", lambda: R.synthetic_pairwise_judge(_IDENT, temperature=0.0), ValueError),
    raises("flip_prob", lambda: R.synthetic_pairwise_judge(_IDENT, flip_prob=1.5), ValueError),
    raises("position_bias", lambda: R.synthetic_pairwise_judge(_IDENT, position_bias=NAN)),
    raises("quality_fn", lambda: R.synthetic_pairwise_judge(None), TypeError),
)
probes(
    _P + "synthetic_rubric_judge",
    raises("noise_std", lambda: R.synthetic_rubric_judge(_IDENT, noise_std=-1.0), ValueError),
    raises("scale", lambda: R.synthetic_rubric_judge(_IDENT, scale=0.0), ValueError),
    raises("offset_fn", lambda: R.synthetic_rubric_judge(_IDENT, 0.5), TypeError),
)
probes(
    _P + "select_anchors",
    raises(
        "num_anchors",
        lambda: R.select_anchors(_key(), lambda k, q: q, jnp.arange(2), 0),
        ValueError,
        "no anchors",
    ),  # fmt: skip
    raises("sampler", lambda: R.select_anchors(_key(), None, jnp.arange(2), 2), TypeError),
    raises("rng_key", lambda: R.select_anchors("key", lambda k, q: q, jnp.arange(2), 2)),
    raises("contexts", lambda: R.select_anchors(_key(), lambda k, q: q, jnp.zeros(0), 2)),
)

_LAB = jnp.array([R.RIGHT, R.WRONG, R.UNCERTAIN, R.RIGHT])
probes(
    _P + "ternary_rewards",
    raises(
        "labels", lambda: R.ternary_rewards(jnp.array([0, 3]), uncertain_reward=0.2), ValueError
    ),
    raises("labels", lambda: R.ternary_rewards(jnp.array([0.0, 1.0]), uncertain_reward=0.2)),
    raises("uncertain_reward", lambda: R.ternary_rewards(_LAB, uncertain_reward="0.2"), TypeError),
    raises("right_reward", lambda: R.ternary_rewards(_LAB, uncertain_reward=0.2, right_reward=NAN)),
    status(
        "labels",
        lambda: jax.jit(lambda lab: R.ternary_rewards(lab, uncertain_reward=0.2))(
            jnp.array([0, R.INVALID])
        ),
        lambda r: np.isnan(float(r[1])),
        "traced INVALID label gives a NaN reward",
    ),
)
probes(
    _P + "dynamic_uncertainty_gain",
    raises("labels", lambda: R.dynamic_uncertainty_gain(jnp.array([[0]])), ValueError, "G = 1"),
    raises("suppression_weight", lambda: R.dynamic_uncertainty_gain(_LAB, suppression_weight=-1.0)),
    raises("epsilon", lambda: R.dynamic_uncertainty_gain(_LAB, epsilon=NAN), ValueError),
)
probes(
    _P + "ucpo_advantages",
    raises("labels", lambda: R.ucpo_advantages(jnp.array([[2]])), ValueError, "group size 1"),
    raises("labels", lambda: R.ucpo_advantages(jnp.array([0, 7])), ValueError),
    raises("filter_non_ternary", lambda: R.ucpo_advantages(_LAB, filter_non_ternary=1), TypeError),
    raises("batch_smoothing", lambda: R.ucpo_advantages(_LAB, batch_smoothing=1.5), ValueError),
    raises("tanh_scale", lambda: R.ucpo_advantages(_LAB, tanh_scale=-2.0), ValueError),
    raises("suppression_weight", lambda: R.ucpo_advantages(_LAB, suppression_weight=-0.5)),
)
probes(
    _P + "answer_metrics",
    raises("labels", lambda: R.answer_metrics(jnp.array([0, 3])), ValueError),
    raises("labels", lambda: R.answer_metrics(jnp.zeros(0, jnp.int32)), ValueError, "empty"),
    raises("labels", lambda: R.answer_metrics(jnp.array([0.5])), TypeError),
)

probes(
    _P + "TabularPolicy",
    raises("num_actions", lambda: R.TabularPolicy(2, 1), ValueError),
    raises("num_prompts", lambda: R.TabularPolicy(0, 3), ValueError),
    raises("shared_bias", lambda: R.TabularPolicy(2, 3, shared_bias="yes"), TypeError),
    raises("logits", lambda: R.TabularPolicy(2, 3).init(jnp.zeros((3, 2))), ValueError),
    raises("bias", lambda: R.TabularPolicy(2, 3).init(bias=jnp.zeros(2)), ValueError),
    raises(
        "rng_key",
        lambda: R.TabularPolicy(2, 3).sample(R.TabularPolicy(2, 3).init(), None, jnp.arange(2)),
        TypeError,
    ),  # fmt: skip
    raises(
        "prompts",
        lambda: R.TabularPolicy(2, 3).log_prob(
            R.TabularPolicy(2, 3).init(), jnp.zeros((2, 1), jnp.int32), jnp.array([0, 2])
        ),
        ValueError,
        "prompt index past the end",
    ),
    status(
        "prompts",
        lambda: jax.jit(R.TabularPolicy(2, 3).log_prob)(
            R.TabularPolicy(2, 3).init(), jnp.zeros((2, 1), jnp.int32), jnp.array([0, 2])
        ),
        lambda logp: np.isfinite(float(logp[0, 0])) and np.isnan(float(logp[1, 0])),
        "traced prompt past the end reads NaN, never a clamped row",
    ),
)
probes(
    _P + "tournament_bandit",
    raises("num_candidates", lambda: R.tournament_bandit(_key(), 4, 1), ValueError),
    raises("rng_key", lambda: R.tournament_bandit(0, 4, 4), TypeError),
    raises("num_prompts", lambda: R.tournament_bandit(_key(), 0, 4), ValueError),
)
probes(
    _P + "hidden_quality_sequences",
    raises("length", lambda: R.hidden_quality_sequences(_key(), 2, 1, 3), ValueError),
    raises("vocab_size", lambda: R.hidden_quality_sequences(_key(), 2, 3, 1), ValueError),
    raises("rng_key", lambda: R.hidden_quality_sequences(None), TypeError),
)
_Q = jnp.zeros((2, 3))
probes(
    _P + "normalized_quality",
    raises("probs", lambda: R.normalized_quality(jnp.ones(3) / 3, _Q), ValueError),
    raises("probs", lambda: R.normalized_quality(jnp.ones((2, 4)) / 4, _Q), ValueError),
)
probes(
    _P + "hidden_quality_win_rate",
    raises("probs", lambda: R.hidden_quality_win_rate(jnp.ones((3, 3)), _Q + 1 / 3, _Q)),
    raises("quality", lambda: R.hidden_quality_win_rate(_Q, _Q, np.zeros(3)), ValueError),
)
probes(
    _P + "ternary_bandit",
    raises("knowability", lambda: R.ternary_bandit(_key(), 6, 4), ValueError, "4 levels, 6"),
    raises("knowability", lambda: R.ternary_bandit(_key(), 4, 4, (0.0, 1.5)), ValueError),
    raises("num_answers", lambda: R.ternary_bandit(_key(), 8, 1), ValueError),
    raises("rng_key", lambda: R.ternary_bandit(None), TypeError),
)
_BANDIT = R.TernaryBandit(jnp.array([0, 1]), jnp.array([0.0, 1.0]), 4)
probes(
    _P + "ternary_labels",
    raises("actions", lambda: R.ternary_labels(_key(), _BANDIT, jnp.arange(2), jnp.zeros(3, int))),
    raises("rng_key", lambda: R.ternary_labels(None, _BANDIT, jnp.arange(2), jnp.arange(2))),
    raises(
        "actions", lambda: R.ternary_labels(_key(), _BANDIT, jnp.arange(2), jnp.ones(2)), TypeError
    ),
    raises(
        "actions",
        lambda: R.ternary_labels(_key(), _BANDIT, jnp.arange(2), jnp.array([0, 99])),
        ValueError,
        "action past abstain",
    ),
    raises(
        "prompts",
        lambda: R.ternary_labels(_key(), _BANDIT, jnp.array([0, 99]), jnp.array([0, 0])),
        ValueError,
        "prompt past the end",
    ),
    status(
        "actions",
        lambda: jax.jit(R.ternary_labels)(_key(), _BANDIT, jnp.arange(2), jnp.array([0, 99])),
        lambda lab: int(lab[1]) == R.INVALID,
        "traced action past abstain labelled INVALID",
    ),
)
probes(
    _P + "expected_answer_metrics",
    raises("probs", lambda: R.expected_answer_metrics(_BANDIT, jnp.ones((2, 4)) / 4), ValueError),
    raises("probs", lambda: R.expected_answer_metrics(_BANDIT, jnp.ones(5) / 5), ValueError),
)


# --------------------------------------------------------------------------------------------
# Order-invariant EDA, baselines and black-box benchmarks.

_X4 = jnp.array([[0, 1, 1, 0]])
_ORD4 = jnp.array([[0, 1, 2, 3]])
_NAN_AT_ZERO = lambda x: jnp.where(jnp.sum(x, -1) == 0, NAN, 1.0)  # noqa: E731
# Finite at all zeros and all ones (the construction probe), NaN on a quarter of the points.
_NAN_SOMEWHERE = lambda x: jnp.where((x[:, 0] == 1) & (x[:, 1] == 0), NAN, 1.0)  # noqa: E731
_WRONG_SHAPE = lambda x: jnp.sum(x)  # noqa: E731  (one value for the whole batch)


def _optimizer_probes(factory, **kwargs):
    return [
        raises("num_variables", lambda: factory(R.onemax, 0, **kwargs), ValueError, "zero"),
        raises("objective", lambda: factory(None, 4, **kwargs), TypeError),
        raises("objective", lambda: factory(_WRONG_SHAPE, 4, **kwargs), ValueError, "shape"),
        raises("objective", lambda: factory(_NAN_AT_ZERO, 4, **kwargs), ValueError, "non-finite"),
    ]


for _name in ("BlackBoxInfo", "BlackBoxState", "BlackBoxResult"):
    no_probes(_P + _name, "a NamedTuple returned by the optimisers' steps or by maximize")
no_probes(_P + "BlackBoxOptimizer", "an alias of OptimizationAlgorithm, built by the factories")
no_probes(
    _P + "OptimizationAlgorithm", "the (init, step) NamedTuple every optimizer factory returns"
)
probes(
    _P + "counted",
    raises("fn", lambda: R.counted(None, 3), TypeError),
    raises("fn", lambda: R.counted(len, 3), TypeError, "a builtin holds no attribute"),
    raises("evaluations", lambda: R.counted(lambda key: key, -1), ValueError),
    raises("evaluations", lambda: R.counted(lambda key: key, 2.0), TypeError),
)
for _name in ("NKLandscape", "MaxCut", "QUBO"):
    no_probes(_P + _name, "an instance NamedTuple; its builder validates (see nk_landscape etc.)")

probes(
    _P + "oi_eda",
    *_optimizer_probes(R.oi_eda),
    raises("population", lambda: R.oi_eda(R.onemax, 4, population=1), ValueError),
    raises("order_mode", lambda: R.oi_eda(R.onemax, 4, order_mode="random"), ValueError),
    raises("advantage", lambda: R.oi_eda(R.onemax, 4, advantage="center"), ValueError),
    raises("clip_epsilon", lambda: R.oi_eda(R.onemax, 4, clip_epsilon=-1.0), ValueError),
    raises("num_epochs", lambda: R.oi_eda(R.onemax, 4, num_epochs=0), ValueError),
    raises("model", lambda: R.oi_eda(R.onemax, 4, model="transformer"), ValueError),
    raises("model", lambda: R.oi_eda(R.onemax, 4, model=R.AnyOrderLogistic(5)), ValueError),
    raises("rng_key", lambda: R.oi_eda(R.onemax, 4).init(None), TypeError),
    status(
        "objective",
        lambda: R.oi_eda(_NAN_SOMEWHERE, 4, population=8).step(
            _key(), R.oi_eda(R.onemax, 4, population=8).init(_key())
        )[0],
        lambda state: int(state.nonfinite_count) == 1 and int(state.search.skipped_count) == 1,
        "NaN values counted, update skipped",
    ),
)
probes(
    _P + "umda",
    *_optimizer_probes(R.umda, population=8, num_selected=4),
    raises("num_selected", lambda: R.umda(R.onemax, 4, population=8, num_selected=9), ValueError),
    raises("population", lambda: R.umda(R.onemax, 4, population=1), ValueError),
)
probes(
    _P + "pbil",
    *_optimizer_probes(R.pbil),
    raises("learning_rate", lambda: R.pbil(R.onemax, 4, learning_rate=1.5), ValueError),
    raises("num_selected", lambda: R.pbil(R.onemax, 4, num_selected=0), ValueError),
)
probes(
    _P + "one_plus_one_ea",
    *_optimizer_probes(R.one_plus_one_ea),
    raises("mutation_rate", lambda: R.one_plus_one_ea(R.onemax, 4, mutation_rate=-0.1), ValueError),
)
probes(
    _P + "genetic_algorithm",
    *_optimizer_probes(R.genetic_algorithm),
    raises(
        "crossover_probability",
        lambda: R.genetic_algorithm(R.onemax, 4, crossover_probability=NAN),
        ValueError,
    ),
    raises("population", lambda: R.genetic_algorithm(R.onemax, 4, population=1), ValueError),
)
probes(
    _P + "maximize",
    raises("budget", lambda: R.maximize(R.onemax, 4, _key(), 10), ValueError, "under a generation"),
    raises("budget", lambda: R.maximize(R.onemax, 4, _key(), 0), ValueError),
    raises("num_variables", lambda: R.maximize(R.onemax, 0, _key(), 1000), ValueError),
    raises("method", lambda: R.maximize(R.onemax, 4, _key(), 1000, method="cma"), ValueError),
    raises("rng_key", lambda: R.maximize(R.onemax, 4, None, 1000), TypeError),
    raises(
        "objective",
        lambda: R.maximize(_NAN_SOMEWHERE, 4, _key(), 128, population=8),  # fmt: skip
        ValueError,
        "non-finite values during the run",
    ),
)
probes(
    _P + "num_steps_for_budget",
    raises("budget", lambda: R.num_steps_for_budget(R.umda(R.onemax, 4), 63), ValueError),
    raises("budget", lambda: R.num_steps_for_budget(R.umda(R.onemax, 4), 1e4), TypeError),
    raises("optimizer", lambda: R.num_steps_for_budget((None, None), 100), TypeError),
    raises(
        "optimizer",
        lambda: R.num_steps_for_budget(R.OptimizationAlgorithm(len, len), 100),
        ValueError,
        "uncounted",
    ),
)
probes(
    _P + "AnyOrderLogistic",
    raises("num_variables", lambda: R.AnyOrderLogistic(0), ValueError),
    raises("num_variables", lambda: R.AnyOrderLogistic(4.0), TypeError),
)
probes(
    _P + "AnyOrderMLP",
    raises("num_variables", lambda: R.AnyOrderMLP(0, rngs=nnx.Rngs(0)), ValueError),
    raises("hidden", lambda: R.AnyOrderMLP(4, 16, rngs=nnx.Rngs(0)), TypeError),
    raises("hidden[0]", lambda: R.AnyOrderMLP(4, (0,), rngs=nnx.Rngs(0)), ValueError),
    raises("rngs", lambda: R.AnyOrderMLP(4, (8,), rngs=0), TypeError),
)
probes(
    _P + "order_masks",
    raises("orders", lambda: R.order_masks(jnp.zeros(4, jnp.int32)), ValueError, "1-D"),
    raises("orders", lambda: R.order_masks(jnp.zeros((1, 4))), TypeError, "floats"),
    raises(
        "orders", lambda: R.order_masks(jnp.array([[0, 0, 1]])), ValueError, "not a permutation"
    ),
    status(
        "orders",
        lambda: jax.jit(R.order_masks)(jnp.array([[0, 0, 1]])),
        lambda m: bool(np.all(np.isnan(np.asarray(m)))),
        "traced non-permutation gives a NaN mask",
    ),
)
probes(
    _P + "sample_any_order",
    raises("model", lambda: R.sample_any_order(_policy(), _key(), _ORD4), TypeError),
    raises("rng_key", lambda: R.sample_any_order(R.AnyOrderLogistic(4), None, _ORD4), TypeError),
    raises(
        "orders",
        lambda: R.sample_any_order(R.AnyOrderLogistic(4), _key(), jnp.array([[0, 0, 1, 2]])),
        ValueError,
        "not a permutation",
    ),
    raises(
        "orders",
        lambda: R.sample_any_order(R.AnyOrderLogistic(4), _key(), jnp.array([[0, 1, 2]])),
        ValueError,
        "wrong length",
    ),
)
probes(
    _P + "log_prob_any_order",
    raises("x", lambda: R.log_prob_any_order(R.AnyOrderLogistic(4), _X4 * 2, _ORD4), ValueError),
    raises(
        "x",
        lambda: R.log_prob_any_order(R.AnyOrderLogistic(4), _X4[:, :3], _ORD4),
        ValueError,
        "wrong width",
    ),  # fmt: skip
    raises(
        "orders",
        lambda: R.log_prob_any_order(R.AnyOrderLogistic(4), _X4, _ORD4[:, ::-1] * 0),
        ValueError,
    ),  # fmt: skip
    raises(
        "orders",
        lambda: R.log_prob_any_order(R.AnyOrderLogistic(4), _X4, jnp.tile(_ORD4, (2, 1))),
        ValueError,
        "one row per point",
    ),  # fmt: skip
)
for _name, _fn in (("onemax", R.onemax), ("leading_ones", R.leading_ones)):
    probes(
        _P + _name,
        raises("x", lambda f=_fn: f("0101"), TypeError),
        raises("x", lambda f=_fn: f(jnp.ones(())), ValueError, "scalar"),
    )
probes(
    _P + "deceptive_trap",
    raises("block_size", lambda: R.deceptive_trap(jnp.ones(8), block_size=1), ValueError),
    raises("x", lambda: R.deceptive_trap(jnp.ones(6), block_size=4), ValueError, "not blocks"),
)
probes(
    _P + "nk_landscape",
    raises("k", lambda: R.nk_landscape(_key(), 4, 4), ValueError, "k >= n"),
    raises("k", lambda: R.nk_landscape(_key(), 4, -1), ValueError),
    raises("rng_key", lambda: R.nk_landscape(None, 4, 1), TypeError),
    raises("x", lambda: R.nk_landscape(_key(), 4, 1)(jnp.ones(5)), ValueError, "wrong width"),
)
probes(
    _P + "random_maxcut",
    raises("edge_probability", lambda: R.random_maxcut(_key(), 4, 1.5), ValueError),
    raises("num_variables", lambda: R.random_maxcut(_key(), 1, 0.5), ValueError),
    raises("x", lambda: R.random_maxcut(_key(), 4, 0.5)(jnp.ones(3)), ValueError, "wrong width"),
)
probes(
    _P + "random_qubo",
    raises("num_variables", lambda: R.random_qubo(_key(), 0), ValueError),
    raises("x", lambda: R.random_qubo(_key(), 4)(jnp.ones(3)), ValueError, "wrong width"),
)
probes(
    _P + "binary_benchmark_suite",
    raises("num_variables", lambda: R.binary_benchmark_suite(_key(), 1), ValueError),
    raises("trap_block", lambda: R.binary_benchmark_suite(_key(), 8, trap_block=0), ValueError),
    raises("k", lambda: R.binary_benchmark_suite(_key(), 8, nk_k=8), ValueError),
    raises(
        "edge_probability",
        lambda: R.binary_benchmark_suite(_key(), 8, edge_probability=-1),
        ValueError,
    ),  # fmt: skip
)
probes(
    _P + "run_optimizer",
    raises("optimizer", lambda: R.run_optimizer((None, None), _key(), 3), TypeError),
    raises("num_steps", lambda: R.run_optimizer(R.pbil(R.onemax, 4), _key(), 0), ValueError),
    raises("num_steps", lambda: R.run_optimizer(R.pbil(R.onemax, 4), _key(), 2.0), TypeError),
)

# Issue 44: non-binary points, probabilities that are not laws (family B) and a score callback of
# the wrong shape (F).
_K44 = jax.random.key(1)
probes(_P + "onemax", raises("x", lambda: R.onemax(jnp.array([0, 2, 1])), ValueError, "not 0/1"))
probes(_P + "leading_ones", raises("x", lambda: R.leading_ones(jnp.array([0.5, 1.0])), ValueError))
probes(
    _P + "normalized_quality",
    raises("probs", lambda: R.normalized_quality(jnp.array([[0.7, 0.7]]), jnp.ones((1, 2))),
           ValueError, "sums to 1.4"),
)  # fmt: skip
probes(
    _P + "expected_answer_metrics",
    raises("probs", lambda: R.expected_answer_metrics(R.TernaryBandit(jnp.array([2]),
           jnp.array([1.0]), 4), jnp.ones((1, 5))), ValueError, "sums to 5"),
)  # fmt: skip
probes(
    _P + "pointwise_reward",
    raises("score_fn", lambda: R.pointwise_reward(_K44, lambda k, c, r: jnp.zeros(7),
           jnp.ones((2, 3))), ValueError, "a vector per response"),
)  # fmt: skip


# Issue 44, second independent probe set: the findings it made, fixed at the entry checks.
probes(
    "jaxlab.rl.grpo_policy_loss",
    raises(
        "token_mask",
        lambda: R.grpo_policy_loss(
            jnp.zeros((2, 3)), jnp.zeros((2, 3)), jnp.ones(2), jnp.full((2, 3), 0.5)
        ),
        ValueError,
        "not 0/1",
    ),
)
probes(
    "jaxlab.rl.round_robin_reward",
    raises(
        "judge_fn",
        lambda: R.round_robin_reward(
            jax.random.key(0), lambda c, a, b: jnp.ones(5), jnp.ones((3, 2))
        ),
        ValueError,
        "a vector per pair",
    ),
)
probes(
    "jaxlab.rl.single_pairwise_reward",
    raises(
        "judge_fn",
        lambda: R.single_pairwise_reward(
            jax.random.key(0), lambda c, a, b: jnp.ones(5), jnp.ones((3, 2))
        ),
        ValueError,
        "a vector per pair",
    ),
)
probes(
    "jaxlab.rl.binary_benchmark_suite",
    raises(
        "trap_block",
        lambda: R.binary_benchmark_suite(jax.random.key(0), 8, trap_block=3),
        ValueError,
    ),
)


# The TSRL and UCPO studies' programs (moved into the library by issue 43): the checks run before
# anything compiles.
_ZERO = lambda *a: 0.0  # noqa: E731
_ONE_ARM = [("tsrl_k1", "tsrl", 1, 0.0)]
_TOY = dict(num_prompts=2, num_candidates=3, batch_prompts=1, group_size=2, steps=1)
_SEQ = dict(num_prompts=2, length=2, batch_prompts=1, group_size=2, num_anchors=1)
_SEQ.update(temperature=1.0, position_bias=0.0, eval_samples=2)
probes(
    _P + "ternary_bandit_program",
    raises(
        "num_prompts",
        lambda: R.ternary_bandit_program(0, 3, [0.5], batch_prompts=1, group_size=2, steps=1),
    ),
    raises(
        "group_size",
        lambda: R.ternary_bandit_program(2, 3, [0.5], batch_prompts=1, group_size=0, steps=1),
    ),
)
probes(
    _P + "seed_answer_metrics",
    raises("probs", lambda: R.seed_answer_metrics([], jnp.ones(3))),
)
probes(
    _P + "ucpo_reference_checks",
    raises("tolerance", lambda: R.ucpo_reference_checks(-1.0)),
    raises("tolerance", lambda: R.ucpo_reference_checks(NAN)),
)
probes(
    _P + "autoregressive_policy_batch",
    raises(
        "vocab",
        lambda: R.autoregressive_policy_batch([0], vocab=0, length=2, num_prompts=2, hidden=(4,)),
    ),
    raises(
        "seeds",
        lambda: R.autoregressive_policy_batch([], vocab=3, length=2, num_prompts=2, hidden=(4,)),
    ),
)
probes(
    _P + "bracket_learning_rate",
    raises("run_lr", lambda: R.bracket_learning_rate(3, [0.1], factor=2.0, max_extensions=1)),
    raises(
        "grid", lambda: R.bracket_learning_rate(lambda lr: {}, [], factor=2.0, max_extensions=1)
    ),
)
probes(
    _P + "hidden_quality_sequence_program",
    raises("vocab", lambda: R.hidden_quality_sequence_program(_ZERO, _ZERO, vocab=0, **_SEQ)),
)
probes(
    _P + "judge_calls_per_step",
    raises(
        "group_size",
        lambda: R.judge_calls_per_step(group_size=0, num_anchors=1, length=2, batch_prompts=1),
    ),
    raises(
        "num_anchors",
        lambda: R.judge_calls_per_step(group_size=2, num_anchors=-1, length=2, batch_prompts=1),
    ),
)
probes(
    _P + "judged_group_reward",
    raises(
        "quality_fn",
        lambda: R.judged_group_reward(
            0, 3, _ZERO, jnp.zeros(1), temperature=1.0, position_bias=0.0
        ),
    ),
    raises(
        "temperature",
        lambda: R.judged_group_reward(
            0, _ZERO, _ZERO, jnp.zeros(1), temperature=0.0, position_bias=0.0
        ),
    ),
    raises(
        "flip_prob",
        lambda: R.judged_group_reward(
            0, _ZERO, _ZERO, jnp.zeros(1), temperature=1.0, position_bias=0.0, flip_prob=2.0
        ),
    ),
)
_ARMS = dict(learning_rate=0.1, temperature=1.0, position_bias=0.0, variance_redraws=1)
probes(
    _P + "tournament_bandit_arms",
    raises("seeds", lambda: R.tournament_bandit_arms(_key(), _ONE_ARM, seeds=0, **_TOY, **_ARMS)),
    raises("arms", lambda: R.tournament_bandit_arms(_key(), [], seeds=1, **_TOY, **_ARMS)),
)
probes(
    _P + "tournament_bandit_program",
    raises(
        "steps",
        lambda: R.tournament_bandit_program(
            2, 3, batch_prompts=1, group_size=2, steps=0, max_anchors=1, variance_redraws=1
        ),
    ),
    raises(
        "num_candidates",
        lambda: R.tournament_bandit_program(
            2, 0, batch_prompts=1, group_size=2, steps=1, max_anchors=1, variance_redraws=1
        ),
    ),
)
probes(
    _P + "tournament_toy_arms",
    raises("flips", lambda: R.tournament_toy_arms([1], [2.0])),
    raises("anchors", lambda: R.tournament_toy_arms([-1], [0.1])),
)
probes(
    _P + "tsrl_reference_checks",
    raises("num_draws", lambda: R.tsrl_reference_checks(0, tolerance=0.1, variance_rtol=0.1)),
)
probes(
    _P + "tsrl_reference_errors",
    raises("keys", lambda: R.tsrl_reference_errors(3)),
)
_STUDY = dict(lr_grid=[0.1], lr_factor=2.0, max_extensions=1, hidden=(4,), vocab=3, length=2)
probes(
    _P + "hidden_quality_sequence_study",
    raises("rng_key", lambda: R.hidden_quality_sequence_study(3, seeds=1, num_prompts=2, **_STUDY)),
    raises(
        "seeds", lambda: R.hidden_quality_sequence_study(_key(), seeds=0, num_prompts=2, **_STUDY)
    ),
    raises("sizes", lambda: R.hidden_quality_sequence_study(_key(), seeds=1, **_STUDY)),
)
