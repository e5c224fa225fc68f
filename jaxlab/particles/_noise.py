"""The particles' Gaussian noise: a function of ``(rng_key, global particle index)``, fast on CPU.

Each particle's noise is a counter-mode Threefry-2x32 hash of its global index (the layout of
``jaxlab._src.sampling.particle_noise``), so a particle draws the same noise on one device,
under ``jax.shard_map`` over any number of devices and across processes. What differs from that
function is the map from uniform bits to a normal, and the layout the hash is evaluated in:

* ``jax.lax.erf_inv`` lowers through ``log1p``, which XLA:CPU does not vectorise inside a
  fusion: fused with the hash it ran at about 25 ns a coordinate on a 2-core CPU (ten times the
  hash and the transform run apart). The inverse normal CDF here is Giles's polynomial
  approximation of ``erf⁻¹`` written with ``log((1 - u)(1 + u))``, which vectorises; the whole
  draw is one loop over the ``(N, d)`` output.
* Each coordinate's normals are computed where they are used (coordinate ``j`` takes word
  ``j mod 2`` of the hash of ``(i, ⌊j/2⌋)`` in float32, both words of the hash of ``(i, j)`` in
  float64), one loop per coordinate for a few coordinates: no interleaving shuffle breaks the
  vectorised loop. Float32 computes each hash twice, which costs less than the shuffle.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab._src.sampling import threefry2x32
from jaxlab._src.validation import check_axis_bound, check_int, check_key

__all__ = ["erf_inverse", "particle_noise", "particle_uniform"]

# Up to this many coordinates the noise is drawn one coordinate (column) at a time: XLA:CPU
# vectorises a loop along the particles, not one over a short trailing axis of d coordinates
# (measured at N = 1e5, d = 5: about 1.4x faster). Larger d: one loop over the (N, d) array.
_COLUMNWISE_DIM = 8

# Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011): erf⁻¹(u) = u · p(w),
# w = -log((1 - u)(1 + u)), with p a polynomial in w - 2.5 (w < 5) or in √w - 3 (float32:
# relative error under 4e-7), and in w - 3.125 (w < 6.25), √w - 3.25 (w < 16) or √w - 5
# (float64: relative error under 1e-15). Coefficients from the highest degree down.
_GILES_32 = (
    (
        5.0,
        lambda w: w - 2.5,
        (
            2.81022636e-08,
            3.43273939e-07,
            -3.5233877e-06,
            -4.39150654e-06,
            0.00021858087,
            -0.00125372503,
            -0.00417768164,
            0.246640727,
            1.50140941,
        ),
    ),
    (
        np.inf,
        lambda w: jnp.sqrt(w) - 3.0,
        (
            -0.000200214257,
            0.000100950558,
            0.00134934322,
            -0.00367342844,
            0.00573950773,
            -0.0076224613,
            0.00943887047,
            1.00167406,
            2.83297682,
        ),
    ),
)
_GILES_64 = (
    (
        6.25,
        lambda w: w - 3.125,
        (
            -3.6444120640178196996e-21,
            -1.685059138182016589e-19,
            1.2858480715256400167e-18,
            1.115787767802518096e-17,
            -1.333171662854620906e-16,
            2.0972767875968561637e-17,
            6.6376381343583238325e-15,
            -4.0545662729752068639e-14,
            -8.1519341976054721522e-14,
            2.6335093153082322977e-12,
            -1.2975133253453532498e-11,
            -5.4154120542946279317e-11,
            1.051212273321532285e-09,
            -4.1126339803469836976e-09,
            -2.9070369957882005086e-08,
            4.2347877827932403518e-07,
            -1.3654692000834678645e-06,
            -1.3882523362786468719e-05,
            0.0001867342080340571352,
            -0.00074070253416626697512,
            -0.0060336708714301490533,
            0.24015818242558961693,
            1.6536545626831027356,
        ),
    ),
    (
        16.0,
        lambda w: jnp.sqrt(w) - 3.25,
        (
            2.2137376921775787049e-09,
            9.0756561938885390979e-08,
            -2.7517406297064545428e-07,
            1.8239629214389227755e-08,
            1.5027403968909827627e-06,
            -4.013867526981545969e-06,
            2.9234449089955446044e-06,
            1.2475304481671778723e-05,
            -4.7318229009055733981e-05,
            6.8284851459573175448e-05,
            2.4031110387097893999e-05,
            -0.0003550375203628474796,
            0.00095328937973738049703,
            -0.0016882755560235047313,
            0.0024914420961078508066,
            -0.0037512085075692412107,
            0.005370914553590063617,
            1.0052589676941592334,
            3.0838856104922207635,
        ),
    ),
    (
        np.inf,
        lambda w: jnp.sqrt(w) - 5.0,
        (
            -2.7109920616438573243e-11,
            -2.5556418169965252055e-10,
            1.5076572693500548083e-09,
            -3.7894654401267369937e-09,
            7.6157012080783393804e-09,
            -1.4960026627149240478e-08,
            2.9147953450901080826e-08,
            -6.7711997758452339498e-08,
            2.2900482228026654717e-07,
            -9.9298272942317002539e-07,
            4.5260625972231537039e-06,
            -1.9681778105531670567e-05,
            7.5995277030017761139e-05,
            -0.00021503011930044477347,
            -0.00013871931833623122026,
            1.0103004648645343977,
            4.8499064014085844221,
        ),
    ),
)


def erf_inverse(u: jax.Array) -> jax.Array:
    """``erf⁻¹(u)`` on ``(-1, 1)`` by Giles's polynomials (float32 or float64), vectorisable.

    ``w = -log((1 - u)(1 + u))``; every branch's polynomial is evaluated and the one for ``w``
    selected, so the loop has no control flow. ``±1`` give ``±inf``.

    Args:
      u: a float32 or float64 array with entries in ``[-1, 1]``.

    Returns:
      ``erf⁻¹(u)``, shaped and typed like ``u``.

    Examples:
      >>> import jax.numpy as jnp
      >>> [round(float(v), 5) for v in erf_inverse(jnp.asarray([0.0, 0.5, -0.9]))]
      [0.0, 0.47694, -1.16309]

    References:
      M. Giles, "Approximating the erfinv function", GPU Computing Gems Jade Edition, 2011.
    """
    dtype = u.dtype
    branches = _GILES_64 if jnp.finfo(dtype).bits == 64 else _GILES_32
    w = -jnp.log((1.0 - u) * (1.0 + u))
    result = None
    for bound, shift, coefficients in reversed(branches):
        t = shift(w)
        p = jnp.asarray(coefficients[0], dtype)
        for c in coefficients[1:]:
            p = c + p * t
        result = p if result is None else jnp.where(w < bound, p, result)
    # At u = ±1, w = inf and the polynomials give nan or the wrong sign: erf⁻¹(±1) = ±inf.
    return jnp.where(jnp.abs(u) < 1.0, result * u, u * jnp.inf)


def _unit_from_bits(bits: jax.Array, dtype) -> jax.Array:
    """Floats uniform on ``[0, 1)`` from uniform unsigned bits (their top mantissa bits)."""
    nbits, nmant = jnp.finfo(dtype).bits, jnp.finfo(dtype).nmant
    one = np.array(1.0, np.dtype(dtype)).view(np.dtype(bits.dtype))
    return jax.lax.bitcast_convert_type((bits >> (nbits - nmant)) | one, dtype) - 1.0


def _check_noise_arguments(rng_key, num_particles, dim, dtype, axis_name) -> tuple[int, int]:
    check_key(rng_key, "rng_key")
    num_particles = check_int(num_particles, "num_particles", minimum=0)
    dim = check_int(dim, "dim", minimum=1)
    try:
        floating = jnp.issubdtype(dtype, jnp.floating)
    except TypeError:
        floating = False
    if not floating:
        raise TypeError(f"dtype must be a floating dtype, got {dtype!r}")
    check_axis_bound(axis_name, "axis_name")
    return num_particles, dim


def _per_coordinate(rng_key, num_particles, dim, dtype, axis_name, transform) -> jax.Array:
    """``transform(u)`` of every coordinate's uniform ``u`` on ``[0, 1)``, laid out ``(N, d)``."""
    offset = 0 if axis_name is None else jax.lax.axis_index(axis_name) * num_particles
    total = num_particles * (1 if axis_name is None else jax.lax.axis_size(axis_name))
    if total > 2**32:
        raise ValueError(
            f"num_particles must be at most 2**32 in all (uint32 counters), got {total}"
        )
    words = jax.random.key_data(rng_key)
    words = (words[0], words[1])
    wide = jnp.finfo(dtype).bits == 64
    # Narrower floats are drawn in float32 and cast: they have too few mantissa bits.
    draw = jnp.float64 if wide else jnp.float32

    def uniform(rows, columns):
        if wide:
            first, second = threefry2x32(words, (rows, columns))
            bits = (first.astype(jnp.uint64) << 32) | second.astype(jnp.uint64)
        else:
            first, second = threefry2x32(words, (rows, columns >> 1))
            bits = jnp.where((columns & 1) == 0, first, second)
        return _unit_from_bits(bits, draw)

    rows = jnp.asarray(offset, jnp.uint32) + jax.lax.iota(jnp.uint32, num_particles)
    if dim <= _COLUMNWISE_DIM:
        # One loop per coordinate along the particles (vectorises; see the module docstring).
        columns = [transform(uniform(rows, jnp.uint32(j))) for j in range(dim)]
        return jnp.stack(columns, axis=1).astype(dtype)
    columns = jax.lax.broadcasted_iota(jnp.uint32, (num_particles, dim), 1)
    return transform(uniform(rows[:, None], columns)).astype(dtype)


def particle_uniform(
    rng_key: jax.Array,
    num_particles: int,
    dim: int,
    dtype: jax.typing.DTypeLike = jnp.float32,
    *,
    axis_name: str | None = None,
) -> jax.Array:
    """Uniforms on ``[0, 1)``, one row per particle, a function of ``(rng_key, i)`` only.

    The counter-mode hash stage of :func:`particle_noise` (which maps ``u`` to
    ``√2 erf⁻¹(2u - 1)``, the lowest ``u`` nudged inside): ``i`` is the particle's global index
    (``axis_index · N_local + local index`` under ``jax.shard_map``), so a particle draws the
    same numbers whatever the sharding and each device hashes only its own rows. With key ``k``
    and ``(b, b') = threefry2x32_k(i, p)``: in float32 (and narrower floats, drawn in float32 and
    cast) coordinate ``j`` is the top 23 bits of ``b`` (``j`` even) or ``b'`` (``j`` odd) of
    ``p = ⌊j/2⌋``; in float64 the top 52 bits of ``(b, b')`` with ``p = j``. Threefry keys only.

    Args:
      rng_key: a threefry PRNG key (typed or raw), shared by all devices.
      num_particles: the particles (rows) on this device, ``≥ 0``.
      dim: coordinates per particle, ``≥ 1``.
      dtype: a floating dtype.
      axis_name: the mesh axis the particles are sharded over, ``None`` if all are here.

    Returns:
      A ``(num_particles, dim)`` array on ``[0, 1)``.

    Raises:
      TypeError: ``rng_key`` is not a key, a count not an int, ``dtype`` not floating.
      ValueError: a count out of range, more than ``2**32`` particles, ``axis_name`` unbound,
        or a key of another PRNG.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> u = particle_uniform(jax.random.key(0), 1000, 3)
      >>> u.shape, bool((u >= 0).all() & (u < 1).all())
      ((1000, 3), True)
      >>> bool(jnp.array_equal(particle_uniform(jax.random.key(0), 10, 3), u[:10]))
      True

    References:
      Salmon, Moraes, Dror & Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC 2011.
    """
    num_particles, dim = _check_noise_arguments(rng_key, num_particles, dim, dtype, axis_name)
    if str(jax.random.key_impl(rng_key)) != "threefry2x32":
        raise ValueError(
            f"rng_key must be a threefry2x32 key, got {jax.random.key_impl(rng_key)} (the counter "
            "hash is Threefry-2x32; jax.random.key(seed) makes one)"
        )
    return _per_coordinate(rng_key, num_particles, dim, dtype, axis_name, lambda u: u)


def particle_noise(
    rng_key: jax.Array,
    num_particles: int,
    dim: int,
    dtype: jax.typing.DTypeLike = jnp.float32,
    *,
    axis_name: str | None = None,
) -> jax.Array:
    """Standard normals ``ξ^i``, one row per particle, a function of ``(rng_key, i)`` only.

    ``ξ = √2 erf⁻¹(v)`` (the inverse normal CDF, as ``jax.random.normal`` maps its uniforms; erf⁻¹
    by Giles's polynomials, ``erf_inverse`` in this module), ``v = max(2u - 1, nextafter(-1, 0))``
    from the uniforms ``u`` of :func:`particle_uniform`: the same counter-mode Threefry-2x32 hash
    of the particle's global index, so a particle draws the same noise on one device, under
    ``jax.shard_map`` over any number of devices and across processes, each device hashing only
    its own rows. This is the noise of :func:`~jaxlab.particles.mmfld` and
    :func:`~jaxlab.particles.mfld`. Another PRNG falls back to
    ``jax.random.normal(fold_in(rng_key, i), (dim,))`` per particle.

    Args:
      rng_key: a PRNG key (typed or raw), shared by all devices.
      num_particles: the particles (rows) on this device, ``≥ 0``.
      dim: coordinates per particle, ``≥ 1``.
      dtype: a floating dtype.
      axis_name: the mesh axis the particles are sharded over, ``None`` if all are here.

    Returns:
      A ``(num_particles, dim)`` array of standard normals.

    Raises:
      TypeError: ``rng_key`` is not a key, a count not an int, ``dtype`` not floating.
      ValueError: a count out of range, more than ``2**32`` particles, or ``axis_name`` unbound.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> key = jax.random.key(0)
      >>> noise = particle_noise(key, 6, 3)
      >>> bool(jnp.array_equal(particle_noise(key, 4, 3), noise[:4]))  # row i: (key, i) only
      True

    References:
      Salmon, Moraes, Dror & Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC 2011;
      Giles, "Approximating the erfinv function", GPU Computing Gems, 2011.
    """
    num_particles, dim = _check_noise_arguments(rng_key, num_particles, dim, dtype, axis_name)
    if str(jax.random.key_impl(rng_key)) != "threefry2x32":
        offset = 0 if axis_name is None else jax.lax.axis_index(axis_name) * num_particles
        indices = offset + jnp.arange(num_particles)
        keys = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(rng_key, indices)
        return jax.vmap(lambda key: jax.random.normal(key, (dim,), dtype))(keys)

    def normal(u):
        low = np.nextafter(np.array(-1.0, u.dtype), np.array(0.0, u.dtype))
        v = jnp.maximum(low, u * (1.0 - low) + low)
        return np.asarray(np.sqrt(2.0), u.dtype) * erf_inverse(v)

    return _per_coordinate(rng_key, num_particles, dim, dtype, axis_name, normal)
