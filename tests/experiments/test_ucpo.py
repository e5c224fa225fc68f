"""``ucpo`` end to end at smoke size, its verdict recomputed from the stored measurements; the
library pieces are tested in ``tests/rl``."""

from __future__ import annotations

import numpy as np
import pytest

from jaxlab.experiments import run_experiment
from jaxlab.experiments.ucpo import (
    HIGH_UNCERTAIN_REWARD,
    LOW_UNCERTAIN_REWARD,
    MAX_ABSTAIN,
    MAX_UC_LOW_ABSTAIN,
    MIN_ABSTAIN_CONTRAST,
    MIN_ACCURACY_RATIO,
    MIN_PAQ_GAIN,
    MIN_UC_HIGH_ABSTAIN,
    REFERENCE_TOL,
    STARTS,
)
from tests.experiments._common import run_and_check, stored_result

NAME = "ucpo"


def _mean(arms, key, metric):
    return float(np.mean([s[metric] for s in arms[key]["per_seed"]]))


def _recomputed(metrics):
    """The eight parts' statuses, recomputed from the stored per-seed metrics."""
    arms, levels = metrics["runs"]["arms"], metrics["runs"]["levels"]
    out = []
    for start in STARTS:
        u, g = f"{start}/ucpo", f"{start}/grpo"
        for metric in ("paq", "accuracy", "f1", "uncertainty_ratio"):
            assert _mean(arms, u, metric) == pytest.approx(arms[u]["mean"][metric], rel=1e-6)
        by = np.mean([s["abstain_by_knowability"] for s in arms[u]["per_seed"]], axis=0)
        out.append(_mean(arms, u, "paq") > _mean(arms, g, "paq") + MIN_PAQ_GAIN)
        out.append(bool(np.all(np.diff(by) <= 0)) and by[0] >= MIN_ABSTAIN_CONTRAST * by[-1])
        out.append(
            _mean(arms, u, "uncertainty_ratio") < MAX_ABSTAIN
            and _mean(arms, u, "accuracy") >= MIN_ACCURACY_RATIO * _mean(arms, g, "accuracy")
        )
    third = int(np.argmin(np.abs(np.array(levels) - 1 / 3)))
    warm = arms[f"warm/grpo_uc_{LOW_UNCERTAIN_REWARD:g}"]["per_seed"]
    cold = arms[f"cold/grpo_uc_{HIGH_UNCERTAIN_REWARD:g}"]["per_seed"]
    low = np.mean([s["abstain_by_knowability"][0] for s in warm])
    high = np.mean([s["abstain_by_knowability"][third] for s in cold])
    out.append(low < MAX_UC_LOW_ABSTAIN and high > MIN_UC_HIGH_ABSTAIN)
    ref = metrics["reference_checks"]
    out.append(ref["table_error"] <= REFERENCE_TOL and ref["ntf_mask_ok"])
    return out


def test_smoke_profile_end_to_end(tmp_path):
    stored = run_and_check(NAME, tmp_path, profile="smoke", num_parts=8, figures={"ucpo.png"})
    metrics, parts = stored["metrics"], stored["verdict"]["parts"]
    assert [p["status"] == "pass" for p in parts] == _recomputed(metrics)
    assert parts[7]["status"] == "pass"  # the note's table holds at any size
    # F1 is reported beside the verdict, for both starts.
    reason = stored["verdict"]["reason"]
    assert "F1" in reason and all(f"{s}: UCPO" in reason for s in STARTS)
    for arm in metrics["runs"]["arms"].values():
        for seed in arm["per_seed"]:
            assert 0.0 <= seed["accuracy"] <= 1.0 and 0.0 <= seed["uncertainty_ratio"] <= 1.0
    assert metrics["nonfinite_steps"] == 0


@pytest.mark.slow
def test_quick_profile_verdict(tmp_path):
    run_experiment(NAME, profile="quick", out_dir=tmp_path)
    stored = stored_result(tmp_path, NAME)
    assert [p["status"] == "pass" for p in stored["verdict"]["parts"]] == _recomputed(
        stored["metrics"]
    )
