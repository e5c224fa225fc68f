"""Independent NumPy float64 implementations written from the note's maths (test truths).

Column-by-column GPTQ without lazy blocks, and cluster-wise rounding with exhaustive search over
``{⌊w̃/s⌋, ⌊w̃/s⌋ + 1}`` per weight (the note's stand-in for AdaRound on tiny clusters).
"""

from __future__ import annotations

import itertools

import numpy as np


def minmax(w, qmax):
    w_max = np.maximum(w.max(axis=1), 0.0)
    w_min = np.minimum(w.min(axis=1), 0.0)
    both = (w_max == 0) & (w_min == 0)
    w_max, w_min = np.where(both, 1.0, w_max), np.where(both, -1.0, w_min)
    scale = (w_max - w_min) / qmax
    return scale, np.round(-w_min / scale)


def prepare(w, h, damp):
    w, h = np.array(w, np.float64), np.array(h, np.float64)
    dead = np.diag(h) == 0
    w[:, dead] = 0
    h[dead, dead] = 1 / 2048
    h += damp * np.mean(np.diag(h)) * np.eye(len(h))
    return w, h


def gptq(w, h, bits, *, group=None, order="none", damp=0.01, params=None):
    """Returns the dequantized weights (original order)."""
    qmax = 2**bits - 1
    w, h = prepare(w, h, damp)
    d = w.shape[1]
    perm = np.argsort(-np.diag(h), kind="stable") if order == "act" else np.arange(d)
    w, h = w[:, perm], h[np.ix_(perm, perm)]
    u = np.linalg.cholesky(np.linalg.inv(h)).T
    q = np.zeros_like(w)
    for j in range(d):
        if (group is None and j == 0) or (group is not None and j % group == 0):
            if params is not None:
                scale, zero = (
                    np.asarray(p, np.float64).reshape(len(w), -1)[:, j // (group or d)]
                    for p in params
                )
            else:
                scale, zero = minmax(w[:, j : j + (group or d)], qmax)
        code = np.clip(np.round(w[:, j] / scale) + zero, 0, qmax)
        q[:, j] = scale * (code - zero)
        e = (w[:, j] - q[:, j]) / u[j, j]
        w[:, j + 1 :] -= np.outer(e, u[j, j + 1 :])
    out = np.empty_like(q)
    out[:, perm] = q
    return out


def cluster_rounding(w, h, scale, zero, bits, k, *, loss="global", exhaustive=True):
    """Fixed per-row grid, natural order, no damping; returns (q, tr(ΔHΔᵀ))."""
    qmax = 2**bits - 1
    w = np.asarray(w, np.float64)
    h = np.asarray(h, np.float64)
    r, d = w.shape
    u = np.linalg.cholesky(np.linalg.inv(h)).T
    wt, q = w.copy(), np.zeros_like(w)
    s, z = np.asarray(scale, float)[:, None], np.asarray(zero, float)[:, None]
    for c0 in range(0, d, k):
        c = slice(c0, c0 + k)
        ucc = u[c, c]
        schur = np.linalg.inv(ucc.T @ ucc)
        metric, target = (schur, wt[:, c]) if loss == "global" else (h[c, c], w[:, c])
        if exhaustive:
            base = np.floor(wt[:, c] / s)
            qc = np.zeros((r, k))
            for row in range(r):
                best = np.inf
                for choice in itertools.product((0, 1), repeat=k):
                    code = np.clip(base[row] + np.array(choice) + z[row], 0, qmax)
                    cand = s[row] * (code - z[row])
                    e = cand - target[row]
                    if e @ metric @ e < best:
                        best, qc[row] = e @ metric @ e, cand
        else:
            qc = s * (np.clip(np.round(wt[:, c] / s) + z, 0, qmax) - z)
        wt = wt - ((wt[:, c] - qc) @ np.linalg.inv(ucc)) @ u[c, :]
        q[:, c] = qc
    delta = w - q
    return q, float(np.trace(delta @ h @ delta.T))
