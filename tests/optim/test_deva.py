"""DeVA (jaxlab/optim/_deva.py, _newton_schulz.py) against closed forms and a numpy re-derivation.

The battery (jit, inject_hyperparams, MultiSteps, dtypes, shard_map, quadratic) runs on the
``deva_*`` cases of tests/batteries.py.
"""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from jaxlab import nn as jnn
from jaxlab import optim


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    """eigh/QR run in OpenBLAS, whose spinning threads are 100x slower on a loaded CPU."""
    from jaxlab._src.threads import single_threaded_blas

    with single_threaded_blas():
        yield


# ---------------------------------------------------------------------------------------------
# Independent numpy re-derivations (float64) of the note's update rules.

_A, _B, _C = 3.4445, -4.7750, 2.0315


def _np_msign(m, steps=5, rescale=True):
    x = np.asarray(m, np.float64)
    transposed = x.shape[0] > x.shape[1]
    x = x.T if transposed else x
    x = x / np.sqrt(np.sum(x * x) + 1e-20)
    for i in range(steps):
        a = x @ x.T
        a2 = a @ a
        if i == 0 and rescale:
            s = np.linalg.norm(a2) ** 0.25
            x, a, a2 = x / s, a / s**2, a2 / s**4
        x = _A * x + (_B * a + _C * a2) @ x
    return x.T if transposed else x


def _np_deva_matrix(grads, b1, b2, eps, freq, rms=0.2, max_dim=10_000):
    """The note's DeVA-S∞ (Nesterov, bias correction, SOAP bookkeeping) in float64 numpy."""
    n, m = grads[0].shape
    rot_l, rot_r = n <= max_dim, m <= max_dim
    eye_l, eye_r = np.eye(n), np.eye(m)
    mu, nu = np.zeros((n, m)), np.zeros((n, m))
    out = []
    for call, g in enumerate(grads):
        if call == 0:
            left, right = (1 - b2) * g @ g.T, (1 - b2) * g.T @ g
            ql = np.linalg.eigh(left)[1][:, ::-1] if rot_l else eye_l
            qr = np.linalg.eigh(right)[1][:, ::-1] if rot_r else eye_r
            out.append(np.zeros_like(g))
            continue
        t = call
        gt = ql.T @ g @ qr
        mu = b1 * mu + (1 - b1) * gt
        r, c = np.linalg.norm(mu, axis=1), np.linalg.norm(mu, axis=0)
        nu = b2 * nu + (1 - b2) * np.outer(r, c)
        o = _np_msign(gt + b1 * (mu - gt))
        gamma = np.sqrt(np.outer(r, c)) / np.sqrt(nu + eps)
        u = rms * np.sqrt(max(n, m)) * gamma * o * np.sqrt(1 - b2**t) / (1 - b1**t)
        out.append(ql @ u @ qr.T)
        mu_raw = ql @ mu @ qr.T
        left, right = b2 * left + (1 - b2) * g @ g.T, b2 * right + (1 - b2) * g.T @ g
        if t % freq == 0:
            if rot_l:
                order = np.argsort(-np.diag(ql.T @ left @ ql), kind="stable")
                nu = nu[order, :]
                ql = np.linalg.qr(left @ ql[:, order])[0]
            if rot_r:
                order = np.argsort(-np.diag(qr.T @ right @ qr), kind="stable")
                nu = nu[:, order]
                qr = np.linalg.qr(right @ qr[:, order])[0]
        mu = ql.T @ mu_raw @ qr
    return out


def _np_soap(grads, b1, b2, eps, freq):
    """SOAP (Adam in the eigenbasis, the same bookkeeping as DeVA-S∞) in float64 numpy."""
    n, m = grads[0].shape
    mu, nu = np.zeros((n, m)), np.zeros((n, m))
    out = []
    for call, g in enumerate(grads):
        if call == 0:
            left, right = (1 - b2) * g @ g.T, (1 - b2) * g.T @ g
            ql, qr = np.linalg.eigh(left)[1][:, ::-1], np.linalg.eigh(right)[1][:, ::-1]
            out.append(np.zeros_like(g))
            continue
        gt = ql.T @ g @ qr
        mu = b1 * mu + (1 - b1) * gt
        nu = b2 * nu + (1 - b2) * gt * gt
        u = mu / (np.sqrt(nu) + eps) * np.sqrt(1 - b2**call) / (1 - b1**call)
        out.append(ql @ u @ qr.T)
        mu_raw = ql @ mu @ qr.T
        left, right = b2 * left + (1 - b2) * g @ g.T, b2 * right + (1 - b2) * g.T @ g
        if call % freq == 0:
            order = np.argsort(-np.diag(ql.T @ left @ ql), kind="stable")
            nu = nu[order, :]
            ql = np.linalg.qr(left @ ql[:, order])[0]
            order = np.argsort(-np.diag(qr.T @ right @ qr), kind="stable")
            nu = nu[:, order]
            qr = np.linalg.qr(right @ qr[:, order])[0]
        mu = ql.T @ mu_raw @ qr
    return out


def _run(tx, grads, params=None):
    params = jnp.zeros_like(grads[0]) if params is None else params
    state = tx.init(params)
    out = []
    for g in grads:
        u, state = jax.jit(tx.update)(g, state, params)
        out.append(np.asarray(u, np.float64))
    return out


# ---------------------------------------------------------------------------------------------
# Vector form.


@pytest.mark.parametrize(
    ("b2", "expected"),
    [
        (0.99, [9.5346, 8.7640, 7.8237, 7.0632, 6.4556]),
        (0.999, [22.3607, 25.3694, 23.8155, 21.8539, 20.0998]),
    ],
)
def test_vector_constant_gradient_matches_note_check_1(b2, expected):
    steps = _run(optim.deva_vector(1.0, b1=0.9, b2=b2), [jnp.ones(3)] * 5)
    np.testing.assert_allclose([-s[0] for s in steps], expected, atol=1e-3)


def test_vector_step_is_lr_m_over_root_v_plus_eps():
    grads = [jax.random.normal(jax.random.key(i), (6,)) for i in range(6)]
    steps = _run(optim.deva_vector(0.3, b1=0.8, b2=0.95), grads)
    m = v = np.zeros(6)
    for g, step in zip(grads, steps, strict=True):
        m = 0.8 * m + 0.2 * np.asarray(g, np.float64)
        v = 0.95 * v + 0.05 * m * m  # the EMA of m², not of g²
        np.testing.assert_allclose(step, -0.3 * m / np.sqrt(v + 1e-5), rtol=1e-4, atol=1e-6)


def test_vector_nesterov_sign_uses_the_lookahead_direction():
    # m = 0.1·g1 > 0 after step 1; g2 = -1 flips the Nesterov direction (0.1 - 0.9·0.1·... < 0)
    # while m stays positive: the magnitude Γ still uses m.
    tx = optim.scale_by_deva_vector(0.9, 0.99, nesterov=True)
    state = tx.init(jnp.zeros(1))
    _, state = tx.update(jnp.ones(1), state)
    u, _ = tx.update(jnp.full(1, -0.5), state)
    m = 0.9 * 0.1 - 0.1 * 0.5
    v = 0.99 * 0.01 * 0.1**2 + 0.01 * m**2
    lookahead = 0.1 * -0.5 + 0.9 * m
    np.testing.assert_allclose(u, np.sign(lookahead) * abs(m) / np.sqrt(v + 1e-5), rtol=1e-5)


def test_vector_without_momentum_is_rmsprop():
    """β₁ = 0: m = g and v = EMA(g²), i.e. RMSProp with ε inside the root (optax.scale_by_rms)."""
    grads = [jax.random.normal(jax.random.key(i), (5,)) for i in range(5)]
    ours = _run(optim.scale_by_deva_vector(0.0, 0.9, 1e-5), grads)
    rms = _run(
        optax.scale_by_rms(decay=0.9, eps=1e-5, eps_in_sqrt=True, bias_correction=False), grads
    )
    np.testing.assert_allclose(ours, rms, rtol=1e-5)


def test_vector_with_b2_zero_is_signum():
    """β₂ = 0: v = m², so Γ = |m|/√(m² + ε) → 1 and the step is sign(EMA of g) (Signum)."""
    grads = [jax.random.normal(jax.random.key(i), (5,)) for i in range(5)]
    ours = _run(optim.scale_by_deva_vector(0.9, 0.0, 1e-12), grads)
    signum = _run(optax.chain(optax.ema(0.9, debias=False), optax.scale_by_sign()), grads)
    np.testing.assert_allclose(ours, signum, atol=1e-4)


# ---------------------------------------------------------------------------------------------
# Newton–Schulz.


@pytest.mark.parametrize("shape", [(64, 16), (16, 64), (256, 64)])
def test_msign_singular_values_and_singular_vectors(shape):
    m = np.asarray(jax.random.normal(jax.random.key(0), shape), np.float64)
    o = np.asarray(optim.newton_schulz_msign(jnp.asarray(m, jnp.float32)), np.float64)
    u, _, vt = np.linalg.svd(m, full_matrices=False)
    core = u.T @ o @ vt.T  # diagonal iff msign kept the singular vectors of M
    sv = np.diag(core)
    assert np.all((sv > 0.68) & (sv < 1.21)), sv  # note check 3: [0.682, 1.134] measured
    np.testing.assert_allclose(core - np.diag(sv), 0.0, atol=2e-3)
    np.testing.assert_allclose(o, _np_msign(m), atol=2e-3)


def test_msign_scalar_map_on_a_diagonal_matrix():
    sigma = np.array([1.0, 0.3, 0.05, 1.5e-3 * 1.05])
    for rescale in (True, False):
        out = optim.newton_schulz_msign(jnp.diag(jnp.asarray(sigma, jnp.float32)),
                                        first_step_rescale=rescale)  # fmt: skip
        np.testing.assert_allclose(np.diag(out), np.diag(_np_msign(np.diag(sigma), 5, rescale)),
                                   rtol=1e-4)  # fmt: skip
    # Note check 3: without the rescale the scalar map sends σ/‖M‖_F ∈ [1.5e-3, 1] into
    # [0.680, 1.202]; a 1x1 matrix has σ/‖M‖_F = 1 exactly.
    grid = np.geomspace(1.5e-3, 1.0, 2000)
    x = grid.copy()
    for _ in range(5):
        x = _A * x + _B * x**3 + _C * x**5
    assert 0.679 < x.min() and x.max() < 1.203


def test_msign_is_orthogonally_equivariant(x64):
    key1, key2, key3 = jax.random.split(jax.random.key(3), 3)
    m = jax.random.normal(key1, (6, 4), jnp.float64)
    q1 = jnp.linalg.qr(jax.random.normal(key2, (6, 6), jnp.float64))[0]
    q2 = jnp.linalg.qr(jax.random.normal(key3, (4, 4), jnp.float64))[0]
    lhs = optim.newton_schulz_msign(q1.T @ m @ q2)
    rhs = q1.T @ optim.newton_schulz_msign(m) @ q2
    np.testing.assert_allclose(lhs, rhs, atol=1e-12)


def test_msign_of_zero_is_zero():
    assert float(jnp.abs(optim.newton_schulz_msign(jnp.zeros((3, 2)))).max()) == 0.0


# ---------------------------------------------------------------------------------------------
# Matrix form.


@pytest.mark.parametrize(
    ("betas", "expected"),
    [
        ((0.95, 0.95), [20.000, 12.811, 9.497, 7.587, 6.344]),
        ((0.9, 0.99), [10.0, 6.577, 4.996, 4.086]),
    ],
)
def test_matrix_constant_gradient_matches_note_check_2(betas, expected):
    g = 2.0 * jax.random.normal(jax.random.key(1), (6, 4))
    steps = _run(optim.scale_by_deva_matrix(*betas), [g] * (len(expected) + 1))
    assert np.abs(steps[0]).max() == 0.0  # call 0 only builds the basis
    direction = 0.2 * np.sqrt(6) * np.asarray(optim.newton_schulz_msign(g), np.float64)
    for step, s_t in zip(steps[1:], expected, strict=True):
        np.testing.assert_allclose(step, s_t * direction, rtol=2e-3, atol=2e-4)


@pytest.mark.parametrize(("shape", "max_dim"), [((5, 4), 10_000), ((5, 4), 4), ((3, 6), 2)])
def test_matrix_matches_numpy_reference_with_refreshes(shape, max_dim):
    grads = [jax.random.normal(jax.random.key(10 + i), shape) for i in range(8)]
    tx = optim.scale_by_deva_matrix(0.9, 0.95, 1e-8, precondition_frequency=2,
                                    max_precond_dim=max_dim)  # fmt: skip
    ours = _run(tx, grads)
    reference = _np_deva_matrix([np.asarray(g, np.float64) for g in grads], 0.9, 0.95, 1e-8, 2,
                                max_dim=max_dim)  # fmt: skip
    for t, (a, b) in enumerate(zip(ours, reference, strict=True)):
        np.testing.assert_allclose(a, b, rtol=5e-3, atol=5e-3 * np.abs(b).max() + 1e-7,
                                   err_msg=f"call {t}")  # fmt: skip


def test_soap_matches_numpy_reference_with_refreshes():
    grads = [jax.random.normal(jax.random.key(20 + i), (5, 4)) for i in range(8)]
    ours = _run(optim.scale_by_soap(0.9, 0.95, 1e-8, precondition_frequency=2), grads)
    reference = _np_soap([np.asarray(g, np.float64) for g in grads], 0.9, 0.95, 1e-8, 2)
    for t, (a, b) in enumerate(zip(ours, reference, strict=True)):
        np.testing.assert_allclose(a, b, rtol=5e-3, atol=5e-3 * np.abs(b).max() + 1e-7,
                                   err_msg=f"call {t}")  # fmt: skip
    with pytest.raises(ValueError, match="SOAP needs 2-D leaves"):
        optim.scale_by_soap().init({"b": jnp.zeros(3)})


def test_matrix_state_permutes_nu_and_keeps_shapes():
    tx = optim.scale_by_deva_matrix(precondition_frequency=1, max_precond_dim=4)
    state = tx.init({"w": jnp.zeros((5, 4))})
    assert state.left["w"].shape == (0, 0) and state.right["w"].shape == (4, 4)
    g = {"w": jax.random.normal(jax.random.key(0), (5, 4))}
    for _ in range(3):
        _, state = tx.update(g, state)
    q = np.asarray(state.basis_right["w"], np.float64)
    np.testing.assert_allclose(q.T @ q, np.eye(4), atol=1e-5)  # the refreshed basis is orthonormal


# ---------------------------------------------------------------------------------------------
# The whole-network alias.


def _params():
    keys = jax.random.split(jax.random.key(0), 4)
    return {
        "embedding": jax.random.normal(keys[0], (8, 4)),
        "hidden": jax.random.normal(keys[1], (4, 4)),
        "bias": jax.random.normal(keys[2], (4,)),
        "head": jax.random.normal(keys[3], (4, 8)),
    }


def test_deva_routes_leaves_and_skips_decay_on_the_first_call():
    params = _params()
    grads = [jax.tree.map(lambda p, i=i: jnp.sin(p + i), params) for i in range(3)]
    ours = []
    tx = optim.deva(0.01, weight_decay=0.1)
    state = tx.init(params)
    for g in grads:
        u, state = tx.update(g, state, params)
        ours.append(u)
    adam = optax.adamw(0.01, b1=0.9, b2=0.95, eps=1e-8, weight_decay=0.0)
    adam_state = adam.init(params)
    matrix = optim.scale_by_deva_matrix()
    m_state = matrix.init(params["hidden"])
    for call, (g, u) in enumerate(zip(grads, ours, strict=True)):
        a, adam_state = adam.update(g, adam_state, params)
        for name in ("embedding", "bias", "head"):
            np.testing.assert_allclose(u[name], a[name], rtol=1e-6, err_msg=name)
        d, m_state = matrix.update(g["hidden"], m_state)
        decay = 0.0 if call == 0 else 0.1
        np.testing.assert_allclose(u["hidden"], -0.01 * (d + decay * params["hidden"]), rtol=1e-5,
                                   atol=1e-7)  # fmt: skip
    assert float(jnp.abs(ours[0]["hidden"]).max()) == 0.0


def test_deva_vector_fallback_and_custom_filter():
    params = _params()
    labels = optim.deva_matrix_labels(params, lambda path, leaf: leaf.ndim == 2)
    assert labels == {"embedding": "deva", "hidden": "deva", "bias": "fallback", "head": "deva"}
    tx = optim.deva(0.01, fallback="deva_vector", fallback_b1=0.9, fallback_b2=0.99)
    u, _ = tx.update(jax.tree.map(jnp.ones_like, params), tx.init(params), params)
    np.testing.assert_allclose(u["bias"], -0.01 * 9.5346, rtol=1e-4)  # note check 1, t = 1


def test_deva_under_nnx_optimizer_equals_direct_updates():
    config = jnn.GPTConfig(256, 16, 1, 2, max_len=8, multiple_of=16, norm_placement="pre")
    model = jnn.SimpleGPT(config, rngs=nnx.Rngs(0))
    tokens = jax.random.randint(jax.random.key(1), (2, 8), 0, 256)
    tx = optim.deva(1e-2)
    # Direct path: a pure dict of arrays and tx.update.
    params = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    graphdef, _, rest = nnx.split(model, nnx.Param, ...)

    def loss(p):
        return jnn.language_model_loss(nnx.merge(graphdef, p, rest), tokens, tokens)

    @jax.jit
    def direct_step(p, state):
        updates, state = tx.update(jax.grad(loss)(p), state, p)
        return optax.apply_updates(p, updates), state

    direct, state = params, tx.init(params)
    for _ in range(3):
        direct, state = direct_step(direct, state)
    # nnx path.
    optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)

    @nnx.jit
    def nnx_step(model, optimizer):
        grads = nnx.grad(lambda m: jnn.language_model_loss(m, tokens, tokens))(model)
        optimizer.update(model, grads)

    for _ in range(3):
        nnx_step(model, optimizer)
    via_nnx = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6), via_nnx,
                 direct)  # fmt: skip
    moved = jax.tree.map(lambda a, b: float(jnp.abs(a - b).max()), direct, params)
    assert moved["blocks"][0]["attention"]["q"]["kernel"] > 0.0


# ---------------------------------------------------------------------------------------------
# The paper's quadratic toy.


def test_toy_hessian_has_the_requested_block_spectra():
    eig = [[1.0, 2.0, 3.0], [99.0, 100.0, 101.0], [4998.0, 4999.0, 5000.0]]
    h = np.asarray(optim.quadratic_toy_hessian(jax.random.key(3), eig), np.float64)
    np.testing.assert_allclose(h, h.T, atol=1e-3)
    for k in range(3):  # block-diagonal, each block with its own eigenvalues
        block = h[3 * k : 3 * k + 3, 3 * k : 3 * k + 3]
        np.testing.assert_allclose(np.linalg.eigvalsh(block), eig[k], rtol=1e-4)
    off = h.copy()
    for k in range(3):
        off[3 * k : 3 * k + 3, 3 * k : 3 * k + 3] = 0.0
    assert np.abs(off).max() == 0.0
    with pytest.raises(ValueError, match="eigenvalues must be"):
        optim.quadratic_toy_hessian(jax.random.key(0), [1.0, 2.0])


# ---------------------------------------------------------------------------------------------
# Bad input.


def test_matrix_form_rejects_a_vector_leaf_without_fallback():
    params = {"w": jnp.zeros((3, 3)), "b": jnp.zeros(3)}
    with pytest.raises(ValueError, match=r"\['b'\] has shape \(3,\)"):
        optim.scale_by_deva_matrix().init(params)
    with pytest.raises(ValueError, match="needs 2-D leaves"):
        optim.deva(1e-3, fallback=None).init(params)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"b1": 1.0}, "b1"), ({"b2": -0.1}, "b2"), ({"eps": 0.0}, "eps"), ({"eps": -1.0}, "eps")],
)
def test_invalid_hyperparameters_name_the_argument(kwargs, name):
    for factory in (optim.scale_by_deva_vector, optim.scale_by_deva_matrix):
        with pytest.raises(ValueError, match=f"^{name} must"):
            factory(**kwargs)
    with pytest.raises(ValueError, match=f"^{name} must"):
        optim.deva(1e-3, **kwargs)


def test_concrete_array_hyperparameters_are_checked():
    with pytest.raises(ValueError, match="^b1 must"):
        optim.deva(1e-3, b1=jnp.array(1.5))
    with pytest.raises(ValueError, match="^b2 must"):
        optim.scale_by_soap(b2=jnp.array(1.0))
    with pytest.raises(ValueError, match="^weight_decay must"):
        optim.deva(1e-3, weight_decay=np.float32(-0.1))


def test_invalid_options():
    with pytest.raises(ValueError, match="fallback must be one of"):
        optim.deva(1e-3, fallback="sgd")
    with pytest.raises(ValueError, match="precondition_frequency must be"):
        optim.scale_by_deva_matrix(precondition_frequency=0)
    with pytest.raises(TypeError, match="nesterov must be a bool"):
        optim.scale_by_deva_vector(nesterov="yes")
    with pytest.raises(ValueError, match="weight_decay must be finite and >= 0"):
        optim.deva_vector(1e-3, weight_decay=-1.0)
    with pytest.raises(ValueError, match="x must be a 2-D matrix"):
        optim.newton_schulz_msign(jnp.zeros(3))


# ---------------------------------------------------------------------------------------------
# Issue 14: plain inject_hyperparams, non-finite gradients, params/updates consistency, values.


def _mixed_params():
    keys = jax.random.split(jax.random.key(7), 2)
    return {"w": jax.random.normal(keys[0], (4, 3)), "b": jax.random.normal(keys[1], (3,))}


def _mixed_grads(steps):
    return [
        jax.tree.map(lambda p, i=i: jnp.sin(3.0 * p + i), _mixed_params()) for i in range(steps)
    ]


def _trajectory(tx, params, grads):
    @jax.jit
    def step(p, s, g):
        u, s = tx.update(g, s, p)
        return optax.apply_updates(p, u), s

    state, out = tx.init(params), []
    for g in grads:
        params, state = step(params, state, g)
        out.append(params)
    return out, state


def _matrix_only(factory):
    def make(learning_rate, **kwargs):
        return optax.chain(factory(**kwargs), optax.scale_by_learning_rate(learning_rate))

    return make


@pytest.mark.parametrize(
    ("factory", "kwargs", "params"),
    [
        (optim.deva, {"learning_rate": 3e-3, "precondition_frequency": 2}, None),
        (optim.deva, {"learning_rate": 3e-3, "fallback": "deva_vector"}, None),
        (optim.deva_vector, {"learning_rate": 3e-3}, None),
        (optim.scale_by_deva_matrix, {"precondition_frequency": 2}, "w"),
        (optim.scale_by_soap, {"precondition_frequency": 2}, "w"),
    ],
    ids=["deva", "deva_vector_fallback", "deva_vector", "deva_matrix", "soap"],
)
def test_plain_inject_hyperparams_gives_the_same_trajectory(factory, kwargs, params):
    """optax.inject_hyperparams(T)(...) with T's defaults (its ints injected, traced under jit)."""
    tree = _mixed_params() if params is None else _mixed_params()[params]
    grads = _mixed_grads(5) if params is None else [g[params] for g in _mixed_grads(5)]
    injected = optax.inject_hyperparams(factory)(**kwargs)
    hyperparams = injected.init(tree).hyperparams
    if "precondition_frequency" in kwargs:
        assert "precondition_frequency" in hyperparams  # an int that only enters arithmetic
        assert "max_precond_dim" not in hyperparams  # None by default: it sets shapes
    expected, _ = _trajectory(factory(**kwargs), tree, grads)
    actual, _ = _trajectory(injected, tree, grads)
    for a, e in zip(actual, expected, strict=True):
        jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7), a, e)


def test_learning_rate_annotations_are_real_objects():
    """optax's contrib battery compares the annotation with optax.ScalarOrSchedule (no strings)."""
    for factory in (optim.deva, optim.deva_vector):
        annotation = inspect.signature(factory).parameters["learning_rate"].annotation
        assert annotation is optax.ScalarOrSchedule


def test_shape_setting_ints_must_be_static_under_inject_hyperparams():
    params = _mixed_params()
    tx = optax.inject_hyperparams(optim.deva)(1e-3, max_precond_dim=100)
    with pytest.raises(TypeError, match=r"max_precond_dim .* static_args=\('max_precond_dim',\)"):
        jax.jit(tx.init)(params)
    tx = optax.inject_hyperparams(optim.deva, static_args=("max_precond_dim", "ns_steps"))
    state = jax.jit(tx(1e-3, max_precond_dim=3, ns_steps=4).init)(params)
    assert state.inner_state.inner_state.inner_states["deva"].inner_state[0].left["w"].shape == (
        0,
        0,
    )  # the side of length 4 > 3 is not rotated
    with pytest.raises(TypeError, match=r"ns_steps .* static_args=\('ns_steps',\)"):
        jax.jit(optax.inject_hyperparams(optim.scale_by_deva_matrix)(ns_steps=4).init)(params["w"])


def test_traced_precondition_frequency_refreshes_when_the_python_int_does():
    grads = [g["w"] for g in _mixed_grads(6)]
    make = optax.inject_hyperparams(optim.scale_by_soap)
    for frequency in (1, 3):
        expected, _ = _trajectory(optim.scale_by_soap(precondition_frequency=frequency),
                                  jnp.zeros((4, 3)), grads)  # fmt: skip
        actual, _ = _trajectory(make(precondition_frequency=frequency), jnp.zeros((4, 3)), grads)
        np.testing.assert_allclose(actual[-1], expected[-1], rtol=1e-6, atol=1e-7)
    with pytest.raises(TypeError, match="precondition_frequency must be an int"):
        optim.scale_by_soap(precondition_frequency=2.0)


@pytest.mark.parametrize(
    ("factory", "field", "whole_tree"),
    [
        (lambda: optim.deva(1e-3), lambda s: s.nonfinite_count, True),
        (lambda: optim.deva_vector(1e-3), lambda s: s[0].nonfinite_count, False),
        (optim.scale_by_deva_vector, lambda s: s.nonfinite_count, False),
    ],
    ids=["deva", "deva_vector", "scale_by_deva_vector"],
)
def test_nonfinite_gradients_are_counted(factory, field, whole_tree):
    tx = factory()
    params = _mixed_params() if whole_tree else _mixed_params()["b"]
    grads = _mixed_grads(4) if whole_tree else [g["b"] for g in _mixed_grads(4)]
    nan_at = lambda g: jax.tree.map(lambda x: x.at[(0,) * x.ndim].set(jnp.nan), g)  # noqa: E731
    state = tx.init(params)
    for i, g in enumerate(grads):
        _, state = jax.jit(tx.update)(nan_at(g) if i in (1, 2) else g, state, params)
    assert int(field(state)) == 2


def test_matrix_and_soap_count_nonfinite_gradients():
    g = _mixed_grads(1)[0]["w"]
    for tx in (optim.scale_by_deva_matrix(), optim.scale_by_soap()):
        state = tx.init(g)
        _, state = tx.update(g.at[1, 1].set(jnp.inf), state)
        _, state = tx.update(g, state)
        assert int(state.nonfinite_count) == 1


@pytest.mark.parametrize("fallback", ["adamw", "deva_vector"])
def test_apply_if_finite_skips_a_nan_step_and_recovers(fallback):
    """Under optax.apply_if_finite a NaN step is a zero update and the state does not move: the
    run equals the run that never saw that gradient (a second implementation path)."""
    params, grads = _mixed_params(), _mixed_grads(5)
    bad = jax.tree.map(lambda x: jnp.full_like(x, jnp.nan), grads[0])
    tx = optim.deva(3e-3, fallback=fallback, precondition_frequency=2)
    expected, _ = _trajectory(tx, params, grads)
    guarded = optax.apply_if_finite(tx, max_consecutive_errors=3)
    actual, state = _trajectory(guarded, params, [*grads[:2], bad, *grads[2:]])
    assert int(state.total_notfinite) == 1
    assert int(state.inner_state.nonfinite_count) == 0  # the NaN never reached deva
    jax.tree.map(lambda a, b: np.testing.assert_array_equal(a, b), actual[2], actual[1])
    for a, e in zip([*actual[:2], *actual[3:]], expected, strict=True):
        jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7), a, e)
    # Without the guard the NaN is counted and, as documented, stays in the moments.
    unguarded, state = _trajectory(tx, params, [*grads[:2], bad, *grads[2:]])
    assert int(state.nonfinite_count) == 1
    assert not np.isfinite(np.asarray(unguarded[-1]["b"])).any()


@pytest.mark.parametrize(
    "make",
    [
        lambda: optim.deva(1e-3),
        lambda: optim.deva_vector(1e-3),
        lambda: optim.scale_by_deva_vector(),
        lambda: optim.deva(1e-3, fallback=None, matrix_filter=lambda p, x: True),
    ],
    ids=["deva", "deva_vector", "scale_by_deva_vector", "deva_matrix_only"],
)
def test_params_and_updates_consistency(make):
    tx = make()
    w = jnp.ones((4, 3))
    with pytest.raises(TypeError, match=r"params\['w'\] must have a floating dtype, got int32"):
        tx.init({"w": w.astype(jnp.int32)})
    state = tx.init({"w": w})
    for bad, pattern in (
        (jnp.ones((2, 4, 3)), r"updates\['w'\] has shape \(2, 4, 3\)"),
        (jnp.ones((1, 3)), r"updates\['w'\] has shape \(1, 3\)"),
        (jnp.ones((4, 3), jnp.int32), r"updates\['w'\] must have a floating dtype"),
    ):
        with pytest.raises((ValueError, TypeError), match=pattern):
            tx.update({"w": bad}, state, {"w": w})
    with pytest.raises(ValueError, match="updates must have the same tree structure"):
        tx.update({"v": w}, state, {"w": w})


def test_vector_update_of_another_shape_is_rejected():
    tx = optim.scale_by_deva_vector()
    state = tx.init(jnp.zeros(5))
    for shape in ((3, 5), (1,)):
        with pytest.raises(ValueError, match=rf"has shape \({shape[0]},"):
            tx.update(jnp.ones(shape), state)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"learning_rate": -1e-3}, "learning_rate"),
        ({"learning_rate": float("nan")}, "learning_rate"),
        ({"learning_rate": float("inf")}, "learning_rate"),
        ({"learning_rate": "0.1"}, "learning_rate"),
        ({"fallback_learning_rate": -1.0}, "fallback_learning_rate"),
        ({"fallback_b1": 1.0}, "fallback_b1"),
        ({"fallback_b2": jnp.array(1.5)}, "fallback_b2"),
        ({"fallback_eps": -1e-8}, "fallback_eps"),
        ({"eps": -1e-8}, "eps"),
        ({"matrix_filter": "2d"}, "matrix_filter"),
        ({"ns_coeffs": (1.0, 2.0)}, "ns_coeffs"),
        ({"ns_coeffs": (1.0, float("nan"), 2.0)}, "ns_coeffs"),
        ({"ns_steps": 0}, "ns_steps"),
        ({"max_precond_dim": 0}, "max_precond_dim"),
        ({"precondition_frequency": True}, "precondition_frequency"),
    ],
)
def test_deva_rejects_bad_values(kwargs, name):
    kwargs = {"learning_rate": 1e-3, **kwargs}
    with pytest.raises((ValueError, TypeError), match=rf"^{name}"):
        optim.deva(**kwargs)


def test_vector_alias_and_helpers_reject_bad_values():
    with pytest.raises(ValueError, match="^learning_rate must"):
        optim.deva_vector(-0.1)
    with pytest.raises(TypeError, match="^rng_key must be a JAX PRNG key"):
        optim.quadratic_toy_hessian(None, [[1.0, 2.0]])
    with pytest.raises(ValueError, match="^eigenvalues must be finite"):
        optim.quadratic_toy_hessian(jax.random.key(0), [[1.0, float("nan")]])
    with pytest.raises(TypeError, match="^x must have a floating dtype"):
        optim.newton_schulz_msign(jnp.ones((2, 2), jnp.int32))
    with pytest.raises(ValueError, match=r"^coeffs\[1\] must be finite"):
        optim.newton_schulz_msign(jnp.ones((2, 2)), coeffs=(1.0, float("inf"), 0.0))
    with pytest.raises(TypeError, match="^path must be a pytree key path"):
        optim.is_hidden_matrix("w", jnp.ones((2, 2)))
    with pytest.raises(
        TypeError, match=r"^matrix_filter must be None or callable as matrix_filter\(path, leaf\)"
    ):
        optim.deva_matrix_labels({"w": jnp.ones((2, 2))}, matrix_filter=3)


@pytest.mark.parametrize("factory", [optim.deva, optim.scale_by_soap, optim.scale_by_deva_matrix])
def test_default_precondition_frequency_is_static_under_inject_hyperparams(factory):
    """Issue 44: an injected weak-typed int retraced a restored state and doubled MultiSteps."""
    full = factory is optim.deva
    params = _mixed_params() if full else _mixed_params()["w"]
    grads = _mixed_grads(4) if full else [g["w"] for g in _mixed_grads(4)]
    tx = optax.inject_hyperparams(factory)(**({"learning_rate": 3e-3} if full else {}))
    state = tx.init(params)
    assert "precondition_frequency" not in state.hyperparams  # None: resolved to 10, static
    traces = []

    def update(g, s):
        traces.append(1)
        return tx.update(g, s, params)

    update = jax.jit(update)
    _, state = update(grads[0], state)
    # A checkpoint round trip gives strongly typed arrays: it must not retrace.
    restored = jax.tree.map(lambda x: jnp.asarray(np.asarray(x)), state)
    update(grads[1], restored)
    assert len(traces) == 1
    multi = optax.MultiSteps(tx, every_k_schedule=2)
    multi_traces = []

    def multi_update(g, s):
        multi_traces.append(1)
        return multi.update(g, s, params)

    multi_update = jax.jit(multi_update)
    multi_state = multi.init(params)
    for g in grads:
        _, multi_state = multi_update(g, multi_state)
    assert len(multi_traces) == 1
