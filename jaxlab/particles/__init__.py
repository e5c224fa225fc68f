"""Mean-field Langevin particle systems: mirror maps, MFLD and mirror MFLD (blackjax shape).

Mirror mean-field Langevin dynamics (Gu & Kim, ICML 2026) minimises ``F(μ) + λ Ent(μ)`` over
probability measures on a convex domain by running ``N`` interacting particles in the geometry
of a mirror map, so every particle stays strictly inside the domain; with the Euclidean map it is
mean-field Langevin dynamics (MFLD). ``mmfld(...)``/``mfld(...)`` return a
:class:`SamplingAlgorithm` ``(init, step)``, and each algorithm carries its lower-level pieces as
attributes (``mmfld.init``, ``mmfld.build_kernel``, ``mfld.init``, ``mfld.build_kernel``), as
blackjax does per algorithm. The same step runs vmapped on one device and under
``jax.shard_map`` over a ``'particles'`` mesh axis (:func:`shard_step`), also across processes.
"""

from jaxlab._src.sampling import SamplingAlgorithm
from jaxlab.particles._diagnostics import LinearPhaseFit, linear_phase_fit
from jaxlab.particles._functionals import (
    BoxFixedPoint,
    interacting_box_fixed_point,
    interacting_box_functional,
    linear_potential_functional,
    truncated_exponential_moments,
    two_layer_network_functional,
)
from jaxlab.particles._mfld import (
    MeanFieldFunctional,
    MFLDInfo,
    MFLDState,
    mfld,
    mmfld,
    nearest_neighbour_entropy,
    shard_step,
)
from jaxlab.particles._mirror_maps import (
    MirrorMap,
    box_mirror_map,
    euclidean_mirror_map,
    simplex_mirror_map,
)
from jaxlab.particles._problems import (
    interacting_box_finite_particle_mean,
    simplex_linear_potential_mean,
    teacher_network_data,
)

__all__ = [
    # mirror maps
    "MirrorMap",
    "box_mirror_map",
    "euclidean_mirror_map",
    "simplex_mirror_map",
    # particle systems
    "MFLDInfo",
    "MFLDState",
    "MeanFieldFunctional",
    "SamplingAlgorithm",
    "mfld",
    "mmfld",
    "nearest_neighbour_entropy",
    "shard_step",
    # functionals and closed forms
    "BoxFixedPoint",
    "interacting_box_fixed_point",
    "interacting_box_functional",
    "linear_potential_functional",
    "truncated_exponential_moments",
    "two_layer_network_functional",
    # instances and closed-form references
    "interacting_box_finite_particle_mean",
    "simplex_linear_potential_mean",
    "teacher_network_data",
    # diagnostics
    "LinearPhaseFit",
    "linear_phase_fit",
]
