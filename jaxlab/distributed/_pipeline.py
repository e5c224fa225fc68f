"""Pipeline-parallel executors over a ``'stage'`` mesh axis, and a discrete-event schedule model.

A model is split into ``S`` stages, stage ``s`` holding its own parameters (the leading axis of
every parameter leaf, sharded over the mesh axis). Micro-batch activations go forward from stage
``s`` to ``s + 1`` and their cotangents backward with ``jax.lax.ppermute`` inside
``jax.shard_map``. Time is counted in *ticks*; in one tick a stage has two *slots*, one forward
(F) and one backward (B), each either busy or idle.

* :func:`gpipe_train` (synchronous; GPipe schedule, identical maths to 1F1B with a flush): per
  minibatch, ``M + S - 1`` forward ticks, then ``M + S - 1`` backward ticks, then every stage
  applies ``x_{t+1} = x_t + U(∇f(x_t; B_t))``. Idle slots: ``(S - 1)/(M + S - 1)``.
* :func:`pipedream_2bw_train` (asynchronous, PipeDream-2BW): micro-batches flow without flushes,
  stage ``s`` runs F of micro-batch ``j`` at tick ``j + s`` and B at tick ``j + 2S - 1 - s``, so in
  steady state every slot is busy. Each stage keeps two weight versions; all micro-batches of
  minibatch ``t`` use ``x_{t-1}`` for forward *and* backward, and the update when its last B is
  done is ``x_{t+1} = x_t + U(∇f(x_{t-1}; B_t))`` (``x_{-1} = x_0``), the one-step delay that
  ``jaxlab.optim.delayed(U, delay_steps=1)`` simulates.

:func:`pipeline_schedule` is an event model of GPipe, 1F1B-with-flush and 2BW for arbitrary
forward/backward times (makespan, bubble fraction, activation memory, weight versions).

References:
  Narayanan et al., "Memory-Efficient Pipeline-Parallel DNN Training" (PipeDream-2BW), ICML 2021,
  arXiv 2006.09503. Huang et al., "GPipe", NeurIPS 2019, arXiv 1811.06965. Narayanan et al.,
  "PipeDream: Generalized Pipeline Parallelism for DNN Training", SOSP 2019.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Callable, Mapping
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxlab._src import validation
from jaxlab._src.sharding import mark_varying

__all__ = [
    "PipelineResult",
    "Schedule",
    "gpipe_train",
    "mlp_stage",
    "pipedream_2bw_train",
    "pipeline_schedule",
    "sequential_loss",
    "squared_error",
]


def mlp_stage(params: dict[str, jax.Array], h: jax.Array) -> jax.Array:
    """One pipeline stage, an MLP layer of constant width: ``tanh(h W + b)``.

    Args:
      params: ``{"w": (d, d), "b": (d,)}`` (one stage's slice).
      h: activations ``(batch, d)``.

    Returns:
      ``(batch, d)`` activations.

    Examples:
      >>> import jax.numpy as jnp
      >>> mlp_stage({"w": jnp.eye(2), "b": jnp.zeros(2)}, jnp.array([[0.0, 1.0]]))
      Array([[0.       , 0.7615942]], dtype=float32)
    """
    if not isinstance(params, Mapping) or "w" not in params or "b" not in params:
        raise TypeError(f"params must be a mapping with 'w' and 'b', got {type(params).__name__}")
    w, b, h_shape = np.shape(params["w"]), np.shape(params["b"]), np.shape(h)
    if len(w) != 2 or w[0] != w[1] or b != (w[0],):
        raise ValueError(
            f"params must hold a square 'w' (d, d) and 'b' (d,), got {w} and {b} (a stage of "
            "constant width)"
        )
    if len(h_shape) != 2 or h_shape[1] != w[0]:
        raise ValueError(f"h must be (batch, {w[0]}) activations, got shape {h_shape}")
    return jnp.tanh(h @ params["w"] + jnp.expand_dims(params["b"], 0))


def squared_error(outputs: jax.Array, targets: jax.Array) -> jax.Array:
    """``½ mean_rows ‖outputs - targets‖²``, the default pipeline loss.

    Examples:
      >>> import jax.numpy as jnp
      >>> squared_error(jnp.array([[1.0, 2.0]]), jnp.zeros((1, 2)))
      Array(2.5, dtype=float32)
    """
    if np.shape(outputs) != np.shape(targets):
        raise ValueError(
            f"targets must have the outputs' shape {np.shape(outputs)}, got {np.shape(targets)}"
        )
    return 0.5 * jnp.mean(jnp.sum((outputs - targets) ** 2, axis=-1))


def sequential_loss(
    stage_params: Any,
    inputs: jax.Array,
    targets: jax.Array,
    *,
    stage_fn: Callable[[Any, jax.Array], jax.Array] = mlp_stage,
    loss_fn: Callable[[jax.Array, jax.Array], jax.Array] = squared_error,
) -> jax.Array:
    """The loss of the stacked stages run one after another on one device (no pipeline).

    ``L = loss_fn(f_{S-1}(… f_0(inputs)), targets)`` with ``f_s = stage_fn(params[s], ·)``; the
    reference the executors' gradients are checked against.

    Args:
      stage_params: pytree whose leaves have a leading stage axis ``S``.
      inputs: ``(batch, d)``.
      targets: ``(batch, d)``.
      stage_fn: ``(one stage's params, h) -> h`` of constant width.
      loss_fn: ``(outputs, targets) -> scalar``.

    Returns:
      The scalar loss.

    Examples:
      >>> import jax.numpy as jnp
      >>> params = {"w": jnp.stack([jnp.eye(2)] * 3), "b": jnp.zeros((3, 2))}
      >>> sequential_loss(params, jnp.zeros((4, 2)), jnp.ones((4, 2)))
      Array(1., dtype=float32)
    """
    num_stages = _num_stages(stage_params)
    h = inputs
    for s in range(num_stages):
        h = stage_fn(jax.tree.map(lambda x, s=s: x[s], stage_params), h)
    return loss_fn(h, targets)


class PipelineResult(NamedTuple):
    """What an executor returns.

    Attributes:
      params: final stage parameters (leading stage axis), after the last minibatch's update.
      trajectory: the parameters after each minibatch's update, leaves ``(K, S, ...)``.
      busy_slots: ``(ticks, S)`` int32, busy slots per tick and stage.
      slots_per_tick: slots of a stage in one tick (2BW: 2, one F and one B; GPipe: 1, its
        ticks are either forward or backward ticks).
      steady_ticks: ``(first, last)`` ticks (half-open) in which the pipeline is full; for GPipe
        there is no steady state and this is ``(0, 0)``.

    Examples:
      >>> import numpy as np
      >>> busy = np.array([[1, 0], [2, 1], [2, 2], [1, 2]])  # 4 ticks, 2 stages, 2 slots each
      >>> result = PipelineResult({}, {}, busy, 2, (2, 3))
      >>> result.idle_fraction(), result.idle_fraction(steady_state=True)
      (0.3125, 0.0)
    """

    params: Any
    trajectory: Any
    busy_slots: np.ndarray
    slots_per_tick: int
    steady_ticks: tuple[int, int]

    def idle_fraction(self, steady_state: bool = False) -> float:
        """Idle slots over all slots (``steady_state``: only ticks in ``steady_ticks``)."""
        busy = self.busy_slots
        if steady_state:
            busy = busy[self.steady_ticks[0] : self.steady_ticks[1]]
        return float(1.0 - busy.sum() / (self.slots_per_tick * busy.size)) if busy.size else 0.0


def _num_stages(stage_params: Any) -> int:
    leaves = jax.tree.leaves(stage_params)
    if not leaves:
        raise ValueError("stage_params must contain at least one array")
    sizes = {np.shape(leaf)[0] if np.ndim(leaf) else None for leaf in leaves}
    if len(sizes) != 1 or None in sizes:
        raise ValueError(
            f"every leaf of stage_params needs the same leading stage axis, got sizes {sizes}"
        )
    return int(sizes.pop())


def _check_inputs(stage_params, inputs, targets, mesh, axis_name, min_microbatches, tx=None):
    if tx is not None and not isinstance(tx, optax.GradientTransformation):
        raise TypeError(f"tx must be an optax.GradientTransformation, got {type(tx).__name__}")
    validation.check_floating_tree(stage_params, "stage_params")
    validation.check_mesh_axis(mesh, axis_name)
    num_stages = _num_stages(stage_params)
    if mesh.shape[axis_name] != num_stages:
        raise ValueError(
            f"stage_params have {num_stages} stages but mesh axis {axis_name!r} has "
            f"{mesh.shape[axis_name]} devices (one stage per device)"
        )
    if np.ndim(inputs) != 4 or np.ndim(targets) != 4:
        raise ValueError(
            "inputs and targets must be (minibatches, microbatches, rows, features), got "
            f"{np.shape(inputs)} and {np.shape(targets)}"
        )
    if np.shape(inputs)[:3] != np.shape(targets)[:3]:
        raise ValueError(
            f"inputs {np.shape(inputs)} and targets {np.shape(targets)} differ in leading axes"
        )
    num_microbatches = np.shape(inputs)[1]
    if num_microbatches < min_microbatches:
        raise ValueError(
            f"num_microbatches = inputs.shape[1] must be >= {min_microbatches} here, got "
            f"{num_microbatches}"
        )
    return num_stages


def _stage_ops(stage_fn, loss_fn):
    def backward(params, h_in, cotangent, target, is_last):
        """Gradients of one stage for one micro-batch; the last stage seeds with the loss."""
        out, vjp = jax.vjp(stage_fn, params, h_in)
        loss_cot = jax.grad(loss_fn)(out, target)
        seed = jnp.where(is_last, loss_cot, cotangent)
        return vjp(seed)

    return backward


def _shift(x, axis_name, num_stages, direction):
    perm = [(i, (i + direction) % num_stages) for i in range(num_stages)]
    return jax.lax.ppermute(x, axis_name, perm)


def _place(mesh, axis_name, stage_params, inputs, targets):
    stage_sharding = NamedSharding(mesh, P(axis_name))
    replicated = NamedSharding(mesh, P())
    stage_params = jax.tree.map(lambda x: jax.device_put(x, stage_sharding), stage_params)
    inputs = jax.device_put(jnp.asarray(inputs), replicated)
    targets = jax.device_put(jnp.asarray(targets), replicated)
    return stage_params, inputs, targets


_MAPPINGS = ("shard_map", "pmap")


def _stage_program(per_stage, mesh, axis_name, mapping):
    """``per_stage(params block, inputs, targets)`` run once per stage, by shard_map or pmap.

    ``per_stage`` sees its stage's parameters with a leading block axis of size 1 and returns
    ``(final (1, ...), trajectory (K, 1, ...), busy (ticks, 1))``, as shard_map's
    ``P(axis_name)`` / ``P(None, axis_name)`` specs want. Under pmap the same program gets the
    block axis added and removed around it, and ``out_axes`` puts the stages where shard_map's
    specs do.
    """
    if mapping == "shard_map":
        return jax.jit(
            jax.shard_map(
                per_stage,
                mesh=mesh,
                in_specs=(P(axis_name), P(), P()),
                out_specs=(P(axis_name), P(None, axis_name), P(None, axis_name)),
            )
        )
    if len(mesh.axis_names) != 1:
        raise ValueError(
            f"mapping='pmap' needs a 1-D mesh (pmap maps one device axis), got mesh axes "
            f"{mesh.axis_names}; use mapping='shard_map'"
        )

    def per_device(params, xs, ys):
        block = jax.tree.map(lambda x: jnp.expand_dims(x, 0), params)
        final, trajectory, busy = per_stage(block, xs, ys)
        squeeze = lambda axis: lambda x: jnp.squeeze(x, axis)  # noqa: E731
        return (
            jax.tree.map(squeeze(0), final),
            jax.tree.map(squeeze(1), trajectory),
            jnp.squeeze(busy, 1),
        )

    mapped = jax.pmap(
        per_device,
        axis_name=axis_name,
        in_axes=(0, None, None),
        out_axes=(0, 1, 1),
        devices=list(mesh.devices.flat),
    )
    return lambda params, xs, ys: mapped(jax.device_get(params), xs, ys)


def _check_mapping(mapping) -> None:
    validation.check_choice(mapping, "mapping", _MAPPINGS)


def pipedream_2bw_train(
    stage_params: Any,
    tx: optax.GradientTransformation,
    inputs: jax.Array,
    targets: jax.Array,
    *,
    mesh: Mesh,
    axis_name: str = "stage",
    stage_fn: Callable[[Any, jax.Array], jax.Array] = mlp_stage,
    loss_fn: Callable[[jax.Array, jax.Array], jax.Array] = squared_error,
    mapping: str = "shard_map",
) -> PipelineResult:
    """Trains ``S`` stages with the PipeDream-2BW schedule: no flushes, two weight versions.

    Micro-batch ``j`` (global index ``t·M + m`` of minibatch ``t``) is forwarded by stage ``s`` at
    tick ``j + s`` and backwarded at tick ``j + 2S - 1 - s``; activations move with ``ppermute``.
    All micro-batches of minibatch ``t`` use weight version ``x_{t-1}``; when stage ``s`` finishes
    the last backward of minibatch ``t`` it applies its optimizer (``tx`` on its own parameters)
    to the micro-batch mean gradient: ``x_{t+1} = x_t + U(∇f(x_{t-1}; B_t))`` with
    ``x_{-1} = x_0``. The version ``x_{t-1}`` must exist at every stage before minibatch ``t``
    starts there, which this tick model guarantees for ``M >= 2(S - 1)``. With the same minibatch
    sequence this is exactly ``delayed(tx, delay_steps=1)`` run on the sequential model, one call
    behind (the simulator's first call is the pipeline fill).

    Args:
      stage_params: pytree of leaves with a leading stage axis ``S`` (one stage per device).
      tx: the per-stage optimizer (applied to each stage's parameters separately, so global
        operations such as global-norm clipping act per stage).
      inputs: ``(K, M, rows, d)`` minibatches of micro-batches.
      targets: ``(K, M, rows, d)``.
      mesh: a mesh with axis ``axis_name`` of size ``S``.
      axis_name: the stage axis.
      stage_fn: ``(one stage's params, h) -> h`` of constant width.
      loss_fn: ``(outputs, targets) -> scalar`` on one micro-batch (the minibatch loss is the
        micro-batch mean).
      mapping: ``"shard_map"`` (default, preferred) or ``"pmap"``: the same per-stage program
        under ``jax.pmap`` over the mesh's devices, one stage per device (same numbers). pmap
        needs a 1-D mesh of this process's devices; a mesh with more axes raises.

    Returns:
      A :class:`PipelineResult`; ``steady_ticks = (2S - 1, K·M)``.

    Raises:
      TypeError: ``mesh`` is not a Mesh.
      ValueError: shapes disagree, the stage count differs from the mesh axis, or
        ``M < 2(S - 1)``.

    Examples:
      >>> import jax, jax.numpy as jnp, optax
      >>> from jaxlab.distributed import make_mesh, pipedream_2bw_train
      >>> mesh = make_mesh((2,), ("stage",))
      >>> params = {"w": 0.5 * jnp.stack([jnp.eye(3)] * 2), "b": jnp.zeros((2, 3))}
      >>> x = jax.random.normal(jax.random.key(0), (3, 2, 4, 3))
      >>> result = pipedream_2bw_train(params, optax.sgd(0.1), x, x, mesh=mesh)
      >>> result.trajectory["w"].shape, result.idle_fraction(steady_state=True)
      ((3, 2, 3, 3), 0.0)

    References:
      Narayanan et al., "Memory-Efficient Pipeline-Parallel DNN Training", ICML 2021
      (arXiv 2006.09503).
    """
    _check_mapping(mapping)
    num_stages = _check_inputs(stage_params, inputs, targets, mesh, axis_name, 1, tx)
    num_minibatches, num_microbatches = np.shape(inputs)[:2]
    if num_microbatches < 2 * (num_stages - 1):
        raise ValueError(
            f"num_microbatches = inputs.shape[1] must be >= 2(S - 1) = {2 * (num_stages - 1)} "
            f"for S = {num_stages} stages (else minibatch t would start before x_(t-1) exists), "
            f"got {num_microbatches}"
        )
    S, M, K = num_stages, int(num_microbatches), int(num_minibatches)
    total = K * M
    ticks = total + 2 * S - 1
    ring = 2 * S  # in-flight micro-batches per stage: at most 2S - 1
    backward = _stage_ops(stage_fn, loss_fn)
    stage_params, inputs, targets = _place(mesh, axis_name, stage_params, inputs, targets)
    flat_inputs = jnp.reshape(inputs, (total, *inputs.shape[2:]))
    flat_targets = jnp.reshape(targets, (total, *targets.shape[2:]))

    def per_stage(params, xs, ys):
        params = jax.tree.map(lambda x: x[0], params)
        s = jax.lax.axis_index(axis_name)
        is_last = s == S - 1
        zero_h = mark_varying(jnp.zeros_like(xs[0]), axis_name)
        carry = {
            "versions": jax.tree.map(lambda x: jnp.stack([x, x]), params),  # x_{-1}, x_0
            "opt_state": mark_varying(tx.init(params), axis_name),
            "grad": optax.tree.zeros_like(params),
            "stash": jnp.broadcast_to(jnp.expand_dims(zero_h, 0), (ring, *zero_h.shape)),
            "h": zero_h,  # activation arriving from stage s - 1
            "cot": zero_h,  # cotangent arriving from stage s + 1
        }

        def tick(carry, c):
            # Backward slot first (it may finish a minibatch and write the next version).
            jb = c - (2 * S - 1 - s)
            b_valid = (jb >= 0) & (jb < total)
            jb_c = jnp.clip(jb, 0, total - 1)
            tb = jb_c // M
            w_b = jax.tree.map(lambda v: v[tb % 2], carry["versions"])
            d_params, d_in = backward(
                w_b, carry["stash"][jb_c % ring], carry["cot"], ys[jb_c], is_last
            )
            grad = jax.tree.map(
                lambda a, g: a + jnp.where(b_valid, g / M, jnp.zeros_like(g)),
                carry["grad"],
                d_params,
            )
            finish = b_valid & (jb_c % M == M - 1)
            current = jax.tree.map(lambda v: v[(tb + 1) % 2], carry["versions"])
            updates, new_opt = tx.update(grad, carry["opt_state"], current)
            new_params = optax.apply_updates(current, updates)
            versions = jax.tree.map(
                lambda v, n: jnp.where(finish, v.at[tb % 2].set(n), v),
                carry["versions"],
                new_params,
            )
            opt_state = jax.tree.map(
                lambda n, o: jnp.where(finish, n, o), new_opt, carry["opt_state"]
            )
            grad = jax.tree.map(lambda g: jnp.where(finish, jnp.zeros_like(g), g), grad)

            # Forward slot.
            jf = c - s
            f_valid = (jf >= 0) & (jf < total)
            jf_c = jnp.clip(jf, 0, total - 1)
            w_f = jax.tree.map(lambda v: v[(jf_c // M) % 2], versions)
            h_in = jnp.where(s == 0, xs[jf_c], carry["h"])
            out = stage_fn(w_f, h_in)
            stash = jnp.where(f_valid, carry["stash"].at[jf_c % ring].set(h_in), carry["stash"])

            new_carry = {
                "versions": versions,
                "opt_state": opt_state,
                "grad": grad,
                "stash": stash,
                "h": _shift(out, axis_name, S, +1),
                "cot": _shift(d_in, axis_name, S, -1),
            }
            busy = f_valid.astype(jnp.int32) + b_valid.astype(jnp.int32)
            return new_carry, (finish, new_params, busy)

        _, (finished, snapshots, busy) = jax.lax.scan(tick, carry, jnp.arange(ticks))
        # Each stage finishes exactly K minibatches, in order: keep those snapshots.
        order = jnp.argsort(jnp.logical_not(finished), stable=True)[:K]
        trajectory = jax.tree.map(lambda x: jnp.expand_dims(x[order], 1), snapshots)
        final = jax.tree.map(lambda x: jnp.expand_dims(x[-1, 0], 0), trajectory)
        return final, trajectory, jnp.expand_dims(busy, 1)

    run = _stage_program(per_stage, mesh, axis_name, mapping)
    final, trajectory, busy = run(stage_params, flat_inputs, flat_targets)
    return PipelineResult(final, trajectory, np.asarray(busy), 2, (2 * S - 1, total))


def gpipe_train(
    stage_params: Any,
    tx: optax.GradientTransformation,
    inputs: jax.Array,
    targets: jax.Array,
    *,
    mesh: Mesh,
    axis_name: str = "stage",
    stage_fn: Callable[[Any, jax.Array], jax.Array] = mlp_stage,
    loss_fn: Callable[[jax.Array, jax.Array], jax.Array] = squared_error,
    mapping: str = "shard_map",
) -> PipelineResult:
    """Trains ``S`` stages synchronously with the GPipe schedule (a flush every minibatch).

    Per minibatch: forward ticks ``c = 0..M+S-2`` (stage ``s`` forwards micro-batch ``c - s``),
    backward ticks ``c = 0..M+S-2`` (stage ``s`` backwards micro-batch ``c - (S-1-s)``), then
    ``x_{t+1} = x_t + U(∇f(x_t; B_t))`` on every stage, ``∇f`` the micro-batch mean gradient. Of
    the ``2(M + S - 1)`` slots of a stage per minibatch, ``2(S - 1)`` are idle: the bubble
    ``(S - 1)/(M + S - 1)``. The trajectory equals plain (sequential) training with ``tx``.

    Args:
      stage_params: pytree of leaves with a leading stage axis ``S``.
      tx: the per-stage optimizer.
      inputs: ``(K, M, rows, d)``.
      targets: ``(K, M, rows, d)``.
      mesh: a mesh with axis ``axis_name`` of size ``S``.
      axis_name: the stage axis.
      stage_fn: ``(one stage's params, h) -> h`` of constant width.
      loss_fn: ``(outputs, targets) -> scalar`` on one micro-batch.
      mapping: ``"shard_map"`` (default, preferred) or ``"pmap"``: the same per-stage program
        under ``jax.pmap`` over the mesh's devices, one stage per device (same numbers). pmap
        needs a 1-D mesh of this process's devices; a mesh with more axes raises.

    Returns:
      A :class:`PipelineResult` (``steady_ticks = (0, 0)``: GPipe never runs full).

    Raises:
      TypeError: ``mesh`` is not a Mesh.
      ValueError: shapes disagree or the stage count differs from the mesh axis.

    Examples:
      >>> import jax, jax.numpy as jnp, optax
      >>> from jaxlab.distributed import gpipe_train, make_mesh
      >>> mesh = make_mesh((2,), ("stage",))
      >>> params = {"w": 0.5 * jnp.stack([jnp.eye(3)] * 2), "b": jnp.zeros((2, 3))}
      >>> x = jax.random.normal(jax.random.key(0), (2, 3, 4, 3))
      >>> result = gpipe_train(params, optax.sgd(0.1), x, x, mesh=mesh)
      >>> round(result.idle_fraction(), 4)  # (S-1)/(M+S-1) = 1/4
      0.25

    References:
      Huang et al., "GPipe: Efficient Training of Giant Neural Networks using Pipeline
      Parallelism", NeurIPS 2019 (arXiv 1811.06965).
    """
    _check_mapping(mapping)
    num_stages = _check_inputs(stage_params, inputs, targets, mesh, axis_name, 1, tx)
    S, M = num_stages, int(np.shape(inputs)[1])
    phase = M + S - 1
    backward = _stage_ops(stage_fn, loss_fn)
    stage_params, inputs, targets = _place(mesh, axis_name, stage_params, inputs, targets)

    def per_stage(params, xs_all, ys_all):
        params = jax.tree.map(lambda x: x[0], params)
        s = jax.lax.axis_index(axis_name)
        is_last = s == S - 1

        def minibatch(carry, batch):
            params, opt_state = carry
            xs, ys = batch
            zero_h = mark_varying(jnp.zeros_like(xs[0]), axis_name)

            def forward_tick(c_carry, c):
                h, stash = c_carry
                j = c - s
                valid = (j >= 0) & (j < M)
                jc = jnp.clip(j, 0, M - 1)
                h_in = jnp.where(s == 0, xs[jc], h)
                stash = jnp.where(valid, stash.at[jc].set(h_in), stash)
                out = stage_fn(params, h_in)
                return (_shift(out, axis_name, S, +1), stash), valid.astype(jnp.int32)

            stash0 = jnp.broadcast_to(jnp.expand_dims(zero_h, 0), (M, *zero_h.shape))
            (_, stash), f_busy = jax.lax.scan(forward_tick, (zero_h, stash0), jnp.arange(phase))

            def backward_tick(c_carry, c):
                cot, grad = c_carry
                j = c - (S - 1 - s)
                valid = (j >= 0) & (j < M)
                jc = jnp.clip(j, 0, M - 1)
                d_params, d_in = backward(params, stash[jc], cot, ys[jc], is_last)
                grad = jax.tree.map(
                    lambda a, g: a + jnp.where(valid, g / M, jnp.zeros_like(g)), grad, d_params
                )
                return (_shift(d_in, axis_name, S, -1), grad), valid.astype(jnp.int32)

            grad0 = optax.tree.zeros_like(params)
            (_, grad), b_busy = jax.lax.scan(backward_tick, (zero_h, grad0), jnp.arange(phase))
            updates, opt_state = tx.update(grad, opt_state, params)
            params = optax.apply_updates(params, updates)
            busy = jnp.concatenate([f_busy, b_busy])  # one slot per tick in each phase
            return (params, opt_state), (params, busy)

        (final, _), (trajectory, busy) = jax.lax.scan(
            minibatch, (params, mark_varying(tx.init(params), axis_name)), (xs_all, ys_all)
        )
        busy = jnp.reshape(busy, (-1,))  # forward ticks then backward ticks, per minibatch
        return (
            jax.tree.map(lambda x: jnp.expand_dims(x, 0), final),
            jax.tree.map(lambda x: jnp.expand_dims(x, 1), trajectory),
            jnp.expand_dims(busy, 1),
        )

    run = _stage_program(per_stage, mesh, axis_name, mapping)
    final, trajectory, busy = run(stage_params, inputs, targets)
    return PipelineResult(final, trajectory, np.asarray(busy), 1, (0, 0))


# --------------------------------------------------------------------------------------------
# Discrete-event model of the schedules.


@dataclasses.dataclass(frozen=True)
class Schedule:
    """A simulated pipeline schedule (see :func:`pipeline_schedule`).

    Attributes:
      events: ``(stage, minibatch, microbatch, "F" | "B", start, end)`` tuples, by start time.
      makespan: time until the last event ends.
      bubble_fraction: idle stage time over ``num_stages · makespan``.
      weight_versions: weight versions a stage holds (1: synchronous; 2: 2BW).
      peak_activations: per stage, the most micro-batches forwarded but not yet backwarded.
      staleness: per stage, updates between the weights a gradient used and those it updates.

    Examples:
      >>> schedule = pipeline_schedule("1f1b", 2, 2)
      >>> schedule.makespan, schedule.peak_activations
      (9.0, (2, 1))
    """

    events: tuple[tuple[int, int, int, str, float, float], ...]
    makespan: float
    bubble_fraction: float
    weight_versions: int
    peak_activations: tuple[int, ...]
    staleness: tuple[int, ...]


def _stage_order(kind, stage, num_stages, num_microbatches, num_minibatches):
    """The ordered (minibatch, microbatch, F/B) operations of one stage."""
    if kind == "gpipe":
        ops = []
        for t in range(num_minibatches):
            ops += [(t, m, "F") for m in range(num_microbatches)]
            ops += [(t, m, "B") for m in range(num_microbatches)]
        return ops
    # 1F1B: warm up with p - s - 1 forwards, alternate, drain. 1f1b flushes every minibatch;
    # 2bw runs the K·m micro-batches as one stream.
    streams = (
        [[(t, m) for m in range(num_microbatches)] for t in range(num_minibatches)]
        if kind == "1f1b"
        else [[(t, m) for t in range(num_minibatches) for m in range(num_microbatches)]]
    )
    ops = []
    for stream in streams:
        warm = min(num_stages - stage - 1, len(stream))
        ops += [(*stream[i], "F") for i in range(warm)]
        for i in range(len(stream) - warm):
            ops += [(*stream[warm + i], "F"), (*stream[i], "B")]
        ops += [(*stream[i], "B") for i in range(len(stream) - warm, len(stream))]
    return ops


def pipeline_schedule(
    kind: Literal["gpipe", "1f1b", "2bw"],
    num_stages: int,
    num_microbatches: int,
    num_minibatches: int = 1,
    forward_time: float = 1.0,
    backward_time: float = 2.0,
) -> Schedule:
    """Simulates a pipeline schedule as a discrete-event list schedule; returns its statistics.

    Each stage runs its operations in the schedule's fixed order; an operation starts when its
    stage is free and its dependency is done (``F(s, j)`` after ``F(s-1, j)``; ``B(s, j)`` after
    ``B(s+1, j)``, and ``B(S-1, j)`` after ``F(S-1, j)``). Orders: GPipe (all forwards, then all
    backwards, per minibatch), 1F1B with a flush per minibatch (PipeDream-Flush; warm-up of
    ``p - s - 1`` forwards), 2BW (the same 1F1B order over all ``K·m`` micro-batches, no flush).
    With uniform times, GPipe and 1F1B give makespan ``K(m + p - 1)(t_f + t_b)`` and bubble
    ``(p - 1)/(m + p - 1)``; 2BW gives ``(K m + p - 1)(t_f + t_b)`` and ``(p - 1)/(K m + p - 1)``.

    Args:
      kind: ``"gpipe"``, ``"1f1b"`` or ``"2bw"``.
      num_stages: ``p >= 1``.
      num_microbatches: ``m >= 1`` per minibatch.
      num_minibatches: ``K >= 1``.
      forward_time: ``t_f > 0`` per stage and micro-batch.
      backward_time: ``t_b > 0``.

    Returns:
      A :class:`Schedule`.

    Raises:
      ValueError: an unknown ``kind``, a count < 1 or a time <= 0.

    Examples:
      >>> round(pipeline_schedule("gpipe", 4, 8).bubble_fraction, 4)  # 3/11
      0.2727
      >>> s = pipeline_schedule("2bw", 4, 8, num_minibatches=100)
      >>> round(s.bubble_fraction, 4), s.weight_versions, s.staleness
      (0.0037, 2, (1, 1, 1, 1))

    References:
      Narayanan et al., PipeDream-2BW, ICML 2021 (arXiv 2006.09503); Huang et al., GPipe
      (arXiv 1811.06965).
    """
    validation.check_choice(kind, "kind", ("gpipe", "1f1b", "2bw"))
    for name, value in (
        ("num_stages", num_stages),
        ("num_microbatches", num_microbatches),
        ("num_minibatches", num_minibatches),
    ):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    for name, value in (("forward_time", forward_time), ("backward_time", backward_time)):
        validation.check_positive(value, name)
    p = int(num_stages)
    orders = [_stage_order(kind, s, p, num_microbatches, num_minibatches) for s in range(p)]
    done: dict[tuple[int, int, int, str], float] = {}
    position, free = [0] * p, [0.0] * p
    events = []
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for s in range(p):
            while position[s] < len(orders[s]):
                t, m, op = orders[s][position[s]]
                if op == "F":
                    dependency = (s - 1, t, m, "F") if s > 0 else None
                else:
                    dependency = (s + 1, t, m, "B") if s < p - 1 else (s, t, m, "F")
                if dependency is not None and dependency not in done:
                    break
                start = max(free[s], done[dependency] if dependency is not None else 0.0)
                end = start + (forward_time if op == "F" else backward_time)
                done[(s, t, m, op)] = end
                free[s] = end
                events.append((s, t, m, op, start, end))
                position[s] += 1
                remaining -= 1
                progressed = True
        if not progressed:  # cannot happen for these orders; guards against an infinite loop
            raise RuntimeError("pipeline_schedule deadlocked")
    makespan = max(e[5] for e in events)
    busy = sum(e[5] - e[4] for e in events)
    peaks = []
    for s in range(p):
        live = peak = 0
        for e in sorted((e for e in events if e[0] == s), key=lambda e: e[4]):
            live += 1 if e[3] == "F" else -1
            peak = max(peak, live)
        peaks.append(peak)
    asynchronous = kind == "2bw"
    return Schedule(
        events=tuple(sorted(events, key=lambda e: (e[4], e[0]))),
        makespan=float(makespan),
        bubble_fraction=float(1.0 - busy / (p * makespan)),
        weight_versions=2 if asynchronous else 1,
        peak_activations=tuple(peaks),
        staleness=tuple([1 if asynchronous else 0] * p),
    )
