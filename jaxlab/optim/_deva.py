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

# No ``from __future__ import annotations``: optax's tests read ``learning_rate``'s annotation
# (``optax.ScalarOrSchedule``) at run time to decide whether to pass a schedule.
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.typing import ArrayLike

from jaxlab._src import linalg
from jaxlab._src.validation import (
    check_bool,
    check_callable,
    check_choice,
    check_floating_tree,
    check_in_range,
    check_key,
    check_learning_rate,
    check_nonnegative,
    check_positive,
    check_real_array,
    check_real_triple,
    check_static_int,
    check_tree_like,
    count_nonfinite,
    nonfinite_count_init,
)
from jaxlab.optim._newton_schulz import DEFAULT_NS_COEFFS, newton_schulz_msign
from jaxlab.optim._soap import check_betas, eigenbasis_transform, f32

__all__ = [
    "DevaState",
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
# ``ns_steps=None``: the reference's five Newton-Schulz iterations (None rather than 5 so that
# optax.inject_hyperparams, which injects numeric defaults as traced arrays, leaves the loop
# count static).
DEFAULT_NS_STEPS = 5
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
    if not isinstance(path, tuple | list):
        raise TypeError(
            f"path must be a pytree key path (a tuple of keys, as tree_map_with_path passes), "
            f"got {type(path).__name__} {path!r}"
        )
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
      nonfinite_count: calls whose gradient had a NaN or infinite entry (int32, saturating).

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
    nonfinite_count: jax.Array


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

    Params must be floating point and each gradient must match the state's shapes (checked, the
    leaf's path named). A NaN or infinite gradient is counted in ``nonfinite_count`` and enters
    ``m`` and ``v``, so every later update is NaN; wrap in ``optax.apply_if_finite`` to skip such
    steps (see :func:`deva`).

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
        check_floating_tree(params, "params")
        zeros = optax.tree.zeros_like(params, dtype=jnp.float32)
        count = jnp.zeros([], jnp.int32)
        return ScaleByDevaVectorState(
            count=count, mu=zeros, nu=zeros, nonfinite_count=nonfinite_count_init(params)
        )

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        check_tree_like(updates, state.mu, "updates", "the state")
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
        nonfinite = count_nonfinite(state.nonfinite_count, updates)
        new_state = ScaleByDevaVectorState(count=count, mu=mu, nu=nu, nonfinite_count=nonfinite)
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
    check_learning_rate(learning_rate)
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
      nonfinite_count: calls whose gradient had a NaN or infinite entry (int32, saturating).

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
    nonfinite_count: jax.Array


def _check_ns(ns_steps, ns_coeffs) -> int:
    """``ns_steps`` (None: 5) as a static int, and ``ns_coeffs`` as three finite reals."""
    ns_steps = check_static_int(
        ns_steps, "ns_steps", default=DEFAULT_NS_STEPS, role="is a Python loop count", minimum=1
    )
    check_real_triple(ns_coeffs, "ns_coeffs")
    return ns_steps


def scale_by_deva_matrix(
    b1: ArrayLike = 0.95,
    b2: ArrayLike = 0.95,
    eps: ArrayLike = 1e-8,
    shampoo_beta: ArrayLike | None = None,
    rms_scale: ArrayLike = 0.2,
    *,
    precondition_frequency: ArrayLike | None = None,
    max_precond_dim: int | None = None,
    nesterov: bool = True,
    bias_correction: bool = True,
    ns_steps: int | None = None,
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

    Params must be floating point and each gradient must match the state's shapes (checked, the
    leaf's path named). A NaN or infinite gradient is counted in ``nonfinite_count`` and enters
    ``m``, ``V``, ``L`` and ``R`` (and the next refresh of ``Q``), so every later update is NaN;
    wrap in ``optax.apply_if_finite`` to skip such steps (see :func:`deva`).

    Args:
      b1: ``β₁ ∈ [0, 1)``.
      b2: ``β₂ ∈ [0, 1)``.
      eps: ``ε > 0`` in ``Γ``.
      shampoo_beta: ``β_s`` of ``L, R`` (None: ``b2``).
      rms_scale: the update RMS target (0.2, Adam-like).
      precondition_frequency: steps between basis refreshes, an int ``>= 1``; None means 10,
        static. A value may be traced (``optax.inject_hyperparams`` injects it); pass it as
        ``jnp.int32(k)`` (strongly typed) or in ``static_args`` so that a restored state does
        not retrace.
      max_precond_dim: sides longer than this are not rotated; None means 10000. It sets the
        state's shapes, so it is static (list it in ``static_args`` of
        ``optax.inject_hyperparams`` to pass a value).
      nesterov: Nesterov momentum in ``msign`` (static).
      bias_correction: multiply by ``√(1−β₂ᵗ)/(1−β₁ᵗ)`` (static).
      ns_steps: Newton–Schulz iterations; None means 5 (a loop count: static, like
        ``max_precond_dim``).
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
    ns_steps = _check_ns(ns_steps, ns_coeffs)
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

    check_callable(
        matrix_filter,
        "matrix_filter",
        signature="matrix_filter(path, leaf) -> bool",
        allow_none=True,
    )
    rule = is_hidden_matrix if matrix_filter is None else matrix_filter
    return jax.tree_util.tree_map_with_path(
        lambda path, leaf: "deva" if rule(path, leaf) else "fallback", params
    )


class DevaState(NamedTuple):
    """State of :func:`deva`: a count of non-finite gradients around the routed transforms.

    Attributes:
      nonfinite_count: calls whose gradient had a NaN or infinite entry in any leaf (int32,
        saturating), matrices and fallback leaves alike.
      inner_state: the ``optax.partition`` state (``inner_states["deva"]`` for the matrix form,
        ``inner_states["fallback"]`` for the rest); with ``fallback=None`` the matrix chain's.

    Examples:
      >>> import jax.numpy as jnp
      >>> tx = deva(1e-3)
      >>> params = {"w": jnp.eye(2), "b": jnp.zeros(2)}
      >>> _, state = tx.update({"w": jnp.eye(2), "b": jnp.array([1.0, jnp.inf])},
      ...                      tx.init(params), params)
      >>> int(state.nonfinite_count)
      1
    """

    nonfinite_count: jax.Array
    inner_state: optax.OptState


def _counting_nonfinite(
    inner: optax.GradientTransformation,
) -> optax.GradientTransformationExtraArgs:
    """``inner`` with a :class:`DevaState` around its state and the params/updates checks."""
    inner = optax.with_extra_args_support(inner)

    def init_fn(params):
        check_floating_tree(params, "params")
        return DevaState(
            nonfinite_count=nonfinite_count_init(params), inner_state=inner.init(params)
        )

    def update_fn(updates, state, params=None, **extra_args):
        if params is not None:
            check_tree_like(updates, params, "updates", "params")
        new_updates, inner_state = inner.update(updates, state.inner_state, params, **extra_args)
        nonfinite = count_nonfinite(state.nonfinite_count, updates)
        return new_updates, DevaState(nonfinite_count=nonfinite, inner_state=inner_state)

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)


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
    precondition_frequency: ArrayLike | None = None,
    max_precond_dim: int | None = None,
    nesterov: bool = True,
    bias_correction: bool = True,
    ns_steps: int | None = None,
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

    ``optax.inject_hyperparams(deva)(learning_rate=...)`` works with the defaults:
    ``precondition_frequency``, ``max_precond_dim`` and ``ns_steps`` default to None (10, 10000
    and 5), so they stay static (no retrace of a restored state); the last two set shapes and
    loop counts (list them in ``static_args`` to pass a value), the first may be injected.
    Params must be floating point and gradients must match them leaf by leaf (checked in
    ``init`` and ``update``, naming the leaf's path).

    Non-finite gradients: the state (:class:`DevaState`) counts the calls whose gradient had a
    NaN or infinite entry in ``nonfinite_count``; such a gradient enters the moments (and the
    preconditioners ``L, R``) of the leaves it touches, so their updates are NaN from then on.
    To skip such steps instead (zero update, state unchanged, counted by optax), compose with
    ``optax.apply_if_finite``::

        tx = optax.apply_if_finite(deva(3e-3), max_consecutive_errors=10)

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
      precondition_frequency: see :func:`scale_by_deva_matrix` (None: 10; may be traced).
      max_precond_dim: see :func:`scale_by_deva_matrix` (None: 10000; static).
      nesterov: see :func:`scale_by_deva_matrix` (static).
      bias_correction: see :func:`scale_by_deva_matrix` (static).
      ns_steps: see :func:`scale_by_deva_matrix` (None: 5; static).
      ns_coeffs: see :func:`scale_by_deva_matrix`.
      first_step_rescale: see :func:`scale_by_deva_matrix` (static).

    Returns:
      An ``optax.GradientTransformationExtraArgs`` for any parameter pytree, with a
      :class:`DevaState`.

    Examples:
      >>> import jax.numpy as jnp, optax
      >>> params = {"w": jnp.eye(3), "b": jnp.zeros(3)}
      >>> grads = {"w": jnp.diag(jnp.array([1.0, 2.0, 3.0])), "b": jnp.ones(3)}
      >>> tx = deva(1e-3)
      >>> state = tx.init(params)
      >>> updates, state = tx.update(grads, state, params)
      >>> float(jnp.abs(updates["w"]).max()), updates["b"].round(4)  # matrices wait one call
      (0.0, Array([-0.001, -0.001, -0.001], dtype=float32))

      A NaN gradient is counted; under ``optax.apply_if_finite`` the step is skipped:

      >>> bad = {"w": grads["w"], "b": jnp.array([jnp.nan, 0.0, 0.0])}
      >>> safe = optax.apply_if_finite(tx, max_consecutive_errors=5)
      >>> safe_state = safe.init(params)
      >>> skipped, safe_state = safe.update(bad, safe_state, params)
      >>> float(jnp.abs(skipped["b"]).max()), int(safe_state.total_notfinite)
      (0.0, 1)
      >>> _, state = tx.update(bad, state, params)  # without the guard: counted, NaN from now
      >>> int(state.nonfinite_count)
      1

    References:
      Song et al., DeVA, ICML 2026 (arXiv 2602.06880).
    """
    check_choice(fallback, "fallback", _FALLBACKS)
    check_callable(
        matrix_filter,
        "matrix_filter",
        signature="matrix_filter(path, leaf) -> bool",
        allow_none=True,
    )
    check_learning_rate(learning_rate)
    if fallback_learning_rate is not None:
        check_learning_rate(fallback_learning_rate, "fallback_learning_rate")
    check_nonnegative(weight_decay, "weight_decay")
    check_in_range(fallback_b1, "fallback_b1", 0.0, 1.0)
    check_in_range(fallback_b2, "fallback_b2", 0.0, 1.0)
    check_nonnegative(fallback_eps, "fallback_eps")
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
        return _counting_nonfinite(matrix)
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
    return _counting_nonfinite(
        optax.partition(
            {"deva": matrix, "fallback": other},
            lambda params: deva_matrix_labels(params, matrix_filter),
        )
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
      TypeError: ``rng_key`` is not a JAX key, or ``eigenvalues`` not real.
      ValueError: ``eigenvalues`` is not 2-D or has a non-finite entry.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> h = quadratic_toy_hessian(jax.random.key(0), [[1.0, 2.0, 3.0], [99.0, 100.0, 101.0]])
      >>> [round(float(e), 2) for e in jnp.linalg.eigvalsh(h)]
      [1.0, 2.0, 3.0, 99.0, 100.0, 101.0]

    References:
      Song et al., DeVA, ICML 2026 (arXiv 2602.06880), the quadratic experiment.
    """
    check_key(rng_key)
    check_real_array(eigenvalues, "eigenvalues")
    eigenvalues = jnp.asarray(eigenvalues, jnp.float32)
    if eigenvalues.ndim != 2:
        raise ValueError(f"eigenvalues must be (blocks, size), got shape {eigenvalues.shape}")
    num_blocks, size = eigenvalues.shape

    def block(key, e):
        a = jax.random.normal(key, (size, size), jnp.float32)
        _, q = linalg.eigh(a @ a.T)
        q = q * jnp.where(jnp.diagonal(q) >= 0, 1.0, -1.0)[None, :]
        return (q * e[None, :]) @ q.T

    blocks = jax.vmap(block)(jax.random.split(rng_key, num_blocks), eigenvalues)
    return jax.scipy.linalg.block_diag(*blocks)
