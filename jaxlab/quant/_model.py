"""Model-level post-training quantization: every linear layer of an nnx model, in call order.

:func:`quantize_model` walks the linear layers of a ``flax.nnx`` model (every submodule with a
2-D ``kernel`` parameter of shape ``(in, out)``, as jaxlab's SimpleGPT and ``nnx.Linear`` have;
embeddings and an output head stored as bare parameters are left in full precision) in the order
the forward pass calls them, and quantizes them **sequentially**: each stage runs the partly
quantized model on the calibration inputs, records the inputs ``X`` of the stage's layers,
builds ``H = (2/n) XᵀX`` and hands ``(W, H)`` to the quantizer. Layers that receive the same
input tensor (q, k and v; the two SwiGLU input maps) form one stage. Later layers therefore see
the activations of the already quantized model, as in GPTQ's sequential pipeline.

Where jit stops: the capture (forward pass + Hessians of a stage) is one jitted program per stage,
cached per model structure, so a second method or calibration seed on the same model compiles
nothing; the quantizers run their own host/jit split; ``loss_fn`` is the caller's.
"""

from __future__ import annotations

import contextvars
import functools
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxlab._src.validation import (
    check_array,
    check_callable,
    check_finite_array,
    check_progress,
)
from jaxlab.quant._gptq import QuantizedWeight

__all__ = ["ModelQuantization", "StageReport", "quantize_model"]

# Where the recorders put (layer name, input) pairs while a capture traces the forward pass.
_SINK: contextvars.ContextVar[list | None] = contextvars.ContextVar(
    "jaxlab_quant_sink", default=None
)


class _Recorder(nnx.Module):
    """Wraps a linear layer and records its input when a capture is active."""

    def __init__(self, inner: nnx.Module, name: str):
        self.inner = inner
        self.name = name

    def __call__(self, x, *args, **kwargs):
        sink = _SINK.get()
        if sink is not None:
            sink.append((self.name, x))
        return self.inner(x, *args, **kwargs)


class StageReport(NamedTuple):
    """One stage of :func:`quantize_model`: the layers quantized together and the loss after.

    Attributes:
      layers: names of the layers of this stage (they share one input).
      loss: ``loss_fn`` of the model after this stage (``None`` without ``loss_fn``).
      seconds: wall time of the quantizer calls of the stage (capture excluded).

    Examples:
      >>> StageReport(("layer0.attention.q",), 1.25, 0.1).loss
      1.25
    """

    layers: tuple[str, ...]
    loss: float | None
    seconds: float


class ModelQuantization(NamedTuple):
    """What :func:`quantize_model` returns.

    Attributes:
      model: the quantized copy (the input model is left unchanged).
      initial_loss: ``loss_fn`` of the unquantized model (``None`` without ``loss_fn``).
      stages: one :class:`StageReport` per stage, in call order.
      layers: layer name -> the quantizer's :class:`QuantizedWeight` (codes, grid, diagnostics;
        ``info.nonfinite_count > 0`` flags a layer whose quantization diverged).
      quantization_seconds: total wall time of the quantizer calls.

    Examples:
      >>> ModelQuantization(None, None, [], {}, 0.0).stages
      []
    """

    model: Any
    initial_loss: float | None
    stages: list[StageReport]
    layers: dict[str, QuantizedWeight]
    quantization_seconds: float


def _loss_value(loss_fn, model) -> float:
    value = loss_fn(model)
    if np.ndim(value) != 0:
        raise ValueError(f"loss_fn must return one scalar, got shape {np.shape(value)}")
    return float(value)


def _default_forward(model, inputs):
    return model(inputs)


def _linear_layers(model: nnx.Module) -> dict[str, tuple[Any, Any, nnx.Module]]:
    """name -> (parent, key, module) of every submodule with a 2-D ``kernel`` Param."""
    found = {}
    for path, node in nnx.iter_graph(model):
        if not path or not isinstance(node, nnx.Module):
            continue
        kernel = getattr(node, "kernel", None)
        if isinstance(kernel, nnx.Param) and jnp.ndim(kernel[...]) == 2:
            parent = model
            for key in path[:-1]:
                parent = parent[key] if isinstance(key, int) else getattr(parent, key)
            found[".".join(str(p) for p in path)] = (parent, path[-1], node)
    return found


def _place(parent, key, module) -> None:
    if isinstance(key, int):
        parent[key] = module
    else:
        setattr(parent, key, module)


def _hessian_of(xs: list[jax.Array]) -> jax.Array:
    x = jnp.concatenate([jnp.reshape(v, (-1, v.shape[-1])) for v in xs]).astype(jnp.float32)
    return (2.0 / x.shape[0]) * jnp.matmul(x.T, x, precision=jax.lax.Precision.HIGHEST)


@functools.lru_cache(maxsize=32)
def _capture_fn(graphdef, forward_fn):
    """A jitted ``(state, inputs, names) -> {name: H}`` for one model structure."""

    @functools.partial(jax.jit, static_argnames="names")
    def capture(state, inputs, names):
        records: list = []
        token = _SINK.set(records)
        try:
            forward_fn(nnx.merge(graphdef, state), inputs)
        finally:
            _SINK.reset(token)
        grouped: dict[str, list] = {}
        for name, x in records:
            if name in names:
                grouped.setdefault(name, []).append(x)
        return {name: _hessian_of(xs) for name, xs in grouped.items()}

    return capture


def _stages(graphdef, state, inputs, forward_fn) -> list[tuple[str, ...]]:
    """Layers in call order, grouped into stages of layers that share an input tensor."""
    records: list = []

    def trace(state, inputs):
        token = _SINK.set(records)
        try:
            forward_fn(nnx.merge(graphdef, state), inputs)
        finally:
            _SINK.reset(token)
        return 0

    jax.eval_shape(trace, state, inputs)
    stages: list[list[str]] = []
    seen: set[str] = set()
    previous = None
    for name, x in records:
        if name in seen:
            continue
        seen.add(name)
        if stages and x is previous:
            stages[-1].append(name)
        else:
            stages.append([name])
        previous = x
    return [tuple(s) for s in stages]


def quantize_model(
    model: nnx.Module,
    calibration_inputs: Any,
    method: Callable[[str, np.ndarray, np.ndarray], QuantizedWeight],
    *,
    forward_fn: Callable[[nnx.Module, Any], Any] | None = None,
    loss_fn: Callable[[nnx.Module], Any] | None = None,
    progress: Any = None,
) -> ModelQuantization:
    """Quantizes every linear layer of ``model`` sequentially on calibration data.

    For each stage (the layers that share an input, in call order): run the partly quantized
    copy on ``calibration_inputs``, build each layer's ``H = (2/n) XᵀX`` from the inputs it
    received, call ``method(name, W, H)`` with ``W = kernelᵀ`` (``[out, in]``, NumPy) and ``H``
    (``[in, in]``, NumPy float64), and write ``weight.T`` back as the kernel. ``loss_fn``
    (e.g. a validation loss) is evaluated before the first and after every stage.

    Args:
      model: a ``flax.nnx`` module; left unchanged (a copy is quantized).
      calibration_inputs: what ``forward_fn`` takes (a ``[batch, seq_len]`` token array for
        a :class:`jaxlab.nn.SimpleGPT`); all of it goes through one forward pass.
      method: ``(name, w, h) -> QuantizedWeight``, e.g.
        ``lambda name, w, h: gptq(w, h, Quantizer(bits=3, group_size=32))``.
      forward_fn: ``(model, calibration_inputs) -> anything``; default ``model(inputs)``.
      loss_fn: ``model -> float`` evaluated after each stage, or ``None``.
      progress: optional object with ``track(iterable, total=, description=)``.

    Returns:
      A :class:`ModelQuantization`.

    Raises:
      TypeError: ``model`` is not an nnx module, ``method``/``forward_fn``/``loss_fn`` are not
        callable, or ``method`` does not return a :class:`QuantizedWeight`.
      ValueError: the model has no linear layer the forward pass calls, or ``method`` returns
        weights of the wrong shape or any NaN/inf weight (never written into the model).

    Examples:
      >>> import jax, numpy as np
      >>> from flax import nnx
      >>> from jaxlab.nn import GPTConfig, SimpleGPT, language_model_loss
      >>> from jaxlab.quant import Quantizer, gptq
      >>> model = SimpleGPT(GPTConfig(256, 32, 1, 2, max_len=8, multiple_of=32,
      ...                             norm_placement="pre"), rngs=nnx.Rngs(0))
      >>> tokens = jax.random.randint(jax.random.key(1), (8, 8), 0, 256)
      >>> out = quantize_model(model, tokens, lambda name, w, h: gptq(w, h, Quantizer(bits=4)),
      ...                      loss_fn=lambda m: float(language_model_loss(m, tokens, tokens)))
      >>> [s.layers for s in out.stages][:2]
      [('blocks.0.attention.q', 'blocks.0.attention.k', 'blocks.0.attention.v'), \
('blocks.0.attention.o',)]
      >>> len(out.layers), abs(out.stages[-1].loss - out.initial_loss) < 0.1
      (7, True)

    References:
      Frantar et al., "GPTQ", ICLR 2023 (the sequential, layer-by-layer pipeline).
    """
    if not isinstance(model, nnx.Module):
        raise TypeError(f"model must be an nnx.Module, got {type(model).__name__}")
    check_callable(method, "method", signature="method(name, w, h) -> QuantizedWeight")
    forward_fn = _default_forward if forward_fn is None else forward_fn
    check_callable(forward_fn, "forward_fn", signature="forward_fn(model, inputs)")
    check_callable(loss_fn, "loss_fn", signature="loss_fn(model) -> float", allow_none=True)
    if calibration_inputs is None or isinstance(calibration_inputs, str | bytes):
        raise TypeError(
            f"calibration_inputs must be an array (tokens), got {type(calibration_inputs).__name__}"
        )
    if isinstance(calibration_inputs, np.ndarray | jax.Array | list | tuple):
        calibration_inputs = check_array(calibration_inputs, "calibration_inputs")
        check_finite_array(calibration_inputs, "calibration_inputs")
        if calibration_inputs.ndim == 0 or calibration_inputs.shape[0] == 0:
            raise ValueError(
                f"calibration_inputs must hold at least one example, got shape "
                f"{calibration_inputs.shape}"
            )
    check_progress(progress)

    work = nnx.clone(model)
    layers = _linear_layers(work)
    if not layers:
        raise ValueError("model has no linear layer (a submodule with a 2-D kernel Param)")
    recorders = {name: _Recorder(module, name) for name, (_, _, module) in layers.items()}

    def recorded_state():
        for name, (parent, key, _) in layers.items():
            _place(parent, key, recorders[name])
        try:
            return nnx.split(work)
        finally:
            for _, (parent, key, module) in layers.items():
                _place(parent, key, module)

    graphdef, state = recorded_state()
    try:
        stages = _stages(graphdef, state, calibration_inputs, forward_fn)
    except (TypeError, ValueError) as err:  # e.g. inputs of the wrong width for the first layer
        shape = getattr(calibration_inputs, "shape", None)
        raise ValueError(
            f"forward_fn(model, calibration_inputs) failed on calibration_inputs of shape {shape} "
            f"({type(err).__name__}: {err})"
        ) from err
    if not stages:
        raise ValueError(
            "model has no linear layer (a submodule with a 2-D kernel Param) that forward_fn calls"
        )
    capture = _capture_fn(graphdef, forward_fn)
    initial_loss = None if loss_fn is None else _loss_value(loss_fn, work)
    if initial_loss is not None and not np.isfinite(initial_loss):
        raise ValueError(
            f"loss_fn returned {initial_loss} on the unquantized model (before any weight "
            "changed): check loss_fn and the data it evaluates"
        )
    reports, results, total = [], {}, 0.0
    iterator = (
        stages
        if progress is None
        else progress.track(stages, total=len(stages), description="quantizing")
    )
    for stage in iterator:
        _, state = recorded_state()
        hessians = capture(state, calibration_inputs, names=stage)
        seconds = 0.0
        for name in stage:
            module = layers[name][2]
            kernel = module.kernel[...]
            start = time.perf_counter()
            result = method(name, np.asarray(kernel).T, np.asarray(hessians[name], np.float64))
            if not isinstance(result, QuantizedWeight):
                raise TypeError(
                    f"method must return a QuantizedWeight, got {type(result).__name__} for {name}"
                )
            jax.block_until_ready(result.weight)
            if not jnp.issubdtype(jnp.result_type(result.weight), jnp.floating):
                raise TypeError(
                    f"method must return floating weights, got {jnp.result_type(result.weight)} "
                    f"for {name}"
                )
            seconds += time.perf_counter() - start
            if result.weight.shape != kernel.shape[::-1]:
                raise ValueError(
                    f"method returned weights of shape {result.weight.shape} for {name}, "
                    f"expected {kernel.shape[::-1]} ([out, in])"
                )
            bad = int(np.sum(~np.isfinite(np.asarray(result.weight))))
            if bad:
                raise ValueError(
                    f"method returned {bad} non-finite (NaN/inf) weights for {name}; nothing "
                    "was written into the model (a diverged quantizer: lower its learning rate, "
                    "raise damping, or check the calibration inputs)"
                )
            module.kernel[...] = jnp.asarray(result.weight.T, kernel.dtype)
            results[name] = result
        total += seconds
        loss = None if loss_fn is None else _loss_value(loss_fn, work)
        reports.append(StageReport(stage, loss, seconds))
    return ModelQuantization(work, initial_loss, reports, results, total)
