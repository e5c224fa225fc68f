"""Device meshes and one per-worker function run three ways: vmap, pmap, shard_map on a mesh.

A per-worker function sees one worker's arrays (no worker axis) and talks to the other workers
only through collectives on a named axis (``jax.lax.pmean``, ``psum``, ``all_gather``,
``axis_index``). :func:`run_vmapped` runs it for every worker on one device with
``jax.vmap(..., axis_name=...)``; :func:`run_pmapped` with one worker per local device with
``jax.pmap(..., axis_name=...)``; :func:`run_sharded` with one worker per device of a mesh with
``jax.shard_map``, and, when the mesh spans several processes (see
:func:`jaxlab.distributed.launch`), with one worker per device across hosts. The numbers agree.
Prefer shard_map: pmap is in maintenance mode in JAX, but works, and the same per-worker code
runs under it unchanged.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxlab._src import validation

__all__ = [
    "make_mesh",
    "worker_mesh",
    "run_vmapped",
    "run_pmapped",
    "run_sharded",
    "process_local_to_global",
    "global_to_process_local",
]


def make_mesh(
    axis_shapes: Sequence[int],
    axis_names: Sequence[str],
    *,
    devices: Sequence[jax.Device] | None = None,
    axis_types: tuple[jax.sharding.AxisType, ...] | None = None,
) -> Mesh:
    """Builds a named device mesh over the first ``prod(axis_shapes)`` devices, checking inputs.

    A thin, validating wrapper of ``jax.make_mesh``: the mesh has
    ``n = axis_shapes[0] * ... * axis_shapes[-1]`` devices, taken in order from ``devices``
    (default ``jax.devices()``, i.e. all devices of all processes), so ``n`` may be smaller than
    the number of devices but never larger.

    Args:
      axis_shapes: size of each mesh axis, positive ints.
      axis_names: one distinct, non-empty string name per axis.
      devices: devices to build the mesh from; default ``jax.devices()``.
      axis_types: optional ``jax.sharding.AxisType`` per axis, passed to ``jax.make_mesh``
        (default: JAX's default, ``Explicit``).

    Returns:
      A ``jax.sharding.Mesh`` with ``mesh.shape == dict(zip(axis_names, axis_shapes))``.

    Raises:
      TypeError: ``axis_shapes`` is not a sequence of ints or ``axis_names`` not a sequence of
        strings.
      ValueError: a size is < 1, names repeat or are empty, the two lengths differ, or the mesh
        needs more devices than are available.

    Examples:
      >>> import jax
      >>> from jaxlab.distributed import make_mesh
      >>> mesh = make_mesh((1, 1), ("data", "model"))
      >>> dict(mesh.shape)
      {'data': 1, 'model': 1}
      >>> make_mesh((jax.device_count() + 1,), ("data",))  # doctest: +ELLIPSIS
      Traceback (most recent call last):
      ...
      ValueError: axis_shapes ... needs ... devices but only ... are available...

    References:
      JAX documentation, "Distributed arrays and automatic parallelization" (``jax.make_mesh``).
    """
    if isinstance(axis_shapes, str | bytes) or not isinstance(axis_shapes, Sequence):
        raise TypeError(f"axis_shapes must be a sequence of ints, got {axis_shapes!r}")
    for i, s in enumerate(axis_shapes):
        validation.check_int(s, f"axis_shapes[{i}]", minimum=1)
    if len(axis_shapes) == 0:
        raise ValueError("axis_shapes must have at least one axis, got ()")
    if isinstance(axis_names, str) or not isinstance(axis_names, Sequence):
        raise TypeError(
            f"axis_names must be a sequence of strings (e.g. ('workers',)), got {axis_names!r}"
        )
    if not all(isinstance(n, str) and n for n in axis_names):
        raise TypeError(f"axis_names must be non-empty strings, got {tuple(axis_names)!r}")
    if len(set(axis_names)) != len(axis_names):
        raise ValueError(f"axis_names must be distinct, got {tuple(axis_names)!r}")
    if len(axis_names) != len(axis_shapes):
        raise ValueError(
            f"axis_names has {len(axis_names)} names but axis_shapes has {len(axis_shapes)} axes"
        )
    devices = jax.devices() if devices is None else list(devices)
    if len(devices) == 0:
        raise ValueError("devices must not be empty")
    size = math.prod(int(s) for s in axis_shapes)
    if size > len(devices):
        raise ValueError(
            f"axis_shapes {tuple(axis_shapes)} needs {size} devices but only {len(devices)} are "
            "available (devices)"
        )
    if axis_types is not None and len(axis_types) != len(axis_names):
        raise ValueError(
            f"axis_types has {len(axis_types)} entries but axis_names has {len(axis_names)}"
        )
    return jax.make_mesh(
        tuple(int(s) for s in axis_shapes),
        tuple(axis_names),
        axis_types,
        devices=devices[:size],
    )


def worker_mesh(num_workers: int | None = None, axis_name: str = "workers") -> Mesh:
    """Builds a 1-D mesh with one worker per device over the first ``num_workers`` devices.

    Device ``i`` of the mesh (in ``jax.devices()`` order, all processes included) hosts worker
    ``i``, so ``jax.lax.axis_index(axis_name)`` is the worker's rank.

    Args:
      num_workers: number of workers, in ``[1, jax.device_count()]``; default all devices.
      axis_name: the mesh axis name the workers' collectives use.

    Returns:
      A ``jax.sharding.Mesh`` with ``mesh.shape == {axis_name: num_workers}``.

    Raises:
      TypeError: ``num_workers`` is not an int or ``axis_name`` not a string.
      ValueError: ``num_workers`` is outside ``[1, jax.device_count()]``.

    Examples:
      >>> import jax
      >>> from jaxlab.distributed import worker_mesh
      >>> mesh = worker_mesh()
      >>> mesh.shape["workers"] == jax.device_count()
      True
      >>> worker_mesh(1, axis_name="clients").axis_names
      ('clients',)

    References:
      JAX documentation, "Manual parallelism with shard_map".
    """
    available = jax.device_count()
    if num_workers is None:
        num_workers = available
    num_workers = validation.check_int(num_workers, "num_workers", minimum=1, maximum=available)
    if not isinstance(axis_name, str) or not axis_name:
        raise TypeError(f"axis_name must be a non-empty string, got {axis_name!r}")
    return make_mesh((int(num_workers),), (axis_name,))


def _check_worker_args(args: tuple[Any, ...], num_workers: int | None) -> int:
    """Checks every leaf of ``args`` has the same leading (worker) size; returns it."""
    leaves = jax.tree.leaves(args)
    if not leaves:
        raise ValueError("args must contain at least one array with a leading worker axis")
    sizes = set()
    for leaf in leaves:
        shape = np.shape(leaf)
        if len(shape) == 0:
            raise ValueError(
                "every leaf of args needs a leading worker axis, got a scalar leaf "
                f"{type(leaf).__name__}"
            )
        sizes.add(shape[0])
    if len(sizes) != 1:
        raise ValueError(f"args leaves have different leading (worker) sizes {sorted(sizes)}")
    (size,) = sizes
    if num_workers is not None and size != num_workers:
        raise ValueError(
            f"args have leading (worker) size {size} but the mesh axis has {num_workers} devices; "
            "run_sharded places exactly one worker on each device"
        )
    return size


def run_vmapped(fn: Callable[..., Any], axis_name: str, *args: Any) -> Any:
    """Runs a per-worker function for every worker on one device: ``vmap(fn, axis_name)(*args)``.

    Every leaf of ``args`` carries the workers on its leading axis; ``fn`` sees one worker's
    slice and may use collectives (``pmean``, ``psum``, ``all_gather``, ``axis_index``) over
    ``axis_name``. Gives the same numbers as :func:`run_sharded` on a mesh with one device per
    worker.

    Args:
      fn: the per-worker function, ``fn(*worker_args) -> pytree``.
      axis_name: the collective axis name ``fn`` uses.
      *args: pytrees whose leaves all have the same leading size (the number of workers).

    Returns:
      ``fn``'s outputs stacked along a new leading worker axis.

    Raises:
      TypeError: ``fn`` is not callable or ``axis_name`` is not a string.
      ValueError: no array argument, or leaves with different leading sizes.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.distributed import run_vmapped
      >>> def centre(x):
      ...     return x - jax.lax.pmean(x, "workers")
      >>> run_vmapped(centre, "workers", jnp.array([1.0, 2.0, 6.0]))
      Array([-2., -1.,  3.], dtype=float32)

    References:
      JAX documentation, ``jax.vmap`` with ``axis_name`` (collectives under vmap).
    """
    validation.check_callable(fn, "fn")
    if not isinstance(axis_name, str) or not axis_name:
        raise TypeError(f"axis_name must be a non-empty string, got {axis_name!r}")
    _check_worker_args(args, None)
    with _unbound_axis_hint(axis_name):
        return jax.vmap(fn, axis_name=axis_name)(*args)


def run_pmapped(
    fn: Callable[..., Any],
    axis_name: str,
    *args: Any,
    devices: Sequence[jax.Device] | None = None,
) -> Any:
    """Runs a per-worker function with one worker per local device: ``pmap(fn, axis_name)``.

    The same contract as :func:`run_vmapped` (every leaf of ``args`` carries the workers on its
    leading axis; ``fn`` sees one worker's slice and uses collectives over ``axis_name``), with
    ``jax.pmap`` placing worker ``i`` on device ``i``. pmap maps over the devices of this
    process only: across processes use :func:`run_sharded` over a mesh.

    Args:
      fn: the per-worker function, ``fn(*worker_args) -> pytree``.
      axis_name: the collective axis name ``fn`` uses.
      *args: pytrees whose leaves all have leading size ``len(devices)``.
      devices: the devices to map over (default: the first ``num_workers`` local devices).

    Returns:
      ``fn``'s outputs stacked along a leading worker axis (one shard per device).

    Raises:
      TypeError: ``fn`` is not callable or ``axis_name`` is not a string.
      ValueError: leaves with different leading sizes, or more workers than local devices.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.distributed import run_pmapped, run_vmapped
      >>> def centre(x):
      ...     return x - jax.lax.pmean(x, "workers")
      >>> x = jnp.array([1.0, 2.0, 6.0, 7.0])
      >>> bool(jnp.allclose(run_pmapped(centre, "workers", x), run_vmapped(centre, "workers", x)))
      True

    References:
      JAX documentation, ``jax.pmap`` (collectives over a named device axis).
    """
    validation.check_callable(fn, "fn")
    if not isinstance(axis_name, str) or not axis_name:
        raise TypeError(f"axis_name must be a non-empty string, got {axis_name!r}")
    size = _check_worker_args(args, None)
    if devices is None:
        local = jax.local_devices()
        if size > len(local):
            raise ValueError(
                f"args have leading (worker) size {size} but this process has {len(local)} "
                "local devices; pmap places one worker per local device (use run_vmapped, or "
                "run_sharded over a mesh spanning several processes)"
            )
        devices = local[:size]
    elif len(devices) != size:
        raise ValueError(f"devices has {len(devices)} entries but args have {size} workers")
    with _unbound_axis_hint(axis_name):
        return jax.pmap(fn, axis_name=axis_name, devices=list(devices))(*args)


@contextlib.contextmanager
def _unbound_axis_hint(axis_name: str):
    """Turns JAX's bare ``NameError`` for a collective over another axis into a clear error."""
    try:
        yield
    except NameError as err:
        if "axis name" not in str(err):
            raise
        raise ValueError(
            f"fn uses a collective over an axis that is not bound ({err}); the workers' axis is "
            f"axis_name={axis_name!r}: use that name in fn's collectives (pmean, psum, "
            "axis_index), or pass the name fn uses as axis_name"
        ) from err


@functools.lru_cache(maxsize=128)
def _sharded_callable(fn: Callable[..., Any], mesh: Mesh, axis_name: str) -> Callable[..., Any]:
    """A jitted shard_map of ``fn`` with one worker per device (cached so loops do not retrace)."""
    spec = P(axis_name)
    sharding = NamedSharding(mesh, spec)

    def per_device(*args):
        # Each device holds a leading slice of size 1: drop it so fn sees the shapes vmap gives.
        out = fn(*jax.tree.map(lambda x: x[0], args))
        return jax.tree.map(lambda y: jnp.expand_dims(y, 0), out)

    def run(*args):
        # Place the worker axis on the mesh axis (a no-op for arrays already sharded that way);
        # needed because shard_map on an Explicit-typed mesh does not reshard its inputs.
        args = jax.tree.map(lambda x: jax.device_put(x, sharding), args)
        mapped = jax.shard_map(
            per_device,
            mesh=mesh,
            in_specs=tuple(spec for _ in args),
            out_specs=spec,
        )
        return mapped(*args)

    return jax.jit(run)


def run_sharded(fn: Callable[..., Any], mesh: Mesh, axis_name: str, *args: Any) -> Any:
    """Runs a per-worker function with one worker per device of ``mesh`` via ``jax.shard_map``.

    Computes ``shard_map(fn', mesh, in_specs=P(axis_name), out_specs=P(axis_name))(*args)``,
    where ``fn'`` drops the size-1 leading slice each device holds, applies ``fn`` and restores
    the slice, so ``fn`` sees exactly the per-worker shapes :func:`run_vmapped` gives it and
    returns the same numbers. The call is jitted and cached on ``(fn, mesh, axis_name)``, so
    calling it in a loop with the same ``fn`` compiles once. When ``mesh`` spans several
    processes, pass global arrays (see :func:`process_local_to_global`).

    Args:
      fn: the per-worker function, ``fn(*worker_args) -> pytree``; collectives over
        ``axis_name``.
      mesh: a mesh with an axis ``axis_name``; other axes (if any) replicate the workers.
      axis_name: the mesh axis holding the workers, one per device.
      *args: pytrees whose leaves all have leading size ``mesh.shape[axis_name]``.

    Returns:
      ``fn``'s outputs stacked along a leading worker axis, sharded over ``axis_name``.

    Raises:
      TypeError: ``fn`` is not callable or ``mesh`` not a ``jax.sharding.Mesh``.
      ValueError: ``axis_name`` is not an axis of ``mesh``, or the leaves' leading size is not
        ``mesh.shape[axis_name]``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.distributed import run_sharded, run_vmapped, worker_mesh
      >>> def rank_weighted_sum(x):
      ...     return jax.lax.psum(x * (jax.lax.axis_index("workers") + 1), "workers")
      >>> mesh = worker_mesh()
      >>> x = jnp.arange(float(mesh.shape["workers"]))
      >>> on_mesh = run_sharded(rank_weighted_sum, mesh, "workers", x)
      >>> on_one_device = run_vmapped(rank_weighted_sum, "workers", x)
      >>> bool(jnp.array_equal(on_mesh, on_one_device))
      True

    References:
      JAX documentation, "Manual parallelism with shard_map".
    """
    validation.check_callable(fn, "fn")
    _check_worker_args(args, validation.check_mesh_axis(mesh, axis_name))
    try:
        runner = _sharded_callable(fn, mesh, axis_name)
    except TypeError:  # an unhashable callable: build it uncached
        runner = _sharded_callable.__wrapped__(fn, mesh, axis_name)
    try:
        return runner(*args)
    except (NameError, AssertionError):
        # shard_map reports a collective over an axis it does not map with a bare NameError or
        # an internal AssertionError; re-trace under vmap (cheap, abstract) to tell which.
        with _unbound_axis_hint(axis_name):
            jax.eval_shape(
                jax.vmap(fn, axis_name=axis_name),
                *jax.tree.map(
                    lambda x: jax.ShapeDtypeStruct(np.shape(x), jnp.result_type(x)), args
                ),
            )
        raise


def process_local_to_global(tree: Any, mesh: Mesh, axis_name: str) -> Any:
    """Assembles each process's worker rows into global arrays sharded over ``axis_name``.

    Leaf ``x`` of this process has shape ``(k, ...)``, ``k`` being this process's number of
    devices on the mesh axis; the result has shape ``(mesh.shape[axis_name], ...)`` with this
    process's rows on its own devices, in device order
    (``jax.make_array_from_process_local_data`` with ``NamedSharding(mesh, P(axis_name))``).
    With one process this just places the full array on the mesh.

    Args:
      tree: pytree of this process's rows (numpy or JAX arrays).
      mesh: the (possibly multi-process) mesh.
      axis_name: the mesh axis the leading axis is split over.

    Returns:
      The same pytree of global ``jax.Array`` leaves.

    Raises:
      ValueError: ``axis_name`` is not an axis of ``mesh``.

    Examples:
      >>> import numpy as np
      >>> from jaxlab.distributed import process_local_to_global, worker_mesh
      >>> mesh = worker_mesh(1)
      >>> x = process_local_to_global({"w": np.ones((1, 3))}, mesh, "workers")
      >>> x["w"].shape
      (1, 3)

    References:
      JAX documentation, "Introduction to multi-controller JAX".
    """
    validation.check_mesh_axis(mesh, axis_name)
    sharding = NamedSharding(mesh, P(axis_name))
    return jax.tree.map(
        lambda x: jax.make_array_from_process_local_data(sharding, np.asarray(x)), tree
    )


def _local_rows(array: Any) -> np.ndarray:
    if not isinstance(array, jax.Array):
        return np.asarray(array)
    blocks = {}
    for shard in array.addressable_shards:
        index = shard.index
        trailing = zip(index[1:], array.shape[1:], strict=True)
        if any(s != slice(None) and s != slice(0, n) for s, n in trailing):
            raise ValueError(
                "global_to_process_local needs the arrays of tree split only along their leading "
                f"axis, got sharding {array.sharding}"
            )
        start = 0 if len(index) == 0 or index[0].start is None else index[0].start
        blocks.setdefault(start, shard.data)
    if array.ndim == 0:
        return np.asarray(next(iter(blocks.values())))
    return np.concatenate([np.asarray(blocks[s]) for s in sorted(blocks)], axis=0)


def global_to_process_local(tree: Any) -> Any:
    """Returns, as numpy, the rows of each global array held by this process's devices.

    The inverse of :func:`process_local_to_global`: for a leaf sharded along its leading axis,
    concatenates this process's distinct shards in order; a replicated leaf comes back whole.
    Use it on :func:`run_sharded` outputs inside a :func:`jaxlab.distributed.launch` child to
    return picklable per-process results.

    Args:
      tree: pytree of ``jax.Array`` leaves (others are converted with ``np.asarray``).

    Returns:
      The same pytree of ``numpy.ndarray`` leaves.

    Raises:
      ValueError: a leaf is split along an axis other than its leading one.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxlab.distributed import global_to_process_local
      >>> global_to_process_local({"w": jnp.arange(3.0)})
      {'w': array([0., 1., 2.], dtype=float32)}

    References:
      JAX documentation, "Introduction to multi-controller JAX".
    """
    return jax.tree.map(_local_rows, tree)
