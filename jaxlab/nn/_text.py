"""A byte-level language-modeling pipeline with no downloads: corpus, split, batches, training.

The corpus is the running Python's own standard library (its ``.py`` sources, sorted by path and
concatenated), so every machine with the same Python version builds the same bytes. Tokens are
bytes (vocabulary 256). :func:`train_language_model` drives the library's one training loop,
:func:`jaxlab.nn.scan_train` (any loss on pure parameters, any optax transform, one ``lax.scan``;
it lives in ``jaxlab._src.training``) on an nnx
model in jitted chunks and returns the loss history as numpy arrays.
"""

from __future__ import annotations

import functools
import pathlib
import sys
import sysconfig
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxlab._src.training import scan_train
from jaxlab._src.validation import (
    check_array,
    check_callable,
    check_indices,
    check_int,
    check_key,
    check_positive_int,
    check_real,
)
from jaxlab.nn._simplegpt import GPTConfig, SimpleGPT, language_model_loss

__all__ = [
    "LanguageModelRun",
    "language_model_program",
    "learning_rate_limits",
    "loss_curve_stability",
    "sample_batch",
    "sample_eval_batches",
    "split_corpus",
    "stdlib_byte_corpus",
    "train_language_model",
]

# Third-party packages can live under the stdlib directory; they are not part of the corpus.
_EXCLUDED_DIRS = {"site-packages", "dist-packages", "__pycache__"}


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
    max_bytes = check_positive_int(max_bytes, "max_bytes")
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
    data = check_array(data, "data", host=True)
    if data.ndim != 1:
        raise ValueError(f"data must be 1-D, got shape {data.shape}")
    check_real(
        val_fraction,
        "val_fraction",
        minimum=0.0,
        maximum=1.0,
        include_minimum=False,
        include_maximum=False,
    )
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
    check_key(rng_key)
    batch_size = check_positive_int(batch_size, "batch_size")
    seq_len = check_positive_int(seq_len, "seq_len")
    data = check_array(data, "data", kind="integer")
    if data.ndim != 1:
        raise ValueError(f"data must be 1-D, got shape {data.shape}")
    if data.shape[0] < seq_len + 1:
        raise ValueError(f"data has {data.shape[0]} tokens, fewer than seq_len + 1 = {seq_len + 1}")
    starts = jax.random.randint(rng_key, (batch_size,), 0, data.shape[0] - seq_len)
    window = jax.vmap(lambda s: jax.lax.dynamic_slice(data, (s,), (seq_len + 1,)))(starts)
    window = window.astype(jnp.int32)
    return window[:, :-1], window[:, 1:]


def sample_eval_batches(
    rng_key: jax.Array, data: jax.Array, num_batches: int, batch_size: int, seq_len: int
) -> tuple[jax.Array, jax.Array]:
    """Fixed held-out batches: :func:`sample_batch` of ``num_batches · batch_size`` rows, stacked.

    Args:
      rng_key: a ``jax.random`` key.
      data: 1-D integer tokens, length ``>= seq_len + 1``.
      num_batches: batches ``E``.
      batch_size: rows per batch ``B``.
      seq_len: ``T``.

    Returns:
      ``(tokens, targets)``, int32 arrays of shape ``(E, B, T)`` (map a loss over the first axis).

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> tokens, targets = sample_eval_batches(jax.random.key(0), jnp.arange(100), 3, 4, 8)
      >>> tokens.shape, bool(jnp.all(targets == tokens + 1))
      ((3, 4, 8), True)
    """
    num_batches = check_positive_int(num_batches, "num_batches")
    batch_size = check_positive_int(batch_size, "batch_size")
    windows = sample_batch(rng_key, data, num_batches * batch_size, seq_len)
    return jax.tree.map(lambda x: jnp.reshape(x, (num_batches, batch_size, seq_len)), windows)


class LanguageModelRun(NamedTuple):
    """What a :func:`language_model_program` run returns.

    Attributes:
      checkpoints: ``(params, opt_state)`` after each of the ``num_checkpoints`` equal chunks of
        training, stacked on a leading ``num_checkpoints`` axis (the last is the final state).
      losses: ``(steps,)`` training loss of every step.
      eval_loss: the mean loss of the final parameters over the held-out batches.

    Examples:
      >>> LanguageModelRun._fields
      ('checkpoints', 'losses', 'eval_loss')
    """

    checkpoints: Any
    losses: jax.Array
    eval_loss: jax.Array


def language_model_program(
    config: GPTConfig,
    optimizer: Callable[[jax.Array], optax.GradientTransformation],
    train_data: Any,
    eval_batches: tuple[jax.Array, jax.Array],
    *,
    steps: int,
    batch_size: int,
    seq_len: int,
    num_checkpoints: int = 1,
) -> Callable[[jax.Array, jax.Array, jax.Array], LanguageModelRun]:
    """One pure training run of a :class:`SimpleGPT`, ``(init_key, peak_lr, data_key) -> run``.

    The returned function draws the initial parameters (``nnx.Rngs(params=init_key)``), builds
    ``optimizer(peak_lr)`` (the peak learning rate is a traced argument, so one compilation
    serves a whole learning-rate grid, and ``jax.vmap`` trains several lanes at once), trains
    ``steps`` steps with :func:`jaxlab.nn.scan_train` on :func:`sample_batch` windows of
    ``train_data`` (step ``s`` draws with ``fold_in(data_key, s)``), keeps the state after each of
    ``num_checkpoints`` equal chunks (one ``lax.scan`` over chunks of one compiled body) and
    evaluates the final parameters on ``eval_batches``. Wrap it in ``jax.jit`` (and ``jax.vmap``).

    Args:
      config: the model's :class:`GPTConfig`.
      optimizer: ``peak_lr -> optax.GradientTransformation`` (a schedule belongs inside).
      train_data: 1-D integer tokens.
      eval_batches: ``(tokens, targets)`` of shape ``(E, B, T)``
        (:func:`sample_eval_batches`).
      steps: optimizer steps, a multiple of ``num_checkpoints``.
      batch_size: rows per training batch.
      seq_len: tokens per row.
      num_checkpoints: chunks whose final state is kept.

    Returns:
      ``program(init_key, peak_lr, data_key) -> LanguageModelRun``.

    Examples:
      >>> import jax, jax.numpy as jnp, numpy as np
      >>> from jaxlab.nn import GPTConfig, simplegpt_optimizer
      >>> data = jnp.asarray(np.frombuffer(b"abcd" * 100, np.uint8))
      >>> evals = sample_eval_batches(jax.random.key(1), data, 2, 4, 16)
      >>> program = language_model_program(
      ...     GPTConfig(256, 32, 1, 2, max_len=16, multiple_of=32), simplegpt_optimizer, data,
      ...     evals, steps=40, batch_size=4, seq_len=16, num_checkpoints=2)
      >>> run = jax.jit(program)(jax.random.key(0), jnp.float32(1e-2), jax.random.key(2))
      >>> run.losses.shape, bool(run.eval_loss < 1.0)
      ((40,), True)
    """
    if not isinstance(config, GPTConfig):
        raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
    check_callable(optimizer, "optimizer")
    steps = check_positive_int(steps, "steps")
    batch_size = check_positive_int(batch_size, "batch_size")
    seq_len = check_positive_int(seq_len, "seq_len")
    num_checkpoints = check_positive_int(num_checkpoints, "num_checkpoints")
    if steps % num_checkpoints:
        raise ValueError(
            f"steps must be a multiple of num_checkpoints={num_checkpoints}, got {steps}"
        )
    train = check_array(train_data, "train_data", kind="integer")
    sample_batch(jax.random.key(0), train, batch_size, seq_len)  # validates shapes eagerly
    graphdef, _ = nnx.split(nnx.eval_shape(lambda: SimpleGPT(config, rngs=nnx.Rngs(0))))
    chunk = steps // num_checkpoints

    def loss_of(params, batch):
        return language_model_loss(nnx.merge(graphdef, params), *batch)

    def program(init_key, peak_lr, data_key) -> LanguageModelRun:
        params = nnx.state(SimpleGPT(config, rngs=nnx.Rngs(params=init_key)), nnx.Param)
        tx = optimizer(peak_lr)

        def batch(step_id):
            key = jax.random.fold_in(data_key, step_id)
            return sample_batch(key, train, batch_size, seq_len)

        if num_checkpoints == 1:
            result = scan_train(loss_of, params, tx, batch, steps)
            final = (result.params, result.opt_state)
            checkpoints = jax.tree.map(lambda x: x[None], final)
            losses = result.losses
        else:

            def train_chunk(carry, index):
                start_step = index * chunk
                result = scan_train(
                    loss_of, carry[0], tx, batch, chunk, opt_state=carry[1], start_step=start_step
                )
                carry = (result.params, result.opt_state)
                return carry, (carry, result.losses)

            start = (params, tx.init(params))
            _, (checkpoints, losses) = jax.lax.scan(train_chunk, start, jnp.arange(num_checkpoints))
            final = jax.tree.map(lambda x: x[-1], checkpoints)
            losses = jnp.ravel(losses)
        held_out = jax.lax.map(lambda b: loss_of(final[0], b), eval_batches)
        return LanguageModelRun(checkpoints, losses, jnp.mean(held_out))

    return program


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
    the gradient of ``loss_fn`` with respect to the ``nnx.Param`` variables and applies ``tx``
    (what ``nnx.Optimizer(model, tx, wrt=nnx.Param).update`` does; other variables are held
    fixed). Steps run as one jitted :func:`scan_train` per chunk of ``chunk_size`` steps
    (``eval_every`` when evaluating). Every ``eval_every`` steps
    and at the end, the mean loss over ``eval_batches`` fixed batches of ``eval_data`` (the same
    windows each time) is recorded. Nothing about the optimizer is assumed, so AdamW, Muon or a
    jaxlab transform all plug in.

    Tokens outside the vocabulary: when ``model`` has ``config.vocab_size`` (a
    :class:`~jaxlab.nn.SimpleGPT`), ``train_data`` and ``eval_data`` are checked against it
    before anything is compiled (a ``ValueError`` naming the argument, ``vocab_size`` and the
    range found). A non-finite loss is not masked: it shows in ``train_loss`` (and the
    parameters it produced are kept), so check ``np.isfinite(history["train_loss"])``.

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
    steps = check_positive_int(steps, "steps")
    batch_size = check_positive_int(batch_size, "batch_size")
    seq_len = check_positive_int(seq_len, "seq_len")
    eval_every = check_positive_int(eval_every, "eval_every")
    eval_batches = check_positive_int(eval_batches, "eval_batches")
    if not isinstance(tx, optax.GradientTransformation):
        raise TypeError(f"tx must be an optax.GradientTransformation, got {type(tx).__name__}")
    if not isinstance(model, nnx.Module):
        raise TypeError(f"model must be an nnx.Module, got {type(model).__name__}")
    check_callable(loss_fn, "loss_fn")
    check_key(rng_key)
    if chunk_size is None:
        chunk_size = eval_every if eval_data is not None else min(steps, 100)
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    train = check_array(train_data, "train_data", kind="integer")
    sample_batch(jax.random.key(0), train, batch_size, seq_len)  # validates shapes eagerly
    # Batches are drawn inside jit, where a bad token could only make the loss NaN: check the
    # whole stream against the model's vocabulary here, once.
    vocab_size = getattr(getattr(model, "config", None), "vocab_size", None)
    if isinstance(vocab_size, int):
        check_indices(train, "train_data", vocab_size, "vocab_size")
    if eval_data is not None:
        eval_data = check_array(eval_data, "eval_data", kind="integer")
        if isinstance(vocab_size, int):
            check_indices(eval_data, "eval_data", vocab_size, "vocab_size")
    batch_key, eval_key = jax.random.split(rng_key)
    if eval_data is not None:
        eval_windows = sample_batch(
            eval_key, jnp.asarray(eval_data), eval_batches * batch_size, seq_len
        )
        eval_windows = jax.tree.map(
            lambda x: jnp.reshape(x, (eval_batches, batch_size, seq_len)), eval_windows
        )

    graphdef, params, rest = nnx.split(model, nnx.Param, ...)

    def loss_of(params, batch):
        return loss_fn(nnx.merge(graphdef, params, rest), *batch)

    def batch_of(step_id):
        return sample_batch(jax.random.fold_in(batch_key, step_id), train, batch_size, seq_len)

    @functools.partial(jax.jit, static_argnums=2)
    def run_chunk(state, start, num_steps):
        result = scan_train(
            loss_of, state[0], tx, batch_of, num_steps, opt_state=state[1], start_step=start
        )
        return (result.params, result.opt_state), result.losses

    @jax.jit
    def evaluate(state):
        losses = jax.lax.map(lambda batch: loss_of(state[0], batch), eval_windows)
        return jnp.mean(losses)

    state = (params, tx.init(params))
    losses, eval_step, eval_loss = [], [], []
    stops = set(range(chunk_size, steps, chunk_size)) | {steps}
    if eval_data is not None:  # a chunk also ends at every evaluation
        stops |= set(range(eval_every, steps, eval_every))
    stops = sorted(stops)
    spans = list(zip([0, *stops[:-1]], stops, strict=True))
    if progress is not None:
        spans = progress.track(spans, total=len(spans), description="training")
    for start, stop in spans:
        state, chunk_losses = run_chunk(state, jnp.int32(start), stop - start)
        losses.append(np.asarray(chunk_losses))
        if eval_data is not None and (stop % eval_every == 0 or stop == steps):
            eval_step.append(stop)
            eval_loss.append(float(evaluate(state)))
    nnx.update(model, state[0])
    return {
        "train_loss": np.concatenate(losses),
        "eval_step": np.asarray(eval_step, dtype=np.int64),
        "eval_loss": np.asarray(eval_loss, dtype=np.float32),
    }


def loss_curve_stability(
    losses: np.ndarray,
    *,
    warmup_steps: int,
    min_drop: float = 0.5,
    spike_threshold: float = 1.0,
    tail_steps: int = 10,
) -> dict[str, Any]:
    """Whether a training run was stable: it learned, stayed finite and never spiked after warmup.

    Stable = every loss finite, ``mean(losses[-tail_steps:]) < losses[0] − min_drop`` and
    ``max_{s >= warmup} (losses[s] − min_{r <= s} losses[r]) <= spike_threshold``: the rule that
    defines the largest stable learning rate of an LR sweep (``notes/simplegpt.md``).

    Args:
      losses: the train-loss curve of one run, ``(steps,)``.
      warmup_steps: leading steps where spikes are allowed (the LR warmup), ``>= 0``.
      min_drop: the final loss must be this far below the first loss.
      spike_threshold: the most a loss may rise above the running minimum after warmup.
      tail_steps: steps averaged into the final loss, ``>= 1``.

    Returns:
      ``{"stable", "finite", "final", "drop", "max_spike"}`` (``final`` the tail mean, ``drop``
      the first loss minus it, ``max_spike`` the largest post-warmup rise; ``inf`` when a loss
      is not finite).

    Examples:
      >>> import numpy as np
      >>> curve = np.linspace(6.0, 3.0, 50)
      >>> loss_curve_stability(curve, warmup_steps=5)["stable"]
      True
      >>> spiky = curve.copy(); spiky[30] += 1.5  # 1.5 above the running minimum after warmup
      >>> rule = loss_curve_stability(spiky, warmup_steps=5)
      >>> rule["max_spike"] > 1.0, rule["stable"]
      (True, False)

    References:
      Chen et al., "SimpleGPT: Improving GPT via A Simple Normalization Strategy", ICML 2026
      (the learning-rate sweep whose stability rule this is).
    """
    losses = check_array(losses, "losses", host=True).astype(np.float64)
    if losses.ndim != 1 or losses.size == 0:
        raise ValueError(f"losses must be a non-empty 1-D curve, got shape {losses.shape}")
    check_int(warmup_steps, "warmup_steps", minimum=0)
    tail_steps = check_positive_int(tail_steps, "tail_steps")
    check_real(min_drop, "min_drop")
    check_real(spike_threshold, "spike_threshold", minimum=0.0)
    finite = bool(np.all(np.isfinite(losses)))
    final = float(np.mean(losses[-tail_steps:]))
    if finite:
        running_min = np.minimum.accumulate(losses)
        max_spike = float(np.max(losses[warmup_steps:] - running_min[warmup_steps:], initial=0.0))
    else:
        max_spike = float("inf")
    drop = float(losses[0] - final) if finite else float("nan")
    stable = finite and drop > min_drop and max_spike <= spike_threshold
    return {
        "stable": bool(stable),
        "finite": finite,
        "final": final,
        "drop": drop,
        "max_spike": max_spike,
    }


def learning_rate_limits(
    losses: Any,
    val_losses: Any,
    learning_rates: Any,
    *,
    warmup_steps: int,
    min_drop: float = 0.5,
    spike_threshold: float = 1.0,
    tail_steps: int = 10,
) -> dict[str, Any]:
    """The largest stable learning rate of an LR sweep, per seed, by :func:`loss_curve_stability`.

    A run (learning rate ``i``, seed ``s``) is stable when its training curve passes
    :func:`loss_curve_stability` and its validation loss is finite; the limit of seed ``s`` is the
    largest learning rate whose run is stable on that seed (0.0 when none is), and the sweep's
    limit the median over seeds.

    Args:
      losses: training curves, ``(num_lrs, num_seeds, steps)``.
      val_losses: final validation losses, ``(num_lrs, num_seeds)``.
      learning_rates: the ``num_lrs`` learning rates.
      warmup_steps: see :func:`loss_curve_stability`.
      min_drop: see :func:`loss_curve_stability`.
      spike_threshold: see :func:`loss_curve_stability`.
      tail_steps: see :func:`loss_curve_stability`.

    Returns:
      ``{"per_lr", "limit_per_seed", "limit_median", "best_val_loss"}``: ``per_lr`` one record per
      learning rate (``lr``, ``stable`` per seed, ``stable_all_seeds``, ``val_loss`` per seed,
      ``val_loss_median``, ``runs``: the stability records), ``best_val_loss`` the smallest median
      validation loss among learning rates stable on every seed (NaN when none is).

    Examples:
      >>> import numpy as np
      >>> good = np.linspace(6.0, 3.0, 50)
      >>> bad = np.full(50, np.nan)
      >>> losses = np.stack([[good, good], [good, bad]])  # lrs (0.1, 1.0) x 2 seeds
      >>> limits = learning_rate_limits(losses, [[3.1, 3.0], [2.9, 3.0]], (0.1, 1.0),
      ...                               warmup_steps=5)
      >>> limits["limit_per_seed"], limits["best_val_loss"]
      ([1.0, 0.1], 3.05)
    """
    learning_rates = list(learning_rates)
    val_losses = check_array(val_losses, "val_losses", host=True)
    if len(losses) != len(learning_rates) or val_losses.shape[0] != len(learning_rates):
        raise ValueError(
            f"losses and val_losses must have one row per learning rate ({len(learning_rates)}), "
            f"got {len(losses)} and {val_losses.shape[0]}"
        )
    rule = dict(
        warmup_steps=warmup_steps,
        min_drop=min_drop,
        spike_threshold=spike_threshold,
        tail_steps=tail_steps,
    )
    per_lr = []
    for lr, curves, vals in zip(learning_rates, losses, val_losses, strict=True):
        runs = [loss_curve_stability(curve, **rule) for curve in curves]
        vals = [float(v) for v in vals]
        stable = [r["stable"] and np.isfinite(v) for r, v in zip(runs, vals, strict=True)]
        per_lr.append(
            {
                "lr": lr,
                "stable": [bool(x) for x in stable],
                "stable_all_seeds": bool(all(stable)),
                "val_loss": vals,
                "val_loss_median": float(np.median(vals)),
                "runs": runs,
            }
        )
    num_seeds = val_losses.shape[1]
    limit_per_seed = [
        max([r["lr"] for r in per_lr if r["stable"][s]], default=0.0) for s in range(num_seeds)
    ]
    stable_vals = [r["val_loss_median"] for r in per_lr if r["stable_all_seeds"]]
    return {
        "per_lr": per_lr,
        "limit_per_seed": limit_per_seed,
        "limit_median": float(np.median(limit_per_seed)),
        "best_val_loss": min(stable_vals) if stable_vals else float("nan"),
    }
