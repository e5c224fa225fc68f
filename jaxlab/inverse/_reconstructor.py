"""A solver's update compiled once for a batch of problems, its memory measured, run and timed.

The front ends :func:`~jaxlab.inverse.single_shooting` and :func:`~jaxlab.inverse.msflow` run
the whole solve as one program. Comparing methods needs the pieces apart: the compiled memory of
one optimisation step (what grows with the number of ODE steps) and the time per step, measured
on the very program that then reconstructs. :class:`BatchedReconstructor` is that harness for
:class:`~jaxlab.inverse.SingleShooting` (D-Flow) and :class:`~jaxlab.inverse.MSFlow`.

References:
  A. Denker et al., "Trajectory Stitching for Solving Inverse Problems with Flow-Based Models"
  (MS-Flow), ICML 2026 (arXiv 2602.08538): memory against N and time per step.
"""

from __future__ import annotations

import functools
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxlab._src.validation import check_array, check_positive_int
from jaxlab.inverse._memory import StepMemory, step_memory
from jaxlab.inverse._operators import LinearOperator, check_operator
from jaxlab.inverse._shooting import MSFlow, SingleShooting

__all__ = ["BatchedReconstructor", "Reconstruction"]


class Reconstruction(NamedTuple):
    """What :meth:`BatchedReconstructor.reconstruct` returns (batch axis first).

    Attributes:
      reconstruction: ``Φ_{0→1}(z)`` (D-Flow) or the data-consistent ``z_S`` (MS-Flow), (B, D).
      resimulated: ``Φ_{0→1}(z_0)`` (MS-Flow), (B, D); ``None`` for D-Flow.
      stitching_gap: ``max_k ||Φ_k(z_k) - z_{k+1}||`` (MS-Flow), (B,); ``None`` for D-Flow.
      status: :class:`~jaxlab.solvers.SolverStatus` codes after the last update, (B,).
      nonfinite_count: updates with a non-finite objective, gradient or data step, (B,).
      step_seconds: wall seconds per update of the whole batch (compilation excluded).

    Examples:
      >>> Reconstruction._fields[:3]
      ('reconstruction', 'resimulated', 'stitching_gap')
    """

    reconstruction: jax.Array
    resimulated: jax.Array | None
    stitching_gap: jax.Array | None
    status: jax.Array
    nonfinite_count: jax.Array
    step_seconds: float


class BatchedReconstructor:
    """One solver on a batch of problems: the vmapped update compiled once, memory measured.

    The update ``solver.update`` vmapped over ``batch_size`` problems (the operator and the
    prior shared) is compiled once by :func:`~jaxlab.inverse.step_memory`, so ``memory``
    is that program's (``memory_analysis()``; on a backend without it, the residuals of the
    differentiated function: D-Flow's objective, or one MS-Flow segment with
    ``jacobian="vjp"``, none for the Jacobian-free sweep). :meth:`reconstruct` starts every
    problem as the solver does (D-Flow from ``z0``, MS-Flow from the stitched trajectory of
    ``z0``), then runs exactly ``solver.maxiter`` updates of that program from the host (no
    early stop, so every step is timed alike), and reports the time per step.

    Args:
      solver: a :class:`~jaxlab.inverse.SingleShooting` or :class:`~jaxlab.inverse.MSFlow`
        (its ``maxiter`` is the number of updates).
      velocity_params: the flow prior's parameters (``solver.velocity_fn(params, x, t)``).
      operator: the forward model shared by the batch.
      batch_size: problems per call (``B``).

    Attributes:
      solver: as given.
      velocity_params: as given.
      operator: as given.
      batch_size: as given.
      memory: the :class:`~jaxlab.inverse.StepMemory` of one batched update.

    Examples:
      D-Flow with N = 2 steps on two problems of the note's 2-D toy (an :class:`MSFlow` runs the
      same way and fills ``resimulated`` and ``stitching_gap``):

      >>> import jax.numpy as jnp
      >>> from jaxlab.inverse import (GaussianMixtureFlow, SingleShooting, matrix_operator,
      ...                             three_mode_mixture)
      >>> flow, op = three_mode_mixture(), matrix_operator(jnp.array([[1.0, 0.0]]))
      >>> solver = SingleShooting(GaussianMixtureFlow.velocity, 0.05, num_steps=2, maxiter=3)
      >>> harness = BatchedReconstructor(solver, flow, op, batch_size=2)
      >>> harness.memory.source, harness.memory.temp_bytes > 0
      ('memory_analysis', True)
      >>> out = harness.reconstruct(jnp.array([[0.3, -0.2], [0.1, 0.4]]), jnp.ones((2, 1)))
      >>> out.reconstruction.shape, out.resimulated is None, out.status.tolist()  # 2: MAXITER
      ((2, 2), True, [2, 2])

    References:
      A. Denker et al., MS-Flow, ICML 2026 (arXiv 2602.08538); H. Ben-Hamu et al., D-Flow,
      ICML 2024 (arXiv 2402.14017).
    """

    def __init__(
        self,
        solver: SingleShooting | MSFlow,
        velocity_params: Any,
        operator: LinearOperator,
        batch_size: int,
    ):
        if not isinstance(solver, SingleShooting | MSFlow):
            raise TypeError(
                f"solver must be a SingleShooting or an MSFlow, got {type(solver).__name__}"
            )
        check_operator(operator, getattr(operator, "input_size", None), "operator")
        self.batch_size = check_positive_int(batch_size, "batch_size")
        self.solver, self.velocity_params, self.operator = solver, velocity_params, operator
        update = jax.vmap(solver.update, in_axes=(0, 0, 0, None, None))
        y = jnp.zeros((batch_size, operator.output_size))
        z0 = jnp.zeros((batch_size, operator.input_size))
        params, state = jax.eval_shape(self._start, z0, y)
        self.memory: StepMemory = step_memory(
            update, params, state, y, operator, velocity_params, **self._fallback(z0, y)
        )
        self._update = self.memory.compiled or jax.jit(update)

    @property
    def _msflow(self) -> bool:
        return isinstance(self.solver, MSFlow)

    def _start(self, z0, y):
        """The first iterate and state of every problem (MS-Flow: the stitched trajectory)."""
        if not self._msflow:
            init = jax.vmap(self.solver.init_state, in_axes=(0, 0, None, None))
            return z0, init(z0, y, self.operator, self.velocity_params)
        return self._msflow_start(z0, y, self.velocity_params)

    @functools.cached_property
    def _msflow_start(self):
        # Jitted once per reconstructor (vmap of a scan over the segments, then the state).
        solver, operator = self.solver, self.operator

        def start(z0, y, velocity_params):
            traj = jax.vmap(solver.init_params, in_axes=(0, None))(z0, velocity_params)
            init = jax.vmap(solver.init_state, in_axes=(0, 0, None, None))
            return traj, init(traj, y, operator, velocity_params)

        return jax.jit(start)

    def _fallback(self, z0, y) -> dict:
        """The differentiated function of the step, for backends without a memory analysis."""
        solver, operator, vparams = self.solver, self.operator, self.velocity_params
        if not self._msflow:
            objective = jax.vmap(solver.objective, in_axes=(0, 0, None, None))
            return dict(
                residual_fn=lambda z: jnp.sum(objective(z, y, operator, vparams)),
                residual_args=(z0,),
            )
        # Jacobian-free sweeps differentiate nothing (no residuals); the VJP arm's are one
        # segment's, counted through the segment map.
        ends = jax.vmap(solver.segment_ends, in_axes=(0, None))
        heads = jnp.zeros((self.batch_size, solver.num_segments, operator.input_size))
        return dict(
            residual_fn=lambda z: jnp.sum(ends(z, vparams)) * (solver.jacobian == "vjp"),
            residual_args=(heads,),
        )

    def reconstruct(self, z0: Any, y: Any) -> Reconstruction:
        """Starts every problem from ``z0`` (B, D), runs ``solver.maxiter`` updates against
        ``y`` (B, M), and returns the :class:`Reconstruction` with the time per update."""
        z0 = check_array(z0, "z0", kind="floating")
        y = check_array(y, "y", kind="floating")
        want = {
            "z0": (self.batch_size, self.operator.input_size),
            "y": (self.batch_size, self.operator.output_size),
        }
        for name, value in (("z0", z0), ("y", y)):
            if value.shape != want[name]:
                raise ValueError(
                    f"{name} must have shape (batch_size, {'D' if name == 'z0' else 'M'}) = "
                    f"{want[name]}, got {value.shape}"
                )
        params, state = self._start(z0, y)
        jax.block_until_ready(state)
        start = time.perf_counter()
        for _ in range(self.solver.maxiter):
            params, state = self._update(params, state, y, self.operator, self.velocity_params)
        jax.block_until_ready(params)
        seconds = time.perf_counter() - start
        if self._msflow:
            resimulated, _ = self._start(params[:, 0], y)
            rec, resimulated, gap = params[:, -1], resimulated[:, -1], state.error
        else:
            rec, resimulated, gap = self._decode(params, self.velocity_params), None, None
        return Reconstruction(
            rec,
            resimulated,
            gap,
            state.status,
            state.nonfinite_count,
            seconds / self.solver.maxiter,
        )

    @functools.cached_property
    def _decode(self):
        return jax.jit(jax.vmap(self.solver.decode, in_axes=(0, None)))
