"""Mirror maps: Legendre potentials on a convex domain, their gradients, inverses and Hessians.

A mirror map is a strictly convex potential ``φ`` on a convex domain ``𝒳`` whose gradient blows
up at the boundary ``∂𝒳``. ``∇φ`` sends a primal point ``x ∈ 𝒳`` to the dual space, its inverse
``∇φ*`` sends any dual point back strictly inside ``𝒳``, and the Hessian ``G(x) = ∇²φ(x)`` is
the metric that mirror Langevin dynamics diffuses in: the noise has covariance ``G(x)⁻¹``, which
vanishes at the boundary, so the particles never leave the domain.

Every function of a :class:`MirrorMap` acts on ONE particle (a vector); the samplers ``vmap``
them over the particles.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxlab._src.validation import check_real_array

__all__ = ["MirrorMap", "box_mirror_map", "euclidean_mirror_map", "simplex_mirror_map"]

# A clip margin never smaller than this many machine epsilons (relative to the box width), so
# that in float32, where 1 - 1e-9 rounds to 1, the clipped point is still strictly inside.
_EPS_MULTIPLE = 4.0


class MirrorMap(NamedTuple):
    """A mirror map ``φ`` on a convex domain ``𝒳``: the functions mirror Langevin needs.

    Notation: ``x`` a primal point (a particle's position, shape ``(d,)``), ``y`` a dual point,
    ``G(x) = ∇²φ(x)``. The dual space may have fewer coordinates than the primal one (the simplex
    is held in its ``d + 1`` full coordinates ``x_0..x_d`` and mirrored to ``d`` reduced ones), so
    gradients given in primal coordinates go through ``gradient_to_dual``. ``G⁻¹`` below always
    means the inverse metric written in primal coordinates (on the simplex the projection of
    ``diag(x) - xxᵀ`` onto the tangent space), so that ``jacfwd(to_primal)(y) = G⁻¹`` (in the
    reduced columns for the simplex).

    Users can supply their own map by filling every field with a function of one particle
    (``mirror_diffusion`` may stay ``None``: only the ``"dual_split"`` scheme needs it).

    Attributes:
      potential: ``x ↦ φ(x)``, a scalar.
      to_dual: ``x ↦ ∇φ(x)`` (the mirror map).
      to_primal: ``y ↦ ∇φ*(y)`` (its inverse), strictly inside ``𝒳`` for every finite ``y``.
      hessian: ``x ↦ G(x)``, the dual-dimension square matrix ``∇²φ``, positive definite.
      inverse_hessian_vector: ``(x, v) ↦ G(x)⁻¹ v`` with ``v`` in primal coordinates.
      inverse_hessian_divergence: ``x ↦ ∇·G(x)⁻¹`` (row-wise divergence), the Itô drift
        correction that keeps the primal scheme's stationary law ``∝ e^{-V/λ}``.
      inverse_hessian_sqrt_noise: ``(x, ξ) ↦`` a vector with covariance ``G(x)⁻¹`` when
        ``ξ ~ N(0, I)`` (primal-shaped ``ξ``).
      hessian_sqrt_noise: ``(x, ξ) ↦`` a dual vector with covariance ``G(x)`` when
        ``ξ ~ N(0, I)`` (primal-shaped ``ξ``).
      gradient_to_dual: ``g ↦`` the gradient in dual coordinates of a function whose gradient
        in primal coordinates is ``g`` (identity except on the simplex: ``g_{1:} - g_0``).
      clip: ``(x, margin) ↦`` the point moved strictly inside ``𝒳``, at relative distance at
        least ``margin`` from the boundary (unchanged if already there).
      project: ``x ↦`` the Euclidean projection onto the closed domain (projected Langevin).
      boundary_distance: ``x ↦`` the smallest slack of ``x`` in the domain's constraints
        (``min_j min(x_j - l_j, u_j - x_j)`` on a box, ``min_j x_j`` on the simplex, ``inf``
        for ``ℝ^d``): ``> 0`` strictly inside, ``0`` on ``∂𝒳``, ``< 0`` outside, and not
        ``>= 0`` (NaN or negative) when a coordinate is not finite: the samplers count a
        particle outside the domain exactly when ``~(boundary_distance(x) >= 0)``.
      mirror_diffusion: optional ``(y, duration, ξ) ↦ y'``, a draw of the driftless
        mirror diffusion ``dY = √2 G(X)^{1/2} dW``, ``X = ∇φ*(Y)``, run for time ``duration``
        from the dual point ``y`` (in primal coordinates ``dX = ∇·G⁻¹ dt + √2 G^{-1/2} dW``,
        whose invariant law is Lebesgue measure on ``𝒳``), returned as a dual point, from
        ``ξ ~ N(0, I)`` of shape ``(4, d)`` (``d`` the primal dimension; a map uses what it
        needs, so ``-ξ`` gives the antithetic draw). The
        ``"dual_split"`` scheme of :func:`~jaxlab.particles.mmfld` needs it; the three
        factories below fill it (a Gaussian step on ``ℝ^d``; on the simplex and the box, where
        the diffusion is the neutral Wright–Fisher and Jacobi diffusion, a draw from their
        transition's Dirichlet–multinomial mixture, which leaves Lebesgue measure exactly
        invariant for any step).

    Examples:
      >>> import jax.numpy as jnp
      >>> mirror_map = box_mirror_map(0.0, 1.0)
      >>> x = jnp.array([0.25, 0.5])
      >>> mirror_map.to_dual(x)  # log(x / (1 - x))
      Array([-1.0986123,  0.       ], dtype=float32)
      >>> mirror_map.to_primal(mirror_map.to_dual(x))
      Array([0.25, 0.5 ], dtype=float32)
      >>> mirror_map.inverse_hessian_vector(x, jnp.ones(2))  # x (1 - x)
      Array([0.1875, 0.25  ], dtype=float32)

    References:
      Hsieh, Kavis, Rolland & Cevher, "Mirrored Langevin Dynamics", NeurIPS 2018; Gu & Kim,
      "Mirror Mean-Field Langevin Dynamics", ICML 2026 (arXiv 2505.02621).
    """

    potential: Callable[[jax.Array], jax.Array]
    to_dual: Callable[[jax.Array], jax.Array]
    to_primal: Callable[[jax.Array], jax.Array]
    hessian: Callable[[jax.Array], jax.Array]
    inverse_hessian_vector: Callable[[jax.Array, jax.Array], jax.Array]
    inverse_hessian_divergence: Callable[[jax.Array], jax.Array]
    inverse_hessian_sqrt_noise: Callable[[jax.Array, jax.Array], jax.Array]
    hessian_sqrt_noise: Callable[[jax.Array, jax.Array], jax.Array]
    gradient_to_dual: Callable[[jax.Array], jax.Array]
    clip: Callable[[jax.Array, float], jax.Array]
    project: Callable[[jax.Array], jax.Array]
    boundary_distance: Callable[[jax.Array], jax.Array]
    mirror_diffusion: Callable[[jax.Array, jax.Array, jax.Array], jax.Array] | None = None


# Up to this many coordinates a particle's minimum (maximum) is a chain of `jnp.minimum` over its
# coordinates: vmapped over the particles it is one elementwise loop, where `jnp.min` is a row
# reduction that XLA:CPU runs about 3x slower on (N, d) arrays with small d.
_UNROLLED_COORDINATES = 8


def coordinate_min(v: jax.Array) -> jax.Array:
    """The minimum of a particle's coordinates (NaN if one is NaN), cheap under ``jax.vmap``."""
    if v.ndim == 1 and v.shape[0] <= _UNROLLED_COORDINATES:
        return functools.reduce(jnp.minimum, [v[j] for j in range(v.shape[0])])
    return jnp.min(v)


def coordinate_max(v: jax.Array) -> jax.Array:
    """The maximum of a particle's coordinates (NaN if one is NaN), cheap under ``jax.vmap``."""
    if v.ndim == 1 and v.shape[0] <= _UNROLLED_COORDINATES:
        return functools.reduce(jnp.maximum, [v[j] for j in range(v.shape[0])])
    return jnp.max(v)


def _finite_or_nan(x: jax.Array, value: jax.Array) -> jax.Array:
    """``value`` if every coordinate of ``x`` is finite, else NaN."""
    return jnp.where(jnp.isfinite(coordinate_max(jnp.abs(x))), value, jnp.nan)


def _effective_margin(margin: float, dtype) -> float:
    """The relative clip margin actually used: ``margin``, but at least a few ulps of ``dtype``."""
    return max(float(margin), _EPS_MULTIPLE * float(jnp.finfo(dtype).eps))


def _dirichlet_poisson_gamma(mean_shift: jax.Array, noise: jax.Array) -> jax.Array:
    """``log G`` with ``G ~ Gamma(1 + Poisson(μ))``, elementwise, from two normals per entry.

    ``Gamma(1 + Poisson(μ))`` is half a noncentral chi-square with two degrees of freedom and
    noncentrality ``2μ`` (a Poisson mixture of ``χ²_{2 + 2j}/2 = Gamma(1 + j)``), i.e.
    ``½‖(√(2μ), 0) + (ξ_1, ξ_2)‖²``: exact, and two Gaussians instead of two rejection samplers.
    ``noise`` holds ``(ξ_1, ξ_2)`` on its leading axis.
    """
    return jnp.log(0.5 * ((jnp.sqrt(2.0 * mean_shift) + noise[0]) ** 2 + noise[1] ** 2))


def _lineages(time: jax.Array, total_mutation: float) -> jax.Array:
    """The Poisson mean ``M = θ/(e^{θt/2} - 1) ≈ 2/t`` of the Wright–Fisher step of time ``t``.

    With ``K ~ Poisson(M)`` lineages the step's mean ``x + (1 - θx) E[1/(θ + K)]`` equals the
    diffusion's ``x + (1 - θx)(1 - e^{-θt/2})/θ`` up to ``O(t²)`` (``1/(θ + M)`` is exact, the
    Poisson spread adds ``M/(θ + M)³``), and so does its covariance ``≈ t(diag(x) - xxᵀ)``.
    """
    return total_mutation / jnp.expm1(0.5 * total_mutation * time)


def _wright_fisher_dual_step(
    probabilities: jax.Array, time: jax.Array, total_mutation: float, noise: jax.Array
) -> jax.Array:
    """``log G`` of one neutral Wright–Fisher step (``θ_i = 1``) from the category weights ``x``.

    The step is ``x' = G / ΣG``, ``G_i ~ Gamma(1 + L_i)``, ``L_i ~ Poisson(M x_i)``: given ``L``,
    ``x' ~ Dir(1 + L)``, the posterior of ``x ~ Dir(1, ..., 1)`` (the uniform law) under
    ``L_i | x ~ Poisson(M x_i)``, so the uniform law is exactly invariant for any ``M``; it is
    the Dirichlet–multinomial form of the Wright–Fisher transition (Griffiths 1980) with a
    Poisson number of lineages. The caller takes the dual coordinates from ``log G``
    (differences of logs, so a weight near 0 or 1 never rounds to the boundary).
    """
    return _dirichlet_poisson_gamma(_lineages(time, total_mutation) * probabilities, noise)


def euclidean_mirror_map() -> MirrorMap:
    """The Euclidean map ``φ(x) = ½‖x‖²`` on ``ℝ^d``: mirror Langevin becomes plain Langevin.

    ``∇φ = ∇φ* = id``, ``G = I``, ``∇·G⁻¹ = 0``; ``clip`` and ``project`` do nothing and the
    boundary distance is ``+inf``. With this map :func:`~jaxlab.particles.mmfld` is MFLD.

    Returns:
      A :class:`MirrorMap`.

    Examples:
      >>> import jax.numpy as jnp
      >>> mirror_map = euclidean_mirror_map()
      >>> mirror_map.hessian(jnp.array([3.0, -1.0]))
      Array([[1., 0.],
             [0., 1.]], dtype=float32)
      >>> float(mirror_map.boundary_distance(jnp.array([3.0, -1.0])))
      inf

    References:
      Mei, Montanari & Nguyen, PNAS 2018; Nitanda, Wu & Suzuki, AISTATS 2022 (MFLD).
    """

    def potential(x):
        return 0.5 * jnp.sum(x * x)

    def identity(x):
        return x

    def hessian(x):
        return jnp.eye(x.shape[-1], dtype=x.dtype)

    return MirrorMap(
        potential=potential,
        to_dual=identity,
        to_primal=identity,
        hessian=hessian,
        inverse_hessian_vector=lambda x, v: v,
        inverse_hessian_divergence=jnp.zeros_like,
        inverse_hessian_sqrt_noise=lambda x, noise: noise,
        hessian_sqrt_noise=lambda x, noise: noise,
        gradient_to_dual=identity,
        clip=lambda x, margin: x,
        project=identity,
        boundary_distance=lambda x: _finite_or_nan(x, jnp.asarray(jnp.inf, x.dtype)),
        mirror_diffusion=lambda y, duration, noise: y + jnp.sqrt(2.0 * duration) * noise[0],
    )


def box_mirror_map(lower: jax.typing.ArrayLike, upper: jax.typing.ArrayLike) -> MirrorMap:
    """The entropic map on the box ``[l, u]`` (per coordinate; the Jacobi diffusion on [0, 1]).

    ``φ(x) = Σ_j (x_j - l_j) log(x_j - l_j) + (u_j - x_j) log(u_j - x_j)``, so

    * ``∇φ(x) = log((x - l) / (u - x))``, ``∇φ*(y) = l + (u - l) σ(y)`` (``σ`` the logistic),
    * ``G(x) = diag((u - l) / ((x - l)(u - x)))``, ``G⁻¹ = diag((x - l)(u - x) / (u - l))``,
    * ``∇·G⁻¹ = (u + l - 2x) / (u - l)``.

    On ``[0, 1]`` the primal MMFLD step for a potential ``V`` is the Jacobi diffusion
    ``dX = [-X(1 - X)V'(X) + λ(1 - 2X)] dt + √(2λX(1 - X)) dW``.

    Args:
      lower: ``l``, a scalar or one bound per coordinate.
      upper: ``u``, same shape as ``lower`` (or a scalar), with ``u > l`` everywhere.

    Returns:
      A :class:`MirrorMap` on ``[l, u]``.

    Raises:
      TypeError: a bound is not a real number or array.
      ValueError: a bound is not finite, the two shapes do not broadcast, or
        ``upper <= lower`` somewhere. Positions whose dimension differs from the bounds' (when
        they are not scalars) raise a ``ValueError`` naming ``positions`` when traced.

    Examples:
      >>> import jax.numpy as jnp
      >>> mirror_map = box_mirror_map(jnp.array([-2.0, -1.0]), jnp.array([2.0, 1.0]))
      >>> x = jnp.array([1.0, 0.0])
      >>> mirror_map.hessian(x)  # (u - l) / ((x - l)(u - x))
      Array([[1.3333334, 0.       ],
             [0.       , 2.       ]], dtype=float32)
      >>> mirror_map.inverse_hessian_divergence(x)  # (u + l - 2x) / (u - l)
      Array([-0.5,  0. ], dtype=float32)
      >>> mirror_map.clip(jnp.array([2.5, -1.0]), 1e-3)
      Array([ 1.996, -0.998], dtype=float32)
      >>> box_mirror_map(1.0, 1.0)
      Traceback (most recent call last):
      ...
      ValueError: upper must be > lower in every coordinate, got lower=1.0, upper=1.0

    References:
      Gu & Kim, "Mirror Mean-Field Langevin Dynamics", ICML 2026 (arXiv 2505.02621);
      Ahn & Chewi, "Efficient constrained sampling via the mirror-Langevin algorithm",
      NeurIPS 2021.
    """
    lower_np = check_real_array(lower, "lower")
    upper_np = check_real_array(upper, "upper")
    if lower_np is None or upper_np is None:
        raise TypeError("lower and upper must be concrete (not traced): they define the domain")
    try:
        shape = np.broadcast_shapes(lower_np.shape, upper_np.shape)
    except ValueError as err:
        raise ValueError(
            f"lower and upper must have one shape (or be scalars), got {lower_np.shape} and "
            f"{upper_np.shape}"
        ) from err
    if len(shape) > 1:
        raise ValueError(
            f"lower and upper must be scalars or 1-D (one per coordinate), got {shape}"
        )
    if not np.all(upper_np > lower_np):
        raise ValueError(
            f"upper must be > lower in every coordinate, got lower={lower}, upper={upper}"
        )
    lower, upper = jnp.asarray(lower), jnp.asarray(upper)

    def bounds(x):
        if shape and tuple(x.shape) != shape:
            raise ValueError(
                f"positions must have dimension {shape[0]} (one per bound of the box), got a "
                f"particle of shape {tuple(x.shape)}"
            )
        return lower.astype(x.dtype), upper.astype(x.dtype)

    def potential(x):
        lo, hi = bounds(x)
        return jnp.sum(
            jax.scipy.special.xlogy(x - lo, x - lo) + jax.scipy.special.xlogy(hi - x, hi - x)
        )

    def to_dual(x):
        lo, hi = bounds(x)
        return jnp.log(x - lo) - jnp.log(hi - x)

    def to_primal(y):
        lo, hi = bounds(y)
        return lo + (hi - lo) * jax.nn.sigmoid(y)

    def inverse_metric(x):
        lo, hi = bounds(x)
        return (x - lo) * (hi - x) / (hi - lo)

    def hessian(x):
        return jnp.diag(1.0 / inverse_metric(x))

    def inverse_hessian_divergence(x):
        lo, hi = bounds(x)
        return (hi + lo - 2.0 * x) / (hi - lo)

    def clip(x, margin):
        lo, hi = bounds(x)
        delta = _effective_margin(margin, x.dtype) * (hi - lo)
        return jnp.clip(x, lo + delta, hi - delta)

    def project(x):
        lo, hi = bounds(x)
        return jnp.clip(x, lo, hi)

    def boundary_distance(x):
        lo, hi = bounds(x)
        return coordinate_min(jnp.minimum(x - lo, hi - x))

    def mirror_diffusion(y, duration, noise):
        # z = (x - l)/(u - l) runs (1/(u - l))[z(1 - z)∂² + (1 - 2z)∂]: per coordinate the
        # two-type Wright–Fisher (Jacobi) diffusion, θ = (1, 1), at time 2·duration/(u - l).
        # Its dual coordinate is logit z = log G_1 - log G_2, with z, 1 - z exact from y.
        lo, hi = bounds(y)
        weights = jnp.stack([jax.nn.sigmoid(y), jax.nn.sigmoid(-y)])
        time = jnp.broadcast_to(2.0 * jnp.asarray(duration, y.dtype) / (hi - lo), weights.shape)
        log_gamma = _wright_fisher_dual_step(weights, time, 2.0, noise.reshape(2, 2, *y.shape))
        return log_gamma[0] - log_gamma[1]

    return MirrorMap(
        potential=potential,
        to_dual=to_dual,
        to_primal=to_primal,
        hessian=hessian,
        inverse_hessian_vector=lambda x, v: inverse_metric(x) * v,
        inverse_hessian_divergence=inverse_hessian_divergence,
        inverse_hessian_sqrt_noise=lambda x, noise: jnp.sqrt(inverse_metric(x)) * noise,
        hessian_sqrt_noise=lambda x, noise: noise / jnp.sqrt(inverse_metric(x)),
        gradient_to_dual=lambda g: g,
        clip=clip,
        project=project,
        boundary_distance=boundary_distance,
        mirror_diffusion=mirror_diffusion,
    )


def simplex_mirror_map() -> MirrorMap:
    """The entropic map on the probability simplex ``Δ_d`` (the Wright–Fisher diffusion).

    Particles are held in full coordinates ``x = (x_0, ..., x_d)``, ``Σ_j x_j = 1``; the dual
    space has the ``d`` reduced coordinates ``y_j = log(x_j / x_0)``. With the negative entropy
    ``φ(x) = Σ_j x_j log x_j``:

    * ``∇φ*(y) = softmax(0, y)``,
    * ``G⁻¹ = diag(x) - xxᵀ`` (in full coordinates), ``∇·G⁻¹ = 1 - (d + 1) x``,
    * ``G = diag(1/x_{1:}) + 11ᵀ / x_0`` in the reduced coordinates,
    * noise with covariance exactly ``diag(x) - xxᵀ``: ``√x ⊙ ζ - x ⟨√x, ζ⟩``, ``ζ ~ N(0, I)``.

    With ``V = 0`` the primal dynamics leave the uniform law on ``Δ_d`` invariant.

    Returns:
      A :class:`MirrorMap` on ``Δ_d`` (``d`` is set by the particles' shape, ``d + 1``).

    Examples:
      >>> import jax.numpy as jnp
      >>> mirror_map = simplex_mirror_map()
      >>> x = jnp.array([0.5, 0.25, 0.25])
      >>> mirror_map.to_dual(x)  # log(x_j / x_0), j = 1, 2
      Array([-0.6931472, -0.6931472], dtype=float32)
      >>> mirror_map.to_primal(mirror_map.to_dual(x))
      Array([0.5 , 0.25, 0.25], dtype=float32)
      >>> mirror_map.inverse_hessian_divergence(x)  # 1 - 3x
      Array([-0.5 ,  0.25,  0.25], dtype=float32)
      >>> mirror_map.project(jnp.array([1.0, 0.5, -1.0]))
      Array([0.75, 0.25, 0.  ], dtype=float32)

    References:
      Gu & Kim, "Mirror Mean-Field Langevin Dynamics", ICML 2026 (arXiv 2505.02621);
      Hsieh et al., "Mirrored Langevin Dynamics", NeurIPS 2018.
    """

    def potential(x):
        return jnp.sum(jax.scipy.special.xlogy(x, x))

    def to_dual(x):
        if x.ndim != 1 or x.shape[0] < 2:
            raise ValueError(
                "positions on the simplex need d + 1 >= 2 full coordinates (x_0, ..., x_d), "
                f"got a particle of shape {tuple(x.shape)}"
            )
        return jnp.log(x[1:]) - jnp.log(x[0])

    def to_primal(y):
        return jax.nn.softmax(jnp.concatenate([jnp.zeros((1,), y.dtype), y]))

    def hessian(x):
        return jnp.diag(1.0 / x[1:]) + 1.0 / x[0]

    def inverse_hessian_vector(x, v):
        return x * v - x * jnp.dot(x, v)

    def inverse_hessian_divergence(x):
        return 1.0 - x.shape[-1] * x

    def inverse_hessian_sqrt_noise(x, noise):
        root = jnp.sqrt(x)
        return root * noise - x * jnp.dot(root, noise)

    def hessian_sqrt_noise(x, noise):
        # diag(1/x_{1:}) + 11ᵀ/x_0 as the covariance of ζ_{1:}/√x_{1:} + ζ_0/√x_0 (one ζ_0 shared).
        return noise[1:] / jnp.sqrt(x[1:]) + noise[0] / jnp.sqrt(x[0])

    def clip(x, margin):
        clipped = jnp.maximum(x, _effective_margin(margin, x.dtype))
        return clipped / jnp.sum(clipped)

    def simplex_diffusion(y, duration, noise):
        # Σ x_i(δ_ij - x_j)∂_ij + Σ(1 - (d + 1)x_i)∂_i is twice the generator of Wright–Fisher
        # with θ_i = 1: Wright–Fisher time 2·duration; y_j = log(x_j/x_0) = log G_j - log G_0.
        weights = jax.nn.softmax(jnp.concatenate([jnp.zeros((1,), y.dtype), y]))
        time = 2.0 * jnp.asarray(duration, y.dtype)
        log_gamma = _wright_fisher_dual_step(weights, time, weights.shape[0], noise[:2])
        return log_gamma[1:] - log_gamma[0]

    return MirrorMap(
        potential=potential,
        to_dual=to_dual,
        to_primal=to_primal,
        hessian=hessian,
        inverse_hessian_vector=inverse_hessian_vector,
        inverse_hessian_divergence=inverse_hessian_divergence,
        inverse_hessian_sqrt_noise=inverse_hessian_sqrt_noise,
        hessian_sqrt_noise=hessian_sqrt_noise,
        gradient_to_dual=lambda g: g[1:] - g[0],
        clip=clip,
        # Euclidean projection onto {x ≥ 0, Σx = 1} (sort and threshold, Held et al. 1974).
        project=optax.projections.projection_simplex,
        boundary_distance=lambda x: _finite_or_nan(x, coordinate_min(x)),
        # Σ x_i(δ_ij - x_j)∂_ij + Σ(1 - (d + 1)x_i)∂_i is Wright–Fisher's generator (θ_i = 1)
        # at twice its time scale.
        mirror_diffusion=simplex_diffusion,
    )
