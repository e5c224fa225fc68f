"""The routing-sparsity bound of MoE training, its fit, and a teacher–student MoE task.

Zhu et al. bound MoE training with top-K of M experts by ``O((1 + M/K)/√T)`` after T steps, and
at a fixed FLOP budget R (``T = R / cost(K)``, ``cost(K) = c₀ + c₁K``) by
``O(√(K/R) + M/√(KR))``, quasi-convex in K with an optimum ``K* ∈ [1, M]``. This module holds the
bound's algebra (:func:`optimal_top_k`, :func:`fixed_compute_steps`), the least-squares fit of
its constants to measured losses (:func:`fit_convergence_constants`, :class:`ConvergenceFit`,
:func:`predicted_loss`), the FLOP account of an MoE transformer
(:func:`moe_transformer_flop_constants`) and a teacher–student problem with a known MoE teacher
(:func:`moe_teacher_student_task`), on which the claim is measured.

References:
  Zhu et al., "Rethinking Convergence in MoE Training: The Role of Routing Sparsity", ICML 2026.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import numpy as np
from flax import nnx
from jax.typing import ArrayLike

from jaxlab._src.validation import (
    check_array,
    check_bool,
    check_int,
    check_key,
    check_nonnegative,
    check_positive,
    check_positive_int,
    check_real,
    check_real_array,
)
from jaxlab.nn._moe import MixtureOfExperts
from jaxlab.nn._simplegpt import GPTConfig, ffn_hidden_size

__all__ = [
    "ConvergenceFit",
    "MoETeacherStudentTask",
    "fit_convergence_constants",
    "fixed_compute_steps",
    "moe_teacher_student_task",
    "moe_transformer_flop_constants",
    "optimal_top_k",
    "predicted_loss",
]


def optimal_top_k(
    a: float,
    b: float,
    num_experts: int,
    overhead_flops: float,
    flops_per_expert: float,
    *,
    gamma: float = 0.5,
    clip: bool = True,
) -> float:
    """Minimiser over real K of the fixed-compute bound ``(a + bM/K) ((c₀ + c₁K)/R)^γ``.

    Setting the derivative of ``log(a + bM/K) + γ log(c₀ + c₁K)`` to zero gives
    ``γc₁a K² − (1 − γ)c₁bM K − bMc₀ = 0``, whose positive root is::

        K* = [(1 − γ)c₁bM + √((1 − γ)²c₁²b²M² + 4γc₁abMc₀)] / (2γc₁a).

    At γ = ½ this is the note's ``[c₁bM + √(c₁²b²M² + 8c₁abMc₀)] / (2c₁a)``, and with no overhead
    (``c₀ = 0``) ``K* = (1 − γ)bM/(γa)`` (``bM/a`` at γ = ½). Overhead pushes K* up. The bound is
    quasi-convex in K (decreasing then increasing), so clipping to ``[1, M]`` gives the
    constrained optimum; R does not enter.

    Args:
      a: the bound's K-independent constant (``> 0``).
      b: the constant of the ``M/K`` term (``>= 0``).
      num_experts: M.
      overhead_flops: c₀, FLOPs per token that do not scale with K (router, attention; ``>= 0``).
      flops_per_expert: c₁, FLOPs per token of one active expert (``> 0``).
      gamma: the rate exponent γ in ``T^(-γ)`` (``0 < γ < 1``; ½ in the paper).
      clip: clip to ``[1, M]``.

    Returns:
      K* as a float.

    Examples:
      >>> optimal_top_k(4.0, 1.0, 16, 0.0, 1.0)       # c0 = 0: K* = bM/a
      4.0
      >>> optimal_top_k(1.0, 0.25, 16, 4.0, 1.0)      # (4 + sqrt(144)) / 2
      8.0
      >>> round(optimal_top_k(1.0, 1.0, 16, 4.0, 1.0, clip=False), 3), optimal_top_k(
      ...     1.0, 1.0, 16, 4.0, 1.0)
      (21.856, 16.0)

    References:
      Zhu et al., "Rethinking Convergence in MoE Training: The Role of Routing Sparsity",
      ICML 2026 (the bound); ``notes/moe_topk.md`` (the algebra with overhead).
    """
    a = check_positive(a, "a")
    b = check_nonnegative(b, "b")
    m = float(check_positive_int(num_experts, "num_experts"))
    c0 = check_nonnegative(overhead_flops, "overhead_flops")
    c1 = check_positive(flops_per_expert, "flops_per_expert")
    gamma = check_real(
        gamma, "gamma", minimum=0.0, maximum=1.0, include_minimum=False, include_maximum=False
    )
    clip = check_bool(clip, "clip")
    linear = (1 - gamma) * c1 * b * m
    root = (linear + math.sqrt(linear**2 + 4 * gamma * c1 * a * b * m * c0)) / (2 * gamma * c1 * a)
    return float(min(max(root, 1.0), m)) if clip else float(root)


class ConvergenceFit(NamedTuple):
    """Fitted constants of ``L(K, T) = L∞ + (a + bM/K) T^(-γ)`` and the fit's quality.

    Attributes:
      loss_inf: ``L∞``, the loss floor.
      a: the K-independent constant.
      b: the constant of the ``M/K`` term.
      gamma: the rate exponent γ.
      num_experts: M.
      max_abs_residual: the largest absolute residual of the fit.
      rms_residual: the root-mean-square residual.

    Examples:
      >>> fit = ConvergenceFit(0.5, 10.0, 1.0, 0.5, 16, 0.0, 0.0)
      >>> float(predicted_loss(fit, 16, 100))        # 0.5 + (10 + 1) / 10
      1.6
    """

    loss_inf: float
    a: float
    b: float
    gamma: float
    num_experts: int
    max_abs_residual: float
    rms_residual: float


def _linear_fit(k, t, loss, num_experts, gamma):
    design = np.stack([np.ones_like(k), t**-gamma, num_experts / k * t**-gamma], axis=1)
    coef, *_ = np.linalg.lstsq(design, loss, rcond=None)
    residual = design @ coef - loss
    return coef, residual


def fit_convergence_constants(
    top_k: ArrayLike,
    steps: ArrayLike,
    loss: ArrayLike,
    *,
    num_experts: int,
    gamma: float | None = None,
) -> ConvergenceFit:
    """Least-squares fit of ``L(K, T) = L∞ + (a + bM/K) T^(-γ)`` to measured losses.

    For a fixed γ the model is linear in ``(L∞, a, b)``: ordinary least squares. With
    ``gamma=None`` γ is fitted too, by minimising the residual of that linear fit over
    ``γ ∈ [0.02, 3]`` (variable projection: a bounded scalar search after a log-spaced scan, so
    the global minimum of the profile is found). The constants are not constrained (a negative
    ``L∞`` or ``b`` signals a poorly identified fit; the note saw that for free γ).

    Args:
      top_k: K of each measurement (1-D).
      steps: T of each measurement.
      loss: measured loss (e.g. the seed mean) of each measurement.
      num_experts: M.
      gamma: fixed exponent (½ in the paper), or ``None`` to fit it.

    Returns:
      A :class:`ConvergenceFit`.

    Raises:
      ValueError: mismatched lengths, fewer than 3 (4 with free γ) points, non-positive K or T.

    Examples:
      >>> import numpy as np
      >>> k, t = np.meshgrid([1, 2, 4, 8], [100, 400, 1600])
      >>> truth = 0.3 + (5.0 + 0.5 * 8 / k) / np.sqrt(t)
      >>> fit = fit_convergence_constants(k.ravel(), t.ravel(), truth.ravel(), num_experts=8,
      ...                                 gamma=0.5)
      >>> [round(v, 6) for v in (fit.loss_inf, fit.a, fit.b)]
      [0.3, 5.0, 0.5]
      >>> round(fit_convergence_constants(k.ravel(), t.ravel(), truth.ravel(),
      ...                                 num_experts=8).gamma, 4)
      0.5
    """
    num_experts = check_positive_int(num_experts, "num_experts")
    k = check_array(top_k, "top_k", host=True).astype(np.float64).ravel()
    t = check_array(steps, "steps", host=True).astype(np.float64).ravel()
    y = check_array(loss, "loss", host=True).astype(np.float64).ravel()
    if not (k.shape == t.shape == y.shape):
        raise ValueError(
            f"top_k, steps and loss must have the same length, got {k.size}, {t.size}, {y.size}"
        )
    needed = 3 if gamma is not None else 4
    if k.size < needed:
        raise ValueError(f"need at least {needed} measurements, got {k.size}")
    for name, values in (("top_k", k), ("steps", t)):
        if not np.all(np.isfinite(values) & (values > 0)):
            raise ValueError(f"{name} must be positive and finite entrywise, got {values.tolist()}")
    if not np.all(np.isfinite(y)):
        raise ValueError(f"loss must be finite entrywise, got {y.tolist()}")
    if gamma is None:
        import scipy.optimize

        def objective(g):
            return float(np.sum(_linear_fit(k, t, y, num_experts, g)[1] ** 2))

        grid = np.geomspace(0.02, 3.0, 60)
        best = int(np.argmin([objective(g) for g in grid]))
        low, high = grid[max(best - 1, 0)], grid[min(best + 1, grid.size - 1)]
        gamma = float(
            scipy.optimize.minimize_scalar(
                objective, bounds=(low, high), method="bounded", options={"xatol": 1e-8}
            ).x
        )
    else:
        check_real(gamma, "gamma", minimum=0.0, include_minimum=False)
    coef, residual = _linear_fit(k, t, y, num_experts, float(gamma))
    return ConvergenceFit(
        loss_inf=float(coef[0]),
        a=float(coef[1]),
        b=float(coef[2]),
        gamma=float(gamma),
        num_experts=int(num_experts),
        max_abs_residual=float(np.max(np.abs(residual))),
        rms_residual=float(np.sqrt(np.mean(residual**2))),
    )


def predicted_loss(fit: ConvergenceFit, top_k: ArrayLike, steps: ArrayLike) -> np.ndarray:
    """The fitted ``L∞ + (a + bM/K) T^(-γ)`` at ``(top_k, steps)`` (broadcast, numpy).

    Args:
      fit: a :class:`ConvergenceFit`.
      top_k: K values.
      steps: T values (broadcast against ``top_k``).

    Returns:
      The predicted losses, float64.

    Examples:
      >>> fit = ConvergenceFit(0.0, 1.0, 1.0, 0.5, 4, 0.0, 0.0)
      >>> predicted_loss(fit, [1, 4], 4).tolist()     # (1 + 4/K) / 2
      [2.5, 1.0]
    """
    if not isinstance(fit, ConvergenceFit):
        raise TypeError(f"fit must be a ConvergenceFit, got {type(fit).__name__}")
    k = check_real_array(top_k, "top_k", minimum=0.0, include_minimum=False)
    t = check_real_array(steps, "steps", minimum=0.0, include_minimum=False)
    return fit.loss_inf + (fit.a + fit.b * fit.num_experts / k) * t**-fit.gamma


def fixed_compute_steps(
    top_k_grid: Sequence[int], budget: float, overhead_flops: float, flops_per_expert: float
) -> list[int]:
    """Steps ``T_K = round(R / (c₀ + c₁K))`` that spend the per-token budget R at each K.

    Args:
      top_k_grid: the K values.
      budget: R, training FLOPs per token of the whole run (``> 0``; e.g. ``T · cost(M)``).
      overhead_flops: c₀ (``>= 0``).
      flops_per_expert: c₁ (``> 0``).

    Returns:
      ``T_K`` per K (at least 1), as Python ints.

    Examples:
      >>> c0, c1 = 2 * 16 * 16, 4 * 16 * 32          # the note's student
      >>> fixed_compute_steps([1, 2, 4, 8, 16], 500 * (c0 + 16 * c1), c0, c1)
      [6500, 3611, 1912, 985, 500]
    """
    check_positive(budget, "budget")
    check_nonnegative(overhead_flops, "overhead_flops")
    check_positive(flops_per_expert, "flops_per_expert")
    if isinstance(top_k_grid, str) or not hasattr(top_k_grid, "__iter__"):
        raise TypeError(f"top_k_grid must be a sequence of ints >= 1, got {top_k_grid!r}")
    top_k_grid = [check_int(k, "top_k_grid entries", minimum=1) for k in top_k_grid]
    return [max(1, round(budget / (overhead_flops + flops_per_expert * k))) for k in top_k_grid]


def moe_transformer_flop_constants(config: GPTConfig) -> tuple[int, int]:
    """``(c₀, c₁)`` of the forward FLOPs per token ``c₀ + c₁K`` of a SimpleGPT with MoE FFNs.

    Kaplan et al. (2020) accounting, per layer: the attention projections
    ``2·d·(2H + 2H_kv)·d_h``, the attention context ``2·T·d`` (``T = max_len``) and the router
    ``2·d·M`` go to c₀ with the output head ``2·d·V``; one active expert costs ``4·d·d_ff`` per
    layer (two maps), which is c₁.

    Args:
      config: a :class:`GPTConfig` with ``num_experts >= 1``.

    Returns:
      ``(c₀, c₁)`` as ints.

    Examples:
      >>> from jaxlab.nn import GPTConfig
      >>> gpt = GPTConfig(256, 32, 1, 2, max_len=16, multiple_of=32, num_experts=2,
      ...                 experts_top_k=1, ffn_multiplier=0.25)
      >>> moe_transformer_flop_constants(gpt)  # (8192 + 1024 + 128 + 16384, 4·32·32)
      (25728, 4096)

    References:
      Kaplan et al., "Scaling Laws for Neural Language Models", 2020 (the FLOP account).
    """
    if not isinstance(config, GPTConfig):
        raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
    if config.num_experts < 1:
        raise ValueError(f"config.num_experts must be >= 1 (an MoE FFN), got {config.num_experts}")
    d, t, layers = config.d_model, config.max_len, config.num_layers
    heads, kv_heads, head_dim = config.num_heads, config.kv_heads, config.head_dim
    attention = 2 * d * (2 * heads + 2 * kv_heads) * head_dim + 2 * t * d
    c0 = layers * (attention + 2 * d * config.num_experts) + 2 * d * config.vocab_size
    c1 = layers * 4 * d * ffn_hidden_size(config)
    return int(c0), int(c1)


class MoETeacherStudentTask(NamedTuple):
    """A regression task labelled by a fixed MoE teacher (see :func:`moe_teacher_student_task`).

    Attributes:
      teacher_graphdef: the teacher's ``nnx`` graph definition.
      teacher_params: the teacher's state (merge with ``teacher_graphdef``).
      centres: ``(num_clusters, d)`` centres of the Gaussian input clusters.
      target_noise_std: std of the additive target noise.
      eval_batch: a fixed ``(x, y)`` evaluation set.

    Examples:
      >>> import jax
      >>> task = moe_teacher_student_task(jax.random.key(0), in_features=4, hidden_features=8,
      ...                                 num_experts=4, eval_samples=16)
      >>> x, y = task.sample(jax.random.key(1), 8)
      >>> x.shape, y.shape, task.eval_batch[0].shape
      ((8, 4), (8, 4), (16, 4))
    """

    teacher_graphdef: Any
    teacher_params: Any
    centres: jax.Array
    target_noise_std: float
    eval_batch: tuple[jax.Array, jax.Array]

    def sample(self, rng_key: jax.Array, num_samples: int) -> tuple[jax.Array, jax.Array]:
        """``num_samples`` inputs from the cluster mixture and the teacher's noisy targets."""
        check_key(rng_key)
        num_samples = check_positive_int(num_samples, "num_samples")
        return _sample_teacher(
            rng_key,
            self.centres,
            self.teacher_graphdef,
            self.teacher_params,
            num_samples,
            self.target_noise_std,
        )


def _sample_teacher(key, centres, graphdef, params, num_samples, noise_std):
    k_cluster, k_noise, k_target = jax.random.split(key, 3)
    cluster = jax.random.randint(k_cluster, (num_samples,), 0, centres.shape[0])
    x = centres[cluster] + jax.random.normal(k_noise, (num_samples, centres.shape[1]))
    y = nnx.merge(graphdef, params)(x)[0]
    return x, y + noise_std * jax.random.normal(k_target, y.shape)


def moe_teacher_student_task(
    rng_key: jax.Array,
    *,
    in_features: int = 16,
    hidden_features: int = 32,
    num_experts: int = 8,
    top_k: int = 2,
    router_std: float = 1.0,
    num_clusters: int = 8,
    cluster_std: float = 2.0,
    target_noise_std: float = 0.1,
    eval_samples: int = 4096,
) -> MoETeacherStudentTask:
    """A teacher MoE labelling clustered Gaussian inputs: a task with a known MoE solution.

    The teacher is a :class:`MixtureOfExperts` (``num_experts`` experts, top-``top_k`` with
    renormalised gates ``"topk_softmax"``, router weights ``N(0, router_std²)``, expert weights
    ``N(0, 1/fan_in)``). Inputs are ``x = c_j + ε``, cluster ``j`` uniform among
    ``num_clusters`` centres ``c ~ N(0, cluster_std² I)``, ``ε ~ N(0, I)``; targets are the
    teacher's output plus ``N(0, target_noise_std²)`` noise. A student MoE of the same widths
    with more experts can fit it exactly up to the noise. The key is split into (teacher,
    centres, evaluation set).

    Args:
      rng_key: a ``jax.random`` key.
      in_features: d (inputs and outputs).
      hidden_features: h of every expert.
      num_experts: the teacher's experts.
      top_k: the teacher's K.
      router_std: std of the teacher's router weights.
      num_clusters: input clusters.
      cluster_std: std of the cluster centres.
      target_noise_std: std of the target noise.
      eval_samples: size of the fixed evaluation set.

    Returns:
      A :class:`MoETeacherStudentTask` (``task.sample(key, n)`` draws fresh training data).

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> task = moe_teacher_student_task(jax.random.key(0), target_noise_std=0.0,
      ...                                 eval_samples=64)
      >>> x, y = task.eval_batch
      >>> teacher = nnx.merge(task.teacher_graphdef, task.teacher_params)
      >>> bool(jnp.allclose(teacher(x)[0], y, atol=1e-5))  # noiseless: the teacher's output
      True

    References:
      Zhu et al., "Rethinking Convergence in MoE Training: The Role of Routing Sparsity",
      ICML 2026 (``notes/moe_topk.md``: the teacher–student design).
    """
    check_key(rng_key)
    for name, value in (
        ("in_features", in_features),
        ("hidden_features", hidden_features),
        ("num_experts", num_experts),
        ("num_clusters", num_clusters),
        ("eval_samples", eval_samples),
    ):
        check_positive_int(value, name)
    check_int(top_k, "top_k", minimum=1, maximum=num_experts)
    check_positive(router_std, "router_std")
    check_nonnegative(cluster_std, "cluster_std")
    check_nonnegative(target_noise_std, "target_noise_std")
    k_teacher, k_centres, k_eval = jax.random.split(rng_key, 3)
    teacher = MixtureOfExperts(
        in_features,
        hidden_features,
        num_experts,
        top_k,
        gate="topk_softmax",
        router_init_std=router_std,
        rngs=nnx.Rngs(k_teacher),
    )
    graphdef, params = nnx.split(teacher)
    centres = cluster_std * jax.random.normal(k_centres, (num_clusters, in_features))
    sample = jax.jit(_sample_teacher, static_argnums=(2, 4, 5))
    eval_batch = sample(k_eval, centres, graphdef, params, eval_samples, target_noise_std)
    return MoETeacherStudentTask(graphdef, params, centres, target_noise_std, eval_batch)
