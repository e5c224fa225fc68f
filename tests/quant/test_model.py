"""The model-level driver: stages in call order, Hessians of the partly quantized model."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from jaxlab.nn import GPTConfig, SimpleGPT, language_model_loss
from jaxlab.quant import QuantizedWeight, Quantizer, hessian_from_inputs, quantize_model, rtn

# Every linear map 32 x 32 (d_ff = 32): one compiled quantizer serves all layers.
CONFIG = GPTConfig(
    256, 32, 2, 2, max_len=8, multiple_of=32, ffn_multiplier=0.375, norm_placement="pre"
)
TOKENS = jax.random.randint(jax.random.key(1), (4, 8), 0, 256)


@functools.cache
def _run():
    model = SimpleGPT(CONFIG, rngs=nnx.Rngs(0))
    seen = {}

    def method(name, w, h):
        seen[name] = (w.copy(), h.copy())
        return rtn(w, quantizer=Quantizer(bits=3))

    loss = lambda m: float(language_model_loss(m, TOKENS, TOKENS))
    before = {k: np.asarray(v) for k, v in nnx.to_flat_state(nnx.state(model, nnx.Param))}
    return model, quantize_model(model, TOKENS, method, loss_fn=loss), seen, before


def test_stages_follow_the_forward_pass_and_the_input_is_unchanged():
    model, out, seen, before = _run()
    stages = [s.layers for s in out.stages]
    assert stages[:4] == [
        ("blocks.0.attention.q", "blocks.0.attention.k", "blocks.0.attention.v"),
        ("blocks.0.attention.o",),
        ("blocks.0.ffn.w1", "blocks.0.ffn.w3"),
        ("blocks.0.ffn.w2",),
    ]
    assert len(stages) == 8 and len(out.layers) == 14 == len(seen)
    after = {k: np.asarray(v) for k, v in nnx.to_flat_state(nnx.state(model, nnx.Param))}
    assert all(np.array_equal(before[k], after[k]) for k in before)
    assert out.stages[-1].loss == pytest.approx(language_model_loss(out.model, TOKENS, TOKENS))
    assert out.initial_loss == pytest.approx(language_model_loss(model, TOKENS, TOKENS))
    for name, result in out.layers.items():
        module = out.model
        for key in name.split("."):
            module = module[int(key)] if key.isdigit() else getattr(module, key)
        np.testing.assert_array_equal(module.kernel[...], np.asarray(result.weight).T)


def test_hessians_are_those_of_the_partly_quantized_model():
    model, out, seen, _ = _run()
    # First layer: the inputs of the original model (embedding, then the pre-attention norm).
    x0 = model.blocks[0].attention_norm(jnp.take(model.embedding[...], TOKENS, axis=0))
    np.testing.assert_allclose(
        seen["blocks.0.attention.q"][1], hessian_from_inputs(x0), rtol=1e-4, atol=1e-5
    )
    np.testing.assert_array_equal(
        seen["blocks.0.attention.q"][0], np.asarray(model.blocks[0].attention.q.kernel[...]).T
    )
    # Block 1 sees the output of the *quantized* block 0.
    q = out.model
    h1, _ = q.blocks[0](jnp.take(q.embedding[...], TOKENS, axis=0), None, "layer0")
    x1 = q.blocks[1].attention_norm(h1)
    np.testing.assert_allclose(
        seen["blocks.1.attention.k"][1], hessian_from_inputs(x1), rtol=1e-4, atol=1e-5
    )
    h1_fp, _ = model.blocks[0](jnp.take(model.embedding[...], TOKENS, axis=0), None, "layer0")
    assert not np.allclose(
        seen["blocks.1.attention.k"][1], hessian_from_inputs(model.blocks[1].attention_norm(h1_fp))
    )


def test_a_method_that_returns_the_wrong_thing_is_rejected():
    model = _run()[0]
    with pytest.raises(TypeError, match="method must return a QuantizedWeight"):
        quantize_model(model, TOKENS, lambda name, w, h: w)
    bad = lambda name, w, h: QuantizedWeight(*rtn(w[:, :4], quantizer=Quantizer(bits=3)))
    with pytest.raises(ValueError, match="method returned weights of shape"):
        quantize_model(model, TOKENS, bad)


def test_a_method_that_returns_nan_weights_is_stopped_before_writing():
    model = SimpleGPT(CONFIG, rngs=nnx.Rngs(0))
    calls = []

    def method(name, w, h):
        calls.append(name)
        out = rtn(w, quantizer=Quantizer(bits=3))
        if len(calls) == 2:  # the second layer diverges
            return out._replace(weight=out.weight.at[1, 2].set(jnp.nan))
        return out

    before = {k: np.asarray(v) for k, v in nnx.to_flat_state(nnx.state(model, nnx.Param))}
    with pytest.raises(ValueError, match="method returned 1 non-finite .* blocks.0.attention.k"):
        quantize_model(model, TOKENS, method)
    after = {k: np.asarray(v) for k, v in nnx.to_flat_state(nnx.state(model, nnx.Param))}
    assert all(np.array_equal(before[k], after[k]) for k in before)
