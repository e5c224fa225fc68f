"""The Bayesian-optimization loop: Sobol design, a surrogate, multi-start acquisition, best so far.

Observations are padded to ``num_init + num_iters`` rows with a mask, so each surrogate's
proposal step (fit + acquisition maximization) is one compiled program for the whole run, shared
by every run of the same sizes and configuration. The objective is *minimized*; the surrogates
maximize its negative.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab._src import validation
from jaxlab._src.experiments import NullProgress
from jaxlab.bo._acquisition import (
    check_bounds,
    expected_improvement,
    log_expected_improvement,
    maximize_acquisition,
    sobol_points,
    upper_confidence_bound,
)
from jaxlab.bo._gp import GPParams, fit_gp, fit_sgp_botorch, gp_posterior
from jaxlab.bo._mixture import (
    mixture_expected_improvement,
    mixture_log_expected_improvement,
    mixture_posterior,
    mixture_predict,
    mixture_ucb,
)
from jaxlab.bo._priors import concentration_schedule
from jaxlab.bo._rambo import RamboConfig, rambo_fit, standardize

__all__ = ["AcquisitionConfig", "BOResult", "RamboConfig", "bayes_opt"]

SURROGATES = ("rambo", "sgp", "sgp_botorch", "random")
ACQUISITIONS = ("ei", "log_ei", "ucb")


@dataclasses.dataclass(frozen=True)
class AcquisitionConfig:
    """Acquisition and its optimizer: ``kind`` ``"ei"`` (mixture EI for RAMBO), ``"log_ei"``
    (:func:`jaxlab.bo.log_expected_improvement`; for RAMBO the log of the mixture EI,
    :func:`jaxlab.bo.mixture_log_expected_improvement`) or ``"ucb"`` (mixture
    UCB, inferred; plain UCB for one GP), ``xi`` (EI margin, objective units), ``beta`` (UCB),
    and :func:`jaxlab.bo.maximize_acquisition`'s settings. ``bayes_opt(surrogate="sgp_botorch")``
    defaults to ``AcquisitionConfig(kind="log_ei", xi=0.0)``, BoTorch's LogEI.

    Examples:
      >>> AcquisitionConfig(kind="ucb", beta=3.0).num_candidates
      2048
    """

    kind: str = "ei"
    xi: float = 0.1
    beta: float = 2.0
    num_candidates: int = 2048
    num_starts: int = 5
    adam_steps: int = 25
    adam_learning_rate: float = 0.05
    lbfgs_steps: int = 60

    def __post_init__(self):
        validation.check_choice(self.kind, "kind", ACQUISITIONS)
        validation.check_real(self.xi, "xi")
        validation.check_real(self.beta, "beta", minimum=0.0)
        m = validation.check_positive_int(self.num_candidates, "num_candidates")
        validation.check_int(self.num_starts, "num_starts", minimum=1, maximum=m)
        validation.check_int(self.adam_steps, "adam_steps", minimum=0)
        validation.check_learning_rate(self.adam_learning_rate, "adam_learning_rate")
        validation.check_int(self.lbfgs_steps, "lbfgs_steps", minimum=0)


class BOResult(NamedTuple):
    """A finished run (NumPy arrays).

    Attributes:
      x: ``(n, d)`` evaluated points, initial design first.
      y: ``(n,)`` objective values.
      best_so_far: ``(n,)`` running minimum of ``y``.
      num_clusters: ``(num_iters,)`` RAMBO's active regimes after each fit (1 for ``"sgp"``,
        0 for ``"random"``).
      seconds: ``(num_iters,)`` wall time of each iteration (proposal and evaluation).
      nonfinite: fits and acquisition evaluations that met a NaN or infinite value (reported by
        the surrogate; the loop never absorbs a non-finite observation: it raises).

    Examples:
      >>> BOResult._fields[:3]
      ('x', 'y', 'best_so_far')
    """

    x: np.ndarray
    y: np.ndarray
    best_so_far: np.ndarray
    num_clusters: np.ndarray
    seconds: np.ndarray
    nonfinite: int


def _acquire(acq: AcquisitionConfig, score, bounds, candidates):
    return maximize_acquisition(
        score,
        bounds,
        candidates,
        num_starts=acq.num_starts,
        adam_steps=acq.adam_steps,
        adam_learning_rate=acq.adam_learning_rate,
        lbfgs_steps=acq.lbfgs_steps,
    )


@functools.cache
def _rambo_step(cfg: RamboConfig, acq: AcquisitionConfig):
    def step(key, x, value, mask, bounds, candidates, alpha):
        state, info = rambo_fit(key, x, value, mask, cfg, alpha=alpha)
        post = mixture_posterior(state, x, value, mask, jitter=cfg.jitter)
        best = jnp.max(jnp.where(mask, value, -jnp.inf))

        def score(z):
            pred = mixture_predict(post, z[None])
            if acq.kind == "ei":
                return mixture_expected_improvement(pred, best, xi=acq.xi)[0]
            if acq.kind == "log_ei":
                return mixture_log_expected_improvement(pred, best, xi=acq.xi)[0]
            return mixture_ucb(pred, beta=acq.beta)[0]

        x_next, ainfo = _acquire(acq, score, bounds, candidates)
        return x_next, info.num_clusters[-1], info.nonfinite + ainfo.nonfinite

    return jax.jit(step)


def _single_gp_score(acq: AcquisitionConfig, mean, std, best):
    if acq.kind == "ei":
        return expected_improvement(mean, std, best, xi=acq.xi)
    if acq.kind == "log_ei":
        return log_expected_improvement(mean, std, best, xi=acq.xi)
    return upper_confidence_bound(mean, std, beta=acq.beta)


@functools.cache
def _sgp_step(gp_steps: int, acq: AcquisitionConfig):
    def step(key, x, value, mask, bounds, candidates, alpha):
        del key, alpha
        xs, ys, stats = standardize(x, value, mask)
        d = x.shape[-1]
        init = GPParams(jnp.array(1.0, x.dtype), jnp.ones(d, x.dtype), jnp.array(0.1, x.dtype))
        params, info = fit_gp(xs, ys, mask, init=init, method="lbfgs", steps=gp_steps)
        post = gp_posterior(xs, ys, params, mask)
        best = jnp.max(jnp.where(mask, value, -jnp.inf))

        def score(z):
            mean, var = post.predict(((z - stats.x_mean) / stats.x_std)[None])
            mean = mean[0] * stats.y_std + stats.y_mean
            std = jnp.sqrt(var[0]) * stats.y_std  # noise-free σ, as the released baseline
            return _single_gp_score(acq, mean, std, best)

        x_next, ainfo = _acquire(acq, score, bounds, candidates)
        return x_next, jnp.ones([], jnp.int32), info.nonfinite + ainfo.nonfinite

    return jax.jit(step)


@functools.cache
def _sgp_botorch_step(gp_steps: int, gp_restarts: int, acq: AcquisitionConfig):
    def step(key, x, value, mask, bounds, candidates, alpha):
        del alpha
        # BoTorch's transforms: Normalize (inputs to the unit cube of the box) and Standardize
        # (outcomes to mean 0 and unit sample standard deviation, n - 1 in the denominator)
        low, width = bounds[:, 0], bounds[:, 1] - bounds[:, 0]
        xs = jnp.where(mask[:, None], (x - low[None]) / width[None], 0.0)
        count = jnp.sum(mask).astype(x.dtype)
        y_mean = jnp.sum(jnp.where(mask, value, 0.0)) / count
        spread = jnp.sum(jnp.where(mask, (value - y_mean) ** 2, 0.0)) / jnp.maximum(count - 1, 1)
        y_std = jnp.where(spread > 0, jnp.sqrt(spread), 1.0)
        ys = jnp.where(mask, (value - y_mean) / y_std, 0.0)
        params, c, info = fit_sgp_botorch(
            key, xs, ys, mask, num_restarts=gp_restarts, steps=gp_steps
        )
        post = gp_posterior(xs, ys - c, params, mask)
        best = jnp.max(jnp.where(mask, value, -jnp.inf))

        def score(z):
            mean, var = post.predict(((z - low) / width)[None])
            mean = (mean[0] + c) * y_std + y_mean
            std = jnp.sqrt(var[0]) * y_std  # the latent σ, as BoTorch's analytic acquisitions
            return _single_gp_score(acq, mean, std, best)

        x_next, ainfo = _acquire(acq, score, bounds, candidates)
        return x_next, jnp.ones([], jnp.int32), info.nonfinite + ainfo.nonfinite

    return jax.jit(step)


def _evaluate(objective, point: np.ndarray) -> float:
    value = np.asarray(objective(point), dtype=np.float64)
    if value.shape != ():
        raise ValueError(f"objective must return a scalar, got shape {value.shape}")
    if not np.isfinite(value):
        raise ValueError(
            f"objective returned a non-finite observation {float(value)} at x={point.tolist()}"
        )
    return float(value)


def bayes_opt(
    rng_key,
    objective: Callable[[Any], Any],
    bounds,
    *,
    surrogate: str = "rambo",
    num_init: int = 10,
    num_iters: int = 40,
    rambo: RamboConfig | None = None,
    acquisition: AcquisitionConfig | None = None,
    gp_steps: int = 50,
    gp_restarts: int = 4,
    progress=None,
) -> BOResult:
    """Minimizes ``objective`` over the box ``bounds`` by Bayesian optimization.

    ``num_init`` scrambled-Sobol points, then ``num_iters`` proposals, each from a surrogate
    fit to every observation so far:

    * ``"rambo"``: :func:`jaxlab.bo.rambo_fit` (Dirichlet-process mixture of GPs) and mixture EI
      (or mixture UCB), the concentration set by ``rambo.schedule`` before each fit;
    * ``"sgp"``: one ARD-RBF GP (L-BFGS type-II ML, ``gp_steps`` iterations from ``σ_f² = 1``,
      ``ℓ = 1``, ``σ_n² = 1e-2``, the released baseline) and EI with the noise-free σ;
    * ``"sgp_botorch"``: one GP with BoTorch's ``SingleTaskGP`` defaults (inputs scaled to the
      unit cube of ``bounds``, standardized outcomes, constant mean, dimension-scaled log-normal
      lengthscale prior, log-normal noise prior, ``σ_n² >= 1e-4``), fit by
      :func:`jaxlab.bo.fit_sgp_botorch` (type-II MAP, ``gp_restarts`` L-BFGS starts of
      ``gp_steps`` iterations), and by default LogEI with ``ξ = 0`` (BoTorch's
      ``LogExpectedImprovement``);
    * ``"random"``: uniform points (the floor every model-based method must beat).

    Each acquisition is maximized by :func:`jaxlab.bo.maximize_acquisition` from a fresh Sobol
    pool. Same key, same run.

    Args:
      rng_key: a ``jax.random`` key.
      objective: ``(d,) NumPy array -> scalar`` to minimize (evaluated on the host, one point at
        a time; it may be any Python callable).
      bounds: ``(d, 2)`` box with ``lower < upper``.
      surrogate: ``"rambo"``, ``"sgp"``, ``"sgp_botorch"`` or ``"random"``.
      num_init: initial design size ``>= 1``.
      num_iters: proposals ``>= 0``.
      rambo: :class:`RamboConfig` (default ``RamboConfig()``).
      acquisition: :class:`AcquisitionConfig` (default ``AcquisitionConfig()``; for
        ``"sgp_botorch"``, ``AcquisitionConfig(kind="log_ei", xi=0.0)``).
      gp_steps: L-BFGS iterations of the single-GP fit (per start).
      gp_restarts: starts of the ``"sgp_botorch"`` fit (``"sgp"`` uses one).
      progress: optional progress reporter with ``track(iterable, total, description)`` (the
        experiment runner's; the CLI shows it as a bar).

    Returns:
      A :class:`BOResult`.

    Raises:
      ValueError: bad bounds, ``num_init < 1`` (zero initial points), an unknown surrogate,
        or a non-finite observation from ``objective``.
      TypeError: a non-callable ``objective``, configurations of the wrong type, or a
        ``progress`` without a ``track`` method.

    Examples:
      >>> import jax
      >>> from jaxlab.bo import bo_problem
      >>> problem = bo_problem("two_regime")
      >>> fast = AcquisitionConfig(num_candidates=64, num_starts=2, adam_steps=2, lbfgs_steps=2)
      >>> with jax.enable_x64(True):  # float64 GP maths, scoped
      ...     result = bayes_opt(jax.random.key(0), problem.objective, problem.bounds,
      ...                        surrogate="sgp", num_init=4, num_iters=3, acquisition=fast,
      ...                        gp_steps=5)
      >>> result.x.shape, bool(result.best_so_far[-1] <= result.best_so_far[0])
      ((7, 2), True)
    """
    validation.check_key(rng_key)
    validation.check_callable(objective, "objective", signature="objective(x) -> scalar")
    box = check_bounds(bounds)
    validation.check_choice(surrogate, "surrogate", SURROGATES)
    num_init = validation.check_int(num_init, "num_init", minimum=1)
    num_iters = validation.check_int(num_iters, "num_iters", minimum=0)
    gp_steps = validation.check_positive_int(gp_steps, "gp_steps")
    gp_restarts = validation.check_positive_int(gp_restarts, "gp_restarts")
    validation.check_progress(progress)
    rambo = RamboConfig() if rambo is None else rambo
    if acquisition is None:
        botorch = surrogate == "sgp_botorch"
        acquisition = AcquisitionConfig(kind="log_ei", xi=0.0) if botorch else AcquisitionConfig()
    for value, cls, name in (
        (rambo, RamboConfig, "rambo"),
        (acquisition, AcquisitionConfig, "acquisition"),
    ):
        if not isinstance(value, cls):
            raise TypeError(f"{name} must be a {cls.__name__}, got {type(value).__name__}")
    schedule = concentration_schedule(
        rambo.schedule,
        alpha0=rambo.alpha0,
        alpha_start=rambo.alpha_start,
        alpha_end=rambo.alpha_end,
        total=max(num_iters, 2),
    )
    progress = NullProgress() if progress is None else progress
    d, n_max = box.shape[0], num_init + num_iters
    dtype = jnp.zeros(0).dtype
    init_key, loop_key = jax.random.split(rng_key)
    x = np.zeros((n_max, d))
    y = np.zeros(n_max)
    x[:num_init] = sobol_points(init_key, num_init, box)
    for i in range(num_init):
        y[i] = _evaluate(objective, x[i])
    clusters = np.zeros(num_iters, np.int64)
    seconds = np.zeros(num_iters)
    nonfinite = 0
    step = {
        "rambo": lambda: _rambo_step(rambo, acquisition),
        "sgp": lambda: _sgp_step(gp_steps, acquisition),
        "sgp_botorch": lambda: _sgp_botorch_step(gp_steps, gp_restarts, acquisition),
        "random": lambda: None,
    }[surrogate]()
    bounds_j = jnp.asarray(box, dtype)
    iterations = progress.track(range(num_iters), total=num_iters, description=f"BO ({surrogate})")
    for t in iterations:
        start = time.perf_counter()
        n = num_init + t
        k_fit, k_cand = jax.random.split(jax.random.fold_in(loop_key, t))
        if step is None:
            unit = np.asarray(jax.random.uniform(k_cand, (d,)), np.float64)
            x_next = box[:, 0] + (box[:, 1] - box[:, 0]) * unit
        else:
            candidates = jnp.asarray(sobol_points(k_cand, acquisition.num_candidates, box), dtype)
            mask = jnp.arange(n_max) < n
            out = step(
                k_fit,
                jnp.asarray(x, dtype),
                jnp.asarray(-y, dtype),  # the surrogates maximize
                mask,
                bounds_j,
                candidates,
                jnp.asarray(schedule(t + 1), dtype),
            )
            x_next, k, bad = jax.device_get(out)
            x_next = np.clip(np.asarray(x_next, np.float64), box[:, 0], box[:, 1])
            clusters[t], nonfinite = int(k), nonfinite + int(bad)
        x[n] = x_next
        y[n] = _evaluate(objective, x_next)
        seconds[t] = time.perf_counter() - start
    return BOResult(x, y, np.minimum.accumulate(y), clusters, seconds, nonfinite)
