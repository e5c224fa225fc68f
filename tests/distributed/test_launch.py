"""Tests for ``jaxlab.distributed.launch``: real multi-process JAX runs over loopback gloo."""

import functools
import math
import multiprocessing
import time

import jax
import numpy as np
import pytest

from jaxlab.distributed import launch, run_vmapped
from tests.distributed import _workers


def _no_launched_children_left():
    return not [p for p in multiprocessing.active_children() if p.name.startswith("jaxlab-launch")]


def test_psum_across_two_processes_through_shard_map():
    results = launch(
        _workers.psum_of_process_ranks,
        2,
        timeout=90.0,
        jax_config={"jax_enable_x64": True, "jax_numpy_rank_promotion": "raise"},
    )
    assert [r["process_index"] for r in results] == [0, 1]  # results come back in process order
    for r in results:
        assert r["process_count"] == 2
        assert r["device_count"] == 2 and r["local_device_count"] == 1
        assert r["platform"] == "cpu"
        np.testing.assert_array_equal(r["psum"], np.array([1.0 + 2.0], np.float32))
        assert r["default_float"] == "float64"  # jax_config reached the child
        assert r["rank_promotion"] == "raise"
    assert _no_launched_children_left()


def test_sgd_pattern_across_processes_matches_vmap_on_one_device():
    # 2 processes x 2 CPU devices: 4 workers, each process holding two of them.
    results = launch(_workers.sgd_worker, 2, timeout=90.0, local_device_count=2)
    params, grads = _workers.worker_gradients(4)
    expected_params, expected_rank = run_vmapped(_workers.sgd_step, _workers.AXIS, params, grads)
    ranks = np.concatenate([r[1] for r in results])
    np.testing.assert_array_equal(ranks, np.arange(4))
    got = np.concatenate([r[0] for r in results])
    np.testing.assert_allclose(got, np.asarray(expected_params), rtol=1e-6, atol=1e-6)
    # Independent truth: heavy-ball SGD with the mean gradient g for 3 steps moves by
    # -lr * (1 + (1 + b) + (1 + b + b^2)) * g.
    mean_grad = grads.mean(axis=0, keepdims=True)
    lr, b = 0.1, 0.9
    closed_form = params - lr * (3 + 2 * b + b**2) * mean_grad
    np.testing.assert_allclose(got, closed_form, rtol=1e-5, atol=1e-6)


def test_documented_two_process_sgd_example_gives_its_documented_output():
    results = launch(_workers.documented_worker, 2, timeout=90.0)
    # launch's docstring shows [array([[0.85, 0.85, 0.85]]), ...]: 1 - 0.1 * mean(1, 2).
    assert len(results) == 2
    for r in results:
        assert r.shape == (1, 3) and r.dtype == np.float32
        np.testing.assert_allclose(r, np.full((1, 3), 1.0 - 0.1 * 1.5, np.float32), rtol=1e-6)


def test_child_exception_is_raised_with_process_id_and_traceback():
    start = time.monotonic()
    with pytest.raises(RuntimeError) as info:
        launch(_workers.raise_in_process_one, 2, timeout=60.0)
    message = str(info.value)
    assert "process 1 raised" in message
    assert "ValueError: boom from process 1" in message
    assert "Traceback" in message and "raise_in_process_one" in message
    assert time.monotonic() - start < 40.0
    assert _no_launched_children_left()


def test_child_that_exits_is_reported_quickly():
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"process 1 exited with code 3"):
        launch(_workers.exit_in_process_one, 2, timeout=60.0)
    assert time.monotonic() - start < 40.0  # well before the timeout: process 0 is not awaited
    assert _no_launched_children_left()


def test_hanging_child_times_out_and_is_killed():
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=r"process\(es\) \[0\] of 1 did not finish"):
        launch(_workers.sleep_forever, 1, timeout=1.0)
    assert 1.0 <= time.monotonic() - start < 1.0 + 10.0
    assert _no_launched_children_left()


def _local_function():
    return 1


@pytest.mark.parametrize(
    "fn, match",
    [
        (lambda: 1, "fn must be a picklable module-level function"),
        (functools.partial(lambda x: x, 1), "fn must be a picklable module-level function"),
        (3, "fn must be callable"),
    ],
)
def test_unpicklable_or_uncallable_fn_is_a_type_error(fn, match):
    with pytest.raises(TypeError, match=match):
        launch(fn, 1)


def test_function_from_interactive_main_is_a_type_error(monkeypatch):
    def interactive():
        return 1

    interactive.__module__ = "__main__"
    main = type(math)("__main__")  # a __main__ with no __file__, as in a REPL
    monkeypatch.setitem(__import__("sys").modules, "__main__", main)
    with pytest.raises(TypeError, match="interactive __main__"):
        launch(interactive, 1)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"num_processes": 0}, ValueError, r"num_processes must be an int >= 1, got 0"),
        ({"num_processes": -2}, ValueError, r"num_processes must be an int >= 1"),
        ({"num_processes": 1.5}, TypeError, r"num_processes must be a \(static\) int"),
        ({"num_processes": True}, TypeError, r"num_processes must be a \(static\) int"),
        ({"timeout": 0.0}, ValueError, r"timeout must be finite and > 0"),
        ({"timeout": -1}, ValueError, r"timeout must be finite and > 0"),
        ({"timeout": math.inf}, ValueError, r"timeout must be finite and > 0"),
        ({"timeout": math.nan}, ValueError, r"timeout must be finite and > 0"),
        ({"timeout": "10"}, TypeError, r"timeout must be a real number"),
        ({"local_device_count": 0}, ValueError, r"local_device_count must be an int >= 1"),
        ({"local_device_count": 2.0}, TypeError, r"local_device_count must be a \(static\) int"),
        ({"args": (lambda: 0,)}, TypeError, r"args must be picklable"),
        ({"args": "ab"}, TypeError, r"args must be a sequence"),
        ({"jax_config": {1: True}}, TypeError, r"jax_config keys"),
    ],
)
def test_bad_arguments_fail_before_any_process_starts(kwargs, error, match):
    call = {"num_processes": 1, **kwargs}
    num_processes = call.pop("num_processes")
    with pytest.raises(error, match=match):
        launch(_local_function, num_processes, **call)
    assert _no_launched_children_left()


def test_single_process_round_trip_returns_arguments_in_order():
    # A process count of one still goes through jax.distributed; results are unpickled intact.
    (result,) = launch(divmod, 1, args=(17, 5), timeout=60.0)
    assert result == (3, 2)
    assert jax.device_count() == 8  # the parent's own JAX setup is untouched
