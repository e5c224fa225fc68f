"""RAMBO's priors and concentration schedules; the BoTorch-style single-GP priors.

Inverse-gamma priors on the standard deviations and the lengthscale themselves (the released
code's): ``σ_f ~ IG(3, 2)``, ``ℓ ~ IG(3, 1.5)``, ``σ_n ~ IG(3, 0.3)``; the CRP concentration
``α`` is constant or follows a schedule over BO iterations.

BoTorch's ``SingleTaskGP`` (since BoTorch 0.12; checked against 0.18.1,
``botorch/models/utils/gpytorch_modules.py``) puts a dimension-scaled log-normal prior on each
ARD lengthscale, ``ℓ_j ~ LogNormal(√2 + ½ log d, √3)`` with ``ℓ_j >= 0.025``, and
``σ_n² ~ LogNormal(-4, 1)`` on the noise *variance* with ``σ_n² >= 1e-4``; its RBF kernel has no
output scale (``σ_f = 1`` on standardized outcomes) (Hvarfner, Hellsten and Nardi, 2024).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp

from jaxlab._src import validation

__all__ = [
    "BOTORCH_LENGTHSCALE_FLOOR",
    "BOTORCH_NOISE_FLOOR",
    "BOTORCH_NOISE_PRIOR",
    "PRIORS",
    "botorch_lengthscale_prior",
    "concentration_schedule",
    "inverse_gamma_log_prob",
    "lognormal_log_prob",
    "rambo_log_prior",
]

# (shape a, scale b) of the inverse-gamma priors on (σ_f, ℓ, σ_n): the released code's.
PRIORS = ((3.0, 2.0), (3.0, 1.5), (3.0, 0.3))
# (loc, scale) of BoTorch's log-normal prior on the noise variance σ_n² (its
# get_gaussian_likelihood_with_lognormal_prior), and its floors (GreaterThan constraints):
# MIN_INFERRED_NOISE_LEVEL on σ_n² and the lengthscale floor "for numerical stability".
BOTORCH_NOISE_PRIOR = (-4.0, 1.0)
BOTORCH_NOISE_FLOOR = 1e-4
BOTORCH_LENGTHSCALE_FLOOR = 2.5e-2


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
    validation.check_finite_array(log_params, "log_params")
    theta = jnp.exp(log_params)
    return sum(inverse_gamma_log_prob(theta[..., j], a, b) for j, (a, b) in enumerate(PRIORS))


def lognormal_log_prob(theta, loc, scale) -> jax.Array:
    """``log LogNormal(θ; μ, s) = -log θ - log s - ½ log 2π - (log θ - μ)²/(2 s²)``.

    Examples:
      >>> round(float(lognormal_log_prob(1.0, 0.0, 1.0)), 6)  # -½ log 2π
      -0.918939
    """
    validation.check_real_array(theta, "theta", minimum=0.0, include_minimum=False)
    validation.check_real(loc, "loc")
    scale = validation.check_real(scale, "scale", minimum=0.0, include_minimum=False)
    return _lognormal_log_prob(jnp.asarray(theta), loc, scale)


def _lognormal_log_prob(theta, loc, scale):
    z = (jnp.log(theta) - loc) / scale
    return -jnp.log(theta) - jnp.log(scale) - 0.5 * math.log(2.0 * math.pi) - 0.5 * z * z


def botorch_lengthscale_prior(dim: int) -> tuple[float, float]:
    """``(loc, scale)`` of BoTorch's dimension-scaled lengthscale prior: ``(√2 + ½ log d, √3)``.

    Examples:
      >>> [round(v, 6) for v in botorch_lengthscale_prior(2)]
      [1.760787, 1.732051]
    """
    dim = validation.check_positive_int(dim, "dim")
    return math.sqrt(2.0) + 0.5 * math.log(dim), math.sqrt(3.0)


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
    validation.check_choice(kind, "kind", ("constant", "linear", "sqrtlog"))
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
