"""Built-in mean-field functionals and the closed-form stationary laws of the box examples.

* :func:`linear_potential_functional`: ``F(μ) = ∫⟨c, x⟩ dμ`` (no interaction). On a box its
  minimiser of ``F + λ Ent`` is a product of truncated exponentials with rates ``c/λ``
  (:func:`truncated_exponential_moments`).
* :func:`interacting_box_functional`: ``F(μ) = ∫⟨c, x⟩ dμ + (κ/2)‖∫x dμ - m‖²``; its minimiser is
  again a product of truncated exponentials, with self-consistent rates
  (:func:`interacting_box_fixed_point`, by bisection).
* :func:`two_layer_network_functional`: the mean-field two-layer network, one neuron per particle.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab._src.validation import (
    check_int,
    check_nonnegative,
    check_positive,
    check_real_array,
    is_concrete,
)
from jaxlab.particles._mfld import MeanFieldFunctional

__all__ = [
    "BoxFixedPoint",
    "interacting_box_fixed_point",
    "interacting_box_functional",
    "linear_potential_functional",
    "truncated_exponential_moments",
    "two_layer_network_functional",
]

# Below this |rate| the closed forms 1/a - 1/(e^a - 1) and 1/a² - e^a/(e^a - 1)² cancel
# catastrophically; their Taylor series (error O(a⁴) and O(a⁴)) are used instead.
_SERIES_BELOW = 1e-2


def _real_array(value, name: str) -> jax.Array:
    """``value`` as a JAX array, its entries checked finite and real when concrete."""
    check_real_array(value, name)
    return jnp.asarray(value)


def _coefficient_and_target(coefficient, target) -> tuple[jax.Array, jax.Array]:
    """The interacting box's ``c`` and ``m``: real arrays of one shape ``(dim,)``."""
    coefficient = _real_array(coefficient, "coefficient")
    target = _real_array(target, "target")
    if coefficient.ndim != 1 or coefficient.shape != target.shape:
        raise ValueError(
            "coefficient and target must both have shape (dim,), got "
            f"{coefficient.shape} and {target.shape}"
        )
    return coefficient, target


def _check_ordered(lower: jax.Array, upper: jax.Array) -> None:
    """Concrete box bounds must satisfy ``upper > lower`` everywhere (traced ones are skipped)."""
    if is_concrete(lower) and is_concrete(upper) and not bool(jnp.all(upper > lower)):
        raise ValueError(f"upper must be > lower everywhere, got lower={lower}, upper={upper}")


def _check_particle(x: jax.Array, dim: int, what: str) -> None:
    """A particle of the functional's dimension (checked at trace time, on shapes only)."""
    if tuple(x.shape) != (dim,):
        raise ValueError(
            f"positions must have dimension {dim} ({what}), got a particle of shape "
            f"{tuple(x.shape)}"
        )


def _unit_mean(rate: jax.Array) -> jax.Array:
    """Mean of the density ``∝ e^{-a t}`` on ``[0, 1]``: ``1/a - 1/(e^a - 1)``."""
    small = jnp.abs(rate) < _SERIES_BELOW
    safe = jnp.where(small, 1.0, rate)
    exact = 1.0 / safe - 1.0 / jnp.expm1(safe)
    return jnp.where(small, 0.5 - rate / 12.0 + rate**3 / 720.0, exact)


def _unit_variance(rate: jax.Array) -> jax.Array:
    """Variance of ``∝ e^{-a t}`` on ``[0, 1]``: ``1/a² - 1/(4 sinh²(a/2))``."""
    small = jnp.abs(rate) < _SERIES_BELOW
    safe = jnp.where(small, 1.0, rate)
    exact = 1.0 / safe**2 - 0.25 / jnp.sinh(0.5 * safe) ** 2
    return jnp.where(small, 1.0 / 12.0 - rate**2 / 240.0, exact)


def truncated_exponential_moments(
    rate: jax.typing.ArrayLike,
    lower: jax.typing.ArrayLike = 0.0,
    upper: jax.typing.ArrayLike = 1.0,
) -> tuple[jax.Array, jax.Array]:
    """Mean and variance of the density ``∝ exp(-rate · x)`` on ``[lower, upper]``.

    With ``w = upper - lower`` and ``a = rate · w`` (the rate in the unit coordinate
    ``t = (x - lower)/w``): mean ``lower + w (1/a - 1/(e^a - 1))``, variance
    ``w² (1/a² - e^a/(e^a - 1)²)`` (``1/2`` and ``1/12`` at ``a = 0``). For the linear potential
    ``F(μ) = ∫ c x dμ`` the minimiser of ``F + λ Ent`` has ``rate = c/λ``.

    Args:
      rate: the exponential rate per unit of ``x``, any shape (elementwise).
      lower: the box's lower bound (broadcast with ``rate``).
      upper: the box's upper bound.

    Returns:
      ``(mean, variance)``, shaped like ``rate``.

    Raises:
      TypeError: an argument is not real.
      ValueError: a concrete argument is not finite, or ``upper <= lower``.

    Examples:
      >>> import jax.numpy as jnp
      >>> mean, variance = truncated_exponential_moments(jnp.array([3.0, 0.0]))
      >>> print(jnp.round(mean, 5))  # the note's check value 0.280938 (c = 0.3, λ = 0.1)
      [0.28094 0.5    ]
      >>> print(jnp.round(variance, 5))  # 0.055970 and 1/12
      [0.05597 0.08333]

    References:
      Gu & Kim, "Mirror Mean-Field Langevin Dynamics", ICML 2026 (arXiv 2505.02621).
    """
    rate, lower, upper = (
        _real_array(v, n) for v, n in ((rate, "rate"), (lower, "lower"), (upper, "upper"))
    )
    _check_ordered(lower, upper)
    width = upper - lower
    unit = rate * width
    return lower + width * _unit_mean(unit), width**2 * _unit_variance(unit)


def linear_potential_functional(coefficient: jax.typing.ArrayLike) -> MeanFieldFunctional:
    """The linear potential ``F(μ) = ∫⟨c, x⟩ dμ``: ``∇_x δF/δμ = c``, no interaction.

    On a box ``[l, u]`` the minimiser of ``F + λ Ent`` is the product of truncated exponentials
    ``∝ exp(-c_j x_j / λ)`` (moments: :func:`truncated_exponential_moments` with rate ``c/λ``).

    Args:
      coefficient: ``c``, shape ``(d,)``.

    Returns:
      A :class:`~jaxlab.particles.MeanFieldFunctional` (statistics: the mean position).

    Examples:
      >>> import jax.numpy as jnp
      >>> functional = linear_potential_functional(jnp.array([0.3, -1.0]))
      >>> functional.objective_fn(jnp.array([0.5, 0.5]))  # ⟨c, mean⟩
      Array(-0.35, dtype=float32)

    References:
      Gu & Kim, "Mirror Mean-Field Langevin Dynamics", ICML 2026 (arXiv 2505.02621).
    """
    coefficient = _real_array(coefficient, "coefficient")
    if coefficient.ndim != 1:
        raise ValueError(f"coefficient must have shape (dim,), got {coefficient.shape}")

    def gradient(x, mean):
        _check_particle(x, coefficient.shape[0], "one per coefficient")
        return jnp.broadcast_to(coefficient.astype(x.dtype), x.shape)

    def objective(mean):
        return jnp.dot(coefficient.astype(mean.dtype), mean)

    return MeanFieldFunctional(lambda x: x, gradient, objective)


def interacting_box_functional(
    coefficient: jax.typing.ArrayLike,
    interaction: jax.typing.ArrayLike,
    target: jax.typing.ArrayLike,
) -> MeanFieldFunctional:
    """``F(μ) = ∫⟨c, x⟩ dμ + (κ/2)‖m̄ - m‖²``, ``m̄ = ∫x dμ``: a mean-field interaction.

    ``δF/δμ(μ, x) = ⟨c + κ(m̄ - m), x⟩``, so ``∇_x δF/δμ = c + κ(m̄ - m)`` with ``m̄`` the
    particles' mean. Convex in ``μ`` for ``κ ≥ 0``; the minimiser of ``F + λ Ent`` on a box is
    given by :func:`interacting_box_fixed_point`.

    Args:
      coefficient: ``c``, shape ``(d,)``.
      interaction: ``κ ≥ 0``, a scalar.
      target: ``m``, shape ``(d,)``.

    Returns:
      A :class:`~jaxlab.particles.MeanFieldFunctional` (statistics: the mean position).

    Raises:
      ValueError: shapes differ or ``κ < 0``.

    Examples:
      >>> import jax.numpy as jnp
      >>> functional = interacting_box_functional(jnp.array([0.3]), 1.0, jnp.array([0.5]))
      >>> functional.first_variation_grad_fn(jnp.array([0.9]), jnp.array([0.7]))  # c + κ(m̄ - m)
      Array([0.5], dtype=float32)

    References:
      Gu & Kim, "Mirror Mean-Field Langevin Dynamics", ICML 2026 (arXiv 2505.02621).
    """
    coefficient, target = _coefficient_and_target(coefficient, target)
    check_nonnegative(interaction, "interaction")

    def gradient(x, mean):
        _check_particle(x, coefficient.shape[0], "one per coefficient")
        c, m = coefficient.astype(x.dtype), target.astype(x.dtype)
        return jnp.broadcast_to(c + interaction * (mean - m), x.shape)

    def objective(mean):
        c, m = coefficient.astype(mean.dtype), target.astype(mean.dtype)
        return jnp.dot(c, mean) + 0.5 * interaction * jnp.sum((mean - m) ** 2)

    return MeanFieldFunctional(lambda x: x, gradient, objective)


class BoxFixedPoint(NamedTuple):
    """The minimiser of the interacting box example: means and exponential rates per coordinate.

    Examples:
      >>> import jax.numpy as jnp
      >>> BoxFixedPoint(jnp.array([0.5]), jnp.array([0.0])).mean
      Array([0.5], dtype=float32)
    """

    mean: jax.Array
    rates: jax.Array


def interacting_box_fixed_point(
    coefficient: jax.typing.ArrayLike,
    interaction: jax.typing.ArrayLike,
    target: jax.typing.ArrayLike,
    entropy_weight: jax.typing.ArrayLike,
    *,
    lower: jax.typing.ArrayLike = 0.0,
    upper: jax.typing.ArrayLike = 1.0,
    iterations: int = 200,
) -> BoxFixedPoint:
    """The closed-form minimiser of :func:`interacting_box_functional` ``+ λ Ent`` on a box.

    ``μ* ∝ exp(-⟨c + κ(m̄ - m), x⟩/λ)``: a product of truncated exponentials with rates
    ``a_j = (c_j + κ(m̄_j - m_j))/λ``, where ``m̄_j`` is the mean of its own law,
    ``m̄_j = M(a_j)`` (:func:`truncated_exponential_moments`). Coordinate by coordinate,
    ``h(m̄) = m̄ - M((c + κ(m̄ - m))/λ)`` is increasing (``M`` decreases in the rate), negative at
    ``lower`` and positive at ``upper``: its unique root is found by bisection.

    Args:
      coefficient: ``c``, shape ``(d,)``.
      interaction: ``κ ≥ 0``.
      target: ``m``, shape ``(d,)``.
      entropy_weight: ``λ > 0``.
      lower: the box's lower bound(s).
      upper: the box's upper bound(s).
      iterations: bisection halvings (200 reach the float64 resolution of any box).

    Returns:
      :class:`BoxFixedPoint` ``(mean, rates)``.

    Raises:
      TypeError: a number or array is not real.
      ValueError: ``entropy_weight <= 0``, ``interaction < 0``, a shape mismatch, a non-finite
        entry or ``upper <= lower``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> with jax.enable_x64(True):
      ...     point = interacting_box_fixed_point(
      ...         jnp.array([0.3, -0.2, 0.5, 0.0, 0.1]), 1.0,
      ...         jnp.array([0.5, 0.5, 0.2, 0.8, 0.5]), 0.1)
      ...     print(jnp.round(point.mean, 6))  # the note's check 3
      [0.366942 0.589927 0.194915 0.633058 0.454668]

    References:
      Gu & Kim, "Mirror Mean-Field Langevin Dynamics", ICML 2026 (arXiv 2505.02621).
    """
    check_positive(entropy_weight, "entropy_weight")
    check_nonnegative(interaction, "interaction")
    check_int(iterations, "iterations", minimum=1)
    coefficient, target = _coefficient_and_target(coefficient, target)
    lower, upper = _real_array(lower, "lower"), _real_array(upper, "upper")
    for name, bound in (("lower", lower), ("upper", upper)):
        try:
            fits = np.broadcast_shapes(bound.shape, coefficient.shape) == coefficient.shape
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(
                f"{name} must be a scalar or have shape {coefficient.shape}, got {bound.shape}"
            )
    _check_ordered(lower, upper)
    dtype = jnp.result_type(coefficient.dtype, float)
    coefficient, target = coefficient.astype(dtype), target.astype(dtype)
    lower = jnp.broadcast_to(jnp.asarray(lower, dtype), coefficient.shape)
    upper = jnp.broadcast_to(jnp.asarray(upper, dtype), coefficient.shape)
    return _bisect_fixed_point(
        coefficient, interaction, target, entropy_weight, lower, upper, iterations
    )


# Jitted with the instance as arguments, so repeated calls on one shape compile once (an eager
# ``fori_loop`` closing over the instance recompiles for every new coefficient).
@functools.partial(jax.jit, static_argnums=6)
def _bisect_fixed_point(coefficient, interaction, target, entropy_weight, lower, upper, iterations):
    def rates(mean):
        return (coefficient + interaction * (mean - target)) / entropy_weight

    def residual(mean):
        return mean - truncated_exponential_moments(rates(mean), lower, upper)[0]

    def halve(_, bracket):
        low, high = bracket
        middle = 0.5 * (low + high)
        positive = residual(middle) > 0
        return jnp.where(positive, low, middle), jnp.where(positive, middle, high)

    low, high = jax.lax.fori_loop(0, iterations, halve, (lower, upper))
    mean = 0.5 * (low + high)
    return BoxFixedPoint(mean, rates(mean))


def two_layer_network_functional(
    inputs: jax.typing.ArrayLike, targets: jax.typing.ArrayLike
) -> MeanFieldFunctional:
    """The mean-field two-layer tanh network with squared loss; each particle is a neuron.

    A neuron ``θ = (a, w) ∈ ℝ × ℝ^p`` computes ``h(θ, x) = a tanh(wᵀx)``; the network is
    ``f_μ(x) = ∫ h(θ, x) dμ(θ)`` (the particles' average) and, on data ``(x_s, y_s)_{s ≤ n}``,
    ``F(μ) = (1/2n) Σ_s (f_μ(x_s) - y_s)²``. With residuals ``r_s = f_μ(x_s) - y_s``,
    ``∇_θ δF/δμ(μ, θ) = (1/n) Σ_s r_s ∇_θ h(θ, x_s)``, i.e.
    ``∂_a = (1/n) Σ_s r_s tanh(wᵀx_s)`` and ``∂_w = (a/n) Σ_s r_s (1 - tanh²(wᵀx_s)) x_s``.
    The statistics are the network's outputs on the ``n`` inputs.

    Args:
      inputs: ``(n, p)`` inputs ``x_s``.
      targets: ``(n,)`` targets ``y_s``.

    Returns:
      A :class:`~jaxlab.particles.MeanFieldFunctional` over neurons of shape ``(p + 1,)``
      (``θ[0] = a``, ``θ[1:] = w``); ``objective_fn`` is the training loss ``F``.

    Raises:
      ValueError: the shapes do not match.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> functional = two_layer_network_functional(jnp.eye(2), jnp.array([1.0, 0.0]))
      >>> neuron = jnp.array([2.0, 0.5, -0.5])
      >>> outputs = functional.statistics_fn(neuron)  # 2 tanh(±0.5)
      >>> print(jnp.round(outputs, 4))
      [ 0.9242 -0.9242]
      >>> # The gradient is the derivative of F's first variation θ ↦ (1/n) Σ r_s h(θ, x_s).
      >>> residual = outputs - jnp.array([1.0, 0.0])
      >>> autodiff = jax.grad(lambda t: jnp.mean(residual * functional.statistics_fn(t)))(neuron)
      >>> bool(jnp.allclose(functional.first_variation_grad_fn(neuron, outputs), autodiff))
      True

    References:
      Mei, Montanari & Nguyen, "A mean field view of the landscape of two-layer neural
      networks", PNAS 2018; Gu & Kim, ICML 2026 (arXiv 2505.02621).
    """
    inputs, targets = _real_array(inputs, "inputs"), _real_array(targets, "targets")
    if inputs.ndim != 2 or targets.shape != (inputs.shape[0],):
        raise ValueError(
            f"inputs must be (n, p) and targets (n,), got {inputs.shape} and {targets.shape}"
        )
    n = inputs.shape[0]

    def outputs(theta):
        _check_particle(theta, inputs.shape[1] + 1, "a neuron (a, w) with w of the inputs' width")
        return theta[0] * jnp.tanh(inputs.astype(theta.dtype) @ theta[1:])

    def gradient(theta, network_outputs):
        _check_particle(theta, inputs.shape[1] + 1, "a neuron (a, w) with w of the inputs' width")
        x = inputs.astype(theta.dtype)
        residual = network_outputs - targets.astype(theta.dtype)
        activation = jnp.tanh(x @ theta[1:])
        grad_a = jnp.dot(residual, activation) / n
        grad_w = theta[0] * ((residual * (1.0 - activation**2)) @ x) / n
        return jnp.concatenate([grad_a[None], grad_w])

    def loss(network_outputs):
        residual = network_outputs - targets.astype(network_outputs.dtype)
        return 0.5 * jnp.mean(residual**2)

    return MeanFieldFunctional(outputs, gradient, loss)
