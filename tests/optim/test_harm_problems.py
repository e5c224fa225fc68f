"""The harm experiment's library programs (jaxlab/optim/_harm_problems.py): arms, probe, chunks."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.flatten_util import ravel_pytree

from jaxlab import optim
from jaxlab.uncertainty import flip_labels, mlp_init


def _data(n=24):
    x = jax.random.normal(jax.random.key(1), (n, 4))
    return x, jnp.arange(n) % 3


def test_base_arm_is_the_plain_optax_step():
    params = mlp_init(jax.random.key(0), (4, 8, 3))
    x, y = _data(6)
    tx = optax.sgd(0.1, momentum=0.9)
    step, init = optim.mlp_harm_step("base", tx, params)
    new, _, rate = step(params, init(params), x, y)

    def loss(p):
        logits = optim.mlp_logits_and_features(p, x)[0]
        return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, y))

    updates, _ = tx.update(jax.grad(loss)(params), tx.init(params), params)
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7),
        new,
        optax.apply_updates(params, updates),
    )
    assert 0.0 <= float(rate) <= 1.0
    with pytest.raises(ValueError, match="arm must be one of"):
        optim.mlp_harm_step("proxy", tx, params)


def test_probe_full_qp_leaves_no_first_order_harm_and_base_matches_first_order_harm():
    params = mlp_init(jax.random.key(2), (4, 8, 3))
    x, y = _data(8)
    tx = optax.sgd(0.1)
    out = jax.jit(
        lambda p: optim.mlp_harm_probe(
            tx, p, tx.init(p), x, y, num_iterations=50, full_qp_iterations=300, probe_ridges=(0.0,)
        )
    )(params)
    assert float(out["full_qp"]) <= 1 / 8  # the exact QP: at most solver slack on one sample
    # base: the mean gradient's direction, measured independently from per-sample gradients.
    grads = jax.vmap(
        jax.grad(
            lambda p, xi, yi: optax.softmax_cross_entropy_with_integer_labels(
                optim.mlp_logits_and_features(p, xi[None])[0], yi[None]
            )[0]
        ),
        in_axes=(None, 0, 0),
    )(params, x, y)
    jac = jax.vmap(lambda g: ravel_pytree(g)[0])(grads)
    rate, _ = optim.first_order_harm(jac, jnp.mean(jac, 0), tol=1e-4)
    assert float(out["base"]) == pytest.approx(float(rate))
    assert "ridge_0_mass" in out


def test_train_in_chunks_equals_the_chunk_programs_called_by_hand():
    x, y = _data()
    labels = jnp.stack([y, flip_labels(jax.random.key(5), y, 0.5, 3)])
    programs = optim.mlp_harm_training(
        "reweight",
        optax.sgd,
        lambda key: mlp_init(key, (4, 8, 3)),
        x,
        batch_size=6,
        chunk_steps=2,
        num_iterations=5,
    )
    keys, lrs = jax.random.split(jax.random.key(3), 2), jnp.array([0.1, 0.05])
    chunk_keys = [jax.vmap(lambda k, c=c: jax.random.fold_in(k, c))(keys) for c in range(3)]
    params, _, rates, probes = programs.train(keys, chunk_keys, lrs, labels, probe=True)
    p, s = programs.init(keys, lrs)
    by_hand = []
    for c in range(2):
        p, s, r = programs.chunk(p, s, chunk_keys[c], lrs, labels)
        by_hand.append(r)
    np.testing.assert_array_equal(rates, np.concatenate(by_hand, 1))
    jax.tree.map(np.testing.assert_array_equal, params, p)
    assert probes["base"].shape == (2, 3)
    accuracy = jax.vmap(optim.mlp_accuracy, in_axes=(0, None, None))(params, x, y)
    assert accuracy.shape == (2,)


def test_flip_labels_always_changes_a_flipped_label():
    y = jnp.arange(50) % 5
    np.testing.assert_array_equal(flip_labels(jax.random.key(0), y, 0.0, 5), y)
    assert bool(jnp.all(flip_labels(jax.random.key(0), y, 1.0, 5) != y))
    with pytest.raises(ValueError, match="rate"):
        flip_labels(jax.random.key(0), y, 1.5, 5)
