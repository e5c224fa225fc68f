"""The battery's own test: it passes on optax's adam and muon and catches each defect it names.

Every check must be able to fail: each defective transform below breaks one documented rule and
the matching check has to raise AssertionError for it (while a sound transform of the same size
passes).
"""

import itertools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from tests.batteries import (
    AXIS_NAME,
    CHECK_NAMES,
    CHECKS,
    REFERENCE_CASES,
    TransformCase,
    check_dtype,
    check_eval_shape_init,
    check_inject_hyperparams,
    check_multi_steps,
    check_no_retrace,
    check_quadratic,
    check_state_structure,
    check_vmap_shard_map,
    make_transform,
    run_check,
)

_REFERENCE_PAIRS = [(case, check) for case in REFERENCE_CASES for check in CHECK_NAMES]


@pytest.mark.parametrize(
    ("case", "check"),
    _REFERENCE_PAIRS,
    ids=[f"{case.name}-{check}" for case, check in _REFERENCE_PAIRS],
)
def test_reference_transforms_pass(case, check):
    run_check(case, check)


# ----------------------------------------------------------------------------------------------
# Small hand-written transforms, sound and defective.


class _HeavyBallState(NamedTuple):
    count: jax.Array
    trace: optax.Updates


class _CountState(NamedTuple):
    count: jax.Array


def _sgd_updates(updates, learning_rate):
    return jax.tree.map(lambda g: -learning_rate * g, updates)


def _heavy_ball(learning_rate, momentum):
    """Sound heavy ball: t <- momentum * t + g, update -lr * t (no branch on momentum)."""

    def init(params):
        return _HeavyBallState(jnp.zeros([], jnp.int32), optax.tree.zeros_like(params))

    def update(updates, state, params=None):
        del params
        trace = jax.tree.map(lambda t, g: momentum * t + g, state.trace, updates)
        return _sgd_updates(trace, learning_rate), _HeavyBallState(state.count + 1, trace)

    return optax.GradientTransformation(init, update)


def _branching_heavy_ball(learning_rate, momentum):
    """Heavy ball that branches in Python on the hyperparameter ``momentum`` (the defect)."""

    def init(params):
        return _HeavyBallState(jnp.zeros([], jnp.int32), optax.tree.zeros_like(params))

    def update(updates, state, params=None):
        del params
        if momentum > 0:
            trace = jax.tree.map(lambda t, g: momentum * t + g, state.trace, updates)
        else:
            trace = updates
        return _sgd_updates(trace, learning_rate), _HeavyBallState(state.count + 1, trace)

    return optax.GradientTransformation(init, update)


def _structure_changing(variant):
    """SGD whose state changes between init and update in the way ``variant`` names."""

    def factory(learning_rate):
        def init(params):
            if variant == "empty_init":
                return ()
            if variant == "dict_init":
                return {"count": jnp.zeros([], jnp.int32)}
            if variant == "growing_buffer":
                return {"norms": jnp.zeros((0,), jnp.float32)}
            if variant == "count_dtype":
                return _CountState(jnp.zeros([], jnp.int32))
            raise AssertionError(variant)

        def update(updates, state, params=None):
            del params
            if variant in ("empty_init", "dict_init"):
                count = state["count"] if isinstance(state, dict) else jnp.zeros([], jnp.int32)
                new_state = _CountState(count + 1)
            elif variant == "growing_buffer":
                norm = optax.tree.norm(updates).astype(jnp.float32)
                new_state = {"norms": jnp.concatenate([state["norms"], norm[None]])}
            else:
                new_state = _CountState(state.count.astype(jnp.float32) + 1)
            return _sgd_updates(updates, learning_rate), new_state

        return optax.GradientTransformation(init, update)

    return factory


def _weak_type_drift(learning_rate):
    """SGD keeping a running gradient sum born weakly typed: jit retraces on the second step."""

    def init(params):
        del params
        return {"grad_sum": jnp.asarray(0.0)}  # a Python float: weak float32

    def update(updates, state, params=None):
        del params
        total = state["grad_sum"] + sum(jnp.sum(g) for g in jax.tree.leaves(updates))
        return _sgd_updates(updates, learning_rate), {"grad_sum": total}

    return optax.GradientTransformation(init, update)


def _promoting_sgd(learning_rate, *, kind):
    """SGD that multiplies by a strongly typed constant, so dtypes promote."""

    def init(params):
        del params
        return optax.EmptyState()

    def update(updates, state, params=None):
        del params
        if kind == "f32_constant":  # bf16 * f32 -> f32
            out = jax.tree.map(lambda g: g * jnp.float32(-learning_rate), updates)
        elif kind == "f32_cast_back":  # bf16 * f32 -> f32, cast back: invisible in the output
            out = jax.tree.map(lambda g: (g * jnp.float32(-learning_rate)).astype(g.dtype), updates)
        elif kind == "np_float64":  # f32 * numpy float64 -> f64 under x64
            out = jax.tree.map(lambda g: g * np.float64(-learning_rate), updates)
        else:
            raise AssertionError(kind)
        return out, state

    return optax.GradientTransformation(init, update)


def _promoting_factory(kind):
    def factory(learning_rate):
        return _promoting_sgd(learning_rate, kind=kind)

    return factory


def _init_needs_values(learning_rate):
    """SGD whose init reads parameter values in Python: breaks under eval_shape."""

    def init(params):
        largest = max(float(jnp.max(jnp.abs(p))) for p in jax.tree.leaves(params))
        return {"scale": jnp.asarray(largest, jnp.float32)}

    def update(updates, state, params=None):
        del params
        return _sgd_updates(updates, learning_rate), state

    return optax.GradientTransformation(init, update)


_TRACE_COUNTER = itertools.count()


def _trace_time_state(learning_rate):
    """SGD adding a constant taken from Python state at trace time: differs per trace."""

    def init(params):
        del params
        return optax.EmptyState()

    def update(updates, state, params=None):
        del params
        offset = 1e-3 * next(_TRACE_COUNTER)
        return jax.tree.map(lambda g: -learning_rate * g + offset, updates), state

    return optax.GradientTransformation(init, update)


_AXIS_NAMES_SEEN = []


def _pmean_sgd(learning_rate, *, axis_name=None):
    """Data-parallel SGD: averages gradients over ``axis_name`` when given."""
    _AXIS_NAMES_SEEN.append(axis_name)

    def init(params):
        del params
        return optax.EmptyState()

    def update(updates, state, params=None):
        del params
        if axis_name is not None:
            updates = jax.lax.pmean(updates, axis_name)
        return _sgd_updates(updates, learning_rate), state

    return optax.GradientTransformation(init, update)


def _case(name, factory, **kwargs):
    kwargs.setdefault("hyperparams", {"learning_rate": 0.1})
    return TransformCase(name=name, factory=factory, **kwargs)


# ----------------------------------------------------------------------------------------------
# Each check catches its defect.


def test_inject_check_catches_python_branch_on_hyperparameter():
    case = _case(
        "branching", _branching_heavy_ball, hyperparams={"learning_rate": 0.1, "momentum": 0.5}
    )
    with pytest.raises(AssertionError, match="never branch on it in Python"):
        check_inject_hyperparams(case)
    # The plain transform is otherwise sound: only the inject check fails.
    check_no_retrace(case)
    check_state_structure(case)


def test_sound_heavy_ball_passes_every_check():
    case = _case("heavy_ball", _heavy_ball, hyperparams={"learning_rate": 0.1, "momentum": 0.5})
    for check in CHECKS.values():
        check(case)


def test_inject_check_compares_against_the_plain_trajectory():
    # A transform that is correct under inject but whose plain path reads its hyperparameter
    # differently (learning rate squared when it arrives as a Python float) must fail.
    def inconsistent(learning_rate):
        lr = learning_rate**2 if isinstance(learning_rate, float) else learning_rate
        return optax.sgd(lr)

    case = _case("inconsistent", inconsistent, jaxlab=False)
    with pytest.raises(AssertionError, match="trajectory differs"):
        check_inject_hyperparams(case)


@pytest.mark.parametrize("variant", ["empty_init", "dict_init", "growing_buffer", "count_dtype"])
def test_state_check_catches_structure_change(variant):
    case = _case(variant, _structure_changing(variant))
    with pytest.raises(AssertionError, match="state"):
        check_state_structure(case)


@pytest.mark.parametrize("variant", ["empty_init", "dict_init", "count_dtype"])
def test_no_retrace_check_catches_structure_change(variant):
    case = _case(variant, _structure_changing(variant))
    with pytest.raises(AssertionError, match="traced 2 times"):
        check_no_retrace(case)


def test_multi_steps_check_catches_structure_change():
    case = _case("empty_init", _structure_changing("empty_init"))
    with pytest.raises(AssertionError, match="MultiSteps"):
        check_multi_steps(case)


def test_no_retrace_check_catches_weak_type_drift():
    case = _case("weak_drift", _weak_type_drift)
    with pytest.raises(AssertionError, match=r"grad_sum.*weak"):
        check_no_retrace(case)
    # Dtype and shape are unchanged, so only the retrace check sees this defect.
    check_state_structure(case)


@pytest.mark.parametrize("jaxlab", [False, True])
def test_dtype_check_catches_visible_promotion(jaxlab):
    case = _case("f32_constant", _promoting_factory("f32_constant"), jaxlab=jaxlab)
    with pytest.raises(AssertionError, match="bfloat16" if not jaxlab else "strict"):
        check_dtype(case)


def test_strict_wrapper_catches_promotion_hidden_by_a_cast():
    # bf16 -> f32 -> bf16: the dtypes coming out are right, so only strict promotion sees it.
    factory = _promoting_factory("f32_cast_back")
    check_dtype(_case("cast_back_reference", factory, jaxlab=False))
    with pytest.raises(AssertionError, match="implicit dtype promotion"):
        check_dtype(_case("cast_back", factory, jaxlab=True))


@pytest.mark.parametrize("jaxlab", [False, True])
def test_dtype_check_catches_float64_promotion(x64, jaxlab):
    case = _case("np_float64", _promoting_factory("np_float64"), jaxlab=jaxlab)
    with pytest.raises(AssertionError, match="float64" if not jaxlab else "strict"):
        check_dtype(case)


def test_eval_shape_check_catches_value_dependent_init():
    with pytest.raises(AssertionError, match="eval_shape"):
        check_eval_shape_init(_case("needs_values", _init_needs_values))


def test_vmap_shard_map_check_catches_trace_dependent_update():
    with pytest.raises(AssertionError, match="shard_map != under vmap"):
        check_vmap_shard_map(_case("trace_state", _trace_time_state))


def test_quadratic_check_catches_no_progress():
    case = _case("tiny_sgd", optax.sgd, hyperparams={"learning_rate": 1e-4}, jaxlab=False)
    with pytest.raises(AssertionError, match="quadratic_tol"):
        check_quadratic(case)


def test_distributed_case_gets_axis_name_only_where_workers_exist():
    case = _case("pmean_sgd", _pmean_sgd, distributed=True)
    _AXIS_NAMES_SEEN.clear()
    check_dtype(case)
    assert _AXIS_NAMES_SEEN and set(_AXIS_NAMES_SEEN) == {None}
    _AXIS_NAMES_SEEN.clear()
    check_vmap_shard_map(case)
    check_quadratic(case)
    assert _AXIS_NAMES_SEEN and set(_AXIS_NAMES_SEEN) == {AXIS_NAME}
    # The collective really runs: after one step every worker holds the same params.
    tx = make_transform(case, axis_name=AXIS_NAME)
    grads = jnp.arange(8.0, dtype=jnp.float32)[:, None] * jnp.ones((8, 3), jnp.float32)

    def step(g):
        return tx.update(g, tx.init(g), g)[0]

    out = jax.vmap(step, axis_name=AXIS_NAME)(grads)
    np.testing.assert_allclose(out, jnp.full((8, 3), -0.1 * 3.5, jnp.float32), rtol=1e-6)


# ----------------------------------------------------------------------------------------------
# The registry.


def test_run_check_skips_listed_checks_with_their_reason():
    case = _case("skips", optax.sgd, jaxlab=False, skip={"quadratic"}, notes="not a descent")
    with pytest.raises(pytest.skip.Exception, match="not a descent"):
        run_check(case, "quadratic")


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"skip": {"convergence"}}, ValueError),  # not a check name
        ({"skip": {"quadratic"}}, ValueError),  # no reason in notes
        ({"hyperparams": {"learning_rate": "0.1"}}, TypeError),
        ({"hyperparams": {"nesterov": True}}, TypeError),
        ({"static": {"learning_rate": 0.1}}, ValueError),  # in both
        ({"static": {"axis_name": "w"}}, ValueError),
        ({"quadratic_steps": 0}, ValueError),
        ({"quadratic_tol": 1.5}, ValueError),
    ],
)
def test_transform_case_rejects_bad_fields(kwargs, error):
    with pytest.raises(error):
        _case("bad", optax.sgd, **kwargs)


def test_transform_case_is_frozen():
    case = REFERENCE_CASES[0]
    with pytest.raises(TypeError):
        case.hyperparams["learning_rate"] = 1.0  # type: ignore[index]
