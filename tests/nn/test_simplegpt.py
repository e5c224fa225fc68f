"""SimpleNorm, SimpleGPT and its recipe against the note's reference checks (closed forms)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.special
from flax import nnx

from jaxlab.nn import (
    GPTConfig,
    SimpleGPT,
    SimpleNorm,
    depth_init_std,
    ffn_hidden_size,
    language_model_loss,
    rotary_embedding,
    simplegpt_optimizer,
    simplegpt_schedule,
)
from jaxlab.nn._simplegpt import _Norm

PLACEMENTS = ("simple", "pre", "pre_qk")
# One tiny shape shared by the model tests (V = 256, d = 32, L = 2, 4 heads).
TINY = dict(vocab_size=256, d_model=32, num_layers=2, num_heads=4, multiple_of=32, max_len=16)


def _n_params(module) -> int:
    return sum(int(x.size) for x in jax.tree.leaves(nnx.state(module, nnx.Param)))


@pytest.fixture(scope="module")
def tiny_models():
    return {p: SimpleGPT(GPTConfig(**TINY, norm_placement=p), rngs=nnx.Rngs(0)) for p in PLACEMENTS}


# ---------------------------------------------------------------------------------------------
# SimpleNorm (check 5).


def test_simplenorm_rms_matches_closed_form():
    eps = 1e-2  # large, so sqrt(ms/(ms+eps)) is visibly below 1
    layer = SimpleNorm(16, 24, epsilon=eps, rngs=nnx.Rngs(0))
    x = jax.random.normal(jax.random.key(1), (5, 16))
    y = np.asarray(layer(x), np.float64)
    u = np.asarray(x, np.float64) @ np.asarray(layer.linear.kernel[...], np.float64)
    ms = np.mean(u**2, axis=-1)
    np.testing.assert_allclose(np.sqrt(np.mean(y**2, axis=-1)), np.sqrt(ms / (ms + eps)), rtol=1e-4)
    # The output itself: γ ⊙ u/√(ms + ε) with γ = 1.
    np.testing.assert_allclose(y, u / np.sqrt(ms + eps)[:, None], rtol=1e-4, atol=1e-6)


def _float64_layer(epsilon):
    layer = SimpleNorm(8, 12, epsilon=epsilon, rngs=nnx.Rngs(0))
    layer.linear.kernel.set_value(layer.linear.kernel[...].astype(jnp.float64))
    layer.norm.scale.set_value(layer.norm.scale[...].astype(jnp.float64))
    return layer


def _psi(layer, kernel, x):
    """Ψ with the kernel passed in (the layer's own norm), so it can be differentiated."""
    return layer.norm(x @ kernel)


def test_simplenorm_norm_is_sqrt_d_and_scale_invariant(x64):
    layer = _float64_layer(0.0)
    x = jax.random.normal(jax.random.key(2), (3, 8), jnp.float64)
    y = layer(x)
    assert y.dtype == jnp.float64
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), math.sqrt(12), rtol=1e-12)
    w = layer.linear.kernel[...]
    np.testing.assert_allclose(_psi(layer, w, x), y, atol=1e-15)
    np.testing.assert_allclose(_psi(layer, 10.0 * w, x), y, atol=1e-12)


def test_simplenorm_gradient_orthogonal_to_w(x64):
    layer = _float64_layer(0.0)
    w = layer.linear.kernel[...]
    x = jax.random.normal(jax.random.key(3), (6, 8), jnp.float64)
    target = jax.random.normal(jax.random.key(4), (6, 12), jnp.float64)
    grad = jax.grad(lambda kernel: jnp.sum((_psi(layer, kernel, x) - target) ** 2))(w)
    assert abs(float(jnp.vdot(grad, w))) <= 1e-12 * float(
        jnp.linalg.norm(grad) * jnp.linalg.norm(w)
    )
    assert float(jnp.linalg.norm(grad)) > 1e-3  # the gradient itself is not zero


def test_simplenorm_scale_derivative_with_epsilon(x64):
    eps = 1e-3
    layer = _float64_layer(eps)
    w = layer.linear.kernel[...]
    gain = jnp.linspace(0.5, 2.0, 12, dtype=jnp.float64)
    layer.norm.scale.set_value(gain)
    x = jax.random.normal(jax.random.key(5), (4, 8), jnp.float64)
    derivative = jax.jacfwd(lambda c: _psi(layer, c * w, x))(jnp.float64(1.0))
    u = x @ w
    ms = jnp.mean(u**2, axis=-1, keepdims=True)
    expected = gain[None, :] * u * eps / (ms + eps) ** 1.5
    np.testing.assert_allclose(derivative, expected, rtol=1e-9, atol=1e-14)


def test_simplenorm_statistics_in_float32_for_bf16():
    layer = SimpleNorm(16, 32, rngs=nnx.Rngs(0))
    x = jax.random.normal(jax.random.key(6), (4, 16))
    y16 = layer(x.astype(jnp.bfloat16))
    assert y16.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(y16, np.float32), np.asarray(layer(x)), atol=5e-2)


def test_simplenorm_layer_norm_option_and_groups():
    layer = SimpleNorm(8, 12, norm="layer", rngs=nnx.Rngs(0))
    y = layer(jax.random.normal(jax.random.key(7), (5, 8)))
    np.testing.assert_allclose(np.mean(np.asarray(y), -1), 0.0, atol=1e-5)
    grouped = SimpleNorm(8, 12, num_groups=3, epsilon=0.0, rngs=nnx.Rngs(0))
    yg = np.asarray(grouped(jax.random.normal(jax.random.key(7), (5, 8)))).reshape(5, 3, 4)
    np.testing.assert_allclose(np.mean(yg**2, axis=-1), 1.0, rtol=1e-5)


def test_simplenorm_bad_input():
    with pytest.raises(ValueError, match="out_features"):
        SimpleNorm(4, 0, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="epsilon"):
        SimpleNorm(4, 4, epsilon=-1.0, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="norm"):
        SimpleNorm(4, 4, norm="batch", rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="num_groups"):
        SimpleNorm(4, 6, num_groups=4, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="in_features"):
        SimpleNorm(4, 4, rngs=nnx.Rngs(0))(jnp.ones((2, 5)))


# ---------------------------------------------------------------------------------------------
# Config, widths and parameter counts (checks 1 and 2).


@pytest.mark.parametrize(
    "d,mult,m,expected",
    [(2048, 1.0, 256, 5632), (4096, 1.0, 256, 11008), (64, 1.0, 32, 192), (128, 1.0, 32, 352),
     (4096, 1.3, 256, 14336)],
)  # fmt: skip
def test_ffn_hidden_size_note_values(d, mult, m, expected):
    config = GPTConfig(256, d, 1, 16, max_len=8, ffn_multiplier=mult, multiple_of=m)
    assert ffn_hidden_size(config) == expected


def test_ffn_hidden_size_relu_is_four_d():
    assert ffn_hidden_size(GPTConfig(256, 64, 1, 4, max_len=8, multiple_of=32, ffn="relu")) == 256


_NOTE_COUNTS = {
    (64, 2): (139_584, 139_840, 140_736),
    (128, 2): (467_584, 468_096, 469_760),
    (128, 4): (869_504, 870_528, 873_856),
    (256, 4): (3_344_640, 3_346_688, 3_353_344),
}


@pytest.mark.parametrize("d,layers", sorted(_NOTE_COUNTS))
def test_parameter_counts_match_note(d, layers):
    for placement, expected in zip(
        ("pre", "pre_qk", "simple"), _NOTE_COUNTS[d, layers], strict=True
    ):
        config = GPTConfig(256, d, layers, 4, max_len=8, multiple_of=32, norm_placement=placement)
        # eval_shape: counts without drawing 3M random numbers.
        model = nnx.eval_shape(lambda config=config: SimpleGPT(config, rngs=nnx.Rngs(0)))
        assert _n_params(model) == expected, placement


def test_parameter_count_formula_with_gqa():
    # Gains per layer (simple): H·d_h + 2·n_kv·d_h + d (attention) + 2·d_ff + d (FFN).
    d, h, kv, layers, v = 64, 4, 2, 2, 256
    config = GPTConfig(v, d, layers, h, num_kv_heads=kv, max_len=8, multiple_of=32)
    d_ff, dh = ffn_hidden_size(config), d // h
    weights = d * h * dh + 2 * d * kv * dh + h * dh * d + 3 * d * d_ff
    gains = h * dh + 2 * kv * dh + d + 2 * d_ff + d
    expected = 2 * v * d + d + layers * (weights + gains)
    model = nnx.eval_shape(lambda: SimpleGPT(config, rngs=nnx.Rngs(0)))
    assert _n_params(model) == expected


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(num_heads=3), "num_heads=3 must divide d_model=32"),
        (dict(num_heads=32), "head_dim"),
        (dict(num_kv_heads=3), "num_kv_heads=3 must divide num_heads=4"),
        (dict(norm_placement="post"), "norm_placement"),
        (dict(ffn="gelu"), "ffn"),
        (dict(max_len=0), "max_len"),
        (dict(epsilon=0.0), "epsilon"),
        (dict(num_experts=-1), "num_experts"),
        (dict(num_experts=2, experts_top_k=3), "experts_top_k"),
        (dict(ffn_multiplier=0.0), "ffn_multiplier"),
    ],
)
def test_config_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GPTConfig(**{**TINY, **kwargs})


def test_max_len_is_required():
    with pytest.raises(TypeError, match="max_len"):
        GPTConfig(256, 32, 1, 4)  # type: ignore[call-arg]


# ---------------------------------------------------------------------------------------------
# The model: init, placement, bad input (checks 3 and 4).


def test_depth_init_stds_match_note():
    np.testing.assert_allclose(
        [depth_init_std(layer, 4) for layer in range(4)],
        [0.014142, 0.010000, 0.008165, 0.007071],
        atol=1e-6,
    )
    assert depth_init_std(3, 4, depth_init=False) == pytest.approx(0.02 / math.sqrt(8))


def test_initial_weights_have_the_note_stds():
    config = GPTConfig(256, 256, 4, 4, max_len=8, multiple_of=32)
    model = SimpleGPT(config, rngs=nnx.Rngs(0))
    for i, block in enumerate(model.blocks):
        expected = 0.02 / math.sqrt(2 * (i + 1))
        for layer in (block.attention.o, block.ffn.w2, block.ffn.w3):
            assert np.std(layer.linear.kernel[...]) == pytest.approx(expected, rel=0.03)
        for layer in (block.attention.q, block.attention.k, block.attention.v, block.ffn.w1):
            assert np.std(layer.linear.kernel[...]) == pytest.approx(0.02, rel=0.03)
            np.testing.assert_array_equal(layer.norm.scale[...], 1.0)
    assert np.std(model.embedding[...]) == pytest.approx(1.0, rel=0.03)
    head = np.asarray(model.head[...])
    assert np.max(np.abs(head)) <= 3.0 / 16.0 + 1e-6  # truncated at 3 std, std = d^-1/2
    # A normal truncated at ±3σ has variance 0.97333σ² (closed form).
    assert np.var(head) == pytest.approx(0.97333 / 256, rel=0.03)


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_initial_loss_near_log_v_plus_half(placement):
    config = GPTConfig(256, 64, 2, 4, max_len=64, multiple_of=32, norm_placement=placement)
    model = SimpleGPT(config, rngs=nnx.Rngs(1))
    tokens = jax.random.randint(jax.random.key(10), (32, 64), 0, 256)  # 2048 tokens
    targets = jax.random.randint(jax.random.key(11), (32, 64), 0, 256)
    loss = float(language_model_loss(model, tokens, targets))
    assert abs(loss - 6.04) < 0.08, loss


def test_logits_float32_and_loss_matches_manual_cross_entropy(tiny_models):
    tokens = jax.random.randint(jax.random.key(0), (2, 16), 0, 256)
    targets = jnp.roll(tokens, -1, axis=1)
    for model in tiny_models.values():
        logits = model(tokens)
        assert logits.shape == (2, 16, 256) and logits.dtype == jnp.float32
        logp = scipy.special.log_softmax(np.asarray(logits, np.float64), axis=-1)
        manual = -np.mean(np.take_along_axis(logp, np.asarray(targets)[..., None], -1))
        assert float(language_model_loss(model, tokens, targets)) == pytest.approx(manual, rel=1e-5)


def test_model_is_causal(tiny_models):
    tokens = jax.random.randint(jax.random.key(1), (1, 16), 0, 256)
    changed = tokens.at[0, 10].set((tokens[0, 10] + 1) % 256)
    for model in tiny_models.values():
        a, b = np.asarray(model(tokens)), np.asarray(model(changed))
        np.testing.assert_allclose(a[:, :10], b[:, :10], atol=1e-5)
        assert np.max(np.abs(a[:, 10:] - b[:, 10:])) > 1e-3


def test_simplenorm_outputs_have_unit_rms(tiny_models):
    tokens = jax.random.randint(jax.random.key(2), (4, 16), 0, 256)
    rms = tiny_models["simple"].activation_rms(tokens)
    normalized = {k: float(v) for k, v in rms.items() if not k.endswith("residual")}
    assert len(normalized) == 2 * 7 + 1  # q, k, v, o, w1, w3, w2 per layer + final norm
    # RMS = sqrt(ms/(ms + eps)) <= 1 with eps = 1e-5: within 1% of 1 at these scales.
    values = np.asarray(list(normalized.values()))
    assert np.all((values > 0.99) & (values <= 1.0 + 1e-6)), normalized
    # PreNorm's projections are not normalized: far below 1 at init (std 0.02 weights).
    assert float(tiny_models["pre"].activation_rms(tokens)["layer0.attention.v"]) < 0.5


def test_pre_qk_normalizes_whole_q_vector(tiny_models):
    tokens = jax.random.randint(jax.random.key(3), (2, 16), 0, 256)
    rms = tiny_models["pre_qk"].activation_rms(tokens)
    assert float(rms["layer0.attention.q"]) == pytest.approx(1.0, abs=1e-3)
    assert float(tiny_models["pre"].activation_rms(tokens)["layer0.attention.q"]) < 0.5


def _frozen_norm_call(self, u):
    """``_Norm.__call__`` before issue 24's speed-up, kept verbatim as the reference it must match.

    It viewed every vector as ``(..., num_groups, d/num_groups)``, one group included.
    """
    shape = u.shape
    compute = jnp.promote_types(u.dtype, jnp.float32)
    z = jnp.reshape(u.astype(compute), (*shape[:-1], self.num_groups, -1))
    if self.kind == "layer":
        z = z - jnp.mean(z, axis=-1, keepdims=True)
    ms = jnp.mean(z * z, axis=-1, keepdims=True)
    z = jnp.reshape(z * jax.lax.rsqrt(ms + self.epsilon), shape).astype(u.dtype)
    gain = jnp.reshape(self.scale[...].astype(u.dtype), (1,) * (u.ndim - 1) + (-1,))
    return z * gain


def _logits_loss_and_grads(graphdef, params, tokens, targets):
    """Traced afresh on each call, so it uses whatever ``_Norm.__call__`` is in place."""
    logits = jax.jit(lambda p: nnx.merge(graphdef, p)(tokens))(params)
    loss, grads = jax.jit(
        jax.value_and_grad(lambda p: language_model_loss(nnx.merge(graphdef, p), tokens, targets))
    )(params)
    return {"logits": logits, "loss": loss, "grads": grads}


@pytest.mark.parametrize(
    "placement, per_head", [("simple", False), ("pre", False), ("pre_qk", False), ("simple", True)]
)
def test_norm_matches_frozen_reference_in_value_and_gradient(monkeypatch, placement, per_head):
    config = GPTConfig(**TINY, norm_placement=placement, qk_norm_per_head=per_head)
    graphdef, params = nnx.split(SimpleGPT(config, rngs=nnx.Rngs(0)), nnx.Param)
    # Gains away from 1, so a gain applied or differentiated differently would show.
    leaves, treedef = jax.tree_util.tree_flatten_with_path(params)
    leaves = [
        x * (1.0 + 0.3 * jax.random.normal(jax.random.key(i), x.shape))
        if "scale" in jax.tree_util.keystr(path)
        else x
        for i, (path, x) in enumerate(leaves)
    ]
    params = jax.tree_util.tree_unflatten(treedef, leaves)
    tokens = jax.random.randint(jax.random.key(20), (3, 16), 0, 256)
    targets = jnp.roll(tokens, -1, axis=1)
    current = _logits_loss_and_grads(graphdef, params, tokens, targets)
    monkeypatch.setattr(_Norm, "__call__", _frozen_norm_call)
    reference = _logits_loss_and_grads(graphdef, params, tokens, targets)
    flat_current = jax.tree_util.tree_leaves_with_path(current)
    flat_reference = jax.tree.leaves(reference)
    assert len(flat_current) == len(flat_reference) == 2 + len(leaves)
    for (path, got), want in zip(flat_current, flat_reference, strict=True):
        want = np.asarray(want)
        # Float32 rounding only: XLA may order the sums differently for the two layouts; any
        # change in the maths (ε, the gain, mean vs sum) is orders of magnitude larger.
        np.testing.assert_allclose(
            got, want, rtol=1e-5, atol=1e-5 * np.max(np.abs(want)), err_msg=str(path)
        )


def test_rope_is_a_rotation_with_relative_phase():
    x = jax.random.normal(jax.random.key(4), (1, 8, 2, 16))
    y = rotary_embedding(x, 1e4)
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-5)
    np.testing.assert_allclose(y[:, 0], x[:, 0], atol=1e-6)  # position 0 is not rotated
    # Scores depend only on the offset: <R_m q, R_n k> = <R_{m+s} q, R_{n+s} k>.
    q = jnp.broadcast_to(x[:, :1], x.shape)
    k = jnp.broadcast_to(x[:, 1:2], x.shape)
    rq, rk = rotary_embedding(q, 1e4), rotary_embedding(k, 1e4)
    s1 = jnp.sum(rq[:, 3] * rk[:, 1], -1)
    s2 = jnp.sum(rq[:, 6] * rk[:, 4], -1)
    np.testing.assert_allclose(s1, s2, rtol=1e-4)


def test_grouped_query_attention_and_relu_ffn_run():
    config = GPTConfig(**{**TINY, "num_kv_heads": 2, "ffn": "relu", "qk_norm_per_head": True})
    model = SimpleGPT(config, rngs=nnx.Rngs(0))
    logits = model(jnp.zeros((1, 8), jnp.int32))
    assert logits.shape == (1, 8, 256) and bool(jnp.all(jnp.isfinite(logits)))
    rms = model.activation_rms(jnp.zeros((1, 8), jnp.int32))
    # Per-head q norm: each head's 8 entries have RMS 1, so the whole vector does too.
    assert float(rms["layer0.attention.q"]) == pytest.approx(1.0, abs=1e-3)


def test_model_bad_input(tiny_models):
    model = tiny_models["simple"]
    with pytest.raises(ValueError, match="max_len=16"):
        model(jnp.zeros((1, 17), jnp.int32))
    with pytest.raises(TypeError, match="integers"):
        model(jnp.zeros((1, 4), jnp.float32))
    with pytest.raises(ValueError, match="batch, seq_len"):
        model(jnp.zeros((4,), jnp.int32))
    with pytest.raises(ValueError, match="vocab_size"):
        model(jnp.full((1, 4), 256, jnp.int32))
    with pytest.raises(ValueError, match="targets"):
        language_model_loss(model, jnp.zeros((1, 4), jnp.int32), jnp.zeros((1, 5), jnp.int32))
    with pytest.raises(TypeError, match="GPTConfig"):
        SimpleGPT(dict(TINY), rngs=nnx.Rngs(0))


# ---------------------------------------------------------------------------------------------
# Recipe (check 6).


def test_schedule_matches_note_values():
    schedule = simplegpt_schedule(1.0, 15, 300)
    values = [float(schedule(s)) for s in (0, 14, 15, 158, 299)]
    np.testing.assert_allclose(values, [0.0625, 0.9375, 1.0, 0.498246, 0.003509], atol=1e-6)
    scaled = simplegpt_schedule(3e-3, 15, 300)
    assert float(scaled(158)) == pytest.approx(3e-3 * 0.4982456, rel=1e-5)


def test_schedule_bad_input():
    with pytest.raises(ValueError, match="total_steps"):
        simplegpt_schedule(1.0, 10, 10)
    with pytest.raises(ValueError, match="warmup_steps"):
        simplegpt_schedule(1.0, -1, 10)
    with pytest.raises(ValueError, match="peak_lr"):
        simplegpt_schedule(0.0, 1, 10)


def test_optimizer_is_clipped_adamw_on_all_parameters():
    params = {"w": jnp.asarray([1.0, -2.0]), "gain": jnp.asarray([1.0])}
    grads = {"w": jnp.asarray([3.0, 4.0]), "gain": jnp.asarray([0.0])}
    tx = simplegpt_optimizer(0.1, weight_decay=0.1)
    reference = optax.chain(
        optax.clip_by_global_norm(1.0),
        optax.adamw(0.1, b1=0.9, b2=0.95, eps=1e-8, weight_decay=0.1),
    )
    ours, _ = tx.update(grads, tx.init(params), params)
    ref, _ = reference.update(grads, reference.init(params), params)
    jax.tree.map(np.testing.assert_allclose, ours, ref)
    # Decay reaches the gain too (no mask): zero gradient, update = -lr·wd·param.
    np.testing.assert_allclose(ours["gain"], [-0.1 * 0.1 * 1.0], rtol=1e-6)
    with pytest.raises(ValueError, match="weight_decay"):
        simplegpt_optimizer(0.1, weight_decay=-1.0)


# ---------------------------------------------------------------------------------------------
# Mixture of experts in the FFN sublayer.


@pytest.mark.parametrize("placement", ["simple", "pre"])
def test_moe_ffn_adds_weighted_aux_loss(placement):
    config = GPTConfig(**{**TINY, "num_experts": 4, "experts_top_k": 2, "moe_aux_weight": 0.5},
                       norm_placement=placement)  # fmt: skip
    model = SimpleGPT(config, rngs=nnx.Rngs(0))
    tokens = jax.random.randint(jax.random.key(5), (2, 16), 0, 256)

    @nnx.jit  # one compilation instead of an eager dispatch per op (the test is compile-bound)
    def measure(model, tokens):
        total, aux = model.loss_and_aux(tokens, tokens)
        loss = language_model_loss(model, tokens, tokens)
        grads = nnx.grad(lambda m: language_model_loss(m, tokens, tokens))(model)
        return total, aux, loss, model(tokens), model.activation_rms(tokens), grads

    total, aux, loss, logits, rms, grads = measure(model, tokens)
    assert float(aux["moe_aux"]) > 0
    assert float(total) == pytest.approx(float(aux["cross_entropy"] + 0.5 * aux["moe_aux"]))
    assert float(loss) == pytest.approx(float(total))
    manual = jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, tokens))
    assert float(aux["cross_entropy"]) == pytest.approx(float(manual), rel=1e-5)
    if placement == "simple":
        assert float(rms["layer0.ffn.moe"]) == pytest.approx(1.0, abs=1e-3)
    assert all(bool(jnp.all(jnp.isfinite(g))) for g in jax.tree.leaves(grads))


# ---------------------------------------------------------------------------------------------
# Bad input (issue 14): out-of-vocabulary ids, obscure errors.


def test_out_of_vocabulary_ids_are_rejected_when_concrete(tiny_models):
    model = tiny_models["simple"]
    ok = jnp.zeros((1, 4), jnp.int32)
    with pytest.raises(
        ValueError, match=r"tokens must lie in \[0, vocab_size=256\), got .*\[-1, 0\]"
    ):
        model(ok.at[0, 1].set(-1))
    with pytest.raises(ValueError, match=r"targets must lie in \[0, vocab_size=256\).*\[0, 300\]"):
        language_model_loss(model, ok, ok.at[0, 2].set(300))
    with pytest.raises(TypeError, match="targets must be an array of integers"):
        language_model_loss(model, ok, jnp.zeros((1, 4)))
    with pytest.raises(TypeError, match="tokens must be an array of integers"):
        model("abcd")
    with pytest.raises(TypeError, match="model.loss_and_aux must be callable"):
        language_model_loss(object(), ok, ok)


def test_traced_out_of_vocabulary_ids_give_nan_and_are_counted(tiny_models):
    model = tiny_models["pre"]
    loss_and_aux = jax.jit(model.loss_and_aux)
    tokens = jax.random.randint(jax.random.key(3), (2, 8), 0, 256)
    targets = jnp.roll(tokens, -1, axis=1)
    # Valid batch: the jitted loss is the closed form, and nothing is counted.
    loss, aux = loss_and_aux(tokens, targets)
    logits = model(tokens)
    manual = jnp.mean(
        jax.nn.logsumexp(logits, -1) - jnp.take_along_axis(logits, targets[..., None], -1)[..., 0]
    )
    assert float(loss) == pytest.approx(float(manual), rel=1e-5)
    assert int(aux["out_of_vocabulary"]) == 0
    # A negative token would wrap to row 255 with plain indexing (a finite, wrong loss): here it
    # is NaN, and counted; so is a target >= V.
    wrapped = float(loss_and_aux(tokens.at[0, 3].set(255), targets)[0])
    assert np.isfinite(wrapped)
    for bad_tokens, bad_targets, count in (
        (tokens.at[0, 3].set(-1), targets, 1),
        (tokens, targets.at[1, 0].set(256).at[1, 1].set(-7), 2),
    ):
        loss, aux = loss_and_aux(bad_tokens, bad_targets)
        assert np.isnan(float(loss)) and int(aux["out_of_vocabulary"]) == count


def test_recipe_pieces_reject_bad_numbers():
    with pytest.raises(ValueError, match="layer must be an int in"):
        depth_init_std(4, 4)
    with pytest.raises(ValueError, match="layer"):
        depth_init_std(-1, 4)  # 0.02/sqrt(0) before
    with pytest.raises(TypeError, match="depth_init must be a bool"):
        depth_init_std(0, 4, depth_init="no")
    x = jnp.ones((1, 3, 2, 8))
    with pytest.raises(ValueError, match="x must have 4 axes"):
        rotary_embedding(x[0], 1e4)
    with pytest.raises(ValueError, match="even last axis"):
        rotary_embedding(x[..., :7], 1e4)
    with pytest.raises(ValueError, match="theta must be finite and > 0"):
        rotary_embedding(x, float("nan"))
    with pytest.raises(TypeError, match="x must be a floating array"):
        SimpleNorm(4, 4, rngs=nnx.Rngs(0))(jnp.ones((2, 4), jnp.int32))
    with pytest.raises(TypeError, match="kernel_init"):
        SimpleNorm(4, 4, kernel_init=0.02, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="moe_gate must be one of"):
        GPTConfig(**TINY, moe_gate="top1")
    with pytest.raises(TypeError, match="qk_norm_per_head must be a bool"):
        GPTConfig(**TINY, qk_norm_per_head="yes")
    with pytest.raises(ValueError, match="ffn_multiplier=1e-06 gives an FFN width of 0"):
        GPTConfig(**TINY, ffn_multiplier=1e-6)
