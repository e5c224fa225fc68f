"""flax.nnx modules of jaxlab.

Invertible networks (Hom-PGD⁺): :class:`InvertibleNet` built from :class:`ConditionalMADE` and
:class:`ActNormLU` blocks, condition encoders, the homeomorphism training loss and a training
helper.

Mixture of experts (routing sparsity): :class:`MixtureOfExperts` with a :class:`TopKRouter`,
capacity handling and the Switch :func:`load_balancing_loss`; the routing-sparsity bound
(:func:`optimal_top_k`, :func:`fixed_compute_steps`, :func:`fit_convergence_constants`,
:func:`predicted_loss`, :func:`moe_transformer_flop_constants`) and a teacher–student task
(:func:`moe_teacher_student_task`).

SimpleGPT (normalize after every linear map): :class:`SimpleNorm`, :class:`SimpleGPT` with its
:class:`GPTConfig` (SimpleGPT, PreNorm and PreNorm + QKNorm placements), the training recipe
(:func:`simplegpt_schedule`, :func:`simplegpt_optimizer`, :func:`language_model_loss`), a
byte-level corpus pipeline (:func:`stdlib_byte_corpus`, :func:`split_corpus`,
:func:`sample_batch`, :func:`train_language_model`), the library's one training loop
(:func:`scan_train`: any loss on pure parameters, one ``lax.scan``), the LR-sweep stability rule
(:func:`loss_curve_stability`) and the Hessian tools: Hessian-vector products and the top
Hessian eigenvalue (:func:`hvp`, :func:`top_eigenvalue`), with respect to activations
(:func:`activation_hessian_top_eigenvalue`,
:func:`residual_stream_loss`) and under Adam's preconditioner
(:func:`preconditioned_top_eigenvalue`, :func:`adam_preconditioner`,
:func:`adam_sharpness_limit`).

Hard disjunctive rules (DisjunctiveNet): a rule language (:class:`Disjunct`, :class:`Disjunction`,
:class:`RuleSet`) compiled to Balas hull formulations (:func:`lifted_hull`: DNF, CNF, partial
DNF), the projection layer :class:`DisjunctiveLayer` (hull or exact union projection, implicit
gradients), rule checks (:func:`rule_satisfaction`, :func:`rule_violation`, the penalty baseline
:func:`rule_penalty`, the training diagnosis :func:`pinned_fractions`) and the note's rule sets
and tasks (:func:`gap_rules`, :func:`input_decided_regression_task`, ...).
"""

from jaxlab._src.training import ScanTrainResult, scan_train
from jaxlab.nn._disjunctive import (
    Disjunct,
    Disjunction,
    DisjunctiveInfo,
    DisjunctiveLayer,
    LiftedHull,
    RuleSet,
    hull_size,
    lifted_hull,
    pinned_fractions,
    rule_penalty,
    rule_satisfaction,
    rule_violation,
)
from jaxlab.nn._disjunctive_problems import (
    DisjunctiveTask,
    gap_rules,
    input_decided_regression_task,
    input_decided_target,
    input_decided_toy_rules,
    output_only_regression_task,
    output_only_target,
    rule_network_apply,
    rule_network_init,
    rule_network_trainer,
    tightness_rules,
)
from jaxlab.nn._hessian import (
    activation_hessian_top_eigenvalue,
    adam_preconditioner,
    adam_sharpness_limit,
    hvp,
    preconditioned_top_eigenvalue,
    residual_stream_loss,
    simplegpt_hessian_probe,
    top_eigenvalue,
)
from jaxlab.nn._invertible import (
    ActNormLU,
    ConditionalMADE,
    DeepSetsEncoder,
    HomeomorphismTraining,
    InvertibleNet,
    MLPEncoder,
    QuadMixerEncoder,
    homeomorphism_loss,
    invertibility_error,
    sample_latents,
    train_homeomorphism,
)
from jaxlab.nn._markov import LatinMarkovLanguage, latin_markov_language, markov_language
from jaxlab.nn._moe import (
    MixtureOfExperts,
    MoEStats,
    RouterOutput,
    TopKRouter,
    capacity_keep_mask,
    load_balancing_loss,
)
from jaxlab.nn._moe_problems import (
    MoETopKProblem,
    moe_compute_axis,
    moe_language_model_problem,
    moe_teacher_student_problem,
    moe_top_k_trainer,
)
from jaxlab.nn._moe_theory import (
    ConvergenceFit,
    MoETeacherStudentTask,
    fit_convergence_constants,
    fixed_compute_steps,
    moe_teacher_student_task,
    moe_transformer_flop_constants,
    optimal_top_k,
    predicted_loss,
)
from jaxlab.nn._simplegpt import (
    GPTConfig,
    SimpleGPT,
    SimpleNorm,
    depth_init_std,
    ffn_hidden_size,
    language_model_loss,
    rotary_embedding,
    simplegpt_optimizer,
    simplegpt_schedule,
)
from jaxlab.nn._text import (
    LanguageModelRun,
    language_model_program,
    learning_rate_limits,
    loss_curve_stability,
    sample_batch,
    sample_eval_batches,
    split_corpus,
    stdlib_byte_corpus,
    train_language_model,
)

__all__ = [
    "Disjunct",
    "DisjunctiveInfo",
    "DisjunctiveLayer",
    "Disjunction",
    "LiftedHull",
    "RuleSet",
    "hull_size",
    "lifted_hull",
    "pinned_fractions",
    "rule_penalty",
    "rule_satisfaction",
    "rule_violation",
    "DisjunctiveTask",
    "gap_rules",
    "input_decided_regression_task",
    "input_decided_target",
    "input_decided_toy_rules",
    "output_only_regression_task",
    "output_only_target",
    "rule_network_apply",
    "rule_network_init",
    "rule_network_trainer",
    "tightness_rules",
    "ActNormLU",
    "activation_hessian_top_eigenvalue",
    "adam_preconditioner",
    "adam_sharpness_limit",
    "preconditioned_top_eigenvalue",
    "residual_stream_loss",
    "simplegpt_hessian_probe",
    "ConditionalMADE",
    "ConvergenceFit",
    "DeepSetsEncoder",
    "GPTConfig",
    "HomeomorphismTraining",
    "InvertibleNet",
    "LatinMarkovLanguage",
    "MLPEncoder",
    "MixtureOfExperts",
    "MoEStats",
    "MoETeacherStudentTask",
    "MoETopKProblem",
    "moe_compute_axis",
    "moe_language_model_problem",
    "moe_teacher_student_problem",
    "moe_top_k_trainer",
    "QuadMixerEncoder",
    "RouterOutput",
    "SimpleGPT",
    "ScanTrainResult",
    "SimpleNorm",
    "TopKRouter",
    "capacity_keep_mask",
    "depth_init_std",
    "ffn_hidden_size",
    "fit_convergence_constants",
    "fixed_compute_steps",
    "homeomorphism_loss",
    "invertibility_error",
    "hvp",
    "language_model_loss",
    "latin_markov_language",
    "load_balancing_loss",
    "markov_language",
    "moe_teacher_student_task",
    "moe_transformer_flop_constants",
    "optimal_top_k",
    "predicted_loss",
    "rotary_embedding",
    "LanguageModelRun",
    "language_model_program",
    "learning_rate_limits",
    "loss_curve_stability",
    "sample_batch",
    "sample_eval_batches",
    "sample_latents",
    "scan_train",
    "simplegpt_optimizer",
    "simplegpt_schedule",
    "split_corpus",
    "stdlib_byte_corpus",
    "top_eigenvalue",
    "train_homeomorphism",
    "train_language_model",
]


def __getattr__(name):
    # The Hessian tools were also exported as the module jaxlab.nn.hessian; their names are
    # exported once now, from jaxlab.nn.
    if name == "hessian":
        import warnings

        from jaxlab.nn import _hessian

        warnings.warn(
            "jaxlab.nn.hessian (the module) is deprecated: its functions are jaxlab.nn's own "
            "names (jaxlab.nn.hvp, jaxlab.nn.top_eigenvalue, ...)",
            DeprecationWarning,
            stacklevel=2,
        )
        return _hessian
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
