"""Bad-input probes for jaxlab.stochprog (every public callable of its ``__all__``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab import stochprog as SP
from tests.bad_input import no_probes, probes, raises

NAN, INF = float("nan"), float("inf")
_P = "jaxlab.stochprog."
_X = jnp.array([1.0, 2.0, 3.0, 10.0])
_V = np.ones((5, 4), dtype=np.int32)
_MODEL = dict(c=[1.0], W=[[1.0, -1.0]], T=[[1.0]], h=[[2.0], [4.0]], q=[3.0, 0.0])


def _key():
    return jax.random.key(0)


def _scenarios(n=3):
    return SP.sample_product_mix(_key(), n, SP.product_mix_config())


no_probes(_P + "product_mix_reference_scenarios", "takes no arguments")
for _name, _reason in {
    "ExtensiveForm": "a data container returned by extensive_form",
    "TwoStageSolution": "a result dataclass returned by solve_extensive_form",
    "ProductMixScenarios": "a NamedTuple of scenario arrays; product_mix_model and "
    "product_mix_recourse check its shapes",
}.items():
    no_probes(_P + _name, _reason)

for _name in ("apub", "efron_upper_bound"):
    _level = "alpha" if _name == "apub" else "tau"
    _fn = getattr(SP, _name)
    probes(
        _P + _name,
        raises(_level, lambda f=_fn: f(_X, 0.0, multiplicities=_V), ValueError, "zero"),
        raises(_level, lambda f=_fn: f(_X, 1.5, multiplicities=_V), ValueError, "above one"),
        raises(_level, lambda f=_fn: f(_X, NAN, multiplicities=_V), ValueError, "nan"),
        raises(_level, lambda f=_fn: f(_X, "0.1", multiplicities=_V), TypeError, "str"),
        raises("values", lambda f=_fn: f(jnp.zeros(0), 0.1, rng_key=_key()), ValueError, "empty"),
        raises("values", lambda f=_fn: f(_X.at[1].set(NAN), 0.1, multiplicities=_V), ValueError),
        raises("values", lambda f=_fn: f(jnp.ones((2, 2)), 0.1, rng_key=_key()), ValueError),
        raises("multiplicities", lambda f=_fn: f(_X, 0.1, multiplicities=np.ones((5, 3)))),
        raises("rng_key", lambda f=_fn: f(_X, 0.1), TypeError, "neither key nor matrix"),
        raises("num_resamples", lambda f=_fn: f(_X, 0.1, rng_key=_key(), num_resamples=0)),
    )
probes(
    _P + "apub_exact",
    raises("alpha", lambda: SP.apub_exact([1.0, 2.0], 0.0), ValueError),
    raises("values", lambda: SP.apub_exact([], 0.1), ValueError, "empty"),
    raises("values", lambda: SP.apub_exact([1.0, INF], 0.1), ValueError, "inf"),
    raises("values", lambda: SP.apub_exact(np.arange(11.0), 0.1), ValueError, "too many"),
)
probes(
    _P + "clt_upper_bound",
    raises("tau", lambda: SP.clt_upper_bound(_X, 1.0), ValueError),
    raises("values", lambda: SP.clt_upper_bound(jnp.ones(1), 0.1), ValueError, "one sample"),
    raises("values", lambda: SP.clt_upper_bound("x", 0.1), TypeError),
)
probes(
    _P + "cvar_weights",
    raises("alpha", lambda: SP.cvar_weights(_X, -0.1), ValueError),
    raises("values", lambda: SP.cvar_weights(None, 0.1), TypeError),
    raises("probabilities", lambda: SP.cvar_weights(_X, 0.1, jnp.ones(3) / 3), ValueError),
)
probes(
    _P + "bootstrap_multiplicities",
    raises("rng_key", lambda: SP.bootstrap_multiplicities(None, 3, 4), TypeError),
    raises("num_samples", lambda: SP.bootstrap_multiplicities(_key(), 0, 4), ValueError),
    raises("num_resamples", lambda: SP.bootstrap_multiplicities(_key(), 3, 2.0), TypeError),
)
probes(
    _P + "TwoStageLP",
    raises("T", lambda: SP.TwoStageLP(**{**_MODEL, "T": np.ones((3, 1, 1))}), ValueError),
    raises("q", lambda: SP.TwoStageLP(**{**_MODEL, "q": [1.0, 2.0, 3.0]}), ValueError),
    raises("W", lambda: SP.TwoStageLP(**{**_MODEL, "W": np.ones((2, 2, 2))}), ValueError),
    raises("h", lambda: SP.TwoStageLP(**{**_MODEL, "h": np.zeros((0, 1))}), ValueError),
    raises("c", lambda: SP.TwoStageLP(**{**_MODEL, "c": [NAN]}), ValueError),
    raises("x_lower", lambda: SP.TwoStageLP(**_MODEL, x_lower=[2.0], x_upper=[1.0]), ValueError),
    raises("A", lambda: SP.TwoStageLP(**_MODEL, A=[[1.0]]), TypeError, "A without b"),
    raises("A", lambda: SP.TwoStageLP(**_MODEL, A=[[1.0, 1.0]], b=[1.0]), ValueError),
)
_LP = SP.TwoStageLP(**_MODEL, x_upper=[10.0])
_INFEASIBLE = SP.TwoStageLP(
    c=[1.0], W=[[[1.0, -1.0]], [[1.0, 1.0]]], T=[[1.0]], h=[[2.0], [-1.0]], q=[3.0, 0.0]
)
for _name in ("extensive_form", "solve_extensive_form"):
    _fn = getattr(SP, _name)
    probes(
        _P + _name,
        raises("model", lambda f=_fn: f("model"), TypeError),
        raises("alpha", lambda f=_fn: f(_LP, alpha=2.0, multiplicities=np.ones((3, 2)))),
        raises("multiplicities", lambda f=_fn: f(_LP, alpha=0.1, multiplicities=np.ones((3, 5)))),
        raises("multiplicities", lambda f=_fn: f(_LP, alpha=0.1, multiplicities=-np.ones((3, 2)))),
    )
probes(
    _P + "solve_extensive_form",
    raises("scenario 1", lambda: SP.solve_extensive_form(_INFEASIBLE), ValueError, "infeasible"),
)
probes(
    _P + "recourse_lp",
    raises("model", lambda: SP.recourse_lp(None), TypeError),
    raises("x", lambda: SP.recourse_lp(_LP)([1.0, 2.0]), ValueError, "shape"),
    raises("scenario 1", lambda: SP.recourse_lp(_INFEASIBLE)([0.0]), ValueError, "infeasible"),
)
probes(
    _P + "positive_stable",
    raises("a", lambda: SP.positive_stable(_key(), (3,), 1.0), ValueError),
    raises("rng_key", lambda: SP.positive_stable(0, (3,), 0.5), TypeError),
)
probes(
    _P + "gumbel_copula",
    raises("theta", lambda: SP.gumbel_copula(_key(), 3, 2, 0.5), ValueError),
    raises("dim", lambda: SP.gumbel_copula(_key(), 3, 0, 2.0), ValueError),
    raises("num_samples", lambda: SP.gumbel_copula(_key(), -1, 2, 2.0), ValueError),
)
probes(
    _P + "Regime",
    raises("theta", lambda: SP.Regime(0.5, (1.0, 2.0), (1.0, 2.0), (0.5, 1.0)), ValueError),
    raises("hours", lambda: SP.Regime(2.0, (3.0, 2.0), (1.0, 2.0), (0.5, 1.0)), ValueError),
    raises("efficiency", lambda: SP.Regime(2.0, (1.0, 2.0), (1.0, 2.0), (0.0, 1.0)), ValueError),
)
probes(
    _P + "ProductMixConfig",
    raises("hours", lambda: SP.ProductMixConfig(profit=(1.0, 2.0), hours=((1.0,),)), ValueError),
    raises("regular_probability", lambda: SP.ProductMixConfig((1.0,), ((1.0,),), 1.5)),
    raises("x_upper", lambda: SP.ProductMixConfig((1.0,), ((1.0,),), x_upper=0.0)),
)
probes(
    _P + "product_mix_config",
    raises("num_products", lambda: SP.product_mix_config(0, 2), ValueError),
    raises("num_stations", lambda: SP.product_mix_config(4, 2.5), TypeError),
)
probes(
    _P + "sample_product_mix",
    raises("config", lambda: SP.sample_product_mix(_key(), 3, None), TypeError),
    raises("num_samples", lambda: SP.sample_product_mix(_key(), 0, SP.product_mix_config())),
)
probes(
    _P + "product_mix_recourse",
    raises("x", lambda: SP.product_mix_recourse(jnp.ones(3), _scenarios(), jnp.ones((2, 4)))),
    raises("scenarios", lambda: SP.product_mix_recourse(jnp.ones(4), (1, 2), jnp.ones((2, 4)))),
    raises("hours", lambda: SP.product_mix_recourse(jnp.ones(4), _scenarios(), jnp.ones((3, 4)))),
)
probes(
    _P + "product_mix_model",
    raises("config", lambda: SP.product_mix_model(_scenarios(), None), TypeError),
    raises(
        "scenarios.cost",
        lambda: SP.product_mix_model(
            _scenarios()._replace(cost=jnp.ones((3, 5))), SP.product_mix_config()
        ),
        ValueError,
    ),
    raises(
        "x_upper",
        lambda: SP.product_mix_model(_scenarios(), SP.product_mix_config(), x_upper=-1.0),
        ValueError,
    ),
)
probes(
    _P + "recourse_lower_bound",
    raises("model", lambda: SP.recourse_lower_bound("model"), TypeError),
    raises(
        "scenario 0",
        lambda: SP.recourse_lower_bound(
            SP.TwoStageLP(c=[1.0], W=[[1.0, -1.0]], T=[[1.0]], h=[[2.0]], q=[-1.0, 0.0])
        ),
        ValueError,
        "unbounded below",
    ),
)

# Issue 44: malformed bootstrap counts and laws (family B), negative sizes (D), misleading
# messages (G).
_N2 = dict(c=[1.0], W=[[1.0, -1.0]], T=[[1.0]], h=[[2.0], [4.0]], q=[3.0, 0.0])
for _name in ("apub", "efron_upper_bound"):
    _fn = getattr(SP, _name)
    _lvl = 0.5
    probes(
        _P + _name,
        raises("multiplicities", lambda f=_fn: f(_X, _lvl, multiplicities=2 * _V), ValueError,
               "rows sum to 2N"),
        raises("multiplicities", lambda f=_fn: f(_X, _lvl, multiplicities=np.array(
               [[-1, 3, 1, 1]] * 5)), ValueError, "negative"),
        raises("multiplicities", lambda f=_fn: f(_X, _lvl, multiplicities=np.full((5, 4), 1.0)
               + np.array([0.5, -0.5, 0.0, 0.0])), ValueError, "fractional"),
        raises("multiplicities", lambda f=_fn: f(_X, _lvl, multiplicities=np.where(
               np.eye(5, 4) > 0, np.nan, 1.0)), ValueError, "nan"),
    )  # fmt: skip
for _name in ("extensive_form", "solve_extensive_form"):
    _fn = getattr(SP, _name)
    probes(
        _P + _name,
        raises("multiplicities", lambda f=_fn: f(SP.TwoStageLP(**_N2), alpha=0.5,
               multiplicities=[[1.0, 0.0]]), ValueError, "row sums to 1 of N=2"),
        raises("multiplicities", lambda f=_fn: f(SP.TwoStageLP(**_N2), alpha=0.5,
               multiplicities=[[1.5, 0.5]]), ValueError, "fractional"),
        raises("multiplicities", lambda f=_fn: f(SP.TwoStageLP(**_N2), alpha=0.5,
               multiplicities=[[np.nan, 2.0]]), ValueError, "nan"),
    )  # fmt: skip
probes(
    _P + "cvar_weights",
    raises("probabilities", lambda: SP.cvar_weights(_X, 0.5, jnp.full(4, 0.5)), ValueError,
           "sums to 2"),
    raises("probabilities", lambda: SP.cvar_weights(_X, 0.5, jnp.array([1.5, -0.5, 0.0, 0.0])),
           ValueError, "negative"),
    raises("probabilities", lambda: SP.cvar_weights(_X, 0.5, jnp.array([NAN, 0.5, 0.5, 0.0])),
           ValueError, "nan"),
)  # fmt: skip
probes(
    _P + "positive_stable",
    raises("shape", lambda: SP.positive_stable(_key(), (-1,), 0.5), ValueError, "negative"),
    raises("shape", lambda: SP.positive_stable(_key(), "3", 0.5), TypeError, "str"),
)
probes(
    _P + "TwoStageLP",
    raises("x_upper", lambda: SP.TwoStageLP(**_N2, x_upper=[1.0, 2.0]), ValueError, "length"),
    raises("x_lower", lambda: SP.TwoStageLP(**_N2, x_lower=[0.0, 0.0, 0.0]), ValueError),
)
probes(
    _P + "product_mix_model",
    raises(
        "scenarios.hours",
        lambda: SP.product_mix_model(
            _scenarios()._replace(hours=jnp.array([1.0, NAN, 2.0])), SP.product_mix_config()
        ),
        ValueError,
        "nan",
    ),
)
