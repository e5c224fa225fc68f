"""Acquisition functions (EI, UCB) and their multi-start maximization over a box.

All acquisitions *maximize*: a loop that minimizes an objective negates it first (see
:func:`jaxlab.bo.bayes_opt`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from scipy.stats import qmc

from jaxlab._src import validation

__all__ = [
    "AcquisitionInfo",
    "check_bounds",
    "expected_improvement",
    "log_expected_improvement",
    "maximize_acquisition",
    "sobol_points",
    "upper_confidence_bound",
]


def check_bounds(bounds, name: str = "bounds") -> np.ndarray:
    """A concrete ``(d, 2)`` box of finite ``[lower, upper]`` rows with ``lower < upper``.

    Examples:
      >>> check_bounds([[0.0, 1.0], [-2.0, 2.0]]).shape
      (2, 2)
      >>> check_bounds([[1.0, 0.0]])
      Traceback (most recent call last):
      ...
      ValueError: bounds must have lower < upper in every row, got [[1.0, 0.0]]
    """
    array = validation.check_real_array(bounds, name)
    if array is None:
        raise TypeError(f"{name} must be concrete (a box fixed before the loop), got a tracer")
    if array.ndim != 2 or array.shape[1] != 2 or array.shape[0] < 1:
        raise ValueError(f"{name} must have shape (d, 2) with d >= 1, got {array.shape}")
    if not np.all(array[:, 0] < array[:, 1]):
        raise ValueError(f"{name} must have lower < upper in every row, got {array.tolist()}")
    return array


def expected_improvement(mean, std, best, *, xi=0.1) -> jax.Array:
    """Expected improvement over ``best`` for maximization: ``s [γ Φ(γ) + φ(γ)]``.

    ``γ = (μ - best - ξ)/s``; where ``s = 0`` it is ``max(μ - best - ξ, 0)``.

    Args:
      mean: posterior mean ``μ`` (any shape).
      std: posterior standard deviation ``s >= 0`` (same shape).
      best: the incumbent ``f*``.
      xi: exploration margin ``ξ`` in the objective's units.

    Examples:
      >>> round(float(expected_improvement(1.0, 0.5, 0.8, xi=0.1)), 6)  # RAMBO note, check 5
      0.253447
    """
    validation.check_broadcastable({"mean": mean, "std": std, "best": best})
    validation.check_real_array(mean, "mean")
    validation.check_real_array(best, "best")
    validation.check_real_array(std, "std", minimum=0.0)
    validation.check_real(xi, "xi")
    mean, std = jnp.asarray(mean), jnp.asarray(std)
    mean = mean.astype(jnp.result_type(mean, jnp.float32))
    std = std.astype(mean.dtype)
    gain = mean - best - xi
    safe = jnp.where(std > 0, std, 1.0)
    gamma = gain / safe
    ei = safe * (gamma * jax.scipy.stats.norm.cdf(gamma) + jax.scipy.stats.norm.pdf(gamma))
    return jnp.where(std > 0, ei, jnp.maximum(gain, 0.0))


# Below z = -1 the sum φ(z) + z Φ(z) cancels; it is rewritten there as
# log φ(z) + log(1 - t R(t)), t = -z, with Mills' ratio R(t) = Φ(-t)/φ(t) = √(π/2) erfcx(t/√2).
_LOG_EI_SPLIT = -1.0
# Beyond t = these values even the erfcx form loses the small 1 - t R(t) ≈ 1/t² (its log carries
# an absolute error of about eps log t against a value of about 1/t²), so the asymptotic series
# 1 - t R(t) = Σ_k (-1)^(k+1) (2k-1)!!/t^(2k) takes over; with five terms its relative error
# 10395/t^10 is below the erfcx form's eps t² log t from these points on.
_LOG_EI_ASYMPTOTIC = {"float32": 8.0, "float64": 40.0}
_DOUBLE_FACTORIALS = (1.0, 3.0, 15.0, 105.0, 945.0)


def _log_h(z):
    """``log(φ(z) + z Φ(z))``, accurate for every finite ``z`` (see the constants above)."""
    dtype = z.dtype
    split = jnp.asarray(_LOG_EI_SPLIT, dtype)
    switch = jnp.asarray(_LOG_EI_ASYMPTOTIC.get(jnp.dtype(dtype).name, 8.0), dtype)
    norm = jax.scipy.stats.norm
    # z >= -1: the direct form (the inner where keeps the other branches' gradients finite)
    z_up = jnp.where(z >= split, z, split)
    upper = jnp.log(norm.pdf(z_up) + z_up * norm.cdf(z_up))
    t = jnp.where(z < split, -z, 1.0)
    log_phi = -0.5 * t * t - 0.5 * jnp.log(2.0 * jnp.pi).astype(dtype)
    # -1 > z > -switch: log(1 - t R(t)) via erfcx
    t_mid = jnp.minimum(t, switch)
    log_tr = jnp.log(t_mid) + jnp.log(jax.scipy.special.erfcx(t_mid / jnp.sqrt(2.0).astype(dtype)))
    log_tr = log_tr + 0.5 * jnp.log(jnp.pi / 2.0).astype(dtype)
    middle = jnp.log(-jnp.expm1(jnp.minimum(log_tr, 0.0)))
    # z <= -switch: -2 log t + log(1 - 3/t² + 15/t⁴ - 105/t⁶ + 945/t⁸)
    t_far = jnp.maximum(t, switch)
    inv2 = 1.0 / (t_far * t_far)
    series = sum((-1.0) ** k * c * inv2**k for k, c in enumerate(_DOUBLE_FACTORIALS))
    far = -2.0 * jnp.log(t_far) + jnp.log(series)
    lower = log_phi + jnp.where(t < switch, middle, far)
    return jnp.where(z >= split, upper, lower)


def log_expected_improvement(mean, std, best, *, xi=0.0) -> jax.Array:
    """``log EI``: the logarithm of :func:`expected_improvement`, accurate far in the tail.

    ``log EI = log s + log h(γ)`` with ``h(γ) = φ(γ) + γ Φ(γ)`` and ``γ = (μ - best - ξ)/s``.
    Where EI underflows (``γ`` below about -13 in float32, -38 in float64) ``log EI`` stays
    finite, with useful gradients: for ``γ < -1``, ``log h = log φ(γ) + log(1 - t R(t))``
    (``t = -γ``, Mills' ratio ``R(t) = √(π/2) erfcx(t/√2)``), and for large ``t`` the
    asymptotic series ``1 - t R(t) = 1/t² - 3/t⁴ + 15/t⁶ - ...``. Where ``s = 0`` it is
    ``log max(μ - best - ξ, 0)`` (``-inf`` when there is no improvement). This is BoTorch's
    ``LogExpectedImprovement`` (Ament et al., 2023), here for maximization with a margin ``ξ``
    (default ``0``, as BoTorch's).

    Args:
      mean: posterior mean ``μ`` (any shape).
      std: posterior standard deviation ``s >= 0`` (same shape).
      best: the incumbent ``f*``.
      xi: exploration margin ``ξ`` in the objective's units.

    Returns:
      ``log EI``, in the dtype of ``mean`` (at least float32).

    Examples:
      >>> import math
      >>> ei = float(expected_improvement(1.0, 0.5, 0.8, xi=0.1))
      >>> abs(float(log_expected_improvement(1.0, 0.5, 0.8, xi=0.1)) - math.log(ei)) < 1e-6
      True
      >>> round(float(log_expected_improvement(-30.0, 1.0, 0.0)), 2)  # EI = 2e-199: 0 in float32
      -457.72

    References:
      S. Ament, S. Daulton, D. Eriksson, M. Balandat, E. Bakshy, *Unexpected Improvements to
      Expected Improvement for Bayesian Optimization*, NeurIPS 2023.
    """
    validation.check_broadcastable({"mean": mean, "std": std, "best": best})
    validation.check_real_array(mean, "mean")
    validation.check_real_array(best, "best")
    validation.check_real_array(std, "std", minimum=0.0)
    validation.check_real(xi, "xi")
    mean, std = jnp.asarray(mean), jnp.asarray(std)
    mean = mean.astype(jnp.result_type(mean, jnp.float32))
    std = std.astype(mean.dtype)
    gain = mean - best - xi
    positive = std > 0
    safe = jnp.where(positive, std, 1.0)
    value = jnp.log(safe) + _log_h(gain / safe)
    # s = 0: log max(gain, 0); the inner where keeps log(0)'s infinite gradient out of s > 0
    exact = jnp.log(jnp.maximum(jnp.where(positive, 1.0, gain), 0.0))
    return jnp.where(positive, value, exact)


def upper_confidence_bound(mean, std, *, beta=2.0) -> jax.Array:
    """``μ + β s`` (maximization).

    Examples:
      >>> float(upper_confidence_bound(1.0, 0.5, beta=2.0))
      2.0
    """
    validation.check_broadcastable({"mean": mean, "std": std})
    validation.check_real_array(std, "std", minimum=0.0)
    validation.check_real(beta, "beta", minimum=0.0)
    return jnp.asarray(mean) + beta * jnp.asarray(std)


def sobol_points(rng_key, num_points: int, bounds) -> np.ndarray:
    """``num_points`` scrambled Sobol points in the box ``bounds`` (SciPy's ``qmc.Sobol``).

    The scrambling seed is drawn from ``rng_key``, so the same key gives the same points. The
    first ``num_points`` of a power-of-two block are returned (Sobol's balance holds for the
    block; SciPy warns on other sizes, so the block is drawn whole).

    Examples:
      >>> import jax
      >>> pts = sobol_points(jax.random.key(0), 10, [[0.0, 1.0], [-1.0, 1.0]])
      >>> pts.shape, bool((pts[:, 1] >= -1).all() and (pts[:, 1] <= 1).all())
      ((10, 2), True)
    """
    validation.check_key(rng_key)
    num_points = validation.check_positive_int(num_points, "num_points")
    box = check_bounds(bounds)
    seed = int(jax.random.randint(rng_key, (), 0, np.iinfo(np.int32).max))
    sampler = qmc.Sobol(box.shape[0], scramble=True, seed=seed)
    unit = sampler.random_base2(max(int(np.ceil(np.log2(num_points))), 0))[:num_points]
    return box[:, 0] + (box[:, 1] - box[:, 0]) * unit


class AcquisitionInfo(NamedTuple):
    """What :func:`maximize_acquisition` reports: the value at the returned point, the best
    candidate's value before refinement, and ``nonfinite``, the number of candidates and
    refined starts whose acquisition was NaN or infinite (skipped).

    Examples:
      >>> AcquisitionInfo._fields
      ('value', 'candidate_value', 'nonfinite')
    """

    value: jax.Array
    candidate_value: jax.Array
    nonfinite: jax.Array


def _masked(values):
    return jnp.where(jnp.isnan(values), -jnp.inf, values)


def maximize_acquisition(
    acquisition: Callable[[jax.Array], jax.Array],
    bounds,
    candidates,
    *,
    num_starts: int = 5,
    adam_steps: int = 25,
    adam_learning_rate=0.05,
    lbfgs_steps: int = 60,
) -> tuple[jax.Array, AcquisitionInfo]:
    """Multi-start maximization of ``acquisition`` over the box: candidates, Adam, then L-BFGS.

    The best ``num_starts`` of ``candidates`` (e.g. :func:`sobol_points`) are refined in the
    unconstrained coordinates ``u`` with ``x = lower + (upper - lower) sigmoid(u)``: ``adam_steps``
    Adam steps, then ``lbfgs_steps`` iterations of ``optax.lbfgs``, all starts vmapped. The
    best endpoint is returned (or the best candidate, if refinement did not improve on it).
    Jittable (``bounds`` and ``candidates`` may be traced; the step counts are static).

    Args:
      acquisition: ``(d,) -> scalar`` to maximize.
      bounds: ``(d, 2)`` box.
      candidates: ``(m, d)`` starting pool inside the box, ``m >= num_starts``.
      num_starts: refined starts.
      adam_steps: Adam iterations per start (``>= 0``).
      adam_learning_rate: Adam's step size in ``u`` (traceable).
      lbfgs_steps: L-BFGS iterations per start (``>= 0``).

    Returns:
      ``(x, AcquisitionInfo)``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> box = jnp.array([[-1.0, 1.0], [-1.0, 1.0]])
      >>> pts = jnp.asarray(sobol_points(jax.random.key(0), 64, box))
      >>> x, info = maximize_acquisition(lambda z: -jnp.sum((z - 0.3) ** 2), box, pts)
      >>> [round(float(v), 3) for v in x]
      [0.3, 0.3]
    """
    if validation.is_concrete(bounds):
        check_bounds(bounds)
    candidates = validation.check_array(candidates, "candidates", kind="floating", ndim=2)
    bounds = jnp.asarray(bounds, candidates.dtype)
    validation.check_last_axis(candidates, bounds.shape[0], "candidates", "the box's dimension")
    num_starts = validation.check_positive_int(num_starts, "num_starts")
    if candidates.shape[0] < num_starts:
        raise ValueError(
            f"candidates must have at least num_starts={num_starts} rows, got {candidates.shape[0]}"
        )
    adam_steps = validation.check_int(adam_steps, "adam_steps", minimum=0)
    lbfgs_steps = validation.check_int(lbfgs_steps, "lbfgs_steps", minimum=0)
    validation.check_learning_rate(adam_learning_rate, "adam_learning_rate")
    validation.check_scalar_callback(acquisition, "acquisition", candidates[0])
    low, width = bounds[:, 0], bounds[:, 1] - bounds[:, 0]

    def to_x(u):
        return low + width * jax.nn.sigmoid(u)

    def loss(u):
        return -acquisition(to_x(u))

    values = jax.vmap(acquisition)(candidates)
    bad = jnp.sum(~jnp.isfinite(values))
    values = _masked(values)
    start_values, idx = jax.lax.top_k(values, num_starts)
    eps = jnp.asarray(1e-4, candidates.dtype)
    unit = jnp.clip((candidates[idx] - low[None]) / width[None], eps, 1.0 - eps)
    u0 = jnp.log(unit) - jnp.log1p(-unit)

    def refine(u):
        adam = optax.adam(adam_learning_rate)

        def adam_body(_, carry):
            u, state = carry
            grad = jax.grad(loss)(u)
            grad = jnp.where(jnp.isfinite(grad), grad, 0.0)
            updates, state = adam.update(grad, state, u)
            return optax.apply_updates(u, updates), state

        u, _ = jax.lax.fori_loop(0, adam_steps, adam_body, (u, adam.init(u)))
        lbfgs = optax.lbfgs()
        value_and_grad = optax.value_and_grad_from_state(loss)

        def lbfgs_body(_, carry):
            u, state = carry
            value, grad = value_and_grad(u, state=state)
            updates, new_state = lbfgs.update(grad, state, u, value=value, grad=grad, value_fn=loss)
            new_u = optax.apply_updates(u, updates)
            ok = jnp.all(jnp.isfinite(new_u)) & jnp.isfinite(value)
            return jnp.where(ok, new_u, u), jax.tree.map(
                lambda a, b: jnp.where(ok, a, b), new_state, state
            )

        u, _ = jax.lax.fori_loop(0, lbfgs_steps, lbfgs_body, (u, lbfgs.init(u)))
        return u

    refined = jax.vmap(refine)(u0)
    refined_x = jax.vmap(to_x)(refined)
    refined_values = jax.vmap(acquisition)(refined_x)
    bad = bad + jnp.sum(~jnp.isfinite(refined_values))
    refined_values = _masked(refined_values)
    best = jnp.argmax(refined_values)
    use_refined = refined_values[best] >= start_values[0]
    x = jnp.where(use_refined, refined_x[best], candidates[idx[0]])
    value = jnp.where(use_refined, refined_values[best], start_values[0])
    return x, AcquisitionInfo(value, start_values[0], bad.astype(jnp.int32))
