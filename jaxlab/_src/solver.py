"""The solver base: jaxopt's shape without importing jaxopt at run time.

A solver is a dataclass with ``init_state(init_params, *args) -> State``,
``update(params, state, *args) -> OptStep``, ``optimality_fun(params, *args)`` (a pytree that is
zero at a solution) and ``run(init_params, *args) -> OptStep``, which loops ``update`` inside
``jax.lax.while_loop`` until ``state.error <= tol``, ``maxiter`` or a non-finite iterate (or, with
``unroll=True``, inside a ``jax.lax.scan`` of exactly ``maxiter`` steps, differentiable by
unrolling). States are NamedTuples carrying ``iter_num`` and ``error``, and, for jaxlab's solvers,
an int32 ``status`` (a :class:`SolverStatus` code) that tells apart why the loop stopped.

With ``implicit_diff=True`` the solution returned by ``run`` is differentiated by the implicit
function theorem applied to ``optimality_fun`` F: the derivative of z*(θ) solves
∂₁F(z*, θ) dz = −∂₂F(z*, θ) dθ, so gradients never flow through the loop. That linear system is
solved by ``implicit_diff_solve(matvec, b) -> x``. By default (None) a problem with up to
``DENSE_SOLVE_MAX_SIZE`` unknowns goes through ``jax.lax.custom_root`` with a dense solve of the
materialised Jacobian (:func:`dense_tangent_solve`); above that, or with a user's solve, the
tangent is attached by a ``jax.custom_jvp`` whose system goes through
``jax.lax.custom_linear_solve`` (the solve serves the system and its transpose, so forward and
reverse mode both work), by default matrix-free GMRES (:func:`gmres_tangent_solve`, one
Jacobian-vector product per Krylov step). :func:`cg_tangent_solve` (symmetric positive definite
∂₁F) and any callable of that signature can be passed.

Fields: the base's fields are keyword-only, so a subclass declares its own fields (callables
first, without defaults) as plain dataclass fields and writes no ``__init__``.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.flatten_util import ravel_pytree

from jaxlab._src.validation import (
    check_bool,
    check_callable,
    check_floating_tree,
    check_int,
    check_nonnegative,
    check_tree_like,
    tree_all_finite,
)

__all__ = [
    "DENSE_SOLVE_MAX_SIZE",
    "IterativeSolver",
    "OptStep",
    "SolverStatus",
    "cg_tangent_solve",
    "default_tangent_solve",
    "dense_tangent_solve",
    "gmres_tangent_solve",
]

#: Largest number of unknowns solved densely by default. The dense path costs n Jacobian-vector
#: products plus an O(n³) factorisation and n² memory; for n <= 1000 that is at most a few
#: milliseconds and 8 MB (float64) and exact, above it matrix-free Krylov steps are cheaper.
DENSE_SOLVE_MAX_SIZE = 1000


class SolverStatus(enum.IntEnum):
    """Why a solver's loop stopped: the codes of the int32 ``state.status`` field.

    ``update`` sets the status of the state it returns, so a hand-written ``update`` loop reads
    the same codes as ``run``, which loops while the status is ``RUNNING``:

    - ``RUNNING`` (0): neither converged nor stopped (also the status of ``init_state``).
    - ``CONVERGED`` (1): ``state.error <= tol``.
    - ``MAXITER`` (2): ``maxiter`` updates done without converging.
    - ``NONFINITE`` (3): the iterate (a params leaf) or ``state.error`` is NaN or infinite (an
      infinite error counts only where the solver documents it as meaningful, e.g. Hom-PGD's
      "not feasible yet"). The returned params and state are the non-finite ones, as produced
      (nothing is clamped), so the step that broke is visible.
    - ``BAD_BATCH_SIZE`` (4): a traced ``batch_schedule`` returned a size outside
      ``[1, 2^31 - 1]`` (the stochastic VI solvers): that step is not taken, params and state are
      those before it.
    - ``PRIMAL_INFEASIBLE`` (5): the update found a certificate that the problem has no feasible
      point (:class:`jaxlab.solvers.DenseQP`'s ADMM; also :class:`jaxlab.nn.DisjunctiveLayer`'s
      status for an input whose rules are infeasible).
    - ``DUAL_INFEASIBLE`` (6): the update found a certificate that the objective is unbounded
      below on the feasible set (:class:`jaxlab.solvers.DenseQP`'s ADMM).

    Codes are ordered: every code ``>= NONFINITE`` is a failure. ``NONFINITE`` takes precedence
    over ``CONVERGED`` and ``MAXITER``, and a failure reported by ``update`` over the others.

    Examples:
      >>> SolverStatus(2).name
      'MAXITER'
      >>> int(SolverStatus.CONVERGED)
      1
    """

    RUNNING = 0
    CONVERGED = 1
    MAXITER = 2
    NONFINITE = 3
    BAD_BATCH_SIZE = 4
    PRIMAL_INFEASIBLE = 5
    DUAL_INFEASIBLE = 6


class OptStep(NamedTuple):
    """What ``update`` and ``run`` return: the parameters and the solver state.

    Examples:
      >>> step = OptStep(params=1.0, state=None)
      >>> step.params
      1.0
    """

    params: Any
    state: Any


def _check_linear_system(linear_fn, rhs, *, tol=0.0, atol=0.0, maxiter=None) -> None:
    """Eager checks of a tangent solve's arguments (shapes only: works on traced ``rhs``)."""
    check_callable(linear_fn, "linear_fn", signature="linear_fn(x) -> like rhs")
    check_floating_tree(rhs, "rhs")
    check_nonnegative(tol, "tol")
    check_nonnegative(atol, "atol")
    if maxiter is not None:
        check_int(maxiter, "maxiter", minimum=1)
    out = jax.eval_shape(linear_fn, rhs)
    check_tree_like(out, rhs, "linear_fn(rhs)", "rhs")


def dense_tangent_solve(linear_fn, rhs):
    """Solves ``linear_fn(x) = rhs`` for a pytree ``x`` through the dense Jacobian (small problems).

    Examples:
      >>> x = dense_tangent_solve(lambda v: 2.0 * v, jnp.array([4.0, 6.0]))
      >>> x.tolist()
      [2.0, 3.0]
    """
    _check_linear_system(linear_fn, rhs)
    flat_rhs, unravel = ravel_pytree(rhs)

    def flat_fn(v):
        return ravel_pytree(linear_fn(unravel(v)))[0]

    matrix = jax.jacfwd(flat_fn)(jnp.zeros_like(flat_rhs))
    return unravel(jnp.linalg.solve(matrix, flat_rhs))


def gmres_tangent_solve(linear_fn, rhs, *, tol=1e-6, atol=0.0, restart=20, maxiter=None):
    """Solves ``linear_fn(x) = rhs`` matrix-free by GMRES (any invertible linear map, pytrees).

    One call of ``linear_fn`` (a Jacobian-vector product of ``optimality_fun``) per Krylov
    step; the matrix is never formed. Bind the options with ``functools.partial`` to pass it
    as a solver's ``implicit_diff_solve``.

    Args:
      linear_fn: the linear map, pytree -> pytree of the same structure.
      rhs: right-hand side pytree.
      tol, atol: relative and absolute residual tolerances (``jax.scipy.sparse.linalg.gmres``).
      restart: Krylov subspace size between restarts.
      maxiter: maximum number of restarts (None: GMRES's default).

    Returns:
      The solution pytree.

    Examples:
      >>> matrix = jnp.array([[3.0, 1.0], [-1.0, 2.0]])  # not symmetric
      >>> x = gmres_tangent_solve(lambda v: matrix @ v, jnp.array([5.0, 3.0]))
      >>> [round(v, 4) for v in x.tolist()]
      [1.0, 2.0]
    """
    _check_linear_system(linear_fn, rhs, tol=tol, atol=atol, maxiter=maxiter)
    check_int(restart, "restart", minimum=1)
    x, _ = jax.scipy.sparse.linalg.gmres(
        linear_fn, rhs, tol=tol, atol=atol, restart=restart, maxiter=maxiter
    )
    return x


def cg_tangent_solve(linear_fn, rhs, *, tol=1e-6, atol=0.0, maxiter=None):
    """Solves ``linear_fn(x) = rhs`` matrix-free by conjugate gradients (symmetric positive
    definite maps only, e.g. the Hessian of a strongly convex objective; pytrees).

    Args:
      linear_fn: the symmetric positive definite linear map, pytree -> pytree.
      rhs: right-hand side pytree.
      tol, atol: relative and absolute residual tolerances (``jax.scipy.sparse.linalg.cg``).
      maxiter: maximum number of iterations (None: CG's default).

    Returns:
      The solution pytree.

    Examples:
      >>> matrix = jnp.array([[4.0, 1.0], [1.0, 3.0]])
      >>> x = cg_tangent_solve(lambda v: matrix @ v, jnp.array([6.0, 7.0]))
      >>> [round(v, 4) for v in x.tolist()]
      [1.0, 2.0]
    """
    _check_linear_system(linear_fn, rhs, tol=tol, atol=atol, maxiter=maxiter)
    x, _ = jax.scipy.sparse.linalg.cg(linear_fn, rhs, tol=tol, atol=atol, maxiter=maxiter)
    return x


def default_tangent_solve(linear_fn, rhs):
    """The solve used when ``implicit_diff_solve=None``: dense up to
    ``DENSE_SOLVE_MAX_SIZE`` unknowns (:func:`dense_tangent_solve`), GMRES above
    (:func:`gmres_tangent_solve`). The size is static, so the choice is made at trace time.

    Examples:
      >>> double = lambda tree: jax.tree.map(lambda v: 2.0 * v, tree)
      >>> x = default_tangent_solve(double, {"a": jnp.array([4.0, 6.0])})
      >>> x["a"].tolist()
      [2.0, 3.0]
    """
    _check_linear_system(linear_fn, rhs)
    if optax.tree.size(rhs) <= DENSE_SOLVE_MAX_SIZE:
        return dense_tangent_solve(linear_fn, rhs)
    return gmres_tangent_solve(linear_fn, rhs)


@dataclasses.dataclass(eq=False)
class IterativeSolver:
    """Base class of jaxlab's solvers (jaxopt's shape).

    Subclasses define ``init_state``, ``update`` and ``optimality_fun``; ``run`` is shared. The
    fields below are keyword-only: a subclass declares its own fields (required callables
    first) as ordinary dataclass fields and inherits the generated ``__init__``.

    Attributes:
      maxiter: maximum number of ``update`` calls (static).
      tol: stop when ``state.error <= tol`` (finite, ``>= 0``).
      implicit_diff: differentiate ``run``'s solution through ``jax.lax.custom_root``.
      unroll: loop with ``lax.scan`` over exactly ``maxiter`` steps instead of ``while_loop``
        (early stopping is then done by freezing the iterate once ``error <= tol``).
      jit: jit ``run``.
      implicit_diff_solve: ``solve(matvec, b) -> x`` for the implicit-function linear system
        ∂₁F(z*, θ) x = b (``matvec`` a pytree linear map, a Jacobian-vector product; ``b`` a
        pytree). None: :func:`default_tangent_solve` (dense up to ``DENSE_SOLVE_MAX_SIZE``
        unknowns, matrix-free GMRES above); or e.g. ``functools.partial(gmres_tangent_solve,
        tol=1e-8)``, :func:`cg_tangent_solve` (symmetric positive definite ∂₁F only).

    Stopping: ``run`` loops while the :class:`SolverStatus` of the last update is ``RUNNING``
    (the first update always runs): it stops on ``error <= tol`` (``CONVERGED``), after
    ``maxiter`` updates (``MAXITER``), or as soon as the iterate or the error is not finite
    (``NONFINITE``; a NaN error used to read as converged). A state with a ``status`` field
    receives the code; a state without one (as in the example) stops the same way, and the
    user reads ``error``/``iter_num``. Subclasses set the status in ``update`` with
    ``self._with_status(params, state)``.

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
      ...                        State(state.iter_num + 1, optax.tree.norm(grad)))
      >>> solver = GradientDescent(maxiter=100, tol=1e-6)
      >>> round(float(solver.run(jnp.zeros(()), jnp.asarray(3.0)).params), 4)
      3.0
      >>> float(jax.grad(lambda t: solver.run(jnp.zeros(()), t).params)(3.0))
      1.0
    """

    _: dataclasses.KW_ONLY
    maxiter: int = 500
    tol: float = 1e-6
    implicit_diff: bool = True
    unroll: bool = False
    jit: bool = True
    implicit_diff_solve: Callable[[Callable[[Any], Any], Any], Any] | None = None

    def __post_init__(self):
        check_int(self.maxiter, "maxiter", minimum=1)
        check_nonnegative(self.tol, "tol")
        check_bool(self.implicit_diff, "implicit_diff")
        check_bool(self.unroll, "unroll")
        check_bool(self.jit, "jit")
        check_callable(
            self.implicit_diff_solve,
            "implicit_diff_solve",
            signature="solve(matvec, b) -> x",
            allow_none=True,
        )

    # -- to be defined by subclasses -------------------------------------------------------
    def init_state(self, init_params, *args, **kwargs):  # pragma: no cover - interface
        raise TypeError(f"{type(self).__name__} does not define init_state")

    def update(self, params, state, *args, **kwargs) -> OptStep:  # pragma: no cover
        raise TypeError(f"{type(self).__name__} does not define update")

    def optimality_fun(self, params, *args, **kwargs):  # pragma: no cover - interface
        raise TypeError(f"{type(self).__name__} does not define optimality_fun")

    # -- shared --------------------------------------------------------------------------
    def _nonfinite(self, params, state) -> jax.Array:
        """Whether the iterate failed: a non-finite params leaf or a NaN error (overridable)."""
        return jnp.isnan(jnp.asarray(state.error)) | ~tree_all_finite(params)

    def _step_status(self, params, state) -> jax.Array:
        """The :class:`SolverStatus` code (int32) of the state an ``update`` returned."""
        error = jnp.asarray(state.error)
        status = jnp.where(
            error <= self.tol,
            jnp.int32(SolverStatus.CONVERGED),
            jnp.where(
                state.iter_num >= self.maxiter,
                jnp.int32(SolverStatus.MAXITER),
                jnp.int32(SolverStatus.RUNNING),
            ),
        )
        status = jnp.where(
            self._nonfinite(params, state), jnp.int32(SolverStatus.NONFINITE), status
        )
        reported = getattr(state, "status", None)
        if reported is not None:  # a failure the update itself reported wins
            status = jnp.where(reported >= SolverStatus.NONFINITE, reported, status)
        return status.astype(jnp.int32)

    def _with_status(self, params, state):
        """``state`` with its ``status`` field set from the step (states without one: as is)."""
        if "status" not in getattr(state, "_fields", ()):
            return state
        return state._replace(status=self._step_status(params, state))

    def _loop(self, init_params, *args, **kwargs) -> OptStep:
        state = self.init_state(init_params, *args, **kwargs)
        running = jnp.int32(SolverStatus.RUNNING)

        def step(params, state):
            new_params, new_state = self.update(params, state, *args, **kwargs)
            status = self._step_status(new_params, new_state)
            if "status" in getattr(new_state, "_fields", ()):
                new_state = new_state._replace(status=status)
            return new_params, new_state, status

        if self.unroll:

            def body(carry, _):
                params, state, status = carry
                new = step(params, state)
                done = status != running  # frozen once stopped (converged, maxiter, failed)
                keep = lambda old, new: optax.tree.where(done, old, new)
                return keep((params, state, status), new), None

            (params, state, _), _ = jax.lax.scan(
                body, (init_params, state, running), None, self.maxiter
            )
            return OptStep(params, state)

        def cond(carry):
            return carry[2] == running

        def body(carry):
            return step(carry[0], carry[1])

        params, state, _ = jax.lax.while_loop(cond, body, (init_params, state, running))
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
        # The loop runs on gradient-stopped inputs; the solution then gets the implicit
        # derivative -(d1 F)^-1 d2 F w.r.t. the args attached.
        stopped = jax.lax.stop_gradient((init_params, args, kwargs))
        params, state = self._loop(stopped[0], *stopped[1], **stopped[2])
        params = jax.lax.stop_gradient(params)
        if self.implicit_diff_solve is None and optax.tree.size(params) <= DENSE_SOLVE_MAX_SIZE:
            # Small default: custom_root with the dense solve (forward and reverse mode).
            params = jax.lax.custom_root(
                lambda p: self.optimality_fun(p, *args, **kwargs),
                params,
                lambda _, solution: solution,
                dense_tangent_solve,
            )
        else:
            solve = self.implicit_diff_solve or default_tangent_solve
            params = _attach_implicit_derivative(self.optimality_fun, solve, params, args, kwargs)
        return OptStep(params, state)


def _attach_implicit_derivative(optimality_fun, solve, solution, args, kwargs):
    """``solution`` unchanged, with the tangent dz = -(∂₁F)⁻¹ ∂₂F dθ of F = optimality_fun.

    The linear system goes through ``jax.lax.custom_linear_solve`` with ``solve`` for it and for
    its transpose, so reverse mode never transposes the solve itself. (``custom_root`` would:
    a Krylov solve, itself a custom_linear_solve, cannot be transposed there, JAX 0.10.)
    """

    @jax.custom_jvp
    def attach(solution, args, kwargs):
        return solution

    @attach.defjvp
    def attach_jvp(primals, tangents):
        solution, args, kwargs = primals
        _, args_dot, kwargs_dot = tangents
        _, rhs = jax.jvp(
            lambda a, k: optimality_fun(solution, *a, **k), (args, kwargs), (args_dot, kwargs_dot)
        )

        def matvec(v):
            return jax.jvp(lambda p: optimality_fun(p, *args, **kwargs), (solution,), (v,))[1]

        dz = jax.lax.custom_linear_solve(matvec, rhs, solve=solve, transpose_solve=solve)
        return solution, jax.tree.map(jnp.negative, dz)

    return attach(solution, args, kwargs)
