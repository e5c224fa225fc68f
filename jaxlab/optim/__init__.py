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

__all__: list[str] = [
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
]
