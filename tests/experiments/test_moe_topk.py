"""The ``moe-topk`` experiment: the bound's algebra, the fit, and the run end to end."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest
import scipy.optimize

from jaxlab._src.runner import run_experiment
from jaxlab.experiments import moe_topk
from jaxlab.experiments.moe_topk import (
    ConvergenceFit,
    fit_convergence_constants,
    fixed_compute_steps,
    optimal_top_k,
    predicted_loss,
)
from tests.experiments._common import run_and_check, stored_result

NAME = "moe-topk"


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


def test_module_doctests():
    result = doctest.testmod(moe_topk, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_config_validation():
    with pytest.raises(ValueError, match="top_k_grid"):
        moe_topk.MoETopKConfig(top_k_grid=(2, 4, 16))
    with pytest.raises(ValueError, match="seeds"):
        moe_topk.MoETopKConfig(seeds=1)


# ------------------------------------------------------------------------------------------------
# End to end.


def test_smoke_profile_end_to_end(tmp_path):
    stored = run_and_check(
        NAME, tmp_path, profile="smoke", num_parts=2, figures={"loss_vs_top_k.png"}
    )
    metrics, parts = stored["metrics"], stored["verdict"]["parts"]
    config = moe_topk.MoETopKConfig.smoke()
    grid = [str(k) for k in config.top_k_grid]
    assert metrics["reference_checks_pass"]

    # The fixed-compute steps follow the analytic FLOP account of the student layer.
    flops = metrics["flops_per_token"]
    assert flops["overhead_c0"] == 2 * config.in_features * config.num_experts
    assert flops["per_expert_c1"] == 4 * config.in_features * config.hidden_features
    steps = [metrics["fixed_compute"][k]["steps"] for k in grid]
    assert steps == fixed_compute_steps(
        config.top_k_grid, flops["budget_R"], flops["overhead_c0"], flops["per_expert_c1"]
    )
    assert steps[-1] == config.budget_steps_at_max_k

    # Means and standard errors are those of the per-seed values.
    for entry in metrics["fixed_compute"].values():
        values = np.asarray(entry["per_seed"])
        assert len(values) == config.seeds
        assert entry["mean"] == pytest.approx(values.mean())
        assert entry["se"] == pytest.approx(values.std(ddof=1) / math.sqrt(values.size))

    # Part 1 is the note's rule applied to the stored T_max means.
    t_max = str(max(config.step_grid))
    means = {int(k): metrics["fixed_steps"][t_max][k]["mean"] for k in grid}
    expected_1 = means[1] >= means[2] >= means[4] and means[1] >= 1.3 * min(means.values())
    assert (parts[0]["status"] == "pass") == expected_1
    # Part 2: interior argmin beating both ends by one combined SE.
    fc = {int(k): metrics["fixed_compute"][k] for k in grid}
    best = min(fc, key=lambda k: fc[k]["mean"])
    assert metrics["measured_best_top_k"] == best
    ends = (min(fc), max(fc))
    expected_2 = best not in ends and all(
        fc[e]["mean"] - fc[best]["mean"] >= math.hypot(fc[e]["se"], fc[best]["se"]) for e in ends
    )
    assert (parts[1]["status"] == "pass") == expected_2

    # The reported fit is the least-squares fit of the stored fixed-T means.
    k_arr, t_arr, l_arr = zip(
        *[
            (int(k), int(t), metrics["fixed_steps"][t][k]["mean"])
            for t in metrics["fixed_steps"]
            for k in grid
        ],
        strict=True,
    )
    refit = fit_convergence_constants(
        k_arr, t_arr, l_arr, num_experts=config.num_experts, gamma=0.5
    )
    stored_fit = metrics["fits"]["gamma_half"]["fit"]
    assert stored_fit["a"] == pytest.approx(refit.a, rel=1e-9)
    fit = ConvergenceFit(**stored_fit)
    all_k = np.arange(1, config.num_experts + 1)
    bound = predicted_loss(
        fit, all_k, flops["budget_R"] / (flops["overhead_c0"] + flops["per_expert_c1"] * all_k)
    )
    assert metrics["predicted_top_k"] == int(all_k[np.argmin(bound)])


@pytest.mark.slow
def test_quick_profile_verdict(tmp_path):
    record = run_experiment(NAME, profile="quick", out_dir=tmp_path)
    verdict = stored_result(tmp_path, NAME)["verdict"]
    assert verdict["status"] == "pass", verdict
    assert record["metrics"]["fixed_compute_verdict"]["interior"]


def test_language_model_task_runs_with_its_flop_account():
    """The ``full`` profile's path, at a toy size: SimpleGPT with an MoE FFN on stdlib bytes."""
    import dataclasses

    import jax

    from jaxlab.experiments import NullProgress

    config = dataclasses.replace(
        moe_topk.MoETopKConfig.full(),
        num_experts=2,
        in_features=32,
        top_k_grid=(1, 2),
        lm_layers=1,
        lm_heads=2,
        lm_seq_len=16,
        lm_corpus_bytes=20_000,
        batch_size=4,
        step_grid=(3, 6),
        budget_steps_at_max_k=3,
        seeds=2,
        eval_samples=8,
    )
    result = moe_topk.run(config, jax.random.key(0), NullProgress())
    metrics = result.metrics
    assert metrics["task"]["task"] == "language_model"
    # Hand count (d = 32, 2 heads of 16, T = 16, M = 2, V = 256, one layer, d_ff = 32):
    # projections 2*32*(2+2+2+2)*16 = 8192, context 2*16*32 = 1024, router 128, head 16384.
    assert metrics["flops_per_token"]["overhead_c0"] == 8192 + 1024 + 128 + 16384
    assert metrics["task"]["expert_hidden"] == 32
    assert metrics["flops_per_token"]["per_expert_c1"] == 4 * 32 * 32
    for entry in metrics["fixed_compute"].values():
        # Byte-level cross-entropy after a few steps: finite and below ln(256) + 0.5.
        assert all(math.isfinite(v) and 0 < v < math.log(256) + 0.5 for v in entry["per_seed"])
    assert len(result.parts) == 2
