"""flax.nnx modules of jaxlab.

Invertible networks (Hom-PGD⁺): :class:`InvertibleNet` built from :class:`ConditionalMADE` and
:class:`ActNormLU` blocks, condition encoders, the homeomorphism training loss and a training
helper.
"""

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

__all__ = [
    "ActNormLU",
    "ConditionalMADE",
    "DeepSetsEncoder",
    "HomeomorphismTraining",
    "InvertibleNet",
    "MLPEncoder",
    "QuadMixerEncoder",
    "homeomorphism_loss",
    "sample_latents",
    "train_homeomorphism",
]
