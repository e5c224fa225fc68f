"""Policy optimisation over sampled sequences: a GRPO core, TSRL tournament rewards, UCPO.

* The core (:func:`grpo`): group sampling under any generation order, group-relative advantages
  (:func:`group_advantages`: z-score, rank, centred), the clipped surrogate with a KL to a
  reference policy (:func:`grpo_policy_loss`, token or sequence aggregation), all traceable,
  in blackjax's ``(init, step)`` shape (:class:`OptimizationAlgorithm`, the one optimizer type
  of this package, also named :class:`PolicyOptimizer` and :class:`BlackBoxOptimizer`; skipped
  updates counted by cause in :class:`GRPOSkips`); it takes any discrete sequence policy
  (``sample_fn``, ``log_prob_fn``), any reward function and any order.
  :class:`AutoregressivePolicy` is a small any-order autoregressive flax.nnx policy
  (:func:`sample_sequences`, :func:`sequence_log_probs`, :func:`split_policy`,
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
  :data:`UNCERTAIN` (:data:`INVALID` marks a traced out-of-range action).
* Order-invariant EDA (Goudet et al., ICML 2026, arXiv 2510.01824): :func:`oi_eda`, an
  any-order autoregressive model (:class:`AnyOrderLogistic`, :class:`AnyOrderMLP`;
  :func:`sample_any_order`, :func:`log_prob_any_order`, :func:`order_masks`) trained by
  :func:`grpo` over random generation and training orders, as a black-box binary maximiser;
  the baselines :func:`umda`, :func:`pbil`, :func:`one_plus_one_ea`, :func:`genetic_algorithm`,
  all :class:`BlackBoxOptimizer` (``init``/``step`` that record their evaluations,
  :func:`counted`; :class:`BlackBoxState`,
  :class:`BlackBoxInfo`, :func:`num_steps_for_budget`, :func:`run_optimizer`), and
  :func:`maximize` in one call.
  Benchmarks: :func:`onemax`, :func:`leading_ones`, :func:`deceptive_trap`,
  :func:`nk_landscape` (:class:`NKLandscape`), :func:`random_maxcut` (:class:`MaxCut`),
  :func:`random_qubo` (:class:`QUBO`), and the experiment's suite :func:`binary_benchmark_suite`.
* Problems with known answers: :class:`TabularPolicy`, :func:`tournament_bandit`,
  :func:`hidden_quality_sequences`, :func:`normalized_quality`, :func:`hidden_quality_win_rate`,
  :func:`ternary_bandit`, :func:`ternary_labels`, :func:`expected_answer_metrics`.
* Training programs of the TSRL and UCPO studies, each one compiled program over its arms:
  :func:`tournament_bandit_program` / :func:`tournament_bandit_arms` (the note's arms,
  :func:`tournament_toy_arms`), :func:`hidden_quality_sequence_program` /
  :func:`hidden_quality_sequence_study` (each arm at its own bracketed lr,
  :func:`bracket_learning_rate`), :func:`judged_group_reward`, :func:`judge_calls_per_step`,
  :func:`ternary_bandit_program`, :func:`seed_answer_metrics`, and the notes' reference checks
  (:func:`tsrl_reference_checks`, :func:`ucpo_reference_checks`).
"""

from jaxlab._src.optimization import OptimizationAlgorithm, counted
from jaxlab.rl._bandit_runs import (
    TERNARY_ADVANTAGE_KINDS,
    UCPO_REFERENCE_TABLE,
    seed_answer_metrics,
    ternary_bandit_program,
    ucpo_reference_checks,
)
from jaxlab.rl._black_box import (
    BlackBoxInfo,
    BlackBoxOptimizer,
    BlackBoxState,
    num_steps_for_budget,
    run_optimizer,
)
from jaxlab.rl._eda_baselines import genetic_algorithm, one_plus_one_ea, pbil, umda
from jaxlab.rl._grpo import (
    GRPOInfo,
    GRPOSkips,
    GRPOState,
    LossInfo,
    PolicyOptimizer,
    group_advantages,
    grpo,
    grpo_policy_loss,
)
from jaxlab.rl._order_invariant_eda import (
    AnyOrderLogistic,
    AnyOrderMLP,
    BlackBoxResult,
    log_prob_any_order,
    maximize,
    oi_eda,
    sample_any_order,
)
from jaxlab.rl._policy import (
    AutoregressivePolicy,
    identity_orders,
    order_masks,
    random_orders,
    sample_sequences,
    sequence_log_probs,
    split_policy,
)
from jaxlab.rl._problems import (
    QUBO,
    MaxCut,
    NKLandscape,
    SequenceQualityTask,
    TabularPolicy,
    TernaryBandit,
    TournamentBandit,
    binary_benchmark_suite,
    deceptive_trap,
    expected_answer_metrics,
    hidden_quality_sequences,
    hidden_quality_win_rate,
    leading_ones,
    nk_landscape,
    normalized_quality,
    onemax,
    random_maxcut,
    random_qubo,
    ternary_bandit,
    ternary_labels,
    tournament_bandit,
)
from jaxlab.rl._tournament_runs import (
    JUDGED_REWARD_KINDS,
    JUDGED_REWARD_RANGE,
    TSRL_REFERENCE,
    autoregressive_policy_batch,
    bracket_learning_rate,
    hidden_quality_sequence_program,
    hidden_quality_sequence_study,
    judge_calls_per_step,
    judged_group_reward,
    tournament_bandit_arms,
    tournament_bandit_program,
    tournament_toy_arms,
    tsrl_reference_checks,
    tsrl_reference_errors,
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
    INVALID,
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
    "GRPOSkips",
    "GRPOState",
    "LossInfo",
    "OptimizationAlgorithm",
    "PolicyOptimizer",
    "counted",
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
    "INVALID",
    "RIGHT",
    "UNCERTAIN",
    "WRONG",
    "answer_metrics",
    "dynamic_uncertainty_gain",
    "ternary_rewards",
    "ucpo_advantages",
    # order-invariant EDA and black-box baselines
    "AnyOrderLogistic",
    "AnyOrderMLP",
    "BlackBoxInfo",
    "BlackBoxOptimizer",
    "BlackBoxResult",
    "BlackBoxState",
    "genetic_algorithm",
    "log_prob_any_order",
    "maximize",
    "num_steps_for_budget",
    "oi_eda",
    "one_plus_one_ea",
    "order_masks",
    "pbil",
    "run_optimizer",
    "sample_any_order",
    "umda",
    # problems
    "MaxCut",
    "NKLandscape",
    "QUBO",
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
    # black-box binary benchmarks
    "binary_benchmark_suite",
    "deceptive_trap",
    "leading_ones",
    "nk_landscape",
    "onemax",
    "random_maxcut",
    "random_qubo",
    # training programs on the known-answer bandits (the experiments' arms as one program)
    "TERNARY_ADVANTAGE_KINDS",
    "UCPO_REFERENCE_TABLE",
    "seed_answer_metrics",
    "ternary_bandit_program",
    "ucpo_reference_checks",
    "JUDGED_REWARD_KINDS",
    "JUDGED_REWARD_RANGE",
    "TSRL_REFERENCE",
    "autoregressive_policy_batch",
    "bracket_learning_rate",
    "hidden_quality_sequence_program",
    "hidden_quality_sequence_study",
    "judge_calls_per_step",
    "judged_group_reward",
    "tournament_bandit_arms",
    "tournament_bandit_program",
    "tournament_toy_arms",
    "tsrl_reference_checks",
    "tsrl_reference_errors",
]
