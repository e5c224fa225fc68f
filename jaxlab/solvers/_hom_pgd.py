"""Hom-PGD⁺: projected gradient descent in the latent ball of a homeomorphism Φ: 𝔹 -> K.

To minimise f over a non-convex set K homeomorphic to the unit ball, Hom-PGD⁺ runs projected
gradient on z with x = Φ(z)::

    z_{k+1} = Π_𝔹(z_k - η_k J_Φ(z_k)^T ∇f(Φ(z_k))),     Π_𝔹(z) = z / max(1, ||z||₂),

so the iterates x_k = Φ(z_k) stay in Φ(𝔹) ⊂ K (up to the learning error of Φ) and every step
costs one vector-Jacobian product. The public code's variant replaces the projection by a
bisection repair toward the last feasible iterate (``repair="bisection"``).

References:
  C. Liu, E. Liang, M. Chen, "Hom-PGD⁺: Fast Reparameterized Optimization over Non-convex
  Ball-Homeomorphic Set", ICML 2026.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from jaxlab._src.solver import IterativeSolver, OptStep, SolverStatus
from jaxlab._src.validation import (
    check_callable,
    check_choice,
    check_int,
    check_key,
    check_nonnegative,
    check_positive,
    check_positive_int,
    check_real,
    concrete_float,
    is_concrete,
)
from jaxlab.nn import sample_latents

__all__ = [
    "GapSplit",
    "HomPGD",
    "HomPGDState",
    "best_feasible_start",
    "bisection_repair",
    "latent_starts",
    "project_ball",
    "select_penalty_weight",
    "split_gap",
]

_PROJECTIONS = ("ball", "box", "none")
_REPAIRS = ("none", "bisection", "radial")
_STOPPING = ("gradient_mapping", "objective_change", "none")


def _safe_norm(z: jax.Array, axis: int = -1) -> jax.Array:
    """||z|| with a finite gradient at 0 (the gradient there is taken as 0)."""
    squared = jnp.sum(z * z, axis=axis, keepdims=True)
    positive = squared > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, squared, 1.0)), 0.0)


def project_ball(z: ArrayLike, radius: ArrayLike = 1.0) -> jax.Array:
    """Euclidean projection onto the ball of radius ``radius`` (over the last axis).

    ``Π(z) = z * min(1, r / ||z||₂)``: points inside are unchanged, points outside are scaled
    onto the sphere. Leading axes are batch axes.

    Args:
      z: array (..., n).
      radius: r > 0.

    Returns:
      The projected array, same shape and dtype as ``z``.

    Examples:
      >>> import jax.numpy as jnp
      >>> project_ball(jnp.array([3.0, 4.0])).tolist()
      [0.6000000238418579, 0.800000011920929]
      >>> project_ball(jnp.array([0.3, 0.4])).tolist()
      [0.30000001192092896, 0.4000000059604645]

    References:
      C. Liu, E. Liang, M. Chen, "Hom-PGD⁺", ICML 2026 (the latent projection Π_𝔹).
    """
    z = jnp.asarray(z)
    if not jnp.issubdtype(z.dtype, jnp.floating):
        raise TypeError(f"z must be a floating array, got dtype {z.dtype}")
    if z.ndim < 1:
        raise ValueError(f"z must have at least one axis, got shape {z.shape}")
    if np.ndim(radius) == 0:
        check_positive(radius, "radius")
    elif is_concrete(radius) and not np.all(np.asarray(radius) > 0):  # per-row radii
        raise ValueError(f"radius must be > 0, got {radius!r}")
    radius = jnp.asarray(radius, z.dtype)
    # Not optax.projections.projection_l2_ball: that projects a whole pytree onto one ball, this
    # projects every row (leading batch axes, per-row radii) with a norm whose gradient at 0 is
    # finite (the latent iterates start at the centre).
    return z / jnp.maximum(1.0, _safe_norm(z) / radius)


def _bisect(z_feasible, z_candidate, is_feasible, num_steps: int, tol: float) -> jax.Array:
    """Largest α found on [0, 1] with ``is_feasible(z_f + α (z_c - z_f))``, given α = 0 is."""
    dtype = z_feasible.dtype

    def cond(carry):
        lo, hi, k = carry
        return (k < num_steps) & (hi - lo >= tol)

    def body(carry):
        lo, hi, k = carry
        mid = 0.5 * (lo + hi)
        ok = is_feasible(z_feasible + mid * (z_candidate - z_feasible))
        return jnp.where(ok, mid, lo), jnp.where(ok, hi, mid), k + 1

    init = (jnp.zeros((), dtype), jnp.ones((), dtype), jnp.zeros((), jnp.int32))
    lo, _, _ = jax.lax.while_loop(cond, body, init)
    return lo


def bisection_repair(
    z_feasible: ArrayLike,
    z_candidate: ArrayLike,
    is_feasible: Callable[[jax.Array], jax.Array],
    num_steps: int = 10,
    tol: float = 1e-5,
) -> jax.Array:
    """Pulls an infeasible candidate back along the segment toward a feasible point.

    Returns ``z_f + α (z_c - z_f)`` with α = 1 when the candidate is feasible, otherwise the
    feasible end of a bisection bracket on α ∈ [0, 1] after at most ``num_steps`` halvings
    (stopping once the bracket is shorter than ``tol``). ``z_feasible`` is assumed feasible, so
    the output is feasible whenever it is.

    Args:
      z_feasible: a feasible point (the last feasible iterate).
      z_candidate: the proposed point, same shape and dtype.
      is_feasible: ``point -> bool`` scalar (traceable).
      num_steps: maximum number of halvings (>= 1).
      tol: stop when the bracket on α is shorter than this (> 0).

    Returns:
      The repaired point, on the segment [z_feasible, z_candidate].

    Examples:
      >>> import jax.numpy as jnp
      >>> inside_unit_disk = lambda z: jnp.sum(z**2) <= 1.0
      >>> z = bisection_repair(jnp.zeros(2), jnp.array([2.0, 0.0]), inside_unit_disk,
      ...                      num_steps=30, tol=1e-7)
      >>> round(float(z[0]), 5), float(z[1])
      (1.0, 0.0)

    References:
      C. Liu, E. Liang, M. Chen, "Hom-PGD⁺", ICML 2026 (bisection repair of the public code).
    """
    z_feasible = jnp.asarray(z_feasible)
    z_candidate = jnp.asarray(z_candidate)
    if z_feasible.shape != z_candidate.shape:
        raise ValueError(
            f"z_feasible and z_candidate must have the same shape, got {z_feasible.shape} and "
            f"{z_candidate.shape}"
        )
    if not jnp.issubdtype(z_feasible.dtype, jnp.floating):
        raise TypeError(f"z_feasible must be a floating array, got dtype {z_feasible.dtype}")
    z_candidate = z_candidate.astype(z_feasible.dtype)
    check_positive_int(num_steps, "num_steps")
    check_positive(tol, "tol")
    check_callable(is_feasible, "is_feasible", signature="is_feasible(z) -> bool")
    candidate_ok = jnp.asarray(is_feasible(z_candidate))
    if candidate_ok.shape != ():
        raise ValueError(f"is_feasible must return a scalar, got shape {candidate_ok.shape}")
    alpha = jax.lax.cond(
        candidate_ok,
        lambda: jnp.ones((), z_feasible.dtype),
        lambda: _bisect(z_feasible, z_candidate, is_feasible, num_steps, tol),
    )
    return z_feasible + alpha * (z_candidate - z_feasible)


class HomPGDState(NamedTuple):
    """State of :class:`HomPGD`; every field describes the current iterate z_k.

    Attributes:
      iter_num: number of updates done (int32).
      stepsize: the adaptive step η_k used by the next update.
      value: f(Φ(z_k)).
      error: the stopping quantity (gradient-mapping norm, ``|Δf|`` for ``"objective_change"``,
        inf for ``"none"``, which never stops early).
      violation: max(0, max_j g_j(Φ(z_k))) with the solver's ``constraint_fn`` (0 without one):
        the learning error of Φ seen at the iterate.
      latent_grad: ∇_z f(Φ(z_k)), carried so that each update costs exactly one VJP.
      status: int32 :class:`~jaxlab.solvers.SolverStatus` code: ``RUNNING``, ``CONVERGED``,
        ``MAXITER`` or ``NONFINITE`` (z_k, f(Φ(z_k)) or its gradient is NaN/inf, or the error is
        NaN; an infinite error alone is the ``"objective_change"`` rule's "not feasible yet").

    Examples:
      >>> HomPGDState._fields
      ('iter_num', 'stepsize', 'value', 'error', 'violation', 'latent_grad', 'status')
    """

    iter_num: jax.Array
    stepsize: jax.Array
    value: jax.Array
    error: jax.Array
    violation: jax.Array
    latent_grad: jax.Array
    status: jax.Array


@dataclasses.dataclass(eq=False)
class HomPGD(IterativeSolver):
    """Projected gradient in the latent ball of a homeomorphism Φ: 𝔹 -> K (Hom-PGD⁺).

    For ``x = Φ(z, *args)`` and objective ``f(x, *args)``, one update is::

        g_k     = J_Φ(z_k)^T ∇f(Φ(z_k))                   (one jax.vjp)
        z_{k+1} = P(z_k - η_k g_k)                         (P: ball, box or no projection)
        η_{k+1} = max(decay η_k, η_min) if f(Φ(z_{k+1})) > f(Φ(z_k)) else η_k

    With ``repair="bisection"`` (the public code's rule) an infeasible z_{k+1} (violation of
    ``constraint_fn`` above ``feasibility_tol``) is pulled back by :func:`bisection_repair`
    toward z_k when z_k is feasible; with no feasible anchor the less violated of z_k, z_{k+1}
    is kept. ``repair="radial"`` is the authors' QCQP rule (``homeo_bisection`` in
    emliang/Homeomorphic-Optimization): an infeasible z_{k+1} is shrunk toward the latent
    centre, to ``α z_{k+1}`` with α found by bisection on [0, 1] (so the step keeps its
    component along the boundary and the iterate can slide along it, where the last-iterate
    anchor stalls once the step points out of K). One deviation: α is the feasible end of the
    final bracket, where the code takes its midpoint, which can be violated by more than
    ``feasibility_tol`` (so its end points can fail the feasibility test).

    ``optimality_fun`` is the latent gradient mapping
    ``G(z) = (z - P(z - η₀ ∇_z f(Φ(z)))) / η₀`` (η₀ = ``stepsize``), zero exactly at the
    stationary points of z -> f(Φ(z)) over the latent domain. Stationarity in z is not
    stationarity in x where Φ flattens regions.

    Stopping (``stopping``, default ``"gradient_mapping"``): ``"gradient_mapping"`` stops when
    ``||G(z_k)|| <= tol``; ``"objective_change"`` (the note's rule for the 2-D star toy) when
    ``|f_k - f_{k-1}| <= tol`` while z_k is feasible; ``"none"`` (the authors' QCQP loop,
    ``run_first_order_loop`` in emliang/Homeomorphic-Optimization) never stops early: all
    ``maxiter`` updates run and the status is ``MAXITER``. With the bisection repair, a step the
    repair cut short changes f little, so ``"objective_change"`` can stop there far from a
    stationary point; ``"none"`` keeps descending like the authors' code.

    Args:
      fun: objective ``fun(x, *args) -> scalar``.
      homeomorphism: ``homeomorphism(z, *args) -> x``, e.g. a trained
        ``jaxlab.nn.InvertibleNet`` wrapped as ``lambda z, c: net(z, c)[0]``.
      constraint_fn: optional ``constraint_fn(x, *args) -> residuals`` (<= 0 feasible); used for
        the reported violation, the bisection repair and the code's stopping rule.
      stepsize: initial step η₀ > 0.
      adaptive_decay: factor in (0, 1] applied to η when the objective increased (1: fixed).
      min_stepsize: floor of η, in [0, stepsize].
      repair: ``"none"`` (paper), ``"bisection"`` (toward the last iterate) or ``"radial"``
        (toward the latent centre: the authors' QCQP code); both need ``constraint_fn``.
      projection: latent domain: ``"ball"`` (paper, n <= 2 latents), ``"box"`` ([-1, 1]^n, the
        code's latent cube for n > 2) or ``"none"`` (the code's unprojected step).
      stopping: ``"gradient_mapping"`` (default), ``"objective_change"`` (the star toy's
        ``|Δf|`` rule) or ``"none"`` (the authors' QCQP loop: exactly ``maxiter`` updates).
      bisection_steps: maximum halvings of the repair (10; 20 in the code's 2-D toy).
      bisection_tol: bracket length at which the repair stops.
      feasibility_tol: a residual above this is a violation (repair and stopping).
      maxiter: maximum number of updates (keyword-only, as are the fields below).
      tol: stopping tolerance.
      implicit_diff: differentiate ``run``'s solution by the implicit function theorem on
        ``optimality_fun`` (valid at a nondegenerate stationary point).
      unroll: loop with ``lax.scan`` over ``maxiter`` steps.
      jit: jit ``run``.
      implicit_diff_solve: the linear solve of the implicit derivative, ``solve(matvec, b)``
        (None: dense for up to 1000 latents, GMRES above; see ``gmres_tangent_solve``).

    Examples:
      Minimise a linear function over the star-shaped set ``||x|| <= 1 + 0.6 sin(4θ)``
      through its exact radial homeomorphism:

      >>> import jax, jax.numpy as jnp
      >>> def star(z):
      ...     return z * (1.0 + 0.6 * jnp.sin(4.0 * jnp.arctan2(z[1], z[0])))
      >>> solver = HomPGD(lambda x: -x[0], star, stepsize=0.05, maxiter=2000, tol=1e-6)
      >>> z, state = solver.run(jnp.array([0.2, 0.1]))
      >>> round(float(jnp.linalg.norm(z)), 4)  # the optimum lies on ∂K = Φ(∂𝔹)
      1.0
      >>> round(float(state.value), 4)  # max of R(θ) cos θ over the boundary: 1.4960
      -1.496

    References:
      C. Liu, E. Liang, M. Chen, "Hom-PGD⁺: Fast Reparameterized Optimization over Non-convex
      Ball-Homeomorphic Set", ICML 2026.
    """

    fun: Callable[..., jax.Array]
    homeomorphism: Callable[..., jax.Array]
    constraint_fn: Callable[..., jax.Array] | None = None
    stepsize: float = 0.1
    adaptive_decay: float = 0.999
    min_stepsize: float = 1e-6
    repair: Literal["none", "bisection"] = "none"
    projection: Literal["ball", "box", "none"] = "ball"
    stopping: Literal["gradient_mapping", "objective_change"] = "gradient_mapping"
    bisection_steps: int = 10
    bisection_tol: float = 1e-5
    feasibility_tol: float = 1e-5
    _: dataclasses.KW_ONLY
    tol: float = 1e-5  # the base's fields (maxiter, tol, implicit_diff, ...) are keyword-only

    def __post_init__(self):
        super().__post_init__()
        check_callable(self.fun, "fun", signature="fun(x, *args) -> scalar")
        check_callable(self.homeomorphism, "homeomorphism", signature="homeomorphism(z, *args)")
        check_callable(self.constraint_fn, "constraint_fn", allow_none=True)
        stepsize = check_positive(self.stepsize, "stepsize")  # None when traced
        check_real(
            self.adaptive_decay, "adaptive_decay", minimum=0.0, maximum=1.0, include_minimum=False
        )
        check_real(self.min_stepsize, "min_stepsize", minimum=0.0, maximum=stepsize)
        check_choice(self.repair, "repair", _REPAIRS)
        check_choice(self.projection, "projection", _PROJECTIONS)
        check_choice(self.stopping, "stopping", _STOPPING)
        if self.constraint_fn is None and self.repair != "none":
            raise ValueError(f"repair={self.repair!r} needs a constraint_fn")
        if self.constraint_fn is None and self.stopping == "objective_change":
            raise ValueError('stopping="objective_change" needs a constraint_fn (feasibility)')
        check_positive_int(self.bisection_steps, "bisection_steps")
        check_positive(self.bisection_tol, "bisection_tol")
        check_nonnegative(self.feasibility_tol, "feasibility_tol")

    # -- pieces ------------------------------------------------------------------------------
    def _project(self, z: jax.Array) -> jax.Array:
        if self.projection == "ball":
            return project_ball(z)
        if self.projection == "box":
            return jnp.clip(z, -1.0, 1.0)
        return z

    def _violation(self, x: jax.Array, args: tuple) -> jax.Array:
        if self.constraint_fn is None:
            return jnp.zeros((), x.dtype)
        residuals = jnp.asarray(self.constraint_fn(x, *args))
        return jnp.maximum(jnp.max(residuals), 0.0).astype(x.dtype)

    def _objective(self, z: jax.Array, args: tuple) -> tuple[jax.Array, jax.Array]:
        x = self.homeomorphism(z, *args)
        value = jnp.asarray(self.fun(x, *args))
        if value.shape != ():
            raise ValueError(f"fun must return a scalar, got shape {value.shape}")
        return value, x

    def _evaluate(self, z: jax.Array, args: tuple):
        (value, x), grad = jax.value_and_grad(self._objective, has_aux=True)(z, args)
        return value.astype(z.dtype), grad, self._violation(x, args)

    def _gradient_mapping(self, z: jax.Array, grad: jax.Array) -> jax.Array:
        eta = jnp.asarray(self.stepsize, z.dtype)
        return (z - self._project(z - eta * grad)) / eta

    def _check_params(self, params: Any) -> jax.Array:
        z = jnp.asarray(params)
        if z.ndim != 1:
            raise ValueError(f"params must be a latent vector of shape (n,), got shape {z.shape}")
        if not jnp.issubdtype(z.dtype, jnp.floating):
            raise TypeError(f"params must be a floating array, got dtype {z.dtype}")
        return z

    # -- the solver interface ----------------------------------------------------------------
    def init_state(self, init_params: ArrayLike, *args) -> HomPGDState:
        """State at ``init_params`` (evaluates f, its latent gradient and the violation)."""
        z = self._check_params(init_params)
        value, grad, violation = self._evaluate(z, args)
        return HomPGDState(
            iter_num=jnp.asarray(0, jnp.int32),
            stepsize=jnp.asarray(self.stepsize, z.dtype),
            value=value,
            error=jnp.asarray(jnp.inf, z.dtype),
            violation=violation,
            latent_grad=grad,
            status=jnp.int32(SolverStatus.RUNNING),
        )

    def _repair(self, z: jax.Array, candidate: jax.Array, state: HomPGDState, args: tuple):
        ftol = self.feasibility_tol

        def violation_at(point):
            return self._violation(self.homeomorphism(point, *args), args)

        candidate_violation = violation_at(candidate)
        if self.repair == "radial":  # the authors' homeo_bisection: shrink toward z = 0

            def shrink():
                alpha = _bisect(
                    jnp.zeros_like(candidate),
                    candidate,
                    lambda p: violation_at(p) <= ftol,
                    self.bisection_steps,
                    self.bisection_tol,
                )
                return alpha * candidate  # the feasible end (the code: the bracket's midpoint)

            return jax.lax.cond(candidate_violation > ftol, shrink, lambda: candidate)
        anchor_ok = state.violation <= ftol
        candidate_ok = candidate_violation <= ftol

        def bisect():
            alpha = _bisect(
                z,
                candidate,
                lambda p: violation_at(p) <= ftol,
                self.bisection_steps,
                self.bisection_tol,
            )
            return z + alpha * (candidate - z)

        def less_violated():
            return jnp.where(candidate_violation <= state.violation, candidate, z)

        return jax.lax.cond(
            candidate_ok,
            lambda: candidate,
            lambda: jax.lax.cond(anchor_ok, bisect, less_violated),
        )

    def update(self, params: ArrayLike, state: HomPGDState, *args) -> OptStep:
        """One latent projected-gradient step (with repair and adaptive step)."""
        z = self._check_params(params)
        candidate = self._project(z - state.stepsize * state.latent_grad)
        if self.repair != "none":
            candidate = self._repair(z, candidate, state, args)
        value, grad, violation = self._evaluate(candidate, args)
        increased = value > state.value
        stepsize = jnp.where(
            increased,
            jnp.maximum(self.adaptive_decay * state.stepsize, self.min_stepsize),
            state.stepsize,
        ).astype(state.stepsize.dtype)
        if self.stopping == "objective_change":
            feasible = violation <= self.feasibility_tol
            error = jnp.where(feasible, jnp.abs(value - state.value), jnp.inf)
        elif self.stopping == "none":
            error = jnp.asarray(jnp.inf, value.dtype)  # the authors' loop: every update runs
        else:
            error = jnp.linalg.norm(self._gradient_mapping(candidate, grad))
        new_state = HomPGDState(
            iter_num=state.iter_num + 1,
            stepsize=stepsize,
            value=value,
            error=error.astype(state.error.dtype),
            violation=violation,
            latent_grad=grad,
            status=jnp.int32(SolverStatus.RUNNING),
        )
        return OptStep(candidate, self._with_status(candidate, new_state))

    def _nonfinite(self, params, state) -> jax.Array:
        # An infinite error is meaningful here ("objective_change": not feasible yet); a
        # non-finite objective value or latent gradient is not.
        finite_value = jnp.isfinite(state.value) & jnp.all(jnp.isfinite(state.latent_grad))
        return super()._nonfinite(params, state) | ~finite_value

    def optimality_fun(self, params: ArrayLike, *args) -> jax.Array:
        """Latent gradient mapping ``(z - P(z - η₀ ∇_z f(Φ(z)))) / η₀`` (zero when stationary)."""
        z = self._check_params(params)
        grad = jax.grad(lambda p: self._objective(p, args)[0])(z)
        return self._gradient_mapping(z, grad)

    def outside_fraction(self, latents: ArrayLike, *args) -> jax.Array:
        """ε_inn: the share of ``Φ(latents)`` violating ``constraint_fn`` by > ``feasibility_tol``.

        The learning error of a trained map (0 for an exact homeomorphism); ``latents`` has
        shape (num_samples, n), e.g. ``jaxlab.nn.sample_latents``.

        Examples:
          >>> import jax.numpy as jnp
          >>> disk = lambda x: jnp.sum(x**2, keepdims=True) - 1.0
          >>> solver = HomPGD(lambda x: jnp.sum(x), lambda z: 1.5 * z, disk)
          >>> float(solver.outside_fraction(jnp.array([[0.1, 0.0], [0.9, 0.0]])))
          0.5
        """
        if self.constraint_fn is None:
            raise ValueError("outside_fraction needs a constraint_fn")
        x = jax.vmap(lambda z: self.homeomorphism(z, *args))(jnp.asarray(latents))
        residuals = jax.vmap(lambda v: jnp.max(self.constraint_fn(v, *args)))(x)
        return jnp.mean(residuals > self.feasibility_tol)

    def reachable_value(
        self, latents: ArrayLike, *args, num_refine: int = 8, maxiter: int | None = None
    ) -> tuple[jax.Array, jax.Array]:
        """Best feasible objective reachable through Φ: what the map covers, optimizer aside.

        ``f(Φ(z))`` is evaluated on every row of ``latents`` (a dense sample of the latent
        domain); the ``num_refine`` best feasible ones (violation <= ``feasibility_tol``) then
        start this solver (its repair and projection) for ``maxiter`` steps (None: 10x this
        solver's ``maxiter``), and the best feasible value of all of these is returned. It bounds
        what any latent method can reach through this Φ, so Hom-PGD's gap splits into a coverage
        part (this value against a reference solver) and an optimizer part (Hom-PGD's end value
        against this one); see :func:`split_gap`. Runs eagerly (host-side selection).

        Args:
          latents: (N, n) latent sample, e.g. ``jaxlab.nn.sample_latents``.
          *args: the problem's arguments, as for ``run``.
          num_refine: how many of the best feasible samples to refine (>= 1).
          maxiter: iterations of each refinement run.

        Returns:
          ``(value, x)``: the best feasible value (inf when no sample is feasible) and its
          point Φ(z).

        Examples:
          >>> import jax, jax.numpy as jnp
          >>> disk = lambda x: jnp.sum(x**2, keepdims=True) - 1.0
          >>> solver = HomPGD(lambda x: x[0], lambda z: 0.9 * z, disk, maxiter=100)
          >>> value, x = solver.reachable_value(jax.random.uniform(jax.random.key(0), (256, 2),
          ...                                                      minval=-1, maxval=1))
          >>> round(float(value), 3)  # Φ(𝔹) = disk of radius 0.9 inside K: -0.9 is reachable
          -0.9
        """
        if self.constraint_fn is None:
            raise ValueError("reachable_value needs a constraint_fn (feasibility)")
        num_refine = check_positive_int(num_refine, "num_refine")
        if maxiter is not None:
            maxiter = check_positive_int(maxiter, "maxiter")
        latents = jnp.asarray(latents)
        if latents.ndim != 2 or not jnp.issubdtype(latents.dtype, jnp.floating):
            raise ValueError(f"latents must be a floating (N, n) array, got {latents.shape}")

        evaluate, refine = _reachable_programs(self, maxiter or 10 * self.maxiter)
        values, violations, points = evaluate(latents, args)
        values, violations = np.asarray(values, float), np.asarray(violations, float)
        feasible = violations <= self.feasibility_tol
        if not feasible.any():
            return jnp.asarray(jnp.inf), points[int(np.argmin(violations))]
        order = np.argsort(np.where(feasible, values, np.inf))[: min(num_refine, feasible.sum())]
        ends, states = refine(latents[order], args)
        end_values = np.where(
            np.asarray(states.violation) <= self.feasibility_tol, np.asarray(states.value), np.inf
        )
        best_sample = int(order[0])
        if end_values.min() < values[best_sample]:
            i = int(np.argmin(end_values))
            return jnp.asarray(end_values[i]), self.homeomorphism(ends[i], *args)
        return jnp.asarray(values[best_sample]), points[best_sample]

    def decode(self, params: ArrayLike, *args) -> jax.Array:
        """The x-space point ``Φ(z, *args)`` of a latent iterate.

        Examples:
          >>> import jax.numpy as jnp
          >>> solver = HomPGD(lambda x: jnp.sum(x**2), lambda z: 2.0 * z)
          >>> solver.decode(jnp.array([0.5, 0.25])).tolist()
          [1.0, 0.5]
        """
        return self.homeomorphism(self._check_params(params), *args)


# --------------------------------------------------------------------------------------------
# Multi-start use (the note asks for the best of several starts, never one run).


def latent_starts(rng_key: jax.Array, num_starts: int, num_features: int) -> jax.Array:
    """Latent starts for a multi-start solve: the centre z = 0 first, then interior points.

    The other ``num_starts - 1`` starts are ``jaxlab.nn.sample_latents`` draws (uniform in the
    disk for n <= 2, in the cube above) shrunk by 0.9, so none starts on the latent boundary.

    Args:
      rng_key: a ``jax.random`` key.
      num_starts: total number of starts (>= 2).
      num_features: latent dimension n.

    Returns:
      Array (num_starts, n); row 0 is zero.

    Examples:
      >>> import jax
      >>> z0s = latent_starts(jax.random.key(0), 4, 2)
      >>> z0s.shape, z0s[0].tolist()
      ((4, 2), [0.0, 0.0])

    References:
      C. Liu, E. Liang, M. Chen, "Hom-PGD⁺", ICML 2026 (centre and latent multi-starts).
    """
    check_key(rng_key, "rng_key")
    num_starts = check_int(num_starts, "num_starts", minimum=2)
    n = check_positive_int(num_features, "num_features")
    others = 0.9 * sample_latents(rng_key, num_starts - 1, n)
    return jnp.concatenate([jnp.zeros((1, n)), others.reshape(-1, n)], axis=0)


def best_feasible_start(
    values: ArrayLike, violations: ArrayLike, feasibility_tol: float = 1e-5
) -> tuple[int, bool]:
    """Index of the best feasible run of a multi-start solve, and whether any run is feasible.

    Among runs with ``violation <= feasibility_tol`` the one with the smallest value; when none
    is feasible, the least violated run (flagged ``False``).

    Args:
      values: final objective values, shape (num_starts,).
      violations: final violations, same shape.
      feasibility_tol: largest violation counted as feasible.

    Returns:
      ``(index, feasible)``.

    Examples:
      >>> best_feasible_start([0.5, -3.0, 0.1], [0.0, 1.0, 0.0])
      (2, True)
      >>> best_feasible_start([0.5, -3.0, 0.1], [3.0, 1.0, 2.0])
      (1, False)
    """
    check_nonnegative(feasibility_tol, "feasibility_tol")
    values, violations = np.asarray(values), np.asarray(violations)
    if values.shape != violations.shape or values.ndim != 1 or values.size == 0:
        raise ValueError(
            "values and violations must be non-empty 1-D arrays of the same shape, got shapes "
            f"{values.shape} and {violations.shape}"
        )
    feasible = violations <= feasibility_tol
    if feasible.any():
        return int(np.argmin(np.where(feasible, values, np.inf))), True
    return int(np.argmin(violations)), False


def select_penalty_weight(validation_gaps: dict[float, float]) -> float:
    """The homeomorphism loss's w_pen with the smallest validation median gap; ties go larger.

    One network is trained per candidate penalty weight of ``jaxlab.nn.homeomorphism_loss``;
    Hom-PGD's median gap on validation instances decides. A larger w_pen keeps more of Φ(𝔹)
    inside K (smaller ε_inn), so it wins a tie.

    Args:
      validation_gaps: ``{w_pen: median gap}`` (inf where no validation run was feasible).

    Returns:
      The chosen w_pen.

    Examples:
      >>> select_penalty_weight({1.0: 0.04, 3.0: 0.09, 10.0: 0.30})
      1.0
      >>> select_penalty_weight({1.0: 0.05, 10.0: 0.05})
      10.0

    References:
      C. Liu, E. Liang, M. Chen, "Hom-PGD⁺", ICML 2026 (w_pen trades ε_inn against coverage).
    """
    if not isinstance(validation_gaps, dict):
        raise TypeError(
            f"validation_gaps must be a dict {{w_pen: median gap}}, got "
            f"{type(validation_gaps).__name__}"
        )
    if not validation_gaps:
        raise ValueError("validation_gaps must not be empty")
    for weight, gap in validation_gaps.items():
        check_positive(weight, f"validation_gaps' key (a penalty weight) {weight!r}")
        gap = concrete_float(gap, f"validation_gaps[{weight!r}]")
        if gap is not None and (math.isnan(gap) or gap < 0):
            raise ValueError(
                f"validation_gaps[{weight!r}] must be a gap >= 0 (inf where no validation run "
                f"was feasible), got {gap}"
            )
    return min(validation_gaps, key=lambda w: (validation_gaps[w], -w))


@functools.lru_cache(maxsize=32)
def _reachable_programs(solver: HomPGD, maxiter: int):
    """Compiled once per solver (hashed by identity) and refinement length: the dense
    evaluation of f(Φ(z)) and the batched refinement runs, the problem's args as arguments."""

    def evaluate(latents, args):
        def one(z):
            value, x = solver._objective(z, args)
            return value, solver._violation(x, args), x

        return jax.vmap(one)(latents)

    refiner = dataclasses.replace(solver, maxiter=maxiter, jit=False, implicit_diff=False)

    def refine(starts, args):
        return jax.vmap(lambda z0: refiner.run(z0, *args))(starts)

    return jax.jit(evaluate), jax.jit(refine)


class GapSplit(NamedTuple):
    """Hom-PGD's relative gap split into what the map covers and what the optimizer finds.

    With ``reference = min(local, multistart)`` (the best value any reference solve found):
    ``coverage = (reachable - reference) / |reference|``, ``optimizer = (hom - reachable) /
    |reference|``, so ``coverage + optimizer = (hom - reference) / |reference|``; the end-to-end
    gaps are ``(hom - local) / |local|`` and ``(hom - multistart) / |multistart|``.

    Attributes:
      coverage: gap of the best point reachable through Φ to the reference.
      optimizer: gap of Hom-PGD's end point to that reachable point.
      end_to_end_local: Hom-PGD against a local solve from x = 0.
      end_to_end_multistart: Hom-PGD against the best of several local starts.

    Examples:
      >>> GapSplit._fields
      ('coverage', 'optimizer', 'end_to_end_local', 'end_to_end_multistart')
    """

    coverage: np.ndarray
    optimizer: np.ndarray
    end_to_end_local: np.ndarray
    end_to_end_multistart: np.ndarray


def split_gap(
    hom_value: ArrayLike, reachable: ArrayLike, local: ArrayLike, multistart: ArrayLike
) -> GapSplit:
    """Splits Hom-PGD's gap into coverage (the map) and optimizer (the latent descent) parts.

    All arguments are objective values (minimisation), one per instance (or scalars): Hom-PGD's
    end value, the best feasible value reachable through the learned map
    (:meth:`HomPGD.reachable_value`), a local reference solve from x = 0 and the best of several
    reference starts. A non-finite value (no feasible point) gives NaN gaps for that instance.
    Hom-PGD's own (finite, i.e. feasible) end point counts as reachable: ``reachable`` is
    replaced by ``min(reachable, hom_value)``, so the optimizer part is never negative.

    Args:
      hom_value: Hom-PGD's end values.
      reachable: best values reachable through Φ.
      local: local reference values.
      multistart: multi-start reference values.

    Returns:
      A :class:`GapSplit` of float64 arrays, broadcast to a common shape.

    Examples:
      >>> split = split_gap(-0.9, -0.95, -0.97, -1.0)
      >>> [round(float(v), 4) for v in split]
      [0.05, 0.05, 0.0722, 0.1]
      >>> float(split_gap(-0.96, -0.95, -0.97, -1.0).optimizer)  # Hom-PGD beat the sample
      0.0

    References:
      C. Liu, E. Liang, M. Chen, "Hom-PGD⁺", ICML 2026 (learning error ε_inn vs optimization).
    """
    arrays = []
    for name, value in (
        ("hom_value", hom_value),
        ("reachable", reachable),
        ("local", local),
        ("multistart", multistart),
    ):
        array = np.asarray(value, dtype=np.float64)
        if np.isnan(array).any():
            raise ValueError(f"{name} must not contain NaN (use inf for 'no feasible point')")
        arrays.append(array)
    hom, reach, loc, multi = np.broadcast_arrays(*arrays)
    # Hom-PGD's own end point was reached through Φ: the reachable value is at most it, so the
    # optimizer part is never negative (a finite hom_value is a feasible end point).
    reach = np.where(np.isfinite(hom), np.minimum(reach, hom), reach)
    reference = np.minimum(loc, multi)
    finite = np.isfinite(hom) & np.isfinite(reach) & np.isfinite(reference)

    def ratio(num, den):
        with np.errstate(divide="ignore", invalid="ignore"):
            out = num / np.abs(den)
        return np.where(finite & np.isfinite(den) & (den != 0), out, np.nan)

    return GapSplit(
        coverage=ratio(reach - reference, reference),
        optimizer=ratio(hom - reach, reference),
        end_to_end_local=ratio(hom - loc, loc),
        end_to_end_multistart=ratio(hom - multi, multi),
    )
