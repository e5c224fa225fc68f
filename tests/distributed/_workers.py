"""Module-level functions run by ``jaxlab.distributed.launch`` in the launch tests.

``spawn`` children import this module by name to unpickle them, so it must stay importable on
its own and do no JAX work at import time (the children configure JAX and call
``jax.distributed.initialize`` before unpickling the function).
"""

import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jaxlab.distributed import (
    global_to_process_local,
    process_local_to_global,
    run_sharded,
    worker_mesh,
)

AXIS = "workers"


def psum_of_process_ranks():
    """Each process contributes ``process_index + 1``; returns the psum seen by this process."""
    mesh = worker_mesh()
    local = np.array([jax.process_index() + 1.0], dtype=np.float32)
    x = jax.make_array_from_process_local_data(NamedSharding(mesh, P(AXIS)), local)
    total = jax.jit(
        jax.shard_map(
            lambda v: jax.lax.psum(v, AXIS), mesh=mesh, in_specs=P(AXIS), out_specs=P(AXIS)
        )
    )(x)
    return {
        "process_index": jax.process_index(),
        "process_count": jax.process_count(),
        "device_count": jax.device_count(),
        "local_device_count": jax.local_device_count(),
        "platform": jax.devices()[0].platform,
        "psum": np.asarray(total.addressable_data(0)),
        "default_float": str(jnp.asarray(1.0).dtype),
        "rank_promotion": jax.config.jax_numpy_rank_promotion,
    }


def sgd_step(params, grad):
    """One worker's data-parallel SGD step: average the gradients over the workers, then step."""
    grad = jax.lax.pmean(grad, AXIS)
    tx = optax.sgd(0.1, momentum=0.9)
    state = tx.init(params)
    for _ in range(3):  # a few steps so momentum matters
        updates, state = tx.update(grad, state, params)
        params = optax.apply_updates(params, updates)
    rank = jax.lax.axis_index(AXIS)
    return params, rank


def worker_gradients(num_workers):
    """Deterministic per-worker parameters and gradients, shape (num_workers, 3)."""
    rows = np.arange(num_workers, dtype=np.float32)[:, None]
    params = np.ones((num_workers, 3), np.float32) + rows
    grads = (rows + 1.0) * np.array([[1.0, -2.0, 0.5]], np.float32)
    return params, grads


def sgd_worker():
    """The documented pattern: each process holds its own workers' rows of a worker mesh."""
    mesh = worker_mesh()
    params, grads = worker_gradients(mesh.shape[AXIS])
    per_process = jax.local_device_count()
    mine = slice(jax.process_index() * per_process, (jax.process_index() + 1) * per_process)
    local_params = process_local_to_global(params[mine], mesh, AXIS)
    local_grads = process_local_to_global(grads[mine], mesh, AXIS)
    out = run_sharded(sgd_step, mesh, AXIS, local_params, local_grads)
    return global_to_process_local(out)


def documented_sgd_step(params, grad):
    """The ``launch`` docstring's two-process example, as written there."""
    grad = jax.lax.pmean(grad, "workers")  # averaged over both processes
    tx = optax.sgd(0.1)
    updates, _ = tx.update(grad, tx.init(params), params)
    return optax.apply_updates(params, updates)


def documented_worker():
    """The ``launch`` docstring's two-process example, as written there."""
    mesh = worker_mesh()  # 2 devices, one per process
    rank = jax.process_index()
    params = process_local_to_global(np.ones((1, 3)), mesh, "workers")
    grad = process_local_to_global(np.full((1, 3), rank + 1.0), mesh, "workers")
    return global_to_process_local(run_sharded(documented_sgd_step, mesh, "workers", params, grad))


def raise_in_process_one():
    if jax.process_index() == 1:
        raise ValueError("boom from process 1")
    return jax.process_index()


def exit_in_process_one():
    """Process 1 dies; process 0 then waits in a collective that can never complete."""
    if jax.process_index() == 1:
        os._exit(3)
    return psum_of_process_ranks()


def sleep_forever():
    time.sleep(3600)
