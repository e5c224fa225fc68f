"""The library's one training loop: any loss on pure parameters, any optax transform, one scan.

It lives in ``jaxlab._src`` (re-exported by :mod:`jaxlab.nn`) so that every subpackage that
trains something (language models, flow matching, credal ensembles) uses it without importing
another subpackage.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxlab._src.validation import check_bool, check_callable, check_int, check_positive_int

__all__ = ["ScanTrainResult", "scan_train"]


class ScanTrainResult(NamedTuple):
    """What :func:`scan_train` returns.

    Attributes:
      params: the parameters after the last step.
      opt_state: the optimizer state after the last step (pass it back to continue training).
      losses: ``(num_steps,)`` loss of every step, at the parameters before that step's update
        (``None`` when ``num_steps`` is traced).
      aux: the loss function's auxiliary output of every step, stacked on a leading
        ``num_steps`` axis (``None`` unless ``has_aux``).
      checkpoints: the parameters after every ``checkpoint_every`` steps, stacked on a leading
        ``num_steps // checkpoint_every`` axis (the last entry equals ``params``; ``None``
        unless ``checkpoint_every``).

    Examples:
      >>> import jax.numpy as jnp, optax
      >>> result = scan_train(lambda w, b: jnp.sum((w - b) ** 2), jnp.zeros(2), optax.sgd(0.25),
      ...                     lambda step: jnp.ones(2), 3)
      >>> result.losses.tolist(), result.aux is None, result.checkpoints is None
      ([2.0, 0.5, 0.125], True, True)
    """

    params: Any
    opt_state: Any
    losses: jax.Array
    aux: Any
    checkpoints: Any


def scan_train(
    loss_fn: Callable[..., Any],
    params: Any,
    tx: optax.GradientTransformation,
    batches: Callable[[jax.Array], Any] | Any,
    num_steps: int | jax.Array,
    *,
    opt_state: Any = None,
    start_step: Any = 0,
    has_aux: bool = False,
    checkpoint_every: int | None = None,
) -> ScanTrainResult:
    """``num_steps`` optimizer steps on pure parameters, as one ``lax.scan`` (the library's loop).

    Step ``i`` (global step id ``s = start_step + i``) computes
    ``loss, grads = value_and_grad(loss_fn)(params, batch_s)``, then
    ``updates, opt_state = tx.update(grads, opt_state, params)`` and
    ``params = optax.apply_updates(params, updates)``. ``batch_s`` is ``batches(s)`` when
    ``batches`` is a callable (typically ``lambda s: sample_batch(fold_in(key, s), ...)``, so a
    run split into chunks sees the same batches), else ``batches[i]`` of a pytree whose leaves
    have a leading ``num_steps`` axis.

    The function is pure and traceable: call it under ``jax.jit``, and under ``jax.vmap`` to
    train several lanes (seeds, learning rates) in one compiled program. Build ``tx`` inside the
    traced function with the learning rate as a traced argument (a schedule belongs inside
    ``tx``), so lanes with different learning rates share one compilation. For an nnx model,
    split it first (``graphdef, params, rest = nnx.split(model, nnx.Param, ...)``) and merge
    inside ``loss_fn``; :func:`train_language_model` does that.

    Args:
      loss_fn: ``(params, batch) -> scalar`` (``-> (scalar, aux)`` with ``has_aux``).
      params: the initial parameters (any pytree of arrays).
      tx: any ``optax.GradientTransformation``.
      batches: ``step -> batch`` (``step`` an int32 scalar), or a pytree of stacked batches.
      num_steps: steps of this call: a static int ``>= 1`` (one ``lax.scan``), or a traced int
        scalar (a ``lax.fori_loop``: one compilation serves every length, e.g. a run stopped at
        uneven step counts; losses, aux and checkpoints are then not recorded, ``None``).
      opt_state: the optimizer state to continue from (default ``tx.init(params)``).
      start_step: the global id of the first step (may be traced), so a chunked run draws the
        batches of one long run.
      has_aux: whether ``loss_fn`` returns ``(loss, aux)``; the stacked aux is returned.
      checkpoint_every: also return the parameters after every this many steps (static; must
        divide ``num_steps``). The steps then run as a scan of scans, with the same arithmetic.

    Returns:
      A :class:`ScanTrainResult` ``(params, opt_state, losses, aux, checkpoints)``.

    Examples:
      Least squares with Adam, four learning rates as vmapped lanes of one compiled program:

      >>> import jax, jax.numpy as jnp, optax
      >>> x = jax.random.normal(jax.random.key(0), (64, 3))
      >>> y = x @ jnp.array([1.0, -2.0, 0.5])
      >>> def loss_fn(w, batch):
      ...     xb, yb = batch
      ...     return jnp.mean((xb @ w - yb) ** 2)
      >>> def batch(step):
      ...     rows = jax.random.randint(jax.random.fold_in(jax.random.key(1), step), (16,), 0, 64)
      ...     return x[rows], y[rows]
      >>> @jax.jit
      ... @jax.vmap
      ... def train(lr):
      ...     result = scan_train(loss_fn, jnp.zeros(3), optax.adam(lr), batch, 200,
      ...                         checkpoint_every=100)
      ...     return result.losses, result.checkpoints
      >>> losses, checkpoints = train(jnp.array([1e-3, 1e-2, 3e-2, 1e-1]))
      >>> losses.shape, checkpoints.shape
      ((4, 200), (4, 2, 3))
      >>> bool(losses[-1, -1] < 1e-3 < losses[0, -1])
      True
    """
    dynamic = isinstance(num_steps, jax.core.Tracer)
    if not dynamic:
        num_steps = check_positive_int(num_steps, "num_steps")
    if not isinstance(tx, optax.GradientTransformation):
        raise TypeError(f"tx must be an optax.GradientTransformation, got {type(tx).__name__}")
    check_callable(loss_fn, "loss_fn")
    has_aux = check_bool(has_aux, "has_aux")
    if not isinstance(start_step, jax.core.Tracer):
        check_int(start_step, "start_step", minimum=0)
    if dynamic and (checkpoint_every is not None or not callable(batches)):
        raise ValueError(
            "a traced num_steps needs batches as a callable and no checkpoint_every (neither "
            "stacked batches nor checkpoints have a static length then)"
        )
    if checkpoint_every is not None:
        checkpoint_every = check_positive_int(checkpoint_every, "checkpoint_every")
        if num_steps % checkpoint_every:
            raise ValueError(
                f"checkpoint_every={checkpoint_every} must divide num_steps={num_steps}"
            )
    if opt_state is None:
        opt_state = tx.init(params)

    def step(carry, x):
        params, opt_state = carry
        step_id, batch = x
        if batch is None:
            batch = batches(step_id)
        if has_aux:
            (loss, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, batch)
        else:
            loss, grads = jax.value_and_grad(loss_fn)(params, batch)
            aux = None
        updates, opt_state = tx.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), (loss, aux)

    if dynamic:

        def body(step_id, carry):
            return step(carry, (step_id, None))[0]

        stop = start_step + num_steps
        params, opt_state = jax.lax.fori_loop(start_step, stop, body, (params, opt_state))
        return ScanTrainResult(params, opt_state, None, None, None)
    step_ids = start_step + jnp.arange(num_steps)
    if callable(batches):
        xs = (step_ids, None)
    else:
        leading = {jnp.shape(leaf)[:1] for leaf in jax.tree.leaves(batches)}
        if leading != {(num_steps,)}:
            raise ValueError(
                f"stacked batches need a leading axis of num_steps={num_steps} on every leaf, "
                f"got leading shapes {sorted(leading)}"
            )
        xs = (step_ids, batches)
    if checkpoint_every is None:
        (params, opt_state), (losses, aux) = jax.lax.scan(step, (params, opt_state), xs)
        return ScanTrainResult(params, opt_state, losses, aux, None)

    def chunk(carry, x):
        carry, out = jax.lax.scan(step, carry, x)
        return carry, (carry[0], out)

    chunks = num_steps // checkpoint_every
    xs = jax.tree.map(lambda v: jnp.reshape(v, (chunks, checkpoint_every, *v.shape[1:])), xs)
    (params, opt_state), (checkpoints, (losses, aux)) = jax.lax.scan(chunk, (params, opt_state), xs)
    flat = jax.tree.map(lambda v: jnp.reshape(v, (num_steps, *v.shape[2:])), (losses, aux))
    return ScanTrainResult(params, opt_state, flat[0], flat[1], checkpoints)
