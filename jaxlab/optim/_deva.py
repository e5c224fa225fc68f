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

from jaxlab.optim._newton_schulz import DEFAULT_NS_COEFFS, newton_schulz_msign

__all__ = [
    "ScaleByDevaMatrixState",
    "ScaleByDevaVectorState",
    "deva",
    "deva_matrix_labels",
    "deva_vector",
    "scale_by_deva_matrix",
    "scale_by_deva_vector",
]

_FALLBACKS = ("adamw", "deva_vector", None)
# Path entries that mark a 2-D leaf as an embedding or an output head (routed to the fallback).
_NON_HIDDEN_KEYS = ("embed", "head", "wte", "wpe", "lm_out")


def _check_beta(value: Any, name: str) -> None:
    if isinstance(value, (int, float, np.floating)) and not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must lie in [0, 1), got {value}")


def _check_positive(value: Any, name: str) -> None:
    if isinstance(value, (int, float, np.floating)) and not value > 0.0:
        raise ValueError(f"{name} must be > 0, got {value}")


def _check_nonnegative(value: Any, name: str) -> None:
    if isinstance(value, (int, float, np.floating)) and not value >= 0.0:
        raise ValueError(f"{name} must be >= 0, got {value}")


def _check_static_int(value: Any, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be a (static) int >= {minimum}, got {value!r}")
    return int(value)


def _check_flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {value!r}")
    return value


def _f32(x: ArrayLike) -> jax.Array:
    return jnp.asarray(x).astype(jnp.float32)


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
) -> optax.GradientTransformation:
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
      An ``optax.GradientTransformation`` (the descent direction; chain a negative lr).

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
    _check_beta(b1, "b1")
    _check_beta(b2, "b2")
    _check_positive(eps, "eps")
    _check_flag(nesterov, "nesterov")
    _check_flag(bias_correction, "bias_correction")

    def init_fn(params):
        zeros = lambda p: jnp.zeros_like(p, dtype=jnp.float32)
        return ScaleByDevaVectorState(
            count=jnp.zeros([], jnp.int32),
            mu=jax.tree.map(zeros, params),
            nu=jax.tree.map(zeros, params),
        )

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        beta1, beta2, epsilon = _f32(b1), _f32(b2), _f32(eps)
        count = optax.safe_increment(state.count)
        t = count.astype(jnp.float32)
        scale = jnp.sqrt(1.0 - beta2**t) / (1.0 - beta1**t) if bias_correction else None

        def leaf(g, m, v):
            g32 = g.astype(jnp.float32)
            m = beta1 * m + (1.0 - beta1) * g32
            v = beta2 * v + (1.0 - beta2) * m * m
            gamma = jnp.sqrt(m * m / (v + epsilon))
            direction = jnp.sign((1.0 - beta1) * g32 + beta1 * m) if nesterov else jnp.sign(m)
            u = gamma * direction
            if scale is not None:
                u = scale * u
            return u.astype(g.dtype), m, v

        out = jax.tree.map(leaf, updates, state.mu, state.nu)
        pick = lambda i: jax.tree.map(lambda _, o: o[i], updates, out)
        return pick(0), ScaleByDevaVectorState(count=count, mu=pick(1), nu=pick(2))

    return optax.GradientTransformation(init_fn, update_fn)


def deva_vector(
    learning_rate: optax.ScalarOrSchedule,
    b1: ArrayLike = 0.9,
    b2: ArrayLike = 0.999,
    eps: ArrayLike = 1e-5,
    weight_decay: ArrayLike = 0.0,
    *,
    nesterov: bool = False,
    bias_correction: bool = False,
) -> optax.GradientTransformation:
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
      An ``optax.GradientTransformation``.

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
    _check_nonnegative(weight_decay, "weight_decay")
    return optax.chain(
        scale_by_deva_vector(b1, b2, eps, nesterov=nesterov, bias_correction=bias_correction),
        optax.add_decayed_weights(weight_decay),
        optax.scale_by_learning_rate(learning_rate),
    )


# --------------------------------------------------------------------------------------------
# Matrix (S∞) form.


class _MatrixLeaf(NamedTuple):
    """One matrix's slice of :class:`ScaleByDevaMatrixState` (internal view)."""

    mu: jax.Array
    nu: jax.Array
    left: jax.Array
    right: jax.Array
    basis_left: jax.Array
    basis_right: jax.Array


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


def _leaf_name(path) -> str:
    return jax.tree_util.keystr(path) if path else "the params"


def _side_sizes(shape, max_precond_dim):
    n, m = shape
    return (n if n <= max_precond_dim else 0), (m if m <= max_precond_dim else 0)


def _eig_descending(sym: jax.Array) -> jax.Array:
    _, vectors = jnp.linalg.eigh(sym)
    return vectors[:, ::-1]


def _to_basis(x, ql, qr):
    if ql.shape[0]:
        x = ql.T @ x
    if qr.shape[0]:
        x = x @ qr
    return x


def _from_basis(x, ql, qr):
    if ql.shape[0]:
        x = ql @ x
    if qr.shape[0]:
        x = x @ qr.T
    return x


def _refresh_side(sym, basis, nu, axis):
    """SOAP's refresh: sort by the estimated eigenvalues ``diag(QᵀLQ)``, permute ``V``, one QR."""
    estimate = jnp.einsum("ij,ik,kj->j", basis, sym, basis)
    order = jnp.argsort(-estimate)
    basis = basis[:, order]
    nu = jnp.take(nu, order, axis=axis)
    basis, _ = jnp.linalg.qr(sym @ basis)
    return basis, nu


def _matrix_leaf_step(
    g, leaf, count, hp, *, rule, nesterov, bias_correction, frequency, ns_steps, first_rescale
):
    """One call on one matrix: a step, then one of keep / refresh / start (eigh on call 0).

    The step runs on every call; on call 0 its update and statistics are discarded (the state is
    zero there and ``L, R`` become exactly ``(1−β_s)GGᵀ, (1−β_s)GᵀG``), which keeps a single
    ``lax.switch`` (over the basis maintenance only) in the compiled step.
    """
    beta1, beta2, epsilon, shampoo, rms_scale, coeffs = hp
    g32 = g.astype(jnp.float32)
    n_rows, n_cols = g32.shape
    rotate_left, rotate_right = leaf.left.shape[0] > 0, leaf.right.shape[0] > 0
    first = count == 0
    t = jnp.maximum(count, 1).astype(jnp.float32)
    ql, qr = leaf.basis_left, leaf.basis_right
    g_rot = _to_basis(g32, ql, qr)
    mu = beta1 * leaf.mu + (1.0 - beta1) * g_rot
    if rule == "deva":
        rows = jnp.sqrt(jnp.sum(mu * mu, axis=1))
        cols = jnp.sqrt(jnp.sum(mu * mu, axis=0))
        outer = rows[:, None] * cols[None, :]
        nu = beta2 * leaf.nu + (1.0 - beta2) * outer
        m_hat = g_rot + beta1 * (mu - g_rot) if nesterov else mu
        ortho = newton_schulz_msign(
            m_hat, steps=ns_steps, coeffs=coeffs, first_step_rescale=first_rescale
        )
        gamma = jnp.sqrt(outer) / jnp.sqrt(nu + epsilon)
        direction = rms_scale * np.sqrt(max(n_rows, n_cols)) * gamma * ortho
    else:  # "soap": Adam in the eigenbasis (the experiment's baseline; same bookkeeping)
        nu = beta2 * leaf.nu + (1.0 - beta2) * g_rot * g_rot
        m_hat = g_rot + beta1 * (mu - g_rot) if nesterov else mu
        direction = m_hat / (jnp.sqrt(nu) + epsilon)
    if bias_correction:
        direction = direction * (jnp.sqrt(1.0 - beta2**t) / (1.0 - beta1**t))
    update = jnp.where(first, jnp.zeros_like(g32), _from_basis(direction, ql, qr))
    # Maintenance with the raw gradient (on call 0 the EMA of zeros gives the start values).
    left = shampoo * leaf.left + (1.0 - shampoo) * (g32 @ g32.T) if rotate_left else leaf.left
    right = shampoo * leaf.right + (1.0 - shampoo) * (g32.T @ g32) if rotate_right else leaf.right

    def keep(_):
        return mu, nu, ql, qr

    def refresh(_):
        mu_raw = _from_basis(mu, ql, qr)
        new_ql, nu_new = _refresh_side(left, ql, nu, 0) if rotate_left else (ql, nu)
        new_qr, nu_new = _refresh_side(right, qr, nu_new, 1) if rotate_right else (qr, nu_new)
        return _to_basis(mu_raw, new_ql, new_qr), nu_new, new_ql, new_qr

    def start(_):
        new_ql = _eig_descending(left) if rotate_left else ql
        new_qr = _eig_descending(right) if rotate_right else qr
        return jnp.zeros_like(mu), jnp.zeros_like(nu), new_ql, new_qr

    branch = jnp.where(first, 2, jnp.where(count % frequency == 0, 1, 0))
    mu, nu, ql, qr = jax.lax.switch(branch, (keep, refresh, start), None)
    return update.astype(g.dtype), _MatrixLeaf(mu, nu, left, right, ql, qr)


def _scale_by_eigenbasis_matrix(
    rule, b1, b2, eps, shampoo_beta, rms_scale, *, precondition_frequency, max_precond_dim,
    nesterov, bias_correction, ns_steps, ns_coeffs, first_step_rescale,
):  # fmt: skip
    frequency = _check_static_int(precondition_frequency, "precondition_frequency")
    max_dim = _check_static_int(max_precond_dim, "max_precond_dim")
    ns_steps = _check_static_int(ns_steps, "ns_steps")
    for flag, name in ((nesterov, "nesterov"), (bias_correction, "bias_correction")):
        _check_flag(flag, name)
    _check_flag(first_step_rescale, "first_step_rescale")

    def init_fn(params):
        def leaf(path, p):
            if jnp.ndim(p) != 2:
                raise ValueError(
                    f"the matrix form of DeVA needs 2-D leaves, but {_leaf_name(path)} has shape "
                    f"{jnp.shape(p)}; route non-matrix parameters to a fallback with "
                    "deva(..., fallback='adamw') or optax.partition"
                )
            n, m = jnp.shape(p)
            side_l, side_r = _side_sizes((n, m), max_dim)
            # zeros_like keeps the params' sharding/varying-axis type (shard_map carries).
            zeros = lambda *s: jnp.zeros_like(p, dtype=jnp.float32, shape=s)
            return _MatrixLeaf(
                mu=zeros(n, m),
                nu=zeros(n, m),
                left=zeros(side_l, side_l),
                right=zeros(side_r, side_r),
                basis_left=zeros(side_l, side_l) + jnp.eye(side_l, dtype=jnp.float32),
                basis_right=zeros(side_r, side_r) + jnp.eye(side_r, dtype=jnp.float32),
            )

        per_leaf = jax.tree_util.tree_map_with_path(leaf, params)
        fields = [
            jax.tree.map(lambda _, leaf_state: leaf_state[i], params, per_leaf)
            for i in range(len(_MatrixLeaf._fields))
        ]
        return ScaleByDevaMatrixState(jnp.zeros([], jnp.int32), *fields)

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        beta2 = _f32(b2)
        shampoo = beta2 if shampoo_beta is None else _f32(shampoo_beta)
        coeffs = tuple(_f32(c) for c in ns_coeffs)
        hp = (_f32(b1), beta2, _f32(eps), shampoo, _f32(rms_scale), coeffs)
        count = state.count

        def leaf(g, s):
            return _matrix_leaf_step(
                g, s, count, hp, rule=rule, nesterov=nesterov, bias_correction=bias_correction,
                frequency=frequency, ns_steps=ns_steps, first_rescale=first_step_rescale,
            )  # fmt: skip

        out = jax.tree.map(lambda g, *fields: leaf(g, _MatrixLeaf(*fields)), updates, *state[1:])
        new_updates = jax.tree.map(lambda _, o: o[0], updates, out)
        fields = [
            jax.tree.map(lambda _, o: o[1][i], updates, out)
            for i in range(len(_MatrixLeaf._fields))
        ]
        return new_updates, ScaleByDevaMatrixState(optax.safe_increment(count), *fields)

    return optax.GradientTransformation(init_fn, update_fn)


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
) -> optax.GradientTransformation:
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
      An ``optax.GradientTransformation`` (the descent direction; chain a negative lr).

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
    _check_beta(b1, "b1")
    _check_beta(b2, "b2")
    _check_positive(eps, "eps")
    if shampoo_beta is not None:
        _check_beta(shampoo_beta, "shampoo_beta")
    _check_positive(rms_scale, "rms_scale")
    return _scale_by_eigenbasis_matrix(
        "deva", b1, b2, eps, shampoo_beta, rms_scale,
        precondition_frequency=precondition_frequency, max_precond_dim=max_precond_dim,
        nesterov=nesterov, bias_correction=bias_correction, ns_steps=ns_steps,
        ns_coeffs=ns_coeffs, first_step_rescale=first_step_rescale,
    )  # fmt: skip


def _scale_by_soap(
    b1: ArrayLike = 0.95,
    b2: ArrayLike = 0.95,
    eps: ArrayLike = 1e-8,
    shampoo_beta: ArrayLike | None = None,
    *,
    precondition_frequency: int = 10,
    max_precond_dim: int = 10000,
) -> optax.GradientTransformation:
    """SOAP (Adam in the Shampoo eigenbasis) with DeVA's bookkeeping; the toy's baseline only."""
    return _scale_by_eigenbasis_matrix(
        "soap", b1, b2, eps, shampoo_beta, 1.0,
        precondition_frequency=precondition_frequency, max_precond_dim=max_precond_dim,
        nesterov=False, bias_correction=True, ns_steps=1, ns_coeffs=DEFAULT_NS_COEFFS,
        first_step_rescale=False,
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

    def default(path, leaf) -> bool:
        if jnp.ndim(leaf) != 2:
            return False
        names = jax.tree_util.keystr(path).lower()
        return not any(key in names for key in _NON_HIDDEN_KEYS)

    rule = default if matrix_filter is None else matrix_filter
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
) -> optax.GradientTransformation:
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
      An ``optax.GradientTransformation`` for any parameter pytree.

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
    _check_nonnegative(weight_decay, "weight_decay")
    _check_nonnegative(fallback_weight_decay, "fallback_weight_decay")
    matrix = optax.chain(
        scale_by_deva_matrix(
            b1, b2, eps, shampoo_beta, rms_scale,
            precondition_frequency=precondition_frequency, max_precond_dim=max_precond_dim,
            nesterov=nesterov, bias_correction=bias_correction, ns_steps=ns_steps,
            ns_coeffs=ns_coeffs, first_step_rescale=first_step_rescale,
        ),
        _decay_after_first_call(weight_decay),
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


class _DecayState(NamedTuple):
    count: jax.Array


def _decay_after_first_call(weight_decay: ArrayLike) -> optax.GradientTransformation:
    """``u + λW``, except on the first call (DeVA-S∞'s silent basis-building call)."""

    def init_fn(params):
        del params
        return _DecayState(count=jnp.zeros([], jnp.int32))

    def update_fn(updates, state, params=None, **extra_args):
        del extra_args
        if params is None:
            raise ValueError("deva's weight decay needs params: call update(grads, state, params)")
        active = (state.count > 0).astype(jnp.float32) * _f32(weight_decay)
        updates = jax.tree.map(
            lambda u, p: (u.astype(jnp.float32) + active * p.astype(jnp.float32)).astype(u.dtype),
            updates,
            params,
        )
        return updates, _DecayState(count=optax.safe_increment(state.count))

    return optax.GradientTransformation(init_fn, update_fn)
