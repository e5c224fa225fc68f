"""Diagnostics of a particle run's objective curve: the linear-convergence phase."""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np

from jaxlab._src.validation import check_real, check_real_array

__all__ = ["LinearPhaseFit", "linear_phase_fit"]


class LinearPhaseFit(NamedTuple):
    """A least-squares fit of ``log(𝓛_t - 𝓛_∞)`` on ``t`` (see :func:`linear_phase_fit`).

    Attributes:
      floor: ``𝓛_∞``, the mean of the curve's last ``tail_fraction``.
      points: the points fitted (when fewer than 3, the window's size and no fit).
      t_start: the first fitted time (``nan`` without a fit).
      t_end: the last fitted time (``nan`` without a fit).
      slope: the fitted rate of ``log`` gap per unit time (``nan`` without a fit).
      r2: the fit's coefficient of determination (``0`` without a fit).
      fitted: whether a fit was made.

    Examples:
      >>> LinearPhaseFit(0.0, 0, float("nan"), float("nan"), float("nan"), 0.0, False).fitted
      False
    """

    floor: float
    points: int
    t_start: float
    t_end: float
    slope: float
    r2: float
    fitted: bool


def linear_phase_fit(
    times: jax.typing.ArrayLike,
    objective: jax.typing.ArrayLike,
    *,
    start_fraction: float = 0.5,
    end_fraction: float = 0.03,
    tail_fraction: float = 0.1,
) -> LinearPhaseFit:
    """Fits the linear (log-straight) phase of ``𝓛_t - 𝓛_∞`` while the gap falls.

    ``𝓛_∞`` is the mean of the last ``tail_fraction`` of the curve and ``gap_t = 𝓛_t - 𝓛_∞``.
    The window is the first passage of the gap from ``start_fraction`` to ``end_fraction`` of
    ``gap_0`` (from the first time at most ``start_fraction · gap_0`` up to just before it first
    drops below ``end_fraction · gap_0``; later noise may re-enter the window and is ignored).
    Over the window's positive gaps, ``log gap_t ≈ slope · t + intercept`` by least squares; a
    linear convergence ``gap_t ∝ e^{-r t}`` gives ``slope = -r`` and ``R² ≈ 1``.

    Args:
      times: ``(T,)`` times ``t``.
      objective: ``(T,)`` values ``𝓛_t``.
      start_fraction: the window's upper end, relative to ``gap_0``.
      end_fraction: the window's lower end, relative to ``gap_0``.
      tail_fraction: the fraction of the curve averaged into ``𝓛_∞``.

    Raises:
      TypeError: ``times`` or ``objective`` is not a real array.
      ValueError: a fraction is outside ``(0, 1]``, an entry is not finite (a diverged run's NaN
        objective is an error, not a curve to fit), or the shapes differ.

    Returns:
      A :class:`LinearPhaseFit`; with fewer than 3 window points (or ``gap_0 ≤ 0``) no fit is
      made (``fitted=False``, ``slope=nan``, ``r2=0``).

    Examples:
      >>> import numpy as np
      >>> times = np.linspace(0.0, 20.0, 2001)
      >>> objective = 0.01 + 2.0 * np.exp(-0.7 * times)
      >>> objective[-300:] = 0.01  # a converged run's flat floor
      >>> fit = linear_phase_fit(times, objective)
      >>> round(fit.slope, 3), fit.r2 > 0.999
      (-0.7, True)

    References:
      Gu & Kim, "Mirror Mean-Field Langevin Dynamics", ICML 2026 (arXiv 2505.02621): linear
      convergence of MMFLD's objective under a uniform mirror log-Sobolev inequality.
    """
    for name, value in (("start_fraction", start_fraction), ("end_fraction", end_fraction)):
        check_real(value, name, minimum=0.0, maximum=1.0, include_minimum=False)
    check_real(tail_fraction, "tail_fraction", minimum=0.0, maximum=1.0, include_minimum=False)
    times, objective = check_real_array(times, "times"), check_real_array(objective, "objective")
    if times is None or objective is None:
        raise TypeError("times and objective must be concrete arrays (the fit runs on the host)")
    if times.ndim != 1 or times.shape != objective.shape:
        raise ValueError(
            f"times and objective must be 1-D of one length, got {times.shape}, {objective.shape}"
        )
    tail = max(1, int(len(objective) * tail_fraction))
    floor = float(np.mean(objective[-tail:]))
    gap = objective - floor
    start = gap[0]
    window = (gap <= start_fraction * start) & (gap >= end_fraction * start)
    inside = np.flatnonzero(window)
    nan = float("nan")
    if inside.size < 3 or start <= 0:
        return LinearPhaseFit(floor, int(inside.size), nan, nan, nan, 0.0, False)
    first, last = inside[0], inside[0]
    while last + 1 < len(gap) and gap[last + 1] >= end_fraction * start:
        last += 1
    t, g = times[first : last + 1], gap[first : last + 1]
    keep = g > 0
    t, log_gap = t[keep], np.log(g[keep])
    slope, intercept = np.polyfit(t, log_gap, 1)
    fitted = slope * t + intercept
    r2 = 1.0 - np.sum((log_gap - fitted) ** 2) / max(
        np.sum((log_gap - log_gap.mean()) ** 2), 1e-300
    )
    return LinearPhaseFit(
        floor, int(t.size), float(t[0]), float(t[-1]), float(slope), float(r2), True
    )
