"""RAMBO's priors and concentration schedules.

Inverse-gamma priors on the standard deviations and the lengthscale themselves (the released
code's): ``σ_f ~ IG(3, 2)``, ``ℓ ~ IG(3, 1.5)``, ``σ_n ~ IG(3, 0.3)``; the CRP concentration
``α`` is constant or follows a schedule over BO iterations.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp

from jaxlab._src import validation

__all__ = ["PRIORS", "concentration_schedule", "inverse_gamma_log_prob", "rambo_log_prior"]

# (shape a, scale b) of the inverse-gamma priors on (σ_f, ℓ, σ_n): the released code's.
PRIORS = ((3.0, 2.0), (3.0, 1.5), (3.0, 0.3))


def inverse_gamma_log_prob(theta, a, b) -> jax.Array:
    """``log IG(θ; a, b) = a log b - lnΓ(a) - (a + 1) log θ - b/θ``.

    Examples:
      >>> round(float(inverse_gamma_log_prob(1.0, 3.0, 2.0)), 6)  # RAMBO note, check 2
      -0.613706
    """
    validation.check_real_array(theta, "theta", minimum=0.0, include_minimum=False)
    a = validation.check_real(a, "a", minimum=0.0, include_minimum=False)
    b = validation.check_real(b, "b", minimum=0.0, include_minimum=False)
    theta = jnp.asarray(theta)
    return a * math.log(b) - math.lgamma(a) - (a + 1.0) * jnp.log(theta) - b / theta


def rambo_log_prior(log_params) -> jax.Array:
    """Sum of the three inverse-gamma log priors at ``exp(log_params)`` (last axis: σ_f, ℓ, σ_n).

    Examples:
      >>> import jax.numpy as jnp
      >>> round(float(rambo_log_prior(jnp.log(jnp.array([1.0, 1.0, 0.1])))), 6)
      0.314817
    """
    log_params = validation.check_array(log_params, "log_params", kind="floating")
    validation.check_last_axis(log_params, 3, "log_params")
    theta = jnp.exp(log_params)
    return sum(inverse_gamma_log_prob(theta[..., j], a, b) for j, (a, b) in enumerate(PRIORS))


def _sample_prior(rng_key, shape) -> jax.Array:
    keys = jax.random.split(rng_key, 3)
    # θ ~ IG(a, b)  <=>  θ = b / Gamma(a, 1).
    logs = [
        math.log(b) - jnp.log(jax.random.gamma(k, a, shape))
        for k, (a, b) in zip(keys, PRIORS, strict=True)
    ]
    return jnp.stack(logs, axis=-1)


def concentration_schedule(
    kind: str = "constant",
    *,
    alpha0=2.0,
    alpha_start=0.5,
    alpha_end=5.0,
    total: int | None = None,
) -> Callable[[int], float]:
    """The CRP concentration at BO iteration ``t = 1..T`` (set before that iteration's refit).

    * ``"constant"``: ``α₀``;
    * ``"linear"``: ``α_s + (α_e - α_s)(t - 1)/(T - 1)`` (needs ``total = T >= 2``);
    * ``"sqrtlog"``: ``α₀ √t / ln(t + e)``, slow growth, so more regimes become affordable as
      data accumulate ("coarse to fine").

    Returns:
      A function of the (1-based) iteration ``t``, like an optax schedule.

    Examples:
      >>> round(concentration_schedule("sqrtlog", alpha0=2.0)(10), 4)  # RAMBO note, check 3
      2.487
      >>> round(concentration_schedule("linear", total=200)(100), 6)
      2.738693
    """
    kinds = ("constant", "linear", "sqrtlog")
    if kind not in kinds:
        raise ValueError(f"kind must be one of {kinds}, got {kind!r}")
    a0 = validation.check_real(alpha0, "alpha0", minimum=0.0, include_minimum=False)
    if kind == "constant":
        return lambda t: a0
    if kind == "sqrtlog":
        return lambda t: a0 * math.sqrt(_check_t(t)) / math.log(_check_t(t) + math.e)
    a_s = validation.check_real(alpha_start, "alpha_start", minimum=0.0, include_minimum=False)
    a_e = validation.check_real(alpha_end, "alpha_end", minimum=0.0, include_minimum=False)
    if total is None:
        raise ValueError("total must be given (the number of BO iterations T) for kind='linear'")
    total = validation.check_int(total, "total", minimum=2)
    return lambda t: a_s + (a_e - a_s) * (_check_t(t) - 1) / (total - 1)


def _check_t(t) -> int:
    return validation.check_int(t, "t", minimum=1)
