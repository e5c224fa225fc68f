"""Error feedback (EF) and EF21 as optax transforms, one worker per call, several via an axis name.

Both methods let ``n`` workers send compressed messages while the iterate still converges
linearly (on smooth strongly convex problems). Worker ``i`` holds its own state; the returned
update is the mean of the workers' messages over ``axis_name`` (``jax.lax.pmean``), so the same
code runs for one worker (``axis_name=None``), for ``n`` workers under
``jax.vmap(..., axis_name=...)`` on one device, under ``jax.pmap(..., axis_name=...)`` with one
worker per device, under ``jax.shard_map`` on a mesh, and across processes (a mesh spanning
them); ``tests/optim/test_error_feedback.py`` checks that the paths agree.

Randomness (rand-k, natural compression) comes from a key in the state, split every step and
folded with ``jax.lax.axis_index(axis_name)`` so each worker draws its own coordinates and a run
is reproducible.

Under ``jax.shard_map`` the per-worker buffers (the residual ``e_i``, the estimate ``g_i``) differ
across workers. ``init`` called inside the ``shard_map`` types them as varying over
``axis_name`` already, so a ``lax.scan`` over steps accepts the state as its carry; a state built
outside should enter the ``shard_map`` with ``in_specs=P(axis_name)`` (one state per worker).

Compressors are not callable (see :mod:`jaxlab.optim._compressors`), so
``optax.inject_hyperparams(error_feedback)(learning_rate=0.1, compressor=top_k(ratio=0.1))`` works
as written: the compressor passes through unchanged and only ``learning_rate`` is injected.
``seed`` defaults to ``None`` (the key of seed 0) rather than ``0`` so that ``inject_hyperparams``
does not inject it: an injected int is a weak-typed int32 that ``optax.MultiSteps`` (or a
checkpoint restore) turns strong, costing a retrace.

Speed: a step reads the worker's buffer and the gradient and writes the buffer, so it costs more
memory traffic than ``optax.sgd`` (``benchmarks/bench_error_feedback.py`` reports every
compressor against that floor). EF21 never materialises ``g - e``: a compressor that needs a
statistic first (the threshold's count, scaled sign's norm) reduces over ``|e - g|`` read from
the buffer and the gradient; EF materialises ``p = e + u`` once, which lets the donated residual
be overwritten in place. Exact :func:`jaxlab.optim.top_k` is a partial sort; prefer
:func:`jaxlab.optim.threshold_top_k` for speed. For a small model with many leaves,
``scope="global"`` (one message for the whole tree) saves the per-leaf launches. Donate the
params and the state (``jax.jit(..., donate_argnums=...)``).

Non-finite values: a NaN or infinite gradient enters the worker's buffer (EF's residual ``e_i``,
EF21's estimate ``g_i``) and stays there, so every later message is NaN (or, with
:func:`jaxlab.optim.threshold_top_k`, which never selects a NaN coordinate, finite while the
residual keeps the NaN). The state's ``nonfinite_count`` counts the calls at which the gradient or
the buffer held a non-finite value, so it keeps growing while a buffer is poisoned. To skip such
steps, leaving the buffers as they were, wrap the transform in ``optax.apply_if_finite``::

    tx = optax.apply_if_finite(error_feedback(0.1, top_k(1)), max_consecutive_errors=10)

(it rejects a step whose incoming gradient is not finite, returning a zero update, and counts
those in its own ``notfinite_count``/``total_notfinite``).
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxlab._src.sharding import mark_varying
from jaxlab._src.validation import (
    check_axis_bound,
    check_axis_name,
    check_choice,
    check_floating_tree,
    check_learning_rate,
    check_seed,
    check_tree_like,
    count_nonfinite,
)
from jaxlab.optim._compressors import Compressor, identity

__all__ = [
    "ErrorFeedback21State",
    "ErrorFeedbackState",
    "error_feedback",
    "error_feedback_21",
    "scale_by_error_feedback",
    "scale_by_error_feedback_21",
]

_INITS = ("full", "compressed", "zero")


class ErrorFeedbackState(NamedTuple):
    """State of :func:`scale_by_error_feedback` (one worker's).

    Attributes:
      count: number of updates so far, int32.
      error: the residual ``e = p - C(p)`` not yet sent, shaped like the params.
      rng_key: the key data (``uint32[2]``, from ``jax.random.key_data``) the next step's
        compressor randomness is split from; stored raw so the state converts to NumPy for
        checkpoints (a typed key does not).
      bits: cumulative bits this worker has sent, float32 (``count * compressor.tree_bits``;
        float32 because int32 would overflow after 2^31 bits, e.g. 7 dense steps of 10M floats).
      nonfinite_count: number of updates at which ``e + u`` (the incoming update or the
        residual) held a NaN or an infinity, int32, saturating (see the module docstring).

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxlab.optim import scale_by_error_feedback, top_k
      >>> state = scale_by_error_feedback(top_k(1)).init(jnp.zeros(3))
      >>> state.count, state.error
      (Array(0, dtype=int32), Array([0., 0., 0.], dtype=float32))
    """

    count: jax.Array
    error: optax.Updates
    rng_key: jax.Array
    bits: jax.Array
    nonfinite_count: jax.Array


class ErrorFeedback21State(NamedTuple):
    """State of :func:`scale_by_error_feedback_21` (one worker's).

    Attributes:
      count: number of updates so far, int32.
      estimate: the worker's gradient estimate ``g_i``, shaped like the params.
      rng_key: the key data (``uint32[2]``, from ``jax.random.key_data``) the next step's
        compressor randomness is split from; stored raw so the state converts to NumPy for
        checkpoints (a typed key does not).
      bits: cumulative bits this worker has sent, float32 (see :class:`ErrorFeedbackState`).
      nonfinite_count: number of updates at which the incoming gradient or the estimate held a
        NaN or an infinity, int32, saturating (see the module docstring).

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxlab.optim import scale_by_error_feedback_21, top_k
      >>> state = scale_by_error_feedback_21(top_k(1)).init(jnp.zeros(2))
      >>> state.estimate, state.bits
      (Array([0., 0.], dtype=float32), Array(0., dtype=float32))
    """

    count: jax.Array
    estimate: optax.Updates
    rng_key: jax.Array
    bits: jax.Array
    nonfinite_count: jax.Array


# ------------------------------------------------------------------------------------------------
# Validation and helpers.


def _check_compressor(compressor: Any) -> None:
    if not isinstance(compressor, Compressor):
        raise TypeError(
            "compressor must be a jaxlab.optim.Compressor (top_k, rand_k, scaled_sign, ...), got "
            f"{type(compressor).__name__} {compressor!r}"
        )


def _check_seed(seed: Any) -> None:
    if seed is not None:
        check_seed(seed)


def _check_update(updates: Any, buffer: Any, buffer_name: str, axis_name: Any) -> None:
    """Eager (trace-time) checks of one update: the updates match the state, the axis is bound."""
    check_tree_like(updates, buffer, "updates", f"the state's {buffer_name}")
    check_axis_bound(axis_name)


def _worker_key(step_key: jax.Array, axis_name: Any) -> jax.Array:
    if axis_name is None:
        return step_key
    return jax.random.fold_in(step_key, jax.lax.axis_index(axis_name))


def _mean_over_workers(tree: Any, axis_name: Any) -> Any:
    if axis_name is None:
        return tree
    return jax.lax.pmean(tree, axis_name)


# ------------------------------------------------------------------------------------------------
# EF.


def _initial_state(state_cls: type, params: Any, axis_name: Any, seed: Any) -> Any:
    """Count 0, a zero per-worker buffer (EF's residual, EF21's estimate), the key, no bits."""
    # Integer params would truncate the buffer built like them (a residual of 0.5 stored as 0).
    check_floating_tree(params, "params")
    return state_cls(
        jnp.zeros([], jnp.int32),
        mark_varying(optax.tree.zeros_like(params), axis_name),
        jax.random.key_data(jax.random.key(0 if seed is None else seed)),
        jnp.zeros([], jnp.float32),
        # Per worker, like the buffer it watches.
        mark_varying(jnp.zeros([], jnp.int32), axis_name),
    )


def scale_by_error_feedback(
    compressor: Compressor,
    *,
    axis_name: str | None = None,
    seed: int | None = None,
) -> optax.GradientTransformationExtraArgs:
    """Classic error feedback on already step-scaled updates: send ``C(e + u)``, keep the rest.

    Worker ``i`` receives ``u_i`` (its gradient times the step, from
    ``optax.scale_by_learning_rate`` before this transform) and computes

        p_i = e_i + u_i,    c_i = C(p_i),    e_i <- p_i - c_i,    returns  mean_i c_i,

    with ``e_i = 0`` at start and the mean a ``jax.lax.pmean`` over ``axis_name``. With
    ``x <- x + update`` and ``u_i = -eta grad f_i(x)`` this is the paper's EF,
    ``x^{t+1} = x^t - (1/n) sum_i C(e_i + eta grad f_i(x^t))``: because every compressor is odd,
    compressing ``-p`` and negating equals compressing ``p``, so the sign convention of optax
    (updates are added) does not change the method. The step sits *inside* the compressed
    quantity, as the tight analysis requires.

    Args:
      compressor: a :class:`jaxlab.optim.Compressor`.
      axis_name: the workers' axis (``jax.vmap``/``jax.shard_map``/mesh axis name) or ``None``
        for one worker.
      seed: seed of the state's key (random compressors), ``None`` for seed 0; every worker
        starts from the same key and folds in its ``axis_index`` each step.

    Returns:
      An ``optax.GradientTransformationExtraArgs`` with state :class:`ErrorFeedbackState`.

    Raises:
      TypeError: ``compressor`` is not a ``Compressor``, or a bad ``axis_name``/``seed`` type;
        in ``init``, params with a non-floating leaf; in ``update``, a non-floating update.
      ValueError: in ``update``, updates whose structure or shapes differ from the state's, or
        an ``axis_name`` that no enclosing ``jax.vmap``/``jax.shard_map`` binds.

    Examples:
      >>> import jax.numpy as jnp, optax
      >>> from jaxlab.optim import scale_by_error_feedback, top_k
      >>> tx = scale_by_error_feedback(top_k(1))
      >>> state = tx.init(jnp.zeros(2))
      >>> message, state = tx.update(jnp.array([-0.3, 0.2]), state)
      >>> message, state.error
      (Array([-0.3,  0. ], dtype=float32), Array([0. , 0.2], dtype=float32))

    References:
      D. Berg Thomsen, A. Taylor, A. Dieuleveut, "A Tight Theory of Error Feedback Algorithms in
      Distributed Optimization", ICML 2026 (arXiv 2605.31594); S. Stich, S. P. Karimireddy,
      "The error-feedback framework", JMLR 2020.
    """
    _check_compressor(compressor)
    check_axis_name(axis_name)
    _check_seed(seed)

    def init_fn(params):
        return _initial_state(ErrorFeedbackState, params, axis_name, seed)

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        _check_update(updates, state.error, "error", axis_name)
        next_key, step_key = jax.random.split(jax.random.wrap_key_data(state.rng_key))
        worker_key = _worker_key(step_key, axis_name)
        # The sum is formed in the updates' dtype and the residual stored in the state's.
        residual = optax.tree.cast_like(state.error, updates)
        # p is materialised once, on purpose: the message and the new residual both depend on
        # the old residual, and reading it from p lets XLA overwrite the donated residual in
        # place (reading (e, u) directly, as EF21 does, makes XLA:CPU copy the residual first
        # and materialise u anyway: slower, see benchmarks/bench_error_feedback.py).
        p = optax.tree.add(residual, updates)
        c = compressor.tree_compress(p, worker_key)
        error = optax.tree.cast_like(optax.tree.sub(p, c), state.error)
        count = optax.safe_increment(state.count)
        bits = count.astype(jnp.float32) * jnp.float32(compressor.tree_bits(updates))
        new_state = ErrorFeedbackState(
            count=count,
            error=error,
            rng_key=jax.random.key_data(next_key),
            bits=bits,
            # A non-finite entry of p = e + u (the update's or the residual's) leaves a
            # non-finite entry in the new residual p - C(p) whatever C kept (inf - inf is NaN),
            # so the new residual alone tells; reading u would materialise it.
            nonfinite_count=count_nonfinite(state.nonfinite_count, error),
        )
        return _mean_over_workers(c, axis_name), new_state

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def error_feedback(
    learning_rate: optax.ScalarOrSchedule,
    compressor: Compressor,
    *,
    axis_name: str | None = None,
    seed: int | None = None,
) -> optax.GradientTransformationExtraArgs:
    """Distributed gradient descent with classic error feedback (EF).

    ``optax.chain(optax.scale_by_learning_rate(learning_rate), scale_by_error_feedback(...))``:
    each worker feeds ``g_i = grad f_i(x^t)`` and the iterate follows

        p_i = e_i + eta g_i,   c_i = C(p_i),   x^{t+1} = x^t - (1/n) sum_i c_i,   e_i <- p_i - c_i.

    With the identity compressor it is ``optax.sgd(learning_rate)``. On ``L``-smooth,
    ``mu``-strongly convex ``f_i`` sharing a minimiser, the tight analysis gives the optimal step
    ``eta* = (2 / mean(L_i + mu_i)) alpha / (1 + sqrt(1 - alpha))^2`` (see
    ``jaxlab.optim.ef_optimal_step_size``). ``optax.inject_hyperparams(error_feedback)`` needs
    no ``static_args`` (a compressor is not taken for a schedule). Non-finite gradients are
    counted in the state's ``nonfinite_count``; see the module docstring for what happens to the
    residual and for the ``optax.apply_if_finite`` composition that skips such steps.

    Args:
      learning_rate: the step ``eta`` (a number, an array or an optax schedule). A concrete
        number or array is validated (finite and ``>= 0``); a traced one (e.g. injected by
        ``optax.inject_hyperparams``) is used as given.
      compressor: a :class:`jaxlab.optim.Compressor`.
      axis_name: the workers' axis name, or ``None`` for one worker.
      seed: seed of the state's key (random compressors), ``None`` for seed 0.

    Returns:
      An ``optax.GradientTransformationExtraArgs``.

    Raises:
      ValueError: a negative or non-finite concrete ``learning_rate``.
      TypeError: ``compressor`` is not a ``Compressor``.

    Examples:
      >>> import jax.numpy as jnp, optax
      >>> from jaxlab.optim import error_feedback, top_k
      >>> tx = error_feedback(0.5, top_k(1))
      >>> params = jnp.array([1.0, -2.0])
      >>> state = tx.init(params)
      >>> for _ in range(2):  # gradient of 0.5 ||x||^2 is x
      ...     updates, state = tx.update(params, state)
      ...     params = optax.apply_updates(params, updates)
      >>> params
      Array([ 0., -1.], dtype=float32)

    References:
      D. Berg Thomsen, A. Taylor, A. Dieuleveut, "A Tight Theory of Error Feedback Algorithms in
      Distributed Optimization", ICML 2026 (arXiv 2605.31594); F. Seide et al., "1-bit SGD",
      Interspeech 2014.
    """
    check_learning_rate(learning_rate)
    return optax.chain(
        optax.scale_by_learning_rate(learning_rate),
        scale_by_error_feedback(compressor, axis_name=axis_name, seed=seed),
    )


# ------------------------------------------------------------------------------------------------
# EF21.


def scale_by_error_feedback_21(
    compressor: Compressor,
    *,
    init: str = "full",
    axis_name: str | None = None,
    seed: int | None = None,
) -> optax.GradientTransformationExtraArgs:
    """EF21's gradient tracking: move each worker's estimate by a compressed correction.

    At step ``t`` worker ``i`` receives ``grad f_i(x^t)`` and updates its estimate ``g_i``:

        g_i <- g_i + C(grad f_i(x^t) - g_i),   returns  mean_i g_i   (pmean over axis_name),

    only the correction ``c_i = C(grad f_i(x^t) - g_i)`` being communicated. The first call
    (``count == 0``) initialises instead, by ``init``:

    - ``"full"``: ``g_i = grad f_i(x^0)`` (the tight analysis; the first message is dense);
    - ``"compressed"``: ``g_i = C(grad f_i(x^0))``;
    - ``"zero"``: ``g_i = 0`` followed by the regular update, ``0 + C(grad f_i(x^0) - 0)``,
      which is the same computation as ``"compressed"`` (kept as a name for the papers that use
      it).

    Followed by ``optax.scale_by_learning_rate`` (see :func:`error_feedback_21`), this is EF21,
    ``x^{t+1} = x^t - eta mean_i g_i^t``, with ``g_i^{t+1} = g_i^t + C(grad f_i(x^{t+1}) -
    g_i^t)`` compressing the gradient at the *new* point. The initial branch is a ``jnp.where``
    on the traced count, never a Python branch.

    Args:
      compressor: a :class:`jaxlab.optim.Compressor`.
      init: ``"full"``, ``"compressed"`` or ``"zero"`` (static).
      axis_name: the workers' axis name, or ``None`` for one worker.
      seed: seed of the state's key (random compressors), ``None`` for seed 0.

    Returns:
      An ``optax.GradientTransformationExtraArgs`` with state :class:`ErrorFeedback21State`;
      ``bits`` counts ``32 d`` for a ``"full"`` first message and ``compressor.tree_bits`` for
      every other one.

    Raises:
      ValueError: an unknown ``init``; in ``update``, updates whose structure or shapes differ
        from the state's, or an unbound ``axis_name``.
      TypeError: ``compressor`` is not a ``Compressor``; non-floating params or updates.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxlab.optim import scale_by_error_feedback_21, top_k
      >>> tx = scale_by_error_feedback_21(top_k(1))
      >>> state = tx.init(jnp.zeros(2))
      >>> g, state = tx.update(jnp.array([1.0, 2.0]), state)  # "full": g = grad
      >>> g, state = tx.update(jnp.array([0.5, 1.0]), state)  # g + top_1(grad - g)
      >>> g
      Array([1., 1.], dtype=float32)

    References:
      P. Richtarik, I. Sokolov, I. Fatkhullin, "EF21: a new, simpler, theoretically better, and
      practically faster error feedback", NeurIPS 2021 (arXiv 2106.05203); D. Berg Thomsen,
      A. Taylor, A. Dieuleveut, "A Tight Theory of Error Feedback Algorithms in Distributed
      Optimization", ICML 2026 (arXiv 2605.31594).
    """
    _check_compressor(compressor)
    check_choice(init, "init", _INITS)
    check_axis_name(axis_name)
    _check_seed(seed)
    full_init = init == "full"
    dense = identity(scope=compressor.scope)

    def init_fn(params):
        return _initial_state(ErrorFeedback21State, params, axis_name, seed)

    def update_fn(updates, state, params=None, **extra_args):
        del params, extra_args
        _check_update(updates, state.estimate, "estimate", axis_name)
        next_key, step_key = jax.random.split(jax.random.wrap_key_data(state.rng_key))
        worker_key = _worker_key(step_key, axis_name)
        estimate = optax.tree.cast_like(state.estimate, updates)
        # C(g - e) read from (g, e), the difference never materialised (see EF above).
        correction, nan_free = compressor._tree_compress_fused(
            lambda g, e: g - e, lambda g, e: e - g, (updates, estimate), worker_key
        )
        new_estimate = optax.tree.add(estimate, correction)
        count = optax.safe_increment(state.count)
        step_bits = jnp.float32(compressor.tree_bits(updates))
        if full_init:
            first = state.count == 0
            new_estimate = optax.tree.where(first, updates, new_estimate)
            # One dense message, then compressed ones.
            first_bits = jnp.float32(dense.tree_bits(updates))
            bits = first_bits + (count - 1).astype(jnp.float32) * step_bits
        else:
            bits = count.astype(jnp.float32) * step_bits
        new_state = ErrorFeedback21State(
            count=count,
            estimate=optax.tree.cast_like(new_estimate, state.estimate),
            rng_key=jax.random.key_data(next_key),
            bits=bits,
            nonfinite_count=_count_nonfinite_21(
                state.nonfinite_count, updates, new_estimate, nan_free
            ),
        )
        return _mean_over_workers(new_estimate, axis_name), new_state

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def _count_nonfinite_21(counter, updates, new_estimate, nan_free) -> jax.Array:
    """EF21's counter: advanced when the gradient or the estimate held a non-finite entry.

    A non-finite estimate stays so in its update (a kept NaN or ``inf - inf`` is NaN, an unkept
    entry keeps its value), and so does an infinite gradient entry (``|g - e| = inf`` is always
    kept), so the new estimate and the gradient's NaNs tell: where the compressor's statistic
    read every entry of ``g - e`` and met no NaN (``nan_free``), the gradient is not read again.
    """
    leaves = jax.tree.leaves(updates)
    needs_gradient = [g for g, flag in zip(leaves, nan_free, strict=True) if flag is None]
    flags = [jnp.asarray(flag) for flag in nan_free if flag is not None]
    known = jnp.all(jnp.stack(flags)) if flags else True
    return count_nonfinite(counter, (needs_gradient, new_estimate), also=known)


def error_feedback_21(
    learning_rate: optax.ScalarOrSchedule,
    compressor: Compressor,
    *,
    init: str = "full",
    axis_name: str | None = None,
    seed: int | None = None,
) -> optax.GradientTransformationExtraArgs:
    """Distributed gradient descent with EF21 (Richtarik et al. 2021), as analysed tightly.

    ``optax.chain(scale_by_error_feedback_21(...), optax.scale_by_learning_rate(learning_rate))``:
    with ``x <- x + update`` the iterate follows the paper's recursion

        x^{t+1} = x^t - eta (1/n) sum_i g_i^t,
        g_i^{t+1} = g_i^t + C(grad f_i(x^{t+1}) - g_i^t),   g_i^0 = grad f_i(x^0) ("full").

    With the identity compressor it is ``optax.sgd(learning_rate)``. The tight analysis gives the
    optimal step ``eta* = (2 / mean(L_i + mu_i)) alpha / (1 + sqrt(1 - alpha))^2`` and the rate
    ``rho*`` (see ``jaxlab.optim.ef_optimal_step_size`` and ``ef_tight_rate``).
    ``optax.inject_hyperparams(error_feedback_21)`` needs no ``static_args``. Non-finite
    gradients are counted in the state's ``nonfinite_count`` (see the module docstring).

    Args:
      learning_rate: the step ``eta`` (a number, an array or an optax schedule). A concrete
        number or array is validated (finite and ``>= 0``); a traced one (e.g. injected by
        ``optax.inject_hyperparams``) is used as given.
      compressor: a :class:`jaxlab.optim.Compressor`.
      init: ``"full"``, ``"compressed"`` or ``"zero"``, see :func:`scale_by_error_feedback_21`.
      axis_name: the workers' axis name, or ``None`` for one worker.
      seed: seed of the state's key (random compressors), ``None`` for seed 0.

    Returns:
      An ``optax.GradientTransformationExtraArgs``.

    Raises:
      ValueError: a negative or non-finite concrete ``learning_rate``, or an unknown
        ``init``.
      TypeError: ``compressor`` is not a ``Compressor``.

    Examples:
      >>> import jax.numpy as jnp, optax
      >>> from jaxlab.optim import error_feedback_21, top_k
      >>> tx = error_feedback_21(0.1, top_k(1))
      >>> params = jnp.array([1.0, -2.0])
      >>> state = tx.init(params)
      >>> updates, state = tx.update(params, state)  # gradient of 0.5 ||x||^2 is x
      >>> optax.apply_updates(params, updates)
      Array([ 0.9, -1.8], dtype=float32)

    References:
      D. Berg Thomsen, A. Taylor, A. Dieuleveut, "A Tight Theory of Error Feedback Algorithms in
      Distributed Optimization", ICML 2026 (arXiv 2605.31594); P. Richtarik, I. Sokolov,
      I. Fatkhullin, "EF21", NeurIPS 2021 (arXiv 2106.05203).
    """
    check_learning_rate(learning_rate)
    return optax.chain(
        scale_by_error_feedback_21(compressor, init=init, axis_name=axis_name, seed=seed),
        optax.scale_by_learning_rate(learning_rate),
    )
