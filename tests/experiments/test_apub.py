"""``apub-product-mix`` end to end at smoke size; the library pieces it uses are tested in
``tests/stochprog`` and ``tests/solvers/test_lshaped.py``."""

from __future__ import annotations

import pytest

from jaxlab.experiments import run_experiment
from jaxlab.experiments.apub import (
    AGREEMENT_TOL,
    MIN_APUB_RELIABILITY,
    MIN_RELIABILITY_GAIN,
    REFERENCE_TOL,
)
from tests.experiments._common import run_and_check, stored_result


def _recomputed(metrics):
    """The three parts' statuses, recomputed from the stored per-trial numbers."""
    inputs = metrics["verdict_inputs"]
    n, method = str(inputs["sample_size"]), inputs["method"]
    runs = metrics["trials"][n]
    reliability = {
        m: sum(r[m]["bound"] >= r[m]["true_cost"] for r in runs) / len(runs)
        for m in ("saa", method)
    }
    gaps = [
        r[m][f"lshaped_{cuts}"]["relative_gap_to_extensive"]
        for runs_n in metrics["trials"].values()
        for r in runs_n
        for m in r
        if m != "saa"
        for cuts in ("single", "multi")
    ]
    assert reliability["saa"] == inputs["saa_reliability"]
    assert reliability[method] == inputs["apub_reliability"]
    return [
        reliability[method] >= MIN_APUB_RELIABILITY
        and reliability[method] >= reliability["saa"] + MIN_RELIABILITY_GAIN,
        max(gaps) <= AGREEMENT_TOL and inputs["all_converged"],
        max(metrics["reference_checks"]["errors"].values()) <= REFERENCE_TOL,
    ]


def test_smoke_profile_end_to_end(tmp_path):
    stored = run_and_check(
        "apub-product-mix",
        tmp_path,
        profile="smoke",
        num_parts=3,
        figures={"apub_product_mix.png"},
    )
    metrics, parts = stored["metrics"], stored["verdict"]["parts"]
    assert [p["status"] == "pass" for p in parts] == _recomputed(metrics)
    # The solver parts hold at any size: a fixed V makes L-shaped = extensive form.
    assert parts[1]["status"] == "pass" and parts[2]["status"] == "pass"
    for runs in metrics["trials"].values():
        for r in runs:
            # APUB's certificate is above SAA's in-sample value (APUB >= mean, same data).
            assert r["apub_0.1"]["bound"] >= r["saa"]["bound"] - 1e-6


@pytest.mark.slow
def test_quick_profile_verdict(tmp_path):
    run_experiment("apub-product-mix", profile="quick", out_dir=tmp_path)
    stored = stored_result(tmp_path, "apub-product-mix")
    assert [p["status"] == "pass" for p in stored["verdict"]["parts"]] == _recomputed(
        stored["metrics"]
    )
