"""EF and EF21 transforms: against plain GD, a numpy reference of the paper's recursions, four
execution paths (vmap, pmap and shard_map over 8 devices, 2 processes), nnx.Optimizer,
inject_hyperparams, bit counts and bad input.

The module's top level stays light (no flax): ``_two_process_worker`` is imported by the child
processes of :func:`jaxlab.distributed.launch`.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxlab import optim

AXIS = "workers"


# ------------------------------------------------------------------------------------------------
# A small multi-worker least-squares problem: f_i(x) = ||A_i x - b_i||^2 / (2 m).


def _problem(num_workers, dim=8, rows=12, seed=0, dtype=np.float64):
    """Per-worker data with a shared minimiser (noise-free targets), feature scales 1 to 0.3."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(num_workers, rows, dim)) * np.linspace(1.0, 0.3, dim)[None, None, :]
    x_star = rng.normal(size=dim)
    b = a @ x_star
    x0 = rng.normal(size=dim)
    return a.astype(dtype), b.astype(dtype), x0.astype(dtype)


def _worker_trajectory(make_tx, a_i, b_i, x0, steps):
    """One worker's loop: its gradient at the shared iterate, the transform, ``x <- x + u``."""
    tx = make_tx()
    rows = a_i.shape[0]

    def body(carry, _):
        x, state = carry
        grad = a_i.T @ (a_i @ x - b_i) / rows
        updates, state = tx.update(grad, state, x)
        x = optax.apply_updates(x, updates)
        return (x, state), x

    (_, state), xs = jax.lax.scan(body, (x0, tx.init(x0)), None, length=steps)
    return xs, state


def _run_vmap(make_tx, a, b, x0, steps):
    """All workers on one device: ``jax.vmap(..., axis_name=AXIS)``; returns (xs, state)."""
    fn = functools.partial(_worker_trajectory, make_tx, x0=x0, steps=steps)
    return jax.jit(jax.vmap(fn, axis_name=AXIS))(a, b)


# ------------------------------------------------------------------------------------------------
# Hand-written numpy references of the note's recursions.


def _np_top_k(v, k):
    keep = np.argsort(-np.abs(v), kind="stable")[:k]
    out = np.zeros_like(v)
    out[keep] = v[keep]
    return out


def _np_grads(a, b, x):
    return np.einsum("imd,im->id", a, a @ x - b) / a.shape[1]


def _np_ef(a, b, x0, eta, compress, steps):
    """EF: p_i = e_i + eta g_i; c_i = C(p_i); x -= mean_i c_i; e_i = p_i - c_i."""
    n = a.shape[0]
    x, e, xs = x0.copy(), np.zeros((n, x0.size)), []
    for t in range(steps):
        g = _np_grads(a, b, x)
        p = e + eta * g
        c = np.stack([compress(p[i], t, i) for i in range(n)])
        x = x - c.mean(axis=0)
        e = p - c
        xs.append(x)
    return np.array(xs)


def _np_ef21(a, b, x0, eta, compress, steps, init="full"):
    """EF21: x^{t+1} = x^t - eta mean_i g_i^t; g_i^{t+1} = g_i^t + C(grad_i(x^{t+1}) - g_i^t)."""
    n = a.shape[0]
    grad = _np_grads(a, b, x0)
    if init == "full":
        g = grad
    else:
        g = np.stack([compress(grad[i], 0, i) for i in range(n)])
    x, xs = x0.copy(), []
    for t in range(1, steps + 1):
        x = x - eta * g.mean(axis=0)
        xs.append(x)
        grad = _np_grads(a, b, x)
        g = g + np.stack([compress(grad[i] - g[i], t, i) for i in range(n)])
    return np.array(xs)


@pytest.mark.parametrize("method", ["ef", "ef21", "ef21_compressed"])
def test_matches_numpy_reference_of_the_recursions(method, x64):
    a, b, x0 = _problem(num_workers=4)
    eta, k, steps = 0.2, 3, 25
    compress = lambda v, t, i: _np_top_k(v, k)
    if method == "ef":
        make = lambda: optim.error_feedback(eta, optim.top_k(k), axis_name=AXIS)
        expected = _np_ef(a, b, x0, eta, compress, steps)
    else:
        init = "full" if method == "ef21" else "compressed"
        make = lambda: optim.error_feedback_21(eta, optim.top_k(k), init=init, axis_name=AXIS)
        expected = _np_ef21(a, b, x0, eta, compress, steps, init=init)
    xs, _ = _run_vmap(make, jnp.asarray(a), jnp.asarray(b), jnp.asarray(x0), steps)
    assert xs.dtype == jnp.float64
    for worker in range(a.shape[0]):  # every worker holds the same iterate
        np.testing.assert_allclose(np.asarray(xs[worker]), expected, rtol=1e-10, atol=1e-12)
    # Compression is in effect: the trajectory is not gradient descent's.
    gd = _np_ef(a, b, x0, eta, lambda v, t, i: v, steps)
    assert np.max(np.abs(expected - gd)) > 1e-3


def test_ef21_rand_k_follows_the_documented_key_schedule(x64):
    # Step t: (key, step_key) = split(key); worker i compresses with fold_in(step_key, i), and
    # the compressor gives leaf j (here one leaf, j = 0) the key fold_in(that key, j).
    a, b, x0 = _problem(num_workers=3)
    eta, steps, seed = 0.2, 6, 11
    compressor = optim.rand_k(3)
    keys, key = [], jax.random.PRNGKey(seed)
    for _ in range(steps + 1):
        key, step_key = jax.random.split(key)
        keys.append(step_key)

    def compress(v, t, i):
        worker_key = jax.random.fold_in(jax.random.fold_in(keys[t], i), 0)
        return np.asarray(compressor.compress(jnp.asarray(v), worker_key))

    # The transform's call t (0-based) compresses the gradient at x^t.
    expected = _np_ef21(a, b, x0, eta, compress, steps, init="compressed")
    make = lambda: optim.error_feedback_21(
        eta, compressor, init="compressed", axis_name=AXIS, seed=seed
    )
    xs, _ = _run_vmap(make, jnp.asarray(a), jnp.asarray(b), jnp.asarray(x0), steps)
    np.testing.assert_allclose(np.asarray(xs[0]), expected, rtol=1e-10, atol=1e-12)
    # Workers draw different coordinates (the same key everywhere would give equal patterns).
    patterns = [tuple(compress(np.ones(8), 1, i) != 0) for i in range(3)]
    assert len(set(patterns)) > 1


# ------------------------------------------------------------------------------------------------
# The identity compressor gives plain gradient descent.


def _grad_sequence(steps, seed=0):
    key = jax.random.PRNGKey(seed)
    out = []
    for t in range(steps):
        k1, k2 = jax.random.split(jax.random.fold_in(key, t))
        out.append({"w": jax.random.normal(k1, (3, 4)), "b": jax.random.normal(k2, (4,))})
    return out


@pytest.mark.parametrize("name", ["ef", "ef21"])
def test_identity_compressor_equals_sgd(name):
    lr = 0.05
    factory = {"ef": optim.error_feedback, "ef21": optim.error_feedback_21}[name]
    tx, sgd = factory(lr, optim.identity()), optax.sgd(lr)
    params = {"w": jnp.ones((3, 4)), "b": jnp.zeros(4)}
    state, sgd_state = tx.init(params), sgd.init(params)
    update, sgd_update = jax.jit(tx.update), jax.jit(sgd.update)
    p, q = params, params
    for grads in _grad_sequence(6):
        previous = jax.tree.leaves(_ef_state(state)[1])  # EF21's g before the update
        u, state = update(grads, state, p)
        v, sgd_state = sgd_update(grads, sgd_state, q)
        for i, (leaf_u, leaf_v) in enumerate(
            zip(jax.tree.leaves(u), jax.tree.leaves(v), strict=True)
        ):
            leaf_u, leaf_v = np.asarray(leaf_u), np.asarray(leaf_v)
            if name == "ef":  # p = 0 + u = u and C(p) = p: bitwise
                np.testing.assert_array_equal(leaf_u, leaf_v)
            else:
                # g + (grad - g) rounds twice: within 2 ulp of max(|g|, |grad|) of grad, which
                # the step scales by lr (plus the ulp of rounding the product).
                grad = np.asarray(jax.tree.leaves(grads)[i])
                scale = np.maximum(np.abs(np.asarray(previous[i])), np.abs(grad))
                tol = lr * 2 * np.spacing(scale) + np.spacing(np.abs(leaf_v))
                assert np.all(np.abs(leaf_u - leaf_v) <= tol)
        p, q = optax.apply_updates(p, u), optax.apply_updates(q, v)
    for leaf_p, leaf_q in zip(jax.tree.leaves(p), jax.tree.leaves(q), strict=True):
        np.testing.assert_allclose(np.asarray(leaf_p), np.asarray(leaf_q), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", ["ef", "ef21"])
def test_identity_compressor_with_workers_equals_gd_on_the_mean_gradient(name):
    a, b, x0 = (jnp.asarray(t) for t in _problem(4, dtype=np.float32))
    factory = {"ef": optim.error_feedback, "ef21": optim.error_feedback_21}[name]
    xs, _ = _run_vmap(lambda: factory(0.2, optim.identity(), axis_name=AXIS), a, b, x0, 10)
    x, expected = np.asarray(x0, np.float64), []
    for _ in range(10):
        x = x - 0.2 * _np_grads(np.asarray(a, np.float64), np.asarray(b, np.float64), x).mean(0)
        expected.append(x)
    np.testing.assert_allclose(np.asarray(xs[0]), np.array(expected), rtol=2e-5, atol=2e-6)


# ------------------------------------------------------------------------------------------------
# Three execution paths: vmap on one device, shard_map over 8 devices, 2 processes.


_PATH_STEPS = 6


def _path_tx(method):
    if method == "ef21_rand_k":
        return optim.error_feedback_21(0.1, optim.rand_k(ratio=0.25), axis_name=AXIS, seed=3)
    return optim.error_feedback(0.1, optim.top_k(ratio=0.25), axis_name=AXIS)


def _ef_state(chain_state):
    """The EF/EF21 state inside an alias's ``optax.chain`` state."""
    (state,) = [s for s in chain_state if hasattr(s, "bits")]
    return state


def _path_worker(method, a_i, b_i, x0):
    xs, chain_state = _worker_trajectory(lambda: _path_tx(method), a_i, b_i, x0, _PATH_STEPS)
    state = _ef_state(chain_state)
    return xs, state[1], state.bits  # state[1]: the residual e_i (EF) or the estimate g_i (EF21)


def _assert_trees_close(actual, expected, rtol=1e-5, atol=1e-6):
    for x, y in zip(jax.tree.leaves(actual), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


@pytest.mark.parametrize("method", ["ef", "ef21_rand_k"])
def test_vmap_pmap_and_shard_map_over_8_devices_agree(method):
    from jax.sharding import NamedSharding, PartitionSpec

    if jax.device_count() < 8:
        pytest.skip("needs the 8 simulated devices of tests/conftest.py")
    a, b, x0 = (jnp.asarray(t) for t in _problem(8, dtype=np.float32))
    worker = functools.partial(_path_worker, method)
    by_vmap = jax.jit(jax.vmap(worker, axis_name=AXIS, in_axes=(0, 0, None)))(a, b, x0)

    mesh = jax.make_mesh((8,), (AXIS,))
    spec = PartitionSpec(AXIS)

    def per_device(a, b, x0):
        out = worker(a[0], b[0], x0)
        return jax.tree.map(lambda y: y[None], out)

    sharded = jax.shard_map(
        per_device, mesh=mesh, in_specs=(spec, spec, PartitionSpec()), out_specs=spec
    )
    a_s, b_s = jax.device_put((a, b), NamedSharding(mesh, spec))
    x0_s = jax.device_put(x0, NamedSharding(mesh, PartitionSpec()))
    by_shard_map = jax.jit(sharded)(a_s, b_s, x0_s)
    _assert_trees_close(by_shard_map, by_vmap)
    # jax.pmap, one worker per device: the same per-worker code, unchanged.
    by_pmap = jax.pmap(worker, axis_name=AXIS, in_axes=(0, 0, None))(a, b, x0)
    _assert_trees_close(by_pmap, by_vmap)
    # The iterate moved and every worker holds the same one.
    xs = np.asarray(by_vmap[0])
    assert np.max(np.abs(xs[:, -1] - np.asarray(x0))) > 1e-3
    np.testing.assert_allclose(xs, np.broadcast_to(xs[:1], xs.shape), rtol=1e-6)


def _two_process_worker(method, a, b, x0):
    """Runs in each of the 2 processes of ``launch``: one worker per process, shard_map."""
    import jax

    from jaxlab.distributed import (
        global_to_process_local,
        process_local_to_global,
        run_sharded,
        worker_mesh,
    )

    mesh = worker_mesh()  # the 2 global devices, one per process
    rank = jax.process_index()
    local = {"a": a[rank : rank + 1], "b": b[rank : rank + 1], "x0": x0[None]}
    data = process_local_to_global(local, mesh, AXIS)
    out = run_sharded(_PATH_WORKERS[method], mesh, AXIS, data)
    return global_to_process_local(out)


def _sharded_ef(data):
    return _path_worker("ef", data["a"], data["b"], data["x0"])


def _sharded_ef21_rand_k(data):
    return _path_worker("ef21_rand_k", data["a"], data["b"], data["x0"])


_PATH_WORKERS = {"ef": _sharded_ef, "ef21_rand_k": _sharded_ef21_rand_k}


def test_two_processes_agree_with_vmap():
    from jaxlab.distributed import launch

    a, b, x0 = _problem(2, dtype=np.float32)
    method = "ef21_rand_k"
    results = launch(_two_process_worker, 2, args=(method, a, b, x0), timeout=120.0)
    by_processes = jax.tree.map(lambda *rows: np.concatenate(rows), *results)
    worker = functools.partial(_path_worker, method)
    by_vmap = jax.jit(jax.vmap(worker, axis_name=AXIS, in_axes=(0, 0, None)))(
        jnp.asarray(a), jnp.asarray(b), jnp.asarray(x0)
    )
    _assert_trees_close(by_processes, by_vmap)


# ------------------------------------------------------------------------------------------------
# Inside nnx.Optimizer, and inside a chain with clipping under inject_hyperparams.


def test_inside_nnx_optimizer_matches_the_functional_loop():
    from flax import nnx

    x = jax.random.normal(jax.random.PRNGKey(0), (16, 3))
    y = jax.random.normal(jax.random.PRNGKey(1), (16, 2))

    def loss(model):
        return jnp.mean((model(x) - y) ** 2)

    tx = optim.error_feedback_21(0.1, optim.rand_k(ratio=0.5), seed=4)
    model = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)

    @nnx.jit
    def train_step(model, optimizer):
        grads = nnx.grad(loss)(model)
        optimizer.update(model, grads)

    for _ in range(5):
        train_step(model, optimizer)

    # The same steps with optax on the parameters of an identically initialised, separate model.
    graphdef, params = nnx.split(nnx.Linear(3, 2, rngs=nnx.Rngs(0)), nnx.Param)
    initial_loss = float(loss(nnx.merge(graphdef, params)))

    def pure_loss(params):
        return loss(nnx.merge(graphdef, params))

    state = tx.init(params)
    for _ in range(5):
        updates, state = tx.update(jax.grad(pure_loss)(params), state, params)
        params = optax.apply_updates(params, updates)
    _assert_trees_close(nnx.state(model, nnx.Param), params, rtol=1e-6, atol=1e-7)
    assert float(loss(model)) < initial_loss


def test_clip_chain_with_injected_learning_rate_matches_plain():
    compressor = optim.top_k(ratio=0.5)
    target = {"w": jnp.arange(12.0).reshape(3, 4), "b": -jnp.ones(4)}
    grad_fn = jax.grad(lambda p: sum(jnp.sum((p[k] - target[k]) ** 2) for k in p))

    def trajectory(tx, steps=8, new_lr=None):
        params = jax.tree.map(jnp.zeros_like, target)
        state = tx.init(params)
        if new_lr is not None:  # change the injected step after init
            state[1].hyperparams["learning_rate"] = jnp.asarray(new_lr)
        update = jax.jit(tx.update)
        out = []
        for _ in range(steps):
            updates, state = update(grad_fn(params), state, params)
            params = optax.apply_updates(params, updates)
            out.append(params)
        return out

    def chained(inner):
        return optax.chain(optax.clip_by_global_norm(1.0), inner)

    injected = optax.inject_hyperparams(optim.error_feedback_21, static_args=("compressor",))
    for lr in (0.3, 0.05):
        plain = trajectory(chained(optim.error_feedback_21(lr, compressor)))
        inj = trajectory(chained(injected(learning_rate=0.3, compressor=compressor)), new_lr=lr)
        _assert_trees_close(inj, plain, rtol=1e-6, atol=1e-7)
    # Clipping is active (gradient norms ~ 2 ||target|| >> 1): the first step ("full" init, so
    # uncompressed) is lr times the clipped gradient, of norm lr.
    assert float(optax.tree.norm(plain[0])) == pytest.approx(0.05, rel=1e-5)


def test_error_feedback_under_inject_hyperparams_and_jit():
    # learning_rate is a traced array inside jit: nothing may branch on it.
    compressor = optim.scaled_sign()
    injected = optax.inject_hyperparams(optim.error_feedback, static_args=("compressor",))
    params = {"w": jnp.ones((2, 3))}
    grads = {"w": jnp.array([[1.0, -2.0, 3.0], [0.5, 0.0, -1.0]])}

    @jax.jit
    def run(lr):
        tx = optim.error_feedback(lr, compressor)
        return tx.update(grads, tx.init(params), params)[0]

    tx_inj = injected(learning_rate=0.2, compressor=compressor)
    u_inj, _ = jax.jit(tx_inj.update)(grads, tx_inj.init(params), params)
    _assert_trees_close(u_inj, run(0.2), rtol=1e-6)
    # scaled sign of -0.2 g: (||0.2 g||_1 / 6) * sign(-g)
    l1 = 0.2 * 7.5 / 6
    np.testing.assert_allclose(
        np.asarray(u_inj["w"]), -l1 * np.sign(np.asarray(grads["w"])), rtol=1e-6
    )


# ------------------------------------------------------------------------------------------------
# Bits.


@pytest.mark.parametrize(
    "method, init", [("ef", None), ("ef21", "full"), ("ef21", "compressed"), ("ef21", "zero")]
)
def test_bits_match_the_closed_form(method, init):
    a, b, x0 = (jnp.asarray(t) for t in _problem(3, dtype=np.float32))
    compressor, steps, d = optim.top_k(2), 7, x0.shape[0]
    if method == "ef":
        make = lambda: optim.error_feedback(0.1, compressor, axis_name=AXIS)
    else:
        make = lambda: optim.error_feedback_21(0.1, compressor, init=init, axis_name=AXIS)
    _, chain_state = _run_vmap(make, a, b, x0, steps)
    state = _ef_state(chain_state)
    per_message = 2 * (32 + 3)  # k values and 3-bit indices of an 8-vector
    assert compressor.bits(d) == per_message
    if init == "full":  # the first message is the dense gradient
        expected = 32 * d + (steps - 1) * per_message
    else:
        expected = steps * per_message
    np.testing.assert_array_equal(np.asarray(state.bits), np.full(3, expected, np.float32))
    np.testing.assert_array_equal(np.asarray(state.count), np.full(3, steps))


def test_bits_of_a_tree_with_leaf_and_global_scope():
    params = {"w": jnp.zeros((4, 5)), "b": jnp.zeros(3)}
    grads = {"w": jnp.ones((4, 5)), "b": jnp.ones(3)}
    for scope, per_message in (
        ("leaf", 2 * (32 + 5) + 1 * (32 + 2)),  # ratio 0.1: 2 of 20, 1 of 3
        ("global", 3 * (32 + 5)),  # 3 of 23
    ):
        tx = optim.scale_by_error_feedback(optim.top_k(ratio=0.1, scope=scope))
        state = tx.init(params)
        for _ in range(4):
            _, state = tx.update(grads, state)
        assert float(state.bits) == 4 * per_message


# ------------------------------------------------------------------------------------------------
# Bad input.


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda: optim.error_feedback(-0.1, optim.top_k(1)), ValueError, "learning_rate"),
        (
            lambda: optim.error_feedback_21(float("nan"), optim.top_k(1)),
            ValueError,
            "learning_rate",
        ),
        (
            lambda: optim.error_feedback_21(float("inf"), optim.top_k(1)),
            ValueError,
            "learning_rate",
        ),
        (lambda: optim.error_feedback(True, optim.top_k(1)), TypeError, "learning_rate"),
        (lambda: optim.error_feedback(0.1, "top_k"), TypeError, "compressor"),
        (lambda: optim.error_feedback_21(0.1, lambda v: v), TypeError, "compressor"),
        (lambda: optim.scale_by_error_feedback(None), TypeError, "compressor"),
        (lambda: optim.scale_by_error_feedback_21(optax.sgd(0.1)), TypeError, "compressor"),
        (lambda: optim.error_feedback_21(0.1, optim.top_k(1), init="warm"), ValueError, "init"),
        (lambda: optim.error_feedback(0.1, optim.top_k(1), axis_name=3), TypeError, "axis_name"),
        (lambda: optim.error_feedback(0.1, optim.top_k(1), seed="a"), TypeError, "seed"),
        (lambda: optim.error_feedback(0.1, optim.top_k(1), seed=1.5), TypeError, "seed"),
        # Concrete arrays are checked like numbers (a traced one is not: inject_hyperparams).
        (
            lambda: optim.error_feedback_21(jnp.array(-1.0), optim.top_k(1)),
            ValueError,
            "learning_rate",
        ),
        (
            lambda: optim.error_feedback(jnp.array(float("nan")), optim.top_k(1)),
            ValueError,
            "learning_rate",
        ),
    ],
)
def test_bad_input(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_array_and_schedule_learning_rates_are_accepted():
    params = jnp.ones(3)
    for lr in (jnp.asarray(0.1), optax.linear_schedule(0.1, 0.0, 10), 0, 2):
        tx = optim.error_feedback_21(lr, optim.top_k(1))
        updates, _ = tx.update(params, tx.init(params))
        assert updates.shape == (3,)


# ------------------------------------------------------------------------------------------------
# Issue 14: plain inject_hyperparams, stable state types, real annotations, non-finite values,
# params/state/updates consistency, an unbound axis name.

_FACTORIES = {"ef": optim.error_feedback, "ef21": optim.error_feedback_21}


def _quadratic_run(tx, steps, *, nan_at=None, dim=6):
    """``steps`` jitted updates on 0.5 ||x - t||^2 (a NaN gradient at step ``nan_at``)."""
    target = jnp.linspace(-1.0, 2.0, dim)
    params = {"w": jnp.zeros(dim)}
    state = tx.init(params)
    update = jax.jit(tx.update)
    out = []
    for step in range(steps):
        grads = {"w": params["w"] - target}
        if step == nan_at:
            grads = {"w": grads["w"].at[1].set(jnp.nan)}
        updates, state = update(grads, state, params)
        params = optax.apply_updates(params, updates)
        out.append(params["w"])
    return np.stack(out), state


@pytest.mark.parametrize("name", sorted(_FACTORIES))
@pytest.mark.parametrize(
    "compressor", [optim.top_k(ratio=0.1), optim.rand_k(ratio=0.3)], ids=["top_k", "rand_k"]
)
def test_plain_inject_hyperparams_gives_the_same_trajectory(name, compressor):
    # The natural call: no static_args. A compressor is not callable, so optax does not take it
    # for a schedule; only learning_rate is injected.
    factory = _FACTORIES[name]
    assert not callable(compressor)
    injected = optax.inject_hyperparams(factory)(learning_rate=0.1, compressor=compressor)
    assert set(injected.init({"w": jnp.zeros(6)}).hyperparams) == {"learning_rate"}
    plain, _ = _quadratic_run(factory(0.1, compressor), 8)
    inj, _ = _quadratic_run(injected, 8)
    np.testing.assert_array_equal(inj, plain)
    assert np.abs(plain[-1] - plain[0]).max() > 0.05  # it moved


def _avals(tree):
    return [
        (jax.tree_util.keystr(path), jax.typeof(leaf).str_short(), jax.typeof(leaf).weak_type)
        for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]
    ]


@pytest.mark.parametrize("name", sorted(_FACTORIES))
def test_state_types_are_stable_under_inject_hyperparams_and_multisteps(name):
    # An injected int default (the old seed=0) is weak-typed and MultiSteps' cond makes it
    # strong: one retrace. Every leaf's dtype and weak type must survive an update.
    tx = optax.inject_hyperparams(_FACTORIES[name])(learning_rate=0.1, compressor=optim.top_k(2))
    params = {"w": jnp.ones(5)}
    state = tx.init(params)
    _, new_state = jax.jit(tx.update)(params, state, params)
    assert _avals(new_state) == _avals(state)

    multi = optax.MultiSteps(tx, every_k_schedule=2)
    traces = []

    @jax.jit
    def step(grads, state):
        traces.append(None)
        return multi.update(grads, state, params)

    state = multi.init(params)
    before = _avals(state)
    for _ in range(4):
        _, state = step(params, state)
    assert len(traces) == 1
    assert _avals(state) == before


def test_learning_rate_annotations_are_real_objects():
    # optax's contrib battery skips its schedule test unless the annotation is ScalarOrSchedule
    # itself (not the string a `from __future__ import annotations` module would leave).
    import inspect

    for factory in _FACTORIES.values():
        annotation = inspect.signature(factory).parameters["learning_rate"].annotation
        assert annotation is optax.ScalarOrSchedule


@pytest.mark.parametrize("name", sorted(_FACTORIES))
def test_a_nan_gradient_is_counted_and_poisons_the_buffer(name):
    tx = _FACTORIES[name](0.1, optim.top_k(2))
    xs, state = _quadratic_run(tx, 6, nan_at=2)
    assert np.all(np.isfinite(xs[:2]))
    assert np.isnan(xs[-1]).any()  # documented: the NaN stays in the buffer
    # Counted at the NaN step and at every later one (the buffer still holds it).
    inner = _ef_state(state)
    assert int(inner.nonfinite_count) == 4
    _, clean = _quadratic_run(tx, 6)
    assert int(_ef_state(clean).nonfinite_count) == 0


def _ef_state(chain_state):
    (found,) = [
        s
        for s in jax.tree.leaves(
            chain_state,
            is_leaf=lambda s: isinstance(s, optim.ErrorFeedbackState | optim.ErrorFeedback21State),
        )
        if isinstance(s, optim.ErrorFeedbackState | optim.ErrorFeedback21State)
    ]
    return found


def test_threshold_top_k_with_a_nan_residual_is_reported():
    # threshold_top_k never selects a NaN coordinate, so messages stay finite while the residual
    # holds the NaN forever: the counter is what tells.
    tx = optim.scale_by_error_feedback(optim.threshold_top_k(1, oversample=1.0))
    state = tx.init(jnp.zeros(4))
    message, state = tx.update(jnp.array([jnp.nan, 0.0, 0.0, 0.0]), state)
    for _ in range(3):
        message, state = tx.update(jnp.array([0.0, 1.0, 2.0, 3.0]), state)
        assert np.all(np.isfinite(message))
    assert np.isnan(state.error[0])
    assert int(state.nonfinite_count) == 4


@pytest.mark.parametrize("name", sorted(_FACTORIES))
def test_apply_if_finite_skips_the_nan_step_and_recovers(name):
    # The documented composition: the NaN step is rejected (zero update, buffers kept), so the
    # run equals the clean run with that step left out (deterministic compressor, and the
    # gradient depends only on the params, which the skipped step does not move).
    make = lambda: optax.apply_if_finite(_FACTORIES[name](0.1, optim.top_k(2)), 3)  # noqa: E731
    xs, state = _quadratic_run(make(), 7, nan_at=2)
    clean, _ = _quadratic_run(make(), 6)
    np.testing.assert_array_equal(xs[2], xs[1])
    np.testing.assert_allclose(np.delete(xs, 2, axis=0), clean, rtol=1e-6, atol=1e-7)
    assert int(state.total_notfinite) == 1 and bool(state.last_finite)
    assert int(_ef_state(state.inner_state).nonfinite_count) == 0


@pytest.mark.parametrize("name", sorted(_FACTORIES))
def test_params_state_and_updates_must_agree(name):
    tx = _FACTORIES[name](0.1, optim.top_k(1))
    with pytest.raises(TypeError, match=r"params\['w'\] must have a floating dtype, got int32"):
        tx.init({"w": jnp.zeros(5, jnp.int32)})
    state = tx.init({"w": jnp.zeros(5)})
    for bad in (jnp.ones((3, 5)), jnp.ones(1)):
        with pytest.raises(ValueError, match=r"updates\['w'\] has shape .* state's .* \(5,\)"):
            tx.update({"w": bad}, state)
        with pytest.raises(ValueError, match=r"updates\['w'\] has shape"):
            jax.jit(tx.update)({"w": bad}, state)
    # (error_feedback scales the gradient first, which makes an integer one float: harmless.)
    scale = {"ef": optim.scale_by_error_feedback, "ef21": optim.scale_by_error_feedback_21}[name]
    inner = scale(optim.top_k(1))
    with pytest.raises(TypeError, match=r"updates\['w'\] must have a floating dtype"):
        inner.update({"w": jnp.ones(5, jnp.int32)}, inner.init({"w": jnp.zeros(5)}))
    with pytest.raises(ValueError, match="tree structure"):
        tx.update({"v": jnp.ones(5)}, state)


@pytest.mark.parametrize("name", sorted(_FACTORIES))
def test_an_unbound_axis_name_gets_a_clear_error(name):
    tx = _FACTORIES[name](0.1, optim.top_k(1), axis_name="workers")
    state = tx.init(jnp.zeros(3))
    with pytest.raises(ValueError, match="axis_name 'workers' is not bound.*jax.vmap"):
        tx.update(jnp.ones(3), state)
    # Bound, it runs (one worker under vmap).
    out, _ = jax.vmap(tx.update, axis_name="workers")(
        jnp.ones((1, 3)), jax.tree.map(lambda s: s[None], state)
    )
    assert out.shape == (1, 3)


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda: optim.error_feedback("0.1", optim.top_k(1)), TypeError, "learning_rate"),
        (lambda: optim.error_feedback(None, optim.top_k(1)), TypeError, "learning_rate"),
        (lambda: optim.error_feedback(1j, optim.top_k(1)), TypeError, "learning_rate"),
        (lambda: optim.error_feedback(True, optim.top_k(1)), TypeError, "learning_rate"),
        (lambda: optim.error_feedback_21(jnp.nan, optim.top_k(1)), ValueError, "learning_rate"),
        (lambda: optim.error_feedback(0.1, "top_k"), TypeError, "compressor"),
        (lambda: optim.error_feedback(0.1, optim.top_k(1), seed=1.5), TypeError, "seed"),
        (lambda: optim.error_feedback_21(0.1, optim.top_k(1), init=None), ValueError, "init"),
        (lambda: optim.scale_by_error_feedback(optim.top_k(1), axis_name=3), TypeError, "axis"),
    ],
)
def test_bad_hyperparameters_get_clear_errors(make, error, match):
    with pytest.raises(error, match=match):
        make()


@pytest.mark.parametrize("poison", [np.nan, np.inf])
@pytest.mark.parametrize("name", sorted(_FACTORIES))
@pytest.mark.parametrize(
    "compressor",
    [optim.threshold_top_k(ratio=0.01), optim.scaled_sign()],
    ids=["threshold_top_k", "scaled_sign"],
)
def test_fused_path_counts_nonfinite_on_large_leaves_and_matches_the_recursion(
    name, compressor, poison
):
    # A 20,000-entry leaf (above threshold_top_k's sample size): the compressed vector is read
    # from the buffer and the gradient, never materialised; the steps must still follow the
    # recursion written out with tree_compress, and a non-finite gradient entry must be counted.
    dim = 20_000
    tx = _FACTORIES[name](0.1, compressor)
    target = jax.random.normal(jax.random.PRNGKey(5), (dim,))
    params = jnp.zeros(dim)
    state = tx.init(params)
    x_ref, buffer = jnp.zeros(dim), jnp.zeros(dim)
    key = jax.random.wrap_key_data(state[0].rng_key if name == "ef21" else state[1].rng_key)
    update = jax.jit(tx.update)
    for step in range(3):
        grad = params - target
        updates, state = update(grad, state, params)
        params = optax.apply_updates(params, updates)
        # The recursion, with the transform's keys.
        key, step_key = jax.random.split(key)
        grad_ref = x_ref - target
        if name == "ef":
            p = buffer - 0.1 * grad_ref
            c = compressor.tree_compress(p, step_key)
            buffer, x_ref = p - c, x_ref + c
        else:
            buffer = (
                grad_ref
                if step == 0
                else buffer + compressor.tree_compress(grad_ref - buffer, step_key)
            )
            x_ref = x_ref - 0.1 * buffer
        np.testing.assert_allclose(params, x_ref, rtol=1e-6, atol=1e-6)
    assert int(_ef_state(state).nonfinite_count) == 0
    updates, state = update((params - target).at[17].set(poison), state, params)
    assert int(_ef_state(state).nonfinite_count) == 1
