"""Diagnostics of particle runs: the linear-convergence phase, power laws in the particle number."""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np

from jaxlab._src.validation import check_real, check_real_array

__all__ = ["LinearPhaseFit", "PowerLawFit", "linear_phase_fit", "power_law_fit"]


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

    def as_dict(self) -> dict:
        """The fit as a JSON-able dict; the window's times only when a fit was made."""
        out = {"floor": self.floor, "points": self.points}
        if self.fitted:
            out.update(t_start=self.t_start, t_end=self.t_end)
        return {**out, "slope": self.slope, "r2": self.r2}


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


class PowerLawFit(NamedTuple):
    """A fit ``value ≈ prefactor · size^exponent`` (see :func:`power_law_fit`).

    Attributes:
      exponent: the fitted log-log slope.
      exponent_standard_error: its standard error (``nan`` without errors on the values).
      prefactor: ``exp(intercept)``.

    Examples:
      >>> PowerLawFit(-1.0, 0.05, 0.04).exponent
      -1.0
    """

    exponent: float
    exponent_standard_error: float
    prefactor: float


def power_law_fit(
    sizes: jax.typing.ArrayLike,
    values: jax.typing.ArrayLike,
    standard_errors: jax.typing.ArrayLike | None = None,
) -> PowerLawFit:
    """Fits ``log value = exponent · log size + intercept`` by (weighted) least squares.

    With standard errors ``s_i`` of the values, the weights are ``1/var(log value_i) ≈
    (value_i/s_i)²`` (delta method) and the exponent's standard error is
    ``√[(XᵀWX)⁻¹]₁₁``; without them, ordinary least squares and a ``nan`` standard error. The
    delta method needs each value well above its error (say ``> 3 s_i``): below that
    ``log value`` is not nearly Gaussian and the fit follows the noise.

    Args:
      sizes: ``(K,)`` positive sizes (e.g. particle numbers), ``K ≥ 2``.
      values: ``(K,)`` positive values (e.g. ``|bias|``).
      standard_errors: optional ``(K,)`` positive standard errors of the values.

    Returns:
      A :class:`PowerLawFit`.

    Raises:
      TypeError: an argument is not a real array.
      ValueError: shapes differ, fewer than 2 points, or an entry is not finite and positive.

    Examples:
      >>> import numpy as np
      >>> sizes = np.array([4.0, 8.0, 16.0, 32.0])
      >>> fit = power_law_fit(sizes, 0.04 / sizes, 0.001 * np.ones(4))
      >>> round(fit.exponent, 6), round(fit.prefactor, 6)
      (-1.0, 0.04)
      >>> round(fit.exponent_standard_error, 2)  # the smallest value is 1.25 standard errors
      0.2

    References:
      Bevington & Robinson, "Data Reduction and Error Analysis for the Physical Sciences", 2003
      (weighted least squares and propagation of errors).
    """
    arrays = {"sizes": sizes, "values": values}
    if standard_errors is not None:
        arrays["standard_errors"] = standard_errors
    checked = {}
    for name, value in arrays.items():
        array = check_real_array(value, name)
        if array is None:
            raise TypeError(f"{name} must be a concrete real array (the fit runs on the host)")
        if array.ndim != 1 or array.shape != np.shape(arrays["sizes"]) or array.size < 2:
            raise ValueError(
                f"{name} must be 1-D with the sizes' length (at least 2), got shape {array.shape}"
            )
        if not np.all(array > 0):
            raise ValueError(f"{name} must be finite and > 0, got {array.tolist()}")
        checked[name] = array.astype(float)
    x, y = np.log(checked["sizes"]), np.log(checked["values"])
    if standard_errors is None:
        slope, intercept = np.polyfit(x, y, 1)
        return PowerLawFit(float(slope), float("nan"), float(np.exp(intercept)))
    weight = (checked["values"] / checked["standard_errors"]) ** 2
    design = np.stack([np.ones_like(x), x], axis=1)
    covariance = np.linalg.inv(design.T @ (weight[:, None] * design))
    intercept, slope = covariance @ design.T @ (weight * y)
    return PowerLawFit(float(slope), float(np.sqrt(covariance[1, 1])), float(np.exp(intercept)))
