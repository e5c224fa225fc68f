"""``run_sampler``: one compiled scan equals the manual ``step`` loop over the same keys."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import particles


def test_run_sampler_equals_the_manual_loop_and_records_what_it_is_asked():
    box = particles.box_mirror_map(jnp.zeros(2), jnp.ones(2))
    algorithm = particles.mmfld(
        particles.linear_potential_functional(jnp.array([1.0, -0.5])), box, 0.05, 0.2
    )
    start, key = jnp.full((16, 2), 0.5), jax.random.key(3)
    state, energy = particles.run_sampler(algorithm, start, key, 4, lambda info: info.energy)
    manual, energies, step = algorithm.init(start), [], jax.jit(algorithm.step)
    for k in jax.random.split(key, 4):
        manual, info = step(k, manual)
        energies.append(info.energy)
    np.testing.assert_allclose(state.positions, manual.positions, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(energy, jnp.stack(energies), rtol=1e-6)
    _, info = particles.run_sampler(algorithm, start, key, 4)  # no record: the whole info
    np.testing.assert_allclose(info.energy, energy, rtol=1e-6)


def test_run_sampler_names_bad_arguments():
    box = particles.box_mirror_map(jnp.zeros(1), jnp.ones(1))
    algorithm = particles.mmfld(particles.linear_potential_functional(jnp.ones(1)), box, 0.1, 0.1)
    with pytest.raises(ValueError, match="num_steps"):
        particles.run_sampler(algorithm, jnp.full((4, 1), 0.5), jax.random.key(0), 0)
    with pytest.raises(TypeError, match="record"):
        particles.run_sampler(algorithm, jnp.full((4, 1), 0.5), jax.random.key(0), 2, record=3)
    with pytest.raises(TypeError, match="algorithm must be a SamplingAlgorithm"):
        particles.run_sampler((algorithm.init, algorithm.step), jnp.ones((4, 1)), None, 2)
