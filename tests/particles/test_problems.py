"""The examples' instances, closed-form references and diagnostics, against independent truths."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate

from jaxlab import particles

C5 = (0.3, -0.2, 0.5, 0.0, 0.1)  # the note's interacting box (check 3)
M5 = (0.5, 0.5, 0.2, 0.8, 0.5)


def _two_particle_moments(c, kappa, m, lam, limit):
    """E_2[s] and 2 E_2[(s - limit)²] under π_2 ∝ exp(-2F(s)/λ) on [0, 1]², by dblquad."""

    def moment(f):
        def integrand(x2, x1):
            s = 0.5 * (x1 + x2)
            return f(s) * math.exp(-2 * (c * s + 0.5 * kappa * (s - m) ** 2) / lam)

        return scipy.integrate.dblquad(integrand, 0, 1, 0, 1, epsabs=1e-13)[0]

    z = moment(lambda s: 1.0)
    return moment(lambda s: s) / z, 2 * moment(lambda s: (s - limit) ** 2) / z


def test_finite_particle_mean_matches_brute_force_for_two_particles():
    c, kappa, m, lam = 0.5, 1.0, 0.2, 0.1
    brute, _ = _two_particle_moments(c, kappa, m, lam, 0.0)
    exact, limit = particles.interacting_box_finite_particle_mean(
        c, kappa, m, lam, 2, grid_step=2e-4
    )
    assert exact == pytest.approx(brute, abs=2e-6)
    assert limit == pytest.approx(0.194915, abs=1e-5)  # the note's mean-field value
    # Any N, not only powers of two: the bias N (m̄ - E_N s) is nearly constant (≈ 1/N).
    scaled = [
        n * (limit - particles.interacting_box_finite_particle_mean(c, kappa, m, lam, n)[0])
        for n in (3, 5, 12)
    ]
    assert max(scaled) / min(scaled) < 1.15
    with pytest.raises(ValueError, match="num_particles must be an int >= 1"):
        particles.interacting_box_finite_particle_mean(c, kappa, m, lam, 0)


def test_finite_particle_moments_match_quadrature_for_two_particles(x64):
    exact = particles.interacting_box_finite_particle_moments(C5, 1.0, M5, 0.1, 2, grid_step=2e-4)
    for j in (0, 2, 3):  # rates 1.67, 4.95, -1.67
        mean, pair = _two_particle_moments(C5[j], 1.0, M5[j], 0.1, exact.mean_field_mean[j])
        assert exact.mean[j] == pytest.approx(mean, abs=2e-6)
        assert exact.pair_correlation[j] == pytest.approx(pair, rel=1e-5)
    fixed = particles.interacting_box_fixed_point(jnp.asarray(C5), 1.0, jnp.asarray(M5), 0.1)
    np.testing.assert_allclose(exact.mean_field_mean, fixed.mean, rtol=1e-12)
    _, variance = particles.truncated_exponential_moments(fixed.rates)
    np.testing.assert_allclose(exact.independent_pair_correlation, variance, rtol=1e-12)


def test_pair_correlation_tends_to_its_gaussian_limit_and_is_the_variance_without_interaction(x64):
    # N → ∞: N E(m_N - m̄)² → σ²λ/(λ + κσ²) with an O(1/N) correction (the 0.199).
    moments = [
        particles.interacting_box_finite_particle_moments(C5, 1.0, M5, 0.1, n) for n in (512, 1024)
    ]
    limit = moments[0].mean_field_pair_correlation
    assert limit.sum() == pytest.approx(0.1986, abs=1e-4)
    gaps = [np.abs(m.pair_correlation - limit).max() for m in moments]
    assert gaps[1] < 1e-4 and gaps[0] / gaps[1] == pytest.approx(2.0, rel=0.1)
    # The bias falls like 1/N: N |bias| settles at 0.040 (the value).
    for m, n in zip(moments, (512, 1024), strict=True):
        assert n * np.linalg.norm(m.mean - m.mean_field_mean) == pytest.approx(0.0399, abs=5e-4)
    # κ = 0: independent particles, E_N m_N = m̄ and N E(m_N - m̄)² = σ² for every N.
    free = particles.interacting_box_finite_particle_moments(C5, 0.0, M5, 0.1, 7)
    np.testing.assert_allclose(free.mean, free.mean_field_mean, atol=1e-7)
    np.testing.assert_allclose(free.pair_correlation, free.independent_pair_correlation, rtol=1e-5)
    assert free.independent_pair_correlation.sum() == pytest.approx(
        float(sum(particles.truncated_exponential_moments(jnp.asarray(C5) / 0.1)[1])), rel=1e-12
    )


@pytest.mark.parametrize("independent", [False, True])
def test_stationary_samples_have_the_exact_moments(x64, independent):
    # Rejection sampling against the lattice quadrature: two paths to the moments of π_N.
    n, systems = 4, 40_000
    x = np.asarray(
        particles.interacting_box_stationary_sample(
            jax.random.key(5), C5, 1.0, M5, 0.1, n, systems, independent=independent
        )
    )
    assert x.shape == (systems, n, 5) and x.min() >= 0.0 and x.max() <= 1.0
    exact = particles.interacting_box_finite_particle_moments(C5, 1.0, M5, 0.1, n)
    mean_n = x.mean(axis=1)
    pair = n * (mean_n - exact.mean_field_mean) ** 2
    target_mean = exact.mean_field_mean if independent else exact.mean
    target_pair = exact.independent_pair_correlation if independent else exact.pair_correlation
    se = mean_n.std(axis=0) / math.sqrt(systems)
    assert np.all(np.abs(mean_n.mean(axis=0) - target_mean) < 4 * se)
    pair_se = pair.std(axis=0) / math.sqrt(systems)
    assert np.all(np.abs(pair.mean(axis=0) - target_pair) < 4 * pair_se)
    # The two laws differ by far more than that: the interaction correlates the particles.
    other = exact.pair_correlation if independent else exact.independent_pair_correlation
    assert np.all(np.abs(pair.mean(axis=0) - other) > 10 * pair_se)


def test_power_law_fit_matches_weighted_least_squares_by_hand():
    sizes = np.array([4.0, 8.0, 16.0, 32.0])
    values = np.array([0.0107, 0.0049, 0.0026, 0.0012])
    errors = np.array([2e-4, 2e-4, 2e-4, 2e-4])
    fit = particles.power_law_fit(sizes, values, errors)
    # A second path: numpy's weighted polyfit with w = 1/σ(log v) and its scaled covariance.
    coefficients, covariance = np.polyfit(
        np.log(sizes), np.log(values), 1, w=values / errors, cov="unscaled"
    )
    assert fit.exponent == pytest.approx(coefficients[0], rel=1e-10)
    assert fit.exponent_standard_error == pytest.approx(math.sqrt(covariance[0, 0]), rel=1e-10)
    assert fit.prefactor == pytest.approx(math.exp(coefficients[1]), rel=1e-10)
    plain = particles.power_law_fit(sizes, 0.04 / sizes**1.5)
    assert plain.exponent == pytest.approx(-1.5) and math.isnan(plain.exponent_standard_error)


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
