"""RAMBO: a Dirichlet-process mixture of GPs fit by collapsed Gibbs sampling (the model and sweep).

Zhang, Liu, Chen, Ranftl, Liu, Li, *Regime-Adaptive Bayesian Optimization via Dirichlet Process
Mixtures of Gaussian Processes*, ICML 2026, arXiv:2601.20043.

Model, on standardized data (``x`` per dimension, ``y`` to zero mean and unit spread over the
unmasked rows). Assignments ``z_i ~ CRP(α)``; regime ``k`` is a zero-mean GP with isotropic RBF
kernel ``σ_{f,k}² exp(-‖x - x'‖²/(2ℓ_k²))`` and noise ``σ_{n,k}²`` (plus a ``1e-6`` jitter);
latent functions are integrated out. Priors on the standard deviations and the lengthscale
themselves: ``σ_f ~ IG(3, 2)``, ``ℓ ~ IG(3, 1.5)``, ``σ_n ~ IG(3, 0.3)``.

Collapsed Gibbs sweep (points in a random order; ``n`` the number of observations):

* existing regime ``k`` with ``n_k^{-i} > 0`` members besides ``i``:
  ``log p_k = log(n_k^{-i}/(n - 1 + α)) + log N(y_i; μ_k^{-i}(x_i), v_k^{-i}(x_i) + σ_{n,k}²)``;
* a new regime: ``log p_new = log(α/(n - 1 + α)) + log[(1/S) Σ_s N(y_i; 0, σ_{f,s}² + σ_{n,s}²)]``
  over ``S = 5`` prior draws; if chosen, the new regime keeps the draw under which ``y_i`` is
  most likely;
* ``z_i ~ softmax(log p)``.

Every ``hyper_update_every`` sweeps each regime's ``(σ_f, ℓ, σ_n)`` moves to its MAP (log
marginal likelihood plus the log priors, evaluated on the parameters without a log-Jacobian, as
the released code does; 30 Adam steps of size 0.01 on the log-parameters).

Implementation: a fixed number of regime slots ``max_clusters`` with an ``active`` mask and
observations padded to a fixed length with a row mask, so a sweep is one compiled program for
any number of observations. Each slot keeps the inverse ``A_k = M_k⁻¹`` of its masked
covariance (see :mod:`jaxlab.bo._gp`). Removing ``i`` from its regime is the leave-one-out
identity ``A ← A - A e_i e_iᵀ A / A_ii`` (whose predictive is ``μ_{-i} = y_i - (Ay)_i/A_ii``,
``Var(y_i | rest) = 1/A_ii``); scoring every slot is then ``μ_k = bᵀA_k y``,
``s_k = c_k - bᵀ A_k b`` with ``b`` the kernel column to ``k``'s members, vmapped over slots;
adding ``i`` to the chosen regime is the matching rank-one (Schur-complement) update. A sweep
costs ``O(K n²)`` per point instead of refitting each regime (``O(K n³)``), and every sweep starts
from inverses recomputed by Cholesky, so rounding does not accumulate across sweeps.

The released code's quirks and what this module does (``variant``):

1. its Gibbs likelihood uses the latent variance, dropping ``σ_{n,k}²``: ``"textbook"`` (the
   default) adds it, ``"reference"`` reproduces the code;
2. its new-regime predictive uses the standard deviation ``σ_f + σ_n`` instead of
   ``√(σ_f² + σ_n²)``: fixed in ``"textbook"``, kept in ``"reference"``;
3. prediction uses the final Gibbs state only (the post-burn-in samples are not averaged): kept,
   as the method is published; ``burn_in`` only decides which sweeps the reported mean number
   of regimes averages;
4. empty regimes are dropped by deactivating their slot (slot ids are stable; nothing is
   relabelled), and a new regime is refused when every slot is in use.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxlab._src import validation
from jaxlab._src.sampling import SamplingAlgorithm
from jaxlab.bo._data import GPData
from jaxlab.bo._gp import (
    DEFAULT_JITTER,
    GPParams,
    log_marginal_unchecked,
    standardize,
)
from jaxlab.bo._priors import PRIORS, _sample_prior, concentration_schedule, rambo_log_prior

__all__ = [
    "RamboConfig",
    "RamboFitInfo",
    "RamboInfo",
    "RamboState",
    "SplitMergeInfo",
    "SplitMergeRandomness",
    "SweepInfo",
    "SweepRandomness",
    "rambo",
    "rambo_fit",
    "rambo_init",
    "rambo_split_merge",
    "rambo_sweep",
    "split_merge_randomness",
    "sweep_randomness",
]

_VARIANTS = ("textbook", "reference")
_PROPOSALS = ("prior", "fitted")


@dataclasses.dataclass(frozen=True)
class RamboConfig:
    """RAMBO's sampler and concentration settings, checked once (defaults: the note's quick
    profile; the paper's scale is ``num_sweeps=1000, burn_in=500``).

    Attributes:
      num_sweeps: Gibbs sweeps per fit (``>= 1``); burn_in: ``0 <= burn_in < num_sweeps``, the
        sweeps :class:`RamboFitInfo`'s averages leave out.
      hyper_update_every: sweeps between MAP refits of each regime's ``(σ_f, ℓ, σ_n)``
        (``>= 1``); map_steps: Adam steps per refit (``>= 0``); map_learning_rate: their size.
      max_clusters: regime slots ``K >= 3`` (a static shape).
      variant: the sweep's likelihood, ``"textbook"`` or ``"reference"`` (the released code's).
      schedule: the concentration before each fit of a BO run, ``"constant"`` (``alpha0``),
        ``"linear"`` (``alpha_start → alpha_end`` over the run) or ``"sqrtlog"``
        (``alpha0 √t/ln(t + e)``); see :func:`jaxlab.bo.concentration_schedule`. A lone fit
        (:func:`rambo_fit`, :func:`rambo`) uses ``alpha0`` unless given ``alpha``.
      split_merge_moves: Jain-Neal split-merge moves (:func:`rambo_split_merge`) after each
        sweep (``>= 0``; 0, the released sampler, by default), each with ``restricted_scans``
        intermediate restricted Gibbs scans and ``split_merge_proposal`` (``"fitted"`` or
        ``"prior"``).
      jitter: added to every noise variance.

    Examples:
      >>> RamboConfig(num_sweeps=1000, burn_in=500, schedule="sqrtlog").alpha0
      2.0
    """

    num_sweeps: int = 40
    burn_in: int = 15
    hyper_update_every: int = 5
    map_steps: int = 30
    map_learning_rate: float = 0.01
    max_clusters: int = 8
    variant: str = "textbook"
    schedule: str = "constant"
    alpha0: float = 2.0
    alpha_start: float = 0.5
    alpha_end: float = 5.0
    # Off by default: the released sampler (the method the paper and the rambo experiment
    # compare) has no split-merge move, and a "fitted" move costs a restricted-Gibbs launch and
    # five short MAP fits (see rambo_split_merge).
    split_merge_moves: int = 0
    restricted_scans: int = 3
    split_merge_proposal: str = "fitted"
    jitter: float = DEFAULT_JITTER

    def __post_init__(self):
        n = validation.check_positive_int(self.num_sweeps, "num_sweeps")
        validation.check_int(self.burn_in, "burn_in", minimum=0, maximum=n - 1)
        validation.check_positive_int(self.hyper_update_every, "hyper_update_every")
        validation.check_int(self.map_steps, "map_steps", minimum=0)
        validation.check_learning_rate(self.map_learning_rate, "map_learning_rate")
        validation.check_int(self.max_clusters, "max_clusters", minimum=3)
        validation.check_choice(self.variant, "variant", _VARIANTS)
        for name in ("alpha0", "alpha_start", "alpha_end"):
            validation.check_real(getattr(self, name), name, minimum=0.0, include_minimum=False)
        concentration_schedule(self.schedule, total=2)  # checks the kind
        validation.check_int(self.split_merge_moves, "split_merge_moves", minimum=0)
        validation.check_int(self.restricted_scans, "restricted_scans", minimum=0)
        validation.check_choice(self.split_merge_proposal, "split_merge_proposal", _PROPOSALS)
        validation.check_nonnegative(self.jitter, "jitter")


class RamboState(NamedTuple):
    """The Gibbs sampler's state.

    Attributes:
      assignments: ``(n,)`` int32 regime slot of each row (meaningless at masked rows).
      active: ``(K,)`` bool, slots holding at least one observation.
      params: each slot's :class:`~jaxlab.bo.GPParams` ``(σ_f, ℓ, σ_n)``, fields of shape
        ``(K,)`` (``log_params``, the ``(K, 3)`` array of their logs, is deprecated).
      alpha: the CRP concentration.
      count: sweeps done.
      nonfinite: point updates or refits that met a NaN or infinite score (the point stayed in
        its regime; the refit kept the previous parameters).

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> state = rambo_init(jax.random.key(0), jnp.zeros((4, 1)), jnp.arange(4.0))
      >>> state.params.lengthscale.shape, int(state.count)
      ((8,), 0)
    """

    assignments: jax.Array
    active: jax.Array
    params: GPParams
    alpha: jax.Array
    count: jax.Array
    nonfinite: jax.Array

    @property
    def log_params(self) -> jax.Array:
        """The deprecated ``(K, 3)`` logs of ``(σ_f, ℓ, σ_n)`` (read ``state.params`` instead)."""
        warnings.warn(
            "RamboState.log_params is deprecated: read state.params (a GPParams per slot)",
            DeprecationWarning,
            stacklevel=2,
        )
        return jnp.log(_theta(self.params))


class RamboInfo(NamedTuple):
    """What one step of :func:`rambo` (a sweep, its split-merge moves, maybe a MAP refit) did.

    Attributes:
      num_clusters: active regimes after the step.
      moved: points the sweep moved to another regime.
      nonfinite: point updates that met a non-finite score in the sweep.
      split_merge_accepted: ``(2,)`` accepted splits and accepted merges in the step.

    Examples:
      >>> RamboInfo._fields
      ('num_clusters', 'moved', 'nonfinite', 'split_merge_accepted')
    """

    num_clusters: jax.Array
    moved: jax.Array
    nonfinite: jax.Array
    split_merge_accepted: jax.Array


class SweepRandomness(NamedTuple):
    """Every random number one sweep consumes: the visiting order, one uniform per point for
    the categorical draw (inverse CDF), and the new-regime prior draws ``(n, S, 3)``.

    Examples:
      >>> SweepRandomness._fields
      ('order', 'uniforms', 'prior_draws')
    """

    order: jax.Array
    uniforms: jax.Array
    prior_draws: jax.Array


class SweepInfo(NamedTuple):
    """Per-sweep report: active regimes after the sweep, points that changed regime, and
    point updates that met a non-finite score.

    Examples:
      >>> SweepInfo._fields
      ('num_clusters', 'moved', 'nonfinite')
    """

    num_clusters: jax.Array
    moved: jax.Array
    nonfinite: jax.Array


class RamboFitInfo(NamedTuple):
    """What :func:`rambo_fit` reports.

    Attributes:
      num_clusters: ``(num_sweeps,)`` active regimes after each sweep.
      mean_clusters: their mean over the sweeps after ``burn_in``.
      nonfinite: the state's non-finite count.
      co_occurrence: ``(n, n)`` posterior similarity matrix: the fraction of the sweeps after
        ``burn_in`` in which rows ``a`` and ``b`` share a regime (1 on the diagonal of an
        observation, 0 in the rows and columns of masked rows).
      split_merge_accepted: ``(2,)`` accepted splits and accepted merges over the fit.
      assignments: ``(num_sweeps, n)`` the regime slots after each sweep (the samples the
        released code stores; slot ids are stable within a fit, not across fits).

    Examples:
      >>> RamboFitInfo._fields[3:]
      ('co_occurrence', 'split_merge_accepted', 'assignments')
    """

    num_clusters: jax.Array
    mean_clusters: jax.Array
    nonfinite: jax.Array
    co_occurrence: jax.Array
    split_merge_accepted: jax.Array
    assignments: jax.Array


def _check_variant(variant):
    validation.check_choice(variant, "variant", _VARIANTS)


def _check_data(x, y, mask):
    return GPData.create(x, y, mask)


def _check_alpha(alpha):
    validation.check_real_array(alpha, "alpha", minimum=0.0, include_minimum=False)
    if np.ndim(alpha) != 0:
        raise ValueError(f"alpha must be one concentration (a scalar), got shape {np.shape(alpha)}")


def _sample_prior_fast(rng_key, shape) -> jax.Array:
    """Log ``(σ_f, ℓ, σ_n)`` drawn from the priors, ``θ = b / Gamma(a, 1)``.

    For an integer shape ``a`` (all three priors have ``a = 3``), ``Gamma(a, 1)`` is the sum of
    ``a`` Exponential(1) draws: exact, and without ``jax.random.gamma``'s rejection loops, which
    cost as much as the rest of a sweep at ``n = 20`` on a CPU.
    """
    logs = []
    for key, (a, b) in zip(jax.random.split(rng_key, 3), PRIORS, strict=True):
        if float(a).is_integer():
            g = jnp.sum(jax.random.exponential(key, (*shape, int(a))), -1)
        else:
            g = jax.random.gamma(key, a, shape)
        logs.append(math.log(b) - jnp.log(g))
    return jnp.stack(logs, axis=-1)


def _check_state(state, num_points=None, rand=None, jitter=None):
    validation.check_instance(state, RamboState, "state", "built by rambo_init")
    if num_points is None:
        return
    validation.check_nonnegative(jitter, "jitter")
    if np.shape(state.assignments) != (num_points,):
        raise ValueError(f"state must come from the same {num_points} points as x, got "
                         f"assignments of shape {np.shape(state.assignments)}")  # fmt: skip
    validation.check_indices(state.assignments, "state.assignments", np.shape(state.active)[0],
                             "max_clusters")  # fmt: skip
    if rand is not None and np.shape(rand.order) != (num_points,):
        raise ValueError(f"randomness must be drawn for the {num_points} points of x, "
                         f"got an order of shape {np.shape(rand.order)}")  # fmt: skip


def sweep_randomness(rng_key, num_points: int, num_prior_draws: int = 5) -> SweepRandomness:
    """The random numbers of one sweep (see :class:`SweepRandomness`), drawn from ``rng_key``.

    Examples:
      >>> import jax
      >>> r = sweep_randomness(jax.random.key(0), 4)
      >>> sorted(r.order.tolist()), r.prior_draws.shape
      ([0, 1, 2, 3], (4, 5, 3))
    """
    validation.check_key(rng_key)
    num_points = validation.check_int(num_points, "num_points", minimum=1)
    num_prior_draws = validation.check_int(num_prior_draws, "num_prior_draws", minimum=1)
    k1, k2, k3 = jax.random.split(rng_key, 3)
    return SweepRandomness(
        jax.random.permutation(k1, num_points).astype(jnp.int32),
        jax.random.uniform(k2, (num_points,)),
        _sample_prior_fast(k3, (num_points, num_prior_draws)),
    )


def _kmeans(rng_key, xs, mask, max_init: int = 3, iters: int = 15) -> jax.Array:
    """Lloyd's k-means from random data points, ``K₀ = max(1, min(3, ⌊n/10⌋))`` centers."""
    n = xs.shape[0]
    count = jnp.sum(mask)
    k0 = jnp.clip(count // 10, 1, max_init)
    p = mask.astype(xs.dtype) / jnp.maximum(count, 1)
    idx = jax.random.choice(rng_key, n, (max_init,), replace=False, p=p)
    used = jnp.arange(max_init) < k0

    def assign(centers):
        dist = jnp.sum((xs[:, None, :] - centers[None]) ** 2, -1)
        return jnp.argmin(jnp.where(used[None], dist, jnp.inf), axis=1)

    def body(_, centers):
        onehot = jax.nn.one_hot(assign(centers), max_init, dtype=xs.dtype) * mask[:, None]
        sizes = jnp.sum(onehot, 0)
        means = (onehot.T @ xs) / jnp.maximum(sizes, 1.0)[:, None]
        return jnp.where((sizes > 0)[:, None], means, centers)

    return assign(jax.lax.fori_loop(0, iters, body, xs[idx])).astype(jnp.int32)


def rambo_init(rng_key, x, y, mask=None, *, alpha=2.0, max_clusters: int = 8) -> RamboState:
    """The initial state of a fit: k-means regimes, hyper-parameters drawn from the priors.

    ``K₀ = max(1, min(3, ⌊n/10⌋))`` regimes by Lloyd's algorithm (15 iterations, centers
    started at random observations) on the standardized inputs; each slot's ``(σ_f, ℓ, σ_n)``
    is a prior draw.

    Args:
      rng_key: a ``jax.random`` key.
      x: ``(n, d)`` inputs (padded rows allowed; see ``mask``).
      y: ``(n,)`` observations.
      mask: optional ``(n,)`` bool of the rows that are observations.
      alpha: CRP concentration ``> 0``.
      max_clusters: regime slots ``K >= 3`` (a static shape).

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> x = jnp.linspace(0.0, 1.0, 30)[:, None]
      >>> state = rambo_init(jax.random.key(0), x, jnp.sin(6 * x[:, 0]))
      >>> int(state.active.sum())  # ⌊30/10⌋ = 3 k-means regimes
      3
    """
    validation.check_key(rng_key)
    x, y, mask = _check_data(x, y, mask)
    _check_alpha(alpha)
    max_clusters = validation.check_int(max_clusters, "max_clusters", minimum=3)
    return _init_jit(rng_key, x, y, mask, jnp.asarray(alpha, x.dtype), max_clusters=max_clusters)


@functools.partial(jax.jit, static_argnames=("max_clusters",))
def _init_jit(rng_key, x, y, mask, alpha, *, max_clusters):
    xs, _, _ = standardize(x, y, mask)
    k1, k2 = jax.random.split(rng_key)
    z = jnp.where(mask, _kmeans(k1, xs, mask), 0)
    counts = jnp.zeros(max_clusters, jnp.int32).at[z].add(mask.astype(jnp.int32))
    return RamboState(
        z,
        counts > 0,
        _to_params(jnp.exp(_sample_prior(k2, (max_clusters,)).astype(x.dtype))),
        alpha,
        jnp.zeros([], jnp.int32),
        jnp.zeros([], jnp.int32),
    )


def _unpack(theta):
    """``(σ_f, ℓ, σ_n)`` from an array with them on its last axis."""
    return theta[..., 0], theta[..., 1], theta[..., 2]


def _theta(params: GPParams) -> jax.Array:
    """The slots' parameters as one ``(K, 3)`` array ``(σ_f, ℓ, σ_n)`` (the sweep's layout)."""
    return jnp.stack([params.signal_std, params.lengthscale, params.noise_std], axis=-1)


def _to_params(theta) -> GPParams:
    return GPParams(*_unpack(theta))


def _members(z, mask, num_slots):
    return (z[None, :] == jnp.arange(num_slots)[:, None]) & mask[None, :]


def _group_inverses(sq, members, theta, jitter):
    """``A_k = M_k⁻¹`` for every group of ``members`` ``(G, n)``, by Cholesky."""
    n = sq.shape[0]
    eye = jnp.eye(n, dtype=sq.dtype)

    def one(m, th):
        sf, ls, sn = _unpack(th)
        k = sf**2 * jnp.exp(-0.5 * sq / ls**2) + (sn**2 + jitter) * eye
        mf = m.astype(sq.dtype)
        cov = mf[:, None] * mf[None, :] * k + jnp.diag(1.0 - mf)
        chol = jnp.linalg.cholesky(cov)
        return jax.scipy.linalg.cho_solve((chol, True), eye)

    return jax.vmap(one)(members, theta)


def _slot_inverses(xs, mask, z, theta, jitter):
    """``A_k = M_k⁻¹`` for every slot, by Cholesky (the start of every sweep)."""
    sq = jnp.sum((xs[:, None, :] - xs[None]) ** 2, -1)
    return _group_inverses(sq, _members(z, mask, theta.shape[0]), theta, jitter)


def _kernel_columns(sq_row, theta, members, dtype):
    """Each group's kernel column ``σ_f² exp(-d²/(2ℓ²))`` to its members (zero elsewhere)."""
    sf, ls, _ = _unpack(theta)
    col = sf[:, None] ** 2 * jnp.exp(-0.5 * sq_row[None, :] / ls[:, None] ** 2)
    return col * members.astype(dtype)


def _log_normal(y, mean, var):
    return -0.5 * (jnp.log(2.0 * jnp.pi) + jnp.log(var) + (y - mean) ** 2 / var)


def _sweep_core(xs, ys, mask, state: RamboState, rand: SweepRandomness, variant, jitter):
    n = xs.shape[0]
    theta0 = _theta(state.params)
    num_slots = theta0.shape[0]
    dtype = xs.dtype
    sq = jnp.sum((xs[:, None, :] - xs[None]) ** 2, -1)
    eye_n = jnp.eye(n, dtype=dtype)
    slots = jnp.arange(num_slots)
    rows = jnp.arange(n)
    z0 = state.assignments
    inv = _slot_inverses(xs, mask, z0, theta0, jitter)
    counts = jnp.zeros(num_slots, jnp.int32).at[z0].add(mask.astype(jnp.int32))
    total = jnp.sum(mask).astype(dtype)
    log_denom = jnp.log(total - 1.0 + state.alpha)
    log_alpha = jnp.log(state.alpha)
    textbook = variant == "textbook"
    num_draws = rand.prior_draws.shape[1]
    # Each point's new-regime option, for all points at once (it reads only the prior draws).
    draws = jnp.exp(rand.prior_draws.astype(dtype))
    dsf, _, dsn = _unpack(draws)
    new_var = dsf**2 + dsn**2 if textbook else (dsf + dsn) ** 2
    new_ll = _log_normal(ys[:, None], 0.0, new_var)  # (n, S)
    log_new_all = log_alpha - log_denom + jax.nn.logsumexp(new_ll, -1) - jnp.log(float(num_draws))
    best_draw = jnp.take_along_axis(draws, jnp.argmax(new_ll, -1)[:, None, None], 1)[:, 0]

    # Visit the observations only: the unmasked entries of the order first (relative order and
    # the pairing with the uniforms kept), then a loop over just those.
    first = jnp.argsort(~mask[rand.order], stable=True)
    order, uniforms = rand.order[first], rand.uniforms[first]

    def step(t, carry):
        z, inv, counts, theta, bad = carry
        i = order[t]
        k0 = z[i]
        e_i = eye_n[i]
        sf, ls, sn = _unpack(theta)
        member = (z[None, :] == slots[:, None]) & (mask & (rows != i))[None, :]
        # Score every slot: predictive of y_i from the slot's other members. Slots without i
        # use their inverse as it is; i's own slot uses the leave-one-out identity on its
        # inverse (which still holds i), so nothing is updated unless i moves.
        b = sf[:, None] ** 2 * jnp.exp(-0.5 * sq[i][None, :] / ls[:, None] ** 2)
        b = b * member.astype(dtype)
        ab = jnp.sum(inv * b[:, None, :], -1)  # A_k b_k (A_k symmetric)
        noisy = sf**2 + sn**2 + jitter - jnp.sum(b * ab, -1)
        mean = ab @ ys
        a_row = inv[k0, i]
        a_ii = a_row[i]
        own = slots == k0
        mean = jnp.where(own, ys[i] - a_row @ ys / a_ii, mean)
        noisy = jnp.where(own, 1.0 / a_ii, noisy)
        var = noisy if textbook else noisy - sn**2
        loglik = _log_normal(ys[i], mean, jnp.maximum(var, jitter))
        counts_rm = counts.at[k0].add(-1)
        existing = jnp.where(
            counts_rm > 0,
            jnp.log(jnp.maximum(counts_rm, 1).astype(dtype)) - log_denom + loglik,
            -jnp.inf,
        )
        free = counts_rm == 0
        logits = jnp.append(existing, jnp.where(jnp.any(free), log_new_all[i], -jnp.inf))
        finite = jnp.isfinite(logits)
        nonfinite = jnp.any(jnp.isnan(logits)) | ~jnp.any(finite)
        logits = jnp.where(finite, logits, -jnp.inf)
        probs = jnp.exp(logits - jnp.max(logits))
        cdf = jnp.cumsum(probs)
        # Inverse CDF at 1 - u (in (0, 1]): a category of probability 0 is never chosen.
        choice = jnp.minimum(jnp.sum(cdf < (1.0 - uniforms[t]) * cdf[-1]), num_slots)
        choice = jnp.where(nonfinite, k0, choice)
        is_new = choice == num_slots
        target = jnp.where(is_new, jnp.argmax(free), choice)
        draw = best_draw[i]
        theta = jnp.where(is_new, theta.at[target].set(draw), theta)

        def move(inv):
            # Remove i from k0 (the leave-one-out identity), then add it to the target (the
            # Schur-complement update, whose pieces the scoring computed: A_t b_t and
            # s = c - b_tᵀ A_t b_t; a new regime has no members, so A_t b_t = 0).
            removed = inv[k0] - jnp.outer(a_row, a_row) / a_ii + jnp.outer(e_i, e_i)
            inv = inv.at[k0].set(jnp.where(counts_rm[k0] > 0, removed, eye_n))
            dsf_t, _, dsn_t = _unpack(draw)
            schur = jnp.where(is_new, dsf_t**2 + dsn_t**2 + jitter, noisy[target])
            v = jnp.where(is_new, 0.0, ab[target]) - e_i
            added = inv[target] - jnp.outer(e_i, e_i) + jnp.outer(v, v) / jnp.maximum(schur, jitter)
            return inv.at[target].set(added)

        inv = jax.lax.cond(is_new | (target != k0), move, lambda inv: inv, inv)
        return (
            z.at[i].set(target.astype(jnp.int32)),
            inv,
            counts_rm.at[target].add(1),
            theta,
            bad + nonfinite.astype(jnp.int32),
        )

    init = (z0, inv, counts, theta0, jnp.zeros([], jnp.int32))
    num_valid = jnp.sum(mask).astype(jnp.int32)
    z, _, counts, theta, bad = jax.lax.fori_loop(0, num_valid, step, init)
    active = counts > 0
    new_state = state._replace(
        assignments=z,
        active=active,
        params=_to_params(theta),
        count=state.count + 1,
        nonfinite=state.nonfinite + bad,
    )
    moved = jnp.sum((z != z0) & mask).astype(jnp.int32)
    return new_state, SweepInfo(jnp.sum(active).astype(jnp.int32), moved, bad)


def _randomness(randomness, cls, draw, name):
    """``randomness`` itself, or (deprecated) drawn from a key passed in its place."""
    if isinstance(randomness, cls):
        return randomness
    validation.check_key(randomness, "randomness")
    warnings.warn(
        f"{name}: passing a jax.random key as randomness is deprecated; pass "
        f"{draw.__name__}(rng_key, ...) or step the sampler built by jaxlab.bo.rambo",
        DeprecationWarning,
        stacklevel=3,
    )
    return None


def rambo_sweep(
    randomness: SweepRandomness,
    state: RamboState,
    x,
    y,
    mask=None,
    *,
    variant: str = "textbook",
    jitter=DEFAULT_JITTER,
) -> tuple[RamboState, SweepInfo]:
    """One collapsed Gibbs sweep over the unmasked observations (see the module docstring).

    The deterministic core of :func:`rambo`'s step: every random number comes in
    ``randomness``, so a second implementation given the same numbers makes the same moves
    (:func:`jaxlab.bo.numpy_gibbs_sweep`). To sample, use ``rambo(x, y, mask, config).step``.

    Args:
      randomness: the :class:`SweepRandomness` to consume (from :func:`sweep_randomness`). A
        ``jax.random`` key in its place is deprecated (it is drawn from with a warning).
      state: the current :class:`RamboState`.
      x, y, mask: the raw data (standardized inside, as in :func:`rambo_fit`).
      variant: ``"textbook"`` or ``"reference"`` (the released code's likelihoods).
      jitter: added to every noise variance.

    Returns:
      ``(state, SweepInfo)``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> x = jnp.linspace(0.0, 1.0, 10)[:, None]
      >>> y = jnp.sin(6 * x[:, 0])
      >>> state = rambo_init(jax.random.key(0), x, y)
      >>> randomness = sweep_randomness(jax.random.key(1), 10)
      >>> state, info = rambo_sweep(randomness, state, x, y)
      >>> int(state.count), int(info.nonfinite)
      (1, 0)
    """
    _check_variant(variant)
    _check_state(state)
    x, y, mask = _check_data(x, y, mask)
    rand = _randomness(randomness, SweepRandomness, sweep_randomness, "rambo_sweep")
    if rand is None:
        rand = sweep_randomness(randomness, x.shape[0])
    _check_state(state, x.shape[0], rand, jitter)
    return _sweep_jit(x, y, mask, state, rand, jitter, variant=variant)


@functools.partial(jax.jit, static_argnames=("variant",))
def _sweep_jit(x, y, mask, state, rand, jitter, *, variant):
    xs, ys, _ = standardize(x, y, mask)
    return _sweep_core(xs, ys, mask, state, rand, variant, jitter)


class SplitMergeRandomness(NamedTuple):
    """Every random number one split-merge move consumes (see :func:`rambo_split_merge`).

    Attributes:
      pair: ``(2,)`` uniforms choosing the ordered pair ``(i, j)`` of distinct observations.
      order: ``(n,)`` the visiting order of the restricted Gibbs scans.
      launch: ``(n,)`` uniforms of the launch state's random halves.
      scans: ``(restricted_scans + 1, n)`` uniforms of the intermediate scans and the final one.
      prior_draw: ``(3,)`` log ``(σ_f, ℓ, σ_n)`` of a proposed new regime, a prior draw
        (``proposal="prior"``).
      proposal_noise: ``(3, 3)`` standard normals of the ``"fitted"`` proposal: rows for the
        log-parameters of a split's two groups and of a merged regime.
      accept: the Metropolis-Hastings uniform.

    Examples:
      >>> SplitMergeRandomness._fields
      ('pair', 'order', 'launch', 'scans', 'prior_draw', 'proposal_noise', 'accept')
    """

    pair: jax.Array
    order: jax.Array
    launch: jax.Array
    scans: jax.Array
    prior_draw: jax.Array
    proposal_noise: jax.Array
    accept: jax.Array


class SplitMergeInfo(NamedTuple):
    """What one split-merge move did: whether it proposed a split (else a merge), whether the
    proposal was accepted, and its log acceptance ratio (``-inf`` when the move was impossible:
    fewer than two observations, or a split with every slot in use).

    Examples:
      >>> SplitMergeInfo._fields
      ('proposed_split', 'accepted', 'log_accept')
    """

    proposed_split: jax.Array
    accepted: jax.Array
    log_accept: jax.Array


def split_merge_randomness(
    rng_key, num_points: int, restricted_scans: int = 3
) -> SplitMergeRandomness:
    """The random numbers of one split-merge move (see :class:`SplitMergeRandomness`).

    Examples:
      >>> import jax
      >>> r = split_merge_randomness(jax.random.key(0), 5, restricted_scans=2)
      >>> r.scans.shape, r.prior_draw.shape
      ((3, 5), (3,))
    """
    validation.check_key(rng_key)
    # A split-merge move picks two distinct points.
    num_points = validation.check_int(num_points, "num_points", minimum=2)
    restricted_scans = validation.check_int(restricted_scans, "restricted_scans", minimum=0)
    keys = jax.random.split(rng_key, 7)
    return SplitMergeRandomness(
        jax.random.uniform(keys[0], (2,)),
        jax.random.permutation(keys[1], num_points).astype(jnp.int32),
        jax.random.uniform(keys[2], (num_points,)),
        jax.random.uniform(keys[3], (restricted_scans + 1, num_points)),
        _sample_prior_fast(keys[4], ()),
        jax.random.normal(keys[6], (3, 3)),
        jax.random.uniform(keys[5], ()),
    )


# The "fitted" move (Jain and Neal's non-conjugate restricted Gibbs, with the regimes'
# parameters proposed rather than kept). Every fit is a deterministic function of a group of
# points that both directions of the move know: _FITTED_STEPS Adam steps of
# _FITTED_LEARNING_RATE on the group's log posterior (log marginal + log priors), started at the
# priors' modes b/(a + 1) (a fixed start, so the fit does not depend on the current regimes'
# parameters). A proposed regime's log-parameters are N(fit, _FITTED_SCALE²) per coordinate;
# 0.3 in log space is a factor e^0.3 ≈ 1.35 either way, about the posterior's width on the
# 10-60 points of a regime. 60 steps of 0.1 bring the fit within 0.06 of the group's MAP (400
# Adam steps of 0.05) on the halves and the union of issue 38's 60 points at seed 4; 40 steps
# stopped up to 0.4 short.
_FITTED_STEPS = 60
_FITTED_LEARNING_RATE = 0.1
_FITTED_SCALE = 0.3
_FITTED_START = tuple(math.log(b / (a + 1.0)) for a, b in PRIORS)


def _quick_map(xs, ys, member, jitter, start=None):
    """The fitted proposal's center: a short MAP fit of one group's log-parameters."""
    start = jnp.asarray(_FITTED_START, xs.dtype) if start is None else start

    def loss(u):
        params = _to_params(jnp.exp(u))
        return -log_marginal_unchecked(xs, ys, member, params, jitter) - rambo_log_prior(u)

    opt = optax.adam(_FITTED_LEARNING_RATE)

    def body(_, carry):
        u, opt_state = carry
        updates, opt_state = opt.update(jax.grad(loss)(u), opt_state, u)
        return optax.apply_updates(u, updates), opt_state

    u, _ = jax.lax.fori_loop(0, _FITTED_STEPS, body, (start, opt.init(start)))
    return jnp.where(jnp.all(jnp.isfinite(u)), u, start)


def _log_prior_of_logs(u):
    """The priors' density of log-parameters ``u``: IG at ``exp(u)`` times the Jacobian."""
    return rambo_log_prior(u) + jnp.sum(u, -1)


def _log_gaussian_proposal(u, center):
    eps = (u - center) / _FITTED_SCALE
    return -0.5 * jnp.sum(eps**2, -1) - 3 * jnp.log(_FITTED_SCALE * jnp.sqrt(2 * jnp.pi))


def _split_merge_core(
    xs, ys, mask, state: RamboState, rand: SplitMergeRandomness, jitter, proposal="prior"
):
    """One Jain-Neal split-merge move (restricted Gibbs launch) on the model's posterior."""
    n = xs.shape[0]
    theta_state = _theta(state.params)
    logs = jnp.log(theta_state)  # the move proposes and scores log-parameters
    num_slots = logs.shape[0]
    dtype = xs.dtype
    sq = jnp.sum((xs[:, None, :] - xs[None]) ** 2, -1)
    eye_n = jnp.eye(n, dtype=dtype)
    rows = jnp.arange(n)
    z = state.assignments
    counts = jnp.zeros(num_slots, jnp.int32).at[z].add(mask.astype(jnp.int32))
    count = jnp.sum(mask).astype(jnp.int32)
    valid = count >= 2
    # The ordered pair: the ⌊u count⌋-th unmasked row, then another of the remaining ones.
    ranked = jnp.argsort(~mask, stable=True)
    pos_i = jnp.minimum((rand.pair[0] * count).astype(jnp.int32), count - 1)
    pos_j = jnp.minimum((rand.pair[1] * (count - 1)).astype(jnp.int32), jnp.maximum(count - 2, 0))
    pos_j = pos_j + (pos_j >= pos_i)
    i, j = ranked[pos_i], ranked[jnp.minimum(pos_j, n - 1)]
    ci, cj = z[i], z[j]
    split = ci == cj
    free = counts == 0
    possible = valid & (~split | jnp.any(free))
    fitted = proposal == "fitted"
    union = mask & ((z == ci) | (z == cj))
    others = union & (rows != i) & (rows != j)
    forced = jnp.where(z == ci, 0, 1)  # the current split, which a merge must reproduce
    # The launch: only the union, i, j and random numbers decide it, never the current split.
    # "prior": each other point in a random half, both groups scored under i's regime's
    # parameters (in a merge, those the merged regime keeps). "fitted": each other point with
    # the nearer of i and j, each group scored under a fit to its own points (refit after the
    # intermediate scans), so the scans can tell regimes apart by their hyper-parameters.
    if fitted:
        launch = jnp.where(sq[j] < sq[i], 1, 0)
    else:
        launch = jnp.where(rand.launch >= 0.5, 1, 0)
    group = jnp.where(rows == i, 0, jnp.where(rows == j, 1, launch))
    lp_a = logs[ci]

    def group_members(group):
        return jnp.stack([union & (group == 0), union & (group == 1)])

    def scan_params(group):
        if fitted:
            return jax.vmap(lambda m: _quick_map(xs, ys, m, jitter))(group_members(group))
        return jnp.stack([lp_a, lp_a])

    first = jnp.argsort(~others[rand.order], stable=True)
    visit = rand.order[first]
    num_visit = jnp.sum(others).astype(jnp.int32)

    def restricted_scan(group, params, uniforms, final):
        members = group_members(group)
        inv = _group_inverses(sq, members, jnp.exp(params), jitter)
        sf2, _, sn2 = _unpack(jnp.exp(params))
        sf2, sn2 = sf2**2, sn2**2

        def step(t, carry):
            group, members, inv, log_q = carry
            k = visit[t]
            g = group[k]
            e_k = eye_n[k]
            a = inv[g]
            col = a[:, k]
            inv_rm = inv.at[g].set(a - jnp.outer(col, col) / col[k] + jnp.outer(e_k, e_k))
            mem = members & (rows != k)[None, :]
            b = _kernel_columns(sq[k], jnp.exp(params), mem, dtype)
            ab = jnp.einsum("gnm,gm->gn", inv_rm, b)
            var = jnp.maximum(sf2 + sn2 + jitter - jnp.sum(b * ab, -1), jitter)
            logits = jnp.log(jnp.sum(mem, -1).astype(dtype)) + _log_normal(ys[k], ab @ ys, var)
            log_p = jax.nn.log_softmax(logits)
            sampled = jnp.where(uniforms[t] < jnp.exp(log_p[0]), 0, 1)
            choice = jnp.where(final & ~split, forced[k], sampled)
            abt = ab[choice]
            schur = jnp.maximum(var[choice], jitter)
            v = abt - e_k
            added = inv_rm[choice] - jnp.outer(e_k, e_k) + jnp.outer(v, v) / schur
            members = mem.at[choice, k].set(True)
            return (
                group.at[k].set(choice),
                members,
                inv_rm.at[choice].set(added),
                log_q + jnp.where(final, log_p[choice], 0.0),
            )

        carry = (group, members, inv, jnp.zeros([], dtype))
        group, members, _, log_q = jax.lax.fori_loop(0, num_visit, step, carry)
        return group, members, log_q

    params = scan_params(group)
    group = jax.lax.fori_loop(
        0,
        rand.scans.shape[0] - 1,
        lambda s, g: restricted_scan(g, params, rand.scans[s], False)[0],
        group,
    )
    if fitted:  # the launch state's own fits score the final scan
        params = scan_params(group)
    _, members, log_q = restricted_scan(group, params, rand.scans[-1], True)
    # The split configuration (proposed, or the current one) against the merged one.
    split_members = jnp.where(split, members, jnp.stack([mask & (z == ci), mask & (z == cj)]))
    sizes = jnp.sum(split_members, -1).astype(dtype)
    if fitted:
        # Every parameter the move changes is proposed: in a split both groups' (around fits to
        # the proposed groups), in a merge the merged regime's (around a fit to the union); the
        # reverse move's proposal densities and the priors of the log-parameters enter the ratio.
        three = jnp.concatenate([split_members, union[None]])
        centers = jax.vmap(lambda m: _quick_map(xs, ys, m, jitter))(three)
        proposed = centers + _FITTED_SCALE * rand.proposal_noise.astype(dtype)
        current_split = jnp.stack([logs[ci], logs[cj]])
        lp_split = jnp.where(split, proposed[:2], current_split)
        lp_merged = jnp.where(split, logs[ci], proposed[2])
        lp3 = jnp.concatenate([lp_split, lp_merged[None]])
        log_q3 = _log_gaussian_proposal(lp3, centers)
        log_p3 = _log_prior_of_logs(lp3)
        extra = log_p3[0] + log_p3[1] - log_p3[2] + log_q3[2] - log_q3[0] - log_q3[1]
    else:
        # j's group's parameters: a prior draw in a split (the prior density cancels), cj's own
        # in a merge; i's group keeps i's regime's, the merged regime too.
        lp_b = jnp.where(split, rand.prior_draw.astype(dtype), logs[cj])
        lp3 = jnp.stack([lp_a, lp_b, lp_a])
        extra = 0.0
    three = jnp.concatenate([split_members, union[None]])

    def group_lml(member, lp):
        return log_marginal_unchecked(xs, ys, member, _to_params(jnp.exp(lp)), jitter)

    lml = jax.vmap(group_lml)(three, lp3)
    log_ratio = (
        jnp.log(state.alpha)
        + jax.scipy.special.gammaln(sizes[0])
        + jax.scipy.special.gammaln(sizes[1])
        - jax.scipy.special.gammaln(sizes[0] + sizes[1])
        + lml[0]
        + lml[1]
        - lml[2]
        + extra
    )
    log_accept = jnp.where(split, log_ratio - log_q, log_q - log_ratio)
    log_accept = jnp.where(possible & ~jnp.isnan(log_accept), log_accept, -jnp.inf)
    accepted = jnp.log(rand.accept) < log_accept
    slot = jnp.argmax(free)
    split_z = jnp.where(members[1], slot, z)
    merge_z = jnp.where(mask & (z == cj), ci, z)
    new_z = jnp.where(accepted, jnp.where(split, split_z, merge_z), z).astype(jnp.int32)
    # Only the slots the move changes are written (the others keep their exact values).
    new3 = jnp.exp(lp3)
    split_theta = theta_state.at[ci].set(new3[0]).at[slot].set(new3[1])
    merge_theta = theta_state.at[ci].set(new3[2])
    theta = jnp.where(accepted, jnp.where(split, split_theta, merge_theta), theta_state)
    new_counts = jnp.zeros(num_slots, jnp.int32).at[new_z].add(mask.astype(jnp.int32))
    new_state = state._replace(assignments=new_z, active=new_counts > 0, params=_to_params(theta))
    return new_state, SplitMergeInfo(split, accepted, log_accept)


def rambo_split_merge(
    randomness: SplitMergeRandomness,
    state: RamboState,
    x,
    y,
    mask=None,
    *,
    restricted_scans: int = 3,
    proposal: str = "fitted",
    jitter=DEFAULT_JITTER,
) -> tuple[RamboState, SplitMergeInfo]:
    """One split-merge move (Jain and Neal's restricted-Gibbs sampler) on the regimes.

    Draw an ordered pair ``i ≠ j`` of observations; ``S`` are the other members of their
    regimes. A launch state puts each of ``S`` into a group with ``i`` or one with ``j`` and
    runs ``restricted_scans`` Gibbs scans over ``S`` that move each point only between the two
    groups (``P(k → g) ∝ n_g^{-k} N(y_k; μ_g^{-k}(x_k), v_g^{-k}(x_k) + σ_{n,g}²)``); the launch
    depends only on the union, ``i``, ``j`` and random numbers, never on the current split.
    One more scan from the launch state, with probability ``q``, proposes a split (``i`` and
    ``j`` in one regime) or recreates the current split (in two; the merge is then proposed and
    ``q`` enters its ratio). The split's Metropolis-Hastings ratio is
    ``α Γ(n_i)Γ(n_j)/Γ(n_i + n_j) · p(y_i·)p(y_j·)/p(y_ij) / q`` times the parameter terms below,
    the ``p`` the GP marginal likelihoods of the groups; a merge is accepted with its inverse.

    * ``proposal="fitted"`` (the default): the launch puts each point with the nearer of ``i``
      and ``j`` (standardized inputs); each group's scans use a short MAP fit to that group's
      points (refit on the launch state for the final scan), so the scans tell regimes apart
      by lengthscale and noise. Every parameter the move changes is proposed: a split draws
      both groups' log-parameters from ``N(fit, 0.3²)`` around fits to the proposed groups, a
      merge the merged regime's around a fit to the union; the priors of the log-parameters and
      the reverse proposal's density enter the ratio. Each fit is 60 Adam steps of 0.1 from the
      priors' modes (five fits a move).
    * ``proposal="prior"``: a random launch, both groups scored under ``i``'s regime's
      parameters; ``i``'s group and a merged regime keep ``i``'s regime's parameters and
      ``j``'s group in a split takes a prior draw (the prior density cancels). With every
      regime's parameters fixed to one value this is the conjugate sampler of Jain and Neal,
      tested against the posterior enumerated over all partitions.

    Both leave the model's posterior over partitions and regime parameters invariant. The move
    always uses the model's likelihood (``σ_n²`` included), whatever sweep ``variant`` is used
    beside it. A split needs a free slot; with every slot in use it is refused (the posterior
    of the sampler is the model's restricted to ``max_clusters`` regimes).

    Args:
      randomness: the :class:`SplitMergeRandomness` to consume (from
        :func:`split_merge_randomness`; a ``jax.random`` key in its place is deprecated).
      state: the current :class:`RamboState`.
      x, y, mask: the raw data (standardized inside).
      restricted_scans: intermediate restricted Gibbs scans before the final one (``>= 0``;
        ignored when randomness is given: its ``scans`` sets them).
      proposal: ``"fitted"`` or ``"prior"`` (above).
      jitter: added to every noise variance.

    Returns:
      ``(state, SplitMergeInfo)``.

    References:
      S. Jain, R. M. Neal, *A split-merge Markov chain Monte Carlo procedure for the Dirichlet
      process mixture model*, Journal of Computational and Graphical Statistics 13(1), 2004.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> x = jnp.linspace(0.0, 1.0, 10)[:, None]
      >>> y = jnp.where(x[:, 0] < 0.5, 0.0, 3.0)
      >>> state = rambo_init(jax.random.key(0), x, y)
      >>> randomness = split_merge_randomness(jax.random.key(1), 10)
      >>> state, info = rambo_split_merge(randomness, state, x, y, proposal="prior")
      >>> int(state.active.sum()) in (1, 2), info.accepted.dtype
      (True, dtype('bool'))
    """
    _check_state(state)
    _check_proposal(proposal)
    x, y, mask = _check_data(x, y, mask)
    rand = _randomness(
        randomness, SplitMergeRandomness, split_merge_randomness, "rambo_split_merge"
    )
    if rand is None:
        rand = split_merge_randomness(randomness, x.shape[0], restricted_scans)
    _check_state(state, x.shape[0], rand, jitter)
    return _split_merge_jit(x, y, mask, state, rand, jitter, proposal=proposal)


@functools.partial(jax.jit, static_argnames=("proposal",))
def _split_merge_jit(x, y, mask, state, rand, jitter, *, proposal):
    xs, ys, _ = standardize(x, y, mask)
    return _split_merge_core(xs, ys, mask, state, rand, jitter, proposal)


def _check_proposal(proposal):
    validation.check_choice(proposal, "proposal", _PROPOSALS)


def _map_refit(xs, ys, mask, state: RamboState, steps, learning_rate, jitter):
    theta = _theta(state.params)
    members = _members(state.assignments, mask, theta.shape[0])
    opt = optax.adam(learning_rate)

    def objective(u, member):
        params = _to_params(jnp.exp(u))
        return -log_marginal_unchecked(xs, ys, member, params, jitter) - rambo_log_prior(u)

    def one(th, member, active):
        u = jnp.log(th)

        def body(_, carry):
            u, opt_state = carry
            grad = jax.grad(objective)(u, member)
            updates, opt_state = opt.update(grad, opt_state, u)
            return optax.apply_updates(u, updates), opt_state

        new_u, _ = jax.lax.fori_loop(0, steps, body, (u, opt.init(u)))
        ok = jnp.all(jnp.isfinite(new_u)) & jnp.isfinite(objective(new_u, member))
        return jnp.where(active & ok, jnp.exp(new_u), th), active & ~ok

    theta, bad = jax.vmap(one)(theta, members, state.active)
    return state._replace(
        params=_to_params(theta), nonfinite=state.nonfinite + jnp.sum(bad).astype(jnp.int32)
    )


def _step_core(xs, ys, mask, state: RamboState, rng_key, config: RamboConfig):
    """One sampler step: a sweep, ``split_merge_moves`` moves, a MAP refit every
    ``hyper_update_every``-th sweep (counted by ``state.count``)."""
    n = xs.shape[0]
    jitter = config.jitter
    state, info = _sweep_core(
        xs, ys, mask, state, sweep_randomness(rng_key, n), config.variant, jitter
    )
    accepted = jnp.zeros(2, jnp.int32)
    if config.split_merge_moves:
        # The sweep consumes the key as the released sampler's fit did; the moves a fold of it.

        def split_merge(_, carry):
            state, accepted, key = carry
            key, sub = jax.random.split(key)
            rand = split_merge_randomness(sub, n, config.restricted_scans)
            state, move = _split_merge_core(
                xs, ys, mask, state, rand, jitter, config.split_merge_proposal
            )
            kind = jnp.where(move.proposed_split, 0, 1)
            return state, accepted.at[kind].add(move.accepted.astype(jnp.int32)), key

        carry = (state, accepted, jax.random.fold_in(rng_key, 1))
        state, accepted, _ = jax.lax.fori_loop(0, config.split_merge_moves, split_merge, carry)
    state = jax.lax.cond(
        state.count % config.hyper_update_every == 0,
        lambda st: _map_refit(xs, ys, mask, st, config.map_steps, config.map_learning_rate, jitter),
        lambda st: st,
        state,
    )
    num_clusters = jnp.sum(state.active).astype(jnp.int32)
    return state, RamboInfo(num_clusters, info.moved, info.nonfinite, accepted)


@functools.partial(jax.jit, static_argnames=("config",))
def _step_jit(rng_key, state, x, y, mask, *, config):
    xs, ys, _ = standardize(x, y, mask)
    return _step_core(xs, ys, mask, state, rng_key, config)


def _check_config(config):
    config = RamboConfig() if config is None else config
    validation.check_instance(config, RamboConfig, "config", "a jaxlab.bo.RamboConfig")
    return config


def build_kernel(config: RamboConfig | None = None):
    """RAMBO's transition kernel ``kernel(rng_key, state, x, y, mask=None) -> (state, info)``.

    One step is one collapsed Gibbs sweep (:func:`rambo_sweep`), then
    ``config.split_merge_moves`` split-merge moves (:func:`rambo_split_merge`), then, after
    every ``config.hyper_update_every``-th sweep (``state.count``), each active regime's
    ``(σ_f, ℓ, σ_n)`` moves to its MAP (``config.map_steps`` Adam steps of
    ``config.map_learning_rate`` on the log-parameters). The data are passed per call, as
    blackjax's kernels take the log density; :func:`rambo` closes over them.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> x = jnp.linspace(0.0, 1.0, 10)[:, None]
      >>> y = jnp.sin(6 * x[:, 0])
      >>> kernel = rambo.build_kernel(RamboConfig())
      >>> state = rambo.init(jax.random.key(0), x, y)
      >>> state, info = kernel(jax.random.key(1), state, x, y)
      >>> int(state.count), info._fields[-1]
      (1, 'split_merge_accepted')
    """
    config = _check_config(config)

    def kernel(rng_key, state: RamboState, x, y, mask=None) -> tuple[RamboState, RamboInfo]:
        validation.check_key(rng_key)
        _check_state(state)
        x, y, mask = _check_data(x, y, mask)
        _check_state(state, x.shape[0], None, config.jitter)
        return _step_jit(rng_key, state, x, y, mask, config=config)

    return kernel


class rambo:  # lowercase: a factory, as blackjax.mala
    """RAMBO's Gibbs sampler on ``(x, y, mask)``: a :class:`~jaxlab.particles.SamplingAlgorithm`.

    ``init(rng_key, alpha=None)`` is :func:`rambo_init` on the data (k-means regimes,
    hyper-parameters drawn from the priors; ``alpha`` defaults to ``config.alpha0``) and
    ``step(rng_key, state)`` is the kernel of ``rambo.build_kernel(config)`` with the data
    closed over: a sweep, ``config.split_merge_moves`` split-merge moves, and a MAP refit after
    every ``config.hyper_update_every``-th sweep. :func:`rambo_fit` is a ``lax.scan`` of this
    step from ``init``, with the post-burn-in summaries. As in blackjax, the pieces are reached
    per algorithm: ``rambo.init`` (:func:`rambo_init`) and ``rambo.build_kernel``.

    Args:
      x: ``(n, d)`` inputs (padded rows allowed; see ``mask``).
      y: ``(n,)`` observations.
      mask: optional ``(n,)`` bool of the rows that are observations.
      config: a :class:`RamboConfig` (default ``RamboConfig()``).

    Returns:
      A :class:`~jaxlab.particles.SamplingAlgorithm` ``(init, step)``.

    References:
      Zhang, Liu, Chen, Ranftl, Liu, Li, *Regime-Adaptive Bayesian Optimization via Dirichlet
      Process Mixtures of Gaussian Processes*, ICML 2026, arXiv:2601.20043.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> x = jnp.linspace(-1.0, 1.0, 10)[:, None]
      >>> y = jnp.where(x[:, 0] < 0, 0.0, jnp.sin(12 * x[:, 0]))
      >>> sampler = rambo(x, y, config=RamboConfig(num_sweeps=3, burn_in=0))
      >>> state = sampler.init(jax.random.key(0))
      >>> for key in jax.random.split(jax.random.key(1), 3):
      ...     state, info = sampler.step(key, state)
      >>> int(state.count), state.params.lengthscale.shape
      (3, (8,))
    """

    init = staticmethod(rambo_init)
    build_kernel = staticmethod(build_kernel)

    def __new__(  # type: ignore[misc]  # returns the SamplingAlgorithm, as blackjax does
        cls, x, y, mask=None, config: RamboConfig | None = None
    ) -> SamplingAlgorithm:
        config = _check_config(config)
        x, y, mask = _check_data(x, y, mask)

        def init_fn(rng_key, alpha=None) -> RamboState:
            alpha = config.alpha0 if alpha is None else alpha
            return rambo_init(rng_key, x, y, mask, alpha=alpha, max_clusters=config.max_clusters)

        def step_fn(rng_key, state: RamboState) -> tuple[RamboState, RamboInfo]:
            validation.check_key(rng_key)
            _check_state(state, x.shape[0], None, config.jitter)
            return _step_jit(rng_key, state, x, y, mask, config=config)

        return SamplingAlgorithm(init_fn, step_fn)


# rambo_fit's keywords before issue 43 (now RamboConfig's fields; alpha stays a keyword).
_RETIRED_FIT_KEYWORDS = tuple(
    field.name
    for field in dataclasses.fields(RamboConfig)
    if field.name not in ("schedule", "alpha0", "alpha_start", "alpha_end")
)


def rambo_fit(
    rng_key, x, y, mask=None, config: RamboConfig | None = None, *, alpha=None, **retired
) -> tuple[RamboState, RamboFitInfo]:
    """A full RAMBO fit: :func:`rambo_init`, then ``config.num_sweeps`` steps of :func:`rambo`.

    Each step is a Gibbs sweep, ``config.split_merge_moves`` split-merge moves (0, the released
    sampler, by default; they move many assignments at once where single-site Gibbs cannot
    cross between partitions) and, after every ``config.hyper_update_every``-th sweep, a MAP
    refit of each active regime's hyper-parameters. The returned state is the last sweep's
    (the method predicts from it); ``config.burn_in`` only sets which sweeps
    :attr:`RamboFitInfo.mean_clusters` and :attr:`RamboFitInfo.co_occurrence` average. Equal
    to the manual loop of ``rambo(x, y, mask, config)``'s ``init``/``step`` (init and sweep
    keys from ``jax.random.split(rng_key)``, one sweep key per step from the second).
    Jittable (the configuration is static). The note's quick setting is ``RamboConfig()``'s
    40 sweeps / 15 burn-in, the paper's 1000 / 500.

    Args:
      rng_key: a ``jax.random`` key.
      x: ``(n, d)`` inputs; y: ``(n,)`` observations; mask: optional ``(n,)`` bool.
      config: a :class:`RamboConfig` (default ``RamboConfig()``).
      alpha: the CRP concentration ``> 0`` (traceable; default ``config.alpha0``).
      **retired: deprecated: ``RamboConfig``'s fields as keywords (``num_sweeps=...``), as
        ``rambo_fit`` took them before; they replace ``config``'s with a warning.

    Raises:
      ValueError: ``alpha <= 0``, a concrete mask selecting no observation or non-finite
        concrete observations.
      TypeError: ``config`` is not a :class:`RamboConfig`, or an unknown keyword.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> x = jnp.linspace(-1.0, 1.0, 10)[:, None]
      >>> y = jnp.where(x[:, 0] < 0, 0.0, jnp.sin(12 * x[:, 0]))
      >>> config = RamboConfig(num_sweeps=3, burn_in=0)
      >>> state, info = rambo_fit(jax.random.key(0), x, y, config=config)
      >>> info.num_clusters.shape, int(state.count)
      ((3,), 3)
    """
    validation.check_key(rng_key)
    config = _check_config(config)
    if retired:
        unknown = sorted(set(retired) - set(_RETIRED_FIT_KEYWORDS))
        if unknown:
            raise TypeError(f"rambo_fit got unexpected keyword arguments {unknown}")
        warnings.warn(
            f"rambo_fit: the keywords {sorted(retired)} are deprecated; pass "
            f"config=RamboConfig({', '.join(f'{k}=...' for k in sorted(retired))})",
            DeprecationWarning,
            stacklevel=2,
        )
        config = dataclasses.replace(config, **retired)
    x, y, mask = _check_data(x, y, mask)
    alpha = config.alpha0 if alpha is None else alpha
    _check_alpha(alpha)
    return _fit_jit(rng_key, x, y, mask, jnp.asarray(alpha, x.dtype), config=config)


@functools.partial(jax.jit, static_argnames=("config",))
def _fit_jit(rng_key, x, y, mask, alpha, *, config: RamboConfig):
    init_key, sweep_key = jax.random.split(rng_key)
    state = _init_jit(init_key, x, y, mask, alpha, max_clusters=config.max_clusters)
    xs, ys, _ = standardize(x, y, mask)
    n = x.shape[0]
    pair_mask = mask[:, None] & mask[None, :]
    burn_in, num_sweeps = config.burn_in, config.num_sweeps

    def body(carry, inputs):
        state, co, accepted = carry
        s, key = inputs
        state, info = _step_core(xs, ys, mask, state, key, config)
        z = state.assignments
        same = (z[:, None] == z[None, :]) & pair_mask
        co = co + jnp.where(s >= burn_in, same.astype(x.dtype), 0.0)
        accepted = accepted + info.split_merge_accepted
        return (state, co, accepted), (info.num_clusters, z)

    keys = jax.random.split(sweep_key, num_sweeps)
    init = (state, jnp.zeros((n, n), x.dtype), jnp.zeros(2, jnp.int32))
    (state, co, accepted), (clusters, samples) = jax.lax.scan(
        body, init, (jnp.arange(num_sweeps), keys)
    )
    mean_clusters = jnp.mean(clusters[burn_in:].astype(x.dtype))
    co = co / (num_sweeps - burn_in)
    return state, RamboFitInfo(clusters, mean_clusters, state.nonfinite, co, accepted, samples)
