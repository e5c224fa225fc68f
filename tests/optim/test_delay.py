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
    with pytest.raises(ValueError, match=r"buffer_decay must be finite and in \[0.0, 1.0\]"):
        delayed(optax.sgd(0.1), correction="error_buffer", buffer_decay=jnp.array(-0.5))
    with pytest.raises(TypeError, match="inner must be"):
        delayed(lambda g: g)
    assert set(DELAY_CORRECTIONS) == {
        "none",
        "update_extrapolation",
        "gradient_extrapolation",
        "error_buffer",
    }


# --------------------------------------------------------------------------------------------
# Issue 14: plain inject_hyperparams, non-finite gradients, params/updates consistency, values.


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"correction": "error_buffer", "extrapolation": 0.5, "buffer_decay": 0.5}],
    ids=["none", "error_buffer"],
)
@pytest.mark.parametrize("make_inner", [_adamw, _muon], ids=["adamw", "muon"])
def test_plain_inject_hyperparams_around_an_inner_transform(make_inner, kwargs):
    """inject_hyperparams(delayed)(inner) with the defaults: delay_steps (None) stays static."""
    injected = optax.inject_hyperparams(delayed)(make_inner(), **kwargs)
    state = injected.init(_params())
    assert "delay_steps" not in state.hyperparams and "extrapolation" in state.hyperparams
    expected = _trajectory(delayed(make_inner(), **kwargs), _params(), _gradients(4))
    actual = _trajectory(injected, _params(), _gradients(4))
    for a, e in zip(jax.tree.leaves(actual), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=1e-6, atol=1e-7)


def test_traced_delay_steps_asks_for_static_args():
    tx = optax.inject_hyperparams(delayed)(optax.sgd(0.1), delay_steps=2)
    with pytest.raises(TypeError, match=r"delay_steps .* static_args=\('delay_steps',\)"):
        jax.jit(tx.init)(_params())
    tx = optax.inject_hyperparams(delayed, static_args="delay_steps")(optax.sgd(0.1), delay_steps=2)
    assert jax.jit(tx.init)(_params()).inner_state.gradient_fifo["w"].shape == (2, 5, 4)


def _with_nan(grads, step):
    return jax.tree.map(lambda g: g.at[step].set(jnp.nan), grads)


@pytest.mark.parametrize("correction", [None, "gradient_extrapolation", "error_buffer"])
def test_nonfinite_gradients_are_counted_and_stay_in_the_buffers(correction):
    tx = delayed(_adamw(), correction=correction)
    _, updates = _trajectory(tx, _params(), _with_nan(_gradients(), 2))
    state = tx.init(_params())
    for step in range(_STEPS):
        g = jax.tree.map(lambda x, step=step: x[step], _with_nan(_gradients(), 2))
        _, state = jax.jit(tx.update)(g, state, _params())
    assert int(state.nonfinite_count) == 1
    finite = [bool(np.isfinite(np.asarray(updates["w"][t])).all()) for t in range(_STEPS)]
    # Received at call 2, fed to AdamW at call 3 (one-step delay): NaN from then on.
    assert finite == [True, True, True, False, False, False]


def test_apply_if_finite_skips_a_nan_gradient_and_recovers(x64):
    """Guarded, the NaN call is a zero update with the state unchanged: the run equals the run
    that never received that gradient (compared with the unguarded run on the clean sequence).

    In float64: the two runs are different programs, and the extrapolation's difference of
    successive updates turns float32 reassociation into relative gaps of a few 1e-6."""
    grads = _gradients()
    clean = jax.tree.map(lambda g: jnp.concatenate([g[:2], g[3:]]), grads)
    tx = delayed(_adamw(), correction="update_extrapolation")
    guarded = optax.apply_if_finite(tx, max_consecutive_errors=3)
    trajectory, updates = _trajectory(guarded, _params(), _with_nan(grads, 2))
    expected_trajectory, expected_updates = _trajectory(tx, _params(), clean)
    np.testing.assert_array_equal(np.asarray(updates["w"][2]), 0.0)
    keep = np.array([0, 1, 3, 4, 5])
    for leaf in ("w", "b"):
        np.testing.assert_allclose(updates[leaf][keep], expected_updates[leaf], rtol=1e-12)
    state = guarded.init(_params())
    for step in range(_STEPS):
        g = jax.tree.map(lambda x, step=step: x[step], _with_nan(grads, 2))
        _, state = jax.jit(guarded.update)(g, state, _params())
    assert int(state.total_notfinite) == 1 and int(state.inner_state.nonfinite_count) == 0


def test_params_and_updates_consistency():
    tx = delayed(optax.adam(1e-2))
    with pytest.raises(TypeError, match=r"params\['w'\] must have a floating dtype, got int32"):
        tx.init({"w": jnp.zeros(5, jnp.int32)})
    state = tx.init({"w": jnp.zeros(5)})
    for shape in ((3, 5), (1,)):
        with pytest.raises(ValueError, match=rf"updates\['w'\] has shape \({shape[0]},"):
            tx.update({"w": jnp.ones(shape)}, state)
    with pytest.raises(TypeError, match=r"updates\['w'\] must have a floating dtype"):
        tx.update({"w": jnp.ones(5, jnp.int32)}, state)
    # delay 0 with a correction keeps no FIFO: the correction's buffer is the reference.
    tx = delayed(optax.sgd(0.1), delay_steps=0, correction="gradient_extrapolation")
    with pytest.raises(ValueError, match=r"updates\['w'\] has shape \(1,\)"):
        tx.update({"w": jnp.ones(1)}, tx.init({"w": jnp.zeros(5)}))


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        ({"extrapolation": float("inf")}, ValueError, "extrapolation must be finite"),
        ({"extrapolation": "1"}, TypeError, "extrapolation must be a real number"),
        ({"buffer_decay": 5.0}, ValueError, r"buffer_decay must be finite and in \[0.0, 1.0\]"),
        ({"buffer_decay": float("nan")}, ValueError, "buffer_decay must be finite"),
        ({"delay_steps": True}, TypeError, "delay_steps must be a"),
        ({"delay_steps": jnp.array([1, 2])}, TypeError, "delay_steps must be a"),
        ({"correction": 3}, ValueError, "correction must be"),
    ],
)
def test_rejected_values(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        delayed(optax.sgd(0.1), correction=kwargs.pop("correction", "error_buffer"), **kwargs)
