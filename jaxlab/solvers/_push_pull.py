"""Push-Pull (AB) gradient tracking and FAB, its bilevel extension, over time-varying digraphs.

``n`` agents each hold a local objective; at step ``k`` they communicate over a directed graph
``G_k`` (see :mod:`jaxlab.distributed` for the generators and the matrices). Decisions are
*pulled* with the row-stochastic ``A_k`` and gradient trackers are *pushed* with the
column-stochastic ``B_k``::

    x^{k+1} = A_k (x^k - α y^k),      y^{k+1} = B_k y^k + ∇φ(x^{k+1}) - ∇φ(x^k),   y^0 = ∇φ(x^0).

Column sums of one preserve ``Σ_i y_i^k = Σ_i ∇φ_i(x_i^k)`` (the trackers follow the average
gradient), row sums of one drive consensus, so the agents reach the minimiser of ``(1/n) Σ φ_i``
on an unbalanced digraph, where plain decentralised gradient descent is biased.

FAB applies the same two matrices to the first-order value-function penalty of a bilevel problem
``min_x f(x, y*(x))``, ``y*(x) = argmin_y g(x, y)`` (``f``, ``g`` averages of the agents'
``f_i``, ``g_i``), ``min_{x, y} f(x, y) + λ (g(x, y) - min_z g(x, z))``, with directions::

    d^x = ∇_x f(x, y) + λ (∇_x g(x, y) - ∇_x g(x, z))     (≈ ∇F(x), bias O(1/λ))
    d^y = ∇_y f(x, y) / λ + ∇_y g(x, y)                    (= ∇_y 𝓛_λ / λ, step ≈ 1/L_g)
    d^z = ∇_y g(x, z)                                       (the lower-level solver)

each tracked as ``y`` above. The exact FAB iteration is a reconstruction (see the module notes in
``notes/fab_pushpull.md``); every constant is an argument.

Agents are an axis. With ``axis_name=None`` every leaf carries the agents on its leading axis
and mixing is a matrix product (one device). With ``axis_name="agents"`` the code is per agent
and mixes through collectives, so it runs under ``jax.vmap(..., axis_name=...)``, under
``jax.pmap(..., axis_name=...)`` (:func:`jaxlab.distributed.run_pmapped`), under
``jax.shard_map`` on a mesh (``mixing="dense"``: ``all_gather``; ``mixing="sparse"``:
``ppermute`` along a static set of ring shifts) and across processes
(:func:`jaxlab.distributed.launch`). Every agent draws the same ``G_k`` from the shared key in
the state folded with ``k``.

References:
  Ma, Wang, Yao, Zhang, "FAB: A First-Order AB-based Gradient Algorithm for Distributed Bilevel
  Optimization over Time-Varying Directed Graphs", ICML 2026 (arXiv 2605.06328).
  Pu, Shi, Xin, Nedić, "Push-Pull Gradient Methods for Distributed Optimization in Networks",
  IEEE TAC 2020.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.typing import ArrayLike

from jaxlab._src import validation
from jaxlab._src.solver import IterativeSolver, OptStep, SolverStatus
from jaxlab._src.tree import add_scale
from jaxlab.distributed import (
    check_column_stochastic,
    check_jointly_strongly_connected,
    check_row_stochastic,
    pull_push_weights,
    sample_graph_sequence,
)

__all__ = ["FAB", "FABParams", "FABState", "PushPull", "PushPullState"]

_MIXINGS = ("dense", "sparse")
# Graphs drawn (with a fixed probe key) to validate graph_fn and weights_fn at construction.
_PROBE_STEPS = 3


# --------------------------------------------------------------------------------------------
# Agent-axis helpers: the same maths stacked (leading axis) or per agent (named axis).


def _num_agents(tree: Any, axis_name: str | None) -> int:
    if axis_name is not None:
        return int(jax.lax.axis_size(axis_name))
    leaves = jax.tree.leaves(tree)
    if not leaves or any(jnp.ndim(x) == 0 for x in leaves):
        raise ValueError(
            "with axis_name=None every leaf of params must carry the agents on a leading axis"
        )
    sizes = {x.shape[0] for x in leaves}
    if len(sizes) != 1:
        raise ValueError(f"params leaves have different leading (agent) sizes {sorted(sizes)}")
    return sizes.pop()


def _agent_mean(tree: Any, axis_name: str | None) -> Any:
    if axis_name is None:
        return jax.tree.map(lambda v: jnp.mean(v, axis=0), tree)
    return jax.lax.pmean(tree, axis_name)


def _consensus_error(tree: Any, axis_name: str | None) -> jax.Array:
    """``sqrt((1/n) Σ_i ||v_i - v̄||²)`` summed over leaves (the root-mean-square deviation)."""
    mean = _agent_mean(tree, axis_name)
    if axis_name is None:
        squares = [
            jnp.sum((v - m[None]) ** 2) / v.shape[0]
            for v, m in zip(jax.tree.leaves(tree), jax.tree.leaves(mean), strict=True)
        ]
    else:
        squares = [
            jax.lax.pmean(jnp.sum((v - m) ** 2), axis_name)
            for v, m in zip(jax.tree.leaves(tree), jax.tree.leaves(mean), strict=True)
        ]
    return jnp.sqrt(sum(squares))


def _ring_permutation(n: int, shift: int) -> list[tuple[int, int]]:
    return [(j, (j + shift) % n) for j in range(n)]


def _mix(
    weights: jax.Array,
    tree: Any,
    *,
    axis_name: str | None,
    mixing: str,
    shifts: tuple[int, ...],
    side: str,
) -> Any:
    """``v_i <- Σ_j W[i, j] v_j`` for every leaf.

    Stacked: a matrix product over the leading axis. Dense: ``all_gather`` and row ``i`` of
    ``W``. Sparse: one ``ppermute`` per ring shift ``s`` (edge ``j -> j + s``); for ``side="pull"``
    the receiver weighs what it gets by ``W[i, i - s]``, for ``side="push"`` the sender scales its
    message by ``W[j + s, j]`` (its own column), as a push network does.
    """
    if axis_name is None:
        return jax.tree.map(lambda v: jnp.tensordot(weights.astype(v.dtype), v, axes=(1, 0)), tree)
    n = weights.shape[0]
    i = jax.lax.axis_index(axis_name)
    if mixing == "dense":

        def dense(v):
            gathered = jax.lax.all_gather(v, axis_name)
            return jnp.tensordot(weights[i].astype(v.dtype), gathered, axes=(0, 0))

        return jax.tree.map(dense, tree)

    def sparse(v):
        w = weights.astype(v.dtype)
        out = w[i, i] * v
        for s in shifts:
            perm = _ring_permutation(n, s)
            if side == "pull":
                out = out + w[i, (i - s) % n] * jax.lax.ppermute(v, axis_name, perm)
            else:
                out = out + jax.lax.ppermute(w[(i + s) % n, i] * v, axis_name, perm)
        return out

    return jax.tree.map(sparse, tree)


def _per_agent(fn: Callable, axis_name: str | None) -> Callable:
    """``fn`` on one agent's slices, mapped over the leading axis when agents are stacked."""
    return fn if axis_name is not None else jax.vmap(fn)


class _AgentSolver(IterativeSolver):
    """What PushPull and FAB share (each declares its own fields): the graph sequence, its
    matrices and the agent axis."""

    def __post_init__(self):
        super().__post_init__()
        validation.check_callable(
            self.graph_fn,
            "graph_fn",
            signature="graph_fn(rng_key, step) -> (n, n) boolean adjacency",
        )
        validation.check_callable(self.weights_fn, "weights_fn")
        validation.check_bool(self.tracking, "tracking")
        validation.check_axis_name(self.axis_name)
        if isinstance(self.axis_name, tuple):  # the agents are one axis (ppermute along it)
            raise TypeError(f"axis_name must be None or a single axis name, got {self.axis_name!r}")
        validation.check_choice(self.mixing, "mixing", _MIXINGS)
        if self.mixing == "sparse" and self.axis_name is None:
            raise ValueError(
                "mixing='sparse' exchanges messages with ppermute over a named axis: set "
                "axis_name (with axis_name=None mixing is a matrix product)"
            )
        if not isinstance(self.shifts, tuple):
            raise TypeError(f"shifts must be a tuple of ints, got {self.shifts!r}")
        for i, shift in enumerate(self.shifts):
            validation.check_int(shift, f"shifts[{i}]")
        if self.mixing == "sparse" and not self.shifts:
            raise ValueError("mixing='sparse' needs shifts, e.g. (1,) for a directed ring")
        if self.connectivity_window is not None:
            validation.check_int(self.connectivity_window, "connectivity_window", minimum=1)
        self._probe_graphs()

    def _probe_graphs(self) -> None:
        """Draws a few graphs with a fixed key and checks them (shapes, matrices, support)."""
        steps = max(_PROBE_STEPS, 2 * (self.connectivity_window or 0))
        with jax.ensure_compile_time_eval():
            graphs = sample_graph_sequence(self.graph_fn, jax.random.key(0), steps)
            if graphs.ndim != 3 or graphs.dtype != jnp.bool_:
                raise ValueError(
                    f"graph_fn must return a square boolean (n, n) adjacency, got "
                    f"{graphs.dtype} of shape {graphs.shape[1:]}"
                )
            n = graphs.shape[1]
            self.__dict__["_graph_agents"] = n  # checked against the params in init_state
            if not bool(jnp.all(jnp.diagonal(graphs, axis1=1, axis2=2))):
                raise ValueError("graph_fn must return graphs with every self-loop adj[i, i]")
            if any(not 0 < s < n for s in self.shifts):
                raise ValueError(f"shifts must lie in [1, {n - 1}] for n = {n}, got {self.shifts}")
            for k in range(steps):
                pull, push = self.weights_fn(graphs[k])
                check_row_stochastic(pull, name="the pull matrix A_k = weights_fn(adj)[0]")
                check_column_stochastic(push, name="the push matrix B_k = weights_fn(adj)[1]")
                if self.mixing == "sparse":
                    index = np.arange(n)
                    hop = (index[:, None] - index[None, :]) % n  # edge j -> i has hop i - j
                    allowed = np.isin(hop, (0, *self.shifts))
                    used = (np.asarray(pull) != 0) | (np.asarray(push) != 0)
                    if np.any(used & ~allowed):
                        extra = sorted({int(h) for h in hop[used & ~allowed]})
                        raise ValueError(
                            f"mixing='sparse' with shifts={self.shifts} cannot carry the edges of "
                            f"hops {extra} that graph_fn draws; add them to shifts or use "
                            "mixing='dense'"
                        )
            if self.connectivity_window is not None:
                check_jointly_strongly_connected(graphs, self.connectivity_window)

    def _check_inputs(self, init_params, args, rng_key) -> None:
        """Eager checks of ``init_state``'s inputs (shapes only, so traced inputs work)."""
        validation.check_key(rng_key, "rng_key")
        validation.check_axis_bound(self.axis_name)
        validation.check_floating_tree(init_params, "init_params")
        if self.axis_name is not None:
            return
        n = _num_agents(init_params, None)
        graph_agents = self.__dict__.get("_graph_agents")
        if graph_agents is not None and n != graph_agents:
            raise ValueError(
                f"graph_fn returns {(graph_agents, graph_agents)} graphs but there are {n} agents "
                f"(the leading axis of init_params)"
            )
        for path, leaf in jax.tree_util.tree_leaves_with_path(args):
            shape = tuple(np.shape(leaf))
            if not shape or shape[0] != n:
                raise ValueError(
                    f"args{jax.tree_util.keystr(path)} must carry the {n} agents on its leading "
                    f"axis (axis_name=None), got shape {shape}"
                )

    def _nonfinite(self, params, state) -> jax.Array:
        # One verdict for all agents (a pmax over the agent axis), so every agent's loop stops
        # at the same round and no collective is left waiting.
        nonfinite = super()._nonfinite(params, state)
        if self.axis_name is None:
            return nonfinite
        return jax.lax.pmax(nonfinite.astype(jnp.int32), self.axis_name) > 0

    def _matrices(self, rng_key: jax.Array, step: jax.Array, num_agents: int):
        adjacency = self.graph_fn(jax.random.fold_in(rng_key, step), step)
        if adjacency.shape != (num_agents, num_agents):
            raise ValueError(
                f"graph_fn returns {adjacency.shape} graphs but there are {num_agents} agents"
            )
        return self.weights_fn(adjacency)

    def _mix(self, weights, tree, side):
        return _mix(
            weights,
            tree,
            axis_name=self.axis_name,
            mixing=self.mixing,
            shifts=self.shifts,
            side=side,
        )


# --------------------------------------------------------------------------------------------
# Push-Pull.


class PushPullState(NamedTuple):
    """State of :class:`PushPull`.

    Attributes:
      iter_num: communication rounds done (int32).
      error: ``||(1/n) Σ_i ∇φ_i(x_i)|| + consensus_error``.
      consensus_error: ``sqrt((1/n) Σ_i ||x_i - x̄||²)``.
      tracker: the trackers ``y_i`` (stacked or per agent, like ``params``).
      grad: ``∇φ_i(x_i)`` at the current iterate.
      rng_key: the shared key; round ``k`` draws its graph from ``fold_in(rng_key, k)``.
      status: int32 :class:`~jaxlab.solvers.SolverStatus` code (``RUNNING``, ``CONVERGED``,
        ``MAXITER``, or ``NONFINITE``: an agent's iterate or the error is NaN/inf).

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.distributed import directed_ring
      >>> solver = PushPull(grad_fn=lambda x, b: x - b, stepsize=0.5,
      ...                   graph_fn=lambda key, k: directed_ring(3))
      >>> state = solver.init_state(jnp.zeros(3), jnp.arange(3.0), rng_key=jax.random.key(0))
      >>> state.tracker
      Array([ 0., -1., -2.], dtype=float32)
    """

    iter_num: jax.Array
    error: jax.Array
    consensus_error: jax.Array
    tracker: Any
    grad: Any
    rng_key: jax.Array
    status: jax.Array


@dataclasses.dataclass(eq=False, kw_only=True)
class PushPull(_AgentSolver):
    """Push-Pull (AB) gradient tracking for ``min_x (1/n) Σ_i φ_i(x)`` over time-varying digraphs.

    Each round ``k`` draws ``G_k = graph_fn(fold_in(rng_key, k), k)``, builds
    ``(A_k, B_k) = weights_fn(G_k)`` (row- and column-stochastic) and updates::

        x^{k+1} = A_k (x^k - α y^k)
        y^{k+1} = B_k y^k + ∇φ(x^{k+1}) - ∇φ(x^k),        y^0 = ∇φ(x^0).

    With ``tracking=False`` it is decentralised gradient descent ``x^{k+1} = A_k x^k - α∇φ(x^k)``
    (biased on an unbalanced digraph and with a constant step; the baseline).

    Every argument is keyword-only.

    Args:
      grad_fn: ``grad_fn(x_i, *args_i) -> ∇φ_i(x_i)``, one agent's gradient (same pytree as
        ``x_i``); ``args_i`` is that agent's slice of ``run``'s ``args``.
      graph_fn: ``graph_fn(rng_key, step) -> (n, n)`` boolean adjacency with self-loops.
      stepsize: ``α > 0``.
      weights_fn: ``adj -> (A, B)``; default :func:`jaxlab.distributed.pull_push_weights`.
      tracking: gradient tracking on (Push-Pull) or off (decentralised gradient descent).
      axis_name: ``None``: agents stacked on the leading axis of ``params`` and ``args``, mixing
        by matrix products; a name: per-agent code mixing through collectives on that axis.
      mixing: ``"dense"`` (``all_gather``) or ``"sparse"`` (``ppermute`` along ``shifts``).
      shifts: the ring hops ``s`` (edges ``j -> j + s``) that sparse mixing carries.
      connectivity_window: if set, the first graphs drawn with a probe key must be jointly
        strongly connected over this window (a check of ``graph_fn`` at construction).
      maxiter, tol, implicit_diff, implicit_diff_solve, unroll, jit: as in the solver base.

    ``run(init_params, *args, rng_key=key)``: ``init_params`` and ``args`` carry the agents on
    their leading axis (``axis_name=None``) or are one agent's (named axis). ``optimality_fun``
    returns ``r_i = (x_i - x̄) + (1/n) Σ_j ∇φ_j(x̄)``, zero exactly at consensus on a minimiser,
    so ``implicit_diff`` differentiates the solution with respect to the agents' data.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.distributed import time_varying_digraph
      >>> a, b = jnp.array([1.0, 2.0, 3.0, 1.5]), jnp.array([0.0, 1.0, -1.0, 2.0])
      >>> solver = PushPull(
      ...     grad_fn=lambda x, a_i, b_i: a_i * (x - b_i),  # φ_i = a_i (x - b_i)² / 2
      ...     graph_fn=lambda key, k: time_varying_digraph(key, 4),
      ...     stepsize=0.2, maxiter=500, tol=1e-6)
      >>> x = solver.run(jnp.zeros(4), a, b, rng_key=jax.random.key(0)).params
      >>> [round(v, 4) for v in x.tolist()], round(float(jnp.sum(a * b) / jnp.sum(a)), 4)  # x*
      ([0.2667, 0.2667, 0.2667, 0.2667], 0.2667)

    References:
      Pu, Shi, Xin & Nedić, "Push-Pull Gradient Methods for Distributed Optimization in
      Networks", IEEE TAC 2020; Ma, Wang, Yao & Zhang, "FAB", ICML 2026 (time-varying digraphs).
    """

    grad_fn: Callable[..., Any]
    graph_fn: Callable[[jax.Array, Any], Any]
    weights_fn: Callable[[Any], tuple[jax.Array, jax.Array]] = pull_push_weights
    stepsize: ArrayLike = 0.1
    tracking: bool = True
    axis_name: str | None = None
    mixing: str = "dense"
    shifts: tuple[int, ...] = ()
    connectivity_window: int | None = None
    maxiter: int = 3000
    tol: float = 1e-10

    def __post_init__(self):
        validation.check_callable(self.grad_fn, "grad_fn", signature="grad_fn(x_i, *args_i)")
        validation.check_positive(self.stepsize, "stepsize")
        super().__post_init__()

    def _grads(self, params, args):
        return _per_agent(lambda x, *a: self.grad_fn(x, *a), self.axis_name)(params, *args)

    def _error(self, params, grads):
        consensus = _consensus_error(params, self.axis_name)
        gradient = optax.tree.norm(_agent_mean(grads, self.axis_name))
        return gradient + consensus, consensus

    def init_state(self, init_params, *args, rng_key: jax.Array) -> PushPullState:
        self._check_inputs(init_params, args, rng_key)
        out = jax.eval_shape(lambda p, a: self._grads(p, a), init_params, args)
        validation.check_tree_like(out, init_params, "grad_fn(x_i, *args_i)", "init_params")
        grads = self._grads(init_params, args)
        error, consensus = self._error(init_params, grads)
        dtype = jnp.result_type(*jax.tree.leaves(init_params))
        return PushPullState(
            iter_num=jnp.asarray(0, jnp.int32),
            error=jnp.asarray(jnp.inf, dtype),
            consensus_error=consensus.astype(dtype),
            tracker=grads,
            grad=grads,
            rng_key=rng_key,
            status=jnp.int32(SolverStatus.RUNNING),
        )

    def update(self, params, state: PushPullState, *args, rng_key=None) -> OptStep:
        del rng_key  # the state carries the shared key
        n = _num_agents(params, self.axis_name)
        pull, push = self._matrices(state.rng_key, state.iter_num, n)
        alpha = self.stepsize
        if self.tracking:
            new_params = self._mix(pull, add_scale(params, -alpha, state.tracker), "pull")
            grads = self._grads(new_params, args)
            tracker = optax.tree.add(
                self._mix(push, state.tracker, "push"), optax.tree.sub(grads, state.grad)
            )
        else:
            new_params = add_scale(self._mix(pull, params, "pull"), -alpha, state.grad)
            grads = self._grads(new_params, args)
            tracker = grads
        error, consensus = self._error(new_params, grads)
        dtype = state.error.dtype
        new_state = PushPullState(
            iter_num=state.iter_num + 1,
            error=error.astype(dtype),
            consensus_error=consensus.astype(dtype),
            tracker=tracker,
            grad=grads,
            rng_key=state.rng_key,
            status=jnp.int32(SolverStatus.RUNNING),
        )
        return OptStep(new_params, self._with_status(new_params, new_state))

    def optimality_fun(self, params, *args, rng_key=None):
        """``r_i = (x_i - x̄) + (1/n) Σ_j ∇φ_j(x̄)`` (zero iff consensus at a stationary point)."""
        del rng_key
        mean = _agent_mean(params, self.axis_name)
        if self.axis_name is None:
            n = _num_agents(params, None)
            at_mean = jax.tree.map(lambda m: jnp.broadcast_to(m[None], (n, *m.shape)), mean)
        else:
            at_mean = mean
        grad_mean = _agent_mean(self._grads(at_mean, args), self.axis_name)
        if self.axis_name is None:
            return jax.tree.map(lambda x, m, g: (x - m[None]) + g[None], params, mean, grad_mean)
        return jax.tree.map(lambda x, m, g: (x - m) + g, params, mean, grad_mean)


# --------------------------------------------------------------------------------------------
# FAB.


class FABParams(NamedTuple):
    """The variables of :class:`FAB`: upper ``x``, penalised lower ``y``, auxiliary ``z ≈ y*(x)``.

    Examples:
      >>> import jax.numpy as jnp
      >>> p = FABParams(x=jnp.zeros(4), y=jnp.zeros(4), z=jnp.zeros(4))
      >>> p.x.shape
      (4,)
    """

    x: Any
    y: Any
    z: Any


class FABState(NamedTuple):
    """State of :class:`FAB`.

    Attributes:
      iter_num: upper-level iterations done (int32); ``iter_num * inner_steps`` rounds.
      error: ``||(mean d^x, mean d^y, mean d^z)|| + consensus_error`` at the current iterate.
      consensus_error: ``sqrt(Σ_v (1/n) Σ_i ||v_i - v̄||²)`` over ``v ∈ {x, y, z}``.
      penalty: ``λ`` of the last round.
      trackers: ``FABParams`` of the trackers ``s^x, s^y, s^z``.
      directions: ``FABParams`` of the directions ``d^x, d^y, d^z`` at the current iterate.
      rng_key: the shared key; round ``r`` draws its graph from ``fold_in(rng_key, r)``.
      status: int32 :class:`~jaxlab.solvers.SolverStatus` code, as in :class:`PushPullState`.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.distributed import directed_ring
      >>> solver = FAB(upper_grad_fn=lambda x, y: (x, y - 1.0),
      ...              lower_grad_fn=lambda x, y: (x - y, y - x),
      ...              graph_fn=lambda key, k: directed_ring(2))
      >>> p = FABParams(jnp.zeros(2), jnp.zeros(2), jnp.zeros(2))
      >>> solver.init_state(p, rng_key=jax.random.key(0)).directions.y  # (y - 1)/λ + (y - x)
      Array([-0.1, -0.1], dtype=float32)
    """

    iter_num: jax.Array
    error: jax.Array
    consensus_error: jax.Array
    penalty: jax.Array
    trackers: FABParams
    directions: FABParams
    rng_key: jax.Array
    status: jax.Array


@dataclasses.dataclass(eq=False, kw_only=True)
class FAB(_AgentSolver):
    """FAB: Push-Pull on the value-function penalty of a distributed bilevel problem.

    Solves ``min_x F(x) = f(x, y*(x))``, ``y*(x) = argmin_y g(x, y)``, ``f = (1/n) Σ f_i``,
    ``g = (1/n) Σ g_i`` (``g`` strongly convex in ``y``) through the penalty
    ``𝓛_λ(x, y) = f(x, y) + λ (g(x, y) - g*(x))``, ``∇g*(x) = ∇_x g(x, z*(x))`` (Danskin), with
    agent ``i`` holding ``(x_i, y_i, z_i)`` and trackers ``(s^x_i, s^y_i, s^z_i)``. A round ``r``
    draws ``(A_r, B_r)`` and updates every block ``v ∈ {x, y, z}`` (Jacobi)::

        v^{r+1} = A_r (v^r - η_v s^{v,r}),    s^{v,r+1} = B_r s^{v,r} + d^v(r+1) - d^v(r)

    with ``η_x = α`` on the last of ``inner_steps`` rounds per iteration (``0`` before: ``x`` only
    mixes while ``y, z`` take extra steps), ``η_y = η_z = β``, and the directions

    * ``d^x = ∇_x f(x, y) + λ (∇_x g(x, y) - ∇_x g(x, z))``,
    * ``d^y = ∇_y f(x, y) / λ + ∇_y g(x, y)``,
    * ``d^z = ∇_y g(x, z)``.

    ``λ_k = penalty · (k + 1)^penalty_power`` (``penalty_power = 1/3`` matches the paper's
    ``O(K^{-2/3})`` rate; ``0`` keeps ``λ`` fixed, the penalty solution then has an ``O(1/λ)``
    bias). With ``tracking=False`` every block takes ``v <- A_r v - η_v d^v`` (decentralised
    gradient, the baseline without trackers).

    Every argument is keyword-only.

    Args:
      upper_grad_fn: ``(x_i, y_i, *args_i) -> (∇_x f_i, ∇_y f_i)``.
      lower_grad_fn: ``(x_i, y_i, *args_i) -> (∇_x g_i, ∇_y g_i)``.
      graph_fn, weights_fn, tracking, axis_name, mixing, shifts, connectivity_window: as in
        :class:`PushPull`.
      penalty: ``λ_0 > 0``.
      penalty_power: ``>= 0``.
      upper_stepsize: ``α > 0``.
      lower_stepsize: ``β > 0`` (about ``1/L_g``).
      inner_steps: rounds per iteration, ``>= 1``.
      maxiter, tol, implicit_diff, implicit_diff_solve, unroll, jit: as in the solver base.

    ``run(FABParams(x0, y0, z0), *args, rng_key=key)``; the output's ``x`` averaged over agents is
    the estimate. ``optimality_fun`` is ``r^v_i = (v_i - v̄) + (1/n) Σ_j d^v_j(x̄, ȳ, z̄)`` at the
    final ``λ`` (zero at consensus on a stationary point of the penalty problem).

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.distributed import time_varying_digraph
      >>> # f_i = (y - c_i)²/2 + x²/2, g_i = (y - x - e_i)²/2: x_λ = λ (c̄ - ē) / (1 + 2λ)
      >>> c, e = jnp.array([0.0, 2.0, 1.5, 0.5]), jnp.array([0.3, -0.3, 0.1, -0.1])
      >>> solver = FAB(
      ...     upper_grad_fn=lambda x, y, c_i, e_i: (x, y - c_i),
      ...     lower_grad_fn=lambda x, y, c_i, e_i: (x + e_i - y, y - x - e_i),
      ...     graph_fn=lambda key, k: time_varying_digraph(key, 4),
      ...     penalty=10.0, upper_stepsize=0.1, lower_stepsize=0.3, maxiter=3000, tol=1e-6)
      >>> zeros = jnp.zeros(4)
      >>> out = solver.run(FABParams(zeros, zeros, zeros), c, e, rng_key=jax.random.key(0))
      >>> [round(v, 4) for v in out.params.x.tolist()], round(10 / 21, 4)
      ([0.4762, 0.4762, 0.4762, 0.4762], 0.4762)

    References:
      Ma, Wang, Yao & Zhang, "FAB: A First-Order AB-based Gradient Algorithm for Distributed
      Bilevel Optimization over Time-Varying Directed Graphs", ICML 2026 (arXiv 2605.06328);
      Kwon et al., "A fully first-order method for stochastic bilevel optimization", ICML 2023
      (the value-function penalty).
    """

    upper_grad_fn: Callable[..., Any]
    lower_grad_fn: Callable[..., Any]
    graph_fn: Callable[[jax.Array, Any], Any]
    weights_fn: Callable[[Any], tuple[jax.Array, jax.Array]] = pull_push_weights
    penalty: ArrayLike = 10.0
    penalty_power: ArrayLike = 0.0
    upper_stepsize: ArrayLike = 0.5
    lower_stepsize: ArrayLike = 0.2
    inner_steps: int = 1
    tracking: bool = True
    axis_name: str | None = None
    mixing: str = "dense"
    shifts: tuple[int, ...] = ()
    connectivity_window: int | None = None
    maxiter: int = 20000
    tol: float = 1e-10

    def __post_init__(self):
        for name in ("upper_grad_fn", "lower_grad_fn"):
            validation.check_callable(
                getattr(self, name),
                name,
                signature=f"{name}(x_i, y_i, *args_i) -> (grad_x, grad_y)",
            )
        validation.check_positive(self.penalty, "penalty")
        validation.check_positive(self.upper_stepsize, "upper_stepsize")
        validation.check_positive(self.lower_stepsize, "lower_stepsize")
        validation.check_nonnegative(self.penalty_power, "penalty_power")
        validation.check_int(self.inner_steps, "inner_steps", minimum=1)
        super().__post_init__()

    def penalty_at(self, iter_num: ArrayLike) -> jax.Array:
        """``λ_k = penalty · (k + 1)^penalty_power``.

        Examples:
          >>> solver = FAB(upper_grad_fn=lambda x, y: (x, y), lower_grad_fn=lambda x, y: (x, y),
          ...              graph_fn=lambda key, k: jnp.ones((2, 2), bool), penalty=2.0,
          ...              penalty_power=0.5)
          >>> float(solver.penalty_at(3))
          4.0
        """
        k = jnp.asarray(iter_num)
        return self.penalty * (k + 1.0) ** self.penalty_power

    def _directions_one(self, x, y, z, lam, *args):
        fx, fy = self.upper_grad_fn(x, y, *args)
        gx_y, gy_y = self.lower_grad_fn(x, y, *args)
        gx_z, gy_z = self.lower_grad_fn(x, z, *args)
        dx = jax.tree.map(lambda a, b, c: a + lam.astype(a.dtype) * (b - c), fx, gx_y, gx_z)
        dy = jax.tree.map(lambda a, b: a / lam.astype(a.dtype) + b, fy, gy_y)
        return FABParams(dx, dy, gy_z)

    def _directions(self, params: FABParams, lam, args) -> FABParams:
        fn = lambda x, y, z, *a: self._directions_one(x, y, z, lam, *a)
        return _per_agent(fn, self.axis_name)(params.x, params.y, params.z, *args)

    def _error(self, params, directions):
        consensus = _consensus_error(tuple(params), self.axis_name)
        gradient = optax.tree.norm(_agent_mean(tuple(directions), self.axis_name))
        return gradient + consensus, consensus

    def init_state(self, init_params, *args, rng_key: jax.Array) -> FABState:
        if not isinstance(init_params, tuple) or len(init_params) != 3:
            raise TypeError(
                f"init_params must be FABParams(x, y, z) (upper, lower, auxiliary), got "
                f"{type(init_params).__name__}"
            )
        params = FABParams(*init_params)
        self._check_inputs(params, args, rng_key)
        lam = self.penalty_at(0)
        out = jax.eval_shape(lambda p, a: self._directions(p, lam, a), params, args)
        validation.check_tree_like(
            out, params, "(upper_grad_fn, lower_grad_fn)(x_i, y_i, *args_i)", "init_params"
        )
        directions = self._directions(params, lam, args)
        _, consensus = self._error(params, directions)
        dtype = jnp.result_type(*jax.tree.leaves(params))
        return FABState(
            iter_num=jnp.asarray(0, jnp.int32),
            error=jnp.asarray(jnp.inf, dtype),
            consensus_error=consensus.astype(dtype),
            penalty=jnp.asarray(lam, dtype),
            trackers=directions,
            directions=directions,
            rng_key=rng_key,
            status=jnp.int32(SolverStatus.RUNNING),
        )

    def _round(self, params, trackers, directions, rng_key, round_index, lam, x_step, args):
        n = _num_agents(params.x, self.axis_name)
        pull, push = self._matrices(rng_key, round_index, n)
        steps = FABParams(x_step, self.lower_stepsize, self.lower_stepsize)
        if self.tracking:
            moved = FABParams(
                *(
                    add_scale(v, -step, s)
                    for step, s, v in zip(steps, trackers, params, strict=True)
                )
            )
            new_params = FABParams(*(self._mix(pull, v, "pull") for v in moved))
            new_directions = self._directions(new_params, lam, args)
            new_trackers = FABParams(
                *(
                    optax.tree.add(self._mix(push, s, "push"), optax.tree.sub(d_new, d_old))
                    for s, d_new, d_old in zip(trackers, new_directions, directions, strict=True)
                )
            )
        else:
            new_params = FABParams(
                *(
                    add_scale(self._mix(pull, v, "pull"), -step, d)
                    for step, d, v in zip(steps, directions, params, strict=True)
                )
            )
            new_directions = self._directions(new_params, lam, args)
            new_trackers = new_directions
        return new_params, new_trackers, new_directions

    def update(self, params, state: FABState, *args, rng_key=None) -> OptStep:
        del rng_key  # the state carries the shared key
        params = FABParams(*params)
        lam = self.penalty_at(state.iter_num).astype(state.penalty.dtype)
        trackers, directions = state.trackers, state.directions
        power = validation.concrete_float(self.penalty_power, "penalty_power")
        if power is None or power != 0.0:
            # λ may have changed since the directions were computed: refresh them (the trackers
            # keep their invariant Σ s = Σ d by adding the change).
            fresh = self._directions(params, lam, args)
            trackers = FABParams(
                *(
                    optax.tree.add(s, optax.tree.sub(d_new, d_old))
                    for s, d_new, d_old in zip(trackers, fresh, directions, strict=True)
                )
            )
            directions = fresh
        zero = jnp.zeros((), state.penalty.dtype)
        for r in range(self.inner_steps):
            x_step = self.upper_stepsize if r == self.inner_steps - 1 else zero
            round_index = state.iter_num * self.inner_steps + r
            params, trackers, directions = self._round(
                params, trackers, directions, state.rng_key, round_index, lam, x_step, args
            )
        error, consensus = self._error(params, directions)
        dtype = state.error.dtype
        new_state = FABState(
            iter_num=state.iter_num + 1,
            error=error.astype(dtype),
            consensus_error=consensus.astype(dtype),
            penalty=lam,
            trackers=trackers,
            directions=directions,
            rng_key=state.rng_key,
            status=jnp.int32(SolverStatus.RUNNING),
        )
        return OptStep(params, self._with_status(params, new_state))

    def optimality_fun(self, params, *args, rng_key=None):
        """``r^v_i = (v_i - v̄) + (1/n) Σ_j d^v_j(x̄, ȳ, z̄)`` at ``λ_{maxiter - 1}``."""
        del rng_key
        params = FABParams(*params)
        lam = self.penalty_at(self.maxiter - 1).astype(jnp.result_type(*jax.tree.leaves(params)))
        mean = _agent_mean(params, self.axis_name)
        if self.axis_name is None:
            n = _num_agents(params.x, None)
            at_mean = jax.tree.map(lambda m: jnp.broadcast_to(m[None], (n, *m.shape)), mean)
            lift = lambda m: m[None]
        else:
            at_mean = mean
            lift = lambda m: m
        direction_mean = _agent_mean(self._directions(at_mean, lam, args), self.axis_name)
        return FABParams(
            *(
                jax.tree.map(lambda v, m, d: (v - lift(m)) + lift(d), p, mu, dm)
                for p, mu, dm in zip(params, mean, direction_mean, strict=True)
            )
        )
