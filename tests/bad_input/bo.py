"""Bad-input probes for jaxlab.bo (every public callable of its ``__all__``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab import bo as B
from tests.bad_input import no_probes, probes, raises, status

NAN, INF = float("nan"), float("inf")
_P = "jaxlab.bo."
_X = jnp.linspace(0.0, 1.0, 6)[:, None]
_Y = jnp.sin(4.0 * _X[:, 0])
_GP = B.GPParams(jnp.array(1.0), jnp.array(0.5), jnp.array(0.1))
_BOX = [[-1.0, 1.0], [-1.0, 1.0]]


def _key():
    return jax.random.key(0)


def _state():
    return B.rambo_init(_key(), _X, _Y)


def _sweep():
    return B.sweep_randomness(_key(), 6)


def _moves():
    return B.split_merge_randomness(_key(), 6)


_FIT = B.RamboConfig(num_sweeps=2, burn_in=0)


def _pred():
    return B.MixturePrediction(
        jnp.array(0.4),
        jnp.array(0.1),
        jnp.array(0.8),
        jnp.array([0.7, 0.3]),
        jnp.array([1.0, -1.0]),
        jnp.array([0.04, 0.25]),
    )


for _name, _reason in {
    "GPParams": "a NamedTuple of hyper-parameters; the functions taking it check its values",
    "GPPosterior": "a NamedTuple built by gp_posterior, which validates",
    "GPFitInfo": "a NamedTuple returned by fit_gp",
    "RamboState": "a state NamedTuple built by rambo_init",
    "RamboFitInfo": "a NamedTuple returned by rambo_fit",
    "RamboInfo": "a NamedTuple returned by rambo(...).step",
    "Standardization": "a NamedTuple returned by standardize",
    "SweepInfo": "a NamedTuple returned by rambo_sweep",
    "SweepRandomness": "a NamedTuple built by sweep_randomness",
    "SplitMergeRandomness": "a NamedTuple built by split_merge_randomness",
    "SplitMergeInfo": "a NamedTuple returned by rambo_split_merge",
    "MixturePosterior": "a NamedTuple built by mixture_posterior, which validates",
    "MixturePrediction": "a NamedTuple returned by mixture_predict",
    "AcquisitionInfo": "a NamedTuple returned by maximize_acquisition",
    "BOResult": "a NamedTuple returned by bayes_opt",
    "BOProblem": "a NamedTuple built by bo_problem, which validates",
}.items():
    no_probes(_P + _name, _reason)

probes(
    _P + "rbf_kernel",
    raises("x1", lambda: B.rbf_kernel(None, _X, signal_std=1.0, lengthscale=1.0)),
    raises("x2", lambda: B.rbf_kernel(_X, jnp.zeros((2, 3)), signal_std=1.0, lengthscale=1.0)),
    raises("signal_std", lambda: B.rbf_kernel(_X, _X, signal_std=-1.0, lengthscale=1.0)),
    raises("lengthscale", lambda: B.rbf_kernel(_X, _X, signal_std=1.0, lengthscale=0.0)),
    raises("lengthscale", lambda: B.rbf_kernel(_X, _X, signal_std=1.0, lengthscale=NAN)),
)
for _name in ("gp_log_marginal", "gp_posterior", "gp_loo_predictive"):
    _fn = getattr(B, _name)
    probes(
        _P + _name,
        raises("y", lambda _fn=_fn: _fn(_X, _Y.at[2].set(NAN), _GP), description="non-finite"),
        raises("y", lambda _fn=_fn: _fn(_X, _Y[:3], _GP), description="length"),
        raises("x", lambda _fn=_fn: _fn("x", _Y, _GP)),
        raises("mask", lambda _fn=_fn: _fn(_X, _Y, _GP, jnp.zeros(6, bool)), description="empty"),
        raises("mask", lambda _fn=_fn: _fn(_X, _Y, _GP, jnp.ones(5, bool)), description="shape"),
        raises(
            "params",
            lambda _fn=_fn: _fn(_X, _Y, (1.0, 0.5, 0.1)),
            TypeError,
            description="plain tuple",
        ),
    )
probes(
    _P + "gp_predict",
    raises("y", lambda: B.gp_predict(_X, _Y.at[0].set(INF), _X, _GP)),
    raises("x_test", lambda: B.gp_predict(_X, _Y, jnp.zeros((2, 3)), _GP)),
    raises("params", lambda: B.gp_predict(_X, _Y, _X, (1.0, 0.5, 0.1)), TypeError),
)
probes(
    _P + "botorch_log_prior",
    raises("params", lambda: B.botorch_log_prior((1.0, 0.5, 0.1), dim=1), TypeError),
    raises("dim", lambda: B.botorch_log_prior(_GP, dim=0)),
    raises("params.lengthscale", lambda: B.botorch_log_prior(B.GPParams(1.0, -0.5, 0.1), dim=1)),
)
probes(
    _P + "sgp_botorch_log_posterior",
    raises("params", lambda: B.sgp_botorch_log_posterior(_X, _Y, [1.0, 0.5, 0.1]), TypeError),
    raises("mean", lambda: B.sgp_botorch_log_posterior(_X, _Y, _GP, mean=NAN)),
    raises("y", lambda: B.sgp_botorch_log_posterior(_X, _Y.at[0].set(NAN), _GP)),
)
probes(
    _P + "fit_sgp_botorch",
    raises("rng_key", lambda: B.fit_sgp_botorch(None, _X, _Y)),
    raises("num_restarts", lambda: B.fit_sgp_botorch(_key(), _X, _Y, num_restarts=0)),
    raises("steps", lambda: B.fit_sgp_botorch(_key(), _X, _Y, steps=-1)),
    raises("mask", lambda: B.fit_sgp_botorch(_key(), _X, _Y, jnp.zeros(6, bool))),
    raises("method", lambda: B.fit_sgp_botorch(_key(), _X, _Y, method="adam")),
)
probes(
    _P + "GPData",
    raises("x", lambda: B.GPData.create(_X[:, 0], _Y)),
    raises("y", lambda: B.GPData.create(_X, _Y[:3])),
    raises("mask", lambda: B.GPData.create(_X, _Y, jnp.ones(6))),
    raises("mask", lambda: B.GPData.create(_X, _Y, jnp.zeros(6, bool)), description="no rows"),
    raises("x", lambda: B.GPData.create(_X.at[2, 0].set(INF), _Y), description="non-finite"),
)
probes(
    _P + "lognormal_log_prob",
    raises("theta", lambda: B.lognormal_log_prob(0.0, 0.0, 1.0)),
    raises("loc", lambda: B.lognormal_log_prob(1.0, NAN, 1.0)),
    raises("scale", lambda: B.lognormal_log_prob(1.0, 0.0, -1.0)),
)
probes(
    _P + "botorch_lengthscale_prior",
    raises("dim", lambda: B.botorch_lengthscale_prior(0)),
    raises("dim", lambda: B.botorch_lengthscale_prior(2.5), description="float"),
)
probes(
    _P + "fit_gp",
    raises("method", lambda: B.fit_gp(_X, _Y, method="newton")),
    raises("steps", lambda: B.fit_gp(_X, _Y, steps=0)),
    raises("learning_rate", lambda: B.fit_gp(_X, _Y, method="adam", learning_rate=-0.1)),
    raises("init.lengthscale", lambda: B.fit_gp(_X, _Y, init=B.GPParams(1.0, jnp.ones(3), 0.1))),
    raises("init.noise_std", lambda: B.fit_gp(_X, _Y, init=B.GPParams(1.0, 1.0, -0.1))),
    raises("init", lambda: B.fit_gp(_X, _Y, init=(1.0, 1.0, 0.1)), TypeError),
    raises("y", lambda: B.fit_gp(_X, _Y.at[1].set(NAN))),
    status(
        "a non-finite objective step is counted",
        lambda: B.fit_gp(_X, _Y, log_prior=lambda p: jnp.nan * p.noise_std, steps=3, method="adam"),
        lambda out: int(out[1].nonfinite) == 3,
    ),
)
probes(
    _P + "inverse_gamma_log_prob",
    raises("theta", lambda: B.inverse_gamma_log_prob(-1.0, 3.0, 2.0)),
    raises("a", lambda: B.inverse_gamma_log_prob(1.0, 0.0, 2.0)),
    raises("b", lambda: B.inverse_gamma_log_prob(1.0, 3.0, NAN)),
)
probes(
    _P + "rambo_log_prior",
    raises("log_params", lambda: B.rambo_log_prior(jnp.zeros(2))),
    raises("log_params", lambda: B.rambo_log_prior("abc")),
)
probes(
    _P + "standardize",
    raises("y", lambda: B.standardize(_X, _Y.at[0].set(NAN))),
    raises("mask", lambda: B.standardize(_X, _Y, jnp.zeros(6, bool)), description="zero points"),
)
probes(
    _P + "sweep_randomness",
    raises("rng_key", lambda: B.sweep_randomness(None, 4)),
    raises("num_points", lambda: B.sweep_randomness(_key(), -1)),
    raises("num_prior_draws", lambda: B.sweep_randomness(_key(), 4, 0)),
)
probes(
    _P + "split_merge_randomness",
    raises("rng_key", lambda: B.split_merge_randomness(None, 4)),
    raises("num_points", lambda: B.split_merge_randomness(_key(), 0)),
    raises("restricted_scans", lambda: B.split_merge_randomness(_key(), 4, -1)),
)
probes(
    _P + "rambo_split_merge",
    raises("state", lambda: B.rambo_split_merge(_moves(), (1, 2), _X, _Y)),
    raises("randomness", lambda: B.rambo_split_merge(None, _state(), _X, _Y)),
    raises("y", lambda: B.rambo_split_merge(_moves(), _state(), _X, _Y.at[0].set(NAN))),
    raises("proposal", lambda: B.rambo_split_merge(_moves(), _state(), _X, _Y, proposal="gibbs")),
)
probes(
    _P + "rambo_init",
    raises("alpha", lambda: B.rambo_init(_key(), _X, _Y, alpha=0.0)),
    raises("alpha", lambda: B.rambo_init(_key(), _X, _Y, alpha=-2.0), description="negative"),
    raises("max_clusters", lambda: B.rambo_init(_key(), _X, _Y, max_clusters=2)),
    raises(
        "mask", lambda: B.rambo_init(_key(), _X, _Y, jnp.zeros(6, bool)), description="zero points"
    ),
    raises("y", lambda: B.rambo_init(_key(), _X, _Y.at[3].set(NAN))),
    raises("rng_key", lambda: B.rambo_init(None, _X, _Y)),
)
probes(
    _P + "rambo_sweep",
    raises("variant", lambda: B.rambo_sweep(_sweep(), _state(), _X, _Y, variant="paper")),
    raises("randomness", lambda: B.rambo_sweep(None, _state(), _X, _Y)),
    raises("y", lambda: B.rambo_sweep(_sweep(), _state(), _X, _Y.at[0].set(NAN))),
    raises("state", lambda: B.rambo_sweep(_sweep(), (1, 2), _X, _Y)),
)
probes(
    _P + "rambo",
    raises("config", lambda: B.rambo(_X, _Y, config={"num_sweeps": 2}), TypeError),
    raises("y", lambda: B.rambo(_X, _Y.at[0].set(NAN))),
    raises("rng_key", lambda: B.rambo(_X, _Y, config=_FIT).step(None, _state())),
    raises("state", lambda: B.rambo(_X, _Y, config=_FIT).step(_key(), (1, 2)), TypeError),
    raises("config", lambda: B.rambo.build_kernel("fast"), TypeError),
)
probes(
    _P + "rambo_fit",
    raises("alpha", lambda: B.rambo_fit(_key(), _X, _Y, config=_FIT, alpha=0.0)),
    raises("config", lambda: B.rambo_fit(_key(), _X, _Y, config=(2, 0)), TypeError),
    raises("num_sweeps", lambda: B.rambo_fit(_key(), _X, _Y, B.RamboConfig(num_sweeps=0))),
    raises("restricted_scans", lambda: B.RamboConfig(restricted_scans=1.5)),
    raises("map_learning_rate", lambda: B.RamboConfig(map_learning_rate=NAN)),
    raises("hyper_update_every", lambda: B.RamboConfig(hyper_update_every=0)),
    raises("jitter", lambda: B.RamboConfig(jitter=-1.0)),
    raises(
        "mask",
        lambda: B.rambo_fit(_key(), _X, _Y, jnp.zeros(6, bool), _FIT),
        description="zero points",
    ),
    raises("y", lambda: B.rambo_fit(_key(), _X, _Y.at[0].set(INF), config=_FIT)),
    status(
        "a NaN observation under jit is counted",
        lambda: jax.jit(lambda y: B.rambo_fit(_key(), _X, y, config=_FIT))(_Y.at[2].set(NAN)),
        lambda out: int(out[1].nonfinite) > 0,
    ),
)
probes(
    _P + "concentration_schedule",
    raises("kind", lambda: B.concentration_schedule("cosine")),
    raises("alpha0", lambda: B.concentration_schedule("sqrtlog", alpha0=0.0)),
    raises(
        "alpha0", lambda: B.concentration_schedule("constant", alpha0=-1.0), description="negative"
    ),
    raises("alpha_start", lambda: B.concentration_schedule("linear", alpha_start=0.0, total=5)),
    raises("alpha_end", lambda: B.concentration_schedule("linear", alpha_end=INF, total=5)),
    raises("total", lambda: B.concentration_schedule("linear")),
    raises("total", lambda: B.concentration_schedule("linear", total=1), description="one"),
    raises("t", lambda: B.concentration_schedule("sqrtlog")(0)),
)


def _numpy_sweep(y=None, alpha=1.0, **kwargs):
    y = np.asarray(_Y) if y is None else y
    z, lp = np.zeros(6, int), np.zeros((4, 3))
    return B.numpy_gibbs_sweep(np.asarray(_X), y, z, lp, alpha, np.arange(6), np.zeros(6),
                               np.zeros((6, 5, 3)), **kwargs)  # fmt: skip


probes(
    _P + "numpy_gibbs_sweep",
    raises("alpha", lambda: _numpy_sweep(alpha=0.0)),
    raises("variant", lambda: _numpy_sweep(variant="x")),
    raises("y", lambda: _numpy_sweep(y="y")),
)
probes(
    _P + "spatial_gate",
    raises("counts", lambda: B.spatial_gate(jnp.array([-1, 2]), 1, 2.0, jnp.ones(2))),
    raises(
        "component_var", lambda: B.spatial_gate(jnp.array([1, 2]), 3, 2.0, jnp.array([-1.0, 1.0]))
    ),
    raises("alpha", lambda: B.spatial_gate(jnp.array([1, 2]), 3, 0.0, jnp.ones(2))),
)
probes(
    _P + "mixture_moments",
    raises("weights", lambda: B.mixture_moments(jnp.array([-0.5, 1.5]), jnp.zeros(2), jnp.ones(2))),
    raises("variances", lambda: B.mixture_moments(jnp.ones(2) / 2, jnp.zeros(2), -jnp.ones(2))),
    raises("means", lambda: B.mixture_moments(jnp.ones(2) / 2, jnp.zeros(3), jnp.ones(2))),
)
probes(
    _P + "mixture_posterior",
    raises("y", lambda: B.mixture_posterior(_state(), _X, _Y.at[1].set(NAN))),
    raises("mask", lambda: B.mixture_posterior(_state(), _X, _Y, jnp.zeros(6, bool))),
    raises("state", lambda: B.mixture_posterior((1, 2), _X, _Y)),
)
probes(
    _P + "mixture_predict",
    raises(
        "x_test",
        lambda: B.mixture_predict(B.mixture_posterior(_state(), _X, _Y), jnp.zeros((2, 2))),
    ),
    raises(
        "x_test",
        lambda: B.mixture_predict(B.mixture_posterior(_state(), _X, _Y), "x"),
        description="type",
    ),
    raises(
        "posterior",
        lambda: B.mixture_predict(B.gp_posterior(_X, _Y, _GP), jnp.zeros((2, 1))),
        description="a single GP's posterior",
    ),
)
probes(
    _P + "mixture_expected_improvement",
    raises("xi", lambda: B.mixture_expected_improvement(_pred(), 0.8, xi=NAN)),
)
probes(
    _P + "mixture_log_expected_improvement",
    raises("xi", lambda: B.mixture_log_expected_improvement(_pred(), 0.8, xi=NAN)),
)
probes(_P + "mixture_ucb", raises("beta", lambda: B.mixture_ucb(_pred(), beta=-1.0)))
probes(
    _P + "expected_improvement",
    raises("std", lambda: B.expected_improvement(1.0, -0.5, 0.8)),
    raises("xi", lambda: B.expected_improvement(1.0, 0.5, 0.8, xi=INF)),
)
probes(
    _P + "log_expected_improvement",
    raises("std", lambda: B.log_expected_improvement(1.0, -0.5, 0.8)),
    raises("xi", lambda: B.log_expected_improvement(1.0, 0.5, 0.8, xi=NAN)),
)
probes(
    _P + "upper_confidence_bound",
    raises("std", lambda: B.upper_confidence_bound(1.0, jnp.array([NAN]))),
    raises("beta", lambda: B.upper_confidence_bound(1.0, 0.5, beta=-2.0)),
)
probes(
    _P + "check_bounds",
    raises("bounds", lambda: B.check_bounds([[1.0, 0.0]])),
    raises("bounds", lambda: B.check_bounds([[0.0, 1.0, 2.0]]), description="shape"),
    raises("bounds", lambda: B.check_bounds([[0.0, NAN]]), description="nan"),
)
probes(
    _P + "sobol_points",
    raises("bounds", lambda: B.sobol_points(_key(), 4, [[2.0, 2.0]])),
    raises("num_points", lambda: B.sobol_points(_key(), 0, _BOX)),
    raises("rng_key", lambda: B.sobol_points(None, 4, _BOX)),
)
probes(
    _P + "maximize_acquisition",
    raises(
        "bounds",
        lambda: B.maximize_acquisition(jnp.sum, [[1.0, -1.0], [0.0, 1.0]], jnp.zeros((4, 2))),
    ),
    raises("candidates", lambda: B.maximize_acquisition(jnp.sum, _BOX, jnp.zeros((4, 3)))),
    raises(
        "num_starts", lambda: B.maximize_acquisition(jnp.sum, _BOX, jnp.zeros((4, 2)), num_starts=0)
    ),
    raises(
        "candidates",
        lambda: B.maximize_acquisition(jnp.sum, _BOX, jnp.zeros((2, 2)), num_starts=5),
        description="too few",
    ),
    raises(
        "adam_learning_rate",
        lambda: B.maximize_acquisition(
            jnp.sum, _BOX, jnp.zeros((4, 2)), num_starts=2, adam_learning_rate=-1.0
        ),
    ),
    status(
        "NaN acquisition values are counted and skipped",
        lambda: B.maximize_acquisition(
            lambda z: jnp.where(z[0] > 0, jnp.nan, -jnp.sum(z**2)),
            _BOX,
            jnp.array([[0.5, 0.5], [-0.5, 0.1], [-0.2, -0.2]]),
            num_starts=1,
            adam_steps=0,
            lbfgs_steps=0,
        ),
        lambda out: int(out[1].nonfinite) >= 1 and float(out[0][0]) < 0,
    ),
)
probes(
    _P + "RamboConfig",
    raises("num_sweeps", lambda: B.RamboConfig(num_sweeps=0)),
    raises("burn_in", lambda: B.RamboConfig(num_sweeps=5, burn_in=5)),
    raises("alpha0", lambda: B.RamboConfig(alpha0=0.0)),
    raises("variant", lambda: B.RamboConfig(variant="paper")),
    raises("kind", lambda: B.RamboConfig(schedule="cosine")),
    raises("max_clusters", lambda: B.RamboConfig(max_clusters=1)),
    raises("split_merge_moves", lambda: B.RamboConfig(split_merge_moves=-1)),
    raises("split_merge_proposal", lambda: B.RamboConfig(split_merge_proposal="gibbs")),
)
probes(
    _P + "AcquisitionConfig",
    raises("kind", lambda: B.AcquisitionConfig(kind="pi")),
    raises("num_candidates", lambda: B.AcquisitionConfig(num_candidates=0)),
    raises("num_starts", lambda: B.AcquisitionConfig(num_candidates=4, num_starts=5)),
    raises("xi", lambda: B.AcquisitionConfig(xi=NAN)),
    raises("adam_learning_rate", lambda: B.AcquisitionConfig(adam_learning_rate=-1.0)),
)
probes(
    _P + "bayes_opt",
    raises("bounds", lambda: B.bayes_opt(_key(), B.two_regime, [[1.0, -1.0], [-1.0, 1.0]])),
    raises(
        "num_init",
        lambda: B.bayes_opt(_key(), B.two_regime, _BOX, num_init=0),
        description="zero initial points",
    ),
    raises("surrogate", lambda: B.bayes_opt(_key(), B.two_regime, _BOX, surrogate="tpe")),
    raises("objective", lambda: B.bayes_opt(_key(), "f", _BOX)),
    raises(
        "objective",
        lambda: B.bayes_opt(_key(), lambda x: float("nan"), _BOX, num_init=2, num_iters=0),
        description="non-finite observation",
    ),
    raises("num_iters", lambda: B.bayes_opt(_key(), B.two_regime, _BOX, num_iters=-1)),
    raises("rambo", lambda: B.bayes_opt(_key(), B.two_regime, _BOX, rambo={"alpha0": 2.0})),
    raises("rng_key", lambda: B.bayes_opt(None, B.two_regime, _BOX)),
    raises("progress", lambda: B.bayes_opt(_key(), B.two_regime, _BOX, progress=5), TypeError),
    raises("gp_restarts", lambda: B.bayes_opt(_key(), B.two_regime, _BOX, gp_restarts=0)),
)
probes(
    _P + "bo_problem",
    raises("name", lambda: B.bo_problem("rosenbrock")),
    raises("dim", lambda: B.bo_problem("two_regime", 3)),
    raises("dim", lambda: B.bo_problem("levy", 0), description="zero"),
)
for _name in ("levy", "schwefel", "two_regime"):
    probes(
        _P + _name,
        raises("x", lambda _n=_name: getattr(B, _n)("abc")),
        raises("x", lambda _n=_name: getattr(B, _n)(jnp.zeros((2, 0))), description="empty"),
    )
probes(
    _P + "sample_two_gp_regimes",
    raises("num_points", lambda: B.sample_two_gp_regimes(_key(), 1)),
    raises("lengthscales", lambda: B.sample_two_gp_regimes(_key(), 10, lengthscales=(0.05, -0.5))),
    raises("noise_std", lambda: B.sample_two_gp_regimes(_key(), 10, noise_std=NAN)),
    raises("rng_key", lambda: B.sample_two_gp_regimes(None, 10)),
)


# Issue 44, second independent probe set: the findings it made, fixed at the entry checks.
_SEEN = B.sweep_randomness(_key(), 3)  # drawn for 3 points, the data have 6
_NS = dict(x=np.asarray(_X), y=np.asarray(_Y), assignments=np.zeros(6, int),
           log_params=np.zeros((4, 3)), alpha=1.0, order=np.arange(6), uniforms=np.zeros(6),
           prior_draws=np.zeros((6, 5, 3)))  # fmt: skip


def _ns(**bad):
    return B.numpy_gibbs_sweep(*{**_NS, **bad}.values())


probes(
    _P + "gp_log_marginal",
    raises("params.noise_std", lambda: B.gp_log_marginal(_X, _Y, B.GPParams(1.0, 0.5, -0.1))),
    raises("jitter", lambda: B.gp_log_marginal(_X, _Y, _GP, jitter=-1.0)),
)
probes(
    _P + "gp_loo_predictive",
    raises(
        "params.lengthscale",
        lambda: B.gp_loo_predictive(_X, _Y, B.GPParams(1.0, jnp.ones(3), 0.1)),
    ),
)
probes(
    _P + "rbf_kernel",
    raises(
        "lengthscale",
        lambda: B.rbf_kernel(_X, _X, signal_std=1.0, lengthscale=jnp.ones(3)),
        description="one per dimension",
    ),
)
probes(
    _P + "fit_gp",
    raises("ard", lambda: B.fit_gp(_X, _Y, ard="no"), TypeError),
    raises("clamp", lambda: B.fit_gp(_X, _Y, clamp=None), TypeError),
    raises("log_prior", lambda: B.fit_gp(_X, _Y, log_prior=lambda p: jnp.ones(3)), ValueError),
    raises("log_prior", lambda: B.fit_gp(_X, _Y, log_prior="botorch"), TypeError),
)
probes(
    _P + "fit_sgp_botorch",
    raises("jitter", lambda: B.fit_sgp_botorch(_key(), _X, _Y, jitter=-1e-3)),
)
probes(
    _P + "sgp_botorch_log_posterior",
    raises("mean", lambda: B.sgp_botorch_log_posterior(_X, _Y, _GP, mean=jnp.ones(3)), ValueError),
)
probes(
    _P + "botorch_log_prior",
    raises("params.signal_std", lambda: B.botorch_log_prior(B.GPParams(NAN, 0.5, 0.1), dim=1)),
    raises(
        "params.lengthscale", lambda: B.botorch_log_prior(B.GPParams(1.0, jnp.ones(3), 0.1), dim=2)
    ),
)
probes(
    _P + "rambo_init",
    raises("x", lambda: B.rambo_init(_key(), _X.at[0, 0].set(NAN), _Y), ValueError, "NaN x"),
    raises("alpha", lambda: B.rambo_init(_key(), _X, _Y, alpha=jnp.ones(2)), ValueError, "vector"),
)
probes(
    _P + "rambo_sweep",
    raises("randomness", lambda: B.rambo_sweep(_SEEN, _state(), _X, _Y), ValueError),
    raises(
        "state",
        lambda: B.rambo_sweep(B.sweep_randomness(_key(), 4), _state(), _X[:4], _Y[:4]),
        ValueError,
    ),
    raises("jitter", lambda: B.rambo_sweep(_sweep(), _state(), _X, _Y, jitter=-1.0)),
    raises(
        "state.assignments",
        lambda: B.rambo_sweep(
            _sweep(), _state()._replace(assignments=jnp.full(6, 99, jnp.int32)), _X, _Y
        ),
        ValueError,
    ),
)
probes(
    _P + "rambo_split_merge",
    raises(
        "randomness",
        lambda: B.rambo_split_merge(B.split_merge_randomness(_key(), 3), _state(), _X, _Y),
        ValueError,
    ),
)
probes(_P + "rambo_log_prior", raises("log_params", lambda: B.rambo_log_prior(jnp.full(3, NAN))))
probes(
    _P + "split_merge_randomness",
    raises("num_points", lambda: B.split_merge_randomness(_key(), 1), description="one point"),
)
probes(
    _P + "numpy_gibbs_sweep",
    raises("assignments", lambda: _ns(assignments=np.full(6, 7)), ValueError),
    raises("order", lambda: _ns(order=np.zeros(6, int)), ValueError),
    raises("uniforms", lambda: _ns(uniforms=np.full(6, 2.0)), ValueError),
    raises("log_params", lambda: _ns(log_params=np.full((4, 3), NAN)), ValueError),
    raises("prior_draws", lambda: _ns(prior_draws=np.zeros((6, 5, 2))), ValueError),
)
probes(
    _P + "mixture_posterior",
    raises("state", lambda: B.mixture_posterior(_state(), _X[:4], _Y[:4]), ValueError),
    raises("jitter", lambda: B.mixture_posterior(_state(), _X, _Y, jitter=-1.0)),
)
probes(
    _P + "mixture_predict",
    raises(
        "x_test",
        lambda: B.mixture_predict(B.mixture_posterior(_state(), _X, _Y), jnp.array([[NAN]])),
        ValueError,
        "NaN",
    ),
)
probes(
    _P + "mixture_expected_improvement",
    raises("prediction", lambda: B.mixture_expected_improvement((0.1, 0.2), 0.5), TypeError),
)
probes(_P + "mixture_ucb", raises("prediction", lambda: B.mixture_ucb({"mean": 1.0}), TypeError))
probes(
    _P + "mixture_moments",
    raises("weights", lambda: B.mixture_moments(jnp.array([0.3, 0.3]), jnp.zeros(2), jnp.ones(2)),
           ValueError, "sums to 0.6"),
)  # fmt: skip
probes(
    _P + "spatial_gate",
    raises(
        "component_var", lambda: B.spatial_gate(jnp.array([1, 2]), 3, 2.0, jnp.ones(3)), ValueError
    ),
    raises(
        "active",
        lambda: B.spatial_gate(jnp.array([1, 2]), 3, 2.0, jnp.ones(2), jnp.ones(5, bool)),
        ValueError,
    ),
)
for _name in ("expected_improvement", "log_expected_improvement"):
    probes(
        _P + _name,
        raises("std", lambda _n=_name: getattr(B, _n)(jnp.ones(3), jnp.ones(2), 0.8), ValueError),
        raises("mean", lambda _n=_name: getattr(B, _n)("1.0", 0.5, 0.8), TypeError),
    )
probes(
    _P + "upper_confidence_bound",
    raises("std", lambda: B.upper_confidence_bound(jnp.ones(3), jnp.ones(2)), ValueError),
)
probes(
    _P + "maximize_acquisition",
    raises(
        "acquisition",
        lambda: B.maximize_acquisition(lambda z: z, _BOX, jnp.zeros((4, 2)), num_starts=1),
        ValueError,
        "returns a vector",
    ),
    raises(
        "acquisition",
        lambda: B.maximize_acquisition("ei", _BOX, jnp.zeros((4, 2)), num_starts=1),
        TypeError,
    ),
)
probes(
    _P + "sample_two_gp_regimes",
    raises(
        "lengthscales", lambda: B.sample_two_gp_regimes(_key(), 10, lengthscales=(0.1, 0.2, 0.3))
    ),
)
