"""Hessian-vector products and the dominant Hessian eigenvalue of any loss over any pytree.

``hvp(loss_fn, params, v) = ∇²L(params)·v`` is forward-over-reverse, ``jax.jvp`` of
``jax.grad``: it costs a few gradients and never forms the Hessian. :func:`top_eigenvalue` runs
power iteration or Lanczos on it to estimate ``λ_max``, the quantity behind the stability limit
``η < 2/λ_max`` of gradient descent (and SimpleGPT's argument that normalizing after every linear
map lowers it).

References:
  Chen et al., "SimpleGPT: Improving GPT via A Simple Normalization Strategy", ICML 2026
  (the Hessian argument); Golub & Van Loan, *Matrix Computations*, 4th ed., §8.2 (power
  iteration) and §10.1 (Lanczos).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.flatten_util import ravel_pytree
from jax.typing import ArrayLike

from jaxlab._src.validation import (
    check_array,
    check_bool,
    check_callable,
    check_choice,
    check_floating_tree,
    check_in_range,
    check_indices,
    check_int,
    check_key,
    check_nonnegative,
    check_positive,
    check_positive_int,
    check_real,
    check_tree_like,
    is_concrete,
)
from jaxlab.nn._simplegpt import language_model_loss

if TYPE_CHECKING:
    from jaxlab.nn._simplegpt import SimpleGPT

__all__ = [
    "activation_hessian_top_eigenvalue",
    "adam_preconditioner",
    "adam_sharpness_limit",
    "hvp",
    "preconditioned_top_eigenvalue",
    "residual_stream_loss",
    "simplegpt_hessian_probe",
    "top_eigenvalue",
]

_METHODS = ("power", "lanczos")


def hvp(loss_fn: Callable[[Any], jax.Array], params: Any, v: Any) -> Any:
    """The Hessian-vector product ``∇²L(θ)·v`` by forward-over-reverse differentiation.

    ``∇²L(θ)v = d/dt ∇L(θ + t v)|_{t=0}``, computed as ``jax.jvp(jax.grad(L), (θ,), (v,))``.

    Args:
      loss_fn: ``params -> scalar`` (close over the batch; it must be twice differentiable).
      params: the point ``θ``, any pytree of float arrays.
      v: a pytree of the same structure, shapes and dtypes.

    Returns:
      ``∇²L(θ)·v``, a pytree like ``params``.

    Raises:
      TypeError: a non-callable ``loss_fn``, non-floating ``params``, or a ``v`` leaf whose
        dtype differs from the parameter's.
      ValueError: ``v`` not shaped like ``params`` (the leaf's path is named), or a
        ``loss_fn`` that does not return a scalar (checked by ``jax.eval_shape``).

    Examples:
      >>> import jax.numpy as jnp
      >>> a = jnp.array([[2.0, 1.0], [1.0, 3.0]])
      >>> loss = lambda p: 0.5 * p["x"] @ a @ p["x"]
      >>> hvp(loss, {"x": jnp.zeros(2)}, {"x": jnp.array([1.0, 0.0])})["x"]
      Array([2., 1.], dtype=float32)

    References:
      Pearlmutter, "Fast exact multiplication by the Hessian", Neural Computation 1994.
    """
    check_callable(loss_fn, "loss_fn")
    p_leaves, p_tree = jax.tree.flatten(params)
    v_leaves, v_tree = jax.tree_util.tree_flatten_with_path(v)
    if p_tree != jax.tree.structure(v):
        raise ValueError(
            f"v must have the structure of params: {jax.tree.structure(v)} vs {p_tree}"
        )
    for p, (path, w) in zip(p_leaves, v_leaves, strict=True):
        where = f"v{jax.tree_util.keystr(path)}"
        if jnp.shape(p) != jnp.shape(w):
            raise ValueError(
                f"{where} is a leaf of shape {jnp.shape(w)} where params has {jnp.shape(p)}"
            )
        if jnp.result_type(w) != jnp.result_type(p):
            raise TypeError(
                f"{where} has dtype {jnp.result_type(w)} where params has {jnp.result_type(p)} "
                "(jax.jvp needs equal dtypes)"
            )
    _check_loss_fn(loss_fn, params)
    return _hvp(loss_fn, params, v)


def _hvp(loss_fn, params, v):
    return jax.jvp(jax.grad(loss_fn), (params,), (v,))[1]


def _check_loss_fn(loss_fn: Any, params: Any) -> None:
    """``loss_fn`` is callable and maps ``params`` (floating leaves) to a real scalar.

    The output is checked with ``jax.eval_shape`` (a trace, no compilation), so a vector loss
    fails here, naming ``loss_fn``, instead of inside ``jax.grad``.
    """
    check_callable(loss_fn, "loss_fn")
    check_floating_tree(params, "params")
    if not jax.tree.leaves(params):
        raise ValueError(f"params must hold at least one floating array, got {params!r}")
    try:
        out = jax.eval_shape(loss_fn, params)
    except (KeyError, IndexError, AttributeError, TypeError) as err:  # params not what it reads
        raise ValueError(
            f"loss_fn(params) raised {type(err).__name__}: {err}; params must have the structure "
            "loss_fn reads"
        ) from err
    if not (
        isinstance(out, jax.ShapeDtypeStruct)
        and out.shape == ()
        and jnp.issubdtype(out.dtype, jnp.floating)
    ):
        raise ValueError(f"loss_fn must return a real floating scalar, got {out}")


def _check_args(num_iters: Any, method: str, rng_key: Any) -> int:
    num_iters = check_positive_int(num_iters, "num_iters")
    check_choice(method, "method", _METHODS)
    check_key(rng_key)
    return num_iters


def top_eigenvalue(
    loss_fn: Callable[[Any], jax.Array],
    params: Any,
    *,
    rng_key: jax.Array,
    num_iters: int = 20,
    method: str = "power",
    shift: ArrayLike = 0.0,
) -> tuple[jax.Array, Any]:
    """The dominant eigenvalue of the loss Hessian ``∇²L(θ)`` and its unit eigenvector.

    Both methods work on ``A = ∇²L(θ) − shift·I`` through :func:`hvp` only, from a random unit
    start ``v₀ ~ N(0, I)/‖·‖`` drawn with ``rng_key``, and return ``λ + shift`` where ``λ`` is the
    eigenvalue of ``A`` of **largest magnitude**, with its sign:

    * ``"power"``: ``w = A v_k``, ``λ_k = v_kᵀ w`` (the Rayleigh quotient),
      ``v_{k+1} = w/‖w‖``; ``num_iters`` products; returns ``(λ_K, v_K)`` of the last iterate.
      Converges like ``|λ₂/λ₁|^k``.
    * ``"lanczos"``: ``min(num_iters, n)`` Lanczos steps with full re-orthogonalization build a
      tridiagonal ``T = Vᵀ A V``; returns its Ritz value of largest magnitude and the Ritz vector
      ``V s``. Converges much faster on the spectrum's ends (``num_iters`` products, at most
      ``n``; memory ``num_iters × n``).

    The top of a neural-net Hessian is usually positive, but near a saddle the most *negative*
    eigenvalue can dominate: then the value returned is negative. To get the most positive
    eigenvalue ``λ_top`` anyway, call again with ``shift`` equal to that negative value: ``A``'s
    spectrum moves to ``[0, λ_top − shift]`` and its dominant eigenvalue is ``λ_top − shift``.

    Args:
      loss_fn: ``params -> scalar`` (on a fixed batch, deterministic: dropout off).
      params: the point ``θ``, any pytree of float arrays (flattened with ``ravel_pytree``).
      rng_key: a ``jax.random`` key for the start vector.
      num_iters: Hessian-vector products, ``>= 1``.
      method: ``"power"`` or ``"lanczos"``.
      shift: ``σ`` subtracted from the spectrum (may be traced).

    Returns:
      ``(value, vector)``: a scalar and a unit-norm pytree like ``params`` whose Rayleigh quotient
      is ``value``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> loss = lambda p: 0.5 * jnp.sum(jnp.arange(1.0, 11.0) * p["x"] ** 2)  # diag(1..10)
      >>> value, vector = top_eigenvalue(loss, {"x": jnp.ones(10)}, rng_key=jax.random.key(0),
      ...                                num_iters=10, method="lanczos")
      >>> round(float(value), 3), vector["x"].shape
      (10.0, (10,))
      >>> value, _ = top_eigenvalue(loss, {"x": jnp.ones(10)}, rng_key=jax.random.key(0),
      ...                           num_iters=200)
      >>> round(float(value), 2)
      10.0

    References:
      Golub & Van Loan, *Matrix Computations*, §8.2 and §10.1; Chen et al., "SimpleGPT", ICML
      2026 (λ_max by power iteration on Hessian-vector products).
    """
    num_iters = _check_args(num_iters, method, rng_key)
    check_real(shift, "shift")  # traced shifts pass unchecked
    _check_loss_fn(loss_fn, params)
    return _dominant(lambda v: _hvp(loss_fn, params, v), params, rng_key, num_iters, method, shift)


def _dominant(operator, params, rng_key, num_iters, method, shift):
    """The dominant eigenpair of the symmetric ``operator`` (pytree -> pytree) minus ``shift``."""
    flat, unravel = ravel_pytree(params)
    if flat.size == 0:
        raise ValueError("params has no entries")
    if not jnp.issubdtype(flat.dtype, jnp.floating):
        raise TypeError(f"params must be floating point, got dtype {flat.dtype}")
    dtype = flat.dtype
    shift = jnp.asarray(shift, dtype)

    def matvec(x: jax.Array) -> jax.Array:
        return ravel_pytree(operator(unravel(x)))[0].astype(dtype) - shift * x

    start = jax.random.normal(rng_key, flat.shape, dtype)
    start = start / jnp.linalg.norm(start)
    if method == "power":
        value, vector = _power(matvec, start, num_iters)
    else:
        value, vector = _lanczos(matvec, start, min(num_iters, flat.size))
    return value + shift, unravel(vector)


def activation_hessian_top_eigenvalue(
    loss_fn: Callable[[jax.Array], jax.Array],
    activation: ArrayLike,
    *,
    rng_key: jax.Array,
    num_iters: int = 20,
    method: str = "lanczos",
    shift: ArrayLike = 0.0,
    per_token: bool = True,
) -> tuple[jax.Array, jax.Array]:
    """The dominant eigenvalue of the loss Hessian with respect to an activation tensor.

    For an activation ``a`` of shape ``(..., d)`` (the leading axes index the ``N`` tokens, the
    last one features) and a loss ``L(a)`` that averages over tokens, this is the dominant
    eigenvalue of ``H_a = c·∇²_a L(a)`` with ``c = N`` when ``per_token`` (the Hessian of the
    *summed* per-token loss, so the value does not shrink as the batch grows: for a loss that
    treats tokens independently it is the largest eigenvalue of the per-token ``d × d`` blocks)
    and ``c = 1`` otherwise. It is :func:`top_eigenvalue` with the activation as the variable
    (same ``method``, ``shift`` and sign conventions; ``"lanczos"`` is the default here because
    an activation has many entries and Lanczos needs far fewer products).

    This is the curvature SimpleGPT's argument is about: normalizing after every linear map
    keeps the activations at scale ``Θ(√d)``, which bounds the Hessian with respect to them.
    For a SimpleGPT model, :func:`residual_stream_loss` gives ``L`` as a function of the
    residual stream entering a block.

    Args:
      loss_fn: ``activation -> scalar`` (the rest of the network and the loss, closed over the
        batch; deterministic).
      activation: the point ``a``, a floating array with at least one axis.
      rng_key: a ``jax.random`` key for the start vector.
      num_iters: Hessian-vector products, ``>= 1``.
      method: ``"lanczos"`` or ``"power"``.
      shift: ``σ`` subtracted from the spectrum of ``H_a`` (may be traced).
      per_token: scale by the number of tokens ``N = a.size / a.shape[-1]``.

    Returns:
      ``(value, vector)``: the eigenvalue (with its sign) and a unit-norm array shaped like
      ``activation``.

    Examples:
      Two tokens of a quadratic read-out ``L(a) = mean_t ½ a_tᵀ A a_t``: every per-token block
      is ``A``, whose top eigenvalue is 3.

      >>> import jax, jax.numpy as jnp
      >>> a_matrix = jnp.array([[2.0, 1.0], [1.0, 2.0]])
      >>> loss = lambda x: jnp.mean(0.5 * jnp.einsum("ti,ij,tj->t", x, a_matrix, x))
      >>> value, vector = activation_hessian_top_eigenvalue(
      ...     loss, jnp.ones((2, 2)), rng_key=jax.random.key(0), num_iters=4)
      >>> round(float(value), 4), vector.shape
      (3.0, (2, 2))

    References:
      Chen et al., "SimpleGPT: Improving GPT via A Simple Normalization Strategy", ICML 2026
      (the Hessian with respect to activations); Golub & Van Loan, *Matrix Computations*,
      §10.1.
    """
    num_iters = _check_args(num_iters, method, rng_key)
    per_token = check_bool(per_token, "per_token")
    check_real(shift, "shift")
    activation = check_array(activation, "activation", kind="floating")
    if activation.ndim < 1 or activation.size == 0:
        raise ValueError(
            f"activation must have a feature axis and entries, got shape {activation.shape}"
        )
    check_callable(loss_fn, "loss_fn")
    scale = activation.size // activation.shape[-1] if per_token else 1

    def scaled(a):
        return scale * loss_fn(a)

    _check_loss_fn(scaled, activation)
    return _dominant(
        lambda v: _hvp(scaled, activation, v), activation, rng_key, num_iters, method, shift
    )


def preconditioned_top_eigenvalue(
    loss_fn: Callable[[Any], jax.Array],
    params: Any,
    preconditioner: Any,
    *,
    rng_key: jax.Array,
    num_iters: int = 20,
    method: str = "lanczos",
    shift: ArrayLike = 0.0,
) -> tuple[jax.Array, Any]:
    """The dominant eigenvalue of the preconditioned Hessian ``P^{-1/2} ∇²L(θ) P^{-1/2}``.

    ``P`` is a positive diagonal preconditioner given as a pytree like ``params`` (for Adam,
    :func:`adam_preconditioner`). A preconditioned step ``θ ← θ − η P⁻¹ g`` is stable on a
    quadratic only if ``η·λ_max(P⁻¹H) < 2`` (with momentum, :func:`adam_sharpness_limit`), and
    ``P⁻¹H`` has the spectrum of the symmetric ``P^{-1/2} H P^{-1/2}``, whose products
    ``v ↦ P^{-1/2} ∇²L(θ) (P^{-1/2} v)`` this runs power iteration or Lanczos on (same
    ``method``, ``shift`` and sign conventions as :func:`top_eigenvalue`). With ``P = 1`` it is
    :func:`top_eigenvalue`.

    Args:
      loss_fn: ``params -> scalar`` on a fixed batch.
      params: the point ``θ``, a pytree of float arrays.
      preconditioner: a pytree like ``params`` with positive finite entries.
      rng_key: a ``jax.random`` key for the start vector.
      num_iters: Hessian-vector products, ``>= 1``.
      method: ``"lanczos"`` or ``"power"``.
      shift: ``σ`` subtracted from the spectrum (may be traced).

    Returns:
      ``(value, vector)``: the eigenvalue (with its sign) and a unit-norm pytree like
      ``params`` (an eigenvector of ``P^{-1/2} H P^{-1/2}``).

    Examples:
      ``H = diag(1, 10)`` and ``P = diag(1, 10)``: ``P⁻¹H = I``, top eigenvalue 1.

      >>> import jax, jax.numpy as jnp
      >>> loss = lambda p: 0.5 * (p["x"][0] ** 2 + 10.0 * p["x"][1] ** 2)
      >>> value, _ = preconditioned_top_eigenvalue(
      ...     loss, {"x": jnp.ones(2)}, {"x": jnp.array([1.0, 10.0])},
      ...     rng_key=jax.random.key(0), num_iters=2)
      >>> round(float(value), 4)
      1.0

    References:
      Cohen et al., "Adaptive Gradient Methods at the Edge of Stability", 2022
      (arXiv 2207.14484): the preconditioned sharpness ``λ_max(P⁻¹H)``.
    """
    num_iters = _check_args(num_iters, method, rng_key)
    check_real(shift, "shift")
    _check_loss_fn(loss_fn, params)
    check_tree_like(preconditioner, params, "preconditioner", "params")
    for path, leaf in jax.tree_util.tree_leaves_with_path(preconditioner):
        # Checked on the host (NumPy), so a concrete leaf closed over inside jit is checked too.
        values = np.asarray(leaf) if is_concrete(leaf) else None
        if values is not None and not np.all(np.isfinite(values) & (values > 0)):
            raise ValueError(
                f"preconditioner{jax.tree_util.keystr(path)} must be finite and > 0 everywhere "
                f"(min {np.min(values)})"
            )
    inv_sqrt = jax.tree.map(
        lambda p, x: jax.lax.rsqrt(p).astype(jnp.result_type(x)), preconditioner, params
    )

    def operator(v):
        hv = _hvp(loss_fn, params, jax.tree.map(jnp.multiply, inv_sqrt, v))
        return jax.tree.map(jnp.multiply, inv_sqrt, hv)

    return _dominant(operator, params, rng_key, num_iters, method, shift)


def adam_preconditioner(
    opt_state: Any, *, b1: ArrayLike = 0.9, b2: ArrayLike = 0.999, eps: ArrayLike = 1e-8
) -> Any:
    """Adam's diagonal preconditioner ``P`` read from an optax state (Adam, AdamW, chains).

    After ``t`` updates Adam's step is ``θ ← θ − η m̂/(√ν̂ + ε)`` with ``m̂ = m/(1 − β₁ᵗ)`` and
    ``ν̂ = ν/(1 − β₂ᵗ)``; written as ``θ ← θ − η P⁻¹ m`` (``m`` the raw momentum EMA),

    ``P = (1 − β₁ᵗ)·(√(ν/(1 − β₂ᵗ)) + ε)``,

    Cohen et al.'s convention, whose stability threshold is :func:`adam_sharpness_limit`. The
    state must hold exactly one ``optax.ScaleByAdamState`` (``ν`` and ``t = count`` come from
    it); ``b1``, ``b2``, ``eps`` are the optimizer's (the state does not store them). The
    gradients ``ν`` averages are the ones Adam saw (after any clipping earlier in a chain).

    Args:
      opt_state: an optax state containing one ``ScaleByAdamState``.
      b1: Adam's ``β₁`` in ``[0, 1)``.
      b2: Adam's ``β₂`` in ``[0, 1)``.
      eps: Adam's ``ε >= 0``.

    Returns:
      A pytree like the parameters: the diagonal of ``P``.

    Raises:
      TypeError: no (or more than one) ``ScaleByAdamState`` in ``opt_state``.
      ValueError: ``b1``/``b2``/``eps`` out of range, or a concrete ``count`` of 0 (no update
        yet: ``P`` is undefined).

    Examples:
      >>> import jax.numpy as jnp, optax
      >>> tx = optax.adam(0.1, b1=0.9, b2=0.99)
      >>> params = {"w": jnp.zeros(2)}
      >>> _, state = tx.update({"w": jnp.array([3.0, -4.0])}, tx.init(params), params)
      >>> p = adam_preconditioner(state, b1=0.9, b2=0.99)["w"]  # 0.1·(|g| + ε) after 1 step
      >>> [round(float(v), 4) for v in p]
      [0.3, 0.4]

    References:
      Kingma & Ba, "Adam", ICLR 2015; Cohen et al., "Adaptive Gradient Methods at the Edge of
      Stability", 2022 (arXiv 2207.14484).
    """
    check_in_range(b1, "b1", 0.0, 1.0)
    check_in_range(b2, "b2", 0.0, 1.0)
    check_nonnegative(eps, "eps")
    is_adam = lambda x: isinstance(x, optax.ScaleByAdamState)
    found = [x for x in jax.tree.leaves(opt_state, is_leaf=is_adam) if is_adam(x)]
    if len(found) != 1:
        raise TypeError(
            f"opt_state must contain exactly one optax.ScaleByAdamState, found {len(found)} "
            f"in {type(opt_state).__name__}"
        )
    state = found[0]
    count = state.count
    if is_concrete(count) and int(np.min(np.asarray(count))) < 1:
        raise ValueError("opt_state has count 0 (no Adam update yet): P is undefined")
    t = jnp.asarray(count, jnp.float32)
    first = 1.0 - jnp.asarray(b1, jnp.float32) ** t
    second = 1.0 - jnp.asarray(b2, jnp.float32) ** t
    return jax.tree.map(
        lambda nu: (first * (jnp.sqrt(nu / second) + eps)).astype(nu.dtype), state.nu
    )


def adam_sharpness_limit(learning_rate: ArrayLike, *, b1: ArrayLike = 0.9) -> jax.Array:
    """Adam's stability threshold on the preconditioned sharpness: ``(2 + 2β₁)/((1 − β₁)·η)``.

    Heavy-ball momentum with an EMA (``m ← β₁m + (1 − β₁)g``, ``θ ← θ − η P⁻¹m``) on a quadratic
    is stable iff ``λ_max(P⁻¹H) < (2 + 2β₁)/((1 − β₁)η)``: ``38/η`` for ``β₁ = 0.9``.

    Args:
      learning_rate: ``η > 0`` (may be traced).
      b1: momentum ``β₁`` in ``[0, 1)``.

    Returns:
      The threshold, a float32 scalar (or array like ``learning_rate``).

    Examples:
      >>> round(float(adam_sharpness_limit(1e-3)), 1)
      38000.0

    References:
      Cohen et al., "Adaptive Gradient Methods at the Edge of Stability", 2022
      (arXiv 2207.14484), §2.
    """
    check_positive(learning_rate, "learning_rate")
    check_in_range(b1, "b1", 0.0, 1.0)
    b1 = jnp.asarray(b1, jnp.float32)
    return (2.0 + 2.0 * b1) / ((1.0 - b1) * jnp.asarray(learning_rate, jnp.float32))


def residual_stream_loss(
    model: SimpleGPT, tokens: ArrayLike, targets: ArrayLike
) -> tuple[jax.Array, Callable[[Any, jax.Array], jax.Array]]:
    """A :class:`~jaxlab.nn.SimpleGPT`'s loss as a function of the residual stream at a block.

    Returns the residual stream ``h_ℓ`` entering each block ``ℓ = 0..L−1`` (``h_0`` the
    embedding, ``h_ℓ`` block ``ℓ−1``'s output) and ``loss_at(layer, x)``: the model's loss
    (:func:`~jaxlab.nn.language_model_loss`: mean cross-entropy, plus the MoE term) with block
    ``layer``'s input replaced by ``x``, so ``loss_at(ℓ, h_ℓ)`` is the model's loss and
    ``∇²_x loss_at(ℓ, x)`` the Hessian with respect to that activation (for
    :func:`activation_hessian_top_eigenvalue`). ``layer`` may be traced: one compiled program
    serves every block (the blocks before it run on the model's own stream, independent of
    ``x``). The model's own forward pass is not changed.

    Args:
      model: a :class:`~jaxlab.nn.SimpleGPT`.
      tokens: ``(B, T)`` ints in ``[0, V)``.
      targets: ``(B, T)`` ints in ``[0, V)``.

    Returns:
      ``(residuals, loss_at)``: a float32 array ``(L, B, T, d)`` and
      ``(layer, x) -> scalar``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from flax import nnx
      >>> from jaxlab.nn import GPTConfig, SimpleGPT, language_model_loss
      >>> model = SimpleGPT(GPTConfig(256, 16, 2, 2, max_len=8, multiple_of=16),
      ...                   rngs=nnx.Rngs(0))
      >>> tokens = jax.random.randint(jax.random.key(1), (2, 8), 0, 256)
      >>> residuals, loss_at = residual_stream_loss(model, tokens, tokens)
      >>> residuals.shape
      (2, 2, 8, 16)
      >>> bool(jnp.allclose(loss_at(1, residuals[1]), language_model_loss(model, tokens, tokens)))
      True

    References:
      Chen et al., "SimpleGPT: Improving GPT via A Simple Normalization Strategy", ICML 2026.
    """
    from jaxlab.nn._simplegpt import SimpleGPT

    if not isinstance(model, SimpleGPT):
        raise TypeError(f"model must be a SimpleGPT, got {type(model).__name__}")
    tokens = model._check_tokens(tokens)
    targets = check_array(targets, "targets", kind="integer")
    if targets.shape != tokens.shape:
        raise ValueError(f"targets must have shape {tokens.shape}, got {targets.shape}")
    check_indices(targets, "targets", model.config.vocab_size, "vocab_size")
    num_layers = model.config.num_layers
    ids, _ = model._out_of_vocabulary(tokens)
    target_ids, _ = model._out_of_vocabulary(targets)
    embedded = jnp.take(model.embedding[...], ids, axis=0, mode="fill", fill_value=jnp.nan)

    def run(layer, x):
        # The same operations, in the same order, as SimpleGPT._forward and loss_and_aux.
        h, aux, inputs = embedded, jnp.zeros((), jnp.float32), []
        for i, block in enumerate(model.blocks):
            if x is not None:
                h = jnp.where(layer == i, x, h)
            inputs.append(h)
            h, block_aux = block(h, None, f"layer{i}")
            aux = aux + block_aux
        logits = model.final_norm(h).astype(jnp.float32) @ model.head[...].astype(jnp.float32)
        ce = jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, target_ids))
        if model.config.num_experts > 0:
            ce = ce + model.config.moe_aux_weight * aux
        return ce, inputs

    residuals = jnp.stack(run(None, None)[1]).astype(jnp.float32)

    def loss_at(layer, x):
        if is_concrete(layer):
            check_int(layer, "layer", minimum=0, maximum=num_layers - 1)
        x = check_array(x, "x", kind="floating")
        if x.shape != residuals.shape[1:]:
            raise ValueError(f"x must have shape {residuals.shape[1:]}, got {x.shape}")
        return run(jnp.asarray(layer), x)[0]

    return residuals, loss_at


def _top_with_shift(fn, *args) -> tuple[float, float]:
    """``fn(..., shift)``'s dominant eigenvalue, re-run with a shift when it is negative."""
    dominant = float(fn(*args, 0.0))
    return (float(fn(*args, dominant)) if dominant < 0 else dominant), dominant


def simplegpt_hessian_probe(
    graphdef: Any,
    batch: tuple[jax.Array, jax.Array],
    *,
    num_iters: int = 20,
    b1: float = 0.9,
    b2: float = 0.999,
    eps: float = 1e-8,
) -> Callable[[Any, Any, jax.Array], dict[str, Any]]:
    """SimpleGPT's Hessian diagnostics at a checkpoint, on one fixed batch (jitted once per model).

    The returned ``probe(params, opt_state, rng_key)`` measures, by Lanczos on Hessian-vector
    products (re-run with the shift ``λ_dom`` when the dominant eigenvalue ``λ_dom`` is negative,
    so the result is the largest algebraic one):

    * ``activation``: per block ``ℓ``, the per-token top eigenvalue of the loss Hessian with
      respect to the residual stream entering it (:func:`activation_hessian_top_eigenvalue` on
      :func:`residual_stream_loss`), and ``activation_dominant``, the unshifted dominant one;
    * ``preconditioned``: ``λ_max(P^{-1/2} H P^{-1/2})`` with Adam's preconditioner ``P`` from
      ``opt_state`` (:func:`adam_preconditioner`), and ``preconditioned_dominant``;
    * ``raw``: ``λ_max(H)`` of the parameter Hessian (``P = I``);
    * ``residual_rms``: the RMS of the residual stream entering each block, and
      ``sublayer_rms``, the model's ``SimpleGPT.activation_rms``.

    Args:
      graphdef: the model's ``nnx`` graph definition (``nnx.split(model)[0]``).
      batch: ``(tokens, targets)`` of shape ``(B, T)``.
      num_iters: Lanczos steps (Hessian-vector products) per eigenvalue.
      b1: Adam's ``β₁`` of ``opt_state``.
      b2: Adam's ``β₂``.
      eps: Adam's ``ε``.

    Returns:
      ``probe(params, opt_state, rng_key) -> dict`` of Python floats (lists per block).

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from flax import nnx
      >>> from jaxlab.nn import GPTConfig, SimpleGPT, simplegpt_optimizer
      >>> model = SimpleGPT(GPTConfig(256, 16, 2, 2, max_len=8, multiple_of=16), rngs=nnx.Rngs(0))
      >>> graphdef, params = nnx.split(model, nnx.Param)
      >>> batch = (jnp.arange(8)[None], jnp.arange(1, 9)[None])
      >>> probe = simplegpt_hessian_probe(graphdef, batch, num_iters=3, b1=0.9, b2=0.95)
      >>> tx = simplegpt_optimizer(1e-3)  # Adam's P needs one update before the probe
      >>> _, opt_state = tx.update(jax.tree.map(jnp.ones_like, params), tx.init(params), params)
      >>> record = probe(params, opt_state, jax.random.key(0))  # doctest: +SKIP
      >>> len(record["activation"]), len(record["residual_rms"])  # doctest: +SKIP
      (2, 2)
    """
    num_iters = check_positive_int(num_iters, "num_iters")
    tokens, targets = batch

    def activation(params, layer, key, shift):
        residuals, loss_at = residual_stream_loss(nnx.merge(graphdef, params), tokens, targets)
        return activation_hessian_top_eigenvalue(
            lambda x: loss_at(layer, x),
            residuals[layer],
            rng_key=key,
            num_iters=num_iters,
            shift=shift,
        )[0]

    def preconditioned(params, pre, key, shift):
        def loss(p):
            return language_model_loss(nnx.merge(graphdef, p), tokens, targets)

        return preconditioned_top_eigenvalue(
            loss, params, pre, rng_key=key, num_iters=num_iters, shift=shift
        )[0]

    def rms(params):
        model = nnx.merge(graphdef, params)
        residuals, _ = residual_stream_loss(model, tokens, targets)
        per_layer = jnp.sqrt(jnp.mean(jnp.square(residuals), axis=(1, 2, 3)))
        return per_layer, model.activation_rms(tokens)

    activation, preconditioned, rms = jax.jit(activation), jax.jit(preconditioned), jax.jit(rms)

    def probe(params, opt_state, rng_key) -> dict[str, Any]:
        per_layer, sublayer = rms(params)
        tops = [
            _top_with_shift(activation, params, jnp.asarray(i), rng_key)
            for i in range(per_layer.shape[0])
        ]
        pre = adam_preconditioner(opt_state, b1=b1, b2=b2, eps=eps)
        top, dominant = _top_with_shift(preconditioned, params, pre, rng_key)
        ones = jax.tree.map(jnp.ones_like, pre)
        return {
            "activation": [t[0] for t in tops],
            "activation_dominant": [t[1] for t in tops],
            "preconditioned": top,
            "preconditioned_dominant": dominant,
            "raw": _top_with_shift(preconditioned, params, ones, rng_key)[0],
            "residual_rms": [float(v) for v in per_layer],
            "sublayer_rms": {name: float(v) for name, v in sublayer.items()},
        }

    return probe


def _power(matvec, start, num_iters):
    def body(_, v):
        w = matvec(v)
        norm = jnp.linalg.norm(w)
        # A zero product (v in the null space) stops the iteration where it is.
        return jnp.where(norm > 0, w / jnp.where(norm > 0, norm, 1.0), v)

    v = jax.lax.fori_loop(0, num_iters - 1, body, start)
    # The last product gives the Rayleigh quotient of the returned vector exactly.
    return jnp.vdot(v, matvec(v)), v


def _lanczos(matvec, start, steps):
    n, dtype = start.shape[0], start.dtype
    tiny = jnp.finfo(dtype).eps ** 0.5

    def body(j, carry):
        basis, alphas, betas, v, v_prev, beta_prev, scale = carry
        w = matvec(v)
        alpha = jnp.vdot(v, w)
        w = w - alpha * v - beta_prev * v_prev
        basis = basis.at[j].set(v)
        w = w - basis.T @ (basis @ w)  # full re-orthogonalization against every Lanczos vector
        w = w - basis.T @ (basis @ w)  # twice is enough (Kahan-Parlett)
        beta = jnp.linalg.norm(w)
        scale = jnp.maximum(scale, jnp.abs(alpha) + beta)
        # Breakdown: the Krylov space is invariant; go on with zeros (a decoupled zero block).
        alive = beta > tiny * scale
        v_next = jnp.where(alive, w / jnp.where(alive, beta, 1.0), jnp.zeros_like(w))
        beta = jnp.where(alive, beta, 0.0)
        return basis, alphas.at[j].set(alpha), betas.at[j].set(beta), v_next, v, beta, scale

    init = (
        jnp.zeros((steps, n), dtype),
        jnp.zeros((steps,), dtype),
        jnp.zeros((steps,), dtype),
        start,
        jnp.zeros_like(start),
        jnp.zeros((), dtype),
        jnp.zeros((), dtype),
    )
    basis, alphas, betas, *_ = jax.lax.fori_loop(0, steps, body, init)
    off = betas[:-1]
    tridiagonal = jnp.diag(alphas) + jnp.diag(off, 1) + jnp.diag(off, -1)
    ritz_values, ritz_vectors = jnp.linalg.eigh(tridiagonal)
    index = jnp.argmax(jnp.abs(ritz_values))
    # V has orthonormal rows, so the Ritz value is the Rayleigh quotient of the Ritz vector V s.
    vector = basis.T @ ritz_vectors[:, index]
    return ritz_values[index], vector / jnp.linalg.norm(vector)
