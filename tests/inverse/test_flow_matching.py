"""Flow matching and the flow map against the note's closed-form mixture flow (checks 1-4)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from jaxlab.inverse import (
    GaussianMixtureFlow,
    VelocityMLP,
    diffrax_adjoint,
    diffrax_solver,
    flow_matching_loss,
    integrate_flow,
    split_velocity,
    three_mode_mixture,
    train_flow_matching,
)
from tests.conftest import EXECUTION_BOUND

# The note's reference checks 1-3 (re-derived there with numpy).
VELOCITY_VALUES = [
    ((0.0, 0.0), 0.0, (0.5, 0.0)),
    ((1.0, -1.0), 1.0, (1.0, -1.0)),
    ((0.75, 0.75), 0.5, (1.455411, 1.363843)),
    ((0.0, 0.0), 0.5, (-0.303930, 0.0)),
    ((0.3, -0.2), 0.25, (0.516193, 0.059438)),
    ((1.2, 1.0), 0.9, (1.430233, 1.337209)),
]
FLOW_VALUES = {
    ("euler", 10): (1.321667, -0.906969),
    ("euler", 100): (1.368906, -0.998226),
    ("euler", 1000): (1.373660, -1.006904),
    ("heun", 10): (1.373256, -0.999565),
    ("heun", 100): (1.374173, -1.007753),
    ("heun", 1000): (1.374189, -1.007863),
}
X0 = jnp.array([0.3, -0.2])


def test_mixture_velocity_matches_the_note():
    flow = three_mode_mixture()
    points = jnp.array([p for p, _, _ in VELOCITY_VALUES])
    times = jnp.array([t for _, t, _ in VELOCITY_VALUES])
    got = jax.jit(jax.vmap(flow.velocity))(points, times)
    np.testing.assert_allclose(got, [v for _, _, v in VELOCITY_VALUES], atol=2e-6)


def test_mixture_velocity_limits_hold_everywhere():
    # v(x, 0) = Σ π m - x and v(x, 1) = x for any x (the closed form at the path's ends).
    flow = three_mode_mixture()
    x = jax.random.normal(jax.random.key(0), (16, 2)) * 2.0
    at = jax.jit(jax.vmap(flow.velocity, in_axes=(0, None)))
    np.testing.assert_allclose(at(x, 0.0), flow.mean()[None] - x, atol=1e-5)
    np.testing.assert_allclose(at(x, 1.0), x, atol=1e-5)


@pytest.fixture(scope="module")
def flow_values():
    flow = three_mode_mixture()
    return {
        (method, n): np.asarray(
            integrate_flow(GaussianMixtureFlow.velocity, flow, X0, num_steps=n, method=method)
        )
        for method, n in FLOW_VALUES
    }


def test_euler_and_heun_flows_match_the_note(flow_values):
    for key, expected in FLOW_VALUES.items():
        np.testing.assert_allclose(flow_values[key], expected, atol=3e-5, err_msg=str(key))


def test_heun_converges_at_second_order_and_euler_at_first(flow_values):
    # Errors against the 1000-step Heun value: 10x more steps divide Euler's error by ~10 and
    # Heun's by ~100.
    ref = flow_values[("heun", 1000)]
    err = {k: np.linalg.norm(v - ref) for k, v in flow_values.items()}
    assert 7 < err[("euler", 10)] / err[("euler", 100)] < 13
    assert err[("heun", 10)] / err[("heun", 100)] > 50


def test_integrating_backwards_inverts_the_flow():
    flow = three_mode_mixture()
    forward = integrate_flow(GaussianMixtureFlow.velocity, flow, X0, num_steps=200)
    back = integrate_flow(GaussianMixtureFlow.velocity, flow, forward, 1.0, 0.0, num_steps=200)
    np.testing.assert_allclose(back, X0, atol=2e-3)


def test_push_forward_has_the_mixture_moments():
    # The note's check 4: 20 000 N(0, I) samples, tolerances 0.05 / 0.1 (Heun-100 here instead of
    # 200: its flow error, ~1e-4 by the check-3 values, is far below the tolerances).
    flow = three_mode_mixture()
    z = jax.random.normal(jax.random.key(0), (20_000, 2))
    batched = lambda f, x, t: jax.vmap(f.velocity, in_axes=(0, None))(x, t)  # noqa: E731
    push = jax.jit(
        lambda z: integrate_flow(batched, flow, z, num_steps=100),
        compiler_options=EXECUTION_BOUND,  # 100 steps over 20 000 points: execution-bound
    )
    x = np.asarray(push(z))
    np.testing.assert_allclose(x.mean(axis=0), flow.mean(), atol=0.05)
    np.testing.assert_allclose(np.cov(x.T), flow.covariance(), atol=0.1)
    nearest = np.argmin(((x[:, None, :] - np.asarray(flow.means)[None]) ** 2).sum(-1), axis=1)
    np.testing.assert_allclose(np.bincount(nearest, minlength=3) / len(x), 1 / 3, atol=0.02)


def test_exact_velocity_attains_the_minimal_flow_matching_loss():
    # v* = E[x_1 - x_0 | x_t], so the loss at v* is E||x_1 - x_0||² - E||v*(x_t, t)||² (both
    # estimated here on the same draws as the loss), and any other field does worse.
    flow = three_mode_mixture()
    x1 = flow.sample(jax.random.key(0), 20_000)
    key = jax.random.key(1)
    exact = lambda f, x, t: jax.vmap(f.velocity)(x, t)  # noqa: E731
    loss = float(flow_matching_loss(exact, flow, key, x1))
    noise_key, time_key = jax.random.split(key)  # the loss's own draws
    x0 = jax.random.normal(noise_key, x1.shape)
    t = jax.random.uniform(time_key, x1.shape[:1])
    xt = (1 - t)[:, None] * x0 + t[:, None] * x1
    v = exact(flow, xt, t)
    identity = float(jnp.mean(jnp.sum((x1 - x0) ** 2, -1)) - jnp.mean(jnp.sum(v**2, -1)))
    assert loss == pytest.approx(identity, rel=0.03)
    for scale in (0.9, 1.1):
        scaled = lambda f, x, t, s=scale: s * exact(f, x, t)  # noqa: E731
        assert float(flow_matching_loss(scaled, flow, key, x1)) > loss


def test_training_a_velocity_mlp_approaches_the_exact_loss():
    flow = three_mode_mixture()
    data = flow.sample(jax.random.key(0), 4096)
    model = VelocityMLP(2, (64, 64), rngs=nnx.Rngs(0))
    history = train_flow_matching(
        model, data, steps=800, batch_size=256, learning_rate=3e-3, rng_key=jax.random.key(1)
    )
    assert np.all(np.isfinite(history["train_loss"]))
    velocity_fn, params = split_velocity(model)
    held_out = flow.sample(jax.random.key(2), 8192)
    exact = lambda f, x, t: jax.vmap(f.velocity)(x, t)  # noqa: E731
    zero = lambda f, x, t: jnp.zeros_like(x)  # noqa: E731
    key = jax.random.key(3)
    trained = float(flow_matching_loss(velocity_fn, params, key, held_out))
    best = float(flow_matching_loss(exact, flow, key, held_out))
    worst = float(flow_matching_loss(zero, flow, key, held_out))
    assert best <= trained < best + 0.15 * (worst - best), (best, trained, worst)


def test_unknown_method_or_adjoint_names_the_choices_and_the_alternative():
    with pytest.raises(ValueError, match=r"method must be one of \('euler', 'heun', 'midpoint'\) "):
        diffrax_solver("rk4")
    with pytest.raises(ValueError, match=r"adjoint must be one of .* or a diffrax adjoint, got 3"):
        diffrax_adjoint(3, 8)
    assert diffrax_adjoint("backprop", 8).checkpoints == 8  # the earlier name still accepted
