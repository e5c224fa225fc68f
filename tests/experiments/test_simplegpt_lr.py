"""The ``simplegpt-lr`` experiment runs end to end and computes its verdict from measurements."""

from __future__ import annotations

import math

import numpy as np
import pytest

from jaxlab.experiments import get, run_experiment
from jaxlab.nn import loss_curve_stability
from tests.experiments._common import run_and_check, stored_result

NAME = "simplegpt-lr"
SimpleGPTLRConfig = get(NAME).config


def test_smoke_profile_end_to_end(tmp_path):
    stored = run_and_check(
        NAME, tmp_path, profile="smoke", num_parts=2, figures={"lr_sweep.png", "hessian.png"}
    )
    config = SimpleGPTLRConfig.smoke()
    metrics = stored["metrics"]
    parts = stored["verdict"]["parts"]
    assert metrics["python_version"] and metrics["corpus_bytes"] == config.corpus_bytes
    # Part 1 is recomputed from the per-run stability records.
    largest = {}
    for placement in config.placements:
        rows = metrics["sweep"][placement]["per_lr"]
        assert [r["lr"] for r in rows] == list(config.learning_rates)
        for row in rows:
            curves = metrics["sweep"][placement]["train_loss_curves"][f"{row['lr']:g}"]
            recomputed = [
                loss_curve_stability(
                    np.asarray(c, dtype=float),
                    warmup_steps=config.warmup_steps,
                    tail_steps=config.tail_steps,
                )["stable"]
                for c in curves
            ]
            assert row["stable_all_seeds"] == (all(recomputed) and all(
                math.isfinite(v) for v in row["val_loss"]
            ))  # fmt: skip
        stable = [r["lr"] for r in rows if r["stable_all_seeds"]]
        largest[placement] = max(stable) if stable else 0.0
    assert metrics["largest_stable_lr"] == largest
    ratio_ok = largest["pre"] > 0 and largest["simple"] >= 3 * largest["pre"] * (1 - 1e-9)
    assert (parts[0]["status"] == "pass") == ratio_ok
    # Part 2 from the recorded eigenvalues.
    lam = metrics["lambda_max_median"]
    lower = all(lam["simple"][c] < lam["pre"][c] for c in ("init", "mid", "end"))
    assert (parts[1]["status"] == "pass") == lower
    assert metrics["note_three_level_verdict"] in ("supported", "partly supported", "not supported")
    # The shifted re-run only replaces negative dominant eigenvalues.
    for placement in config.placements:
        for checkpoint in ("init", "mid", "end"):
            record = metrics["hessian"][placement][checkpoint]
            for dominant, top in zip(
                record["dominant_eigenvalue"], record["lambda_max"], strict=True
            ):
                assert top == dominant if dominant >= 0 else top > dominant
    # SimpleNorm outputs keep RMS ~ 1 after training (the gains start at 1 and move slowly).
    rms = metrics["activation_rms_end_matched_lr_seed0"]["simple"]
    normalized = [v for k, v in rms.items() if not k.endswith("residual")]
    assert all(0.8 < v < 1.25 for v in normalized), rms


def test_bad_config():
    with pytest.raises(ValueError, match="matched_lr"):
        SimpleGPTLRConfig(matched_lr=5e-3)
    with pytest.raises(ValueError, match="steps"):
        SimpleGPTLRConfig(steps=301)
    with pytest.raises(ValueError, match="placements"):
        SimpleGPTLRConfig(placements=("simple", "pre_qk"))


@pytest.mark.slow
def test_quick_profile(tmp_path):
    record = run_experiment(NAME, profile="quick", out_dir=tmp_path)
    verdict = stored_result(tmp_path, NAME)["verdict"]
    assert verdict["status"] in ("pass", "fail"), verdict
    metrics = record["metrics"]
    # The quick sweep trains: every placement is stable at the matched LR 3e-3.
    for placement in ("simple", "pre", "pre_qk"):
        assert metrics["largest_stable_lr"][placement] >= 3e-3
