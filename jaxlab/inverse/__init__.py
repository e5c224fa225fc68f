"""Inverse problems with flow-matching priors: MS-Flow (multiple shooting) and D-Flow.

A. Denker, M. Eliasof, Ž. Kereta, C.-B. Schönlieb, *Trajectory Stitching for Solving Inverse
Problems with Flow-Based Models* (MS-Flow), ICML 2026 (arXiv 2602.08538); the single-shooting
baseline is D-Flow (H. Ben-Hamu et al., ICML 2024, arXiv 2402.14017).

For ``y = A x + σ ε`` and a flow prior ``x = Φ_{0→1}(z)`` (a flow-matching velocity integrated
from noise at ``t = 0`` to data at ``t = 1``), D-Flow optimises ``z`` through the whole flow,
MS-Flow the trajectory ``z_0..z_S`` at segment boundaries, coupled by penalties
``(μ/2)||Φ_k(z_k) - z_{k+1}||²``, alternating latent and closed-form data steps.

* Flow matching: :class:`VelocityMLP` (flax.nnx), :func:`flow_matching_loss`,
  :func:`train_flow_matching`, :func:`split_velocity`; the flow map :func:`integrate_flow`
  (diffrax fixed-step Euler/Heun, :func:`diffrax_solver`, :func:`diffrax_adjoint`).
* The analytic prior :class:`GaussianMixtureFlow` (exact velocity, moments and posterior) and the
  note's :func:`three_mode_mixture`.
* Forward models with adjoints: :func:`inpainting_operator` (:func:`lower_half_mask`),
  :func:`average_pool_operator` (super-resolution), :func:`parallel_beam_operator` (CT),
  :func:`matrix_operator`, all :class:`LinearOperator` s with a closed-form data step
  (``normal_solve``); :func:`check_operator`; :func:`task_operator` (the paper's three tasks by
  name).
* Solvers (jaxopt's shape): :class:`SingleShooting` (D-Flow; every step's activations stored,
  one state per step stored, or diffrax's recursive checkpointing) and :class:`MSFlow`
  (Jacobian-free or exact-VJP latent steps, μ continuation), with :func:`single_shooting` and
  :func:`msflow` as batched one-call front ends (given a solver instance) returning
  reconstructions and diagnostics (stitching gap, non-finite counts, status); :func:`radial_prior`.
* The comparison harness :class:`BatchedReconstructor`: a solver's vmapped update compiled once
  for a batch, its memory measured, run step by step and timed (a :class:`Reconstruction`).
* Data, baselines and measures: :func:`digits_images` (scikit-learn's bundled digits),
  :func:`measure`, :func:`least_squares_baseline`, :func:`psnr`, and :func:`step_memory` (XLA's
  memory analysis of a compiled step, with a saved-residual fallback).
"""

from jaxlab.inverse._flow_matching import (
    VelocityMLP,
    diffrax_adjoint,
    diffrax_solver,
    flow_matching_loss,
    integrate_flow,
    split_velocity,
    train_flow_matching,
)
from jaxlab.inverse._memory import StepMemory, saved_residual_bytes, step_memory
from jaxlab.inverse._operators import (
    AveragePoolOperator,
    InpaintingOperator,
    LinearOperator,
    MatrixOperator,
    average_pool_operator,
    check_operator,
    inpainting_operator,
    lower_half_mask,
    matrix_operator,
    parallel_beam_operator,
    task_operator,
)
from jaxlab.inverse._problems import (
    DigitsSplit,
    GaussianMixtureFlow,
    digits_images,
    least_squares_baseline,
    measure,
    psnr,
    three_mode_mixture,
)
from jaxlab.inverse._reconstructor import BatchedReconstructor, Reconstruction
from jaxlab.inverse._shooting import (
    MSFlow,
    MSFlowResult,
    MSFlowState,
    ShootingResult,
    SingleShooting,
    SingleShootingState,
    msflow,
    radial_prior,
    single_shooting,
)

__all__ = [
    # flow matching and the flow map
    "VelocityMLP",
    "diffrax_adjoint",
    "diffrax_solver",
    "flow_matching_loss",
    "integrate_flow",
    "split_velocity",
    "train_flow_matching",
    # the analytic mixture prior
    "GaussianMixtureFlow",
    "three_mode_mixture",
    # forward models
    "AveragePoolOperator",
    "InpaintingOperator",
    "LinearOperator",
    "MatrixOperator",
    "average_pool_operator",
    "check_operator",
    "inpainting_operator",
    "lower_half_mask",
    "matrix_operator",
    "parallel_beam_operator",
    "task_operator",
    # single and multiple shooting
    "MSFlow",
    "MSFlowResult",
    "MSFlowState",
    "ShootingResult",
    "SingleShooting",
    "SingleShootingState",
    "msflow",
    "radial_prior",
    "single_shooting",
    # the comparison harness
    "BatchedReconstructor",
    "Reconstruction",
    # data, baselines, measures
    "DigitsSplit",
    "StepMemory",
    "digits_images",
    "least_squares_baseline",
    "measure",
    "psnr",
    "saved_residual_bytes",
    "step_memory",
]
