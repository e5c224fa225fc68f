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
    loss_curve_stability,
    sample_batch,
    scan_train,
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


def test_loss_curve_stability_rule():
    curve = np.linspace(6.0, 3.0, 100)
    assert loss_curve_stability(curve, warmup_steps=10)["stable"]
    not_learning = np.full(100, 6.0)
    assert not loss_curve_stability(not_learning, warmup_steps=10)["stable"]
    nan = curve.copy()
    nan[50] = np.nan
    assert not loss_curve_stability(nan, warmup_steps=10)["finite"]
    spike = curve.copy()
    spike[5] += 3.0  # during warmup: allowed
    assert loss_curve_stability(spike, warmup_steps=10)["stable"]
    spike[60] = spike[59] + 1.2  # after warmup, 1.2 above the running minimum
    rule = loss_curve_stability(spike, warmup_steps=10)
    assert not rule["stable"] and rule["max_spike"] == pytest.approx(1.2, abs=1e-9)
    assert rule["final"] == pytest.approx(np.mean(curve[-10:]))


def test_loss_curve_stability_bad_input():
    with pytest.raises(ValueError, match="losses"):
        loss_curve_stability(np.zeros((2, 3)), warmup_steps=0)
    with pytest.raises(ValueError, match="tail_steps"):
        loss_curve_stability(np.ones(5), warmup_steps=0, tail_steps=0)
    with pytest.raises(TypeError, match="warmup_steps"):
        loss_curve_stability(np.ones(5), warmup_steps=1.5)


def _least_squares():
    x = jax.random.normal(jax.random.key(0), (32, 3))
    y = x @ jnp.array([1.0, -2.0, 0.5])

    def loss_fn(w, batch):
        xb, yb = batch
        return jnp.mean((xb @ w["w"] - yb) ** 2) + 0.0 * w["b"]

    def batch(step):
        rows = jax.random.randint(jax.random.fold_in(jax.random.key(1), step), (8,), 0, 32)
        return x[rows], y[rows]

    return loss_fn, batch, {"w": jnp.zeros(3), "b": jnp.zeros(())}


def test_scan_train_matches_a_python_loop():
    loss_fn, batch, params = _least_squares()
    tx = optax.adam(optax.linear_schedule(0.1, 0.0, 12))
    result = jax.jit(lambda p: scan_train(loss_fn, p, tx, batch, 12, checkpoint_every=4))(params)
    # Independent path: an eager Python loop over optax's own update.
    p, state, losses, checkpoints = params, tx.init(params), [], []
    for step in range(12):
        loss, grads = jax.value_and_grad(loss_fn)(p, batch(jnp.int32(step)))
        updates, state = tx.update(grads, state, p)
        p = optax.apply_updates(p, updates)
        losses.append(float(loss))
        if (step + 1) % 4 == 0:
            checkpoints.append(p["w"])
    np.testing.assert_allclose(result.losses, losses, rtol=1e-5)
    np.testing.assert_allclose(result.params["w"], p["w"], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(result.checkpoints["w"], np.stack(checkpoints), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(result.checkpoints["w"][-1], result.params["w"])
    assert int(result.opt_state[0].count) == 12 and result.aux is None


def test_scan_train_chunks_continue_one_run_and_take_stacked_batches():
    loss_fn, batch, params = _least_squares()
    tx = optax.sgd(0.05, momentum=0.9)
    whole = scan_train(loss_fn, params, tx, batch, 10)
    first = scan_train(loss_fn, params, tx, batch, 6)
    second = scan_train(
        loss_fn, first.params, tx, batch, 4, opt_state=first.opt_state, start_step=jnp.int32(6)
    )
    np.testing.assert_allclose(
        np.concatenate([first.losses, second.losses]), whole.losses, rtol=1e-6
    )
    np.testing.assert_allclose(second.params["w"], whole.params["w"], rtol=1e-6)
    stacked = jax.vmap(batch)(jnp.arange(10))
    from_stack = scan_train(loss_fn, params, tx, stacked, 10)
    np.testing.assert_allclose(from_stack.losses, whole.losses, rtol=1e-6)


def test_scan_train_aux_and_vmapped_learning_rates():
    loss_fn, batch, params = _least_squares()

    def with_aux(p, b):
        loss = loss_fn(p, b)
        return loss, {"twice": 2.0 * loss}

    @jax.vmap
    def lanes(lr):
        result = scan_train(with_aux, params, optax.sgd(lr), batch, 5, has_aux=True)
        return result.losses, result.aux["twice"]

    losses, twice = lanes(jnp.array([0.0, 0.05]))
    np.testing.assert_allclose(twice, 2.0 * losses, rtol=1e-6)
    # lr 0 never moves: the loss is the initial loss on each step's batch.
    expected = [float(loss_fn(params, batch(jnp.int32(s)))) for s in range(5)]
    np.testing.assert_allclose(losses[0], expected, rtol=1e-6)
    assert losses[1, -1] < losses[0, -1]


def test_scan_train_bad_input():
    loss_fn, batch, params = _least_squares()
    with pytest.raises(ValueError, match="num_steps"):
        scan_train(loss_fn, params, optax.sgd(0.1), batch, 0)
    with pytest.raises(TypeError, match="tx"):
        scan_train(loss_fn, params, lambda g: g, batch, 2)
    with pytest.raises(ValueError, match="checkpoint_every"):
        scan_train(loss_fn, params, optax.sgd(0.1), batch, 5, checkpoint_every=2)
    with pytest.raises(ValueError, match="leading axis"):
        scan_train(loss_fn, params, optax.sgd(0.1), jax.vmap(batch)(jnp.arange(3)), 5)


def test_scan_train_traced_num_steps_is_one_compilation_for_every_length():
    loss_fn, batch, params = _least_squares()
    tx = optax.adam(0.05)
    traces = []

    @jax.jit
    def run(p, state, start, num_steps):
        traces.append(None)
        result = scan_train(loss_fn, p, tx, batch, num_steps, opt_state=state, start_step=start)
        assert result.losses is None and result.checkpoints is None
        return result.params, result.opt_state

    p, state = params, tx.init(params)
    for start, stop in ((0, 3), (3, 10)):
        p, state = run(p, state, jnp.int32(start), jnp.int32(stop - start))
    assert len(traces) == 1
    whole = scan_train(loss_fn, params, tx, batch, 10)
    np.testing.assert_allclose(p["w"], whole.params["w"], rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError, match="traced num_steps"):
        jax.jit(lambda n: scan_train(loss_fn, params, tx, batch, n, checkpoint_every=2))(4)


def test_training_loop_rejects_tokens_outside_the_vocabulary(periodic_data):
    model = SimpleGPT(GPTConfig(16, 8, 1, 2, max_len=8, multiple_of=8), rngs=nnx.Rngs(0))
    common = dict(steps=1, batch_size=2, seq_len=8, rng_key=jax.random.key(0))
    data = np.arange(40, dtype=np.int32) % 16
    # Inside jit a token >= V would only show up as a NaN loss: the stream is checked first.
    with pytest.raises(ValueError, match=r"train_data must lie in \[0, vocab_size=16\).*\[0, 20\]"):
        train_language_model(model, optax.sgd(0.1), np.where(data == 5, 20, data), **common)
    with pytest.raises(ValueError, match=r"eval_data must lie in \[0, vocab_size=16\)"):
        train_language_model(model, optax.sgd(0.1), data, eval_data=data - 1, **common)
    with pytest.raises(TypeError, match="train_data must be an array of integers"):
        train_language_model(model, optax.sgd(0.1), data.astype(np.float32), **common)
    with pytest.raises(TypeError, match="rng_key must be a JAX PRNG key"):
        train_language_model(model, optax.sgd(0.1), data, **{**common, "rng_key": None})
    history = train_language_model(model, optax.sgd(0.1), data, **common)  # valid: trains
    assert np.isfinite(history["train_loss"]).all()


def test_pipeline_pieces_reject_obscure_input():
    with pytest.raises(TypeError, match="rng_key must be a JAX PRNG key"):
        sample_batch(None, jnp.arange(20), 2, 4)
    with pytest.raises(TypeError, match="data must be an array of integers"):
        sample_batch(jax.random.key(0), "text", 2, 4)
    with pytest.raises(TypeError, match="data must be a real"):
        split_corpus(None)
    with pytest.raises(TypeError, match="losses must be a real"):
        loss_curve_stability("curve", warmup_steps=0)
    loss_fn = lambda w, b: jnp.sum(w**2)  # noqa: E731
    with pytest.raises(ValueError, match="start_step must be an int >= 0"):
        scan_train(loss_fn, jnp.ones(2), optax.sgd(0.1), lambda s: None, 1, start_step=-1)
    with pytest.raises(TypeError, match="has_aux must be a bool"):
        scan_train(loss_fn, jnp.ones(2), optax.sgd(0.1), lambda s: None, 1, has_aux=1)


def test_language_model_program_checkpoints_equal_one_run_and_scan_train():
    """Two checkpointed halves and one scan give the same run; the held-out loss is the mean."""
    from jaxlab.nn import language_model_program, sample_eval_batches

    data = jnp.asarray(np.frombuffer(b"the quick brown fox " * 40, np.uint8))
    evals = sample_eval_batches(jax.random.key(1), data, 2, 4, 16)
    tokens, targets = sample_batch(jax.random.key(1), data, 8, 16)
    np.testing.assert_array_equal(evals[0], tokens.reshape(2, 4, 16))
    gpt = GPTConfig(256, 32, 1, 2, max_len=16, multiple_of=32)
    args = (gpt, simplegpt_optimizer, data, evals)
    kwargs = dict(steps=6, batch_size=4, seq_len=16)
    keys = (jax.random.key(0), jnp.float32(1e-2), jax.random.key(2))
    one = jax.jit(language_model_program(*args, **kwargs))(*keys)
    two = jax.jit(language_model_program(*args, **kwargs, num_checkpoints=2))(*keys)
    np.testing.assert_allclose(one.losses, two.losses, rtol=1e-5)
    np.testing.assert_allclose(one.eval_loss, two.eval_loss, rtol=1e-5)
    assert jax.tree.leaves(two.checkpoints)[0].shape[0] == 2
    model = SimpleGPT(gpt, rngs=nnx.Rngs(params=keys[0]))
    params = nnx.state(model, nnx.Param)
    graphdef, _ = nnx.split(model)

    def loss(p, batch):
        return language_model_loss(nnx.merge(graphdef, p), *batch)

    batches = lambda s: sample_batch(jax.random.fold_in(keys[2], s), data, 4, 16)  # noqa: E731
    result = scan_train(loss, params, simplegpt_optimizer(1e-2), batches, 6)
    np.testing.assert_allclose(one.losses, result.losses, rtol=1e-5)
    with pytest.raises(ValueError, match="multiple of num_checkpoints"):
        language_model_program(*args, steps=5, batch_size=4, seq_len=16, num_checkpoints=2)


def test_learning_rate_limits_by_hand():
    from jaxlab.nn import learning_rate_limits

    good, bad = np.linspace(6.0, 3.0, 30), np.linspace(6.0, 5.9, 30)  # bad: drops only 0.1
    losses = [[good, good, good], [good, bad, good], [bad, bad, good]]
    vals = [[3.0, 3.1, 3.2], [2.9, 3.0, 2.8], [2.0, 2.0, float("nan")]]
    limits = learning_rate_limits(losses, vals, (0.1, 0.3, 1.0), warmup_steps=2)
    assert limits["limit_per_seed"] == [0.3, 0.1, 0.3]  # seed 2 at 1.0: NaN val loss, unstable
    assert limits["limit_median"] == 0.3
    assert limits["best_val_loss"] == pytest.approx(3.1)  # only lr 0.1 is stable on every seed
    assert [r["stable_all_seeds"] for r in limits["per_lr"]] == [True, False, False]
    with pytest.raises(ValueError, match="one row per learning rate"):
        learning_rate_limits(losses[:2], vals, (0.1, 0.3, 1.0), warmup_steps=2)
