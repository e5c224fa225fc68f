"""Instances and closed-form references of the mean-field Langevin examples (Gu & Kim's note).

* :func:`interacting_box_finite_particle_moments`: the exact stationary mean and pair correlation
  ``N E‖m_N - m̄‖²`` of ``N`` interacting particles on ``[0, 1]^d`` (the finite-``N`` bias and
  the correlations that propagation of chaos bounds), and their mean-field limits;
  :func:`interacting_box_finite_particle_mean` is its 1-D mean, and
  :func:`interacting_box_stationary_sample` draws exact samples of that law.
* :func:`simplex_linear_potential_mean`: the mean of the entropic minimiser of a linear
  potential on the simplex ``Δ_2``, by quadrature.
* :func:`teacher_network_data`: the teacher-network regression data of the constrained
  mean-field two-layer network example.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.integrate
from scipy.signal import fftconvolve

from jaxlab._src.validation import (
    check_bool,
    check_int,
    check_key,
    check_nonnegative,
    check_positive,
    check_real,
    check_real_array,
)
from jaxlab.particles._functionals import (
    interacting_box_fixed_point,
    truncated_exponential_moments,
)

__all__ = [
    "FiniteParticleMoments",
    "interacting_box_finite_particle_mean",
    "interacting_box_finite_particle_moments",
    "interacting_box_stationary_sample",
    "simplex_linear_potential_mean",
    "teacher_network_data",
]


class FiniteParticleMoments(NamedTuple):
    """Exact stationary moments of ``N`` interacting particles on the box, and their limits.

    Every field has one entry per coordinate (the interacting box's coordinates are
    independent); ``m_N = (1/N) Σ_i X^i`` is the particles' mean, ``m̄`` the mean-field mean.

    Attributes:
      mean: ``E_N[m_N]``, the ``N``-particle stationary mean (its bias is ``mean - m̄``).
      pair_correlation: ``N E_N[(m_N - m̄)²]``, per coordinate (their sum is
        ``N E‖m_N - m̄‖²``).
      mean_field_mean: ``m̄``, the mean of the mean-field minimiser ``μ*``.
      mean_field_pair_correlation: ``lim_{N→∞} N E_N[(m_N - m̄)²] = σ²λ/(λ + κσ²)``.
      independent_pair_correlation: ``σ² = Var_{μ*}``, the value for ``N`` independent
        particles drawn from ``μ*`` (no interaction), for every ``N``.

    Examples:
      >>> import numpy as np
      >>> moments = FiniteParticleMoments(*(np.zeros(1),) * 5)
      >>> moments.pair_correlation.shape
      (1,)
    """

    mean: np.ndarray
    pair_correlation: np.ndarray
    mean_field_mean: np.ndarray
    mean_field_pair_correlation: np.ndarray
    independent_pair_correlation: np.ndarray


def _sum_law(density: np.ndarray, num_particles: int) -> np.ndarray:
    """The lattice law of the sum of ``num_particles`` i.i.d. lattice variables (FFT powers)."""
    result, power, n = None, density, num_particles
    while True:
        if n & 1:
            result = power if result is None else np.maximum(fftconvolve(result, power), 0.0)
            result /= result.sum()
        n >>= 1
        if not n:
            return result
        power = np.maximum(fftconvolve(power, power), 0.0)
        power /= power.sum()


def _coordinate_moments(rate, limit, interaction, entropy_weight, num_particles, grid_step):
    """``(E_N[s], N E_N[(s - limit)²], lattice mean of ν_a)`` of one coordinate, on the lattice."""
    grid = np.arange(int(round(1 / grid_step)) + 1) * grid_step
    density = np.exp(-rate * (grid - limit))
    density[[0, -1]] *= 0.5  # trapezoid weights
    density /= density.sum()
    lattice_mean = float(np.dot(grid, density))
    law = _sum_law(density, num_particles)
    mean_grid = np.arange(law.size) * grid_step / num_particles
    log_weight = (
        -(num_particles * interaction / (2 * entropy_weight)) * (mean_grid - lattice_mean) ** 2
    )
    weight = law * np.exp(log_weight - log_weight.max())
    weight /= weight.sum()
    mean = float(np.dot(mean_grid, weight))
    second = num_particles * float(np.dot((mean_grid - limit) ** 2, weight))
    return mean, second, lattice_mean


def _check_lattice_arguments(interaction, entropy_weight, num_particles, grid_step) -> int:
    check_nonnegative(interaction, "interaction")
    check_positive(entropy_weight, "entropy_weight")
    check_real(grid_step, "grid_step", minimum=0.0, maximum=0.5, include_minimum=False)
    return check_int(num_particles, "num_particles", minimum=1)


def _check_coefficient_and_target(coefficient, target) -> tuple[np.ndarray, np.ndarray]:
    """``c`` and ``m`` of the interacting box as real arrays of one shape ``(dim,)``."""
    c = check_real_array(coefficient, "coefficient")
    m = check_real_array(target, "target")
    if c is None or m is None or c.ndim != 1 or c.shape != m.shape:
        raise ValueError(
            "coefficient and target must be real arrays of one shape (dim,), got "
            f"{np.shape(coefficient)} and {np.shape(target)}"
        )
    return c, m


def interacting_box_finite_particle_moments(
    coefficient: Sequence[float] | np.ndarray,
    interaction: float,
    target: Sequence[float] | np.ndarray,
    entropy_weight: float,
    num_particles: int,
    *,
    grid_step: float = 1e-3,
) -> FiniteParticleMoments:
    """Exact stationary mean and pair correlation of ``N`` interacting particles on ``[0, 1]^d``.

    For :func:`~jaxlab.particles.interacting_box_functional`
    ``F(μ) = ⟨c, m̄_μ⟩ + (κ/2)‖m̄_μ - m‖²`` the ``N``-particle dynamics (continuous time, any
    mirror map with the Itô correction) is a Langevin diffusion of ``(X^1..X^N)`` with potential
    ``N F(μ̂)`` at temperature ``λ``: the particle drift ``∇_x δF/δμ(μ̂, X^i)`` is
    ``∇_{X^i} N F(μ̂)``. Its stationary law is the Gibbs law ``π_N ∝ exp(-N F(μ̂)/λ)`` on the box,
    and with ``m_N`` the particles' mean, ``m̄`` and ``a = (c + κ(m̄ - m))/λ`` the mean-field
    mean and rates (:func:`~jaxlab.particles.interacting_box_fixed_point`) and ``ν_a ∝ e^{-a x}``,
    completing the square gives

        π_N ∝ ν_a^{⊗N} · exp(-(Nκ/2λ) ‖m_N - m̄‖²),

    a product over coordinates. So, per coordinate, ``m_N`` has the law
    ``∝ p_N(s) exp(-(Nκ/2λ)(s - m̄)²)`` with ``p_N`` the law of the mean of ``N`` i.i.d. ``ν_a``
    variables, and ``E_N[m_N]`` and the pair correlation ``N E_N[(m_N - m̄)²]
    = Var(X^1) + (N - 1) Cov(X^1, X^2) + N (E m_N - m̄)²`` are 1-D integrals against ``p_N``,
    computed on a lattice of step ``h`` (``p_N`` by FFT convolution powers). As ``N → ∞``,
    ``p_N ≈ 𝒩(m̄, σ²/N)`` (``σ² = Var(ν_a)``), a Gaussian whose precision the tilt raises from
    ``N/σ²`` to ``N/σ² + Nκ/λ``: the pair correlation tends to ``σ²λ/(λ + κσ²)``, below the
    independent particles' ``σ²`` (the interaction correlates the particles at ``O(1/N)``:
    ``Cov(X^1, X^2) ≈ -κσ⁴/((λ + κσ²)N)``), and the bias ``E_N[m_N] - m̄`` falls like ``1/N``.
    Host-side (NumPy/SciPy), not traceable.

    Args:
      coefficient: ``c``, shape ``(d,)``.
      interaction: ``κ ≥ 0``.
      target: ``m``, shape ``(d,)``.
      entropy_weight: ``λ > 0``.
      num_particles: ``N ≥ 1``.
      grid_step: the lattice step ``h`` in ``(0, 0.5]`` (the lattice error is ``O(h²)``; the
        bias is computed as the lattice model's ``E_N[m_N]`` minus its own limit, added to the
        closed-form ``m̄``, so the lattice errors of the two cancel to first order).

    Returns:
      :class:`FiniteParticleMoments`, one entry per coordinate.

    Raises:
      TypeError: a number is not real, or ``num_particles`` not an int.
      ValueError: a number out of range, or ``coefficient`` and ``target`` of different shapes.

    Examples:
      >>> moments = interacting_box_finite_particle_moments(
      ...     [0.3, -0.2, 0.5, 0.0, 0.1], 1.0, [0.5, 0.5, 0.2, 0.8, 0.5], 0.1, 16)
      >>> print(round(float(moments.pair_correlation.sum()), 4))  # N E‖m_N - m̄‖², N = 16
      0.2
      >>> print(round(float(moments.mean_field_pair_correlation.sum()), 4))  # N → ∞
      0.1986
      >>> print(round(float(moments.independent_pair_correlation.sum()), 4))  # no interaction
      0.34
      >>> bias = moments.mean - moments.mean_field_mean
      >>> print(round(16 * float(np.linalg.norm(bias)), 3))  # |bias| ≈ 0.040/N
      0.04

    References:
      Gu & Kim, "Mirror Mean-Field Langevin Dynamics", ICML 2026 (arXiv 2505.02621);
      Sznitman, "Topics in propagation of chaos", 1991 (chaos as vanishing pair correlations).
    """
    c, m = _check_coefficient_and_target(coefficient, target)
    num_particles = _check_lattice_arguments(interaction, entropy_weight, num_particles, grid_step)
    with jax.enable_x64(True):
        fixed = interacting_box_fixed_point(
            jnp.asarray(c, jnp.float64), interaction, jnp.asarray(m, jnp.float64), entropy_weight
        )
        rates, limits = np.asarray(fixed.rates), np.asarray(fixed.mean)
        _, variances = truncated_exponential_moments(fixed.rates)
        variances = np.asarray(variances)
    rows = [
        _coordinate_moments(
            rate, limit, float(interaction), float(entropy_weight), num_particles, grid_step
        )
        for rate, limit in zip(rates, limits, strict=True)
    ]
    mean = limits + np.asarray([row[0] - row[2] for row in rows])
    pair = np.asarray([row[1] for row in rows])
    limit_pair = variances * entropy_weight / (entropy_weight + interaction * variances)
    return FiniteParticleMoments(mean, pair, limits, limit_pair, variances)


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
    by FFT convolution powers. Host-side (NumPy/SciPy), not traceable. The whole ``d``-dimensional
    box, with the pair correlation, is :func:`interacting_box_finite_particle_moments`.

    Args:
      coefficient: ``c``.
      interaction: ``κ ≥ 0``.
      target: ``m``.
      entropy_weight: ``λ > 0``.
      num_particles: ``N ≥ 1``.
      grid_step: the lattice step ``h`` (the lattice error is ``O(h²)``).

    Returns:
      ``(E_N[s], lim_{N→∞} E_N[s])`` of the lattice model (the limit is ``ν_a``'s lattice mean,
      within ``O(h²)`` of the fixed point's mean ``m̄``), so their difference is the finite-``N``
      bias.

    Raises:
      ValueError: a number is out of range.

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
    num_particles = _check_lattice_arguments(interaction, entropy_weight, num_particles, grid_step)
    with jax.enable_x64(True):
        fixed = interacting_box_fixed_point(
            jnp.asarray([coefficient]), interaction, jnp.asarray([target]), entropy_weight
        )
        rate, limit = float(fixed.rates[0]), float(fixed.mean[0])
    mean, _, lattice_mean = _coordinate_moments(
        rate, limit, float(interaction), float(entropy_weight), num_particles, grid_step
    )
    return mean, lattice_mean


def interacting_box_stationary_sample(
    rng_key: jax.Array,
    coefficient: jax.typing.ArrayLike,
    interaction: float,
    target: jax.typing.ArrayLike,
    entropy_weight: float,
    num_particles: int,
    num_systems: int,
    *,
    independent: bool = False,
) -> jax.Array:
    """Exact samples of ``N`` interacting particles' stationary law on ``[0, 1]^d``.

    The Gibbs law of :func:`interacting_box_finite_particle_moments`,
    ``π_N ∝ ν_a^{⊗N} · exp(-(Nκ/2λ) ‖m_N - m̄‖²)`` (``ν_a ∝ e^{-a x}`` per coordinate, ``a`` and
    ``m̄`` the mean-field rates and mean), is a product over coordinates, each an ``N``-particle
    law that the tilt ``exp(-(Nκ/2λ)(m_N - m̄)²) ≤ 1`` turns from ``ν_a^{⊗N}``. So each
    (system, coordinate) is sampled by rejection: ``N`` i.i.d. ``ν_a`` draws (inverse CDF
    ``x = -log(1 + u(e^{-a} - 1))/a``), accepted with probability the tilt, repeated until every
    one is accepted (about ``√(λ/(λ + κσ²))`` of the proposals are, ``σ² = Var(ν_a)``). With
    ``independent=True`` it returns ``N`` i.i.d. particles of the mean-field law ``μ* = ν_a``
    instead (no tilt). Sampled in the default floating dtype (float64 under ``jax.enable_x64``);
    coordinates lie in the closed box ``[0, 1]``.

    Args:
      rng_key: a PRNG key.
      coefficient: ``c``, shape ``(d,)``.
      interaction: ``κ ≥ 0``.
      target: ``m``, shape ``(d,)``.
      entropy_weight: ``λ > 0``.
      num_particles: ``N ≥ 1``.
      num_systems: how many independent systems of ``N`` particles, ``≥ 1``.
      independent: sample ``μ*^{⊗N}`` (the mean-field limit's product law) instead of ``π_N``.

    Returns:
      ``(num_systems, num_particles, d)`` positions.

    Raises:
      TypeError: ``rng_key`` is not a key, a number is not real, a count not an int or
        ``independent`` not a bool.
      ValueError: a number or count is out of range, or ``coefficient`` and ``target`` differ in
        shape.

    Examples:
      >>> import jax, numpy as np
      >>> c, m = [0.3, -0.2, 0.5, 0.0, 0.1], [0.5, 0.5, 0.2, 0.8, 0.5]
      >>> with jax.enable_x64(True):
      ...     x = interacting_box_stationary_sample(jax.random.key(0), c, 1.0, m, 0.1, 8, 20_000)
      >>> x.shape
      (20000, 8, 5)
      >>> exact = interacting_box_finite_particle_moments(c, 1.0, m, 0.1, 8)
      >>> m_n = np.asarray(x).mean(axis=1)  # each system's particle mean
      >>> pair = 8 * ((m_n - exact.mean_field_mean) ** 2).sum(axis=1)
      >>> print(round(float(pair.mean()), 2), round(float(exact.pair_correlation.sum()), 2))
      0.2 0.2

    References:
      Gu & Kim, "Mirror Mean-Field Langevin Dynamics", ICML 2026 (arXiv 2505.02621).
    """
    check_key(rng_key, "rng_key")
    c, m = _check_coefficient_and_target(coefficient, target)
    check_nonnegative(interaction, "interaction")
    check_positive(entropy_weight, "entropy_weight")
    num_particles = check_int(num_particles, "num_particles", minimum=1)
    num_systems = check_int(num_systems, "num_systems", minimum=1)
    independent = check_bool(independent, "independent")
    dtype = jnp.result_type(float)
    fixed = interacting_box_fixed_point(
        jnp.asarray(c, dtype), interaction, jnp.asarray(m, dtype), entropy_weight
    )
    tilt = 0.0 if independent else num_particles * float(interaction) / (2 * entropy_weight)
    return _stationary_sample(
        rng_key,
        fixed.rates,
        fixed.mean,
        jnp.asarray(tilt, dtype),
        (num_systems, num_particles, c.shape[0]),
    )


@functools.partial(jax.jit, static_argnums=4)
def _stationary_sample(rng_key, rates, mean, tilt, shape):
    """Rejection sampling of the tilted product law (see interacting_box_stationary_sample)."""
    dtype = rates.dtype
    zero = (rates == 0)[None, None, :]
    safe = jnp.where(zero, 1.0, rates[None, None, :])
    cells = (shape[0], shape[2])

    def propose(key):
        u = jax.random.uniform(key, shape, dtype)
        return jnp.where(zero, u, -jnp.log1p(u * jnp.expm1(-safe)) / safe)

    def unfinished(carry):
        return ~jnp.all(carry[1])

    def rejection_round(carry):
        positions, accepted, key = carry
        key, proposal_key, accept_key = jax.random.split(key, 3)
        proposal = propose(proposal_key)
        deviation = proposal.mean(axis=1) - mean[None, :]
        log_u = jnp.log(jax.random.uniform(accept_key, cells, dtype, minval=jnp.finfo(dtype).tiny))
        take = (log_u <= -tilt * deviation**2) & ~accepted
        positions = jnp.where(take[:, None, :], proposal, positions)
        return positions, accepted | take, key

    start = (jnp.zeros(shape, dtype), jnp.zeros(cells, bool), rng_key)
    return jax.lax.while_loop(unfinished, rejection_round, start)[0]


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
