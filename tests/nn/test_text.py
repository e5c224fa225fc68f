"""The byte-level corpus, the split, batching, and the generic training loop."""

from __future__ import annotations

import pathlib
import sysconfig

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from jaxlab.nn import (
    GPTConfig,
    SimpleGPT,
    language_model_loss,
    sample_batch,
    simplegpt_optimizer,
    split_corpus,
    stdlib_byte_corpus,
    train_language_model,
)


def test_corpus_is_the_sorted_stdlib_sources():
    data = stdlib_byte_corpus(50_000)
    assert data.dtype == np.uint8 and data.shape == (50_000,)
    # Independent path: the first file in sorted order, read directly.
    root = pathlib.Path(sysconfig.get_paths()["stdlib"])
    first = min(
        (p for p in root.rglob("*.py") if "site-packages" not in p.parts),
        key=lambda p: p.relative_to(root).as_posix(),
    )
    head = first.read_bytes()[:1000]
    assert bytes(data[: len(head)]) == head
    # Deterministic, and a prefix of a longer corpus.
    assert bytes(stdlib_byte_corpus(50_000)) == bytes(data)
    assert bytes(stdlib_byte_corpus(80_000)[:50_000]) == bytes(data)


def test_corpus_bad_input():
    with pytest.raises(ValueError, match="max_bytes"):
        stdlib_byte_corpus(0)


def test_split_corpus_is_contiguous():
    data = np.arange(1000) % 256
    train, val = split_corpus(data, 0.1)
    assert train.size == 900 and val.size == 100
    np.testing.assert_array_equal(np.concatenate([train, val]), data)
    with pytest.raises(ValueError, match="val_fraction"):
        split_corpus(data, 1.0)
    with pytest.raises(ValueError, match="empty"):
        split_corpus(np.arange(5), 0.1)
    with pytest.raises(ValueError, match="1-D"):
        split_corpus(np.zeros((2, 3)), 0.5)


def test_sample_batch_windows_are_shifted_slices():
    data = jnp.asarray(np.random.default_rng(0).integers(0, 256, 500), jnp.uint8)
    tokens, targets = jax.jit(sample_batch, static_argnums=(2, 3))(jax.random.key(1), data, 8, 16)
    assert tokens.shape == targets.shape == (8, 16) and tokens.dtype == jnp.int32
    host = np.asarray(data, np.int32)
    for row, target in zip(np.asarray(tokens), np.asarray(targets), strict=True):
        # Find the window in the data (an independent check of the slicing).
        starts = [s for s in range(500 - 16) if np.array_equal(host[s : s + 16], row)]
        assert starts and any(np.array_equal(host[s + 1 : s + 17], target) for s in starts)


def test_sample_batch_reaches_the_last_window():
    data = jnp.arange(11)  # exactly two windows of length 10 (+1 target)
    tokens, _ = sample_batch(jax.random.key(0), data, 64, 9)
    assert set(np.asarray(tokens[:, 0]).tolist()) == {0, 1}


def test_sample_batch_bad_input():
    with pytest.raises(ValueError, match="seq_len"):
        sample_batch(jax.random.key(0), jnp.arange(8), 2, 8)
    with pytest.raises(TypeError, match="integer"):
        sample_batch(jax.random.key(0), jnp.ones(20), 2, 4)
    with pytest.raises(ValueError, match="batch_size"):
        sample_batch(jax.random.key(0), jnp.arange(20), 0, 4)


@pytest.fixture(scope="module")
def periodic_data():
    return np.frombuffer(b"the quick brown fox. " * 40, np.uint8)


def test_training_loop_learns_and_matches_a_manual_loop(periodic_data):
    config = GPTConfig(256, 32, 1, 2, max_len=16, multiple_of=32)
    key = jax.random.key(0)
    model = SimpleGPT(config, rngs=nnx.Rngs(0))
    twin = SimpleGPT(config, rngs=nnx.Rngs(0))
    tx = simplegpt_optimizer(1e-2)
    history = train_language_model(
        model, tx, periodic_data, steps=12, batch_size=4, seq_len=16, rng_key=key, chunk_size=5
    )
    # Independent path: a Python loop of single nnx.Optimizer steps (no scan, no chunks) with
    # the documented batch keys.
    batch_key, _ = jax.random.split(key)
    optimizer = nnx.Optimizer(twin, tx, wrt=nnx.Param)
    data = jnp.asarray(periodic_data)

    @nnx.jit
    def manual_step(twin, optimizer, tokens, targets):
        loss, grads = nnx.value_and_grad(lambda m: language_model_loss(m, tokens, targets))(twin)
        optimizer.update(twin, grads)
        return loss

    manual = []
    for step in range(12):
        tokens, targets = sample_batch(jax.random.fold_in(batch_key, step), data, 4, 16)
        manual.append(float(manual_step(twin, optimizer, tokens, targets)))
    np.testing.assert_allclose(history["train_loss"], manual, rtol=2e-4, atol=2e-4)
    # The model was trained in place.
    np.testing.assert_allclose(model.head[...], twin.head[...], atol=1e-4)
    assert history["train_loss"][-1] < history["train_loss"][0] - 1.0


def test_training_loop_eval_and_any_optax_transform(periodic_data):
    config = GPTConfig(256, 32, 1, 2, max_len=16, multiple_of=32, norm_placement="pre")
    model = SimpleGPT(config, rngs=nnx.Rngs(1))
    history = train_language_model(
        model,
        optax.sgd(0.5),
        periodic_data[:600],
        steps=10,
        batch_size=4,
        seq_len=16,
        rng_key=jax.random.key(2),
        eval_data=periodic_data[600:],
        eval_every=4,
        eval_batches=2,
    )
    assert history["train_loss"].shape == (10,)
    np.testing.assert_array_equal(history["eval_step"], [4, 8, 10])
    assert history["eval_loss"].shape == (3,) and np.all(np.isfinite(history["eval_loss"]))
    # The last evaluation is the loss of the trained model on the documented eval windows.
    _, eval_key = jax.random.split(jax.random.key(2))
    tokens, targets = sample_batch(eval_key, jnp.asarray(periodic_data[600:]), 8, 16)
    expected = np.mean(
        [float(language_model_loss(model, tokens[i : i + 4], targets[i : i + 4])) for i in (0, 4)]
    )
    assert history["eval_loss"][-1] == pytest.approx(expected, rel=1e-4)


def test_training_loop_bad_input(periodic_data):
    model = SimpleGPT(GPTConfig(256, 32, 1, 2, max_len=16, multiple_of=32), rngs=nnx.Rngs(0))
    common = dict(batch_size=2, seq_len=8, rng_key=jax.random.key(0))
    with pytest.raises(ValueError, match="steps"):
        train_language_model(model, optax.sgd(0.1), periodic_data, steps=0, **common)
    with pytest.raises(TypeError, match="tx"):
        train_language_model(model, lambda g: g, periodic_data, steps=1, **common)
    with pytest.raises(ValueError, match="seq_len"):
        train_language_model(model, optax.sgd(0.1), periodic_data[:5], steps=1, **common)
