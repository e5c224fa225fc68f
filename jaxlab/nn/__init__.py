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
(:func:`loss_curve_stability`) and, in
:mod:`jaxlab.nn.hessian`, Hessian-vector products and the top Hessian eigenvalue (:func:`hvp`,
:func:`top_eigenvalue`).
"""

from jaxlab.nn import hessian
from jaxlab.nn._invertible import (
    ActNormLU,
    ConditionalMADE,
    DeepSetsEncoder,
    HomeomorphismTraining,
    InvertibleNet,
    MLPEncoder,
    QuadMixerEncoder,
    homeomorphism_loss,
    sample_latents,
    train_homeomorphism,
)
from jaxlab.nn._markov import markov_language
from jaxlab.nn._moe import (
    MixtureOfExperts,
    MoEStats,
    RouterOutput,
    TopKRouter,
    capacity_keep_mask,
    load_balancing_loss,
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
    ScanTrainResult,
    loss_curve_stability,
    sample_batch,
    scan_train,
    split_corpus,
    stdlib_byte_corpus,
    train_language_model,
)
from jaxlab.nn.hessian import hvp, top_eigenvalue

__all__ = [
    "ActNormLU",
    "ConditionalMADE",
    "ConvergenceFit",
    "DeepSetsEncoder",
    "GPTConfig",
    "HomeomorphismTraining",
    "InvertibleNet",
    "MLPEncoder",
    "MixtureOfExperts",
    "MoEStats",
    "MoETeacherStudentTask",
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
    "hessian",
    "homeomorphism_loss",
    "hvp",
    "language_model_loss",
    "load_balancing_loss",
    "markov_language",
    "moe_teacher_student_task",
    "moe_transformer_flop_constants",
    "optimal_top_k",
    "predicted_loss",
    "rotary_embedding",
    "loss_curve_stability",
    "sample_batch",
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
