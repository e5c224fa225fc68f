"""The harm-minimising update (jaxlab/optim/_harm.py) against independent truths: per-sample
gradients from ``jax.vmap(jax.grad)``, scipy's NNLS and jaxopt's BoxCDQP, the note's closed form,
plain optax steps where no sample is harmed. The battery entry is in tests/batteries.py."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import jaxopt
import numpy as np
import optax
import pytest
from flax import nnx
from jax.flatten_util import ravel_pytree
from scipy.optimize import nnls

from jaxlab.optim import (
    exact_harm_weights,
    first_order_harm,
    harm,
    harm_dual_terms,
    harm_sgd,
    harm_train_step,
    mlp_exact_harm_train_step,
    mlp_logits_and_features,
    solve_harm_dual,
)

B, D, H, C = 6, 3, 5, 4


def _mlp(params, x):
    """A one-hidden-layer net: (logits, the head's inputs)."""
    h = jnp.tanh(x @ params["body"]["kernel"] + params["body"]["bias"][None])
    return h @ params["head"]["kernel"] + params["head"]["bias"][None], h


def _problem(seed=0, batch=B):
    """Parameters and a batch from NumPy (no per-shape compiles of eager random ops)."""
    rng = np.random.default_rng(seed)
    params = {
        "body": {"kernel": rng.normal(size=(D, H)), "bias": np.zeros(H)},
        "head": {"kernel": rng.normal(size=(H, C)), "bias": 0.1 * rng.normal(size=C)},
    }
    params = jax.tree.map(lambda v: jnp.asarray(v, jnp.float32), params)
    x = jnp.asarray(rng.normal(size=(batch, D)), jnp.float32)
    y = jnp.asarray(rng.integers(0, C, batch), jnp.int32)
    return params, x, y


def _losses(params, x, y):
    return optax.softmax_cross_entropy_with_integer_labels(_mlp(params, x)[0], y)


@jax.jit
def _per_sample_head_grads(params, x, y):
    """(B, H·C + C): exact per-sample gradients of the head, by backpropagation per sample."""
    grads = jax.vmap(jax.grad(lambda p, xi, yi: _losses(p, xi[None], yi[None])[0]),
                     in_axes=(None, 0, 0))(params, x, y)  # fmt: skip
    return jnp.concatenate([grads["head"]["kernel"].reshape(x.shape[0], -1),
                            grads["head"]["bias"]], axis=1)  # fmt: skip


@jax.jit
def _activations(params, x, y):
    logits, h = _mlp(params, x)
    delta = jax.nn.softmax(logits) - jax.nn.one_hot(y, C)
    return h, delta


def test_last_layer_gram_and_linear_term_equal_those_of_per_sample_gradients():
    params, x, y = _problem()
    h, delta = _activations(params, x, y)
    direction = jax.random.normal(jax.random.key(9), (H * C + C,))
    gram, linear = harm_dual_terms(h, delta, direction[: H * C].reshape(H, C), direction[H * C :])
    jac = _per_sample_head_grads(params, x, y)
    np.testing.assert_allclose(gram, jac @ jac.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(linear, jac @ direction, rtol=1e-5, atol=1e-5)
    # Without a bias the 11ᵀ term goes.
    gram_nb, _ = harm_dual_terms(h, delta, direction[: H * C].reshape(H, C))
    np.testing.assert_allclose(gram_nb, jac[:, : H * C] @ jac[:, : H * C].T, rtol=1e-5, atol=1e-5)


def test_note_closed_form():
    g = jnp.array([[1.0, 1.0], [1.0, -2.0]])
    u = jnp.array([0.0, -1.0])
    w = solve_harm_dual(g @ g.T, g @ u, ridge=0.0)
    np.testing.assert_allclose(w, [0.5, 0.0], atol=1e-6)
    np.testing.assert_allclose(g @ g.T @ w + g @ u, [0.0, 1.5], atol=1e-6)  # KKT gradient


@pytest.mark.parametrize("seed", [0, 1])
def test_dual_matches_nnls_and_box_qp_and_satisfies_kkt(seed):
    with jax.enable_x64(True):
        keys = jax.random.split(jax.random.key(seed), 2)
        jac = jax.random.normal(keys[0], (12, 40), jnp.float64)
        u = jax.random.normal(keys[1], (40,), jnp.float64)
        w = np.asarray(exact_harm_weights(jac, u, ridge=0.0, num_iterations=400))
        assert w.dtype == np.float64
        reference, _ = nnls(np.asarray(jac.T), -np.asarray(u))
        gram, b = np.asarray(jac @ jac.T), np.asarray(jac @ u)
        box = jaxopt.BoxCDQP(tol=1e-12, maxiter=5000).run(
            jnp.zeros(12), params_obj=(jnp.asarray(gram), jnp.asarray(b)),
            params_ineq=(jnp.zeros(12), jnp.full(12, jnp.inf)),
        ).params  # fmt: skip
    assert np.any(reference > 0)  # the base direction harms someone: the test is not vacuous
    np.testing.assert_allclose(w, reference, atol=1e-6)
    np.testing.assert_allclose(w, np.asarray(box), atol=1e-6)
    slack = gram @ w + b  # ⟨g_i, d⟩
    assert np.all(w >= 0) and np.all(slack >= -1e-8)
    assert abs(w @ slack) <= 1e-8  # complementary slackness


def test_float32_dual_at_the_default_iterations_leaves_no_harm_on_a_real_batch():
    params, x, y = _problem(3, batch=16)
    jac = _per_sample_head_grads(params, x, y)
    u = jnp.mean(jac, axis=0) + 0.5 * jax.random.normal(jax.random.key(4), (jac.shape[1],))
    # NNLS is the unridged problem: compare at ridge 0 (the default ridge relaxes nearly-fit
    # samples on purpose; test_default_ridge_relaxes_each_constraint_by_ridge_times_weight).
    w = exact_harm_weights(jac, u, ridge=0.0)
    reference, _ = nnls(np.asarray(jac.T, np.float64), -np.asarray(u, np.float64))
    d = u + w @ jac
    assert int(jnp.sum(jac @ u < 0)) > 0
    tol = 1e-3 * jnp.linalg.norm(jac, axis=1) * jnp.linalg.norm(d)
    assert bool(jnp.all(jac @ d >= -tol))
    d_reference = np.asarray(u) + reference @ np.asarray(jac)  # the primal solution is unique
    np.testing.assert_allclose(d, d_reference, atol=1e-3 * np.linalg.norm(d_reference))


def test_default_ridge_relaxes_each_constraint_by_ridge_times_weight():
    """The ridged dual against scipy: min_{w>=0} ‖Jᵀw + u‖² + ρ‖w‖² is NNLS on [Jᵀ; √ρ I]. Its
    KKT: ⟨g_i, d⟩ >= −ρ w_i, equality where w_i > 0, so the default ρ lets sample i slip by at
    most ρ w_i (and no more)."""
    from jaxlab.optim._harm import DEFAULT_RIDGE

    params, x, y = _problem(3, batch=16)
    jac = _per_sample_head_grads(params, x, y)
    noise = np.random.default_rng(4).normal(size=jac.shape[1])
    u = jnp.mean(jac, axis=0) + jnp.asarray(0.5 * noise, jnp.float32)
    solve = jax.jit(functools.partial(exact_harm_weights, num_iterations=2000))
    w = np.asarray(solve(jac, u), np.float64)
    j64, u64 = np.asarray(jac, np.float64), np.asarray(u, np.float64)
    size = j64.shape[0]
    augmented = np.vstack([j64.T, np.sqrt(DEFAULT_RIDGE) * np.eye(size)])
    reference, _ = nnls(augmented, -np.concatenate([u64, np.zeros(size)]))
    np.testing.assert_allclose(w, reference, atol=1e-3 * np.abs(reference).max())
    slack = j64 @ (u64 + reference @ j64)  # ⟨g_i, d⟩ at the reference
    active = reference > 1e-8
    assert active.sum() > 0 and np.all(slack >= -DEFAULT_RIDGE * reference - 1e-9)
    np.testing.assert_allclose(slack[active], -DEFAULT_RIDGE * reference[active], atol=1e-8)


def test_head_mode_removes_first_order_harm_on_the_head_and_leaves_the_body():
    params, x, y = _problem(1)
    h, delta = _activations(params, x, y)
    rng = np.random.default_rng(11)  # a random base step: it harms some samples
    grads = jax.tree.map(lambda g: jnp.asarray(rng.normal(size=g.shape), jnp.float32), params)
    # ridge 0: the exact no-harm property (the default ridge relaxes nearly-fit samples by
    # ρ w_i, tested in test_default_ridge_relaxes_each_constraint_by_ridge_times_weight).
    base, tx = optax.sgd(0.1), harm(optax.sgd(0.1), kernel_path=("head", "kernel"),
                                    bias_path=("head", "bias"), ridge=0.0)  # fmt: skip
    plain, _ = base.update(grads, base.init(params), params)
    update = jax.jit(lambda g, p: tx.update(g, tx.init(p), p, features=h, logit_grads=delta))
    corrected, (_, state) = update(grads, params)
    jac = _per_sample_head_grads(params, x, y)
    step = jnp.concatenate([corrected["head"]["kernel"].ravel(), corrected["head"]["bias"]])
    plain_step = jnp.concatenate([plain["head"]["kernel"].ravel(), plain["head"]["bias"]])
    assert int(jnp.sum(jac @ plain_step > 0)) == int(state.num_harmed) > 0
    assert bool(jnp.all(jac @ step <= 1e-4 * jnp.linalg.norm(jac, axis=1) * jnp.linalg.norm(step)))
    assert int(state.num_violated) == 0
    np.testing.assert_array_equal(corrected["body"]["kernel"], plain["body"]["kernel"])


@pytest.mark.parametrize("optimizer", [optax.sgd(0.1, momentum=0.9), optax.adamw(1e-2)])
def test_batch_of_one_with_a_non_opposing_base_update_equals_the_base_update(optimizer):
    params, x, y = _problem(2, batch=1)
    h, delta = _activations(params, x, y)
    grads = jax.jit(jax.grad(lambda p: jnp.mean(_losses(p, x, y))))(params)
    tx = harm(optimizer, kernel_path=("head", "kernel"), bias_path=("head", "bias"))
    expected, _ = jax.jit(lambda g, p: optimizer.update(g, optimizer.init(p), p))(grads, params)
    got, (_, state) = jax.jit(lambda g, p: tx.update(g, tx.init(p), p, features=h,
                                                     logit_grads=delta))(grads, params)  # fmt: skip
    assert int(state.num_harmed) == 0
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8), got,
                 expected)  # fmt: skip
    # Reweight mode: ω = 1 for the single sample, so the step is the optimizer's own.
    step = harm_train_step(lambda p, b: _mlp(p, b[0]), lambda z, b: _ce(z, b[1]), optimizer,
                           kernel_path=("head", "kernel"), bias_path=("head", "bias"))  # fmt: skip
    new_params, _, info = jax.jit(step)(params, optimizer.init(params), (x, y))
    np.testing.assert_allclose(info.weights, [1.0], rtol=1e-6)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7), new_params,
                 optax.apply_updates(params, expected))  # fmt: skip


def _ce(logits, labels):
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels)


def test_reweight_with_sgd_momentum_puts_the_corrected_direction_in_the_momentum():
    """Note check 4: the new momentum's head block is ``u + Σ w_i g_i`` and harms no sample."""
    params, x, y = _problem(5, batch=16)
    opt = optax.sgd(0.05, momentum=0.9)
    state = opt.init(params)

    @jax.jit
    def plain(params, state, k):  # build some momentum with plain steps
        g = jax.grad(lambda p: jnp.mean(_losses(p, x, y)) + 0.2 * k * jnp.sum(p["head"]["bias"]))
        updates, state = opt.update(g(params), state, params)
        return optax.apply_updates(params, updates), state

    for k in range(3):
        params, state = plain(params, state, k)
    momentum = state[0].trace
    step = jax.jit(
        harm_train_step(
            lambda p, b: _mlp(p, b[0]),
            lambda z, b: _ce(z, b[1]),
            opt,
            kernel_path=("head", "kernel"),
            bias_path=("head", "bias"),
            num_iterations=400,  # this batch is ill-conditioned: 100 leave one slightly violated
            ridge=0.0,  # the exact no-harm property (the default ridge relaxes by ρ w_i)
        )
    )
    _, new_state, info = step(params, state, (x, y))
    np.testing.assert_allclose(info.update_scale, 0.05, rtol=1e-4)
    jac = _per_sample_head_grads(params, x, y)
    mean = jnp.mean(jac, axis=0)
    head = lambda t: jnp.concatenate([t["head"]["kernel"].ravel(), t["head"]["bias"]])  # noqa: E731
    u = 0.9 * head(momentum) + mean
    expected = u + (info.dual / 0.05) @ jac
    np.testing.assert_allclose(head(new_state[0].trace), expected, rtol=1e-4, atol=1e-5)
    assert int(info.num_harmed) > 0 and int(info.num_violated) == 0
    m = head(new_state[0].trace)
    assert bool(jnp.all(jac @ m >= -1e-3 * jnp.linalg.norm(jac, axis=1) * jnp.linalg.norm(m)))
    np.testing.assert_allclose(jnp.sum(info.weights) - 1.0, jnp.sum(info.dual) / 0.05, rtol=1e-4)


def test_harm_sgd_converges_on_full_batch_training_with_the_correction_active():
    """B = 12 < 21 head parameters: the projection stalls only where ḡ = 0 (per-sample gradients
    independent), so full-batch training reaches plain SGD's stationary point while correcting."""
    keys = jax.random.split(jax.random.key(1), 2)
    x = jax.random.normal(keys[0], (12, 6))
    y = jax.random.randint(keys[1], (12,), 0, 3)
    params = {"w": jnp.zeros((6, 3)), "b": jnp.zeros(3)}
    loss = lambda p: jnp.mean(_ce(x @ p["w"] + p["b"][None], y))  # noqa: E731
    harm_tx = optax.inject_hyperparams(harm_sgd)(learning_rate=0.2, momentum=0.5,
                                                 kernel_path=("w",), bias_path=("b",))  # fmt: skip

    def run(tx, params, counted=True):
        def body(_, carry):
            params, state, harmed = carry
            delta = jax.nn.softmax(x @ params["w"] + params["b"][None]) - jax.nn.one_hot(y, 3)
            updates, state = tx.update(jax.grad(loss)(params), state, params, features=x,
                                       logit_grads=delta)  # fmt: skip
            count = state.inner_state[1].num_harmed if counted else 0
            return optax.apply_updates(params, updates), state, harmed + count

        return jax.lax.fori_loop(0, 1000, body, (params, tx.init(params), 0))

    final, _, harmed = jax.jit(lambda p: run(harm_tx, p))(params)
    sgd = optax.with_extra_args_support(optax.sgd(0.2, momentum=0.5))
    plain, _, _ = jax.jit(lambda p: run(sgd, p, counted=False))(params)
    assert int(harmed) > 100  # the correction acted on many steps
    assert float(optax.tree.norm(jax.grad(loss)(final))) < 0.05 * float(
        optax.tree.norm(jax.grad(loss)(params))
    )
    assert float(loss(final)) <= float(loss(plain)) + 0.02


def test_works_under_nnx_optimizer_with_extra_args():
    class Net(nnx.Module):
        def __init__(self, rngs):
            self.body = nnx.Linear(D, H, rngs=rngs)
            self.head = nnx.Linear(H, C, rngs=rngs)

    model = Net(nnx.Rngs(0))
    _, x, y = _problem()
    tx = harm_sgd(0.1, kernel_path=("head", "kernel"), bias_path=("head", "bias"))
    optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)
    before = model.head.kernel[...]

    @nnx.jit
    def step(model, optimizer):
        h = jnp.tanh(model.body(x))
        delta = jax.nn.softmax(model.head(h)) - jax.nn.one_hot(y, C)
        grads = nnx.grad(lambda m: jnp.mean(_ce(m.head(jnp.tanh(m.body(x))), y)))(model)
        optimizer.update(model, grads, features=h, logit_grads=delta)

    step(model, optimizer)
    assert not np.allclose(model.head.kernel[...], before)
    assert int(optimizer.opt_state[1].count) == 1


def test_nonfinite_activations_are_counted_and_flagged():
    params, x, y = _problem()
    h, delta = _activations(params, x, y)
    tx = harm(optax.sgd(0.1), kernel_path=("head", "kernel"), bias_path=("head", "bias"))
    grads = jax.tree.map(jnp.ones_like, params)
    update = jax.jit(lambda g, p, h: tx.update(g, tx.init(p), p, features=h, logit_grads=delta))
    _, (_, state) = update(grads, params, h.at[0, 0].set(jnp.nan))
    assert int(state.nonfinite_count) == 1
    step = harm_train_step(lambda p, b: _mlp(p, b), lambda z, b: _ce(z, y), optax.sgd(0.1),
                           kernel_path=("head", "kernel"))  # fmt: skip
    _, _, info = jax.jit(step)(params, optax.sgd(0.1).init(params), x.at[0, 0].set(jnp.nan))
    assert bool(info.nonfinite)


def test_full_model_qp_leaves_no_first_order_harm_and_is_reproducible():
    params, x, y = _problem(7, batch=10)
    grads = jax.vmap(jax.grad(lambda p, xi, yi: _losses(p, xi[None], yi[None])[0]),
                     in_axes=(None, 0, 0))(params, x, y)  # fmt: skip
    jac = jax.vmap(lambda g: ravel_pytree(g)[0])(grads)
    u = jnp.mean(jac, axis=0) - 0.5 * jac[0]
    solve = jax.jit(functools.partial(exact_harm_weights, ridge=0.0))  # the exact problem
    w = solve(jac, u)
    d = u + w @ jac
    assert int(jnp.sum(jac @ u < 0)) > 0
    assert bool(jnp.all(jac @ d >= -1e-4 * jnp.linalg.norm(jac, axis=1) * jnp.linalg.norm(d)))
    np.testing.assert_array_equal(w, solve(jac, u))


def _relu_mlp(seed, sizes=(3, 5, 4, 3), batch=8):
    rng = np.random.default_rng(seed)
    params = [
        {
            "kernel": jnp.asarray(rng.normal(size=(a, b)) / np.sqrt(a), jnp.float32),
            "bias": jnp.asarray(0.1 * rng.normal(size=b), jnp.float32),
        }
        for a, b in zip(sizes, sizes[1:], strict=False)
    ]
    x = jnp.asarray(rng.normal(size=(batch, sizes[0])), jnp.float32)
    y = jnp.asarray(rng.integers(0, sizes[-1], batch), jnp.int32)
    return params, x, y


def _relu_losses(params, x, y):
    return _ce(mlp_logits_and_features(params, x)[0], y)


def test_exact_full_model_step_equals_the_qp_on_per_sample_gradients():
    """The layer-wise Gram of ``mlp_exact_harm_train_step`` against ``vmap(grad)`` gradients:
    its dual equals scipy's NNLS on the raveled per-sample Jacobian (an independent solver), the
    new momentum is ``u + Σ w_i g_i`` and it harms no sample on the whole model."""
    params, x, y = _relu_mlp(3)
    opt = optax.sgd(0.1, momentum=0.9)
    step = mlp_exact_harm_train_step(opt, ridge=0.0, num_iterations=2000)

    @jax.jit
    def run(params):
        g = jax.grad(lambda p: jnp.mean(_relu_losses(p, x, y)) + 0.3 * jnp.sum(p[0]["bias"]))
        updates, state = opt.update(g(params), opt.init(params), params)  # momentum vs the batch
        params = optax.apply_updates(params, updates)
        _, new_state, info = step(params, state, (x, y))
        grads = jax.vmap(
            jax.grad(lambda p, xi, yi: _relu_losses(p, xi[None], yi[None])[0]),
            in_axes=(None, 0, 0),
        )(params, x, y)
        jac = jax.vmap(lambda t: ravel_pytree(t)[0])(grads)
        u = 0.9 * ravel_pytree(state[0].trace)[0] + jnp.mean(jac, axis=0)
        d = ravel_pytree(new_state[0].trace)[0]
        return jac, u, d, info, first_order_harm(jac, d), first_order_harm(jac, u)

    jac, u, d, info, (rate, mass), (base_rate, base_mass) = run(params)
    assert int(jnp.sum(jac @ u < 0)) > 0  # the base direction harms some samples
    np.testing.assert_allclose(info.update_scale, 0.1, rtol=1e-4)
    # The dual at ridge 0 is NNLS min_{w>=0} ‖Jᵀw + u‖ (scipy, float64, on vmap(grad)'s J).
    reference, _ = nnls(np.asarray(jac, np.float64).T, -np.asarray(u, np.float64))
    np.testing.assert_allclose(info.dual / 0.1, reference, rtol=2e-3, atol=2e-4)
    np.testing.assert_allclose(d, u + (info.dual / 0.1) @ jac, rtol=1e-4, atol=1e-5)
    assert float(rate) == 0.0 and float(base_rate) > 0.0
    assert float(mass) <= 1e-3 * float(base_mass)
    assert int(info.num_violated) == 0 and not bool(info.nonfinite)


def test_first_order_harm_by_hand():
    jac = jnp.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]])
    rate, mass = first_order_harm(jac, jnp.array([2.0, -1.0]))
    # changes ⟨g_i, d⟩ = (2, -1, -1): two harmed, mass (0 + 1 + 1)/3
    assert float(rate) == pytest.approx(2 / 3) and float(mass) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="direction"):
        first_order_harm(jac, jnp.ones(3))


def test_exact_step_rejects_a_non_mlp():
    step = mlp_exact_harm_train_step(optax.sgd(0.1))
    with pytest.raises(TypeError, match="params"):
        step({"w": jnp.ones((2, 2))}, None, (jnp.ones((1, 2)), jnp.zeros(1, jnp.int32)))
    with pytest.raises(ValueError, match="ridge"):
        mlp_exact_harm_train_step(optax.sgd(0.1), ridge=-1.0)
