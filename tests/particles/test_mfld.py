"""MFLD / MMFLD particle systems: stationary laws against closed forms, feasibility, sharding."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from jaxlab import particles
from jaxlab.distributed import launch, make_mesh
from tests.conftest import EXECUTION_BOUND
from tests.particles import _workers

LINEAR_C, LAMBDA = 0.3, 0.1  # the note's 1-D check: mean 0.280938, variance 0.055970


def _run(algorithm, positions, key, steps):
    """``steps`` steps in one scan; returns the final state and the stacked infos.

    Compiled for execution speed: the Monte Carlo checks run thousands of steps.
    """

    @functools.partial(jax.jit, compiler_options=EXECUTION_BOUND)
    def run(state, key):
        return jax.lax.scan(lambda s, k: algorithm.step(k, s), state, jax.random.split(key, steps))

    return run(algorithm.init(positions), key)


def test_primal_mean_matches_the_truncated_exponential_within_monte_carlo_error(x64):
    # Check 2 of the note at N = 10^4, eta = 3e-3, T = 25, from every particle at 0.5 (the mean
    # relaxes at the Jacobi rate ~2λ, so T = 25 leaves ~1e-3 of the initial gap).
    n, eta, horizon = 10_000, 3e-3, 25
    algorithm = particles.mmfld(
        particles.linear_potential_functional(jnp.asarray([LINEAR_C])),
        particles.box_mirror_map(0.0, 1.0),
        eta,
        LAMBDA,
    )
    steps = int(horizon / eta)
    state, info = _run(algorithm, jnp.full((n, 1), 0.5), jax.random.key(0), steps)
    exact_mean, exact_variance = (
        float(v[0]) for v in particles.truncated_exponential_moments(jnp.asarray([3.0]))
    )
    assert exact_mean == pytest.approx(0.280938, abs=1e-6)  # the note's value, re-derived
    se = math.sqrt(exact_variance / n)
    assert abs(float(state.positions.mean()) - exact_mean) <= 4 * se + 0.003
    assert float(state.positions.var()) == pytest.approx(exact_variance, rel=0.1)
    # Strictly inside at every step; the clip is rare.
    assert float(info.boundary_distance.min()) > 0
    assert float(info.boundary_fraction.max()) == 0.0
    assert int(info.clip_count.sum()) < 1e-3 * n * steps
    # The energy in Info is F(μ̂) = c · mean of the positions the step started from.
    np.testing.assert_allclose(info.energy[0], LINEAR_C * 0.5, rtol=1e-12)


def test_mmfld_stays_inside_while_mfld_and_projected_do_not():
    n, eta, steps = 2000, 1e-2, 300
    functional = particles.linear_potential_functional(jnp.asarray([LINEAR_C]))
    box = particles.box_mirror_map(0.0, 1.0)
    start = jnp.full((n, 1), 0.5)
    key = jax.random.key(1)
    for scheme in ("primal", "dual"):
        _, info = _run(
            particles.mmfld(functional, box, eta, LAMBDA, scheme=scheme), start, key, steps
        )
        assert float(info.boundary_distance.min()) > 0, scheme
        assert float(info.boundary_fraction.max()) == 0.0, scheme
    state, _ = _run(particles.mfld(functional, eta, LAMBDA), start, key, steps)
    outside = np.mean((state.positions < 0) | (state.positions > 1))
    assert outside > 0.3  # unconstrained, the linear potential pushes mass below 0
    _, info = _run(
        particles.mmfld(functional, box, eta, LAMBDA, scheme="projected"), start, key, steps
    )
    assert float(info.boundary_fraction[-1]) > 0.01  # mass exactly on {0, 1}
    assert float(info.boundary_distance.min()) == 0.0


def test_interacting_box_mean_matches_the_closed_form_fixed_point(x64):
    # Check 3 of the note (d = 5), at N = 5000, eta = 2e-3, T = 10.
    c = jnp.asarray([0.3, -0.2, 0.5, 0.0, 0.1])
    m = jnp.asarray([0.5, 0.5, 0.2, 0.8, 0.5])
    n, eta = 5000, 2e-3
    algorithm = particles.mmfld(
        particles.interacting_box_functional(c, 1.0, m),
        particles.box_mirror_map(0.0, 1.0),
        eta,
        0.1,
    )
    start = jax.random.uniform(jax.random.key(2), (n, 5), minval=0.05, maxval=0.95)
    state, info = _run(algorithm, start, jax.random.key(3), int(10 / eta))
    fixed = particles.interacting_box_fixed_point(c, 1.0, m, 0.1)
    _, variance = particles.truncated_exponential_moments(fixed.rates)
    se = np.sqrt(np.asarray(variance) / n)
    error = np.abs(np.asarray(state.positions.mean(axis=0)) - np.asarray(fixed.mean))
    assert np.all(error <= 4 * se + 0.003), (error, se)
    assert float(info.boundary_distance.min()) > 0


def test_simplex_mean_matches_quadrature(x64):
    # Check 4 of the note: c = (0, 1, -0.5), λ = 0.5 on Δ_2; by quadrature the mean is
    # (0.337842, 0.217856, 0.444302).
    c = np.array([0.0, 1.0, -0.5])
    reference = particles.simplex_linear_potential_mean(c, 0.5)
    np.testing.assert_allclose(reference, [0.337842, 0.217856, 0.444302], atol=1e-6)
    n, eta = 5000, 2e-3
    algorithm = particles.mmfld(
        particles.linear_potential_functional(jnp.asarray(c)),
        particles.simplex_mirror_map(),
        eta,
        0.5,
    )
    state, info = _run(algorithm, jnp.full((n, 3), 1 / 3), jax.random.key(4), int(10 / eta))
    x = np.asarray(state.positions)
    np.testing.assert_allclose(x.sum(axis=1), 1.0, atol=1e-12)
    assert float(info.boundary_distance.min()) > 0
    se = x.std(axis=0) / np.sqrt(n)
    assert np.all(np.abs(x.mean(axis=0) - reference) <= 4 * se + 0.003)


def test_objective_and_entropy_estimates_in_info(x64):
    # Uniform particles on [0, 1]^2 with F = 0: Ent(uniform) = 0, so the objective estimate ≈ 0.
    functional = particles.linear_potential_functional(jnp.zeros(2))
    algorithm = particles.mmfld(
        functional, particles.box_mirror_map(0.0, 1.0), 1e-4, 0.5, entropy_queries=2000
    )
    start = jax.random.uniform(jax.random.key(5), (4000, 2), jnp.float64, 1e-3, 1 - 1e-3)
    _, info = algorithm.step(jax.random.key(6), algorithm.init(start))
    assert abs(float(info.entropy)) < 0.05
    assert float(info.objective) == pytest.approx(0.5 * float(info.entropy), abs=1e-12)
    # The estimator on a Gaussian: Ent = -(k/2) log(2πe σ²).
    sigma = 0.3
    samples = sigma * jax.random.normal(jax.random.key(7), (4000, 2), jnp.float64)
    expected = -math.log(2 * math.pi * math.e * sigma**2)
    assert float(particles.nearest_neighbour_entropy(samples)) == pytest.approx(expected, abs=0.06)


@pytest.mark.parametrize("scheme", ["primal", "dual", "dual_split", "projected"])
def test_one_device_pmap_and_shard_map_on_eight_devices_agree(scheme):
    mesh = make_mesh((8,), ("particles",))
    functional, mirror_map, positions = _workers.problem()
    kwargs = dict(scheme=scheme, entropy_queries=8)
    single = jax.jit(particles.mmfld(functional, mirror_map, 1e-2, 0.1, **kwargs).step)
    per_block = particles.mmfld(
        functional, mirror_map, 1e-2, 0.1, axis_name="particles", **kwargs
    ).step
    sharded = particles.shard_step(per_block, mesh)
    # jax.pmap over the same per-block step: the key is replicated, each device holds n/8 rows.
    pmapped = jax.pmap(per_block, axis_name="particles", in_axes=(None, 0))
    state_1 = state_8 = particles.MFLDState(jnp.asarray(positions))
    state_p = particles.MFLDState(jnp.asarray(positions).reshape(8, -1, positions.shape[-1]))
    for i in range(5):
        key = jax.random.fold_in(jax.random.key(0), i)
        state_1, info_1 = single(key, state_1)
        state_8, info_8 = sharded(key, state_8)
        state_p, info_p = pmapped(key, state_p)
        np.testing.assert_allclose(state_8.positions, state_1.positions, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(
            state_p.positions.reshape(state_1.positions.shape),
            state_1.positions,
            rtol=1e-6,
            atol=1e-7,
        )
        for name in ("statistics", "energy", "entropy", "boundary_distance", "boundary_fraction"):
            np.testing.assert_allclose(
                getattr(info_8, name), getattr(info_1, name), rtol=1e-5, atol=1e-7, err_msg=name
            )
            # Info is pmean-ed: every device reports the same, equal to the one-device run.
            np.testing.assert_allclose(
                getattr(info_p, name),
                np.broadcast_to(getattr(info_1, name), getattr(info_p, name).shape),
                rtol=1e-5,
                atol=1e-7,
                err_msg=name,
            )
        assert int(info_8.clip_count) == int(info_1.clip_count)
    assert state_8.positions.sharding.spec[0] == "particles"  # rows stay split over the mesh


def test_mfld_under_pmap_equals_one_device():
    # The Euclidean algorithm's step under jax.pmap (key replicated, 4 rows per device).
    functional = particles.MeanFieldFunctional(lambda x: x, lambda x, m: x - m)
    positions = jnp.linspace(-1.0, 1.0, 32).reshape(32, 1)
    single = jax.jit(particles.mfld(functional, 0.1, 0.5).step)
    pmapped = jax.pmap(
        particles.mfld(functional, 0.1, 0.5, axis_name="particles").step,
        axis_name="particles",
        in_axes=(None, 0),
    )
    key = jax.random.key(7)
    state_1, info_1 = single(key, particles.MFLDState(positions))
    state_p, info_p = pmapped(key, particles.MFLDState(positions.reshape(8, 4, 1)))
    np.testing.assert_allclose(state_p.positions.reshape(32, 1), state_1.positions, rtol=1e-6)
    np.testing.assert_allclose(info_p.statistics[0], info_1.statistics, rtol=1e-6, atol=1e-7)


def test_two_processes_match_one_device():
    results = launch(_workers.sharded_mmfld_steps, 2, timeout=90.0)
    functional, mirror_map, positions = _workers.problem()
    step = jax.jit(particles.mmfld(functional, mirror_map, 1e-2, 0.1).step)
    state, means = particles.MFLDState(jnp.asarray(positions)), []
    for i in range(_workers.STEPS):
        state, info = step(jax.random.fold_in(jax.random.key(0), i), state)
        means.append(np.asarray(info.statistics))
    got = np.concatenate([r[0] for r in results])
    np.testing.assert_allclose(got, state.positions, rtol=1e-6, atol=1e-7)
    for r in results:
        np.testing.assert_allclose(r[1], np.stack(means), rtol=1e-6)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda f, b: b.init(jnp.asarray([[0.5], [1.0]])), ValueError, "positions must lie"),
        (lambda f, b: b.init(jnp.asarray([[0.5], [-0.1]])), ValueError, "particle 1"),
        (lambda f, b: b.init(jnp.asarray([0.5, 0.2])), ValueError, "positions must have shape"),
        (lambda f, b: b.init(jnp.asarray([[1], [0]])), TypeError, "positions must be a floating"),
        (
            lambda f, b: particles.mmfld(f, particles.box_mirror_map(0.0, 1.0), 0.0, 0.1),
            ValueError,
            "stepsize must be finite and > 0, got 0.0",
        ),
        (
            lambda f, b: particles.mmfld(f, particles.box_mirror_map(0.0, 1.0), -1e-3, 0.1),
            ValueError,
            "stepsize must be finite and > 0",
        ),
        (
            lambda f, b: particles.mmfld(f, particles.box_mirror_map(0.0, 1.0), 1e-3, -0.1),
            ValueError,
            "entropy_weight must be finite and > 0",
        ),
        (lambda f, b: particles.mfld(f, 1e-3, float("nan")), ValueError, "entropy_weight"),
        (
            lambda f, b: particles.mmfld(
                f, particles.box_mirror_map(0.0, 1.0), 1e-3, 0.1, scheme="x"
            ),
            ValueError,
            "scheme must be one of",
        ),
        (
            lambda f, b: particles.mmfld(f, particles.simplex_mirror_map(), 1e-3, 0.1).init(
                jnp.asarray([[0.5, 0.3, 0.3]])
            ),
            ValueError,
            "positions must lie strictly inside",
        ),
        (lambda f, b: particles.mmfld(f, "box", 1e-3, 0.1), TypeError, "mirror_map must be"),
    ],
)
def test_bad_input_raises_naming_the_argument(call, error, match):
    functional = particles.linear_potential_functional(jnp.asarray([0.3]))
    algorithm = particles.mmfld(functional, particles.box_mirror_map(0.0, 1.0), 1e-3, 0.1)
    with pytest.raises(error, match=match):
        call(functional, algorithm)


def test_kernel_checks_concrete_hyperparameters():
    kernel = particles.mmfld.build_kernel(particles.box_mirror_map(0.0, 1.0))
    functional = particles.linear_potential_functional(jnp.asarray([0.3]))
    state = particles.MFLDState(jnp.full((4, 1), 0.5))
    with pytest.raises(ValueError, match="stepsize must be finite and > 0"):
        kernel(jax.random.key(0), state, functional, 0.0, 0.1)
    with pytest.raises(ValueError, match="entropy_weight must be finite and > 0"):
        kernel(jax.random.key(0), state, functional, 1e-3, 0.0)


def test_particle_noise_is_threefry_through_the_inverse_normal_cdf():
    """The noise hash equals JAX's Threefry-2x32; each normal is √2 erf⁻¹ of its word (scipy)."""
    import scipy.special
    import scipy.stats
    from jax.extend.random import threefry_2x32

    from jaxlab._src.sampling import threefry2x32
    from jaxlab.particles._noise import erf_inverse

    words = jnp.asarray([0x12345678, 0x9ABCDEF0], jnp.uint32)
    counters = jax.random.bits(jax.random.key(3), (2, 64), jnp.uint32)
    first, second = jax.jit(threefry2x32)((words[0], words[1]), (counters[0], counters[1]))
    reference = threefry_2x32(words, counters.reshape(-1))  # halves are the two counter words
    np.testing.assert_array_equal(np.concatenate([first, second]), np.asarray(reference))

    # erf⁻¹ by Giles's polynomials against scipy, over (-1, 1) and into both tails.
    tails = 1.0 - np.logspace(-15, -1, 60)
    u = np.concatenate([np.linspace(-0.999, 0.999, 4001), tails, -tails])
    with jax.enable_x64(True):
        np.testing.assert_allclose(erf_inverse(jnp.asarray(u)), scipy.special.erfinv(u), rtol=2e-15)
    u32 = u[np.abs(u.astype(np.float32)) < 1].astype(np.float32)
    np.testing.assert_allclose(
        erf_inverse(jnp.asarray(u32)), scipy.special.erfinv(u32.astype(np.float64)), rtol=5e-7
    )
    assert np.array_equal(erf_inverse(jnp.asarray([1.0, -1.0])), [np.inf, -np.inf])

    # A second path to particle i's coordinate j: word j % 2 of threefry(key, (i, j // 2)), its
    # top 23 bits as u in (-1, 1), then √2 erf⁻¹(u) (scipy).
    key = jax.random.key(11)
    normal = jax.jit(particles.particle_noise, static_argnums=(1, 2))
    noise = np.asarray(normal(key, 4000, 5))
    i, j = np.arange(4000).repeat(5), np.tile(np.arange(5), 4000)
    hashed = np.asarray(
        threefry_2x32(jax.random.key_data(key), np.concatenate([i, j // 2]).astype(np.uint32))
    ).reshape(2, -1)
    word = np.where(j % 2 == 0, hashed[0], hashed[1])
    u = ((word >> 9) | np.uint32(0x3F800000)).view(np.float32).astype(np.float64) - 1.0
    u = 2 * u - 1  # in [-1, 1) on a 2^-22 lattice (the library nudges -1 to the next float)
    # Compared in u: the inverse CDF is steep in the tails, its inverse is flat there.
    np.testing.assert_allclose(scipy.special.erf(noise.reshape(-1) / np.sqrt(2)), u, atol=5e-7)
    assert np.all(np.isfinite(noise))
    ks = scipy.stats.kstest(noise.reshape(-1), "norm")
    assert ks.pvalue > 1e-3, f"KS test against N(0,1): statistic {ks.statistic}, p {ks.pvalue}"
    # Columns are independent streams: their correlation sits within a few 1/sqrt(N).
    correlation = np.corrcoef(noise.T) - np.eye(5)
    assert np.max(np.abs(correlation)) < 5 / np.sqrt(4000)
    # The hash stage is public: the noise is the inverse CDF of particles.particle_uniform.
    uniform = np.asarray(jax.jit(particles.particle_uniform, static_argnums=(1, 2))(key, 4000, 5))
    np.testing.assert_array_equal(uniform.reshape(-1), u / 2 + 0.5)
    # A particle's noise depends on (key, particle index) only: a longer run extends it, and
    # under shard_map each device draws its rows (8 devices, 500 particles each): the same
    # hash, and the same normals up to the rounding of another program (FMA contraction).
    np.testing.assert_array_equal(np.asarray(normal(key, 4100, 5))[:4000], noise)

    def both(k):
        return (
            particles.particle_uniform(k, 500, 5, axis_name="particles"),
            particles.particle_noise(k, 500, 5, axis_name="particles"),
        )

    sharded = jax.jit(
        jax.shard_map(
            both, mesh=make_mesh((8,), ("particles",)), in_specs=P(), out_specs=P("particles")
        )
    )
    sharded_uniform, sharded_noise = sharded(key)
    np.testing.assert_array_equal(sharded_uniform, uniform)
    np.testing.assert_allclose(sharded_noise, noise, rtol=1e-6, atol=1e-6)
    # More coordinates than the column-wise layout takes: the same numbers, one (N, d) loop.
    np.testing.assert_array_equal(np.asarray(normal(key, 300, 12))[:, :5], noise[:300])


def _box_step(x, key, c, eta, lam, sign=1.0):
    """The primal step on [0, 1]^d for a linear potential, written out (NumPy), before the clip."""
    x = np.asarray(x)
    xi = np.asarray(particles.particle_noise(key, x.shape[0], x.shape[1], x.dtype))
    drift = -x * (1 - x) * np.asarray(c) + lam * (1 - 2 * x)
    return x + eta * drift + sign * np.sqrt(2 * lam * eta) * np.sqrt(x * (1 - x)) * xi


def test_clip_count_and_noise_sign_against_the_step_written_out(x64):
    c, eta, lam = np.array([3.0, -2.0]), 0.05, 0.5  # large steps: the clip fires often
    algorithm = particles.mmfld(
        particles.linear_potential_functional(jnp.asarray(c)),
        particles.box_mirror_map(0.0, 1.0),
        eta,
        lam,
    )
    x = jax.random.uniform(jax.random.key(0), (500, 2), jnp.float64, 1e-3, 1 - 1e-3)
    key = jax.random.key(1)
    step = jax.jit(algorithm.step)
    for sign in (1.0, -1.0):
        state, info = step(key, algorithm.init(x), noise_sign=sign)
        proposal = _box_step(x, key, c, eta, lam, sign)
        margin = 1e-9
        expected = np.clip(proposal, margin, 1 - margin)
        np.testing.assert_allclose(state.positions, expected, rtol=1e-12, atol=1e-15)
        clipped = np.any((proposal < margin) | (proposal > 1 - margin), axis=1)
        assert 10 < int(info.clip_count) == int(clipped.sum())
        assert int(info.nonfinite_count) == 0 and int(info.outside_count) == 0
        assert float(info.boundary_distance) == pytest.approx(
            np.min(np.minimum(expected, 1 - expected))
        )
    with pytest.raises(ValueError, match="noise_sign must be 1 or -1"):
        algorithm.step(key, algorithm.init(x), noise_sign=0.5)


def test_ensemble_step_runs_antithetic_pairs_and_independent_systems(x64):
    algorithm = particles.mmfld(
        particles.interacting_box_functional(
            jnp.asarray([0.3, -0.2]), 1.0, jnp.asarray([0.5, 0.8])
        ),
        particles.box_mirror_map(0.0, 1.0),
        1e-2,
        0.1,
    )
    x = jax.random.uniform(jax.random.key(2), (4, 6, 2), jnp.float64, 0.05, 0.95)
    key = jax.random.key(3)
    paired = jax.jit(particles.ensemble_step(algorithm.step))
    state, info = paired(key, particles.MFLDState(x))
    # A second path: system by system, pair p on key p, the second system with -ξ.
    single = jax.jit(algorithm.step)
    keys = jnp.repeat(jax.random.split(key, 2), 2, axis=0)
    for system, sign in enumerate((1.0, -1.0, 1.0, -1.0)):
        alone, alone_info = single(keys[system], particles.MFLDState(x[system]), noise_sign=sign)
        np.testing.assert_allclose(state.positions[system], alone.positions, rtol=1e-13)
        np.testing.assert_allclose(info.statistics[system], alone_info.statistics, rtol=1e-13)
    # From one start the pair's noise cancels: its average is the deterministic Euler step.
    together, _ = paired(key, particles.MFLDState(jnp.broadcast_to(x[0], x.shape)))
    x0 = np.asarray(x[0])
    g = np.asarray([0.3, -0.2]) + (x0.mean(axis=0) - [0.5, 0.8])  # c + κ(m̄ - m)
    euler = x0 + 1e-2 * (-x0 * (1 - x0) * g + 0.1 * (1 - 2 * x0))
    pair_mean = (together.positions[0] + together.positions[1]) / 2
    np.testing.assert_allclose(pair_mean, euler, rtol=1e-12)
    independent, _ = jax.jit(particles.ensemble_step(algorithm.step, antithetic=False))(
        key, particles.MFLDState(x)
    )
    for system, system_key in enumerate(jax.random.split(key, 4)):
        alone, _ = single(system_key, particles.MFLDState(x[system]))
        np.testing.assert_allclose(independent.positions[system], alone.positions, rtol=1e-13)
    with pytest.raises(ValueError, match="even number of systems"):
        particles.ensemble_step(algorithm.step)(key, particles.MFLDState(x[:3]))


def test_time_average_equals_the_step_by_step_average(x64):
    algorithm = particles.mmfld(
        particles.linear_potential_functional(jnp.asarray([0.3])),
        particles.box_mirror_map(0.0, 1.0),
        1e-2,
        0.1,
    )
    state = algorithm.init(jnp.linspace(0.1, 0.9, 8).reshape(8, 1))
    key = jax.random.key(4)

    def statistic(info):
        return {"mean": info.statistics, "energy": info.energy}

    final, average = particles.time_average(algorithm.step, state, key, 20, statistic, burn_in=5)
    manual, values, step = state, [], jax.jit(algorithm.step)
    for t, step_key in enumerate(jax.random.split(key, 20)):
        manual, info = step(step_key, manual)
        if t >= 5:
            values.append((np.asarray(info.statistics), float(info.energy)))
    np.testing.assert_allclose(final.positions, manual.positions, rtol=1e-13)
    np.testing.assert_allclose(average["mean"], np.mean([v[0] for v in values], axis=0), rtol=1e-13)
    assert float(average["energy"]) == pytest.approx(np.mean([v[1] for v in values]), rel=1e-13)
    with pytest.raises(ValueError, match="burn_in must be an int in \\[0, 19\\]"):
        particles.time_average(algorithm.step, state, key, 20, statistic, burn_in=20)


def test_info_counts_traced_positions_outside_the_domain_and_nonfinite_results():
    """init cannot see traced positions; the step counts those outside and the NaN they give."""
    algorithm = particles.mmfld(
        particles.linear_potential_functional(jnp.asarray([0.3])),
        particles.box_mirror_map(0.0, 1.0),
        1e-3,
        0.1,
    )
    start = jnp.asarray([[0.5], [1.5], [-0.5], [0.25], [jnp.nan]])
    state, info = jax.jit(lambda x: algorithm.step(jax.random.key(0), algorithm.init(x)))(start)
    outside = ~np.isfinite(np.asarray(start[:, 0])) | (np.asarray(start[:, 0]) < 0)
    outside |= np.asarray(start[:, 0]) > 1
    assert int(info.outside_count) == int(outside.sum()) == 3
    assert int(info.nonfinite_count) == int((~np.isfinite(np.asarray(state.positions))).sum()) == 3
    _, valid = algorithm.step(jax.random.key(0), algorithm.init(jnp.full((4, 1), 0.5)))
    assert int(valid.outside_count) == 0 and int(valid.nonfinite_count) == 0
    with pytest.raises(ValueError, match="positions must lie strictly inside"):
        algorithm.init(start[:4])
    with pytest.raises(ValueError, match="positions must be finite"):
        algorithm.init(start)


def test_positions_of_the_wrong_dimension_and_unbound_axis_raise():
    functional = particles.linear_potential_functional(jnp.asarray([0.3, 0.1]))
    box = particles.box_mirror_map(jnp.zeros(2), jnp.ones(2))
    algorithm = particles.mmfld(functional, box, 1e-3, 0.1)
    with pytest.raises(ValueError, match="positions of dimension 3 do not fit the mirror map"):
        algorithm.init(jnp.full((4, 3), 0.5))
    with pytest.raises(ValueError, match="positions of dimension 1 do not fit the mirror map"):
        algorithm.init(jnp.full((4, 1), 0.5))
    scalar_box = particles.mmfld(functional, particles.box_mirror_map(0.0, 1.0), 1e-3, 0.1)
    with pytest.raises(ValueError, match="positions of dimension 1 do not fit the functional"):
        scalar_box.init(jnp.full((4, 1), 0.5))
    with pytest.raises(ValueError, match="entropy_queries must be an int in \\[0, 4\\]"):
        particles.mmfld(functional, box, 1e-3, 0.1, entropy_queries=5).step(
            jax.random.key(0), algorithm.init(jnp.full((4, 2), 0.5))
        )
    sharded = particles.mmfld(functional, box, 1e-3, 0.1, axis_name="particles")
    with pytest.raises(ValueError, match="axis_name 'particles' is not bound"):
        sharded.step(jax.random.key(0), algorithm.init(jnp.full((4, 2), 0.5)))
    with pytest.raises(TypeError, match="rng_key must be a JAX PRNG key"):
        algorithm.step(None, algorithm.init(jnp.full((4, 2), 0.5)))


def test_step_size_keyword_is_a_deprecated_alias_of_stepsize():
    """``step_size=`` (the old public name) still works, warns, and gives the same step."""
    mirror_map = particles.box_mirror_map(0.0, 1.0)
    functional = particles.linear_potential_functional(jnp.asarray([0.3]))
    state = particles.MFLDState(jnp.full((4, 1), 0.5))
    key = jax.random.key(0)
    kernel = particles.mmfld.build_kernel(mirror_map)
    expected, _ = kernel(key, state, functional, stepsize=1e-3, entropy_weight=0.1)
    with pytest.warns(DeprecationWarning, match="step_size= is deprecated, use stepsize="):
        old, _ = kernel(key, state, functional, step_size=1e-3, entropy_weight=0.1)
    np.testing.assert_array_equal(old.positions, expected.positions)
    for factory, args in (
        (particles.mmfld, (functional, mirror_map)),
        (particles.mfld, (functional,)),
    ):
        new = factory(*args, stepsize=1e-3, entropy_weight=0.1).step(key, state)[0]
        with pytest.warns(DeprecationWarning, match="step_size= is deprecated"):
            algorithm = factory(*args, step_size=1e-3, entropy_weight=0.1)
        np.testing.assert_array_equal(algorithm.step(key, state)[0].positions, new.positions)
    with pytest.raises(TypeError, match="both stepsize= and its deprecated name step_size="):
        kernel(key, state, functional, stepsize=1e-3, step_size=1e-3, entropy_weight=0.1)
