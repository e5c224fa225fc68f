"""Upper-tail CVaR weights shared by :mod:`jaxlab.stochprog` and :class:`jaxlab.solvers.LShaped`.

``tail_weights`` works for ``xp = jax.numpy`` (traceable) and ``xp = numpy`` (host float64, the
L-shaped loop), so the CVaR rule is written once.
"""

from __future__ import annotations

__all__ = ["tail_weights"]


def tail_weights(xp, values, alpha, probabilities=None):
    """Upper-tail CVaR weights at level ``alpha``, aligned with ``values`` (no argument checks).

    Equally likely atoms: sorted decreasingly, position ``k`` gets ``clip(αM - k, 0, 1)/(αM)``
    (``1/(αM)`` on the ``⌊αM⌋`` largest, the fractional rest on the next one). With atom
    probabilities ``p``: ``clip(α - Σ_{j<k} p_j, 0, p_k)/α``. Ties do not change the CVaR.

    Examples:
      >>> import numpy as np
      >>> tail_weights(np, np.array([3.0, 1.0, 2.0, 0.0]), 0.375).round(4).tolist()
      [0.6667, 0.0, 0.3333, 0.0]
    """
    m = values.shape[0]
    order = xp.argsort(-values)
    if probabilities is None:
        ranked = xp.clip(alpha * m - xp.arange(m, dtype=values.dtype), 0.0, 1.0) / (alpha * m)
    else:
        p = probabilities[order]
        ranked = xp.clip(alpha - (xp.cumsum(p) - p), 0.0, p) / alpha
    return ranked[xp.argsort(order)]
