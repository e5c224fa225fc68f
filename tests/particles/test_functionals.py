"""Built-in functionals and closed forms, against scipy quadrature, root-finding and autodiff."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
import scipy.optimize

from jaxlab import particles


def _quad_moments(rate, lower, upper):
    def weight(x):
        return np.exp(-rate * (x - lower))

    z = scipy.integrate.quad(weight, lower, upper)[0]
    mean = scipy.integrate.quad(lambda x: x * weight(x), lower, upper)[0] / z
    second = scipy.integrate.quad(lambda x: (x - mean) ** 2 * weight(x), lower, upper)[0] / z
    return mean, second


@pytest.mark.parametrize("rate", [-40.0, -3.0, -1e-3, 0.0, 1e-5, 5e-3, 0.3, 3.0, 25.0])
@pytest.mark.parametrize("box", [(0.0, 1.0), (-2.0, 3.0)])
def test_truncated_exponential_moments_match_quadrature(x64, rate, box):
    mean, variance = particles.truncated_exponential_moments(rate, *box)
    expected_mean, expected_variance = _quad_moments(rate, *box)
    assert float(mean) == pytest.approx(expected_mean, rel=1e-9, abs=1e-12)
    assert float(variance) == pytest.approx(expected_variance, rel=1e-7, abs=1e-12)


def test_interacting_fixed_point_matches_the_note_and_brentq(x64):
    c = np.array([0.3, -0.2, 0.5, 0.0, 0.1])
    m = np.array([0.5, 0.5, 0.2, 0.8, 0.5])
    fixed = particles.interacting_box_fixed_point(jnp.asarray(c), 1.0, jnp.asarray(m), 0.1)
    # The note's re-derived values (check 3).
    np.testing.assert_allclose(
        fixed.mean, [0.366942, 0.589927, 0.194915, 0.633058, 0.454668], atol=1e-6
    )
    np.testing.assert_allclose(
        fixed.rates, [1.669424, -1.100730, 4.949149, -1.669424, 0.546684], atol=1e-5
    )
    for j in range(5):

        def residual(mean, j=j):
            return mean - _quad_moments((c[j] + (mean - m[j])) / 0.1, 0.0, 1.0)[0]

        root = scipy.optimize.brentq(residual, 0.0, 1.0, xtol=1e-14)
        assert float(fixed.mean[j]) == pytest.approx(root, abs=1e-9)


def test_fixed_point_on_a_general_box_and_without_interaction(x64):
    c, m = jnp.asarray([0.3, -0.5]), jnp.asarray([0.0, 0.0])
    free = particles.interacting_box_fixed_point(c, 0.0, m, 0.2, lower=-1.0, upper=2.0)
    expected, _ = particles.truncated_exponential_moments(c / 0.2, -1.0, 2.0)
    np.testing.assert_allclose(free.mean, expected, rtol=1e-12)
    with pytest.raises(ValueError, match="entropy_weight must be finite and > 0"):
        particles.interacting_box_fixed_point(c, 1.0, m, 0.0)
    with pytest.raises(ValueError, match="interaction must be finite and >= 0"):
        particles.interacting_box_fixed_point(c, -1.0, m, 0.1)


def test_functional_gradients_are_the_first_variations_derivative(x64):
    c, m, kappa = jnp.asarray([0.3, -0.2]), jnp.asarray([0.5, 0.1]), 2.0
    box = particles.interacting_box_functional(c, kappa, m)
    mean = jnp.asarray([0.4, 0.7])

    # F(μ + ε(δ_x - μ)) differentiated in ε at 0 is δF/δμ(μ, x) - ∫δF/δμ dμ; its x-gradient
    # is ∇_x δF/δμ. Here: the gradient of ε ↦ F(mean + ε(x - mean)) at ε = 0, taken in x.
    def first_variation(x):
        return jax.grad(lambda e: box.objective_fn(mean + e * (x - mean)))(0.0)

    x = jnp.asarray([0.2, 0.9])
    np.testing.assert_allclose(
        box.first_variation_grad_fn(x, mean), jax.grad(first_variation)(x), rtol=1e-12
    )
    linear = particles.linear_potential_functional(c)
    np.testing.assert_allclose(linear.first_variation_grad_fn(x, mean), c)


def test_two_layer_network_gradient_and_loss(x64):
    inputs = jax.random.normal(jax.random.key(0), (7, 3), jnp.float64)
    targets = jax.random.normal(jax.random.key(1), (7,), jnp.float64)
    network = particles.two_layer_network_functional(inputs, targets)
    neurons = jax.random.uniform(jax.random.key(2), (5, 4), jnp.float64, -1, 1)
    outputs = jnp.mean(jax.vmap(network.statistics_fn)(neurons), axis=0)
    # f_μ by an explicit loop over neurons and data.
    explicit = [
        np.mean([n[0] * np.tanh(np.dot(n[1:], x)) for n in np.asarray(neurons)])
        for x in np.asarray(inputs)
    ]
    np.testing.assert_allclose(outputs, explicit, rtol=1e-12)
    loss = 0.5 * np.mean((np.asarray(explicit) - np.asarray(targets)) ** 2)
    assert float(network.objective_fn(outputs)) == pytest.approx(loss, rel=1e-12)

    # N ∇_θ F(μ̂) for neuron i equals the first-variation gradient at θ_i.
    def loss_of(neurons):
        return network.objective_fn(jnp.mean(jax.vmap(network.statistics_fn)(neurons), axis=0))

    autodiff = 5 * jax.grad(loss_of)(neurons)
    ours = jax.vmap(network.first_variation_grad_fn, (0, None))(neurons, outputs)
    np.testing.assert_allclose(ours, autodiff, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: particles.linear_potential_functional(jnp.ones((2, 2))), "coefficient must"),
        (
            lambda: particles.interacting_box_functional(jnp.ones(2), 1.0, jnp.ones(3)),
            "coefficient and target",
        ),
        (
            lambda: particles.interacting_box_functional(jnp.ones(2), -1.0, jnp.ones(2)),
            "interaction must be finite and >= 0",
        ),
        (
            lambda: particles.two_layer_network_functional(jnp.ones((4, 2)), jnp.ones(3)),
            "inputs must be",
        ),
    ],
)
def test_bad_functional_arguments_raise(call, match):
    with pytest.raises(ValueError, match=match):
        call()
