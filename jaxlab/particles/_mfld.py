"""Mean-field Langevin dynamics (MFLD) and mirror MFLD (MMFLD) as particle systems.

The objective over probability measures ``μ`` on a convex domain ``𝒳`` is
``𝓛(μ) = F(μ) + λ Ent(μ)``, ``Ent(μ) = ∫ log(dμ/dx) dμ``. MFLD (``𝒳 = ℝ^d``) runs
``dX = -∇_x δF/δμ(μ_t, X) dt + √(2λ) dW``; MMFLD runs the same drift in the dual coordinates of
a mirror map ``φ``, ``dY = -∇_x δF/δμ(μ_t, X) dt + √(2λ) G(X)^{1/2} dW``, ``X = ∇φ*(Y)``, whose
Itô form in the primal coordinates is

    dX = [-G⁻¹ ∇_x δF/δμ(μ_t, X) + λ ∇·G⁻¹(X)] dt + √(2λ) G(X)^{-1/2} dW.

Both have the stationary law ``μ ∝ exp(-δF/δμ(μ, ·)/λ)``; MMFLD's is supported on ``𝒳``.
``N`` particles replace ``μ_t`` by their empirical measure ``μ̂ = (1/N) Σ_i δ_{X^i}``.

The API follows blackjax, one namespace per algorithm: the top-level factories :class:`mmfld` /
:class:`mfld` return a :class:`SamplingAlgorithm` ``(init, step)`` (jaxlab/_src/sampling.py,
shared by every sampler), and carry their own lower-level pieces as ``mmfld.init`` /
``mmfld.build_kernel`` (``mmfld.init``, ``mmfld.build_kernel``) and ``mfld.init`` /
``mfld.build_kernel``, so the next particle method's ``init`` does not collide with these. The
functional enters only through the particle averages ``s = (1/N) Σ_i ψ(X^i)`` it depends on and
its first-variation gradient ``∇_x δF/δμ(μ̂, x) = g(x, s)`` (a :class:`MeanFieldFunctional`), so
one kernel runs on a block of particles on one device (``vmap``) and under ``jax.shard_map``
over a ``'particles'`` mesh axis (``s`` is then a ``pmean``), across processes too. A step built
with ``axis_name`` also runs under ``jax.pmap(step, axis_name=..., in_axes=(None, 0))`` with the
positions reshaped to ``(devices, N / devices, d)``, with the same numbers.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxlab._src.deprecation import renamed_keyword
from jaxlab._src.sampling import SamplingAlgorithm
from jaxlab._src.validation import (
    check_array,
    check_axis_bound,
    check_axis_name,
    check_bool,
    check_callable,
    check_choice,
    check_int,
    check_key,
    check_mesh_axis,
    check_positive,
    check_real,
    concrete_float,
    is_concrete,
)
from jaxlab.particles._mirror_maps import (
    MirrorMap,
    coordinate_max,
    euclidean_mirror_map,
)
from jaxlab.particles._noise import particle_noise

__all__ = [
    "MFLDInfo",
    "MFLDState",
    "MeanFieldFunctional",
    "SamplingAlgorithm",
    "mfld",
    "mmfld",
    "ensemble_step",
    "nearest_neighbour_entropy",
    "shard_step",
    "time_average",
]

SCHEMES = ("primal", "dual", "dual_split", "projected")
# Default clip margins, relative to the box width (the note's defaults): the primal scheme's
# Euler step can overshoot the boundary and is clipped this far inside; the dual scheme's noise
# G^{1/2} ∝ 1/√(x(1-x)) is evaluated at a point clipped this far inside (it overflows at ∂𝒳).
_BOUNDARY_MARGIN = 1e-9
_DUAL_MARGIN = 1e-6
# A particle counts as clipped when the clip moved a coordinate by more than this many ulps
# (the simplex clip always renormalises, which moves points by a few ulps).
_CLIP_ULPS = 16.0


class MeanFieldFunctional(NamedTuple):
    """A functional ``F(μ)`` given by the particle averages it depends on and its first variation.

    ``F`` depends on ``μ`` only through ``s = ∫ ψ dμ`` (``ψ = statistics_fn``), estimated by the
    particle average ``s = (1/N) Σ_i ψ(X^i)``; the particles move along
    ``first_variation_grad_fn(x, s) = ∇_x δF/δμ(μ, x)``.

    Attributes:
      statistics_fn: ``x ↦ ψ(x)``, one particle's contribution (any pytree of arrays).
      first_variation_grad_fn: ``(x, s) ↦ ∇_x δF/δμ(μ, x)``, one particle's gradient, shaped
        like ``x``.
      objective_fn: optional ``s ↦ F(μ)``; when given, :class:`MFLDInfo` reports the energy and
        the objective estimate ``F + λ Ent``.

    Examples:
      >>> import jax.numpy as jnp
      >>> # F(μ) = ∫ x dμ + ½ (∫ x dμ)²: δF/δμ(μ, x) = (1 + m) x with m = ∫ x dμ.
      >>> functional = MeanFieldFunctional(
      ...     statistics_fn=lambda x: x,
      ...     first_variation_grad_fn=lambda x, m: 1.0 + m,
      ...     objective_fn=lambda m: jnp.sum(m + 0.5 * m**2),
      ... )
      >>> functional.first_variation_grad_fn(jnp.array([0.2]), jnp.array([0.5]))
      Array([1.5], dtype=float32)

    References:
      Chizat, "Mean-field Langevin dynamics: exponential convergence and annealing", TMLR 2022.
    """

    statistics_fn: Callable[[jax.Array], Any]
    first_variation_grad_fn: Callable[[jax.Array, Any], jax.Array]
    objective_fn: Callable[[Any], jax.Array] | None = None


class MFLDState(NamedTuple):
    """The particle system's state: the positions, one particle per row.

    Attributes:
      positions: ``(N, d)`` array (under ``jax.shard_map``: this device's block of rows).

    Examples:
      >>> import jax.numpy as jnp
      >>> MFLDState(jnp.zeros((4, 2))).positions.shape
      (4, 2)
    """

    positions: jax.Array


class MFLDInfo(NamedTuple):
    """Diagnostics of one step (kept apart from the state, as in blackjax).

    ``statistics``, ``energy``, ``entropy`` and ``objective`` describe the empirical measure the
    step started from (they come for free with its mean-field term); the boundary quantities
    describe the positions after the step.

    Attributes:
      statistics: the particle averages ``s`` (the functional's pytree).
      energy: ``F(μ̂)`` from the functional's ``objective_fn``; ``nan`` without one.
      entropy: the nearest-neighbour estimate of ``Ent(μ) = ∫ log(dμ/dx) dμ`` (see
        :func:`nearest_neighbour_entropy`); ``nan`` when ``entropy_queries = 0``.
      objective: ``energy + λ · entropy``, the estimate of ``𝓛(μ)``.
      boundary_distance: the smallest boundary slack over all particles after the step (``inf``
        on ``ℝ^d``).
      boundary_fraction: the fraction of particles on (or outside) ``∂𝒳`` after the step.
      clip_count: how many particles the step's clip (or projection) moved.
      outside_count: how many particles began the step outside the closed domain or with a
        non-finite coordinate (boundary distance ``< 0`` or NaN). ``init`` rejects such
        concrete positions; this reports them for traced positions and for states built by
        hand. Their step is meaningless (the primal scheme's ``G^{-1/2}`` is NaN outside the
        box, the dual scheme clips them back inside), so a run with ``outside_count > 0``
        should be discarded.
      nonfinite_count: how many particles hold a non-finite coordinate after the step (from a
        bad start, a NaN/inf gradient, step size or entropy weight); the kernel does not mask
        them, it reports them.

    Examples:
      >>> import jax.numpy as jnp
      >>> info = MFLDInfo(jnp.zeros(1), jnp.nan, jnp.nan, jnp.nan, 0.1, 0.0, 0)
      >>> info.boundary_distance, info.outside_count, info.nonfinite_count
      (0.1, 0, 0)
    """

    statistics: Any
    energy: jax.Array
    entropy: jax.Array
    objective: jax.Array
    boundary_distance: jax.Array
    boundary_fraction: jax.Array
    clip_count: jax.Array
    outside_count: jax.Array = 0
    nonfinite_count: jax.Array = 0


def init(
    positions: jax.typing.ArrayLike,
    mirror_map: MirrorMap | None = None,
    functional: MeanFieldFunctional | None = None,
) -> MFLDState:
    """Checks the initial positions and wraps them in an :class:`MFLDState`.

    Shapes are checked always (on one particle, abstractly): the mirror map must map a particle
    of dimension ``d`` to a point of dimension ``d`` (a box with ``d`` bounds, a simplex with
    ``d >= 2`` full coordinates) and the functional's gradient must be shaped like the particle.
    Values are checked when ``positions`` is concrete: finite, and strictly inside the domain.
    Traced positions cannot be checked here; the step reports them in
    :attr:`MFLDInfo.outside_count` and :attr:`MFLDInfo.nonfinite_count`.

    Args:
      positions: ``(N, d)`` floating array, one particle per row.
      mirror_map: the domain's mirror map; each particle must lie strictly inside its domain
        (boundary distance ``> 0`` and unchanged by ``project``). ``None``: ``ℝ^d``.
      functional: optional :class:`MeanFieldFunctional` whose dimension the particles must fit.

    Returns:
      ``MFLDState(positions)``.

    Raises:
      TypeError: ``positions`` is not a floating array.
      ValueError: ``positions`` is not 2-D, its dimension does not fit the mirror map or the
        functional, a coordinate is not finite, or a particle is on or outside the boundary.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxlab.particles import box_mirror_map
      >>> from jaxlab.particles import mmfld
      >>> mmfld.init(jnp.array([[0.5], [0.2]]), box_mirror_map(0.0, 1.0)).positions.shape
      (2, 1)
      >>> mmfld.init(jnp.array([[0.5], [1.0]]), box_mirror_map(0.0, 1.0))  # doctest: +ELLIPSIS
      Traceback (most recent call last):
      ...
      ValueError: positions must lie strictly inside the mirror map's domain: particle 1 ...
    """
    positions = _check_positions(positions)
    _check_dimension(positions, mirror_map, None)
    if is_concrete(positions):
        finite = np.asarray(jnp.all(jnp.isfinite(positions), axis=1))
        if not finite.all():
            i = int(np.flatnonzero(~finite)[0])
            raise ValueError(
                f"positions must be finite: particle {i} is "
                f"{np.asarray(positions[i]).tolist()}; {int((~finite).sum())} such particle(s)"
            )
    if mirror_map is not None and is_concrete(positions):
        distance = jax.vmap(mirror_map.boundary_distance)(positions)
        moved = jnp.max(jnp.abs(jax.vmap(mirror_map.project)(positions) - positions), axis=1)
        tolerance = 64 * jnp.finfo(positions.dtype).eps * (1 + jnp.max(jnp.abs(positions)))
        bad = np.flatnonzero(~np.asarray((distance > 0) & (moved <= tolerance)))
        if bad.size:
            i = int(bad[0])
            raise ValueError(
                "positions must lie strictly inside the mirror map's domain: particle "
                f"{i} at {np.asarray(positions[i]).tolist()} has boundary distance "
                f"{float(distance[i]):.3g} (on or outside the boundary); {bad.size} such "
                "particle(s) in all"
            )
    # The functional last: a particle outside the domain is the more basic error.
    _check_dimension(positions, None, functional)
    return MFLDState(positions)


def _check_positions(positions: Any, name: str = "positions") -> jax.Array:
    """``positions`` as a 2-D floating array (``TypeError``/``ValueError`` naming ``name``)."""
    positions = check_array(positions, name, kind="floating")
    if positions.ndim != 2:
        raise ValueError(
            f"{name} must have shape (num_particles, dim), got shape {positions.shape}"
        )
    return positions


def _check_noise_sign(noise_sign: Any) -> None:
    """A concrete ``noise_sign`` must be ``1`` or ``-1`` (a traced one is used as it is)."""
    sign = concrete_float(noise_sign, "noise_sign")
    if sign is not None and sign not in (1.0, -1.0):
        raise ValueError(
            f"noise_sign must be 1 or -1 (-1: the antithetic path of the same key), got {sign}"
        )


def _check_dimension(
    positions: jax.Array, mirror_map: MirrorMap | None, functional: MeanFieldFunctional | None
) -> None:
    """Checks (abstractly, on one particle) that ``d`` fits the mirror map and the functional."""
    particle = jax.ShapeDtypeStruct(positions.shape[1:], positions.dtype)
    dim = positions.shape[1]
    if mirror_map is not None:
        try:
            dual = jax.eval_shape(mirror_map.to_dual, particle)
            shapes = (
                jax.eval_shape(mirror_map.to_primal, dual).shape,
                jax.eval_shape(mirror_map.project, particle).shape,
            )
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"positions of dimension {dim} do not fit the mirror map: {err}"
            ) from err
        if any(shape != particle.shape for shape in shapes):
            raise ValueError(
                f"positions of dimension {dim} do not fit the mirror map: it maps a particle "
                f"of shape {particle.shape} to shape {shapes[0]} (a box needs one bound per "
                "coordinate or scalar bounds)"
            )
    if functional is not None:
        try:
            statistics = jax.eval_shape(functional.statistics_fn, particle)
            gradient = jax.eval_shape(functional.first_variation_grad_fn, particle, statistics)
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"positions of dimension {dim} do not fit the functional: {err}"
            ) from err
        if getattr(gradient, "shape", None) != particle.shape:
            raise ValueError(
                f"positions of dimension {dim} do not fit the functional: its "
                f"first_variation_grad_fn returns shape {getattr(gradient, 'shape', None)} for "
                f"a particle of shape {particle.shape}"
            )


def _particle_mean(tree: Any, axis_name: str | None) -> Any:
    mean = jax.tree.map(lambda v: jnp.mean(v, axis=0), tree)
    return mean if axis_name is None else jax.lax.pmean(mean, axis_name)


def nearest_neighbour_entropy(
    positions: jax.typing.ArrayLike, num_queries: int | None = None
) -> jax.Array:
    """Kozachenko–Leonenko estimate of ``Ent(μ) = ∫ log(dμ/dx) dμ`` from samples of ``μ``.

    With ``r_i`` the distance from query sample ``i`` to its nearest other sample, ``N``
    samples in ``ℝ^k`` and ``V_k = π^{k/2}/Γ(k/2 + 1)`` the unit ball's volume, the differential
    entropy is estimated by ``Ĥ = ψ(N) - ψ(1) + log V_k + (k/M) Σ_{i ≤ M} log r_i`` over the
    first ``M`` samples as queries; this returns ``-Ĥ``. Cost ``O(M N k)``; it is consistent as
    ``N → ∞`` (bias ``O(N^{-1/k})``). Duplicated samples give ``-inf`` distances' logs, i.e.
    ``Ent = +inf`` (an atom).

    Args:
      positions: ``(N, k)`` samples.
      num_queries: ``M``, the number of query samples (the first ones); default all ``N``.

    Returns:
      The scalar estimate.

    Examples:
      >>> import jax
      >>> samples = jax.random.uniform(jax.random.key(0), (4000, 2))  # Ent(uniform) = 0
      >>> bool(abs(nearest_neighbour_entropy(samples)) < 0.05)
      True

    References:
      Kozachenko & Leonenko, "Sample estimate of the entropy of a random vector", Problems of
      Information Transmission 23 (1987).
    """
    positions = check_array(positions, "positions", kind="real")
    if positions.ndim != 2:
        raise ValueError(f"positions must have shape (num_samples, dim), got {positions.shape}")
    n, k = positions.shape
    if n < 2:
        raise ValueError(f"positions needs at least 2 samples, got {n}")
    m = n if num_queries is None else check_int(num_queries, "num_queries", minimum=1, maximum=n)
    queries = positions[:m]
    squared = jnp.sum((queries[:, None, :] - positions[None, :, :]) ** 2, axis=-1)
    self_pair = jnp.arange(m)[:, None] == jnp.arange(n)[None, :]
    nearest = jnp.min(jnp.where(self_pair, jnp.inf, squared), axis=1)
    return _kozachenko_leonenko(jnp.mean(jnp.log(nearest)), n, k, positions.dtype)


def _sharded_entropy(
    mirror_map: MirrorMap, x: jax.Array, num_queries: int, axis_name: str | None
) -> jax.Array:
    """:func:`nearest_neighbour_entropy` of all particles with the first ``num_queries`` (global
    indices) as queries, computed on this block's queries against the gathered particles.

    Entropy is measured against Lebesgue measure on the last dual-dimension coordinates
    (``x_1..x_d`` on the simplex, every coordinate on a box or ``ℝ^d``).
    """
    num_local, dim = x.shape
    dual_dim = jax.eval_shape(mirror_map.to_dual, x[0]).shape[-1]
    chart = x[:, dim - dual_dim :]
    if axis_name is None:
        offset, everyone = 0, chart
    else:
        offset = jax.lax.axis_index(axis_name) * num_local
        everyone = jax.lax.all_gather(chart, axis_name, tiled=True)
    total = everyone.shape[0]
    queries = num_queries  # <= total: checked by the kernel
    local = chart[: min(queries, num_local)]
    local_index = offset + jnp.arange(local.shape[0])
    squared = jnp.sum((local[:, None, :] - everyone[None, :, :]) ** 2, axis=-1)
    self_pair = local_index[:, None] == jnp.arange(total)[None, :]
    nearest = jnp.min(jnp.where(self_pair, jnp.inf, squared), axis=1)
    log_sum = jnp.sum(jnp.where(local_index < queries, jnp.log(nearest), 0.0))
    if axis_name is not None:
        log_sum = jax.lax.psum(log_sum, axis_name)
    return _kozachenko_leonenko(log_sum / queries, total, dual_dim, x.dtype)


def _kozachenko_leonenko(mean_log_squared: jax.Array, n: int, k: int, dtype) -> jax.Array:
    """``-Ĥ`` from the mean log squared nearest-neighbour distance of ``n`` samples in ``ℝ^k``."""
    log_ball = 0.5 * k * math.log(math.pi) - math.lgamma(0.5 * k + 1.0)
    digamma_n = jax.scipy.special.digamma(jnp.asarray(n, dtype))
    return -(digamma_n + np.euler_gamma + log_ball + 0.5 * k * mean_log_squared)


def build_kernel(
    mirror_map: MirrorMap,
    scheme: str = "primal",
    *,
    boundary_margin: float = _BOUNDARY_MARGIN,
    dual_margin: float = _DUAL_MARGIN,
    entropy_queries: int = 0,
) -> Callable[..., tuple[MFLDState, MFLDInfo]]:
    """Builds one (M)MFLD step on a block of particles, for a mirror map and a scheme.

    With step ``η``, entropy weight ``λ``, ``g^i = ∇_x δF/δμ(μ̂_k, X^i)`` (``μ̂_k`` the empirical
    measure of all particles, self-interaction included) and ``ξ^i ~ N(0, I)``:

    * ``"primal"`` (default; the Itô form in primal coordinates):
      ``X^i ← clip(X^i + η[-G⁻¹g^i + λ∇·G⁻¹(X^i)] + √(2λη) G^{-1/2}(X^i) ξ^i)``, the clip
      moving overshooting particles ``boundary_margin`` (relative) inside the domain;
    * ``"dual"`` (the paper's Euler–Maruyama in the mirror coordinates):
      ``Y^i ← ∇φ(X^i) - η g^i + √(2λη) G^{1/2}(X̃^i) ξ^i``, ``X^i ← ∇φ*(Y^i)``, with ``X̃`` the
      position clipped ``dual_margin`` inside (``G^{1/2}`` overflows at the boundary). Kept for
      fidelity; on the box and the simplex its stationary law does NOT converge to the Gibbs
      law as ``η → 0`` (below);
    * ``"dual_split"`` (the paper's dual drift step, then the noise solved as its own
      diffusion; Ahn & Chewi's splitting): ``Y^i ← ∇φ(X^i) - η g^i``, then ``Y^i`` moves by the
      driftless mirror diffusion ``dY = √(2λ) G(X)^{1/2} dW`` for time ``η``
      (``MirrorMap.mirror_diffusion``): on ``ℝ^d`` the Gaussian ``√(2λη) ξ`` (so the step is
      the others' up to rounding), on the box and the simplex a Wright–Fisher step that leaves
      the uniform law exactly invariant. Consistent: stationary error ``O(λη)``;
    * ``"projected"`` (projected Langevin, the baseline):
      ``X^i ← Π_𝒳(X^i - η g^i + √(2λη) ξ^i)``; puts mass exactly on ``∂𝒳``.

    With :func:`~jaxlab.particles.euclidean_mirror_map` all four are MFLD's Euler–Maruyama step.

    **Why the paper's dual step is biased, and the split one is not.** The dual SDE itself is
    right: on ``[0, 1]`` (``y = logit x``, ``G = 1/(x(1 - x))``) Itô's formula on ``X = σ(Y)``
    gives ``dX = x(1 - x)dY + ½ x(1 - x)(1 - 2x) · 2λG dt = [-x(1 - x)V' + λ(1 - 2x)] dt +
    √(2λx(1 - x)) dW``, the primal form with its ``λ∇·G⁻¹`` term, whose stationary law is
    ``∝ e^{-V/λ}``; the drift is evaluated at ``X_k`` and the noise scales with ``√λ`` as the
    SDE says (the simplex's reduced coordinates likewise). The defect is the Euler step: its
    noise coefficient ``G^{1/2} = 2 cosh(y/2)`` grows without bound, and in the layer
    ``x ≲ λη`` next to a face one step's noise ``√(2λη/x)`` in ``y`` is ``O(1)`` or more (the
    expansion of ``E σ(y + δ)`` behind Euler's weak order has ``k``-th term ``∝ η^k/x^{k-1}``).
    With ``x = λη e^z`` the step is ``z ← z - ηV' + √2 e^{-z/2} ξ`` near ``x = 0``: the layer is
    discretised equally badly at every ``η``. It holds mass ``∝ λη`` and is stepped ``1/η``
    times per unit time, so wrong moves (a particle at ``x ≪ λη`` is thrown to
    ``y ± √(2λη/x)``: deep inside, or against the opposite face) keep an ``O(1)`` rate per
    unit time instead of Euler's ``O(η)``; only the ``log(1/(λη))`` a thrown particle must
    cross to reach the bulk (and the ``dual_margin`` cap on ``G^{1/2}``) make the bias shrink,
    slowly: measured, like ``η^{0.25}`` over a 256-fold range of ``λη`` (table below), with
    no sign of the first-order regime. Known for mirror Langevin: the Euler analysis of
    Zhang et al. (2020) keeps a non-vanishing bias term, and the vanishing-bias proof of Li et
    al. (2022) needs their modified self-concordance, ``G^{1/2}`` Lipschitz in the dual
    coordinates (its derivative here, ``sinh(y/2)``, is unbounded).
    ``"dual_split"`` keeps the paper's dual drift step (smooth: it multiplies ``x`` near a face
    by ``e^{-ηV'}``) and draws the noise from a kernel that leaves Lebesgue measure exactly
    invariant and matches the diffusion's first two moments to ``O(η²)``, so no layer is
    mistreated. Measured (``tests/particles/test_scheme_order.py``, ``c/λ = 3`` on ``[0, 1]``,
    exact mean 0.2809, time scaled to ``λ = 1``; error of the stationary mean, Monte Carlo SE
    0.0013 (0.0008 projected), ``N = 8192``):

    ========  =================  =================  =================  =================
    ``λη``    ``"primal"``       ``"dual_split"``   ``"dual"``         ``"projected"``
    ========  =================  =================  =================  =================
    6.4e-2    +0.0133            +0.0254            +0.1340            -0.1322
    3.2e-2    +0.0081            +0.0118            +0.1162            -0.0982
    1.6e-2    +0.0027            +0.0051            +0.0920            -0.0745
    8e-3      +0.0027            +0.0033            +0.0737            -0.0530
    4e-3      +0.0026            +0.0040            +0.0637            -0.0380
    2e-3      +0.0011            +0.0007            +0.0556            -0.0276
    1e-3      +0.0006            -0.0013            +0.0499            -0.0198
    2.5e-4    -0.0014            -0.0022            +0.0399            -0.0103
    order     0.71 ± 0.27 (2)    1.13 ± 0.14 (3)    0.25 ± 0.00 (8)    0.45 ± 0.00 (8)
    ========  =================  =================  =================  =================

    The order (with the number of resolved steps it is fitted on) is the weighted log-log slope
    of ``|error|`` over the steps where it exceeds 3 SE. On the simplex ``Δ_2``
    (``c/λ = (0, 2, -1)``, one coordinate) the paper's dual scheme is off by
    +0.0516/+0.0342/+0.0264 at ``λη = 4e-3/1e-3/2.5e-4`` (order 0.24), the primal and split
    schemes by +0.0092 and +0.0164 at ``λη = 6.4e-2`` and within 1.2 SE (0.0009) at
    ``λη ≤ 4e-3`` (orders 0.74 ± 0.17 and 0.88 ± 0.10), projected Langevin's order 0.45. On
    ``ℝ`` all four schemes are Euler–Maruyama: the stationary variance of a quadratic potential
    is ``λ/(k(1 - kη/2))``, order 1.

    Particle ``i``'s noise ``ξ^i`` is a function of ``(rng_key, i)`` only (``i`` its global
    index): with a threefry key, counter-mode Threefry-2x32 hashes of ``(i, p)`` give its
    coordinates ``2p, 2p + 1`` through the inverse normal CDF (``N⌈d/2⌉`` hashes per step, each
    device hashing only its own rows), so the result does not depend on how the particles are
    sharded.

    Args:
      mirror_map: the domain's :class:`~jaxlab.particles.MirrorMap`.
      scheme: ``"primal"``, ``"dual"``, ``"dual_split"`` or ``"projected"``.
      boundary_margin: relative clip margin of the primal (and dual) positions.
      dual_margin: relative margin of the point where the dual scheme evaluates ``G^{1/2}``.
      entropy_queries: number of query particles of the nearest-neighbour entropy estimate in
        :class:`MFLDInfo`, in ``[0, N]`` (``0``: not estimated, ``nan``; more than the ``N``
        particles the step sees raises ``ValueError`` when it is traced). It costs
        ``O(queries · N)`` per step and, under ``jax.shard_map``, an ``all_gather`` of the
        positions.

    Returns:
      ``kernel(rng_key, state, functional, stepsize, entropy_weight, axis_name=None, *,
      noise_sign=1.0) -> (MFLDState, MFLDInfo)``; ``state`` holds this block's particles,
      ``axis_name`` names the mesh axis the particles are sharded over (``None``: all particles
      are here) and ``noise_sign = -1`` runs the step with ``-ξ`` in place of ``ξ`` (the
      antithetic path of the same key: see :func:`~jaxlab.particles.ensemble_step`;
      ``±1`` only, checked when concrete). The
      kernel checks, when traced, ``rng_key`` (a PRNG key), the positions' shape against the
      mirror map and the functional, that ``axis_name`` is bound (inside ``jax.vmap`` or
      ``jax.shard_map``) and ``entropy_queries <= N``; values it cannot check (traced positions
      outside the domain, NaN) are counted in ``MFLDInfo.outside_count`` and
      ``MFLDInfo.nonfinite_count``.

    Raises:
      ValueError: unknown ``scheme``, a margin outside ``(0, 0.5)``, negative
        ``entropy_queries``, or ``"dual_split"`` with a mirror map without ``mirror_diffusion``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.particles import box_mirror_map, linear_potential_functional
      >>> from jaxlab.particles import mmfld
      >>> kernel = mmfld.build_kernel(box_mirror_map(0.0, 1.0))
      >>> state = MFLDState(jnp.full((5, 1), 0.5))
      >>> state, info = kernel(jax.random.key(0), state, linear_potential_functional(
      ...     jnp.array([0.3])), stepsize=1e-3, entropy_weight=0.1)
      >>> bool(jnp.all((state.positions > 0) & (state.positions < 1)))
      True
      >>> float(info.energy)  # F(μ̂) = 0.3 · mean position, before the step
      0.15000000596046448

    References:
      Gu & Kim, "Mirror Mean-Field Langevin Dynamics", ICML 2026 (arXiv 2505.02621); Ahn &
      Chewi, "Efficient constrained sampling via the mirror-Langevin algorithm", NeurIPS 2021
      (the split discretisation, with the mirror diffusion run exactly); Zhang, Peyré, Fadili &
      Pereyra, "Wasserstein control of mirror Langevin Monte Carlo", COLT 2020; Li, Tao,
      Vempala & Wibisono, "The mirror Langevin algorithm converges with vanishing bias", ALT
      2022; Griffiths, "Lines of descent in the diffusion approximation of neutral
      Wright–Fisher models", Theor. Popul. Biol. 1980 (the Dirichlet–multinomial transition);
      Ma, Chen & Fox, NeurIPS 2015 (the drift correction λ∇·G⁻¹ of a position-dependent
      diffusion).
    """
    check_choice(scheme, "scheme", SCHEMES)
    for name, margin in (("boundary_margin", boundary_margin), ("dual_margin", dual_margin)):
        check_real(
            margin, name, minimum=0.0, maximum=0.5, include_minimum=False, include_maximum=False
        )
    check_int(entropy_queries, "entropy_queries", minimum=0)
    if scheme == "dual_split" and mirror_map.mirror_diffusion is None:
        raise ValueError(
            'scheme "dual_split" needs a mirror map with a mirror_diffusion sampler (the box, '
            'simplex and Euclidean factories have one); use scheme="primal" with this map'
        )

    @renamed_keyword("step_size", "stepsize")
    def kernel(
        rng_key: jax.Array,
        state: MFLDState,
        functional: MeanFieldFunctional,
        stepsize: jax.typing.ArrayLike,
        entropy_weight: jax.typing.ArrayLike,
        axis_name: str | None = None,
        *,
        noise_sign: jax.typing.ArrayLike = 1.0,
    ) -> tuple[MFLDState, MFLDInfo]:
        check_key(rng_key, "rng_key")
        if not isinstance(state, MFLDState):
            raise TypeError(f"state must be an MFLDState, got {type(state).__name__}")
        if not isinstance(functional, MeanFieldFunctional):
            raise TypeError(
                f"functional must be a MeanFieldFunctional, got {type(functional).__name__}"
            )
        check_positive(stepsize, "stepsize")
        check_positive(entropy_weight, "entropy_weight")
        check_axis_bound(axis_name, "axis_name")
        _check_noise_sign(noise_sign)
        x = _check_positions(state.positions, "state.positions")
        _check_dimension(x, mirror_map, functional)
        num_local, dim = x.shape
        dtype = x.dtype
        num_particles = num_local if axis_name is None else num_local * jax.lax.axis_size(axis_name)
        if entropy_queries > num_particles:
            raise ValueError(
                f"entropy_queries must be an int in [0, {num_particles}] (the number of "
                f"particles), got {entropy_queries}"
            )
        stepsize = jnp.asarray(stepsize, dtype)
        entropy_weight = jnp.asarray(entropy_weight, dtype)

        statistics = _particle_mean(jax.vmap(functional.statistics_fn)(x), axis_name)
        gradient = jax.vmap(functional.first_variation_grad_fn, in_axes=(0, None))(x, statistics)
        noise = particle_noise(rng_key, num_local, dim, dtype, axis_name=axis_name)
        scale = jnp.asarray(noise_sign, dtype) * jnp.sqrt(2.0 * entropy_weight * stepsize)

        if scheme == "primal":
            drift = -jax.vmap(mirror_map.inverse_hessian_vector)(
                x, gradient
            ) + entropy_weight * jax.vmap(mirror_map.inverse_hessian_divergence)(x)
            diffusion = jax.vmap(mirror_map.inverse_hessian_sqrt_noise)(x, noise)
            proposal = x + stepsize * drift + scale * diffusion
            new = jax.vmap(mirror_map.clip, in_axes=(0, None))(proposal, boundary_margin)
        elif scheme == "dual":
            inside = jax.vmap(mirror_map.clip, in_axes=(0, None))
            dual = jax.vmap(mirror_map.to_dual)(inside(x, boundary_margin))
            diffusion = jax.vmap(mirror_map.hessian_sqrt_noise)(inside(x, dual_margin), noise)
            dual = dual - stepsize * jax.vmap(mirror_map.gradient_to_dual)(gradient)
            proposal = jax.vmap(mirror_map.to_primal)(dual + scale * diffusion)
            new = inside(proposal, boundary_margin)
        elif scheme == "dual_split":
            inside = jax.vmap(mirror_map.clip, in_axes=(0, None))
            dual = jax.vmap(mirror_map.to_dual)(inside(x, boundary_margin))
            dual = dual - stepsize * jax.vmap(mirror_map.gradient_to_dual)(gradient)
            # Four normals per coordinate (the noise above is their first quarter, unused).
            wide = particle_noise(rng_key, num_local, 4 * dim, dtype, axis_name=axis_name)
            wide = jnp.asarray(noise_sign, dtype) * wide.reshape(num_local, 4, dim)
            dual = jax.vmap(mirror_map.mirror_diffusion, in_axes=(0, None, 0))(
                dual, entropy_weight * stepsize, wide
            )
            proposal = jax.vmap(mirror_map.to_primal)(dual)
            new = inside(proposal, boundary_margin)
        else:
            proposal = x - stepsize * gradient + scale * noise
            new = jax.vmap(mirror_map.project)(proposal)

        # Diagnostics. XLA:CPU fuses a chain of cheap operations into every consumer and
        # recomputes it there; the proposal's chain holds the noise (a 20-round hash and the
        # inverse CDF), so only one consumer may see it: `moved`, a floating-point row reduction
        # XLA runs as a kernel that reads its inputs from memory (so the proposal is
        # materialised once). Everything else reads `new` or `x` through elementwise maxima and
        # minima over the coordinates (`coordinate_max`, the mirror map's `boundary_distance`),
        # one loop each. Measured at N = 1e5: boolean row reductions of the proposal instead
        # made the step 2x slower.
        moved = jnp.max(jnp.abs(new - proposal), axis=1)
        # Clipped: moved by more than a few ulps of the particle's largest start coordinate (the
        # simplex clip renormalises, which moves every coordinate by ulps). `moved` is NaN
        # exactly when a new coordinate is non-finite (|NaN - ·| and |inf - inf| are NaN; a
        # clip or projection never makes a coordinate infinite).
        scale = 1.0 + jax.vmap(coordinate_max)(jnp.abs(x))
        clipped = moved > _CLIP_ULPS * jnp.finfo(dtype).eps * scale
        distance = jax.vmap(mirror_map.boundary_distance)(new)
        min_distance = jnp.min(distance)
        # A mirror map's distance is NaN or negative at a non-finite point (see MirrorMap).
        start_distance = jax.vmap(mirror_map.boundary_distance)(x)
        # The four counts in one reduction over the particles.
        flags = jnp.stack(
            [distance <= 0, clipped, jnp.isnan(moved), ~(start_distance >= 0)], axis=1
        )
        counts = jnp.sum(flags.astype(jnp.int32), axis=0)
        on_boundary, clip_count, nonfinite_count, outside_count = (counts[k] for k in range(4))
        if axis_name is not None:
            min_distance = jax.lax.pmin(min_distance, axis_name)
            on_boundary = jax.lax.psum(on_boundary, axis_name)
            clip_count = jax.lax.psum(clip_count, axis_name)
            outside_count = jax.lax.psum(outside_count, axis_name)
            nonfinite_count = jax.lax.psum(nonfinite_count, axis_name)

        nan = jnp.asarray(jnp.nan, dtype)
        if functional.objective_fn is None:
            energy = nan
        else:
            energy = jnp.asarray(functional.objective_fn(statistics), dtype)
        if entropy_queries:
            entropy = _sharded_entropy(mirror_map, x, entropy_queries, axis_name)
        else:
            entropy = nan
        info = MFLDInfo(
            statistics=statistics,
            energy=energy,
            entropy=entropy,
            objective=energy + entropy_weight * entropy,
            boundary_distance=min_distance,
            boundary_fraction=on_boundary.astype(dtype) / num_particles,
            clip_count=clip_count,
            outside_count=outside_count,
            nonfinite_count=nonfinite_count,
        )
        return MFLDState(new), info

    return kernel


class mmfld:  # lowercase: a factory, as blackjax.mala
    """Mirror mean-field Langevin dynamics: ``(init, step)`` minimising ``F(μ) + λ Ent(μ)`` on 𝒳.

    ``step`` is the kernel of ``mmfld.build_kernel`` (``scheme="primal"``: the Itô form
    ``X ← clip(X + η[-G⁻¹∇δF/δμ + λ∇·G⁻¹] + √(2λη) G^{-1/2} ξ)``) with the functional and
    hyperparameters bound; ``init`` checks every particle is strictly inside the domain. The
    particles' stationary law approaches ``μ* ∝ exp(-δF/δμ(μ*, ·)/λ)`` on ``𝒳``, and
    ``𝓛(μ_t) - 𝓛(μ*)`` decays linearly (exponentially in ``t``) under a uniform mirror
    log-Sobolev inequality.

    Under ``jax.shard_map`` over ``axis_name`` (see :func:`shard_step`) the mean-field
    statistics are ``pmean``-ed; results match the single-device run up to rounding.

    Args:
      functional: the :class:`MeanFieldFunctional` ``F``.
      mirror_map: the domain's :class:`~jaxlab.particles.MirrorMap`.
      stepsize: ``η > 0`` (``step_size=`` is a deprecated alias).
      entropy_weight: ``λ > 0`` (the temperature).
      scheme: ``"primal"`` (default), ``"dual"`` (the paper's Euler–Maruyama step in the mirror
        coordinates: its stationary law keeps an ``O(1)`` bias as ``η → 0`` on the box and the
        simplex, see ``mmfld.build_kernel``), ``"dual_split"`` (the paper's dual drift step
        with the noise drawn as its own diffusion: consistent) or ``"projected"`` (baseline).
      axis_name: the mesh axis the particles are sharded over, ``None`` on one device.
      boundary_margin: see ``mmfld.build_kernel``.
      dual_margin: see ``mmfld.build_kernel``.
      entropy_queries: see ``mmfld.build_kernel`` (``0``: ``Info.entropy`` is ``nan``).

    Returns:
      A :class:`SamplingAlgorithm` ``(init, step)``; ``step(rng_key, state, *, noise_sign=1.0)``
      (``noise_sign = -1``: the antithetic path, ``-ξ`` for ``ξ``). As in blackjax, the pieces
      are reachable per algorithm: ``mmfld.init(positions, mirror_map)`` (``mmfld.init``) and
      ``mmfld.build_kernel(mirror_map, scheme, ...)`` (``mmfld.build_kernel``).

    Raises:
      ValueError: ``stepsize`` or ``entropy_weight`` is not a finite positive number, or a
        ``mmfld.build_kernel`` argument is out of range.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.particles import box_mirror_map, linear_potential_functional
      >>> algorithm = mmfld(linear_potential_functional(jnp.array([0.3])),
      ...                   box_mirror_map(0.0, 1.0), stepsize=1e-2, entropy_weight=0.1)
      >>> state = algorithm.init(jnp.full((2000, 1), 0.5))
      >>> def body(state, key):
      ...     return algorithm.step(key, state)
      >>> state, info = jax.lax.scan(body, state, jax.random.split(jax.random.key(0), 500))
      >>> round(float(state.positions.mean()), 1)  # exact stationary mean: 0.2809
      0.3
      >>> float(info.boundary_fraction.max())  # no particle ever on the boundary
      0.0
      >>> bool(info.clip_count.sum() < 1e-3 * 2000 * 500)  # the clip fires rarely
      True
      >>> mmfld(linear_potential_functional(jnp.array([0.3])), box_mirror_map(0.0, 1.0),
      ...       stepsize=1e-2, entropy_weight=0.0)
      Traceback (most recent call last):
      ...
      ValueError: entropy_weight must be finite and > 0, got 0.0
      >>> # The lower-level pieces, per algorithm: the kernel takes the hyperparameters per call.
      >>> kernel = mmfld.build_kernel(box_mirror_map(0.0, 1.0))
      >>> state = mmfld.init(jnp.full((5, 1), 0.5), box_mirror_map(0.0, 1.0))
      >>> state, info = kernel(jax.random.key(0), state, linear_potential_functional(
      ...     jnp.array([0.3])), stepsize=1e-3, entropy_weight=0.1)
      >>> float(info.energy)  # F(μ̂) = 0.3 · mean position, before the step
      0.15000000596046448

    References:
      Gu & Kim, "Mirror Mean-Field Langevin Dynamics", ICML 2026 (arXiv 2505.02621).
    """

    init = staticmethod(init)
    build_kernel = staticmethod(build_kernel)

    @renamed_keyword("step_size", "stepsize")
    def __new__(  # type: ignore[misc]  # returns the SamplingAlgorithm, as blackjax does
        cls,
        functional: MeanFieldFunctional,
        mirror_map: MirrorMap,
        stepsize: jax.typing.ArrayLike,
        entropy_weight: jax.typing.ArrayLike,
        *,
        scheme: str = "primal",
        axis_name: str | None = None,
        boundary_margin: float = _BOUNDARY_MARGIN,
        dual_margin: float = _DUAL_MARGIN,
        entropy_queries: int = 0,
    ) -> SamplingAlgorithm:
        check_positive(stepsize, "stepsize")
        check_positive(entropy_weight, "entropy_weight")
        if not isinstance(functional, MeanFieldFunctional):
            raise TypeError(
                f"functional must be a MeanFieldFunctional, got {type(functional).__name__}"
            )
        if not isinstance(mirror_map, MirrorMap):
            raise TypeError(f"mirror_map must be a MirrorMap, got {type(mirror_map).__name__}")
        check_axis_name(axis_name, "axis_name")
        kernel = build_kernel(
            mirror_map,
            scheme,
            boundary_margin=boundary_margin,
            dual_margin=dual_margin,
            entropy_queries=entropy_queries,
        )

        def init_fn(positions: jax.typing.ArrayLike) -> MFLDState:
            return init(positions, mirror_map, functional)

        def step_fn(
            rng_key: jax.Array, state: MFLDState, *, noise_sign: jax.typing.ArrayLike = 1.0
        ) -> tuple[MFLDState, MFLDInfo]:
            return kernel(
                rng_key,
                state,
                functional,
                stepsize,
                entropy_weight,
                axis_name,
                noise_sign=noise_sign,
            )

        return SamplingAlgorithm(init_fn, step_fn)


def _euclidean_init(positions: jax.typing.ArrayLike) -> MFLDState:
    """``mmfld.init`` on ``ℝ^d`` (no domain to check)."""
    return init(positions)


def _euclidean_build_kernel(
    *, entropy_queries: int = 0
) -> Callable[..., tuple[MFLDState, MFLDInfo]]:
    """``mmfld.build_kernel`` with the Euclidean mirror map: MFLD's Euler–Maruyama step."""
    return build_kernel(euclidean_mirror_map(), "primal", entropy_queries=entropy_queries)


class mfld:  # lowercase: a factory, as blackjax.mala
    """Mean-field Langevin dynamics on ``ℝ^d``: :func:`mmfld` with the Euclidean mirror map.

    ``X^i ← X^i - η ∇_x δF/δμ(μ̂, X^i) + √(2λη) ξ^i`` (Euler–Maruyama of
    ``dX = -∇_x δF/δμ(μ_t, X) dt + √(2λ) dW``); nothing keeps the particles in a domain.

    Args:
      functional: the :class:`MeanFieldFunctional` ``F``.
      stepsize: ``η > 0`` (``step_size=`` is a deprecated alias).
      entropy_weight: ``λ > 0``.
      axis_name: the mesh axis the particles are sharded over, ``None`` on one device.
      entropy_queries: see ``mmfld.build_kernel``.

    Returns:
      A :class:`SamplingAlgorithm` ``(init, step)``; per algorithm, ``mfld.init(positions)`` and
      ``mfld.build_kernel(entropy_queries=0)`` are ``mmfld.init`` and ``mmfld.build_kernel`` on
      ``ℝ^d``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> # F(μ) = ½ ∫ x² dμ: the stationary law is N(0, λ).
      >>> algorithm = mfld(MeanFieldFunctional(lambda x: x, lambda x, m: x),
      ...                  stepsize=1e-2, entropy_weight=0.5)
      >>> state = algorithm.init(jnp.zeros((4000, 1)))
      >>> state, _ = jax.lax.scan(lambda s, k: algorithm.step(k, s), state,
      ...                         jax.random.split(jax.random.key(1), 400))
      >>> round(float(state.positions.var()), 1)
      0.5
      >>> kernel = mfld.build_kernel()  # the hyperparameters are passed per call
      >>> state, _ = kernel(jax.random.key(2), mfld.init(jnp.zeros((3, 1))),
      ...                   MeanFieldFunctional(lambda x: x, lambda x, m: x), 1e-2, 0.5)
      >>> state.positions.shape
      (3, 1)

    References:
      Mei, Montanari & Nguyen, PNAS 2018; Nitanda, Wu & Suzuki, AISTATS 2022; Chizat, TMLR 2022.
    """

    init = staticmethod(_euclidean_init)
    build_kernel = staticmethod(_euclidean_build_kernel)

    @renamed_keyword("step_size", "stepsize")
    def __new__(  # type: ignore[misc]  # returns the SamplingAlgorithm, as blackjax does
        cls,
        functional: MeanFieldFunctional,
        stepsize: jax.typing.ArrayLike,
        entropy_weight: jax.typing.ArrayLike,
        *,
        axis_name: str | None = None,
        entropy_queries: int = 0,
    ) -> SamplingAlgorithm:
        return mmfld(
            functional,
            euclidean_mirror_map(),
            stepsize,
            entropy_weight,
            scheme="primal",
            axis_name=axis_name,
            entropy_queries=entropy_queries,
        )


def shard_step(
    step: Callable[[jax.Array, MFLDState], tuple[MFLDState, MFLDInfo]],
    mesh: Mesh,
    axis_name: str = "particles",
) -> Callable[[jax.Array, MFLDState], tuple[MFLDState, MFLDInfo]]:
    """Runs a step built with ``axis_name`` under ``jax.shard_map``, particles split over devices.

    The positions' rows are placed on ``NamedSharding(mesh, P(axis_name))`` (a no-op when they
    already are; ``jax.make_mesh`` meshes are Explicit, so ``shard_map`` does not reshard); the
    key is replicated. Each device steps its block, the mean-field statistics are ``pmean``-ed
    and ``Info`` comes back replicated. The mesh may span processes (pass global arrays, e.g.
    from :func:`jaxlab.distributed.process_local_to_global`).

    Args:
      step: ``step(rng_key, state)`` of an algorithm built with ``axis_name=axis_name``.
      mesh: a mesh with an axis ``axis_name`` whose size divides the number of particles.
      axis_name: the particle axis.

    Returns:
      A jitted ``(rng_key, state) -> (state, info)``.

    Raises:
      ValueError: ``axis_name`` is not an axis of ``mesh``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.distributed import make_mesh
      >>> functional = MeanFieldFunctional(lambda x: x, lambda x, m: x - m)
      >>> mesh = make_mesh((jax.device_count(),), ("particles",))
      >>> sharded = shard_step(mfld(functional, 0.1, 0.5, axis_name="particles").step, mesh)
      >>> single = mfld(functional, 0.1, 0.5).step
      >>> state = MFLDState(jnp.linspace(-1.0, 1.0, 16).reshape(16, 1))
      >>> key = jax.random.key(0)
      >>> bool(jnp.allclose(sharded(key, state)[0].positions, single(key, state)[0].positions))
      True
    """
    check_callable(
        step, "step", signature="step(rng_key, state) -> (state, info), an algorithm's step"
    )
    check_mesh_axis(mesh, axis_name)
    rows = NamedSharding(mesh, P(axis_name))

    def run(rng_key, state):
        state = jax.tree.map(lambda x: jax.device_put(x, rows), state)
        return jax.shard_map(
            step, mesh=mesh, in_specs=(P(), P(axis_name)), out_specs=(P(axis_name), P())
        )(rng_key, state)

    return jax.jit(run)


def ensemble_step(
    step: Callable[..., tuple[MFLDState, MFLDInfo]], *, antithetic: bool = True
) -> Callable[[jax.Array, MFLDState], tuple[MFLDState, MFLDInfo]]:
    """Steps ``S`` independent particle systems at once, in antithetic pairs by default.

    The state's positions are ``(S, N, d)``: ``S`` systems of ``N`` interacting particles each
    (every system has its own empirical measure). ``jax.vmap`` runs ``step`` over the systems
    with keys from ``jax.random.split(rng_key, ·)``. With ``antithetic=True`` system ``2p`` and
    ``2p + 1`` share key ``k_p`` and run with noise ``ξ`` and ``-ξ`` (``noise_sign = ±1``):
    each system alone is an exact sample path, while the pair's average cancels the part of any
    statistic that is odd in the noise, the leading (linear) fluctuation of a stationary average
    around its mean. Averages over pairs are unbiased; their spread over pairs gives the
    standard error (the two systems of a pair are not independent, so count pairs, not systems).

    Args:
      step: an algorithm's ``step(rng_key, state, *, noise_sign=1.0)``, e.g.
        ``mmfld(...).step`` (built without ``axis_name``: each system lives on one device).
      antithetic: pair the systems (``S`` must then be even); ``False``: ``S`` independent keys.

    Returns:
      ``ensemble(rng_key, state) -> (state, info)``, both with a leading ``S`` axis.

    Raises:
      TypeError: ``step`` is not callable or ``antithetic`` not a bool.
      ValueError: (when traced) the positions are not ``(S, N, d)``, or ``S`` is odd with
        ``antithetic=True``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.particles import box_mirror_map, linear_potential_functional
      >>> algorithm = mmfld(linear_potential_functional(jnp.array([0.3])),
      ...                   box_mirror_map(0.0, 1.0), stepsize=1e-2, entropy_weight=0.1)
      >>> ensemble = jax.jit(ensemble_step(algorithm.step))
      >>> state, info = ensemble(jax.random.key(0), MFLDState(jnp.full((4, 3, 1), 0.5)))
      >>> state.positions.shape, info.statistics.shape  # 4 systems of 3 particles
      ((4, 3, 1), (4, 1))
      >>> # A pair's noise cancels in its average: from x = 0.5 one step of the linear potential
      >>> # leaves the pair at 0.5 + η(-x(1 - x) c + λ(1 - 2x)) = 0.49925 on average.
      >>> print(jnp.round((state.positions[0] + state.positions[1])[:, 0] / 2, 5))
      [0.49925 0.49925 0.49925]
      >>> bool(jnp.all(state.positions[0] != state.positions[1]))  # each path is noisy
      True

    References:
      Hammersley & Morton, "A new Monte Carlo technique: antithetic variates", Proc. Cambridge
      Philos. Soc. 1956; Gu & Kim, ICML 2026 (arXiv 2505.02621).
    """
    check_callable(
        step, "step", signature="step(rng_key, state) -> (state, info), an algorithm's step"
    )
    antithetic = check_bool(antithetic, "antithetic")

    def ensemble(rng_key: jax.Array, state: MFLDState) -> tuple[MFLDState, MFLDInfo]:
        check_key(rng_key, "rng_key")
        if not isinstance(state, MFLDState):
            raise TypeError(f"state must be an MFLDState, got {type(state).__name__}")
        positions = check_array(state.positions, "state.positions", kind="floating")
        if positions.ndim != 3:
            raise ValueError(
                "state.positions must have shape (num_systems, num_particles, dim), got shape "
                f"{positions.shape}"
            )
        systems = positions.shape[0]
        if not antithetic:
            keys = jax.random.split(rng_key, systems)
            return jax.vmap(lambda k, x: step(k, MFLDState(x)))(keys, positions)
        if systems % 2:
            raise ValueError(
                "state.positions must hold an even number of systems for antithetic pairs, got "
                f"{systems} (pass antithetic=False for independent systems)"
            )
        keys = jnp.repeat(jax.random.split(rng_key, systems // 2), 2, axis=0)
        signs = jnp.tile(jnp.asarray([1.0, -1.0], positions.dtype), systems // 2)
        return jax.vmap(lambda k, x, sign: step(k, MFLDState(x), noise_sign=sign))(
            keys, positions, signs
        )

    return ensemble


def time_average(
    step: Callable[[jax.Array, MFLDState], tuple[MFLDState, MFLDInfo]],
    state: MFLDState,
    rng_key: jax.Array,
    num_steps: int,
    statistic_fn: Callable[[MFLDInfo], Any],
    *,
    burn_in: int = 0,
) -> tuple[MFLDState, Any]:
    """Runs ``num_steps`` steps in one jitted scan and time-averages a statistic of their Info.

    ``average = (1/(T - B)) Σ_{B ≤ t < T} statistic_fn(info_t)``, ``info_t`` the Info of step
    ``t`` (which describes the measure that step started from), ``B = burn_in``: the ergodic
    estimate of the statistic's stationary expectation. The keys are
    ``jax.random.split(rng_key, num_steps)``. The scan is compiled once per ``(step,
    statistic_fn, num_steps, burn_in)`` and state shape (the two functions are static, compared
    by identity: keep the same objects to reuse the program).

    Args:
      step: ``step(rng_key, state) -> (state, info)`` (an algorithm's step, or
        :func:`ensemble_step` of one).
      state: the starting :class:`MFLDState`.
      rng_key: a PRNG key.
      num_steps: ``T ≥ 1``.
      statistic_fn: ``info ↦`` a pytree of arrays, accumulated in their own dtype.
      burn_in: ``B`` in ``[0, T)``: the first steps, left out of the average.

    Returns:
      ``(final_state, average)``.

    Raises:
      TypeError: ``step`` or ``statistic_fn`` is not callable, ``state`` not an
        :class:`MFLDState`, ``rng_key`` not a key, or a count not an int.
      ValueError: ``num_steps < 1`` or ``burn_in`` outside ``[0, num_steps)``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.particles import box_mirror_map, linear_potential_functional
      >>> algorithm = mmfld(linear_potential_functional(jnp.array([0.3])),
      ...                   box_mirror_map(0.0, 1.0), stepsize=1e-2, entropy_weight=0.1)
      >>> state = algorithm.init(jnp.full((1000, 1), 0.28))
      >>> _, mean = time_average(algorithm.step, state, jax.random.key(0), 2000,
      ...                        lambda info: info.statistics, burn_in=500)
      >>> round(float(mean[0]), 2)  # the stationary mean 0.2809, up to O(η) and Monte Carlo
      0.28

    References:
      Gu & Kim, "Mirror Mean-Field Langevin Dynamics", ICML 2026 (arXiv 2505.02621).
    """
    check_callable(
        step, "step", signature="step(rng_key, state) -> (state, info), an algorithm's step"
    )
    check_callable(statistic_fn, "statistic_fn")
    if not isinstance(state, MFLDState):
        raise TypeError(f"state must be an MFLDState, got {type(state).__name__}")
    check_key(rng_key, "rng_key")
    num_steps = check_int(num_steps, "num_steps", minimum=1)
    burn_in = check_int(burn_in, "burn_in", minimum=0, maximum=num_steps - 1)
    return _time_average_scan(step, state, rng_key, num_steps, statistic_fn, burn_in)


@functools.partial(jax.jit, static_argnums=(0, 3, 4, 5))
def _time_average_scan(step, state, rng_key, num_steps, statistic_fn, burn_in):
    def body(carry, inputs):
        state, total = carry
        t, key = inputs
        state, info = step(key, state)
        used = t >= burn_in
        total = jax.tree.map(
            lambda s, v: s + jnp.where(used, v, jnp.zeros_like(v)), total, statistic_fn(info)
        )
        return (state, total), None

    _, first = jax.eval_shape(step, rng_key, state)
    zeros = jax.tree.map(lambda v: jnp.zeros(v.shape, v.dtype), jax.eval_shape(statistic_fn, first))
    inputs = (jnp.arange(num_steps), jax.random.split(rng_key, num_steps))
    (state, total), _ = jax.lax.scan(body, (state, zeros), inputs)
    return state, jax.tree.map(lambda s: s / (num_steps - burn_in), total)
