"""Time-varying directed graphs and the Push-Pull (AB) mixing matrices built from them.

Convention: an adjacency matrix ``adj`` of ``n`` agents is a boolean ``(n, n)`` array with
``adj[i, j] = True`` when agent ``i`` *receives* from agent ``j`` (edge ``j -> i``). Self-loops
(``adj[i, i]``) are mandatory: every agent keeps part of its own value. A graph sequence is a
function ``graph_fn(rng_key, step) -> adj``; every agent calls it with the same shared key folded
with the step, so all agents see the same graph ``G_k`` without communicating about it.

From ``G_k``, Push-Pull (Pu, Shi, Xin & Nedić 2020) uses

* the **pull** matrix ``A_k[i, j] = 1 / (1 + |N_i^in|)`` for ``j ∈ N_i^in ∪ {i}`` (row-stochastic:
  agent ``i`` averages what it receives, knowing only its in-degree), and
* the **push** matrix ``B_k[i, j] = 1 / (1 + |N_j^out|)`` for ``i ∈ N_j^out ∪ {j}``
  (column-stochastic: agent ``j`` splits what it sends evenly, knowing only its out-degree).

Neither is doubly stochastic on an unbalanced digraph. The convergence theory asks that the union
of the graphs over every window of ``B`` consecutive steps be strongly connected
(:func:`check_jointly_strongly_connected`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab._src import validation

__all__ = [
    "check_column_stochastic",
    "check_jointly_strongly_connected",
    "check_row_stochastic",
    "directed_ring",
    "exponential_graph",
    "metropolis_weights",
    "pull_push_weights",
    "pull_weights",
    "push_weights",
    "sample_graph_sequence",
    "time_varying_digraph",
]

# Absolute tolerance of the stochasticity checks (row/column sums computed in the matrix dtype).
_SUM_ATOL = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12}


def _as_array(value: Any, name: str, what: str) -> jax.Array:
    if value is None or isinstance(value, str | bytes):
        raise TypeError(f"{name} must be {what}, got {type(value).__name__}")
    try:
        return jnp.asarray(value)
    except TypeError as err:
        raise TypeError(f"{name} must be {what}, got {type(value).__name__}") from err


def _check_adjacency(adjacency: Any, name: str = "adjacency") -> jax.Array:
    adjacency = _as_array(adjacency, name, "a boolean (n, n) array")
    if adjacency.ndim != 2 or adjacency.shape[0] != adjacency.shape[1]:
        raise ValueError(f"{name} must be a square (n, n) matrix, got shape {adjacency.shape}")
    if adjacency.dtype != jnp.bool_:
        raise TypeError(f"{name} must be boolean (adj[i, j]: edge j -> i), got {adjacency.dtype}")
    if validation.is_concrete(adjacency) and not bool(np.all(np.diagonal(np.asarray(adjacency)))):
        missing = np.flatnonzero(~np.diagonal(np.asarray(adjacency))).tolist()
        raise ValueError(
            f"{name} must have every self-loop adj[i, i]; missing for agents {missing}"
        )
    return adjacency


def directed_ring(num_agents: int) -> jax.Array:
    """The directed ring ``i -> i + 1 (mod n)`` with self-loops.

    ``adj[i, j] = True`` iff ``j = i`` or ``j = i - 1 (mod n)``. Strongly connected, with
    in- and out-degree one, so its pull and push matrices coincide (and are doubly stochastic).

    Args:
      num_agents: ``n >= 1``.

    Returns:
      Boolean ``(n, n)`` adjacency.

    Examples:
      >>> directed_ring(3).astype(int)
      Array([[1, 0, 1],
             [1, 1, 0],
             [0, 1, 1]], dtype=int32)

    References:
      Nedić & Olshevsky, "Distributed optimization over time-varying directed graphs", IEEE TAC
      2015 (rings as the sparsest strongly connected digraphs).
    """
    n = validation.check_int(num_agents, "num_agents", minimum=1)
    index = jnp.arange(n)
    return (index[:, None] == index[None, :]) | (index[:, None] == (index[None, :] + 1) % n)


def exponential_graph(num_agents: int, *, step: Any = None) -> jax.Array:
    """The directed exponential graph ``i -> i + 2^m (mod n)``, static or one-peer per step.

    With ``step=None`` all hops ``2^m < n`` (``m = 0 .. ⌈log2 n⌉ - 1``) are present. With an
    integer ``step`` (may be traced) only the hop ``2^(step mod τ)``, ``τ = ⌈log2 n⌉``, is present:
    the one-peer exponential graph, where every graph alone may be disconnected but the union over
    any ``τ`` consecutive steps contains the hop 1 ring, so it is jointly strongly connected over
    a window of ``τ``.

    Args:
      num_agents: ``n >= 1``.
      step: ``None`` for the static graph, or the step index ``k``.

    Returns:
      Boolean ``(n, n)`` adjacency with self-loops.

    Examples:
      >>> exponential_graph(4).astype(int)
      Array([[1, 0, 1, 1],
             [1, 1, 0, 1],
             [1, 1, 1, 0],
             [0, 1, 1, 1]], dtype=int32)
      >>> exponential_graph(4, step=1).astype(int)  # hop 2 only
      Array([[1, 0, 1, 0],
             [0, 1, 0, 1],
             [1, 0, 1, 0],
             [0, 1, 0, 1]], dtype=int32)

    References:
      Ying, Yuan, Chen, Hu, Pan & Yin, "Exponential graph is provably efficient for decentralized
      deep training", NeurIPS 2021.
    """
    n = validation.check_int(num_agents, "num_agents", minimum=1)
    if step is not None:
        validation.check_seed(step, "step")
    index = jnp.arange(n)
    diff = (index[:, None] - index[None, :]) % n  # i - j: the hop of edge j -> i
    hops = [2**m for m in range(max(1, math.ceil(math.log2(n))))] if n > 1 else [1]
    hops = [h for h in hops if h < n] or [0]
    eye = diff == 0
    if step is None:
        return eye | jnp.isin(diff, jnp.asarray(hops))
    hop = jnp.asarray(hops)[jnp.asarray(step) % len(hops)]
    return eye | (diff == hop)


def time_varying_digraph(
    rng_key: jax.Array,
    num_agents: int,
    *,
    step: Any = 0,
    extra_edge_prob: float = 0.2,
    window: int = 1,
) -> jax.Array:
    """One graph of a random time-varying digraph sequence: ring edges plus random extra edges.

    Edges at step ``k``: self-loops; the ring edges ``i -> i + 1 (mod n)`` for the agents
    ``i ≡ k (mod window)`` (with ``window = 1``, the whole ring, so every graph is strongly
    connected; with ``window = B`` the ring is spread over ``B`` steps, so only the union of
    ``B`` consecutive graphs is); and every other edge ``j -> i`` independently with probability
    ``extra_edge_prob``. The extra edges make the graph unbalanced (in-degrees differ from
    out-degrees), so neither Push-Pull matrix is doubly stochastic.

    Args:
      rng_key: the key of this step, shared by all agents (``fold_in(key, k)``).
      num_agents: ``n >= 1`` (static).
      step: the step index ``k`` (may be traced); only used when ``window > 1``.
      extra_edge_prob: probability of each extra edge, in ``[0, 1]``.
      window: ``B >= 1``, the connectivity window.

    Returns:
      Boolean ``(n, n)`` adjacency (``adj[i, j]``: edge ``j -> i``).

    Raises:
      ValueError: ``extra_edge_prob`` outside ``[0, 1]`` or ``window < 1``.

    Examples:
      >>> import jax
      >>> adj = time_varying_digraph(jax.random.key(0), 5)
      >>> bool(adj.diagonal().all()), bool(adj[1, 0] and adj[0, 4])  # self-loops, ring
      (True, True)
      >>> time_varying_digraph(jax.random.key(0), 5, extra_edge_prob=1.5)
      Traceback (most recent call last):
      ...
      ValueError: extra_edge_prob must be finite and in [0.0, 1.0], got 1.5

    References:
      Ma, Wang, Yao, Zhang, "FAB: A First-Order AB-based Gradient Algorithm for Distributed
      Bilevel Optimization over Time-Varying Directed Graphs", ICML 2026 (arXiv 2605.06328).
    """
    validation.check_key(rng_key, "rng_key")
    n = validation.check_int(num_agents, "num_agents", minimum=1)
    validation.check_seed(step, "step")
    validation.check_probability(extra_edge_prob, "extra_edge_prob")
    window = validation.check_int(window, "window", minimum=1)
    index = jnp.arange(n)
    ring = index[:, None] == (index[None, :] + 1) % n  # edge j -> j + 1
    if window > 1:
        active_sender = (index % window) == (jnp.asarray(step) % window)
        ring = ring & active_sender[None, :]
    extra = jax.random.bernoulli(rng_key, extra_edge_prob, (n, n))
    return (index[:, None] == index[None, :]) | ring | extra


def pull_weights(adjacency: Any) -> jax.Array:
    """The row-stochastic pull matrix ``A[i, j] = 1 / (1 + |N_i^in|)`` on ``N_i^in ∪ {i}``.

    Agent ``i`` averages itself and everything it receives, which needs only its in-degree.

    Args:
      adjacency: boolean ``(n, n)`` with self-loops (``adj[i, j]``: edge ``j -> i``).

    Returns:
      ``A`` with rows summing to one (float32, or float64 under x64).

    Raises:
      TypeError: ``adjacency`` is not boolean.
      ValueError: it is not square or lacks a self-loop.

    Examples:
      >>> A = pull_weights(directed_ring(3) | jnp.eye(3, dtype=bool).at[0, 1].set(True))
      >>> A
      Array([[0.33333334, 0.33333334, 0.33333334],
             [0.5       , 0.5       , 0.        ],
             [0.        , 0.5       , 0.5       ]], dtype=float32)

    References:
      Pu, Shi, Xin & Nedić, "Push-Pull Gradient Methods for Distributed Optimization in
      Networks", IEEE TAC 2020.
    """
    adjacency = _check_adjacency(adjacency)
    weights = adjacency.astype(jnp.result_type(float))
    return weights / jnp.sum(weights, axis=1, keepdims=True)


def push_weights(adjacency: Any) -> jax.Array:
    """The column-stochastic push matrix ``B[i, j] = 1 / (1 + |N_j^out|)`` on ``N_j^out ∪ {j}``.

    Agent ``j`` splits its value evenly between itself and its out-neighbours, which needs only
    its out-degree; column sums are one, so ``Σ_i (B y)_i = Σ_j y_j`` (mass is preserved: this is
    what lets the trackers of Push-Pull track the average gradient).

    Args:
      adjacency: boolean ``(n, n)`` with self-loops (``adj[i, j]``: edge ``j -> i``).

    Returns:
      ``B`` with columns summing to one.

    Raises:
      TypeError: ``adjacency`` is not boolean.
      ValueError: it is not square or lacks a self-loop.

    Examples:
      >>> B = push_weights(directed_ring(3) | jnp.eye(3, dtype=bool).at[0, 1].set(True))
      >>> B.sum(axis=0)
      Array([1., 1., 1.], dtype=float32)
      >>> B[:, 1]  # agent 1 sends to 0 and 2 and keeps a third
      Array([0.33333334, 0.33333334, 0.33333334], dtype=float32)

    References:
      Pu, Shi, Xin & Nedić, "Push-Pull Gradient Methods for Distributed Optimization in
      Networks", IEEE TAC 2020.
    """
    adjacency = _check_adjacency(adjacency)
    weights = adjacency.astype(jnp.result_type(float))
    return weights / jnp.sum(weights, axis=0, keepdims=True)


def pull_push_weights(adjacency: Any) -> tuple[jax.Array, jax.Array]:
    """Both Push-Pull matrices of one graph: ``(pull_weights(adj), push_weights(adj))``.

    The default ``weights_fn`` of :class:`jaxlab.solvers.PushPull` and :class:`jaxlab.solvers.FAB`.

    Examples:
      >>> A, B = pull_push_weights(directed_ring(4))
      >>> bool(jnp.allclose(A, B))  # in- and out-degree 1 everywhere
      True
    """
    return pull_weights(adjacency), push_weights(adjacency)


def metropolis_weights(adjacency: Any) -> jax.Array:
    """Doubly stochastic Metropolis-Hastings weights of an *undirected* graph.

    ``W[i, j] = 1 / (1 + max(d_i, d_j))`` for an edge ``i ~ j`` (``d``: degrees without
    self-loops), ``W[i, i] = 1 - Σ_{j≠i} W[i, j]``. Symmetric and doubly stochastic when
    ``adjacency`` is symmetric; on a directed graph use ``adj | adj.T`` (which ignores direction:
    the baseline of a balanced, undirected network).

    Args:
      adjacency: symmetric boolean ``(n, n)`` with self-loops.

    Returns:
      ``W``, symmetric with rows and columns summing to one.

    Raises:
      ValueError: ``adjacency`` is not symmetric (when concrete), not square or lacks a self-loop.

    Examples:
      >>> W = metropolis_weights(exponential_graph(4) | exponential_graph(4).T)
      >>> bool(jnp.allclose(W, W.T)), W.sum(axis=0)
      (True, Array([1., 1., 1., 1.], dtype=float32))

    References:
      Xiao, Boyd & Kim, "Distributed average consensus with least-mean-square deviation", J.
      Parallel Distrib. Comput. 2007.
    """
    adjacency = _check_adjacency(adjacency)
    if validation.is_concrete(adjacency) and not bool(jnp.array_equal(adjacency, adjacency.T)):
        raise ValueError("adjacency must be symmetric for metropolis_weights; pass adj | adj.T")
    n = adjacency.shape[0]
    eye = jnp.eye(n, dtype=bool)
    edges = adjacency & ~eye
    degree = jnp.sum(edges, axis=1).astype(jnp.result_type(float))
    off = jnp.where(edges, 1.0 / (1.0 + jnp.maximum(degree[:, None], degree[None, :])), 0.0)
    return off + jnp.diag(1.0 - jnp.sum(off, axis=1))


def _check_stochastic(matrix: Any, axis: int, what: str, name: str, atol: float | None) -> Any:
    if not isinstance(name, str):
        raise TypeError(f"name must be a string (used in messages), got {type(name).__name__}")
    if atol is not None:
        atol = validation.check_nonnegative(atol, "atol")
    matrix = _as_array(matrix, name, "a float (n, n) array")
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"{name} must be a square (n, n) matrix, got shape {matrix.shape}")
    if not jnp.issubdtype(matrix.dtype, jnp.floating):
        raise TypeError(f"{name} must be a float matrix, got {matrix.dtype}")
    if not validation.is_concrete(matrix):
        return matrix
    values = np.asarray(matrix)
    tol = _SUM_ATOL.get(values.dtype, 1e-5) if atol is None else atol
    if np.any(values < -tol) or not np.all(np.isfinite(values)):
        raise ValueError(f"{name} must have finite non-negative entries")
    sums = values.sum(axis=axis)
    worst = int(np.argmax(np.abs(sums - 1.0)))
    if abs(sums[worst] - 1.0) > tol:
        raise ValueError(
            f"{name} is not {what}: its {'row' if axis == 1 else 'column'} {worst} sums to "
            f"{sums[worst]:.6g} (need 1 within {tol:g})"
        )
    if not np.all(np.diagonal(values) > 0):
        raise ValueError(f"{name} must have a positive diagonal (self-loops)")
    return matrix


def check_row_stochastic(matrix: Any, *, name: str = "matrix", atol: float | None = None):
    """Returns ``matrix`` if it is row-stochastic (a valid pull matrix), else raises.

    Checks (on concrete values; a traced matrix only gets its shape and dtype checked): square,
    float, finite, non-negative, rows summing to 1 within ``atol`` (default by dtype: 1e-5 in
    float32, 1e-12 in float64) and a positive diagonal.

    Raises:
      ValueError: naming ``name`` and the first offending row.

    Examples:
      >>> check_row_stochastic(pull_weights(directed_ring(3))).shape
      (3, 3)
      >>> check_row_stochastic(push_weights(directed_ring(3).at[0, 1].set(True)), name="A")
      Traceback (most recent call last):
      ...
      ValueError: A is not row-stochastic: its row 0 sums to 1.33333 (need 1 within 1e-05)
    """
    return _check_stochastic(matrix, 1, "row-stochastic", name, atol)


def check_column_stochastic(matrix: Any, *, name: str = "matrix", atol: float | None = None):
    """Returns ``matrix`` if it is column-stochastic (a valid push matrix), else raises.

    Same checks as :func:`check_row_stochastic` on the column sums.

    Raises:
      ValueError: naming ``name`` and the first offending column.

    Examples:
      >>> adj = directed_ring(3).at[0, 1].set(True)
      >>> check_column_stochastic(push_weights(adj)).shape
      (3, 3)
      >>> check_column_stochastic(pull_weights(adj), name="B")
      Traceback (most recent call last):
      ...
      ValueError: B is not column-stochastic: its column 1 sums to 1.33333 (need 1 within 1e-05)
    """
    return _check_stochastic(matrix, 0, "column-stochastic", name, atol)


def sample_graph_sequence(
    graph_fn: Callable[[jax.Array, Any], Any], rng_key: jax.Array, num_steps: int
) -> jax.Array:
    """The graphs ``G_0 .. G_{K-1}`` a solver draws: ``graph_fn(fold_in(rng_key, k), k)``.

    Args:
      graph_fn: ``(rng_key, step) -> (n, n)`` boolean adjacency.
      rng_key: the shared key.
      num_steps: ``K >= 1``.

    Returns:
      Boolean ``(K, n, n)``.

    Examples:
      >>> import jax
      >>> seq = sample_graph_sequence(lambda key, k: exponential_graph(8, step=k),
      ...                             jax.random.key(0), 3)
      >>> seq.shape, [int(g.sum()) for g in seq]
      ((3, 8, 8), [16, 16, 16])
    """
    validation.check_callable(
        graph_fn, "graph_fn", signature="graph_fn(rng_key, step) -> adjacency"
    )
    validation.check_key(rng_key, "rng_key")
    num_steps = validation.check_int(num_steps, "num_steps", minimum=1)
    steps = jnp.arange(num_steps)
    keys = jax.vmap(lambda k: jax.random.fold_in(rng_key, k))(steps)
    return jax.vmap(graph_fn)(keys, steps)


def _strongly_connected(adjacency: np.ndarray) -> bool:
    n = adjacency.shape[0]
    reach = adjacency | np.eye(n, dtype=bool)
    for _ in range(max(1, math.ceil(math.log2(max(n, 2))))):
        reach = (reach.astype(np.int64) @ reach.astype(np.int64)) > 0
    return bool(reach.all())


def check_jointly_strongly_connected(adjacencies: Any, window: int) -> None:
    """Raises unless the union of every ``window`` consecutive graphs is strongly connected.

    The standing assumption of Push-Pull/FAB over time-varying digraphs (``B``-strong
    connectivity). Reachability of each union is computed by repeated boolean squaring.

    Args:
      adjacencies: boolean ``(K, n, n)`` graph sequence (e.g. :func:`sample_graph_sequence`),
        ``K >= window``.
      window: ``B >= 1``.

    Raises:
      ValueError: ``window`` is not an int in ``[1, K]``, or some window ``[k, k + B)`` has a
        union that is not strongly connected (the message names the first).

    Examples:
      >>> import jax
      >>> seq = sample_graph_sequence(lambda key, k: exponential_graph(8, step=k),
      ...                             jax.random.key(0), 6)
      >>> check_jointly_strongly_connected(seq, window=3)
      >>> check_jointly_strongly_connected(seq, window=1)
      Traceback (most recent call last):
      ...
      ValueError: the graph sequence is not jointly strongly connected over window=1: the union \
of steps [1, 2) is not strongly connected
    """
    if adjacencies is None or isinstance(adjacencies, str | bytes):
        raise TypeError(f"adjacencies must be a boolean (K, n, n) array, got {adjacencies!r}")
    adjacencies = np.asarray(adjacencies)
    if adjacencies.ndim != 3 or adjacencies.shape[1] != adjacencies.shape[2]:
        raise ValueError(f"adjacencies must have shape (K, n, n), got {adjacencies.shape}")
    if adjacencies.dtype != np.bool_:
        raise TypeError(f"adjacencies must be boolean, got {adjacencies.dtype}")
    num_steps = adjacencies.shape[0]
    window = validation.check_int(window, "window", minimum=1, maximum=num_steps)
    for start in range(num_steps - window + 1):
        union = adjacencies[start : start + window].any(axis=0)
        if not _strongly_connected(union):
            raise ValueError(
                f"the graph sequence is not jointly strongly connected over window={window}: "
                f"the union of steps [{start}, {start + window}) is not strongly connected"
            )
