"""Round-to-nearest and GPTQ weight quantization (per channel or per group of columns).

**RTN** quantizes every weight independently with per-row (per-group) min-max parameters.

**GPTQ** quantizes the columns of ``W ∈ ℝ^{r×d}`` one at a time in a chosen order and compensates
the rounding error of each column on the columns not yet quantized. With ``U`` the upper Cholesky
factor of ``H⁻¹`` and ``w̃`` the compensated working copy, for ``j = 1..d``::

    q_j = Q(w̃_j),   e_j = (w̃_j − q_j) / U_jj,   w̃_{j+1:} ← w̃_{j+1:} − e_j U_{j, j+1:}

The loss of this result is ``tr(Δ H Δᵀ) = Σ_j ‖e_j‖²`` exactly (``H`` the damped Hessian).
Updates are applied lazily in blocks of ``block_size`` columns (one matmul per block): the
same result in exact arithmetic. Group parameters are computed from the current compensated
weights when the group's first column is reached; groups are contiguous in *processing* order
(with ``order="act"`` a group gathers columns of similar ``H_jj``), and
:attr:`QuantizedWeight.group_index` maps every original column to its group.

Where jit stops: the Hessian preparation (dead columns, damping, the float64 Cholesky factor of
``H⁻¹``, the column order) runs on the host in NumPy float64; the column loop is one jitted
program per shape, run in ``w``'s dtype (float32, or float64 under x64).

References:
  Frantar, Ashkboos, Hoefler, Alistarh, "GPTQ: Accurate Post-Training Quantization for
  Generative Pre-trained Transformers", ICLR 2023 (arXiv 2210.17323).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from jaxlab._src.validation import check_int
from jaxlab.quant._hessian import (
    _blocks,
    _inverse_cholesky,
    _order,
    _prepare,
    _schur_blocks,
    check_hessian,
    check_order,
    check_weight,
)
from jaxlab.quant._quantizer import Quantizer, resolve_quantizer
from jaxlab.quant._uniform import _grid_search, _minmax

__all__ = ["QuantInfo", "QuantizedWeight", "gptq", "rtn"]


class QuantInfo(NamedTuple):
    """Diagnostics of one quantized layer (fields a method does not produce are empty).

    Attributes:
      layer_error: ``tr(Δ H Δᵀ)`` of the result under the Hessian as given (undamped); NaN
        when no Hessian was given (RTN).
      relative_error: ``layer_error / tr(W H Wᵀ)``.
      column_losses: GPTQ: ``[d]`` ``‖e_j‖²`` per column in processing order (they sum to
        ``tr(ΔHΔᵀ)`` under the *damped* Hessian); STLA: ``[num_clusters]`` the final (hard)
        loss each cluster minimised (global: ``Σ e_c S_c e_cᵀ``, summing to the same trace).
      warmup_recon: STLA: ``[num_clusters]`` reconstruction loss at the end of AdaRound's
        warm-up (the balance of recon and reg that ``round_weight`` sets is not scale-free).
      warmup_reg: STLA: ``[num_clusters]`` the rounding regulariser (``β = 20``) then.
      hard_fraction: STLA: ``[num_clusters]`` fraction of ``h(V)`` exactly 0 or 1 at the end.
      nonfinite_count: int, non-finite entries of the returned weights (0 for a sound run;
        inputs are checked, so a positive count means the optimisation diverged).
      dead_columns: int, columns with ``H_jj = 0`` (their weights are set to 0).
      damping: the absolute damping ``p · mean(diag H)`` added to the diagonal.

    Examples:
      >>> import jax.numpy as jnp
      >>> out = rtn(jnp.array([[0.3, -0.7, 0.9, 0.1]]), quantizer=Quantizer(bits=2))
      >>> int(out.info.nonfinite_count), out.info.column_losses.shape
      (0, (0,))
    """

    layer_error: jax.Array
    relative_error: jax.Array
    column_losses: jax.Array
    warmup_recon: jax.Array
    warmup_reg: jax.Array
    hard_fraction: jax.Array
    nonfinite_count: jax.Array
    dead_columns: int
    damping: float


class QuantizedWeight(NamedTuple):
    """A quantized weight matrix: the dequantized weights, the integer codes and the grid.

    ``weight[i, j] = scale[i, g] · (codes[i, j] − zero[i, g])`` with ``g = group_index[j]``.

    Attributes:
      weight: ``[r, d]`` dequantized ("fake-quantized") weights, original column order.
      codes: ``[r, d]`` uint8 codes in ``[0, 2^bits − 1]``, original column order.
      scale: ``[r, num_groups]`` scales (groups in processing order).
      zero: ``[r, num_groups]`` integer zero points.
      group_index: ``[d]`` int32 group of every original column.
      permutation: ``[d]`` int32 processing order (position -> original column).
      info: :class:`QuantInfo`.

    Examples:
      >>> import jax.numpy as jnp
      >>> out = rtn(jnp.array([[0.3, -0.7, 0.9, 0.1]]), quantizer=Quantizer(bits=2, group_size=2))
      >>> out.scale.shape, out.group_index.tolist()
      ((1, 2), [0, 0, 1, 1])
      >>> s = out.scale[0, out.group_index]; z = out.zero[0, out.group_index]
      >>> bool(jnp.allclose(out.weight[0], s * (out.codes[0] - z)))
      True
    """

    weight: jax.Array
    codes: jax.Array
    scale: jax.Array
    zero: jax.Array
    group_index: jax.Array
    permutation: jax.Array
    info: QuantInfo


def check_params(params: Any, rows: int, num_groups: int, dtype) -> tuple | None:
    """Fixed ``(scale, zero)`` of shape ``[r, num_groups]`` (``[r]`` accepted for one group)."""
    if params is None:
        return None
    if not isinstance(params, tuple | list) or len(params) != 2:
        raise TypeError(f"params must be None or a pair (scale, zero), got {type(params).__name__}")
    out = []
    for name, value in zip(("scale", "zero"), params, strict=True):
        value = np.asarray(value, dtype=np.float64)
        if value.ndim == 1 and num_groups == 1:
            value = value[:, None]
        if value.shape != (rows, num_groups):
            raise ValueError(
                f"params {name} must have shape ({rows}, {num_groups}) (rows, groups), "
                f"got {value.shape}"
            )
        if not np.all(np.isfinite(value)):
            raise ValueError(f"params {name} must be finite")
        out.append(value.astype(dtype))
    if np.any(out[0] <= 0):
        raise ValueError("params scale must be > 0 everywhere")
    if np.any(out[1] != np.round(out[1])):
        raise ValueError("params zero must hold integers")
    return tuple(out)


@functools.partial(jax.jit, static_argnames=("d", "num_groups"))
def _finish(codes_perm, scale, zero, inverse, group_index, perm, w, h, *, d, num_groups):
    """Un-permuted codes, dequantized weights and the error diagnostics, in one program."""
    scale, zero = scale[:, :num_groups], zero[:, :num_groups]
    codes = codes_perm[:, :d][:, inverse]
    weight = scale[:, group_index] * (codes - zero[:, group_index])
    if h is None:
        error = relative = jnp.asarray(jnp.nan, weight.dtype)
    else:
        delta = w - weight
        error = jnp.sum((delta @ h) * delta)
        relative = error / jnp.sum((w @ h) * w)
    nonfinite = jnp.sum(~jnp.isfinite(weight), dtype=jnp.int32)
    return (
        weight,
        codes.astype(jnp.uint8),
        scale,
        zero,
        group_index,
        perm,
        error,
        relative,
        nonfinite,
        jnp.zeros((0,), weight.dtype),  # the empty diagnostics
    )


def assemble(
    codes_perm, scale, zero, perm, d: int, group: int, w, h, num_groups: int | None = None, **info
) -> QuantizedWeight:
    """Un-permutes processing-order codes (padded) into a :class:`QuantizedWeight`.

    ``scale`` and ``zero`` may hold padding groups: the first ``num_groups`` (all by default)
    are kept. Host arrays go to one jitted program as they are (no eager dispatch per array).
    """
    perm = np.asarray(perm, np.int32)
    num_groups = scale.shape[1] if num_groups is None else num_groups
    group_of_position = np.minimum(np.arange(d) // group, num_groups - 1)
    group_index = np.empty(d, np.int32)
    group_index[perm] = group_of_position
    inverse = np.argsort(perm).astype(np.int32)
    dtype = scale.dtype
    weight, codes, scale, zero, group_index, perm, error, relative, nonfinite, empty = _finish(
        codes_perm,
        scale,
        zero,
        inverse,
        group_index,
        perm,
        np.asarray(w, dtype),
        None if h is None else np.asarray(h, dtype),
        d=d,
        num_groups=num_groups,
    )
    extra = info.get("extra") or {}
    column_losses = info.get("column_losses")
    return QuantizedWeight(
        weight=weight,
        codes=codes,
        scale=scale,
        zero=zero,
        group_index=group_index,
        permutation=perm,
        info=QuantInfo(
            layer_error=error,
            relative_error=relative,
            column_losses=empty if column_losses is None else column_losses,
            warmup_recon=extra.get("warmup_recon", empty),
            warmup_reg=extra.get("warmup_reg", empty),
            hard_fraction=extra.get("hard_fraction", empty),
            nonfinite_count=nonfinite,
            dead_columns=int(info.get("dead", 0)),
            damping=float(info.get("damping", 0.0)),
        ),
    )


def rtn(
    w: ArrayLike,
    h: ArrayLike | None = None,
    quantizer: Quantizer | None = None,
    *,
    params: tuple[ArrayLike, ArrayLike] | None = None,
    **deprecated: Any,
) -> QuantizedWeight:
    """Round-to-nearest: every weight on its row's (group's) grid, independently.

    Args:
      w: ``[r, d]`` weights (rows = outputs, columns = inputs).
      h: optional ``[d, d]`` Hessian: reports ``tr(ΔHΔᵀ)`` in ``info``, and is the metric of
        ``grid="search"`` (required then).
      quantizer: the :class:`Quantizer` (bits, groups, grid rule). ``grid="search"`` runs
        :func:`search_quant_params` per group with the metric ``H_gg`` of the damped Hessian
        (RTN compensates nothing, so the group's own block prices its rounding).
      params: fixed ``(scale, zero)`` of shape ``[r, num_groups]`` instead of a grid rule.
      **deprecated: the :class:`Quantizer`'s fields as keywords (``bits=3``), the signature
        before the :class:`Quantizer`; they warn.

    Returns:
      A :class:`QuantizedWeight`.

    Examples:
      >>> import jax.numpy as jnp
      >>> w = jnp.array([[0.31, -0.72, 0.15, 0.98, -0.44, 0.57]])
      >>> out = rtn(w, quantizer=Quantizer(bits=2))       # s = 1.7/3, z = 1
      >>> out.codes.tolist(), np.round(np.asarray(out.weight, np.float64), 4).tolist()
      ([[2, 0, 1, 3, 0, 2]], [[0.5667, -0.5667, 0.0, 1.1333, -0.5667, 0.5667]])

    References:
      Frantar et al., "GPTQ", ICLR 2023 (the RTN baseline).
    """
    quantizer = resolve_quantizer(quantizer, deprecated, "rtn")
    w_host = check_weight(w)
    r, d = w_host.shape
    h_host = None if h is None else check_hessian(h, d)
    group_size = quantizer.group_width(d)
    group = d if group_size is None else group_size
    fixed = check_params(params, r, d // group, w_host.dtype)
    if quantizer.grid == "search" and fixed is None and h_host is None:
        raise ValueError("h is required with grid='search' (the grid is searched against H)")
    qmax, symmetric = quantizer.qmax, quantizer.symmetric
    wj = jnp.asarray(w_host)
    grouped = jnp.reshape(wj, (r, d // group, group))
    if fixed is None and quantizer.grid == "search":
        _, h_prep, _, _ = _prepare(w_host, h_host, quantizer.damp, quantizer.dead_value)
        metrics = jnp.asarray(_blocks(h_prep, group), w_host.dtype)
        scale, zero = _rtn_search(
            jnp.transpose(grouped, (1, 0, 2)), metrics, qmax, symmetric, quantizer.num_ratios
        )
    elif fixed is None:
        scale, zero = _minmax(grouped, qmax, symmetric)
    else:
        scale, zero = (jnp.asarray(v) for v in fixed)
    codes = jnp.clip(jnp.round(grouped / scale[..., None]) + zero[..., None], 0.0, qmax)
    codes = jnp.reshape(codes, (r, d))
    return assemble(codes, scale, zero, np.arange(d), d, group, w_host, h_host)


@functools.partial(jax.jit, static_argnums=(3, 4))
def _rtn_search(groups, metrics, qmax, symmetric, num_ratios):
    """Grid search of every group (``groups`` ``[G, r, g]``): ``[r, G]`` scales and zeros."""
    rule = lambda wg, m: _grid_search(wg, m, qmax, symmetric, num_ratios)  # noqa: E731
    s, z = jax.vmap(rule)(groups, metrics)
    return s.T, z.T


def layout(d: int, block: int, group: int | None) -> tuple[int, int, int]:
    """(block, group, padded width): blocks hold whole groups or groups whole blocks."""
    block = min(block, d)
    if group is not None:
        if group <= block:
            block -= block % group
        else:
            block = max(b for b in range(1, block + 1) if group % b == 0)
    padded = -(-d // block) * block
    return block, (padded if group is None else group), padded


@functools.partial(
    jax.jit, static_argnames=("block", "group", "symmetric", "search", "fixed", "num_ratios")
)
def _gptq_kernel(
    w,
    u,
    inv_diag,
    metrics,
    qmax,
    fixed_scale,
    fixed_zero,
    *,
    block,
    group,
    symmetric,
    search,
    fixed,
    num_ratios,
):
    """The column recursion on ``wᵀ`` (a column is a contiguous row) with lazy block updates.

    Inside a block of ``block`` columns each column costs one rank-one update of the block;
    at the end of a block its errors reach the later columns as ``U[block, later]ᵀ E``, chunk
    by chunk (``block`` columns at a time, so only the triangle ``U`` actually holds is
    multiplied). Group parameters are computed when a group's first column is reached, from
    the current compensated weights: min-max, or (``search``) the grid search with the metric
    ``metrics[g]``.
    """
    r, d = w.shape
    num_blocks = d // block
    wt = w.T  # [d, r]

    def group_params(wg_t, index):  # wg_t: [g, r] current weights of group ``index``
        if fixed:
            return fixed_scale[:, index], fixed_zero[:, index]
        if search:
            return _grid_search(wg_t.T, metrics[index], qmax, symmetric, num_ratios)
        return _minmax(wg_t.T, qmax, symmetric)

    def columns(lo, count, wb, cb, eb, ub, ib, scale, zero):
        def column(j, c):
            wb, cb, eb = c
            x = wb[j]
            code = jnp.clip(jnp.round(x / scale) + zero, 0.0, qmax)
            err = (x - scale * (code - zero)) * ib[j]  # ib = 1/U_jj (float64, then rounded)
            wb = wb - ub[j][:, None] * err[None, :]  # ub[j, :j] = 0: only later columns move
            return wb, cb.at[j].set(code), eb.at[j].set(err)

        return jax.lax.fori_loop(lo, lo + count, column, (wb, cb, eb))

    def block_body(b, carry):
        wt, codes, scales, zeros, losses, scale, zero = carry
        start = b * block
        wb = jax.lax.dynamic_slice(wt, (start, 0), (block, r))
        ub = jax.lax.dynamic_slice(u, (start, start), (block, block))
        ib = jax.lax.dynamic_slice(inv_diag, (start,), (block,))
        cb = eb = jnp.zeros((block, r), w.dtype)
        if group >= block:  # a group starts at this block's first column, or continues
            index = start // group
            scale, zero = jax.lax.cond(
                start % group == 0,
                lambda: group_params(
                    jax.lax.dynamic_slice(wt, (index * group, 0), (group, r)), index
                ),
                lambda: (scale, zero),
            )
            scales = jax.lax.dynamic_update_slice(scales, scale[None], (index, 0))
            zeros = jax.lax.dynamic_update_slice(zeros, zero[None], (index, 0))
            wb, cb, eb = columns(0, block, wb, cb, eb, ub, ib, scale, zero)
        else:  # whole groups inside the block

            def group_body(i, c):
                wb, cb, eb, scales, zeros = c
                index = start // group + i
                scale, zero = group_params(
                    jax.lax.dynamic_slice(wb, (i * group, 0), (group, r)), index
                )
                scales = jax.lax.dynamic_update_slice(scales, scale[None], (index, 0))
                zeros = jax.lax.dynamic_update_slice(zeros, zero[None], (index, 0))
                wb, cb, eb = columns(i * group, group, wb, cb, eb, ub, ib, scale, zero)
                return wb, cb, eb, scales, zeros

            wb, cb, eb, scales, zeros = jax.lax.fori_loop(
                0, block // group, group_body, (wb, cb, eb, scales, zeros)
            )
        codes = jax.lax.dynamic_update_slice(codes, cb, (start, 0))
        losses = jax.lax.dynamic_update_slice(losses, jnp.sum(eb * eb, axis=1), (start,))

        # The lazy update of every later column by this block's errors, one chunk at a time.
        def chunk(c, wt):
            col = c * block
            u_chunk = jax.lax.dynamic_slice(u, (start, col), (block, block))
            rows = jax.lax.dynamic_slice(wt, (col, 0), (block, r))
            return jax.lax.dynamic_update_slice(wt, rows - u_chunk.T @ eb, (col, 0))

        wt = jax.lax.fori_loop(b + 1, num_blocks, chunk, wt)
        return wt, codes, scales, zeros, losses, scale, zero

    num_groups = d // group
    init = (
        wt,
        jnp.zeros_like(wt),
        jnp.ones((num_groups, r), w.dtype),
        jnp.zeros((num_groups, r), w.dtype),
        jnp.zeros((d,), w.dtype),
        jnp.ones((r,), w.dtype),
        jnp.zeros((r,), w.dtype),
    )
    _, codes, scales, zeros, losses, _, _ = jax.lax.fori_loop(0, num_blocks, block_body, init)
    return codes.T, scales.T, zeros.T, losses


def pad_problem(w, h, perm, padded: int):
    """Permuted weights and Hessian, padded with zero columns and an identity Hessian block."""
    r, d = w.shape
    if padded == d and np.array_equal(perm, np.arange(d)):
        return w, h  # nothing to move (the callers' ``_prepare`` already copied both)
    wp = np.zeros((r, padded), w.dtype)
    wp[:, :d] = w[:, perm]
    hp = np.eye(padded)
    hp[:d, :d] = h[np.ix_(perm, perm)]
    return wp, hp


def pad_params(fixed, rows: int, num_groups: int, dtype):
    """Fixed params padded to ``num_groups`` (pad groups hold zero columns: scale 1, zero 0).

    Host arrays: the jitted kernels take them as arguments (no eager dispatch per array).
    """
    if fixed is None:
        return np.ones((rows, num_groups), dtype), np.zeros((rows, num_groups), dtype), False
    scale, zero = fixed
    extra = num_groups - scale.shape[1]
    scale = np.concatenate([scale, np.ones((scale.shape[0], extra), dtype)], axis=1)
    zero = np.concatenate([zero, np.zeros((zero.shape[0], extra), dtype)], axis=1)
    return scale, zero, True


class PreparedLayer(NamedTuple):
    """A checked layer, damped, ordered and padded for a compensating method (GPTQ, STLA).

    Host arrays (NumPy): the methods' jitted kernels take them as arguments.
    """

    w: np.ndarray  # [r, d] the weights as given (checked)
    h: np.ndarray  # [d, d] the Hessian as given (checked, undamped)
    weights: np.ndarray  # [r, padded] prepared, in processing order, zero-padded
    hessian: np.ndarray  # [padded, padded] damped, in processing order, identity-padded
    u: np.ndarray  # upper Cholesky factor of the padded Hessian's inverse (float64)
    perm: np.ndarray  # [d] processing order
    fixed_scale: np.ndarray  # [r, padded // group] fixed params (padded), or ones
    fixed_zero: np.ndarray
    use_fixed: bool
    group: int  # columns per group (the padded width for one group per row)
    num_groups: int  # groups of the original width
    dead: int
    damping: float

    def finish(self, codes, scale, zero, column_losses, extra=None) -> QuantizedWeight:
        """The :class:`QuantizedWeight` of processing-order (padded) codes and grid."""
        return assemble(
            codes,
            scale,
            zero,
            self.perm,
            self.w.shape[1],
            self.group,
            self.w,
            self.h,
            num_groups=self.num_groups,
            column_losses=column_losses,
            extra=extra,
            dead=self.dead,
            damping=self.damping,
        )


def check_layer(w: Any, h: Any, quantizer: Quantizer) -> tuple[np.ndarray, np.ndarray, int | None]:
    """The host weights ``[r, d]``, Hessian ``[d, d]`` and the group size checked against ``d``."""
    w_host = check_weight(w)
    h_host = check_hessian(h, w_host.shape[1])
    return w_host, h_host, quantizer.group_width(w_host.shape[1])


def prepare_layer(
    w_host: np.ndarray,
    h_host: np.ndarray,
    quantizer: Quantizer,
    params: Any,
    order: str,
    span: int,
    group: int,
    padded: int,
) -> PreparedLayer:
    """Fixed params, dead columns, damping, the column order (clusters of ``span`` for
    ``"spin"``), the padding to ``padded`` columns and ``U = chol(H⁻¹)ᵀ``, on the host."""
    r, d = w_host.shape
    num_groups = 1 if quantizer.group_size is None else d // group
    fixed = check_params(params, r, num_groups, w_host.dtype)
    w_prep, h_prep, dead, damping = _prepare(w_host, h_host, quantizer.damp, quantizer.dead_value)
    perm = _order(h_prep, order, span)
    wp, hp = pad_problem(w_prep, h_prep, perm, padded)
    u = _inverse_cholesky(hp, quantizer.damp)
    fixed_scale, fixed_zero, use_fixed = pad_params(fixed, r, padded // group, w_host.dtype)
    return PreparedLayer(
        w_host,
        h_host,
        wp,
        hp,
        u,
        perm,
        fixed_scale,
        fixed_zero,
        use_fixed,
        group,
        num_groups,
        int(dead.sum()),
        damping,
    )


def gptq(
    w: ArrayLike,
    h: ArrayLike,
    quantizer: Quantizer | None = None,
    *,
    block_size: int = 128,
    order: str = "none",
    params: tuple[ArrayLike, ArrayLike] | None = None,
    **deprecated: Any,
) -> QuantizedWeight:
    """GPTQ: column-by-column rounding with optimal compensation of the later columns.

    See the module docstring for the recursion. ``h`` is prepared first (dead columns, damping
    ``damp · mean(diag H)``, both from the :class:`Quantizer`), then ``U = chol(H⁻¹)ᵀ`` in
    float64 on the host; a Hessian that is not positive definite after damping raises a
    ``ValueError`` naming ``h``.

    Args:
      w: ``[r, d]`` weights (rows = outputs, columns = inputs).
      h: ``[d, d]`` Hessian ``(2/n) XᵀX`` of the layer's calibration inputs.
      quantizer: the :class:`Quantizer`. ``group_size=None``: one min-max grid per row,
        computed from ``W`` before the loop (classic GPTQ); otherwise a group's (scale, zero)
        is chosen when its first column is reached, from the current compensated weights:
        ``grid="minmax"`` (classic GPTQ) or ``"search"`` (:func:`search_quant_params` with the
        metric ``S_g = (U_ggᵀ U_gg)⁻¹``, the error left after compensating the later columns:
        STLA's global grid rule, so that ``stla(cluster_size=1, learn_rounding=False)`` is this
        method exactly).
      block_size: lazy-update width (rounded to a multiple or divisor of ``group_size``; the
        result does not depend on it in exact arithmetic).
      order: ``"none"``, ``"act"`` (``diag H`` descending) or ``"spin"``
        (:func:`spin_cluster_order` with clusters of ``block_size``).
      params: fixed ``(scale, zero)`` of shape ``[r, num_groups]`` (groups in processing
        order) instead of a grid rule.
      **deprecated: the :class:`Quantizer`'s fields as keywords (``bits=3, damp=0.0``), the
        signature before the :class:`Quantizer`; they warn.

    Returns:
      A :class:`QuantizedWeight`; ``info.column_losses`` are the ``‖e_j‖²``.

    Examples:
      The note's check 2 (2 bits, min-max parameters of ``W``, natural order, no damping):

      >>> import numpy as np
      >>> a = np.array([1.0, 3, 2, 6, 4, 5]); i = np.arange(6)
      >>> h = 0.5 ** np.abs(i[:, None] - i[None, :]) * np.sqrt(np.outer(a, a))
      >>> w = np.array([[0.31, -0.72, 0.15, 0.98, -0.44, 0.57],
      ...               [-0.26, 0.83, -0.91, 0.12, 0.64, -0.05]], np.float32)
      >>> out = gptq(w, h, Quantizer(bits=2, damp=0.0))
      >>> round(float(out.info.layer_error), 4)
      0.5078
      >>> round(float(rtn(w, h, Quantizer(bits=2)).info.layer_error), 4)
      0.9309
      >>> bool(np.isclose(out.info.column_losses.sum(), out.info.layer_error, rtol=1e-5))
      True

    References:
      Frantar, Ashkboos, Hoefler, Alistarh, "GPTQ: Accurate Post-Training Quantization for
      Generative Pre-trained Transformers", ICLR 2023 (arXiv 2210.17323), Algorithm 1.
    """
    quantizer = resolve_quantizer(quantizer, deprecated, "gptq")
    order = check_order(order)
    w_host, h_host, group_size = check_layer(w, h, quantizer)
    block_size = check_int(block_size, "block_size", minimum=1)
    d = w_host.shape[1]
    block, group, padded = layout(d, block_size, group_size)
    layer = prepare_layer(w_host, h_host, quantizer, params, order, block, group, padded)
    search = quantizer.grid == "search" and not layer.use_fixed
    dtype = w_host.dtype
    metrics = None
    if search:
        metrics = layer.hessian[None] if group_size is None else _schur_blocks(layer.u, group)[1]
        metrics = metrics.astype(dtype)
    # Host arrays go to the jitted kernel as they are: one transfer each, no eager dispatch.
    codes, scale, zero, losses = _gptq_kernel(
        layer.weights,
        layer.u.astype(dtype),
        (1.0 / np.diag(layer.u)).astype(dtype),
        metrics,
        np.asarray(quantizer.qmax, dtype),
        layer.fixed_scale,
        layer.fixed_zero,
        block=block,
        group=group,
        symmetric=quantizer.symmetric,
        search=search,
        fixed=layer.use_fixed,
        num_ratios=quantizer.num_ratios,
    )
    return layer.finish(codes, scale, zero, losses if padded == d else losses[:d])
