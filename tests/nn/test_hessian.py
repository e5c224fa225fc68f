"""Hessian-vector products and the dominant eigenvalue on quadratics with a known spectrum."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.nn import hessian, hvp, top_eigenvalue


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


def test_public_submodule():
    assert hessian.top_eigenvalue is top_eigenvalue and hessian.hvp is hvp


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
