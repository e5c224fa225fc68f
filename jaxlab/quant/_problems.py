"""Quantization problem instances: synthetic layers with correlated inputs and the note's checks.

* :func:`correlated_layer`: a random layer whose inputs are strongly correlated (a low-rank
  signal plus noise, each feature rescaled), the regime where compensating rounding errors
  (GPTQ) and pricing the compensation (STLA) matter most.
* :func:`reference_instance`: the fixed 2 × 6 instances of the STLA note with values re-derived
  in float64 (Schur identity, post-compensation loss, the global < local < GPTQ < RTN chain).
* :func:`byte_language_model`: a small PreNorm :class:`jaxlab.nn.SimpleGPT` trained on the
  Python standard library's bytes, the model whose linear layers the STLA experiment quantizes,
  and :func:`held_out_losses`, its validation loss per contiguous held-out block.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxlab._src.validation import (
    check_instance,
    check_int,
    check_key,
    check_nonnegative,
    check_positive,
)
from jaxlab.nn import (
    GPTConfig,
    SimpleGPT,
    language_model_loss,
    sample_batch,
    simplegpt_optimizer,
    simplegpt_schedule,
    split_corpus,
    stdlib_byte_corpus,
    train_language_model,
)

__all__ = [
    "LanguageModelProblem",
    "LayerProblem",
    "ReferenceInstance",
    "byte_language_model",
    "correlated_layer",
    "held_out_losses",
    "reference_instance",
]


class LayerProblem(NamedTuple):
    """A layer to quantize: weights, calibration inputs and their Hessian.

    Attributes:
      weight: ``[r, d]`` weights.
      inputs: ``[n, d]`` calibration inputs ``X``.
      hessian: ``[d, d]`` ``H = (2/n) XᵀX`` (undamped).

    Examples:
      >>> import jax
      >>> problem = correlated_layer(jax.random.key(0), rows=4, cols=8, num_tokens=32, rank=2)
      >>> problem.weight.shape, problem.inputs.shape, problem.hessian.shape
      ((4, 8), (32, 8), (8, 8))
    """

    weight: jax.Array
    inputs: jax.Array
    hessian: jax.Array


def correlated_layer(
    rng_key: jax.Array,
    *,
    rows: int = 64,
    cols: int = 128,
    num_tokens: int = 2048,
    rank: int = 16,
    noise: float = 0.5,
    feature_log_std: float = 0.75,
    weight_std: float = 0.5,
) -> LayerProblem:
    """A random layer with strongly correlated inputs (the STLA note's synthetic layer).

    ``x = (A z + noise · ε) ⊙ exp(f)`` with ``A ∈ ℝ^{d×rank}``, ``z, ε`` standard normal per token
    and one fixed ``f_j ~ N(0, feature_log_std²)`` per feature; ``W ~ N(0, weight_std²)``;
    ``H = (2/n) XᵀX``.

    Args:
      rng_key: a ``jax.random`` key (same key, same layer).
      rows: ``r``.
      cols: ``d``.
      num_tokens: ``n``.
      rank: rank of the shared signal.
      noise: the noise scale.
      feature_log_std: the spread of per-feature scales (log-normal).
      weight_std: the weights' standard deviation.

    Returns:
      A :class:`LayerProblem` (float32).

    Examples:
      >>> import jax, numpy as np
      >>> p = correlated_layer(jax.random.key(0))
      >>> corr = np.corrcoef(np.asarray(p.inputs).T)
      >>> bool(np.mean(np.abs(corr[np.triu_indices(128, 1)])) > 0.2)   # strongly correlated
      True
    """
    check_key(rng_key)
    rows = check_int(rows, "rows", minimum=1)
    cols = check_int(cols, "cols", minimum=1)
    num_tokens = check_int(num_tokens, "num_tokens", minimum=1)
    rank = check_int(rank, "rank", minimum=1)
    noise = check_nonnegative(noise, "noise")
    feature_log_std = check_nonnegative(feature_log_std, "feature_log_std")
    weight_std = check_positive(weight_std, "weight_std")
    k_a, k_z, k_n, k_f, k_w = jax.random.split(rng_key, 5)
    mixing = jax.random.normal(k_a, (cols, rank))
    signal = jax.random.normal(k_z, (num_tokens, rank)) @ mixing.T
    x = signal + noise * jax.random.normal(k_n, (num_tokens, cols))
    x = x * jnp.exp(feature_log_std * jax.random.normal(k_f, (cols,)))[None, :]
    w = weight_std * jax.random.normal(k_w, (rows, cols))
    h = (2.0 / num_tokens) * jnp.matmul(x.T, x, precision=jax.lax.Precision.HIGHEST)
    return LayerProblem(w, x, h)


class ReferenceInstance(NamedTuple):
    """One of the note's fixed check instances (float64 NumPy).

    Attributes:
      weight: ``[2, 6]`` weights.
      hessian: ``[6, 6]`` ``H_ij = ρ^|i−j| √(a_i a_j)``, ``a = (1, 3, 2, 6, 4, 5)``.
      bits: 2.
      scale: ``[2]`` min-max scales of the weights.
      zero: ``[2]`` min-max zero points.
      cluster_size: 3.
      values: the note's reference values (layer errors) for this instance.

    Examples:
      >>> reference_instance(3).values["gptq"]
      1.472654
    """

    weight: np.ndarray
    hessian: np.ndarray
    bits: int
    scale: np.ndarray
    zero: np.ndarray
    cluster_size: int
    values: dict


_A = np.array([1.0, 3.0, 2.0, 6.0, 4.0, 5.0])
_CHECKS = {
    # Checks 1-2 share ρ = 0.5 and this W; check 3 uses ρ = 0.8 and its own W.
    2: (
        0.5,
        [[0.31, -0.72, 0.15, 0.98, -0.44, 0.57], [-0.26, 0.83, -0.91, 0.12, 0.64, -0.05]],
        {
            "rtn": 0.930921,
            "gptq": 0.507787,
            "cluster0_compensated": 0.476834,
            "cluster0_local": 0.540663,
        },
    ),
    3: (
        0.8,
        [[0.27, -0.46, -0.92, -0.97, 0.63, 0.83], [0.21, 0.46, 0.09, 0.87, 0.63, -0.99]],
        {"rtn": 4.139823, "gptq": 1.472654, "local": 1.069729, "global": 0.749994},
    ),
}
_CHECKS[1] = (
    _CHECKS[2][0],
    _CHECKS[2][1],
    {"diag_u": [1.154701, 0.666667, 0.816497, 0.471405, 0.577350, 0.447214]},
)


def reference_instance(check: int) -> ReferenceInstance:
    """The STLA note's reference check ``check`` (1, 2 or 3) as a fixed instance.

    Check 1 (Schur identity, ``ρ = 0.5``), check 2 (post-compensation loss of the first cluster,
    ``ρ = 0.5``) and check 3 (global < local < GPTQ < RTN, ``ρ = 0.8``; exhaustive rounding
    per cluster stands in for AdaRound) all use 2 bits, min-max parameters of ``W``, natural
    order, clusters of 3 and no damping. ``values`` holds the note's numbers.

    Args:
      check: 1, 2 or 3.

    Returns:
      A :class:`ReferenceInstance`.

    Examples:
      >>> inst = reference_instance(2)
      >>> inst.scale.round(6).tolist(), inst.zero.tolist()
      ([0.566667, 0.58], [1.0, 2.0])
    """
    check = check_int(check, "check", minimum=1, maximum=3)
    rho, weight, values = _CHECKS[check]
    i = np.arange(6)
    hessian = rho ** np.abs(i[:, None] - i[None, :]) * np.sqrt(np.outer(_A, _A))
    weight = np.asarray(weight, np.float64)
    # Min-max parameters in float64 (the note's rule: range widened to contain 0).
    w_max = np.maximum(weight.max(axis=1), 0.0)
    w_min = np.minimum(weight.min(axis=1), 0.0)
    scale = (w_max - w_min) / 3.0
    zero = np.round(-w_min / scale)
    return ReferenceInstance(weight, hessian, 2, scale, zero, 3, dict(values))


class LanguageModelProblem(NamedTuple):
    """A trained byte-level language model to quantize, with its data.

    Attributes:
      model: the trained :class:`jaxlab.nn.SimpleGPT` (PreNorm, vocabulary of 256 bytes).
      train: uint8 training bytes (the first 90 % of the corpus).
      val: uint8 held-out bytes (the last 10 %).
      history: :func:`jaxlab.nn.train_language_model`'s history (``"train_loss"`` per step).
      train_seconds: the training's wall time.

    Examples:
      >>> LanguageModelProblem._fields  # byte_language_model builds one
      ('model', 'train', 'val', 'history', 'train_seconds')
    """

    model: Any
    train: np.ndarray
    val: np.ndarray
    history: dict
    train_seconds: float


def byte_language_model(
    rng_key: jax.Array,
    *,
    d_model: int = 128,
    num_layers: int = 4,
    num_heads: int = 4,
    seq_len: int = 64,
    ffn_multiplier: float = 1.0,
    steps: int = 400,
    batch_size: int = 16,
    peak_lr: float = 3e-3,
    warmup: int = 30,
    corpus_bytes: int = 1_000_000,
    progress: Any = None,
) -> LanguageModelProblem:
    """A PreNorm :class:`jaxlab.nn.SimpleGPT` trained on the Python standard library's bytes.

    The corpus (:func:`jaxlab.nn.stdlib_byte_corpus`, ``corpus_bytes`` bytes) is split 90/10
    into training and held-out bytes (:func:`jaxlab.nn.split_corpus`); the model (byte
    vocabulary, widths rounded to multiples of 32) is trained for ``steps`` steps of
    ``batch_size`` random windows of ``seq_len`` bytes with the paper code's AdamW and
    warmup-then-linear-decay schedule (:func:`jaxlab.nn.simplegpt_optimizer`,
    :func:`jaxlab.nn.simplegpt_schedule`). The defaults are the STLA experiment's quick model.

    Args:
      rng_key: a JAX PRNG key (split into the initialisation and the data order).
      d_model, num_layers, num_heads, seq_len, ffn_multiplier: the model
        (:class:`jaxlab.nn.GPTConfig`; ``seq_len`` is its context).
      steps, batch_size, peak_lr, warmup: the training.
      corpus_bytes: standard-library bytes to read.
      progress: optional progress reporter (``track(iterable, total=, description=)``).

    Returns:
      A :class:`LanguageModelProblem`.

    Examples:
      >>> import jax
      >>> lm = byte_language_model(jax.random.key(0), d_model=32, num_layers=1, num_heads=2,
      ...                          seq_len=8, steps=2, batch_size=2, warmup=1,
      ...                          corpus_bytes=2_000)
      >>> type(lm.model).__name__, lm.train.size, lm.val.size, len(lm.history["train_loss"])
      ('SimpleGPT', 1800, 200, 2)
    """
    check_key(rng_key)
    for name, value in (
        ("steps", steps),
        ("batch_size", batch_size),
        ("corpus_bytes", corpus_bytes),
    ):
        check_int(value, name, minimum=1)
    gpt = GPTConfig(
        256,
        d_model,
        num_layers,
        num_heads,
        max_len=seq_len,
        multiple_of=32,
        ffn_multiplier=ffn_multiplier,
        norm_placement="pre",
    )
    train, val = split_corpus(stdlib_byte_corpus(corpus_bytes))
    init_key, data_key = jax.random.split(rng_key)
    model = SimpleGPT(gpt, rngs=nnx.Rngs(int(jax.random.randint(init_key, (), 0, 2**30))))
    tx = simplegpt_optimizer(simplegpt_schedule(peak_lr, warmup, steps))
    start = time.perf_counter()
    history = train_language_model(
        model,
        tx,
        train,
        steps=steps,
        batch_size=batch_size,
        seq_len=seq_len,
        rng_key=data_key,
        progress=progress,
    )
    return LanguageModelProblem(model, train, val, history, time.perf_counter() - start)


def held_out_losses(
    model: Any,
    data: Any,
    *,
    num_blocks: int,
    windows: int,
    seq_len: int,
    rng_key: jax.Array,
) -> Callable[[Any], np.ndarray]:
    """A jitted ``model -> [num_blocks]`` validation losses, one per contiguous block of ``data``.

    ``data`` is cut into ``num_blocks`` equal contiguous blocks; ``windows`` random windows of
    ``seq_len`` tokens are drawn once from each (block ``b`` with ``fold_in(rng_key, b)``), and a
    model's loss (:func:`jaxlab.nn.language_model_loss`) is averaged per block. Blocks are the
    held-out units of a paired comparison (quantized copies of ``model`` scored on the same
    windows); the program is compiled for ``model``'s structure, so every copy reuses it.

    Args:
      model: a :class:`jaxlab.nn.SimpleGPT` (its structure; its weights are not kept).
      data: 1-D held-out tokens, at least ``num_blocks · (seq_len + 1)`` long.
      num_blocks: ``>= 1`` blocks.
      windows: windows per block, ``>= 1``.
      seq_len: window length, ``>= 1``.
      rng_key: a JAX PRNG key.

    Returns:
      ``losses(model) -> float64 [num_blocks]``.

    Examples:
      >>> import jax
      >>> from flax import nnx
      >>> from jaxlab.nn import GPTConfig, SimpleGPT
      >>> model = SimpleGPT(GPTConfig(256, 32, 1, 2, max_len=8, multiple_of=32,
      ...                             norm_placement="pre"), rngs=nnx.Rngs(0))
      >>> losses = held_out_losses(model, np.arange(200) % 256, num_blocks=2, windows=3,
      ...                          seq_len=8, rng_key=jax.random.key(1))
      >>> losses(model).shape, bool(abs(losses(model).mean() - np.log(256)) < 0.5)
      ((2,), True)
    """
    num_blocks = check_int(num_blocks, "num_blocks", minimum=1)
    windows = check_int(windows, "windows", minimum=1)
    seq_len = check_int(seq_len, "seq_len", minimum=1)
    check_key(rng_key)
    check_instance(model, SimpleGPT, "model")
    size = len(data) // num_blocks
    if size < seq_len + 1:
        raise ValueError(
            f"data must hold num_blocks={num_blocks} blocks of at least seq_len + 1 = "
            f"{seq_len + 1} tokens, got {len(data)} tokens"
        )
    batches = [
        sample_batch(
            jax.random.fold_in(rng_key, b), data[b * size : (b + 1) * size], windows, seq_len
        )
        for b in range(num_blocks)
    ]
    tokens = jnp.stack([t for t, _ in batches])
    targets = jnp.stack([y for _, y in batches])
    graphdef = nnx.graphdef(model)

    @jax.jit
    def losses(state):
        m = nnx.merge(graphdef, state)
        return jax.lax.map(lambda ty: language_model_loss(m, *ty), (tokens, targets))

    return lambda m: np.asarray(losses(nnx.state(m)), np.float64)
