"""The ``deva`` experiment runs end to end; its helpers and verdict follow from the numbers."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from jaxlab.experiments import deva as experiment
from tests.experiments._common import run_and_check

NAME = "deva"


def _floats(values):
    """Stored floats (non-finite ones are stored as "inf"/"nan"); NaN counts as +inf (diverged)."""
    values = np.asarray([float(v) for v in values])
    return np.where(np.isnan(values), np.inf, values)


def _median(values):
    return float(np.median(_floats(values)))


def _toy_status(metrics):
    """Recomputes each comparison's medians and decision, and the toy part's status."""
    tail = (1 - experiment.TOY_CONFIDENCE) / 2
    decisions = []
    for comparison in metrics["toy_comparisons"]:
        problem = "homogeneous" if comparison["smaller"] == ["soap"] else "heterogeneous"
        finals = metrics["toy"][f"{problem}_frobenius"]
        left = min(_median(finals[m]["final_f"]) for m in comparison["smaller"])
        right = min(_median(finals[m]["final_f"]) for m in comparison["larger"])
        assert float(comparison["left_median"]) == pytest.approx(left, rel=1e-6)
        assert float(comparison["right_median"]) == pytest.approx(right, rel=1e-6)
        share = comparison["bootstrap_share"]
        expected = (
            "holds" if share >= 1 - tail else "contradicted" if share <= tail else "undecided"
        )
        assert comparison["decision"] == expected
        decisions.append(expected)
    # The chain the note states, then SOAP against every other gated method on the homogeneous.
    pairs = [(c["smaller"], c["larger"]) for c in metrics["toy_comparisons"]]
    assert pairs[:3] == [(list(a), list(b)) for a, b in experiment.HETEROGENEOUS_CHAIN]
    assert {b[0] for _, b in pairs[3:]} == set(experiment.TOY_GATED) - {"soap"}
    if "contradicted" in decisions:
        return "fail"
    return "unresolved" if "undecided" in decisions else "pass"


def _lm_status(lm, steps):
    """Recomputes the best lrs, the per-seed savings, their t-interval and the LM part's status."""
    bracketed = []
    for name, entry in lm["methods"].items():
        lrs = sorted(entry["by_lr"], key=float)
        means = [np.mean(_floats(entry["by_lr"][lr]["final_smoothed_loss"])) for lr in lrs]
        best = int(np.argmin(means))
        assert float(lrs[best]) == pytest.approx(entry["best_lr"])
        assert entry["bracketed"] == (0 < best < len(lrs) - 1)
        if name in ("muon", "deva"):
            bracketed.append(entry["bracketed"])
    savings = []
    for seed in lm["seeds"]:
        counted = seed["deva_steps"] if seed["deva_steps"] is not None else steps + 1
        assert 1 <= seed["muon_steps"] <= steps
        savings.append(100 * (1 - counted / seed["muon_steps"]))
        assert seed["saving_percent"] == pytest.approx(savings[-1])
    mean, sem = np.mean(savings), scipy.stats.sem(savings)
    if sem > 0:
        low, high = scipy.stats.t.interval(experiment.LM_CONFIDENCE, len(savings) - 1, mean, sem)
    else:  # every seed saved the same: a zero-width interval
        low = high = mean
    stored = {k: float(v) for k, v in lm["saving_percent"].items()}
    assert stored["mean"] == pytest.approx(mean)
    assert (stored["low"], stored["high"]) == pytest.approx((low, high))
    if not all(bracketed):
        return "unresolved"
    threshold = experiment.LM_SAVING_THRESHOLD_PERCENT
    return "pass" if low > threshold else "fail" if high < threshold else "unresolved"


def test_smoke_profile_end_to_end(tmp_path):
    stored = run_and_check(
        NAME, tmp_path, profile="smoke", num_parts=2, allow_unresolved=True,
        figures={"quadratic_toy.png", "quadratic_toy_lr_sweep.png", "language_model.png"},
    )  # fmt: skip
    metrics, parts = stored["metrics"], stored["verdict"]["parts"]
    config = experiment.DevaConfig.smoke()
    het = metrics["toy"]["heterogeneous_frobenius"]
    assert set(het) == set(experiment.TOY_METHODS)
    for entry in het.values():
        assert float(entry["median_final_f"]) == pytest.approx(_median(entry["final_f"]), rel=1e-6)
        assert len(entry["final_f"]) == config.toy_seeds
    assert parts[0]["status"] == _toy_status(metrics)
    assert parts[1]["status"] == _lm_status(metrics["language_model"], config.lm_steps)
