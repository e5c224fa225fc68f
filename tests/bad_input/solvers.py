"""Bad-input probes for jaxlab.solvers (every public callable of its ``__all__``).

Most probes fail in a constructor or before any tracing. The status probes run one tiny
``while_loop`` each (2-D problems, a few iterations) to read the documented ``state.status``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab import solvers as S
from tests.bad_input import no_probes, probes, raises, status

NAN, INF = float("nan"), float("inf")
_P = "jaxlab.solvers."


def _key():
    return jax.random.key(0)


def _operator(z, key, batch_size):
    return -z


def _vi(cls=S.StochasticExtragradient, **kwargs):
    return cls(**{"operator_fn": _operator, "stepsize": 0.1, "maxiter": 3, **kwargs})


def _run_vi(solver, init=None):
    return solver.run(jnp.ones(2) if init is None else init, rng_key=_key())


def _nan_mid_run():
    # F(z) = -z blows up geometrically with a step of 1e30: inf, then NaN, in two steps.
    solver = _vi(stepsize=1e30, maxiter=50, batch_schedule=S.constant_batch_schedule(1))
    return _run_vi(solver)


def _traced_bad_batch():
    # The batch size is traced (a function of a traced offset): the run reports it.
    def run(offset):
        solver = _vi(batch_schedule=lambda k: 3 - k - offset, maxiter=10, jit=False)
        return _run_vi(solver)

    return jax.jit(run)(jnp.int32(0))


def _ring(key, step):
    del key, step
    return jnp.asarray(np.eye(3, dtype=bool) | np.roll(np.eye(3, dtype=bool), 1, axis=0))


def _push_pull(**kwargs):
    return S.PushPull(**{"grad_fn": lambda x: x, "graph_fn": _ring, "stepsize": 0.1, **kwargs})


def _fab(**kwargs):
    fields = {
        "upper_grad_fn": lambda x, y: (x, y),
        "lower_grad_fn": lambda x, y: (x - y, y - x),
        "graph_fn": _ring,
    }
    return S.FAB(**{**fields, **kwargs})


def _hom(**kwargs):
    return S.HomPGD(lambda x: jnp.sum(x**2), lambda z: 2.0 * z, **kwargs)


def _bilevel(**kwargs):
    fields = {
        "upper": lambda x, y, c: 0.5 * (y - c) ** 2,
        "lower": lambda x, y, c: 0.5 * (y - x) ** 2,
        "data": (jnp.array([0.0, 2.0]),),
        "x0": jnp.zeros(()),
        "y0": jnp.zeros(()),
    }
    return S.BilevelProblem(**{**fields, **kwargs})


def _instance():
    return S.sample_qcqp(_key(), 2, 1)


# --------------------------------------------------------------------------------------------
# Containers and constants.

for _name, _reason in {
    "SolverStatus": "an IntEnum of status codes (Python's enum rejects unknown codes itself)",
    "OracleCount": "a count container built by the solvers (OracleCount.zeros().add(...))",
    "HomPGDState": "a state NamedTuple: built by HomPGD.init_state",
    "GapSplit": "a result NamedTuple returned by split_gap",
    "BaselineRun": "a result NamedTuple returned by the baselines",
    "QCQPInstance": "a NamedTuple of arrays built by sample_qcqp; its users check it",
    "FABParams": "a NamedTuple of the variables (x, y, z); FAB.init_state checks it",
    "FABState": "a state NamedTuple: built by FAB.init_state",
    "PushPullState": "a state NamedTuple: built by PushPull.init_state",
    "BilevelSolution": "a result NamedTuple returned by exact_bilevel_solution",
    "HalpernState": "a state NamedTuple: built by HalpernExtragradient.init_state",
    "VIState": "a state NamedTuple: built by the VI solvers' init_state",
    "VIProblem": "a result NamedTuple returned by the VI problem builders",
}.items():
    no_probes(_P + _name, _reason)

# --------------------------------------------------------------------------------------------
# Tangent solves (implicit differentiation).

_double = lambda v: 2.0 * v  # noqa: E731
for _name, _fn in {
    "dense_tangent_solve": S.dense_tangent_solve,
    "default_tangent_solve": S.default_tangent_solve,
}.items():
    probes(
        _P + _name,
        raises("linear_fn", lambda f=_fn: f(None, jnp.ones(2))),
        raises("rhs", lambda f=_fn: f(_double, jnp.ones(2, jnp.int32))),
        raises("rhs", lambda f=_fn: f(lambda v: v[:1], jnp.ones(2)), ValueError, "shape"),
    )
probes(
    _P + "gmres_tangent_solve",
    raises("linear_fn", lambda: S.gmres_tangent_solve("matrix", jnp.ones(2))),
    raises("tol", lambda: S.gmres_tangent_solve(_double, jnp.ones(2), tol=NAN), ValueError),
    raises("restart", lambda: S.gmres_tangent_solve(_double, jnp.ones(2), restart=0), ValueError),
    raises("maxiter", lambda: S.gmres_tangent_solve(_double, jnp.ones(2), maxiter=2.5), TypeError),
    raises("rhs", lambda: S.gmres_tangent_solve(lambda v: v[:1], jnp.ones(2)), ValueError),
)
probes(
    _P + "cg_tangent_solve",
    raises("linear_fn", lambda: S.cg_tangent_solve(None, jnp.ones(2))),
    raises("atol", lambda: S.cg_tangent_solve(_double, jnp.ones(2), atol=-1.0), ValueError),
    raises("tol", lambda: S.cg_tangent_solve(_double, jnp.ones(2), tol="1e-6"), TypeError),
    raises("rhs", lambda: S.cg_tangent_solve(_double, jnp.ones(2, jnp.int32)), TypeError),
)

# --------------------------------------------------------------------------------------------
# Stochastic VI solvers.

for _cls in (S.StochasticExtragradient, S.HalpernExtragradient, S.StochasticGradientDescentAscent):
    probes(
        _P + _cls.__name__,
        raises("stepsize", lambda c=_cls: _vi(c, stepsize=-0.1), ValueError),
        raises("stepsize", lambda c=_cls: _vi(c, stepsize="0.1"), TypeError),
        raises("tol", lambda c=_cls: _vi(c, tol=NAN), ValueError, "nan"),
        raises("maxiter", lambda c=_cls: _vi(c, maxiter=0), ValueError),
        raises("residual_stepsize", lambda c=_cls: _vi(c, residual_stepsize=INF), ValueError),
        raises("operator_fn", lambda c=_cls: _vi(c, operator_fn=None), TypeError),
        raises("rng_key", lambda c=_cls: _vi(c).run(jnp.ones(2)), TypeError, "missing"),
        raises("rng_key", lambda c=_cls: _vi(c).run(jnp.ones(2), rng_key=None), TypeError),
        raises("rng_key", lambda c=_cls: _vi(c).run(jnp.ones(2), rng_key=3), TypeError, "int"),
        raises(
            "batch_schedule",
            lambda c=_cls: _run_vi(_vi(c, batch_schedule=lambda k: k)),
            ValueError,
            "zero at k=0",
        ),
        raises(
            "batch_schedule",
            lambda c=_cls: _run_vi(_vi(c, batch_schedule=lambda k: 2 - 2 * k)),
            ValueError,
            "negative later",
        ),
        raises(
            "operator_fn",
            lambda c=_cls: _run_vi(_vi(c, operator_fn=lambda z, key, b: jnp.zeros(3))),
            ValueError,
            "shape",
        ),
        raises("params", lambda c=_cls: _run_vi(_vi(c), jnp.ones(2, jnp.int32)), TypeError),
    )
probes(
    _P + "StochasticExtragradient",
    raises("relaxation", lambda: _vi(relaxation=1.5), ValueError),
    raises("relaxation", lambda: _vi(relaxation=NAN), ValueError, "nan"),
    raises("variant", lambda: _vi(variant="ogda"), ValueError),
    status(
        "params",
        _nan_mid_run,
        lambda out: int(out.state.status) == S.SolverStatus.NONFINITE,
        "non-finite mid-run",
    ),
    status(
        "batch_schedule",
        _traced_bad_batch,
        lambda out: (
            int(out.state.status) == S.SolverStatus.BAD_BATCH_SIZE and int(out.state.iter_num) == 3
        ),
        "traced size 0",
    ),
)
probes(
    _P + "HalpernExtragradient",
    raises("estimator", lambda: _vi(S.HalpernExtragradient, estimator="saga"), ValueError),
    raises("restart_every", lambda: _vi(S.HalpernExtragradient, restart_every=0), ValueError),
    raises(
        "recursive_batch_size",
        lambda: _vi(S.HalpernExtragradient, recursive_batch_size=True),
        TypeError,
    ),
    raises("anchor_schedule", lambda: _vi(S.HalpernExtragradient, anchor_schedule=0.5), TypeError),
)

probes(
    _P + "polynomial_batch_schedule",
    raises("initial_batch_size", lambda: S.polynomial_batch_schedule(0.5), ValueError),
    raises("initial_batch_size", lambda: S.polynomial_batch_schedule(None), TypeError),
    raises("power", lambda: S.polynomial_batch_schedule(1, -1.0), ValueError),
    raises("power", lambda: S.polynomial_batch_schedule(1, NAN), ValueError),
)
probes(
    _P + "constant_batch_schedule",
    raises("batch_size", lambda: S.constant_batch_schedule(0), ValueError),
    raises("batch_size", lambda: S.constant_batch_schedule(-5), ValueError),
    raises("batch_size", lambda: S.constant_batch_schedule(2.5), TypeError),
    raises("batch_size", lambda: S.constant_batch_schedule(2**31), ValueError),
)
probes(
    _P + "halpern_anchor_schedule",
    raises("iter_num", lambda: S.halpern_anchor_schedule(-2), ValueError),
    raises("iter_num", lambda: S.halpern_anchor_schedule(np.array([0, -2])), ValueError),
    raises("iter_num", lambda: S.halpern_anchor_schedule(NAN), ValueError),
    raises("iter_num", lambda: S.halpern_anchor_schedule("3"), TypeError),
)
probes(
    _P + "minibatch_operator",
    raises("sample_operator_fn", lambda: S.minibatch_operator(None), TypeError),
    raises("sample_operator_fn", lambda: S.minibatch_operator(3.0), TypeError),
)
probes(
    _P + "natural_residual",
    raises("stepsize", lambda: S.natural_residual(lambda z: z, jnp.ones(2), stepsize=0.0)),
    raises("stepsize", lambda: S.natural_residual(lambda z: z, jnp.ones(2), stepsize=NAN)),
    raises("operator_fn", lambda: S.natural_residual(None, jnp.ones(2)), TypeError),
    raises("operator_fn", lambda: S.natural_residual(lambda z: z[:1], jnp.ones(2)), ValueError),
    raises("projection", lambda: S.natural_residual(lambda z: z, jnp.ones(2), projection=1)),
)
_lanes = {"a": {"stepsize": 0.1}}
_build = lambda lane: _vi(stepsize=lane["stepsize"])  # noqa: E731
_keys = lambda: jax.random.split(_key(), 2)  # noqa: E731
probes(
    _P + "run_to_checkpoints",
    raises("build_solver", lambda: S.run_to_checkpoints(None, _lanes, _keys(), jnp.ones(2), [4])),
    raises("lanes", lambda: S.run_to_checkpoints(_build, {}, _keys(), jnp.ones(2), [4])),
    raises("rng_keys", lambda: S.run_to_checkpoints(_build, _lanes, None, jnp.ones(2), [4])),
    raises("checkpoints", lambda: S.run_to_checkpoints(_build, _lanes, _keys(), jnp.ones(2), [-1])),
    raises(
        "checkpoints", lambda: S.run_to_checkpoints(_build, _lanes, _keys(), jnp.ones(2), [8, 4])
    ),
    raises(
        "norm_cap",
        lambda: S.run_to_checkpoints(_build, _lanes, _keys(), jnp.ones(2), [4], norm_cap=-1.0),
    ),
    raises(
        "max_iterations",
        lambda: S.run_to_checkpoints(_build, _lanes, _keys(), jnp.ones(2), [4], max_iterations=0),
    ),
)
probes(
    _P + "bilinear_nonnegative",
    raises("rng_key", lambda: S.bilinear_nonnegative(None, 3, 0.1), TypeError),
    raises("dim", lambda: S.bilinear_nonnegative(_key(), 0, 0.1), ValueError),
    raises("noise", lambda: S.bilinear_nonnegative(_key(), 3, -0.1), ValueError),
    raises("noise", lambda: S.bilinear_nonnegative(_key(), 3, NAN), ValueError),
    raises(
        "singular_values", lambda: S.bilinear_nonnegative(_key(), 3, 0.1, singular_values=(2, 1))
    ),
)
probes(
    _P + "weak_minty_2d",
    raises("noise", lambda: S.weak_minty_2d(noise=-1.0), ValueError),
    raises("a", lambda: S.weak_minty_2d(a="x"), TypeError),
    raises("b", lambda: S.weak_minty_2d(b=INF), ValueError),
    raises("a and b", lambda: S.weak_minty_2d(0.0, 0.0), ValueError),
)

# --------------------------------------------------------------------------------------------
# Hom-PGD+ and its problems and baselines.

probes(
    _P + "HomPGD",
    raises("stepsize", lambda: _hom(stepsize=-0.1), ValueError),
    raises("adaptive_decay", lambda: _hom(adaptive_decay=NAN), ValueError),
    raises("min_stepsize", lambda: _hom(min_stepsize=1.0), ValueError),
    raises("repair", lambda: _hom(repair="project"), ValueError),
    raises("tol", lambda: _hom(tol=NAN), ValueError),
    raises("fun", lambda: S.HomPGD(None, lambda z: z), TypeError),
    raises("bisection_steps", lambda: _hom(bisection_steps=0), ValueError),
    raises("params", lambda: _hom().run(jnp.ones((2, 2))), ValueError, "not a vector"),
    raises("params", lambda: _hom().run(jnp.ones(2, jnp.int32)), TypeError, "integer"),
    status(
        "params",
        lambda: S.HomPGD(
            lambda x: jnp.log(1.0 - x[0]), lambda z: 2.0 * z, stepsize=1.0, maxiter=20
        ).run(jnp.array([0.1, 0.0])),
        lambda out: int(out.state.status) == S.SolverStatus.NONFINITE,
        "log of a negative number mid-run",
    ),
)
probes(
    _P + "best_feasible_start",
    raises("feasibility_tol", lambda: S.best_feasible_start([0.0], [0.0], -1.0), ValueError),
    raises("values", lambda: S.best_feasible_start([0.0, 1.0], [0.0]), ValueError, "shapes"),
    raises("values", lambda: S.best_feasible_start([], []), ValueError, "empty"),
)
probes(
    _P + "bisection_repair",
    raises(
        "num_steps",
        lambda: S.bisection_repair(jnp.zeros(2), jnp.ones(2), lambda z: True, num_steps=0),
    ),
    raises("tol", lambda: S.bisection_repair(jnp.zeros(2), jnp.ones(2), lambda z: True, tol=NAN)),
    raises("z_feasible", lambda: S.bisection_repair(jnp.zeros(2), jnp.ones(3), lambda z: True)),
    raises("is_feasible", lambda: S.bisection_repair(jnp.zeros(2), jnp.ones(2), None), TypeError),
)
probes(
    _P + "latent_starts",
    raises("rng_key", lambda: S.latent_starts(None, 4, 2), TypeError),
    raises("num_starts", lambda: S.latent_starts(_key(), 1, 2), ValueError),
    raises("num_features", lambda: S.latent_starts(_key(), 4, 0), ValueError),
    raises("num_starts", lambda: S.latent_starts(_key(), 4.0, 2), TypeError),
)
probes(
    _P + "project_ball",
    raises("radius", lambda: S.project_ball(jnp.ones(2), -1.0), ValueError),
    raises("radius", lambda: S.project_ball(jnp.ones(2), NAN), ValueError),
    raises("z", lambda: S.project_ball(jnp.ones(2, jnp.int32)), TypeError),
    raises("z", lambda: S.project_ball(jnp.ones(())), ValueError),
)
probes(
    _P + "split_gap",
    raises("reachable", lambda: S.split_gap(-1.0, NAN, -1.0, -1.0), ValueError, "NaN"),
    raises("hom_value", lambda: S.split_gap(NAN, -1.0, -1.0, -1.0), ValueError, "NaN"),
)
probes(
    _P + "select_penalty_weight",
    raises("validation_gaps", lambda: S.select_penalty_weight({}), ValueError),
    raises("validation_gaps", lambda: S.select_penalty_weight({1.0: NAN}), ValueError, "NaN"),
    raises("validation_gaps", lambda: S.select_penalty_weight({-1.0: 0.1}), ValueError, "w<0"),
    raises("validation_gaps", lambda: S.select_penalty_weight([0.1]), TypeError),
)
for _name, _fn, _arg in (
    ("star_objective", S.star_objective, "x"),
    ("star_constraint", S.star_constraint, "x"),
    ("star_homeomorphism", S.star_homeomorphism, "z"),
):
    probes(
        _P + _name,
        raises(_arg, lambda f=_fn: f(jnp.ones(3)), ValueError, "wrong size"),
        raises(_arg, lambda f=_fn: f("x"), TypeError),
        raises(_arg, lambda f=_fn: f(None), TypeError),
    )
for _name, _fn, _arg in (
    ("star_radius", S.star_radius, "theta"),
    ("star_boundary", S.star_boundary, "phi"),
):
    probes(
        _P + _name,
        raises(_arg, lambda f=_fn: f("pi"), TypeError),
        raises(_arg, lambda f=_fn: f(None), TypeError),
        raises(_arg, lambda f=_fn: f(jnp.array(1 + 2j)), TypeError),
    )
probes(
    _P + "star_projection",
    raises("num_angles", lambda: S.star_projection(jnp.ones(2), num_angles=0), ValueError),
    raises("newton_steps", lambda: S.star_projection(jnp.ones(2), newton_steps=-1), ValueError),
    raises("y", lambda: S.star_projection(jnp.ones(3)), ValueError),
    raises("y", lambda: S.star_projection(jnp.ones(2, jnp.int32)), TypeError),
)
probes(
    _P + "star_hom_pgd",
    raises("maxiter", lambda: S.star_hom_pgd(0), ValueError),
    raises("stepsize", lambda: S.star_hom_pgd(stepsize=-1.0), ValueError),
)
probes(
    _P + "sample_qcqp",
    raises("rng_key", lambda: S.sample_qcqp(None, 2, 1), TypeError),
    raises("n", lambda: S.sample_qcqp(_key(), 1, 1), ValueError),
    raises("m", lambda: S.sample_qcqp(_key(), 2, 0), ValueError),
    raises("n", lambda: S.sample_qcqp(_key(), "2", 1), TypeError),
)
for _name, _fn in (
    ("qcqp_objective", S.qcqp_objective),
    ("qcqp_constraints", S.qcqp_constraints),
):
    probes(
        _P + _name,
        raises("x", lambda f=_fn: f(jnp.ones(3), _instance()), ValueError, "wrong size"),
        raises("x", lambda f=_fn: f("x", _instance()), TypeError),
        raises("instance", lambda f=_fn: f(jnp.ones(2), None), TypeError),
    )
probes(
    _P + "sample_qcqp_batch",
    raises("rng_key", lambda: S.sample_qcqp_batch(None, 2, 1, 3), TypeError),
    raises("n", lambda: S.sample_qcqp_batch(_key(), 1, 1, 3), ValueError),
    raises("m", lambda: S.sample_qcqp_batch(_key(), 2, 0, 3), ValueError),
    raises("num_instances", lambda: S.sample_qcqp_batch(_key(), 2, 1, 0), ValueError),
    raises("num_instances", lambda: S.sample_qcqp_batch(_key(), 2, 1, 2.0), TypeError),
)
probes(
    _P + "train_qcqp_homeomorphism",
    raises("rng_key", lambda: S.train_qcqp_homeomorphism(None, 2, 1), TypeError),
    raises("n", lambda: S.train_qcqp_homeomorphism(_key(), 1, 1), ValueError),
    raises("m", lambda: S.train_qcqp_homeomorphism(_key(), 2, 0), ValueError),
    raises("num_steps", lambda: S.train_qcqp_homeomorphism(_key(), 2, 1, num_steps=0), ValueError),
    raises(
        "latent_pool", lambda: S.train_qcqp_homeomorphism(_key(), 2, 1, latent_pool=-1), ValueError
    ),
)
probes(
    _P + "qcqp_condition",
    raises("instance", lambda: S.qcqp_condition(None), TypeError),
    raises("instance", lambda: S.qcqp_condition((1, 2)), TypeError),
)
probes(
    _P + "qcqp_constraints_from_condition",
    raises(
        "condition",
        lambda: S.qcqp_constraints_from_condition(jnp.ones(3), S.qcqp_condition(_instance())),
        ValueError,
    ),
    raises("condition", lambda: S.qcqp_constraints_from_condition(jnp.ones(2), jnp.ones(7))),
    raises("x", lambda: S.qcqp_constraints_from_condition(None, jnp.ones((1, 7))), TypeError),
)
probes(
    _P + "qcqp_condition_sampler",
    raises("n", lambda: S.qcqp_condition_sampler(1, 3), ValueError),
    raises("m", lambda: S.qcqp_condition_sampler(2, 0), ValueError),
    raises("m", lambda: S.qcqp_condition_sampler(2, 1.5), TypeError),
)
probes(
    _P + "qcqp_homeomorphism_net",
    raises("n", lambda: S.qcqp_homeomorphism_net(1, rngs=None), ValueError),
    raises("n", lambda: S.qcqp_homeomorphism_net("2", rngs=None), TypeError),
)
probes(
    _P + "qcqp_hom_pgd",
    raises("model", lambda: S.qcqp_hom_pgd(None), TypeError),
    raises("model", lambda: S.qcqp_hom_pgd(lambda z, c: (z, c)), TypeError),
)
probes(
    _P + "exact_projection_pgd",
    raises(
        "stepsize",
        lambda: S.exact_projection_pgd(
            S.star_objective, S.star_projection, jnp.ones(2), stepsize=0.0
        ),
    ),
    raises(
        "decay",
        lambda: S.exact_projection_pgd(S.star_objective, S.star_projection, jnp.ones(2), decay=1.5),
    ),
    raises(
        "tol",
        lambda: S.exact_projection_pgd(S.star_objective, S.star_projection, jnp.ones(2), tol=NAN),
    ),
    raises(
        "projection", lambda: S.exact_projection_pgd(S.star_objective, None, jnp.ones(2)), TypeError
    ),
    raises(
        "x0", lambda: S.exact_projection_pgd(S.star_objective, S.star_projection, [1, 0]), TypeError
    ),
)
for _name, _fn in (
    ("penalty_method", S.penalty_method),
    ("augmented_lagrangian", S.augmented_lagrangian),
):
    probes(
        _P + _name,
        raises("outer", lambda f=_fn: f(S.star_objective, S.star_constraint, jnp.ones(2), outer=0)),
        raises(
            "learning_rate",
            lambda f=_fn: f(S.star_objective, S.star_constraint, jnp.ones(2), learning_rate=-1.0),
        ),
        raises(
            "growth", lambda f=_fn: f(S.star_objective, S.star_constraint, jnp.ones(2), growth=0.5)
        ),
        raises("constraint_fn", lambda f=_fn: f(S.star_objective, None, jnp.ones(2)), TypeError),
        raises("x0", lambda f=_fn: f(S.star_objective, S.star_constraint, "x0"), TypeError),
    )
for _name, _fn in (
    ("penalty_method", S.penalty_method),
    ("augmented_lagrangian", S.augmented_lagrangian),
):
    probes(
        _P + _name,
        raises(
            "inner_solver",
            lambda f=_fn: f(S.star_objective, S.star_constraint, jnp.ones(2), inner_solver="lbfgs"),
            ValueError,
        ),
    )
probes(
    _P + "augmented_lagrangian",
    raises(
        "dual_learning_rate",
        lambda: S.augmented_lagrangian(
            S.star_objective, S.star_constraint, jnp.ones(2), dual_learning_rate=NAN
        ),
    ),
)
probes(
    _P + "slsqp_multistart",
    raises("num_starts", lambda: S.slsqp_multistart(_instance(), 0, 0), ValueError),
    raises("seed", lambda: S.slsqp_multistart(_instance(), 2, -1), ValueError),
    raises("instance", lambda: S.slsqp_multistart(None, 2, 0), TypeError),
)
probes(
    _P + "slsqp_local_solve",
    raises("instance", lambda: S.slsqp_local_solve(None), TypeError),
    raises(
        "instance",
        lambda: S.slsqp_local_solve(S.sample_qcqp_batch(_key(), 2, 1, 2)),
        ValueError,
        "a batch",
    ),
    raises("x0", lambda: S.slsqp_local_solve(_instance(), np.zeros(3)), ValueError),
    raises("x0", lambda: S.slsqp_local_solve(_instance(), "zeros"), TypeError),
    raises("maxiter", lambda: S.slsqp_local_solve(_instance(), maxiter=0), ValueError),
    raises("ftol", lambda: S.slsqp_local_solve(_instance(), ftol=NAN), ValueError),
)
_slsqp = dict(stepsize=0.1, maxiter=5, tol=1e-5, time_limit_s=1.0)
probes(
    _P + "slsqp_projection_pgd",
    raises(
        "time_limit_s",
        lambda: S.slsqp_projection_pgd(_instance(), np.zeros(2), **{**_slsqp, "time_limit_s": 0}),
    ),
    raises(
        "stepsize",
        lambda: S.slsqp_projection_pgd(_instance(), np.zeros(2), **{**_slsqp, "stepsize": -1.0}),
    ),
    raises("x0", lambda: S.slsqp_projection_pgd(_instance(), np.zeros(3), **_slsqp), ValueError),
    raises("instance", lambda: S.slsqp_projection_pgd(None, np.zeros(2), **_slsqp), TypeError),
)

# --------------------------------------------------------------------------------------------
# Push-Pull, FAB and their bilevel problems.

probes(
    _P + "PushPull",
    raises("stepsize", lambda: _push_pull(stepsize=0.0), ValueError),
    raises("stepsize", lambda: _push_pull(stepsize=NAN), ValueError),
    raises("grad_fn", lambda: _push_pull(grad_fn=None), TypeError),
    raises("mixing", lambda: _push_pull(mixing="ring"), ValueError),
    raises("tol", lambda: _push_pull(tol=NAN), ValueError),
    raises("rng_key", lambda: _push_pull().run(jnp.zeros(3), rng_key=None), TypeError),
    raises(
        "args",
        lambda: _push_pull(grad_fn=lambda x, b: x - b).run(
            jnp.zeros(3), jnp.zeros(4), rng_key=_key()
        ),
        ValueError,
        "agents",
    ),
    raises(
        "grad_fn",
        lambda: _push_pull(grad_fn=lambda x: jnp.zeros(2)).run(jnp.zeros(3), rng_key=_key()),
        ValueError,
        "shape",
    ),
    raises(
        "axis_name",
        lambda: _push_pull(axis_name="agents").init_state(jnp.zeros(()), rng_key=_key()),
        ValueError,
        "unbound",
    ),
)
_fab_start = lambda n=3: S.FABParams(jnp.zeros(n), jnp.zeros(n), jnp.zeros(n))  # noqa: E731
probes(
    _P + "FAB",
    raises("penalty", lambda: _fab(penalty=-1.0), ValueError),
    raises("upper_stepsize", lambda: _fab(upper_stepsize=NAN), ValueError),
    raises("inner_steps", lambda: _fab(inner_steps=0), ValueError),
    raises("penalty_power", lambda: _fab(penalty_power="1/3"), TypeError),
    raises("upper_grad_fn", lambda: _fab(upper_grad_fn=None), TypeError),
    raises("rng_key", lambda: _fab().run(_fab_start(), rng_key="key"), TypeError),
    raises("init_params", lambda: _fab().run(jnp.zeros(3), rng_key=_key()), TypeError),
    raises("init_params", lambda: _fab().run(_fab_start(4), rng_key=_key()), ValueError, "n"),
)
probes(
    _P + "BilevelProblem",
    raises("upper", lambda: _bilevel(upper=None), TypeError),
    raises("data", lambda: _bilevel(data=[1.0]), TypeError),
    raises("data", lambda: _bilevel(data=(jnp.zeros(2), jnp.zeros(3))), ValueError),
    raises("x0", lambda: _bilevel(x0=jnp.zeros((), jnp.int32)), TypeError),
)
probes(
    _P + "lower_level_solution",
    raises("newton_steps", lambda: S.lower_level_solution(_bilevel(), 0.5, newton_steps=-1)),
    raises("problem", lambda: S.lower_level_solution(None, 0.5), TypeError),
    raises("x", lambda: S.lower_level_solution(_bilevel(), jnp.zeros(3)), ValueError),
)
probes(
    _P + "exact_hypergradient",
    raises("problem", lambda: S.exact_hypergradient("problem", 0.5), TypeError),
    raises("x", lambda: S.exact_hypergradient(_bilevel(), jnp.zeros(2)), ValueError),
    raises("newton_steps", lambda: S.exact_hypergradient(_bilevel(), 0.5, 1.5), TypeError),
)
probes(
    _P + "exact_bilevel_solution",
    raises("maxiter", lambda: S.exact_bilevel_solution(_bilevel(), maxiter=0), ValueError),
    raises("newton_steps", lambda: S.exact_bilevel_solution(_bilevel(), newton_steps=-1)),
    raises("problem", lambda: S.exact_bilevel_solution(None), TypeError),
)
_trajectory = dict(penalty=1.0, upper_stepsize=0.1, lower_stepsize=0.1, steps=4, record_every=2)
probes(
    _P + "centralized_penalty_trajectory",
    raises(
        "penalty",
        lambda: S.centralized_penalty_trajectory(_bilevel(), **{**_trajectory, "penalty": -1.0}),
    ),
    raises(
        "record_every",
        lambda: S.centralized_penalty_trajectory(_bilevel(), **{**_trajectory, "record_every": 0}),
    ),
    raises("problem", lambda: S.centralized_penalty_trajectory(None, **_trajectory), TypeError),
)
probes(
    _P + "diabetes_ridge_tuning",
    raises("num_agents", lambda: S.diabetes_ridge_tuning(0), ValueError),
    raises("seed", lambda: S.diabetes_ridge_tuning(seed="0"), TypeError),
    raises("num_agents", lambda: S.diabetes_ridge_tuning(1000), ValueError, "too many rows"),
)
probes(
    _P + "digits_hyper_cleaning",
    raises("flip_fraction", lambda: S.digits_hyper_cleaning(flip_fraction=1.5), ValueError),
    raises("ridge", lambda: S.digits_hyper_cleaning(ridge=-1.0), ValueError),
    raises("components", lambda: S.digits_hyper_cleaning(components=0), ValueError),
)

# --------------------------------------------------------------------------------------------
# The L-shaped method (host loop around HiGHS).

from jaxlab.stochprog import TwoStageLP as _TwoStageLP  # noqa: E402

_LSHAPED_MODEL = _TwoStageLP(
    c=[1.0], W=[[1.0, -1.0]], T=[[1.0]], h=[[2.0], [4.0]], q=[3.0, 0.0], x_upper=[10.0]
)
_NO_RECOURSE = _TwoStageLP(
    c=[1.0],
    W=[[[1.0, -1.0]], [[1.0, 1.0]]],
    T=[[1.0]],
    h=[[2.0], [-1.0]],
    q=[3.0, 0.0],
    x_upper=[10.0],
)
no_probes(_P + "LShapedState", "a state NamedTuple: built by LShaped.init_state")
probes(
    _P + "LShaped",
    raises("model", lambda: S.LShaped("model"), TypeError),
    raises("alpha", lambda: S.LShaped(_LSHAPED_MODEL, alpha=0.0), ValueError),
    raises("alpha", lambda: S.LShaped(_LSHAPED_MODEL, alpha=jnp.array(1.5)), ValueError),
    raises("cuts", lambda: S.LShaped(_LSHAPED_MODEL, cuts="triple"), ValueError),
    raises("tol", lambda: S.LShaped(_LSHAPED_MODEL, tol=-1.0), ValueError),
    raises("maxiter", lambda: S.LShaped(_LSHAPED_MODEL, maxiter=0), ValueError),
    raises("recourse_fun", lambda: S.LShaped(_LSHAPED_MODEL, recourse_fun=3), TypeError),
    raises("eta_lower_bound", lambda: S.LShaped(_LSHAPED_MODEL, eta_lower_bound=NAN), ValueError),
    raises(
        "eta_lower_bound",
        lambda: S.LShaped(_LSHAPED_MODEL, eta_lower_bound=1e6).run(),
        ValueError,
        "above the recourse",
    ),
    raises("multiplicities", lambda: S.LShaped(_LSHAPED_MODEL, multiplicities=np.ones((3, 5)))),
    raises("init_params", lambda: S.LShaped(_LSHAPED_MODEL).run(np.ones(3)), ValueError),
    raises(
        "scenario 1",
        lambda: S.LShaped(_NO_RECOURSE, eta_lower_bound=0.0).run(np.zeros(1)),
        ValueError,
        "infeasible recourse",
    ),
    raises(
        "recourse_fun",
        lambda: S.LShaped(
            _LSHAPED_MODEL, recourse_fun=lambda x: (np.zeros(3), np.zeros((3, 1)))
        ).run(),
        ValueError,
        "shapes",
    ),
    status(
        "non-finite recourse stops the run",
        lambda: S.LShaped(
            _LSHAPED_MODEL, recourse_fun=lambda x: (np.full(2, NAN), np.zeros((2, 1)))
        ).run(),
        lambda out: out.state.status == S.SolverStatus.NONFINITE and out.state.num_nonfinite == 1,
    ),
)

# --------------------------------------------------------------------------------------------
# DenseQP (issue 16).

_QP = (jnp.eye(2), jnp.zeros(2), jnp.eye(2), jnp.zeros(2), jnp.ones(2))
_QP_INIT = S.QPSolution(jnp.zeros(2), jnp.zeros(2))
no_probes(_P + "QPState", "a state NamedTuple: built by DenseQP.init_state")
no_probes(_P + "QPSolution", "a NamedTuple of arrays: checked where DenseQP uses it")
probes(
    _P + "DenseQP",
    raises("rho", lambda: S.DenseQP(rho=0.0), ValueError),
    raises("relaxation", lambda: S.DenseQP(relaxation=2.0), ValueError),
    raises("sigma", lambda: S.DenseQP(sigma=NAN), ValueError),
    raises("maxiter", lambda: S.DenseQP(maxiter=0), ValueError),
    raises("init_params", lambda: S.DenseQP().run(jnp.zeros(2), *_QP), TypeError),
    raises("lower", lambda: S.DenseQP().run(_QP_INIT, *_QP[:3], jnp.zeros(3), _QP[4])),
    raises("lower", lambda: S.DenseQP().init_state(_QP_INIT, *_QP[:3], jnp.full(2, 2.0), _QP[4])),
    raises("P", lambda: S.DenseQP().run(_QP_INIT, jnp.eye(3), *_QP[1:]), ValueError),
    raises(
        "P",
        lambda: S.DenseQP().run(_QP_INIT, jnp.array([[1.0, 2.0], [0.0, 1.0]]), *_QP[1:]),
        ValueError,
    ),
    raises("A", lambda: S.DenseQP().run(_QP_INIT, *_QP[:2], jnp.zeros(2, int), *_QP[3:])),
    status(
        "infeasible bounds certified",
        lambda: S.DenseQP().run(
            _QP_INIT,
            jnp.eye(2),
            jnp.zeros(2),
            jnp.array([[1.0, 0.0], [1.0, 0.0]]),
            jnp.array([1.0, -INF]),
            jnp.array([INF, 0.0]),
        ),
        lambda out: int(out.state.status) == S.SolverStatus.PRIMAL_INFEASIBLE,
    ),
)
probes(
    _P + "qp_kkt_regularized_solve",
    raises("linear_fn", lambda: S.qp_kkt_regularized_solve("matvec", _QP_INIT), TypeError),
    raises("rhs", lambda: S.qp_kkt_regularized_solve(lambda v: v, jnp.ones(2)), TypeError),
)
probes(
    _P + "qp_kkt_tangent_solve",
    raises("linear_fn", lambda: S.qp_kkt_tangent_solve("matvec", jnp.ones(2)), TypeError),
)

# Issue 44: crossed bounds reached the jitted loop unchecked and came back CONVERGED (family A);
# an infeasible recourse advised eta_lower_bound (G); malformed bootstrap counts (B).
probes(
    _P + "DenseQP",
    raises("lower", lambda: S.DenseQP().run(_QP_INIT, *_QP[:3], jnp.ones(2), -jnp.ones(2)),
           ValueError, "crossed bounds through run"),
    status("lower", lambda: jax.jit(lambda lo, up: S.DenseQP().run(_QP_INIT, *_QP[:3], lo, up))(
               jnp.ones(2), -jnp.ones(2)),
           lambda out: int(out.state.status) == S.SolverStatus.PRIMAL_INFEASIBLE,
           "traced crossed bounds reported infeasible"),
)  # fmt: skip
probes(
    _P + "LShaped",
    raises("model", lambda: S.LShaped(_NO_RECOURSE).run(np.zeros(1)), ValueError,
           "infeasible recourse, no eta advice"),
    raises("multiplicities", lambda: S.LShaped(_LSHAPED_MODEL, alpha=0.5,
           multiplicities=[[1.0, 0.0]]), ValueError, "row sums to 1 of N=2"),
    raises("multiplicities", lambda: S.LShaped(_LSHAPED_MODEL, alpha=0.5,
           multiplicities=[[0.5, 1.5]]), ValueError, "fractional"),
)  # fmt: skip

# --------------------------------------------------------------------------------------------
# Hom-PGD's studies (issue 43: the experiment's measurements as library calls).

no_probes(_P + "StarComparison", "a result NamedTuple returned by compare_star_methods")
probes(
    _P + "compare_star_methods",
    raises("z0s", lambda: S.compare_star_methods(jnp.ones(3)), ValueError),
    raises("z0s", lambda: S.compare_star_methods(jnp.ones((2, 2), jnp.int32)), TypeError),
    raises("maxiter", lambda: S.compare_star_methods(jnp.ones((1, 2)), maxiter=0), ValueError),
    raises("timing_repeats", lambda: S.compare_star_methods(jnp.ones((1, 2)), timing_repeats=0)),
)
probes(
    _P + "qcqp_penalty_baseline",
    raises("method", lambda: S.qcqp_penalty_baseline("sgd", 2), ValueError),
    raises("num_features", lambda: S.qcqp_penalty_baseline("alm", 0), ValueError),
    raises("inner_solver", lambda: S.qcqp_penalty_baseline("alm", 2, inner_solver="lbfgs")),
)
_BATCH = lambda: S.sample_qcqp_batch(_key(), 2, 1, 2)  # noqa: E731
probes(
    _P + "compare_qcqp_methods",
    raises("solver", lambda: S.compare_qcqp_methods(None, (), _BATCH()), TypeError),
    raises("instances", lambda: S.compare_qcqp_methods(_hom(), (), _instance()), TypeError),
)
probes(
    _P + "compare_qcqp_starts",
    raises("solver", lambda: S.compare_qcqp_starts(None, (), _BATCH(), [1.0], [1.0], None)),
    raises(
        "local",
        lambda: S.compare_qcqp_starts(_hom(), (), _BATCH(), [1.0], [1.0, 1.0], jnp.zeros((1, 2))),
        ValueError,
    ),
)
probes(
    _P + "qcqp_gap_split",
    raises("solver", lambda: S.qcqp_gap_split(None, None, [0.0], [0.0], [0.0], [0.0], None, None)),
    raises("model", lambda: S.qcqp_gap_split(_hom(), None, [0.0], [0.0], [0.0], [0.0], None, None)),
)
