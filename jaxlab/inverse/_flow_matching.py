"""Flow matching: the velocity network, its loss and training, and the flow map by diffrax.

On the linear path ``x_t = (1 - t) x_0 + t x_1`` between noise ``x_0 ~ N(0, I)`` (``t = 0``) and
data ``x_1`` (``t = 1``), a velocity ``v_θ`` is trained by regression onto ``x_1 - x_0``::

    min_θ  E_{t ~ U[0, 1], x_0, x_1} || v_θ(x_t, t) - (x_1 - x_0) ||²,

and generation solves ``ẋ = v_θ(x, t)`` from ``t = 0`` to ``1``. ``Φ_{s→t}`` is the numerical flow
map: fixed-step Euler or Heun steps of diffrax (:func:`integrate_flow`), differentiated by
diffrax's recursive-checkpoint adjoint, or the same steps as a ``lax.scan`` differentiated by
plain backpropagation (``adjoint="every_step"``, every activation stored).

Velocity functions have the signature ``velocity_fn(params, x, t) -> v`` (``params`` a pytree:
an nnx state from :func:`split_velocity`, or a :class:`~jaxlab.inverse.GaussianMixtureFlow`
with ``GaussianMixtureFlow.velocity``), so the parameters are traced arguments of every compiled
program rather than constants baked into it.

References:
  Y. Lipman, R. T. Q. Chen, H. Ben-Hamu, M. Nickel, M. Le, "Flow Matching for Generative
  Modeling", ICLR 2023 (arXiv 2210.02747); X. Liu, C. Gong, Q. Liu, "Flow Straight and Fast",
  ICLR 2023 (arXiv 2209.03003); P. Kidger, "On Neural Differential Equations", 2021 (diffrax).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.typing import ArrayLike

from jaxlab._src.validation import (
    check_array,
    check_callable,
    check_callback_shape,
    check_choice,
    check_int,
    check_key,
    check_last_axis,
    check_positive,
    check_positive_int,
    check_real,
    is_concrete,
)
from jaxlab.nn import scan_train

__all__ = [
    "VelocityMLP",
    "diffrax_adjoint",
    "diffrax_solver",
    "flow_matching_loss",
    "integrate_flow",
    "split_velocity",
    "train_flow_matching",
]

_METHODS = {"euler": diffrax.Euler, "heun": diffrax.Heun, "midpoint": diffrax.Midpoint}
_ADJOINTS = ("every_step", "checkpointed", "recursive")
# The earlier name of "checkpointed" (it never stored the steps' activations), still accepted.
_FORMER_NAMES = {"backprop": "checkpointed"}
EVERY_STEP = "every_step"


def diffrax_solver(method: Any) -> diffrax.AbstractSolver:
    """The diffrax solver of ``method``: ``"euler"``, ``"heun"``, ``"midpoint"`` or an instance.

    Examples:
      >>> type(diffrax_solver("heun")).__name__
      'Heun'
    """
    if isinstance(method, diffrax.AbstractSolver):
        return method
    check_choice(method, "method", _METHODS, alternative="a diffrax solver")
    return _METHODS[method]()


def diffrax_adjoint(adjoint: Any, num_steps: int) -> diffrax.AbstractAdjoint | str:
    """How a solve of ``num_steps`` fixed steps is differentiated (its memory model).

    * ``"every_step"``: plain backpropagation through a ``lax.scan`` of the steps (no diffrax
      adjoint; returned as the string ``"every_step"``): every step's velocity activations are
      stored, memory grows by at least one activation set per step (the D-Flow of the paper).
    * ``"checkpointed"``: ``diffrax.RecursiveCheckpointAdjoint(checkpoints=num_steps)``: one
      state per step is stored and each step's activations are recomputed in the backward pass,
      memory grows by one state per step. ``"backprop"`` is its earlier name, still accepted.
    * ``"recursive"``: diffrax's default ``RecursiveCheckpointAdjoint()`` (online treeverse
      checkpointing: fewer stored states, more recomputation).
    * any ``diffrax.AbstractAdjoint`` instance, as given.

    Examples:
      >>> diffrax_adjoint("checkpointed", 32).checkpoints
      32
      >>> diffrax_adjoint("recursive", 32).checkpoints is None
      True
      >>> diffrax_adjoint("every_step", 32)
      'every_step'
    """
    if isinstance(adjoint, diffrax.AbstractAdjoint):
        return adjoint
    if not isinstance(adjoint, str) or adjoint not in _FORMER_NAMES:
        check_choice(adjoint, "adjoint", _ADJOINTS, alternative="a diffrax adjoint")
    adjoint = _FORMER_NAMES.get(adjoint, adjoint)
    check_int(num_steps, "num_steps", minimum=1)
    if adjoint == EVERY_STEP:
        return EVERY_STEP
    if adjoint == "checkpointed":
        return diffrax.RecursiveCheckpointAdjoint(checkpoints=num_steps)
    return diffrax.RecursiveCheckpointAdjoint()


def _check_every_step(solver: diffrax.AbstractSolver, adjoint: Any) -> None:
    """Raises unless ``adjoint == "every_step"`` comes with a solver the scan implements."""
    if adjoint == EVERY_STEP and type(solver) not in _SCAN_STEPS:
        raise ValueError(
            "adjoint='every_step' integrates with its own scan of Euler, Heun or midpoint steps; "
            f"got method {type(solver).__name__}: pass one of {tuple(_METHODS)} or a diffrax "
            "adjoint"
        )


def _check_time(value: Any, name: str) -> None:
    if is_concrete(value):
        check_real(value, name)
    elif jnp.ndim(value) != 0:
        raise ValueError(f"{name} must be a scalar time, got shape {jnp.shape(value)}")


def integrate_flow(
    velocity_fn: Callable[[Any, jax.Array, jax.Array], jax.Array],
    params: Any,
    x: ArrayLike,
    t0: ArrayLike = 0.0,
    t1: ArrayLike = 1.0,
    *,
    num_steps: int,
    method: Any = "heun",
    adjoint: Any = "recursive",
) -> jax.Array:
    """The numerical flow map ``Φ_{t0→t1}(x)``: ``num_steps`` fixed steps of ``ẋ = v(x, t)``.

    Heun's step (the explicit trapezoid) with ``h = (t1 - t0) / N``::

        k₁ = v(x, t),  k₂ = v(x + h k₁, t + h),  x ← x + h (k₁ + k₂) / 2,

    (Euler: ``x ← x + h k₁``), computed by ``diffrax.diffeqsolve`` with a constant step size
    and ``max_steps = num_steps``, so the solve takes exactly ``num_steps`` steps and cannot
    run out of them. ``t0`` and ``t1`` may be traced (``jax.vmap`` over segments).

    Args:
      velocity_fn: ``(params, x, t) -> v``, ``v`` shaped like ``x``.
      params: the velocity's parameters (any pytree; traced).
      x: the initial state at ``t0`` (any floating shape ``velocity_fn`` accepts).
      t0, t1: start and end times (``t1 != t0``; ``t1 < t0`` integrates backwards).
      num_steps: ``N >= 1``.
      method: ``"heun"`` (default), ``"euler"``, ``"midpoint"`` or a diffrax solver.
      adjoint: ``"recursive"`` (diffrax's default), ``"checkpointed"`` (one state per step
        stored), ``"every_step"`` (every step's activations stored) or a diffrax adjoint (see
        :func:`diffrax_adjoint`).

    Returns:
      The state at ``t1``, shaped like ``x``.

    Examples:
      The note's check 3: the exact mixture velocity from ``x_0 = (0.3, -0.2)``, Heun, 10 steps:

      >>> import jax.numpy as jnp
      >>> from jaxlab.inverse import GaussianMixtureFlow, three_mode_mixture
      >>> x1 = integrate_flow(GaussianMixtureFlow.velocity, three_mode_mixture(),
      ...                     jnp.array([0.3, -0.2]), num_steps=10)
      >>> [round(v, 4) for v in x1.tolist()]
      [1.3733, -0.9996]

    References:
      Y. Lipman et al., "Flow Matching for Generative Modeling", ICLR 2023; P. Kidger, diffrax.
    """
    check_callable(velocity_fn, "velocity_fn", signature="velocity_fn(params, x, t)")
    x = check_array(x, "x", kind="floating")
    num_steps = check_positive_int(num_steps, "num_steps")
    _check_time(t0, "t0")
    _check_time(t1, "t1")
    if is_concrete(t0) and is_concrete(t1) and float(t0) == float(t1):
        raise ValueError(f"t1 must differ from t0, got t0 = t1 = {float(t0)}")
    # The callback's output is checked once, abstractly, before the solver traces it.
    out = jax.eval_shape(velocity_fn, params, x, jnp.asarray(t0, x.dtype))
    check_callback_shape(out, x.shape, "velocity_fn", "shaped like x")
    solver = diffrax_solver(method)
    adjoint = diffrax_adjoint(adjoint, num_steps)
    _check_every_step(solver, adjoint)
    return _solve(velocity_fn, params, x, t0, t1, num_steps, solver, adjoint)


def _solve(velocity_fn, params, x, t0, t1, num_steps, solver, adjoint):
    """The unchecked solve (callers validate once, outside their loops).

    diffrax integrates in the reparametrised time ``s ∈ [0, 1]``, ``t = t0 + s (t1 - t0)``:
    ``dx/ds = (t1 - t0) v(x, t0 + s (t1 - t0))``, whose fixed steps ``h_s = 1/N`` are the
    steps ``h = (t1 - t0)/N`` in t (the same Euler/Heun arithmetic). The solve's own interval
    and step are then Python constants, even when ``t0``/``t1`` are traced (segments under
    ``vmap``): diffrax checks the sign of a traced ``(t1 - t0) dt0`` with a host callback, and
    a program with a host callback can be neither cached on disk nor moved to another host.
    """
    t0 = jnp.asarray(t0, x.dtype)
    t1 = jnp.asarray(t1, x.dtype)
    if adjoint == EVERY_STEP:
        return _scan_solve(velocity_fn, params, x, t0, t1, num_steps, type(solver))

    def field(s, y, args):
        velocity_params, start, span = args
        return span * velocity_fn(velocity_params, y, start + s * span)

    solution = diffrax.diffeqsolve(
        diffrax.ODETerm(field),
        solver,
        0.0,
        1.0,
        1.0 / num_steps,
        x,
        args=(params, t0, t1 - t0),
        saveat=diffrax.SaveAt(t1=True),
        stepsize_controller=diffrax.ConstantStepSize(),
        adjoint=adjoint,
        max_steps=num_steps,
        # Fixed steps: the solve takes exactly num_steps steps, so the only failure diffrax
        # checks (running out of steps) cannot happen; non-finite states are not absorbed either
        # (they propagate to the callers, whose status counts them).
        throw=False,
    )
    return solution.ys[0]


def _euler_step(field, s, y, h):
    return y + h * field(s, y)


def _heun_step(field, s, y, h):
    k1 = field(s, y)
    k2 = field(s + h, y + h * k1)
    return y + h * (0.5 * k1 + 0.5 * k2)


def _midpoint_step(field, s, y, h):
    return y + h * field(s + 0.5 * h, y + (0.5 * h) * field(s, y))


_SCAN_STEPS = {
    diffrax.Euler: _euler_step,
    diffrax.Heun: _heun_step,
    diffrax.Midpoint: _midpoint_step,
}


def _scan_solve(velocity_fn, params, x, t0, t1, num_steps, solver_type):
    """diffrax's fixed-step arithmetic (same reparametrised time) as a ``lax.scan`` with no
    checkpointing: under ``jax.grad`` JAX keeps every step's residuals, the velocity network's
    activations included (the every-step D-Flow memory model)."""
    span = t1 - t0
    h = jnp.asarray(1.0 / num_steps, x.dtype)
    one_step = _SCAN_STEPS[solver_type]

    def field(s, y):
        return span * velocity_fn(params, y, t0 + s * span)

    def body(y, i):
        return one_step(field, i.astype(x.dtype) * h, y, h), None

    y, _ = jax.lax.scan(body, x, jnp.arange(num_steps))
    return y


# --------------------------------------------------------------------------------------------
# The velocity network.


def _time_features(t: jax.Array, num_frequencies: int, like: jax.Array) -> jax.Array:
    t = jnp.asarray(t, like.dtype)
    t = jnp.broadcast_to(t.reshape(t.shape + (1,) * (like.ndim - 1 - t.ndim)), like.shape[:-1])
    freqs = math.pi * jnp.arange(1, num_frequencies + 1, dtype=like.dtype)
    angles = t[..., None] * jnp.broadcast_to(freqs, (*t.shape, num_frequencies))
    return jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], axis=-1)


class VelocityMLP(nnx.Module):
    """A velocity network ``v_θ(x, t)``: an MLP on ``[x, Fourier features of t]`` with SiLU.

    The time features are ``sin(π k t), cos(π k t)`` for ``k = 1..num_frequencies``
    (``2 · num_frequencies`` features), concatenated to ``x``; hidden layers use SiLU and the
    output layer is linear (``num_features`` outputs). The note's digits net is
    ``VelocityMLP(64, (256, 256, 256))``: 64 + 16 → 256 → 256 → 256 → 64.

    Args:
      num_features: ``D``, the signal size.
      hidden: hidden widths (at least one layer).
      num_frequencies: Fourier frequencies of the time embedding (``>= 1``).
      rngs: ``nnx.Rngs`` for the initialisation.

    Call: ``model(x, t)`` with ``x`` (..., D) and ``t`` a scalar or shaped like ``x``'s leading
    axes; returns (..., D).

    Examples:
      >>> import jax.numpy as jnp
      >>> from flax import nnx
      >>> model = VelocityMLP(4, (16,), rngs=nnx.Rngs(0))
      >>> model(jnp.zeros((3, 4)), 0.5).shape
      (3, 4)

    References:
      Y. Lipman et al., "Flow Matching for Generative Modeling", ICLR 2023.
    """

    def __init__(
        self,
        num_features: int,
        hidden: Sequence[int] = (256, 256, 256),
        *,
        num_frequencies: int = 8,
        rngs: nnx.Rngs,
    ):
        self.num_features = check_positive_int(num_features, "num_features")
        self.num_frequencies = check_positive_int(num_frequencies, "num_frequencies")
        if not isinstance(rngs, nnx.Rngs):
            raise TypeError(f"rngs must be an nnx.Rngs (nnx.Rngs(0)), got {type(rngs).__name__}")
        if isinstance(hidden, int) or not isinstance(hidden, Sequence) or not hidden:
            raise TypeError(f"hidden must be a non-empty sequence of widths, got {hidden!r}")
        widths = [check_positive_int(h, "hidden") for h in hidden]
        sizes = [num_features + 2 * num_frequencies, *widths, num_features]
        self.layers = nnx.List(
            [nnx.Linear(a, b, rngs=rngs) for a, b in zip(sizes[:-1], sizes[1:], strict=True)]
        )

    def __call__(self, x: ArrayLike, t: ArrayLike) -> jax.Array:
        x = jnp.asarray(x)
        check_last_axis(x, self.num_features, "x", "num_features")
        h = jnp.concatenate([x, _time_features(t, self.num_frequencies, x)], axis=-1)
        for i, layer in enumerate(self.layers):
            h = layer(h)
            if i < len(self.layers) - 1:
                h = jax.nn.silu(h)
        return h


def split_velocity(model: nnx.Module) -> tuple[Callable[..., jax.Array], Any]:
    """``(velocity_fn, params)`` of an nnx velocity model, for the solvers and integrators.

    ``velocity_fn(params, x, t) = nnx.merge(graphdef, params)(x, t)``; ``params`` is the
    model's ``nnx.State`` (a pytree, traced in compiled programs). The same ``velocity_fn``
    object is returned for every model with the same graph, so solvers built from it can share
    compiled programs.

    Examples:
      >>> import jax.numpy as jnp
      >>> from flax import nnx
      >>> model = VelocityMLP(2, (8,), rngs=nnx.Rngs(0))
      >>> velocity_fn, params = split_velocity(model)
      >>> bool(jnp.allclose(velocity_fn(params, jnp.ones(2), 0.3), model(jnp.ones(2), 0.3)))
      True
    """
    if not isinstance(model, nnx.Module):
        raise TypeError(f"model must be an nnx.Module, got {type(model).__name__}")
    graphdef, state = nnx.split(model)
    return _merged_velocity(graphdef), state


# One velocity function per graph definition (graphdefs are hashable and compare by structure):
# models of the same architecture give the same function object, so the solvers and the jit
# caches keyed on ``velocity_fn`` reuse their traces instead of re-tracing per split.
@functools.lru_cache(maxsize=64)
def _merged_velocity(graphdef):
    def velocity_fn(params, x, t):
        return nnx.merge(graphdef, params)(x, t)

    return velocity_fn


# --------------------------------------------------------------------------------------------
# Training.


def flow_matching_loss(
    velocity_fn: Callable[[Any, jax.Array, jax.Array], jax.Array],
    params: Any,
    rng_key: jax.Array,
    x1: ArrayLike,
) -> jax.Array:
    """The conditional flow-matching loss on a batch of data ``x1`` (B, D).

    ``L = (1/B) Σ_b || v(x_t, t) - (x_1 - x_0) ||²`` with ``x_0 ~ N(0, I)``, ``t ~ U[0, 1]``
    per row and ``x_t = (1 - t) x_0 + t x_1``; ``velocity_fn`` is called once on the batch with
    ``t`` of shape (B,).

    Args:
      velocity_fn: ``(params, x, t) -> v`` accepting a batch (B, D) with times (B,).
      params: its parameters.
      rng_key: key of the noise and times.
      x1: data rows (B, D).

    Returns:
      The scalar loss.

    Examples:
      The exact mixture velocity minimises the loss (what remains is the conditional variance
      of ``x_1 - x_0``): below a zero velocity's and below a rescaled exact velocity's.

      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.inverse import three_mode_mixture
      >>> flow = three_mode_mixture()
      >>> x1 = flow.sample(jax.random.key(0), 4000)
      >>> exact = lambda f, x, t: jax.vmap(f.velocity)(x, t)
      >>> zero = lambda f, x, t: jnp.zeros_like(x)
      >>> key = jax.random.key(1)
      >>> scaled = lambda f, x, t: 0.8 * exact(f, x, t)
      >>> losses = [float(flow_matching_loss(v, flow, key, x1)) for v in (exact, scaled, zero)]
      >>> [round(v, 1) for v in losses]
      [3.7, 3.8, 6.2]

    References:
      Y. Lipman et al., "Flow Matching for Generative Modeling", ICLR 2023, eq. (23) with
      ``σ_min = 0`` (the rectified-flow path).
    """
    check_callable(velocity_fn, "velocity_fn", signature="velocity_fn(params, x, t)")
    check_key(rng_key)
    x1 = check_array(x1, "x1", kind="floating", ndim=2)
    noise_key, time_key = jax.random.split(rng_key)
    x0 = jax.random.normal(noise_key, x1.shape, x1.dtype)
    t = jax.random.uniform(time_key, x1.shape[:1], x1.dtype)
    xt = (1.0 - t)[:, None] * x0 + t[:, None] * x1
    try:
        v = velocity_fn(params, xt, t)
    except (TypeError, ValueError) as err:  # e.g. a one-point velocity given a batch
        raise ValueError(
            f"velocity_fn(params, x, t) must take a batch x {xt.shape} with times t {t.shape} "
            f"(vmap a one-point velocity), and failed: {type(err).__name__}: {err}"
        ) from err
    check_callback_shape(v, xt.shape, "velocity_fn", "shaped like the batch x1")
    return jnp.mean(jnp.sum((v - (x1 - x0)) ** 2, axis=-1))


def train_flow_matching(
    model: nnx.Module,
    data: ArrayLike,
    *,
    steps: int,
    batch_size: int,
    learning_rate: ArrayLike,
    rng_key: jax.Array,
    chunk_size: int | None = None,
    progress: Any = None,
) -> dict[str, np.ndarray]:
    """Trains an nnx velocity model in place on ``data`` (N, D) with Adam and the FM loss.

    Step ``s`` draws ``batch_size`` rows with replacement and the loss's noise and times from
    ``fold_in(rng_key, s)``, so a run split into chunks is one run. The steps run as jitted
    ``lax.scan`` chunks (:func:`jaxlab.nn.scan_train`). A non-finite loss is not masked: it shows
    in the returned curve (check ``np.isfinite(history["train_loss"])``).

    Args:
      model: an nnx module called as ``model(x, t)`` (e.g. :class:`VelocityMLP`).
      data: training rows (N, D).
      steps: Adam steps, ``>= 1``.
      batch_size: rows per step, ``>= 1``.
      learning_rate: Adam's step size ``> 0``.
      rng_key: a ``jax.random`` key.
      chunk_size: steps per jitted scan (default ``min(steps, 500)``).
      progress: optional object with ``track(iterable, total=, description=)``.

    Returns:
      ``{"train_loss": (steps,)}``.

    Examples:
      >>> import jax
      >>> from flax import nnx
      >>> from jaxlab.inverse import three_mode_mixture
      >>> data = three_mode_mixture().sample(jax.random.key(0), 512)
      >>> model = VelocityMLP(2, (32,), rngs=nnx.Rngs(0))
      >>> history = train_flow_matching(model, data, steps=60, batch_size=64,
      ...                               learning_rate=1e-2, rng_key=jax.random.key(1))
      >>> loss = history["train_loss"]
      >>> loss.shape, bool(loss[-10:].mean() < loss[:10].mean())
      ((60,), True)

    References:
      Y. Lipman et al., "Flow Matching for Generative Modeling", ICLR 2023.
    """
    if not isinstance(model, nnx.Module):
        raise TypeError(f"model must be an nnx.Module, got {type(model).__name__}")
    data = check_array(data, "data", kind="floating", ndim=2)
    if data.shape[0] < 1:
        raise ValueError("data must have at least one row")
    steps = check_positive_int(steps, "steps")
    batch_size = check_positive_int(batch_size, "batch_size")
    check_positive(learning_rate, "learning_rate")
    check_key(rng_key)
    chunk = min(steps, 500) if chunk_size is None else chunk_size
    chunk = check_int(chunk, "chunk_size", minimum=1)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    # The model must accept (B, D) rows with (B,) times: checked once, before compiling.
    probe = lambda p: nnx.merge(graphdef, p, rest)(data[:2], jnp.zeros(2, data.dtype))  # noqa: E731
    try:
        jax.eval_shape(probe, params)
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"model must accept rows of data (shape {data.shape}) with their times: "
            f"{type(err).__name__}: {err}"
        ) from err
    tx = optax.adam(learning_rate)

    def loss_of(params, step):
        key = jax.random.fold_in(rng_key, step)
        row_key, loss_key = jax.random.split(key)
        rows = jax.random.randint(row_key, (batch_size,), 0, data.shape[0])
        velocity = lambda p, x, t: nnx.merge(graphdef, p, rest)(x, t)  # noqa: E731
        return flow_matching_loss(velocity, params, loss_key, data[rows])

    @functools.partial(jax.jit, static_argnums=2)
    def run_chunk(state, start, num_steps):
        result = scan_train(
            loss_of, state[0], tx, lambda s: s, num_steps, opt_state=state[1], start_step=start
        )
        return (result.params, result.opt_state), result.losses

    state = (params, tx.init(params))
    stops = sorted(set(range(chunk, steps, chunk)) | {steps})
    spans = list(zip([0, *stops[:-1]], stops, strict=True))
    if progress is not None:
        spans = progress.track(spans, total=len(spans), description="flow matching")
    losses = []
    for start, stop in spans:
        state, chunk_losses = run_chunk(state, jnp.int32(start), stop - start)
        losses.append(np.asarray(chunk_losses))
    nnx.update(model, state[0])
    return {"train_loss": np.concatenate(losses)}
