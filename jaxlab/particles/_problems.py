"""Instances and closed-form references of the mean-field Langevin examples (Gu & Kim's note).

* :func:`interacting_box_finite_particle_mean`: the exact stationary mean of ``N`` interacting
  particles on ``[0, 1]`` (the finite-``N`` bias that propagation of chaos bounds).
* :func:`simplex_linear_potential_mean`: the mean of the entropic minimiser of a linear
  potential on the simplex ``Δ_2``, by quadrature.
* :func:`teacher_network_data`: the teacher-network regression data of the constrained
  mean-field two-layer network example.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
import scipy.integrate
from scipy.signal import fftconvolve

from jaxlab._src.validation import (
    check_int,
    check_key,
    check_nonnegative,
    check_positive,
    check_real,
    check_real_array,
)
from jaxlab.particles._functionals import interacting_box_fixed_point

__all__ = [
    "interacting_box_finite_particle_mean",
    "simplex_linear_potential_mean",
    "teacher_network_data",
]


def interacting_box_finite_particle_mean(
    coefficient: float,
    interaction: float,
    target: float,
    entropy_weight: float,
    num_particles: int,
    grid_step: float = 1e-3,
) -> tuple[float, float]:
    """Stationary mean of ``N`` interacting particles on ``[0, 1]`` and its mean-field limit.

    The 1-D :func:`~jaxlab.particles.interacting_box_functional`
    ``F(μ) = c m̄ + (κ/2)(m̄ - m)²`` with ``N`` particles (continuous time) has the stationary law
    ``π_N ∝ exp(-N F(μ̂)/λ)`` (a Gibbs law: the particle drift is ``∇_{x_i} N F(μ̂)``), ``s`` the
    particle mean. With ``a`` the mean-field rate and ``ν_a ∝ e^{-a x}``,
    ``π_N ∝ ν_a^{⊗N} · exp(-(Nκ/2λ)(s - m̄)²)``, so ``E_N[s]`` is a 1-D integral against the law
    of the mean of ``N`` i.i.d. ``ν_a`` variables, computed on a lattice of step ``grid_step``
    by FFT self-convolution (``N`` a power of two). Host-side (NumPy/SciPy), not traceable.

    Args:
      coefficient: ``c``.
      interaction: ``κ ≥ 0``.
      target: ``m``.
      entropy_weight: ``λ > 0``.
      num_particles: ``N``, a power of two.
      grid_step: the lattice step ``h`` (the lattice error is ``O(h²)``).

    Returns:
      ``(E_N[s], lim_{N→∞} E_N[s])`` of the lattice model (the limit is ``ν_a``'s lattice mean,
      within ``O(h²)`` of the fixed point's mean ``m̄``), so their difference is the finite-``N``
      bias.

    Raises:
      ValueError: ``num_particles`` is not a power of two, or a number is out of range.

    Examples:
      >>> mean, limit = interacting_box_finite_particle_mean(0.5, 1.0, 0.2, 0.1, 16)
      >>> round(limit, 4)  # the note's mean-field value 0.194915, within O(h²)
      0.1949
      >>> quarter, _ = interacting_box_finite_particle_mean(0.5, 1.0, 0.2, 0.1, 64)
      >>> round((limit - mean) / (limit - quarter), 1)  # the bias falls like 1/N: 4x from N=16
      4.0

    References:
      Gu & Kim, "Mirror Mean-Field Langevin Dynamics", ICML 2026 (arXiv 2505.02621).
    """
    coefficient = check_real(coefficient, "coefficient")
    target = check_real(target, "target")
    check_nonnegative(interaction, "interaction")
    check_positive(entropy_weight, "entropy_weight")
    check_real(grid_step, "grid_step", minimum=0.0, maximum=0.5, include_minimum=False)
    check_int(num_particles, "num_particles", minimum=1)
    if num_particles & (num_particles - 1):
        raise ValueError(f"num_particles must be a power of two, got {num_particles}")
    with jax.enable_x64(True):
        fixed = interacting_box_fixed_point(
            jnp.asarray([coefficient]), interaction, jnp.asarray([target]), entropy_weight
        )
        rate, limit = float(fixed.rates[0]), float(fixed.mean[0])
    grid = np.arange(int(round(1 / grid_step)) + 1) * grid_step
    density = np.exp(-rate * (grid - limit))
    density[[0, -1]] *= 0.5  # trapezoid weights
    density /= density.sum()
    lattice_mean = float(np.dot(grid, density))
    law, count = density, 1
    while count < num_particles:
        law = np.maximum(fftconvolve(law, law), 0.0)
        law /= law.sum()
        count *= 2
    mean_grid = np.arange(law.size) * grid_step / num_particles
    log_weight = (
        -(num_particles * interaction / (2 * entropy_weight)) * (mean_grid - lattice_mean) ** 2
    )
    weight = law * np.exp(log_weight - log_weight.max())
    return float(np.dot(mean_grid, weight) / weight.sum()), lattice_mean


def simplex_linear_potential_mean(
    coefficient: Sequence[float] | np.ndarray, entropy_weight: float
) -> np.ndarray:
    """Mean of ``μ* ∝ exp(-⟨c, x⟩/λ)`` on the simplex ``Δ_2``, by 2-D quadrature.

    ``μ*`` minimises ``∫⟨c, x⟩ dμ + λ Ent(μ)`` on ``Δ_2 = {x ∈ ℝ³: x ≥ 0, Σx = 1}`` (entropy
    against Lebesgue measure on the chart ``(x_1, x_2)``); its moments are double integrals over
    ``{x_1, x_2 ≥ 0, x_1 + x_2 ≤ 1}`` (``scipy.integrate.dblquad``, absolute tolerance 1e-12).
    Host-side, not traceable.

    Args:
      coefficient: ``c``, three numbers.
      entropy_weight: ``λ > 0``.

    Returns:
      The mean ``(E x_0, E x_1, E x_2)``, a NumPy array summing to 1.

    Examples:
      >>> print(simplex_linear_potential_mean([0.0, 1.0, -0.5], 0.5).round(6))  # the note's check 4
      [0.337842 0.217856 0.444302]

    References:
      Gu & Kim, "Mirror Mean-Field Langevin Dynamics", ICML 2026 (arXiv 2505.02621).
    """
    c = check_real_array(coefficient, "coefficient")
    if c is None or c.shape != (3,):
        raise ValueError(f"coefficient must be 3 finite numbers (Δ_2), got {coefficient}")
    check_positive(entropy_weight, "entropy_weight")

    def moment(k):
        def integrand(x2, x1):
            x = np.array([1 - x1 - x2, x1, x2])
            return (1.0 if k is None else x[k]) * np.exp(-np.dot(c, x) / entropy_weight)

        return scipy.integrate.dblquad(integrand, 0, 1, 0, lambda x1: 1 - x1, epsabs=1e-12)[0]

    z = moment(None)
    return np.array([moment(k) / z for k in range(3)])


def teacher_network_data(
    rng_key: jax.Array,
    num_samples: int,
    dim: int,
    output_weights: Sequence[float] = (1.5, -1.0, 1.2),
    *,
    weight_bound: float = 0.8,
) -> tuple[jax.Array, jax.Array]:
    """Regression data from a teacher two-layer tanh network (the constrained network example).

    Inputs ``x_s ~ N(0, I_p)``; ``K = len(output_weights)`` teacher neurons with input weights
    ``w_k ~ U[-b, b]^p`` and output weights ``a_k``; targets
    ``y_s = (1/K) Σ_k a_k tanh(w_kᵀ x_s)``, a mean-field network of ``K`` neurons that
    :func:`~jaxlab.particles.two_layer_network_functional` can fit exactly. With the default
    ``b = 0.8`` and ``|a_k| ≤ 1.5`` every teacher neuron lies inside ``[-2, 2] × [-1, 1]^p``.

    Args:
      rng_key: key of the inputs and teacher weights.
      num_samples: ``n``.
      dim: ``p``.
      output_weights: ``a_1, ..., a_K``.
      weight_bound: ``b > 0``.

    Returns:
      ``(inputs, targets)`` of shapes ``(n, p)`` and ``(n,)`` (default float dtype).

    Examples:
      >>> import jax
      >>> inputs, targets = teacher_network_data(jax.random.key(0), 100, 5)
      >>> inputs.shape, targets.shape
      ((100, 5), (100,))
      >>> bool(jnp.all(jnp.abs(targets) <= (1.5 + 1.0 + 1.2) / 3))
      True

    References:
      Mei, Montanari & Nguyen, PNAS 2018; Gu & Kim, ICML 2026 (arXiv 2505.02621).
    """
    check_key(rng_key, "rng_key")
    num_samples = check_int(num_samples, "num_samples", minimum=1)
    check_int(dim, "dim", minimum=1)
    check_positive(weight_bound, "weight_bound")
    check_real_array(output_weights, "output_weights")
    outputs = jnp.asarray(output_weights)
    if outputs.ndim != 1 or outputs.size == 0:
        raise ValueError(f"output_weights must be a non-empty sequence, got {output_weights}")
    input_key, weight_key = jax.random.split(rng_key)
    inputs = jax.random.normal(input_key, (num_samples, dim))
    weights = jax.random.uniform(
        weight_key, (outputs.size, dim), minval=-weight_bound, maxval=weight_bound
    )
    targets = jnp.tanh(inputs @ weights.T) @ outputs / outputs.size
    return inputs, targets
