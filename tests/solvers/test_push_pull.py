"""Push-Pull and FAB (jaxlab.solvers): convergence against closed forms, the three agent paths
(stacked/vmap, shard_map dense and sparse, two processes), and bad inputs.

The solver battery (tests/batteries.py) also runs run-vs-loop, unrolled, optimality and implicit
gradient checks on both solvers.
"""

from __future__ import annotations

import dataclasses
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.distributed import (
    directed_ring,
    exponential_graph,
    launch,
    pull_push_weights,
    run_pmapped,
    run_sharded,
    run_vmapped,
    sample_graph_sequence,
    time_varying_digraph,
    worker_mesh,
)
from jaxlab.solvers import FAB, FABParams, PushPull
from tests.distributed import _fab_workers as workers

N = 8
STEPS = 3000


def _quadratic():
    """Reference check 2: φ_i(x) = a_i ||x - b_i||² / 2, a_i in [1, 3], x in R²."""
    a, b = workers.quadratic_data(N)
    return jnp.asarray(a), jnp.asarray(b), np.sum(a[:, None] * b, axis=0) / np.sum(a)


@functools.cache
def _push_pull_trajectory(tracking: bool):
    """Jitted: stepsize -> per-step (max_i ||x_i - x*||, tracker invariant gap), final params."""

    def trajectory(stepsize, a, b, x_star):
        solver = PushPull(
            grad_fn=lambda x, a_i, b_i: a_i * (x - b_i),
            graph_fn=lambda key, k: time_varying_digraph(key, N),
            stepsize=stepsize,
            tracking=tracking,
            maxiter=STEPS,
            tol=0.0,
        )
        x0 = jnp.zeros((N, 2))
        state = solver.init_state(x0, a, b, rng_key=jax.random.key(0))

        def body(carry, _):
            params, state = solver.update(*carry, a, b)
            distance = jnp.max(jnp.linalg.norm(params - x_star[None], axis=1))
            grads = a[:, None] * (params - b)
            gap = jnp.max(jnp.abs(jnp.sum(state.tracker, axis=0) - jnp.sum(grads, axis=0)))
            return (params, state), (distance, gap)

        (params, _), (distance, gap) = jax.lax.scan(body, (x0, state), None, STEPS)
        return params, distance, gap

    return jax.jit(trajectory)


@pytest.mark.parametrize("stepsize", [0.05, 0.2])
def test_push_pull_converges_linearly_where_plain_decentralised_gd_stays_biased(x64, stepsize):
    a, b, x_star = _quadratic()
    params, distance, gap = _push_pull_trajectory(True)(stepsize, a, b, jnp.asarray(x_star))
    distance, gap = np.asarray(distance), np.asarray(gap)
    # Reference check 2: every agent at the centralised optimum Σ a_i b_i / Σ a_i.
    np.testing.assert_allclose(np.asarray(params), np.tile(x_star, (N, 1)), rtol=0, atol=1e-13)
    # Linear rate: the distance falls by a constant factor per block of steps until it reaches
    # float64 round-off (measured: a factor 7-8 per 20 steps at α = 0.05, 10²+ at α = 0.2).
    block = 20
    marks = distance[block - 1 :: block]
    live = marks[marks > 1e-13]
    assert len(live) >= 5, marks
    assert np.all(live[1:] <= 0.5 * live[:-1]), marks
    # The tracker keeps Σ_i y_i = Σ_i ∇φ_i(x_i) at every step.
    assert gap.max() <= 5e-14
    # Plain decentralised gradient descent on the same graphs stays away from x*.
    _, biased, _ = _push_pull_trajectory(False)(stepsize, a, b, jnp.asarray(x_star))
    biased = np.asarray(biased)
    assert biased[-1] >= 1e-2 and biased[-1] >= 0.5 * biased[STEPS // 2], biased[-1]


def test_random_digraphs_are_unbalanced_so_push_pull_is_needed(x64):
    graphs = sample_graph_sequence(lambda k, s: time_varying_digraph(k, N), jax.random.key(0), 20)
    column_sums = [np.asarray(pull_push_weights(g)[0]).sum(axis=0) for g in graphs]
    assert all(np.abs(s - 1).max() > 1e-2 for s in column_sums)  # A_k never doubly stochastic


@functools.cache
def _fab_toy_run():
    def run(penalty, c, e):
        solver = FAB(
            upper_grad_fn=lambda x, y, c_i, e_i: (x, y - c_i),
            lower_grad_fn=lambda x, y, c_i, e_i: (x + e_i - y, y - x - e_i),
            graph_fn=lambda key, k: time_varying_digraph(key, N),
            penalty=penalty,
            upper_stepsize=0.1,
            lower_stepsize=0.3,
            maxiter=5000,
            tol=0.0,
            jit=False,
            implicit_diff=False,
        )
        zeros = jnp.zeros(N)
        return solver.run(FABParams(zeros, zeros, zeros), c, e, rng_key=jax.random.key(1))

    return jax.jit(run)


@pytest.mark.parametrize("penalty", [10.0, 100.0])
def test_fab_reaches_the_closed_form_penalty_solution(x64, penalty):
    # Reference check 3: f_i = (y - c_i)²/2 + x²/2, g_i = (y - x - e_i)²/2, mean c = 1,
    # mean e = 0: x_λ = λ/(1 + 2λ), y_λ = 1 - x_λ, z = y*(x_λ) = x_λ.
    c, e = workers.toy_bilevel_data(N)
    out = _fab_toy_run()(penalty, jnp.asarray(c), jnp.asarray(e))
    x_lambda = penalty / (1 + 2 * penalty)
    np.testing.assert_allclose(np.asarray(out.params.x), x_lambda, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(out.params.y), 1 - x_lambda, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(out.params.z), x_lambda, rtol=0, atol=1e-12)
    # The penalty bias against the bilevel solution x* = 1/2 is the closed form 1/(2(1 + 2λ)).
    assert 0.5 - float(out.params.x.mean()) == pytest.approx(1 / (2 * (1 + 2 * penalty)), 1e-9)


# --- ridge tuning with a closed-form bilevel solution ------------------------------------------


def _ridge_problem(num_agents=4, rows=12, dim=3, noise=0.02):
    """Per-feature ridge tuning whose bilevel solution is interior and known in closed form.

    g_i = ||A_i y - b_i||²/(2m) + Σ_j e^{x_j} y_j²/2, f_i = ||V_i y - w_i||²/(2m). With pooled
    H = mean A_iᵀA_i/m, h = mean A_iᵀb_i/m, G = mean V_iᵀV_i/m, q = mean V_iᵀw_i/m, the upper level
    F(x) = f(y*(x)) is minimised where y*(x) = u = G⁻¹q (F >= min f), i.e. at
    e^{x_j} = (h - Hu)_j / u_j when that is positive: then y = z = u, x = x* also solves the
    penalty problem for every λ (its x-equation is λ e^x (y² - z²)/2 = 0).
    """
    rng = np.random.default_rng(2)
    truth = np.array([1.5, -1.0, 0.5])
    A = rng.normal(size=(num_agents, rows, dim)) * np.array([1.0, 1.3, 0.8])
    b = A @ truth + 0.5 * rng.normal(size=(num_agents, rows))
    V = rng.normal(size=(num_agents, rows, dim))
    shrunk = truth * np.array([0.7, 0.8, 0.6])  # validation prefers shrinkage
    w = V @ shrunk + noise * rng.normal(size=(num_agents, rows))
    H = np.einsum("irj,irk->jk", A, A) / (num_agents * rows)
    h = np.einsum("irj,ir->j", A, b) / (num_agents * rows)
    G = np.einsum("irj,irk->jk", V, V) / (num_agents * rows)
    q = np.einsum("irj,ir->j", V, w) / (num_agents * rows)
    u = np.linalg.solve(G, q)
    ratio = (h - H @ u) / u
    assert np.all(ratio > 0), ratio  # the designed problem has an interior solution
    return (A, b, V, w), np.log(ratio), u, (H, h)


def _ridge_grads(rows):
    def upper(x, y, A_i, b_i, V_i, w_i):
        return jnp.zeros_like(x), V_i.T @ (V_i @ y - w_i) / rows

    def lower(x, y, A_i, b_i, V_i, w_i):
        return 0.5 * jnp.exp(x) * y**2, A_i.T @ (A_i @ y - b_i) / rows + jnp.exp(x) * y

    return upper, lower


def test_fab_ridge_tuning_reaches_the_closed_form_bilevel_solution(x64):
    data, x_star, u, (H, h) = _ridge_problem()
    upper, lower = _ridge_grads(12)
    num_agents = 4
    solver = FAB(
        upper_grad_fn=upper,
        lower_grad_fn=lower,
        graph_fn=lambda key, k: time_varying_digraph(key, num_agents),
        penalty=10.0,
        upper_stepsize=0.5,
        lower_stepsize=0.2,
        maxiter=6000,
        tol=0.0,
        implicit_diff=False,
    )
    init = FABParams(
        jnp.zeros((num_agents, 3)), jnp.zeros((num_agents, 3)), jnp.zeros((num_agents, 3))
    )
    out = solver.run(init, *map(jnp.asarray, data), rng_key=jax.random.key(2))
    x_bar = np.asarray(out.params.x).mean(axis=0)
    np.testing.assert_allclose(np.asarray(out.params.x), np.tile(x_star, (4, 1)), atol=1e-6)
    np.testing.assert_allclose(np.asarray(out.params.y), np.tile(u, (4, 1)), atol=1e-7)
    # Closed-form hypergradient at FAB's x̄: ∇F = -e^x ⊙ y* ⊙ (H + diag e^x)⁻¹ ∇f(y*) ≈ 0.
    lam = np.exp(x_bar)
    y_opt = np.linalg.solve(H + np.diag(lam), h)
    assert np.abs(y_opt - u).max() <= 1e-6
    assert float(out.state.consensus_error) <= 1e-8


# --- three agent paths agree -------------------------------------------------------------------


def _stacked_twin(solver):
    """The stacked (matrix product) version of a per-agent solver: same graphs and weights."""
    return dataclasses.replace(solver, axis_name=None, mixing="dense", shifts=())


def _paths(kind: str, mixing: str):
    """(stacked reference outputs, per-agent function, stacked args) for one solver kind."""
    build = workers.push_pull if kind == "push_pull" else workers.fab
    per_agent = build(N, workers.AXIS, mixing)
    stacked = _stacked_twin(per_agent)
    if kind == "push_pull":
        a, b = workers.quadratic_data(N)
        args = (jnp.zeros((N, 2)), jnp.asarray(a), jnp.asarray(b))
        reference = stacked.run(*args, rng_key=jax.random.key(3))
        expected = (reference.params, reference.state.tracker, reference.state.error)
        return expected, workers.run_push_pull_per_agent(per_agent), args
    c, e = workers.toy_bilevel_data(N)
    args = (jnp.zeros(N), jnp.asarray(c), jnp.asarray(e))
    start = FABParams(args[0], args[0], args[0])
    reference = stacked.run(start, *args[1:], rng_key=jax.random.key(4))
    expected = (tuple(reference.params), reference.state.error)
    return expected, workers.run_fab_per_agent(per_agent), args


@pytest.mark.parametrize("kind", ["push_pull", "fab"])
@pytest.mark.parametrize("mixing", ["dense", "sparse"])
def test_stacked_vmap_pmap_and_shard_map_paths_agree(x64, kind, mixing):
    expected, fn, args = _paths(kind, mixing)
    vmapped = run_vmapped(fn, workers.AXIS, *args)
    pmapped = run_pmapped(fn, workers.AXIS, *args)
    sharded = run_sharded(fn, worker_mesh(N, axis_name=workers.AXIS), workers.AXIS, *args)
    # A per-agent scalar (the error) comes back once per agent: every agent agrees on it.
    for got in (vmapped, pmapped, sharded):
        for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(expected), strict=True):
            w = np.broadcast_to(np.asarray(w), np.shape(g))
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-12, atol=1e-13)


def test_every_agent_draws_the_same_graph_from_the_shared_key():
    solver = workers.push_pull(N, workers.AXIS)
    key = jax.random.key(9)

    def per_agent(dummy):
        pull, push = solver._matrices(key, jnp.asarray(5), N)
        return jax.lax.all_gather(pull, workers.AXIS), jax.lax.all_gather(push, workers.AXIS)

    pulls, pushes = run_sharded(
        per_agent, worker_mesh(N, axis_name=workers.AXIS), workers.AXIS, jnp.zeros(N)
    )
    expected = pull_push_weights(time_varying_digraph(jax.random.fold_in(key, 5), N))
    # Agent i's gathered copy holds every agent's matrices: all equal the shared draw.
    for got, want in zip((pulls, pushes), expected, strict=True):
        got = np.asarray(got).reshape(N * N, N, N)
        np.testing.assert_array_equal(got, np.broadcast_to(np.asarray(want), got.shape))


def test_two_processes_agree_with_the_single_device_run():
    # FAB runs every mixing path Push-Pull has (pull and push, three blocks); sparse mixing over
    # 2 processes x 2 devices sends ppermute messages across the process boundary.
    start = time.monotonic()
    results = launch(
        workers.two_process_worker,
        2,
        args=("sparse", ("fab",)),
        timeout=90.0,
        local_device_count=2,
        jax_config={"jax_enable_x64": True, "jax_numpy_rank_promotion": "raise"},
    )
    elapsed = time.monotonic() - start
    n = 4
    with jax.enable_x64(True):
        c, e = workers.toy_bilevel_data(n)
        zeros = jnp.zeros(n)
        reference = _stacked_twin(workers.fab(n, workers.AXIS, "sparse")).run(
            FABParams(zeros, zeros, zeros),
            jnp.asarray(c),
            jnp.asarray(e),
            rng_key=jax.random.key(4),
        )
    for index, expected in enumerate(reference.params):
        got = np.concatenate([r["fab"][0][index] for r in results])
        np.testing.assert_allclose(got, np.asarray(expected), rtol=1e-12, atol=1e-13)
    errors = np.concatenate([r["fab"][1] for r in results])
    np.testing.assert_allclose(errors, float(reference.state.error), rtol=1e-12, atol=1e-14)
    assert elapsed < 60.0  # the budget is 30 s on an idle machine; shared CI is slower


# --- bad inputs ---------------------------------------------------------------------------------


def _grad(x, *args):
    return x


def _ring(key, k):
    return directed_ring(4)


def _bad_weights(adjacency):
    pull, push = pull_push_weights(adjacency)
    return push, pull  # swapped: the pull matrix must be row-stochastic


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"stepsize": 0.0}, ValueError, r"stepsize must be finite and > 0"),
        ({"stepsize": -0.1}, ValueError, r"stepsize must be finite and > 0"),
        ({"stepsize": jnp.array(-0.1)}, ValueError, r"stepsize must be finite and > 0"),
        ({"stepsize": "0.1"}, TypeError, r"stepsize must be a real number"),
        ({"grad_fn": None}, TypeError, r"grad_fn must be callable"),
        ({"graph_fn": None}, TypeError, r"graph_fn must be callable"),
        ({"graph_fn": lambda key, k: jnp.ones((4, 4))}, ValueError, r"boolean"),
        ({"graph_fn": lambda key, k: jnp.zeros((4, 4), bool)}, ValueError, r"self-loop"),
        (
            {
                "weights_fn": _bad_weights,
                "graph_fn": lambda key, k: directed_ring(4).at[0, 2].set(True),
            },
            ValueError,
            r"pull matrix .* not row-stochastic",
        ),
        ({"mixing": "ring"}, ValueError, r"mixing must be one of"),
        ({"mixing": "sparse"}, ValueError, r"mixing='sparse' exchanges messages"),
        ({"mixing": "sparse", "axis_name": "a"}, ValueError, r"needs shifts"),
        (
            {"mixing": "sparse", "axis_name": "a", "shifts": (2,)},
            ValueError,
            r"cannot carry the edges of hops \[1\]",
        ),
        (
            {"mixing": "sparse", "axis_name": "a", "shifts": (4,)},
            ValueError,
            r"shifts must lie in \[1, 3\]",
        ),
        (
            {"graph_fn": lambda key, k: exponential_graph(8, step=k), "connectivity_window": 1},
            ValueError,
            r"not jointly strongly connected over window=1",
        ),
        ({"connectivity_window": 0}, ValueError, r"connectivity_window must be an int >= 1"),
        ({"maxiter": 0}, ValueError, r"maxiter must be an int >= 1"),
    ],
)
def test_push_pull_bad_inputs_raise(kwargs, error, match):
    options = {"grad_fn": _grad, "graph_fn": _ring, "stepsize": 0.1, **kwargs}
    with pytest.raises(error, match=match):
        PushPull(**options)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"penalty": 0.0}, r"penalty must be finite and > 0"),
        ({"penalty": -1.0}, r"penalty must be finite and > 0"),
        ({"penalty": np.float64("nan")}, r"penalty must be finite and > 0"),
        ({"upper_stepsize": 0.0}, r"upper_stepsize must be finite and > 0"),
        ({"lower_stepsize": -0.2}, r"lower_stepsize must be finite and > 0"),
        ({"penalty_power": -0.5}, r"penalty_power must be finite and >= 0"),
        ({"inner_steps": 0}, r"inner_steps must be an int >= 1"),
    ],
)
def test_fab_bad_inputs_raise(kwargs, match):
    options = {
        "upper_grad_fn": lambda x, y: (x, y),
        "lower_grad_fn": lambda x, y: (x, y),
        "graph_fn": _ring,
        **kwargs,
    }
    with pytest.raises(ValueError, match=match):
        FAB(**options)


def test_graph_size_must_match_the_number_of_agents(x64):
    solver = PushPull(grad_fn=_grad, graph_fn=_ring, stepsize=0.1)
    with pytest.raises(
        ValueError, match=r"graph_fn returns \(4, 4\) graphs but there are 3 agents"
    ):
        solver.run(jnp.zeros(3), rng_key=jax.random.key(0))


# --------------------------------------------------------------------------------------------
# Status and eager input checks (issue 14).


def test_push_pull_status_converged_maxiter_and_nonfinite(x64):
    from jaxlab.solvers import SolverStatus

    b = jnp.array([0.0, 1.0, -1.0, 2.0])
    common = dict(graph_fn=_ring, stepsize=0.2, tol=1e-8)
    converged = PushPull(grad_fn=lambda x, b_i: x - b_i, maxiter=2000, **common).run(
        jnp.zeros(4), b, rng_key=jax.random.key(0)
    )
    assert int(converged.state.status) == SolverStatus.CONVERGED
    np.testing.assert_allclose(converged.params, jnp.mean(b), atol=1e-7)  # x* = mean(b)
    capped = PushPull(grad_fn=lambda x, b_i: x - b_i, maxiter=3, **common).run(
        jnp.zeros(4), b, rng_key=jax.random.key(0)
    )
    assert int(capped.state.status) == SolverStatus.MAXITER and int(capped.state.iter_num) == 3
    # φ_i = -exp(x), unbounded below: its gradient drives x to +inf, exp overflows, then NaN.
    blown = PushPull(grad_fn=lambda x, b_i: -jnp.exp(x), maxiter=2000, **common).run(
        jnp.full(4, 600.0), b, rng_key=jax.random.key(0)
    )
    assert int(blown.state.status) == SolverStatus.NONFINITE
    assert int(blown.state.iter_num) < 2000


def test_agent_axis_and_keys_are_checked_before_tracing(x64):
    solver = PushPull(grad_fn=lambda x, b_i: x - b_i, graph_fn=_ring, stepsize=0.1)
    with pytest.raises(ValueError, match=r"args\[0\] must carry the 4 agents"):
        solver.run(jnp.zeros(4), jnp.zeros(3), rng_key=jax.random.key(0))
    with pytest.raises(TypeError, match="rng_key must be a JAX PRNG key"):
        solver.run(jnp.zeros(4), jnp.zeros(4), rng_key=None)
    shifted = PushPull(grad_fn=lambda x: jnp.zeros(2), graph_fn=_ring, stepsize=0.1)
    with pytest.raises(ValueError, match=r"grad_fn\(x_i, \*args_i\) has shape \(4, 2\)"):
        shifted.run(jnp.zeros(4), rng_key=jax.random.key(0))
    named = PushPull(grad_fn=_grad, graph_fn=_ring, stepsize=0.1, axis_name="agents")
    with pytest.raises(ValueError, match="axis_name 'agents' is not bound"):
        named.init_state(jnp.zeros(()), rng_key=jax.random.key(0))
    fab = FAB(
        upper_grad_fn=lambda x, y: (x, y),
        lower_grad_fn=lambda x, y: (x - y, y - x),
        graph_fn=_ring,
    )
    with pytest.raises(TypeError, match="init_params must be FABParams"):
        fab.run(jnp.zeros(4), rng_key=jax.random.key(0))
    zeros = jnp.zeros(3)
    with pytest.raises(ValueError, match=r"graph_fn returns \(4, 4\) graphs but there are 3"):
        fab.run(FABParams(zeros, zeros, zeros), rng_key=jax.random.key(0))
