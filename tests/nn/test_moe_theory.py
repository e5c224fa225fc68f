"""The routing-sparsity bound's algebra, its fit, the MoE FLOP account and the teacher task."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
from flax import nnx

from jaxlab.nn import (
    ConvergenceFit,
    GPTConfig,
    MixtureOfExperts,
    fit_convergence_constants,
    fixed_compute_steps,
    moe_teacher_student_task,
    moe_transformer_flop_constants,
    optimal_top_k,
    predicted_loss,
)

# ------------------------------------------------------------------------------------------------
# The optimum K* (the note's reference checks).


@pytest.mark.parametrize(
    "a,b,c0,raw,clipped",
    [
        (1.0, 1.0, 0.0, 16.0, 16.0),
        (4.0, 1.0, 0.0, 4.0, 4.0),
        (1.0, 1.0, 4.0, 21.856, 16.0),
        (1.0, 0.25, 4.0, 8.0, 8.0),
    ],
)
def test_optimal_top_k_note_reference_values(a, b, c0, raw, clipped):
    assert optimal_top_k(a, b, 16, c0, 1.0, clip=False) == pytest.approx(raw, abs=5e-4)
    assert optimal_top_k(a, b, 16, c0, 1.0) == pytest.approx(clipped, abs=1e-12)


def _brute_force_argmin(a, b, m, c0, c1, gamma, upper):
    k = np.linspace(0.05, upper, 400_001)
    bound = (a + b * m / k) * (c0 + c1 * k) ** gamma
    return k[np.argmin(bound)]


@pytest.mark.parametrize("seed", range(6))
def test_optimal_top_k_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(0.2, 5.0), rng.uniform(0.01, 2.0)
    m, c0, c1 = 16, rng.uniform(0.0, 10.0), rng.uniform(0.5, 3.0)
    gamma = rng.uniform(0.2, 0.8)
    raw = optimal_top_k(a, b, m, c0, c1, gamma=gamma, clip=False)
    brute = _brute_force_argmin(a, b, m, c0, c1, gamma, upper=3 * raw + 5)
    assert raw == pytest.approx(brute, abs=1e-3 * (3 * raw + 5))
    assert optimal_top_k(a, b, m, c0, c1, gamma=gamma) == pytest.approx(min(max(raw, 1), m))


def test_convexity_range_note_check_2():
    """a = 1, b = 0.25, M = 16: a√K + bM/√K is convex only up to K = 3bM/a = 12."""
    k = np.arange(1, 17, dtype=float)
    h = np.sqrt(k) + 0.25 * 16 / np.sqrt(k)
    second = h[2:] - 2 * h[1:-1] + h[:-2]  # at K = 2..15
    sign_change = k[1:-1][np.flatnonzero(np.diff(np.sign(second)))[0] + 1]
    assert sign_change in (12.0, 13.0)
    assert np.all(second[k[1:-1] <= 11] > 0) and np.all(second[k[1:-1] >= 13] < 0)


@pytest.mark.parametrize("budget", [10.0, 1e3, 1e6])
def test_unit_constants_prefer_dense_routing_note_check_3(budget):
    k = np.arange(1, 17)
    bound = np.sqrt(k / budget) + 16 / np.sqrt(k * budget)
    assert int(k[np.argmin(bound)]) == 16
    assert optimal_top_k(1.0, 1.0, 16, 0.0, 1.0) == 16.0


def test_optimal_top_k_bad_input():
    with pytest.raises(ValueError, match="a must"):
        optimal_top_k(0.0, 1.0, 16, 0.0, 1.0)
    with pytest.raises(ValueError, match="flops_per_expert"):
        optimal_top_k(1.0, 1.0, 16, 0.0, 0.0)
    with pytest.raises(ValueError, match="gamma"):
        optimal_top_k(1.0, 1.0, 16, 0.0, 1.0, gamma=1.0)
    with pytest.raises(TypeError, match="num_experts"):
        optimal_top_k(1.0, 1.0, 16.0, 0.0, 1.0)


def test_fixed_compute_steps_note_values():
    c0, c1 = 2 * 16 * 16, 4 * 16 * 32
    assert fixed_compute_steps([1, 2, 4, 8, 16], 500 * (c0 + 16 * c1), c0, c1) == [
        6500,
        3611,
        1912,
        985,
        500,
    ]


# ------------------------------------------------------------------------------------------------
# The fit.


def _synthetic(noise, seed=0, gamma=0.5):
    k, t = (v.ravel().astype(float) for v in np.meshgrid([1, 2, 4, 8, 16], [500, 1000, 2000]))
    loss = 1.2 + (40.0 + 3.0 * 16 / k) * t**-gamma
    loss = loss + noise * np.random.default_rng(seed).normal(size=loss.shape)
    return k, t, loss


def test_fit_recovers_exact_constants():
    k, t, loss = _synthetic(0.0, gamma=0.4)
    fit = fit_convergence_constants(k, t, loss, num_experts=16)
    assert fit.gamma == pytest.approx(0.4, abs=1e-5)
    assert (fit.loss_inf, fit.a, fit.b) == pytest.approx((1.2, 40.0, 3.0), rel=1e-4)
    assert fit.max_abs_residual < 1e-6
    np.testing.assert_allclose(predicted_loss(fit, k, t), loss, atol=1e-6)


@pytest.mark.parametrize("gamma", [0.5, None])
def test_fit_matches_scipy_curve_fit(gamma):
    k, t, loss = _synthetic(0.02, seed=3)

    if gamma is None:

        def model(x, loss_inf, a, b, g):
            return loss_inf + (a + b * 16 / x[0]) * x[1] ** -g

        p0 = (1.0, 30.0, 2.0, 0.5)
    else:

        def model(x, loss_inf, a, b):
            return loss_inf + (a + b * 16 / x[0]) * x[1] ** -0.5

        p0 = (1.0, 30.0, 2.0)
    reference, _ = scipy.optimize.curve_fit(model, np.stack([k, t]), loss, p0=p0, maxfev=20_000)
    fit = fit_convergence_constants(k, t, loss, num_experts=16, gamma=gamma)
    ours = (fit.loss_inf, fit.a, fit.b) + ((fit.gamma,) if gamma is None else ())
    ours_sse = np.sum((predicted_loss(fit, k, t) - loss) ** 2)
    ref_sse = np.sum((model(np.stack([k, t]), *reference) - loss) ** 2)
    assert ours_sse <= ref_sse * (1 + 1e-6)
    np.testing.assert_allclose(ours, reference, rtol=2e-3)


def test_fit_bad_input():
    k, t, loss = _synthetic(0.0)
    with pytest.raises(ValueError, match="same length"):
        fit_convergence_constants(k, t[:-1], loss, num_experts=16)
    with pytest.raises(ValueError, match="at least 4"):
        fit_convergence_constants(k[:3], t[:3], loss[:3], num_experts=16)
    with pytest.raises(ValueError, match="positive"):
        fit_convergence_constants(-k, t, loss, num_experts=16)
    with pytest.raises(ValueError, match="gamma"):
        fit_convergence_constants(k, t, loss, num_experts=16, gamma=0.0)


def test_fixed_compute_steps_bad_input():
    with pytest.raises(ValueError, match="budget"):
        fixed_compute_steps([1, 2], 0.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="overhead_flops"):
        fixed_compute_steps([1, 2], 10.0, -1.0, 1.0)


def test_transformer_flop_constants_hand_count():
    # d = 32, 2 heads of 16, T = 16, M = 2, V = 256, one layer, d_ff = 32 (multiplier 0.25):
    # projections 2*32*(2+2+2+2)*16 = 8192, context 2*16*32 = 1024, router 128, head 16384.
    gpt = GPTConfig(
        256, 32, 1, 2, max_len=16, multiple_of=32, ffn_multiplier=0.25, num_experts=2,
        experts_top_k=1,
    )  # fmt: skip
    assert moe_transformer_flop_constants(gpt) == (8192 + 1024 + 128 + 16384, 4 * 32 * 32)
    two_layers = dataclasses.replace(gpt, num_layers=2)
    c0, c1 = moe_transformer_flop_constants(two_layers)
    assert (c0, c1) == (2 * (8192 + 1024 + 128) + 16384, 2 * 4 * 32 * 32)
    with pytest.raises(ValueError, match="num_experts"):
        moe_transformer_flop_constants(GPTConfig(256, 32, 1, 2, max_len=16, multiple_of=32))
    with pytest.raises(TypeError, match="GPTConfig"):
        moe_transformer_flop_constants({"d_model": 32})


def test_teacher_student_task_is_the_teacher_plus_noise():
    key = jax.random.key(3)
    task = moe_teacher_student_task(
        key, in_features=4, hidden_features=8, num_experts=4, num_clusters=3,
        target_noise_std=0.5, eval_samples=4_000,
    )  # fmt: skip
    # Independent path: the teacher rebuilt from the documented key split.
    k_teacher, k_centres, _ = jax.random.split(key, 3)
    teacher = MixtureOfExperts(
        4, 8, 4, 2, gate="topk_softmax", router_init_std=1.0, rngs=nnx.Rngs(k_teacher)
    )
    np.testing.assert_allclose(task.centres, 2.0 * jax.random.normal(k_centres, (3, 4)))
    x, y = task.eval_batch
    # One compiled forward pass (eagerly, every op of the layer compiles apart).
    residual = np.asarray(y - nnx.jit(lambda model, x: model(x)[0])(teacher, x))
    assert abs(residual.mean()) < 0.02 and residual.std() == pytest.approx(0.5, rel=0.03)
    # Inputs are unit-noise clusters around the centres: the nearest centre is within noise.
    distance = jnp.min(jnp.linalg.norm(x[:, None, :] - task.centres[None], axis=-1), axis=1)
    # E‖ε‖² = d = 4 bounds the nearest squared distance (20 = 4 + E‖c‖² without the clusters).
    assert float(jnp.mean(distance**2)) < 4.2
    fresh_x, fresh_y = task.sample(jax.random.key(9), 16)
    assert fresh_x.shape == (16, 4) and fresh_y.shape == (16, 4)
    with pytest.raises(ValueError, match="top_k"):
        moe_teacher_student_task(key, num_experts=2, top_k=3)


def test_bad_numbers_are_rejected_not_propagated():
    fit = ConvergenceFit(0.0, 1.0, 1.0, 0.5, 4, 0.0, 0.0)
    with pytest.raises(ValueError, match="top_k must be finite and > 0.0"):
        predicted_loss(fit, [0, 1], 4)  # was inf with a numpy warning
    with pytest.raises(TypeError, match="fit must be a ConvergenceFit"):
        predicted_loss((0.0, 1.0), [1], 4)
    k, t, loss = _synthetic(0.0)
    with pytest.raises(ValueError, match="steps must be positive and finite"):
        fit_convergence_constants(k, np.where(t == t[0], np.nan, t), loss, num_experts=16)
    with pytest.raises(TypeError, match="loss must be a real"):
        fit_convergence_constants(k, t, "loss", num_experts=16)
    with pytest.raises(ValueError, match="num_experts must be an int >= 1"):
        fit_convergence_constants(k, t, loss, num_experts=0)
    with pytest.raises(ValueError, match="top_k_grid entries must be an int >= 1"):
        fixed_compute_steps([0, 2], 10.0, 1.0, 1.0)  # was silently max(1, ...)
    with pytest.raises(TypeError, match="clip must be a bool"):
        optimal_top_k(1.0, 1.0, 16, 0.0, 1.0, clip=None)
    with pytest.raises(TypeError, match="rng_key must be a JAX PRNG key"):
        moe_teacher_student_task(None)
