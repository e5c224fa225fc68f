"""CreDRO: credal ensembles from members trained at several levels of distributional robustness.

Members ``m = 1..M`` minimise a distributionally robust objective (DRO) of their minibatch losses
at relaxation levels ``δ_m`` (how far the i.i.d. train/test assumption is relaxed); their softmax
outputs ``p_m(·|x)`` span the box credal set ``K(x) = {p ∈ Δ_C : l ≤ p ≤ u}``,
``l_c = min_m p_m(c|x)``, ``u_c = max_m p_m(c|x)``. Epistemic uncertainty is the width of ``K``
in entropy: ``EU = H̄ − H̲`` with ``H̄ = max_{p∈K} H(p)`` and ``H̲ = min_{p∈K} H(p)``.

Reconstruction choices (``notes/credro.md``; the paper's code was not available): the DRO family
is CVaR of the top-``⌈δB⌉`` losses with ``δ ∈ (1, 0.8, 0.6, 0.4, 0.2)`` (``δ = 1`` is ERM; KL and
χ² as options), ``M = 5`` members with distinct seeds, the ensemble mean as the prediction,
entropies in base 2, the lower entropy by exact vertex enumeration (``C <= 12``).

References:
  Wang, Faza, Cuzzolin, Chau, Moens, Hallez, "Learning Credal Ensembles via Distributionally
  Robust Optimization" (CreDRO), ICML 2026, arXiv 2602.08470. Levy, Carmon, Duchi, Sidford,
  "Large-Scale Methods for Distributionally Robust Optimization", NeurIPS 2020 (arXiv
  2010.05893). Wang et al., "Credal Wrapper of Model Averaging for Uncertainty Estimation", ICLR
  2025.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.typing import ArrayLike

from jaxlab._src.training import scan_train
from jaxlab._src.validation import (
    check_array,
    check_bool,
    check_callable,
    check_choice,
    check_distribution,
    check_indices,
    check_key,
    check_positive,
    check_positive_int,
    check_real_array,
    is_concrete,
)

__all__ = [
    "DRO_KINDS",
    "accuracy_rejection_curve",
    "auroc",
    "chi2_dro_loss",
    "credal_box",
    "cvar_loss",
    "dro_loss",
    "entropy",
    "entropy_of_mean",
    "epistemic_uncertainty",
    "lower_entropy",
    "mutual_information",
    "tilted_loss",
    "train_credal_ensemble",
    "upper_entropy",
]

DRO_KINDS = ("cvar", "cvar_exact", "kl", "chi2")
MAX_ENUMERATION_CLASSES = 12  # C·2^{C−1} vertices: 24 576 at C = 12
_BISECTION_STEPS = 60  # halves [0, 1] to below float64 resolution (the note's 50-60)
# Slack on sum(lower) <= 1 <= sum(upper): float32 member probabilities sum to 1 within ~1e-6, and
# a box from credal_box satisfies the condition exactly up to that rounding.
_BOX_TOLERANCE = 1e-4


def _losses(losses: ArrayLike) -> jax.Array:
    out = check_array(losses, "losses", kind="floating", ndim=1)
    if out.shape[0] == 0:
        raise ValueError("losses must hold at least one sample")
    return out


def cvar_loss(losses: ArrayLike, *, level: ArrayLike, exact: bool = False) -> jax.Array:
    """CVaR at level ``δ ∈ (0, 1]``: the mean of the ``k = ⌈δB⌉`` largest losses.

    With ``exact=True`` the exact CVaR ``sup {Σ w_i ℓ_i : w ∈ Δ_B, w_i <= 1/(δB)}``: the top
    ``⌊δB⌋`` losses and a fractional atom ``(δB − ⌊δB⌋)/(δB)`` on the next. ``δ = 1`` is the
    mean (ERM); ``δ → 0`` the maximum. ``level`` may be traced (members vmapped with different
    levels): the losses are sorted and masked, never sliced by a Python ``k``.

    Args:
      losses: ``(B,)`` per-sample losses.
      level: ``δ ∈ (0, 1]`` (ArrayLike).
      exact: the fractional-atom form (static).

    Returns:
      The scalar objective (differentiable in ``losses``).

    Examples:
      >>> import jax.numpy as jnp
      >>> losses = jnp.array([1.0, 2.0, 3.0, 4.0, 5.0])
      >>> [round(float(cvar_loss(losses, level=d)), 4) for d in (1.0, 0.5, 0.4)]
      [3.0, 4.0, 4.5]
      >>> round(float(cvar_loss(losses, level=0.5, exact=True)), 4)
      4.2

    References:
      Wang et al., CreDRO, ICML 2026; Rockafellar & Uryasev (2000).
    """
    losses = _losses(losses)
    check_real_array(level, "level", minimum=0.0, maximum=1.0, include_minimum=False)
    exact = check_bool(exact, "exact")
    size = losses.shape[0]
    top = jnp.sort(losses)[::-1]
    rank = jnp.arange(size, dtype=losses.dtype)
    mass = jnp.asarray(level, losses.dtype) * size
    if exact:
        weights = jnp.clip(mass - rank, 0.0, 1.0) / mass
    else:
        k = jnp.maximum(jnp.ceil(mass - 1e-6), 1.0)  # 1e-6: δB = 3 in float32 is not 3.0000002
        weights = (rank < k).astype(losses.dtype) / k
    return jnp.sum(weights * top)


def tilted_loss(losses: ArrayLike, *, temperature: ArrayLike) -> jax.Array:
    """KL-DRO (exponential tilting): ``τ log((1/B) Σ_i exp(ℓ_i/τ))``; ``τ = ∞`` is the mean.

    Its gradient weights the samples by ``softmax(ℓ/τ)`` (the exact gradient of this form).

    Args:
      losses: ``(B,)``.
      temperature: ``τ > 0`` or ``inf`` (ArrayLike).

    Returns:
      The scalar objective.

    Examples:
      >>> import jax.numpy as jnp
      >>> losses = jnp.array([1.0, 2.0, 3.0, 4.0, 5.0])
      >>> [round(float(tilted_loss(losses, temperature=t)), 3) for t in (jnp.inf, 1.0, 0.01)]
      [3.0, 3.842, 4.984]

    References:
      Wang et al., CreDRO, ICML 2026 (KL option); Li et al., "Tilted Empirical Risk Minimization",
      ICLR 2021.
    """
    losses = _losses(losses)
    if is_concrete(temperature):
        t = check_array(temperature, "temperature", kind="real", host=True).astype(float)
        if np.any(np.isnan(t) | (t <= 0)):
            raise ValueError(f"temperature must be > 0 (inf: the mean), got {t.tolist()}")
    tau = jnp.asarray(temperature, losses.dtype)
    finite = jnp.isfinite(tau)
    safe = jnp.where(finite, tau, 1.0)
    tilted = safe * (jax.nn.logsumexp(losses / safe) - math.log(losses.shape[0]))
    return jnp.where(finite, tilted, jnp.mean(losses))


def chi2_dro_loss(losses: ArrayLike, *, radius: ArrayLike) -> jax.Array:
    """χ²-DRO: ``sup {Σ w_i ℓ_i : w ∈ Δ_B, ½ mean((Bw − 1)²) <= ρ}`` through its dual.

    ``min_η √(1 + 2ρ) √(mean (ℓ_i − η)₊²) + η`` (Levy et al.), convex in ``η``: bisection on its
    derivative (60 steps) between a point below the root and ``max ℓ`` (where the value is the
    maximum once ``1 + 2ρ >= B``); the gradient in ``ℓ`` through the optimal ``η`` is the
    envelope theorem's (``η`` held fixed). ``ρ = 0`` is the mean.

    Args:
      losses: ``(B,)``.
      radius: ``ρ >= 0`` (ArrayLike).

    Returns:
      The scalar objective.

    Examples:
      >>> import jax.numpy as jnp
      >>> losses = jnp.array([1.0, 2.0, 3.0, 4.0, 5.0])
      >>> [round(float(chi2_dro_loss(losses, radius=r)), 4) for r in (0.0, 0.1, 0.5, 2.0)]
      [3.0, 3.6325, 4.3651, 5.0]

    References:
      Levy, Carmon, Duchi, Sidford, NeurIPS 2020 (arXiv 2010.05893), the χ² dual.
    """
    losses = _losses(losses)
    check_real_array(radius, "radius", minimum=0.0)
    rho = jnp.asarray(radius, losses.dtype)
    c = jnp.sqrt(1.0 + 2.0 * rho)
    stopped = jax.lax.stop_gradient(losses)
    mean, std = jnp.mean(stopped), jnp.std(stopped)
    safe_rho = jnp.maximum(rho, 1e-12)

    def slope(eta):  # the dual's derivative in η (increasing)
        excess = jnp.maximum(stopped - eta, 0.0)
        root = jnp.sqrt(jnp.mean(excess**2))
        return 1.0 - c * jnp.mean(excess) / jnp.maximum(root, 1e-30)

    # With every sample active the root is μ − σ/√(2ρ): below it the slope is negative.
    low = jnp.minimum(mean - std / jnp.sqrt(2.0 * safe_rho), jnp.min(stopped)) - 1.0
    high = jnp.max(stopped)

    def bisect(_, bounds):
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        negative = slope(mid) < 0
        return jnp.where(negative, mid, lo), jnp.where(negative, hi, mid)

    lo, hi = jax.lax.fori_loop(0, _BISECTION_STEPS, bisect, (low, high))
    eta = jax.lax.stop_gradient(0.5 * (lo + hi))
    value = c * jnp.sqrt(jnp.mean(jnp.maximum(losses - eta, 0.0) ** 2)) + eta
    return jnp.where(rho > 0, value, jnp.mean(losses))


def dro_loss(losses: ArrayLike, *, kind: str, level: ArrayLike) -> jax.Array:
    """A member's objective: ``kind`` ``"cvar"``/``"cvar_exact"`` (δ), ``"kl"`` (τ), ``"chi2"`` (ρ).

    Args:
      losses: ``(B,)``.
      kind: one of :data:`DRO_KINDS` (static).
      level: the relaxation parameter of that kind (ArrayLike, may be traced).

    Returns:
      The scalar objective.

    Examples:
      >>> import jax.numpy as jnp
      >>> float(dro_loss(jnp.array([1.0, 2.0, 3.0, 4.0, 5.0]), kind="cvar", level=0.4))
      4.5

    References:
      Wang et al., CreDRO, ICML 2026.
    """
    check_choice(kind, "kind", DRO_KINDS)
    if kind == "cvar":
        return cvar_loss(losses, level=level)
    if kind == "cvar_exact":
        return cvar_loss(losses, level=level, exact=True)
    if kind == "kl":
        return tilted_loss(losses, temperature=level)
    return chi2_dro_loss(losses, radius=level)  # kind == "chi2", the last of DRO_KINDS


def train_credal_ensemble(
    apply_fn: Callable[[Any, jax.Array], jax.Array],
    init_params: Any,
    inputs: ArrayLike,
    labels: ArrayLike,
    rng_key: jax.Array,
    *,
    levels: ArrayLike,
    kind: str = "cvar",
    optimizer: optax.GradientTransformation | None = None,
    steps: int = 600,
    batch_size: int = 64,
    warmup_fraction: ArrayLike = 0.0,
) -> tuple[Any, jax.Array]:
    """Trains ``M`` members at once (``jax.vmap``), member ``m`` on ``dro_loss(·, level=δ_m)``.

    Each step, member ``m`` draws its own minibatch (``batch_size`` indices with replacement,
    from its key), computes per-sample cross-entropies of ``apply_fn(params_m, x)``'s logits
    and takes one optimizer step on the DRO objective (ERM during the first ``warmup_fraction``
    of the steps). Levels all at ERM (``δ = 1``) with distinct initialisations is the deep
    ensemble. ``jax.jit``-compatible: ``levels`` and ``warmup_fraction`` may be traced.

    Args:
      apply_fn: ``(params, x (B, d)) -> logits (B, C)``.
      init_params: the members' parameters stacked on a leading axis of size ``M``.
      inputs: ``(N, d)`` training inputs.
      labels: ``(N,)`` integer labels.
      rng_key: a ``jax.random`` key (minibatches).
      levels: ``(M,)`` relaxation levels of ``kind``.
      kind: one of :data:`DRO_KINDS` (static).
      optimizer: default ``optax.adam(1e-3)`` (the note's).
      steps: optimizer steps (static).
      batch_size: minibatch size (static).
      warmup_fraction: ERM warm-up fraction in ``[0, 1]`` (the note's option; default 0).

    Returns:
      ``(params, losses)``: the trained stacked params and the ``(steps, M)`` objective values.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> apply = lambda p, x: x @ p["w"]
      >>> init = {"w": jnp.zeros((3, 2, 2))}  # 3 members, a linear model on 2 inputs
      >>> x = jnp.array([[1.0, 0.0], [0.0, 1.0]]); y = jnp.array([0, 1])
      >>> params, losses = train_credal_ensemble(apply, init, x, y, jax.random.key(0),
      ...                                        levels=jnp.array([1.0, 0.5, 0.5]), steps=50,
      ...                                        batch_size=2)
      >>> losses.shape, bool(jnp.all(losses[-1] < losses[0]))
      ((50, 3), True)

    References:
      Wang et al., CreDRO, ICML 2026.
    """
    check_callable(apply_fn, "apply_fn", signature="apply_fn(params, x) -> logits")
    check_key(rng_key)
    check_choice(kind, "kind", DRO_KINDS)
    steps = check_positive_int(steps, "steps")
    batch_size = check_positive_int(batch_size, "batch_size")
    check_real_array(warmup_fraction, "warmup_fraction", minimum=0.0, maximum=1.0)
    x = check_array(inputs, "inputs", kind="floating", ndim=2)
    y = check_array(labels, "labels", kind="integer", ndim=1)
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"inputs {x.shape} and labels {y.shape} differ in the number of samples")
    levels = check_array(levels, "levels", kind="real", ndim=1)
    if is_concrete(levels):
        for i, level in enumerate(np.asarray(levels, np.float64).tolist()):
            try:
                dro_loss(jnp.zeros(1), kind=kind, level=level)
            except ValueError as err:
                raise ValueError(f"levels[{i}] = {level} is not a {kind!r} level: {err}") from None
    sizes = {np.shape(leaf)[0] if np.ndim(leaf) else None for leaf in jax.tree.leaves(init_params)}
    if sizes != {levels.shape[0]}:
        raise ValueError(
            f"init_params must stack the members on a leading axis of size len(levels) = "
            f"{levels.shape[0]}, got leading sizes {sorted(map(str, sizes))}"
        )
    tx = optax.adam(1e-3) if optimizer is None else optimizer
    if not isinstance(tx, optax.GradientTransformation):
        raise TypeError(f"optimizer must be an optax.GradientTransformation, got {optimizer!r}")
    warm_steps = jnp.asarray(warmup_fraction, jnp.float32) * steps
    # One abstract call (no FLOPs) on the first member: logits (batch, classes), labels in range.
    member = jax.tree.map(lambda leaf: leaf[0], init_params)
    logits = jax.eval_shape(apply_fn, member, x[:1])
    if len(getattr(logits, "shape", ())) != 2 or logits.shape[0] != 1:
        raise ValueError(f"apply_fn must return logits of shape (batch, classes), got "
                         f"{getattr(logits, 'shape', logits)} for a batch of 1")  # fmt: skip
    check_indices(y, "labels", logits.shape[1], "the number of classes apply_fn returns")

    def objective(params, batch_x, batch_y, level, erm):
        logits = apply_fn(params, batch_x)
        per_sample = optax.softmax_cross_entropy_with_integer_labels(logits, batch_y)
        return jnp.where(erm, jnp.mean(per_sample), dro_loss(per_sample, kind=kind, level=level))

    # Member m's minibatch at step t comes from split(split(rng_key, steps)[t], M)[m], so each
    # member trains on its own stream. One shared loop over the steps with the members stacked:
    # each member's own optimizer state (the transform vmapped over the members, so a transform
    # with a global statistic, e.g. clip_by_global_norm, sees one member) and its own gradient
    # (the gradient of the sum of independent member objectives).
    step_keys = jax.random.split(rng_key, steps)
    member_keys = jax.vmap(lambda key: jax.random.split(key, levels.shape[0]))(step_keys)
    times = jnp.arange(steps, dtype=jnp.float32)

    def member_objective(params, key, level, erm):
        index = jax.random.randint(key, (batch_size,), 0, x.shape[0])
        return objective(params, x[index], y[index], level, erm)

    def loss_fn(params, batch):
        keys, t = batch
        values = jax.vmap(member_objective, in_axes=(0, 0, 0, None))(
            params, keys, levels, t < warm_steps
        )
        return jnp.sum(values), values

    per_member = optax.GradientTransformation(jax.vmap(tx.init), jax.vmap(tx.update))
    result = scan_train(loss_fn, init_params, per_member, (member_keys, times), steps, has_aux=True)
    return result.params, result.aux


# --------------------------------------------------------------------------------------------
# The credal set and its uncertainty measures.


def _probs(member_probs: ArrayLike) -> jax.Array:
    probs = check_array(member_probs, "member_probs", kind="floating")
    if probs.ndim < 2:
        raise ValueError(f"member_probs must be (M, ..., C), got shape {probs.shape}")
    check_distribution(probs, "member_probs")
    return probs


def _plogp(p: jax.Array) -> jax.Array:
    """``−p log p`` with ``0 log 0 := 0`` (natural log); NaN for a NaN or negative ``p``."""
    safe = jnp.where(p > 0, p, 1.0)
    return jnp.where(p > 0, -p * jnp.log(safe), jnp.where(p == 0, 0.0, jnp.nan))


def _check_base(base):
    if check_positive(base, "base") == 1.0:
        raise ValueError("base must be > 0 and != 1 (log base 1 is 0), got 1.0")


def entropy(probs: ArrayLike, *, base: ArrayLike = 2.0) -> jax.Array:
    """Shannon entropy ``−Σ_c p_c log_base p_c`` over the last axis (``0 log 0 = 0``).

    ``probs`` must be distributions over the last axis (checked when concrete: finite, in
    ``[0, 1]``, summing to 1); a traced NaN or negative entry gives NaN, not a finite number.

    Examples:
      >>> import jax.numpy as jnp
      >>> float(entropy(jnp.array([0.5, 0.25, 0.25])))
      1.5
    """
    _check_base(base)
    p = check_array(probs, "probs", kind="floating")
    if p.ndim < 1:
        raise ValueError(f"probs must have a class axis (the last), got shape {p.shape}")
    check_distribution(p, "probs")  # traced: a NaN or negative entry gives NaN
    return jnp.sum(_plogp(p), axis=-1) / jnp.log(jnp.asarray(base, p.dtype))


def credal_box(member_probs: ArrayLike) -> tuple[jax.Array, jax.Array]:
    """The box credal set ``(l, u)``: class-wise minimum and maximum over the members (axis 0).

    Examples:
      >>> import jax.numpy as jnp
      >>> probs = jnp.array([[0.7, 0.2, 0.1], [0.5, 0.3, 0.2], [0.6, 0.1, 0.3]])
      >>> [[round(float(x), 2) for x in v] for v in credal_box(probs)]
      [[0.5, 0.1, 0.1], [0.7, 0.3, 0.3]]

    References:
      Wang et al., "Credal Wrapper of Model Averaging", ICLR 2025 (the box set).
    """
    probs = _probs(member_probs)
    return jnp.min(probs, axis=0), jnp.max(probs, axis=0)


def _check_box(lower, upper):
    lower = check_array(lower, "lower", kind="floating")
    upper = check_array(upper, "upper", kind="floating")
    if lower.shape != upper.shape or lower.ndim < 1:
        raise ValueError(f"lower {lower.shape} and upper {upper.shape} must share a shape (..., C)")
    if is_concrete(lower) and is_concrete(upper):
        low, up = np.asarray(lower, np.float64), np.asarray(upper, np.float64)
        for name, v in (("lower", low), ("upper", up)):
            if not np.all(np.isfinite(v)) or v.min() < 0 or v.max() > 1:
                raise ValueError(f"{name} must be finite probabilities in [0, 1]")
        if np.any(low > up):
            raise ValueError("lower must be <= upper entrywise (the box is empty)")
        tol = _BOX_TOLERANCE
        if np.any(low.sum(-1) > 1 + tol) or np.any(up.sum(-1) < 1 - tol):
            raise ValueError(
                "lower and upper must bound a distribution: sum(lower) <= 1 <= sum(upper) over "
                f"the last axis, got sum(lower) up to {low.sum(-1).max():.4g} and sum(upper) down "
                f"to {up.sum(-1).min():.4g}"
            )
    return lower, upper


def _box_feasible(lower: jax.Array, upper: jax.Array) -> jax.Array:
    """Traced boxes: whether each ``(l, u)`` contains a distribution (NaN reported otherwise)."""
    tol = _BOX_TOLERANCE
    return (
        jnp.all(lower <= upper, axis=-1)
        & (jnp.sum(lower, -1) <= 1 + tol)
        & (jnp.sum(upper, -1) >= 1 - tol)
        & jnp.all((lower >= 0) & (upper <= 1), axis=-1)
    )


def upper_entropy(lower: ArrayLike, upper: ArrayLike, *, base: ArrayLike = 2.0) -> jax.Array:
    """``H̄ = max_{l<=p<=u, Σp=1} H(p)`` by water-filling: ``p_c = clip(τ*, l_c, u_c)``.

    ``τ*`` solves ``Σ_c clip(τ, l_c, u_c) = 1`` (monotone in ``τ``; 60 bisection steps on
    ``[0, 1]``); the box must contain a distribution (``Σl <= 1 <= Σu``, true for a box built
    from members by :func:`credal_box`). A concrete box that does not (``l > u`` somewhere,
    ``Σl > 1`` or ``Σu < 1``) raises ``ValueError``; a traced one gives NaN.

    Examples:
      >>> import jax.numpy as jnp
      >>> round(float(upper_entropy(jnp.array([0.5, 0.1, 0.1]), jnp.array([0.7, 0.3, 0.3]))), 6)
      1.5

    References:
      Abellán & Moral (2003), maximum entropy on credal sets; Wang et al., CreDRO, ICML 2026.
    """
    _check_base(base)
    lower, upper = _check_box(lower, upper)

    def bisect(_, bounds):
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        below = jnp.sum(jnp.clip(mid[..., None], lower, upper), axis=-1) < 1.0
        return jnp.where(below, mid, lo), jnp.where(below, hi, mid)

    zeros = jnp.zeros(lower.shape[:-1], lower.dtype)
    lo, hi = jax.lax.fori_loop(0, _BISECTION_STEPS, bisect, (zeros, zeros + 1.0))
    p = jnp.clip((0.5 * (lo + hi))[..., None], lower, upper)
    value = jnp.sum(_plogp(p), axis=-1) / jnp.log(jnp.asarray(base, lower.dtype))
    return jnp.where(_box_feasible(lower, upper), value, jnp.nan)


def lower_entropy(lower: ArrayLike, upper: ArrayLike, *, base: ArrayLike = 2.0) -> jax.Array:
    """``H̲ = min_{l<=p<=u, Σp=1} H(p)`` by exact enumeration of the box's vertices.

    A concave function's minimum over a polytope is at a vertex: every coordinate at ``l_c`` or
    ``u_c`` except one free coordinate ``1 − Σ(others)``, feasible when it lies in
    ``[l_free, u_free]``. All ``C·2^{C−1}`` candidates are scored (a precomputed ``{0,1}^{C−1}``
    table; ``C <= 12``, larger ``C`` raises: a greedy heuristic is not offered). A box that
    contains no distribution raises when concrete and gives NaN when traced.

    Examples:
      >>> import jax.numpy as jnp
      >>> round(float(lower_entropy(jnp.array([0.5, 0.1, 0.1]), jnp.array([0.7, 0.3, 0.3]))), 5)
      1.15678

    References:
      Wang et al., CreDRO, ICML 2026 (EU = H̄ − H̲).
    """
    _check_base(base)
    lower, upper = _check_box(lower, upper)
    classes = lower.shape[-1]
    if classes > MAX_ENUMERATION_CLASSES:
        raise ValueError(
            f"lower_entropy enumerates C·2^(C-1) vertices: the number of classes must be <= "
            f"{MAX_ENUMERATION_CLASSES}, got {classes}"
        )
    patterns = jnp.asarray(list(itertools.product((0.0, 1.0), repeat=classes - 1)), lower.dtype)
    others = np.array([[c for c in range(classes) if c != j] for j in range(classes)])
    if classes == 1:
        others = np.zeros((1, 0), int)
        patterns = jnp.zeros((1, 0), lower.dtype)

    def one(low, up):  # (C,), (C,) -> scalar
        lo, hi = low[others], up[others]  # (C, C-1)
        sums = jnp.sum(lo, 1)[None] + patterns @ (hi - lo).T  # (2^{C-1}, C)
        h = jnp.sum(_plogp(lo), 1)[None] + patterns @ (_plogp(hi) - _plogp(lo)).T
        free = 1.0 - sums
        tol = 1e-6 if lower.dtype == jnp.float32 else 1e-12
        feasible = (free >= low[None] - tol) & (free <= up[None] + tol)
        h = h + _plogp(jnp.clip(free, 0.0, 1.0))
        return jnp.min(jnp.where(feasible, h, jnp.inf))

    flat_l, flat_u = lower.reshape(-1, classes), upper.reshape(-1, classes)
    values = jax.lax.map(lambda lu: one(*lu), (flat_l, flat_u), batch_size=256)
    value = values.reshape(lower.shape[:-1]) / jnp.log(jnp.asarray(base, lower.dtype))
    return jnp.where(_box_feasible(lower, upper), value, jnp.nan)


def epistemic_uncertainty(member_probs: ArrayLike, *, base: ArrayLike = 2.0) -> jax.Array:
    """``EU = H̄ − H̲`` of the members' box credal set (``>= 0``; ``0`` iff the members agree).

    Args:
      member_probs: ``(M, ..., C)`` softmax outputs, the member axis first.
      base: the logarithm's base (2: bits).

    Returns:
      ``(...)`` epistemic uncertainties (total ``H̄`` and aleatoric ``H̲`` from
      :func:`upper_entropy` / :func:`lower_entropy` of :func:`credal_box`).

    Examples:
      >>> import jax.numpy as jnp
      >>> probs = jnp.array([[0.7, 0.2, 0.1], [0.5, 0.3, 0.2], [0.6, 0.1, 0.3]])
      >>> round(float(epistemic_uncertainty(probs)), 5)
      0.34322

    References:
      Wang et al., CreDRO, ICML 2026.
    """
    lower, upper = credal_box(member_probs)
    eu = upper_entropy(lower, upper, base=base) - lower_entropy(lower, upper, base=base)
    return jnp.maximum(eu, 0.0)


def entropy_of_mean(member_probs: ArrayLike, *, base: ArrayLike = 2.0) -> jax.Array:
    """``H(p̄)``, the entropy of the ensemble mean (total uncertainty of a deep ensemble).

    Examples:
      >>> import jax.numpy as jnp
      >>> probs = jnp.array([[0.7, 0.2, 0.1], [0.5, 0.3, 0.2], [0.6, 0.1, 0.3]])
      >>> round(float(entropy_of_mean(probs)), 6)
      1.370951
    """
    return entropy(jnp.mean(_probs(member_probs), axis=0), base=base)


def mutual_information(member_probs: ArrayLike, *, base: ArrayLike = 2.0) -> jax.Array:
    """``MI = H(p̄) − (1/M) Σ_m H(p_m)``, the deep ensemble's epistemic uncertainty.

    Examples:
      >>> import jax.numpy as jnp
      >>> probs = jnp.array([[0.7, 0.2, 0.1], [0.5, 0.3, 0.2], [0.6, 0.1, 0.3]])
      >>> round(float(mutual_information(probs)), 6)
      0.058378

    References:
      Lakshminarayanan, Pritzel, Blundell, "Simple and Scalable Predictive Uncertainty
      Estimation using Deep Ensembles", NeurIPS 2017 (arXiv 1612.01474).
    """
    probs = _probs(member_probs)
    mi = entropy_of_mean(probs, base=base) - jnp.mean(entropy(probs, base=base), axis=0)
    return jnp.maximum(mi, 0.0)


# --------------------------------------------------------------------------------------------
# Downstream metrics.


def auroc(scores_in: ArrayLike, scores_out: ArrayLike) -> float:
    """Area under the ROC curve for detecting ``scores_out`` (positive) against ``scores_in``.

    The rank (Mann-Whitney) formula with ties counted one half: ``P(s_out > s_in) + ½P(=)``.
    Computed on the host in float64.

    Examples:
      >>> auroc([0.1, 0.2, 0.3], [0.25, 0.4])
      0.8333333333333334
    """
    s_in = np.asarray(check_array(scores_in, "scores_in", kind="real", ndim=1, host=True), float)
    s_out = np.asarray(check_array(scores_out, "scores_out", kind="real", ndim=1, host=True),
                       float)  # fmt: skip
    if s_in.size == 0 or s_out.size == 0:
        raise ValueError("scores_in and scores_out must each hold at least one score")
    if not (np.all(np.isfinite(s_in)) and np.all(np.isfinite(s_out))):
        raise ValueError("scores_in and scores_out must be finite (a NaN score has no rank)")
    both = np.concatenate([s_in, s_out])
    order = np.argsort(both, kind="mergesort")
    ranks = np.empty(both.size)
    sorted_scores = both[order]
    # Average ranks over ties.
    unique, start, counts = np.unique(sorted_scores, return_index=True, return_counts=True)
    average = start + (counts + 1) / 2.0
    ranks[order] = np.repeat(average, counts)
    rank_sum = ranks[s_in.size :].sum()
    return float((rank_sum - s_out.size * (s_out.size + 1) / 2.0) / (s_in.size * s_out.size))


def accuracy_rejection_curve(
    correct: ArrayLike, scores: ArrayLike, rejection_rates: Sequence[float] | ArrayLike
) -> np.ndarray:
    """Accuracy of the retained samples after rejecting the most uncertain fraction ``r``.

    For each ``r``, the ``n − ⌊r n⌋`` samples with the lowest ``scores`` are kept (ties broken by
    a stable sort, so the result is reproducible); ``r`` in ``[0, 1)``.

    Args:
      correct: ``(n,)`` booleans (or 0/1): the prediction was right.
      scores: ``(n,)`` uncertainty scores (higher = rejected first).
      rejection_rates: the rates ``r``.

    Returns:
      float64 accuracies, one per rate (their mean is the accuracy-rejection AUC).

    Examples:
      >>> accuracy_rejection_curve([1, 0, 1, 1], [0.1, 0.9, 0.2, 0.3], [0.0, 0.25, 0.5])
      array([0.75, 1.  , 1.  ])
    """
    if correct is None or np.asarray(correct).dtype != bool:
        correct = check_array(correct, "correct", kind="real", host=True)
    hits = np.asarray(correct, dtype=float)
    if hits.size and not np.all((hits == 0) | (hits == 1)):
        raise ValueError("correct must hold booleans or 0/1 (the prediction was right)")
    s = np.asarray(check_array(scores, "scores", kind="real", ndim=1, host=True), float)
    rates = check_real_array(rejection_rates, "rejection_rates", minimum=0.0, maximum=1.0,
                             include_maximum=False)  # fmt: skip
    if hits.shape != s.shape or hits.ndim != 1 or hits.size == 0:
        raise ValueError(f"correct {hits.shape} and scores {s.shape} must be equal non-empty (n,)")
    if not np.all(np.isfinite(s)):
        raise ValueError("scores must be finite")
    kept = hits[np.argsort(s, kind="stable")]
    n = s.size
    return np.array([kept[: n - math.floor(r * n)].mean() for r in np.atleast_1d(rates)])
