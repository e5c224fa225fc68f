"""Stochastic variational inequality solvers: extragradient (FBF/EG, EG+) and Halpern-anchored FBF.

The problem: find ``z*`` with ``0 ∈ F(z*) + N_Z(z*)``, where ``F`` is an L-Lipschitz operator and
``N_Z`` the normal cone of a closed convex set ``Z`` (possibly unbounded, e.g. ``R^d x R^d_+``),
whose projection ``Π_Z`` is given (``optax.projections`` has the usual ones). ``F`` is only seen
through a stochastic oracle whose variance may grow with ``||z||^2`` (Alacaoglu & Kim 2026), so
the methods average growing minibatches (or use a recursive estimator) instead of assuming a
bounded variance.

The operator is a user function ``operator_fn(z, rng_key, batch_size, *args) -> F̂``: an unbiased
estimate of ``F(z, *args)`` averaged over ``batch_size`` i.i.d. samples drawn from ``rng_key``.
``batch_size`` is a traced int32 scalar, so the whole run stays inside ``lax.while_loop``; write the
average as a closed-form draw (a batch of ``b`` Gaussian perturbations of scale ``σ`` is equal in
law to one of scale ``σ/√b``) or wrap a single-sample oracle with :func:`minibatch_operator`. The
same ``(rng_key, batch_size)`` must give the same samples at any ``z`` (the recursive estimator
evaluates one sample set at two points). Oracle calls (``batch_size`` per evaluation) are counted
in the state, because calls, not iterations, are the cost the theory bounds, as an exact
:class:`OracleCount` of two uint32 words that does not wrap past ``2^31`` (``p = 2`` batches
pass it within a few thousand iterations) whether or not x64 is enabled.

Solvers are dataclasses with jaxopt's shape (``init_state``, ``update``, ``run``,
``optimality_fun``); the key is passed to ``run``/``init_state`` as the keyword ``rng_key``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxlab._src import validation
from jaxlab._src.solver import IterativeSolver, OptStep, SolverStatus
from jaxlab._src.tree import add_scale, convex_combination

__all__ = [
    "HalpernExtragradient",
    "HalpernState",
    "OracleCount",
    "StochasticExtragradient",
    "StochasticGradientDescentAscent",
    "VIState",
    "constant_batch_schedule",
    "halpern_anchor_schedule",
    "minibatch_operator",
    "natural_residual",
    "polynomial_batch_schedule",
    "run_to_checkpoints",
]

# Largest batch a schedule returns: batch sizes are int32 (the operator receives a traced int32).
_MAX_BATCH = 2**31 - 1
# Iterations of a batch schedule checked eagerly (a 256 KiB int32 vector at most).
_EAGER_SCHEDULE_STEPS = 2**16
_VARIANTS = ("fbf", "eg")
_ESTIMATORS = ("minibatch", "recursive")


# ---------------------------------------------------------------------------------------------
# Small helpers.


def _identity(tree):
    return tree


def _float_dtype(tree) -> Any:
    leaves = jax.tree.leaves(tree)
    if not leaves:
        raise ValueError("params must contain at least one array leaf")
    dtype = jnp.result_type(*leaves)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"params must have floating-point leaves, got dtype {dtype}")
    return dtype


def _batch_size(schedule, iter_num) -> tuple[jax.Array, jax.Array]:
    """``(b_k as int32, whether b_k is outside [1, 2^31 - 1])`` (checked before the cast)."""
    batch = jnp.asarray(schedule(iter_num))
    if batch.ndim != 0 or not jnp.issubdtype(batch.dtype, jnp.integer):
        raise TypeError(
            f"batch_schedule(k) must return an integer scalar, got {batch.dtype}{list(batch.shape)}"
        )
    bad = batch < 1
    if jnp.iinfo(batch.dtype).max > _MAX_BATCH:
        bad = bad | (batch > _MAX_BATCH)
    return batch.astype(jnp.int32), bad


def _check_batch_schedule(schedule, maxiter: int) -> None:
    """Rejects a schedule whose (concrete) sizes leave ``[1, 2^31 - 1]`` within ``maxiter``.

    Evaluated eagerly for ``k = 0 .. min(maxiter, 2^16) - 1`` (one vectorised call); a schedule
    whose sizes are traced (built from traced hyperparameters) or that goes bad later is left
    to the run, which reports a bad size as ``SolverStatus.BAD_BATCH_SIZE``.
    """
    steps = min(maxiter, _EAGER_SCHEDULE_STEPS)
    with jax.ensure_compile_time_eval():
        sizes = jax.vmap(schedule)(jnp.arange(steps, dtype=jnp.int32))
        sizes = jnp.asarray(sizes)
        if sizes.shape != (steps,) or not jnp.issubdtype(sizes.dtype, jnp.integer):
            raise TypeError(
                f"batch_schedule(k) must return an integer scalar, got "
                f"{sizes.dtype}{list(sizes.shape[1:])}"
            )
        if not validation.is_concrete(sizes):
            return
        sizes = np.asarray(sizes)
    bad = (sizes < 1) | (sizes > _MAX_BATCH)
    if np.any(bad):
        k = int(np.argmax(bad))
        raise ValueError(
            f"batch_schedule(k) must return batch sizes in [1, {_MAX_BATCH}], got "
            f"batch_schedule({k}) = {int(sizes[k])}"
        )


def _describe(tree) -> str:
    shapes = jax.tree.map(lambda x: f"{jnp.dtype(x.dtype).name}{list(x.shape)}", tree)
    return str(shapes)


def _check_like(name: str, out, params, signature: str) -> None:
    """Raises ValueError unless ``out`` has the tree structure, shapes and dtypes of ``params``."""
    same_structure = jax.tree.structure(out) == jax.tree.structure(params)
    same_leaves = same_structure and all(
        tuple(o.shape) == tuple(p.shape) and o.dtype == p.dtype
        for o, p in zip(jax.tree.leaves(out), jax.tree.leaves(params), strict=True)
    )
    if not same_leaves:
        raise ValueError(
            f"{name}{signature} must return a pytree with the structure, shapes and dtypes of "
            f"params; got {_describe(out)} for params {_describe(params)}"
        )


# ---------------------------------------------------------------------------------------------
# The oracle-call count.

_WORD = 2**32


@jax.tree_util.register_pytree_node_class
class OracleCount:
    """An exact, non-wrapping count of oracle calls: two uint32 words ``high * 2^32 + low``.

    int32 (the only 64-bit-free integer JAX has without x64) wraps past ``2^31`` calls, which a
    run with ``p = 2`` batches passes within about 2000 iterations, and float32 stops counting
    single calls past ``2^24``. Two uint32 words count exactly to ``2^64`` with or without x64.
    Read it on the host with ``int(count)`` or ``np.asarray(count)`` (int64, also for a batch of
    counts from ``vmap``/``scan``); inside a traced program compare it with :meth:`less_than`, or
    use :meth:`as_float` (approximate above ``2^24`` in float32).

    Examples:
      >>> count = OracleCount.zeros().add(jnp.int32(2**31 - 1), times=3)
      >>> int(count), 3 * (2**31 - 1)
      (6442450941, 6442450941)
      >>> bool(count.less_than(6442450942)), bool(count.less_than(6442450941))
      (True, False)
    """

    def __init__(self, high: jax.typing.ArrayLike, low: jax.typing.ArrayLike):
        self.high = high
        self.low = low

    @classmethod
    def zeros(cls) -> OracleCount:
        """A count of 0."""
        return cls(jnp.zeros((), jnp.uint32), jnp.zeros((), jnp.uint32))

    def add(self, calls: jax.typing.ArrayLike, times: int = 1) -> OracleCount:
        """The count plus ``times * calls`` (``calls`` an integer in ``[0, 2^32)``, traced too)."""
        calls = jnp.asarray(calls).astype(jnp.uint32)
        high, low = self.high, self.low
        for _ in range(times):
            new_low = low + calls  # wraps modulo 2^32: the carry is the wrap
            high = high + (new_low < low).astype(jnp.uint32)
            low = new_low
        return OracleCount(high, low)

    def less_than(self, target: Any) -> jax.Array:
        """Whether the count is ``< target`` (a non-negative number or integer array), exactly.

        ``target`` may be an :class:`OracleCount`, or anything NumPy reads as integers (checked
        on the host) or a traced integer array below ``2^32``.
        """
        if isinstance(target, OracleCount):
            high, low = target.high, target.low
        elif validation.is_concrete(target):
            value = np.asarray(target)
            if np.issubdtype(value.dtype, np.floating):
                value = np.ceil(value)
            value = value.astype(np.uint64)
            high = jnp.asarray((value >> np.uint64(32)).astype(np.uint32))
            low = jnp.asarray((value & np.uint64(_WORD - 1)).astype(np.uint32))
        else:
            high, low = jnp.zeros((), jnp.uint32), jnp.asarray(target).astype(jnp.uint32)
        return (self.high < high) | ((self.high == high) & (self.low < low))

    def as_float(self, dtype: Any = None) -> jax.Array:
        """The count as a float (default: the default float dtype; approximate past 2^24 in f32)."""
        dtype = dtype or jax.dtypes.canonicalize_dtype(jnp.float64)
        return self.high.astype(dtype) * jnp.asarray(float(_WORD), dtype) + self.low.astype(dtype)

    def __array__(self, dtype=None, copy=None):
        high = np.asarray(self.high).astype(np.uint64)
        value = (high << np.uint64(32)) | np.asarray(self.low).astype(np.uint64)
        return np.asarray(value.astype(np.int64), dtype=dtype)

    def __int__(self) -> int:
        return int(np.asarray(self.high)) * _WORD + int(np.asarray(self.low))

    __index__ = __int__

    def __eq__(self, other) -> Any:
        return np.asarray(self) == np.asarray(other)

    __hash__ = None

    def __repr__(self) -> str:
        try:
            return f"OracleCount({np.asarray(self).tolist()})"
        except Exception:  # traced words
            return f"OracleCount(high={self.high!r}, low={self.low!r})"

    def tree_flatten(self):
        return (self.high, self.low), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        del aux
        return cls(*children)


# ---------------------------------------------------------------------------------------------
# Schedules, operators, residual.


def polynomial_batch_schedule(
    initial_batch_size: float = 1, power: float = 1.0
) -> Callable[[jax.typing.ArrayLike], jax.Array]:
    """Growing batch sizes ``b_k = ceil(b0 (k + 1)^p)`` for iteration ``k = 0, 1, ...``.

    With ``p = 1`` an ``O(1/√K)`` residual costs ``Σ_k b_k ≈ K²`` calls, i.e. ``Õ(ε⁻⁴)`` calls for
    residual ``ε`` (the paper's rate); ``p = 2`` is often faster in practice; ``p = 0`` is a
    constant batch, which stalls at a noise floor (or diverges) under multiplicative noise.
    Integer ``b0`` and ``p`` are computed exactly in integers. Values saturate at ``2^31 - 1``,
    the largest int32 batch. Python numbers are checked here; traced ``b0``/``p`` (to ``vmap``
    over schedules) are not, and are computed in floating point.

    Args:
      initial_batch_size: ``b0 >= 1``.
      power: ``p >= 0``.

    Returns:
      ``schedule(k) -> int32`` batch size for (traced) iteration number ``k``.

    Examples:
      >>> schedule = polynomial_batch_schedule(2, 1)
      >>> [int(schedule(k)) for k in range(4)]
      [2, 4, 6, 8]
      >>> [int(polynomial_batch_schedule(1, 2)(k)) for k in range(4)]
      [1, 4, 9, 16]
      >>> [int(polynomial_batch_schedule(1, 0.5)(k)) for k in range(4)]
      [1, 2, 2, 2]

    References:
      A. Alacaoglu, D. Kim, Solving Stochastic Variational Inequalities without the Bounded
      Variance Assumption, ICML 2026 (arXiv 2602.05531); A. N. Iusem, A. Jofré, R. I. Oliveira,
      P. Thompson, Extragradient method with variance reduction for stochastic variational
      inequalities, SIAM J. Optim. 2017.
    """
    b0 = validation.check_real(initial_batch_size, "initial_batch_size", minimum=1.0)
    p = validation.check_nonnegative(power, "power")
    exact = b0 is not None and p is not None and b0.is_integer() and p.is_integer()

    def schedule(iter_num: jax.typing.ArrayLike) -> jax.Array:
        k1 = jnp.asarray(iter_num).astype(jnp.int32) + 1
        dtype = jax.dtypes.canonicalize_dtype(jnp.float64)
        approx = jnp.asarray(initial_batch_size, dtype) * jnp.power(
            k1.astype(dtype), jnp.asarray(power, dtype)
        )
        if exact:
            value = jnp.int32(int(b0)) * jax.lax.integer_pow(k1, int(p))
        else:
            # pow is computed as exp(p log x): an integer result may come out a few ulps off,
            # so values within 8 ulps of an integer are that integer, the others are rounded up.
            eps = float(jnp.finfo(dtype).eps)
            nearest = jnp.round(approx)
            near_integer = jnp.abs(approx - nearest) <= 8 * eps * approx
            value = jnp.where(near_integer, nearest, jnp.ceil(approx)).astype(jnp.int32)
        return jnp.where(approx < _MAX_BATCH, value, jnp.int32(_MAX_BATCH))

    return schedule


def constant_batch_schedule(batch_size: int) -> Callable[[jax.typing.ArrayLike], jax.Array]:
    """The constant batch ``b_k = batch_size`` (the baseline that stalls under growing variance).

    Args:
      batch_size: an int ``>= 1``.

    Returns:
      ``schedule(k) -> int32``.

    Examples:
      >>> int(constant_batch_schedule(100)(7))
      100

    References:
      A. Alacaoglu, D. Kim, Solving Stochastic Variational Inequalities without the Bounded
      Variance Assumption, ICML 2026 (arXiv 2602.05531).
    """
    value = validation.check_int(batch_size, "batch_size", minimum=1, maximum=_MAX_BATCH)

    def schedule(iter_num: jax.typing.ArrayLike) -> jax.Array:
        del iter_num
        return jnp.int32(value)

    return schedule


def halpern_anchor_schedule(iter_num: jax.typing.ArrayLike) -> jax.Array:
    """Halpern's anchor weight ``β_k = 1 / (k + 2)`` (the default of :class:`HalpernExtragradient`).

    Args:
      iter_num: the iteration ``k >= 0``.

    Returns:
      ``β_k`` as a scalar of the default float dtype (cast to each leaf's dtype where used).

    A concrete ``k`` (number or array) must be a finite real ``>= 0`` (``k = -2`` would divide
    by zero); a traced ``k`` (the solver's ``iter_num``, never negative) is not checked.

    Examples:
      >>> [round(float(halpern_anchor_schedule(k)), 4) for k in range(3)]
      [0.5, 0.3333, 0.25]
      >>> halpern_anchor_schedule(-2)
      Traceback (most recent call last):
      ...
      ValueError: iter_num must be finite and >= 0.0, got -2.0

    References:
      B. Halpern, Fixed points of nonexpanding maps, Bull. AMS 1967; T. Yoon, E. K. Ryu,
      Accelerated algorithms for smooth convex-concave minimax problems, ICML 2021.
    """
    validation.check_real_array(iter_num, "iter_num", minimum=0.0)
    k = jnp.asarray(iter_num).astype(jax.dtypes.canonicalize_dtype(jnp.float64))
    return 1.0 / (k + 2.0)


def minibatch_operator(sample_operator_fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turns a one-sample oracle ``sample_operator_fn(z, rng_key, *args)`` into a minibatch oracle.

    ``operator_fn(z, rng_key, batch_size, *args) = (1/b) Σ_{i<b} sample_operator_fn(z, k_i, *args)``
    with ``k_i = fold_in(rng_key, i)``, computed by a ``lax.fori_loop`` over the traced batch size
    (its cost grows with ``b``; where the average has a closed form, write it directly). The same
    key and batch size give the same samples at any ``z``.

    Args:
      sample_operator_fn: ``(z, rng_key, *args) -> F̂(z, ξ)``, one unbiased sample.

    Returns:
      ``operator_fn(z, rng_key, batch_size, *args)`` with the solvers' signature.

    Examples:
      >>> sample = lambda z, key: z + jax.random.normal(key, z.shape)
      >>> operator_fn = minibatch_operator(sample)
      >>> estimate = operator_fn(jnp.ones(2), jax.random.key(0), jnp.int32(10_000))
      >>> bool(jnp.all(jnp.abs(estimate - 1.0) < 0.05))
      True

    References:
      A. Alacaoglu, D. Kim, Solving Stochastic Variational Inequalities without the Bounded
      Variance Assumption, ICML 2026 (arXiv 2602.05531).
    """
    validation.check_callable(sample_operator_fn, "sample_operator_fn")

    def operator_fn(z, rng_key, batch_size, *args):
        batch_size = jnp.asarray(batch_size).astype(jnp.int32)

        def body(i, total):
            return optax.tree.add(
                total, sample_operator_fn(z, jax.random.fold_in(rng_key, i), *args)
            )

        zeros = optax.tree.zeros_like(z)
        total = jax.lax.fori_loop(0, batch_size, body, zeros)
        return jax.tree.map(lambda t: t / batch_size.astype(t.dtype), total)

    return operator_fn


def natural_residual(
    operator_fn: Callable[..., Any],
    params: Any,
    *args: Any,
    projection: Callable[[Any], Any] | None = None,
    stepsize: jax.typing.ArrayLike = 1.0,
) -> jax.Array:
    """The natural residual ``res_γ(z) = ||z - Π_Z(z - γ F(z))|| / γ`` (zero exactly at solutions).

    Args:
      operator_fn: the exact operator ``F(z, *args)`` (no key, no batch).
      params: the point ``z`` (a pytree).
      *args: extra arguments of ``operator_fn``.
      projection: ``Π_Z``; ``None`` for the unconstrained problem (``res = ||F(z)||``).
      stepsize: ``γ > 0``.

    Returns:
      The residual, a scalar.

    Examples:
      >>> from optax.projections import projection_non_negative
      >>> F = lambda z: z - 1.0
      >>> float(natural_residual(F, jnp.array([1.0, 3.0])))  # ||F(z)||, unconstrained
      2.0
      >>> float(natural_residual(F, jnp.array([0.0]) + 0.0, projection=projection_non_negative))
      1.0

    References:
      A. Alacaoglu, D. Kim, Solving Stochastic Variational Inequalities without the Bounded
      Variance Assumption, ICML 2026 (arXiv 2602.05531).
    """
    validation.check_positive(stepsize, "stepsize")
    validation.check_callable(operator_fn, "operator_fn", signature="operator_fn(z, *args)")
    validation.check_callable(projection, "projection", allow_none=True)
    _float_dtype(params)
    out = jax.eval_shape(lambda z, *a: operator_fn(z, *a), params, *args)
    _check_like("operator_fn", out, params, "(z, *args)")
    projection = _identity if projection is None else projection
    forward = add_scale(params, -stepsize, operator_fn(params, *args))
    step = optax.tree.sub(params, projection(forward))
    norm = optax.tree.norm(step)
    return norm / jnp.asarray(stepsize, norm.dtype)


# ---------------------------------------------------------------------------------------------
# States.


class VIState(NamedTuple):
    """State of :class:`StochasticExtragradient` and :class:`StochasticGradientDescentAscent`.

    Attributes:
      iter_num: iterations done (int32).
      error: natural residual at ``feasible_params`` when the solver has ``exact_operator_fn``,
        else the stochastic step length ``||ẑ_k - z_k|| / γ`` (an estimate of the same residual).
      oracle_calls: oracle samples used so far, an exact :class:`OracleCount` (``int(...)``
        on the host; it does not wrap past ``2^31``).
      rng_key: the key the next step splits.
      anchor: the starting point ``z_0``.
      feasible_params: the last feasible point (``z̄_k = Π_Z(z_k - γ F̂(z_k))``); the iterate
        ``params`` of a forward-backward-forward step may leave ``Z``.
      status: int32 :class:`~jaxlab.solvers.SolverStatus` code of the last update: ``RUNNING``,
        ``CONVERGED`` (``error <= tol``), ``MAXITER``, ``NONFINITE`` (a NaN/inf iterate or a NaN
        error: the loop stops there, returning that iterate) or ``BAD_BATCH_SIZE`` (a traced
        ``batch_schedule`` returned a size outside ``[1, 2^31 - 1]``: the step was not taken).

    Examples:
      >>> solver = StochasticExtragradient(operator_fn=lambda z, key, b: z, stepsize=0.5)
      >>> state = solver.init_state(jnp.ones(2), rng_key=jax.random.key(0))
      >>> int(state.oracle_calls), int(state.status)
      (0, 0)
    """

    iter_num: jax.Array
    error: jax.Array
    oracle_calls: OracleCount
    rng_key: jax.Array
    anchor: Any
    feasible_params: Any
    status: jax.Array


class HalpernState(NamedTuple):
    """State of :class:`HalpernExtragradient`.

    Attributes:
      iter_num: iterations done (int32).
      error: as in :class:`VIState`.
      oracle_calls: oracle samples used so far (an exact :class:`OracleCount`).
      rng_key: the key the next step splits.
      anchor: the anchor ``z_0``.
      feasible_params: the last feasible point ``z̄_k``.
      status: as in :class:`VIState` (a :class:`~jaxlab.solvers.SolverStatus` code).
      previous_params: ``z_{k-1}`` (the recursive estimator's last point).
      previous_feasible: ``z̄_{k-1}``.
      operator_estimate: ``v_{k-1} ≈ F(z_{k-1})`` (recursive estimator).
      extrapolation_estimate: ``u_{k-1} ≈ F(z̄_{k-1})`` (recursive estimator).

    Examples:
      >>> solver = HalpernExtragradient(operator_fn=lambda z, key, b: z, stepsize=0.1)
      >>> state = solver.init_state(jnp.ones(2), rng_key=jax.random.key(0))
      >>> state.anchor.tolist()
      [1.0, 1.0]
    """

    iter_num: jax.Array
    error: jax.Array
    oracle_calls: OracleCount
    rng_key: jax.Array
    anchor: Any
    feasible_params: Any
    status: jax.Array
    previous_params: Any
    previous_feasible: Any
    operator_estimate: Any
    extrapolation_estimate: Any


# ---------------------------------------------------------------------------------------------
# Solvers.


class _StochasticVISolver(IterativeSolver):
    """Checks and pieces shared by the stochastic VI solvers (each declares its own fields)."""

    def __post_init__(self):
        super().__post_init__()
        validation.check_callable(
            self.operator_fn, "operator_fn", signature="operator_fn(z, rng_key, batch_size, *args)"
        )
        validation.check_positive(self.stepsize, "stepsize")
        validation.check_positive(self.residual_stepsize, "residual_stepsize")
        validation.check_callable(self.projection, "projection", allow_none=True)
        validation.check_callable(
            self.batch_schedule, "batch_schedule", signature="batch_schedule(k) -> int"
        )
        validation.check_callable(
            self.exact_operator_fn,
            "exact_operator_fn",
            signature="exact_operator_fn(z, *args)",
            allow_none=True,
        )
        if self.implicit_diff and self.exact_operator_fn is None:
            raise ValueError(
                "implicit_diff=True differentiates the root of optimality_fun, which needs the "
                "exact operator: pass exact_operator_fn=F(z, *args) or set implicit_diff=False"
            )

    # -- pieces ---------------------------------------------------------------------------
    def _project(self, tree):
        return tree if self.projection is None else self.projection(tree)

    def _oracle(self, params, rng_key, batch_size, args):
        return self.operator_fn(params, rng_key, batch_size, *args)

    def _residual(self, params, args):
        return natural_residual(
            self.exact_operator_fn,
            params,
            *args,
            projection=self.projection,
            stepsize=self.residual_stepsize,
        )

    def _error(self, feasible, step, args):
        """Natural residual at the feasible point, or the stochastic step length over γ."""
        if self.exact_operator_fn is not None:
            return self._residual(feasible, args)
        norm = optax.tree.norm(step)
        return norm / jnp.asarray(self.stepsize, norm.dtype)

    def _check_inputs(self, init_params, rng_key, args):
        if rng_key is None:
            raise TypeError(
                f"{type(self).__name__} draws oracle samples: pass the keyword rng_key, e.g. "
                f"run(init_params, *args, rng_key=jax.random.key(0))"
            )
        validation.check_key(rng_key, "rng_key")
        dtype = _float_dtype(init_params)
        _check_batch_schedule(self.batch_schedule, self.maxiter)
        batch = jax.ShapeDtypeStruct((), jnp.int32)
        out = jax.eval_shape(
            lambda z, key, b, *a: self.operator_fn(z, key, b, *a),
            init_params,
            rng_key,
            batch,
            *args,
        )
        _check_like("operator_fn", out, init_params, "(z, rng_key, batch_size, *args)")
        if self.projection is not None:
            out = jax.eval_shape(self.projection, init_params)
            _check_like("projection", out, init_params, "(z)")
        if self.exact_operator_fn is not None:
            out = jax.eval_shape(lambda z, *a: self.exact_operator_fn(z, *a), init_params, *args)
            _check_like("exact_operator_fn", out, init_params, "(z, *args)")
        return dtype

    def init_state(self, init_params, *args, rng_key=None) -> VIState:
        """The state at ``init_params``; ``rng_key`` (required) drives the oracle."""
        dtype = self._check_inputs(init_params, rng_key, args)
        feasible = self._project(init_params)
        return VIState(
            iter_num=jnp.zeros((), jnp.int32),
            error=self._initial_error(feasible, args, dtype),
            oracle_calls=OracleCount.zeros(),
            rng_key=rng_key,
            anchor=init_params,
            feasible_params=feasible,
            status=jnp.int32(SolverStatus.RUNNING),
        )

    def _initial_error(self, feasible, args, dtype):
        if self.exact_operator_fn is not None:
            return self._residual(feasible, args).astype(dtype)
        return jnp.full((), jnp.inf, dtype)

    def _forward_backward_forward(self, params, rng_key, batch_size, args, variant):
        """One two-call step: ``z̄ = Π(z - γF̂(z))`` and ``ẑ`` (FBF or EG correction)."""
        key_first, key_second = jax.random.split(rng_key)
        estimate = self._oracle(params, key_first, batch_size, args)
        feasible = self._project(add_scale(params, -self.stepsize, estimate))
        extrapolated = self._oracle(feasible, key_second, batch_size, args)
        corrected = self._correct(params, feasible, estimate, extrapolated, variant)
        return feasible, corrected

    def _correct(self, params, feasible, estimate, extrapolated, variant):
        if variant == "fbf":
            # Tseng: reuse the first estimate, so its noise cancels to first order.
            return add_scale(feasible, -self.stepsize, optax.tree.sub(extrapolated, estimate))
        return self._project(add_scale(params, -self.stepsize, extrapolated))

    def _finish(self, params, state, new_params, new_state, bad_batch):
        """The step's status; a step with an invalid (traced) batch size is not taken."""
        new_state = self._with_status(new_params, new_state)
        failed = state._replace(status=jnp.int32(SolverStatus.BAD_BATCH_SIZE))
        select = lambda old, new: optax.tree.where(bad_batch, old, new)
        return OptStep(select(params, new_params), select(failed, new_state))

    # -- jaxopt interface -------------------------------------------------------------------
    def optimality_fun(self, params, *args, rng_key=None):
        """``z - Π_Z(z - γ F(z, *args))`` with the exact operator: zero exactly at solutions."""
        del rng_key
        if self.exact_operator_fn is None:
            raise ValueError(
                f"{type(self).__name__}.optimality_fun needs the exact operator: pass "
                f"exact_operator_fn=F(z, *args)"
            )
        forward = add_scale(params, -self.stepsize, self.exact_operator_fn(params, *args))
        return optax.tree.sub(params, self._project(forward))


@dataclasses.dataclass(eq=False, kw_only=True)
class StochasticGradientDescentAscent(_StochasticVISolver):
    """Projected stochastic gradient descent-ascent (the one-call baseline): ``z+ = Π(z - γF̂(z))``.

    Maths: ``z_{k+1} = Π_Z(z_k - γ F̂_{B_k}(z_k))`` with ``|B_k| = b_k`` oracle calls. It diverges
    on bilinear games even without noise (the step matrix has spectral radius
    ``sqrt(1 + γ²s²) > 1``), which is why the extragradient family exists.

    Every argument is keyword-only.

    Args:
      operator_fn: ``(z, rng_key, batch_size, *args) -> F̂``.
      stepsize: ``γ > 0``.
      projection: ``Π_Z`` (``None``: unconstrained).
      batch_schedule: ``k -> b_k`` (default ``polynomial_batch_schedule(1, 1)``).
      exact_operator_fn: ``F(z, *args)``; when given, ``state.error`` is the natural residual.
      residual_stepsize: ``γ`` of the reported natural residual (default 1).
      maxiter, tol, implicit_diff, implicit_diff_solve, unroll, jit: as in the solver base.

    Returns:
      ``run(init_params, *args, rng_key=key) -> OptStep(params, VIState)``.

    Examples:
      >>> F = lambda z, key, b: jnp.array([[1.0, 0.0], [0.0, 2.0]]) @ z  # strongly monotone
      >>> solver = StochasticGradientDescentAscent(operator_fn=F, stepsize=0.4, maxiter=50)
      >>> out = solver.run(jnp.ones(2), rng_key=jax.random.key(0))
      >>> bool(jnp.linalg.norm(out.params) < 1e-5), int(out.state.oracle_calls)
      (True, 1275)

    References:
      A. Alacaoglu, D. Kim, Solving Stochastic Variational Inequalities without the Bounded
      Variance Assumption, ICML 2026 (arXiv 2602.05531).
    """

    operator_fn: Callable[..., Any]
    projection: Callable[[Any], Any] | None = None
    batch_schedule: Callable[[jax.typing.ArrayLike], jax.Array] = dataclasses.field(
        default_factory=polynomial_batch_schedule
    )
    exact_operator_fn: Callable[..., Any] | None = None
    stepsize: jax.typing.ArrayLike
    residual_stepsize: jax.typing.ArrayLike = 1.0
    maxiter: int = 1000
    tol: float = 0.0
    implicit_diff: bool = False

    def update(self, params, state: VIState, *args, rng_key=None) -> OptStep:
        del rng_key  # the state carries the key
        next_key, key = jax.random.split(state.rng_key)
        batch, bad_batch = _batch_size(self.batch_schedule, state.iter_num)
        estimate = self._oracle(params, key, batch, args)
        new_params = self._project(add_scale(params, -self.stepsize, estimate))
        error = self._error(new_params, optax.tree.sub(new_params, params), args)
        new_state = VIState(
            iter_num=state.iter_num + 1,
            error=error.astype(state.error.dtype),
            oracle_calls=state.oracle_calls.add(batch),
            rng_key=next_key,
            anchor=state.anchor,
            feasible_params=new_params,
            status=jnp.int32(SolverStatus.RUNNING),
        )
        return self._finish(params, state, new_params, new_state, bad_batch)


@dataclasses.dataclass(eq=False, kw_only=True)
class StochasticExtragradient(_StochasticVISolver):
    """Minibatch forward-backward-forward / extragradient with relaxation (EG+), growing batches.

    Maths (step ``γ``, relaxation ``α ∈ (0, 1]``, batches ``b_k``; two independent batches per
    step, ``2 b_k`` oracle calls)::

        z̄_k     = Π_Z(z_k - γ F̂_{B_k}(z_k))
        ẑ_k     = z̄_k - γ (F̂_{B'_k}(z̄_k) - F̂_{B_k}(z_k))      variant "fbf" (Tseng)
        ẑ_k     = Π_Z(z_k - γ F̂_{B'_k}(z̄_k))                    variant "eg" (Korpelevich)
        z_{k+1} = z_k + α (ẑ_k - z_k)

    Unconstrained with ``α = 1`` both are extragradient. For monotone ``F`` use ``α = 1`` and
    ``γ ≈ 0.5/L``; a weak-Minty problem with parameter ``ρ`` needs ``α < 1`` (EG+, Diakonikolas et
    al. 2021), and for the linear family ``F(z) = Mz`` the exact condition is
    ``ρ < γ(1 - α)``. Growing batches (``polynomial_batch_schedule``) make the residual decrease
    even when the variance grows like ``||z||²`` on an unbounded domain.

    Every argument is keyword-only.

    Args:
      operator_fn: ``(z, rng_key, batch_size, *args) -> F̂``.
      stepsize: ``γ > 0``.
      projection: ``Π_Z`` (``None``: unconstrained), e.g. from ``optax.projections``.
      relaxation: ``α ∈ (0, 1]``.
      batch_schedule: ``k -> b_k`` (default ``polynomial_batch_schedule(1, 1)``).
      variant: ``"fbf"`` (default) or ``"eg"``.
      exact_operator_fn: ``F(z, *args)``; when given, ``state.error`` is the natural residual at
        ``state.feasible_params`` and ``optimality_fun``/``implicit_diff`` are available.
      residual_stepsize: ``γ`` of the reported natural residual (default 1).
      maxiter, tol, implicit_diff, implicit_diff_solve, unroll, jit: as in the solver base
        (``maxiter=1000``, ``tol=0``: run every iteration; ``implicit_diff`` needs
        ``exact_operator_fn``).

    Returns:
      ``run(init_params, *args, rng_key=key) -> OptStep(params, VIState)``; the feasible point
      ``z̄_k`` is ``state.feasible_params``.

    Examples:
      >>> A = jnp.array([[1.0, 0.5], [0.0, 1.0]])
      >>> def F(z, key, batch_size, A):  # bilinear game x^T A y, noise ∝ ||z|| / sqrt(batch)
      ...     x, y = z
      ...     noisy = A + 0.3 * jax.random.normal(key, A.shape) / jnp.sqrt(batch_size)
      ...     return (noisy @ y, -noisy.T @ x)
      >>> solver = StochasticExtragradient(operator_fn=F, stepsize=0.4, maxiter=200)
      >>> out = solver.run((jnp.ones(2), jnp.ones(2)), A, rng_key=jax.random.key(0))
      >>> bool(sum(jnp.linalg.norm(v) for v in out.params) < 1e-3)
      True

    References:
      A. Alacaoglu, D. Kim, Solving Stochastic Variational Inequalities without the Bounded
      Variance Assumption, ICML 2026 (arXiv 2602.05531); P. Tseng, SIAM J. Control Optim. 2000;
      J. Diakonikolas, C. Daskalakis, M. I. Jordan, Efficient methods for structured
      nonconvex-nonconcave min-max optimization, AISTATS 2021.
    """

    operator_fn: Callable[..., Any]
    projection: Callable[[Any], Any] | None = None
    batch_schedule: Callable[[jax.typing.ArrayLike], jax.Array] = dataclasses.field(
        default_factory=polynomial_batch_schedule
    )
    exact_operator_fn: Callable[..., Any] | None = None
    stepsize: jax.typing.ArrayLike
    residual_stepsize: jax.typing.ArrayLike = 1.0
    relaxation: jax.typing.ArrayLike = 1.0
    variant: str = "fbf"
    maxiter: int = 1000
    tol: float = 0.0
    implicit_diff: bool = False

    def __post_init__(self):
        super().__post_init__()
        validation.check_real(
            self.relaxation, "relaxation", minimum=0.0, maximum=1.0, include_minimum=False
        )
        validation.check_choice(self.variant, "variant", _VARIANTS)

    def update(self, params, state: VIState, *args, rng_key=None) -> OptStep:
        del rng_key  # the state carries the key
        next_key, key = jax.random.split(state.rng_key)
        batch, bad_batch = _batch_size(self.batch_schedule, state.iter_num)
        feasible, corrected = self._forward_backward_forward(params, key, batch, args, self.variant)
        step = optax.tree.sub(corrected, params)
        new_params = add_scale(params, self.relaxation, step)
        new_state = VIState(
            iter_num=state.iter_num + 1,
            error=self._error(feasible, step, args).astype(state.error.dtype),
            oracle_calls=state.oracle_calls.add(batch, times=2),
            rng_key=next_key,
            anchor=state.anchor,
            feasible_params=feasible,
            status=jnp.int32(SolverStatus.RUNNING),
        )
        return self._finish(params, state, new_params, new_state, bad_batch)


@dataclasses.dataclass(eq=False, kw_only=True)
class HalpernExtragradient(_StochasticVISolver):
    """Halpern-anchored forward-backward-forward with minibatch or recursive variance reduction.

    Maths: with ``T̂`` one stochastic FBF (or EG) step ``z ↦ ẑ`` (see
    :class:`StochasticExtragradient`) and anchor weights ``β_k`` (default ``1/(k + 2)``)::

        z_{k+1} = β_k z_0 + (1 - β_k) T̂(z_k)

    Anchoring gives the ``O(1/k)`` last-iterate residual of Halpern/EAG deterministically (take
    ``γ ≤ 1/(8L)`` for the guarantee). Estimators of ``F(z_k)`` and ``F(z̄_k)``:

    - ``"minibatch"``: fresh batches of ``b_k`` (``batch_schedule``), ``2 b_k`` calls per step;
    - ``"recursive"``: ``v_k = F̂_S(z_k) - F̂_S(z_{k-1}) + v_{k-1}`` with the same samples ``S``
      (``|S| = recursive_batch_size``) in both terms, likewise ``u_k`` for ``F(z̄_k)``
      (``4 |S|`` calls per step), restarted from fresh batches of ``b_k`` every
      ``restart_every`` steps (``2 b_k`` calls).

    Every argument is keyword-only.

    Args:
      operator_fn: ``(z, rng_key, batch_size, *args) -> F̂``; the same key and batch size must
        give the same samples at any ``z`` (the recursive estimator relies on it).
      stepsize: ``γ > 0``.
      projection: ``Π_Z`` (``None``: unconstrained).
      anchor_schedule: ``k -> β_k ∈ (0, 1)`` (default :func:`halpern_anchor_schedule`).
      batch_schedule: ``k -> b_k`` (default ``polynomial_batch_schedule(1, 1)``).
      estimator: ``"minibatch"`` (default) or ``"recursive"``.
      restart_every: recursive estimator's restart period ``q >= 1``.
      recursive_batch_size: ``|S| >= 1`` of the recursive increments.
      variant: ``"fbf"`` (default) or ``"eg"``, the map ``T``.

    The other arguments (``exact_operator_fn``, ``residual_stepsize``, ``maxiter``, ``tol``,
    ``implicit_diff``, ``implicit_diff_solve``, ``unroll``, ``jit``) are as in
    :class:`StochasticExtragradient`.

    Returns:
      ``run(init_params, *args, rng_key=key) -> OptStep(params, HalpernState)``.

    Examples:
      >>> M = jnp.array([[0.0, 1.0], [-1.0, 0.0]])  # rotation: F(z) = Mz, solution 0
      >>> F = lambda z, key, b: (M + 0.1 * jax.random.normal(key, (2, 2)) / jnp.sqrt(b)) @ z
      >>> solver = HalpernExtragradient(operator_fn=F, stepsize=0.3, maxiter=400,
      ...                               exact_operator_fn=lambda z: M @ z)
      >>> out = solver.run(jnp.ones(2), rng_key=jax.random.key(1))
      >>> bool(out.state.error < 0.02 * jnp.sqrt(2.0))  # residual fell by ~50x from ||F(z_0)||
      True

    References:
      A. Alacaoglu, D. Kim, Solving Stochastic Variational Inequalities without the Bounded
      Variance Assumption, ICML 2026 (arXiv 2602.05531); T. Yoon, E. K. Ryu, Accelerated
      algorithms for smooth convex-concave minimax problems, ICML 2021.
    """

    operator_fn: Callable[..., Any]
    projection: Callable[[Any], Any] | None = None
    anchor_schedule: Callable[[jax.typing.ArrayLike], jax.Array] = halpern_anchor_schedule
    batch_schedule: Callable[[jax.typing.ArrayLike], jax.Array] = dataclasses.field(
        default_factory=polynomial_batch_schedule
    )
    exact_operator_fn: Callable[..., Any] | None = None
    stepsize: jax.typing.ArrayLike
    residual_stepsize: jax.typing.ArrayLike = 1.0
    estimator: str = "minibatch"
    restart_every: int = 10
    recursive_batch_size: int = 1
    variant: str = "fbf"
    maxiter: int = 1000
    tol: float = 0.0
    implicit_diff: bool = False

    def __post_init__(self):
        super().__post_init__()
        validation.check_callable(self.anchor_schedule, "anchor_schedule")
        validation.check_choice(self.estimator, "estimator", _ESTIMATORS)
        validation.check_choice(self.variant, "variant", _VARIANTS)
        for name in ("restart_every", "recursive_batch_size"):
            validation.check_int(getattr(self, name), name, minimum=1, maximum=_MAX_BATCH)

    def init_state(self, init_params, *args, rng_key=None) -> HalpernState:
        base = super().init_state(init_params, *args, rng_key=rng_key)
        zeros = optax.tree.zeros_like(init_params)
        return HalpernState(
            **base._asdict(),
            previous_params=init_params,
            previous_feasible=base.feasible_params,
            operator_estimate=zeros,
            extrapolation_estimate=zeros,
        )

    def _recursive_step(self, params, state, key, batch, args):
        """Estimates of F(z_k), F(z̄_k), z̄_k and the calls they cost (recursive estimator)."""
        restart = (state.iter_num % self.restart_every) == 0
        small = jnp.int32(self.recursive_batch_size)
        key_first, key_second = jax.random.split(key)

        def fresh(point, key):
            return self._oracle(point, key, batch, args)

        def increment(point, previous_point, previous_estimate, key):
            now = self._oracle(point, key, small, args)
            before = self._oracle(previous_point, key, small, args)  # same samples
            return optax.tree.add(optax.tree.sub(now, before), previous_estimate)

        estimate = jax.lax.cond(
            restart,
            lambda: fresh(params, key_first),
            lambda: increment(params, state.previous_params, state.operator_estimate, key_first),
        )
        feasible = self._project(add_scale(params, -self.stepsize, estimate))
        extrapolated = jax.lax.cond(
            restart,
            lambda: fresh(feasible, key_second),
            lambda: increment(
                feasible, state.previous_feasible, state.extrapolation_estimate, key_second
            ),
        )
        count = jax.tree.map(
            lambda fresh_calls, increment_calls: jnp.where(restart, fresh_calls, increment_calls),
            state.oracle_calls.add(batch, times=2),
            state.oracle_calls.add(small, times=4),
        )
        return estimate, feasible, extrapolated, count

    def update(self, params, state: HalpernState, *args, rng_key=None) -> OptStep:
        del rng_key  # the state carries the key
        next_key, key = jax.random.split(state.rng_key)
        batch, bad_batch = _batch_size(self.batch_schedule, state.iter_num)
        if self.estimator == "minibatch":
            key_first, key_second = jax.random.split(key)
            estimate = self._oracle(params, key_first, batch, args)
            feasible = self._project(add_scale(params, -self.stepsize, estimate))
            extrapolated = self._oracle(feasible, key_second, batch, args)
            count = state.oracle_calls.add(batch, times=2)
        else:
            estimate, feasible, extrapolated, count = self._recursive_step(
                params, state, key, batch, args
            )
        corrected = self._correct(params, feasible, estimate, extrapolated, self.variant)
        beta = self.anchor_schedule(state.iter_num)
        new_params = convex_combination(beta, state.anchor, corrected)
        new_state = HalpernState(
            iter_num=state.iter_num + 1,
            error=self._error(feasible, optax.tree.sub(corrected, params), args).astype(
                state.error.dtype
            ),
            oracle_calls=count,
            rng_key=next_key,
            anchor=state.anchor,
            feasible_params=feasible,
            status=jnp.int32(SolverStatus.RUNNING),
            previous_params=params,
            previous_feasible=feasible,
            operator_estimate=estimate,
            extrapolation_estimate=extrapolated,
        )
        return self._finish(params, state, new_params, new_state, bad_batch)


# ---------------------------------------------------------------------------------------------
# Many runs at once, recorded at checkpoints of oracle calls or iterations.


def run_to_checkpoints(
    build_solver: Callable[[dict[str, jax.Array]], _StochasticVISolver],
    lanes: Mapping[str, Mapping[str, Any]],
    rng_keys: jax.Array,
    init_params: Any,
    checkpoints: Any,
    *args: Any,
    by_calls: bool = True,
    norm_cap: float = float("inf"),
    max_iterations: int | None = None,
) -> dict[str, dict[str, np.ndarray]]:
    """Runs named solver configurations ("lanes") x seeds in one compiled program.

    ``lanes`` maps a lane's name to its hyperparameters (the same keys in every lane: step sizes,
    relaxations, batch-schedule constants, noise levels, ...); ``build_solver(lane)`` receives one
    lane's values as traced scalars and returns a solver. Every lane is run for every key in
    ``rng_keys`` (``vmap`` over lanes and over keys, one ``jit``), so a sweep over
    hyperparameters compiles once. Each run advances until its oracle calls (``by_calls``) or
    iterations reach the next checkpoint, the norm of its iterate reaches ``norm_cap`` (it has
    diverged: it then stays where it stopped), or it has done ``max_iterations``; its state is
    recorded at every checkpoint.

    Args:
      build_solver: ``lane -> solver``, e.g. ``lambda lane: StochasticExtragradient(...,
        stepsize=lane["stepsize"])``; called inside the traced program (only the solver's
        ``init_state`` and ``update`` are used, so its ``maxiter``, ``tol`` and ``jit`` do not
        matter).
      lanes: lane name -> {hyperparameter name -> number}.
      rng_keys: keys of shape ``(num_seeds,)`` (e.g. ``jax.random.split(key, num_seeds)``).
      init_params: the common start ``z_0``.
      checkpoints: increasing targets of oracle calls (``by_calls=True``) or iterations.
      *args: extra arguments of the operator.
      by_calls: checkpoints count oracle calls (``True``) or iterations (``False``).
      norm_cap: a run stops for good once ``||z_k|| >= norm_cap``.
      max_iterations: an overall iteration limit (``None``: none).

    Returns:
      Per lane name, NumPy arrays of shape ``(num_seeds, num_checkpoints)``: ``"residual"``
      (``state.error``), ``"calls"`` (oracle calls, int64, exact past ``2^31``),
      ``"iterations"``, ``"norm"`` (``||z_k||``), ``"status"`` (the
      :class:`~jaxlab.solvers.SolverStatus` code; a run that stops with a failure, e.g. a
      non-finite iterate, stays there), and ``"initial_residual"`` of shape ``(num_seeds,)``.

    Examples:
      >>> from jaxlab.solvers import weak_minty_2d
      >>> problem = weak_minty_2d(-0.3, 1.0, noise=0.1)
      >>> build = lambda lane: StochasticExtragradient(
      ...     operator_fn=problem.operator_fn, exact_operator_fn=problem.exact_operator_fn,
      ...     stepsize=1 / problem.lipschitz, relaxation=lane["relaxation"],
      ...     batch_schedule=polynomial_batch_schedule(1, 2))
      >>> out = run_to_checkpoints(build, {"eg": {"relaxation": 1.0}, "eg+": {"relaxation": 0.25}},
      ...     jax.random.split(jax.random.key(0), 2), jnp.array([1.0, 0.0]),
      ...     jnp.array([10, 200]), by_calls=False, norm_cap=1e6)
      >>> out["eg"]["norm"].shape  # (seeds, checkpoints)
      (2, 2)
      >>> bool(out["eg"]["norm"][0, -1] >= 1e6), bool(out["eg+"]["norm"][0, -1] < 1e-3)
      (True, True)
      >>> int(out["eg"]["iterations"][0, -1]) < 200  # EG stopped at the cap
      True

    References:
      A. Alacaoglu, D. Kim, Solving Stochastic Variational Inequalities without the Bounded
      Variance Assumption, ICML 2026 (arXiv 2602.05531).
    """
    validation.check_callable(build_solver, "build_solver", signature="build_solver(lane)")
    validation.check_bool(by_calls, "by_calls")
    if norm_cap != float("inf"):  # +inf: no cap
        validation.check_positive(norm_cap, "norm_cap")
    if max_iterations is not None:
        validation.check_positive_int(max_iterations, "max_iterations")
    names = list(lanes)
    if not names:
        raise ValueError("lanes must name at least one lane")
    fields = list(lanes[names[0]])
    for name in names:
        if set(lanes[name]) != set(fields):
            raise ValueError(
                f"every lane must set the same hyperparameters: lane {name!r} sets "
                f"{sorted(lanes[name])}, lane {names[0]!r} sets {sorted(fields)}"
            )
    lane_arrays = {
        field: jnp.asarray(np.asarray([lanes[name][field] for name in names])) for field in fields
    }
    validation.check_key(rng_keys, "rng_keys")
    if jnp.ndim(rng_keys) != (1 if jnp.issubdtype(rng_keys.dtype, jax.dtypes.prng_key) else 2):
        raise ValueError(
            f"rng_keys must be a 1-D batch of keys (jax.random.split(key, num_seeds)), got shape "
            f"{tuple(rng_keys.shape)}"
        )
    # Targets as exact (high, low) uint32 words: call counts pass 2^31 without x64.
    target_values = validation.check_real_array(checkpoints, "checkpoints", minimum=0.0)
    if target_values is None or target_values.ndim != 1 or target_values.size == 0:
        raise ValueError(
            f"checkpoints must be a non-empty 1-D array of concrete counts, got {checkpoints!r}"
        )
    if np.any(np.diff(target_values) < 0):
        raise ValueError(f"checkpoints must be non-decreasing, got {target_values.tolist()}")
    whole = np.ceil(target_values).astype(np.uint64)
    targets = (
        jnp.asarray((whole >> np.uint64(32)).astype(np.uint32)),
        jnp.asarray((whole & np.uint64(_WORD - 1)).astype(np.uint32)),
    )

    def one(lane, key):
        solver = build_solver(lane)
        state = solver.init_state(init_params, *args, rng_key=key)

        def chunk(carry, target):
            high, low = target

            def cond(c):
                params, state = c
                done = (
                    state.oracle_calls
                    if by_calls
                    else OracleCount(zero, state.iter_num.astype(jnp.uint32))
                )
                going = done.less_than(OracleCount(high, low)) & (
                    optax.tree.norm(params) < norm_cap
                )
                # The solver's own maxiter/tol do not apply here: stop only on a failure.
                going = going & (state.status < SolverStatus.NONFINITE)
                if max_iterations is not None:
                    going = going & (state.iter_num < max_iterations)
                return going

            carry = jax.lax.while_loop(cond, lambda c: tuple(solver.update(*c, *args)), carry)
            params, state = carry
            record = {
                "residual": state.error,
                "calls": state.oracle_calls,
                "iterations": state.iter_num,
                "norm": optax.tree.norm(params),
                "status": state.status,
            }
            return carry, record

        zero = jnp.zeros((), jnp.uint32)
        _, records = jax.lax.scan(chunk, (init_params, state), targets)
        return state.error, records

    per_seed = jax.vmap(one, in_axes=(None, 0))
    per_lane = jax.jit(jax.vmap(per_seed, in_axes=(0, None)))
    initial, records = per_lane(lane_arrays, rng_keys)
    out = {key: np.asarray(value) for key, value in records.items()}
    out["initial_residual"] = np.asarray(initial)
    return {name: {key: value[i] for key, value in out.items()} for i, name in enumerate(names)}
