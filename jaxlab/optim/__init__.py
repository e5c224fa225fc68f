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
    ScaleByDevaMatrixState,
    ScaleByDevaVectorState,
    deva,
    deva_matrix_labels,
    deva_vector,
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
from jaxlab.optim._newton_schulz import newton_schulz_msign

__all__: list[str] = [
    # DeVA, issue 4 (jaxlab/optim/_deva.py, _newton_schulz.py)
    "ScaleByDevaMatrixState",
    "ScaleByDevaVectorState",
    "deva",
    "deva_matrix_labels",
    "deva_vector",
    "newton_schulz_msign",
    "scale_by_deva_matrix",
    "scale_by_deva_vector",
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
]
