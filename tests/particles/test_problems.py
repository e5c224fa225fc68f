"""The examples' instances, closed-form references and diagnostics, against independent truths."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate

from jaxlab import particles


def test_finite_particle_mean_matches_brute_force_for_two_particles():
    c, kappa, m, lam = 0.5, 1.0, 0.2, 0.1

    def moment(power):
        def integrand(x2, x1):
            s = 0.5 * (x1 + x2)
            energy = c * s + 0.5 * kappa * (s - m) ** 2
            return s**power * math.exp(-2 * energy / lam)

        return scipy.integrate.dblquad(integrand, 0, 1, 0, 1, epsabs=1e-13)[0]

    brute = moment(1) / moment(0)
    exact, limit = particles.interacting_box_finite_particle_mean(
        c, kappa, m, lam, 2, grid_step=2e-4
    )
    assert exact == pytest.approx(brute, abs=2e-6)
    assert limit == pytest.approx(0.194915, abs=1e-5)  # the note's mean-field value
    with pytest.raises(ValueError, match="power of two"):
        particles.interacting_box_finite_particle_mean(c, kappa, m, lam, 3)


def _simplex_mean_closed_form(c, lam):
    """E x under ∝ e^{-⟨a, x⟩} on Δ_2, a = c/λ: Z(a) = Σ_j e^{-a_j} / Π_{k≠j}(a_k - a_j) (the
    divided difference of e^{-t}), and E x = -∇ log Z, here by central differences."""

    def log_z(a):
        return math.log(
            sum(
                math.exp(-a[j]) / math.prod(a[k] - a[j] for k in range(3) if k != j)
                for j in range(3)
            )
        )

    a, h = np.asarray(c, float) / lam, 1e-5
    return np.array(
        [-(log_z(a + h * np.eye(3)[j]) - log_z(a - h * np.eye(3)[j])) / (2 * h) for j in range(3)]
    )


@pytest.mark.parametrize(
    "c, lam", [((0.0, 1.0, -0.5), 0.5), ((0.3, -0.7, 1.1), 0.2), ((1.0, 2.0, 3.0), 1.0)]
)
def test_simplex_mean_matches_the_divided_difference_closed_form(c, lam):
    mean = particles.simplex_linear_potential_mean(c, lam)
    np.testing.assert_allclose(mean, _simplex_mean_closed_form(c, lam), atol=1e-7)
    assert mean.sum() == pytest.approx(1.0, abs=1e-10)
    with pytest.raises(ValueError, match="coefficient must be 3 finite numbers"):
        particles.simplex_linear_potential_mean((0.0, 1.0), lam)


def test_teacher_data_is_the_average_of_its_teacher_neurons(x64):
    key = jax.random.key(3)
    inputs, targets = particles.teacher_network_data(key, 50, 4, (1.5, -1.0))
    # A second path: the same draws, neuron by neuron.
    input_key, weight_key = jax.random.split(key)
    np.testing.assert_array_equal(inputs, jax.random.normal(input_key, (50, 4)))
    weights = np.asarray(jax.random.uniform(weight_key, (2, 4), minval=-0.8, maxval=0.8))
    assert np.all(np.abs(weights) <= 0.8)
    x = np.asarray(inputs)
    expected = (1.5 * np.tanh(x @ weights[0]) - 1.0 * np.tanh(x @ weights[1])) / 2
    np.testing.assert_allclose(targets, expected, rtol=1e-12)
    # The teacher is a mean-field network the functional fits exactly: zero loss at its neurons.
    network = particles.two_layer_network_functional(inputs, targets)
    neurons = jnp.asarray(np.concatenate([[[1.5], [-1.0]], weights], axis=1))
    outputs = jnp.mean(jax.vmap(network.statistics_fn)(neurons), axis=0)
    assert float(network.objective_fn(outputs)) == pytest.approx(0.0, abs=1e-24)


def test_linear_phase_fit_recovers_an_exponential_rate():
    times = np.linspace(0.0, 20.0, 2001)
    objective = 0.01 + 2.0 * np.exp(-0.7 * times)
    objective[-300:] = 0.01  # a flat floor at the end, as a converged run has
    phase = particles.linear_phase_fit(times, objective)
    assert phase.fitted
    assert phase.slope == pytest.approx(-0.7, rel=1e-3)
    assert phase.r2 > 0.999
    assert phase.floor == pytest.approx(0.01)
    # The window is the first passage from 50 % to 3 % of the initial gap 2.0.
    assert phase.t_start == pytest.approx(math.log(2) / 0.7, abs=0.011)
    assert phase.t_end == pytest.approx(math.log(1 / 0.03) / 0.7, abs=0.011)
    flat = particles.linear_phase_fit(times, np.ones_like(times))
    assert not flat.fitted and math.isnan(flat.slope) and flat.r2 == 0.0
