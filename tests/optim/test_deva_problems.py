"""DeVA's problems (jaxlab/optim/_deva_problems.py) against closed forms and second paths."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxlab import optim


def test_toy_muon_peers_take_the_authors_and_optax_scales():
    """The gating Muon steps lr·√max(m, n)·msign(g) (3 on 9×9), optax's default lr·msign(g)."""
    g = jax.random.normal(jax.random.key(0), (9, 9))
    x = jnp.zeros((9, 9))
    # optax's Newton-Schulz starts from the Frobenius normalisation (no first-step rescale).
    msign = optim.newton_schulz_msign(g, first_step_rescale=False)
    for method, scale in (("muon", 3.0), ("muon_optax", 1.0)):
        tx = optim.quadratic_toy_optimizer(method, 0.1)
        state = tx.init(x)
        for _ in range(2):  # momentum 0: the second step is the same function of its gradient
            updates, state = tx.update(g, state, x)
            np.testing.assert_allclose(updates, -0.1 * scale * msign, rtol=2e-3, atol=2e-5)


def test_full_batch_gd_curve_matches_the_closed_form():
    """GD at a constant lr: X_t = (I − ηH)^t X_0, so f_t = ½ tr(X_tᵀ H X_t) in closed form."""
    key, eta, steps = jax.random.key(3), 1e-3, 6
    eigenvalues = optim.QUADRATIC_TOY_HETEROGENEOUS[:2]
    curve = optim.quadratic_toy_curve(
        key, eigenvalues, optax.sgd(eta), steps=steps, full_batch=True
    )
    h_key, x_key, _ = jax.random.split(key, 3)
    h = np.asarray(optim.quadratic_toy_hessian(h_key, eigenvalues), np.float64)
    x = np.asarray(jax.random.normal(x_key, h.shape, jnp.float32), np.float64)
    expected = []
    for _ in range(steps + 1):
        expected.append(0.5 * np.trace(x.T @ h @ x))
        x = x - eta * h @ x
    np.testing.assert_allclose(curve, expected, rtol=1e-4)


def test_sweep_equals_the_curve_of_each_member_and_problems_are_the_papers():
    names, eigenvalues, squared = optim.quadratic_toy_problems(squared=True)
    assert names == [
        "heterogeneous_frobenius",
        "heterogeneous_squared",
        "homogeneous_frobenius",
        "homogeneous_squared",
    ]
    np.testing.assert_array_equal(eigenvalues[2], optim.QUADRATIC_TOY_HOMOGENEOUS)
    keys = jax.random.split(jax.random.key(0), 2)
    lrs = jnp.asarray([0.1, 0.3])
    curves = optim.quadratic_toy_sweep(
        "deva_vector", keys, eigenvalues[:2], squared[:2], lrs, steps=8
    )
    assert curves.shape == (2, 2, 2, 9)
    schedule = optim.quadratic_toy_schedule(0.3, 8)
    tx = optim.quadratic_toy_optimizer("deva_vector", schedule)
    one = optim.quadratic_toy_curve(keys[1], eigenvalues[1], tx, steps=8, squared=1.0)
    # vmapped and single runs differ by float32 rounding only (batched matmuls)
    np.testing.assert_allclose(curves[1, 1, 1], one, rtol=1e-3)


def test_lm_optimizers_route_by_name_and_reject_unknown_ones():
    params = {"block": {"kernel": jnp.ones((4, 4))}, "bias": jnp.ones(4)}
    grads = jax.tree.map(lambda p: 0.5 * p, params)
    adamw = optim.deva_lm_optimizer("adamw", 1e-2, weight_decay=0.0)
    reference = optax.adamw(1e-2, b1=0.9, b2=0.95, weight_decay=0.0)
    got, _ = adamw.update(grads, adamw.init(params), params)
    want, _ = reference.update(grads, reference.init(params), params)
    jax.tree.map(np.testing.assert_allclose, got, want)
    for method in ("muon", "deva"):
        tx = optim.deva_lm_optimizer(method, 1e-2)
        updates, _ = tx.update(grads, tx.init(params), params)
        assert jax.tree.structure(updates) == jax.tree.structure(params)
    with pytest.raises(ValueError, match="method must be one of"):
        optim.deva_lm_optimizer("sgd", 1e-2)
    with pytest.raises(ValueError, match="method must be one of"):
        optim.quadratic_toy_optimizer("lion", 0.1)
