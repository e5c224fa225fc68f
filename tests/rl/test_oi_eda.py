"""The order-invariant EDA, its baselines and the black-box benchmarks, against independent truths:
hand-computed values and brute force for the benchmarks, enumeration for the any-order
likelihood, exact Markov-chain run times for the (1+1)-EA, the textbook UMDA/PBIL updates."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from jaxlab import rl as R
from tests.conftest import EXECUTION_BOUND

ALL_POINTS_4 = np.array(list(itertools.product((0, 1), repeat=4)), np.int32)


def _all_points(n: int) -> jnp.ndarray:
    return jnp.asarray(np.array(list(itertools.product((0, 1), repeat=n)), np.int32))


# --------------------------------------------------------------------------------------------
# Benchmarks.


def test_benchmarks_match_the_notes_hand_values():
    x = jnp.array([1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 1, 0, 1, 1, 1, 0])
    assert float(R.onemax(x)) == 9.0
    assert float(R.leading_ones(x)) == 4.0
    assert float(R.deceptive_trap(x, block_size=4)) == 8.0  # 4 + 3 + 1 + 0
    assert float(R.leading_ones(jnp.array([1, 1, 0, 1]))) == 2.0
    n = 16
    assert float(R.deceptive_trap(jnp.ones(n))) == n  # optimum
    assert float(R.deceptive_trap(jnp.zeros(n))) == n * 3 / 4  # the deceptive attractor
    cycle = np.zeros((4, 4), np.float32)
    for u in range(4):
        cycle[u, (u + 1) % 4] = cycle[(u + 1) % 4, u] = 1.0
    maxcut = R.MaxCut(jnp.asarray(cycle))
    assert float(maxcut(jnp.array([0, 1, 0, 1]))) == 4.0
    assert float(maxcut(jnp.array([0, 0, 1, 1]))) == 2.0


def test_nk_landscape_equals_a_brute_force_loop_over_every_point():
    n, k = 8, 2
    landscape = R.nk_landscape(jax.random.key(3), n, k)
    neighbours, tables = np.asarray(landscape.neighbours), np.asarray(landscape.tables)
    assert all(neighbours[i, 0] == i and len(set(neighbours[i])) == k + 1 for i in range(n))
    points = _all_points(n)
    values = np.asarray(landscape(points))
    for x, value in zip(np.asarray(points), values, strict=True):
        total = 0.0
        for i in range(n):
            index = int("".join(str(x[j]) for j in neighbours[i]), 2)
            total += tables[i, index]
        assert value == pytest.approx(total / n, abs=1e-6)
    # The optimum by enumeration is a point where no single flip improves (a local optimum).
    best = np.asarray(points)[np.argmax(values)]
    flips = np.tile(best, (n, 1)) ^ np.eye(n, dtype=np.int32)
    assert np.all(np.asarray(landscape(jnp.asarray(flips))) <= values.max())


def test_maxcut_equals_edge_counts_and_the_complete_graph_optimum():
    n = 12
    problem = R.random_maxcut(jax.random.key(1), n, 0.3)
    adjacency = np.asarray(problem.adjacency)
    assert np.all(np.diag(adjacency) == 0) and np.all(adjacency == adjacency.T)
    edges = [(u, v) for u in range(n) for v in range(u + 1, n) if adjacency[u, v]]
    points = _all_points(n)
    values = np.asarray(problem(points))
    naive = [sum(x[u] != x[v] for u, v in edges) for x in np.asarray(points)]
    np.testing.assert_array_equal(values, naive)
    # Textbook: the max cut of the complete graph K_n is floor(n^2 / 4).
    for size in (5, 8):
        complete = R.MaxCut(jnp.ones((size, size)) - jnp.eye(size))
        assert float(jnp.max(complete(_all_points(size)))) == size * size // 4


def test_qubo_equals_the_quadratic_form():
    problem = R.random_qubo(jax.random.key(2), 6)
    points = np.asarray(_all_points(6), np.float64)
    expected = np.einsum("bi,ij,bj->b", points, np.asarray(problem.q, np.float64), points)
    np.testing.assert_allclose(np.asarray(problem(jnp.asarray(points))), expected, atol=1e-5)


# --------------------------------------------------------------------------------------------
# The any-order model.


def _random_logistic(key, n, scale=1.0):
    model = R.AnyOrderLogistic(n)
    kb, kw, kv = jax.random.split(key, 3)
    model.bias[...] = scale * jax.random.normal(kb, (n,))
    model.weights[...] = scale * jax.random.normal(kw, (n, n))
    model.revealed_weights[...] = scale * jax.random.normal(kv, (n, n))
    return model


def _models(n):
    mlp = R.AnyOrderMLP(n, hidden=(8,), rngs=nnx.Rngs(0))
    mlp.head.kernel[...] = jax.random.normal(jax.random.key(9), mlp.head.kernel[...].shape)
    return [_random_logistic(jax.random.key(4), n), mlp]


def test_zero_parameters_give_the_uniform_distribution_for_every_order():
    n = 5
    model = R.AnyOrderLogistic(n)
    orders = R.random_orders(jax.random.key(0), 32, n)
    x = jax.random.bernoulli(jax.random.key(1), 0.5, (32, n)).astype(jnp.int32)
    np.testing.assert_allclose(R.log_prob_any_order(model, x, orders), -n * np.log(2), rtol=1e-6)


@pytest.mark.parametrize("which", ["logistic", "mlp"])
def test_the_likelihood_sums_to_one_under_every_order(which):
    model = _models(4)[0 if which == "logistic" else 1]
    points = jnp.asarray(ALL_POINTS_4)
    for perm in itertools.permutations(range(4)):
        orders = jnp.tile(jnp.array(perm), (16, 1))
        total = float(jnp.sum(jnp.exp(R.log_prob_any_order(model, points, orders))))
        assert total == pytest.approx(1.0, abs=2e-5), perm


def test_without_interactions_the_likelihood_does_not_depend_on_the_order():
    model = R.AnyOrderLogistic(4)
    model.bias[...] = jnp.array([0.3, -1.0, 2.0, 0.5])
    points = jnp.asarray(ALL_POINTS_4)
    first = R.log_prob_any_order(model, points, jnp.tile(jnp.arange(4), (16, 1)))
    other = R.log_prob_any_order(model, points, R.random_orders(jax.random.key(0), 16, 4))
    np.testing.assert_allclose(first, other, atol=1e-6)
    # Independent bits: log p = Σ x b - softplus(b).
    b = np.array([0.3, -1.0, 2.0, 0.5])
    expected = ALL_POINTS_4 @ b - np.log1p(np.exp(b)).sum()
    np.testing.assert_allclose(first, expected, atol=1e-5)


@pytest.mark.parametrize("which", ["logistic", "mlp"])
def test_a_variable_never_sees_itself(which):
    n = 6
    model = _models(n)[0 if which == "logistic" else 1]
    orders = R.random_orders(jax.random.key(2), 8, n)
    x = jax.random.bernoulli(jax.random.key(3), 0.5, (8, n)).astype(jnp.float32)
    base = model.conditional_logits(x, orders)
    for i in range(n):
        flipped = x.at[:, i].set(1.0 - x[:, i])
        np.testing.assert_allclose(model.conditional_logits(flipped, orders)[:, i], base[:, i])


@pytest.mark.parametrize("which", ["logistic", "mlp"])
def test_samples_follow_the_likelihood(which):
    n, draws = 3, 40_000
    model = _models(n)[0 if which == "logistic" else 1]
    order = jnp.array([2, 0, 1])
    points = _all_points(n)
    exact = np.exp(np.asarray(R.log_prob_any_order(model, points, jnp.tile(order, (8, 1)))))
    x = R.sample_any_order(model, jax.random.key(5), jnp.tile(order, (draws, 1)))
    codes = np.asarray(x) @ np.array([4, 2, 1])
    freq = np.bincount(codes, minlength=8) / draws
    # Five binomial standard errors per cell.
    assert np.all(np.abs(freq - exact) <= 5 * np.sqrt(exact * (1 - exact) / draws) + 1e-3)


def test_order_masks_mark_the_variables_generated_before():
    masks = np.asarray(R.order_masks(jnp.array([[1, 3, 0, 2]])))[0]
    position = {v: k for k, v in enumerate([1, 3, 0, 2])}
    for i, j in itertools.product(range(4), repeat=2):
        assert masks[i, j] == float(position[j] < position[i])


# --------------------------------------------------------------------------------------------
# Baselines.


def _one_plus_one_hitting_times(objective, n, runs, steps):
    algorithm = R.one_plus_one_ea(objective, n)

    def one(key):
        init_key, run_key = jax.random.split(key)

        def body(state, k):
            state, info = algorithm.step(k, state)
            return state, (info.best_value, info.evaluations)

        state0 = algorithm.init(init_key)
        _, (best, counts) = jax.lax.scan(body, state0, jax.random.split(run_key, steps))
        hit = best >= n
        return jnp.where(state0.best_value >= n, 1, counts[jnp.argmax(hit)]), jnp.any(hit)

    run = jax.jit(jax.vmap(one), compiler_options=EXECUTION_BOUND)  # 500 runs x thousands of steps
    times, hit = run(jax.random.split(jax.random.key(0), runs))
    assert bool(jnp.all(hit))
    return float(jnp.mean(times))


def test_one_plus_one_ea_matches_the_exact_expected_run_times():
    # The note's exact Markov-chain values (initial evaluation counted), within 5% over 500 runs.
    assert _one_plus_one_hitting_times(R.onemax, 32, 500, 1500) == pytest.approx(247.49, rel=0.05)
    n = 32
    leading = (n * n / 2) * ((1 - 1 / n) ** (1 - n) - (1 - 1 / n))  # 873.96
    assert leading == pytest.approx(873.96, abs=0.01)
    assert _one_plus_one_hitting_times(R.leading_ones, n, 500, 3000) == pytest.approx(
        leading, rel=0.05
    )


def _binary_value(x):
    # Distinct values for distinct points: selection has no ties to break.
    return x.astype(jnp.float32) @ (2.0 ** jnp.arange(x.shape[-1]))


@pytest.mark.parametrize("method", ["umda", "pbil"])
def test_umda_and_pbil_follow_the_textbook_update(method):
    n, lam, mu, eta = 6, 20, 5, 0.3
    if method == "umda":
        algorithm = R.umda(_binary_value, n, population=lam, num_selected=mu)
    else:
        algorithm = R.pbil(_binary_value, n, population=lam, num_selected=mu, learning_rate=eta)
    state = algorithm.init(jax.random.key(0))
    for key in jax.random.split(jax.random.key(1), 4):
        p = np.asarray(state.search, np.float64)
        state, info = algorithm.step(key, state)
        points, values = np.asarray(info.points), np.asarray(info.values)
        np.testing.assert_array_equal(values, points @ (2.0 ** np.arange(n)))
        best = points[np.argsort(-values, kind="stable")[:mu]].mean(axis=0)
        target = best if method == "umda" else (1 - eta) * p + eta * best
        np.testing.assert_allclose(state.search, np.clip(target, 1 / n, 1 - 1 / n), atol=1e-6)
        assert float(state.best_value) == max(values.max(), float(info.best_value))


def test_genetic_algorithm_keeps_its_elite_and_counts_evaluations():
    n, lam = 10, 12
    algorithm = R.genetic_algorithm(_binary_value, n, population=lam)
    state = algorithm.init(jax.random.key(0))
    assert int(state.evaluations) == lam
    for key in jax.random.split(jax.random.key(1), 5):
        members, scores = state.search
        elite = np.asarray(members)[int(np.argmax(scores))]
        previous_best = float(state.best_value)
        state, info = algorithm.step(key, state)
        np.testing.assert_array_equal(state.search[0][0], elite)
        assert info.points.shape == (lam - 1, n)
        assert float(state.best_value) == max(previous_best, float(np.max(info.values)))
        assert float(_binary_value(state.best_x)) == float(state.best_value)
    assert int(state.evaluations) == lam + 5 * (lam - 1)


@pytest.mark.parametrize(
    "factory",
    [
        lambda: R.umda(R.onemax, 6, population=8, num_selected=4),
        lambda: R.pbil(R.onemax, 6, population=8),
        lambda: R.one_plus_one_ea(R.onemax, 6),
        lambda: R.genetic_algorithm(R.onemax, 6, population=8),
        lambda: R.oi_eda(R.onemax, 6, population=4),
    ],
)
def test_the_recorded_evaluation_counts_are_what_init_and_step_spend(factory):
    algorithm = factory()
    assert type(algorithm) is R.OptimizationAlgorithm and algorithm._fields == ("init", "step")
    init, step = algorithm  # the same (init, step) unpacking as grpo's
    state = init(jax.random.key(0))
    assert int(state.evaluations) == algorithm.initial_evaluations
    state, info = step(jax.random.key(1), state)
    spent = int(state.evaluations) - algorithm.initial_evaluations
    assert spent == algorithm.evaluations_per_step == info.points.shape[0]


# --------------------------------------------------------------------------------------------
# The EDA.


def test_the_eda_solves_onemax_64_in_10_of_10_seeds_within_20000_evaluations():
    algorithm = R.oi_eda(R.onemax, 64)
    steps = R.num_steps_for_budget(algorithm, 20_000)
    init_keys, run_keys = jnp.split(jax.random.split(jax.random.key(0), 20), 2)

    @jax.jit
    def run():
        # All 10 seeds step together until every one holds the optimum or the budget is spent.
        def cond(carry):
            t, states = carry
            return (t < steps) & jnp.any(states.best_value < 64)

        def body(carry):
            t, states = carry
            keys = jax.vmap(lambda k: jax.random.fold_in(k, t))(run_keys)
            return t + 1, jax.vmap(algorithm.step)(keys, states)[0]

        return jax.lax.while_loop(cond, body, (0, jax.vmap(algorithm.init)(init_keys)))

    t, states = run()
    np.testing.assert_array_equal(states.best_value, 64.0)
    assert 0 < int(t) <= steps
    np.testing.assert_array_equal(states.evaluations, 64 * int(t))
    assert np.all(np.asarray(states.evaluations) <= 20_000)


def _trajectory(objective, advantage, steps=6, key=0):
    algorithm = R.oi_eda(objective, 12, population=16, advantage=advantage)
    state = algorithm.init(jax.random.key(key))
    run = jax.jit(algorithm.step)
    points = []
    for k in jax.random.split(jax.random.key(key + 1), steps):
        state, info = run(k, state)
        points.append(np.asarray(info.points))
    return np.stack(points), state


def test_rank_advantages_make_runs_invariant_to_increasing_transforms():
    f = lambda x: R.onemax(x) + 0.1 * R.leading_ones(x)  # noqa: E731
    points, _ = _trajectory(f, "rank")
    transformed, _ = _trajectory(lambda x: jnp.exp(f(x)), "rank")
    np.testing.assert_array_equal(points, transformed)
    # z-scores are not invariant to exp (the trajectories part after the first update).
    zscored, _ = _trajectory(lambda x: jnp.exp(f(x)), "zscore")
    assert not np.array_equal(points, zscored)


def test_runs_are_reproducible_from_their_key():
    a, state_a = _trajectory(R.onemax, "zscore", steps=3)
    b, state_b = _trajectory(R.onemax, "zscore", steps=3)
    c, _ = _trajectory(R.onemax, "zscore", steps=3, key=7)
    np.testing.assert_array_equal(a, b)
    assert float(state_a.best_value) == float(state_b.best_value)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("mode", ["fixed", "sigma", "sigma_sigmap"])
def test_every_order_mode_learns_leading_ones(mode):
    result = R.maximize(R.leading_ones, 10, jax.random.key(0), 3_200, order_mode=mode,
                        population=32)  # fmt: skip
    assert float(result.best_value) == 10.0
    assert np.all(np.diff(np.asarray(result.best_values)) >= 0)
    assert int(result.evaluation_counts[-1]) == int(result.evaluations) <= 3_200


def test_the_mlp_model_trains_under_vmapped_initialisation():
    algorithm = R.oi_eda(R.onemax, 8, population=16, model="mlp", hidden=(16,),
                         optimizer=None)  # fmt: skip
    states = jax.jit(jax.vmap(algorithm.init))(jax.random.split(jax.random.key(0), 2))
    kernels = states.search.params["layers"][0]["kernel"][...]
    assert not np.allclose(kernels[0], kernels[1])  # initialised from each seed's key
    result = R.maximize(R.onemax, 8, jax.random.key(0), 1_600, model="mlp", hidden=(16,),
                        population=16)  # fmt: skip
    assert float(result.best_value) == 8.0


def test_non_finite_values_are_counted_never_selected_and_maximize_raises():
    def objective(x):
        value = R.onemax(x)
        return jnp.where(value == 5, jnp.nan, value)  # finite at all zeros and all ones

    for algorithm in (
        R.umda(objective, 8, population=16, num_selected=8),
        R.pbil(objective, 8, population=16),
        R.genetic_algorithm(objective, 8, population=16),
    ):
        start = algorithm.init(jax.random.key(0))
        state, info = algorithm.step(jax.random.key(1), start)
        step_nan = int(np.any(np.isnan(np.asarray(info.values))))
        assert int(state.nonfinite_count) == int(start.nonfinite_count) + step_nan
        assert np.isfinite(float(state.best_value))
    algorithm = R.oi_eda(objective, 8, population=16)
    state = algorithm.init(jax.random.key(0))
    step = jax.jit(algorithm.step)
    for k in jax.random.split(jax.random.key(1), 5):
        state, info = step(k, state)
    assert int(state.nonfinite_count) >= 1
    assert int(state.search.skipped_count) == int(state.nonfinite_count)  # updates skipped
    assert int(state.search.skips.rewards) == int(state.nonfinite_count)
    assert np.isfinite(float(state.best_value)) and float(state.best_value) != 5.0
    with pytest.raises(ValueError, match="objective returned non-finite values"):
        R.maximize(
            objective, 8, jax.random.key(0), 320, method="umda", population=16, num_selected=8
        )
