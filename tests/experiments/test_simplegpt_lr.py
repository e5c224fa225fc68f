"""The ``simplegpt-lr`` experiment runs end to end and computes its verdict from measurements."""

from __future__ import annotations

import math

import numpy as np
import pytest

from jaxlab.experiments import get, run_experiment
from jaxlab.nn import adam_sharpness_limit, loss_curve_stability
from tests.experiments._common import run_and_check, stored_result

NAME = "simplegpt-lr"
SimpleGPTLRConfig = get(NAME).config


def _part1_status(limits, grid):
    """Part 1 recomputed from the per-seed limits: every seed above 3x, none, or a split."""
    sides = []
    for simple, pre in zip(limits["simple"], limits["pre"], strict=True):
        if pre == 0.0:
            sides.append("above" if simple >= 3 * grid[0] * (1 - 1e-9) else "undecided")
        elif simple / pre >= 3 * (1 - 1e-9):
            sides.append("above")
        else:
            sides.append("undecided" if simple == grid[-1] else "below")
    if all(s == "above" for s in sides):
        return "pass", sides
    return ("fail" if all(s == "below" for s in sides) else "unresolved"), sides


def _part2_status(depth):
    """Part 2 recomputed from the per-block eigenvalues: lower on every seed and checkpoint."""
    verdicts = []
    for checkpoint in ("mid", "end"):
        medians = {
            p: [
                float(np.median(row)) for row in depth[p][checkpoint]["activation_lambda_per_block"]
            ]
            for p in ("simple", "pre")
        }
        if not all(math.isfinite(v) for p in medians for v in medians[p]):
            return "unresolved"
        lower = [s < p for s, p in zip(medians["simple"], medians["pre"], strict=True)]
        verdicts.append("lower" if all(lower) else ("higher" if not any(lower) else "split"))
    if set(verdicts) == {"lower"}:
        return "pass"
    return "fail" if "higher" in verdicts else "unresolved"


def test_smoke_profile_end_to_end(tmp_path):
    stored = run_and_check(
        NAME,
        tmp_path,
        profile="smoke",
        num_parts=2,
        figures={"lr_sweep.png", "hessian.png"},
        allow_unresolved=True,  # two seeds of 20 steps may split on either part
    )
    config = SimpleGPTLRConfig.smoke()
    assert config.depth_is_sweep  # the smoke depth point reuses the sweep's runs
    metrics = stored["metrics"]
    parts = stored["verdict"]["parts"]
    assert metrics["python_version"] and metrics["corpus_bytes"] == config.corpus_bytes
    # Part 1 is recomputed from the per-run training curves.
    limits = {}
    for placement in config.placements:
        rows = metrics["sweep"][placement]["per_lr"]
        assert [r["lr"] for r in rows] == list(config.learning_rates)
        for row in rows:
            curves = metrics["sweep"][placement]["train_loss_curves"][f"{row['lr']:.4g}"]
            recomputed = [
                loss_curve_stability(
                    np.asarray(c, dtype=float),
                    warmup_steps=config.warmup_steps,
                    tail_steps=config.tail_steps,
                )["stable"]
                and math.isfinite(v)
                for c, v in zip(curves, row["val_loss"], strict=True)
            ]
            assert row["stable"] == recomputed
        limits[placement] = [
            max([r["lr"] for r in rows if r["stable"][s]], default=0.0) for s in range(config.seeds)
        ]
    assert metrics["lr_limit_per_seed"] == limits
    assert metrics["lr_limit_median"] == {p: float(np.median(v)) for p, v in limits.items()}
    status, sides = _part1_status(limits, config.learning_rates)
    assert metrics["lr_ratio_seed_sides"] == sides
    assert parts[0]["status"] == status
    # Part 2 from the recorded per-block eigenvalues.
    depth = metrics["depth"]
    assert parts[1]["status"] == _part2_status(depth)
    for placement in config.depth_placements:
        for checkpoint, step in (("mid", config.depth_steps // 2), ("end", config.depth_steps)):
            record = depth[placement][checkpoint]
            assert record["step"] == step
            act = np.asarray(record["activation_lambda_per_block"])
            assert act.shape == (config.depth_seeds, config.depth_num_layers)
            # The shifted re-run only replaces negative dominant eigenvalues.
            dominant = np.asarray(record["activation_dominant_per_block"])
            assert np.all(np.where(dominant >= 0, act == dominant, act > dominant))
            # 38/η at the LR of the last update.
            assert record["adam_limit_38_over_lr"] == pytest.approx(
                float(adam_sharpness_limit(record["lr_of_last_update"])), rel=1e-6
            )
            assert len(record["raw_lambda"]) == len(record["preconditioned_lambda"])
            rms = np.asarray(record["residual_rms_entering_block"])
            assert rms.shape == (config.depth_seeds, config.depth_num_layers)
            # The stream entering block 0 is the N(0, 1) embedding: RMS about 1.
            assert np.all(np.abs(rms[:, 0] - 1.0) < 0.2)
    # SimpleNorm outputs keep RMS ~ 1 (the gains start at 1 and move slowly).
    sub = depth["simple"]["end"]["sublayer_rms_seed0"]
    normalized = [v for k, v in sub.items() if not k.endswith("residual")]
    assert all(0.8 < v < 1.25 for v in normalized), sub
    assert metrics["note_three_level_verdict"] in ("supported", "partly supported", "not supported")


def test_bad_config():
    with pytest.raises(ValueError, match="steps"):
        SimpleGPTLRConfig(steps=301)
    with pytest.raises(ValueError, match="depth_steps"):
        SimpleGPTLRConfig(depth_steps=201)
    with pytest.raises(ValueError, match="placements"):
        SimpleGPTLRConfig(placements=("simple", "pre_qk"))
    with pytest.raises(ValueError, match="depth_placements"):
        SimpleGPTLRConfig(depth_placements=("simple",))
    with pytest.raises(ValueError, match="ascending"):
        SimpleGPTLRConfig(learning_rates=(0.3, 0.1))


def test_quick_grid_brackets_3x_in_two_steps():
    grid = SimpleGPTLRConfig.quick().learning_rates
    ratios = np.asarray(grid[2:]) / np.asarray(grid[:-2])
    # From 0.1 up the grid is 0.1·3^(k/2): 3x is exactly two steps.
    assert grid[1] == pytest.approx(0.1) and grid[-1] == pytest.approx(2.7, rel=0.01)
    np.testing.assert_allclose(ratios[1:], 3.0, rtol=1e-9)


@pytest.mark.slow
def test_quick_profile(tmp_path):
    record = run_experiment(NAME, profile="quick", out_dir=tmp_path)
    verdict = stored_result(tmp_path, NAME)["verdict"]
    assert verdict["status"] in ("pass", "fail", "unresolved"), verdict
    metrics = record["metrics"]
    # The grid's bottom (0.033) trains stably for every placement on every seed.
    for placement in ("simple", "pre", "pre_qk"):
        assert all(metrics["sweep"][placement]["per_lr"][0]["stable"])
