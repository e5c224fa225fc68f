"""Time-varying digraphs and Push-Pull matrices (jaxlab.distributed._graphs).

Truths: explicit edge lists, degrees counted in numpy, scipy's strongly connected components.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import connected_components

from jaxlab.distributed import (
    check_column_stochastic,
    check_jointly_strongly_connected,
    check_row_stochastic,
    directed_ring,
    exponential_graph,
    metropolis_weights,
    pull_weights,
    push_weights,
    sample_graph_sequence,
    time_varying_digraph,
)

N = 8


def _graphs(num_steps=40, **kwargs):
    return np.asarray(
        sample_graph_sequence(
            lambda key, k: time_varying_digraph(key, N, step=k, **kwargs),
            jax.random.key(0),
            num_steps,
        )
    )


def test_reference_check_1_rows_of_A_and_columns_of_B_sum_to_one_at_every_step():
    for adjacency in _graphs():
        A, B = np.asarray(pull_weights(adjacency)), np.asarray(push_weights(adjacency))
        np.testing.assert_allclose(A.sum(axis=1), 1.0, atol=1e-6)
        np.testing.assert_allclose(B.sum(axis=0), 1.0, atol=1e-6)
        # Local degrees only: A[i, j] = 1/(1 + in-degree of i), B[i, j] = 1/(1 + out-degree of j).
        in_degree = adjacency.sum(axis=1) - 1
        out_degree = adjacency.sum(axis=0) - 1
        for i, j in zip(*np.nonzero(adjacency), strict=True):
            assert A[i, j] == pytest.approx(1 / (1 + in_degree[i]))
            assert B[i, j] == pytest.approx(1 / (1 + out_degree[j]))
        assert np.all(A[~adjacency] == 0) and np.all(B[~adjacency] == 0)


def test_default_generator_is_unbalanced_ring_plus_extra_edges():
    graphs = _graphs(200)
    ring = np.roll(np.eye(N, dtype=bool), 1, axis=0)  # edge j -> j + 1
    assert np.all(graphs[:, ring]) and np.all(graphs[:, np.eye(N, dtype=bool)])
    extra = graphs[:, ~(ring | np.eye(N, dtype=bool))]
    assert extra.mean() == pytest.approx(0.2, abs=0.02)  # i.i.d. extra edges with p = 0.2
    unbalanced = [np.any(g.sum(axis=0) != g.sum(axis=1)) for g in graphs]
    assert np.mean(unbalanced) > 0.9


def test_ring_and_exponential_graphs_have_the_explicit_edges():
    ring = np.asarray(directed_ring(5))
    expected = {(i, i) for i in range(5)} | {((j + 1) % 5, j) for j in range(5)}
    assert set(zip(*np.nonzero(ring), strict=True)) == expected
    static = np.asarray(exponential_graph(8))
    expected = {(i, i) for i in range(8)} | {((j + h) % 8, j) for j in range(8) for h in (1, 2, 4)}
    assert set(zip(*np.nonzero(static), strict=True)) == expected
    for k in range(6):
        hop = (1, 2, 4)[k % 3]
        one_peer = np.asarray(exponential_graph(8, step=k))
        expected = {(i, i) for i in range(8)} | {((j + hop) % 8, j) for j in range(8)}
        assert set(zip(*np.nonzero(one_peer), strict=True)) == expected


def _scipy_strongly_connected(adjacency):
    count, _ = connected_components(adjacency.astype(int), directed=True, connection="strong")
    return count == 1


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.lists(st.booleans(), min_size=25, max_size=25).map(
            lambda bits: np.asarray(bits).reshape(5, 5) | np.eye(5, dtype=bool)
        ),
        min_size=2,
        max_size=4,
    ),
    st.integers(1, 2),
)
def test_joint_connectivity_check_agrees_with_scipy(graphs, window):
    sequence = np.stack(graphs)
    expected = all(
        _scipy_strongly_connected(sequence[s : s + window].any(axis=0))
        for s in range(len(graphs) - window + 1)
    )
    if expected:
        check_jointly_strongly_connected(sequence, window)
    else:
        with pytest.raises(ValueError, match="not jointly strongly connected"):
            check_jointly_strongly_connected(sequence, window)


def test_windowed_ring_is_connected_only_over_its_window():
    graphs = _graphs(12, extra_edge_prob=0.0, window=3)
    check_jointly_strongly_connected(graphs, 3)
    assert not _scipy_strongly_connected(graphs[0])
    with pytest.raises(ValueError, match=r"window=2: the union of steps \[0, 2\)"):
        check_jointly_strongly_connected(graphs, 2)


def test_metropolis_weights_are_doubly_stochastic_on_the_symmetrised_digraph():
    for adjacency in _graphs(10):
        W = np.asarray(metropolis_weights(adjacency | adjacency.T))
        np.testing.assert_allclose(W, W.T)
        np.testing.assert_allclose(W.sum(axis=0), 1.0, atol=1e-6)
        assert np.all(W >= 0)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: pull_weights(jnp.ones((3, 3))), TypeError, "adjacency must be boolean"),
        (lambda: push_weights(jnp.ones((3, 2), bool)), ValueError, "square"),
        (lambda: pull_weights(jnp.zeros((3, 3), bool)), ValueError, r"self-loop.*\[0, 1, 2\]"),
        (lambda: metropolis_weights(directed_ring(3)), ValueError, "symmetric"),
        (lambda: check_row_stochastic(jnp.eye(3) * 0.5, name="A"), ValueError, "A is not row"),
        (lambda: check_column_stochastic(-jnp.eye(3), name="B"), ValueError, "B must have finite"),
        (lambda: check_row_stochastic(jnp.eye(3, dtype=int)), TypeError, "float matrix"),
        (
            lambda: check_row_stochastic(jnp.full((3, 3), 0.2)),
            ValueError,
            "not row-stochastic",
        ),
        (
            lambda: time_varying_digraph(jax.random.key(0), 4, extra_edge_prob=-0.1),
            ValueError,
            "extra_edge_prob",
        ),
        (lambda: time_varying_digraph(jax.random.key(0), 4, window=0), ValueError, "window"),
        (lambda: directed_ring(0), ValueError, "num_agents must be an int >= 1"),
        (
            lambda: check_row_stochastic(pull_weights(directed_ring(3)), atol=float("nan")),
            ValueError,
            "atol must be finite and >= 0",
        ),
        (
            lambda: check_column_stochastic(push_weights(directed_ring(3)), atol=-1e-3),
            ValueError,
            "atol must be finite and >= 0",
        ),
        (
            lambda: time_varying_digraph(jax.random.key(0), 4, extra_edge_prob=np.nan),
            ValueError,
            "extra_edge_prob",
        ),
        (lambda: directed_ring(2.0), TypeError, r"num_agents must be a \(static\) int"),
        (
            lambda: check_jointly_strongly_connected(np.ones((2, 3, 3), bool), 3),
            ValueError,
            r"window must be an int in \[1, 2\]",
        ),
    ],
)
def test_bad_inputs_raise_clear_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_zero_diagonal_stochastic_matrix_is_rejected():
    # Rows sum to one but the agents keep nothing of their own value: not a valid pull matrix.
    matrix = (jnp.ones((3, 3)) - jnp.eye(3)) / 2
    with pytest.raises(ValueError, match="positive diagonal"):
        check_row_stochastic(matrix)


@pytest.mark.parametrize("check", [check_row_stochastic, check_column_stochastic])
@pytest.mark.parametrize("atol", [float("nan"), -1.0, float("inf")])
def test_stochastic_checks_reject_a_bad_atol(check, atol):
    # 2·I is neither row- nor column-stochastic: a NaN atol used to make every comparison false.
    with pytest.raises(ValueError, match="atol must be finite and >= 0"):
        check(2 * jnp.eye(3), atol=atol)
