"""Shared pieces of jaxlab's samplers (blackjax's shape): the algorithm pair and particle noise.

:class:`SamplingAlgorithm` is the ``(init, step)`` pair every sampler's top-level factory returns
(``jaxlab.particles.mmfld(...)``, ``jaxlab.particles.mfld(...)``), as ``blackjax.mala(...)``
does; each algorithm exposes its own ``init``/``build_kernel`` as attributes of that factory.

:func:`particle_noise` draws each particle's Gaussian noise as a function of ``(rng_key, global
particle index)`` only. This is why jaxlab keeps its own counter-mode Threefry hash instead of
``jax.random.normal(key, (N, d))`` or per-particle ``fold_in`` keys: the same particle then draws
the same noise on one device, under ``jax.shard_map`` over any number of devices and across
processes (each device hashing only its own rows), so sharded and single-device runs agree to
rounding; and the hash, written out, fuses into its consumers (``jax.random``'s CPU lowering is a
rolled loop that materialises the counters between rounds).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["SamplingAlgorithm", "particle_noise", "threefry2x32"]


class SamplingAlgorithm(NamedTuple):
    """A sampler in blackjax's shape: ``init(positions) -> state``, ``step(rng_key, state)``.

    ``step`` returns ``(state, info)``, the diagnostics kept apart from the state.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.particles import MeanFieldFunctional, mfld
      >>> algorithm = mfld(
      ...     MeanFieldFunctional(lambda x: x, lambda x, m: x), stepsize=0.1, entropy_weight=0.5
      ... )
      >>> isinstance(algorithm, SamplingAlgorithm)
      True
      >>> state = algorithm.init(jnp.zeros((3, 1)))
      >>> state, info = algorithm.step(jax.random.key(0), state)
      >>> state.positions.shape
      (3, 1)
    """

    init: Callable[..., Any]
    step: Callable[[jax.Array, Any], tuple[Any, Any]]


def _threefry_words(rng_key: jax.Array) -> tuple[jax.Array, jax.Array] | None:
    """The two uint32 words of a threefry2x32 key (typed or raw); ``None`` for another PRNG."""
    if str(jax.random.key_impl(rng_key)) != "threefry2x32":
        return None
    words = jax.random.key_data(rng_key)
    return words[0], words[1]


_THREEFRY_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def threefry2x32(
    key: tuple[jax.Array, jax.Array], counter: tuple[jax.Array, jax.Array]
) -> tuple[jax.Array, jax.Array]:
    """The Threefry-2x32 block cipher (20 rounds; Salmon et al., SC 2011) of a uint32 counter pair.

    Written out (unrolled) so that XLA fuses the hash into its consumers: on CPU
    ``jax.random``'s lowering is a rolled loop that materialises the counters between rounds.
    Bitwise equal to ``jax.extend.random.threefry_2x32`` on the same words.

    Examples:
      >>> import numpy as np
      >>> from jax.extend.random import threefry_2x32
      >>> key = jnp.asarray([1, 2], jnp.uint32)
      >>> counter = jnp.asarray([3, 4], jnp.uint32)
      >>> ours = threefry2x32((key[0], key[1]), (counter[:1], counter[1:]))
      >>> bool(np.array_equal(np.concatenate(ours), threefry_2x32(key, counter)))
      True
    """
    schedule = (key[0], key[1], key[0] ^ key[1] ^ np.uint32(0x1BD11BDA))
    x0, x1 = counter[0] + schedule[0], counter[1] + schedule[1]
    for group in range(5):
        for rotation in _THREEFRY_ROTATIONS[group % 2]:
            x0 = x0 + x1
            x1 = (x1 << np.uint32(rotation)) | (x1 >> np.uint32(32 - rotation))
            x1 = x1 ^ x0
        x0 = x0 + schedule[(group + 1) % 3]
        x1 = x1 + schedule[(group + 2) % 3] + np.uint32(group + 1)
    return x0, x1


def _uniform_from_bits(bits: jax.Array, dtype) -> jax.Array:
    """Floats uniform on ``[nextafter(-1, 0), 1)`` from uniform unsigned bits (mantissa fill)."""
    nbits, nmant = jnp.finfo(dtype).bits, jnp.finfo(dtype).nmant
    one = np.array(1.0, np.dtype(dtype)).view(np.dtype(bits.dtype))
    floats = jax.lax.bitcast_convert_type((bits >> (nbits - nmant)) | one, dtype) - 1.0
    low = np.nextafter(np.array(-1.0, np.dtype(dtype)), np.array(0.0, np.dtype(dtype)))
    return jnp.maximum(low, floats * (1.0 - low) + low)


def particle_noise(
    rng_key: jax.Array, num_local: int, dim: int, dtype, axis_name: str | None
) -> jax.Array:
    """Standard normals ``ξ^i``, one row per particle, a function of ``(rng_key, i)`` only.

    ``i`` is the particle's global index (``axis_index · num_local + local index`` under
    ``jax.shard_map``), so a particle draws the same noise whatever the sharding, and each device
    computes only its own rows. With a threefry key ``k`` (the default), one counter-mode hash
    ``(b, b') = threefry2x32_k(i, p)`` gives the 32-bit words of coordinates ``2p`` and ``2p + 1``
    (64-bit dtypes: ``(b, b')`` is one coordinate's 64 bits), so ``N·d`` normals cost ``N⌈d/2⌉``
    hashes; a word becomes ``u`` uniform on ``(-1, 1)`` through its top mantissa bits and then
    ``ξ = √2 erf⁻¹(u)`` (the inverse-CDF map of ``jax.random.normal``). Another PRNG falls back
    to ``jax.random.normal(fold_in(rng_key, i), (d,))`` per particle.

    Args:
      rng_key: a PRNG key (typed or raw), shared by all devices.
      num_local: the number of particles (rows) on this device.
      dim: coordinates per particle.
      dtype: the floating dtype of the result.
      axis_name: the mesh axis the particles are sharded over, ``None`` if all are here.

    Returns:
      A ``(num_local, dim)`` array of standard normals.

    Examples:
      >>> key = jax.random.key(0)
      >>> noise = particle_noise(key, 6, 3, jnp.float32, None)
      >>> bool(jnp.array_equal(particle_noise(key, 4, 3, jnp.float32, None), noise[:4]))
      True
    """
    offset = 0 if axis_name is None else jax.lax.axis_index(axis_name) * num_local
    words = _threefry_words(rng_key)
    if words is None:
        indices = offset + jnp.arange(num_local)
        keys = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(rng_key, indices)
        return jax.vmap(lambda key: jax.random.normal(key, (dim,), dtype))(keys)
    total = num_local * (1 if axis_name is None else jax.lax.axis_size(axis_name))
    if total > 2**32:
        raise ValueError(f"at most 2**32 particles are supported (uint32 counters), got {total}")
    # Noise is drawn in float32 (or float64) and cast: the narrower floats have too few bits.
    draw_dtype = jnp.float64 if jnp.finfo(dtype).bits == 64 else jnp.float32
    wide = draw_dtype == jnp.float64
    columns = dim if wide else (dim + 1) // 2
    shape = (num_local, columns)
    rows = jnp.asarray(offset, jnp.uint32) + jax.lax.broadcasted_iota(jnp.uint32, shape, 0)
    pairs = jax.lax.broadcasted_iota(jnp.uint32, shape, 1)
    first, second = threefry2x32(words, (rows, pairs))
    if wide:
        bits = (first.astype(jnp.uint64) << 32) | second.astype(jnp.uint64)
    else:
        bits = jnp.stack([first, second], axis=-1).reshape(num_local, 2 * columns)[:, :dim]
    uniform = _uniform_from_bits(bits, draw_dtype)
    return (np.asarray(np.sqrt(2.0), draw_dtype) * jax.lax.erf_inv(uniform)).astype(dtype)
