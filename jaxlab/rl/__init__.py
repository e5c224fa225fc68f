"""Policy optimisation over sampled sequences: a GRPO core, TSRL tournament rewards, UCPO.

* The core (:func:`grpo`): group sampling under any generation order, group-relative advantages
  (:func:`group_advantages`: z-score, rank, centred), the clipped surrogate with a KL to a
  reference policy (:func:`grpo_policy_loss`), all traceable, in blackjax's ``(init, step)``
  shape; it takes any discrete sequence policy (``sample_fn``, ``log_prob_fn``), any reward
  function and any order. :class:`AutoregressivePolicy` is a small any-order autoregressive
  flax.nnx policy (:func:`sample_sequences`, :func:`sequence_log_probs`, :func:`split_policy`,
  :func:`random_orders`, :func:`identity_orders`).
* TSRL (Juneja et al., ICML 2026): :func:`win_rate_reward` against fixed anchors
  (:func:`select_anchors`) under any pairwise judge, the baselines :func:`pointwise_reward`,
  :func:`single_pairwise_reward` and :func:`round_robin_reward`, and the synthetic judges
  :func:`synthetic_pairwise_judge` (Bradley-Terry, position bias, corrupted verdicts) and
  :func:`synthetic_rubric_judge`.
* UCPO (Zeng et al., ICML 2026, arXiv 2601.22648): :func:`ucpo_advantages` (ternary advantage
  decoupling, the dynamic uncertainty gain :func:`dynamic_uncertainty_gain`, non-ternary
  filtering), the GRPO-UC baseline :func:`ternary_rewards`, and :func:`answer_metrics`
  (accuracy, PAQ, F1, uncertainty ratio) over labels :data:`RIGHT`, :data:`WRONG`,
  :data:`UNCERTAIN`.
* Problems with known answers: :class:`TabularPolicy`, :func:`tournament_bandit`,
  :func:`hidden_quality_sequences`, :func:`normalized_quality`, :func:`hidden_quality_win_rate`,
  :func:`ternary_bandit`, :func:`ternary_labels`, :func:`expected_answer_metrics`.
"""

from jaxlab.rl._grpo import GRPOInfo, GRPOState, LossInfo, group_advantages, grpo, grpo_policy_loss
from jaxlab.rl._policy import (
    AutoregressivePolicy,
    identity_orders,
    random_orders,
    sample_sequences,
    sequence_log_probs,
    split_policy,
)
from jaxlab.rl._problems import (
    SequenceQualityTask,
    TabularPolicy,
    TernaryBandit,
    TournamentBandit,
    expected_answer_metrics,
    hidden_quality_sequences,
    hidden_quality_win_rate,
    normalized_quality,
    ternary_bandit,
    ternary_labels,
    tournament_bandit,
)
from jaxlab.rl._tsrl import (
    JudgeInfo,
    pointwise_reward,
    round_robin_reward,
    select_anchors,
    single_pairwise_reward,
    synthetic_pairwise_judge,
    synthetic_rubric_judge,
    win_rate_reward,
)
from jaxlab.rl._ucpo import (
    RIGHT,
    UNCERTAIN,
    WRONG,
    answer_metrics,
    dynamic_uncertainty_gain,
    ternary_rewards,
    ucpo_advantages,
)

__all__ = [
    # the GRPO core
    "AutoregressivePolicy",
    "GRPOInfo",
    "GRPOState",
    "LossInfo",
    "group_advantages",
    "grpo",
    "grpo_policy_loss",
    "identity_orders",
    "random_orders",
    "sample_sequences",
    "sequence_log_probs",
    "split_policy",
    # TSRL
    "JudgeInfo",
    "pointwise_reward",
    "round_robin_reward",
    "select_anchors",
    "single_pairwise_reward",
    "synthetic_pairwise_judge",
    "synthetic_rubric_judge",
    "win_rate_reward",
    # UCPO
    "RIGHT",
    "UNCERTAIN",
    "WRONG",
    "answer_metrics",
    "dynamic_uncertainty_gain",
    "ternary_rewards",
    "ucpo_advantages",
    # problems
    "SequenceQualityTask",
    "TabularPolicy",
    "TernaryBandit",
    "TournamentBandit",
    "expected_answer_metrics",
    "hidden_quality_sequences",
    "hidden_quality_win_rate",
    "normalized_quality",
    "ternary_bandit",
    "ternary_labels",
    "tournament_bandit",
]
