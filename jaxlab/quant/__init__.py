"""Post-training weight quantization: RTN, GPTQ and STLA, layer by layer or for a whole model.

Quantizers (:mod:`~jaxlab.quant._uniform`): uniform asymmetric/symmetric integer grids per row or
per group of columns, :func:`quantize` / :func:`dequantize` / :func:`quantize_uniform`,
min-max parameters (:func:`minmax_params`) and the Hessian-weighted grid search
(:func:`search_quant_params`).

The layer objective ``tr(ΔHΔᵀ)`` with ``H = (2/n) XᵀX`` (:func:`hessian_from_inputs`,
:func:`layer_output_error`), its preparation (:func:`prepare_hessian`,
:func:`inverse_hessian_cholesky`), column orders (:func:`column_order`,
:func:`spin_cluster_order`) and the Schur-complement lookahead (:func:`schur_complement`,
:func:`schur_complement_metric`, :func:`schur_complement_objective`).

Methods, each ``(w, h, quantizer) -> QuantizedWeight`` (weights, codes, grid,
:class:`QuantInfo` diagnostics), with the grid and the Hessian's damping in one frozen
:class:`Quantizer` written and checked once: :func:`rtn`, :func:`gptq` (column-wise
compensation with the Cholesky form of ``H⁻¹``, damping, act-order) and :func:`stla`
(cluster-wise AdaRound on the Schur-complement objective, SpinCluster order).
:func:`quantize_model` quantizes every linear layer of a ``flax.nnx`` model sequentially and
reports the loss after each stage. Instances: :func:`correlated_layer`, the note's
:func:`reference_instance` and a small trained byte-level LM (:func:`byte_language_model`,
scored per held-out block by :func:`held_out_losses`).

References:
  Zhang et al., "STLA: Spatiotemporal Lookahead Alignment for Post-Training Quantization",
  ICML 2026; Frantar et al., "GPTQ", ICLR 2023 (arXiv 2210.17323); Nagel et al., "AdaRound",
  ICML 2020 (arXiv 2004.10568).
"""

from jaxlab.quant._gptq import QuantInfo, QuantizedWeight, gptq, rtn
from jaxlab.quant._hessian import (
    ORDERS,
    column_order,
    hessian_from_inputs,
    inverse_hessian_cholesky,
    layer_output_error,
    prepare_hessian,
    schur_complement,
    schur_complement_metric,
    schur_complement_objective,
    spin_cluster_order,
)
from jaxlab.quant._model import ModelQuantization, StageReport, quantize_model
from jaxlab.quant._problems import (
    LanguageModelProblem,
    LayerProblem,
    ReferenceInstance,
    byte_language_model,
    correlated_layer,
    held_out_losses,
    reference_instance,
)
from jaxlab.quant._quantizer import Quantizer
from jaxlab.quant._stla import LOSSES, stla
from jaxlab.quant._uniform import (
    dequantize,
    minmax_params,
    quantize,
    quantize_uniform,
    search_quant_params,
)

__all__ = [
    "LOSSES",
    "ORDERS",
    "LanguageModelProblem",
    "LayerProblem",
    "ModelQuantization",
    "QuantInfo",
    "QuantizedWeight",
    "Quantizer",
    "ReferenceInstance",
    "StageReport",
    "byte_language_model",
    "column_order",
    "correlated_layer",
    "dequantize",
    "gptq",
    "held_out_losses",
    "hessian_from_inputs",
    "inverse_hessian_cholesky",
    "layer_output_error",
    "minmax_params",
    "prepare_hessian",
    "quantize",
    "quantize_model",
    "quantize_uniform",
    "reference_instance",
    "rtn",
    "schur_complement",
    "schur_complement_metric",
    "schur_complement_objective",
    "search_quant_params",
    "spin_cluster_order",
    "stla",
]
