"""Pipeline executors on 4 of the 8 simulated devices, and the discrete-event schedule model."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxlab.distributed import (
    gpipe_train,
    make_mesh,
    pipedream_2bw_train,
    pipeline_schedule,
    sequential_loss,
)
from jaxlab.optim import delayed

S, M, K, ROWS, D = 4, 8, 5, 2, 6


@pytest.fixture(scope="module")
def problem():
    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    params = {
        "w": jax.random.normal(k1, (S, D, D)) / np.sqrt(D),
        "b": 0.1 * jax.random.normal(k2, (S, D)),
    }
    inputs = jax.random.normal(k3, (K, M, ROWS, D))
    return params, inputs, jnp.sin(inputs)


def _tx():
    # Per-stage optimizers equal a global one only for per-leaf transforms: Adam with momentum.
    return optax.adam(0.05, b1=0.9)


def _minibatch_loss(params, inputs, targets):
    """Mean over micro-batches of the sequential model's loss (the executors' objective)."""
    return jnp.mean(jax.vmap(lambda x, y: sequential_loss(params, x, y))(inputs, targets))


def _sequential_trajectory(tx, params, inputs, targets, steps):
    """Plain one-device training: call t uses minibatch min(t, K-1) at the current params."""
    grad_fn = jax.jit(jax.grad(_minibatch_loss))
    state, trajectory = tx.init(params), []
    for t in range(steps):
        batch = min(t, K - 1)
        updates, state = tx.update(grad_fn(params, inputs[batch], targets[batch]), state, params)
        params = optax.apply_updates(params, updates)
        trajectory.append(params)
    return trajectory


@pytest.fixture(scope="module")
def mesh():
    return make_mesh((S,), ("stage",))


@pytest.fixture(scope="module")
def runs(problem, mesh):
    params, inputs, targets = problem
    return {
        "2bw": pipedream_2bw_train(params, _tx(), inputs, targets, mesh=mesh),
        "gpipe": gpipe_train(params, _tx(), inputs, targets, mesh=mesh),
        "sync": _sequential_trajectory(_tx(), params, inputs, targets, K),
        "delayed": _sequential_trajectory(delayed(_tx(), delay_steps=1), *problem, K + 1),
    }


def _max_gap(trajectory, reference, shift=0):
    return max(
        float(jnp.max(jnp.abs(trajectory[name][t] - reference[t + shift][name])))
        for t in range(K)
        for name in ("w", "b")
    )


def test_2bw_equals_one_step_delay_simulation(runs):
    """x_{t+1} = x_t + U(∇f(x_{t-1}; B_t)): the simulator, one call behind (its fill step)."""
    result = runs["2bw"]
    assert result.trajectory["w"].shape == (K, S, D, D)
    assert _max_gap(result.trajectory, runs["delayed"], shift=1) < 1e-5
    # The delay is real: the synchronous trajectory is far away.
    assert _max_gap(result.trajectory, runs["sync"]) > 1e-2
    np.testing.assert_array_equal(np.asarray(result.params["w"]), result.trajectory["w"][-1])


def test_gpipe_equals_plain_training(runs):
    assert _max_gap(runs["gpipe"].trajectory, runs["sync"]) < 1e-5
    assert _max_gap(runs["gpipe"].trajectory, runs["delayed"], shift=1) > 1e-2


@pytest.mark.parametrize("executor", [pipedream_2bw_train, gpipe_train], ids=["2bw", "gpipe"])
def test_pmap_mapping_equals_shard_map(problem, mesh, runs, executor):
    by_pmap = executor(*problem[:1], _tx(), *problem[1:], mesh=mesh, mapping="pmap")
    reference = runs["2bw" if executor is pipedream_2bw_train else "gpipe"]
    for name in ("w", "b"):
        np.testing.assert_allclose(
            by_pmap.trajectory[name], reference.trajectory[name], rtol=1e-6, atol=1e-7
        )
        np.testing.assert_allclose(
            by_pmap.params[name], reference.params[name], rtol=1e-6, atol=1e-7
        )
    np.testing.assert_array_equal(by_pmap.busy_slots, reference.busy_slots)


def test_pmap_mapping_needs_a_one_dimensional_mesh(problem):
    two_d = make_mesh((S, 2), ("stage", "data"))
    with pytest.raises(ValueError, match="1-D mesh"):
        gpipe_train(*problem[:1], _tx(), *problem[1:], mesh=two_d, mapping="pmap")
    with pytest.raises(ValueError, match="mapping"):
        gpipe_train(*problem[:1], _tx(), *problem[1:], mesh=two_d, mapping="vmap")


def test_idle_slots(runs):
    two_bw, gpipe = runs["2bw"], runs["gpipe"]
    # 2BW: every slot busy in steady state; in all, 2S - 1 fill/drain ticks per stage.
    assert two_bw.idle_fraction(steady_state=True) == 0.0
    first, last = two_bw.steady_ticks
    assert np.all(two_bw.busy_slots[first:last] == 2)
    assert two_bw.idle_fraction() == pytest.approx((2 * S - 1) / (K * M + 2 * S - 1))
    # GPipe: (S - 1)/(M + S - 1) of the slots idle, on every stage and every minibatch.
    assert gpipe.busy_slots.shape == (2 * K * (M + S - 1), S)
    assert gpipe.idle_fraction() == pytest.approx((S - 1) / (M + S - 1))
    per_stage_busy = gpipe.busy_slots.sum(axis=0)
    np.testing.assert_array_equal(per_stage_busy, np.full(S, 2 * K * M))


def test_bad_input(problem, mesh):
    params, inputs, targets = problem
    with pytest.raises(ValueError, match="num_microbatches"):
        pipedream_2bw_train(params, _tx(), inputs[:, :5], targets[:, :5], mesh=mesh)
    with pytest.raises(ValueError, match="stages"):
        gpipe_train(jax.tree.map(lambda x: x[:2], params), _tx(), inputs, targets, mesh=mesh)
    with pytest.raises(ValueError, match="inputs and targets"):
        gpipe_train(params, _tx(), inputs[0], targets[0], mesh=mesh)
    with pytest.raises(TypeError, match="mesh"):
        gpipe_train(params, _tx(), inputs, targets, mesh="stage")


# --------------------------------------------------------------------------------------------
# pipeline_schedule: the note's check 3 and the table's closed forms.


@pytest.mark.parametrize(
    ("kind", "p", "m", "k", "bubble"),
    [
        ("gpipe", 4, 8, 1, 3 / 11),
        ("1f1b", 4, 8, 1, 3 / 11),
        ("gpipe", 8, 32, 1, 7 / 39),
        ("1f1b", 8, 32, 2, 7 / 39),
        ("2bw", 4, 8, 100, 3 / 803),
        ("2bw", 8, 32, 3, 7 / (96 + 7)),
    ],
)
def test_schedule_bubble(kind, p, m, k, bubble):
    schedule = pipeline_schedule(kind, p, m, num_minibatches=k)
    assert schedule.bubble_fraction == pytest.approx(bubble, rel=1e-9)
    per_minibatch = m + p - 1 if kind != "2bw" else None
    expected_makespan = k * per_minibatch * 3.0 if per_minibatch else (k * m + p - 1) * 3.0
    assert schedule.makespan == pytest.approx(expected_makespan)
    assert len(schedule.events) == 2 * p * m * k


def test_schedule_memory_versions_staleness():
    gpipe = pipeline_schedule("gpipe", 4, 8)
    flush = pipeline_schedule("1f1b", 4, 8)
    two_bw = pipeline_schedule("2bw", 4, 8, num_minibatches=3)
    assert gpipe.peak_activations == (8, 8, 8, 8)
    assert flush.peak_activations == two_bw.peak_activations == (4, 3, 2, 1)  # p - s
    assert (gpipe.weight_versions, flush.weight_versions, two_bw.weight_versions) == (1, 1, 2)
    assert two_bw.staleness == (1, 1, 1, 1) and gpipe.staleness == (0, 0, 0, 0)


def test_schedule_non_uniform_times_respect_dependencies():
    schedule = pipeline_schedule(
        "2bw", 3, 4, num_minibatches=2, forward_time=1.0, backward_time=3.0
    )
    end = {(s, t, m, op): e for s, t, m, op, _, e in schedule.events}
    for s, t, m, op, start, _ in schedule.events:
        if op == "F" and s > 0:
            assert start >= end[(s - 1, t, m, "F")]
        if op == "B":
            assert start >= end[(s + 1, t, m, "B")] if s < 2 else start >= end[(s, t, m, "F")]
    busy = sum(e - b for *_, b, e in schedule.events)
    assert schedule.bubble_fraction == pytest.approx(1 - busy / (3 * schedule.makespan))
    with pytest.raises(ValueError, match="kind"):
        pipeline_schedule("pipedream-flush", 4, 8)
    with pytest.raises(ValueError, match="num_stages"):
        pipeline_schedule("gpipe", 0, 8)
    with pytest.raises(ValueError, match="forward_time"):
        pipeline_schedule("gpipe", 2, 8, forward_time=0.0)
