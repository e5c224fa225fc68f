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

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxlab._src import validation
from jaxlab.bo._data import GPData
from jaxlab.bo._gp import (
    DEFAULT_JITTER,
    GPParams,
    log_marginal_unchecked,
    standardize,
)
from jaxlab.bo._priors import PRIORS, _sample_prior, rambo_log_prior

__all__ = [
    "RamboFitInfo",
    "RamboState",
    "SplitMergeInfo",
    "SplitMergeRandomness",
    "SweepInfo",
    "SweepRandomness",
    "rambo_fit",
    "rambo_init",
    "rambo_split_merge",
    "rambo_sweep",
    "split_merge_randomness",
    "sweep_randomness",
]

_VARIANTS = ("textbook", "reference")


class RamboState(NamedTuple):
    """The Gibbs sampler's state.

    Attributes:
      assignments: ``(n,)`` int32 regime slot of each row (meaningless at masked rows).
      active: ``(K,)`` bool, slots holding at least one observation.
      log_params: ``(K, 3)`` log of ``(σ_f, ℓ, σ_n)`` per slot.
      alpha: the CRP concentration.
      count: sweeps done.
      nonfinite: point updates or refits that met a NaN or infinite score (the point stayed in
        its regime; the refit kept the previous parameters).

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> state = rambo_init(jax.random.key(0), jnp.zeros((4, 1)), jnp.arange(4.0))
      >>> state.log_params.shape, int(state.count)
      ((8, 3), 0)
    """

    assignments: jax.Array
    active: jax.Array
    log_params: jax.Array
    alpha: jax.Array
    count: jax.Array
    nonfinite: jax.Array


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
    if variant not in _VARIANTS:
        raise ValueError(f"variant must be one of {_VARIANTS}, got {variant!r}")


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
        raise ValueError(f"rng_key_or_randomness must be drawn for the {num_points} points of x, "
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
        _sample_prior(k2, (max_clusters,)).astype(x.dtype),
        alpha,
        jnp.zeros([], jnp.int32),
        jnp.zeros([], jnp.int32),
    )


def _unpack(log_params):
    theta = jnp.exp(log_params)
    return theta[..., 0], theta[..., 1], theta[..., 2]


def _members(z, mask, num_slots):
    return (z[None, :] == jnp.arange(num_slots)[:, None]) & mask[None, :]


def _group_inverses(sq, members, log_params, jitter):
    """``A_k = M_k⁻¹`` for every group of ``members`` ``(G, n)``, by Cholesky."""
    n = sq.shape[0]
    eye = jnp.eye(n, dtype=sq.dtype)

    def one(m, lp):
        sf, ls, sn = _unpack(lp)
        k = sf**2 * jnp.exp(-0.5 * sq / ls**2) + (sn**2 + jitter) * eye
        mf = m.astype(sq.dtype)
        cov = mf[:, None] * mf[None, :] * k + jnp.diag(1.0 - mf)
        chol = jnp.linalg.cholesky(cov)
        return jax.scipy.linalg.cho_solve((chol, True), eye)

    return jax.vmap(one)(members, log_params)


def _slot_inverses(xs, mask, z, log_params, jitter):
    """``A_k = M_k⁻¹`` for every slot, by Cholesky (the start of every sweep)."""
    sq = jnp.sum((xs[:, None, :] - xs[None]) ** 2, -1)
    return _group_inverses(sq, _members(z, mask, log_params.shape[0]), log_params, jitter)


def _kernel_columns(sq_row, log_params, members, dtype):
    """Each group's kernel column ``σ_f² exp(-d²/(2ℓ²))`` to its members (zero elsewhere)."""
    sf, ls, _ = _unpack(log_params)
    col = sf[:, None] ** 2 * jnp.exp(-0.5 * sq_row[None, :] / ls[:, None] ** 2)
    return col * members.astype(dtype)


def _log_normal(y, mean, var):
    return -0.5 * (jnp.log(2.0 * jnp.pi) + jnp.log(var) + (y - mean) ** 2 / var)


def _sweep_core(xs, ys, mask, state: RamboState, rand: SweepRandomness, variant, jitter):
    n = xs.shape[0]
    num_slots = state.log_params.shape[0]
    dtype = xs.dtype
    sq = jnp.sum((xs[:, None, :] - xs[None]) ** 2, -1)
    eye_n = jnp.eye(n, dtype=dtype)
    slots = jnp.arange(num_slots)
    rows = jnp.arange(n)
    z0 = state.assignments
    inv = _slot_inverses(xs, mask, z0, state.log_params, jitter)
    counts = jnp.zeros(num_slots, jnp.int32).at[z0].add(mask.astype(jnp.int32))
    total = jnp.sum(mask).astype(dtype)
    log_denom = jnp.log(total - 1.0 + state.alpha)
    log_alpha = jnp.log(state.alpha)
    textbook = variant == "textbook"
    num_draws = rand.prior_draws.shape[1]
    # Each point's new-regime option, for all points at once (it reads only the prior draws).
    draws = rand.prior_draws.astype(dtype)
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
        z, inv, counts, log_params, bad = carry
        i = order[t]
        k0 = z[i]
        e_i = eye_n[i]
        sf, ls, sn = _unpack(log_params)
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
        log_params = jnp.where(is_new, log_params.at[target].set(draw), log_params)

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
            log_params,
            bad + nonfinite.astype(jnp.int32),
        )

    init = (z0, inv, counts, state.log_params, jnp.zeros([], jnp.int32))
    num_valid = jnp.sum(mask).astype(jnp.int32)
    z, _, counts, log_params, bad = jax.lax.fori_loop(0, num_valid, step, init)
    active = counts > 0
    new_state = state._replace(
        assignments=z,
        active=active,
        log_params=log_params,
        count=state.count + 1,
        nonfinite=state.nonfinite + bad,
    )
    moved = jnp.sum((z != z0) & mask).astype(jnp.int32)
    return new_state, SweepInfo(jnp.sum(active).astype(jnp.int32), moved, bad)


def rambo_sweep(
    rng_key_or_randomness,
    state: RamboState,
    x,
    y,
    mask=None,
    *,
    variant: str = "textbook",
    jitter=DEFAULT_JITTER,
) -> tuple[RamboState, SweepInfo]:
    """One collapsed Gibbs sweep over the unmasked observations (see the module docstring).

    Args:
      rng_key_or_randomness: a ``jax.random`` key, or the :class:`SweepRandomness` to consume
        (from :func:`sweep_randomness`; a second implementation given the same numbers makes
        the same moves).
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
      >>> state, info = rambo_sweep(jax.random.key(1), state, x, y)
      >>> int(state.count), int(info.nonfinite)
      (1, 0)
    """
    _check_variant(variant)
    _check_state(state)
    x, y, mask = _check_data(x, y, mask)
    if isinstance(rng_key_or_randomness, SweepRandomness):
        rand = rng_key_or_randomness
    else:
        validation.check_key(rng_key_or_randomness, "rng_key_or_randomness")
        rand = sweep_randomness(rng_key_or_randomness, x.shape[0])
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
      proposal_noise: ``(3,)`` standard normals of the ``"fitted"`` proposal.
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
        jax.random.normal(keys[6], (3,)),
        jax.random.uniform(keys[5], ()),
    )


_PROPOSALS = ("prior", "fitted")
# The "fitted" proposal of a new regime's log-parameters: N(θ̂, 0.3²) per coordinate around θ̂,
# 25 Adam steps of 0.1 on the proposed group's log posterior from the parent's parameters (a
# deterministic function of what both directions of the move know, so the reverse merge can
# evaluate the proposal density). 0.3 in log space is a factor e^0.3 ≈ 1.35 either way.
_FITTED_STEPS = 25
_FITTED_LEARNING_RATE = 0.1
_FITTED_SCALE = 0.3


def _quick_map(xs, ys, member, start, jitter):
    def loss(u):
        params = GPParams(*_unpack(u))
        return -log_marginal_unchecked(xs, ys, member, params, jitter) - rambo_log_prior(u)

    opt = optax.adam(_FITTED_LEARNING_RATE)

    def body(_, carry):
        u, opt_state = carry
        updates, opt_state = opt.update(jax.grad(loss)(u), opt_state, u)
        return optax.apply_updates(u, updates), opt_state

    u, _ = jax.lax.fori_loop(0, _FITTED_STEPS, body, (start, opt.init(start)))
    return jnp.where(jnp.all(jnp.isfinite(u)), u, start)


def _split_merge_core(
    xs, ys, mask, state: RamboState, rand: SplitMergeRandomness, jitter, proposal="prior"
):
    """One Jain-Neal split-merge move (restricted Gibbs launch) on the model's posterior."""
    n = xs.shape[0]
    num_slots = state.log_params.shape[0]
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
    # Group 0 holds i, group 1 holds j. The restricted scans score both under i's regime's
    # parameters (in a merge, those the merged regime would keep): what the split and its
    # reverse merge both know.
    lp_a = state.log_params[ci]
    lp2 = jnp.stack([lp_a, lp_a])
    union = mask & ((z == ci) | (z == cj))
    others = union & (rows != i) & (rows != j)
    launch = jnp.where(rand.launch >= 0.5, 1, 0)
    group = jnp.where(rows == i, 0, jnp.where(rows == j, 1, launch))
    forced = jnp.where(z == ci, 0, 1)  # the current split, which a merge must reproduce
    members = jnp.stack([union & (group == 0), union & (group == 1)])
    inv = _group_inverses(sq, members, lp2, jitter)
    first = jnp.argsort(~others[rand.order], stable=True)
    visit = rand.order[first]
    num_visit = jnp.sum(others).astype(jnp.int32)
    sf2, _, sn2 = _unpack(lp2)
    sf2, sn2 = sf2**2, sn2**2

    def restricted_scan(carry, uniforms, final):
        def step(t, carry):
            group, members, inv, log_q = carry
            k = visit[t]
            g = group[k]
            e_k = eye_n[k]
            a = inv[g]
            col = a[:, k]
            inv_rm = inv.at[g].set(a - jnp.outer(col, col) / col[k] + jnp.outer(e_k, e_k))
            mem = members & (rows != k)[None, :]
            b = _kernel_columns(sq[k], lp2, mem, dtype)
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

        return jax.lax.fori_loop(0, num_visit, step, carry)

    carry = (group, members, inv, jnp.zeros([], dtype))
    carry = jax.lax.fori_loop(
        0,
        rand.scans.shape[0] - 1,
        lambda s, c: restricted_scan(c, rand.scans[s], False),
        carry,
    )
    group, members, _, log_q = restricted_scan(carry, rand.scans[-1], True)
    # The split configuration (proposed, or the current one) against the merged one.
    split_members = jnp.where(split, members, jnp.stack([mask & (z == ci), mask & (z == cj)]))
    sizes = jnp.sum(split_members, -1).astype(dtype)
    # j's group's parameters: proposed in a split (the prior, or around a quick fit to the
    # group), cj's own in a merge; the prior density over the proposal density enters the
    # ratio (they cancel for the prior proposal).
    if proposal == "fitted":
        center = _quick_map(xs, ys, split_members[1], lp_a, jitter)
        lp_b = jnp.where(split, center + _FITTED_SCALE * rand.proposal_noise, state.log_params[cj])
        eps = (lp_b - center) / _FITTED_SCALE
        log_density = -0.5 * jnp.sum(eps**2) - 3 * jnp.log(_FITTED_SCALE * jnp.sqrt(2 * jnp.pi))
        # The prior density of log-parameters: IG at exp(u) times the Jacobian exp(u).
        extra = rambo_log_prior(lp_b) + jnp.sum(lp_b) - log_density
    else:
        lp_b = jnp.where(split, rand.prior_draw.astype(dtype), state.log_params[cj])
        extra = 0.0
    three = jnp.concatenate([split_members, union[None]])
    lml = jax.vmap(lambda m, lp: log_marginal_unchecked(xs, ys, m, GPParams(*_unpack(lp)), jitter))(
        three, jnp.stack([lp_a, lp_b, lp_a])
    )
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
    log_params = jnp.where(accepted & split, state.log_params.at[slot].set(lp_b), state.log_params)
    new_counts = jnp.zeros(num_slots, jnp.int32).at[new_z].add(mask.astype(jnp.int32))
    new_state = state._replace(assignments=new_z, active=new_counts > 0, log_params=log_params)
    return new_state, SplitMergeInfo(split, accepted, log_accept)


def rambo_split_merge(
    rng_key_or_randomness,
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

    Draw an ordered pair ``i ≠ j`` of observations. Put the other members ``S`` of their
    regimes at random into a group with ``i`` or one with ``j`` and run ``restricted_scans``
    Gibbs scans over ``S`` that move each point only between the two groups (``P(k → g) ∝
    n_g^{-k} N(y_k; μ_g^{-k}(x_k), v_g^{-k}(x_k) + σ_{n,g}²)``, the group of ``i`` under its
    regime's parameters, the group of ``j`` under ``j``'s regime's, or a prior draw when they
    share one). Then:

    * ``i`` and ``j`` in one regime: propose the split that one more scan gives, with
      probability ``q``; the new regime takes the prior draw. Accept with probability
      ``min(1, α Γ(n_i)Γ(n_j)/Γ(n_i + n_j) · p(y_i·)p(y_j·)/p(y_ij) / q)``, the ``p`` the GP
      marginal likelihoods of the groups;
    * in two regimes: propose their merge under ``i``'s regime's parameters, accepted with the
      inverse ratio times ``q``, the probability that the final scan would recreate the
      current split.

    The move leaves the model's posterior over partitions and regime parameters invariant (the
    new regime's parameters are proposed from their prior, so the prior density cancels): with
    every regime's parameters fixed to one value it is the conjugate sampler of Jain and Neal,
    tested against the posterior enumerated over all partitions. It always uses the model's
    likelihood (``σ_n²`` included), whatever sweep ``variant`` is used beside it. A split
    needs a free slot; with every slot in use it is refused (the posterior of the sampler is
    the model's restricted to ``max_clusters`` regimes).

    Args:
      rng_key_or_randomness: a ``jax.random`` key, or the :class:`SplitMergeRandomness` to
        consume (from :func:`split_merge_randomness`).
      state: the current :class:`RamboState`.
      x, y, mask: the raw data (standardized inside).
      restricted_scans: intermediate restricted Gibbs scans before the final one (``>= 0``;
        ignored when randomness is given: its ``scans`` sets them).
      proposal: how a split proposes the new regime's parameters: ``"prior"`` (a prior draw;
        the prior density cancels) or ``"fitted"`` (log-normal, scale 0.3, around 25 Adam
        steps of MAP fitting on the proposed group from the parent's parameters; the prior
        over this density enters the ratio). Both leave the posterior invariant; ``"fitted"``
        proposes parameters that fit, so splits are accepted where the model prefers them.
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
      >>> state, info = rambo_split_merge(jax.random.key(1), state, x, y, proposal="prior")
      >>> int(state.active.sum()) in (1, 2), info.accepted.dtype
      (True, dtype('bool'))
    """
    _check_state(state)
    _check_proposal(proposal)
    x, y, mask = _check_data(x, y, mask)
    if isinstance(rng_key_or_randomness, SplitMergeRandomness):
        rand = rng_key_or_randomness
    else:
        validation.check_key(rng_key_or_randomness, "rng_key_or_randomness")
        rand = split_merge_randomness(rng_key_or_randomness, x.shape[0], restricted_scans)
    _check_state(state, x.shape[0], rand, jitter)
    return _split_merge_jit(x, y, mask, state, rand, jitter, proposal=proposal)


@functools.partial(jax.jit, static_argnames=("proposal",))
def _split_merge_jit(x, y, mask, state, rand, jitter, *, proposal):
    xs, ys, _ = standardize(x, y, mask)
    return _split_merge_core(xs, ys, mask, state, rand, jitter, proposal)


def _check_proposal(proposal):
    if proposal not in _PROPOSALS:
        raise ValueError(f"proposal must be one of {_PROPOSALS}, got {proposal!r}")


def _map_refit(xs, ys, mask, state: RamboState, steps, learning_rate, jitter):
    members = _members(state.assignments, mask, state.log_params.shape[0])
    opt = optax.adam(learning_rate)

    def objective(u, member):
        sf, ls, sn = _unpack(u)
        params = GPParams(sf, ls, sn)
        return -log_marginal_unchecked(xs, ys, member, params, jitter) - rambo_log_prior(u)

    def one(u, member, active):
        def body(_, carry):
            u, opt_state = carry
            grad = jax.grad(objective)(u, member)
            updates, opt_state = opt.update(grad, opt_state, u)
            return optax.apply_updates(u, updates), opt_state

        new_u, _ = jax.lax.fori_loop(0, steps, body, (u, opt.init(u)))
        ok = jnp.all(jnp.isfinite(new_u)) & jnp.isfinite(objective(new_u, member))
        return jnp.where(active & ok, new_u, u), active & ~ok

    log_params, bad = jax.vmap(one)(state.log_params, members, state.active)
    return state._replace(
        log_params=log_params, nonfinite=state.nonfinite + jnp.sum(bad).astype(jnp.int32)
    )


def rambo_fit(
    rng_key,
    x,
    y,
    mask=None,
    *,
    alpha=2.0,
    num_sweeps: int = 40,
    burn_in: int = 15,
    hyper_update_every: int = 5,
    map_steps: int = 30,
    map_learning_rate=0.01,
    max_clusters: int = 8,
    variant: str = "textbook",
    split_merge_moves: int = 0,
    restricted_scans: int = 3,
    split_merge_proposal: str = "fitted",
    jitter=DEFAULT_JITTER,
) -> tuple[RamboState, RamboFitInfo]:
    """A full RAMBO fit: :func:`rambo_init`, then ``num_sweeps`` Gibbs sweeps with MAP refits.

    Each sweep is followed by ``split_merge_moves`` split-merge moves
    (:func:`rambo_split_merge`; 0, the released sampler, by default), which move many
    assignments at once where single-site Gibbs cannot cross between partitions. After every
    ``hyper_update_every``-th sweep, each active regime's hyper-parameters move to
    their MAP (``map_steps`` Adam steps of ``map_learning_rate`` on the log-parameters). The
    returned state is the last sweep's (the method predicts from it); ``burn_in`` only sets
    which sweeps :attr:`RamboFitInfo.mean_clusters` and :attr:`RamboFitInfo.co_occurrence`
    average. Jittable with the integer
    arguments static. The note's quick setting is 40 sweeps / 15 burn-in, the paper's
    1000 / 500.

    Args:
      rng_key: a ``jax.random`` key.
      x: ``(n, d)`` inputs; y: ``(n,)`` observations; mask: optional ``(n,)`` bool.
      alpha: CRP concentration ``> 0`` (traceable).
      num_sweeps: sweeps (``>= 1``); burn_in: ``0 <= burn_in < num_sweeps``.
      hyper_update_every: sweeps between MAP refits (``>= 1``).
      map_steps: Adam steps per refit (``>= 0``); map_learning_rate: its step size.
      max_clusters: regime slots (``>= 3``); variant: ``"textbook"`` or ``"reference"``.
      split_merge_moves: split-merge moves after each sweep (``>= 0``).
      restricted_scans: intermediate restricted Gibbs scans per move (``>= 0``).
      split_merge_proposal: ``"fitted"`` or ``"prior"`` (see :func:`rambo_split_merge`).
      jitter: added to every noise variance.

    Raises:
      ValueError: ``alpha <= 0``, a concrete mask selecting no observation, non-finite concrete
        observations, or the integer arguments out of range.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> x = jnp.linspace(-1.0, 1.0, 10)[:, None]
      >>> y = jnp.where(x[:, 0] < 0, 0.0, jnp.sin(12 * x[:, 0]))
      >>> state, info = rambo_fit(jax.random.key(0), x, y, num_sweeps=3, burn_in=0)
      >>> info.num_clusters.shape, int(state.count)
      ((3,), 3)
    """
    validation.check_key(rng_key)
    _check_variant(variant)
    num_sweeps = validation.check_positive_int(num_sweeps, "num_sweeps")
    burn_in = validation.check_int(burn_in, "burn_in", minimum=0, maximum=num_sweeps - 1)
    every = validation.check_positive_int(hyper_update_every, "hyper_update_every")
    map_steps = validation.check_int(map_steps, "map_steps", minimum=0)
    validation.check_learning_rate(map_learning_rate, "map_learning_rate")
    x, y, mask = _check_data(x, y, mask)
    _check_alpha(alpha)
    max_clusters = validation.check_int(max_clusters, "max_clusters", minimum=3)
    validation.check_nonnegative(jitter, "jitter")
    moves = validation.check_int(split_merge_moves, "split_merge_moves", minimum=0)
    scans = validation.check_int(restricted_scans, "restricted_scans", minimum=0)
    if split_merge_proposal not in _PROPOSALS:
        raise ValueError(
            f"split_merge_proposal must be one of {_PROPOSALS}, got {split_merge_proposal!r}"
        )
    return _fit_jit(
        rng_key, x, y, mask, jnp.asarray(alpha, x.dtype), jnp.asarray(map_steps, jnp.int32),
        map_learning_rate, jitter, num_sweeps=num_sweeps, burn_in=burn_in, every=every,
        max_clusters=max_clusters, variant=variant, moves=moves, scans=scans,
        proposal=split_merge_proposal,
    )  # fmt: skip


_FIT_STATIC = (
    "num_sweeps", "burn_in", "every", "max_clusters", "variant", "moves", "scans", "proposal",
)  # fmt: skip


@functools.partial(jax.jit, static_argnames=_FIT_STATIC)
def _fit_jit(rng_key, x, y, mask, alpha, map_steps, map_learning_rate, jitter, *, num_sweeps,
             burn_in, every, max_clusters, variant, moves, scans, proposal):  # fmt: skip
    init_key, sweep_key = jax.random.split(rng_key)
    state = _init_jit(init_key, x, y, mask, alpha, max_clusters=max_clusters)
    xs, ys, _ = standardize(x, y, mask)
    n = x.shape[0]
    pair_mask = mask[:, None] & mask[None, :]

    def split_merge(_, carry):
        state, accepted, key = carry
        key, sub = jax.random.split(key)
        rand = split_merge_randomness(sub, n, scans)
        state, info = _split_merge_core(xs, ys, mask, state, rand, jitter, proposal)
        kind = jnp.where(info.proposed_split, 0, 1)
        return state, accepted.at[kind].add(info.accepted.astype(jnp.int32)), key

    def body(carry, inputs):
        state, co, accepted = carry
        s, key = inputs
        # The sweep consumes the key as the released sampler's fit did; the moves a fold of it.
        state, info = _sweep_core(xs, ys, mask, state, sweep_randomness(key, n), variant, jitter)
        move_key = jax.random.fold_in(key, 1)
        if moves:
            state, accepted, _ = jax.lax.fori_loop(
                0, moves, split_merge, (state, accepted, move_key)
            )
        state = jax.lax.cond(
            (s + 1) % every == 0,
            lambda st: _map_refit(xs, ys, mask, st, map_steps, map_learning_rate, jitter),
            lambda st: st,
            state,
        )
        z = state.assignments
        same = (z[:, None] == z[None, :]) & pair_mask
        co = co + jnp.where(s >= burn_in, same.astype(x.dtype), 0.0)
        return (state, co, accepted), (jnp.sum(state.active).astype(jnp.int32), z)

    keys = jax.random.split(sweep_key, num_sweeps)
    init = (state, jnp.zeros((n, n), x.dtype), jnp.zeros(2, jnp.int32))
    (state, co, accepted), (clusters, samples) = jax.lax.scan(
        body, init, (jnp.arange(num_sweeps), keys)
    )
    mean_clusters = jnp.mean(clusters[burn_in:].astype(x.dtype))
    co = co / (num_sweeps - burn_in)
    return state, RamboFitInfo(clusters, mean_clusters, state.nonfinite, co, accepted, samples)
