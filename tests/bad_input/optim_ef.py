"""Bad-input probes for the error-feedback family of jaxlab.optim.

Covers every public name defined in ``jaxlab/optim/_compressors.py``, ``_error_feedback.py``,
``_ef_theory.py`` and ``_problems.py``; the rest of ``jaxlab.optim`` is in ``optim.py``. Every
probe fails eagerly (a factory argument, ``init`` on bad params, ``update`` on mismatched
updates), so nothing here compiles more than a tiny program.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab import optim
from tests.bad_input import no_probes, probes, raises, status

_NAN, _INF = float("nan"), float("inf")


def _ef_state_after_nan(factory):
    """A state after one NaN gradient (its nonfinite_count must read 1)."""
    tx = factory(optim.top_k(1))
    _, state = tx.update(jnp.array([jnp.nan, 1.0]), tx.init(jnp.zeros(2)))
    return state


# ------------------------------------------------------------------------------------------------
# Compressors (jaxlab/optim/_compressors.py).

probes(
    "jaxlab.optim.Compressor",
    raises("scope", lambda: optim.identity(scope="all"), ValueError),
    raises("rng_key", lambda: optim.rand_k(1).tree_compress(jnp.ones(3)), ValueError),
    raises("rng_key", lambda: optim.rand_k(1).tree_compress(jnp.ones(3), rng_key=0), TypeError),
    raises("tree", lambda: optim.top_k(1).tree_compress({"w": jnp.ones(3, jnp.int32)}), TypeError),
    raises("v", lambda: optim.top_k(1).compress(jnp.ones((2, 2))), ValueError),
)
probes(
    "jaxlab.optim.identity",
    raises("scope", lambda: optim.identity(scope=None), ValueError),
    raises("v", lambda: optim.identity().compress(jnp.arange(3)), TypeError),
)
probes(
    "jaxlab.optim.top_k",
    raises("k", lambda: optim.top_k(0), ValueError),
    raises("k", lambda: optim.top_k("3"), TypeError),
    raises("k", lambda: optim.top_k(True), TypeError),
    raises("ratio", lambda: optim.top_k(ratio=_NAN), ValueError),
    raises("ratio", lambda: optim.top_k(ratio=1j), TypeError),
    raises("k", lambda: optim.top_k(5).compress(jnp.ones(3)), ValueError),
)
probes(
    "jaxlab.optim.rand_k",
    raises("k", lambda: optim.rand_k(-1), ValueError),
    raises("ratio", lambda: optim.rand_k(ratio=1.5), ValueError),
    raises("unbiased", lambda: optim.rand_k(1, unbiased=1), TypeError),
    raises("rng_key", lambda: optim.rand_k(1).compress(jnp.ones(3), None), ValueError),
    raises("rng_key", lambda: optim.rand_k(1).compress(jnp.ones(3), "key"), TypeError),
)
probes(
    "jaxlab.optim.scaled_sign",
    raises("scope", lambda: optim.scaled_sign(scope=1), ValueError),
    raises("v", lambda: optim.scaled_sign().compress(jnp.ones((2, 2))), ValueError),
)
probes(
    "jaxlab.optim.natural_compression",
    raises("scope", lambda: optim.natural_compression(scope="tree"), ValueError),
    raises("rng_key", lambda: optim.natural_compression().compress(jnp.ones(3)), ValueError),
    raises("rng_key", lambda: optim.natural_compression().compress(jnp.ones(3), 3), TypeError),
)
probes(
    "jaxlab.optim.rotation_compressor",
    raises("epsilon", lambda: optim.rotation_compressor(1.0, 0.0), ValueError),
    raises("epsilon", lambda: optim.rotation_compressor(_NAN, 0.0), ValueError),
    raises("theta", lambda: optim.rotation_compressor(0.5, _INF), ValueError),
    raises("theta", lambda: optim.rotation_compressor(0.5, None), TypeError),
)
probes(
    "jaxlab.optim.block_top_k",
    raises("k_per_block", lambda: optim.block_top_k(0, 4), ValueError),
    raises("k_per_block", lambda: optim.block_top_k(5, 4), ValueError),
    raises("block_size", lambda: optim.block_top_k(1, 2.0), TypeError),
)
probes(
    "jaxlab.optim.threshold_top_k",
    raises("k", lambda: optim.threshold_top_k(0), ValueError),
    raises("sample_size", lambda: optim.threshold_top_k(2, sample_size=0), ValueError),
    raises("oversample", lambda: optim.threshold_top_k(2, oversample=_INF), ValueError),
    raises("oversample", lambda: optim.threshold_top_k(2, oversample="1.5"), TypeError),
    raises("rng_key", lambda: optim.threshold_top_k(1).compress(jnp.ones(3)), ValueError),
)

# ------------------------------------------------------------------------------------------------
# EF and EF21 (jaxlab/optim/_error_feedback.py).

for _name, _make in (
    ("error_feedback", lambda c, **kw: optim.error_feedback(0.1, c, **kw)),
    ("error_feedback_21", lambda c, **kw: optim.error_feedback_21(0.1, c, **kw)),
    ("scale_by_error_feedback", optim.scale_by_error_feedback),
    ("scale_by_error_feedback_21", optim.scale_by_error_feedback_21),
):
    probes(
        f"jaxlab.optim.{_name}",
        raises("compressor", lambda m=_make: m("top_k"), TypeError),
        raises("seed", lambda m=_make: m(optim.top_k(1), seed=1.5), TypeError),
        raises("axis_name", lambda m=_make: m(optim.top_k(1), axis_name=0), TypeError),
        raises(
            "params",
            lambda m=_make: m(optim.top_k(1)).init({"w": jnp.zeros(3, jnp.int32)}),
            TypeError,
            "integer params",
        ),
        raises(
            "updates",
            lambda m=_make: m(optim.top_k(1)).update(
                {"w": jnp.ones((3, 5))}, m(optim.top_k(1)).init({"w": jnp.zeros(5)})
            ),
            ValueError,
            "shape (3, 5) against (5,)",
        ),
        raises(
            "updates",
            lambda m=_make: m(optim.top_k(1)).update(
                {"w": jnp.ones(1)}, m(optim.top_k(1)).init({"w": jnp.zeros(5)})
            ),
            ValueError,
            "shape (1,) against (5,)",
        ),
        raises(
            "axis_name",
            lambda m=_make: m(optim.top_k(1), axis_name="workers").update(
                jnp.ones(2), m(optim.top_k(1), axis_name="workers").init(jnp.zeros(2))
            ),
            ValueError,
            "unbound outside vmap",
        ),
    )
for _name in ("error_feedback", "error_feedback_21"):
    probes(
        f"jaxlab.optim.{_name}",
        raises("learning_rate", lambda n=_name: getattr(optim, n)(-0.1, optim.top_k(1))),
        raises("learning_rate", lambda n=_name: getattr(optim, n)(_NAN, optim.top_k(1))),
        raises("learning_rate", lambda n=_name: getattr(optim, n)("0.1", optim.top_k(1))),
        raises("learning_rate", lambda n=_name: getattr(optim, n)(None, optim.top_k(1))),
        raises("learning_rate", lambda n=_name: getattr(optim, n)(1j, optim.top_k(1))),
    )
probes(
    "jaxlab.optim.scale_by_error_feedback",
    status(
        "updates",
        lambda: _ef_state_after_nan(optim.scale_by_error_feedback),
        lambda state: int(state.nonfinite_count) == 1,
        "NaN gradient counted in nonfinite_count",
    ),
)
probes(
    "jaxlab.optim.scale_by_error_feedback_21",
    raises("init", lambda: optim.scale_by_error_feedback_21(optim.top_k(1), init="dense")),
    raises("init", lambda: optim.scale_by_error_feedback_21(optim.top_k(1), init=None)),
    status(
        "updates",
        lambda: _ef_state_after_nan(optim.scale_by_error_feedback_21),
        lambda state: int(state.nonfinite_count) == 1,
        "NaN gradient counted in nonfinite_count",
    ),
)
no_probes("jaxlab.optim.ErrorFeedbackState", "a state NamedTuple: built by init")
no_probes("jaxlab.optim.ErrorFeedback21State", "a state NamedTuple: built by init")

# ------------------------------------------------------------------------------------------------
# Theory (jaxlab/optim/_ef_theory.py).

for _name in ("ef_optimal_step_size", "cgd_optimal_step_size", "ef21_two_worker_rate"):
    _fn = getattr(optim, _name)
    _args = ([1.0, 2.0], [0.1, 0.2], 0.5) if _name == "ef21_two_worker_rate" else (1.0, 0.1, 0.5)
    probes(
        f"jaxlab.optim.{_name}",
        raises("alpha", lambda f=_fn, a=_args: f(a[0], a[1], 0.0), ValueError),
        raises("alpha", lambda f=_fn, a=_args: f(a[0], a[1], _NAN), ValueError),
        raises("alpha", lambda f=_fn, a=_args: f(a[0], a[1], "0.5"), TypeError),
        raises(
            "smoothness",
            lambda f=_fn, a=_args: f(np.full(np.shape(a[0]), None), a[1], a[2]),
            TypeError,
        ),
        raises("strong_convexity", lambda f=_fn, a=_args: f(a[0], -1.0, a[2]), ValueError),
    )
probes(
    "jaxlab.optim.ef_tight_rate",
    raises("condition_number", lambda: optim.ef_tight_rate(0.5, 0.5), ValueError),
    raises("condition_number", lambda: optim.ef_tight_rate(_INF, 0.5), ValueError),
    raises("alpha", lambda: optim.ef_tight_rate(10.0, 1.5), ValueError),
    raises("alpha", lambda: optim.ef_tight_rate(10.0, True), TypeError),
)
probes(
    "jaxlab.optim.richtarik_ef21_step_size",
    raises("alpha", lambda: optim.richtarik_ef21_step_size(1.0, 0.1, -0.5), ValueError),
    raises("smoothness", lambda: optim.richtarik_ef21_step_size(_NAN, 0.1, 0.5), ValueError),
    raises("strong_convexity", lambda: optim.richtarik_ef21_step_size(1.0, None, 0.5)),
    raises(
        "global_smoothness",
        lambda: optim.richtarik_ef21_step_size(1.0, 0.1, 0.5, global_smoothness=-1.0),
    ),
)
probes(
    "jaxlab.optim.richtarik_ef21_rate",
    raises("alpha", lambda: optim.richtarik_ef21_rate(1.0, 0.1, 2.0), ValueError),
    raises("smoothness", lambda: optim.richtarik_ef21_rate("1", 0.1, 0.5), TypeError),
    raises(
        "global_smoothness",
        lambda: optim.richtarik_ef21_rate(1.0, 0.1, 0.5, reloaded=True, global_smoothness=_NAN),
    ),
)
probes(
    "jaxlab.optim.iterations_to_tolerance",
    raises("rate", lambda: optim.iterations_to_tolerance(1.5, 1e-3), ValueError),
    raises("rate", lambda: optim.iterations_to_tolerance(None, 1e-3), TypeError),
    raises("tolerance", lambda: optim.iterations_to_tolerance(0.5, -1.0), ValueError),
    raises("tolerance", lambda: optim.iterations_to_tolerance(0.5, _NAN), ValueError),
)
probes(
    "jaxlab.optim.ef_lyapunov",
    raises("alpha", lambda: optim.ef_lyapunov(jnp.zeros(2), jnp.zeros((3, 2)), jnp.zeros(2), 0.0)),
    raises(
        "errors",
        lambda: optim.ef_lyapunov(
            jnp.zeros(2), {"a": jnp.zeros((3, 2)), "b": jnp.zeros(2)}, jnp.zeros(2), 0.5
        ),
    ),
)
probes(
    "jaxlab.optim.ef21_lyapunov",
    raises("alpha", lambda: optim.ef21_lyapunov(jnp.zeros((3, 2)), jnp.zeros((3, 2)), _NAN)),
    raises(
        "strong_convexity",
        lambda: optim.ef21_lyapunov(jnp.zeros((3, 2)), jnp.zeros((3, 2)), 0.5, smoothness=1.0),
    ),
)
probes(
    "jaxlab.optim.linear_one_step_matrix",
    raises("method", lambda: optim.linear_one_step_matrix("sgd", 1.0, 0.0, 0.1, 0.5)),
    raises("curvature", lambda: optim.linear_one_step_matrix("ef", -1.0, 0.0, 0.1, 0.5)),
    raises("learning_rate", lambda: optim.linear_one_step_matrix("ef", 1.0, 0.0, _INF, 0.5)),
    raises("alpha", lambda: optim.linear_one_step_matrix("ef", 1.0, 0.0, 0.1, None)),
)

# ------------------------------------------------------------------------------------------------
# Problems, baseline, runner and worst-case search (jaxlab/optim/_problems.py).

no_probes("jaxlab.optim.DistributedProblem", "a result NamedTuple: built by the problem factories")
no_probes("jaxlab.optim.DistributedRun", "a result NamedTuple: returned by run_distributed")
probes(
    "jaxlab.optim.distributed_least_squares",
    raises("rng_key", lambda: optim.distributed_least_squares(None, 2, 3, 4)),
    raises("num_workers", lambda: optim.distributed_least_squares(jax.random.key(0), 0, 3, 4)),
    raises("dim", lambda: optim.distributed_least_squares(jax.random.key(0), 2, 3, 4.0)),
    raises("noise", lambda: optim.distributed_least_squares(jax.random.key(0), 2, 3, 4, -1.0)),
)
probes(
    "jaxlab.optim.breast_cancer_workers",
    raises("num_workers", lambda: optim.breast_cancer_workers(0), ValueError),
    raises("num_workers", lambda: optim.breast_cancer_workers("8"), TypeError),
)
_FEATURES, _LABELS = np.ones((2, 3, 4)), np.ones((2, 3))
for _name, _arg in (
    ("logistic_reference_minimiser", "l2"),
    ("logistic_regression_problem", "l2"),
    ("nonconvex_logistic_regression_problem", "regularization"),
):
    _fn = getattr(optim, _name)
    probes(
        f"jaxlab.optim.{_name}",
        raises(_arg, lambda f=_fn: f(_FEATURES, _LABELS, -1.0), ValueError),
        raises(_arg, lambda f=_fn: f(_FEATURES, _LABELS, _NAN), ValueError),
        raises(_arg, lambda f=_fn: f(_FEATURES, _LABELS, None), TypeError),
        raises("labels", lambda f=_fn: f(_FEATURES, np.ones((2, 4)), 0.1), ValueError),
    )
probes(
    "jaxlab.optim.compressed_gradient_descent",
    raises("learning_rate", lambda: optim.compressed_gradient_descent(-1.0, optim.top_k(1))),
    raises("learning_rate", lambda: optim.compressed_gradient_descent("1", optim.top_k(1))),
    raises(
        "learning_rate",
        lambda: optim.compressed_gradient_descent(lambda count: 0.1, optim.top_k(1)),
        TypeError,
        "a schedule",
    ),
    raises("compressor", lambda: optim.compressed_gradient_descent(0.1, optim.rand_k(1))),
    raises(
        "axis_name", lambda: optim.compressed_gradient_descent(0.1, optim.top_k(1), axis_name=1)
    ),
)


def _tiny_problem():
    return optim.distributed_least_squares(jax.random.key(0), 2, rows=3, dim=2)


probes(
    "jaxlab.optim.run_distributed",
    raises(
        "problem",
        lambda: optim.run_distributed(None, lambda s: None, 0.1, tolerance=1e-3, max_steps=5),
        TypeError,
    ),
    raises(
        "tolerance",
        lambda: optim.run_distributed(
            _tiny_problem(), lambda s: None, 0.1, tolerance=_NAN, max_steps=5
        ),
    ),
    raises(
        "max_steps",
        lambda: optim.run_distributed(
            _tiny_problem(), lambda s: None, 0.1, tolerance=1e-3, max_steps=0
        ),
    ),
    raises(
        "measure",
        lambda: optim.run_distributed(
            _tiny_problem(), lambda s: None, 0.1, tolerance=1e-3, max_steps=5, measure="loss"
        ),
    ),
)
probes(
    "jaxlab.optim.rotation_instance_rates",
    raises("alpha", lambda: optim.rotation_instance_rates("ef", [[1.0]], [[0.0]], 0.1, "x")),
    raises("alpha", lambda: optim.rotation_instance_rates("ef", [[1.0]], [[0.0]], 0.1, 0.0)),
    raises(
        "learning_rate",
        lambda: optim.rotation_instance_rates("ef", [[1.0]], [[0.0]], -0.1, 0.5),
    ),
    raises("curvature", lambda: optim.rotation_instance_rates("ef", [[_NAN]], [[0.0]], 0.1, 0.5)),
    raises("curvature", lambda: optim.rotation_instance_rates("ef", [1.0], [0.0], 0.1, 0.5)),
)
probes(
    "jaxlab.optim.worst_case_rate",
    raises(
        "smallest",
        lambda: optim.worst_case_rate("ef", [-1.0], [1.0], 0.1, 0.5, np.random.default_rng(0)),
    ),
    raises(
        "alpha",
        lambda: optim.worst_case_rate("ef", [0.1], [1.0], 0.1, _NAN, np.random.default_rng(0)),
    ),
    raises("rng", lambda: optim.worst_case_rate("ef", [0.1], [1.0], 0.1, 0.5, 0), TypeError),
    raises(
        "grid_curvatures",
        lambda: optim.worst_case_rate(
            "ef", [0.1], [1.0], 0.1, 0.5, np.random.default_rng(0), grid_curvatures=1
        ),
    ),
)
