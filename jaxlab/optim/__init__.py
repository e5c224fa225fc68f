"""Optax gradient transformations from the ICML 2026 papers."""

from jaxlab.optim._compressors import (
    Compressor,
    block_top_k,
    identity,
    natural_compression,
    rand_k,
    rotation_compressor,
    scaled_sign,
    threshold_top_k,
    top_k,
)
from jaxlab.optim._delay import DELAY_CORRECTIONS, DelayState, delayed
from jaxlab.optim._deva import (
    DevaState,
    ScaleByDevaMatrixState,
    ScaleByDevaVectorState,
    deva,
    deva_matrix_labels,
    deva_vector,
    is_hidden_matrix,
    quadratic_toy_hessian,
    scale_by_deva_matrix,
    scale_by_deva_vector,
)
from jaxlab.optim._ef_theory import (
    cgd_optimal_step_size,
    ef21_lyapunov,
    ef21_two_worker_rate,
    ef_lyapunov,
    ef_optimal_step_size,
    ef_tight_rate,
    iterations_to_tolerance,
    linear_one_step_matrix,
    richtarik_ef21_rate,
    richtarik_ef21_step_size,
)
from jaxlab.optim._error_feedback import (
    ErrorFeedback21State,
    ErrorFeedbackState,
    error_feedback,
    error_feedback_21,
    scale_by_error_feedback,
    scale_by_error_feedback_21,
)
from jaxlab.optim._harm import (
    HarmInfo,
    HarmState,
    exact_harm_weights,
    first_order_harm,
    harm,
    harm_dual_terms,
    harm_sgd,
    harm_train_step,
    solve_harm_dual,
)
from jaxlab.optim._harm_problems import mlp_exact_harm_train_step, mlp_logits_and_features
from jaxlab.optim._newton_schulz import newton_schulz_msign
from jaxlab.optim._problems import (
    DistributedProblem,
    DistributedRun,
    breast_cancer_workers,
    compressed_gradient_descent,
    distributed_least_squares,
    logistic_reference_minimiser,
    logistic_regression_problem,
    nonconvex_logistic_regression_problem,
    rotation_instance_rates,
    run_distributed,
    worst_case_rate,
)
from jaxlab.optim._soap import ScaleBySoapState, scale_by_soap

__all__: list[str] = [
    # DeVA, issue 4 (jaxlab/optim/_deva.py, _newton_schulz.py)
    "DevaState",
    "ScaleByDevaMatrixState",
    "ScaleByDevaVectorState",
    "deva",
    "deva_matrix_labels",
    "deva_vector",
    "is_hidden_matrix",
    "newton_schulz_msign",
    "quadratic_toy_hessian",
    "scale_by_deva_matrix",
    "scale_by_deva_vector",
    # SOAP, the deva experiment's baseline; its eigenbasis bookkeeping is DeVA-S∞'s
    # (jaxlab/optim/_soap.py)
    "ScaleBySoapState",
    "scale_by_soap",
    # per-sample harm minimisation, issue 21 (jaxlab/optim/_harm.py)
    "HarmInfo",
    "HarmState",
    "exact_harm_weights",
    "first_order_harm",
    "harm",
    "harm_dual_terms",
    "harm_sgd",
    "harm_train_step",
    "solve_harm_dual",
    "mlp_exact_harm_train_step",
    "mlp_logits_and_features",
    # one-step gradient delay and its correction (jaxlab/optim/_delay.py)
    "DELAY_CORRECTIONS",
    "DelayState",
    "delayed",
    # compressors and error-feedback transforms (jaxlab/optim/_compressors.py, _error_feedback.py)
    "Compressor",
    "block_top_k",
    "identity",
    "natural_compression",
    "rand_k",
    "rotation_compressor",
    "scaled_sign",
    "threshold_top_k",
    "top_k",
    "ErrorFeedback21State",
    "ErrorFeedbackState",
    "error_feedback",
    "error_feedback_21",
    "scale_by_error_feedback",
    "scale_by_error_feedback_21",
    # error-feedback theory (jaxlab/optim/_ef_theory.py)
    "cgd_optimal_step_size",
    "ef21_lyapunov",
    "ef21_two_worker_rate",
    "ef_lyapunov",
    "ef_optimal_step_size",
    "ef_tight_rate",
    "iterations_to_tolerance",
    "linear_one_step_matrix",
    "richtarik_ef21_rate",
    "richtarik_ef21_step_size",
    # error-feedback problems, baseline, simulated-workers loop, worst-case search
    # (jaxlab/optim/_problems.py)
    "DistributedProblem",
    "DistributedRun",
    "breast_cancer_workers",
    "compressed_gradient_descent",
    "distributed_least_squares",
    "logistic_reference_minimiser",
    "logistic_regression_problem",
    "nonconvex_logistic_regression_problem",
    "rotation_instance_rates",
    "run_distributed",
    "worst_case_rate",
]
