"""``rambo`` end to end at smoke size, its verdict recomputed from the stored regrets; the
library pieces are tested in ``tests/bo``."""

from __future__ import annotations

import numpy as np
import pytest

from jaxlab.experiments.rambo import REGIME_GAP, REGRET_FLOOR, TIE_MARGIN
from tests.experiments._common import run_and_check

NAME = "rambo"


def _recomputed(metrics):
    """The three parts' statuses and the note's level, from the per-seed regret curves."""
    arm = metrics["verdict_arm"]
    rows = {}
    for task, out in metrics["tasks"].items():
        row = {}
        for name in (arm, "sgp", "random"):
            finals = [r["regret"][-1] for r in out["runs"][name]]
            row[name] = (
                np.mean([np.log10(max(f, REGRET_FLOOR)) for f in finals]),
                np.mean(finals),
            )
        rows[task] = row
        inputs = metrics["verdict_inputs"][task]
        assert row[arm][0] == pytest.approx(inputs["rambo_log10"])
        assert row["sgp"][1] == pytest.approx(inputs["sgp_regret"])
    two = rows["two_regime-2d"]
    others = [r for t, r in rows.items() if t != "two_regime-2d"]
    part1 = two["sgp"][0] - two[arm][0] >= REGIME_GAP
    part2 = all(r[arm][0] <= r["sgp"][0] + TIE_MARGIN for r in others)
    part3 = two[arm][1] < two["sgp"][1] and all(r[arm][1] <= r["random"][1] for r in rows.values())
    within = all(abs(r[arm][0] - r["sgp"][0]) <= TIE_MARGIN for r in rows.values())
    level = (
        "supported"
        if part1 and part2
        else "partly supported"
        if part1 or within
        else "not supported"
    )
    return [part1, part2, part3], level


def _check(stored):
    parts, level = _recomputed(stored["metrics"])
    assert [p["status"] == "pass" for p in stored["verdict"]["parts"]] == parts
    assert stored["metrics"]["note_verdict"] == level
    for out in stored["metrics"]["tasks"].values():
        for runs in out["runs"].values():
            for r in runs:
                regret = np.asarray(r["regret"])
                assert np.all(np.diff(regret) <= 1e-12) and np.all(regret >= 0)  # best so far


def test_smoke(tmp_path):
    stored = run_and_check(
        NAME, tmp_path, profile="smoke", num_parts=3, figures={"regret.png", "regimes.png"}
    )
    _check(stored)
    rambo = stored["metrics"]["tasks"]["two_regime-2d"]["runs"]["rambo-constant"][0]
    assert len(rambo["num_clusters"]) == 3 and min(rambo["num_clusters"]) >= 1


@pytest.mark.slow
def test_quick(tmp_path):
    _check(
        run_and_check(
            NAME, tmp_path, profile="quick", num_parts=3, figures={"regret.png", "regimes.png"}
        )
    )
