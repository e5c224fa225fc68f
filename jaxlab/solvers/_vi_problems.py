"""Test problems for the stochastic VI solvers, with known solutions and unbounded-variance oracles.

- :func:`bilinear_nonnegative`: ``min_x max_{y >= 0} xᵀAy + bᵀx - cᵀy`` on the unbounded set
  ``R^d x R^d_+``, solution planted by construction, noise ``Â = A + σN`` whose variance grows like
  ``||z||²``.
- :func:`weak_minty_2d`: ``F(z) = Mz`` with ``M = [[a, b], [-b, a]]``, ``a < 0``: not monotone, but
  ``z* = 0`` is a weak-Minty solution with ``ρ = -2a/(a² + b²)``.

Each returns a :class:`VIProblem` whose ``operator_fn`` has the solvers' signature
``(z, rng_key, batch_size) -> F̂`` (a batch of ``b`` calls drawn in closed form: equal in law to
the average of ``b`` single calls, at the cost of one).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from optax.projections import projection_non_negative

from jaxlab._src import validation

__all__ = ["VIProblem", "bilinear_nonnegative", "weak_minty_2d"]


class VIProblem(NamedTuple):
    """A variational inequality with a stochastic oracle and its known solution.

    Attributes:
      operator_fn: ``(z, rng_key, batch_size) -> F̂(z)``, unbiased, averaged over the batch.
      exact_operator_fn: ``z -> F(z)``.
      projection: ``Π_Z``.
      solution: a solution ``z*`` (the same pytree shape as the iterates).
      lipschitz: the Lipschitz constant ``L`` of ``F``.
      weak_minty_rho: the weak-Minty parameter ``ρ >= 0`` of ``z*`` (0: monotone / Minty).

    Examples:
      >>> problem = weak_minty_2d(-0.3, 1.0)
      >>> round(problem.weak_minty_rho * problem.lipschitz, 4)
      0.5747
    """

    operator_fn: Callable[..., Any]
    exact_operator_fn: Callable[..., Any]
    projection: Callable[[Any], Any]
    solution: Any
    lipschitz: float
    weak_minty_rho: float


def _static_real(value: Any, name: str, *, minimum: float | None = None) -> float:
    """A concrete finite real: it builds the instance (matrices, Python branches), so not traced."""
    number = validation.check_real(value, name, minimum=minimum)
    if number is None:
        raise TypeError(f"{name} sets the problem instance: pass a concrete number, not a tracer")
    return number


def _random_orthogonal(rng_key: jax.Array, dim: int) -> jax.Array:
    """Haar-distributed orthogonal matrix (QR of a Gaussian matrix, signs fixed by R's diagonal)."""
    q, r = jnp.linalg.qr(jax.random.normal(rng_key, (dim, dim)))
    return q * jnp.sign(jnp.diagonal(r))[None, :]


def _noise_scale(noise: float, batch_size, dtype) -> jax.Array:
    return jnp.asarray(noise, dtype) / jnp.sqrt(jnp.asarray(batch_size).astype(dtype))


def bilinear_nonnegative(
    rng_key: jax.Array,
    dim: int,
    noise: float,
    *,
    singular_values: tuple[float, float] = (1.0, 2.0),
    active_constraints: bool = True,
) -> VIProblem:
    """The noisy bilinear game ``min_x max_{y >= 0} xᵀAy + bᵀx - cᵀy`` with a planted solution.

    Maths: ``z = (x, y)``, ``Z = R^d x R^d_+`` (unbounded), ``F(z) = (Ay + b, c - Aᵀx)``
    (monotone, ``L = ||A||₂``). ``A = U diag(linspace(s_min, s_max, d)) Vᵀ`` with random orthogonal
    ``U, V``. The solution is planted: ``x* ~ N(0, I)``, ``y* = |N(0, I)|`` with every other entry
    (even indices) set to 0 and a slack ``s_i = |N(0, 1)| + 0.1`` there (``s = 0`` elsewhere);
    ``b = -Ay*``, ``c = Aᵀx* + s``. Then ``F(z*) = (0, s)`` lies in ``-N_Z(z*)``. ``y*`` is the
    unique ``y``-part of any solution (``A`` is invertible); the ``x``-part is unique when
    ``active_constraints=False`` (then ``y* > 0`` and ``s = 0``). Oracle: ``Â = A + σN``,
    ``N`` i.i.d. standard normal per call, so ``E||F̂(z) - F(z)||² = σ² d ||z||²``, unbounded on
    ``Z``; a batch of ``b`` calls is drawn as ``A + (σ/√b) N`` (equal in law).

    Args:
      rng_key: key of the instance (matrix and solution).
      dim: ``d >= 1`` (the iterate has ``2d`` coordinates).
      noise: ``σ >= 0``.
      singular_values: ``(s_min, s_max)``, ``0 < s_min <= s_max``.
      active_constraints: plant zeros in ``y*`` with positive slack (constraints active at the
        solution); ``False`` plants ``y* > 0`` instead.

    Returns:
      A :class:`VIProblem` with iterates the tuple ``(x, y)``; arrays use the default float dtype
      (float64 under ``jax.enable_x64``).

    Examples:
      >>> from jaxlab.solvers import natural_residual
      >>> problem = bilinear_nonnegative(jax.random.key(0), dim=4, noise=0.5)
      >>> res = natural_residual(problem.exact_operator_fn, problem.solution,
      ...                        projection=problem.projection)
      >>> bool(res < 1e-5), problem.lipschitz
      (True, 2.0)

    References:
      A. Alacaoglu, D. Kim, Solving Stochastic Variational Inequalities without the Bounded
      Variance Assumption, ICML 2026 (arXiv 2602.05531).
    """
    validation.check_key(rng_key, "rng_key")
    dim = validation.check_int(dim, "dim", minimum=1)
    sigma = _static_real(noise, "noise", minimum=0.0)
    if len(singular_values) != 2:
        raise ValueError(f"singular_values must be (s_min, s_max), got {singular_values!r}")
    s_min = _static_real(singular_values[0], "singular_values[0]")
    s_max = _static_real(singular_values[1], "singular_values[1]")
    if not 0 < s_min <= s_max:
        raise ValueError(f"singular_values must satisfy 0 < s_min <= s_max, got {singular_values}")
    keys = jax.random.split(rng_key, 6)
    u = _random_orthogonal(keys[0], dim)
    v = _random_orthogonal(keys[1], dim)
    spectrum = jnp.linspace(s_min, s_max, dim)
    matrix = (u * spectrum[None, :]) @ v.T
    x_star = jax.random.normal(keys[2], (dim,))
    magnitudes = jnp.abs(jax.random.normal(keys[3], (dim,)))
    slack_draw = jnp.abs(jax.random.normal(keys[4], (dim,))) + 0.1
    if active_constraints:
        zero = (jnp.arange(dim) % 2) == 0
        y_star = jnp.where(zero, 0.0, magnitudes)
        slack = jnp.where(zero, slack_draw, 0.0)
    else:
        y_star = magnitudes + 0.1
        slack = jnp.zeros((dim,))
    b = -matrix @ y_star
    c = matrix.T @ x_star + slack

    def exact_operator_fn(z):
        x, y = z
        return (matrix @ y + b, c - matrix.T @ x)

    def operator_fn(z, rng_key, batch_size):
        if sigma == 0:  # noiseless instance: no draws (they would be multiplied by 0)
            return exact_operator_fn(z)
        x, y = z
        scale = _noise_scale(sigma, batch_size, matrix.dtype)
        noisy = matrix + scale * jax.random.normal(rng_key, matrix.shape, matrix.dtype)
        return (noisy @ y + b, c - noisy.T @ x)

    def projection(z):
        x, y = z
        return (x, projection_non_negative(y))

    return VIProblem(
        operator_fn=operator_fn,
        exact_operator_fn=exact_operator_fn,
        projection=projection,
        solution=(x_star, y_star),
        lipschitz=s_max,
        weak_minty_rho=0.0,
    )


def weak_minty_2d(a: float = -0.3, b: float = 1.0, noise: float = 0.0) -> VIProblem:
    """The 2-D linear operator ``F(z) = Mz``, ``M = [[a, b], [-b, a]]``: weak Minty for ``a < 0``.

    Maths: ``⟨Mz, z⟩ = a||z||²`` and ``||Mz||² = (a² + b²)||z||²``, so for ``a < 0``
    ``⟨F(z), z - 0⟩ = -(ρ/2)||F(z)||²`` with ``ρ = -2a/(a² + b²)``: ``z* = 0`` is a weak-Minty
    solution (``ρ = 0`` for ``a >= 0``, monotone). ``L = sqrt(a² + b²)``. One deterministic
    EG+ step is ``z ↦ (I - αγM(I - γM)) z``, whose spectral radius is ``< 1`` iff
    ``ρ < γ(1 - α)`` (for ``γ = 1/L``); plain EG (``α = 1``) diverges for ``ρL`` large enough
    (``a = -0.3``, ``b = 1``: every ``γ ∈ (0, 2/L]``). Oracle ``F̂ = (M + σN) z``, a batch of ``b``
    calls drawn as ``(M + (σ/√b) N) z`` (variance ``∝ ||z||²``). Unconstrained.

    Args:
      a: the diagonal (``a < 0`` for a non-monotone problem).
      b: the rotation, ``a² + b² > 0``.
      noise: ``σ >= 0``.

    Returns:
      A :class:`VIProblem` with iterates of shape ``(2,)`` and solution ``0``.

    Examples:
      >>> problem = weak_minty_2d(-0.1, 1.0)
      >>> round(problem.weak_minty_rho, 4)
      0.198
      >>> problem.exact_operator_fn(jnp.array([1.0, 0.0])).tolist()
      [-0.10000000149011612, -1.0]

    References:
      A. Alacaoglu, D. Kim, Solving Stochastic Variational Inequalities without the Bounded
      Variance Assumption, ICML 2026 (arXiv 2602.05531); J. Diakonikolas, C. Daskalakis,
      M. I. Jordan, Efficient methods for structured nonconvex-nonconcave min-max optimization,
      AISTATS 2021.
    """
    a = _static_real(a, "a")
    b = _static_real(b, "b")
    sigma = _static_real(noise, "noise", minimum=0.0)
    norm_sq = a * a + b * b
    if norm_sq == 0:
        raise ValueError("a and b must not both be 0 (F would vanish)")
    matrix = jnp.array([[a, b], [-b, a]])
    rho = max(0.0, -2.0 * a / norm_sq)

    def exact_operator_fn(z):
        return matrix @ z

    def operator_fn(z, rng_key, batch_size):
        if sigma == 0:  # noiseless instance: no draws (they would be multiplied by 0)
            return exact_operator_fn(z)
        scale = _noise_scale(sigma, batch_size, matrix.dtype)
        return (matrix + scale * jax.random.normal(rng_key, (2, 2), matrix.dtype)) @ z

    return VIProblem(
        operator_fn=operator_fn,
        exact_operator_fn=exact_operator_fn,
        projection=lambda z: z,
        solution=jnp.zeros((2,)),
        lipschitz=math.sqrt(norm_sq),
        weak_minty_rho=rho,
    )
