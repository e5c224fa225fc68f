"""The shared battery every jaxlab optax transform passes.

How to add a transform: append one ``TransformCase`` to ``TRANSFORM_CASES`` at the bottom of this
file. ``tests/test_transform_battery.py`` then runs every check in ``CHECKS`` on it, with test ids
``"<case.name>-<check name>"``. Example::

    TransformCase(
        name="ef21_sgd",
        factory=jaxlab.optim.ef21_sgd,  # returns an optax.GradientTransformation
        hyperparams={"learning_rate": 0.1},  # numbers: injected by optax.inject_hyperparams
        static={"compressor": jaxlab.optim.top_k(k=2)},  # passed as is, never injected
        distributed=True,  # the factory takes axis_name=... and calls pmean on it
    )

Fields of ``TransformCase``:

- ``hyperparams``: the numeric arguments (``jax.typing.ArrayLike`` in the factory). In the
  ``inject_hyperparams`` check they become traced arrays, so the factory must never branch on
  them in Python. Note that ``optax.inject_hyperparams`` also injects every *default* numeric
  argument the case does not pass; an integer that sets a shape (``k`` of top-k, a FIFO length)
  must therefore be listed in ``static`` with its value.
- ``static``: everything that is not a traceable number: compressor objects, flags, shape ints.
- ``distributed``: the factory accepts ``axis_name``. The single-worker checks (no_retrace,
  inject_hyperparams, multi_steps, dtype, state_structure, eval_shape_init) call it without
  ``axis_name`` (one worker, no collectives); ``vmap_shard_map`` and ``quadratic`` call it with
  ``axis_name="workers"`` under ``jax.vmap``/``jax.shard_map`` over 8 workers.
- ``jaxlab``: the factory call and every ``init``/``update`` run under
  ``jax.numpy_dtype_promotion("strict")`` (a silent dtype promotion fails the check). Set it to
  ``False`` only for reference transforms from other libraries (optax's adam and muon promote).
- ``quadratic_steps``/``quadratic_tol``: the convergence check requires
  ``f(x_T) <= quadratic_tol * f(x_0)`` after ``quadratic_steps`` steps.
- ``skip``: names of checks (keys of ``CHECKS``) that do not apply; give the reason in ``notes``.

The checks (each ``check_<name>(case)`` raises ``AssertionError`` with a message on failure):

1. ``no_retrace``: three jitted updates with equal shapes trace once (state dtypes, weak types
   and structure are stable from ``init`` on).
2. ``inject_hyperparams``: ``optax.inject_hyperparams(factory)`` gives the same trajectory as the
   factory under ``jax.jit`` (a Python branch on a hyperparameter fails here).
3. ``multi_steps``: ``optax.MultiSteps(tx, every_k_schedule=2)`` emits zero, then
   ``tx.update((g1 + g2) / 2)``.
4. ``dtype``: bf16 and f32 params/grads give updates, and applied params, of the same dtype.
5. ``state_structure``: the state keeps its tree structure, shapes and dtypes over three
   updates, and an update inside ``jax.lax.cond`` works.
6. ``eval_shape_init``: ``jax.eval_shape(tx.init, ShapeDtypeStructs)`` matches ``tx.init``.
7. ``vmap_shard_map``: a few steps over 8 workers agree under ``jax.vmap`` and ``jax.shard_map``
   on an 8-device mesh.
8. ``quadratic``: converges on a separable quadratic with curvatures in [0.5, 2].

All data use fixed small shapes (a dict with a (4, 3) matrix and a (3,) vector) so that compile
time stays small; the whole battery on one case takes a few seconds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import types
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import NamedSharding, PartitionSpec

__all__ = [
    "AXIS_NAME",
    "CHECKS",
    "CHECK_NAMES",
    "NUM_WORKERS",
    "REFERENCE_CASES",
    "TRANSFORM_CASES",
    "TransformCase",
    "make_transform",
    "run_check",
]

AXIS_NAME = "workers"
NUM_WORKERS = 8
CHECK_NAMES = (
    "no_retrace",
    "inject_hyperparams",
    "multi_steps",
    "dtype",
    "state_structure",
    "eval_shape_init",
    "vmap_shard_map",
    "quadratic",
)

# Fixed shapes: a matrix leaf (muon-style transforms act on 2-D leaves) and a vector leaf.
_SHAPES = {"b": (3,), "w": (4, 3)}
# Steps of the trajectory comparisons (inject, vmap/shard_map): enough to exercise the state.
_TRAJECTORY_STEPS = 4
# Same computation along two code paths (XLA may fuse differently): a few float32 ulps apart.
_RTOL = 1e-5
_ATOL = 1e-6


@dataclasses.dataclass(frozen=True)
class TransformCase:
    """One optax transform and the arguments the battery builds it with (see module docstring)."""

    name: str
    factory: Callable[..., optax.GradientTransformation]
    hyperparams: Mapping[str, float]
    static: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    distributed: bool = False
    jaxlab: bool = True
    quadratic_steps: int = 300
    quadratic_tol: float = 1e-2
    skip: frozenset[str] = frozenset()
    notes: str = ""

    def __post_init__(self):
        if not self.name or not isinstance(self.name, str):
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        if not callable(self.factory):
            raise TypeError(f"{self.name}: factory must be callable, got {self.factory!r}")
        for key, value in self.hyperparams.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(
                    f"{self.name}: hyperparams[{key!r}] must be a Python int or float (it is "
                    f"injected as an array); put non-numeric arguments in static, got {value!r}"
                )
        overlap = set(self.hyperparams) & set(self.static)
        if overlap:
            raise ValueError(f"{self.name}: {sorted(overlap)} in both hyperparams and static")
        if "axis_name" in self.hyperparams or "axis_name" in self.static:
            raise ValueError(
                f"{self.name}: do not pass axis_name; set distributed=True and the battery "
                f"passes axis_name={AXIS_NAME!r} where workers exist"
            )
        unknown = set(self.skip) - set(CHECK_NAMES)
        if unknown:
            raise ValueError(f"{self.name}: skip has {sorted(unknown)}, allowed {CHECK_NAMES}")
        if self.skip and not self.notes.strip():
            raise ValueError(f"{self.name}: skip is non-empty, so notes must give the reason")
        if not isinstance(self.quadratic_steps, int) or self.quadratic_steps < 1:
            raise ValueError(f"{self.name}: quadratic_steps must be an int >= 1")
        if not 0.0 < self.quadratic_tol < 1.0:
            raise ValueError(f"{self.name}: quadratic_tol must lie in (0, 1)")
        # Freeze the mappings so a case cannot be changed after registration.
        object.__setattr__(self, "hyperparams", types.MappingProxyType(dict(self.hyperparams)))
        object.__setattr__(self, "static", types.MappingProxyType(dict(self.static)))
        object.__setattr__(self, "skip", frozenset(self.skip))

    def __str__(self) -> str:
        return self.name


# --------------------------------------------------------------------------------------------
# Building a case's transform.


@contextlib.contextmanager
def _strict_promotion(case: TransformCase, where: str) -> Iterator[None]:
    """Strict dtype promotion for jaxlab's own code, a promotion reported as a test failure."""
    if not case.jaxlab:
        yield
        return
    try:
        with jax.numpy_dtype_promotion("strict"):
            yield
    except jax.dtypes.TypePromotionError as err:
        raise AssertionError(
            f"{case.name}: {where} relies on an implicit dtype promotion, which jaxlab transforms "
            f"must not do (jax_numpy_dtype_promotion='strict' rejected it; cast explicitly): "
            f"{err}"
        ) from err


def _strict_transform(
    case: TransformCase, tx: optax.GradientTransformation
) -> optax.GradientTransformationExtraArgs:
    tx = optax.with_extra_args_support(tx)

    def init(params):
        with _strict_promotion(case, "init"):
            return tx.init(params)

    def update(updates, state, params=None, **extra_args):
        with _strict_promotion(case, "update"):
            return tx.update(updates, state, params, **extra_args)

    return optax.GradientTransformationExtraArgs(init, update)


def _case_factory(case: TransformCase) -> Callable[..., optax.GradientTransformation]:
    if not case.jaxlab:
        return case.factory

    # functools.wraps keeps the signature, which inject_hyperparams inspects.
    @functools.wraps(case.factory)
    def factory(*args, **kwargs):
        with _strict_promotion(case, "the factory"):
            tx = case.factory(*args, **kwargs)
        return _strict_transform(case, tx)

    return factory


def make_transform(
    case: TransformCase, *, inject: bool = False, axis_name: str | None = None
) -> optax.GradientTransformationExtraArgs:
    """Builds ``case``'s transform as the battery runs it.

    ``factory(**hyperparams, **static)``, plus ``axis_name`` for a distributed case when one is
    given; with ``inject=True`` the factory is wrapped in ``optax.inject_hyperparams`` (static
    arguments declared static). For ``case.jaxlab`` the factory call and every ``init``/
    ``update`` run under strict dtype promotion.

    Args:
      case: the registered case.
      inject: wrap the factory in ``optax.inject_hyperparams``.
      axis_name: the worker axis, passed only to distributed cases.

    Returns:
      The transform, with extra-args support.

    Examples:
      >>> case = REFERENCE_CASES[0]
      >>> tx = make_transform(case)
      >>> state = tx.init({"w": jnp.zeros(2)})
    """
    kwargs = {**case.hyperparams, **case.static}
    if case.distributed and axis_name is not None:
        kwargs["axis_name"] = axis_name
    factory = _case_factory(case)
    if inject:
        static_names = [k for k in kwargs if k not in case.hyperparams]
        factory = optax.inject_hyperparams(factory, static_args=static_names)
    return optax.with_extra_args_support(factory(**kwargs))


# --------------------------------------------------------------------------------------------
# Fixed small data.


def _tree(seed: int, dtype=jnp.float32, scale: float = 1.0) -> dict[str, jax.Array]:
    key = jax.random.key(seed)
    keys = dict(zip(_SHAPES, jax.random.split(key, len(_SHAPES)), strict=True))
    return {
        name: (scale * jax.random.normal(keys[name], shape, jnp.float32)).astype(dtype)
        for name, shape in _SHAPES.items()
    }


def _grad_sequence(seed: int, steps: int, dtype=jnp.float32) -> dict[str, jax.Array]:
    """``steps`` different gradients stacked on a leading axis."""
    trees = [_tree(seed + 1000 * (i + 1), dtype) for i in range(steps)]
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *trees)


def _abstract(tree) -> list[tuple[str, tuple[int, ...], Any, bool]]:
    """(path, shape, dtype, weak_type) of each leaf."""
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    out = []
    for path, leaf in leaves:
        aval = leaf if isinstance(leaf, jax.ShapeDtypeStruct) else jax.typeof(leaf)
        weak = bool(getattr(aval, "weak_type", False))
        out.append((jax.tree_util.keystr(path), tuple(aval.shape), aval.dtype, weak))
    return out


def _describe_differences(first, second, *, weak_type: bool = False) -> str:
    lines = []
    s1, s2 = jax.tree.structure(first), jax.tree.structure(second)
    if s1 != s2:
        return f"tree structure changed:\n  before: {s1}\n  after:  {s2}"
    for (path, shape1, dtype1, weak1), (_, shape2, dtype2, weak2) in zip(
        _abstract(first), _abstract(second), strict=True
    ):
        if shape1 != shape2 or dtype1 != dtype2 or (weak_type and weak1 != weak2):
            w1 = ", weak" if weak1 else ""
            w2 = ", weak" if weak2 else ""
            lines.append(f"  {path}: {dtype1}{list(shape1)}{w1} -> {dtype2}{list(shape2)}{w2}")
    return "\n".join(lines)


def _comparable(leaf) -> np.ndarray:
    if jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):
        leaf = jax.random.key_data(leaf)
    return np.asarray(leaf.astype(jnp.float32) if leaf.dtype == jnp.bfloat16 else leaf)


def _assert_trees_close(actual, desired, what: str, rtol: float = _RTOL, atol: float = _ATOL):
    s1, s2 = jax.tree.structure(actual), jax.tree.structure(desired)
    assert s1 == s2, f"{what}: tree structures differ:\n  {s1}\n  {s2}"
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(actual)[0]]
    for path, a, d in zip(paths, jax.tree.leaves(actual), jax.tree.leaves(desired), strict=True):
        a, d = _comparable(a), _comparable(d)
        if np.issubdtype(a.dtype, np.inexact):
            np.testing.assert_allclose(a, d, rtol=rtol, atol=atol, err_msg=f"{what}: {path}")
        else:
            np.testing.assert_array_equal(a, d, err_msg=f"{what}: {path}")


def _scan_trajectory(tx: optax.GradientTransformation, params, state, grads_seq):
    """Params after each of the stacked gradients in ``grads_seq``, and the final state."""

    def body(carry, grads):
        params, state = carry
        updates, state = tx.update(grads, state, params)
        params = optax.apply_updates(params, updates)
        return (params, state), params

    (_, state), trajectory = jax.lax.scan(body, (params, state), grads_seq)
    return trajectory, state


# --------------------------------------------------------------------------------------------
# The checks.


def check_no_retrace(case: TransformCase) -> None:
    """Three jitted updates with the same shapes trace once.

    Examples:
      >>> check_no_retrace(REFERENCE_CASES[0])
    """
    tx = make_transform(case)
    traces = []

    def step(params, state, grads):
        traces.append(None)  # runs once per trace, never at execution
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    jitted = jax.jit(step)
    params = _tree(0)
    state0 = state = tx.init(params)
    states = [state0]
    for i in range(3):
        params, state = jitted(params, state, _tree(i + 1))
        states.append(state)
    if len(traces) != 1:
        diffs = [_describe_differences(states[i], states[i + 1], weak_type=True) for i in range(3)]
        detail = "\n".join(f" step {i + 1}:\n{d}" for i, d in enumerate(diffs) if d)
        raise AssertionError(
            f"{case.name}: jitted update traced {len(traces)} times in 3 calls with equal "
            f"shapes (expected 1); the state's dtypes, weak types or structure change:\n{detail}"
        )


def check_inject_hyperparams(case: TransformCase) -> None:
    """``optax.inject_hyperparams(factory)`` follows the same trajectory under jit.

    Examples:
      >>> check_inject_hyperparams(REFERENCE_CASES[0])
    """
    params = _tree(0)
    grads_seq = _grad_sequence(1, _TRAJECTORY_STEPS)
    run = jax.jit(_scan_trajectory, static_argnums=0)

    plain = make_transform(case)
    expected, _ = run(plain, params, plain.init(params), grads_seq)
    try:
        injected = make_transform(case, inject=True)
        actual, inj_state = run(injected, params, injected.init(params), grads_seq)
    except AssertionError:
        raise
    except Exception as err:
        raise AssertionError(
            f"{case.name}: optax.inject_hyperparams(factory)(**hyperparams) fails under jax.jit "
            f"(a hyperparameter is a traced array there: never branch on it in Python, use "
            f"jnp.where/lax.cond, or make the argument static): {type(err).__name__}: {err}"
        ) from err
    missing = set(case.hyperparams) - set(inj_state.hyperparams)
    assert not missing, f"{case.name}: inject_hyperparams did not inject {sorted(missing)}"
    _assert_trees_close(
        actual, expected, f"{case.name}: inject_hyperparams trajectory differs from the factory's"
    )


def check_multi_steps(case: TransformCase) -> None:
    """Under ``optax.MultiSteps(every_k_schedule=2)`` two mini-steps equal one mean step.

    Examples:
      >>> check_multi_steps(REFERENCE_CASES[0])
    """
    tx = make_transform(case)
    multi = optax.MultiSteps(tx, every_k_schedule=2)

    @jax.jit
    def run(params, g1, g2):
        state = multi.init(params)
        first, state = multi.update(g1, state, params)
        params1 = optax.apply_updates(params, first)
        second, _ = multi.update(g2, state, params1)
        mean = jax.tree.map(lambda a, b: (a + b) / 2, g1, g2)
        expected, _ = tx.update(mean, tx.init(params), params)
        return first, second, expected

    try:
        first, second, expected = run(_tree(0), _tree(1), _tree(2))
    except AssertionError:
        raise
    except Exception as err:
        raise AssertionError(
            f"{case.name}: optax.MultiSteps(tx, every_k_schedule=2) fails (it runs update "
            f"inside lax.cond and jnp.where's old and new inner states, so the state must keep "
            f"its structure): {type(err).__name__}: {err}"
        ) from err
    for path, leaf in jax.tree_util.tree_flatten_with_path(first)[0]:
        assert np.all(np.asarray(leaf) == 0), (
            f"{case.name}: MultiSteps' first mini-step update is not zero at "
            f"{jax.tree_util.keystr(path)}: {leaf}"
        )
    _assert_trees_close(
        second,
        expected,
        f"{case.name}: MultiSteps' second mini-step update != tx.update((g1 + g2) / 2)",
    )


def check_dtype(case: TransformCase) -> None:
    """Updates and applied params keep the params' dtype (bf16 and f32).

    Examples:
      >>> check_dtype(REFERENCE_CASES[0])
    """
    tx = make_transform(case)

    @jax.jit
    def two_steps(params, g1, g2):
        state = tx.init(params)
        u1, state = tx.update(g1, state, params)
        p1 = optax.apply_updates(params, u1)
        u2, state = tx.update(g2, state, p1)
        p2 = optax.apply_updates(p1, u2)
        return [u1, u2], [p1, p2]

    for dtype in (jnp.bfloat16, jnp.float32):
        params = _tree(0, dtype)
        updates, new_params = two_steps(params, _tree(1, dtype), _tree(2, dtype))
        for step in range(2):
            for what, tree in (("update", updates[step]), ("applied params", new_params[step])):
                for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
                    where = f"{case.name}: {dtype.__name__} params, step {step + 1}, {what}"
                    where += f" {jax.tree_util.keystr(path)}"
                    assert leaf.dtype == dtype, (
                        f"{where} has dtype {leaf.dtype}, not {dtype.__name__}"
                    )
                    assert np.all(np.isfinite(_comparable(leaf))), f"{where} is not finite"


def check_state_structure(case: TransformCase) -> None:
    """The state keeps structure, shapes and dtypes; an update inside ``lax.cond`` works.

    Examples:
      >>> check_state_structure(REFERENCE_CASES[0])
    """
    tx = make_transform(case)
    params = _tree(0)
    grads = [_tree(i + 1) for i in range(3)]

    @jax.jit
    def three_steps(params, grads):
        states = [tx.init(params)]
        for g in grads:
            states.append(tx.update(g, states[-1], params)[1])
        return states

    try:
        states = three_steps(params, grads)
    except AssertionError:
        raise
    except Exception as err:
        # Probably the update cannot read the state it returned itself.
        raise AssertionError(
            f"{case.name}: three updates, each on the previous one's state, fail: "
            f"{type(err).__name__}: {err}"
        ) from err
    for step in range(1, 4):
        diff = _describe_differences(states[0], states[step])
        assert not diff, f"{case.name}: the state after update {step} differs from init's:\n{diff}"

    @jax.jit
    def maybe_update(pred, state, grads, params):
        return jax.lax.cond(pred, lambda s: tx.update(grads, s, params)[1], lambda s: s, state)

    try:
        updated = maybe_update(True, states[0], grads[0], params)
        kept = maybe_update(False, states[0], grads[0], params)
    except AssertionError:
        raise
    except Exception as err:
        raise AssertionError(
            f"{case.name}: jax.lax.cond(pred, update, identity, state) fails: "
            f"{type(err).__name__}: {err}"
        ) from err
    _assert_trees_close(updated, states[1], f"{case.name}: state from the lax.cond update branch")
    _assert_trees_close(kept, states[0], f"{case.name}: state from the lax.cond identity branch")


def check_eval_shape_init(case: TransformCase) -> None:
    """``jax.eval_shape(tx.init, ShapeDtypeStructs)`` works and matches ``tx.init(params)``.

    Examples:
      >>> check_eval_shape_init(REFERENCE_CASES[0])
    """
    tx = make_transform(case)
    for dtype in (jnp.float32, jnp.bfloat16):
        params = _tree(0, dtype)
        shapes = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), params)
        try:
            abstract = jax.eval_shape(tx.init, shapes)
        except AssertionError:
            raise
        except Exception as err:
            raise AssertionError(
                f"{case.name}: jax.eval_shape(tx.init, ShapeDtypeStructs) fails ({dtype.__name__}"
                f" params), so init needs concrete values: {type(err).__name__}: {err}"
            ) from err
        diff = _describe_differences(abstract, tx.init(params))
        assert not diff, (
            f"{case.name}: eval_shape(tx.init) and tx.init disagree ({dtype.__name__}):\n{diff}"
        )


def check_vmap_shard_map(case: TransformCase) -> None:
    """8 workers give the same results under ``jax.vmap`` and ``jax.shard_map``.

    Examples:
      >>> check_vmap_shard_map(REFERENCE_CASES[0])  # doctest: +SKIP
    """
    if jax.device_count() < NUM_WORKERS:
        pytest.skip(f"needs {NUM_WORKERS} devices (tests/conftest.py simulates them on CPU)")
    axis_name = AXIS_NAME if case.distributed else None

    def worker(params, grads_seq):
        tx = make_transform(case, axis_name=axis_name)
        return _scan_trajectory(tx, params, tx.init(params), grads_seq)

    # Same start on every worker, different gradients.
    params = jax.tree.map(lambda x: jnp.broadcast_to(x, (NUM_WORKERS, *x.shape)), _tree(0))
    grads = jax.tree.map(
        lambda *leaves: jnp.stack(leaves),
        *[_grad_sequence(10 * (w + 1), _TRAJECTORY_STEPS) for w in range(NUM_WORKERS)],
    )
    by_vmap = jax.jit(jax.vmap(worker, axis_name=AXIS_NAME))(params, grads)

    mesh = jax.make_mesh((NUM_WORKERS,), (AXIS_NAME,))

    def per_device(params, grads):
        squeeze = functools.partial(jax.tree.map, lambda x: x[0])
        out = worker(squeeze(params), squeeze(grads))
        return jax.tree.map(lambda x: x[None], out)

    spec = PartitionSpec(AXIS_NAME)
    sharded = jax.shard_map(per_device, mesh=mesh, in_specs=(spec, spec), out_specs=spec)
    # One worker per device (make_mesh's axes are Explicit: inputs must carry the sharding).
    params, grads = jax.device_put((params, grads), NamedSharding(mesh, spec))
    try:
        by_shard_map = jax.jit(sharded)(params, grads)
    except AssertionError:
        raise
    except Exception as err:
        raise AssertionError(
            f"{case.name}: the per-worker loop fails under jax.shard_map over {NUM_WORKERS} "
            f"devices (it runs under vmap): {type(err).__name__}: {err}"
        ) from err
    _assert_trees_close(
        by_shard_map,
        by_vmap,
        f"{case.name}: (trajectory, final state) under shard_map != under vmap",
        rtol=1e-6,
        atol=1e-6,
    )


def check_quadratic(case: TransformCase) -> None:
    """Converges on ``f(x) = 0.5 * sum(h * (x - x*)^2)``, ``h`` in [0.5, 2].

    A distributed case runs over 8 workers under ``jax.vmap`` with the worker axis; worker ``i``
    sees the gradient of ``c_i * f`` (same minimiser, ``c_i`` in [0.5, 1.5]) and every worker's
    final ``f`` must meet the tolerance.

    Examples:
      >>> check_quadratic(REFERENCE_CASES[0])
    """
    keys_h = jax.random.split(jax.random.key(7), len(_SHAPES))
    curvature = {
        name: jax.random.uniform(k, shape, jnp.float32, 0.5, 2.0)
        for k, (name, shape) in zip(keys_h, _SHAPES.items(), strict=True)
    }
    optimum = _tree(8)
    start = jax.tree.map(jnp.zeros_like, optimum)

    def loss(params):
        terms = jax.tree.map(
            lambda h, x, o: 0.5 * jnp.sum(h * (x - o) ** 2), curvature, params, optimum
        )
        return sum(jax.tree.leaves(terms))

    def descend(params, scale, axis_name):
        tx = make_transform(case, axis_name=axis_name)

        def body(_, carry):
            params, state = carry
            grads = jax.tree.map(lambda g: scale * g, jax.grad(loss)(params))
            updates, state = tx.update(grads, state, params)
            return optax.apply_updates(params, updates), state

        params, _ = jax.lax.fori_loop(0, case.quadratic_steps, body, (params, tx.init(params)))
        return params

    if case.distributed:
        scales = jnp.linspace(0.5, 1.5, NUM_WORKERS, dtype=jnp.float32)
        starts = jax.tree.map(lambda x: jnp.broadcast_to(x, (NUM_WORKERS, *x.shape)), start)
        run = jax.vmap(functools.partial(descend, axis_name=AXIS_NAME), axis_name=AXIS_NAME)
        finals = jax.jit(run)(starts, scales)
        final_losses = jax.vmap(loss)(finals)
    else:
        finals = jax.jit(functools.partial(descend, axis_name=None))(start, jnp.float32(1.0))
        final_losses = loss(finals)[None]
    ratio = float(jnp.max(final_losses) / loss(start))
    assert math.isfinite(ratio) and ratio <= case.quadratic_tol, (
        f"{case.name}: after {case.quadratic_steps} steps on the quadratic, f(x_T)/f(x_0) = "
        f"{ratio:.3g} > quadratic_tol = {case.quadratic_tol:g} (hyperparams "
        f"{dict(case.hyperparams)})"
    )


CHECKS: dict[str, Callable[[TransformCase], None]] = {
    "no_retrace": check_no_retrace,
    "inject_hyperparams": check_inject_hyperparams,
    "multi_steps": check_multi_steps,
    "dtype": check_dtype,
    "state_structure": check_state_structure,
    "eval_shape_init": check_eval_shape_init,
    "vmap_shard_map": check_vmap_shard_map,
    "quadratic": check_quadratic,
}
assert tuple(CHECKS) == CHECK_NAMES


def run_check(case: TransformCase, check: str) -> None:
    """Runs ``CHECKS[check]`` on ``case``, or skips it with ``case.notes`` if listed in skip.

    Examples:
      >>> run_check(REFERENCE_CASES[0], "eval_shape_init")
    """
    if check in case.skip:
        pytest.skip(f"{case.name} skips {check}: {case.notes}")
    CHECKS[check](case)


# --------------------------------------------------------------------------------------------
# Registries.

# Reference transforms from optax: the battery's own test (tests/test_batteries.py) shows every
# check passes on them. optax promotes dtypes internally, hence jaxlab=False.
REFERENCE_CASES: list[TransformCase] = [
    TransformCase(
        name="optax_adam",
        factory=optax.adam,
        hyperparams={"learning_rate": 0.05, "b1": 0.9, "b2": 0.999},
        jaxlab=False,
    ),
    TransformCase(
        name="optax_muon",
        factory=optax.contrib.muon,
        # Muon's orthogonalised step has spectral norm ~learning_rate, so the iterate ends
        # within ~learning_rate of the optimum: 0.02 puts f(x_T) far below 1e-2 * f(x_0).
        hyperparams={"learning_rate": 0.02, "beta": 0.9},
        jaxlab=False,
        notes="2-D leaves get Newton-Schulz orthogonalised momentum, the vector leaf adam.",
    ),
]

# jaxlab's transforms: append one TransformCase per public transform (see module docstring).
TRANSFORM_CASES: list[TransformCase] = []

# Error feedback, issue 3 (jaxlab/optim/_error_feedback.py): EF and EF21 with top-k, EF with
# scaled sign and EF21 with rand-k (random: the per-worker key folding is exercised under vmap
# and shard_map). Compressors are static (hashable objects, not callable, so inject_hyperparams
# passes them through; plain inject_hyperparams is tested in tests/optim/test_error_feedback.py).
from jaxlab import optim as _optim  # noqa: E402

TRANSFORM_CASES += [
    TransformCase(
        name="error_feedback_top_k",
        factory=_optim.error_feedback,
        hyperparams={"learning_rate": 0.1},
        static={"compressor": _optim.top_k(ratio=0.5)},
        distributed=True,
    ),
    TransformCase(
        name="error_feedback_scaled_sign",
        factory=_optim.error_feedback,
        hyperparams={"learning_rate": 0.1},
        static={"compressor": _optim.scaled_sign()},
        distributed=True,
    ),
    TransformCase(
        name="error_feedback_21_top_k",
        factory=_optim.error_feedback_21,
        hyperparams={"learning_rate": 0.1},
        static={"compressor": _optim.top_k(ratio=0.5)},
        distributed=True,
    ),
    TransformCase(
        name="error_feedback_21_rand_k",
        factory=_optim.error_feedback_21,
        hyperparams={"learning_rate": 0.1},
        static={"compressor": _optim.rand_k(ratio=0.5), "seed": 7},
        distributed=True,
    ),
    # The feedback-free baseline (jaxlab/optim/_problems.py): deterministic compressors only.
    TransformCase(
        name="compressed_gradient_descent_top_k",
        factory=_optim.compressed_gradient_descent,
        hyperparams={"learning_rate": 0.1},
        static={"compressor": _optim.top_k(ratio=0.5)},
        distributed=True,
    ),
]


# One-step gradient delay, issue 4 (jaxlab/optim/_delay.py): ``delayed`` around SGD-momentum,
# plain and with each correction. Delayed heavy ball is stable iff ηa < 1 - β (the note's check
# 2), so lr 0.2 with β = 0.5 keeps ηa <= 0.4 on curvatures in [0.5, 2]. delay_steps is a shape
# (the FIFO length), so it is static.
def _delayed_sgd(
    learning_rate, momentum, extrapolation=1.0, buffer_decay=0.0, *, delay_steps, correction
):
    return _optim.delayed(
        optax.sgd(learning_rate, momentum=momentum),
        delay_steps=delay_steps,
        correction=correction,
        extrapolation=extrapolation,
        buffer_decay=buffer_decay,
    )


TRANSFORM_CASES += [
    TransformCase(
        name=f"delayed_sgd_{correction}",
        factory=_delayed_sgd,
        hyperparams={"learning_rate": 0.2, "momentum": 0.5, **extra},
        static={"delay_steps": 1, "correction": correction},
    )
    for correction, extra in (
        ("none", {}),
        ("update_extrapolation", {"extrapolation": 0.5}),
        ("gradient_extrapolation", {"extrapolation": 0.5}),
        ("error_buffer", {"extrapolation": 0.5, "buffer_decay": 0.5}),
    )
]


# DeVA, issue 4 (jaxlab/optim/_deva.py): the vector form and the whole-network alias (matrix form
# on the (4, 3) leaf, AdamW fallback on the vector leaf; and the DeVA-l-inf fallback). The ints that
# fix shapes and loops and the flags are static (inject_hyperparams would otherwise inject them).
_DEVA_STATIC = {
    "precondition_frequency": 10,
    "max_precond_dim": 10000,
    "ns_steps": 5,
    "nesterov": True,
    "bias_correction": True,
    "first_step_rescale": True,
}
TRANSFORM_CASES += [
    TransformCase(
        name="deva_vector",
        factory=_optim.deva_vector,
        hyperparams={"learning_rate": 0.02, "b1": 0.9, "b2": 0.999, "eps": 1e-5},
        static={"nesterov": False, "bias_correction": False},
    ),
    TransformCase(
        name="deva_adamw_fallback",
        factory=_optim.deva,
        hyperparams={"learning_rate": 0.05, "b1": 0.95, "b2": 0.95, "weight_decay": 0.0},
        static={**_DEVA_STATIC, "fallback": "adamw"},
        # The fallback is optax.adamw, whose bias correction promotes (float ** int32); the
        # jaxlab part of deva runs under strict promotion in deva_vector_fallback below.
        jaxlab=False,
    ),
    TransformCase(
        name="deva_vector_fallback",
        factory=_optim.deva,
        hyperparams={"learning_rate": 0.05, "b1": 0.9, "b2": 0.99, "weight_decay": 0.0},
        static={**_DEVA_STATIC, "fallback": "deva_vector", "precondition_frequency": 2},
    ),
]


# SOAP (jaxlab/optim/_soap.py), the deva experiment's baseline: 2-D leaves only, so the vector
# leaf goes to DeVA-l-inf as in deva_vector_fallback (both jaxlab, strict promotion throughout).
def _soap_network(learning_rate, b1, b2, eps, *, precondition_frequency, max_precond_dim):
    matrix = optax.chain(
        _optim.scale_by_soap(
            b1,
            b2,
            eps,
            precondition_frequency=precondition_frequency,
            max_precond_dim=max_precond_dim,
        ),
        optax.scale_by_learning_rate(learning_rate),
    )
    return optax.partition(
        {"deva": matrix, "fallback": _optim.deva_vector(learning_rate)}, _optim.deva_matrix_labels
    )


TRANSFORM_CASES += [
    TransformCase(
        name="soap_with_deva_vector_fallback",
        factory=_soap_network,
        hyperparams={"learning_rate": 0.05, "b1": 0.9, "b2": 0.99, "eps": 1e-8},
        static={"precondition_frequency": 2, "max_precond_dim": 10000},
    ),
]


# Per-sample harm minimisation, issue 21 (jaxlab/optim/_harm.py): the head mode around SGD-m. The
# battery's params are a linear head (kernel "w" (4, 3), bias "b" (3,)) and its checks pass no
# extra args, so the factory supplies fixed activations of a batch of 5 (features (5, 4), logit
# grads (5, 3)); the battery's random gradients harm some of those samples, so the correction
# acts in every trajectory check. num_iterations sets a loop count: static.
def _harm_sgd_with_activations(learning_rate, momentum, margin=0.0, *, num_iterations):
    tx = _optim.harm_sgd(
        learning_rate, momentum, margin, kernel_path=("w",), bias_path=("b",),
        num_iterations=num_iterations,
    )  # fmt: skip
    keys = jax.random.split(jax.random.key(21), 2)
    features = jax.random.normal(keys[0], (5, 4), jnp.float32)
    logit_grads = jax.random.normal(keys[1], (5, 3), jnp.float32)

    def update(updates, state, params=None, **extra_args):
        return tx.update(
            updates, state, params, features=features, logit_grads=logit_grads, **extra_args
        )

    return optax.GradientTransformationExtraArgs(tx.init, update)


TRANSFORM_CASES += [
    TransformCase(
        name="harm_sgd_head",
        factory=_harm_sgd_with_activations,
        hyperparams={"learning_rate": 0.2, "momentum": 0.5, "margin": 0.0},
        static={"num_iterations": 100},
        skip=frozenset({"quadratic"}),
        notes="the no-harm constraints keep <g_i, x> non-increasing for the fixed supplied "
        "samples, which are not the quadratic's: its minimiser can lie beyond them (f ratio 0.08 "
        "after 300 steps); convergence with activations of the loss being minimised is tested in "
        "tests/optim/test_harm.py",
    ),
]


# ============================================================================================
# The SOLVER battery: every jaxlab solver (jaxlab/_src/solver.py's IterativeSolver) passes it.
#
# How to add a solver: append one ``SolverCase`` to ``SOLVER_CASES`` (below). Its ``make`` builds
# the solver, the start and the arguments *inside* the case's dtype mode (float64 when ``x64``),
# so arrays are never created at import time. ``tests/test_solver_battery.py`` runs every check in
# ``SOLVER_CHECKS`` on it, with test ids ``"<case.name>-<check name>"``. Example::
#
#     SolverCase(
#         name="stochastic_extragradient",
#         make=lambda: SolverProblem(
#             solver=jaxlab.solvers.StochasticExtragradient(operator_fn=..., stepsize=0.3,
#                                                         exact_operator_fn=..., tol=1e-11),
#             init_params=jnp.zeros(2),
#             args=(jnp.array([1.0, -2.0]),),  # args[diff_argnum] is differentiated
#             kwargs={"rng_key": jax.random.key(0)},
#         ),
#         implicit_diff=True,
#     )
#
# The checks (each ``check_solver_<name>(case)`` raises ``AssertionError`` with a message):
#
# 1. ``stable_state``: ``update`` under ``jax.jit`` traces once over three calls with the state
#    it returned itself, and the state keeps its tree structure, shapes, dtypes and weak types
#    from ``init_state`` on (and params keep theirs).
# 2. ``run_equals_loop``: ``run`` (``lax.while_loop``) equals the manual loop
#    ``state = init_state(...); while iter_num == 0 or (iter_num < maxiter and error > tol):
#    params, state = update(...)`` (each update jitted separately), in params and state; a
#    state's ``status`` reads CONVERGED if the final error is <= tol, else MAXITER.
# 3. ``unrolled_run``: ``run`` with ``unroll=True`` (``lax.scan`` of ``maxiter`` steps, frozen after
#    convergence) equals the ``while_loop`` run.
# 4. ``optimality``: ``||optimality_fun(run(...).params, *args)|| <= optimality_tol``.
# 5. ``implicit_gradients`` (cases with ``implicit_diff=True``): the gradient of
#    ``<w, run(init, *args).params>`` with respect to ``args[diff_argnum]`` under
#    ``implicit_diff=True`` (``jax.lax.custom_root``) matches central differences of the
#    forward solution along random directions.
#
# The variants (``implicit_diff``, ``unroll``, ``jit``) are made with ``dataclasses.replace``, so a
# solver must be a dataclass whose ``__init__`` takes its fields back.

from jaxlab._src.solver import IterativeSolver  # noqa: E402

__all__ += [
    "SOLVER_CASES",
    "SOLVER_CHECKS",
    "SOLVER_CHECK_NAMES",
    "SolverCase",
    "SolverProblem",
    "run_solver_check",
]

SOLVER_CHECK_NAMES = (
    "stable_state",
    "run_equals_loop",
    "unrolled_run",
    "optimality",
    "implicit_gradients",
)


@dataclasses.dataclass(frozen=True)
class SolverProblem:
    """What a ``SolverCase.make`` returns: the solver and the arguments of its ``run``."""

    solver: IterativeSolver
    init_params: Any
    args: tuple = ()
    kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class SolverCase:
    """One solver configuration the solver battery runs (see the section comment above).

    Fields:
      name: test id prefix.
      make: ``() -> SolverProblem``, called inside the case's dtype mode.
      x64: build and run with float64 enabled (``jax.enable_x64``).
      implicit_diff: the implicit-gradient check applies (the solution is differentiable in
        ``args[diff_argnum]`` and ``run`` converges tightly enough for central differences).
      diff_argnum: which positional argument of ``run`` the gradient check differentiates.
      optimality_tol: bound on ``||optimality_fun(solution)||``.
      loop_rtol, loop_atol: tolerances of the run-vs-loop and unrolled comparisons.
      fd_step: central-difference step.
      grad_rtol: relative tolerance of the gradient check (on the directional derivative).
      skip: check names that do not apply; ``notes`` gives the reason.
    """

    name: str
    make: Callable[[], SolverProblem]
    x64: bool = True
    implicit_diff: bool = False
    diff_argnum: int = 0
    optimality_tol: float = 1e-8
    loop_rtol: float = 1e-9
    loop_atol: float = 1e-12
    fd_step: float = 1e-5
    grad_rtol: float = 1e-5
    skip: frozenset[str] = frozenset()
    notes: str = ""

    def __post_init__(self):
        if not self.name or not isinstance(self.name, str):
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        if not callable(self.make):
            raise TypeError(f"{self.name}: make must be callable, got {self.make!r}")
        unknown = set(self.skip) - set(SOLVER_CHECK_NAMES)
        if unknown:
            raise ValueError(
                f"{self.name}: skip has {sorted(unknown)}, allowed {SOLVER_CHECK_NAMES}"
            )
        if self.skip and not self.notes.strip():
            raise ValueError(f"{self.name}: skip is non-empty, so notes must give the reason")
        for field in ("optimality_tol", "fd_step", "grad_rtol"):
            if not getattr(self, field) > 0:
                raise ValueError(f"{self.name}: {field} must be > 0, got {getattr(self, field)}")
        if self.loop_rtol < 0 or self.loop_atol < 0:
            raise ValueError(f"{self.name}: loop_rtol and loop_atol must be >= 0")
        object.__setattr__(self, "skip", frozenset(self.skip))

    def __str__(self) -> str:
        return self.name


@contextlib.contextmanager
def _case_mode(case: SolverCase) -> Iterator[None]:
    with jax.enable_x64(case.x64):
        yield


def _make(case: SolverCase) -> SolverProblem:
    problem = case.make()
    if not isinstance(problem, SolverProblem):
        raise TypeError(f"{case.name}: make() must return a SolverProblem, got {problem!r}")
    if not isinstance(problem.solver, IterativeSolver):
        raise TypeError(f"{case.name}: the solver must subclass IterativeSolver")
    return problem


def _variant(solver: IterativeSolver, **changes) -> IterativeSolver:
    return dataclasses.replace(solver, **changes)


def _loop_continues(state, maxiter: int, tol: float) -> bool:
    """The while-loop condition of ``IterativeSolver.run``, evaluated on the host."""
    iter_num = int(state.iter_num)
    return iter_num == 0 or (iter_num < maxiter and float(state.error) > tol)


def check_solver_stable_state(case: SolverCase) -> None:
    """``update`` jitted traces once over three calls; the state's types never change.

    Examples:
      >>> check_solver_stable_state(SOLVER_CASES[0])
    """
    with _case_mode(case):
        problem = _make(case)
        solver = problem.solver
        traces = []

        def step(params, state, args, kwargs):
            traces.append(None)  # runs once per trace, never at execution
            return tuple(solver.update(params, state, *args, **kwargs))

        jitted = jax.jit(step)
        params = problem.init_params
        state0 = solver.init_state(params, *problem.args, **problem.kwargs)
        states, all_params = [state0], [params]
        state = state0
        for _ in range(3):
            params, state = jitted(params, state, problem.args, dict(problem.kwargs))
            states.append(state)
            all_params.append(params)
    for i in range(1, 4):
        diff = _describe_differences(states[0], states[i], weak_type=True)
        assert not diff, (
            f"{case.name}: the state after update {i} differs from init_state's:\n{diff}"
        )
        diff = _describe_differences(all_params[0], all_params[i], weak_type=True)
        assert not diff, f"{case.name}: params after update {i} differ from init_params:\n{diff}"
    if len(traces) != 1:
        raise AssertionError(
            f"{case.name}: jitted update traced {len(traces)} times in 3 calls with equal shapes "
            f"(expected 1): the state's dtypes, weak types or structure change"
        )


def _assert_solver_trees_close(actual, desired, what: str, case: SolverCase) -> None:
    _assert_trees_close(actual, desired, what, rtol=case.loop_rtol, atol=case.loop_atol)


def check_solver_run_equals_loop(case: SolverCase) -> None:
    """``run`` equals the manual ``update`` loop with ``run``'s stopping rule.

    Examples:
      >>> check_solver_run_equals_loop(SOLVER_CASES[0])
    """
    with _case_mode(case):
        problem = _make(case)
        solver = _variant(problem.solver, implicit_diff=False, unroll=False, jit=True)
        args, kwargs = problem.args, dict(problem.kwargs)
        result = solver.run(problem.init_params, *args, **kwargs)

        update = jax.jit(lambda p, s, a, kw: tuple(solver.update(p, s, *a, **kw)))
        params = problem.init_params
        state = solver.init_state(params, *args, **kwargs)
        while _loop_continues(state, solver.maxiter, solver.tol):
            params, state = update(params, state, args, kwargs)
    assert int(result.state.iter_num) == int(state.iter_num), (
        f"{case.name}: run stopped after {int(result.state.iter_num)} iterations, the manual "
        f"update loop after {int(state.iter_num)}"
    )
    if hasattr(state, "status"):  # SolverStatus: CONVERGED (1) if error <= tol, else MAXITER (2)
        expected = 1 if float(state.error) <= solver.tol else 2
        assert int(state.status) == expected == int(result.state.status), (
            f"{case.name}: status {int(state.status)} (update) / {int(result.state.status)} "
            f"(run) after the finite run, expected {expected} (error {float(state.error):.3g}, "
            f"tol {solver.tol:g}, {int(state.iter_num)} of {solver.maxiter} iterations)"
        )
    _assert_solver_trees_close(result.params, params, f"{case.name}: run params != loop's", case)
    _assert_solver_trees_close(result.state, state, f"{case.name}: run state != loop's", case)


def check_solver_unrolled_run(case: SolverCase) -> None:
    """``run`` with ``unroll=True`` (``lax.scan``) equals the ``while_loop`` run.

    Examples:
      >>> check_solver_unrolled_run(SOLVER_CASES[0])
    """
    with _case_mode(case):
        problem = _make(case)
        args, kwargs = problem.args, dict(problem.kwargs)
        looped = _variant(problem.solver, implicit_diff=False, unroll=False)
        unrolled = _variant(problem.solver, implicit_diff=False, unroll=True)
        expected = looped.run(problem.init_params, *args, **kwargs)
        try:
            actual = unrolled.run(problem.init_params, *args, **kwargs)
        except AssertionError:
            raise
        except Exception as err:
            raise AssertionError(
                f"{case.name}: run with unroll=True (lax.scan) fails: {type(err).__name__}: {err}"
            ) from err
    _assert_solver_trees_close(
        actual.params, expected.params, f"{case.name}: unrolled run params != while_loop's", case
    )
    _assert_solver_trees_close(
        actual.state, expected.state, f"{case.name}: unrolled run state != while_loop's", case
    )


def check_solver_optimality(case: SolverCase) -> None:
    """``optimality_fun`` is near zero at ``run``'s solution.

    Examples:
      >>> check_solver_optimality(SOLVER_CASES[0])
    """
    with _case_mode(case):
        problem = _make(case)
        args, kwargs = problem.args, dict(problem.kwargs)
        solver = _variant(problem.solver, implicit_diff=False)
        result = solver.run(problem.init_params, *args, **kwargs)
        residual = float(optax.tree.norm(solver.optimality_fun(result.params, *args, **kwargs)))
        start = float(optax.tree.norm(solver.optimality_fun(problem.init_params, *args, **kwargs)))
    assert math.isfinite(residual) and residual <= case.optimality_tol, (
        f"{case.name}: ||optimality_fun(solution)|| = {residual:.3g} > optimality_tol = "
        f"{case.optimality_tol:g} (at the start it was {start:.3g}; "
        f"{int(result.state.iter_num)} iterations, final error {float(result.state.error):.3g})"
    )


def check_solver_implicit_gradients(case: SolverCase) -> None:
    """Implicit gradients (``custom_root``) match central differences of the solution.

    Examples:
      >>> check_solver_implicit_gradients(SOLVER_CASES[0])
    """
    if not case.implicit_diff:
        pytest.skip(f"{case.name}: implicit gradients do not apply ({case.notes or 'no reason'})")
    with _case_mode(case):
        problem = _make(case)
        args, kwargs = list(problem.args), dict(problem.kwargs)
        theta = args[case.diff_argnum]
        implicit = _variant(problem.solver, implicit_diff=True, unroll=False)
        forward = _variant(problem.solver, implicit_diff=False, unroll=False)
        out_shape = jax.eval_shape(lambda: forward.run(problem.init_params, *args, **kwargs).params)
        leaves = jax.tree.leaves(out_shape)
        weight_keys = jax.random.split(jax.random.key(11), len(leaves))
        weights = jax.tree.unflatten(
            jax.tree.structure(out_shape),
            [
                jax.random.normal(k, x.shape, x.dtype)
                for k, x in zip(weight_keys, leaves, strict=True)
            ],
        )

        def objective(solver, value):
            call_args = list(args)
            call_args[case.diff_argnum] = value
            params = solver.run(problem.init_params, *call_args, **kwargs).params
            terms = jax.tree.map(lambda w, p: jnp.sum(w * p), weights, params)
            return sum(jax.tree.leaves(terms))

        try:
            grad = jax.grad(lambda v: objective(implicit, v))(theta)
        except AssertionError:
            raise
        except Exception as err:
            raise AssertionError(
                f"{case.name}: jax.grad through run with implicit_diff=True fails: "
                f"{type(err).__name__}: {err}"
            ) from err
        value_fn = jax.jit(lambda v: objective(forward, v))
        theta_leaves = jax.tree.leaves(theta)
        for i in range(2):
            direction_keys = jax.random.split(jax.random.key(100 + i), len(theta_leaves))
            direction = jax.tree.unflatten(
                jax.tree.structure(theta),
                [
                    jax.random.normal(k, x.shape, x.dtype)
                    for k, x in zip(direction_keys, theta_leaves, strict=True)
                ],
            )
            h = case.fd_step
            plus = jax.tree.map(lambda t, d: t + h * d, theta, direction)
            minus = jax.tree.map(lambda t, d: t - h * d, theta, direction)
            numeric = (float(value_fn(plus)) - float(value_fn(minus))) / (2 * h)
            analytic = float(
                sum(jax.tree.leaves(jax.tree.map(lambda g, d: jnp.sum(g * d), grad, direction)))
            )
            scale = max(abs(numeric), abs(analytic), 1e-12)
            assert abs(analytic - numeric) <= case.grad_rtol * scale, (
                f"{case.name}: implicit directional derivative {analytic:.8g} != central "
                f"difference {numeric:.8g} (direction {i}, step {h:g}, rtol {case.grad_rtol:g})"
            )


SOLVER_CHECKS: dict[str, Callable[[SolverCase], None]] = {
    "stable_state": check_solver_stable_state,
    "run_equals_loop": check_solver_run_equals_loop,
    "unrolled_run": check_solver_unrolled_run,
    "optimality": check_solver_optimality,
    "implicit_gradients": check_solver_implicit_gradients,
}
assert tuple(SOLVER_CHECKS) == SOLVER_CHECK_NAMES


def run_solver_check(case: SolverCase, check: str) -> None:
    """Runs ``SOLVER_CHECKS[check]`` on ``case``, or skips it with ``case.notes`` if listed.

    Examples:
      >>> run_solver_check(SOLVER_CASES[0], "optimality")
    """
    if check in case.skip:
        pytest.skip(f"{case.name} skips {check}: {case.notes}")
    SOLVER_CHECKS[check](case)


# --------------------------------------------------------------------------------------------
# Solver registry. The stochastic VI solvers run on the strongly monotone F(z, θ) = Mz - θ
# (M = [[1, 2], [-2, 1]]: μ = 1, L = √5, solution z* = M⁻¹θ) with relative noise
# F̂ = (I + σN/√b) F(z), unbiased and vanishing at the solution, so the stochastic runs converge to
# z*(θ) exactly and their implicit gradients (dz*/dθ = M⁻¹) can be checked tightly.

_VI_MATRIX = ((1.0, 2.0), (-2.0, 1.0))
_VI_NOISE = 0.3


def _vi_operators():
    matrix = jnp.asarray(_VI_MATRIX)

    def exact_operator_fn(z, theta):
        return matrix @ z - theta

    def operator_fn(z, rng_key, batch_size, theta):
        value = exact_operator_fn(z, theta)
        scale = _VI_NOISE / jnp.sqrt(jnp.asarray(batch_size).astype(value.dtype))
        noise = jax.random.normal(rng_key, (2, 2), value.dtype)
        return value + scale * (noise @ value)

    return operator_fn, exact_operator_fn


def _vi_case(
    name: str,
    solver_class: str,
    *,
    implicit_diff: bool = True,
    notes: str = "",
    optimality_tol: float = 1e-9,
    **kwargs,
) -> SolverCase:
    frozen = dict(kwargs)

    def make() -> SolverProblem:
        import jaxlab.solvers as vi

        operator_fn, exact_operator_fn = _vi_operators()
        options = dict(frozen)
        power = options.pop("batch_power", 1)
        solver = getattr(vi, solver_class)(
            operator_fn=operator_fn,
            exact_operator_fn=exact_operator_fn,
            batch_schedule=vi.polynomial_batch_schedule(1, power),
            **options,
        )
        return SolverProblem(
            solver=solver,
            init_params=jnp.asarray([0.5, -0.5]),
            args=(jnp.asarray([1.0, -2.0]),),
            kwargs={"rng_key": jax.random.key(3)},
        )

    return SolverCase(
        name=name,
        make=make,
        implicit_diff=implicit_diff,
        optimality_tol=optimality_tol,
        notes=notes,
    )


SOLVER_CASES: list[SolverCase] = [
    _vi_case(
        "stochastic_extragradient", "StochasticExtragradient", stepsize=0.2, tol=1e-12, maxiter=400
    ),
    _vi_case(
        "stochastic_extragradient_eg_relaxed_box",
        "StochasticExtragradient",
        stepsize=0.3,
        relaxation=0.5,
        variant="eg",
        # The box is inactive at z* = (1, -2)·M⁻¹ but clips the early iterates.
        projection=lambda z: optax.projections.projection_box(z, -2.0, 2.0),
        tol=1e-12,
        maxiter=400,
    ),
    _vi_case(
        "stochastic_gradient_descent_ascent",
        "StochasticGradientDescentAscent",
        stepsize=0.2,
        tol=1e-12,
        maxiter=400,
    ),
    _vi_case(
        "halpern_extragradient",
        "HalpernExtragradient",
        stepsize=0.2,
        maxiter=200,
        implicit_diff=False,
        optimality_tol=6e-3,  # measured 4e-3 (from 0.32 at the start)
        notes="Halpern's anchored last iterate converges at O(1/k), too slowly for central "
        "differences of the solution; implicit_diff itself is shared with the EG cases",
    ),
    _vi_case(
        "halpern_extragradient_recursive",
        "HalpernExtragradient",
        stepsize=0.2,
        maxiter=200,
        estimator="recursive",
        restart_every=5,
        implicit_diff=False,
        optimality_tol=6e-3,
        notes="Halpern's anchored last iterate converges at O(1/k), too slowly for central "
        "differences of the solution; implicit_diff itself is shared with the EG cases",
    ),
]


# --------------------------------------------------------------------------------------------
# Hom-PGD⁺ (jaxlab.solvers.HomPGD): latent projected gradient through a homeomorphism Φ: 𝔹 -> K.
# Case 1 maps the disk onto the note's star K = {||x|| <= 1 + 0.6 sin 4θ} with the exact radial
# map and minimises ½||x - θ||² for θ outside K: the solution is the projection of θ onto K, on
# ∂K = Φ(∂𝔹), differentiable in θ. Case 2 uses a map that overshoots the unit disk (Φ(z) = 1.3z)
# with the public code's bisection repair and |Δf| stopping rule.


def _hom_pgd_star_case() -> SolverProblem:
    from jaxlab.solvers import HomPGD

    def star(z, theta):
        return z * (1.0 + 0.6 * jnp.sin(4.0 * jnp.arctan2(z[1], z[0])))

    def distance(x, theta):
        return 0.5 * jnp.sum((x - theta) ** 2)

    solver = HomPGD(distance, star, stepsize=0.2, adaptive_decay=1.0, maxiter=2000, tol=1e-12)
    return SolverProblem(
        solver=solver, init_params=jnp.asarray([0.3, 0.2]), args=(jnp.asarray([2.0, 0.6]),)
    )


def _hom_pgd_bisection_case() -> SolverProblem:
    from jaxlab.solvers import HomPGD

    def overshoot(z, theta):
        return 1.3 * z

    def distance(x, theta):
        return 0.5 * jnp.sum((x - theta) ** 2)

    def unit_disk(x, theta):
        return jnp.sum(x**2, keepdims=True) - 1.0

    solver = HomPGD(
        distance,
        overshoot,
        unit_disk,
        stepsize=0.1,
        repair="bisection",
        stopping="objective_change",
        bisection_steps=20,
        maxiter=300,
        tol=1e-10,
    )
    return SolverProblem(
        solver=solver, init_params=jnp.asarray([0.1, 0.0]), args=(jnp.asarray([2.0, 0.5]),)
    )


SOLVER_CASES += [
    SolverCase(
        name="hom_pgd_star_exact_map",
        make=_hom_pgd_star_case,
        implicit_diff=True,
        optimality_tol=1e-10,
    ),
    SolverCase(
        name="hom_pgd_bisection_repair",
        make=_hom_pgd_bisection_case,
        skip=frozenset({"optimality"}),
        notes="the repaired iterates stop on ∂K inside Φ(𝔹), a stationary point of f over K but "
        "not of the latent-ball problem that optimality_fun (the gradient mapping) measures; "
        "the objective-change stop and the repair's branches make the solution non-smooth in θ",
    ),
]


# --------------------------------------------------------------------------------------------
# Push-Pull and FAB (jaxlab.solvers.PushPull / FAB, issue 6): 4 agents stacked on the leading
# axis, an unbalanced time-varying digraph (ring + random extra edges, redrawn every round).
# PushPull minimises (1/n) Σ a_i ||x - b_i||² / 2 (x* = Σ a_i b_i / Σ a_i, differentiable in b);
# FAB solves the note's check-3 bilevel toy f_i = (y - c_i)²/2 + x²/2, g_i = (y - x - e_i)²/2,
# whose penalty solution x_λ = λ(c̄ - ē)/(1 + 2λ) is differentiable in c.

_PP_AGENTS = 4


def _push_pull_case() -> SolverProblem:
    from jaxlab.distributed import time_varying_digraph
    from jaxlab.solvers import PushPull

    solver = PushPull(
        grad_fn=lambda x, a_i, b_i: a_i * (x - b_i),
        graph_fn=lambda key, k: time_varying_digraph(key, _PP_AGENTS),
        stepsize=0.2,
        maxiter=400,
        tol=1e-12,
    )
    return SolverProblem(
        solver=solver,
        init_params=jnp.zeros((_PP_AGENTS, 2)),
        args=(
            jnp.asarray([1.0, 2.0, 3.0, 1.5]),
            jnp.asarray([[0.0, 1.0], [1.0, -1.0], [-1.0, 0.5], [2.0, 0.0]]),
        ),
        kwargs={"rng_key": jax.random.key(5)},
    )


def _fab_case() -> SolverProblem:
    from jaxlab.distributed import time_varying_digraph
    from jaxlab.solvers import FAB, FABParams

    solver = FAB(
        upper_grad_fn=lambda x, y, c_i, e_i: (x, y - c_i),
        lower_grad_fn=lambda x, y, c_i, e_i: (x + e_i - y, y - x - e_i),
        graph_fn=lambda key, k: time_varying_digraph(key, _PP_AGENTS),
        penalty=10.0,
        upper_stepsize=0.1,
        lower_stepsize=0.3,
        maxiter=600,
        tol=1e-12,
    )
    zeros = jnp.zeros(_PP_AGENTS)
    return SolverProblem(
        solver=solver,
        init_params=FABParams(zeros, zeros, zeros),
        args=(jnp.asarray([0.0, 2.0, 1.5, 0.5]), jnp.asarray([0.3, -0.3, 0.1, -0.1])),
        kwargs={"rng_key": jax.random.key(6)},
    )


SOLVER_CASES += [
    SolverCase(
        name="push_pull_time_varying_digraph",
        make=_push_pull_case,
        implicit_diff=True,
        diff_argnum=1,
    ),
    SolverCase(name="fab_penalty_toy", make=_fab_case, implicit_diff=True, diff_argnum=0),
]


# --------------------------------------------------------------------------------------------
# DenseQP (jaxlab.solvers.DenseQP, issue 16): OSQP-style ADMM on a strictly convex 3-D QP with
# an equality, two inequalities (one binding) and a bound row. Two active rows leave one free
# direction, so the solution's derivative in q (args[1], the active-set KKT system) is nonzero.


def _dense_qp_case() -> SolverProblem:
    from jaxlab.solvers import DenseQP, QPSolution

    P = jnp.asarray([[2.0, 0.5, 0.0], [0.5, 1.0, 0.2], [0.0, 0.2, 1.5]])
    q = jnp.asarray([-1.0, 0.5, -2.0])
    A = jnp.asarray([[1.0, 1.0, 1.0], [1.0, -1.0, 0.0], [0.0, 1.0, 2.0], [1.0, 0.0, 0.0]])
    lower = jnp.asarray([1.0, -jnp.inf, -jnp.inf, 0.0])
    upper = jnp.asarray([1.0, 0.3, 5.0, jnp.inf])
    return SolverProblem(
        solver=DenseQP(tol=1e-11, maxiter=20000),
        init_params=QPSolution(jnp.zeros(3), jnp.zeros(4)),
        args=(P, q, A, lower, upper),
    )


SOLVER_CASES += [
    SolverCase(
        name="dense_qp_admm",
        make=_dense_qp_case,
        implicit_diff=True,
        diff_argnum=1,
        optimality_tol=1e-9,
        loop_rtol=1e-7,
        loop_atol=1e-10,
        fd_step=1e-6,
        grad_rtol=1e-5,
    ),
]


# --------------------------------------------------------------------------------------------
# SingleShooting / MSFlow (jaxlab.inverse, issue 22): the note's 2-D toy (the exact three-mode
# mixture flow, A = [1, 0], σ = 0.05), a few Adam steps / sweeps on one problem.


def _single_shooting_case() -> SolverProblem:
    from jaxlab.inverse import (
        GaussianMixtureFlow,
        SingleShooting,
        matrix_operator,
        three_mode_mixture,
    )

    solver = SingleShooting(
        GaussianMixtureFlow.velocity, 0.05, num_steps=4, adjoint="backprop", maxiter=6
    )
    return SolverProblem(
        solver=solver,
        init_params=jnp.array([0.5, 0.5]),
        args=(jnp.array([1.5]), matrix_operator(jnp.array([[1.0, 0.0]])), three_mode_mixture()),
    )


def _msflow_case() -> SolverProblem:
    from jaxlab.inverse import GaussianMixtureFlow, MSFlow, matrix_operator, three_mode_mixture

    flow = three_mode_mixture()
    solver = MSFlow(GaussianMixtureFlow.velocity, 0.05, 2, 2, jacobian="identity", maxiter=6)
    return SolverProblem(
        solver=solver,
        init_params=solver.init_params(jnp.array([0.5, 0.5]), flow),
        args=(jnp.array([1.5]), matrix_operator(jnp.array([[1.0, 0.0]])), flow),
    )


_SHOOTING_NOTES = (
    "Adam with a constant step (and, for MSFlow, a mu schedule over maxiter sweeps) runs its "
    "fixed number of steps and ends near, not at, a stationary point of the objective, so "
    "optimality_fun (the exact gradient) is not ~0 there and the end point is not a root to "
    "differentiate implicitly"
)
SOLVER_CASES += [
    SolverCase(
        name="single_shooting_backprop_mixture_toy",
        make=_single_shooting_case,
        skip=frozenset({"optimality"}),
        notes=_SHOOTING_NOTES,
    ),
    SolverCase(
        name="msflow_jacobian_free_mixture_toy",
        make=_msflow_case,
        skip=frozenset({"optimality"}),
        notes=_SHOOTING_NOTES,
    ),
]
