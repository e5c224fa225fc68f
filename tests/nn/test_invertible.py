"""Invertible networks of Hom-PGD⁺: exact inverse, exact log-determinant, training loss."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.flatten_util import ravel_pytree

from jaxlab.nn import (
    ActNormLU,
    ConditionalMADE,
    DeepSetsEncoder,
    InvertibleNet,
    MLPEncoder,
    QuadMixerEncoder,
    homeomorphism_loss,
    invertibility_error,
    sample_latents,
    train_homeomorphism,
)


@jax.jit
def _perturb_tree(params, key, scale):
    flat, unravel = ravel_pytree(params)  # one random draw: a small program to compile
    return unravel(flat + scale * jax.random.normal(key, flat.shape))


def _perturbed(module, scale: float, seed: int):
    """A copy of ``module`` with every parameter perturbed (a fresh net is nearly linear)."""
    graphdef, params, rest = nnx.split(module, nnx.Param, ...)
    return nnx.merge(graphdef, _perturb_tree(params, jax.random.key(seed), scale), rest)


def _random_conditions(key, batch, n=2, m=3):
    return jax.random.normal(key, (batch, m, n * n + n + 1))


@functools.cache
def _nets():
    """Non-trivial networks shared by the tests (unconditional n = 2, 3, 5; conditional n = 2)."""
    nets = {}
    for n in (2, 3, 5):
        net = InvertibleNet(n, hidden=16, bounds=(-3.0, 2.0), rngs=nnx.Rngs(n))
        net.initialize_from_batch(sample_latents(jax.random.key(n), 128, n))
        nets[n] = _perturbed(net, 0.1, seed=n)
    encoder = QuadMixerEncoder(2, 8, hidden=16, rngs=nnx.Rngs(10))
    net = InvertibleNet(2, hidden=16, condition_encoder=encoder, rngs=nnx.Rngs(11))
    net.initialize_from_batch(
        sample_latents(jax.random.key(0), 128, 2), _random_conditions(jax.random.key(1), 128)
    )
    nets["conditional"] = _perturbed(net, 0.1, seed=12)
    return nets


@functools.cache
def _checks(name):
    """Jitted (inverse error, log-det error vs jacfwd) for one shared network."""
    net = _nets()[name]
    graphdef, state = nnx.split(net)

    @jax.jit
    def errors(z, c):
        model = nnx.merge(graphdef, state)
        x, log_det, _ = model(z, c)
        inverse_error = jnp.max(jnp.abs(model.inverse(x, c) - z))
        jac = jax.vmap(jax.jacfwd(lambda zz, cc: model(zz, cc)[0]))(z, c)
        sign, reference = jnp.linalg.slogdet(jac)
        return inverse_error, jnp.max(jnp.abs(reference - log_det)), jnp.min(sign * sign)

    return errors


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), name=st.sampled_from([2, 3, 5, "conditional"]))
def test_inverse_and_log_det_match_float32(seed, name):
    n = 2 if name == "conditional" else name
    key_z, key_c = jax.random.split(jax.random.key(seed))
    z = 1.2 * jax.random.uniform(key_z, (16, n), minval=-1.0, maxval=1.0)
    c = _random_conditions(key_c, 16) if name == "conditional" else None
    inverse_error, log_det_error, min_sign_squared = _checks(name)(z, c)
    assert z.dtype == jnp.float32
    assert float(inverse_error) <= 1e-4
    assert float(log_det_error) <= 1e-4
    assert float(min_sign_squared) == 1.0  # the Jacobian is never singular


@pytest.mark.parametrize("film, modulated", [("both", 2), ("first", 1)])
def test_made_is_autoregressive_and_conditional(film, modulated):
    made = ConditionalMADE(4, 12, embed_features=3, film=film, rngs=nnx.Rngs(0))
    # FiLM gives (scale, shift) for each modulated hidden layer (the authors': the first only).
    assert made.film.kernel.shape == (3, 2 * modulated * 12)
    made = _perturbed(made, 0.3, seed=1)
    graphdef, state = nnx.split(made)
    v = jax.random.normal(jax.random.key(2), (4,))
    e = jax.random.normal(jax.random.key(3), (3,))

    @jax.jit
    def jacobians(v, e):
        u = lambda x, emb: nnx.merge(graphdef, state)(x[None], emb[None])[0][0]  # noqa: E731
        return jax.jacfwd(u, argnums=(0, 1))(v, e)

    jac, de = (np.asarray(j) for j in jacobians(v, e))
    # u_i depends on v_{<=i} only, with du_i/dv_i = exp(-alpha_i) > 0.
    assert np.allclose(np.triu(jac, 1), 0.0)
    assert np.all(np.diag(jac) > 0)
    assert np.any(np.abs(np.tril(jac, -1)) > 1e-4)  # and it does depend on v_{<i}
    # Every coordinate, the first included, reacts to the condition.
    assert np.all(np.max(np.abs(de), axis=1) > 1e-6)


def test_made_unconditional_first_coordinate_is_affine_and_clamp_bounds_scales():
    made = _perturbed(ConditionalMADE(3, 8, rngs=nnx.Rngs(0)), 2.0, seed=4)
    v = jax.random.normal(jax.random.key(5), (64, 3))
    u, log_det, max_log_scale = made(v)
    # u_1 = (v_1 - mu_1) exp(-alpha_1) with constant (mu_1, alpha_1): exactly affine in v_1.
    slope = (u[1:, 0] - u[:-1, 0]) / (v[1:, 0] - v[:-1, 0])
    assert np.allclose(slope, slope[0], rtol=1e-4)
    clamped = ConditionalMADE(3, 8, clamp_log_scale=True, rngs=nnx.Rngs(0))
    clamped = _perturbed(clamped, 2.0, seed=4)
    _, log_det_c, scale_c = clamped(v)
    assert float(jnp.max(jnp.abs(log_det))) > 3 * math.log(2.0)  # unclamped: large scales
    assert float(jnp.max(jnp.abs(log_det_c))) <= 3 * math.log(2.0) + 1e-5
    assert float(jnp.max(jnp.abs(scale_c))) <= math.log(2.0) + 1e-6
    assert np.allclose(clamped.inverse(clamped(v)[0]), v, atol=1e-4)


def test_actnorm_lu_data_init_whitens_and_starts_orthogonal():
    layer = ActNormLU(4, rngs=nnx.Rngs(0))
    scale = jnp.array([0.5, 2.0, 3.0, 10.0])
    v = 1.5 + scale[None, :] * jax.random.normal(jax.random.key(1), (4096, 4))
    layer.initialize_from_batch(v)
    assert layer.initialized
    y, log_det, _ = layer(v)
    # ActNorm standardises each coordinate, and P L U is orthogonal at init: y has zero mean
    # and a covariance with the eigenvalues of v's correlation matrix (near 1, sample noise).
    assert np.allclose(jnp.mean(y, 0), 0.0, atol=1e-4)
    eig_y = np.linalg.eigvalsh(np.cov(np.asarray(y, np.float64).T, ddof=0))
    eig_v = np.linalg.eigvalsh(np.corrcoef(np.asarray(v, np.float64).T))
    assert np.allclose(eig_y, eig_v, atol=1e-3)
    reference = jnp.linalg.slogdet(jax.jacfwd(lambda x: layer(x)[0])(v[0]))[1]
    assert float(log_det[0]) == pytest.approx(float(reference), abs=1e-4)
    assert float(log_det[0]) == pytest.approx(-float(jnp.sum(jnp.log(jnp.std(v, 0)))), abs=1e-3)


def test_encoders_shapes_and_invariances():
    key = jax.random.key(0)
    apply = nnx.jit(lambda encoder, c: encoder(c))  # one compiled call per encoder and shape
    deepsets = DeepSetsEncoder(3, 5, hidden=8, rngs=nnx.Rngs(0))
    c = jax.random.normal(key, (2, 6, 3))
    both = apply(deepsets, jnp.concatenate([c, c[:, ::-1]]))
    assert both.shape == (4, 5)
    assert np.allclose(both[:2], both[2:], atol=1e-5)  # the set order does not matter
    mixer = QuadMixerEncoder(3, 4, hidden=8, rngs=nnx.Rngs(1))
    c = jax.random.normal(key, (2, 5, 13))
    both = apply(mixer, jnp.concatenate([c, c[:, jnp.array([3, 1, 4, 0, 2])]]))
    assert both.shape == (4, 4)
    assert np.allclose(both[:2], both[2:], atol=1e-5)  # nor does the constraint order
    assert not np.allclose(both[0], both[1])
    mlp = MLPEncoder((5, 13), 4, hidden=8, rngs=nnx.Rngs(2))
    assert apply(mlp, c).shape == (2, 4)


def test_shared_condition_broadcasts_over_latents():
    net = _nets()["conditional"]
    forward = nnx.jit(lambda net, z, c: net(z, c)[0])
    z = sample_latents(jax.random.key(0), 8, 2)
    c = _random_conditions(jax.random.key(1), 1)[0]
    x_shared = forward(net, z, c)
    x_each = forward(net, z, jnp.broadcast_to(c, (8,) + c.shape))
    assert np.allclose(x_shared, x_each, atol=1e-6)


def test_sample_latents_uniform_in_disk_and_cube():
    z = sample_latents(jax.random.key(0), 20_000, 2)
    r2 = jnp.sum(z**2, axis=1)
    assert float(jnp.max(r2)) <= 1.0
    # Uniform in the disk: P(r^2 <= t) = t, so E r^2 = 1/2 and a quarter lies within r = 1/2.
    assert float(jnp.mean(r2)) == pytest.approx(0.5, abs=0.01)
    assert float(jnp.mean(r2 <= 0.25)) == pytest.approx(0.25, abs=0.01)
    cube = sample_latents(jax.random.key(1), 20_000, 3)
    assert float(jnp.max(jnp.abs(cube))) <= 1.0
    assert float(jnp.mean(cube**2)) == pytest.approx(1.0 / 3.0, abs=0.01)


def test_homeomorphism_loss_terms_match_direct_computation():
    net = _nets()[2]
    z = sample_latents(jax.random.key(3), 64, 2)

    def constraint(x):
        return jnp.stack([jnp.sum(x**2) - 1.0, x[0] - 0.5])

    loss, aux = homeomorphism_loss(
        net, z, None, constraint, penalty_weight=3.0, distortion_weight=0.5, lipschitz_weight=0.2
    )
    graphdef, state = nnx.split(net)

    @jax.jit
    def points_and_jacobians(z):
        one = lambda v: nnx.merge(graphdef, state)(v[None])[0][0]  # noqa: E731
        return jax.vmap(one)(z), jax.vmap(jax.jacfwd(one))(z)

    x, jac = points_and_jacobians(z)
    volume = -float(np.mean(np.linalg.slogdet(np.asarray(jac, np.float64))[1])) / 2
    g = np.stack([np.sum(np.asarray(x) ** 2, 1) - 1.0, np.asarray(x[:, 0]) - 0.5], 1)
    penalty = float(np.mean(np.sum(np.maximum(g, 0.0), 1)))
    distortion = np.sum(np.asarray(net(z)[2]), 1)
    assert float(aux["volume"]) == pytest.approx(volume, abs=1e-4)
    assert float(aux["penalty"]) == pytest.approx(penalty, rel=1e-4)
    assert float(aux["violation_fraction"]) == pytest.approx(np.mean(g.max(1) > 1e-5))
    expected = volume + 3.0 * penalty + 0.5 * distortion.mean() + 0.2 * distortion.max()
    assert float(loss) == pytest.approx(expected, rel=1e-4, abs=1e-4)


def test_training_fills_a_disk_without_leaving_it():
    """Trained on K = disk of radius 2 (area 4π), Φ(𝔹) covers most of K and stays inside."""
    net = InvertibleNet(2, num_layers=2, hidden=16, rngs=nnx.Rngs(0))
    latents = sample_latents(jax.random.key(0), 4096, 2)

    def disk(x):
        return jnp.sum(x**2, keepdims=True) - 4.0

    out = train_homeomorphism(
        net,
        disk,
        latents,
        rng_key=jax.random.key(1),
        num_steps=600,
        batch_size=128,
        learning_rate=1e-2,
        decay_every=100,
        chunk_size=300,
    )
    model = out.model
    z = sample_latents(jax.random.key(2), 4096, 2)
    x, log_det, _ = model(z)
    area = math.pi * float(jnp.mean(jnp.exp(log_det)))  # ∫_𝔹 |det J| dz = area of Φ(𝔹)
    outside = float(jnp.mean(jnp.sum(x**2, 1) > 4.0 + 1e-3))
    assert 0.7 * 4 * math.pi <= area <= 1.05 * 4 * math.pi, area
    assert outside <= 0.05, outside
    assert out.history["loss"].shape == (600,)
    assert np.mean(out.history["loss"][-50:]) < np.mean(out.history["loss"][:50])
    # The EMA (Polyak) weights are not the last iterate's.
    ema = nnx.state(model, nnx.Param)
    last = nnx.state(out.last_model, nnx.Param)
    assert any(
        not np.allclose(a, b)
        for a, b in zip(jax.tree.leaves(ema), jax.tree.leaves(last), strict=True)
    )


def test_bad_input_raises_naming_the_argument():
    rngs = nnx.Rngs(0)
    with pytest.raises(ValueError, match="num_features"):
        InvertibleNet(0, rngs=rngs)
    with pytest.raises(ValueError, match="bounds"):
        InvertibleNet(2, bounds=(1.0, 1.0), rngs=rngs)
    with pytest.raises(ValueError, match="hidden"):
        ConditionalMADE(2, 0, rngs=rngs)
    with pytest.raises(ValueError, match="embed_features"):
        ConditionalMADE(2, 4, -1, rngs=rngs)
    net = _nets()[2]
    with pytest.raises(ValueError, match="z must have last axis of size 2"):
        net(jnp.zeros((4, 3)))
    with pytest.raises(TypeError, match="z must be a floating"):
        net(jnp.zeros((4, 2), jnp.int32))
    with pytest.raises(ValueError, match="condition must be None"):
        net(jnp.zeros((4, 2)), jnp.zeros((4, 3, 7)))
    with pytest.raises(ValueError, match="condition is required"):
        _nets()["conditional"](jnp.zeros((4, 2)))
    with pytest.raises(ValueError, match="condition must have shape"):
        _nets()["conditional"](jnp.zeros((4, 2)), jnp.zeros((4, 3, 5)))
    with pytest.raises(ValueError, match="at least 2 samples"):
        ActNormLU(2, rngs=rngs).initialize_from_batch(jnp.zeros((1, 2)))
    with pytest.raises(ValueError, match="latents must have shape"):
        homeomorphism_loss(net, jnp.zeros((2,)), None, lambda x: x)
    disk = lambda x: jnp.sum(x**2, keepdims=True) - 1.0  # noqa: E731
    latents = jnp.zeros((8, 2))
    with pytest.raises(ValueError, match="sample_conditions"):
        train_homeomorphism(
            net,
            disk,
            latents,
            rng_key=jax.random.key(0),
            num_steps=1,
            sample_conditions=lambda k, b: jnp.zeros((b, 3)),
        )
    with pytest.raises(ValueError, match="learning_rate"):
        train_homeomorphism(
            net, disk, latents, rng_key=jax.random.key(0), num_steps=1, learning_rate=0.0
        )
    with pytest.raises(ValueError, match="latents must have shape"):
        train_homeomorphism(net, disk, jnp.zeros((8, 3)), rng_key=jax.random.key(0), num_steps=1)
    with pytest.raises(ValueError, match="num_steps"):
        train_homeomorphism(net, disk, latents, rng_key=jax.random.key(0), num_steps=0)


def test_malformed_input_is_named_before_any_matmul():
    rngs = nnx.Rngs(0)
    net = InvertibleNet(2, num_layers=1, hidden=4, rngs=rngs)
    with pytest.raises(TypeError, match="z must be a floating array"):
        net("z")
    with pytest.raises(ValueError, match=r"bounds \(lb\) must be finite"):
        InvertibleNet(2, bounds=(float("nan"), 1.0), rngs=rngs)
    with pytest.raises(ValueError, match=r"bounds \(ub\) must be a scalar or have shape \(2,\)"):
        InvertibleNet(2, bounds=(0.0, np.ones(3)), rngs=rngs)
    made = ConditionalMADE(2, 4, 3, rngs=rngs)
    with pytest.raises(ValueError, match="embedding must have last axis of size 3"):
        made(jnp.zeros((1, 2)), jnp.zeros((1, 2)))  # was a dot_general error inside FiLM
    with pytest.raises(ValueError, match="embedding must be None"):
        ConditionalMADE(2, 4, rngs=rngs)(jnp.zeros((1, 2)), jnp.zeros((1, 3)))  # was ignored
    with pytest.raises(TypeError, match="v must be a floating array"):
        ActNormLU(2, rngs=rngs)(jnp.zeros((3, 2), jnp.int32))
    with pytest.raises(ValueError, match="v must be finite"):
        ActNormLU(2, rngs=rngs).initialize_from_batch(jnp.array([[0.0, 1.0], [jnp.nan, 2.0]]))
    with pytest.raises(TypeError, match="condition_shape"):
        MLPEncoder(("a",), 4, rngs=rngs)
    with pytest.raises(ValueError, match="penalty_weight must be finite and >= 0"):
        homeomorphism_loss(net, jnp.zeros((2, 2)), None, lambda x: x, penalty_weight=-1.0)
    with pytest.raises(TypeError, match="rng_key must be a JAX PRNG key"):
        sample_latents(None, 4, 2)
    common = dict(rng_key=jax.random.key(0), num_steps=1)
    disk = lambda x: jnp.sum(x**2, keepdims=True) - 1.0  # noqa: E731
    with pytest.raises(TypeError, match="learning_rate must be a real number"):
        train_homeomorphism(net, disk, jnp.zeros((4, 2)), learning_rate="1e-3", **common)
    with pytest.raises(ValueError, match=r"ema_decay must be finite and in \[0.0, 1.0\)"):
        train_homeomorphism(net, disk, jnp.zeros((4, 2)), ema_decay=1.0, **common)
    with pytest.raises(ValueError, match="latents must be finite"):
        train_homeomorphism(net, disk, jnp.full((4, 2), jnp.nan), **common)


def test_snapshots_do_not_change_the_trajectory():
    """Cutting the jitted chunks at snapshot steps leaves the run unchanged; the snapshot at the
    last step is the returned EMA model and an earlier one differs from it."""
    net = InvertibleNet(2, num_layers=1, hidden=4, rngs=nnx.Rngs(0))
    latents = sample_latents(jax.random.key(0), 256, 2)
    disk = lambda x: jnp.sum(x**2, keepdims=True) - 4.0  # noqa: E731
    common = dict(rng_key=jax.random.key(1), num_steps=30, batch_size=16, chunk_size=10)
    plain = train_homeomorphism(net, disk, latents, **common)
    cut = train_homeomorphism(net, disk, latents, snapshot_steps=(15, 30), **common)
    np.testing.assert_allclose(plain.history["loss"], cut.history["loss"], rtol=1e-6)
    assert sorted(cut.snapshots) == [15, 30] and plain.snapshots == {}
    z = latents[:32]
    np.testing.assert_allclose(cut.snapshots[30](z)[0], plain.model(z)[0], rtol=1e-5)
    assert not np.allclose(cut.snapshots[15](z)[0], plain.model(z)[0])
    with pytest.raises(ValueError, match="snapshot_steps"):
        train_homeomorphism(net, disk, latents, snapshot_steps=(31,), **common)


def test_invertibility_error_is_the_round_trip_error():
    """Equals the round trip done one latent at a time (a second path: unbatched calls), and is
    at float32 rounding for a fresh network."""
    from jaxlab.solvers import qcqp_condition, qcqp_homeomorphism_net, sample_qcqp

    net = qcqp_homeomorphism_net(2, encoder_hidden=4, hidden=4, rngs=nnx.Rngs(0))
    z = 3.0 * sample_latents(jax.random.key(0), 4, 2)
    condition = qcqp_condition(sample_qcqp(jax.random.key(1), 2, 3))
    err = invertibility_error(net, z, condition)
    # compiled once for the unbatched shape (eagerly, each call would compile the inverse's loop)
    round_trip = nnx.jit(
        lambda net, zi: jnp.max(jnp.abs(net.inverse(net(zi, condition)[0], condition) - zi))
    )
    one_by_one = [float(round_trip(net, zi)) for zi in z]
    assert err.shape == (4,) and float(err.max()) < 1e-4
    np.testing.assert_allclose(err, one_by_one, atol=1e-6)
    with pytest.raises(ValueError, match="latents"):
        invertibility_error(net, jnp.zeros((4, 3)), condition)
