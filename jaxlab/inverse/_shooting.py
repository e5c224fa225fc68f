"""Latent optimisation through a flow prior: single shooting (D-Flow), multiple shooting (MS-Flow).

For a linear forward model ``y = A x + σ ε`` and a flow map ``Φ_{0→1}`` (N fixed ODE steps of a
flow-matching velocity), **single shooting** (D-Flow) optimises the initial noise::

    J(z) = (1/2σ²) ||A Φ_{0→1}(z) - y||² + λ R(z),   R(z) = -(d - 1) log||z|| + ||z||²/2,

back-propagating through all N steps (memory grows with N). **Multiple shooting** (MS-Flow)
splits ``[0, 1]`` into S uniform segments ``t_k = k/S`` with segment maps ``Φ_k = Φ_{t_k→t_{k+1}}``
of ``n_sub`` steps each and optimises the whole trajectory ``z_0..z_S`` (``z_S`` the
reconstruction)::

    L(z; μ) = (1/2σ²) ||A z_S - y||² + λ R(z_0) + (μ/2) Σ_{k<S} ||Φ_k(z_k) - z_{k+1}||²,

which equals ``J(z_0)`` under exact stitching ``z_{k+1} = Φ_k(z_k)``. One sweep alternates a
parallel Adam step on ``z_0..z_{S-1}`` along
``g_k = μ J_kᵀ r_k - μ r_{k-1} 1[k>0] + λ ∇R(z_0) 1[k=0]`` (``r_k = Φ_k(z_k) - z_{k+1}``;
Jacobian-free default ``J_k ≈ I``, or the exact VJP through one segment), a closed-form data step
``z_S = (AᵀA/σ² + μI)⁻¹ (Aᵀy/σ² + μ Φ_{S-1}(z_{S-1}))`` and a geometric increase of μ.

References:
  A. Denker, M. Eliasof, Ž. Kereta, C.-B. Schönlieb, "Trajectory Stitching for Solving Inverse
  Problems with Flow-Based Models" (MS-Flow), ICML 2026 (arXiv 2602.08538);
  H. Ben-Hamu, O. Puny, I. Gat, B. Karrer, U. Singer, Y. Lipman, "D-Flow: Differentiating
  through Flows for Controlled Generation", ICML 2024 (arXiv 2402.14017).
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.typing import ArrayLike

from jaxlab._src.solver import IterativeSolver, OptStep, SolverStatus
from jaxlab._src.validation import (
    check_array,
    check_callable,
    check_choice,
    check_instance,
    check_nonnegative,
    check_positive,
    check_positive_int,
    check_real,
    count_nonfinite,
)
from jaxlab.inverse._flow_matching import (
    _check_every_step,
    _solve,
    diffrax_adjoint,
    diffrax_solver,
)
from jaxlab.inverse._operators import LinearOperator, check_operator

__all__ = [
    "MSFlow",
    "MSFlowResult",
    "MSFlowState",
    "ShootingResult",
    "SingleShooting",
    "SingleShootingState",
    "msflow",
    "radial_prior",
    "single_shooting",
]

_JACOBIANS = ("identity", "vjp")


def radial_prior(z: ArrayLike) -> jax.Array:
    """The radial latent regulariser ``R(z) = -(d - 1) log||z|| + ||z||²/2`` (last axis).

    The negative log-density of ``||z||`` under ``z ~ N(0, I_d)`` (a χ_d law) up to a constant:
    minimal on the sphere ``||z|| = sqrt(d - 1)`` where Gaussian noise concentrates, rather than
    at 0 as ``||z||²/2`` alone would be.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> z = jnp.array([1.0, 1.0, 0.0])  # ||z|| = sqrt(2) = sqrt(d - 1): the minimum
      >>> round(float(radial_prior(z)), 4)  # -2 log sqrt(2) + 1
      0.3069
      >>> jnp.abs(jax.grad(radial_prior)(z)).max() < 1e-6
      Array(True, dtype=bool)

    References:
      A. Denker et al., MS-Flow, ICML 2026 (the radial Gaussian regulariser); H. Ben-Hamu et
      al., D-Flow, ICML 2024.
    """
    z = check_array(z, "z", kind="floating")
    if z.ndim < 1:
        raise ValueError(f"z must have at least one axis, got shape {z.shape}")
    d = z.shape[-1]
    squared = jnp.sum(z * z, axis=-1)
    return -0.5 * (d - 1) * jnp.log(squared) + 0.5 * squared


def _check_velocity(velocity_fn):
    check_callable(velocity_fn, "velocity_fn", signature="velocity_fn(params, x, t)")


def _check_measurement(y, operator: LinearOperator, name: str = "y") -> jax.Array:
    y = check_array(y, name, kind="floating")
    if y.shape != (operator.output_size,):
        raise ValueError(
            f"{name} must have shape ({operator.output_size},) (the output of the "
            f"{operator.describe()}), got {y.shape}"
        )
    return y


@dataclasses.dataclass(eq=False)
class _LatentSolver(IterativeSolver):
    """What both solvers share: the prior, σ, Adam on the latents with λ R(z_0), and the loop
    settings (``implicit_diff`` off: the schedule's end point is not a tight root). Each
    subclass declares ``learning_rate`` and ``prior_weight`` among its own positional fields."""

    velocity_fn: Callable[[Any, jax.Array, jax.Array], jax.Array]
    noise_std: float
    _: dataclasses.KW_ONLY
    maxiter: int = 200
    tol: float = 0.0
    implicit_diff: bool = False

    def __post_init__(self):
        super().__post_init__()
        _check_velocity(self.velocity_fn)
        check_positive(self.noise_std, "noise_std")
        check_positive(self.learning_rate, "learning_rate")
        check_nonnegative(self.prior_weight, "prior_weight")

    def _optimizer(self):
        return optax.adam(self.learning_rate)


# --------------------------------------------------------------------------------------------
# Single shooting (D-Flow).


class SingleShootingState(NamedTuple):
    """State of :class:`SingleShooting`.

    Attributes:
      iter_num: updates done (int32).
      value: ``J(z)`` at the iterate the last update started from (``inf`` before any update).
      error: ``||∇J(z)||`` at that iterate (``inf`` before any update).
      opt_state: Adam's state.
      nonfinite_count: updates whose objective or gradient was NaN/inf (int32; never masked).
      status: int32 :class:`~jaxlab.solvers.SolverStatus` code (``NONFINITE`` stops ``run``
        with the non-finite iterate as produced).

    Examples:
      >>> SingleShootingState._fields
      ('iter_num', 'value', 'error', 'opt_state', 'nonfinite_count', 'status')
    """

    iter_num: jax.Array
    value: jax.Array
    error: jax.Array
    opt_state: Any
    nonfinite_count: jax.Array
    status: jax.Array


@dataclasses.dataclass(eq=False)
class SingleShooting(_LatentSolver):
    """D-Flow: Adam on the initial noise ``z`` through the whole flow ``Φ_{0→1}`` (the baseline).

    Minimises ``J(z) = (1/2σ²)||A Φ_{0→1}(z) - y||² + λ R(z)`` (:func:`radial_prior`), the
    gradient by back-propagating through all ``num_steps`` ODE steps (:func:`diffrax_adjoint`):
    ``"every_step"`` (default, D-Flow as published) stores every step's velocity activations,
    so memory grows by at least one activation set per step; ``"checkpointed"`` (diffrax's
    ``RecursiveCheckpointAdjoint(checkpoints=N)``) stores one state per step and recomputes the
    activations; ``"recursive"`` is diffrax's default, fewer states and more recomputation.
    ``run(init_params, y, operator, velocity_params)``; params are ``z`` (D,).
    ``optimality_fun`` is ``∇J``. Adam with a constant step does not converge exactly, so
    ``run`` performs ``maxiter`` updates unless ``||∇J|| <= tol`` (default ``tol = 0``).

    Args:
      velocity_fn: ``(params, x, t) -> v``.
      noise_std: ``σ > 0`` of the measurements.
      num_steps: ODE steps ``N`` of ``Φ_{0→1}``.
      learning_rate: Adam's step on ``z`` (the note: 0.05).
      prior_weight: ``λ >= 0`` (the note: 1).
      method: ``"heun"`` (default), ``"euler"``, ``"midpoint"`` or a diffrax solver.
      adjoint: ``"every_step"`` (default), ``"checkpointed"``, ``"recursive"`` or a diffrax
        adjoint (``"backprop"``: the earlier name of ``"checkpointed"``).
      maxiter, tol, implicit_diff, unroll, jit: the solver base's (keyword-only;
        ``implicit_diff`` defaults to False here: the schedule's end point is not a tight root).

    Examples:
      A solver for the note's 2-D toy (observe x₁ of the mixture prior); :func:`single_shooting`
      runs it on a batch. Its first step starts from ``J`` at ``z``:

      >>> import jax.numpy as jnp
      >>> from jaxlab.inverse import GaussianMixtureFlow, matrix_operator, three_mode_mixture
      >>> solver = SingleShooting(GaussianMixtureFlow.velocity, noise_std=0.05, num_steps=8)
      >>> op, flow = matrix_operator(jnp.array([[1.0, 0.0]])), three_mode_mixture()
      >>> state = solver.init_state(jnp.array([0.5, 0.5]), jnp.array([1.5]), op, flow)
      >>> int(state.iter_num), solver.maxiter, float(state.error)  # before any update
      (0, 200, inf)

    References:
      H. Ben-Hamu et al., "D-Flow: Differentiating through Flows for Controlled Generation",
      ICML 2024 (arXiv 2402.14017).
    """

    num_steps: int = 32
    learning_rate: float = 0.05
    prior_weight: float = 1.0
    method: Any = "heun"
    adjoint: Any = "every_step"

    def __post_init__(self):
        super().__post_init__()
        check_positive_int(self.num_steps, "num_steps")
        _check_every_step(
            diffrax_solver(self.method), diffrax_adjoint(self.adjoint, self.num_steps)
        )

    # -- pieces ------------------------------------------------------------------------------
    def decode(self, params: ArrayLike, velocity_params: Any) -> jax.Array:
        """``Φ_{0→1}(z)``: the reconstruction of a latent ``z``.

        Examples:
          >>> import jax.numpy as jnp
          >>> from jaxlab.inverse import GaussianMixtureFlow, three_mode_mixture
          >>> solver = SingleShooting(GaussianMixtureFlow.velocity, noise_std=0.05, num_steps=10)
          >>> x = solver.decode(jnp.array([0.3, -0.2]), three_mode_mixture())
          >>> [round(v, 4) for v in x.tolist()]
          [1.3733, -0.9996]
        """
        return self._decode_jit(jnp.asarray(params), velocity_params)

    @functools.cached_property
    def _decode_jit(self):
        # One trace of the diffrax solve per solver and signature: every caller (objective,
        # update, front ends) reuses it, including under vmap and grad, instead of re-tracing
        # diffrax's Python (most of a compile's cost at these sizes).
        def decode(z, velocity_params):
            return _solve(
                self.velocity_fn,
                velocity_params,
                z,
                0.0,
                1.0,
                self.num_steps,
                diffrax_solver(self.method),
                diffrax_adjoint(self.adjoint, self.num_steps),
            )

        return jax.jit(decode)

    def objective(self, params: ArrayLike, y: ArrayLike, operator, velocity_params) -> jax.Array:
        """``J(z) = (1/2σ²)||A Φ_{0→1}(z) - y||² + λ R(z)``.

        Examples:
          >>> import jax.numpy as jnp
          >>> from jaxlab.inverse import GaussianMixtureFlow, matrix_operator, three_mode_mixture
          >>> solver = SingleShooting(GaussianMixtureFlow.velocity, noise_std=1.0,
          ...                         num_steps=10, prior_weight=0.0)
          >>> op = matrix_operator(jnp.eye(2))
          >>> x = solver.decode(jnp.array([0.3, -0.2]), three_mode_mixture())
          >>> float(solver.objective(jnp.array([0.3, -0.2]), x, op, three_mode_mixture()))
          0.0
        """
        z = jnp.asarray(params)
        x = self.decode(z, velocity_params)
        residual = operator.matvec(x) - y
        inv_var = 1.0 / jnp.asarray(self.noise_std, z.dtype) ** 2
        data = 0.5 * inv_var * jnp.sum(residual**2)
        return data + jnp.asarray(self.prior_weight, z.dtype) * radial_prior(z)

    def _check(self, params, y, operator):
        z = check_array(params, "init_params", kind="floating")
        if z.ndim != 1:
            raise ValueError(f"init_params must be a latent vector (D,), got shape {z.shape}")
        check_operator(operator, z.shape[0], "init_params")
        _check_measurement(y, operator)
        return z

    # -- the solver interface ----------------------------------------------------------------
    def init_state(self, init_params, y, operator, velocity_params) -> SingleShootingState:
        """The state before the first update (Adam's moments at zero)."""
        z = self._check(init_params, y, operator)
        return SingleShootingState(
            iter_num=jnp.asarray(0, jnp.int32),
            value=jnp.asarray(jnp.inf, z.dtype),
            error=jnp.asarray(jnp.inf, z.dtype),
            opt_state=self._optimizer().init(z),
            nonfinite_count=jnp.zeros([], jnp.int32),
            status=jnp.int32(SolverStatus.RUNNING),
        )

    def update(self, params, state, y, operator, velocity_params) -> OptStep:
        """One Adam step on ``z`` along ``∇J(z)`` (one forward and one backward flow)."""
        z = jnp.asarray(params)
        value, grad = jax.value_and_grad(self.objective)(z, y, operator, velocity_params)
        updates, opt_state = self._optimizer().update(grad, state.opt_state, z)
        new_z = optax.apply_updates(z, updates)
        new_state = SingleShootingState(
            iter_num=state.iter_num + 1,
            value=value.astype(state.value.dtype),
            error=jnp.linalg.norm(grad).astype(state.error.dtype),
            opt_state=opt_state,
            nonfinite_count=count_nonfinite(state.nonfinite_count, (value, grad)),
            status=state.status,
        )
        return OptStep(new_z, self._with_status(new_z, new_state))

    def _nonfinite(self, params, state):
        return super()._nonfinite(params, state) | ~jnp.isfinite(state.value)

    def optimality_fun(self, params, y, operator, velocity_params) -> jax.Array:
        """``∇J(z)`` (zero at a stationary point)."""
        return jax.grad(self.objective)(jnp.asarray(params), y, operator, velocity_params)


# --------------------------------------------------------------------------------------------
# Multiple shooting (MS-Flow).


class MSFlowState(NamedTuple):
    """State of :class:`MSFlow`.

    Attributes:
      iter_num: sweeps done (int32).
      mu: the penalty weight μ the next sweep uses.
      value: ``L(z; μ)`` at the current trajectory with the μ of the sweep that produced it.
      error: the stitching gap ``max_k ||Φ_k(z_k) - z_{k+1}||`` of the current trajectory.
      flowed: ``Φ_k(z_k)`` for ``k < S``, (S, D), the segment ends of the current trajectory.
      opt_state: Adam's state over ``z_0..z_{S-1}``.
      nonfinite_count: sweeps whose latent gradient or data step was NaN/inf (int32).
      status: int32 :class:`~jaxlab.solvers.SolverStatus` code.

    Examples:
      >>> MSFlowState._fields
      ('iter_num', 'mu', 'value', 'error', 'flowed', 'opt_state', 'nonfinite_count', 'status')
    """

    iter_num: jax.Array
    mu: jax.Array
    value: jax.Array
    error: jax.Array
    flowed: jax.Array
    opt_state: Any
    nonfinite_count: jax.Array
    status: jax.Array


@dataclasses.dataclass(eq=False)
class MSFlow(_LatentSolver):
    """MS-Flow: multiple shooting over S segments with stitching penalties and a data step.

    Params are the stacked trajectory ``z_0..z_S`` (S + 1, D); start from exact stitching with
    :meth:`init_params`. One ``update`` (a sweep), with ``r_k = Φ_k(z_k) - z_{k+1}`` of the
    current trajectory (carried in the state)::

        g_k   = μ Jᵀ_k r_k - μ r_{k-1} 1[k > 0] + λ ∇R(z_0) 1[k = 0]     (k < S, in parallel)
        z_k  <- Adam(z_k, g_k)                                             (k < S)
        z_S  <- (AᵀA/σ² + μI)⁻¹ (Aᵀy/σ² + μ Φ_{S-1}(z_{S-1}))              (closed form)
        μ    <- min(μ q, μ_end),  q = (μ_end/μ_start)^(1/(maxiter - 1))

    with ``Jᵀ_k r_k ≈ r_k`` (``jacobian="identity"``, Jacobian-free: segments are short,
    near-identity maps; nothing is stored for a backward pass, so memory does not grow with
    N = S n_sub) or the exact VJP through the one segment (``jacobian="vjp"``; segments are then
    processed one after another, so one segment's steps are stored at a time). Each sweep
    integrates every segment once (twice with ``"vjp"``). ``state.error`` is the stitching
    gap; ``run`` performs ``maxiter`` sweeps unless the gap falls to ``tol`` (default 0).
    ``optimality_fun`` is the exact gradient of ``L(·; μ_end)`` over all of ``z_0..z_S``. Report
    both ``z_S`` (data-consistent) and the re-simulated ``Φ_{0→1}(z_0)`` (:meth:`resimulate`).

    Args:
      velocity_fn: ``(params, x, t) -> v``.
      noise_std: ``σ > 0``.
      num_segments: ``S >= 1`` (the note: 4).
      steps_per_segment: ``n_sub >= 1`` ODE steps per segment (the note: 8, Heun).
      mu_start, mu_end: the penalty continuation ``0 < μ_start <= μ_end`` (the note: 1 → 1e3).
      learning_rate: Adam's step on ``z_0..z_{S-1}`` (the note: 0.05).
      prior_weight: ``λ >= 0`` on ``z_0`` only (the note: 1).
      jacobian: ``"identity"`` (default, Jacobian-free) or ``"vjp"``.
      method: ``"heun"`` (default), ``"euler"``, ``"midpoint"`` or a diffrax solver.
      maxiter, tol, implicit_diff, unroll, jit: the solver base's (keyword-only).

    Examples:
      ``N = S n_sub`` steps in all; :func:`msflow` runs the solver on a batch. The data step of
      an inpainting mask keeps the observed pixel's measurement (weight ``1/σ² = 400``) against
      the flow's value ``φ`` (weight ``μ``) and leaves the unobserved pixel at ``φ``:

      >>> import jax.numpy as jnp
      >>> from jaxlab.inverse import GaussianMixtureFlow, inpainting_operator
      >>> solver = MSFlow(GaussianMixtureFlow.velocity, noise_std=0.05, num_segments=4,
      ...                 steps_per_segment=8)
      >>> solver.num_steps
      32
      >>> op = inpainting_operator(jnp.array([1.0, 0.0]))
      >>> z = solver.data_step(jnp.array([0.0, 0.3]), jnp.array([1.0, 0.0]), op, 100.0)
      >>> [round(v, 4) for v in z.tolist()]  # (400 · 1 + 100 · 0) / 500, φ₂
      [0.8, 0.3]

    References:
      A. Denker, M. Eliasof, Ž. Kereta, C.-B. Schönlieb, "Trajectory Stitching for Solving
      Inverse Problems with Flow-Based Models", ICML 2026 (arXiv 2602.08538).
    """

    num_segments: int = 4
    steps_per_segment: int = 8
    mu_start: float = 1.0
    mu_end: float = 1e3
    learning_rate: float = 0.05
    prior_weight: float = 1.0
    jacobian: Literal["identity", "vjp"] = "identity"
    method: Any = "heun"

    def __post_init__(self):
        super().__post_init__()
        check_positive_int(self.num_segments, "num_segments")
        check_positive_int(self.steps_per_segment, "steps_per_segment")
        mu0 = check_positive(self.mu_start, "mu_start")
        check_positive(self.mu_end, "mu_end")
        if mu0 is not None:
            check_real(self.mu_end, "mu_end", minimum=mu0)
        check_choice(self.jacobian, "jacobian", _JACOBIANS)
        diffrax_solver(self.method)

    # -- pieces ------------------------------------------------------------------------------
    @property
    def num_steps(self) -> int:
        """``N = S · n_sub``, the ODE steps of the whole trajectory."""
        return self.num_segments * self.steps_per_segment

    def _times(self, dtype):
        grid = jnp.arange(self.num_segments + 1, dtype=dtype) / self.num_segments
        return grid[:-1], grid[1:]

    def _segment(self, velocity_params, z, t0, t1):
        return self._segment_jit(velocity_params, z, t0, t1)

    @functools.cached_property
    def _segment_jit(self):
        # Segments are never differentiated with "identity", and one at a time with "vjp": a
        # plain checkpoint per step of the one segment (n_sub states) is all the VJP stores.
        # Jitted once per solver, so its callers (vmap over segments, the scan of init_params,
        # the VJP) share one trace of the diffrax solve.
        def segment(velocity_params, z, t0, t1):
            return _solve(
                self.velocity_fn,
                velocity_params,
                z,
                t0,
                t1,
                self.steps_per_segment,
                diffrax_solver(self.method),
                diffrax_adjoint("checkpointed", self.steps_per_segment),
            )

        return jax.jit(segment)

    def segment_ends(self, heads: ArrayLike, velocity_params: Any) -> jax.Array:
        """``Φ_k(z_k)`` for ``k < S``: every segment integrated from its start, (S, D).

        Examples:
          >>> import jax.numpy as jnp
          >>> from jaxlab.inverse import GaussianMixtureFlow, three_mode_mixture
          >>> solver = MSFlow(GaussianMixtureFlow.velocity, noise_std=0.05, num_segments=2)
          >>> solver.segment_ends(jnp.zeros((2, 2)), three_mode_mixture()).shape
          (2, 2)
        """
        heads = jnp.asarray(heads)
        t0, t1 = self._times(heads.dtype)
        return jax.vmap(self._segment, in_axes=(None, 0, 0, 0))(velocity_params, heads, t0, t1)

    def init_params(self, z0: ArrayLike, velocity_params: Any) -> jax.Array:
        """The exactly stitched trajectory from ``z_0``: ``z_{k+1} = Φ_k(z_k)``, (S + 1, D).

        Examples:
          >>> import jax.numpy as jnp
          >>> from jaxlab.inverse import GaussianMixtureFlow, three_mode_mixture
          >>> solver = MSFlow(GaussianMixtureFlow.velocity, noise_std=0.05, num_segments=2,
          ...                 steps_per_segment=5)
          >>> z = solver.init_params(jnp.array([0.3, -0.2]), three_mode_mixture())
          >>> z.shape, [round(v, 4) for v in z[-1].tolist()]
          ((3, 2), [1.3733, -0.9996])
        """
        z0 = check_array(z0, "z0", kind="floating")
        if z0.ndim != 1:
            raise ValueError(f"z0 must be a latent vector (D,), got shape {z0.shape}")
        t0, t1 = self._times(z0.dtype)

        def step(z, times):
            nxt = self._segment(velocity_params, z, *times)
            return nxt, nxt

        _, rest = jax.lax.scan(step, z0, (t0, t1))
        return jnp.concatenate([z0[None], rest], axis=0)

    def resimulate(self, params: ArrayLike, velocity_params: Any) -> jax.Array:
        """``x̂ = Φ_{0→1}(z_0)``: the trajectory re-simulated from its start (exactly on the flow).

        Examples:
          Only ``z_0`` matters: moving the later states leaves the re-simulation on the flow.

          >>> import jax.numpy as jnp
          >>> from jaxlab.inverse import GaussianMixtureFlow, three_mode_mixture
          >>> flow = three_mode_mixture()
          >>> solver = MSFlow(GaussianMixtureFlow.velocity, noise_std=0.05, num_segments=2,
          ...                 steps_per_segment=5)
          >>> z = solver.init_params(jnp.array([0.3, -0.2]), flow)
          >>> bool(jnp.allclose(solver.resimulate(z.at[1:].add(1.0), flow), z[-1]))
          True
        """
        return self.init_params(jnp.asarray(params)[0], velocity_params)[-1]

    def data_step(self, last_end: ArrayLike, y: ArrayLike, operator, mu: ArrayLike) -> jax.Array:
        """The data step ``z_S = (AᵀA/σ² + μI)⁻¹ (Aᵀy/σ² + μ φ)``, ``φ = Φ_{S-1}(z_{S-1})``.

        Examples:
          The note's check 5 (``A = [1, 0]``, ``σ = 0.05``, ``μ = 1``):
          ``z_S = ((400 y + φ₁)/401, φ₂)``.

          >>> import jax.numpy as jnp
          >>> from jaxlab.inverse import GaussianMixtureFlow, matrix_operator
          >>> solver = MSFlow(GaussianMixtureFlow.velocity, noise_std=0.05)
          >>> op = matrix_operator(jnp.array([[1.0, 0.0]]))
          >>> z = solver.data_step(jnp.array([0.1, 0.7]), jnp.array([1.0]), op, 1.0)
          >>> bool(jnp.allclose(z, jnp.array([400.1 / 401, 0.7])))
          True
        """
        last_end = jnp.asarray(last_end)
        inv_var = 1.0 / jnp.asarray(self.noise_std, last_end.dtype) ** 2
        mu = jnp.asarray(mu, last_end.dtype)
        rhs = inv_var * operator.rmatvec(jnp.asarray(y, last_end.dtype)) + mu * last_end
        return operator.normal_solve(rhs, inv_var, mu)

    def objective(self, params, y, operator, velocity_params, mu) -> jax.Array:
        """``L(z; μ) = (1/2σ²)||A z_S - y||² + λ R(z_0) + (μ/2) Σ_k ||Φ_k(z_k) - z_{k+1}||²``.

        Examples:
          Under exact stitching L equals the single-shooting objective (the note's check 6):

          >>> import jax.numpy as jnp
          >>> from jaxlab.inverse import (GaussianMixtureFlow, SingleShooting, matrix_operator,
          ...                             three_mode_mixture)
          >>> flow, y = three_mode_mixture(), jnp.array([1.0])
          >>> op = matrix_operator(jnp.array([[1.0, 0.0]]))
          >>> ms = MSFlow(GaussianMixtureFlow.velocity, noise_std=0.05, num_segments=4,
          ...             steps_per_segment=2)
          >>> ss = SingleShooting(GaussianMixtureFlow.velocity, noise_std=0.05, num_steps=8)
          >>> z0 = jnp.array([0.3, -0.2])
          >>> L = ms.objective(ms.init_params(z0, flow), y, op, flow, 10.0)
          >>> bool(jnp.allclose(L, ss.objective(z0, y, op, flow), rtol=1e-5))
          True
        """
        z = jnp.asarray(params)
        ends = self.segment_ends(z[:-1], velocity_params)
        return self._objective(z, ends, y, operator, mu)

    def _objective(self, z, ends, y, operator, mu):
        inv_var = 1.0 / jnp.asarray(self.noise_std, z.dtype) ** 2
        data = 0.5 * inv_var * jnp.sum((operator.matvec(z[-1]) - y) ** 2)
        stitch = 0.5 * jnp.asarray(mu, z.dtype) * jnp.sum((ends - z[1:]) ** 2)
        return data + jnp.asarray(self.prior_weight, z.dtype) * radial_prior(z[0]) + stitch

    def _latent_gradient(self, z, ends, velocity_params, mu):
        """``g_k`` for ``k < S`` given the segment ends of ``z`` (VJP recomputes them)."""
        mu = jnp.asarray(mu, z.dtype)
        heads = z[:-1]
        residual = ends - z[1:]
        if self.jacobian == "vjp":
            t0, t1 = self._times(z.dtype)

            def one(args):
                head, r, a, b = args
                _, vjp = jax.vjp(lambda h: self._segment(velocity_params, h, a, b), head)
                return vjp(r)[0]

            # One segment at a time, so the backward pass stores one segment's steps.
            pulled = jax.lax.map(one, (heads, residual, t0, t1))
        else:
            pulled = residual
        grad = mu * pulled
        grad = grad.at[1:].add(-mu * residual[:-1])
        prior = jax.grad(lambda h: radial_prior(h))(heads[0])
        return grad.at[0].add(jnp.asarray(self.prior_weight, z.dtype) * prior)

    def latent_gradient(self, params, velocity_params, mu) -> jax.Array:
        """The sweep's search direction ``g_k`` for ``z_0..z_{S-1}``, (S, D).

        With ``jacobian="vjp"`` this is exactly ``∂L/∂z_k`` (``k < S``); with ``"identity"`` the
        Jacobian-free approximation ``Jᵀ_k ≈ I``.

        Examples:
          >>> import jax, jax.numpy as jnp
          >>> from jaxlab.inverse import GaussianMixtureFlow, matrix_operator, three_mode_mixture
          >>> flow, op, y = three_mode_mixture(), matrix_operator(jnp.eye(2)), jnp.zeros(2)
          >>> solver = MSFlow(GaussianMixtureFlow.velocity, noise_std=0.5, jacobian="vjp",
          ...                 num_segments=2, steps_per_segment=2)
          >>> z = jnp.array([[0.3, -0.2], [0.5, 0.1], [0.9, -0.4]])
          >>> exact = jax.grad(solver.objective)(z, y, op, flow, 3.0)[:-1]
          >>> bool(jnp.allclose(solver.latent_gradient(z, flow, 3.0), exact, atol=1e-5))
          True
        """
        z = jnp.asarray(params)
        ends = self.segment_ends(z[:-1], velocity_params)
        return self._latent_gradient(z, ends, velocity_params, mu)

    def _check(self, params, y, operator):
        z = check_array(params, "init_params", kind="floating")
        if z.ndim != 2 or z.shape[0] != self.num_segments + 1:
            raise ValueError(
                f"init_params must be the trajectory z_0..z_S of shape (num_segments + 1, D) = "
                f"({self.num_segments + 1}, D), got shape {z.shape} (MSFlow.init_params builds "
                "it from z_0)"
            )
        check_operator(operator, z.shape[1], "init_params")
        _check_measurement(y, operator)
        return z

    def _mu_ratio(self, dtype):
        if self.maxiter == 1:
            return jnp.ones((), dtype)
        ratio = jnp.asarray(self.mu_end, dtype) / jnp.asarray(self.mu_start, dtype)
        return ratio ** (1.0 / (self.maxiter - 1))

    # -- the solver interface ----------------------------------------------------------------
    def init_state(self, init_params, y, operator, velocity_params) -> MSFlowState:
        """The state at the given trajectory (integrates every segment once)."""
        z = self._check(init_params, y, operator)
        ends = self.segment_ends(z[:-1], velocity_params)
        mu = jnp.asarray(self.mu_start, z.dtype)
        return MSFlowState(
            iter_num=jnp.asarray(0, jnp.int32),
            mu=mu,
            value=self._objective(z, ends, y, operator, mu),
            error=jnp.max(jnp.linalg.norm(ends - z[1:], axis=-1)),
            flowed=ends,
            opt_state=self._optimizer().init(z[:-1]),
            nonfinite_count=jnp.zeros([], jnp.int32),
            status=jnp.int32(SolverStatus.RUNNING),
        )

    def update(self, params, state, y, operator, velocity_params) -> OptStep:
        """One sweep: latent Adam step, closed-form data step, μ continuation."""
        z = jnp.asarray(params)
        mu = state.mu
        grad = self._latent_gradient(z, state.flowed, velocity_params, mu)
        updates, opt_state = self._optimizer().update(grad, state.opt_state, z[:-1])
        heads = optax.apply_updates(z[:-1], updates)
        ends = self.segment_ends(heads, velocity_params)
        last = self.data_step(ends[-1], y, operator, mu)
        new_z = jnp.concatenate([heads, last[None]], axis=0)
        new_state = MSFlowState(
            iter_num=state.iter_num + 1,
            mu=jnp.minimum(mu * self._mu_ratio(z.dtype), jnp.asarray(self.mu_end, z.dtype)),
            value=self._objective(new_z, ends, y, operator, mu),
            error=jnp.max(jnp.linalg.norm(ends - new_z[1:], axis=-1)),
            flowed=ends,
            opt_state=opt_state,
            nonfinite_count=count_nonfinite(state.nonfinite_count, (grad, last)),
            status=state.status,
        )
        return OptStep(new_z, self._with_status(new_z, new_state))

    def _nonfinite(self, params, state):
        finite = jnp.isfinite(state.value) & jnp.all(jnp.isfinite(state.flowed))
        return super()._nonfinite(params, state) | ~finite

    def optimality_fun(self, params, y, operator, velocity_params) -> jax.Array:
        """The exact gradient of ``L(·; μ_end)`` over the whole trajectory, (S + 1, D)."""
        return jax.grad(self.objective)(
            jnp.asarray(params), y, operator, velocity_params, self.mu_end
        )


# --------------------------------------------------------------------------------------------
# One-call front ends (batched over problems, compiled once per configuration).


class ShootingResult(NamedTuple):
    """What :func:`single_shooting` returns (leading batch axes as given).

    Attributes:
      reconstruction: ``Φ_{0→1}(z)`` (..., D).
      latent: the optimised ``z`` (..., D).
      value: ``J`` at the last update's starting iterate.
      gradient_norm: ``||∇J||`` there.
      iterations: updates done.
      nonfinite_count: updates with a non-finite objective or gradient.
      status: :class:`~jaxlab.solvers.SolverStatus` codes (``NONFINITE`` = 3).

    Examples:
      >>> ShootingResult._fields[:2]
      ('reconstruction', 'latent')
    """

    reconstruction: jax.Array
    latent: jax.Array
    value: jax.Array
    gradient_norm: jax.Array
    iterations: jax.Array
    nonfinite_count: jax.Array
    status: jax.Array


class MSFlowResult(NamedTuple):
    """What :func:`msflow` returns (leading batch axes as given).

    Attributes:
      reconstruction: ``z_S`` (..., D), data-consistent.
      resimulated: ``Φ_{0→1}(z_0)`` (..., D), exactly on the flow.
      trajectory: ``z_0..z_S`` (..., S + 1, D).
      stitching_gap: ``max_k ||Φ_k(z_k) - z_{k+1}||`` at the end.
      value: ``L`` at the end (with the last sweep's μ).
      mu: the μ after the last sweep.
      iterations: sweeps done.
      nonfinite_count: sweeps with a non-finite gradient or data step.
      status: :class:`~jaxlab.solvers.SolverStatus` codes (``NONFINITE`` = 3).

    Examples:
      >>> MSFlowResult._fields[:3]
      ('reconstruction', 'resimulated', 'trajectory')
    """

    reconstruction: jax.Array
    resimulated: jax.Array
    trajectory: jax.Array
    stitching_gap: jax.Array
    value: jax.Array
    mu: jax.Array
    iterations: jax.Array
    nonfinite_count: jax.Array
    status: jax.Array


def _batched(z0, y, name="z0"):
    z0 = check_array(z0, name, kind="floating")
    y = check_array(y, "y", kind="floating")
    if z0.ndim not in (1, 2):
        raise ValueError(f"{name} must have shape (D,) or (B, D), got {z0.shape}")
    if y.ndim != z0.ndim or (z0.ndim == 2 and y.shape[0] != z0.shape[0]):
        raise ValueError(
            f"y must have one measurement per {name} row: got {name} {z0.shape}, y {y.shape}"
        )
    return z0, y


def _single_shooting_one(solver, z0, y, operator, velocity_params) -> ShootingResult:
    z, state = solver.run(z0, y, operator, velocity_params)
    return ShootingResult(
        solver.decode(z, velocity_params),
        z,
        state.value,
        state.error,
        state.iter_num,
        state.nonfinite_count,
        state.status,
    )


def _msflow_one(solver, z0, y, operator, velocity_params) -> MSFlowResult:
    start = solver.init_params(z0, velocity_params)
    z, state = solver.run(start, y, operator, velocity_params)
    return MSFlowResult(
        z[-1],
        solver.resimulate(z, velocity_params),
        z,
        state.error,
        state.value,
        state.mu,
        state.iter_num,
        state.nonfinite_count,
        state.status,
    )


class _Configuration:
    """A solver's type and field values: equal solvers (built at different call sites, e.g. a
    test, an experiment and a doctest) share one front-end program and so one trace. A solver
    with an unhashable setting (an array) is its own configuration."""

    def __init__(self, solver):
        self.solver = solver
        self.key = (type(solver), *(getattr(solver, f.name) for f in dataclasses.fields(solver)))
        try:
            hash(self.key)
        except TypeError:
            self.key = (type(solver), id(solver))  # kept alive by the cache below

    def __eq__(self, other):
        return self.key == other.key

    def __hash__(self):
        return hash(self.key)


@functools.lru_cache(maxsize=32)
def _program(configuration: _Configuration, one, batched: bool):
    """The front end's compiled program per configuration and batching (jax.jit caches per
    shape)."""
    # The loop runs inside this program's jit (and vmap), not a jit of its own.
    fn = functools.partial(one, dataclasses.replace(configuration.solver, jit=False))
    return jax.jit(jax.vmap(fn, in_axes=(0, 0, None, None)) if batched else fn)


def _front_end(cls, one, front_end, solver, velocity_params, z0, y, operator, settings):
    if isinstance(solver, cls):
        if settings:
            raise TypeError(
                f"{front_end} takes its settings from the {cls.__name__} it is given, got also "
                f"{sorted(settings)} (use dataclasses.replace(solver, ...))"
            )
    elif callable(solver):
        warnings.warn(
            f"{front_end}(velocity_fn, velocity_params, z0, y, operator, noise_std=..., ...) is "
            f"deprecated: pass a {cls.__name__}(velocity_fn, noise_std, ...) as the first "
            "argument instead (every setting is a field of the solver)",
            DeprecationWarning,
            stacklevel=3,
        )
        solver = cls(solver, **settings)
    else:
        check_instance(solver, cls, "solver", f"the configured solver {front_end} runs")
    z0, y = _batched(z0, y)
    check_operator(operator, z0.shape[-1], "z0")
    _check_measurement(y[0] if y.ndim == 2 else y, operator)
    return _program(_Configuration(solver), one, z0.ndim == 2)(z0, y, operator, velocity_params)


def single_shooting(
    solver: SingleShooting,
    velocity_params: Any,
    z0: ArrayLike,
    y: ArrayLike,
    operator: LinearOperator,
    **deprecated_settings: Any,
) -> ShootingResult:
    """D-Flow (single shooting) on one problem or a batch: ``solver.run`` from ``z0``.

    ``z0`` (D,) or (B, D) initial noise, ``y`` (M,) or (B, M) measurements (the operator is
    shared). The compiled program is cached per configuration (equal solvers share it), so
    repeated calls with the same settings and shapes do not recompile.

    Args:
      solver: a :class:`SingleShooting` (its fields are every setting: σ, N, Adam's step, λ,
        method, adjoint, ``maxiter``). Deprecated: the velocity function, with the former
        keyword settings (``noise_std=..., num_steps=...``) in ``deprecated_settings``, which
        build the solver, with a ``DeprecationWarning``.
      velocity_params: the flow prior's parameters (``solver.velocity_fn(params, x, t)``).
      z0: initial latents.
      y: measurements.
      operator: the forward model.
      **deprecated_settings: the former keyword settings (only with a velocity function).

    Returns:
      A :class:`ShootingResult`.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.inverse import GaussianMixtureFlow, matrix_operator, three_mode_mixture
      >>> flow, op = three_mode_mixture(), matrix_operator(jnp.array([[1.0, 0.0]]))
      >>> x = flow.sample(jax.random.key(0), 8)  # eight problems: observe x₁ with σ = 0.05
      >>> y = x[:, :1] + 0.05 * jax.random.normal(jax.random.key(1), (8, 1))
      >>> z0 = jax.random.normal(jax.random.key(2), (8, 2))
      >>> solver = SingleShooting(GaussianMixtureFlow.velocity, noise_std=0.05, num_steps=8,
      ...                         maxiter=300)
      >>> out = single_shooting(solver, flow, z0, y, op)
      >>> out.reconstruction.shape, out.status.tolist() == [2] * 8  # 2: MAXITER
      ((8, 2), True)
      >>> # x₁ fitted to 3σ in 6 of 8: the descent through the whole flow can stall (msflow's
      >>> # example fits all 8 from the same starts)
      >>> int((jnp.abs(out.reconstruction[:, 0] - y[:, 0]) < 0.15).sum())
      6

    References:
      H. Ben-Hamu et al., D-Flow, ICML 2024 (arXiv 2402.14017).
    """
    return _front_end(
        SingleShooting,
        _single_shooting_one,
        "single_shooting",
        solver,
        velocity_params,
        z0,
        y,
        operator,
        deprecated_settings,
    )


def msflow(
    solver: MSFlow,
    velocity_params: Any,
    z0: ArrayLike,
    y: ArrayLike,
    operator: LinearOperator,
    **deprecated_settings: Any,
) -> MSFlowResult:
    """MS-Flow on one problem or a batch: the stitched start from ``z0``, then ``solver.run``.

    The trajectory starts exactly stitched (``z_{k+1} = Φ_k(z_k)``, so the first objective is
    D-Flow's at ``z0``). The compiled program is cached per configuration, as for
    :func:`single_shooting`.

    Args:
      solver: an :class:`MSFlow` (its fields are every setting: σ, S, n_sub, the μ schedule,
        Adam's step, λ, the Jacobian, method, ``maxiter``). Deprecated: the velocity function,
        with the former keyword settings in ``deprecated_settings``, which build the solver,
        with a ``DeprecationWarning``.
      velocity_params: the flow prior's parameters.
      z0: initial latents (D,) or (B, D).
      y: measurements (M,) or (B, M).
      operator: the forward model (one for the whole batch).
      **deprecated_settings: the former keyword settings (only with a velocity function).

    Returns:
      An :class:`MSFlowResult`.

    Examples:
      The problems of :func:`single_shooting`'s example, with S = 4 segments of 2 steps:

      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.inverse import GaussianMixtureFlow, matrix_operator, three_mode_mixture
      >>> solver = MSFlow(GaussianMixtureFlow.velocity, noise_std=0.05, steps_per_segment=2,
      ...                 maxiter=300)
      >>> flow, op = three_mode_mixture(), matrix_operator(jnp.array([[1.0, 0.0]]))
      >>> x = flow.sample(jax.random.key(0), 8)  # eight problems: observe x₁ with σ = 0.05
      >>> y = x[:, :1] + 0.05 * jax.random.normal(jax.random.key(1), (8, 1))
      >>> z0 = jax.random.normal(jax.random.key(2), (8, 2))
      >>> out = msflow(solver, flow, z0, y, op)
      >>> int((jnp.abs(out.reconstruction[:, 0] - y[:, 0]) < 0.15).sum())
      8
      >>> bool(jnp.all(out.stitching_gap < 0.1)), out.nonfinite_count.tolist() == [0] * 8
      (True, True)

    References:
      A. Denker et al., MS-Flow, ICML 2026 (arXiv 2602.08538).
    """
    return _front_end(
        MSFlow, _msflow_one, "msflow", solver, velocity_params, z0, y, operator, deprecated_settings
    )
