"""Bad-input probes for jaxlab.distributed.

``launch`` starts processes: its probes fail in the argument checks, before any process starts.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxlab import distributed as d
from tests.bad_input import no_probes, probes, raises

_D = "jaxlab.distributed."
_NAN = float("nan")


def _ring(n: int = 3):
    return d.directed_ring(n)


def _mesh(name: str = "stage", size: int = 2):
    return d.make_mesh((size,), (name,))


def _stages(num_stages: int = 2, width: int = 3, dtype=jnp.float32):
    return {
        "w": jnp.stack([jnp.eye(width, dtype=dtype)] * num_stages),
        "b": jnp.zeros((num_stages, width), dtype),
    }


def _batches(shape=(1, 2, 4, 3)):
    return jnp.ones(shape)


def _mean_over(name: str):
    return lambda x: jax.lax.pmean(x, name)


no_probes(_D + "PipelineResult", "a result NamedTuple returned by the executors")
no_probes(_D + "Schedule", "a frozen result dataclass returned by pipeline_schedule")

probes(
    _D + "check_row_stochastic",
    raises("atol", lambda: d.check_row_stochastic(2 * jnp.eye(3), atol=_NAN), ValueError),
    raises("atol", lambda: d.check_row_stochastic(2 * jnp.eye(3), atol=-1.0), ValueError),
    raises("atol", lambda: d.check_row_stochastic(jnp.eye(3), atol="0.1"), TypeError),
    raises("matrix", lambda: d.check_row_stochastic(2 * jnp.eye(3)), ValueError),
    raises("matrix", lambda: d.check_row_stochastic(jnp.full((2, 2), _NAN)), ValueError),
    raises("matrix", lambda: d.check_row_stochastic(None), TypeError),
    raises("matrix", lambda: d.check_row_stochastic(jnp.ones(3)), ValueError),
)
probes(
    _D + "check_column_stochastic",
    raises("atol", lambda: d.check_column_stochastic(2 * jnp.eye(3), atol=_NAN), ValueError),
    raises("atol", lambda: d.check_column_stochastic(2 * jnp.eye(3), atol=-1e-3), ValueError),
    raises("B", lambda: d.check_column_stochastic(2 * jnp.eye(3), name="B"), ValueError),
    raises("matrix", lambda: d.check_column_stochastic("eye"), TypeError),
    raises("matrix", lambda: d.check_column_stochastic(jnp.eye(3, dtype=jnp.int32)), TypeError),
)
probes(
    _D + "check_jointly_strongly_connected",
    raises("window", lambda: d.check_jointly_strongly_connected(_ring()[None], 0)),
    raises("window", lambda: d.check_jointly_strongly_connected(_ring()[None], 2)),
    raises("adjacencies", lambda: d.check_jointly_strongly_connected(_ring(), 1)),
    raises("adjacencies", lambda: d.check_jointly_strongly_connected(np.ones((1, 3, 3)), 1)),
    raises("adjacencies", lambda: d.check_jointly_strongly_connected(None, 1), TypeError),
)
probes(
    _D + "directed_ring",
    raises("num_agents", lambda: d.directed_ring(0), ValueError),
    raises("num_agents", lambda: d.directed_ring(2.5), TypeError),
    raises("num_agents", lambda: d.directed_ring("3"), TypeError),
    raises("num_agents", lambda: d.directed_ring(True), TypeError),
)
probes(
    _D + "exponential_graph",
    raises("num_agents", lambda: d.exponential_graph(-1), ValueError),
    raises("num_agents", lambda: d.exponential_graph(None), TypeError),
    raises("step", lambda: d.exponential_graph(4, step=1.5), TypeError),
    raises("step", lambda: d.exponential_graph(4, step="1"), TypeError),
)
probes(
    _D + "time_varying_digraph",
    raises("rng_key", lambda: d.time_varying_digraph(None, 4), TypeError),
    raises(
        "extra_edge_prob", lambda: d.time_varying_digraph(jax.random.key(0), 4, extra_edge_prob=1.5)
    ),
    raises(
        "extra_edge_prob",
        lambda: d.time_varying_digraph(jax.random.key(0), 4, extra_edge_prob=_NAN),
    ),
    raises("window", lambda: d.time_varying_digraph(jax.random.key(0), 4, window=0)),
    raises("step", lambda: d.time_varying_digraph(jax.random.key(0), 4, step=0.5), TypeError),
)
for _name in ("pull_weights", "push_weights", "pull_push_weights", "metropolis_weights"):
    _fn = getattr(d, _name)
    probes(
        _D + _name,
        raises("adjacency", lambda fn=_fn: fn(jnp.ones((3, 3), jnp.int32)), TypeError),
        raises("adjacency", lambda fn=_fn: fn(jnp.ones((3, 2), bool)), ValueError),
        raises("adjacency", lambda fn=_fn: fn(jnp.zeros((3, 3), bool)), ValueError),
        raises("adjacency", lambda fn=_fn: fn("ring"), TypeError),
        raises("adjacency", lambda fn=_fn: fn(None), TypeError),
    )
probes(
    _D + "metropolis_weights",
    raises("adjacency", lambda: d.metropolis_weights(_ring(3)), ValueError, "not symmetric"),
)
probes(
    _D + "sample_graph_sequence",
    raises("graph_fn", lambda: d.sample_graph_sequence(None, jax.random.key(0), 3), TypeError),
    raises("rng_key", lambda: d.sample_graph_sequence(lambda k, s: _ring(), None, 3), TypeError),
    raises(
        "num_steps", lambda: d.sample_graph_sequence(lambda k, s: _ring(), jax.random.key(0), 0)
    ),
    raises(
        "num_steps",
        lambda: d.sample_graph_sequence(lambda k, s: _ring(), jax.random.key(0), 2.0),
        TypeError,
    ),
)
probes(
    _D + "make_mesh",
    raises("axis_shapes", lambda: d.make_mesh((0,), ("x",)), ValueError),
    raises("axis_shapes", lambda: d.make_mesh("2", ("x",)), TypeError),
    raises("axis_shapes", lambda: d.make_mesh((1.5,), ("x",)), TypeError),
    raises("axis_names", lambda: d.make_mesh((1,), "x"), TypeError),
    raises("axis_names", lambda: d.make_mesh((1, 1), ("x", "x")), ValueError),
    raises("devices", lambda: d.make_mesh((10_000,), ("x",)), ValueError),
)
probes(
    _D + "worker_mesh",
    raises("num_workers", lambda: d.worker_mesh(0), ValueError),
    raises("num_workers", lambda: d.worker_mesh(10_000), ValueError),
    raises("num_workers", lambda: d.worker_mesh(2.0), TypeError),
    raises("axis_name", lambda: d.worker_mesh(1, axis_name=""), TypeError),
)
probes(
    _D + "run_vmapped",
    raises("fn", lambda: d.run_vmapped(None, "workers", jnp.ones(2)), TypeError),
    raises("axis_name", lambda: d.run_vmapped(_mean_over("w"), None, jnp.ones(2)), TypeError),
    raises("args", lambda: d.run_vmapped(_mean_over("w"), "w"), ValueError),
    raises(
        "args", lambda: d.run_vmapped(_mean_over("w"), "w", jnp.ones(2), jnp.ones(3)), ValueError
    ),
    raises(
        "axis_name",
        lambda: d.run_vmapped(_mean_over("clients"), "workers", jnp.ones(2)),
        ValueError,
        "collective over another axis",
    ),
)
probes(
    _D + "run_pmapped",
    raises("fn", lambda: d.run_pmapped(None, "workers", jnp.ones(2)), TypeError),
    raises("axis_name", lambda: d.run_pmapped(_mean_over("w"), None, jnp.ones(2)), TypeError),
    raises("args", lambda: d.run_pmapped(_mean_over("w"), "w"), ValueError),
    raises("args", lambda: d.run_pmapped(_mean_over("w"), "w", jnp.ones(99)), ValueError, "size"),
    raises(
        "devices",
        lambda: d.run_pmapped(_mean_over("w"), "w", jnp.ones(2), devices=jax.local_devices()[:3]),
        ValueError,
    ),
    raises(
        "axis_name",
        lambda: d.run_pmapped(_mean_over("clients"), "workers", jnp.ones(2)),
        ValueError,
        "collective over another axis",
    ),
)
probes(
    _D + "run_sharded",
    raises("fn", lambda: d.run_sharded(3, _mesh("w"), "w", jnp.ones(2)), TypeError),
    raises("mesh", lambda: d.run_sharded(_mean_over("w"), None, "w", jnp.ones(2)), TypeError),
    raises("axis_name", lambda: d.run_sharded(_mean_over("w"), _mesh("w"), "v", jnp.ones(2))),
    raises("axis_name", lambda: d.run_sharded(_mean_over("w"), _mesh("w"), ["w"], jnp.ones(2))),
    raises("mesh", lambda: d.run_sharded(_mean_over("w"), _mesh("w"), "w", jnp.ones(3))),
    raises(
        "axis_name",
        lambda: d.run_sharded(_mean_over("clients"), _mesh("w"), "w", jnp.ones(2)),
        ValueError,
        "collective over another axis",
    ),
)
probes(
    _D + "process_local_to_global",
    raises("mesh", lambda: d.process_local_to_global(np.ones((2, 3)), "mesh", "w"), TypeError),
    raises("axis_name", lambda: d.process_local_to_global(np.ones((2, 3)), _mesh("w"), "v")),
)
probes(
    _D + "global_to_process_local",
    raises(
        "tree",
        lambda: d.global_to_process_local(
            jax.device_put(jnp.ones((3, 2)), jax.NamedSharding(_mesh("w"), jax.P(None, "w")))
        ),
        ValueError,
        "split along the second axis",
    ),
)
probes(
    _D + "launch",
    raises("fn", lambda: d.launch(None, 1), TypeError),
    raises("fn", lambda: d.launch(lambda: 1, 1), TypeError, "a lambda cannot be pickled"),
    raises("num_processes", lambda: d.launch(math.factorial, 0, args=(3,)), ValueError),
    raises("num_processes", lambda: d.launch(math.factorial, 1.5, args=(3,)), TypeError),
    raises("timeout", lambda: d.launch(math.factorial, 1, args=(3,), timeout=_NAN), ValueError),
    raises("timeout", lambda: d.launch(math.factorial, 1, args=(3,), timeout=-1), ValueError),
    raises("local_device_count", lambda: d.launch(math.factorial, 1, local_device_count=0)),
    raises("args", lambda: d.launch(math.factorial, 1, args=3), TypeError),
)
probes(
    _D + "mlp_stage",
    raises("params", lambda: d.mlp_stage({"w": jnp.eye(2)}, jnp.ones((1, 2))), TypeError),
    raises(
        "params", lambda: d.mlp_stage({"w": jnp.ones((2, 3)), "b": jnp.zeros(3)}, jnp.ones((1, 2)))
    ),
    raises("h", lambda: d.mlp_stage({"w": jnp.eye(2), "b": jnp.zeros(2)}, jnp.ones((1, 3)))),
)
probes(
    _D + "squared_error",
    raises("targets", lambda: d.squared_error(jnp.ones((4, 3)), jnp.ones((1, 3))), ValueError),
    raises("targets", lambda: d.squared_error(jnp.ones((4, 3)), jnp.ones(3)), ValueError),
)
probes(
    _D + "sequential_loss",
    raises("stage_params", lambda: d.sequential_loss({}, jnp.ones((1, 3)), jnp.ones((1, 3)))),
    raises(
        "stage_params",
        lambda: d.sequential_loss(
            {"w": jnp.ones((2, 3, 3)), "b": jnp.ones((3, 3))}, jnp.ones((1, 3)), jnp.ones((1, 3))
        ),
    ),
    raises("h", lambda: d.sequential_loss(_stages(), jnp.ones((1, 4)), jnp.ones((1, 4)))),
    raises("targets", lambda: d.sequential_loss(_stages(), jnp.ones((1, 3)), jnp.ones((2, 3)))),
)
for _name in ("gpipe_train", "pipedream_2bw_train"):
    _fn = getattr(d, _name)
    probes(
        _D + _name,
        raises(
            "mesh",
            lambda fn=_fn: fn(_stages(), optax.sgd(0.1), _batches(), _batches(), mesh=None),
            TypeError,
        ),
        raises(
            "axis_name",
            lambda fn=_fn: fn(_stages(), optax.sgd(0.1), _batches(), _batches(), mesh=_mesh("x")),
        ),
        raises(
            "stage_params",
            lambda fn=_fn: fn(_stages(3), optax.sgd(0.1), _batches(), _batches(), mesh=_mesh()),
        ),
        raises(
            "stage_params",
            lambda fn=_fn: fn(
                _stages(dtype=jnp.int32), optax.sgd(0.1), _batches(), _batches(), mesh=_mesh()
            ),
            TypeError,
        ),
        raises(
            "tx",
            lambda fn=_fn: fn(_stages(), "sgd", _batches(), _batches(), mesh=_mesh()),
            TypeError,
        ),
        raises(
            "mapping",
            lambda fn=_fn: fn(
                _stages(), optax.sgd(0.1), _batches(), _batches(), mesh=_mesh(), mapping="vmap"
            ),
            ValueError,
        ),
        raises(
            "inputs",
            lambda fn=_fn: fn(
                _stages(), optax.sgd(0.1), jnp.ones((2, 4, 3)), _batches(), mesh=_mesh()
            ),
        ),
        raises(
            "targets",
            lambda fn=_fn: fn(
                _stages(), optax.sgd(0.1), _batches(), _batches((2, 2, 4, 3)), mesh=_mesh()
            ),
        ),
    )
probes(
    _D + "pipeline_schedule",
    raises("kind", lambda: d.pipeline_schedule("zb", 2, 2), ValueError),
    raises("num_stages", lambda: d.pipeline_schedule("gpipe", 0, 2), ValueError),
    raises("num_microbatches", lambda: d.pipeline_schedule("gpipe", 2, 2.0), ValueError),
    raises("forward_time", lambda: d.pipeline_schedule("gpipe", 2, 2, forward_time=math.inf)),
    raises("backward_time", lambda: d.pipeline_schedule("gpipe", 2, 2, backward_time=_NAN)),
    raises(
        "backward_time", lambda: d.pipeline_schedule("gpipe", 2, 2, backward_time="2"), TypeError
    ),
)
