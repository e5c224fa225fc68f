"""Module-level problems and workers for the Push-Pull/FAB multi-process test.

``jaxlab.distributed.launch`` children import this module by name to unpickle the worker, so it
does no JAX work at import time. The same builders serve the parent's single-device reference.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.distributed import (
    exponential_graph,
    global_to_process_local,
    process_local_to_global,
    run_sharded,
    time_varying_digraph,
    worker_mesh,
)
from jaxlab.solvers import FAB, FABParams, PushPull

AXIS = "agents"
STEPS = 60


def quadratic_data(num_agents):
    """φ_i(x) = a_i ||x - b_i||² / 2 on R²: curvatures a_i in [1, 3], centres b_i."""
    rng = np.random.default_rng(0)
    return rng.uniform(1.0, 3.0, num_agents), rng.normal(size=(num_agents, 2))


def toy_bilevel_data(num_agents):
    """The note's check-3 data: c_i with mean 1, e_i with mean 0."""
    rng = np.random.default_rng(1)
    c, e = rng.normal(size=num_agents), rng.normal(size=num_agents)
    return c - c.mean() + 1.0, e - e.mean()


def random_digraph(num_agents):
    return lambda key, k: time_varying_digraph(key, num_agents)


def hops(num_agents):
    """The exponential graph's hops 1, 2, 4, ... below ``num_agents``."""
    return tuple(2**m for m in range(num_agents.bit_length()) if 2**m < num_agents)


def sparse_digraph(num_agents):
    """One-peer exponential graph plus random ring edges: unbalanced, edges only on ``hops``."""

    def graph_fn(key, k):
        ring = jnp.roll(jnp.eye(num_agents, dtype=bool), 1, axis=0)  # edge j -> j + 1
        coins = jax.random.bernoulli(key, 0.5, (num_agents, num_agents))
        return exponential_graph(num_agents, step=k) | (ring & coins)

    return graph_fn


def push_pull(num_agents, axis_name=None, mixing="dense"):
    return PushPull(
        grad_fn=lambda x, a_i, b_i: a_i * (x - b_i),
        graph_fn=random_digraph(num_agents) if mixing == "dense" else sparse_digraph(num_agents),
        stepsize=0.2,
        maxiter=STEPS,
        tol=0.0,
        axis_name=axis_name,
        mixing=mixing,
        shifts=() if mixing == "dense" else hops(num_agents),
        implicit_diff=False,
    )


def fab(num_agents, axis_name=None, mixing="dense"):
    return FAB(
        upper_grad_fn=lambda x, y, c_i, e_i: (x, y - c_i),
        lower_grad_fn=lambda x, y, c_i, e_i: (x + e_i - y, y - x - e_i),
        graph_fn=random_digraph(num_agents) if mixing == "dense" else sparse_digraph(num_agents),
        penalty=10.0,
        upper_stepsize=0.1,
        lower_stepsize=0.3,
        inner_steps=2,
        maxiter=STEPS,
        tol=0.0,
        axis_name=axis_name,
        mixing=mixing,
        shifts=() if mixing == "dense" else hops(num_agents),
        implicit_diff=False,
    )


def run_push_pull_per_agent(solver):
    def per_agent(x0, a_i, b_i):
        out = solver.run(x0, a_i, b_i, rng_key=jax.random.key(3))
        return out.params, out.state.tracker, out.state.error

    return per_agent


def run_fab_per_agent(solver):
    def per_agent(x0, c_i, e_i):
        out = solver.run(FABParams(x0, x0, x0), c_i, e_i, rng_key=jax.random.key(4))
        return tuple(out.params), out.state.error

    return per_agent


def two_process_worker(mixing, kinds=("push_pull", "fab")):
    """Push-Pull and/or FAB over a mesh spanning every process; returns this process's rows."""
    mesh = worker_mesh(axis_name=AXIS)
    n = mesh.shape[AXIS]
    per_process = jax.local_device_count()
    mine = slice(jax.process_index() * per_process, (jax.process_index() + 1) * per_process)
    a, b = quadratic_data(n)
    c, e = toy_bilevel_data(n)
    to_global = lambda x: process_local_to_global(np.asarray(x)[mine], mesh, AXIS)
    out = {}
    if "push_pull" in kinds:
        out["push_pull"] = run_sharded(
            run_push_pull_per_agent(push_pull(n, AXIS, mixing)),
            mesh,
            AXIS,
            to_global(np.zeros((n, 2))),
            to_global(a),
            to_global(b),
        )
    if "fab" in kinds:
        out["fab"] = run_sharded(
            run_fab_per_agent(fab(n, AXIS, mixing)),
            mesh,
            AXIS,
            to_global(np.zeros(n)),
            to_global(c),
            to_global(e),
        )
    return global_to_process_local(out)
