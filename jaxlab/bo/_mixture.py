"""RAMBO's predictions: the spatial gate, mixture moments (intra/inter split), mixture EI and UCB.

Given the sampler's final state (:func:`jaxlab.bo.rambo_fit`), each active regime ``k`` is a GP
on its members with posterior mean ``μ_k(x)`` and latent variance ``v_k(x)`` (standardized
units). The gate is the released code's heuristic ("spatial") weight, not the CRP posterior:

    log w_k(x) ∝ log(n_k/(n + α)) - ½ log(v_k(x) + 1e-6),   softmax over active k,

so a regime whose members are near ``x`` (small ``v_k``) dominates there. Moments follow the
law of total variance: ``μ = Σ w_k μ_k``, ``σ² = Σ w_k v_k`` (intra-regime) ``+ Σ w_k (μ_k - μ)²``
(inter-regime); everything is returned de-standardized (``μ s_y + m_y``, variances ``× s_y²``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab._src import validation
from jaxlab.bo._acquisition import expected_improvement, log_expected_improvement
from jaxlab.bo._gp import (
    DEFAULT_JITTER,
    GPPosterior,
    Standardization,
    gp_posterior,
    standardize,
)
from jaxlab.bo._rambo import RamboState, _check_data, _check_state, _members

__all__ = [
    "MixturePosterior",
    "MixturePrediction",
    "mixture_expected_improvement",
    "mixture_log_expected_improvement",
    "mixture_moments",
    "mixture_posterior",
    "mixture_predict",
    "mixture_ucb",
    "spatial_gate",
]

_GATE_FLOOR = 1e-6  # the released code's floor inside log v_k


class MixturePosterior(NamedTuple):
    """Per-regime GP posteriors (stacked over slots), the regime sizes, the concentration and
    the standardization of the data they were fit on.

    Examples:
      >>> MixturePosterior._fields
      ('components', 'counts', 'active', 'alpha', 'stats')
    """

    components: GPPosterior
    counts: jax.Array
    active: jax.Array
    alpha: jax.Array
    stats: Standardization


class MixturePrediction(NamedTuple):
    """Mixture moments at test points (raw units): ``mean``, ``intra`` (``Σ w_k v_k``), ``inter``
    (``Σ w_k (μ_k - μ)²``), the gate ``weights`` ``(..., K)`` and each regime's
    ``component_mean`` and latent ``component_var`` ``(..., K)``.

    Examples:
      >>> import jax.numpy as jnp
      >>> p = MixturePrediction(jnp.array(0.4), jnp.array(0.103), jnp.array(0.84), None, None, None)
      >>> round(float(p.variance), 3)
      0.943
    """

    mean: jax.Array
    intra: jax.Array
    inter: jax.Array
    weights: jax.Array
    component_mean: jax.Array
    component_var: jax.Array

    @property
    def variance(self) -> jax.Array:
        """Total variance ``intra + inter``."""
        return self.intra + self.inter


def spatial_gate(counts, total, alpha, component_var, active=None) -> jax.Array:
    """The gate weights ``w_k ∝ (n_k/(n + α)) (v_k + 1e-6)^{-1/2}`` over active regimes.

    Args:
      counts: ``(K,)`` regime sizes.
      total: ``n``.
      alpha: CRP concentration.
      component_var: ``(..., K)`` latent variances ``v_k(x)``.
      active: optional ``(K,)`` bool (default ``counts > 0``).

    Examples:
      >>> import jax.numpy as jnp
      >>> w = spatial_gate(jnp.array([12, 8]), 20, 2.0, jnp.array([0.04, 0.25]))
      >>> [round(float(v), 6) for v in w]  # RAMBO note, check 6
      [0.789472, 0.210528]
    """
    validation.check_real_array(counts, "counts", minimum=0.0)
    validation.check_real_array(component_var, "component_var", minimum=0.0)
    validation.check_real(total, "total", minimum=0.0)
    validation.check_real_array(alpha, "alpha", minimum=0.0, include_minimum=False)
    num_regimes = np.shape(counts)[-1] if np.ndim(counts) else 1
    validation.check_last_axis(component_var, num_regimes, "component_var", "len(counts)")
    if active is not None and np.shape(active) != np.shape(counts):
        raise ValueError(f"active must be shaped like counts {np.shape(counts)}, got "
                         f"{np.shape(active)}")  # fmt: skip
    counts = jnp.asarray(counts)
    component_var = jnp.asarray(component_var)
    dtype = jnp.result_type(component_var, jnp.float32)
    active = counts > 0 if active is None else jnp.asarray(active)
    log_prior = jnp.log(jnp.maximum(counts, 1).astype(dtype) / (total + alpha))
    log_w = jnp.broadcast_to(log_prior, component_var.shape) - 0.5 * jnp.log(
        component_var.astype(dtype) + _GATE_FLOOR
    )
    active = jnp.broadcast_to(active, component_var.shape)
    return jax.nn.softmax(jnp.where(active, log_w, -jnp.inf), axis=-1)


def mixture_moments(weights, means, variances) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(μ, intra, inter)`` of a mixture with ``weights``, component ``means`` and
    ``variances`` (last axis: components).

    Examples:
      >>> import jax.numpy as jnp
      >>> mu, intra, inter = mixture_moments(jnp.array([0.7, 0.3]), jnp.array([1.0, -1.0]),
      ...                                    jnp.array([0.2, 0.5]) ** 2)
      >>> [round(float(v), 4) for v in (mu, intra, inter)]  # RAMBO note, check 4
      [0.4, 0.103, 0.84]
    """
    validation.check_real_array(weights, "weights", minimum=0.0)
    validation.check_distribution(weights, "weights")
    validation.check_real_array(variances, "variances", minimum=0.0)
    weights, means, variances = (jnp.asarray(v) for v in (weights, means, variances))
    if not (weights.shape == means.shape == variances.shape):
        raise ValueError(
            f"weights, means and variances must share a shape, got {weights.shape}, "
            f"{means.shape} and {variances.shape}"
        )
    mean = jnp.sum(weights * means, -1)
    intra = jnp.sum(weights * variances, -1)
    inter = jnp.sum(weights * (means - mean[..., None]) ** 2, -1)
    return mean, intra, inter


def mixture_posterior(state: RamboState, x, y, mask=None, *, jitter=DEFAULT_JITTER):
    """Each active regime's GP posterior on its members, from the sampler's ``state``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.bo import RamboConfig, rambo_fit
      >>> x = jnp.linspace(-1.0, 1.0, 10)[:, None]
      >>> y = jnp.sin(3 * x[:, 0])
      >>> state, _ = rambo_fit(jax.random.key(0), x, y, config=RamboConfig(num_sweeps=3, burn_in=0))
      >>> pred = mixture_predict(mixture_posterior(state, x, y), x[:3])
      >>> pred.mean.shape, bool(jnp.allclose(pred.weights.sum(-1), 1.0))
      ((3,), True)
    """
    validation.check_instance(state, RamboState, "state", "from rambo_fit or rambo_init")
    x, y, mask = _check_data(x, y, mask)
    _check_state(state, x.shape[0], None, jitter)
    xs, ys, stats = standardize(x, y, mask)
    num_slots = state.active.shape[0]
    members = _members(state.assignments, mask, num_slots)
    # An empty slot is fit on all rows (any valid factorization); its gate weight is zero.
    fit_mask = jnp.where(state.active[:, None], members, mask[None, :])

    def one(params, m):
        return gp_posterior(xs, ys, params, m, jitter=jitter)

    components = jax.vmap(one)(state.params, fit_mask)
    counts = jnp.sum(members, -1)
    return MixturePosterior(components, counts, state.active, state.alpha, stats)


def mixture_predict(posterior: MixturePosterior, x_test) -> MixturePrediction:
    """Gate weights, mixture moments and per-regime predictions at ``x_test`` (raw units).

    Args:
      posterior: from :func:`mixture_posterior`.
      x_test: ``(m, d)`` test inputs (raw units).

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.bo import RamboConfig, rambo_fit
      >>> x = jnp.linspace(0.0, 1.0, 10)[:, None]
      >>> y = jnp.cos(4 * x[:, 0])
      >>> state, _ = rambo_fit(jax.random.key(0), x, y, config=RamboConfig(num_sweeps=3, burn_in=0))
      >>> pred = mixture_predict(mixture_posterior(state, x, y), jnp.array([[0.5]]))
      >>> bool(pred.variance[0] >= pred.intra[0] >= 0)
      True
    """
    validation.check_instance(
        posterior,
        MixturePosterior,
        "posterior",
        "from mixture_posterior; a single GP's GPPosterior predicts with its .predict method",
    )
    x_test = validation.check_array(x_test, "x_test", kind="floating", ndim=2)
    validation.check_finite_array(x_test, "x_test")
    stats = posterior.stats
    validation.check_last_axis(x_test, stats.x_mean.shape[-1], "x_test", "the data's dimension")
    xt = (x_test.astype(stats.x_mean.dtype) - stats.x_mean[None]) / stats.x_std[None]
    means, variances = jax.vmap(lambda c: c.predict(xt))(posterior.components)
    means, variances = means.T, variances.T  # (m, K)
    total = jnp.sum(posterior.counts)
    weights = spatial_gate(posterior.counts, total, posterior.alpha, variances, posterior.active)
    mean, intra, inter = mixture_moments(weights, means, variances)
    scale = stats.y_std**2
    return MixturePrediction(
        mean * stats.y_std + stats.y_mean,
        intra * scale,
        inter * scale,
        weights,
        means * stats.y_std + stats.y_mean,
        variances * scale,
    )


def mixture_expected_improvement(prediction: MixturePrediction, best, *, xi=0.1) -> jax.Array:
    """Mixture EI (maximization): ``Σ_k w_k EI(μ_k, √v_k; f*, ξ)`` in raw units.

    Each regime's EI uses its own de-standardized mean and latent standard deviation; ``ξ`` is
    in the objective's units (the released code's convention, negligible on large scales).
    With one regime this is plain EI.

    Examples:
      >>> import jax.numpy as jnp
      >>> pred = MixturePrediction(None, None, None, jnp.array([0.7, 0.3]), jnp.array([1.0, -1.0]),
      ...                          jnp.array([0.2, 0.5]) ** 2)
      >>> round(float(mixture_expected_improvement(pred, 0.8, xi=0.1)), 6)  # note, check 5
      0.097694
    """
    validation.check_named_tuple(prediction, MixturePrediction, "prediction")
    validation.check_real(xi, "xi")
    ei = expected_improvement(
        prediction.component_mean, jnp.sqrt(prediction.component_var), best, xi=xi
    )
    return jnp.sum(prediction.weights * ei, -1)


def mixture_log_expected_improvement(prediction: MixturePrediction, best, *, xi=0.1) -> jax.Array:
    """``log`` of :func:`mixture_expected_improvement`, finite where every regime's EI underflows.

    ``log Σ_k w_k EI_k = logsumexp_k(log w_k + log EI_k)``, each ``log EI_k`` from
    :func:`jaxlab.bo.log_expected_improvement` on the regime's de-standardized mean and latent
    standard deviation; regimes with zero gate weight (inactive slots) drop out. Where the
    mixture EI is representable the two agree; far from every regime's incumbent, where it
    underflows to 0 (a flat acquisition surface), this stays finite with useful gradients.

    Args:
      prediction: from :func:`mixture_predict`.
      best: the incumbent ``f*`` (maximization).
      xi: exploration margin ``ξ`` in the objective's units.

    Returns:
      ``log`` mixture EI, shape ``prediction.weights.shape[:-1]``.

    Examples:
      >>> import math, jax.numpy as jnp
      >>> pred = MixturePrediction(None, None, None, jnp.array([0.7, 0.3]), jnp.array([1.0, -1.0]),
      ...                          jnp.array([0.2, 0.5]) ** 2)
      >>> round(math.exp(float(mixture_log_expected_improvement(pred, 0.8, xi=0.1))), 6)
      0.097694
      >>> far = pred._replace(component_mean=jnp.array([-40.0, -50.0]))  # EI = 0 in float32
      >>> bool(jnp.isfinite(mixture_log_expected_improvement(far, 0.8)))
      True
    """
    validation.check_real(xi, "xi")
    log_ei = log_expected_improvement(
        prediction.component_mean, jnp.sqrt(prediction.component_var), best, xi=xi
    )
    weights = jnp.asarray(prediction.weights)
    positive = weights > 0
    # The inner where keeps log(0)'s infinite gradient away from zero-weight regimes.
    log_w = jnp.where(positive, jnp.log(jnp.where(positive, weights, 1.0)), -jnp.inf)
    return jax.scipy.special.logsumexp(log_w + log_ei, axis=-1)


def mixture_ucb(prediction: MixturePrediction, *, beta=2.0) -> jax.Array:
    """Mixture UCB ``μ + β √(intra + inter)`` (maximization).

    *Inferred*, not from the released code: the paper's abstract says its acquisitions split
    uncertainty into intra- and inter-regime parts; this is the natural UCB over that split.

    Examples:
      >>> import jax.numpy as jnp
      >>> pred = MixturePrediction(jnp.array(0.4), jnp.array(0.103), jnp.array(0.84), None,
      ...                          None, None)
      >>> round(float(mixture_ucb(pred, beta=1.0)), 4)  # 0.4 + sqrt(0.943)
      1.3711
    """
    validation.check_named_tuple(prediction, MixturePrediction, "prediction")
    validation.check_real(beta, "beta", minimum=0.0)
    return prediction.mean + beta * jnp.sqrt(prediction.intra + prediction.inter)
