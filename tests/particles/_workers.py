"""Module-level functions the 2-process ``launch`` test runs (importable, no JAX work at import)."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab import particles
from jaxlab.distributed import global_to_process_local, make_mesh, process_local_to_global

AXIS = "particles"
NUM_PARTICLES = 32
STEPS = 5


def problem():
    """The interacting box example on [0, 1]^2 and its starting positions (deterministic)."""
    functional = particles.interacting_box_functional(
        jnp.asarray([0.3, -0.2]), 1.0, jnp.asarray([0.5, 0.8])
    )
    positions = np.linspace(0.05, 0.95, 2 * NUM_PARTICLES, dtype=np.float32).reshape(-1, 2)
    return functional, particles.box_mirror_map(0.0, 1.0), positions


def sharded_mmfld_steps():
    """STEPS primal MMFLD steps with the particles split over every device of every process."""
    functional, mirror_map, positions = problem()
    mesh = make_mesh((jax.device_count(),), (AXIS,))
    algorithm = particles.mmfld(functional, mirror_map, 1e-2, 0.1, axis_name=AXIS)
    step = particles.shard_step(algorithm.step, mesh, AXIS)
    rows = NUM_PARTICLES // jax.process_count()
    mine = positions[jax.process_index() * rows : (jax.process_index() + 1) * rows]
    state = particles.MFLDState(process_local_to_global(mine, mesh, AXIS))
    means = []
    for i in range(STEPS):
        state, info = step(jax.random.fold_in(jax.random.key(0), i), state)
        means.append(np.asarray(info.statistics.addressable_data(0)))
    return global_to_process_local(state.positions), np.stack(means)
