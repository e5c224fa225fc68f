"""Bad-input probes for jaxlab.particles."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab import particles as p
from tests.bad_input import no_probes, probes, raises, status

_P = "jaxlab.particles."
_NAN = float("nan")


def _linear(dim: int = 1):
    return p.linear_potential_functional(jnp.full((dim,), 0.3))


def _box():
    return p.box_mirror_map(0.0, 1.0)


def _kernel(**kwargs):
    return p.mmfld.build_kernel(_box(), **kwargs)


def _inside(n: int = 4, dim: int = 1):
    return p.MFLDState(jnp.full((n, dim), 0.5))


def _traced_outside_step():
    """Positions outside the box, traced (init cannot see them): the Info counts them."""
    algorithm = p.mmfld(_linear(), _box(), 1e-3, 0.1)
    start = jnp.asarray([[0.5], [1.5], [-0.5], [0.25]])
    return jax.jit(lambda x: algorithm.step(jax.random.key(0), algorithm.init(x))[1])(start)


def _nonfinite_step():
    """A NaN step size passed traced: every particle turns NaN and the Info says so."""
    kernel = p.mfld.build_kernel()
    return jax.jit(lambda eta: kernel(jax.random.key(0), _inside(3), _linear(), eta, 0.5)[1])(
        jnp.asarray(_NAN)
    )


# Containers: constructed by the library, no argument to validate.
for _name, _what in (
    ("MirrorMap", "a NamedTuple of one-particle functions, built by the *_mirror_map factories"),
    ("MFLDInfo", "a diagnostics NamedTuple returned by the step"),
    ("MFLDState", "a state NamedTuple; its positions are checked by init and the step"),
    ("MeanFieldFunctional", "a NamedTuple of user functions; shapes are checked by mmfld.init"),
    ("SamplingAlgorithm", "the (init, step) NamedTuple every sampler returns"),
    ("BoxFixedPoint", "a result NamedTuple of interacting_box_fixed_point"),
    ("LinearPhaseFit", "a result NamedTuple of linear_phase_fit"),
    ("PowerLawFit", "a result NamedTuple of power_law_fit"),
    ("FiniteParticleMoments", "a result NamedTuple of interacting_box_finite_particle_moments"),
):
    no_probes(_P + _name, _what)
no_probes(_P + "euclidean_mirror_map", "takes no arguments")
no_probes(_P + "simplex_mirror_map", "takes no arguments (the dimension is checked by mmfld.init)")

probes(
    _P + "box_mirror_map",
    raises("lower", lambda: p.box_mirror_map("0", 1.0), TypeError),
    raises("upper", lambda: p.box_mirror_map(0.0, None), TypeError),
    raises("upper", lambda: p.box_mirror_map(0.0, np.inf), ValueError),
    raises("lower", lambda: p.box_mirror_map(jnp.zeros(2), jnp.ones(3)), ValueError),
    raises("upper", lambda: p.box_mirror_map(1.0, 1.0), ValueError),
    raises("lower", lambda: p.box_mirror_map(0.0 + 1j, 1.0), TypeError),
)

probes(
    _P + "mmfld",
    raises("stepsize", lambda: p.mmfld(_linear(), _box(), -1e-3, 0.1), ValueError),
    raises("entropy_weight", lambda: p.mmfld(_linear(), _box(), 1e-3, "0.1"), TypeError),
    raises("stepsize", lambda: p.mmfld(_linear(), _box(), None, 0.1), TypeError),
    raises("scheme", lambda: p.mmfld(_linear(), _box(), 1e-3, 0.1, scheme="euler"), ValueError),
    raises("axis_name", lambda: p.mmfld(_linear(), _box(), 1e-3, 0.1, axis_name=3), TypeError),
    raises("mirror_map", lambda: p.mmfld(_linear(), "box", 1e-3, 0.1), TypeError),
    raises(
        "positions",
        lambda: p.mmfld(_linear(), _box(), 1e-3, 0.1).init(jnp.asarray([[0.5], [1.5]])),
        ValueError,
        "outside the box",
    ),
    raises(
        "positions",
        lambda: p.mmfld(_linear(), _box(), 1e-3, 0.1).init(jnp.full((4, 3), 0.5)),
        ValueError,
        "dimension 3 against a 1-D functional",
    ),
    raises(
        "positions",
        lambda: p.mmfld(_linear(3), p.box_mirror_map(jnp.zeros(2), jnp.ones(2)), 1e-3, 0.1).init(
            jnp.full((4, 3), 0.5)
        ),
        ValueError,
        "dimension 3 against a 2-bound box",
    ),
    raises(
        "positions",
        lambda: p.mmfld(_linear(1), p.simplex_mirror_map(), 1e-3, 0.1).init(jnp.ones((4, 1))),
        ValueError,
        "one coordinate on the simplex",
    ),
    raises(
        "positions",
        lambda: p.mmfld(_linear(), _box(), 1e-3, 0.1).init(jnp.asarray([[0.5], [_NAN]])),
        ValueError,
        "NaN",
    ),
    raises(
        "entropy_queries",
        lambda: p.mmfld(_linear(), _box(), 1e-3, 0.1, entropy_queries=9).step(
            jax.random.key(0), _inside(4)
        ),
        ValueError,
        "more queries than particles",
    ),
    raises(
        "rng_key",
        lambda: p.mmfld(_linear(), _box(), 1e-3, 0.1).step(None, _inside(4)),
        TypeError,
    ),
    raises(
        "noise_sign",
        lambda: p.mmfld(_linear(), _box(), 1e-3, 0.1).step(
            jax.random.key(0), _inside(4), noise_sign=0.5
        ),
        ValueError,
        "a noise sign other than ±1",
    ),
    raises(
        "noise_sign",
        lambda: p.mmfld(_linear(), _box(), 1e-3, 0.1).step(
            jax.random.key(0), _inside(4), noise_sign="-1"
        ),
        TypeError,
    ),
    raises(
        "axis_name",
        lambda: p.mmfld(_linear(), _box(), 1e-3, 0.1, axis_name="particles").step(
            jax.random.key(0), _inside(4)
        ),
        ValueError,
        "outside vmap/shard_map",
    ),
    status(
        "positions",
        _traced_outside_step,
        lambda info: int(info.outside_count) == 2 and int(info.nonfinite_count) == 2,
        "traced positions outside the box counted",
    ),
)

probes(
    _P + "mfld",
    raises("stepsize", lambda: p.mfld(_linear(), _NAN, 0.5), ValueError),
    raises("entropy_weight", lambda: p.mfld(_linear(), 1e-2, True), TypeError),
    raises("entropy_queries", lambda: p.mfld(_linear(), 1e-2, 0.5, entropy_queries=-1)),
    raises(
        "positions",
        lambda: p.mfld(_linear(), 1e-2, 0.5).init(jnp.zeros((4, 1), jnp.int32)),
        TypeError,
    ),
    raises("positions", lambda: p.mfld(_linear(), 1e-2, 0.5).init("x"), TypeError),
    raises("positions", lambda: p.mfld(_linear(), 1e-2, 0.5).init(jnp.zeros(4)), ValueError),
    status(
        "stepsize",
        _nonfinite_step,
        lambda info: int(info.nonfinite_count) == 3,
        "a traced NaN step size makes every particle NaN, counted",
    ),
)

probes(
    _P + "nearest_neighbour_entropy",
    raises("positions", lambda: p.nearest_neighbour_entropy(jnp.zeros(5)), ValueError),
    raises("positions", lambda: p.nearest_neighbour_entropy(jnp.zeros((1, 2))), ValueError),
    raises("positions", lambda: p.nearest_neighbour_entropy(None), TypeError),
    raises("num_queries", lambda: p.nearest_neighbour_entropy(jnp.eye(3), 0), ValueError),
    raises("num_queries", lambda: p.nearest_neighbour_entropy(jnp.eye(3), 2.0), TypeError),
)

probes(
    _P + "shard_step",
    raises("step", lambda: p.shard_step(None, jax.make_mesh((1,), ("particles",))), TypeError),
    raises("mesh", lambda: p.shard_step(lambda k, s: (s, None), "mesh"), TypeError),
    raises(
        "axis_name",
        lambda: p.shard_step(lambda k, s: (s, None), jax.make_mesh((1,), ("particles",)), "x"),
        ValueError,
    ),
    raises(
        "axis_name",
        lambda: p.shard_step(lambda k, s: (s, None), jax.make_mesh((1,), ("particles",)), None),
        TypeError,
    ),
)

probes(
    _P + "interacting_box_fixed_point",
    raises("entropy_weight", lambda: p.interacting_box_fixed_point([0.3], 1.0, [0.5], 0.0)),
    raises("interaction", lambda: p.interacting_box_fixed_point([0.3], -1.0, [0.5], 0.1)),
    raises(
        "iterations", lambda: p.interacting_box_fixed_point([0.3], 1.0, [0.5], 0.1, iterations=0)
    ),
    raises("coefficient", lambda: p.interacting_box_fixed_point(["a"], 1.0, [0.5], 0.1), TypeError),
    raises("target", lambda: p.interacting_box_fixed_point([0.3], 1.0, [0.5, 0.5], 0.1)),
    raises("upper", lambda: p.interacting_box_fixed_point([0.3], 1.0, [0.5], 0.1, upper=0.0)),
)

probes(
    _P + "interacting_box_functional",
    raises("interaction", lambda: p.interacting_box_functional([0.3], _NAN, [0.5])),
    raises("interaction", lambda: p.interacting_box_functional([0.3], "1", [0.5]), TypeError),
    raises("target", lambda: p.interacting_box_functional([0.3], 1.0, [0.5, 0.1])),
    raises("coefficient", lambda: p.interacting_box_functional([np.inf], 1.0, [0.5])),
)

probes(
    _P + "linear_potential_functional",
    raises("coefficient", lambda: p.linear_potential_functional(0.3)),
    raises("coefficient", lambda: p.linear_potential_functional([_NAN])),
    raises("coefficient", lambda: p.linear_potential_functional("0.3"), TypeError),
    raises("coefficient", lambda: p.linear_potential_functional(None), TypeError),
)

probes(
    _P + "truncated_exponential_moments",
    raises("rate", lambda: p.truncated_exponential_moments("3"), TypeError),
    raises("rate", lambda: p.truncated_exponential_moments(jnp.asarray([_NAN]))),
    raises("upper", lambda: p.truncated_exponential_moments(1.0, 1.0, 0.0)),
    raises("lower", lambda: p.truncated_exponential_moments(1.0, None), TypeError),
)

probes(
    _P + "two_layer_network_functional",
    raises("inputs", lambda: p.two_layer_network_functional(jnp.ones(3), jnp.ones(3))),
    raises("targets", lambda: p.two_layer_network_functional(jnp.ones((3, 2)), jnp.ones(4))),
    raises("inputs", lambda: p.two_layer_network_functional("x", jnp.ones(3)), TypeError),
    raises("targets", lambda: p.two_layer_network_functional(jnp.ones((3, 2)), [_NAN] * 3)),
    raises(
        "positions",
        lambda: p.mfld(
            p.two_layer_network_functional(jnp.ones((3, 2)), jnp.ones(3)), 1e-2, 0.5
        ).init(jnp.zeros((4, 2))),
        ValueError,
        "neurons of the wrong width",
    ),
)

probes(
    _P + "interacting_box_finite_particle_mean",
    raises("num_particles", lambda: p.interacting_box_finite_particle_mean(0.5, 1.0, 0.2, 0.1, 0)),
    raises("entropy_weight", lambda: p.interacting_box_finite_particle_mean(0.5, 1.0, 0.2, 0, 16)),
    raises(
        "grid_step", lambda: p.interacting_box_finite_particle_mean(0.5, 1.0, 0.2, 0.1, 16, 0.0)
    ),
    raises(
        "coefficient",
        lambda: p.interacting_box_finite_particle_mean("0.5", 1.0, 0.2, 0.1, 16),
        TypeError,
    ),
    raises("target", lambda: p.interacting_box_finite_particle_mean(0.5, 1.0, _NAN, 0.1, 16)),
    raises(
        "num_particles",
        lambda: p.interacting_box_finite_particle_mean(0.5, 1.0, 0.2, 0.1, 16.0),
        TypeError,
    ),
)

probes(
    _P + "simplex_linear_potential_mean",
    raises("coefficient", lambda: p.simplex_linear_potential_mean([0.0, 1.0], 0.5)),
    raises("coefficient", lambda: p.simplex_linear_potential_mean("abc", 0.5), TypeError),
    raises("coefficient", lambda: p.simplex_linear_potential_mean([0.0, _NAN, 1.0], 0.5)),
    raises("entropy_weight", lambda: p.simplex_linear_potential_mean([0.0, 1.0, 2.0], -0.5)),
)

probes(
    _P + "teacher_network_data",
    raises("rng_key", lambda: p.teacher_network_data(None, 10, 2), TypeError),
    raises("num_samples", lambda: p.teacher_network_data(jax.random.key(0), 0, 2)),
    raises("dim", lambda: p.teacher_network_data(jax.random.key(0), 10, 2.5), TypeError),
    raises(
        "weight_bound", lambda: p.teacher_network_data(jax.random.key(0), 10, 2, weight_bound=-1)
    ),
    raises("output_weights", lambda: p.teacher_network_data(jax.random.key(0), 10, 2, (1.0, _NAN))),
)

probes(
    _P + "linear_phase_fit",
    raises("start_fraction", lambda: p.linear_phase_fit([0, 1, 2], [3, 2, 1], start_fraction=0)),
    raises("tail_fraction", lambda: p.linear_phase_fit([0, 1, 2], [3, 2, 1], tail_fraction=_NAN)),
    raises("times", lambda: p.linear_phase_fit(["a", "b"], [1.0, 2.0]), TypeError),
    raises("objective", lambda: p.linear_phase_fit([0.0, 1.0], [1.0, _NAN])),
    raises("times", lambda: p.linear_phase_fit([0.0, 1.0, 2.0], [1.0, 2.0])),
)

_C5, _M5 = [0.3, -0.2, 0.5, 0.0, 0.1], [0.5, 0.5, 0.2, 0.8, 0.5]


def _step():
    return p.mmfld(_linear(), _box(), 1e-3, 0.1).step


probes(
    _P + "ensemble_step",
    raises("step", lambda: p.ensemble_step(None), TypeError),
    raises("antithetic", lambda: p.ensemble_step(_step(), antithetic=1), TypeError),
    raises(
        "state.positions",
        lambda: p.ensemble_step(_step())(jax.random.key(0), p.MFLDState(jnp.full((3, 4, 1), 0.5))),
        ValueError,
        "an odd number of systems in antithetic pairs",
    ),
    raises(
        "state.positions",
        lambda: p.ensemble_step(_step())(jax.random.key(0), _inside(4)),
        ValueError,
        "one system (2-D positions)",
    ),
    raises(
        "rng_key",
        lambda: p.ensemble_step(_step())(None, p.MFLDState(jnp.full((2, 4, 1), 0.5))),
        TypeError,
    ),
    raises("state", lambda: p.ensemble_step(_step())(jax.random.key(0), jnp.ones((2, 4, 1)))),
)

probes(
    _P + "time_average",
    raises("step", lambda: p.time_average(None, _inside(), jax.random.key(0), 5, jnp.sum)),
    raises(
        "statistic_fn", lambda: p.time_average(_step(), _inside(), jax.random.key(0), 5, "mean")
    ),
    raises("num_steps", lambda: p.time_average(_step(), _inside(), jax.random.key(0), 0, jnp.sum)),
    raises(
        "burn_in",
        lambda: p.time_average(_step(), _inside(), jax.random.key(0), 5, jnp.sum, burn_in=5),
    ),
    raises(
        "num_steps",
        lambda: p.time_average(_step(), _inside(), jax.random.key(0), 5.0, jnp.sum),
        TypeError,
    ),
    raises("rng_key", lambda: p.time_average(_step(), _inside(), None, 5, jnp.sum), TypeError),
    raises(
        "state", lambda: p.time_average(_step(), jnp.ones((4, 1)), jax.random.key(0), 5, jnp.sum)
    ),
)

probes(
    _P + "power_law_fit",
    raises("sizes", lambda: p.power_law_fit([4.0], [0.1])),
    raises("values", lambda: p.power_law_fit([4.0, 8.0], [0.1, -0.05])),
    raises("values", lambda: p.power_law_fit([4.0, 8.0], [0.1, _NAN])),
    raises("standard_errors", lambda: p.power_law_fit([4.0, 8.0], [0.1, 0.05], [0.01])),
    raises("standard_errors", lambda: p.power_law_fit([4.0, 8.0], [0.1, 0.05], [0.01, 0.0])),
    raises("sizes", lambda: p.power_law_fit(["a", "b"], [0.1, 0.05]), TypeError),
)

probes(
    _P + "interacting_box_finite_particle_moments",
    raises(
        "num_particles", lambda: p.interacting_box_finite_particle_moments(_C5, 1.0, _M5, 0.1, 0)
    ),
    raises(
        "num_particles",
        lambda: p.interacting_box_finite_particle_moments(_C5, 1.0, _M5, 0.1, 4.0),
        TypeError,
    ),
    raises(
        "entropy_weight", lambda: p.interacting_box_finite_particle_moments(_C5, 1.0, _M5, 0, 4)
    ),
    raises(
        "interaction", lambda: p.interacting_box_finite_particle_moments(_C5, -1.0, _M5, 0.1, 4)
    ),
    raises(
        "grid_step",
        lambda: p.interacting_box_finite_particle_moments(_C5, 1.0, _M5, 0.1, 4, grid_step=0.7),
    ),
    raises("target", lambda: p.interacting_box_finite_particle_moments(_C5, 1.0, [0.5], 0.1, 4)),
    raises(
        "coefficient",
        lambda: p.interacting_box_finite_particle_moments(["x"] * 5, 1.0, _M5, 0.1, 4),
        TypeError,
    ),
)

probes(
    _P + "interacting_box_stationary_sample",
    raises(
        "rng_key",
        lambda: p.interacting_box_stationary_sample(None, _C5, 1.0, _M5, 0.1, 4, 2),
        TypeError,
    ),
    raises(
        "num_systems",
        lambda: p.interacting_box_stationary_sample(jax.random.key(0), _C5, 1.0, _M5, 0.1, 4, 0),
    ),
    raises(
        "num_particles",
        lambda: p.interacting_box_stationary_sample(jax.random.key(0), _C5, 1.0, _M5, 0.1, 0, 2),
    ),
    raises(
        "entropy_weight",
        lambda: p.interacting_box_stationary_sample(jax.random.key(0), _C5, 1.0, _M5, _NAN, 4, 2),
    ),
    raises(
        "independent",
        lambda: p.interacting_box_stationary_sample(
            jax.random.key(0), _C5, 1.0, _M5, 0.1, 4, 2, independent="yes"
        ),
        TypeError,
    ),
    raises(
        "target",
        lambda: p.interacting_box_stationary_sample(
            jax.random.key(0), _C5, 1.0, _M5[:2], 0.1, 4, 2
        ),
    ),
)

for _draw in ("particle_noise", "particle_uniform"):
    _fn = getattr(p, _draw)
    probes(
        _P + _draw,
        raises("rng_key", lambda f=_fn: f(None, 4, 2), TypeError),
        raises("num_particles", lambda f=_fn: f(jax.random.key(0), -1, 2)),
        raises("num_particles", lambda f=_fn: f(jax.random.key(0), 4.0, 2), TypeError),
        raises("dim", lambda f=_fn: f(jax.random.key(0), 4, 0)),
        raises("dtype", lambda f=_fn: f(jax.random.key(0), 4, 2, jnp.int32), TypeError),
        raises(
            "axis_name",
            lambda f=_fn: f(jax.random.key(0), 4, 2, axis_name="particles"),
            ValueError,
            "outside vmap/shard_map",
        ),
    )
probes(
    _P + "particle_uniform",
    raises(
        "rng_key",
        lambda: p.particle_uniform(jax.random.key(0, impl="rbg"), 4, 2),
        ValueError,
        "a key of another PRNG",
    ),
)

_IDENTITY_SAMPLER = p.SamplingAlgorithm(lambda x: x, lambda k, s: (s, None))
probes(
    _P + "run_sampler",
    raises("algorithm", lambda: p.run_sampler(3, jnp.zeros((2, 1)), jax.random.key(0), 2)),
    raises(
        "record",
        lambda: p.run_sampler(_IDENTITY_SAMPLER, jnp.zeros((2, 1)), jax.random.key(0), 2, record=3),
    ),
)
