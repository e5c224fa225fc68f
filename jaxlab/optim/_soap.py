"""SOAP (Adam in the eigenbasis of Shampoo's preconditioners) and the eigenbasis bookkeeping.

The bookkeeping (per 2-D leaf: EMAs ``L, R`` of ``GGᵀ, GᵀG``, their eigenbases ``Q_L, Q_R`` built
on the first call and refreshed every ``precondition_frequency`` calls, the momentum kept in the
eigenbasis) is shared by :func:`scale_by_soap` and DeVA-S∞ (``jaxlab.optim.scale_by_deva_matrix``),
which differ only in the direction computed from the rotated momentum.

References:
  Vyas, Morwani, Zhao, Kwun, Shapira, Brandfonbrener, Janson, Kakade, "SOAP: Improving and
  Stabilizing Shampoo using Adam", ICLR 2025 (arXiv 2409.11321).
"""

# No ``from __future__ import annotations``: optax's tests read the annotations at run time.
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.typing import ArrayLike

from jaxlab._src import linalg
from jaxlab._src.validation import (
    check_bool,
    check_floating_tree,
    check_in_range,
    check_positive,
    check_static_int,
    check_traceable_int,
    check_tree_like,
    count_nonfinite,
    nonfinite_count_init,
)

__all__ = ["ScaleBySoapState", "scale_by_soap"]

# ``max_precond_dim=None``: sides up to this length are rotated (the SOAP reference's 10000).
DEFAULT_MAX_PRECOND_DIM = 10_000
# ``precondition_frequency=None``: refresh every this many calls (the SOAP reference's 10).
DEFAULT_PRECONDITION_FREQUENCY = 10
# Shape-setting ints default to None so that ``optax.inject_hyperparams`` (which injects every
# numeric default as a traced array) leaves them alone. precondition_frequency only enters
# ``count % frequency`` and may be traced, but it defaults to None too: an injected default is a
# weak-typed int32, so a state restored from a checkpoint (strongly typed) retraced the update
# and ``optax.MultiSteps`` traced it twice (issue 44).


class EigenbasisLeaf(NamedTuple):
    """One matrix's slice of an eigenbasis state (internal view)."""

    mu: jax.Array
    nu: jax.Array
    left: jax.Array
    right: jax.Array
    basis_left: jax.Array
    basis_right: jax.Array


class ScaleBySoapState(NamedTuple):
    """State of :func:`scale_by_soap`: the call count and one float32 tree per statistic.

    Each tree has the params' structure (as optax's ``mu``/``nu``). For a leaf ``W ∈ ℝ^{n×m}``:

    Attributes:
      count: calls so far (int32; the first call only builds the bases).
      mu: momentum ``m`` in the eigenbasis, ``(n, m)``.
      nu: ``v``, the EMA of the squared rotated gradient, ``(n, m)``.
      left: ``L``, the EMA of ``GGᵀ``, ``(n, n)`` (``(0, 0)`` if that side is not rotated).
      right: ``R``, the EMA of ``GᵀG``, ``(m, m)`` (``(0, 0)`` if not rotated).
      basis_left: ``Q_L`` (columns in descending eigenvalue order).
      basis_right: ``Q_R``.
      nonfinite_count: calls whose gradient had a NaN or infinite entry (int32, saturating).

    Examples:
      >>> import jax.numpy as jnp
      >>> state = scale_by_soap(max_precond_dim=3).init({"w": jnp.zeros((4, 3))})
      >>> state.nu["w"].shape, state.left["w"].shape, state.basis_right["w"].shape
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


def f32(x: ArrayLike) -> jax.Array:
    return jnp.asarray(x).astype(jnp.float32)


def check_betas(b1: Any, b2: Any, eps: Any, shampoo_beta: Any) -> None:
    """The numeric checks shared by the eigenbasis transforms."""
    check_in_range(b1, "b1", 0.0, 1.0)
    check_in_range(b2, "b2", 0.0, 1.0)
    check_positive(eps, "eps")
    if shampoo_beta is not None:
        check_in_range(shampoo_beta, "shampoo_beta", 0.0, 1.0)


def _leaf_name(path) -> str:
    return jax.tree_util.keystr(path) if path else "the params"


def check_max_precond_dim(max_precond_dim: Any) -> int:
    """``None`` (the default 10000) or a static int >= 1: it sets the preconditioner shapes."""
    return check_static_int(
        max_precond_dim,
        "max_precond_dim",
        default=DEFAULT_MAX_PRECOND_DIM,
        role="sets the preconditioners' shapes",
        minimum=1,
    )


def _side_sizes(shape, max_precond_dim):
    n, m = shape
    return (n if n <= max_precond_dim else 0), (m if m <= max_precond_dim else 0)


def _eig_descending(sym: jax.Array) -> jax.Array:
    _, vectors = linalg.eigh(sym)
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
    basis, _ = linalg.qr(sym @ basis)
    return basis, nu


# direction(g_rot, mu, nu) -> (direction in the eigenbasis, new nu): the one place SOAP and
# DeVA-S∞ differ (g_rot is the rotated gradient, mu the already updated rotated momentum).
Direction = Callable[[jax.Array, jax.Array, jax.Array], tuple[jax.Array, jax.Array]]


def _leaf_step(g, leaf, count, hp, direction: Direction, *, bias_correction, frequency):
    """One call on one matrix: a step, then one of keep / refresh / start (eigh on call 0).

    The step runs on every call; on call 0 its update and statistics are discarded (the state is
    zero there and ``L, R`` become exactly ``(1−β_s)GGᵀ, (1−β_s)GᵀG``), which keeps a single
    ``lax.switch`` (over the basis maintenance only) in the compiled step.
    """
    beta1, beta2, shampoo = hp
    g32 = g.astype(jnp.float32)
    rotate_left, rotate_right = leaf.left.shape[0] > 0, leaf.right.shape[0] > 0
    first = count == 0
    t = jnp.maximum(count, 1).astype(jnp.float32)
    ql, qr = leaf.basis_left, leaf.basis_right
    g_rot = _to_basis(g32, ql, qr)
    mu = optax.tree.update_moment(g_rot, leaf.mu, beta1, 1)
    step, nu = direction(g_rot, mu, leaf.nu)
    if bias_correction:
        step = step * (jnp.sqrt(1.0 - beta2**t) / (1.0 - beta1**t))
    update = jnp.where(first, jnp.zeros_like(g32), _from_basis(step, ql, qr))
    # Maintenance with the raw gradient (on call 0 the EMA of zeros gives the start values).
    ema = lambda sym, old: optax.tree.update_moment(sym, old, shampoo, 1)
    left = ema(g32 @ g32.T, leaf.left) if rotate_left else leaf.left
    right = ema(g32.T @ g32, leaf.right) if rotate_right else leaf.right

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
    return update.astype(g.dtype), EigenbasisLeaf(mu, nu, left, right, ql, qr)


def eigenbasis_transform(
    make_direction: Callable[[], Direction],
    b1: ArrayLike,
    b2: ArrayLike,
    shampoo_beta: ArrayLike | None,
    *,
    state_cls: type,
    method: str,
    precondition_frequency: ArrayLike | None,
    max_precond_dim: int | None,
    bias_correction: bool,
) -> optax.GradientTransformationExtraArgs:
    """The shared SOAP bookkeeping around ``make_direction()`` (called inside each update).

    ``state_cls`` is the NamedTuple ``(count, mu, nu, left, right, basis_left, basis_right,
    nonfinite_count)`` of the transform; ``method`` names it in the error for a non-matrix leaf.
    """
    if precondition_frequency is None:
        frequency = DEFAULT_PRECONDITION_FREQUENCY
    else:
        frequency = check_traceable_int(precondition_frequency, "precondition_frequency", minimum=1)
        if frequency is None:  # traced (injected): the int32 of the step count
            frequency = jnp.asarray(precondition_frequency).astype(jnp.int32)
    max_dim = check_max_precond_dim(max_precond_dim)
    check_bool(bias_correction, "bias_correction")

    def init_fn(params):
        check_floating_tree(params, "params")

        def leaf(path, p):
            if jnp.ndim(p) != 2:
                raise ValueError(
                    f"{method} needs 2-D leaves, but {_leaf_name(path)} has shape "
                    f"{jnp.shape(p)}; route non-matrix parameters to a fallback with "
                    "deva(..., fallback='adamw') or optax.partition"
                )
            n, m = jnp.shape(p)
            side_l, side_r = _side_sizes((n, m), max_dim)
            # zeros_like keeps the params' sharding/varying-axis type (shard_map carries).
            zeros = lambda *s: jnp.zeros_like(p, dtype=jnp.float32, shape=s)
            return EigenbasisLeaf(
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
            for i in range(len(EigenbasisLeaf._fields))
        ]
        return state_cls(jnp.zeros([], jnp.int32), *fields, nonfinite_count_init(params))

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        check_tree_like(updates, state.mu, "updates", "the state")
        beta2 = f32(b2)
        shampoo = beta2 if shampoo_beta is None else f32(shampoo_beta)
        hp = (f32(b1), beta2, shampoo)
        direction = make_direction()
        count = state.count

        def leaf(g, s):
            return _leaf_step(
                g, s, count, hp, direction, bias_correction=bias_correction, frequency=frequency
            )

        statistics = state[1 : 1 + len(EigenbasisLeaf._fields)]
        out = jax.tree.map(
            lambda g, *fields: leaf(g, EigenbasisLeaf(*fields)), updates, *statistics
        )
        new_updates = jax.tree.map(lambda _, o: o[0], updates, out)
        fields = [
            jax.tree.map(lambda _, o: o[1][i], updates, out)
            for i in range(len(EigenbasisLeaf._fields))
        ]
        nonfinite = count_nonfinite(state.nonfinite_count, updates)
        return new_updates, state_cls(optax.safe_increment(count), *fields, nonfinite)

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def scale_by_soap(
    b1: ArrayLike = 0.95,
    b2: ArrayLike = 0.95,
    eps: ArrayLike = 1e-8,
    shampoo_beta: ArrayLike | None = None,
    *,
    precondition_frequency: ArrayLike | None = None,
    max_precond_dim: int | None = None,
) -> optax.GradientTransformationExtraArgs:
    r"""SOAP: Adam's step in the eigenbasis of Shampoo's preconditioners, for 2-D leaves.

    For ``W ∈ ℝ^{n×m}`` with gradient ``G``, the **first call** sets ``L = (1−β_s)GGᵀ``,
    ``R = (1−β_s)GᵀG`` and ``Q_L, Q_R`` to their eigenvectors (descending eigenvalues) and returns
    a **zero** update. Each later call ``t = 1, 2, …``::

        G̃ = Q_Lᵀ G Q_R;   m ← β₁m + (1−β₁)G̃;   v ← β₂v + (1−β₂)G̃²
        u = √(1−β₂ᵗ)/(1−β₁ᵗ) · Q_L (m / (√v + ε)) Q_Rᵀ

    then ``L, R ← EMA_{β_s}`` of ``GGᵀ, GᵀG`` and, every ``precondition_frequency`` calls, the
    refresh per side: sort by the estimated eigenvalues ``diag(QᵀLQ)``, permute ``v`` along that
    axis, ``Q ← QR(L·Q_sorted).Q``, and move ``m`` into the new basis. A side longer than
    ``max_precond_dim`` keeps ``Q = I``. This is the bookkeeping of
    :func:`jaxlab.optim.scale_by_deva_matrix` with Adam's direction (the ``deva`` experiment's
    baseline). Every leaf must be 2-D (route others with ``optax.partition``).

    Params must be floating point and each gradient must match the state's shapes (checked, the
    leaf's path named). A NaN or infinite gradient is counted in ``nonfinite_count`` and, as in
    Adam, enters ``m``, ``v``, ``L`` and ``R``, so every later update is NaN; to skip such steps
    (state left as it was) wrap the transform in ``optax.apply_if_finite``, as shown for
    :func:`jaxlab.optim.deva`.

    Args:
      b1: ``β₁ ∈ [0, 1)``.
      b2: ``β₂ ∈ [0, 1)``.
      eps: ``ε > 0`` added to ``√v``.
      shampoo_beta: ``β_s`` of ``L, R`` (None: ``b2``).
      precondition_frequency: calls between basis refreshes, an int ``>= 1``; None means 10,
        static. A value may be traced (``optax.inject_hyperparams`` injects it); pass it as
        ``jnp.int32(k)`` (strongly typed) or in ``static_args`` so that a restored state does
        not retrace.
      max_precond_dim: sides longer than this are not rotated; None means 10000. It sets the
        state's shapes, so it is static (list it in ``static_args`` to pass it through
        ``optax.inject_hyperparams``).

    Returns:
      An ``optax.GradientTransformationExtraArgs`` (the descent direction; chain a negative lr).

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> tx = scale_by_soap()
      >>> g = jax.random.normal(jax.random.key(0), (4, 3))
      >>> state = tx.init(g)
      >>> u0, state = tx.update(g, state)  # the first call only builds the basis
      >>> u1, state = tx.update(g, state)  # then Adam's first step, ±1 per rotated entry
      >>> q_l, q_r = state.basis_left, state.basis_right  # G's singular vectors: G̃ is diagonal
      >>> float(jnp.abs(u0).max()), jnp.abs(jnp.diagonal(q_l.T @ u1 @ q_r)).round(3).tolist()
      (0.0, [1.0, 1.0, 1.0])

    References:
      Vyas et al., "SOAP: Improving and Stabilizing Shampoo using Adam", ICLR 2025
      (arXiv 2409.11321).
    """
    check_betas(b1, b2, eps, shampoo_beta)

    def make_direction() -> Direction:
        beta2, epsilon = f32(b2), f32(eps)

        def direction(g_rot, mu, nu):
            nu = optax.tree.update_moment(g_rot, nu, beta2, 2)
            return mu / (jnp.sqrt(nu) + epsilon), nu

        return direction

    return eigenbasis_transform(
        make_direction, b1, b2, shampoo_beta, state_cls=ScaleBySoapState, method="SOAP",
        precondition_frequency=precondition_frequency, max_precond_dim=max_precond_dim,
        bias_correction=True,
    )  # fmt: skip
