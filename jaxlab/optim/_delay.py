"""One-step (D-step) gradient delay as an optax wrapper, with optional EF-style delay correction.

Asynchronous pipeline training (PipeDream-2BW) applies at step ``t`` the update computed from a
gradient taken at the weights of step ``t - D`` (``D = 1`` for 2BW): ``x_{t+1} = x_t - η U_t(g_t)``
with ``g_t = ∇f(x_{t-D}; ξ_t)``. :func:`delayed` simulates this on one device for *any* inner
optax transform ``U`` (AdamW, Muon, DeVA, ...): a FIFO of ``D`` gradients lives in the optimizer
state; at call ``t`` the wrapper receives ``∇f(x_t; ξ_t)``, pushes it, and feeds the gradient
pushed ``D`` calls earlier to ``U``. The first ``D`` updates are zero (pipeline fill).

Corrections act only on the inputs or outputs of ``U``, so they are optimizer-agnostic (see
:func:`delayed` for the three variants).

References:
  Zmushko, Petrov, Abdullaev, Khrushchev, Horváth, "One-Step Gradient Delay is Not a Barrier for
  Large-Scale Asynchronous Pipeline Parallel LLM Pretraining", ICML 2026, arXiv 2606.30634.
  Narayanan et al., "Memory-Efficient Pipeline-Parallel DNN Training" (PipeDream-2BW), ICML
  2021, arXiv 2006.09503. Stich & Karimireddy, "The Error-Feedback Framework: Better Rates for
  SGD with Delayed Gradients and Compressed Communication", arXiv 1909.05350.
"""

# No ``from __future__ import annotations``: optax reads annotations at run time.
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.typing import ArrayLike

from jaxlab._src.validation import (
    check_floating_tree,
    check_in_range,
    check_nonnegative,
    check_static_int,
    check_tree_like,
    count_nonfinite,
    nonfinite_count_init,
)

__all__ = ["DELAY_CORRECTIONS", "DelayState", "delayed"]

DELAY_CORRECTIONS = ("none", "update_extrapolation", "gradient_extrapolation", "error_buffer")
# ``delay_steps=None``: PipeDream-2BW's one-step delay. None rather than 1 so that
# optax.inject_hyperparams (which injects numeric defaults as traced arrays) leaves the FIFO
# length static.
DEFAULT_DELAY_STEPS = 1


class DelayState(NamedTuple):
    """State of :func:`delayed`.

    Attributes:
      count: calls so far, int32.
      gradient_fifo: the last ``D`` received gradients, each leaf shaped ``(D, *param_shape)``;
        entry ``i`` is the gradient received ``i + 1`` calls ago (``()`` when ``D = 0``).
      previous_gradient: the delayed gradient fed to the inner transform at the previous call
        (``"gradient_extrapolation"`` only, else ``()``).
      previous_update: the inner transform's previous output (``"update_extrapolation"`` and
        ``"error_buffer"``, else ``()``).
      error: the error buffer ``e`` (``"error_buffer"`` only, else ``()``).
      inner_state: the wrapped transform's state.
      nonfinite_count: calls whose gradient had a NaN or infinite entry (int32, saturating).

    Examples:
      >>> import jax.numpy as jnp, optax
      >>> state = delayed(optax.sgd(0.1), delay_steps=2).init({"w": jnp.zeros(3)})
      >>> state.count, state.gradient_fifo["w"].shape
      (Array(0, dtype=int32), (2, 3))
    """

    count: jax.Array
    gradient_fifo: optax.Updates
    previous_gradient: optax.Updates
    previous_update: optax.Updates
    error: optax.Updates
    inner_state: optax.OptState
    nonfinite_count: jax.Array


def _check_delay_steps(delay_steps: Any) -> int:
    return check_static_int(
        delay_steps,
        "delay_steps",
        default=DEFAULT_DELAY_STEPS,
        role="sets the gradient FIFO's length",
        minimum=0,
    )


def _check_correction(correction: Any) -> str:
    if correction is None:
        return "none"
    if not isinstance(correction, str) or correction not in DELAY_CORRECTIONS:
        raise ValueError(
            f"correction must be None or one of {DELAY_CORRECTIONS}, got {correction!r}"
        )
    return correction


def _scaled(coefficient: ArrayLike, leaf: jax.Array) -> jax.Array:
    """``coefficient * leaf`` in ``leaf``'s dtype (no promotion of bf16 leaves)."""
    return jnp.asarray(coefficient).astype(leaf.dtype) * leaf


def delayed(
    inner: optax.GradientTransformation,
    *,
    delay_steps: int | None = None,
    correction: str | None = None,
    extrapolation: ArrayLike = 1.0,
    buffer_decay: ArrayLike = 0.0,
) -> optax.GradientTransformationExtraArgs:
    """Wraps ``inner`` so it applies, at call ``t``, its update for the gradient of call ``t - D``.

    With ``D = delay_steps``, ``g_t`` the gradient received at call ``t`` (taken at the current
    parameters ``x_t``), ``U`` the inner transform (state update included) and ``d_t = g_{t-D}``:

    * ``correction="none"`` (or None): ``a_t = U(d_t)`` -- PipeDream-2BW's update for ``D = 1``.
    * ``"update_extrapolation"``: ``u_t = U(d_t)``, ``a_t = u_t + λ(u_t - u_{t-1})`` (the linear
      one-step extrapolation of the stale update; λ = 1 is the note's default).
    * ``"gradient_extrapolation"``: ``a_t = U(d_t + λ(d_t - d_{t-1}))`` (≈ ``U(∇f(x_t))`` to first
      order; extrapolating before a nonlinear ``U`` such as Muon's NS5 is a different method).
    * ``"error_buffer"``: ``e_t = γ_e e_{t-1} + (u_t - u_{t-1})``, ``a_t = u_t + λ e_t``
      (``γ_e = 0`` is update extrapolation).

    Previous values enter only once they exist (from call ``D + 1``). During the first ``D``
    calls the update is zero and the inner state does not move (pipeline fill). The inner
    transform receives the *current* ``params`` (decoupled weight decay acts on ``x_t``).
    ``delay_steps=0`` with no correction returns ``inner`` itself, so it is bit-identical.
    With i.i.d. minibatches the FIFO simulation has the same law as a real 2BW pipeline (where
    ``g_t = ∇f(x_{t-1}; ξ_t)`` with a fresh batch), see ``jaxlab.distributed.pipedream_2bw_train``.

    ``optax.inject_hyperparams(delayed)(optax.adamw(1e-3))`` works: ``extrapolation`` and
    ``buffer_decay`` are injected, ``delay_steps`` defaults to None (1) so it stays static.
    Params must be floating point (the FIFO is stored in their dtype: integer params would
    truncate gradients) and every gradient must have the params' shapes (checked, naming the
    leaf's path).

    Non-finite gradients are counted in ``nonfinite_count`` (at the call that receives them).
    Such a gradient waits ``D`` calls in the FIFO, then enters the inner transform (whose
    moments, e.g. AdamW's, hold NaN from then on) and the correction buffers, so every later
    update is NaN. To skip such steps instead, compose with ``optax.apply_if_finite``: the bad
    gradient never enters the FIFO, the state is unchanged and the update is zero, so the
    pipeline resumes as if that call had not happened::

        tx = optax.apply_if_finite(delayed(optax.adamw(1e-3)), max_consecutive_errors=10)

    Args:
      inner: any optax transform (``optax.adamw``, ``optax.contrib.muon``, ``jaxlab.optim.deva``).
      delay_steps: ``D >= 0``, the FIFO length (static; None means 1).
      correction: None/``"none"``, ``"update_extrapolation"``, ``"gradient_extrapolation"`` or
        ``"error_buffer"``; static.
      extrapolation: λ, finite and ``>= 0`` (ArrayLike, injectable; ignored without
        correction).
      buffer_decay: ``γ_e ∈ [0, 1]`` of ``"error_buffer"`` (ArrayLike, injectable; above 1 the
        buffer grows geometrically).

    Returns:
      An ``optax.GradientTransformationExtraArgs`` with a :class:`DelayState`.

    Raises:
      TypeError: ``inner`` is not an optax transform or ``delay_steps`` not an int.
      ValueError: ``delay_steps < 0``, an unknown ``correction``, a negative or non-finite
        concrete ``extrapolation``, or a concrete ``buffer_decay`` outside ``[0, 1]``.

    Examples:
      >>> import jax.numpy as jnp, optax
      >>> tx = delayed(optax.sgd(1.0), delay_steps=1)
      >>> params = jnp.zeros(2)
      >>> state = tx.init(params)
      >>> for g in (jnp.array([1.0, 0.0]), jnp.array([0.0, 2.0]), jnp.array([3.0, 3.0])):
      ...     update, state = tx.update(g, state, params)
      ...     print(update)
      [0. 0.]
      [-1. -0.]
      [-0. -2.]
      >>> nan_grad = jnp.array([jnp.nan, 0.0])
      >>> _, state = tx.update(nan_grad, state, params)
      >>> int(state.nonfinite_count)
      1
      >>> safe = optax.apply_if_finite(tx, max_consecutive_errors=5)  # skips that call
      >>> safe_state = safe.init(params)
      >>> update, safe_state = safe.update(nan_grad, safe_state, params)
      >>> update, int(safe_state.inner_state.nonfinite_count)  # never reached delayed
      (Array([0., 0.], dtype=float32), 0)
      >>> delayed(optax.sgd(1.0), delay_steps=-1)
      Traceback (most recent call last):
      ...
      ValueError: delay_steps must be an int >= 0, got -1

    References:
      Zmushko et al., "One-Step Gradient Delay is Not a Barrier for Large-Scale Asynchronous
      Pipeline Parallel LLM Pretraining", ICML 2026 (arXiv 2606.30634); Narayanan et al.,
      PipeDream-2BW, ICML 2021 (arXiv 2006.09503); Stich & Karimireddy, arXiv 1909.05350.
    """
    if not isinstance(inner, optax.GradientTransformation):
        raise TypeError(
            f"inner must be an optax.GradientTransformation, got {type(inner).__name__}"
        )
    delay = _check_delay_steps(delay_steps)
    mode = _check_correction(correction)
    check_nonnegative(extrapolation, "extrapolation")
    check_in_range(buffer_decay, "buffer_decay", 0.0, 1.0, include_high=True)
    inner = optax.with_extra_args_support(inner)
    if delay == 0 and mode == "none":
        return inner
    keep_gradient = mode == "gradient_extrapolation"
    keep_update = mode in ("update_extrapolation", "error_buffer")
    keep_error = mode == "error_buffer"

    def init(params):
        check_floating_tree(params, "params")
        zeros = optax.tree.zeros_like(params)
        # zeros_like keeps the params' varying-manual-axes type under shard_map (scan carries).
        fifo = jax.tree.map(
            lambda z: jnp.broadcast_to(jnp.expand_dims(z, 0), (delay, *z.shape)), zeros
        )
        return DelayState(
            count=jnp.zeros([], jnp.int32),
            gradient_fifo=fifo if delay else (),
            previous_gradient=zeros if keep_gradient else (),
            previous_update=zeros if keep_update else (),
            error=zeros if keep_error else (),
            inner_state=inner.init(params),
            nonfinite_count=nonfinite_count_init(params),
        )

    def update(updates, state, params=None, **extra_args):
        check_tree_like(updates, _reference(state), "updates", "the state")
        count = state.count
        if delay:
            stale = jax.tree.map(lambda q: q[delay - 1], state.gradient_fifo)
            fifo = jax.tree.map(
                lambda q, g: jnp.roll(q, 1, axis=0).at[0].set(g.astype(q.dtype)),
                state.gradient_fifo,
                updates,
            )
        else:
            stale, fifo = updates, ()
        stale = optax.tree.cast_like(stale, updates)
        filled = count >= delay  # a delayed gradient exists
        has_previous = count >= delay + 1  # ... and so does the previous one

        if keep_gradient:
            inner_in = jax.tree.map(
                lambda d, p: d + jnp.where(has_previous, _scaled(extrapolation, d - p), 0),
                stale,
                state.previous_gradient,
            )
            previous_gradient = optax.tree.where(filled, stale, state.previous_gradient)
        else:
            inner_in, previous_gradient = stale, state.previous_gradient

        inner_out, inner_state = inner.update(inner_in, state.inner_state, params, **extra_args)
        inner_state = optax.tree.where(filled, inner_state, state.inner_state)

        error = state.error
        if keep_update:
            change = jax.tree.map(
                lambda u, p: jnp.where(has_previous, u - p.astype(u.dtype), 0),
                inner_out,
                state.previous_update,
            )
            if keep_error:
                error = jax.tree.map(
                    lambda e, c: _scaled(buffer_decay, e).astype(c.dtype) + c, state.error, change
                )
                error = optax.tree.where(filled, error, state.error)
                change = error
            corrected = jax.tree.map(
                lambda u, c: u + _scaled(extrapolation, c.astype(u.dtype)), inner_out, change
            )
            previous_update = optax.tree.where(filled, inner_out, state.previous_update)
        else:
            corrected, previous_update = inner_out, state.previous_update

        out = optax.tree.where(filled, corrected, optax.tree.zeros_like(corrected))
        new_state = DelayState(
            count=optax.safe_increment(count),
            gradient_fifo=fifo,
            previous_gradient=previous_gradient,
            previous_update=previous_update,
            error=error,
            inner_state=inner_state,
            nonfinite_count=count_nonfinite(state.nonfinite_count, updates),
        )
        return out, new_state

    def _reference(state):
        """Shapes and dtypes of one params-like tree of the state (the FIFO drops its D axis)."""
        if delay:
            return jax.tree.map(
                lambda q: jax.ShapeDtypeStruct(q.shape[1:], q.dtype), state.gradient_fifo
            )
        return state.previous_gradient if keep_gradient else state.previous_update

    return optax.GradientTransformationExtraArgs(init, update)
