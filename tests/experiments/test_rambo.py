"""``rambo`` end to end at smoke size, its verdict recomputed from the stored regrets; the
library pieces are tested in ``tests/bo``."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from jaxlab.experiments.rambo import (
    CONFIDENCE,
    GATING_VARIANT,
    RANDOM_GAP,
    REGIME_GAP,
    REGRET_FLOOR,
    TIE_MARGIN,
    RamboExperimentConfig,
    note_level,
    reported_intervals,
)
from tests.experiments._common import run_and_check

NAME = "rambo"


def _interval(better, worse):
    """Paired t-interval of log10 r_worse - log10 r_better, recomputed with SciPy."""
    d = np.array([np.log10(max(w["regret"][-1], REGRET_FLOOR))
                  - np.log10(max(b["regret"][-1], REGRET_FLOOR))
                  for b, w in zip(better, worse, strict=True)])  # fmt: skip
    if d.size < 2:
        return d.mean(), -np.inf, np.inf
    low, high = stats.t.interval(CONFIDENCE, d.size - 1, loc=d.mean(), scale=stats.sem(d))
    return d.mean(), low, high


def _status(low, high, gap):
    return "pass" if low >= gap else "fail" if high < gap else "unresolved"


def _combine(statuses):
    return "fail" if "fail" in statuses else "pass" if set(statuses) == {"pass"} else "unresolved"


def _recomputed(metrics):
    """The three parts' statuses and the note's level, from the per-seed regret curves."""
    arm = metrics["verdict_arm"]
    assert not arm.endswith("textbook")  # the gate reads the authors' likelihood
    part2, part3 = [], []
    for task, out in metrics["tasks"].items():
        runs = out["runs"]
        mean, low, high = _interval(runs[arm], runs["sgp"])
        stored = metrics["verdict_inputs"][task]["sgp_minus_rambo"]
        assert stored["mean"] == pytest.approx(mean)
        if np.isfinite(low):
            assert [stored["low"], stored["high"]] == pytest.approx([low, high])
        if task == "two_regime-2d":
            part1 = _status(low, high, REGIME_GAP)
        else:
            part2.append(_status(low, high, -TIE_MARGIN))
        _, low, high = _interval(runs[arm], runs["random"])
        part3.append(_status(low, high, RANDOM_GAP))
    statuses = [part1, _combine(part2), _combine(part3)]
    return statuses, note_level(statuses)


def _check(stored):
    statuses, level = _recomputed(stored["metrics"])
    assert [p["status"] for p in stored["verdict"]["parts"]] == statuses
    assert stored["metrics"]["note_verdict"] == level
    for out in stored["metrics"]["tasks"].values():
        assert {"rambo-constant", "rambo-constant-textbook", "sgp", "random"} <= set(out["runs"])
        for runs in out["runs"].values():
            for r in runs:
                regret = np.asarray(r["regret"])
                assert np.all(np.diff(regret) <= 1e-12) and np.all(regret >= 0)  # best so far


def test_smoke(tmp_path):
    figures = {"regret.png", "regimes.png"}
    stored = run_and_check(
        NAME, tmp_path, profile="smoke", num_parts=3, figures=figures, allow_unresolved=True
    )
    _check(stored)
    # One seed cannot decide a paired interval: every part is unresolved at smoke size.
    assert [p["status"] for p in stored["verdict"]["parts"]] == ["unresolved"] * 3
    rambo = stored["metrics"]["tasks"]["two_regime-2d"]["runs"]["rambo-constant"][0]
    assert len(rambo["num_clusters"]) == 3 and min(rambo["num_clusters"]) >= 1


def test_configs():
    assert GATING_VARIANT == "reference"
    quick = RamboExperimentConfig.quick()
    assert quick.seeds >= 10 and RamboExperimentConfig.full().seeds >= 10
    # the BoTorch-style single GP is reported beside in quick and full, left out of smoke
    assert quick.botorch_sgp == RamboExperimentConfig.full().botorch_sgp == "sgp_botorch"
    assert RamboExperimentConfig.smoke().botorch_sgp is None


@pytest.mark.slow
def test_quick(tmp_path):
    _check(
        run_and_check(
            NAME,
            tmp_path,
            profile="quick",
            num_parts=3,
            figures={"regret.png", "regimes.png"},
            allow_unresolved=True,
        )  # fmt: skip
    )


def test_reported_intervals_put_rambo_against_the_botorch_style_gp():
    """The BoTorch-style arm (quick and full only) is reported by the same paired interval as
    the gate, recomputed with SciPy from synthetic per-seed regrets; the gate is untouched."""
    rng = np.random.default_rng(0)
    arms = ["rambo-constant", "rambo-constant-textbook", "sgp", "random", "sgp-botorch"]
    runs = {a: [{"regret": [r], "log10_final_regret": float(np.log10(r))}
                for r in 10.0 ** rng.normal(-1.0, 0.5, 10)] for a in arms}  # fmt: skip
    reported = reported_intervals({"levy-2d": {"runs": runs}}, arms)
    assert set(reported) == {"rambo-constant-textbook", "sgp-botorch", "rambo_vs_sgp_botorch"}
    got = reported["rambo_vs_sgp_botorch"]["levy-2d"]
    mean, low, high = _interval(runs["rambo-constant"], runs["sgp-botorch"])
    assert [got["mean"], got["low"], got["high"]] == pytest.approx([mean, low, high])
    vs_gate = reported["sgp-botorch"]["levy-2d"]["vs_gating_rambo"]
    mean, low, high = _interval(runs["sgp-botorch"], runs["rambo-constant"])
    assert [vs_gate["mean"], vs_gate["low"], vs_gate["high"]] == pytest.approx([mean, low, high])
    assert "rambo_vs_sgp_botorch" not in reported_intervals({"levy-2d": {"runs": runs}}, arms[:4])
