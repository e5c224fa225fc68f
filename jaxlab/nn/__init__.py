"""flax.nnx modules of jaxlab.

Invertible networks (Hom-PGD⁺): :class:`InvertibleNet` built from :class:`ConditionalMADE` and
:class:`ActNormLU` blocks, condition encoders, the homeomorphism training loss and a training
helper.

Mixture of experts (routing sparsity): :class:`MixtureOfExperts` with a :class:`TopKRouter`,
capacity handling and the Switch :func:`load_balancing_loss`.

SimpleGPT (normalize after every linear map): :class:`SimpleNorm`, :class:`SimpleGPT` with its
:class:`GPTConfig` (SimpleGPT, PreNorm and PreNorm + QKNorm placements), the training recipe
(:func:`simplegpt_schedule`, :func:`simplegpt_optimizer`, :func:`language_model_loss`), a
byte-level corpus pipeline (:func:`stdlib_byte_corpus`, :func:`split_corpus`,
:func:`sample_batch`, :func:`train_language_model`) and, in :mod:`jaxlab.nn.hessian`,
Hessian-vector products and the top Hessian eigenvalue (:func:`hvp`, :func:`top_eigenvalue`).
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
from jaxlab.nn._moe import (
    MixtureOfExperts,
    MoEStats,
    RouterOutput,
    TopKRouter,
    load_balancing_loss,
)
from jaxlab.nn._simplegpt import (
    GPTConfig,
    SimpleGPT,
    SimpleNorm,
    ffn_hidden_size,
    language_model_loss,
    simplegpt_optimizer,
    simplegpt_schedule,
)
from jaxlab.nn._text import (
    sample_batch,
    split_corpus,
    stdlib_byte_corpus,
    train_language_model,
)
from jaxlab.nn.hessian import hvp, top_eigenvalue

__all__ = [
    "ActNormLU",
    "ConditionalMADE",
    "DeepSetsEncoder",
    "GPTConfig",
    "HomeomorphismTraining",
    "InvertibleNet",
    "MLPEncoder",
    "MixtureOfExperts",
    "MoEStats",
    "QuadMixerEncoder",
    "RouterOutput",
    "SimpleGPT",
    "SimpleNorm",
    "TopKRouter",
    "ffn_hidden_size",
    "hessian",
    "homeomorphism_loss",
    "hvp",
    "language_model_loss",
    "load_balancing_loss",
    "sample_batch",
    "sample_latents",
    "simplegpt_optimizer",
    "simplegpt_schedule",
    "split_corpus",
    "stdlib_byte_corpus",
    "top_eigenvalue",
    "train_homeomorphism",
    "train_language_model",
]
