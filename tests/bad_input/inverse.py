"""Bad-input probes for jaxlab.inverse (every public callable of its ``__all__``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxlab import inverse as I
from jaxlab.solvers import SolverStatus
from tests.bad_input import no_probes, probes, raises, status

NAN, INF = float("nan"), float("inf")
_P = "jaxlab.inverse."
_V = I.GaussianMixtureFlow.velocity
_A = [[1.0, 0.0]]


def _key():
    return jax.random.key(0)


def _flow():
    return I.three_mode_mixture()


def _op():
    return I.matrix_operator(jnp.array(_A))


def _mask_op():
    return I.inpainting_operator(jnp.ones(5))  # 5 pixels, for signals of 2 features: wrong


def _toy_with_a_nan_measurement():
    # The toy tests' configuration (8 problems, N = 8, 300 iterations: the same compiled
    # programs), with problem 3's measurement NaN: it must be reported, not absorbed.
    flow = _flow()
    y = flow.sample(_key(), 8)[:, :1].at[3].set(NAN)
    z0 = jax.random.normal(jax.random.key(1), (8, 2))
    return flow, z0, y


def _nan_reported(out, field):
    codes = np.asarray(out.status)
    return (
        codes[3] == SolverStatus.NONFINITE
        and np.all(np.delete(codes, 3) != SolverStatus.NONFINITE)
        and int(out.nonfinite_count[3]) == 1
        and not np.all(np.isfinite(np.asarray(getattr(out, field))[3]))
    )


def _single_nan():
    flow, z0, y = _toy_with_a_nan_measurement()
    solver = I.SingleShooting(_V, 0.05, num_steps=8, maxiter=300)
    return I.single_shooting(solver, flow, z0, y, _op())


def _multi_nan():
    flow, z0, y = _toy_with_a_nan_measurement()
    return I.msflow(I.MSFlow(_V, 0.05, steps_per_segment=2, maxiter=300), flow, z0, y, _op())


for _name, _reason in {
    "MSFlowResult": "a NamedTuple returned by msflow",
    "MSFlowState": "a state NamedTuple built by MSFlow.init_state",
    "ShootingResult": "a NamedTuple returned by single_shooting",
    "SingleShootingState": "a state NamedTuple built by SingleShooting.init_state",
    "DigitsSplit": "a NamedTuple returned by digits_images",
    "StepMemory": "a NamedTuple returned by step_memory",
    "Reconstruction": "a NamedTuple returned by BatchedReconstructor.reconstruct",
    "LinearOperator": "an abstract base class (subclasses define matvec/rmatvec); operators are "
    "checked where they are used (check_operator)",
    "InpaintingOperator": "a pytree dataclass built by inpainting_operator, which validates",
    "AveragePoolOperator": "a pytree dataclass built by average_pool_operator, which validates",
    "MatrixOperator": "a pytree dataclass built by matrix_operator / parallel_beam_operator, "
    "which validate",
}.items():
    no_probes(_P + _name, _reason)
no_probes(_P + "three_mode_mixture", "takes no arguments")

probes(
    _P + "GaussianMixtureFlow",
    raises(
        "weights", lambda: I.GaussianMixtureFlow.create([0.5, 0.6], [[1.0], [2.0]], [[[1.0]]] * 2)
    ),
    raises(
        "weights", lambda: I.GaussianMixtureFlow.create([1.0, 0.0], [[1.0], [2.0]], [[[1.0]]] * 2)
    ),
    raises("covariances", lambda: I.GaussianMixtureFlow.create([1.0], [[1.0]], [[[-1.0]]])),
    raises("covariances", lambda: I.GaussianMixtureFlow.create([1.0], [[1.0, 0.0]], [[[1.0]]])),
    raises("means", lambda: I.GaussianMixtureFlow.create([1.0], [1.0], [[[1.0]]]), ValueError),
    raises("x", lambda: _flow().velocity(jnp.ones(3), 0.5), ValueError, "wrong dimension"),
    raises("t", lambda: _flow().velocity(jnp.ones(2), jnp.ones(2)), ValueError, "vector time"),
    raises("num_samples", lambda: _flow().sample(_key(), 0), ValueError),
    raises("rng_key", lambda: _flow().sample(3, 2), TypeError),
    raises("noise_std", lambda: _flow().posterior(jnp.array(_A), jnp.ones(1), 0.0), ValueError),
    raises("y", lambda: _flow().posterior(jnp.array(_A), jnp.ones(2), 0.1), ValueError),
)
probes(
    _P + "VelocityMLP",
    raises("num_features", lambda: I.VelocityMLP(0, (4,), rngs=nnx.Rngs(0)), ValueError),
    raises("hidden", lambda: I.VelocityMLP(2, 8, rngs=nnx.Rngs(0)), TypeError, "an int"),
    raises("hidden", lambda: I.VelocityMLP(2, (8, 0), rngs=nnx.Rngs(0)), ValueError),
    raises("num_frequencies", lambda: I.VelocityMLP(2, (4,), num_frequencies=0, rngs=nnx.Rngs(0))),
    raises("x", lambda: I.VelocityMLP(2, (4,), rngs=nnx.Rngs(0))(jnp.ones(3), 0.5), ValueError),
)
probes(
    _P + "diffrax_solver",
    raises("method", lambda: I.diffrax_solver("rk4"), ValueError),
)
probes(
    _P + "diffrax_adjoint",
    raises("adjoint", lambda: I.diffrax_adjoint("all", 8), ValueError),
)
probes(
    _P + "integrate_flow",
    raises("velocity_fn", lambda: I.integrate_flow(None, _flow(), jnp.ones(2), num_steps=2)),
    raises("num_steps", lambda: I.integrate_flow(_V, _flow(), jnp.ones(2), num_steps=0)),
    raises("num_steps", lambda: I.integrate_flow(_V, _flow(), jnp.ones(2), num_steps=2.0)),
    raises("x", lambda: I.integrate_flow(_V, _flow(), jnp.ones(2, jnp.int32), num_steps=2)),
    raises("t1", lambda: I.integrate_flow(_V, _flow(), jnp.ones(2), 0.5, 0.5, num_steps=2)),
    raises("t0", lambda: I.integrate_flow(_V, _flow(), jnp.ones(2), NAN, 1.0, num_steps=2)),
    raises("method", lambda: I.integrate_flow(_V, _flow(), jnp.ones(2), num_steps=2, method="x")),
    raises("adjoint", lambda: I.integrate_flow(_V, _flow(), jnp.ones(2), num_steps=2, adjoint=1)),
)
probes(
    _P + "flow_matching_loss",
    raises("velocity_fn", lambda: I.flow_matching_loss("v", None, _key(), jnp.ones((2, 2)))),
    raises("rng_key", lambda: I.flow_matching_loss(_V, None, None, jnp.ones((2, 2))), TypeError),
    raises("x1", lambda: I.flow_matching_loss(_V, None, _key(), jnp.ones(2)), ValueError),
)
probes(
    _P + "split_velocity",
    raises("model", lambda: I.split_velocity(lambda x, t: x), TypeError),
)


def _train(**overrides):
    kwargs = dict(steps=2, batch_size=4, learning_rate=1e-3, rng_key=_key())
    kwargs.update(overrides)
    data = kwargs.pop("data", jnp.ones((8, 2)))
    model = kwargs.pop("model", I.VelocityMLP(2, (4,), rngs=nnx.Rngs(0)))
    return I.train_flow_matching(model, data, **kwargs)


probes(
    _P + "train_flow_matching",
    raises("model", lambda: _train(model="net"), TypeError),
    raises("data", lambda: _train(data=jnp.ones(8)), ValueError),
    raises("steps", lambda: _train(steps=0), ValueError),
    raises("batch_size", lambda: _train(batch_size=-1), ValueError),
    raises("learning_rate", lambda: _train(learning_rate=0.0), ValueError),
    raises("rng_key", lambda: _train(rng_key=0), TypeError),
    raises("chunk_size", lambda: _train(chunk_size=0), ValueError),
    raises("x", lambda: _train(data=jnp.ones((8, 3))), ValueError, "data of the wrong width"),
)
probes(
    _P + "inpainting_operator",
    raises("mask", lambda: I.inpainting_operator(jnp.array([0.0, 0.5])), ValueError, "not 0/1"),
    raises("mask", lambda: I.inpainting_operator(jnp.ones(())), ValueError, "scalar"),
    raises("mask", lambda: I.inpainting_operator(None), TypeError),
    raises("mask", lambda: I.inpainting_operator("ones"), TypeError),
)
probes(
    _P + "lower_half_mask",
    raises("image_shape", lambda: I.lower_half_mask(8), TypeError),
    raises("image_shape[1]", lambda: I.lower_half_mask((8, 0)), ValueError),
)
probes(
    _P + "average_pool_operator",
    raises("factor", lambda: I.average_pool_operator(0, (8, 8)), ValueError),
    raises("image_shape", lambda: I.average_pool_operator(3, (8, 8)), ValueError, "indivisible"),
    raises("image_shape", lambda: I.average_pool_operator(2, (8, 8, 1)), TypeError),
)
probes(
    _P + "matrix_operator",
    raises("matrix", lambda: I.matrix_operator(jnp.ones(3)), ValueError, "1-D"),
    raises("matrix", lambda: I.matrix_operator(jnp.array([[NAN, 1.0]])), ValueError),
    raises("matrix", lambda: I.matrix_operator(np.zeros((0, 3))), ValueError, "empty"),
)
probes(
    _P + "parallel_beam_operator",
    raises("num_angles", lambda: I.parallel_beam_operator((4, 4), 0), ValueError),
    raises("num_detectors", lambda: I.parallel_beam_operator((4, 4), 3, num_detectors=2)),
    raises("image_shape", lambda: I.parallel_beam_operator(16, 3), TypeError),
)
probes(
    _P + "check_operator",
    raises("operator", lambda: I.check_operator(jnp.eye(2), 2, "x"), TypeError),
    raises("mask", lambda: I.check_operator(_mask_op(), 2, "x"), ValueError, "mask of 5"),
    raises(
        "image_shape",
        lambda: I.check_operator(I.average_pool_operator(2, (4, 4)), 2, "x"),
        ValueError,
    ),
)
probes(
    _P + "task_operator",
    raises("task", lambda: I.task_operator("deblur", (8, 8)), ValueError),
    raises("image_shape", lambda: I.task_operator("superres", (7, 8)), ValueError, "odd side"),
    raises("num_angles", lambda: I.task_operator("ct", (8, 8), ct_angles=0), ValueError),
)
probes(
    _P + "BatchedReconstructor",
    raises("solver", lambda: I.BatchedReconstructor(_V, _flow(), _op(), 2), TypeError),
    raises(
        "operator",
        lambda: I.BatchedReconstructor(I.SingleShooting(_V, 0.05), _flow(), jnp.eye(2), 2),
        TypeError,
    ),
    raises(
        "batch_size",
        lambda: I.BatchedReconstructor(I.MSFlow(_V, 0.05), _flow(), _op(), 0),
        ValueError,
    ),
)
probes(
    _P + "radial_prior",
    raises("z", lambda: I.radial_prior(jnp.ones(())), ValueError, "scalar"),
    raises("z", lambda: I.radial_prior("z"), TypeError),
)

_Z0, _Y = jnp.array([0.5, 0.5]), jnp.array([1.0])
probes(
    _P + "SingleShooting",
    raises("velocity_fn", lambda: I.SingleShooting(None, 0.05)),
    raises("noise_std", lambda: I.SingleShooting(_V, 0.0), ValueError),
    raises("num_steps", lambda: I.SingleShooting(_V, 0.05, num_steps=0), ValueError),
    raises("learning_rate", lambda: I.SingleShooting(_V, 0.05, learning_rate=-1.0)),
    raises("prior_weight", lambda: I.SingleShooting(_V, 0.05, prior_weight=-1.0)),
    raises("adjoint", lambda: I.SingleShooting(_V, 0.05, adjoint="none"), ValueError),
    raises("method", lambda: I.SingleShooting(_V, 0.05, method="rk4"), ValueError),
    raises("maxiter", lambda: I.SingleShooting(_V, 0.05, maxiter=0), ValueError),
    raises("mask", lambda: I.SingleShooting(_V, 0.05).init_state(_Z0, _Y, _mask_op(), _flow())),
    raises("y", lambda: I.SingleShooting(_V, 0.05).init_state(_Z0, jnp.ones(3), _op(), _flow())),
    raises(
        "init_params",
        lambda: I.SingleShooting(_V, 0.05).init_state(jnp.ones((2, 2)), _Y, _op(), _flow()),
    ),
)
probes(
    _P + "MSFlow",
    raises("num_segments", lambda: I.MSFlow(_V, 0.05, num_segments=0), ValueError, "zero"),
    raises("steps_per_segment", lambda: I.MSFlow(_V, 0.05, steps_per_segment=0), ValueError),
    raises("mu_start", lambda: I.MSFlow(_V, 0.05, mu_start=0.0), ValueError, "zero penalty"),
    raises("mu_start", lambda: I.MSFlow(_V, 0.05, mu_start=-1.0), ValueError, "negative"),
    raises("mu_end", lambda: I.MSFlow(_V, 0.05, mu_start=10.0, mu_end=1.0), ValueError),
    raises("mu_end", lambda: I.MSFlow(_V, 0.05, mu_end=INF), ValueError),
    raises("noise_std", lambda: I.MSFlow(_V, -0.05), ValueError),
    raises("jacobian", lambda: I.MSFlow(_V, 0.05, jacobian="exact"), ValueError),
    raises("learning_rate", lambda: I.MSFlow(_V, 0.05, learning_rate=0.0), ValueError),
    raises("prior_weight", lambda: I.MSFlow(_V, 0.05, prior_weight=NAN), ValueError),
    raises("init_params", lambda: I.MSFlow(_V, 0.05).init_state(_Z0, _Y, _op(), _flow())),
    raises(
        "mask",
        lambda: I.MSFlow(_V, 0.05).init_state(jnp.ones((5, 2)), _Y, _mask_op(), _flow()),
    ),
    raises("z0", lambda: I.MSFlow(_V, 0.05).init_params(jnp.ones((2, 2)), _flow()), ValueError),
)


def _single(**overrides):
    kwargs = dict(noise_std=0.05, num_steps=2, maxiter=3)
    kwargs.update(overrides)
    z0, y, op = kwargs.pop("z0", _Z0), kwargs.pop("y", _Y), kwargs.pop("operator", _op())
    return I.single_shooting(I.SingleShooting(_V, **kwargs), _flow(), z0, y, op)


def _multi(**overrides):
    kwargs = dict(noise_std=0.05, num_segments=2, steps_per_segment=1, maxiter=3)
    kwargs.update(overrides)
    z0, y, op = kwargs.pop("z0", _Z0), kwargs.pop("y", _Y), kwargs.pop("operator", _op())
    return I.msflow(I.MSFlow(_V, **kwargs), _flow(), z0, y, op)


probes(
    _P + "single_shooting",
    raises("mask", lambda: _single(operator=_mask_op()), ValueError, "mask of the wrong shape"),
    raises("noise_std", lambda: _single(noise_std=0.0), ValueError),
    raises("num_steps", lambda: _single(num_steps=0), ValueError),
    raises("y", lambda: _single(y=jnp.ones((3, 1))), ValueError, "batch mismatch"),
    raises("z0", lambda: _single(z0=jnp.ones((1, 2, 2))), ValueError),
    raises("noise_std", lambda: _single(noise_std=jnp.array(-1.0)), ValueError, "array"),
    status(
        "y",
        _single_nan,
        lambda out: _nan_reported(out, "latent"),
        "NaN measurement: NONFINITE, counted",
    ),
)
probes(
    _P + "msflow",
    raises("mask", lambda: _multi(operator=_mask_op()), ValueError, "mask of the wrong shape"),
    raises("num_segments", lambda: _multi(num_segments=0), ValueError, "zero segments"),
    raises("mu_start", lambda: _multi(mu_start=0.0), ValueError, "zero penalty weight"),
    raises("mu_end", lambda: _multi(mu_end=-1.0), ValueError, "negative penalty weight"),
    raises("jacobian", lambda: _multi(jacobian="J"), ValueError),
    raises("y", lambda: _multi(y=jnp.ones(2)), ValueError),
    status(
        "y",
        _multi_nan,
        lambda out: _nan_reported(out, "trajectory"),
        "NaN measurement: NONFINITE, counted",
    ),
)
probes(
    _P + "digits_images",
    raises("rng_key", lambda: I.digits_images(None), TypeError),
    raises("num_train", lambda: I.digits_images(_key(), num_train=1797), ValueError, "no test"),
    raises("num_train", lambda: I.digits_images(_key(), num_train=0), ValueError),
)
probes(
    _P + "measure",
    raises("rng_key", lambda: I.measure(None, jnp.ones(2), _op(), 0.1), TypeError),
    raises("mask", lambda: I.measure(_key(), jnp.ones(2), _mask_op(), 0.1), ValueError),
    raises("noise_std", lambda: I.measure(_key(), jnp.ones(2), _op(), -0.1), ValueError),
    raises("operator", lambda: I.measure(_key(), jnp.ones(2), jnp.eye(2), 0.1), TypeError),
)
probes(
    _P + "psnr",
    raises("reference", lambda: I.psnr(jnp.ones(4), jnp.ones(3)), ValueError, "shape"),
    raises("data_range", lambda: I.psnr(jnp.ones(4), jnp.ones(4), 0.0), ValueError),
    raises("x", lambda: I.psnr(None, jnp.ones(4)), TypeError),
)
probes(
    _P + "least_squares_baseline",
    raises("y", lambda: I.least_squares_baseline(jnp.ones(2), _op(), 0.05), ValueError),
    raises("operator", lambda: I.least_squares_baseline(jnp.ones(1), "A", 0.05), TypeError),
    raises("noise_std", lambda: I.least_squares_baseline(jnp.ones(1), _op(), 0.0), ValueError),
    raises("smoothness", lambda: I.least_squares_baseline(jnp.ones(1), _op(), 0.1, smoothness=-1)),
    raises(
        "image_shape",
        lambda: I.least_squares_baseline(jnp.ones(1), _op(), 0.1, smoothness=1.0),
        ValueError,
        "smoothness without a shape",
    ),
    raises("ridge", lambda: I.least_squares_baseline(jnp.ones(1), _op(), 0.1, ridge=0.0)),
    raises("maxiter", lambda: I.least_squares_baseline(jnp.ones(1), _op(), 0.1, maxiter=0)),
)
probes(
    _P + "saved_residual_bytes",
    raises("fn", lambda: I.saved_residual_bytes(None, jnp.ones(2)), TypeError),
)
probes(
    _P + "step_memory",
    raises("fn", lambda: I.step_memory("f", jnp.ones(2)), TypeError),
)

# Issue 44: the constructor checks as create does (family B), NaN data (A), callbacks of the wrong
# shape named (F), a wrong container type (E).
probes(
    _P + "GaussianMixtureFlow",
    raises("weights", lambda: I.GaussianMixtureFlow(jnp.array([0.5, 1.5]), jnp.ones((2, 1)),
           jnp.ones((2, 1, 1))), ValueError, "constructor: weights sum to 2"),
    raises("covariances", lambda: I.GaussianMixtureFlow(jnp.ones(1), jnp.ones((1, 1)),
           -jnp.ones((1, 1, 1))), ValueError, "constructor: not positive definite"),
    raises("covariances", lambda: I.GaussianMixtureFlow(jnp.ones(1), jnp.ones((1, 2)),
           jnp.ones((1, 1, 1))), ValueError, "constructor: mismatched shapes"),
)  # fmt: skip
probes(
    _P + "least_squares_baseline",
    raises("y", lambda: I.least_squares_baseline(jnp.array([NAN]), _op(), 0.05), ValueError,
           "nan"),
)  # fmt: skip
probes(
    _P + "VelocityMLP",
    raises("rngs", lambda: I.VelocityMLP(2, (4,), rngs=None), TypeError, "None"),
    raises("rngs", lambda: I.VelocityMLP(2, (4,), rngs=0), TypeError, "an int"),
)
probes(
    _P + "integrate_flow",
    raises("velocity_fn", lambda: I.integrate_flow(lambda p, x, t: x[:1], None, jnp.ones(2),
           num_steps=2), ValueError, "returns the wrong shape"),
)  # fmt: skip
probes(
    _P + "flow_matching_loss",
    raises("velocity_fn", lambda: I.flow_matching_loss(lambda p, x, t: t, None, _key(),
           jnp.ones((3, 2))), ValueError, "returns the wrong shape"),
)  # fmt: skip


# Issue 44, second independent probe set: the findings it made, fixed at the entry checks.
probes(
    _P + "GaussianMixtureFlow",
    raises("t", lambda: I.three_mode_mixture().velocity(jnp.zeros(2), 1.5), ValueError, "t > 1"),
)
probes(
    _P + "flow_matching_loss",
    raises(
        "velocity_fn",
        lambda: I.flow_matching_loss(
            _V, I.three_mode_mixture(), jax.random.key(0), jnp.zeros((3, 2))
        ),
        ValueError,
        "a one-point velocity",
    ),
)
probes(
    _P + "train_flow_matching",
    raises(
        "data",
        lambda: I.train_flow_matching(
            I.VelocityMLP(2, (4,), rngs=nnx.Rngs(0)),
            jnp.zeros((8, 3)),
            steps=1,
            batch_size=4,
            learning_rate=1e-3,
            rng_key=jax.random.key(0),
        ),
        ValueError,
        "wrong width",
    ),
)
probes(_P + "diffrax_adjoint", raises("num_steps", lambda: I.diffrax_adjoint("recursive", -1)))
