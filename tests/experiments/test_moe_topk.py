"""The ``moe-topk`` experiment: the bound's algebra, the fit, and the run end to end."""

from __future__ import annotations

import dataclasses
import math

import jax
import numpy as np
import pytest

from jaxlab.experiments import get, run_experiment
from jaxlab.nn import ConvergenceFit, fit_convergence_constants, fixed_compute_steps, predicted_loss
from tests.experiments._common import run_and_check, stored_result

NAME = "moe-topk"
MoETopKConfig = get(NAME).config


def test_config_validation():
    with pytest.raises(ValueError, match="top_k_grid"):
        MoETopKConfig(top_k_grid=(2, 4, 16))
    with pytest.raises(ValueError, match="seeds"):
        MoETopKConfig(seeds=1)


# ------------------------------------------------------------------------------------------------
# End to end.


def test_smoke_profile_end_to_end(tmp_path):
    stored = run_and_check(
        NAME, tmp_path, profile="smoke", num_parts=2, figures={"loss_vs_top_k.png"}
    )
    metrics, parts = stored["metrics"], stored["verdict"]["parts"]
    config = MoETopKConfig.smoke()
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

    # The compute axis under the sparse dispatch's real FLOPs: C = ceil(c·K·N/M) slots per expert,
    # all computed, so c₀ + c₁·M·C/N per token (smoke: c₀ = 64, c₁ = 256, N = 32, M = 4).
    axis = metrics["compute_axis"]
    c0, c1, budget = flops["overhead_c0"], flops["per_expert_c1"], flops["budget_R"]
    m, n = config.num_experts, config.batch_size
    assert axis["tokens_per_batch"] == n and axis["capacity_factors"] == [1.0, 1.25]
    for k in config.top_k_grid:
        entry = axis["by_top_k"][str(k)]
        assert entry["analytic"]["flops_per_token"] == c0 + c1 * k
        assert entry["analytic"]["steps"] == metrics["fixed_compute"][str(k)]["steps"]
        assert entry["dense_masked"]["flops_per_token"] == c0 + c1 * m
        for c in (1.0, 1.25):
            sparse = entry[f"sparse_c{c}"]
            capacity = math.ceil(c * k * n / m)
            assert sparse["capacity"] == capacity
            assert sparse["flops_per_token"] == pytest.approx(c0 + c1 * m * capacity / n)
            assert sparse["ratio_to_analytic"] == pytest.approx(
                sparse["flops_per_token"] / (c0 + c1 * k)
            )
            assert sparse["steps"] == round(budget / sparse["flops_per_token"])
    # By hand: C = 10K at c = 1.25 is 1.25K experts per token; C = 8K at c = 1 is exactly K.
    assert axis["by_top_k"]["1"]["sparse_c1.25"]["flops_per_token"] == 64 + 1.25 * 256
    assert axis["by_top_k"]["2"]["sparse_c1.0"]["ratio_to_analytic"] == 1.0

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
    config = dataclasses.replace(
        MoETopKConfig.full(),
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
    result = get(NAME).run(config, jax.random.key(0))
    metrics = result.metrics
    assert metrics["task"]["task"] == "language_model"
    # Hand count (d = 32, 2 heads of 16, T = 16, M = 2, V = 256, one layer, d_ff = 32):
    # projections 2*32*(2+2+2+2)*16 = 8192, context 2*16*32 = 1024, router 128, head 16384.
    assert metrics["flops_per_token"]["overhead_c0"] == 8192 + 1024 + 128 + 16384
    assert metrics["task"]["expert_hidden"] == 32
    assert metrics["flops_per_token"]["per_expert_c1"] == 4 * 32 * 32
    # Sparse dispatch on N = 4·16 = 64 tokens: C = ceil(1.25·K·64/2) = 40K slots per expert,
    # M·C/N = 1.25K experts per token in the one layer; attention, router and head as in c₀.
    axis = metrics["compute_axis"]
    assert axis["tokens_per_batch"] == 64 and axis["moe_layers"] == 1
    for k in (1, 2):
        sparse = axis["by_top_k"][k]["sparse_c1.25"]
        assert sparse["capacity"] == 40 * k
        assert sparse["flops_per_token"] == pytest.approx(25728 + 1.25 * k * 4096)
        assert axis["by_top_k"][k]["dense_masked"]["flops_per_token"] == 25728 + 2 * 4096
    for entry in metrics["fixed_compute"].values():
        # Byte-level cross-entropy after a few steps: finite and below ln(256) + 0.5.
        assert all(math.isfinite(v) and 0 < v < math.log(256) + 0.5 for v in entry["per_seed"])
    assert len(result.parts) == 2
