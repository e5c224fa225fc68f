"""The ``hom-pgd`` experiment runs end to end and computes its verdict from measurements."""

from __future__ import annotations

import numpy as np
import pytest

from jaxlab.experiments import run_experiment
from jaxlab.solvers import STAR_OPTIMUM_VALUE
from tests.experiments._common import run_and_check, stored_result

NAME = "hom-pgd"


def test_smoke_profile_end_to_end(tmp_path):
    stored = run_and_check(
        NAME, tmp_path, profile="smoke", num_parts=5, figures={"star.png", "qcqp.png"}
    )
    verdict = stored["verdict"]

    metrics = stored["metrics"]
    star = metrics["star"]
    hom, pgd = star["hom_pgd"], star["exact_pgd"]
    # The exact map keeps every iterate in K (float64): part 1 holds at any size.
    assert hom["max_violation"] <= 1e-10
    assert verdict["parts"][0]["status"] == "pass"
    # No feasible method beats the global optimum of the note's dense scan.
    for name in ("hom_pgd", "exact_pgd"):
        assert min(star[name]["values"]) >= STAR_OPTIMUM_VALUE - 1e-7
    # Parts 2 and 3 are computed from the recorded numbers.
    fraction = np.mean(np.array(hom["values"]) <= 0.0312)
    assert hom["fraction_global"] == pytest.approx(fraction)
    assert (verdict["parts"][1]["status"] == "pass") == (fraction >= 0.30)
    faster = hom["median_time_per_run_s"] < pgd["median_time_per_run_s"]
    assert (verdict["parts"][2]["status"] == "pass") == faster
    assert metrics["goal_speedup_star"] == pytest.approx(
        pgd["median_time_per_run_s"] / hom["median_time_per_run_s"]
    )

    (qcqp,) = metrics["qcqp"]
    assert (qcqp["n"], qcqp["m"]) == (2, 3)
    rows = qcqp["instances"]
    for row in rows:
        assert row["gap"] == pytest.approx(
            (row["value"] - row["slsqp_value"]) / abs(row["slsqp_value"])
        )
        assert 0.0 <= row["eps_inn"] <= 1.0
        # The kept end point is the best feasible one over the starts, the centre among them.
        if row["feasible"]:
            assert row["violation"] <= 1e-5
            if row["centre_violation"] <= 1e-5:
                assert row["value"] <= row["centre_value"] + 1e-7
    assert qcqp["hom_starts"] == 3
    assert qcqp["penalty_weight"] == 10.0 and qcqp["validation_median_gap"] == {}
    feasible = np.mean([row["violation"] <= 1e-5 for row in rows])
    assert qcqp["feasible_fraction"] == pytest.approx(feasible)
    assert qcqp["median_gap"] == pytest.approx(np.median([row["gap"] for row in rows]))
    assert (verdict["parts"][3]["status"] == "pass") == (feasible >= 0.95)
    assert (verdict["parts"][4]["status"] == "pass") == (qcqp["median_gap"] <= 0.05)
    assert "exact_pgd_time_s" in rows[0] and qcqp["speedup_vs_exact_pgd"] > 0


@pytest.fixture(scope="module")
def quick_result(tmp_path_factory):
    out = tmp_path_factory.mktemp("hom_pgd_quick")
    run_experiment(NAME, profile="quick", out_dir=out)
    return stored_result(out, NAME)


@pytest.mark.slow
def test_quick_profile_star_toy_and_feasibility_pass(quick_result):
    """The star-toy half and the QCQP feasibility part reproduce at quick scale."""
    parts = quick_result["verdict"]["parts"]
    assert [p["status"] for p in parts[:4]] == ["pass"] * 4, parts
    assert quick_result["metrics"]["goal_speedup_star"] >= 5.0


@pytest.mark.slow
@pytest.mark.xfail(
    reason="measured: best-of-20-starts median gap 5.4% (centre start alone 14.4%) with w_pen 1 "
    "chosen on validation instances, at 3000 training steps: just above the note's 5%",
    strict=False,
)
def test_quick_profile_qcqp_gap_passes(quick_result):
    assert quick_result["verdict"]["status"] == "pass", quick_result["verdict"]
