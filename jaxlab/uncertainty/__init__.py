"""Uncertainty quantification: CreDRO credal ensembles and epistemic-uncertainty measures.

CreDRO (Wang et al., ICML 2026): ensemble members trained with distributionally robust
objectives at several relaxation levels (vmapped over members), the box credal set of their
predictions, and its epistemic uncertainty ``H̄ − H̲`` (upper minus lower entropy); the deep
ensemble, its mutual information and entropy of the mean, and a single model's entropy as
baselines; digits splits with covariate shifts made in code (rotations, pixel noise, class-prior
shift) for out-of-distribution detection and selective classification.
"""

from jaxlab.uncertainty._credro import (
    DRO_KINDS,
    accuracy_rejection_curve,
    auroc,
    chi2_dro_loss,
    credal_box,
    cvar_loss,
    dro_loss,
    entropy,
    entropy_of_mean,
    epistemic_uncertainty,
    lower_entropy,
    mutual_information,
    tilted_loss,
    train_credal_ensemble,
    upper_entropy,
)
from jaxlab.uncertainty._problems import (
    DigitsShiftSplits,
    add_pixel_noise,
    digits_shift_splits,
    ensemble_init,
    flip_labels,
    mlp_apply,
    mlp_init,
    rotate_images,
    train_deep_ensemble,
)

__all__ = [
    "DRO_KINDS",
    "accuracy_rejection_curve",
    "auroc",
    "chi2_dro_loss",
    "credal_box",
    "cvar_loss",
    "dro_loss",
    "entropy",
    "entropy_of_mean",
    "epistemic_uncertainty",
    "lower_entropy",
    "mutual_information",
    "tilted_loss",
    "train_credal_ensemble",
    "upper_entropy",
    # problems and baselines (jaxlab/uncertainty/_problems.py)
    "DigitsShiftSplits",
    "add_pixel_noise",
    "flip_labels",
    "digits_shift_splits",
    "ensemble_init",
    "mlp_apply",
    "mlp_init",
    "rotate_images",
    "train_deep_ensemble",
]
