"""UCPO: uncertainty-aware advantages for GRPO with right / wrong / uncertain outcomes.

Ternary Advantage Decoupling (TAD) normalises the deterministic rollouts (right, wrong) apart
from the uncertain ones (abstentions), and the Dynamic Uncertainty Reward Adjustment (DURA) gain
``γ(q)`` sets the abstentions' advantage from the group's mix; Non-Ternary Filtering (NTF) drops
groups without both a right and a wrong rollout. The fixed-reward baseline (GRPO-UC) is
:func:`ternary_rewards` with GRPO's z-score.

The paper leaves several choices open; each is documented where it is made (``notes/ucpo.md``):
suppression weight ``w = 1``, ``ε = 1e-6``, the population std, rewards right = 1 / wrong = 0
(TAD is invariant to their affine rescaling), and the low-resource extension (LRE) off by
default with a placeholder form (its formula is unpublished).

References:
  Zeng et al., *UCPO: Uncertainty-Aware Policy Optimization*, ICML 2026, arXiv 2601.22648.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from jaxlab._src.validation import (
    check_array,
    check_bool,
    check_nonnegative,
    check_probability,
    check_real,
    is_concrete,
)

__all__ = [
    "INVALID",
    "RIGHT",
    "UNCERTAIN",
    "WRONG",
    "answer_metrics",
    "dynamic_uncertainty_gain",
    "ternary_rewards",
    "ucpo_advantages",
]

# Outcome labels of a rollout (int32): verified right, verified wrong, explicit abstention.
RIGHT, WRONG, UNCERTAIN = 0, 1, 2
# The label of a traced out-of-range action (jaxlab.rl.ternary_labels): rewards and advantages
# built from it are NaN, so a GRPO step that meets one is skipped and counted.
INVALID = -1


def _check_labels(labels: Any, name: str = "labels", *, groups: bool = True) -> jax.Array:
    lab = check_array(labels, name, kind="integer")
    if groups:
        if lab.ndim < 1:
            raise ValueError(f"{name} must have a group axis (last), got a scalar")
        if lab.shape[-1] < 2:
            raise ValueError(
                f"{name} must hold groups of at least 2 rollouts (last axis), got group size "
                f"{lab.shape[-1]}"
            )
    if is_concrete(lab) and lab.size:
        values = np.unique(np.asarray(lab))
        if not np.all(np.isin(values, (RIGHT, WRONG, UNCERTAIN))):
            raise ValueError(
                f"{name} must be 0 (right), 1 (wrong) or 2 (uncertain), got values "
                f"{values.tolist()}"
            )
    return lab


def _fractions(lab: jax.Array, dtype=jnp.float32):
    g = lab.shape[-1]
    count = lambda c: jnp.sum(lab == c, axis=-1).astype(dtype)  # noqa: E731
    return count(RIGHT) / g, count(WRONG) / g, count(UNCERTAIN) / g


def ternary_rewards(
    labels: ArrayLike,
    *,
    uncertain_reward: ArrayLike,
    right_reward: ArrayLike = 1.0,
    wrong_reward: ArrayLike = 0.0,
) -> jax.Array:
    """GRPO-UC's fixed rewards: right → 1, uncertain → ``r_u``, wrong → 0.

    Normalised with GRPO's z-score (:func:`jaxlab.rl.group_advantages`), the uncertain
    advantage changes sign with the group's mix: punished in mostly-right groups, rewarded in
    mostly-wrong ones (the failure modes UCPO addresses).

    Examples:
      >>> lab = jnp.array([RIGHT, WRONG, UNCERTAIN])
      >>> ternary_rewards(lab, uncertain_reward=0.2).tolist()  # doctest: +ELLIPSIS
      [1.0, 0.0, 0.2...]

    References:
      Zeng et al., UCPO, arXiv 2601.22648 (the GRPO-UC baseline).
    """
    lab = _check_labels(labels, groups=False)
    for value, name in (
        (uncertain_reward, "uncertain_reward"),
        (right_reward, "right_reward"),
        (wrong_reward, "wrong_reward"),
    ):
        check_real(value, name)
    table = jnp.stack(
        [
            jnp.asarray(right_reward, jnp.float32),
            jnp.asarray(wrong_reward, jnp.float32),
            jnp.asarray(uncertain_reward, jnp.float32),
        ]
    )
    # A traced label outside {0, 1, 2} (INVALID) reads NaN, never a clamped or wrapped entry.
    return table.at[lab].get(mode="fill", fill_value=jnp.nan, wrap_negative_indices=False)


def dynamic_uncertainty_gain(
    labels: ArrayLike, *, suppression_weight: ArrayLike = 1.0, epsilon: ArrayLike = 1e-6
) -> jax.Array:
    """DURA's gain ``γ(q)`` per group (labels ``[..., G]`` → ``[...]``).

    ``γ = [P_W/(P_U + P_W + ε)](1 - P_U) - w [P_R/(P_R + P_W + ε)] P_U`` with ``P_R, P_W, P_U``
    the group's fractions: an abstention incentive when errors dominate (the ``1 - P_U`` factor
    stops it saturating) minus a suppression when the model is mostly right. ``γ ∈ [-w, 1]``.

    Examples:
      >>> lab = jnp.array([RIGHT] * 3 + [WRONG] * 3 + [UNCERTAIN] * 2)
      >>> round(float(dynamic_uncertainty_gain(lab)), 4)  # (3/5)(3/4) - (3/6)(2/8)
      0.325

    References:
      Zeng et al., UCPO, arXiv 2601.22648 (DURA).
    """
    lab = _check_labels(labels)
    check_nonnegative(suppression_weight, "suppression_weight")
    check_nonnegative(epsilon, "epsilon")
    return _gain(*_fractions(lab), suppression_weight, epsilon)


def _gain(p_r, p_w, p_u, w, eps):
    return p_w / (p_u + p_w + eps) * (1.0 - p_u) - w * p_r / (p_r + p_w + eps) * p_u


def ucpo_advantages(
    labels: ArrayLike,
    *,
    suppression_weight: ArrayLike = 1.0,
    epsilon: ArrayLike = 1e-6,
    filter_non_ternary: bool = True,
    low_resource: bool = False,
    batch_smoothing: ArrayLike = 0.5,
    tanh_scale: ArrayLike = 2.0,
) -> tuple[jax.Array, jax.Array]:
    """UCPO's advantages (TAD + DURA + NTF) for labels ``[..., G]``.

    With ``D = {i: ℓ_i ∈ {R, W}}`` and rewards 1 (R) / 0 (W): ``μ_D``, ``s_D`` the mean and
    population std of the rewards in ``D``; ``Â_i = (r_i - μ_D)/(s_D + ε)`` for ``i ∈ D``;
    ``Â_R = (1 - μ_D)/(s_D + ε)``; uncertain rollouts get ``Â_i = γ(q) Â_R``
    (:func:`dynamic_uncertainty_gain`). With no uncertain rollout this is GRPO exactly. NTF
    (``filter_non_ternary``) zeroes groups with ``n_R = 0`` or ``n_W = 0``; without it a group
    with ``n_R = 0`` has ``s_D = 0`` and ``Â_R = 1/ε`` (the explosion NTF exists for).

    LRE (``low_resource``; a placeholder: the paper gives no formula) smooths the fractions
    with the batch's, ``P̃ = β P_group + (1 - β) P_batch`` (``β = batch_smoothing``, the batch
    being every group in ``labels``), and maps ``γ̃ = tanh(κ γ(P̃))`` (``κ = tanh_scale``).

    Args:
      labels: int ``[..., G]`` of :data:`RIGHT`, :data:`WRONG`, :data:`UNCERTAIN`, ``G >= 2``.
      suppression_weight: ``w >= 0``.
      epsilon: the std floor ``ε >= 0``.
      filter_non_ternary: NTF (static flag).
      low_resource: LRE (static flag).
      batch_smoothing: LRE's ``β ∈ [0, 1]``.
      tanh_scale: LRE's ``κ >= 0``.

    Returns:
      ``(advantages [..., G], group_mask [...])`` (``group_mask``: groups kept by NTF).

    Examples:
      >>> lab = jnp.array([RIGHT] * 6 + [WRONG] + [UNCERTAIN])
      >>> adv, kept = ucpo_advantages(lab)
      >>> [round(float(a), 4) for a in adv[5:]], bool(kept)  # Â_R, Â_W, Â_U = γ Â_R
      ([0.4082, -2.4495, 0.1349], True)

    References:
      Zeng et al., UCPO, arXiv 2601.22648 (TAD, DURA, NTF, LRE).
    """
    lab = _check_labels(labels)
    check_nonnegative(suppression_weight, "suppression_weight")
    check_nonnegative(epsilon, "epsilon")
    filter_non_ternary = check_bool(filter_non_ternary, "filter_non_ternary")
    low_resource = check_bool(low_resource, "low_resource")
    check_probability(batch_smoothing, "batch_smoothing")
    check_nonnegative(tanh_scale, "tanh_scale")
    p_r, p_w, p_u = _fractions(lab)
    n_d = (p_r + p_w) * lab.shape[-1]
    mu = jnp.where(n_d > 0, p_r / jnp.maximum(p_r + p_w, 1e-30), 0.0)
    std = jnp.sqrt(jnp.maximum(mu * (1.0 - mu), 0.0))
    a_right = (1.0 - mu) / (std + epsilon)
    a_wrong = -mu / (std + epsilon)
    if low_resource:
        axes = tuple(range(p_r.ndim))
        smooth = lambda p: (
            batch_smoothing * p
            + (1 - batch_smoothing)
            * jnp.mean(  # noqa: E731
                p, axis=axes, keepdims=True
            )
        )
        gain = jnp.tanh(
            tanh_scale * _gain(smooth(p_r), smooth(p_w), smooth(p_u), suppression_weight, epsilon)
        )
    else:
        gain = _gain(p_r, p_w, p_u, suppression_weight, epsilon)
    a_unsure = gain * a_right
    adv = jnp.where(
        lab == RIGHT,
        a_right[..., None],
        jnp.where(lab == WRONG, a_wrong[..., None], a_unsure[..., None]),
    )
    if filter_non_ternary:
        mask = (p_r > 0) & (p_w > 0)
    else:
        mask = jnp.ones(p_r.shape, bool)
    # A group holding a traced label outside {0, 1, 2} (INVALID) gets NaN advantages (counted
    # and skipped by grpo), never the wrong answer's.
    valid = jnp.all((lab == RIGHT) | (lab == WRONG) | (lab == UNCERTAIN), axis=-1, keepdims=True)
    return jnp.where(valid, jnp.where(mask[..., None], adv, 0.0), jnp.nan), mask


def metrics_from_counts(counts: ArrayLike) -> dict[str, jax.Array]:
    """The metrics of :func:`answer_metrics` from (expected) counts ``[n_R, n_W, n_U]``."""
    c = jnp.asarray(counts, jnp.float32)
    n_r, n_w, n_u = c[0], c[1], c[2]
    total = n_r + n_w + n_u
    accuracy = n_r / total
    paq = n_r / (n_r + n_w)  # NaN when nothing was answered: undefined, reported as such
    f1 = jnp.where(paq + accuracy > 0, 2 * paq * accuracy / (paq + accuracy), 0.0)
    return {"accuracy": accuracy, "paq": paq, "uncertainty_ratio": n_u / total, "f1": f1}


def answer_metrics(labels: ArrayLike) -> dict[str, jax.Array]:
    """Accuracy, PAQ, uncertainty ratio and F1 of a set of labelled rollouts.

    ``accuracy = #R/#all``, ``PAQ = #R/(#R + #W)`` (precision on answered questions; NaN when
    nothing was answered), ``uncertainty_ratio = #U/#all``, ``F1 = 2 PAQ acc/(PAQ + acc)`` (the
    note's reading of the paper's metrics, consistent with its ablation rows to about a point).

    Examples:
      >>> m = answer_metrics(jnp.array([RIGHT, RIGHT, WRONG, UNCERTAIN]))
      >>> {k: round(float(v), 4) for k, v in m.items()}
      {'accuracy': 0.5, 'paq': 0.6667, 'uncertainty_ratio': 0.25, 'f1': 0.5714}

    References:
      Zeng et al., UCPO, arXiv 2601.22648 (PAQ, F1, uncertainty ratio).
    """
    lab = _check_labels(labels, groups=False)
    if lab.size == 0:
        raise ValueError("labels must hold at least one rollout, got an empty array")
    counts = jnp.stack([jnp.sum(lab == c) for c in (RIGHT, WRONG, UNCERTAIN)])
    return metrics_from_counts(counts)
