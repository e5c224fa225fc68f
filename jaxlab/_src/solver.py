"""The solver base: jaxopt's shape without importing jaxopt at run time.

A solver is a dataclass with ``init_state(init_params, *args) -> State``,
``update(params, state, *args) -> OptStep``, ``optimality_fun(params, *args)`` (a pytree that is
zero at a solution) and ``run(init_params, *args) -> OptStep``, which loops ``update`` inside
``jax.lax.while_loop`` until ``state.error <= tol`` or ``maxiter`` (or, with ``unroll=True``,
inside a ``jax.lax.scan`` of exactly ``maxiter`` steps, differentiable by unrolling). States are
NamedTuples carrying ``iter_num`` and ``error``.

With ``implicit_diff=True`` the solution returned by ``run`` is differentiated by the implicit
function theorem through ``jax.lax.custom_root`` applied to ``optimality_fun``: the derivative of
z*(θ) solves ∂₁F(z*, θ) dz = −∂₂F(z*, θ) dθ, so gradients never flow through the loop.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

__all__ = ["IterativeSolver", "OptStep", "dense_tangent_solve", "tree_l2_norm"]


class OptStep(NamedTuple):
    """What ``update`` and ``run`` return: the parameters and the solver state.

    Examples:
      >>> step = OptStep(params=1.0, state=None)
      >>> step.params
      1.0
    """

    params: Any
    state: Any


def tree_l2_norm(tree: Any) -> jax.Array:
    """Euclidean norm of a pytree, treated as one flat vector.

    Examples:
      >>> float(tree_l2_norm({"a": jnp.array([3.0]), "b": jnp.array([4.0])}))
      5.0
    """
    leaves = jax.tree.leaves(tree)
    if not leaves:
        return jnp.zeros(())
    return jnp.sqrt(sum(jnp.sum(jnp.abs(x) ** 2) for x in leaves))


def dense_tangent_solve(linear_fn, rhs):
    """Solves ``linear_fn(x) = rhs`` for a pytree ``x`` through the dense Jacobian (small problems).

    Examples:
      >>> x = dense_tangent_solve(lambda v: 2.0 * v, jnp.array([4.0, 6.0]))
      >>> x.tolist()
      [2.0, 3.0]
    """
    flat_rhs, unravel = ravel_pytree(rhs)

    def flat_fn(v):
        return ravel_pytree(linear_fn(unravel(v)))[0]

    matrix = jax.jacfwd(flat_fn)(jnp.zeros_like(flat_rhs))
    return unravel(jnp.linalg.solve(matrix, flat_rhs))


@dataclasses.dataclass(eq=False)
class IterativeSolver:
    """Base class of jaxlab's solvers (jaxopt's shape).

    Subclasses define ``init_state``, ``update`` and ``optimality_fun``; ``run`` is shared.

    Attributes:
      maxiter: maximum number of ``update`` calls (static).
      tol: stop when ``state.error <= tol``.
      implicit_diff: differentiate ``run``'s solution through ``jax.lax.custom_root``.
      unroll: loop with ``lax.scan`` over exactly ``maxiter`` steps instead of ``while_loop``
        (early stopping is then done by freezing the iterate once ``error <= tol``).
      jit: jit ``run``.

    Examples:
      >>> import dataclasses
      >>> class State(NamedTuple):
      ...     iter_num: jax.Array
      ...     error: jax.Array
      >>> @dataclasses.dataclass(eq=False)
      ... class GradientDescent(IterativeSolver):
      ...     stepsize: float = 0.5
      ...     def init_state(self, params, target):
      ...         return State(jnp.asarray(0), jnp.asarray(jnp.inf))
      ...     def optimality_fun(self, params, target):
      ...         return params - target  # gradient of 0.5 * ||params - target||^2
      ...     def update(self, params, state, target):
      ...         grad = self.optimality_fun(params, target)
      ...         return OptStep(params - self.stepsize * grad,
      ...                        State(state.iter_num + 1, tree_l2_norm(grad)))
      >>> solver = GradientDescent(maxiter=100, tol=1e-6)
      >>> round(float(solver.run(jnp.zeros(()), jnp.asarray(3.0)).params), 4)
      3.0
      >>> float(jax.grad(lambda t: solver.run(jnp.zeros(()), t).params)(3.0))
      1.0
    """

    maxiter: int = 500
    tol: float = 1e-6
    implicit_diff: bool = True
    unroll: bool = False
    jit: bool = True

    def __post_init__(self):
        if not isinstance(self.maxiter, int) or self.maxiter < 1:
            raise ValueError(f"maxiter must be a positive int, got {self.maxiter!r}")
        if self.tol < 0:
            raise ValueError(f"tol must be >= 0, got {self.tol!r}")

    # -- to be defined by subclasses -------------------------------------------------------
    def init_state(self, init_params, *args, **kwargs):  # pragma: no cover - interface
        raise TypeError(f"{type(self).__name__} does not define init_state")

    def update(self, params, state, *args, **kwargs) -> OptStep:  # pragma: no cover
        raise TypeError(f"{type(self).__name__} does not define update")

    def optimality_fun(self, params, *args, **kwargs):  # pragma: no cover - interface
        raise TypeError(f"{type(self).__name__} does not define optimality_fun")

    # -- shared --------------------------------------------------------------------------
    def _loop(self, init_params, *args, **kwargs) -> OptStep:
        state = self.init_state(init_params, *args, **kwargs)
        tol = self.tol

        if self.unroll:

            def body(carry, _):
                params, state = carry
                new_params, new_state = self.update(params, state, *args, **kwargs)
                done = (state.iter_num > 0) & (state.error <= tol)
                keep = lambda old, new: jax.tree.map(lambda o, n: jnp.where(done, o, n), old, new)
                return (keep(params, new_params), keep(state, new_state)), None

            (params, state), _ = jax.lax.scan(body, (init_params, state), None, self.maxiter)
            return OptStep(params, state)

        def cond(carry):
            _, state = carry
            first = state.iter_num == 0
            return first | ((state.iter_num < self.maxiter) & (state.error > tol))

        def body(carry):
            return tuple(self.update(*carry, *args, **kwargs))

        params, state = jax.lax.while_loop(cond, body, (init_params, state))
        return OptStep(params, state)

    def run(self, init_params, *args, **kwargs) -> OptStep:
        """Runs the solver from ``init_params`` and returns ``OptStep(params, state)``."""
        implicit = self.implicit_diff and not self.unroll
        run_fn = self._implicit_run if implicit else self._loop
        if self.jit:
            # One jitted function per solver instance and mode, so repeated `run` calls reuse
            # the compiled loop (a fresh `jax.jit` of a bound method would retrace every call).
            # Solvers are treated as immutable once built; use dataclasses.replace to change one.
            cache = self.__dict__.setdefault("_jitted_runs", {})
            if implicit not in cache:
                cache[implicit] = jax.jit(run_fn)
            run_fn = cache[implicit]
        return run_fn(init_params, *args, **kwargs)

    def _implicit_run(self, init_params, *args, **kwargs) -> OptStep:
        # The loop runs on gradient-stopped inputs; the solution then passes through
        # custom_root with a solve that returns it unchanged, which attaches the implicit
        # derivative -(d1 F)^-1 d2 F w.r.t. everything `optimality` closes over (the args).
        stopped = jax.lax.stop_gradient((init_params, args, kwargs))
        params, state = self._loop(stopped[0], *stopped[1], **stopped[2])

        def optimality(p):
            return self.optimality_fun(p, *args, **kwargs)

        params = jax.lax.custom_root(
            optimality,
            jax.lax.stop_gradient(params),
            lambda _, solution: solution,
            dense_tangent_solve,
        )
        return OptStep(params, state)
