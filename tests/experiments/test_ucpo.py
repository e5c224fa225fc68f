"""``ucpo`` end to end at smoke size, its verdict recomputed from the stored measurements; the
library pieces are tested in ``tests/rl``."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from jaxlab.experiments import run_experiment
from jaxlab.experiments.ucpo import (
    BANDITS,
    CONFIDENCE,
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
# Per bandit and start: (a) over GRPO, (a) over the best GRPO-UC, (b), (c); then (d), the
# reference table and the skipped-step check.
NUM_PARTS = len(BANDITS) * len(STARTS) * 4 + 3


def _status(values, threshold):
    """Is mean(values) > threshold? Decided by the two-sided Student-t interval, by hand."""
    v = np.asarray(values, np.float64)
    half = scipy.stats.t.ppf(0.5 + CONFIDENCE / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size)
    if v.mean() - half > threshold:
        return "pass"
    return "fail" if v.mean() + half < threshold else "unresolved"


def _combine(statuses):
    statuses = list(statuses)
    if "fail" in statuses:
        return "fail"
    return "pass" if all(s == "pass" for s in statuses) else "unresolved"


def _recomputed(metrics):
    """Every part's status, recomputed from the stored per-seed metrics."""
    runs, config = metrics["runs"], metrics["config"]
    rewards = config["uncertain_rewards"]
    out = []
    for bandit in BANDITS:
        arms = runs[bandit]["arms"]
        for start in STARTS:

            def seeds(arm, metric, arms=arms, start=start):
                return np.array([s[metric] for s in arms[f"{start}/{arm}"]["per_seed"]])

            for metric in ("paq", "accuracy", "f1", "uncertainty_ratio"):
                assert seeds("ucpo", metric).mean() == pytest.approx(
                    arms[f"{start}/ucpo"]["mean"][metric], rel=1e-6
                )
            best = max(rewards, key=lambda r, seeds=seeds: seeds(f"grpo_uc_{r:g}", "paq").mean())
            assert metrics["comparisons"][bandit][start]["best_uncertain_reward"] == best
            paq = seeds("ucpo", "paq")
            out.append(_status(paq - seeds("grpo", "paq"), MIN_PAQ_GAIN))
            out.append(_status(paq - seeds(f"grpo_uc_{best:g}", "paq"), MIN_PAQ_GAIN))
            by = seeds("ucpo", "abstain_by_knowability")
            drops = [_status(by[:, i] - by[:, i + 1], 0.0) for i in range(by.shape[1] - 1)]
            out.append(
                _combine([*drops, _status(by[:, 0] - MIN_ABSTAIN_CONTRAST * by[:, -1], 0.0)])
            )
            out.append(
                _combine([
                    _status(MAX_ABSTAIN - seeds("ucpo", "uncertainty_ratio"), 0.0),
                    _status(
                        seeds("ucpo", "accuracy") - MIN_ACCURACY_RATIO * seeds("grpo", "accuracy"),
                        0.0,
                    ),
                ])
            )  # fmt: skip
    arms, levels = runs["calibrated"]["arms"], runs["calibrated"]["levels"]
    third = int(np.argmin(np.abs(np.array(levels) - 1 / 3)))
    warm = arms[f"warm/grpo_uc_{LOW_UNCERTAIN_REWARD:g}"]["per_seed"]
    cold = arms[f"cold/grpo_uc_{HIGH_UNCERTAIN_REWARD:g}"]["per_seed"]
    low = np.array([s["abstain_by_knowability"][0] for s in warm])
    high = np.array([s["abstain_by_knowability"][third] for s in cold])
    out.append(
        _combine([_status(MAX_UC_LOW_ABSTAIN - low, 0.0), _status(high - MIN_UC_HIGH_ABSTAIN, 0.0)])
    )
    ref = metrics["reference_checks"]
    out.append("pass" if ref["table_error"] <= REFERENCE_TOL and ref["ntf_mask_ok"] else "fail")
    worst = max(max(v) for v in metrics["skipped_steps"].values())
    out.append("pass" if worst <= 0.01 * config["steps"] else "fail")
    return out


def test_smoke_profile_end_to_end(tmp_path):
    stored = run_and_check(
        NAME,
        tmp_path,
        profile="smoke",
        num_parts=NUM_PARTS,
        figures={"ucpo.png"},
        allow_unresolved=True,  # 2 seeds: most intervals are too wide to decide
    )
    metrics, parts = stored["metrics"], stored["verdict"]["parts"]
    assert [p["status"] for p in parts] == _recomputed(metrics)
    assert parts[-2]["status"] == "pass"  # the note's table holds at any size
    # The held-out bandit differs from the calibrated one in knowability and answers.
    runs = metrics["runs"]
    assert runs["held_out"]["num_answers"] != runs["calibrated"]["num_answers"]
    assert not set(runs["held_out"]["levels"]) & set(runs["calibrated"]["levels"])
    # Skipped updates are stored per bandit, start, arm and seed; none here.
    config = metrics["config"]
    num_arms = 2 + len(config["uncertain_rewards"])
    assert len(metrics["skipped_steps"]) == len(BANDITS) * len(STARTS) * num_arms
    assert all(v == [0] * config["seeds"] for v in metrics["skipped_steps"].values())
    assert parts[-1]["status"] == "pass"
    # F1 and the best GRPO-UC are reported beside the verdict, for both bandits and starts.
    reason = stored["verdict"]["reason"]
    assert "F1" in reason and all(f"{b} {s}: UCPO" in reason for b in BANDITS for s in STARTS)
    assert set(metrics["note_verdict"]) == set(BANDITS)
    for arm in (a for b in BANDITS for a in runs[b]["arms"].values()):
        for seed in arm["per_seed"]:
            assert 0.0 <= seed["accuracy"] <= 1.0 and 0.0 <= seed["uncertainty_ratio"] <= 1.0


@pytest.mark.slow
def test_quick_profile_verdict(tmp_path):
    run_experiment(NAME, profile="quick", out_dir=tmp_path)
    stored = stored_result(tmp_path, NAME)
    assert [p["status"] for p in stored["verdict"]["parts"]] == _recomputed(stored["metrics"])
