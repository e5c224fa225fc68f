"""Exact Gaussian-process regression on padded data: RBF kernels, marginal likelihood, posterior.

Every function takes a boolean ``mask`` over the training rows, so a Bayesian-optimization loop
pads its observations to a fixed maximum and compiles once. A masked row is removed exactly:
the covariance is replaced by ``M = (m mᵀ) ⊙ (K + (σ_n² + jitter) I) + diag(1 - m)`` and the
targets by ``y ⊙ m``, whose Cholesky factor, solves and log-determinant equal those of the
member sub-problem (the masked rows contribute an identity block, ``log 1 = 0``).

The maths runs in the dtype of ``x`` (float32 by default, float64 under
``jax.enable_x64(True)``). On standardized data the default ``jitter`` and a noise level above
about ``1e-3`` keep float32 Cholesky factors accurate; for ill-conditioned kernels (tiny noise,
long lengthscales) call under ``jax.enable_x64(True)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import scipy.linalg
import scipy.optimize

from jaxlab._src import validation
from jaxlab.bo._data import GPData
from jaxlab.bo._priors import (
    BOTORCH_LENGTHSCALE_FLOOR,
    BOTORCH_NOISE_FLOOR,
    BOTORCH_NOISE_PRIOR,
    botorch_lengthscale_prior,
    lognormal_log_prob,
)

__all__ = [
    "GPFitInfo",
    "GPParams",
    "GPPosterior",
    "Standardization",
    "botorch_log_prior",
    "fit_gp",
    "fit_sgp_botorch",
    "gp_log_marginal",
    "gp_loo_predictive",
    "gp_posterior",
    "gp_predict",
    "rbf_kernel",
    "sgp_botorch_log_posterior",
    "standardize",
]

DEFAULT_JITTER = 1e-6
# The single-GP baseline's clamps (the released code's): lengthscale in [1e-3, 1e3], signal
# variance in [1e-6, 1e6], noise variance in [1e-8, 10]; as log standard deviations below.
_LOG_LENGTHSCALE_RANGE = (math.log(1e-3), math.log(1e3))
_LOG_SIGNAL_RANGE = (0.5 * math.log(1e-6), 0.5 * math.log(1e6))
_LOG_NOISE_RANGE = (0.5 * math.log(1e-8), 0.5 * math.log(10.0))
# In float32 the noise-variance floor is 1e-6 instead: below it a float32 Cholesky factor of a
# standardized RBF kernel is unreliable (NaN), the failure the RAMBO note warns of.
_LOG_NOISE_FLOOR_FLOAT32 = 0.5 * math.log(1e-6)
# fit_sgp_botorch stops a start once every gradient entry (nats per unit of log-parameter) is
# below these; float32 gradients of an O(n) objective are not resolved much further.
_MAP_TOL_FLOAT64 = 1e-5
_MAP_TOL_FLOAT32 = 1e-3
_STD_FLOOR = 1e-12  # a spread below this (constant data) standardizes by 1
# fit_sgp_botorch's ways to fit: BoTorch's own procedure (SciPy on the host) or multi-start optax
FIT_SGP_BOTORCH_METHODS = ("lbfgsb", "lbfgs")


class GPParams(NamedTuple):
    """Hyper-parameters of a zero-mean GP with an RBF kernel (standard deviations, not variances).

    ``lengthscale`` is a scalar (isotropic kernel) or one entry per input dimension (ARD).

    Examples:
      >>> GPParams(1.0, 0.5, 0.1)._fields
      ('signal_std', 'lengthscale', 'noise_std')
    """

    signal_std: jax.Array
    lengthscale: jax.Array
    noise_std: jax.Array


def rbf_kernel(x1, x2, *, signal_std, lengthscale) -> jax.Array:
    """The RBF kernel matrix ``σ_f² exp(-½ Σ_j (x1_j - x2_j)² / ℓ_j²)``.

    Args:
      x1: ``(n, d)`` inputs.
      x2: ``(m, d)`` inputs.
      signal_std: ``σ_f > 0``.
      lengthscale: ``ℓ > 0``, a scalar (isotropic) or ``(d,)`` (ARD).

    Returns:
      The ``(n, m)`` kernel matrix.

    Examples:
      >>> import jax.numpy as jnp
      >>> k = rbf_kernel(jnp.zeros((1, 2)), jnp.ones((1, 2)), signal_std=2.0, lengthscale=1.0)
      >>> round(float(k[0, 0]), 5)  # 4 exp(-1)
      1.47152
    """
    x1 = validation.check_array(x1, "x1", kind="floating", ndim=2)
    x2 = validation.check_array(x2, "x2", kind="floating", ndim=2)
    validation.check_last_axis(x2, x1.shape[-1], "x2", "x1's dimension")
    validation.check_real_array(signal_std, "signal_std", minimum=0.0, include_minimum=False)
    validation.check_real_array(lengthscale, "lengthscale", minimum=0.0, include_minimum=False)
    if np.ndim(lengthscale) > 1 or np.size(lengthscale) not in (1, x1.shape[-1]):
        raise ValueError(f"lengthscale must be a scalar or have {x1.shape[-1]} entries (one per "
                         f"input dimension), got shape {np.shape(lengthscale)}")  # fmt: skip
    scale = jnp.broadcast_to(jnp.asarray(lengthscale, x1.dtype), x1.shape[-1:])[None, :]
    a, b = x1 / scale, x2 / scale
    sq = (
        jnp.sum(a * a, -1)[:, None] + jnp.sum(b * b, -1)[None, :] - 2.0 * a @ b.T
    )  # the expanded square: one matrix product instead of an (n, m, d) difference array
    return jnp.asarray(signal_std, x1.dtype) ** 2 * jnp.exp(-0.5 * jnp.maximum(sq, 0.0))


def _masked_cholesky(x, mask, params: GPParams, jitter):
    """Cholesky factor of the masked training covariance (see the module docstring)."""
    k = rbf_kernel(x, x, signal_std=params.signal_std, lengthscale=params.lengthscale)
    noise = jnp.asarray(params.noise_std, x.dtype) ** 2 + jitter
    m = mask.astype(x.dtype)
    cov = m[:, None] * m[None, :] * (k + noise * jnp.eye(x.shape[0], dtype=x.dtype))
    return jnp.linalg.cholesky(cov + jnp.diag(1.0 - m))


def gp_log_marginal(x, y, params: GPParams, mask=None, *, jitter=DEFAULT_JITTER) -> jax.Array:
    """Log marginal likelihood ``log N(y; 0, K + (σ_n² + jitter) I)`` of the unmasked rows.

    Args:
      x: ``(n, d)`` training inputs.
      y: ``(n,)`` targets.
      params: the :class:`GPParams`.
      mask: optional ``(n,)`` bool, ``True`` for the rows that count.
      jitter: added to the noise variance.

    Returns:
      A scalar: ``-½ yᵀ M⁻¹ y - ½ log det M - (n_m/2) log 2π`` over the ``n_m`` unmasked rows.

    Examples:
      >>> import jax.numpy as jnp
      >>> params = GPParams(jnp.array(1.0), jnp.array(0.5), jnp.array(0.1))
      >>> x, y = jnp.array([[0.0], [1.0]]), jnp.array([0.5, -0.3])
      >>> round(float(gp_log_marginal(x, y, params)), 4)  # the RAMBO note's check 7
      -2.0304
    """
    validation.check_named_tuple(params, GPParams, "params")
    x, y, mask = GPData.create(x, y, mask)
    validation.check_gp_hyperparameters(params, x.shape[-1])
    validation.check_nonnegative(jitter, "jitter")
    return log_marginal_unchecked(x, y, mask, params, jitter)


def log_marginal_unchecked(x, y, mask, params: GPParams, jitter) -> jax.Array:
    """:func:`gp_log_marginal` without argument checks (for vmapped, traced callers)."""
    chol = _masked_cholesky(x, mask, params, jitter)
    ym = jnp.where(mask, y, 0.0)
    white = jax.scipy.linalg.solve_triangular(chol, ym, lower=True)
    count = jnp.sum(mask).astype(x.dtype)
    return (
        -0.5 * jnp.sum(white**2)
        - jnp.sum(jnp.log(jnp.diagonal(chol)))
        - 0.5 * count * jnp.log(2.0 * jnp.pi).astype(x.dtype)
    )


class Standardization(NamedTuple):
    """Per-dimension mean/spread of ``x`` and mean/spread of ``y`` over the unmasked rows.

    Examples:
      >>> Standardization._fields
      ('x_mean', 'x_std', 'y_mean', 'y_std')
    """

    x_mean: jax.Array
    x_std: jax.Array
    y_mean: jax.Array
    y_std: jax.Array


def standardize(x, y, mask=None) -> tuple[jax.Array, jax.Array, Standardization]:
    """``((x - mean)/std, (y - m_y)/s_y, stats)`` over the unmasked rows (spreads of 0 read as 1).

    Examples:
      >>> import jax.numpy as jnp
      >>> xs, ys, stats = standardize(jnp.array([[0.0], [2.0]]), jnp.array([1.0, 3.0]),
      ...                             jnp.array([True, True]))
      >>> xs[:, 0].tolist(), ys.tolist(), float(stats.y_std)
      ([-1.0, 1.0], [-1.0, 1.0], 1.0)
    """
    x, y, mask = GPData.create(x, y, mask)
    w = mask.astype(x.dtype)
    count = jnp.maximum(jnp.sum(w), 1.0)

    def moments(v, weights):
        mean = jnp.sum(v * weights, 0, keepdims=True) / count
        std = jnp.sqrt(jnp.sum(weights * (v - mean) ** 2, 0, keepdims=True) / count)
        return mean, jnp.where(std > _STD_FLOOR, std, 1.0)

    x_mean, x_std = moments(x, w[:, None])
    y_mean, y_std = moments(y, w)
    xs = jnp.where(mask[:, None], (x - x_mean) / x_std, 0.0)
    x_mean, x_std, y_mean, y_std = x_mean[0], x_std[0], y_mean[0], y_std[0]
    ys = jnp.where(mask, (y - y_mean) / y_std, 0.0)
    return xs, ys, Standardization(x_mean, x_std, y_mean, y_std)


class GPPosterior(NamedTuple):
    """A fitted GP posterior: Cholesky factor and weights of the masked training data.

    ``predict(x_test)`` gives the posterior mean and *latent* variance (no observation noise)
    at each test row; add ``params.noise_std²`` for the predictive variance of a new observation.

    Examples:
      >>> import jax.numpy as jnp
      >>> post = gp_posterior(jnp.zeros((1, 1)), jnp.ones(1), GPParams(1.0, 1.0, 0.1))
      >>> post.chol.shape, post.weights.shape
      ((1, 1), (1,))
    """

    x: jax.Array
    mask: jax.Array
    params: GPParams
    chol: jax.Array
    weights: jax.Array

    def predict(self, x_test) -> tuple[jax.Array, jax.Array]:
        x_test = validation.check_array(x_test, "x_test", kind="floating", ndim=2)
        validation.check_last_axis(x_test, self.x.shape[-1], "x_test", "the training dimension")
        p = self.params
        cross = rbf_kernel(
            self.x, x_test.astype(self.x.dtype), signal_std=p.signal_std, lengthscale=p.lengthscale
        ) * self.mask[:, None].astype(self.x.dtype)
        mean = cross.T @ self.weights
        v = jax.scipy.linalg.solve_triangular(self.chol, cross, lower=True)
        prior = jnp.asarray(p.signal_std, self.x.dtype) ** 2
        return mean, jnp.maximum(prior - jnp.sum(v * v, axis=0), 0.0)


def gp_posterior(x, y, params: GPParams, mask=None, *, jitter=DEFAULT_JITTER) -> GPPosterior:
    """The exact GP posterior given the unmasked rows of ``(x, y)``.

    Mean ``k_*ᵀ (K + σ_n² I)⁻¹ y``, latent variance ``σ_f² - k_*ᵀ (K + σ_n² I)⁻¹ k_*``.

    Raises:
      ValueError: concrete ``y`` with a non-finite unmasked entry, or a mask selecting nothing.

    Examples:
      >>> import jax.numpy as jnp
      >>> params = GPParams(jnp.array(1.0), jnp.array(0.5), jnp.array(0.1))
      >>> post = gp_posterior(jnp.array([[0.0], [1.0]]), jnp.array([0.5, -0.3]), params)
      >>> mean, var = post.predict(jnp.array([[0.5]]))
      >>> round(float(mean[0]), 4), round(float(var[0]), 4)  # the RAMBO note's check 7
      (0.1059, 0.3576)
    """
    validation.check_named_tuple(params, GPParams, "params")
    x, y, mask = GPData.create(x, y, mask)
    validation.check_gp_hyperparameters(params, x.shape[-1])
    validation.check_nonnegative(jitter, "jitter")
    chol = _masked_cholesky(x, mask, params, jitter)
    ym = jnp.where(mask, y, 0.0)
    weights = jax.scipy.linalg.cho_solve((chol, True), ym)
    params = GPParams(*(jnp.asarray(v, x.dtype) for v in params))
    return GPPosterior(x, mask, params, chol, weights)


def gp_predict(x_train, y_train, x_test, params: GPParams, mask=None, *, jitter=DEFAULT_JITTER):
    """``gp_posterior(x_train, y_train, params, mask).predict(x_test)``: (mean, latent variance).

    Examples:
      >>> import jax.numpy as jnp
      >>> params = GPParams(jnp.array(1.0), jnp.array(1.0), jnp.array(1e-3))
      >>> x = jnp.array([[0.0], [1.0]])
      >>> mean, var = gp_predict(x, jnp.array([1.0, 2.0]), x, params)
      >>> [round(float(v), 3) for v in mean]  # interpolates the data
      [1.0, 2.0]
    """
    return gp_posterior(x_train, y_train, params, mask, jitter=jitter).predict(x_test)


def gp_loo_predictive(x, y, params: GPParams, mask=None, *, jitter=DEFAULT_JITTER):
    """Leave-one-out predictive of every unmasked row, from one inverse (no refits).

    With ``A = M⁻¹`` (the masked training covariance including noise), the closed-form
    identities ``μ_{-i} = y_i - (A y)_i / A_ii`` and ``Var(y_i | y_{-i}) = 1/A_ii`` give the GP
    fit on all other rows evaluated at ``x_i`` (the predictive of a new *observation*, noise
    included; subtract ``σ_n²`` for the latent variance). RAMBO's Gibbs sweep removes a point
    from its regime with the same identity.

    Returns:
      ``(mean, variance)``, each ``(n,)`` (zeros at masked rows).

    Examples:
      >>> import jax.numpy as jnp
      >>> params = GPParams(jnp.array(1.0), jnp.array(0.5), jnp.array(0.1))
      >>> x, y = jnp.array([[0.0], [1.0], [0.5]]), jnp.array([0.5, -0.3, 0.2])
      >>> mean, var = gp_loo_predictive(x, y, params)
      >>> m2, v2 = gp_predict(x[:2], y[:2], x[2:], params)  # refit without row 2
      >>> same_var = jnp.allclose(var[2], v2[0] + 0.01, atol=1e-5)  # + σ_n²: a new observation
      >>> bool(jnp.allclose(mean[2], m2[0], atol=1e-5)), bool(same_var)
      (True, True)
    """
    validation.check_named_tuple(params, GPParams, "params")
    x, y, mask = GPData.create(x, y, mask)
    validation.check_gp_hyperparameters(params, x.shape[-1])
    validation.check_nonnegative(jitter, "jitter")
    chol = _masked_cholesky(x, mask, params, jitter)
    inv = jax.scipy.linalg.cho_solve((chol, True), jnp.eye(x.shape[0], dtype=x.dtype))
    ym = jnp.where(mask, y, 0.0)
    diag = jnp.diagonal(inv)
    mean = jnp.where(mask, ym - (inv @ ym) / diag, 0.0)
    return mean, jnp.where(mask, 1.0 / diag, 0.0)


class GPFitInfo(NamedTuple):
    """What :func:`fit_gp` reports: the final objective (negative log marginal likelihood minus
    the log prior) and ``nonfinite``, the number of steps whose objective was NaN or infinite
    (the last finite parameters are kept from such a step on).

    Examples:
      >>> GPFitInfo._fields
      ('objective', 'nonfinite')
    """

    objective: jax.Array
    nonfinite: jax.Array


def _to_log(params: GPParams, dtype) -> jax.Array:
    return jnp.log(jnp.concatenate([jnp.ravel(jnp.asarray(v, dtype)) for v in params]))


def fit_gp(
    x,
    y,
    mask=None,
    *,
    init: GPParams | None = None,
    ard: bool = True,
    log_prior: Callable[[GPParams], jax.Array] | None = None,
    method: str = "lbfgs",
    steps: int = 50,
    learning_rate=0.01,
    clamp: bool = True,
    jitter=DEFAULT_JITTER,
) -> tuple[GPParams, GPFitInfo]:
    """Type-II maximum likelihood (or MAP with ``log_prior``) of the RBF hyper-parameters.

    Minimizes ``-log p(y | θ) - log_prior(θ)`` over ``u = log θ`` with optax: ``"lbfgs"``
    (``optax.lbfgs`` with its zoom line search) or ``"adam"`` (``learning_rate``), ``steps``
    iterations in one ``lax.fori_loop``. With ``clamp``, ``θ`` is read through the released
    single-GP code's clamps (ℓ ∈ [1e-3, 1e3], σ_f² ∈ [1e-6, 1e6], σ_n² ∈ [1e-8, 10]; the noise
    floor is 1e-6 in float32, where smaller noise breaks the Cholesky factor); the prior,
    when given, is evaluated on ``θ`` itself (no log-Jacobian), as the RAMBO code does.

    Args:
      x, y, mask: training data as in :func:`gp_log_marginal`.
      init: starting :class:`GPParams`; default ``σ_f = 1``, ``ℓ = 1`` (per dimension with
        ``ard``), ``σ_n = 0.1`` (the baseline's ``σ_f² = 1``, ``σ_n² = 1e-2``).
      ard: one lengthscale per dimension (``init`` decides when given).
      log_prior: optional ``GPParams -> scalar``.
      method: ``"lbfgs"`` or ``"adam"``.
      steps: optimizer iterations (``>= 1``).
      learning_rate: Adam's step size (traceable).
      clamp: apply the clamps above.
      jitter: added to the noise variance.

    Returns:
      ``(params, GPFitInfo)``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> x = jnp.linspace(0.0, 1.0, 12)[:, None]
      >>> y = jnp.sin(6.0 * x[:, 0])
      >>> params, info = fit_gp(x, y, steps=30)
      >>> bool(info.objective < -gp_log_marginal(x, y, GPParams(1.0, jnp.ones(1), 0.1)))
      True
    """
    x, y, mask = GPData.create(x, y, mask)
    validation.check_bool(ard, "ard")
    validation.check_bool(clamp, "clamp")
    validation.check_nonnegative(jitter, "jitter")
    if log_prior is not None:
        validation.check_scalar_callback(log_prior, "log_prior", init or GPParams(1.0, 1.0, 0.1))
    validation.check_choice(method, "method", ("lbfgs", "adam"))
    steps = validation.check_positive_int(steps, "steps")
    validation.check_learning_rate(learning_rate)
    d = x.shape[-1]
    if init is None:
        init = GPParams(jnp.array(1.0), jnp.ones(d) if ard else jnp.array(1.0), jnp.array(0.1))
    validation.check_named_tuple(init, GPParams, "init")
    ls_size = jnp.size(jnp.asarray(init.lengthscale))
    if ls_size not in (1, d):
        raise ValueError(f"init.lengthscale must be a scalar or have {d} entries, got {ls_size}")
    for field, value in zip(GPParams._fields, init, strict=True):
        validation.check_real_array(value, f"init.{field}", minimum=0.0, include_minimum=False)
    ls_shape = jnp.shape(init.lengthscale)
    noise_floor = _LOG_NOISE_RANGE[0] if x.dtype == jnp.float64 else _LOG_NOISE_FLOOR_FLOAT32
    low = jnp.array(
        [_LOG_SIGNAL_RANGE[0]] + [_LOG_LENGTHSCALE_RANGE[0]] * ls_size + [noise_floor],
        x.dtype,
    )
    high = jnp.array(
        [_LOG_SIGNAL_RANGE[1]] + [_LOG_LENGTHSCALE_RANGE[1]] * ls_size + [_LOG_NOISE_RANGE[1]],
        x.dtype,
    )

    def unpack(u):
        u = jnp.clip(u, low, high) if clamp else u
        theta = jnp.exp(u)
        return GPParams(theta[0], theta[1 : 1 + ls_size].reshape(ls_shape), theta[-1])

    def objective(u):
        params = unpack(u)
        value = -log_marginal_unchecked(x, y, mask, params, jitter)
        return value - log_prior(params) if log_prior is not None else value

    u, value, nonfinite = _minimize(objective, _to_log(init, x.dtype), method, steps, learning_rate)
    return unpack(u), GPFitInfo(value, nonfinite)


def _minimize(objective, u0, method, steps, learning_rate=0.01, tol=None):
    """``steps`` optax iterations on ``objective(u)``; the best finite point met, its value and
    the number of non-finite steps (a non-finite step restarts from the best point). With
    ``tol``, it stops early once the gradient's max-norm is at most ``tol``."""
    if method == "lbfgs":
        opt = optax.lbfgs()
        value_and_grad = optax.value_and_grad_from_state(objective)
    else:
        opt = optax.adam(learning_rate)
        value_and_grad = jax.value_and_grad(objective)

    def body(_, carry):
        u, state, best_u, best_value, nonfinite, _ = carry
        if method == "lbfgs":
            value, grad = value_and_grad(u, state=state)
            updates, state = opt.update(grad, state, u, value=value, grad=grad, value_fn=objective)
        else:
            value, grad = value_and_grad(u)
            updates, state = opt.update(grad, state, u)
        ok = jnp.isfinite(value) & jnp.all(jnp.isfinite(grad))
        better = ok & (value < best_value)
        best_u = jnp.where(better, u, best_u)
        best_value = jnp.where(better, value, best_value)
        u = jnp.where(ok, optax.apply_updates(u, updates), best_u)
        gnorm = jnp.where(ok, jnp.max(jnp.abs(grad)), inf)
        return u, state, best_u, best_value, nonfinite + (~ok).astype(jnp.int32), gnorm

    inf = jnp.asarray(jnp.inf, u0.dtype)
    carry = (u0, opt.init(u0), u0, inf, jnp.zeros([], jnp.int32), inf)
    if tol is None:
        carry = jax.lax.fori_loop(0, steps, body, carry)
    else:
        # (count, carry): stop after `steps` or once the gradient at the iterate is below tol
        carry = jax.lax.while_loop(
            lambda c: (c[0] < steps) & (c[1][-1] > tol),
            lambda c: (c[0] + 1, body(c[0], c[1])),
            (jnp.zeros([], jnp.int32), carry),
        )[1]
    u, _, best_u, best_value, nonfinite, _ = carry
    final = objective(u)
    take_final = jnp.isfinite(final) & (final <= best_value)
    # The best finite objective met (the start's, when every step was non-finite).
    return (
        jnp.where(take_final, u, best_u),
        jnp.where(take_final, final, objective(best_u)),
        nonfinite,
    )


def botorch_log_prior(params: GPParams, *, dim: int) -> jax.Array:
    """BoTorch's ``SingleTaskGP`` log prior of the :class:`GPParams` of a GP on ``dim`` inputs.

    ``Σ_j log LogNormal(ℓ_j; √2 + ½ log d, √3) + log LogNormal(σ_n²; -4, 1)``, evaluated on the
    lengthscales and the noise *variance* themselves (no log-Jacobian, as GPyTorch evaluates its
    priors, so the MAP point is BoTorch's). ``σ_f`` has no prior: BoTorch's kernel has no output
    scale (``σ_f = 1`` on standardized outcomes). A scalar (isotropic) lengthscale counts once.

    Args:
      params: the :class:`GPParams`.
      dim: the input dimension ``d`` that scales the lengthscale prior.

    Examples:
      >>> import jax.numpy as jnp
      >>> p = GPParams(1.0, jnp.array([0.5, 0.5]), 0.1)
      >>> round(float(botorch_log_prior(p, dim=2)), 4)
      -0.0543

    References:
      C. Hvarfner, E. O. Hellsten, L. Nardi, *Vanilla Bayesian Optimization Performs Great in
      High Dimensions*, ICML 2024 (BoTorch's defaults since version 0.12).
    """
    validation.check_named_tuple(params, GPParams, "params")
    for field in ("lengthscale", "noise_std"):
        value = getattr(params, field)
        validation.check_real_array(value, f"params.{field}", minimum=0.0, include_minimum=False)
    validation.check_gp_hyperparameters(params, validation.check_positive_int(dim, "dim"))
    loc, scale = botorch_lengthscale_prior(dim)
    noise_loc, noise_scale = BOTORCH_NOISE_PRIOR
    noise_var = jnp.asarray(params.noise_std) ** 2
    return jnp.sum(lognormal_log_prob(params.lengthscale, loc, scale)) + lognormal_log_prob(
        noise_var, noise_loc, noise_scale
    )


def sgp_botorch_log_posterior(
    x, y, params: GPParams, mask=None, *, mean=0.0, jitter=DEFAULT_JITTER
) -> jax.Array:
    """The unnormalized log posterior that :func:`fit_sgp_botorch` maximizes.

    ``log N(y - c; 0, K + (σ_n² + jitter) I) + botorch_log_prior(params, dim=d)`` over the
    unmasked rows, with a constant prior mean ``c`` (BoTorch's ``ConstantMean``); the data are
    expected in BoTorch's coordinates (inputs in the unit cube, standardized outcomes).

    Examples:
      >>> import jax.numpy as jnp
      >>> x, y = jnp.array([[0.0], [1.0]]), jnp.array([0.5, -0.3])
      >>> p = GPParams(jnp.array(1.0), jnp.array([0.5]), jnp.array(0.1))
      >>> value = sgp_botorch_log_posterior(x, y, p)
      >>> bool(jnp.isclose(value, gp_log_marginal(x, y, p) + botorch_log_prior(p, dim=1)))
      True
    """
    validation.check_named_tuple(params, GPParams, "params")
    validation.check_real_array(mean, "mean")
    if np.ndim(mean) != 0:
        raise ValueError(f"mean must be one constant (a scalar), got shape {np.shape(mean)}")
    x, y, mask = GPData.create(x, y, mask)
    validation.check_nonnegative(jitter, "jitter")
    return log_marginal_unchecked(
        x, y - jnp.asarray(mean, x.dtype), mask, params, jitter
    ) + botorch_log_prior(params, dim=x.shape[-1])


def _botorch_objective_numpy(u, x, y, dim, jitter):
    """BoTorch's fitting loss and its gradient in NumPy float64, in BoTorch's coordinates.

    ``u = (c, ℓ_1..ℓ_d, σ_n²)`` (the natural parameters GPyTorch optimizes when a constraint has
    no transform); the loss is ``-(log N(y - c; 0, K + (σ_n² + jitter) I) + log prior) / n``,
    divided by ``n`` as GPyTorch's ``ExactMarginalLogLikelihood`` is (which sets the scale that
    SciPy's stopping tolerances see). The gradient is the closed form
    ``∂L/∂θ = ½ tr((α αᵀ - Σ⁻¹) ∂Σ/∂θ)``, ``α = Σ⁻¹ (y - c)``.
    """
    n = x.shape[0]
    c, ls, noise = u[0], u[1 : 1 + dim], u[-1]
    diff2 = (x[:, None, :] - x[None, :, :]) ** 2  # (n, n, d)
    k = np.exp(-0.5 * np.sum(diff2 / ls**2, -1))
    cov = k + (noise + jitter) * np.eye(n)
    try:
        chol = np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        return np.inf, np.zeros_like(u)
    r = y - c
    alpha = scipy.linalg.cho_solve((chol, True), r)
    inv = scipy.linalg.cho_solve((chol, True), np.eye(n))
    log_lik = -0.5 * r @ alpha - np.sum(np.log(np.diag(chol))) - 0.5 * n * math.log(2 * math.pi)
    loc, scale = botorch_lengthscale_prior(dim)
    noise_loc, noise_scale = BOTORCH_NOISE_PRIOR

    def lognormal(v, mu, s):  # log density and its derivative in v
        z = (np.log(v) - mu) / s
        value = -np.log(v) - math.log(s) - 0.5 * math.log(2 * math.pi) - 0.5 * z * z
        return value, -1.0 / v - z / (s * v)

    prior_ls, dprior_ls = lognormal(ls, loc, scale)
    prior_noise, dprior_noise = lognormal(noise, noise_loc, noise_scale)
    inner = np.outer(alpha, alpha) - inv
    grad_ls = 0.5 * np.einsum("ij,ijk->k", inner * k, diff2) / ls**3 + dprior_ls
    grad = np.concatenate([[np.sum(alpha)], grad_ls, [0.5 * np.trace(inner) + dprior_noise]])
    value = log_lik + np.sum(prior_ls) + prior_noise
    return -value / n, -grad / n


def _fit_botorch_lbfgsb(x, y, mask, starts, jitter):
    """Host side of ``fit_sgp_botorch(method="lbfgsb")``: SciPy's L-BFGS-B, BoTorch's retries."""
    x, y, mask = np.asarray(x, np.float64), np.asarray(y, np.float64), np.asarray(mask, bool)
    x, y = x[mask], y[mask]
    dim = x.shape[1]
    bounds = (
        [(None, None)] + [(BOTORCH_LENGTHSCALE_FLOOR, None)] * dim + [(BOTORCH_NOISE_FLOOR, None)]
    )
    nonfinite = 0
    best = None
    for u0 in np.asarray(starts, np.float64):
        evaluations = []

        def loss(u):
            value, grad = _botorch_objective_numpy(u, x, y, dim, float(jitter))
            evaluations.append(np.isfinite(value))
            return value, grad

        # SciPy's own iteration limit (15000), which BoTorch's fit keeps: in 6-D a fit takes 70-110
        # iterations, and a cap of 50 (bayes_opt's gp_steps) stopped it short of BoTorch's optimum
        result = scipy.optimize.minimize(loss, u0, jac=True, method="L-BFGS-B", bounds=bounds)
        nonfinite += sum(not ok for ok in evaluations)
        result.fun = float(np.squeeze(result.fun))
        if np.isfinite(result.fun) and (best is None or result.fun < best.fun):
            best = result
        if result.success and np.isfinite(result.fun):
            best = result  # BoTorch keeps the first attempt that ends without a warning
            break
    if best is None:
        return np.asarray(starts[0], np.float64), np.float64(np.inf), np.int32(nonfinite)
    return best.x, np.float64(float(best.fun) * x.shape[0]), np.int32(nonfinite)


def fit_sgp_botorch(
    rng_key,
    x,
    y,
    mask=None,
    *,
    num_restarts: int = 4,
    steps: int = 100,
    method: str = "lbfgsb",
    jitter=DEFAULT_JITTER,
) -> tuple[GPParams, jax.Array, GPFitInfo]:
    """Type-II MAP of a GP with BoTorch's ``SingleTaskGP`` defaults, fit as BoTorch fits it.

    The model is BoTorch's: an ARD RBF kernel with no output scale (``σ_f = 1``), a constant
    mean ``c``, the priors of :func:`botorch_log_prior`, ``ℓ_j >= 0.025`` and ``σ_n² >= 1e-4``
    (BoTorch's ``GreaterThan`` floors). It maximizes :func:`sgp_botorch_log_posterior` over
    ``(c, ℓ, σ_n²)``; ``method`` picks how:

    * ``"lbfgsb"`` (default): BoTorch's ``fit_gpytorch_mll``. SciPy's L-BFGS-B on the natural
      parameters ``(c, ℓ_1..ℓ_d, σ_n²)`` with the floors as bounds, the loss divided by ``n``
      (as GPyTorch's marginal likelihood is), from the priors' modes and ``c = 0`` (BoTorch's
      initial values), with SciPy's iteration limit (``steps`` does not apply, as BoTorch passes
      none); an attempt that ends without SciPy's
      success flag is retried from a draw of the priors, up to ``num_restarts`` attempts in
      all (BoTorch's retry policy), so usually one start runs. This runs on the host through
      ``jax.pure_callback``: callable under ``jit`` (and ``vmap``, one call after another), not
      differentiable. Its fits equal BoTorch 0.18.1's on the same data (checked on 200 fits).
    * ``"lbfgs"``: ``num_restarts`` starts vmapped together (the priors' modes and
      ``num_restarts - 1`` prior draws), each ``optax.lbfgs`` on ``(c, log ℓ, log σ_n)`` with the
      floors as clips (stopping once the gradient is below ``1e-5`` in float64, ``1e-3`` in
      float32), the best finite optimum winning. It reaches a higher posterior than BoTorch's
      single start more often than not, and is all-JAX; but it is not BoTorch's procedure, and
      where the posterior has several modes the BO loop then behaves differently (on 2-D Levy
      it does worse than BoTorch: see the README).

    Give the data in BoTorch's coordinates: inputs scaled to the unit cube (``Normalize``) and
    outcomes standardized (``Standardize``), as ``bayes_opt(surrogate="sgp_botorch")`` does.

    Args:
      rng_key: a ``jax.random`` key for the prior draws.
      x, y, mask: training data as in :func:`gp_log_marginal`.
      num_restarts: starts (``>= 1``, static): ``"lbfgsb"``'s attempt budget, ``"lbfgs"``'s
        vmapped starts.
      steps: ``"lbfgs"``'s iterations per start (``>= 1``, static); ``"lbfgsb"`` runs to SciPy's
        convergence test, as BoTorch.
      method: ``"lbfgsb"`` (BoTorch's procedure) or ``"lbfgs"`` (multi-start, in JAX).
      jitter: added to the noise variance.

    Returns:
      ``(params, mean, GPFitInfo)``: the MAP :class:`GPParams` (``signal_std = 1``), the constant
      mean ``c``, and the chosen start's negative log posterior with the non-finite evaluations
      (``"lbfgsb"``) or steps (``"lbfgs"``) counted over all starts.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> x = jnp.linspace(0.0, 1.0, 12)[:, None]
      >>> y = jnp.sin(6.0 * x[:, 0])
      >>> y = (y - y.mean()) / y.std()
      >>> params, c, info = fit_sgp_botorch(jax.random.key(0), x, y, steps=30)
      >>> start = GPParams(jnp.array(1.0), jnp.array([0.2]), jnp.array(0.08))
      >>> bool(-info.objective > sgp_botorch_log_posterior(x, y, start))
      True

    References:
      M. Balandat et al., *BoTorch: A Framework for Efficient Monte-Carlo Bayesian
      Optimization*, NeurIPS 2020 (``fit_gpytorch_mll``, ``SingleTaskGP``).
    """
    validation.check_key(rng_key)
    x, y, mask = GPData.create(x, y, mask)
    validation.check_nonnegative(jitter, "jitter")
    num_restarts = validation.check_positive_int(num_restarts, "num_restarts")
    steps = validation.check_positive_int(steps, "steps")
    validation.check_choice(method, "method", FIT_SGP_BOTORCH_METHODS)
    d = x.shape[-1]
    dtype = x.dtype
    loc, scale = botorch_lengthscale_prior(d)
    noise_loc, noise_scale = BOTORCH_NOISE_PRIOR
    # BoTorch's initial values are the priors' modes: ℓ = exp(μ - s²), σ_n² = exp(μ_n - s_n²).
    k_ls, k_noise = jax.random.split(rng_key)
    log_ls = jnp.concatenate(
        [
            jnp.full((1, d), loc - scale**2, dtype),
            loc + scale * jax.random.normal(k_ls, (num_restarts - 1, d), dtype),
        ]
    )
    log_noise_var = jnp.concatenate(
        [
            jnp.full((1, 1), noise_loc - noise_scale**2, dtype),
            noise_loc + noise_scale * jax.random.normal(k_noise, (num_restarts - 1, 1), dtype),
        ]
    )
    zeros = jnp.zeros((num_restarts, 1), dtype)
    if method == "lbfgsb":
        floors = jnp.array(
            [-jnp.inf] + [BOTORCH_LENGTHSCALE_FLOOR] * d + [BOTORCH_NOISE_FLOOR], jnp.float32
        ).astype(dtype)
        starts = jnp.maximum(
            jnp.concatenate([zeros, jnp.exp(log_ls), jnp.exp(log_noise_var)], 1), floors[None]
        )
        # The results come back as uint32 words, bitcast here: the callback runs on XLA's own
        # thread, outside a caller's `jax.enable_x64` scope, where JAX would check float64
        # results against float32 (canonicalized) and refuse them.
        words = (2,) if dtype == jnp.float64 else ()

        def to_words(value):
            value = np.array(value, dtype)  # a C-ordered copy (0-d stays 0-d)
            return value.reshape(-1).view(np.uint32).reshape(value.shape + words)

        def host(x_, y_, mask_, starts_):
            u, value, bad = _fit_botorch_lbfgsb(x_, y_, mask_, starts_, jitter)
            return to_words(u), to_words(value), np.asarray(bad, np.int32)

        shapes = (
            jax.ShapeDtypeStruct((d + 2, *words), jnp.uint32),
            jax.ShapeDtypeStruct(words, jnp.uint32),
            jax.ShapeDtypeStruct((), jnp.int32),
        )
        u, value, nonfinite = jax.pure_callback(
            host, shapes, x, y, mask, starts, vmap_method="sequential"
        )
        u = jax.lax.bitcast_convert_type(u, dtype)
        value = jax.lax.bitcast_convert_type(value, dtype)
        params = GPParams(jnp.ones([], dtype), u[1 : 1 + d], jnp.sqrt(u[-1]))
        return params, u[0], GPFitInfo(value, nonfinite)

    # u = (c, log ℓ_1..d, log σ_n); σ_n² >= floor  <=>  log σ_n >= ½ log floor
    low = jnp.array(
        [-jnp.inf]
        + [math.log(BOTORCH_LENGTHSCALE_FLOOR)] * d
        + [0.5 * math.log(BOTORCH_NOISE_FLOOR)],
        dtype,
    )

    def unpack(u):
        u = jnp.maximum(u, low)
        return GPParams(jnp.ones([], dtype), jnp.exp(u[1 : 1 + d]), jnp.exp(u[-1])), u[0]

    def objective(u):
        params, c = unpack(u)
        value = log_marginal_unchecked(x, y - c, mask, params, jitter)
        return -(value + botorch_log_prior(params, dim=d))

    starts = jnp.maximum(jnp.concatenate([zeros, log_ls, 0.5 * log_noise_var], 1), low[None])
    tol = _MAP_TOL_FLOAT64 if dtype == jnp.float64 else _MAP_TOL_FLOAT32
    u, values, nonfinite = jax.vmap(lambda u0: _minimize(objective, u0, "lbfgs", steps, tol=tol))(
        starts
    )
    values = jnp.where(jnp.isfinite(values), values, jnp.inf)
    best = jnp.argmin(values)
    params, c = unpack(u[best])
    return params, c, GPFitInfo(values[best], jnp.sum(nonfinite))
