"""Quantization time per layer: jaxlab's GPTQ and STLA against a NumPy GPTQ from the same maths.

The peer is GPTQ written directly in NumPy (float32, host): Hessian damping, the Cholesky factor
of ``H⁻¹``, then the column recursion ``q_j = Q(w̃_j)``, ``e_j = (w̃_j − q_j)/U_jj``,
``w̃_{j+1:} −= e_j U_{j, j+1:}`` with lazy updates in blocks of 128 columns and per-group min-max
grids, as in the GPTQ paper. The candidates are :func:`jaxlab.quant.gptq` (same settings), timed
interleaved with the peer (medians of 5 rounds after a warm-up), and :func:`jaxlab.quant.stla`
(group = cluster = 128, its default 2000 AdaRound iterations, SpinCluster order), timed once in
the same run (its compilation, a second or two, included), on one ``r × d`` layer of a
correlated synthetic layer (:func:`jaxlab.quant.correlated_layer`) per width. Both include their
host-side preparation (and jaxlab's GPTQ its ``info``: the layer error ``tr(ΔHΔᵀ)``).

Target: jaxlab's GPTQ at most as slow as the NumPy GPTQ (``ratio <= 1``) at every width: the same
arithmetic, so a JAX implementation slower than NumPy on the same CPU is a defect. STLA has no
target; ``stla_over_gptq`` reports its time as a multiple of jaxlab's GPTQ (the price of learning
every cluster's rounding). ``codes_equal_to_peer`` is the fraction of GPTQ codes equal to the
NumPy peer's (float32 on both sides, but a different factorisation of ``H⁻¹``: rare ties may
flip).

Run: ``python -m benchmarks stla`` or ``python -m benchmarks.bench_stla [smoke]``.
"""

from __future__ import annotations

import json
import sys
import time

import jax
import numpy as np

from benchmarks._timing import interleaved_times, median_times
from jaxlab.quant import Quantizer, correlated_layer, gptq, stla

__all__ = ["run"]

_SIZES = {
    # widths, rows, group = cluster, AdaRound iterations, timed rounds, warm-up rounds
    "smoke": ((64, 128), 32, 32, 20, 3, 1),
    "default": ((256, 512, 1024, 2048), 512, 128, 2000, 5, 1),
}
# GPTQ must be at least as fast as the NumPy GPTQ of the same maths.
GPTQ_TARGET_RATIO = 1.0
_BITS = 3
_BLOCK = 128


def numpy_gptq(
    w: np.ndarray, h: np.ndarray, bits: int, group: int, damp: float = 0.01, codes: bool = False
):
    """GPTQ in NumPy (float32 loop, float64 Cholesky): the dequantized weights (or codes)."""
    qmax = 2**bits - 1
    w = np.array(w, np.float32)
    h = np.array(h, np.float64)
    dead = np.diag(h) == 0
    w[:, dead] = 0
    h[dead, dead] = 1.0 / 2048
    h[np.diag_indices_from(h)] += damp * np.mean(np.diag(h))
    u = np.linalg.cholesky(np.linalg.inv(h)).T.astype(np.float32)
    d = w.shape[1]
    q = np.zeros_like(w)
    c = np.zeros(w.shape, np.uint8)
    for b0 in range(0, d, _BLOCK):
        b1 = min(b0 + _BLOCK, d)
        errors = np.zeros((w.shape[0], b1 - b0), np.float32)
        for j in range(b0, b1):
            if j % group == 0:
                block = w[:, j : j + group]
                w_max = np.maximum(block.max(axis=1), 0)
                w_min = np.minimum(block.min(axis=1), 0)
                scale = (w_max - w_min) / qmax
                scale[scale == 0] = 2.0 / qmax
                zero = np.round(-w_min / scale)
            code = np.clip(np.round(w[:, j] / scale) + zero, 0, qmax)
            c[:, j] = code
            q[:, j] = scale * (code - zero)
            err = (w[:, j] - q[:, j]) / u[j, j]
            w[:, j:b1] -= np.outer(err, u[j, j:b1])
            errors[:, j - b0] = err
        w[:, b1:] -= errors @ u[b0:b1, b1:]
    return c if codes else q


def run(size: str = "default") -> dict:
    """Times GPTQ and STLA per layer at several widths against the NumPy GPTQ.

    Args:
      size: ``"default"`` (widths 256..2048, 512 rows) or ``"smoke"`` (widths 64, 128, 32 rows,
        20 AdaRound iterations: seconds).

    Returns:
      ``{"name", "peer", "size", "shape", "rows": [{"case", "step_time_s", "peer_step_time_s",
      "ratio", "target_ratio", "meets_target", "relative_error", "peer_relative_error"} plus
      ``codes_equal_to_peer`` (GPTQ) or ``stla_over_gptq`` (STLA), ...]}``.

    Examples:
      >>> report = run("smoke")  # doctest: +SKIP
      >>> [row["case"] for row in report["rows"]][:2]  # doctest: +SKIP
      ['gptq d=64', 'stla d=64']
    """
    if size not in _SIZES:
        raise ValueError(f"size must be one of {sorted(_SIZES)}, got {size!r}")
    widths, rows_count, group, iters, repeats, warmup = _SIZES[size]
    rows = []
    for d in widths:
        layer = correlated_layer(jax.random.key(d), rows=rows_count, cols=d, num_tokens=4 * d)
        w, h = np.asarray(layer.weight), np.asarray(layer.hessian, np.float64)
        minmax = Quantizer(bits=_BITS, group_size=group)
        ours = lambda w=w, h=h: gptq(w, h, minmax, block_size=_BLOCK)
        peer = lambda w=w, h=h: numpy_gptq(w, h, _BITS, group)
        times = median_times(
            interleaved_times({"peer": peer, "gptq": lambda: ours().weight}, repeats, warmup)
        )
        reference = numpy_gptq(w, h, _BITS, group)
        delta = reference - w
        peer_error = float(np.sum((delta @ h) * delta) / np.sum((w @ h) * w))
        result = ours()
        same = float(
            np.mean(np.asarray(result.codes) == numpy_gptq(w, h, _BITS, group, codes=True))
        )
        # STLA (thousands of optimiser steps per cluster) is timed once, compilation included
        # (a second or two against minutes), after the interleaved rounds.
        start = time.perf_counter()
        searched = Quantizer(bits=_BITS, group_size=group, grid="search")
        learned = stla(w, h, searched, cluster_size=group, num_iters=iters)
        jax.block_until_ready(learned.weight)
        stla_time = time.perf_counter() - start
        for name, seconds, out in (("gptq", times["gptq"], result), ("stla", stla_time, learned)):
            ratio = seconds / times["peer"]
            row = {
                "case": f"{name} d={d}",
                "step_time_s": seconds,
                "peer_step_time_s": times["peer"],
                "ratio": ratio,
                "target_ratio": GPTQ_TARGET_RATIO if name == "gptq" else None,
                "meets_target": bool(ratio <= GPTQ_TARGET_RATIO) if name == "gptq" else None,
                "relative_error": float(out.info.relative_error),
                "peer_relative_error": peer_error,
            }
            if name == "gptq":
                row["codes_equal_to_peer"] = same
            else:
                row["stla_over_gptq"] = seconds / times["gptq"]
            rows.append(row)
    return {
        "name": "stla",
        "peer": "GPTQ in NumPy (same maths, lazy blocks of 128, per-group min-max)",
        "size": size,
        "shape": {
            "widths": list(widths),
            "rows": rows_count,
            "group": group,
            "bits": _BITS,
            "adaround_iters": iters,
        },
        "rows": rows,
    }


if __name__ == "__main__":
    json.dump(run(sys.argv[1] if len(sys.argv) > 1 else "default"), sys.stdout, indent=2)
    print()
