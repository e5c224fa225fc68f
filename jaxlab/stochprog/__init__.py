"""Data-driven stochastic programming: APUB, bootstrap LPs and two-stage models.

S. Liu, M. Gao, J. Hu, *Minimizing Upper Confidence Bounds: A Data-Driven Framework for
Stochastic Programming*, ICML 2026 (arXiv 2403.08966).

* The statistic: :func:`apub` (the upper-tail CVaR of the bootstrap-mean distribution),
  :func:`apub_exact` (the exact bootstrap law, tiny N), :func:`efron_upper_bound`,
  :func:`clt_upper_bound`, :func:`bootstrap_multiplicities`, :func:`cvar_weights`.
* Two-stage LPs with random recourse: :class:`TwoStageLP`, the SAA and APUB extensive forms
  (:func:`extensive_form`, :func:`solve_extensive_form`, HiGHS on the host), the recourse by
  LP (:func:`recourse_lp`) and a bound below it (:func:`recourse_lower_bound`). The L-shaped
  method is :class:`jaxlab.solvers.LShaped`.
* The product-mix instance: :func:`product_mix_config`, :func:`sample_product_mix` (regime
  switch, exact Gumbel copula, :func:`gumbel_copula`, :func:`positive_stable`),
  :func:`product_mix_recourse` (closed form in JAX) and :func:`product_mix_model`.
"""

from jaxlab.stochprog._apub import (
    apub,
    apub_exact,
    bootstrap_multiplicities,
    clt_upper_bound,
    cvar_weights,
    efron_upper_bound,
)
from jaxlab.stochprog._problems import (
    ProductMixConfig,
    ProductMixScenarios,
    Regime,
    gumbel_copula,
    positive_stable,
    product_mix_config,
    product_mix_model,
    product_mix_recourse,
    product_mix_reference_scenarios,
    sample_product_mix,
)
from jaxlab.stochprog._twostage import (
    ExtensiveForm,
    TwoStageLP,
    TwoStageSolution,
    extensive_form,
    recourse_lower_bound,
    recourse_lp,
    solve_extensive_form,
)

__all__ = [
    "ExtensiveForm",
    "ProductMixConfig",
    "ProductMixScenarios",
    "Regime",
    "TwoStageLP",
    "TwoStageSolution",
    "apub",
    "apub_exact",
    "bootstrap_multiplicities",
    "clt_upper_bound",
    "cvar_weights",
    "efron_upper_bound",
    "extensive_form",
    "gumbel_copula",
    "positive_stable",
    "product_mix_config",
    "product_mix_model",
    "product_mix_recourse",
    "product_mix_reference_scenarios",
    "recourse_lower_bound",
    "recourse_lp",
    "sample_product_mix",
    "solve_extensive_form",
]
