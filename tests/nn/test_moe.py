"""Mixture of experts: dense-mixture limit, gates, capacity, router gradients, balance loss."""

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

from jaxlab.nn import (
    MixtureOfExperts,
    MoEStats,
    TopKRouter,
    capacity_keep_mask,
    load_balancing_loss,
)

D, H, M = 6, 8, 4


def _moe(top_k, *, gate="softmax_topk", capacity_factor=None, seed=0, router_init_std=1.0):
    # A router scale of 1 makes the routing decisions and gates far from uniform.
    return MixtureOfExperts(
        D,
        H,
        M,
        top_k,
        gate=gate,
        capacity_factor=capacity_factor,
        router_init_std=router_init_std,
        rngs=nnx.Rngs(seed),
    )


def _tokens(n=24, seed=1):
    return jax.random.normal(jax.random.key(seed), (n, D))


def _numpy_layer(moe, x):
    """Reference: every expert evaluated one at a time in numpy (float64)."""
    x = np.asarray(x, np.float64)
    logits = x @ np.asarray(moe.router.kernel[...], np.float64)
    w_in = np.asarray(moe.w_in[...], np.float64)
    w_out = np.asarray(moe.w_out[...], np.float64)
    outputs = []
    for e in range(moe.num_experts):
        pre = x @ w_in[e]
        gelu = 0.5 * pre * (1 + np.tanh(np.sqrt(2 / np.pi) * (pre + 0.044715 * pre**3)))
        outputs.append(gelu @ w_out[e])
    return logits, np.stack(outputs, axis=1)  # [N, M], [N, M, D]


def _softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    return np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)


# ------------------------------------------------------------------------------------------------
# Forward pass against the numpy reference.


@pytest.mark.parametrize("gate", ["softmax_topk", "topk_softmax"])
def test_top_k_equal_to_num_experts_is_the_dense_mixture(gate):
    moe = _moe(M, gate=gate)
    x = _tokens()
    y, stats = moe(x)
    logits, outputs = _numpy_layer(moe, x)
    dense = np.einsum("ne,ned->nd", _softmax(logits), outputs)
    np.testing.assert_allclose(np.asarray(y), dense, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(np.asarray(stats.router_probs), _softmax(logits), rtol=1e-5)
    assert float(stats.dropped_fraction) == 0.0


@pytest.mark.parametrize("top_k", [1, 2, 3])
@pytest.mark.parametrize("gate", ["softmax_topk", "topk_softmax"])
def test_sparse_gates_match_numpy(top_k, gate):
    moe = _moe(top_k, gate=gate)
    x = _tokens()
    y, stats = moe(x)
    logits, outputs = _numpy_layer(moe, x)
    top = np.argsort(-logits, axis=-1, kind="stable")[:, :top_k]
    mask = np.zeros_like(logits, bool)
    np.put_along_axis(mask, top, True, axis=-1)
    probs = _softmax(logits)
    if gate == "softmax_topk":
        gates = np.where(mask, probs, 0.0)
    else:
        gates = np.where(mask, probs, 0.0) / np.where(mask, probs, 0.0).sum(-1, keepdims=True)
    np.testing.assert_array_equal(np.asarray(stats.dispatch_mask), mask)
    np.testing.assert_allclose(np.asarray(stats.combine_weights), gates, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(
        np.asarray(y), np.einsum("ne,ned->nd", gates, outputs), rtol=2e-5, atol=2e-5
    )
    np.testing.assert_allclose(np.asarray(stats.expert_load), mask.sum(0) / (top_k * len(x)))


def test_leading_axes_are_flattened_into_tokens():
    moe = _moe(2, capacity_factor=1.0)
    x = jax.random.normal(jax.random.key(3), (3, 8, D))
    y, stats = moe(x)
    y_flat, stats_flat = moe(jnp.reshape(x, (24, D)))
    np.testing.assert_allclose(np.asarray(y), np.reshape(np.asarray(y_flat), (3, 8, D)))
    assert isinstance(stats, MoEStats)
    assert stats.router_probs.shape == (24, M)
    assert float(stats.load_balancing_loss) == pytest.approx(float(stats_flat.load_balancing_loss))


def test_jit_and_bfloat16_input():
    moe = _moe(2)
    graphdef, state = nnx.split(moe)
    apply = jax.jit(lambda state, x: nnx.merge(graphdef, state)(x))
    x = _tokens()
    y, _ = apply(state, x)
    np.testing.assert_allclose(np.asarray(y), np.asarray(moe(x)[0]), rtol=1e-6, atol=1e-6)
    y16, _ = moe(x.astype(jnp.bfloat16))
    assert y16.dtype == jnp.bfloat16


# ------------------------------------------------------------------------------------------------
# Capacity.


def _reference_keep(expert_index: np.ndarray, num_experts: int, capacity: int) -> np.ndarray:
    """Sequential GShard priority: choice rank first, then token order; fill until full."""
    num_tokens, top_k = expert_index.shape
    filled = np.zeros(num_experts, int)
    keep = np.zeros((num_tokens, num_experts), bool)
    for rank in range(top_k):
        for n in range(num_tokens):
            e = expert_index[n, rank]
            if filled[e] < capacity:
                filled[e] += 1
                keep[n, e] = True
    return keep


@pytest.mark.parametrize("top_k,capacity_factor", [(1, 1.0), (2, 0.5), (2, 1.0), (3, 0.7)])
def test_capacity_is_respected_and_drops_are_counted(top_k, capacity_factor):
    moe = _moe(top_k, capacity_factor=capacity_factor)
    x = _tokens(n=40)
    y, stats = moe(x)
    capacity = math.ceil(capacity_factor * top_k * 40 / M)
    assert moe.capacity(40) == capacity
    logits, outputs = _numpy_layer(moe, x)
    index = np.argsort(-logits, axis=-1, kind="stable")[:, :top_k]
    keep = _reference_keep(index, M, capacity)
    kept = np.asarray(stats.combine_weights) > 0
    np.testing.assert_array_equal(kept, keep)
    assert kept.sum(axis=0).max() <= capacity  # no expert above its capacity
    assert int(stats.num_dropped) == top_k * 40 - keep.sum()
    assert float(stats.dropped_fraction) == pytest.approx((top_k * 40 - keep.sum()) / (top_k * 40))
    # The unbalanced router (std 1) overflows some expert at these factors: drops really happen.
    assert int(stats.num_dropped) > 0
    # Dropped assignments contribute nothing; kept gates are not renormalised.
    gates = np.where(keep, _softmax(logits), 0.0)
    np.testing.assert_allclose(
        np.asarray(y), np.einsum("ne,ned->nd", gates, outputs), rtol=2e-5, atol=2e-5
    )
    # The balance statistics use the routing decision before capacity.
    assert float(np.asarray(stats.expert_load).sum()) == pytest.approx(1.0)


def test_large_capacity_drops_nothing():
    moe = _moe(2, capacity_factor=float(M))  # C = K N: every assignment fits
    y, stats = moe(_tokens())
    y_free, _ = _moe(2)(_tokens())
    assert int(stats.num_dropped) == 0
    np.testing.assert_array_equal(np.asarray(y), np.asarray(y_free))


@settings(max_examples=25, deadline=None)
@given(
    num_tokens=st.integers(1, 12),
    num_experts=st.integers(1, 5),
    data=st.data(),
)
def test_capacity_mask_property(num_tokens, num_experts, data):
    top_k = data.draw(st.integers(1, num_experts))
    capacity = data.draw(st.integers(1, num_tokens * top_k))
    rows = [data.draw(st.permutations(range(num_experts)))[:top_k] for _ in range(num_tokens)]
    index = np.asarray(rows, np.int32).reshape(num_tokens, top_k)
    keep = np.asarray(capacity_keep_mask(jnp.asarray(index), num_experts, capacity))
    np.testing.assert_array_equal(keep, _reference_keep(index, num_experts, capacity))
    assert keep.sum(axis=0).max() <= capacity


# ------------------------------------------------------------------------------------------------
# Router gradients (the note's pitfall).


@functools.cache
def _router_task_gradient(top_k: int, gate: str):
    """Gradient of the task loss (MSE of y, no balance loss) w.r.t. the router kernel."""
    moe = _moe(top_k, gate=gate)
    x = _tokens()
    target = jax.random.normal(jax.random.key(7), x.shape)

    def task_loss(model):
        y, _ = model(x)
        return jnp.mean((y - target) ** 2)

    grads = nnx.jit(nnx.grad(task_loss))(moe)  # one program, not one per eager op
    return np.asarray(grads.router.kernel[...])


@pytest.mark.parametrize("top_k", [1, 2, 3, 4])
def test_softmax_topk_router_gets_a_task_gradient_for_every_k(top_k):
    grad = _router_task_gradient(top_k, "softmax_topk")
    assert np.linalg.norm(grad) > 1e-4


def test_topk_softmax_router_gets_no_task_gradient_at_k1():
    """Renormalised over one expert the gate is identically 1: exactly zero gradient."""
    grad = _router_task_gradient(1, "topk_softmax")
    assert np.all(grad == 0.0)
    # ... while the balance loss still reaches the router, and K = 2 gets a task gradient.
    moe = _moe(1, gate="topk_softmax")
    aux = nnx.jit(nnx.grad(lambda m: m(_tokens())[1].load_balancing_loss))(moe)
    assert np.linalg.norm(np.asarray(aux.router.kernel[...])) > 1e-4
    assert np.linalg.norm(_router_task_gradient(2, "topk_softmax")) > 1e-4


def test_router_gradient_matches_central_differences(x64):
    moe = _moe(1, gate="softmax_topk")
    graphdef, params = nnx.split(moe)
    x = jnp.asarray(_tokens(), jnp.float64)
    target = jax.random.normal(jax.random.key(7), x.shape, jnp.float64)
    params = jax.tree.map(lambda p: jnp.asarray(p, jnp.float64), params)

    def loss(router_kernel):
        state = jax.tree.map(lambda p: p, params)
        state["router"]["kernel"] = nnx.Param(router_kernel)
        y, stats = nnx.merge(graphdef, state)(x)
        return jnp.mean((y - target) ** 2) + 1e-2 * stats.load_balancing_loss

    kernel = params["router"]["kernel"][...]
    direction = jax.random.normal(jax.random.key(9), kernel.shape, jnp.float64)
    step = 1e-6  # small enough that no top-1 decision flips
    # Both evaluations of the loss run one compiled program (eagerly every op compiles apart).
    value = jax.jit(loss)
    numeric = (value(kernel + step * direction) - value(kernel - step * direction)) / (2 * step)
    analytic = jnp.vdot(jax.jit(jax.grad(loss))(kernel), direction)
    assert float(analytic) == pytest.approx(float(numeric), rel=1e-6)


# ------------------------------------------------------------------------------------------------
# Balance loss.


def test_load_balancing_loss_closed_forms():
    n = 12
    uniform = jnp.full((n, M), 1.0 / M)
    round_robin = jax.nn.one_hot(jnp.arange(n) % M, M) > 0
    assert float(load_balancing_loss(uniform, round_robin, 1)) == pytest.approx(1.0)
    collapsed = jnp.tile(jax.nn.one_hot(0, M), (n, 1))
    assert float(load_balancing_loss(collapsed, collapsed > 0, 1)) == pytest.approx(M)
    # Top-2 round robin with uniform probabilities is also perfectly balanced.
    two = round_robin | (jax.nn.one_hot((jnp.arange(n) + 1) % M, M) > 0)
    assert float(load_balancing_loss(uniform, two, 2)) == pytest.approx(1.0)


def test_load_balancing_loss_value_and_gradient_against_numpy():
    probs = jax.nn.softmax(jax.random.normal(jax.random.key(0), (2, 10, M)), axis=-1)
    mask = jax.random.uniform(jax.random.key(1), (2, 10, M)) > 0.5
    p, m = np.asarray(probs).reshape(20, M), np.asarray(mask).reshape(20, M)
    f = m.sum(0) / (2 * 20)
    expected = M * np.sum(f * p.mean(0))
    assert float(load_balancing_loss(probs, mask, 2)) == pytest.approx(expected, rel=1e-6)
    grad = jax.grad(load_balancing_loss)(probs, mask, 2)
    # d/dprobs[n, e] = M f_e / N for every token n.
    np.testing.assert_allclose(
        np.asarray(grad).reshape(20, M), np.tile(M * f / 20, (20, 1)), rtol=1e-6
    )


def test_stats_balance_loss_matches_function():
    moe = _moe(2)
    _, stats = moe(_tokens())
    assert float(stats.load_balancing_loss) == pytest.approx(
        float(load_balancing_loss(stats.router_probs, stats.dispatch_mask, 2))
    )
    assert float(stats.load_balancing_loss) >= 1.0 - 1e-6  # Cauchy-Schwarz-type lower bound


# ------------------------------------------------------------------------------------------------
# Cost, tie-breaking, bad input.


def test_flops_per_token_closed_form_and_xla_count():
    for top_k in (1, 2, 4):
        assert _moe(top_k).flops_per_token() == 2 * D * M + top_k * 4 * D * H
    # At K = M sparse and dense costs coincide: XLA's count of the compiled forward is the
    # analytic count plus the (cheap) activation and gating.
    moe = MixtureOfExperts(16, 32, 4, 4, rngs=nnx.Rngs(0))
    graphdef, state = nnx.split(moe)
    forward = jax.jit(lambda state, x: nnx.merge(graphdef, state)(x)[0])
    analysis = forward.lower(state, jnp.ones((64, 16))).compile().cost_analysis()
    if isinstance(analysis, list):
        analysis = analysis[0]
    if not analysis or "flops" not in analysis:
        pytest.skip("this backend gives no cost analysis")
    analytic = 64 * moe.flops_per_token()
    assert analytic <= analysis["flops"] <= 1.2 * analytic


def _sparse(top_k, capacity_factor, *, d=D, h=H, m=M, **kwargs):
    return MixtureOfExperts(
        d,
        h,
        m,
        top_k,
        capacity_factor=capacity_factor,
        dispatch="sparse",
        rngs=nnx.Rngs(0),
        **kwargs,
    )


def test_dispatch_flops_per_token_closed_forms():
    router, expert = 2 * D * M, 4 * D * H  # 48, 192
    # Dense runs all M experts whatever K, N and the capacity.
    for top_k, capacity_factor in ((1, None), (4, None), (2, 0.5)):
        moe = _moe(top_k, capacity_factor=capacity_factor)
        assert moe.dispatch_flops_per_token(7) == router + M * expert == 816
    # Sparse runs M·C slots, C = ceil(c·K·N/M), spread over N tokens.
    assert _sparse(2, 1.0).dispatch_flops_per_token(24) == router + 2 * expert  # C = 12
    assert _sparse(2, 1.0).dispatch_flops_per_token(24) == _sparse(2, 1.0).flops_per_token()
    assert _sparse(1, 1.25).dispatch_flops_per_token(10) == pytest.approx(355.2)  # C = 4
    assert _sparse(2, 0.5).dispatch_flops_per_token(7) == pytest.approx(router + 8 / 7 * expert)
    # One token takes a slot in every expert: as dear as dense. c·K > M: dearer than dense.
    assert _sparse(1, 1.0).dispatch_flops_per_token(1) == 816
    assert _sparse(M, 1.25).dispatch_flops_per_token(8) == router + 5 * expert  # C = 10


@settings(max_examples=30, deadline=None)
@given(
    num_experts=st.integers(1, 8),
    data=st.data(),
    capacity_factor=st.floats(0.1, 4.0),
    num_tokens=st.integers(1, 500),
)
def test_sparse_dispatch_flops_bracket_c_times_k(num_experts, data, capacity_factor, num_tokens):
    # ceil adds less than one slot per expert: c·K <= M·C/N < c·K + M/N experts per token.
    top_k = data.draw(st.integers(1, num_experts))
    moe = _sparse(top_k, capacity_factor, m=num_experts)
    router, expert = 2 * D * num_experts, 4 * D * H
    experts = (moe.dispatch_flops_per_token(num_tokens) - router) / expert
    assert capacity_factor * top_k - 1e-9 <= experts
    assert experts < capacity_factor * top_k + num_experts / num_tokens + 1e-9


def _xla_flops_per_token(moe, num_tokens):
    graphdef, state = nnx.split(moe)
    forward = jax.jit(lambda state, x: nnx.merge(graphdef, state)(x)[0])
    x = jnp.ones((num_tokens, moe.in_features))
    analysis = forward.lower(state, x).compile().cost_analysis()
    if isinstance(analysis, list):
        analysis = analysis[0]
    if not analysis or "flops" not in analysis:
        pytest.skip("this backend gives no cost analysis")
    return analysis["flops"] / num_tokens


def test_dispatch_flops_per_token_matches_xla_count():
    # XLA counts every op of the compiled forward; the method counts the matmuls. With an identity
    # activation the rest (gating, router softmax, the slot assignment's one-hot and cumsum, the
    # scatter-add) is O(d + K·M) per token against 4dh = 65536 per expert row: measured under 1 %
    # at these sizes, so 2 % bounds it. N = 36 is no multiple of M: the ceiling matters (dropping
    # it, or counting K instead of M·C/N experts, misses by >= 6 %).
    d, h, m, n = 64, 256, 8, 36
    xla = {}
    for top_k, capacity_factor in ((3, None), (1, 1.25), (3, 1.0), (3, 0.5), (8, 1.25)):
        kwargs = {"activation": lambda z: z, "rngs": nnx.Rngs(0)}
        if capacity_factor is None:
            moe = MixtureOfExperts(d, h, m, top_k, **kwargs)
        else:
            moe = MixtureOfExperts(
                d, h, m, top_k, capacity_factor=capacity_factor, dispatch="sparse", **kwargs
            )
        expected = moe.dispatch_flops_per_token(n)
        xla[top_k, capacity_factor] = measured = _xla_flops_per_token(moe, n)
        assert expected <= measured <= 1.02 * expected, (top_k, capacity_factor)
        if capacity_factor is not None:  # the band tells the real count from the ideal ones
            unrounded = 2 * d * m + capacity_factor * top_k * 4 * d * h  # C without the ceiling
            for wrong in {moe.flops_per_token(), unrounded} - {expected}:
                assert not wrong <= measured <= 1.02 * wrong, (top_k, capacity_factor, wrong)
    # Sparse with c·K > M executes more than dense (slots beyond N stay empty but are computed).
    assert xla[8, 1.25] > xla[3, None]


def test_dispatch_flops_per_token_rejects_bad_num_tokens():
    moe = _sparse(2, 1.0)
    for bad in (0, -3):
        with pytest.raises(ValueError, match="num_tokens must be an int >= 1"):
            moe.dispatch_flops_per_token(bad)
    for bad in (2.5, "8", None):
        with pytest.raises(TypeError, match="num_tokens"):
            moe.dispatch_flops_per_token(bad)
    with pytest.raises(ValueError, match="num_tokens"):
        _moe(2).dispatch_flops_per_token(0)  # checked for dense too, though unused there


def test_tie_breaking_noise_only_changes_selection():
    router = TopKRouter(D, M, 1, rngs=nnx.Rngs(0), init_std=0.0)  # all logits tied
    x = _tokens()
    plain = router(x)
    assert np.all(np.asarray(plain.expert_index) == 0)  # ties go to the lowest index
    noisy = router(x, rng_key=jax.random.key(0))
    assert len(np.unique(np.asarray(noisy.expert_index))) > 1
    np.testing.assert_allclose(np.asarray(noisy.gates.sum(-1)), 1.0 / M)


@pytest.mark.parametrize("top_k", [0, M + 1, -1])
def test_top_k_out_of_range(top_k):
    with pytest.raises(ValueError, match="top_k"):
        _moe(top_k)
    with pytest.raises(ValueError, match="top_k"):
        TopKRouter(D, M, top_k, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="top_k"):
        load_balancing_loss(jnp.ones((3, M)) / M, jnp.ones((3, M), bool), top_k)


def test_bad_arguments():
    with pytest.raises(TypeError, match="top_k"):
        _moe(2.0)
    with pytest.raises(ValueError, match="gate"):
        _moe(2, gate="softmax")
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="capacity_factor"):
            _moe(2, capacity_factor=bad)
    with pytest.raises(TypeError, match="capacity_factor"):
        _moe(2, capacity_factor="1.0")
    with pytest.raises(ValueError, match="num_experts"):
        MixtureOfExperts(D, H, 0, 1, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="x must have last axis"):
        _moe(2)(jnp.ones((3, D + 1)))
    with pytest.raises(ValueError, match="same shape"):
        load_balancing_loss(jnp.ones((3, M)), jnp.ones((3, M + 1)), 1)


def test_integer_and_malformed_input_is_rejected():
    moe = _moe(2)
    x = _tokens()
    y, _ = moe(x)
    assert float(jnp.abs(y).max()) > 0  # the float layer is not trivially zero
    ints = jnp.round(x * 3).astype(jnp.int32)
    # Before: the weights were cast to int32 (all |w| < 1 -> 0) and the output was all zeros.
    assert float(jnp.abs(moe(ints.astype(jnp.float32))[0]).max()) > 0
    with pytest.raises(TypeError, match="x must be a floating array, got dtype int32"):
        moe(ints)
    with pytest.raises(TypeError, match="x must be a floating array"):
        moe.router(ints)
    with pytest.raises(TypeError, match="x must be a floating array"):
        moe("tokens")
    with pytest.raises(TypeError, match="rng_key must be a JAX PRNG key"):
        moe(x, rng_key=0)
    with pytest.raises(ValueError, match="router_init_std"):
        _moe(2, router_init_std=float("inf"))
    with pytest.raises(ValueError, match="init_std must be finite"):
        TopKRouter(D, M, 2, init_std=float("nan"), rngs=nnx.Rngs(0))


def test_capacity_keep_mask_checks_indices_and_capacity():
    index = jnp.array([[0, 1], [1, 2]])
    np.testing.assert_array_equal(
        np.asarray(capacity_keep_mask(index, 3, 1)), _reference_keep(np.asarray(index), 3, 1)
    )
    with pytest.raises(ValueError, match=r"expert_index must lie in \[0, num_experts=3\)"):
        capacity_keep_mask(index.at[1, 1].set(3), 3, 1)  # one_hot would drop it silently
    with pytest.raises(ValueError, match="expert_index must have 2 axes"):
        capacity_keep_mask(index[0], 3, 1)
    with pytest.raises(TypeError, match="expert_index must be an array of integers"):
        capacity_keep_mask(index.astype(jnp.float32), 3, 1)
    with pytest.raises(ValueError, match="capacity must be an int >= 0"):
        capacity_keep_mask(index, 3, -1)


def _outputs_stats_and_grads(model, x):
    """``model(x)`` and the gradient of ``sum(y**2)`` w.r.t. its parameters, in one compiled
    program (run eagerly, every operation of the layer and of its gradient compiles apart)."""
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)

    @jax.jit
    def run(params, rest, x):
        def loss(params):
            y, stats = nnx.merge(graphdef, params, rest)(x)
            return jnp.sum(y**2), (y, stats)

        (_, (y, stats)), grads = jax.value_and_grad(loss, has_aux=True)(params)
        return y, stats, grads

    return run(params, rest, x)


@pytest.mark.parametrize("capacity_factor", [0.5, 1.0, 4.0])
def test_sparse_dispatch_equals_dense_masked(x64, capacity_factor):
    # Same weights (same seed), same routing and capacity: the per-expert buffers give the dense
    # layer's outputs, statistics and gradients, with and without dropped assignments.
    dense = _moe(2, capacity_factor=capacity_factor)
    sparse = MixtureOfExperts(
        D,
        H,
        M,
        2,
        capacity_factor=capacity_factor,
        dispatch="sparse",
        router_init_std=1.0,
        rngs=nnx.Rngs(0),
    )
    x = jax.random.normal(jax.random.key(3), (4, 9, D), dtype=jnp.float64)
    (y_d, s_d, g_d), (y_s, s_s, g_s) = (
        _outputs_stats_and_grads(dense, x),
        _outputs_stats_and_grads(sparse, x),
    )
    np.testing.assert_allclose(y_s, y_d, rtol=1e-12, atol=1e-12)
    assert int(s_s.num_dropped) == int(s_d.num_dropped)
    if capacity_factor == 0.5:
        assert int(s_d.num_dropped) > 0  # the drop path is exercised
    np.testing.assert_array_equal(s_s.combine_weights, s_d.combine_weights)
    for a, b in zip(jax.tree.leaves(g_s), jax.tree.leaves(g_d), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_sparse_dispatch_needs_a_capacity():
    with pytest.raises(ValueError, match="capacity_factor"):
        MixtureOfExperts(D, H, M, 2, dispatch="sparse", rngs=nnx.Rngs(0))
