"""Bad-input probes for jaxlab.optim (the error-feedback family is in optim_ef.py).

This file covers DeVA, SOAP, Newton-Schulz and ``delayed`` (``jaxlab/optim/_deva.py``,
``_soap.py``, ``_newton_schulz.py``, ``_delay.py``). Probes fail eagerly: a factory argument,
``init`` on bad params, or ``update`` on updates that do not match the state (checked before any
arithmetic). The status probes run one tiny eager update with a NaN gradient and read the
documented ``nonfinite_count``.
"""

import jax
import jax.numpy as jnp
import optax

from jaxlab import optim
from tests.bad_input import no_probes, optim_ef, probes, raises, status  # noqa: F401

_NAN, _INF = float("nan"), float("inf")
_INT_PARAMS = {"w": jnp.zeros((3, 2), jnp.int32)}


def _update_with(tx, params, updates):
    """``tx.update(updates, tx.init(params), params)`` (the mismatch raises before arithmetic)."""
    return tx.update(updates, tx.init(params), params)


def _nonfinite_count_after_nan(tx, params, field=lambda state: state.nonfinite_count):
    bad = jax.tree.map(lambda p: jnp.full_like(p, jnp.nan), params)
    _, state = tx.update(bad, tx.init(params), params)
    return int(field(state))


# ------------------------------------------------------------------------------------------------
# DeVA (jaxlab/optim/_deva.py).

probes(
    "jaxlab.optim.deva",
    raises("learning_rate", lambda: optim.deva(-1e-3), ValueError),
    raises("learning_rate", lambda: optim.deva(_NAN), ValueError),
    raises("learning_rate", lambda: optim.deva("0.1"), TypeError),
    raises("fallback_learning_rate", lambda: optim.deva(1e-3, fallback_learning_rate=_INF)),
    raises("fallback_b1", lambda: optim.deva(1e-3, fallback_b1=1.0), ValueError),
    raises("eps", lambda: optim.deva(1e-3, eps=-1e-8), ValueError),
    raises("fallback_eps", lambda: optim.deva(1e-3, fallback_eps=-1e-8), ValueError),
    raises("weight_decay", lambda: optim.deva(1e-3, weight_decay=None), TypeError),
    raises("fallback", lambda: optim.deva(1e-3, fallback="sgd"), ValueError),
    raises("matrix_filter", lambda: optim.deva(1e-3, matrix_filter="2d"), TypeError),
    raises("ns_coeffs", lambda: optim.deva(1e-3, ns_coeffs=(1.0, 2.0)), ValueError),
    raises("max_precond_dim", lambda: optim.deva(1e-3, max_precond_dim=1.5), TypeError),
    raises("params", lambda: optim.deva(1e-3).init(_INT_PARAMS), TypeError),
    raises(
        "updates",
        lambda: _update_with(optim.deva(1e-3), {"w": jnp.zeros(5)}, {"w": jnp.ones((3, 5))}),
        ValueError,
        "an update of shape (3, 5) for params of shape (5,)",
    ),
    status(
        "updates",
        lambda: _nonfinite_count_after_nan(optim.deva(1e-3), {"b": jnp.zeros(2)}),
        lambda count: count == 1,
        "a NaN gradient is counted in DevaState.nonfinite_count",
    ),
)
probes(
    "jaxlab.optim.deva_vector",
    raises("learning_rate", lambda: optim.deva_vector(_INF), ValueError),
    raises("learning_rate", lambda: optim.deva_vector(None), TypeError),
    raises("b1", lambda: optim.deva_vector(1e-3, b1=1.0), ValueError),
    raises("weight_decay", lambda: optim.deva_vector(1e-3, weight_decay=-0.1), ValueError),
    raises("params", lambda: optim.deva_vector(1e-3).init(_INT_PARAMS), TypeError),
)
probes(
    "jaxlab.optim.scale_by_deva_vector",
    raises("b2", lambda: optim.scale_by_deva_vector(b2=_NAN), ValueError),
    raises("b1", lambda: optim.scale_by_deva_vector(b1=1j), TypeError),
    raises("eps", lambda: optim.scale_by_deva_vector(eps=0.0), ValueError),
    raises("nesterov", lambda: optim.scale_by_deva_vector(nesterov="yes"), TypeError),
    raises(
        "updates",
        lambda: _update_with(optim.scale_by_deva_vector(), jnp.zeros(5), jnp.ones(1)),
        ValueError,
        "(1,) updates for a (5,) state",
    ),
    status(
        "updates",
        lambda: _nonfinite_count_after_nan(optim.scale_by_deva_vector(), jnp.zeros(2)),
        lambda count: count == 1,
        "a NaN gradient is counted in nonfinite_count",
    ),
)
probes(
    "jaxlab.optim.scale_by_deva_matrix",
    raises("precondition_frequency", lambda: optim.scale_by_deva_matrix(precondition_frequency=0)),
    raises(
        "precondition_frequency",
        lambda: optim.scale_by_deva_matrix(precondition_frequency=2.0),
        TypeError,
    ),
    raises("max_precond_dim", lambda: optim.scale_by_deva_matrix(max_precond_dim="big"), TypeError),
    raises("ns_steps", lambda: optim.scale_by_deva_matrix(ns_steps=0), ValueError),
    raises("rms_scale", lambda: optim.scale_by_deva_matrix(rms_scale=-1.0), ValueError),
    raises("shampoo_beta", lambda: optim.scale_by_deva_matrix(shampoo_beta=1.5), ValueError),
    raises("params", lambda: optim.scale_by_deva_matrix().init(_INT_PARAMS), TypeError),
    raises(
        "updates",
        lambda: _update_with(optim.scale_by_deva_matrix(), jnp.zeros((3, 2)), jnp.ones((2, 3))),
        ValueError,
    ),
)
probes(
    "jaxlab.optim.deva_matrix_labels",
    raises(
        "matrix_filter", lambda: optim.deva_matrix_labels({"w": jnp.ones((2, 2))}, 3), TypeError
    ),
)
probes(
    "jaxlab.optim.is_hidden_matrix",
    raises("path", lambda: optim.is_hidden_matrix("w", jnp.ones((2, 2))), TypeError),
    raises("path", lambda: optim.is_hidden_matrix(None, jnp.ones((2, 2))), TypeError),
)
probes(
    "jaxlab.optim.quadratic_toy_hessian",
    raises("rng_key", lambda: optim.quadratic_toy_hessian(None, [[1.0, 2.0]]), TypeError),
    raises("rng_key", lambda: optim.quadratic_toy_hessian(0, [[1.0, 2.0]]), TypeError),
    raises(
        "eigenvalues",
        lambda: optim.quadratic_toy_hessian(jax.random.key(0), [[1.0, _NAN]]),
        ValueError,
    ),
    raises(
        "eigenvalues", lambda: optim.quadratic_toy_hessian(jax.random.key(0), [1.0]), ValueError
    ),
    raises(
        "eigenvalues",
        lambda: optim.quadratic_toy_hessian(jax.random.key(0), [["a", "b"]]),
        TypeError,
    ),
)
no_probes("jaxlab.optim.DevaState", "a state NamedTuple: built by init")
no_probes("jaxlab.optim.ScaleByDevaVectorState", "a state NamedTuple: built by init")
no_probes("jaxlab.optim.ScaleByDevaMatrixState", "a state NamedTuple: built by init")

# ------------------------------------------------------------------------------------------------
# Newton-Schulz (jaxlab/optim/_newton_schulz.py).

probes(
    "jaxlab.optim.newton_schulz_msign",
    raises("x", lambda: optim.newton_schulz_msign(jnp.ones((2, 2), jnp.int32)), TypeError),
    raises("x", lambda: optim.newton_schulz_msign(jnp.ones(3)), ValueError),
    raises("x", lambda: optim.newton_schulz_msign("x"), TypeError),
    raises("steps", lambda: optim.newton_schulz_msign(jnp.ones((2, 2)), steps=0), ValueError),
    raises(
        "coeffs",
        lambda: optim.newton_schulz_msign(jnp.ones((2, 2)), coeffs=(1.0, _NAN, 0.0)),
        ValueError,
    ),
)

# ------------------------------------------------------------------------------------------------
# SOAP (jaxlab/optim/_soap.py).

probes(
    "jaxlab.optim.scale_by_soap",
    raises("b1", lambda: optim.scale_by_soap(b1=1.0), ValueError),
    raises("eps", lambda: optim.scale_by_soap(eps=-1.0), ValueError),
    raises("precondition_frequency", lambda: optim.scale_by_soap(precondition_frequency=True)),
    raises("max_precond_dim", lambda: optim.scale_by_soap(max_precond_dim=0), ValueError),
    raises("params", lambda: optim.scale_by_soap().init(_INT_PARAMS), TypeError),
    raises(
        "updates",
        lambda: _update_with(optim.scale_by_soap(), {"w": jnp.zeros((3, 2))}, {"w": jnp.ones(2)}),
        ValueError,
    ),
)
no_probes("jaxlab.optim.ScaleBySoapState", "a state NamedTuple: built by init")

# ------------------------------------------------------------------------------------------------
# One-step gradient delay (jaxlab/optim/_delay.py).

probes(
    "jaxlab.optim.delayed",
    raises("inner", lambda: optim.delayed(lambda g: g), TypeError),
    raises("delay_steps", lambda: optim.delayed(optax.sgd(0.1), delay_steps=-1), ValueError),
    raises("delay_steps", lambda: optim.delayed(optax.sgd(0.1), delay_steps=1.5), TypeError),
    raises("correction", lambda: optim.delayed(optax.sgd(0.1), correction="nesterov"), ValueError),
    raises(
        "extrapolation",
        lambda: optim.delayed(
            optax.sgd(0.1), correction="update_extrapolation", extrapolation=_INF
        ),
        ValueError,
    ),
    raises(
        "buffer_decay",
        lambda: optim.delayed(optax.sgd(0.1), correction="error_buffer", buffer_decay=5.0),
        ValueError,
    ),
    raises("params", lambda: optim.delayed(optax.sgd(0.1)).init(_INT_PARAMS), TypeError),
    raises(
        "updates",
        lambda: _update_with(optim.delayed(optax.sgd(0.1)), jnp.zeros(5), jnp.ones((3, 5))),
        ValueError,
        "an update of shape (3, 5) for a (5,) state",
    ),
    raises(
        "updates",
        lambda: _update_with(optim.delayed(optax.sgd(0.1)), jnp.zeros(5), jnp.ones(1)),
        ValueError,
        "(1,) updates for a (5,) state",
    ),
    status(
        "updates",
        lambda: _nonfinite_count_after_nan(optim.delayed(optax.sgd(0.1)), jnp.zeros(2)),
        lambda count: count == 1,
        "a NaN gradient is counted in DelayState.nonfinite_count",
    ),
)
no_probes("jaxlab.optim.DelayState", "a state NamedTuple: built by init")


# ------------------------------------------------------------------------------------------------
# Per-sample harm minimisation, issue 21 (jaxlab/optim/_harm.py).

_HEAD = {"w": jnp.zeros((3, 2)), "b": jnp.zeros(2)}
_H, _D = jnp.ones((4, 3)), jnp.ones((4, 2))


def _harm_update(tx, **extra):
    return tx.update(_HEAD, tx.init(_HEAD), _HEAD, **extra)


def _harm_tx(**kwargs):
    return optim.harm(optax.sgd(0.1), kernel_path=("w",), bias_path=("b",), **kwargs)


probes(
    "jaxlab.optim.harm",
    raises("inner", lambda: optim.harm("sgd", kernel_path=("w",)), TypeError),
    raises("kernel_path", lambda: optim.harm(optax.sgd(0.1), kernel_path="w"), TypeError),
    raises(
        "kernel_path",
        lambda: _harm_update(
            optim.harm(optax.sgd(0.1), kernel_path=("v",)), features=_H, logit_grads=_D
        ),
        ValueError,
    ),  # fmt: skip
    raises("margin", lambda: _harm_tx(margin=-1.0), ValueError),
    raises("ridge", lambda: _harm_tx(ridge=_NAN), ValueError),
    raises("num_iterations", lambda: _harm_tx(num_iterations=0), ValueError),
    raises("num_iterations", lambda: _harm_tx(num_iterations=2.5), TypeError),
    raises("params", lambda: _harm_tx().init({"w": jnp.zeros((3, 2), jnp.int32)}), TypeError),
    raises("features", lambda: _harm_update(_harm_tx(), logit_grads=_D), TypeError),
    raises(
        "logit_grads", lambda: _harm_update(_harm_tx(), features=_H, logit_grads=_D[:3]), ValueError
    ),  # fmt: skip
    raises(
        "features",
        lambda: _harm_update(_harm_tx(), features=jnp.ones((4, 5)), logit_grads=_D),
        ValueError,
    ),  # fmt: skip
    raises(
        "features",
        lambda: _harm_update(_harm_tx(), features=jnp.ones((4, 3), jnp.int32), logit_grads=_D),
        TypeError,
    ),  # fmt: skip
    status(
        "features",
        lambda: int(
            _harm_update(_harm_tx(), features=_H.at[0, 0].set(_NAN), logit_grads=_D)[1][
                1
            ].nonfinite_count
        ),
        lambda count: count == 1,
        "a NaN activation is counted in HarmState.nonfinite_count",
    ),  # fmt: skip
)
probes(
    "jaxlab.optim.harm_sgd",
    raises("learning_rate", lambda: optim.harm_sgd(-0.1, kernel_path=("w",)), ValueError),
    raises("momentum", lambda: optim.harm_sgd(0.1, momentum=_INF, kernel_path=("w",)), ValueError),
    raises("momentum", lambda: optim.harm_sgd(0.1, momentum=1.5, kernel_path=("w",)), ValueError),
    raises("kernel_path", lambda: optim.harm_sgd(0.1, kernel_path=None), TypeError),
)
probes(
    "jaxlab.optim.harm_dual_terms",
    raises("kernel_direction", lambda: optim.harm_dual_terms(_H, _D, jnp.ones((2, 3))), ValueError),
    raises(
        "bias_direction",
        lambda: optim.harm_dual_terms(_H, _D, jnp.ones((3, 2)), jnp.ones(3)),
        ValueError,
    ),  # fmt: skip
    raises("features", lambda: optim.harm_dual_terms(None, _D, jnp.ones((3, 2))), TypeError),
    raises("logit_grads", lambda: optim.harm_dual_terms(_H, "d", jnp.ones((3, 2))), TypeError),
)
probes(
    "jaxlab.optim.solve_harm_dual",
    raises("gram", lambda: optim.solve_harm_dual(jnp.eye(3), jnp.ones(2)), ValueError),
    raises("gram", lambda: optim.solve_harm_dual(-jnp.eye(3), jnp.ones(3)), ValueError),
    raises(
        "gram",
        lambda: optim.solve_harm_dual(jnp.array([[1.0, 2.0], [0.0, 1.0]]), jnp.ones(2)),
        ValueError,
    ),
    raises("linear", lambda: optim.solve_harm_dual(jnp.eye(2), jnp.ones((2, 2))), ValueError),
    raises("margin", lambda: optim.solve_harm_dual(jnp.eye(2), jnp.ones(2), margin=-0.5)),
    raises("ridge", lambda: optim.solve_harm_dual(jnp.eye(2), jnp.ones(2), ridge=-1.0)),
    raises(
        "num_iterations", lambda: optim.solve_harm_dual(jnp.eye(2), jnp.ones(2), num_iterations=-3)
    ),  # fmt: skip
)
probes(
    "jaxlab.optim.exact_harm_weights",
    raises(
        "direction", lambda: optim.exact_harm_weights(jnp.ones((2, 5)), jnp.ones(4)), ValueError
    ),
    raises(
        "per_sample_grads", lambda: optim.exact_harm_weights(jnp.ones(5), jnp.ones(5)), ValueError
    ),  # fmt: skip
)
probes(
    "jaxlab.optim.harm_train_step",
    raises(
        "model_fn",
        lambda: optim.harm_train_step(None, lambda z, b: z, optax.sgd(0.1), kernel_path=("w",)),
        TypeError,
    ),  # fmt: skip
    raises(
        "loss_fn",
        lambda: optim.harm_train_step(lambda p, b: b, 3, optax.sgd(0.1), kernel_path=("w",)),
        TypeError,
    ),  # fmt: skip
    raises(
        "optimizer",
        lambda: optim.harm_train_step(lambda p, b: b, lambda z, b: z, "adam", kernel_path=("w",)),
        TypeError,
    ),  # fmt: skip
    raises(
        "margin",
        lambda: optim.harm_train_step(
            lambda p, b: b, lambda z, b: z, optax.sgd(0.1), kernel_path=("w",), margin=_NAN
        ),
        ValueError,
    ),  # fmt: skip
    status(
        "batch",
        lambda: bool(
            optim.harm_train_step(
                lambda p, x: (x @ p["w"], x),
                lambda z, x: optax.softmax_cross_entropy_with_integer_labels(z, jnp.zeros(4, int)),
                optax.sgd(0.1),
                kernel_path=("w",),
            )(
                {"w": jnp.zeros((3, 2))},
                optax.sgd(0.1).init({"w": jnp.zeros((3, 2))}),
                _H.at[0, 0].set(_NAN),
            )[2].nonfinite
        ),
        lambda flagged: flagged,
        "a NaN input is flagged in HarmInfo.nonfinite",
    ),  # fmt: skip
)
no_probes("jaxlab.optim.HarmState", "a state NamedTuple: built by init")
no_probes("jaxlab.optim.HarmInfo", "a diagnostics NamedTuple: built by harm_train_step")
probes(
    "jaxlab.optim.first_order_harm",
    raises("direction", lambda: optim.first_order_harm(jnp.ones((2, 5)), jnp.ones(4)), ValueError),
    raises(
        "per_sample_grads", lambda: optim.first_order_harm(jnp.ones(5), jnp.ones(5)), ValueError
    ),
    raises(
        "direction",
        lambda: optim.first_order_harm(jnp.ones((2, 3)), jnp.array([_NAN, 0.0, 0.0])),
        ValueError,
    ),
    raises(
        "per_sample_grads",
        lambda: optim.first_order_harm(jnp.ones((2, 3)).at[0, 0].set(_NAN), jnp.ones(3)),
        ValueError,
    ),
    raises("tol", lambda: optim.first_order_harm(jnp.ones((2, 3)), jnp.ones(3), tol=-1.0)),
)
_MLP = [{"kernel": jnp.eye(2), "bias": jnp.zeros(2)}]
probes(
    "jaxlab.optim.mlp_exact_harm_train_step",
    raises("optimizer", lambda: optim.mlp_exact_harm_train_step("sgd"), TypeError),
    raises("ridge", lambda: optim.mlp_exact_harm_train_step(optax.sgd(0.1), ridge=-1.0)),
    raises(
        "num_iterations",
        lambda: optim.mlp_exact_harm_train_step(optax.sgd(0.1), num_iterations=0),
        ValueError,
    ),
    raises(
        "params",
        lambda: optim.mlp_exact_harm_train_step(optax.sgd(0.1))(
            {"w": jnp.eye(2)}, None, (jnp.eye(2), jnp.zeros(2, jnp.int32))
        ),
        TypeError,
    ),
    status(
        "x",
        lambda: bool(
            optim.mlp_exact_harm_train_step(optax.sgd(0.1))(
                _MLP,
                optax.sgd(0.1).init(_MLP),
                (jnp.eye(2).at[0, 0].set(_NAN), jnp.zeros(2, jnp.int32)),
            )[2].nonfinite
        ),
        lambda flagged: flagged,
        "a NaN input is flagged in HarmInfo.nonfinite",
    ),
)
probes(
    "jaxlab.optim.mlp_logits_and_features",
    raises(
        "params", lambda: optim.mlp_logits_and_features({"w": jnp.eye(2)}, jnp.eye(2)), TypeError
    ),
    raises("x", lambda: optim.mlp_logits_and_features(_MLP, jnp.ones(2)), ValueError),
)


# --- issue 43: DeVA's and harm's experiment programs and problems in the library -----------------
probes(
    "jaxlab.optim.quadratic_toy_schedule",
    raises("steps", lambda: optim.quadratic_toy_schedule(0.1, 0)),
)
probes(
    "jaxlab.optim.quadratic_toy_optimizer",
    raises("method", lambda: optim.quadratic_toy_optimizer("lion", 0.1), ValueError),
)
probes(
    "jaxlab.optim.quadratic_toy_curve",
    raises("rng_key", lambda: optim.quadratic_toy_curve(None, [[1.0]], optax.sgd(0.1), steps=2)),
    raises(
        "steps",
        lambda: optim.quadratic_toy_curve(jax.random.key(0), [[1.0]], optax.sgd(0.1), steps=0),
    ),
)
probes(
    "jaxlab.optim.quadratic_toy_problems",
    raises("squared", lambda: optim.quadratic_toy_problems(squared="yes"), TypeError),
)
probes(
    "jaxlab.optim.quadratic_toy_sweep",
    raises(
        "method",
        lambda: optim.quadratic_toy_sweep("lion", None, None, None, None, steps=2),
        ValueError,
    ),
)
probes(
    "jaxlab.optim.deva_muon_baseline",
    raises("learning_rate", lambda: optim.deva_muon_baseline(-1.0)),
    raises("weight_decay", lambda: optim.deva_muon_baseline(0.1, weight_decay=_NAN)),
)
probes(
    "jaxlab.optim.deva_lm_optimizer",
    raises("method", lambda: optim.deva_lm_optimizer("sgd", 0.1), ValueError),
    raises("learning_rate", lambda: optim.deva_lm_optimizer("adamw", _INF)),
)
no_probes("jaxlab.optim.MLPHarmTraining", "a NamedTuple of programs built by mlp_harm_training")
probes(
    "jaxlab.optim.mlp_harm_step",
    raises("arm", lambda: optim.mlp_harm_step("proxy", optax.sgd(0.1), _MLP), ValueError),
    raises("params", lambda: optim.mlp_harm_step("base", optax.sgd(0.1), {"w": 1}), TypeError),
)
probes(
    "jaxlab.optim.mlp_harm_probe",
    raises(
        "params",
        lambda: optim.mlp_harm_probe(optax.sgd(0.1), {"w": 1}, None, jnp.eye(2), jnp.zeros(2)),
        TypeError,
    ),
)
probes(
    "jaxlab.optim.mlp_harm_training",
    raises(
        "arm",
        lambda: optim.mlp_harm_training(
            "proxy", optax.sgd, lambda k: _MLP, jnp.eye(2), batch_size=1, chunk_steps=1
        ),
        ValueError,
    ),
    raises(
        "batch_size",
        lambda: optim.mlp_harm_training(
            "base", optax.sgd, lambda k: _MLP, jnp.eye(2), batch_size=0, chunk_steps=1
        ),
    ),
)
probes(
    "jaxlab.optim.mlp_harm_step_seconds",
    raises(
        "steps",
        lambda: optim.mlp_harm_step_seconds(
            optax.sgd(0.1), _MLP, jnp.eye(2), jnp.zeros(2, jnp.int32), steps=0
        ),
    ),
)
probes(
    "jaxlab.optim.mlp_accuracy",
    raises("params", lambda: optim.mlp_accuracy({"w": 1}, jnp.eye(2), jnp.zeros(2)), TypeError),
)
