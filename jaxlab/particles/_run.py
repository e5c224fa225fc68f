"""A sampler's run in one compiled scan (blackjax's ``run_inference_algorithm``, for particles)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

from jaxlab._src.sampling import SamplingAlgorithm
from jaxlab._src.validation import check_callable, check_positive_int

__all__ = ["run_sampler"]


def run_sampler(
    algorithm: SamplingAlgorithm,
    positions: jax.typing.ArrayLike,
    rng_key: jax.Array,
    num_steps: int,
    record: Callable[[Any], Any] | None = None,
) -> tuple[Any, Any]:
    """Runs ``num_steps`` steps of a particle sampler from ``positions`` in one jitted scan.

    ``state = algorithm.init(positions)``, then ``state, info = algorithm.step(key_t, state)``
    for the ``num_steps`` keys of ``jax.random.split(rng_key, num_steps)``; ``record(info)`` is
    stacked over the steps (the whole ``info`` when ``record`` is ``None``), so a long run keeps
    only what the caller reads.

    Args:
      algorithm: a :class:`SamplingAlgorithm` (:func:`mmfld`, :func:`mfld`).
      positions: ``(N, d)`` initial particles.
      rng_key: the run's key, split once per step.
      num_steps: steps to run (> 0).
      record: ``info -> pytree`` kept per step.

    Returns:
      ``(final state, record(info) stacked over the steps)``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab import particles
      >>> box = particles.box_mirror_map(jnp.zeros(1), jnp.ones(1))
      >>> algorithm = particles.mmfld(particles.linear_potential_functional(jnp.ones(1)), box,
      ...                             0.01, 0.1)
      >>> state, fraction = run_sampler(algorithm, jnp.full((8, 1), 0.5), jax.random.key(0), 5,
      ...                               lambda info: info.boundary_fraction)
      >>> state.positions.shape, fraction.shape
      ((8, 1), (5,))
    """
    if not isinstance(algorithm, SamplingAlgorithm):
        raise TypeError(f"algorithm must be a SamplingAlgorithm, got {type(algorithm).__name__}")
    num_steps = check_positive_int(num_steps, "num_steps")
    if record is None:
        record = lambda info: info  # noqa: E731
    check_callable(record, "record")

    @jax.jit
    def run(state, key):
        def body(state, key):
            state, info = algorithm.step(key, state)
            return state, record(info)

        return jax.lax.scan(body, state, jax.random.split(key, num_steps))

    return run(algorithm.init(positions), rng_key)
