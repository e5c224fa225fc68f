"""Tests of ``jaxlab.optim.delayed``: semantics, the note's stability thresholds, bad input."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxlab.optim import DELAY_CORRECTIONS, delayed

_STEPS = 6


def _gradients(seed: int = 0) -> dict[str, jax.Array]:
    key_w, key_b = jax.random.split(jax.random.key(seed))
    return {
        "w": jax.random.normal(key_w, (_STEPS, 5, 4)),
        "b": jax.random.normal(key_b, (_STEPS, 4)),
    }


def _params() -> dict[str, jax.Array]:
    return {"w": jnp.ones((5, 4)) * 0.3, "b": jnp.zeros(4)}


@functools.partial(jax.jit, static_argnums=0)
def _trajectory(tx, params, grads):
    """Params and updates along a fixed gradient sequence (the gradients ignore the params)."""

    def body(carry, g):
        params, state = carry
        updates, state = tx.update(g, state, params)
        return (optax.apply_updates(params, updates), state), (params, updates)

    _, (trajectory, updates) = jax.lax.scan(body, (params, tx.init(params)), grads)
    return trajectory, updates


def _muon():
    return optax.contrib.muon(0.02)


def _adamw():
    return optax.adamw(1e-2, weight_decay=0.1)


@pytest.mark.parametrize("make_inner", [_adamw, _muon], ids=["adamw", "muon"])
def test_zero_delay_is_bit_identical(make_inner):
    inner = make_inner()
    expected = _trajectory(inner, _params(), _gradients())
    actual = _trajectory(delayed(inner, delay_steps=0), _params(), _gradients())
    for a, e in zip(jax.tree.leaves(actual), jax.tree.leaves(expected), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(e))


@pytest.mark.parametrize("delay", [1, 2])
def test_update_equals_inner_update_on_old_gradient(delay):
    """Update t equals the inner transform's update for gradient t - D; the first D are zero.

    The second path runs the inner transform by hand on the shifted gradient sequence at the
    delayed run's own parameters (AdamW's weight decay uses the current params).
    """
    inner = _adamw()
    grads = _gradients(1)
    trajectory, updates = _trajectory(delayed(inner, delay_steps=delay), _params(), grads)
    state = inner.init(_params())
    for t in range(_STEPS):
        params_t = jax.tree.map(lambda x, t=t: x[t], trajectory)
        update_t = jax.tree.map(lambda x, t=t: x[t], updates)
        if t < delay:
            for leaf in jax.tree.leaves(update_t):
                np.testing.assert_array_equal(np.asarray(leaf), 0.0)
            continue
        g_old = jax.tree.map(lambda x, t=t: x[t - delay], grads)
        expected, state = inner.update(g_old, state, params_t)
        for a, e in zip(jax.tree.leaves(update_t), jax.tree.leaves(expected), strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=1e-6, atol=1e-7)


def test_corrections_match_their_formulas():
    """Each correction against its formula, computed by hand from the inner SGD-momentum run."""
    lam, decay = 0.7, 0.5
    inner = optax.sgd(0.1, momentum=0.9)
    grads = _gradients(2)["b"]  # (steps, 4)
    x0 = jnp.zeros(4)
    # The gradients do not depend on the params and SGD ignores them: a pure function of grads.
    u_plain = np.asarray(_trajectory(delayed(inner, delay_steps=1), x0, grads)[1])
    u_ext = np.asarray(
        _trajectory(
            delayed(inner, delay_steps=1, correction="update_extrapolation", extrapolation=lam),
            x0,
            grads,
        )[1]
    )
    u_buf = np.asarray(
        _trajectory(
            delayed(
                inner,
                delay_steps=1,
                correction="error_buffer",
                extrapolation=lam,
                buffer_decay=decay,
            ),
            x0,
            grads,
        )[1]
    )
    u_grad = np.asarray(
        _trajectory(
            delayed(inner, delay_steps=1, correction="gradient_extrapolation", extrapolation=lam),
            x0,
            grads,
        )[1]
    )
    g = np.asarray(grads)
    # Heavy ball by hand: v = 0.9 v + d, u = -0.1 v.
    expected_ext, expected_buf, expected_grad = [np.zeros(4)], [np.zeros(4)], [np.zeros(4)]
    v_plain, v_grad, error = np.zeros(4), np.zeros(4), np.zeros(4)
    previous_u = None
    for t in range(1, _STEPS):
        d = g[t - 1]
        v_plain = 0.9 * v_plain + d
        u = -0.1 * v_plain
        np.testing.assert_allclose(u_plain[t], u, rtol=1e-5, atol=1e-6)
        change = np.zeros(4) if previous_u is None else u - previous_u
        expected_ext.append(u + lam * change)
        error = decay * error + change
        expected_buf.append(u + lam * error)
        d_hat = d if t == 1 else d + lam * (d - g[t - 2])
        v_grad = 0.9 * v_grad + d_hat
        expected_grad.append(-0.1 * v_grad)
        previous_u = u
    np.testing.assert_allclose(u_ext, np.stack(expected_ext), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(u_buf, np.stack(expected_buf), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(u_grad, np.stack(expected_grad), rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------------------------
# Reference checks 1 and 2 of the note: stability thresholds on f = (a/2) x², a = 1.

_RADIUS_STEPS = 1200  # long enough to resolve ±2 %, short enough not to overflow float64


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def _radius(delay: int, correction: str, momentum: bool, lr, lam, beta):
    """Simulated spectral radius: growth rate of |x| over the second half of the run."""
    inner = optax.sgd(lr, momentum=beta) if momentum else optax.sgd(lr)
    tx = delayed(inner, delay_steps=delay, correction=correction, extrapolation=lam)
    x = jnp.ones([], jnp.float64)

    def body(carry, _):
        x, state = carry
        update, state = tx.update(x, state, x)  # ∇f(x) = a x with a = 1
        x = x + update
        return (x, state), jnp.abs(x)

    _, path = jax.lax.scan(body, (x, tx.init(x)), None, length=_RADIUS_STEPS)
    window = 50  # max over a window smooths the oscillation of complex eigenvalues
    half = _RADIUS_STEPS // 2
    early = jnp.max(path[half - window : half])
    late = jnp.max(path[-window:])
    return jnp.exp((jnp.log(late) - jnp.log(early)) / (_RADIUS_STEPS - half))


def _companion_radius(coefficients) -> float:
    """Largest |root| of z^n = Σ c_k z^(n-1-k) (numpy eigenvalues, an independent path)."""
    return float(np.max(np.abs(np.roots(np.concatenate([[1.0], -np.asarray(coefficients)])))))


_GD_THRESHOLDS = [  # (delay, correction, λ, threshold on ηa) from the note
    (0, "none", 0.0, 2.0),
    (1, "none", 0.0, 1.0),
    (1, "update_extrapolation", 0.25, 0.9443),
    (1, "update_extrapolation", 0.5, 0.8284),
    (1, "update_extrapolation", 1.0, 0.6180),
    (1, "gradient_extrapolation", 1.0, 0.6180),  # R1 = R2 without momentum
]


@pytest.mark.parametrize(("delay", "correction", "lam", "threshold"), _GD_THRESHOLDS)
def test_gd_stability_threshold(x64, delay, correction, lam, threshold):
    for side, eta in (("below", 0.98 * threshold), ("above", 1.02 * threshold)):
        radius = float(_radius(delay, correction, False, eta, lam, 0.0))
        # Independent path: the recursion x_{t+1} = x_t - ηa[(1+λ)x_{t-D} - λx_{t-D-1}].
        if delay == 0:
            exact = abs(1 - eta)
        else:
            exact = _companion_radius([1.0, -eta * (1 + lam), eta * lam])
        assert radius == pytest.approx(exact, abs=2e-3), (side, eta)
        assert (radius < 1) == (side == "below"), (side, eta, radius)


@pytest.mark.parametrize("beta", [0.5, 0.9, 0.95])
@pytest.mark.parametrize("delay", [0, 1])
def test_heavy_ball_stability_threshold(x64, beta, delay):
    threshold = 2 * (1 + beta) if delay == 0 else 1 - beta
    for side, eta in (("below", 0.98 * threshold), ("above", 1.02 * threshold)):
        radius = float(_radius(delay, "none", True, eta, 0.0, beta))
        # v_t = β v_{t-1} + x_{t-D}, x_{t+1} = x_t - η v_t ⇒
        # x_{t+1} = (1+β) x_t - β x_{t-1} - η x_{t-D}.
        coefficients = np.zeros(max(2, delay + 1))
        coefficients[0] += 1 + beta
        coefficients[1] -= beta
        coefficients[delay] -= eta
        exact = _companion_radius(coefficients)
        assert radius == pytest.approx(exact, abs=2e-3), (side, eta)
        assert (radius < 1) == (side == "below"), (side, eta, radius)


# --------------------------------------------------------------------------------------------
# Wrapping other optimizers; bad input.


def test_inject_hyperparams_extrapolation():
    """λ traced through inject_hyperparams gives the same trajectory as a Python float."""
    grads = _gradients(3)
    make = optax.inject_hyperparams(
        lambda extrapolation: delayed(
            optax.adam(1e-2), correction="update_extrapolation", extrapolation=extrapolation
        )
    )
    expected = _trajectory(
        delayed(optax.adam(1e-2), correction="update_extrapolation", extrapolation=0.5),
        _params(),
        grads,
    )
    actual = _trajectory(make(extrapolation=0.5), _params(), grads)
    for a, e in zip(jax.tree.leaves(actual), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=1e-6, atol=1e-7)


def test_bad_input():
    with pytest.raises(ValueError, match="delay_steps must be an int >= 0"):
        delayed(optax.sgd(0.1), delay_steps=-1)
    with pytest.raises(TypeError, match=r"delay_steps must be a \(static\) int"):
        delayed(optax.sgd(0.1), delay_steps=1.5)
    with pytest.raises(ValueError, match="correction must be"):
        delayed(optax.sgd(0.1), correction="nesterov")
    with pytest.raises(ValueError, match="extrapolation must be finite and >= 0"):
        delayed(optax.sgd(0.1), correction="update_extrapolation", extrapolation=-1.0)
    with pytest.raises(ValueError, match="buffer_decay must be finite and >= 0"):
        delayed(optax.sgd(0.1), correction="error_buffer", buffer_decay=jnp.array(-0.5))
    with pytest.raises(TypeError, match="inner must be"):
        delayed(lambda g: g)
    assert set(DELAY_CORRECTIONS) == {
        "none",
        "update_extrapolation",
        "gradient_extrapolation",
        "error_buffer",
    }
