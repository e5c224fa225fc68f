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
from typing import Any

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree
from jax.typing import ArrayLike

from jaxlab._src.validation import check_floating_tree, check_key, check_positive_int, check_real

__all__ = ["hvp", "top_eigenvalue"]

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
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be callable, got {type(loss_fn).__name__}")
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
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be callable, got {type(loss_fn).__name__}")
    check_floating_tree(params, "params")
    out = jax.eval_shape(loss_fn, params)
    if not (
        isinstance(out, jax.ShapeDtypeStruct)
        and out.shape == ()
        and jnp.issubdtype(out.dtype, jnp.floating)
    ):
        raise ValueError(f"loss_fn must return a real floating scalar, got {out}")


def _check_args(num_iters: Any, method: str, rng_key: Any) -> int:
    num_iters = check_positive_int(num_iters, "num_iters")
    if not isinstance(method, str) or method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
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
    flat, unravel = ravel_pytree(params)
    if flat.size == 0:
        raise ValueError("params has no entries")
    if not jnp.issubdtype(flat.dtype, jnp.floating):
        raise TypeError(f"params must be floating point, got dtype {flat.dtype}")
    _check_loss_fn(loss_fn, params)
    dtype = flat.dtype
    shift = jnp.asarray(shift, dtype)

    def matvec(x: jax.Array) -> jax.Array:
        return ravel_pytree(_hvp(loss_fn, params, unravel(x)))[0].astype(dtype) - shift * x

    start = jax.random.normal(rng_key, flat.shape, dtype)
    start = start / jnp.linalg.norm(start)
    if method == "power":
        value, vector = _power(matvec, start, num_iters)
    else:
        value, vector = _lanczos(matvec, start, min(num_iters, flat.size))
    return value + shift, unravel(vector)


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
