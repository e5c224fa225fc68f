"""Bad-input probes for jaxlab.quant.

Bit widths outside 1..8 (and floats, bools), group sizes that do not divide the width, Hessians
that are not positive semidefinite after damping, not symmetric, non-finite or of the wrong
shape, weights of the wrong rank or dtype, unknown orders and losses, bad keys and bad model
drivers. Every probe fails on the host, before anything is compiled.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab import quant
from tests.bad_input import no_probes, probes, raises

NAN = float("nan")
W = np.ones((2, 4), np.float32)
H = np.eye(4)
NOT_PSD = np.diag([1.0, 1.0, -5.0, 1.0])
ASYMMETRIC = np.triu(np.ones((4, 4)))
SCALE, ZERO = np.ones(2, np.float32), np.zeros(2, np.float32)
_NAN_W = np.array([[1.0, NAN, 0.0, 2.0], [0.0, 1.0, 1.0, 1.0]], np.float32)
_INF_W = np.where(np.isnan(_NAN_W), np.inf, _NAN_W).astype(np.float32)


_QUANTIZER_FIELDS = ("bits", "group_size", "symmetric", "grid", "num_ratios", "damp", "dead_value")


def _layer_probes(fn):
    def call(**kw):
        fields = {k: kw.pop(k) for k in list(kw) if k in _QUANTIZER_FIELDS}
        return fn(kw.pop("w", W), kw.pop("h", H), quant.Quantizer(**fields), **kw)

    return [
        raises("bits", lambda: call(bits=0)),
        raises("bits", lambda: call(bits=9)),
        raises("bits", lambda: call(bits=3.0), TypeError),
        raises("group_size", lambda: call(bits=3, group_size=3)),
        raises("group_size", lambda: call(bits=3, group_size=0)),
        raises("h", lambda: call(bits=3, h=NOT_PSD), ValueError, "not PSD after damping"),
        raises("h", lambda: call(bits=3, h=ASYMMETRIC), ValueError, "not symmetric"),
        raises("h", lambda: call(bits=3, h=np.eye(3)), ValueError, "shape mismatch"),
        raises("h", lambda: call(bits=3, h=np.full((4, 4), NAN)), ValueError, "NaN"),
        raises("w", lambda: call(bits=3, w=np.ones(4, np.float32)), ValueError, "1-D"),
        raises("w", lambda: call(bits=3, w=np.ones((2, 4), np.int32)), TypeError),
        raises("w", lambda: call(bits=3, w=np.full((2, 4), NAN, np.float32)), ValueError),
        raises("damp", lambda: call(bits=3, damp=-0.1)),
        raises("order", lambda: call(bits=3, order="random")),
        raises("params", lambda: call(bits=3, params=(np.ones(3), np.zeros(3)))),
        raises("params", lambda: call(bits=3, params=np.ones(2)), TypeError),
        raises("grid", lambda: call(bits=3, grid="mse")),
        raises("grid", lambda: call(bits=3, grid=None)),
        raises("quantizer", lambda: fn(W, H, quant.Quantizer(bits=3), bits=3), TypeError),
        raises("quantizer", lambda: fn(W, H, quantizer={"bits": 3}), TypeError),
    ]


for _name, _reason in (
    ("QuantInfo", "a diagnostics NamedTuple built by rtn/gptq/stla"),
    ("QuantizedWeight", "a result NamedTuple built by rtn/gptq/stla"),
    ("StageReport", "a report NamedTuple built by quantize_model"),
    ("ModelQuantization", "a result NamedTuple built by quantize_model"),
    ("LanguageModelProblem", "a problem NamedTuple built by byte_language_model"),
    ("LayerProblem", "a problem NamedTuple built by correlated_layer"),
    ("ReferenceInstance", "an instance NamedTuple built by reference_instance"),
):
    no_probes(f"jaxlab.quant.{_name}", _reason)

probes(
    "jaxlab.quant.Quantizer",
    raises("bits", lambda: quant.Quantizer(bits=0)),
    raises("bits", lambda: quant.Quantizer(bits=2.0), TypeError),
    raises("group_size", lambda: quant.Quantizer(bits=3, group_size=0)),
    raises("symmetric", lambda: quant.Quantizer(bits=3, symmetric=1), TypeError),
    raises("grid", lambda: quant.Quantizer(bits=3, grid="mse")),
    raises("num_ratios", lambda: quant.Quantizer(bits=3, num_ratios=0)),
    raises("damp", lambda: quant.Quantizer(bits=3, damp=NAN)),
    raises("dead_value", lambda: quant.Quantizer(bits=3, dead_value=0.0)),
)
probes(
    "jaxlab.quant.rtn",
    raises("quantizer", lambda: quant.rtn(W), TypeError),
    raises("bits", lambda: quant.rtn(W, quantizer=quant.Quantizer(bits=0))),
    raises("bits", lambda: quant.rtn(W, quantizer=quant.Quantizer(bits=True)), TypeError),
    raises("group_size", lambda: quant.rtn(W, quantizer=quant.Quantizer(bits=3, group_size=3))),
    raises("h", lambda: quant.rtn(W, np.eye(3), quant.Quantizer(bits=3))),
    raises("w", lambda: quant.rtn("w", quantizer=quant.Quantizer(bits=3)), TypeError),
    raises(
        "params", lambda: quant.rtn(W, quantizer=quant.Quantizer(bits=3), params=(-SCALE, ZERO))
    ),
    raises("grid", lambda: quant.rtn(W, H, quant.Quantizer(bits=3, grid="optimal"))),
    raises(
        "h",
        lambda: quant.rtn(W, quantizer=quant.Quantizer(bits=3, grid="search")),
        ValueError,
        "search needs H",
    ),
)
probes(
    "jaxlab.quant.gptq",
    *_layer_probes(quant.gptq),
    raises("block_size", lambda: quant.gptq(W, H, quant.Quantizer(bits=3), block_size=0)),
)
probes(
    "jaxlab.quant.stla",
    *_layer_probes(quant.stla),
    raises("cluster_size", lambda: quant.stla(W, H, quant.Quantizer(bits=3), cluster_size=0)),
    raises(
        "group_size",
        lambda: quant.stla(
            W, H, quant.Quantizer(bits=3, group_size=4, grid="search"), cluster_size=3
        ),
    ),
    raises("loss", lambda: quant.stla(W, H, quant.Quantizer(bits=3), loss="lookahead")),
    raises("num_iters", lambda: quant.stla(W, H, quant.Quantizer(bits=3), num_iters=0)),
    raises("learning_rate", lambda: quant.stla(W, H, quant.Quantizer(bits=3), learning_rate=NAN)),
    raises("round_weight", lambda: quant.stla(W, H, quant.Quantizer(bits=3), round_weight=-1.0)),
    raises(
        "learn_rounding",
        lambda: quant.stla(W, H, quant.Quantizer(bits=3), learn_rounding=1),
        TypeError,
    ),
)
probes(
    "jaxlab.quant.quantize",
    raises("bits", lambda: quant.quantize(W, SCALE, ZERO, bits=9)),
    raises("scale", lambda: quant.quantize(W, np.ones(3), ZERO, bits=3)),
    raises(
        "w", lambda: quant.quantize(jnp.ones((2, 4), jnp.int32), SCALE, ZERO, bits=3), TypeError
    ),
    raises("w", lambda: quant.quantize(_NAN_W, SCALE, ZERO, bits=3), ValueError, "NaN weight"),
    raises("w", lambda: quant.quantize(_INF_W, SCALE, ZERO, bits=3), ValueError, "inf weight"),
    raises("scale", lambda: quant.quantize(W, 0 * SCALE, ZERO, bits=3), ValueError, "zero scale"),
    raises("scale", lambda: quant.quantize(W, NAN * SCALE, ZERO, bits=3), ValueError, "NaN scale"),
    raises("zero", lambda: quant.quantize(W, SCALE, ZERO + NAN, bits=3), ValueError, "NaN zero"),
    raises(
        "return_nonfinite",
        lambda: quant.quantize(W, SCALE, ZERO, bits=3, return_nonfinite=1),
        TypeError,
    ),
)
probes(
    "jaxlab.quant.quantize_uniform",
    raises("bits", lambda: quant.quantize_uniform(W, SCALE, ZERO, bits=0)),
    raises("zero", lambda: quant.quantize_uniform(W, SCALE, np.zeros((2, 2)), bits=3)),
    raises("w", lambda: quant.quantize_uniform(3.0, SCALE, ZERO, bits=3)),
)
probes(
    "jaxlab.quant.dequantize",
    raises("codes", lambda: quant.dequantize(W, SCALE, ZERO), TypeError),
    raises("scale", lambda: quant.dequantize(np.ones((2, 4), np.uint8), np.ones(3), ZERO)),
)
probes(
    "jaxlab.quant.minmax_params",
    raises("bits", lambda: quant.minmax_params(W, bits=-1)),
    raises("symmetric", lambda: quant.minmax_params(W, bits=3, symmetric="yes"), TypeError),
    raises("w", lambda: quant.minmax_params(None, bits=3), TypeError),
)
probes(
    "jaxlab.quant.search_quant_params",
    raises("bits", lambda: quant.search_quant_params(W, H, bits=10)),
    raises("metric", lambda: quant.search_quant_params(W, np.eye(3), bits=3)),
    raises("num_ratios", lambda: quant.search_quant_params(W, H, bits=3, num_ratios=0)),
    raises("w", lambda: quant.search_quant_params(W[0], H, bits=3)),
)
probes(
    "jaxlab.quant.hessian_from_inputs",
    raises("x", lambda: quant.hessian_from_inputs(np.ones((3, 2), np.int32)), TypeError),
    raises("x", lambda: quant.hessian_from_inputs(np.ones((0, 2), np.float32))),
)
probes(
    "jaxlab.quant.prepare_hessian",
    raises("damp", lambda: quant.prepare_hessian(W, H, damp=NAN)),
    raises("dead_value", lambda: quant.prepare_hessian(W, H, dead_value=0.0)),
    raises("h", lambda: quant.prepare_hessian(W, np.eye(5))),
)
probes(
    "jaxlab.quant.inverse_hessian_cholesky",
    raises("h", lambda: quant.inverse_hessian_cholesky(NOT_PSD)),
    raises("h", lambda: quant.inverse_hessian_cholesky(np.ones((2, 3)))),
)
probes(
    "jaxlab.quant.column_order",
    raises("order", lambda: quant.column_order(H, "random")),
    raises("cluster_size", lambda: quant.column_order(H, "spin", 0)),
)
probes(
    "jaxlab.quant.spin_cluster_order",
    raises("cluster_size", lambda: quant.spin_cluster_order(H, 0)),
    raises("h", lambda: quant.spin_cluster_order(ASYMMETRIC, 2)),
)
probes(
    "jaxlab.quant.schur_complement",
    raises("stop", lambda: quant.schur_complement(H, 2, 2)),
    raises("stop", lambda: quant.schur_complement(H, 0, 5)),
    raises("start", lambda: quant.schur_complement(H, -1, 2)),
)
probes(
    "jaxlab.quant.schur_complement_metric",
    raises("u", lambda: quant.schur_complement_metric(np.ones((2, 3)), 0, 1)),
    raises("stop", lambda: quant.schur_complement_metric(H, 0, 9)),
)
probes(
    "jaxlab.quant.schur_complement_objective",
    raises("error", lambda: quant.schur_complement_objective(np.ones((2, 3)), H, 0, 2)),
    raises(
        "start", lambda: quant.schur_complement_objective(np.ones((2, 2)), H, 1.0, 3), TypeError
    ),
)
probes(
    "jaxlab.quant.layer_output_error",
    raises("q", lambda: quant.layer_output_error(W, np.ones((2, 3), np.float32), H)),
    raises("h", lambda: quant.layer_output_error(W, W, np.eye(3))),
)
probes(
    "jaxlab.quant.correlated_layer",
    raises("rng_key", lambda: quant.correlated_layer(None), TypeError),
    raises("rows", lambda: quant.correlated_layer(jax.random.key(0), rows=0)),
    raises("noise", lambda: quant.correlated_layer(jax.random.key(0), noise=-1.0)),
)
probes(
    "jaxlab.quant.reference_instance",
    raises("check", lambda: quant.reference_instance(4)),
    raises("check", lambda: quant.reference_instance("3"), TypeError),
)
_KEY = jax.random.key(0)


def _held_out(model=W, **kw):
    return quant.held_out_losses(
        model, np.zeros(40, np.uint8), **{"num_blocks": 2, "windows": 1, "seq_len": 4, **kw}
    )


probes(
    "jaxlab.quant.byte_language_model",
    raises("rng_key", lambda: quant.byte_language_model(None), TypeError),
    raises("steps", lambda: quant.byte_language_model(_KEY, steps=0)),
    raises("corpus_bytes", lambda: quant.byte_language_model(_KEY, corpus_bytes=2.5), TypeError),
)
probes(
    "jaxlab.quant.held_out_losses",
    raises("model", lambda: _held_out(rng_key=_KEY), TypeError),
    raises("num_blocks", lambda: _held_out(num_blocks=0, rng_key=_KEY)),
    raises("rng_key", lambda: _held_out(rng_key=0), TypeError),
)
probes(
    "jaxlab.quant.quantize_model",
    raises("model", lambda: quant.quantize_model(W, W, lambda n, w, h: None), TypeError),
    raises("method", lambda: quant.quantize_model(_Tiny(), W, None), TypeError),
    raises("loss_fn", lambda: quant.quantize_model(_Tiny(), W, quant.rtn, loss_fn=3), TypeError),
    raises("calibration_inputs", lambda: quant.quantize_model(_Tiny(), "x", quant.rtn), TypeError),
    raises(
        "model",
        lambda: quant.quantize_model(_Tiny(linear=False), W, quant.rtn),
        ValueError,
        "no linear layer",
    ),
    raises(
        "method",
        lambda: quant.quantize_model(_TinyNet(), W, _nan_method),
        ValueError,
        "NaN weights returned",
    ),
)


def _TinyNet():
    from flax import nnx

    class Net(nnx.Module):
        def __init__(self):
            self.linear = nnx.Linear(4, 3, rngs=nnx.Rngs(0))

        def __call__(self, x):
            return self.linear(x)

    return Net()


def _nan_method(name, w, h):
    out = quant.rtn(w, quantizer=quant.Quantizer(bits=3))
    return out._replace(weight=out.weight.at[0, 0].set(jnp.nan))


class _Tiny:
    def __new__(cls, linear: bool = True):
        from flax import nnx

        class Plain(nnx.Module):
            def __init__(self):
                self.scale = nnx.Param(jnp.ones(4))

            def __call__(self, x):
                return x * self.scale[...][None, :]

        return nnx.Linear(4, 3, rngs=nnx.Rngs(0)) if linear else Plain()


# Issue 44, second independent probe set: the findings it made, fixed at the entry checks.
_CAL = np.ones((5, 4), np.float32)
_RTN3 = lambda name, w, h: quant.rtn(w, quantizer=quant.Quantizer(bits=3))  # noqa: E731


def _int_weights(name, w, h):
    out = quant.rtn(w, quantizer=quant.Quantizer(bits=3))
    return out._replace(weight=out.weight.astype(jnp.int32))


probes(
    "jaxlab.quant.quantize",
    raises(
        "zero",
        lambda: quant.quantize(W, SCALE, np.array([50.0, 0.0], np.float32), bits=3),
        ValueError,
        "outside the code range",
    ),
    raises("scale", lambda: quant.quantize(W, -SCALE, ZERO, bits=3), ValueError, "negative"),
)
probes(
    "jaxlab.quant.quantize_uniform",
    raises("scale", lambda: quant.quantize_uniform(W, 0 * SCALE, ZERO, bits=3), ValueError),
    raises(
        "scale", lambda: quant.quantize_uniform(W, NAN * SCALE, ZERO, bits=3), ValueError, "NaN"
    ),
)
probes(
    "jaxlab.quant.dequantize",
    raises(
        "scale",
        lambda: quant.dequantize(np.ones((2, 4), np.uint8), np.array([NAN, 1.0], np.float32), ZERO),
        ValueError,
        "NaN",
    ),
    raises(
        "scale",
        lambda: quant.dequantize(np.ones((2, 4), np.uint8), -SCALE, ZERO),
        ValueError,
        "negative",
    ),
    raises(
        "codes",
        lambda: quant.dequantize(-np.ones((2, 4), np.int32), SCALE, ZERO),
        ValueError,
        "negative",
    ),
    raises("codes", lambda: quant.dequantize(np.ones(4, np.uint8), SCALE, ZERO), ValueError, "1-D"),
)
probes(
    "jaxlab.quant.search_quant_params",
    raises(
        "metric",
        lambda: quant.search_quant_params(W, np.full((4, 4), NAN), bits=3),
        ValueError,
        "NaN",
    ),
    raises(
        "metric", lambda: quant.search_quant_params(W, -H, bits=3), ValueError, "negative diagonal"
    ),
)
probes(
    "jaxlab.quant.layer_output_error",
    raises("h", lambda: quant.layer_output_error(W, 0 * W, -H), ValueError, "negative diagonal"),
)
probes(
    "jaxlab.quant.quantize_model",
    raises(
        "calibration_inputs",
        lambda: quant.quantize_model(_TinyNet(), np.full((5, 4), NAN, np.float32), _RTN3),
        ValueError,
        "NaN",
    ),
    raises(
        "calibration_inputs",
        lambda: quant.quantize_model(_TinyNet(), np.ones((0, 4), np.float32), _RTN3),
        ValueError,
        "empty",
    ),
    raises(
        "calibration_inputs",
        lambda: quant.quantize_model(_TinyNet(), np.ones((5, 7), np.float32), _RTN3),
        ValueError,
        "wrong width",
    ),
    raises(
        "method",
        lambda: quant.quantize_model(_TinyNet(), _CAL, _int_weights),
        TypeError,
        "int weights",
    ),
    raises(
        "loss_fn",
        lambda: quant.quantize_model(_TinyNet(), _CAL, _RTN3, loss_fn=lambda m: jnp.nan),
        ValueError,
        "NaN before quantizing",
    ),
    raises(
        "loss_fn",
        lambda: quant.quantize_model(_TinyNet(), _CAL, _RTN3, loss_fn=lambda m: jnp.ones(3)),
        ValueError,
        "vector",
    ),
    raises(
        "progress", lambda: quant.quantize_model(_TinyNet(), _CAL, _RTN3, progress=5), TypeError
    ),
)
