"""STLA: cluster-wise learned rounding that prices the compensation of the columns still to come.

GPTQ rounds one column at a time to the nearest grid point and then compensates. STLA rounds a
*cluster* of ``k`` columns jointly, with AdaRound, on an objective that already accounts for
the compensation that will follow. With the columns in processing order ``(done, c, R)``, ``U``
the upper Cholesky factor of ``H⁻¹`` and ``w̃`` the compensated working copy, for each
cluster ``c``:

1. if ``c`` starts a group, grid-search the group's (scale, zero) on ``w̃`` with the metric
   ``S_g`` (global) or ``H_gg`` (local), :func:`search_quant_params`;
2. learn the cluster's rounding on the **global** loss ``Σ_rows (q_c − w̃_c) S_c (q_c − w̃_c)ᵀ``,
   ``S_c = H_cc − H_cR H_RR⁻¹ H_Rc = (U_ccᵀ U_cc)⁻¹`` (the error left after the optimal
   least-squares compensation of ``R``), or on the **local** ablation
   ``Σ_rows (q_c − w_c) H_cc (q_c − w_c)ᵀ`` against the original weights;
3. compensate: ``E_c = (w̃_c − q_c) U_cc⁻¹``, ``w̃_R ← w̃_R − E_c U_cR`` (GPTQ's block update).

``k = 1`` without learning is GPTQ with the same grid rule (:func:`~jaxlab.quant.gptq` with
``grid="search"``, or both with ``grid="minmax"``). The hard losses of step 2 (global) sum to
``tr(ΔHΔᵀ)``.

**Rounding budget**: the reference's 2000 AdaRound iterations at lr 0.015 (the defaults). The
cosine schedule's summed step ``0.65 · lr · T`` must exceed ``ln 11 ≈ 2.40``, the distance a
logit started at ``h⁻¹(1/2) = 0`` travels to make ``h(V)`` exactly 0 or 1; at 200 iterations it
is 1.95 and about half the weights end soft.

**AdaRound** per weight: a logit ``V``, ``h(V) = clip(σ(V)(ζ − γ) + γ, 0, 1)`` with
``γ = −0.1, ζ = 1.1``, soft weight ``s (clip(⌊w̃/s⌋ + h(V) + z, 0, q_max) − z)``, ``V`` started at
``h⁻¹(w̃/s − ⌊w̃/s⌋)`` (the unrounded value). Loss ``recon + λ reg`` with ``recon`` the chosen
loss summed over rows and ``reg = Σ (1 − |2h(V) − 1|^β)``, off for the first 20 % of the
iterations, then with ``β`` decaying linearly from 20 to 2. Adam with a cosine decay from
``lr`` to ``0.3 lr``; the final rounding is ``⌊w̃/s⌋ + 1[V >= 0]``.

**Orders**: ``"spin"`` (:func:`spin_cluster_order`, Hessian-guided clusters; the default),
``"act"`` (``diag H`` descending) or ``"none"``. Group parameters are computed from the current
compensated weights (the note's pitfall: the reference uses the lazily updated matrix, the same
when group = cluster = block). There is no ``block_size``: each cluster's compensation is one
matmul over all later columns, which is what a lazy block update computes.

Where jit stops: Hessian preparation, ``U``, every ``S_c``, ``S_g`` and ``U_cc⁻¹`` are computed on
the host in NumPy float64; the loop over clusters (with AdaRound as a ``lax.scan``) is one jitted
program per shape, in ``w``'s dtype. ``bits``, ``learning_rate``, ``round_weight``, the loss and
``learn_rounding`` enter it as traced values: changing them does not recompile.

References:
  Zhang, Sun, Chu, Yu, Un, Martins, Mak, Xu, "STLA: Spatiotemporal Lookahead Alignment for
  Post-Training Quantization", ICML 2026 (https://openreview.net/forum?id=d3RFDLBw01);
  Nagel et al., "Up or Down? Adaptive Rounding for Post-Training Quantization", ICML 2020
  (AdaRound, arXiv 2004.10568); Frantar et al., "GPTQ", ICLR 2023.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.typing import ArrayLike

from jaxlab._src.validation import (
    check_bool,
    check_choice,
    check_int,
    check_nonnegative,
    check_positive,
)
from jaxlab.quant._gptq import QuantizedWeight, check_layer, prepare_layer
from jaxlab.quant._hessian import _blocks, _schur_blocks, check_order
from jaxlab.quant._quantizer import Quantizer, resolve_quantizer
from jaxlab.quant._uniform import _grid_search, _minmax

__all__ = ["LOSSES", "stla"]

LOSSES = ("global", "local")
# AdaRound's rectified sigmoid stretch (Nagel et al. 2020) and its regulariser schedule: off for
# the first 20 % of iterations, then β from 20 down to 2 (the reference's defaults).
GAMMA, ZETA = -0.1, 1.1
WARMUP_FRACTION = 0.2
BETA_START, BETA_END = 20.0, 2.0
# Cosine decay of Adam's step to this fraction of the learning rate.
LR_FINAL_FRACTION = 0.3
# The rounding budget: the reference's default number of AdaRound iterations. A logit starts at
# h⁻¹(frac) (0 for frac = 1/2) and must reach ±ln 11 ≈ 2.40 for h(V) to be exactly 0 or 1 (the
# rectified sigmoid saturates at σ(V) = 1/12 and 11/12). Adam moves a logit by at most about
# lr per step, so the schedule's summed step, lr·T·(1 + 0.3)/2 for the cosine decay to 0.3 lr,
# must exceed 2.40: 19.5 at (2000, 0.015), but only 1.95 at 200 iterations, where weights with
# a fractional part near 1/2 cannot end hard (about half stay soft).
NUM_ITERS = 2000
HARD_LOGIT = float(np.log(11.0))
# The reference's grid: 3 bits, groups of 256 columns, each group's grid searched against its
# metric (``S_g`` or ``H_gg``) when the group starts.
DEFAULT_QUANTIZER = Quantizer(bits=3, group_size=256, grid="search")


def _rectified_sigmoid(v):
    return jnp.clip(jax.nn.sigmoid(v) * (ZETA - GAMMA) + GAMMA, 0.0, 1.0)


def _adaround(w_c, t_c, s_c, z_c, metric, qmax, lr, lam, num_iters: int):
    """AdaRound of one cluster: integer codes and (recon, reg) at the end of the warm-up."""
    base = jnp.floor(w_c / s_c)
    frac = w_c / s_c - base
    v0 = -jnp.log((ZETA - GAMMA) / (frac - GAMMA) - 1.0)
    tx = optax.adam(optax.cosine_decay_schedule(lr, num_iters, alpha=LR_FINAL_FRACTION))
    warm = int(WARMUP_FRACTION * num_iters)
    decay = max(num_iters - warm, 1)

    def losses(v, beta):
        soft = s_c * (jnp.clip(base + _rectified_sigmoid(v) + z_c, 0.0, qmax) - z_c)
        e = soft - t_c
        recon = jnp.sum((e @ metric) * e)
        reg = jnp.sum(1.0 - jnp.abs(2.0 * _rectified_sigmoid(v) - 1.0) ** beta)
        return recon, reg

    def step(carry, i):
        v, state = carry
        rel = jnp.maximum(0.0, 1.0 - (i - warm) / decay)
        beta = jnp.where(i < warm, BETA_START, BETA_END + (BETA_START - BETA_END) * rel)
        reg_weight = jnp.where(i < warm, 0.0, lam)

        def objective(v):
            recon, reg = losses(v, beta)
            return recon + reg_weight * reg, (recon, reg)

        (_, parts), grad = jax.value_and_grad(objective, has_aux=True)(v)
        updates, state = tx.update(grad, state, v)
        return (optax.apply_updates(v, updates), state), parts

    (v, _), (recons, regs) = jax.lax.scan(step, (v0, tx.init(v0)), jnp.arange(num_iters))
    codes = jnp.clip(base + (v >= 0).astype(w_c.dtype) + z_c, 0.0, qmax)
    h = _rectified_sigmoid(v)
    hard = jnp.mean(((h == 0) | (h == 1)).astype(w_c.dtype))
    return codes, recons[warm], regs[warm], hard


def _nearest(w_c, s_c, z_c, qmax):
    codes = jnp.clip(jnp.round(w_c / s_c) + z_c, 0.0, qmax)
    nan = jnp.asarray(jnp.nan, w_c.dtype)
    return codes, nan, nan, jnp.asarray(1.0, w_c.dtype)


@functools.partial(
    jax.jit,
    static_argnames=("cluster", "group", "num_iters", "symmetric", "num_ratios", "search"),
)
def _stla_kernel(
    w,
    u,
    cluster_inv,
    cluster_metric,
    group_metric,
    qmax,
    lr,
    lam,
    learn,
    global_target,
    fixed_scale,
    fixed_zero,
    use_fixed,
    *,
    cluster,
    group,
    num_iters,
    symmetric,
    num_ratios,
    search,
):
    r, d = w.shape
    k, g = cluster, group
    span = max(g, k)  # a "super-step": one group of clusters, or one cluster of groups
    clusters_per_span, groups_per_span = span // k, span // g
    num_clusters = d // k
    w_orig = w

    def span_body(p, carry):
        w_t, codes, scales, zeros, stats = carry
        start = p * span
        first_group = p * groups_per_span
        w_span = jax.lax.dynamic_slice(w_t, (0, start), (r, span))
        w_groups = jnp.transpose(jnp.reshape(w_span, (r, groups_per_span, g)), (1, 0, 2))
        metrics = jax.lax.dynamic_slice(group_metric, (first_group, 0, 0), (groups_per_span, g, g))

        def searched():
            if search:
                rule = lambda wg, m: _grid_search(wg, m, qmax, symmetric, num_ratios)
            else:
                rule = lambda wg, m: _minmax(wg, qmax, symmetric)
            s, z = jax.vmap(rule)(w_groups, metrics)
            return s.T, z.T

        def fixed():
            return (
                jax.lax.dynamic_slice(fixed_scale, (0, first_group), (r, groups_per_span)),
                jax.lax.dynamic_slice(fixed_zero, (0, first_group), (r, groups_per_span)),
            )

        scale, zero = jax.lax.cond(use_fixed, fixed, searched)  # [r, groups_per_span]
        scales = jax.lax.dynamic_update_slice(scales, scale, (0, first_group))
        zeros = jax.lax.dynamic_update_slice(zeros, zero, (0, first_group))
        scale_cols, zero_cols = jnp.repeat(scale, g, axis=1), jnp.repeat(zero, g, axis=1)

        def cluster_body(i, carry):
            w_t, codes, stats = carry
            c = p * clusters_per_span + i
            col = start + i * k
            w_c = jax.lax.dynamic_slice(w_t, (0, col), (r, k))
            o_c = jax.lax.dynamic_slice(w_orig, (0, col), (r, k))
            t_c = jnp.where(global_target, w_c, o_c)
            s_c = jax.lax.dynamic_slice(scale_cols, (0, i * k), (r, k))
            z_c = jax.lax.dynamic_slice(zero_cols, (0, i * k), (r, k))
            metric = cluster_metric[c]
            code_c, recon, reg, hard = jax.lax.cond(
                learn,
                lambda: _adaround(w_c, t_c, s_c, z_c, metric, qmax, lr, lam, num_iters),
                lambda: _nearest(w_c, s_c, z_c, qmax),
            )
            q_c = s_c * (code_c - z_c)
            e = q_c - t_c
            loss = jnp.sum((e @ metric) * e)
            compensation = (w_c - q_c) @ cluster_inv[c]
            w_t = w_t - compensation @ jax.lax.dynamic_slice(u, (col, 0), (k, d))
            codes = jax.lax.dynamic_update_slice(codes, code_c, (0, col))
            stats = stats.at[:, c].set(jnp.stack([loss, recon, reg, hard]))
            return w_t, codes, stats

        w_t, codes, stats = jax.lax.fori_loop(
            0, clusters_per_span, cluster_body, (w_t, codes, stats)
        )
        return w_t, codes, scales, zeros, stats

    num_groups = d // g
    init = (
        w,
        jnp.zeros_like(w),
        jnp.ones((r, num_groups), w.dtype),
        jnp.zeros((r, num_groups), w.dtype),
        jnp.zeros((4, num_clusters), w.dtype),
    )
    _, codes, scales, zeros, stats = jax.lax.fori_loop(0, d // span, span_body, init)
    return codes, scales, zeros, stats


def stla(
    w: ArrayLike,
    h: ArrayLike,
    quantizer: Quantizer | None = None,
    *,
    cluster_size: int = 256,
    loss: str = "global",
    order: str = "spin",
    learn_rounding: bool = True,
    num_iters: int = NUM_ITERS,
    learning_rate: float = 0.015,
    round_weight: float = 1.0,
    params: tuple[ArrayLike, ArrayLike] | None = None,
    **deprecated: Any,
) -> QuantizedWeight:
    """STLA quantization of one layer (see the module docstring for the algorithm).

    Args:
      w: ``[r, d]`` weights (rows = outputs, columns = inputs).
      h: ``[d, d]`` Hessian ``(2/n) XᵀX``; damped as in :func:`prepare_hessian`. Its scale
        matters: ``round_weight`` weighs a regulariser summed over weights against a recon loss
        that scales with ``‖W‖²‖H‖`` (``info.warmup_recon``/``warmup_reg`` show the balance).
      quantizer: the :class:`Quantizer`; ``None``: the reference's
        ``DEFAULT_QUANTIZER`` (3 bits, groups of 256, ``grid="search"``: each group's grid
        searched with ``S_g`` (global) or ``H_gg`` (local); ``"minmax"`` is GPTQ's rule, for
        comparisons on one grid rule). ``group_size`` must be a multiple or divisor of the
        cluster size; ``None``: one group per row, searched once with ``M = H``.
      cluster_size: columns rounded jointly, ``k`` (capped at ``d``); 1 with
        ``learn_rounding=False`` is GPTQ.
      loss: ``"global"`` (Schur complement, the lookahead) or ``"local"`` (``H_cc`` against
        the original weights, the ablation).
      order: ``"spin"``, ``"act"`` or ``"none"``.
      learn_rounding: AdaRound in each cluster (``False``: round to nearest, then compensate).
      num_iters: AdaRound iterations per cluster (static: the scan's length); the reference's
        2000 by default. With fewer, raise ``learning_rate`` so that the summed step
        ``0.65 · learning_rate · num_iters`` still exceeds ``ln 11 ≈ 2.40``, the distance a
        rounding logit must travel to end exactly at 0 or 1.
      learning_rate: Adam's initial step.
      round_weight: ``λ``, the weight of the rounding regulariser (1.5 for q/k/v in the note).
      params: fixed ``(scale, zero)`` of shape ``[r, num_groups]`` (processing order), which
        replace the grid rule (the note's shared per-channel parameters).
      **deprecated: the :class:`Quantizer`'s fields as keywords (``bits=2``), the signature
        before the :class:`Quantizer`; they replace ``DEFAULT_QUANTIZER``'s and warn.

    Returns:
      A :class:`QuantizedWeight`; ``info.column_losses`` holds one hard loss per cluster.

    Examples:
      The note's check 3 (``ρ = 0.8``, 2 bits, fixed min-max parameters, clusters of 3):

      >>> import numpy as np
      >>> from jaxlab.quant import Quantizer, gptq
      >>> a = np.array([1.0, 3, 2, 6, 4, 5]); i = np.arange(6)
      >>> h = 0.8 ** np.abs(i[:, None] - i[None, :]) * np.sqrt(np.outer(a, a))
      >>> w = np.array([[0.27, -0.46, -0.92, -0.97, 0.63, 0.83],
      ...               [0.21, 0.46, 0.09, 0.87, 0.63, -0.99]], np.float32)
      >>> params = (np.array([0.6, 0.62]), np.array([2.0, 2.0]))
      >>> quantizer = Quantizer(bits=2, damp=0.0)
      >>> out = stla(w, h, quantizer, cluster_size=3, order="none", params=params)
      >>> out.info.column_losses.shape, int(out.info.nonfinite_count)  # 2000 iterations
      ((2,), 0)
      >>> bool(abs(float(out.info.layer_error) - 0.749994) < 1e-5)  # the exhaustive optimum
      True
      >>> float(gptq(w, h, quantizer, params=params).info.layer_error) > 1.47
      True

    References:
      Zhang et al., "STLA: Spatiotemporal Lookahead Alignment for Post-Training Quantization",
      ICML 2026; Nagel et al., "Up or Down? Adaptive Rounding for Post-Training Quantization",
      ICML 2020 (arXiv 2004.10568).
    """
    quantizer = resolve_quantizer(quantizer, deprecated, "stla", DEFAULT_QUANTIZER)
    learn_rounding = check_bool(learn_rounding, "learn_rounding")
    order = check_order(order)
    check_choice(loss, "loss", LOSSES)
    w_host, h_host, group_size = check_layer(w, h, quantizer)
    d = w_host.shape[1]
    cluster = min(check_int(cluster_size, "cluster_size", minimum=1), d)
    if group_size is not None and group_size % cluster and cluster % group_size:
        raise ValueError(
            f"group_size={group_size} must be a multiple or a divisor of cluster_size={cluster} "
            "(a group's parameters are searched when its first cluster starts)"
        )
    num_iters = check_int(num_iters, "num_iters", minimum=1)
    check_positive(learning_rate, "learning_rate")
    check_nonnegative(round_weight, "round_weight")
    padded = -(-d // cluster) * cluster
    group = padded if group_size is None else group_size
    layer = prepare_layer(w_host, h_host, quantizer, params, order, cluster, group, padded)
    hp, u = layer.hessian, layer.u
    cluster_inv, cluster_schur = _schur_blocks(u, cluster)
    if loss == "global":
        cluster_metric = cluster_schur
        group_metric = hp[None] if group_size is None else _schur_blocks(u, group)[1]
    else:
        cluster_metric = _blocks(hp, cluster)
        group_metric = _blocks(hp, group)
    dtype = w_host.dtype
    codes, scale, zero, stats = _stla_kernel(
        jnp.asarray(layer.weights),
        jnp.asarray(u, dtype),
        jnp.asarray(cluster_inv, dtype),
        jnp.asarray(cluster_metric, dtype),
        jnp.asarray(group_metric, dtype),
        jnp.asarray(quantizer.qmax, dtype),
        jnp.asarray(learning_rate, dtype),
        jnp.asarray(round_weight, dtype),
        jnp.asarray(learn_rounding),
        jnp.asarray(loss == "global"),
        layer.fixed_scale,
        layer.fixed_zero,
        jnp.asarray(layer.use_fixed),
        cluster=cluster,
        group=group,
        num_iters=num_iters,
        symmetric=quantizer.symmetric,
        num_ratios=quantizer.num_ratios,
        search=quantizer.grid == "search",
    )
    extra = {"warmup_recon": stats[1], "warmup_reg": stats[2], "hard_fraction": stats[3]}
    return layer.finish(codes, scale, zero, stats[0], extra)
