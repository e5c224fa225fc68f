"""Hessian-vector products and the dominant eigenvalue on quadratics with a known spectrum."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.flatten_util import ravel_pytree

from jaxlab.nn import (
    GPTConfig,
    SimpleGPT,
    activation_hessian_top_eigenvalue,
    adam_preconditioner,
    adam_sharpness_limit,
    hvp,
    language_model_loss,
    preconditioned_top_eigenvalue,
    residual_stream_loss,
    top_eigenvalue,
)


def _quadratic_with_spectrum(eigenvalues, seed=0):
    """``L(p) = ½ xᵀAx`` with ``A = Q diag(λ) Qᵀ`` (random orthogonal Q), x split in a pytree."""
    n = len(eigenvalues)
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(n, n)))
    a = (q * np.asarray(eigenvalues)) @ q.T
    a = jnp.asarray((a + a.T) / 2, jnp.float32)
    split = n // 3

    def loss(params):
        x = jnp.concatenate([params["a"], jnp.ravel(params["b"])])
        return 0.5 * x @ a @ x

    params = {"a": jnp.ones(split), "b": jnp.ones((n - split, 1))}
    return loss, params, np.asarray(a)


def test_hvp_matches_dense_hessian():
    loss, params, a = _quadratic_with_spectrum(np.linspace(-2.0, 5.0, 9))
    direction = np.arange(9.0)
    v = {"a": jnp.asarray(direction[:3]), "b": jnp.asarray(direction[3:, None])}
    out = hvp(loss, params, v)
    flat = np.concatenate([np.asarray(out["a"]), np.ravel(out["b"])])
    np.testing.assert_allclose(flat, a @ direction, rtol=1e-5, atol=1e-5)


def test_hvp_of_nonquadratic_matches_jax_hessian():
    loss = lambda p: jnp.sum(jnp.sin(p["x"]) * p["y"] ** 2) + jnp.sum(p["x"] ** 3)
    params = {"x": jnp.asarray([0.3, -1.2]), "y": jnp.asarray([0.7, 2.0])}
    v = {"x": jnp.asarray([1.0, -0.5]), "y": jnp.asarray([0.2, 0.4])}
    dense = jax.hessian(lambda z: loss({"x": z[:2], "y": z[2:]}))(
        jnp.concatenate([params["x"], params["y"]])
    )
    expected = dense @ jnp.concatenate([v["x"], v["y"]])
    out = hvp(loss, params, v)
    np.testing.assert_allclose(jnp.concatenate([out["x"], out["y"]]), expected, rtol=1e-5)


@pytest.mark.parametrize("method,iters", [("power", 200), ("lanczos", 10)])
def test_diag_one_to_ten_top_is_ten(method, iters):
    loss = lambda p: 0.5 * jnp.sum(jnp.arange(1.0, 11.0) * p**2)
    value, vector = top_eigenvalue(
        loss, jnp.zeros(10), rng_key=jax.random.key(0), num_iters=iters, method=method
    )
    assert float(value) == pytest.approx(10.0, abs=1e-3)
    assert abs(float(vector[-1])) == pytest.approx(1.0, abs=1e-2)  # e_10
    assert float(jnp.linalg.norm(vector)) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("method,iters", [("power", 300), ("lanczos", 20)])
def test_rotated_spectrum_with_negative_eigenvalues(method, iters):
    eigenvalues = np.concatenate([np.linspace(-3.0, 4.0, 29), [7.0]])
    loss, params, a = _quadratic_with_spectrum(eigenvalues, seed=1)
    value, vector = top_eigenvalue(
        loss, params, rng_key=jax.random.key(1), num_iters=iters, method=method
    )
    assert float(value) == pytest.approx(7.0, abs=1e-3)
    flat = np.concatenate([np.asarray(vector["a"]), np.ravel(vector["b"])])
    # The vector is the top eigenvector of A (numpy's eigh is the independent reference).
    w, q = np.linalg.eigh(a)
    assert abs(flat @ q[:, -1]) == pytest.approx(1.0, abs=1e-3)
    # The value is the Rayleigh quotient of the vector.
    assert float(value) == pytest.approx(float(flat @ a @ flat), abs=1e-4)


@pytest.mark.parametrize("method,iters", [("power", 300), ("lanczos", 12)])
def test_negative_dominant_spectrum_and_shift(method, iters):
    eigenvalues = [-10.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    loss, params, _ = _quadratic_with_spectrum(eigenvalues, seed=2)
    key = jax.random.key(2)
    value, _ = top_eigenvalue(loss, params, rng_key=key, num_iters=iters, method=method)
    assert float(value) == pytest.approx(-10.0, abs=1e-3)  # the dominant one is negative
    top, _ = top_eigenvalue(loss, params, rng_key=key, num_iters=iters, method=method, shift=value)
    assert float(top) == pytest.approx(5.0, abs=2e-3)


def test_power_iteration_equals_a_numpy_power_iteration():
    # Same start (the documented N(0, I)/norm draw from rng_key), same number of products: the
    # iterates and the Rayleigh quotient agree with a plain numpy loop on the dense matrix.
    loss, params, a = _quadratic_with_spectrum(np.linspace(1.0, 10.0, 9) ** 1.5, seed=4)
    key = jax.random.key(5)
    value, vector = top_eigenvalue(loss, params, rng_key=key, num_iters=7)
    v = np.asarray(jax.random.normal(key, (9,)), np.float64)
    v /= np.linalg.norm(v)
    for _ in range(6):
        v = a @ v
        v /= np.linalg.norm(v)
    flat = np.concatenate([np.asarray(vector["a"]), np.ravel(vector["b"])])
    np.testing.assert_allclose(flat, v, atol=1e-5)
    assert float(value) == pytest.approx(float(v @ a @ v), rel=1e-5)


def test_lanczos_with_more_iterations_than_dimensions():
    loss = lambda p: 0.5 * jnp.sum(jnp.asarray([1.0, 2.0, 3.0]) * p**2)
    value, vector = top_eigenvalue(
        loss, jnp.zeros(3), rng_key=jax.random.key(3), num_iters=20, method="lanczos"
    )
    assert float(value) == pytest.approx(3.0, abs=1e-4)
    assert bool(jnp.all(jnp.isfinite(vector)))


def test_jit_and_float64(x64):
    loss, params, _ = _quadratic_with_spectrum(np.linspace(0.5, 3.0, 12), seed=3)
    params = jax.tree.map(lambda x: x.astype(jnp.float64), params)
    run = jax.jit(lambda p, k: top_eigenvalue(loss, p, rng_key=k, num_iters=12, method="lanczos"))
    value, vector = run(params, jax.random.key(4))
    assert value.dtype == jnp.float64
    assert float(value) == pytest.approx(3.0, abs=1e-5)


def test_bad_input():
    loss = lambda p: jnp.sum(p**2)
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="num_iters"):
        top_eigenvalue(loss, jnp.ones(3), rng_key=key, num_iters=0)
    with pytest.raises(TypeError, match="num_iters"):
        top_eigenvalue(loss, jnp.ones(3), rng_key=key, num_iters=2.5)
    with pytest.raises(ValueError, match="method"):
        top_eigenvalue(loss, jnp.ones(3), rng_key=key, method="arnoldi")
    with pytest.raises(TypeError, match="rng_key"):
        top_eigenvalue(loss, jnp.ones(3), rng_key=0)
    with pytest.raises(TypeError, match="floating"):
        top_eigenvalue(loss, jnp.ones(3, jnp.int32), rng_key=key)
    with pytest.raises(ValueError, match="structure"):
        hvp(loss, {"a": jnp.ones(2)}, {"b": jnp.ones(2)})
    with pytest.raises(ValueError, match="shape"):
        hvp(loss, jnp.ones(2), jnp.ones(3))


def test_hessian_tools_are_exported_once_and_the_old_module_name_warns():
    import jaxlab.nn

    assert "hessian" not in jaxlab.nn.__all__
    assert {"hvp", "top_eigenvalue"} <= set(jaxlab.nn.__all__)
    with pytest.warns(DeprecationWarning, match="jaxlab.nn.hessian"):
        module = jaxlab.nn.hessian
    assert module.top_eigenvalue is top_eigenvalue and module.hvp is hvp


def test_bad_tangents_and_losses_are_named():
    loss = lambda p: jnp.sum(p["w"] ** 2)  # noqa: E731
    params = {"w": jnp.ones(2)}
    np.testing.assert_allclose(hvp(loss, params, {"w": jnp.array([1.0, 0.0])})["w"], [2.0, 0.0])
    with pytest.raises(TypeError, match=r"v\['w'\] has dtype int32 where params has float32"):
        hvp(loss, params, {"w": jnp.ones(2, jnp.int32)})
    with pytest.raises(ValueError, match=r"v\['w'\] is a leaf of shape \(3,\)"):
        hvp(loss, params, {"w": jnp.ones(3)})
    with pytest.raises(ValueError, match="loss_fn must return a real floating scalar"):
        hvp(lambda p: p["w"] ** 2, params, params)
    with pytest.raises(TypeError, match="loss_fn must be callable"):
        hvp("loss", params, params)
    with pytest.raises(ValueError, match="shift must be finite"):
        top_eigenvalue(loss, params, rng_key=jax.random.key(0), shift=float("nan"))
    with pytest.raises(TypeError, match="rng_key must be a JAX PRNG key"):
        top_eigenvalue(loss, params, rng_key=None)


# --- activation Hessian, preconditioned Hessian, Adam's preconditioner -------------------------


def _tiny_gpt(placement, layers=2):
    from flax import nnx

    config = GPTConfig(16, 8, layers, 2, max_len=4, multiple_of=8, norm_placement=placement)
    model = SimpleGPT(config, rngs=nnx.Rngs(0))
    tokens = jax.random.randint(jax.random.key(1), (1, 4), 0, 16)
    targets = jax.random.randint(jax.random.key(2), (1, 4), 0, 16)
    return model, tokens, targets


@pytest.mark.parametrize("placement", ["simple", "pre"])
def test_residual_stream_loss_reproduces_the_model(placement):
    model, tokens, targets = _tiny_gpt(placement)
    residuals, loss_at = residual_stream_loss(model, tokens, targets)
    reference = language_model_loss(model, tokens, targets)
    assert residuals.shape == (2, 1, 4, 8)
    for layer in range(2):
        # The same operations in the same order: bit-identical to the model's own loss.
        assert float(loss_at(layer, residuals[layer])) == float(reference)
    # The stream entering block l is block l-1's output (the model's own record).
    rms = model.activation_rms(tokens)
    np.testing.assert_allclose(
        np.sqrt(np.mean(np.square(residuals[1]))), rms["layer0.residual"], rtol=1e-6
    )
    # Replacing the stream changes the loss only through the chosen block onwards.
    moved = loss_at(jnp.asarray(1), residuals[1] * 2.0)
    assert float(moved) != float(reference)


def test_activation_hessian_matches_a_dense_hessian():
    # SimpleGPT's second block (PreNorm runs the same operator on the same code path).
    layer = 1
    model, tokens, targets = _tiny_gpt("simple")
    residuals, loss_at = residual_stream_loss(model, tokens, targets)
    x = residuals[layer]
    n = x.size  # 32 entries: Lanczos with n products is exact
    # The per-token Hessian is the mean loss's times the 4 tokens.
    dense = jax.jit(jax.hessian(lambda z: 4.0 * loss_at(layer, z.reshape(x.shape))))(jnp.ravel(x))
    w = np.linalg.eigvalsh(np.asarray(dense, np.float64))
    dominant = w[np.argmax(np.abs(w))]

    @jax.jit
    def eigen(shift):
        return activation_hessian_top_eigenvalue(
            lambda z: loss_at(layer, z), x, rng_key=jax.random.key(3), num_iters=n, shift=shift
        )

    value, vector = eigen(0.0)
    tol = 1e-4 * np.abs(w).max()
    assert float(value) == pytest.approx(dominant, rel=1e-3, abs=tol)
    assert vector.shape == x.shape
    top, _ = eigen(min(float(value), 0.0))  # shifted past a negative dominant one: the top
    assert float(top) == pytest.approx(w[-1], rel=1e-3, abs=tol)


def test_activation_hessian_per_token_scaling():
    # L(a) = mean_t ½ a_tᵀ diag(1, 5) a_t over 6 tokens: per token the top eigenvalue is 5; the
    # Hessian of the mean loss has 5/6.
    loss = lambda a: jnp.mean(0.5 * (a[:, 0] ** 2 + 5.0 * a[:, 1] ** 2))  # noqa: E731
    a = jnp.ones((6, 2))
    key = jax.random.key(0)
    value, vector = activation_hessian_top_eigenvalue(loss, a, rng_key=key, num_iters=12)
    assert float(value) == pytest.approx(5.0, rel=1e-5)
    # Eigenvalue 5 spans the second feature of every token: the first feature stays 0.
    assert np.allclose(np.asarray(vector[:, 0]), 0.0, atol=1e-4)
    mean_value, _ = activation_hessian_top_eigenvalue(
        loss, a, rng_key=key, num_iters=12, per_token=False
    )
    assert float(mean_value) == pytest.approx(5.0 / 6.0, rel=1e-5)


def _mlp_problem():
    keys = jax.random.split(jax.random.key(7), 4)
    params = {
        "w1": 0.5 * jax.random.normal(keys[0], (3, 4)),
        "w2": 0.5 * jax.random.normal(keys[1], (4, 2)),
    }
    x = jax.random.normal(keys[2], (8, 3))
    y = jax.random.randint(keys[3], (8,), 0, 2)

    def loss(p):
        logits = jnp.tanh(x @ p["w1"]) @ p["w2"]
        return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, y))

    return loss, params


def test_preconditioned_hessian_matches_a_dense_reference():
    loss, params = _mlp_problem()
    flat, unravel = ravel_pytree(params)
    pre = jax.tree.map(
        lambda p: jnp.exp(jax.random.normal(jax.random.key(8), p.shape)), params
    )  # positive diagonal spanning about e^±2
    dense = np.asarray(jax.jit(jax.hessian(lambda z: loss(unravel(z))))(flat), np.float64)
    d = np.asarray(ravel_pytree(pre)[0], np.float64)
    m = dense / np.sqrt(d)[:, None] / np.sqrt(d)[None, :]
    w, q = np.linalg.eigh(m)
    dominant = w[np.argmax(np.abs(w))]
    value, vector = preconditioned_top_eigenvalue(
        loss, params, pre, rng_key=jax.random.key(9), num_iters=flat.size
    )
    assert float(value) == pytest.approx(dominant, rel=1e-3)
    v = np.asarray(ravel_pytree(vector)[0], np.float64)
    assert abs(v @ q[:, np.argmax(np.abs(w))]) == pytest.approx(1.0, abs=1e-3)


def test_adam_preconditioner_reproduces_adams_step():
    # A second path: AdamW's own update equals −η P⁻¹ m (plus decay) with P from the state.
    loss, params = _mlp_problem()
    b1, b2, eps, lr = 0.9, 0.95, 1e-8, 1e-2
    tx = optax.chain(
        optax.clip_by_global_norm(1.0), optax.adamw(lr, b1=b1, b2=b2, eps=eps, weight_decay=0.0)
    )
    state = tx.init(params)
    for _ in range(5):
        updates, state = tx.update(jax.grad(loss)(params), state, params)
        params = optax.apply_updates(params, updates)
    updates, state = tx.update(jax.grad(loss)(params), state, params)
    pre = adam_preconditioner(state, b1=b1, b2=b2, eps=eps)
    adam_state = state[1][0]
    for name in params:
        np.testing.assert_allclose(
            updates[name], -lr * adam_state.mu[name] / pre[name], rtol=1e-5, atol=1e-9
        )
    with pytest.raises(ValueError, match="count 0"):
        adam_preconditioner(tx.init(params), b1=b1, b2=b2)
    with pytest.raises(TypeError, match="ScaleByAdamState"):
        adam_preconditioner(optax.sgd(0.1).init(params))


@pytest.mark.parametrize("b1", [0.0, 0.9])
def test_adam_sharpness_limit_is_the_momentum_stability_edge(b1):
    # EMA heavy ball on the 1-D quadratic ½λx²: m ← β₁m + (1−β₁)λx, x ← x − ηm; bounded
    # just below (2 + 2β₁)/((1 − β₁)η), diverging just above.
    lr = 0.01
    limit = float(adam_sharpness_limit(lr, b1=b1))
    assert limit == pytest.approx((2 + 2 * b1) / ((1 - b1) * lr), rel=1e-6)

    def final(lam):
        x, m = 1.0, 0.0
        for _ in range(3000):
            m = b1 * m + (1 - b1) * lam * x
            x = x - lr * m
        return abs(x)

    assert final(0.98 * limit) < 1.0 < final(1.02 * limit)


def test_simplegpt_hessian_probe_against_the_tools_called_directly():
    """The probe's raw λ_max is top_eigenvalue's (Lanczos), its activation λ is
    activation_hessian_top_eigenvalue's, and its residual RMS is the stream's own."""
    from flax import nnx

    from jaxlab.nn import simplegpt_hessian_probe, simplegpt_optimizer

    model = SimpleGPT(GPTConfig(256, 16, 1, 2, max_len=8, multiple_of=16), rngs=nnx.Rngs(0))
    graphdef, params = nnx.split(model, nnx.Param)
    tokens = jax.random.randint(jax.random.key(1), (2, 8), 0, 256)
    targets = jnp.roll(tokens, -1, axis=1)
    tx = simplegpt_optimizer(1e-3)
    key = jax.random.key(2)
    probe = simplegpt_hessian_probe(graphdef, (tokens, targets), num_iters=4, b1=0.9, b2=0.95)
    ones = jax.tree.map(jnp.ones_like, params)
    _, opt_state = tx.update(ones, tx.init(params), params)  # P needs one Adam update
    record = probe(params, opt_state, key)

    def loss(p):
        return language_model_loss(nnx.merge(graphdef, p), tokens, targets)

    @jax.jit
    def direct(p):
        raw, _ = top_eigenvalue(loss, p, rng_key=key, num_iters=4, method="lanczos")
        residuals, loss_at = residual_stream_loss(nnx.merge(graphdef, p), tokens, targets)
        act, _ = activation_hessian_top_eigenvalue(
            lambda x: loss_at(0, x), residuals[0], rng_key=key, num_iters=4
        )
        return raw, act, jnp.sqrt(jnp.mean(jnp.square(residuals[0])))

    raw, act, rms = direct(params)
    if float(raw) > 0:  # a positive dominant eigenvalue: no shifted re-run in the probe
        assert record["raw"] == pytest.approx(float(raw), rel=1e-3)
    assert record["activation_dominant"][0] == pytest.approx(float(act), rel=1e-3)
    assert record["residual_rms"][0] == pytest.approx(float(rms), rel=1e-5)
    assert len(record["activation"]) == 1 and "layer0.attention.q" in record["sublayer_rms"]
