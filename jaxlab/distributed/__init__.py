"""Meshes, multi-process launch and collectives.

One per-worker function, four ways: :func:`run_vmapped` (one device, ``jax.vmap``),
:func:`run_pmapped` (one worker per local device, ``jax.pmap``), :func:`run_sharded` (one worker
per device of a mesh, ``jax.shard_map``; preferred) and, inside :func:`launch`, the same
:func:`run_sharded` over a mesh spanning several processes.
"""

from jaxlab.distributed._graphs import (
    check_column_stochastic,
    check_jointly_strongly_connected,
    check_row_stochastic,
    directed_ring,
    exponential_graph,
    metropolis_weights,
    pull_push_weights,
    pull_weights,
    push_weights,
    sample_graph_sequence,
    time_varying_digraph,
)
from jaxlab.distributed._launch import launch
from jaxlab.distributed._mesh import (
    global_to_process_local,
    make_mesh,
    process_local_to_global,
    run_pmapped,
    run_sharded,
    run_vmapped,
    worker_mesh,
)
from jaxlab.distributed._pipeline import (
    PipelineResult,
    Schedule,
    gpipe_train,
    mlp_stage,
    pipedream_2bw_train,
    pipeline_schedule,
    sequential_loss,
    squared_error,
)

__all__ = [
    # time-varying directed graphs and Push-Pull mixing matrices
    "check_column_stochastic",
    "check_jointly_strongly_connected",
    "check_row_stochastic",
    "directed_ring",
    "exponential_graph",
    "metropolis_weights",
    "pull_push_weights",
    "pull_weights",
    "push_weights",
    "sample_graph_sequence",
    "time_varying_digraph",
    # pipeline-parallel executors and schedules (jaxlab/distributed/_pipeline.py)
    "PipelineResult",
    "Schedule",
    "gpipe_train",
    "mlp_stage",
    "pipedream_2bw_train",
    "pipeline_schedule",
    "sequential_loss",
    "squared_error",
    # meshes and launch
    "global_to_process_local",
    "launch",
    "make_mesh",
    "process_local_to_global",
    "run_pmapped",
    "run_sharded",
    "run_vmapped",
    "worker_mesh",
]
