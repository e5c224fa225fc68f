"""DeVA: decoupled variance adaptation, vector (ℓ∞) and matrix (spectral, S∞) forms.

Adam's step factorises as ``m/√v = Γ ⊙ sign(m)`` with a signal-to-noise factor
``Γ = |m|/√v``; DeVA keeps ``Γ`` and swaps the direction for the geometry of the tensor: ``sign``
for vectors (:func:`scale_by_deva_vector`) and the polar factor ``msign(M) = UVᵀ`` for matrices
(:func:`scale_by_deva_matrix`, run in a SOAP eigenbasis). :func:`deva` routes hidden 2-D weights
to the matrix form and everything else (biases, gains, embeddings, the LM head) to a fallback,
the Muon convention.

References:
  Song, Bai, Zhang, Bullins, Gleich, "Decoupling Variance and Scale-Invariant Updates in Adaptive
  Gradient Descent for Unified Vector and Matrix Optimization" (DeVA), ICML 2026,
  arXiv 2602.06880; code: github.com/Tsedao/Decoupled-Variance-Adaptation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.typing import ArrayLike

from jaxlab._src.validation import (
    check_bool,
    check_in_range,
    check_int,
    check_nonnegative,
    check_positive,
)
from jaxlab.optim._newton_schulz import DEFAULT_NS_COEFFS, newton_schulz_msign
from jaxlab.optim._soap import check_betas, eigenbasis_transform, f32

__all__ = [
    "ScaleByDevaMatrixState",
    "ScaleByDevaVectorState",
    "deva",
    "deva_matrix_labels",
    "deva_vector",
    "is_hidden_matrix",
    "quadratic_toy_hessian",
    "scale_by_deva_matrix",
    "scale_by_deva_vector",
]

_FALLBACKS = ("adamw", "deva_vector", None)
# Path entries that mark a 2-D leaf as an embedding or an output head (routed to the fallback).
_NON_HIDDEN_KEYS = ("embed", "head", "wte", "wpe", "lm_out")


def is_hidden_matrix(path, leaf) -> bool:
    """Default rule of :func:`deva_matrix_labels`: a 2-D leaf with no embedding or head in its path.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> params = {"embedding": jnp.zeros((8, 4)), "w": jnp.zeros((4, 4)), "b": jnp.zeros(4)}
      >>> jax.tree_util.tree_map_with_path(is_hidden_matrix, params)
      {'b': False, 'embedding': False, 'w': True}
    """
    if jnp.ndim(leaf) != 2:
        return False
    names = jax.tree_util.keystr(path).lower()
    return not any(key in names for key in _NON_HIDDEN_KEYS)


# --------------------------------------------------------------------------------------------
# Vector (ℓ∞) form.


class ScaleByDevaVectorState(NamedTuple):
    """State of :func:`scale_by_deva_vector`: step count, momentum ``m``, EMA ``v`` of ``m²``.

    Attributes:
      count: updates so far (int32).
      mu: ``m``, float32, shaped like the params.
      nu: ``v``, the EMA of ``m²`` (not of ``g²``), float32.

    Examples:
      >>> import jax.numpy as jnp
      >>> tx = scale_by_deva_vector(b1=0.5, b2=0.5)
      >>> _, state = tx.update(jnp.array([2.0]), tx.init(jnp.zeros(1)))
      >>> int(state.count), state.mu, state.nu  # m = 0.5·2, v = 0.5·m²
      (1, Array([1.], dtype=float32), Array([0.5], dtype=float32))
    """

    count: jax.Array
    mu: optax.Updates
    nu: optax.Updates


def scale_by_deva_vector(
    b1: ArrayLike = 0.9,
    b2: ArrayLike = 0.999,
    eps: ArrayLike = 1e-5,
    *,
    nesterov: bool = False,
    bias_correction: bool = False,
) -> optax.GradientTransformationExtraArgs:
    r"""DeVA-ℓ∞: elementwise variance adaptation times the sign direction.

    Per step with gradient ``g`` (``m = v = 0`` at the start)::

        m ← β₁m + (1−β₁)g
        v ← β₂v + (1−β₂)m²            # the EMA of the squared *momentum*, not of g²
        Γ = √(m²/(v + ε))              # ε inside the root
        u = Γ ⊙ sign(m)                # = m/√(v + ε); Nesterov: sign((1−β₁)g + β₁m)

    With ``bias_correction`` the step is multiplied by ``√(1−β₂ᵗ)/(1−β₁ᵗ)`` (Adam's lr-form
    correction; off by default, as in the reference). The reference has none, so the first steps
    are large: with ``g ≡ 1`` the first step is ``1/√((1−β₂)² + ε/(1−β₁)²)`` (9.53 for
    ``β = (0.9, 0.99)``, tending to ``1/√(1−β₂)`` for large gradients): use a warmup.

    Args:
      b1: momentum ``β₁ ∈ [0, 1)``.
      b2: ``β₂ ∈ [0, 1)`` of the EMA of ``m²``.
      eps: ``ε > 0`` inside the root (reference 1e-5).
      nesterov: use the Nesterov direction for the sign (``Γ`` still uses ``m``).
      bias_correction: multiply by ``√(1−β₂ᵗ)/(1−β₁ᵗ)``.

    Returns:
      An ``optax.GradientTransformationExtraArgs`` (the descent direction; chain a negative lr).

    Examples:
      >>> import jax.numpy as jnp
      >>> tx = scale_by_deva_vector(b1=0.9, b2=0.99)
      >>> params = jnp.zeros(2)
      >>> u, state = tx.update(jnp.ones(2), tx.init(params))  # 0.1/sqrt(1e-4 + 1e-5)
      >>> [round(float(x), 4) for x in u]
      [9.5346, 9.5346]

    References:
      Song et al., "Decoupling Variance and Scale-Invariant Updates in Adaptive Gradient Descent
      for Unified Vector and Matrix Optimization", ICML 2026 (arXiv 2602.06880).
    """
    check_in_range(b1, "b1", 0.0, 1.0)
    check_in_range(b2, "b2", 0.0, 1.0)
    check_positive(eps, "eps")
    check_bool(nesterov, "nesterov")
    check_bool(bias_correction, "bias_correction")

    def init_fn(params):
        zeros = optax.tree.zeros_like(params, dtype=jnp.float32)
        return ScaleByDevaVectorState(count=jnp.zeros([], jnp.int32), mu=zeros, nu=zeros)

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        beta1, beta2, epsilon = f32(b1), f32(b2), f32(eps)
        count = optax.safe_increment(state.count)
        g32 = optax.tree.cast(updates, jnp.float32)
        mu = optax.tree.update_moment(g32, state.mu, beta1, 1)
        nu = optax.tree.update_moment(mu, state.nu, beta2, 2)  # the EMA of m², not of g²

        def step(g, m, v):
            gamma = jnp.sqrt(m * m / (v + epsilon))
            return gamma * (jnp.sign((1.0 - beta1) * g + beta1 * m) if nesterov else jnp.sign(m))

        steps = jax.tree.map(step, g32, mu, nu)
        if bias_correction:
            t = count.astype(jnp.float32)
            steps = optax.tree.scale(jnp.sqrt(1.0 - beta2**t) / (1.0 - beta1**t), steps)
        new_state = ScaleByDevaVectorState(count=count, mu=mu, nu=nu)
        return optax.tree.cast_like(steps, updates), new_state

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def deva_vector(
    learning_rate: optax.ScalarOrSchedule,
    b1: ArrayLike = 0.9,
    b2: ArrayLike = 0.999,
    eps: ArrayLike = 1e-5,
    weight_decay: ArrayLike = 0.0,
    *,
    nesterov: bool = False,
    bias_correction: bool = False,
) -> optax.GradientTransformationExtraArgs:
    r"""DeVA-ℓ∞ with decoupled weight decay: ``x ← x − η(Γ ⊙ sign(m) + λx)``.

    ``optax.chain(scale_by_deva_vector(...), add_decayed_weights(λ), scale_by_learning_rate(η))``;
    see :func:`scale_by_deva_vector` for ``Γ`` (authors' defaults: ``η = 0.02``, ``λ = 0``).

    Args:
      learning_rate: ``η`` (float or schedule).
      b1: ``β₁``.
      b2: ``β₂``.
      eps: ``ε`` inside the root.
      weight_decay: ``λ >= 0``.
      nesterov: Nesterov sign direction.
      bias_correction: see :func:`scale_by_deva_vector`.

    Returns:
      An ``optax.GradientTransformationExtraArgs``.

    Examples:
      >>> import jax.numpy as jnp, optax
      >>> tx = deva_vector(0.1, b1=0.9, b2=0.99)
      >>> params = jnp.ones(2)
      >>> u, _ = tx.update(jnp.array([3.0, -3.0]), tx.init(params), params)
      >>> [round(float(x), 4) for x in u]  # -0.1·m/sqrt(v + 1e-5), m = ±0.3, v = 9e-4
      [-0.9945, 0.9945]

    References:
      Song et al., DeVA, ICML 2026 (arXiv 2602.06880).
    """
    check_nonnegative(weight_decay, "weight_decay")
    return optax.chain(
        scale_by_deva_vector(b1, b2, eps, nesterov=nesterov, bias_correction=bias_correction),
        optax.add_decayed_weights(weight_decay),
        optax.scale_by_learning_rate(learning_rate),
    )


# --------------------------------------------------------------------------------------------
# Matrix (S∞) form.


class ScaleByDevaMatrixState(NamedTuple):
    """State of :func:`scale_by_deva_matrix`: the call count and one float32 tree per statistic.

    Each tree has the params' structure (as optax's ``mu``/``nu``), so the state works under
    ``nnx.Optimizer`` and ``optax.partition``. For a leaf ``W ∈ ℝ^{n×m}``:

    Attributes:
      count: calls so far (int32; the first call only builds the bases).
      mu: momentum ``m`` in the eigenbasis, ``(n, m)``.
      nu: ``V``, the EMA of ``r cᵀ`` (row and column norms of ``m``), ``(n, m)``.
      left: ``L``, the EMA of ``GGᵀ``, ``(n, n)`` (``(0, 0)`` if that side is not rotated).
      right: ``R``, the EMA of ``GᵀG``, ``(m, m)`` (``(0, 0)`` if not rotated).
      basis_left: ``Q_L`` (columns in descending eigenvalue order).
      basis_right: ``Q_R``.

    Examples:
      >>> import jax.numpy as jnp
      >>> state = scale_by_deva_matrix(max_precond_dim=3).init({"w": jnp.zeros((4, 3))})
      >>> state.mu["w"].shape, state.left["w"].shape, state.basis_right["w"].shape
      ((4, 3), (0, 0), (3, 3))
    """

    count: jax.Array
    mu: optax.Updates
    nu: optax.Updates
    left: optax.Updates
    right: optax.Updates
    basis_left: optax.Updates
    basis_right: optax.Updates


def scale_by_deva_matrix(
    b1: ArrayLike = 0.95,
    b2: ArrayLike = 0.95,
    eps: ArrayLike = 1e-8,
    shampoo_beta: ArrayLike | None = None,
    rms_scale: ArrayLike = 0.2,
    *,
    precondition_frequency: int = 10,
    max_precond_dim: int = 10000,
    nesterov: bool = True,
    bias_correction: bool = True,
    ns_steps: int = 5,
    ns_coeffs: Sequence[ArrayLike] = DEFAULT_NS_COEFFS,
    first_step_rescale: bool = True,
) -> optax.GradientTransformationExtraArgs:
    r"""DeVA-S∞: the polar factor of the momentum, scaled by a variance factor, in a SOAP basis.

    For a matrix ``W ∈ ℝ^{n×m}`` with gradient ``G``. The **first call** sets
    ``L = (1−β_s)GGᵀ``, ``R = (1−β_s)GᵀG`` and ``Q_L, Q_R`` to their eigenvectors (descending
    eigenvalues) and returns a **zero** update. Each later call ``t = 1, 2, …``::

        G̃ = Q_Lᵀ G Q_R;   m ← β₁m + (1−β₁)G̃                     (momentum in the eigenbasis)
        r_i = ‖m_{i,:}‖₂, c_j = ‖m_{:,j}‖₂;   V ← β₂V + (1−β₂) r cᵀ
        O = msign(G̃ + β₁(m − G̃))  (Nesterov; else msign(m))        (newton_schulz_msign)
        Γ_ij = √(r_i c_j)/√(V_ij + ε)
        u = √(1−β₂ᵗ)/(1−β₁ᵗ) · Q_L (0.2·√max(n, m)·Γ ⊙ O) Q_Rᵀ

    then ``L, R ← EMA_{β_s}`` of ``GGᵀ, GᵀG`` and, every ``precondition_frequency`` steps, SOAP's
    refresh per side: sort by the estimated eigenvalues ``diag(QᵀLQ)``, permute ``V`` along that
    axis (never rotate it), ``Q ← QR(L·Q_sorted).Q``, and move ``m`` into the new basis. A side
    longer than ``max_precond_dim`` keeps ``Q = I``. With a constant gradient the update is
    ``s_t·0.2·√max(n, m)·msign(G)`` (``s_t = 20.0, 12.81, 9.50, …`` for ``β = 0.95``): the bias
    correction is not cancelled by anything, so warm up the learning rate. Every leaf must be 2-D;
    use :func:`deva` to route the others.

    Args:
      b1: ``β₁ ∈ [0, 1)``.
      b2: ``β₂ ∈ [0, 1)``.
      eps: ``ε > 0`` in ``Γ``.
      shampoo_beta: ``β_s`` of ``L, R`` (None: ``b2``).
      rms_scale: the update RMS target (0.2, Adam-like).
      precondition_frequency: steps between basis refreshes (static).
      max_precond_dim: sides longer than this are not rotated (static).
      nesterov: Nesterov momentum in ``msign`` (static).
      bias_correction: multiply by ``√(1−β₂ᵗ)/(1−β₁ᵗ)`` (static).
      ns_steps: Newton–Schulz iterations (static).
      ns_coeffs: Newton–Schulz ``(a, b, c)``.
      first_step_rescale: Schatten-8 rescaling in the first Newton–Schulz iteration (static).

    Returns:
      An ``optax.GradientTransformationExtraArgs`` (the descent direction; chain a negative lr).

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.optim import newton_schulz_msign
      >>> tx = scale_by_deva_matrix()
      >>> g = jax.random.normal(jax.random.key(0), (4, 3))
      >>> state = tx.init(g)
      >>> u0, state = tx.update(g, state)            # the first call only builds the basis
      >>> u1, state = tx.update(g, state)
      >>> expected = 20.0 * 0.2 * 2.0 * newton_schulz_msign(g)  # s_1 · 0.2 · √max(4, 3) · msign
      >>> float(jnp.abs(u0).max()), bool(jnp.allclose(u1, expected, atol=1e-3))
      (0.0, True)

    References:
      Song et al., DeVA, ICML 2026 (arXiv 2602.06880); Vyas et al., "SOAP: Improving and
      Stabilizing Shampoo using Adam", ICLR 2025 (the eigenbasis bookkeeping).
    """
    check_betas(b1, b2, eps, shampoo_beta)
    check_positive(rms_scale, "rms_scale")
    ns_steps = check_int(ns_steps, "ns_steps", minimum=1)
    check_bool(nesterov, "nesterov")
    check_bool(first_step_rescale, "first_step_rescale")

    def make_direction():
        beta1, beta2, epsilon, scale = f32(b1), f32(b2), f32(eps), f32(rms_scale)
        coeffs = tuple(f32(c) for c in ns_coeffs)

        def direction(g_rot, mu, nu):
            rows = jnp.sqrt(jnp.sum(mu * mu, axis=1))
            cols = jnp.sqrt(jnp.sum(mu * mu, axis=0))
            outer = rows[:, None] * cols[None, :]
            nu = optax.tree.update_moment(outer, nu, beta2, 1)
            m_hat = g_rot + beta1 * (mu - g_rot) if nesterov else mu
            # jaxlab's own Newton-Schulz: DeVA's first step rescales by the Schatten-8 norm,
            # which optax.contrib's orthogonalization does not offer.
            ortho = newton_schulz_msign(
                m_hat, steps=ns_steps, coeffs=coeffs, first_step_rescale=first_step_rescale
            )
            gamma = jnp.sqrt(outer) / jnp.sqrt(nu + epsilon)
            return scale * np.sqrt(max(mu.shape)) * gamma * ortho, nu

        return direction

    return eigenbasis_transform(
        make_direction, b1, b2, shampoo_beta, state_cls=ScaleByDevaMatrixState,
        method="the matrix form of DeVA", precondition_frequency=precondition_frequency,
        max_precond_dim=max_precond_dim, bias_correction=bias_correction,
    )  # fmt: skip


def deva_matrix_labels(
    params: optax.Params, matrix_filter: Callable[[Any, Any], bool] | None = None
) -> Any:
    """Labels each leaf ``"deva"`` (hidden 2-D weight) or ``"fallback"`` (everything else).

    The default filter sends a leaf to ``"deva"`` when it is 2-D and no entry of its pytree path
    contains ``embed``, ``head``, ``wte``, ``wpe`` or ``lm_out`` (case-insensitive): embeddings
    and the LM head go to the fallback, as in the Muon set-ups DeVA is compared with.

    Args:
      params: a parameter pytree (e.g. an ``nnx.State``).
      matrix_filter: ``(path, leaf) -> bool`` replacing the default rule.

    Returns:
      A pytree of ``"deva"``/``"fallback"`` strings with the structure of ``params``.

    Examples:
      >>> import jax.numpy as jnp
      >>> params = {"embedding": jnp.zeros((8, 4)), "w": jnp.zeros((4, 4)), "b": jnp.zeros(4)}
      >>> deva_matrix_labels(params)
      {'b': 'fallback', 'embedding': 'fallback', 'w': 'deva'}
    """

    rule = is_hidden_matrix if matrix_filter is None else matrix_filter
    return jax.tree_util.tree_map_with_path(
        lambda path, leaf: "deva" if rule(path, leaf) else "fallback", params
    )


def deva(
    learning_rate: optax.ScalarOrSchedule,
    *,
    b1: ArrayLike = 0.95,
    b2: ArrayLike = 0.95,
    eps: ArrayLike = 1e-8,
    weight_decay: ArrayLike = 0.01,
    fallback: str | None = "adamw",
    matrix_filter: Callable[[Any, Any], bool] | None = None,
    shampoo_beta: ArrayLike | None = None,
    rms_scale: ArrayLike = 0.2,
    fallback_learning_rate: optax.ScalarOrSchedule | None = None,
    fallback_b1: ArrayLike = 0.9,
    fallback_b2: ArrayLike = 0.95,
    fallback_eps: ArrayLike = 1e-8,
    fallback_weight_decay: ArrayLike = 0.0,
    precondition_frequency: int = 10,
    max_precond_dim: int = 10000,
    nesterov: bool = True,
    bias_correction: bool = True,
    ns_steps: int = 5,
    ns_coeffs: Sequence[ArrayLike] = DEFAULT_NS_COEFFS,
    first_step_rescale: bool = True,
) -> optax.GradientTransformationExtraArgs:
    r"""DeVA for a whole network: DeVA-S∞ on hidden matrices, a fallback on the rest.

    Hidden 2-D weights (:func:`deva_matrix_labels`) get
    ``W ← W − η·u_t − ηλW`` with ``u_t`` from :func:`scale_by_deva_matrix` (the decay is skipped on
    the first call, which moves nothing, as in the reference; the reference decays the already
    updated ``W``, an ``O(η²λ)`` difference). The other leaves get
    ``fallback="adamw"`` (AdamW with ``fallback_b1 = 0.9``, ``fallback_b2 = 0.95``, no decay by
    default) or ``"deva_vector"`` (:func:`deva_vector` with the same betas), both at
    ``fallback_learning_rate`` (default ``learning_rate``). ``fallback=None`` sends every leaf to
    the matrix form, which raises on a non-matrix leaf. Routing is done with ``optax.partition``,
    like ``optax.contrib.muon``. Authors' defaults: ``η = 3e-3`` (1e-3 in their LLM runs),
    ``β = (0.95, 0.95)``, ``λ = 0.01``.

    Args:
      learning_rate: ``η`` (float or schedule).
      b1: ``β₁`` of the matrix form.
      b2: ``β₂`` of the matrix form.
      eps: ``ε`` of the matrix form.
      weight_decay: ``λ >= 0`` on the matrices.
      fallback: ``"adamw"``, ``"deva_vector"`` or None.
      matrix_filter: ``(path, leaf) -> bool`` choosing the matrix leaves (default: 2-D, not an
        embedding or head).
      shampoo_beta: ``β_s`` (None: ``b2``).
      rms_scale: update RMS target of the matrix form.
      fallback_learning_rate: lr of the fallback (None: ``learning_rate``).
      fallback_b1: fallback ``β₁``.
      fallback_b2: fallback ``β₂``.
      fallback_eps: AdamW's ``ε`` (``"deva_vector"`` uses its 1e-5 inside the root).
      fallback_weight_decay: fallback decay.
      precondition_frequency: see :func:`scale_by_deva_matrix` (static).
      max_precond_dim: see :func:`scale_by_deva_matrix` (static).
      nesterov: see :func:`scale_by_deva_matrix` (static).
      bias_correction: see :func:`scale_by_deva_matrix` (static).
      ns_steps: see :func:`scale_by_deva_matrix` (static).
      ns_coeffs: see :func:`scale_by_deva_matrix`.
      first_step_rescale: see :func:`scale_by_deva_matrix` (static).

    Returns:
      An ``optax.GradientTransformationExtraArgs`` for any parameter pytree.

    Examples:
      >>> import jax.numpy as jnp, optax
      >>> params = {"w": jnp.eye(3), "b": jnp.zeros(3)}
      >>> grads = {"w": jnp.diag(jnp.array([1.0, 2.0, 3.0])), "b": jnp.ones(3)}
      >>> tx = deva(1e-3)
      >>> state = tx.init(params)
      >>> updates, state = tx.update(grads, state, params)
      >>> float(jnp.abs(updates["w"]).max()), updates["b"].round(4)  # matrices wait one call
      (0.0, Array([-0.001, -0.001, -0.001], dtype=float32))

    References:
      Song et al., DeVA, ICML 2026 (arXiv 2602.06880).
    """
    if fallback not in _FALLBACKS:
        raise ValueError(f"fallback must be one of {_FALLBACKS}, got {fallback!r}")
    check_nonnegative(weight_decay, "weight_decay")
    check_nonnegative(fallback_weight_decay, "fallback_weight_decay")
    matrix = optax.chain(
        scale_by_deva_matrix(
            b1, b2, eps, shampoo_beta, rms_scale,
            precondition_frequency=precondition_frequency, max_precond_dim=max_precond_dim,
            nesterov=nesterov, bias_correction=bias_correction, ns_steps=ns_steps,
            ns_coeffs=ns_coeffs, first_step_rescale=first_step_rescale,
        ),
        # The first call only builds the bases (a zero update): no decay there either.
        optax.add_decayed_weights(lambda count: jnp.where(count > 0, weight_decay, 0.0)),
        optax.scale_by_learning_rate(learning_rate),
    )  # fmt: skip
    if fallback is None:
        return matrix
    fallback_lr = learning_rate if fallback_learning_rate is None else fallback_learning_rate
    if fallback == "adamw":
        other = optax.adamw(
            fallback_lr, b1=fallback_b1, b2=fallback_b2, eps=fallback_eps,
            weight_decay=fallback_weight_decay,
        )  # fmt: skip
    else:
        other = deva_vector(
            fallback_lr, b1=fallback_b1, b2=fallback_b2, weight_decay=fallback_weight_decay
        )
    return optax.partition(
        {"deva": matrix, "fallback": other},
        lambda params: deva_matrix_labels(params, matrix_filter),
    )


# --------------------------------------------------------------------------------------------
# The authors' quadratic toy.


def quadratic_toy_hessian(rng_key: jax.Array, eigenvalues: ArrayLike) -> jax.Array:
    """The DeVA paper's block-diagonal toy Hessian ``H = diag(Q_k diag(e_k) Q_kᵀ)``, ``k = 1..K``.

    ``Q_k`` holds the eigenvectors of ``A_kA_kᵀ`` for ``A_k ~ N(0, 1)^{b×b}`` (key ``k`` of
    ``jax.random.split(rng_key, K)``) with column signs chosen so that ``diag(Q_k) >= 0``, so block
    ``k`` has eigenvalues ``e_k`` exactly. The paper's quadratic ``f(X) = ½ tr(XᵀHX)`` with
    heterogeneous blocks (``e = {1,2,3}, {99,100,101}, {4998,4999,5000}``) favours a left
    preconditioner that adapts per block; homogeneous blocks (``{1,99,4998}, …``) do not.

    Args:
      rng_key: a ``jax.random`` key.
      eigenvalues: ``(K, b)`` block eigenvalues.

    Returns:
      ``H``, float32 ``(K·b, K·b)``.

    Raises:
      ValueError: ``eigenvalues`` is not 2-D.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> h = quadratic_toy_hessian(jax.random.key(0), [[1.0, 2.0, 3.0], [99.0, 100.0, 101.0]])
      >>> [round(float(e), 2) for e in jnp.linalg.eigvalsh(h)]
      [1.0, 2.0, 3.0, 99.0, 100.0, 101.0]

    References:
      Song et al., DeVA, ICML 2026 (arXiv 2602.06880), the quadratic experiment.
    """
    eigenvalues = jnp.asarray(eigenvalues, jnp.float32)
    if eigenvalues.ndim != 2:
        raise ValueError(f"eigenvalues must be (blocks, size), got shape {eigenvalues.shape}")
    num_blocks, size = eigenvalues.shape

    def block(key, e):
        a = jax.random.normal(key, (size, size), jnp.float32)
        _, q = jnp.linalg.eigh(a @ a.T)
        q = q * jnp.where(jnp.diagonal(q) >= 0, 1.0, -1.0)[None, :]
        return (q * e[None, :]) @ q.T

    blocks = jax.vmap(block)(jax.random.split(rng_key, num_blocks), eigenvalues)
    return jax.scipy.linalg.block_diag(*blocks)
