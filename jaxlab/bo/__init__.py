"""Bayesian optimization: exact GPs, RAMBO (a Dirichlet-process mixture of GPs), the BO loop.

Y. Zhang, Y. Liu, Z. Chen, R. Ranftl, D. Liu, L. Li, *Regime-Adaptive Bayesian Optimization via
Dirichlet Process Mixtures of Gaussian Processes* (RAMBO), ICML 2026 (arXiv 2601.20043).

A multi-regime objective is modeled by a Chinese-restaurant-process mixture of independent GPs
with per-regime hyper-parameters; latent functions are integrated out and assignments are
sampled by a collapsed Gibbs sweep; predictions gate the regimes by how well each explains a
test point and split the uncertainty into intra-regime (``Σ w_k v_k``) and inter-regime
(``Σ w_k (μ_k - μ)²``) parts; the acquisition is the mixture of per-regime EIs.

* GPs: :class:`GPData` (padded training data, checked once), :func:`rbf_kernel` (isotropic
  or ARD), :func:`gp_log_marginal`, :func:`gp_posterior` /
  :func:`gp_predict`, :func:`gp_loo_predictive` (closed-form leave-one-out), :func:`fit_gp`
  (type-II ML or MAP with optax L-BFGS or Adam), all on
  padded data with a row mask.
* RAMBO: :func:`rambo` (the sampler as a ``SamplingAlgorithm``, blackjax's shape, with
  ``rambo.init``/``rambo.build_kernel`` and a :class:`RamboConfig`), :func:`rambo_init`,
  :func:`rambo_sweep` (jitted, vmapped over regime slots, rank-one
  leave-one-out updates), :func:`rambo_split_merge` (Jain and Neal's split-merge move),
  :func:`rambo_fit` (sweeps, optional split-merge moves, periodic MAP refits; the posterior
  similarity matrix),
  :func:`concentration_schedule` (constant, linear, sqrtlog), :func:`mixture_posterior`,
  :func:`mixture_predict`, :func:`spatial_gate`, :func:`mixture_moments`,
  :func:`mixture_expected_improvement`, its tail-stable log
  :func:`mixture_log_expected_improvement` and :func:`mixture_ucb` (inferred, labelled so);
  :func:`numpy_gibbs_sweep`, the same sweep in plain NumPy float64 (a reference and the
  benchmark's peer).
* Acquisitions: :func:`expected_improvement`, :func:`upper_confidence_bound`,
  :func:`maximize_acquisition` (Sobol starts, Adam, then L-BFGS), :func:`sobol_points`.
* The loop: :func:`bayes_opt` (``"rambo"``, ``"sgp"`` single-GP EI, ``"random"``).
* BoTorch-style single GP (``bayes_opt(surrogate="sgp_botorch")``): :func:`botorch_log_prior`,
  :func:`sgp_botorch_log_posterior`, :func:`fit_sgp_botorch` (type-II MAP with BoTorch's
  ``SingleTaskGP`` priors and floors, fit as BoTorch fits it, or multi-start in JAX) and
  :func:`log_expected_improvement` (LogEI, accurate where EI underflows).
* Problems: :func:`levy`, :func:`schwefel`, :func:`two_regime`, :func:`bo_problem`,
  :func:`sample_two_gp_regimes`.

The maths runs in the inputs' dtype: float32 by default, float64 under
``jax.enable_x64(True)`` (the note's choice for GP maths; the experiment runs so).
"""

from jaxlab.bo._acquisition import (
    AcquisitionInfo,
    check_bounds,
    expected_improvement,
    log_expected_improvement,
    maximize_acquisition,
    sobol_points,
    upper_confidence_bound,
)
from jaxlab.bo._data import GPData
from jaxlab.bo._gp import (
    GPFitInfo,
    GPParams,
    GPPosterior,
    Standardization,
    botorch_log_prior,
    fit_gp,
    fit_sgp_botorch,
    gp_log_marginal,
    gp_loo_predictive,
    gp_posterior,
    gp_predict,
    rbf_kernel,
    sgp_botorch_log_posterior,
    standardize,
)
from jaxlab.bo._loop import AcquisitionConfig, BOResult, RamboConfig, bayes_opt
from jaxlab.bo._mixture import (
    MixturePosterior,
    MixturePrediction,
    mixture_expected_improvement,
    mixture_log_expected_improvement,
    mixture_moments,
    mixture_posterior,
    mixture_predict,
    mixture_ucb,
    spatial_gate,
)
from jaxlab.bo._priors import (
    BOTORCH_LENGTHSCALE_FLOOR,
    BOTORCH_NOISE_FLOOR,
    BOTORCH_NOISE_PRIOR,
    PRIORS,
    botorch_lengthscale_prior,
    concentration_schedule,
    inverse_gamma_log_prob,
    lognormal_log_prob,
    rambo_log_prior,
)
from jaxlab.bo._problems import (
    TWO_REGIME_MINIMIZER,
    TWO_REGIME_MINIMUM,
    BOProblem,
    bo_problem,
    levy,
    sample_two_gp_regimes,
    schwefel,
    two_regime,
)
from jaxlab.bo._rambo import (
    RamboFitInfo,
    RamboInfo,
    RamboState,
    SplitMergeInfo,
    SplitMergeRandomness,
    SweepInfo,
    SweepRandomness,
    rambo,
    rambo_fit,
    rambo_init,
    rambo_split_merge,
    rambo_sweep,
    split_merge_randomness,
    sweep_randomness,
)
from jaxlab.bo._reference import numpy_gibbs_sweep

__all__ = [
    # Gaussian processes
    "GPData",
    "GPFitInfo",
    "GPParams",
    "GPPosterior",
    "fit_gp",
    "gp_log_marginal",
    "gp_loo_predictive",
    "gp_posterior",
    "gp_predict",
    "rbf_kernel",
    # the BoTorch-style single GP
    "BOTORCH_LENGTHSCALE_FLOOR",
    "BOTORCH_NOISE_FLOOR",
    "BOTORCH_NOISE_PRIOR",
    "botorch_lengthscale_prior",
    "botorch_log_prior",
    "fit_sgp_botorch",
    "lognormal_log_prob",
    "sgp_botorch_log_posterior",
    # RAMBO
    "PRIORS",
    "RamboFitInfo",
    "RamboState",
    "SplitMergeInfo",
    "SplitMergeRandomness",
    "Standardization",
    "SweepInfo",
    "SweepRandomness",
    "concentration_schedule",
    "inverse_gamma_log_prob",
    "rambo_fit",
    "rambo_init",
    "rambo_log_prior",
    "rambo_split_merge",
    "rambo_sweep",
    "split_merge_randomness",
    "standardize",
    "sweep_randomness",
    "numpy_gibbs_sweep",
    "RamboInfo",
    "rambo",
    # mixture predictions
    "MixturePosterior",
    "MixturePrediction",
    "mixture_expected_improvement",
    "mixture_log_expected_improvement",
    "mixture_moments",
    "mixture_posterior",
    "mixture_predict",
    "mixture_ucb",
    "spatial_gate",
    # acquisitions
    "AcquisitionInfo",
    "check_bounds",
    "expected_improvement",
    "log_expected_improvement",
    "maximize_acquisition",
    "sobol_points",
    "upper_confidence_bound",
    # the loop
    "AcquisitionConfig",
    "BOResult",
    "RamboConfig",
    "bayes_opt",
    # problems
    "BOProblem",
    "TWO_REGIME_MINIMIZER",
    "TWO_REGIME_MINIMUM",
    "bo_problem",
    "levy",
    "sample_two_gp_regimes",
    "schwefel",
    "two_regime",
]
