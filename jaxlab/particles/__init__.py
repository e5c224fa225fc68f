"""Mean-field Langevin particle systems: mirror maps, MFLD and mirror MFLD (blackjax shape).

Mirror mean-field Langevin dynamics (Gu & Kim, ICML 2026) minimises ``F(μ) + λ Ent(μ)`` over
probability measures on a convex domain by running ``N`` interacting particles in the geometry
of a mirror map, so every particle stays strictly inside the domain; with the Euclidean map it is
mean-field Langevin dynamics (MFLD). ``mmfld(...)``/``mfld(...)`` return a
:class:`SamplingAlgorithm` ``(init, step)``, and each algorithm carries its lower-level pieces as
attributes (``mmfld.init``, ``mmfld.build_kernel``, ``mfld.init``, ``mfld.build_kernel``), as
blackjax does per algorithm. The same step runs vmapped on one device and under
``jax.shard_map`` over a ``'particles'`` mesh axis (:func:`shard_step`), also across processes;
the noise (:func:`particle_noise`) is a counter hash of the particle's global index, so it does
not depend on the sharding. :func:`ensemble_step` steps many independent systems at once (in
antithetic noise pairs), :func:`run_sampler` runs one system's steps in one compiled scan
and :func:`time_average` averages a statistic over a run: with the exact
finite-``N`` law of the interacting box (:func:`interacting_box_finite_particle_moments`,
:func:`interacting_box_stationary_sample`) they measure propagation of chaos.
"""

from jaxlab._src.sampling import SamplingAlgorithm
from jaxlab.particles._diagnostics import (
    LinearPhaseFit,
    PowerLawFit,
    linear_phase_fit,
    power_law_fit,
)
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
    ensemble_step,
    mfld,
    mmfld,
    nearest_neighbour_entropy,
    shard_step,
    time_average,
)
from jaxlab.particles._mirror_maps import (
    MirrorMap,
    box_mirror_map,
    euclidean_mirror_map,
    simplex_mirror_map,
)
from jaxlab.particles._noise import particle_noise, particle_uniform
from jaxlab.particles._problems import (
    FiniteParticleMoments,
    interacting_box_finite_particle_mean,
    interacting_box_finite_particle_moments,
    interacting_box_stationary_sample,
    simplex_linear_potential_mean,
    teacher_network_data,
)
from jaxlab.particles._run import run_sampler

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
    "ensemble_step",
    "mfld",
    "mmfld",
    "nearest_neighbour_entropy",
    "run_sampler",
    "particle_noise",
    "particle_uniform",
    "shard_step",
    "time_average",
    # functionals and closed forms
    "BoxFixedPoint",
    "interacting_box_fixed_point",
    "interacting_box_functional",
    "linear_potential_functional",
    "truncated_exponential_moments",
    "two_layer_network_functional",
    # instances and closed-form references
    "FiniteParticleMoments",
    "interacting_box_finite_particle_mean",
    "interacting_box_finite_particle_moments",
    "interacting_box_stationary_sample",
    "simplex_linear_potential_mean",
    "teacher_network_data",
    # diagnostics
    "LinearPhaseFit",
    "PowerLawFit",
    "linear_phase_fit",
    "power_law_fit",
]
