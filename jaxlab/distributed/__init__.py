"""Meshes, multi-process launch and collectives.

One per-worker function, three scales: :func:`run_vmapped` (one device, ``jax.vmap``),
:func:`run_sharded` (one worker per device of a mesh, ``jax.shard_map``) and, inside
:func:`launch`, the same :func:`run_sharded` over a mesh spanning several processes.
"""

from jaxlab.distributed._launch import launch
from jaxlab.distributed._mesh import (
    global_to_process_local,
    make_mesh,
    process_local_to_global,
    run_sharded,
    run_vmapped,
    worker_mesh,
)

__all__ = [
    "global_to_process_local",
    "launch",
    "make_mesh",
    "process_local_to_global",
    "run_sharded",
    "run_vmapped",
    "worker_mesh",
]
