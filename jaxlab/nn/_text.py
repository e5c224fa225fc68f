"""A byte-level language-modeling pipeline with no downloads: corpus, split, batches, training.

The corpus is the running Python's own standard library (its ``.py`` sources, sorted by path and
concatenated), so every machine with the same Python version builds the same bytes. Tokens are
bytes (vocabulary 256). :func:`train_language_model` drives ``nnx.Optimizer`` with any optax
transform, in jitted ``lax.scan`` chunks, and returns the loss history as numpy arrays.
"""

from __future__ import annotations

import functools
import pathlib
import sys
import sysconfig
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxlab.nn._simplegpt import language_model_loss

__all__ = ["sample_batch", "split_corpus", "stdlib_byte_corpus", "train_language_model"]

# Third-party packages can live under the stdlib directory; they are not part of the corpus.
_EXCLUDED_DIRS = {"site-packages", "dist-packages", "__pycache__"}


def _check_positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


@functools.lru_cache(maxsize=4)
def _stdlib_bytes(max_bytes: int) -> bytes:
    root = pathlib.Path(sysconfig.get_paths()["stdlib"])
    if not root.is_dir():
        raise FileNotFoundError(f"the standard library directory {root} does not exist")
    files = sorted(
        (p for p in root.rglob("*.py") if not _EXCLUDED_DIRS & set(p.relative_to(root).parts)),
        key=lambda p: p.relative_to(root).as_posix(),
    )
    chunks, total = [], 0
    for path in files:
        data = path.read_bytes()
        chunks.append(data[: max_bytes - total])
        total += len(chunks[-1])
        if total >= max_bytes:
            break
    return b"".join(chunks)


def stdlib_byte_corpus(max_bytes: int = 2_000_000) -> np.ndarray:
    """The first ``max_bytes`` bytes of the Python standard library's ``.py`` sources.

    Files under ``sysconfig.get_paths()["stdlib"]`` ending in ``.py`` (third-party
    ``site-packages`` excluded) are sorted by relative path and concatenated; the result is
    deterministic for a given Python version (``sys.version``, record it with your results).

    Args:
      max_bytes: how many bytes to keep, ``>= 1``.

    Returns:
      A read-only ``uint8`` array of length ``min(max_bytes, total size)``.

    Examples:
      >>> data = stdlib_byte_corpus(1000)
      >>> data.dtype, data.shape
      (dtype('uint8'), (1000,))
      >>> bytes(stdlib_byte_corpus(1000)) == bytes(data)  # deterministic
      True
    """
    max_bytes = _check_positive_int(max_bytes, "max_bytes")
    data = np.frombuffer(_stdlib_bytes(max_bytes), dtype=np.uint8)
    if data.size == 0:
        raise FileNotFoundError(f"no .py sources found in the standard library of {sys.version}")
    return data


def split_corpus(data: Any, val_fraction: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """Splits a 1-D token array into a leading train part and a trailing validation part.

    ``n_val = ⌊val_fraction·n⌋`` tokens at the end are held out; contiguous, so no window spans
    both parts.

    Args:
      data: 1-D tokens.
      val_fraction: in ``(0, 1)``.

    Returns:
      ``(train, val)``.

    Examples:
      >>> train, val = split_corpus(np.arange(10), 0.2)
      >>> train.tolist(), val.tolist()
      ([0, 1, 2, 3, 4, 5, 6, 7], [8, 9])
    """
    data = np.asarray(data)
    if data.ndim != 1:
        raise ValueError(f"data must be 1-D, got shape {data.shape}")
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    n_val = int(val_fraction * data.size)
    if n_val < 1 or n_val >= data.size:
        raise ValueError(
            f"val_fraction={val_fraction} of {data.size} tokens leaves an empty train or "
            "validation part"
        )
    return data[: data.size - n_val], data[data.size - n_val :]


def sample_batch(
    rng_key: jax.Array, data: jax.Array, batch_size: int, seq_len: int
) -> tuple[jax.Array, jax.Array]:
    """Random windows of a token stream: ``tokens = data[s:s+T]``, ``targets = data[s+1:s+T+1]``.

    Starts ``s`` are uniform on ``{0, …, n − T − 1}``, one per row. Jit-friendly (``batch_size``
    and ``seq_len`` are static).

    Args:
      rng_key: a ``jax.random`` key.
      data: 1-D integer tokens (numpy or jax), length ``n >= seq_len + 1``.
      batch_size: rows ``B``.
      seq_len: ``T``.

    Returns:
      ``(tokens, targets)``, int32 arrays of shape ``(B, T)``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> tokens, targets = sample_batch(jax.random.key(0), jnp.arange(100), 4, 8)
      >>> tokens.shape, bool(jnp.all(targets == tokens + 1))
      ((4, 8), True)
    """
    batch_size = _check_positive_int(batch_size, "batch_size")
    seq_len = _check_positive_int(seq_len, "seq_len")
    data = jnp.asarray(data)
    if data.ndim != 1:
        raise ValueError(f"data must be 1-D, got shape {data.shape}")
    if not jnp.issubdtype(data.dtype, jnp.integer):
        raise TypeError(f"data must hold integer tokens, got dtype {data.dtype}")
    if data.shape[0] < seq_len + 1:
        raise ValueError(f"data has {data.shape[0]} tokens, fewer than seq_len + 1 = {seq_len + 1}")
    starts = jax.random.randint(rng_key, (batch_size,), 0, data.shape[0] - seq_len)
    window = jax.vmap(lambda s: jax.lax.dynamic_slice(data, (s,), (seq_len + 1,)))(starts)
    window = window.astype(jnp.int32)
    return window[:, :-1], window[:, 1:]


def train_language_model(
    model: nnx.Module,
    tx: optax.GradientTransformation,
    train_data: Any,
    *,
    steps: int,
    batch_size: int,
    seq_len: int,
    rng_key: jax.Array,
    eval_data: Any = None,
    eval_every: int = 100,
    eval_batches: int = 4,
    loss_fn: Callable[[nnx.Module, jax.Array, jax.Array], jax.Array] = language_model_loss,
    chunk_size: int | None = None,
    progress: Any = None,
) -> dict[str, np.ndarray]:
    """Trains ``model`` in place with any optax transform on random windows of ``train_data``.

    Each step draws a batch with :func:`sample_batch` (key ``fold_in(rng_key, step)``), takes
    ``nnx.value_and_grad(loss_fn)`` with respect to the ``nnx.Param`` variables and applies
    ``nnx.Optimizer(model, tx, wrt=nnx.Param).update``. Steps run as one jitted ``lax.scan`` per
    chunk of ``chunk_size`` steps (``eval_every`` when evaluating). Every ``eval_every`` steps
    and at the end, the mean loss over ``eval_batches`` fixed batches of ``eval_data`` (the same
    windows each time) is recorded. Nothing about the optimizer is assumed, so AdamW, Muon or a
    jaxlab transform all plug in.

    Args:
      model: an nnx module; trained in place.
      tx: any ``optax.GradientTransformation``.
      train_data: 1-D integer tokens.
      steps: optimizer steps, ``>= 1``.
      batch_size: rows per batch.
      seq_len: tokens per row.
      rng_key: a ``jax.random`` key (batches; the eval windows use a key split from it).
      eval_data: 1-D integer tokens for validation, or None.
      eval_every: steps between evaluations.
      eval_batches: batches averaged per evaluation.
      loss_fn: ``(model, tokens, targets) -> scalar``; default :func:`language_model_loss`.
      chunk_size: steps per jitted scan (default ``eval_every`` with eval data, else
        ``min(steps, 100)``).
      progress: optional object with ``track(iterable, total=, description=)``.

    Returns:
      ``{"train_loss": (steps,), "eval_step": (k,), "eval_loss": (k,)}`` numpy arrays (the eval
      arrays are empty without ``eval_data``); ``eval_step`` counts completed steps.

    Examples:
      >>> import jax, numpy as np
      >>> from flax import nnx
      >>> from jaxlab.nn import GPTConfig, SimpleGPT, simplegpt_optimizer
      >>> model = SimpleGPT(GPTConfig(256, 32, 1, 2, max_len=16, multiple_of=32),
      ...                   rngs=nnx.Rngs(0))
      >>> data = np.frombuffer(b"abcd" * 100, np.uint8)
      >>> history = train_language_model(model, simplegpt_optimizer(1e-2), data, steps=40,
      ...                                batch_size=4, seq_len=16, rng_key=jax.random.key(0))
      >>> history["train_loss"].shape, bool(history["train_loss"][-1] < 1.0)
      ((40,), True)
    """
    steps = _check_positive_int(steps, "steps")
    batch_size = _check_positive_int(batch_size, "batch_size")
    seq_len = _check_positive_int(seq_len, "seq_len")
    eval_every = _check_positive_int(eval_every, "eval_every")
    eval_batches = _check_positive_int(eval_batches, "eval_batches")
    if not isinstance(tx, optax.GradientTransformation):
        raise TypeError(f"tx must be an optax.GradientTransformation, got {type(tx).__name__}")
    if chunk_size is None:
        chunk_size = eval_every if eval_data is not None else min(steps, 100)
    chunk_size = _check_positive_int(chunk_size, "chunk_size")
    train = jnp.asarray(train_data)
    sample_batch(jax.random.key(0), train, batch_size, seq_len)  # validates shapes eagerly
    batch_key, eval_key = jax.random.split(rng_key)
    if eval_data is not None:
        eval_windows = sample_batch(
            eval_key, jnp.asarray(eval_data), eval_batches * batch_size, seq_len
        )
        eval_windows = jax.tree.map(
            lambda x: jnp.reshape(x, (eval_batches, batch_size, seq_len)), eval_windows
        )

    optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)
    graphdef, state = nnx.split((model, optimizer))

    @jax.jit
    def run_chunk(state, step_ids):
        def step(state, step_id):
            model, optimizer = nnx.merge(graphdef, state)
            tokens, targets = sample_batch(
                jax.random.fold_in(batch_key, step_id), train, batch_size, seq_len
            )
            loss, grads = nnx.value_and_grad(lambda m: loss_fn(m, tokens, targets))(model)
            optimizer.update(model, grads)
            return nnx.state((model, optimizer)), loss

        return jax.lax.scan(step, state, step_ids)

    @jax.jit
    def evaluate(state):
        model, _ = nnx.merge(graphdef, state)
        losses = jax.lax.map(lambda batch: loss_fn(model, *batch), eval_windows)
        return jnp.mean(losses)

    losses, eval_step, eval_loss = [], [], []
    stops = set(range(chunk_size, steps, chunk_size)) | {steps}
    if eval_data is not None:  # a chunk also ends at every evaluation
        stops |= set(range(eval_every, steps, eval_every))
    stops = sorted(stops)
    spans = list(zip([0, *stops[:-1]], stops, strict=True))
    if progress is not None:
        spans = progress.track(spans, total=len(spans), description="training")
    for start, stop in spans:
        state, chunk_losses = run_chunk(state, jnp.arange(start, stop))
        losses.append(np.asarray(chunk_losses))
        if eval_data is not None and (stop % eval_every == 0 or stop == steps):
            eval_step.append(stop)
            eval_loss.append(float(evaluate(state)))
    nnx.update((model, optimizer), state)
    return {
        "train_loss": np.concatenate(losses),
        "eval_step": np.asarray(eval_step, dtype=np.int64),
        "eval_loss": np.asarray(eval_loss, dtype=np.float32),
    }
