"""The ``hom-pgd`` experiment runs end to end and computes its verdict from measurements."""

from __future__ import annotations

import numpy as np
import pytest

from jaxlab.experiments import run_experiment
from jaxlab.solvers import STAR_OPTIMUM_VALUE
from tests.experiments._common import run_and_check, stored_result

NAME = "hom-pgd"
FIGURES = {"star.png", "qcqp.png", "qcqp_multistart.png", "qcqp_speed.png"}


def _status(passed: bool, resolved: bool) -> str:
    """As ``jaxlab._src.experiments.check``: an unresolved part is unresolved whatever passed."""
    return ("pass" if passed else "fail") if resolved else "unresolved"


def _gate_status(interval, gate, authors_budget, falling=False) -> str:
    """The split parts' rule, written again: the median decides, unresolved when the interval
    contains the gate or when a miss may be the budget's (still falling, below the authors')."""
    median, low, high = interval
    passed = median <= gate
    resolved = not (low <= gate < high)
    if not passed and (falling or not authors_budget):
        resolved = False
    return _status(passed, resolved)


@pytest.mark.parametrize(
    "interval, authors_budget, falling, expected",
    [
        ((0.03, 0.02, 0.04), True, False, "pass"),
        ((0.03, 0.01, 0.08), True, False, "unresolved"),  # the interval contains the gate
        ((0.09, 0.07, 0.12), True, False, "fail"),
        ((0.09, 0.07, 0.12), True, True, "unresolved"),  # coverage still falling
        ((0.09, 0.07, 0.12), False, False, "unresolved"),  # below the authors' budget
        ((0.03, 0.02, 0.04), False, False, "pass"),  # ... where a clear pass still counts
    ],
)
def test_gate_rule(interval, authors_budget, falling, expected):
    from jaxlab.experiments import hom_pgd

    assert hom_pgd.UNDER_BUDGET_CAN_FAIL is False
    passed, resolved = hom_pgd._gate(*interval, 0.05, authors_budget, falling)
    assert _status(passed, resolved) == expected
    assert _gate_status(interval, 0.05, authors_budget, falling) == expected


def test_smoke_profile_end_to_end(tmp_path):
    # At smoke size the networks train far below the authors' budget, so a missed gap cannot be
    # a fail: parts may be `unresolved`. Parts: star toy (3), (b) (3), one (c) size (3).
    stored = run_and_check(
        NAME, tmp_path, profile="smoke", num_parts=9, figures=FIGURES, allow_unresolved=True
    )
    parts = stored["verdict"]["parts"]
    statuses = [p["status"] for p in parts]

    metrics = stored["metrics"]
    star = metrics["star"]
    hom, pgd = star["hom_pgd"], star["exact_pgd"]
    # The exact map keeps every iterate in K (float64): part 1 holds at any size.
    assert hom["max_violation"] <= 1e-10 and statuses[0] == "pass"
    # No feasible method beats the global optimum of the note's dense scan.
    for name in ("hom_pgd", "exact_pgd"):
        assert min(star[name]["values"]) >= STAR_OPTIMUM_VALUE - 1e-7
    fraction = np.mean(np.array(hom["values"]) <= 0.0312)
    assert hom["fraction_global"] == pytest.approx(fraction)
    assert statuses[1] == _status(fraction >= 0.30, True)
    faster = hom["median_time_per_run_s"] < pgd["median_time_per_run_s"]
    assert statuses[2] == _status(faster, True)

    # (b): gaps recomputed from the stored values against the local SLSQP reference.
    qcqp = metrics["qcqp"]
    assert (qcqp["n"], qcqp["m"], qcqp["authors_budget"]) == (2, 3, False)
    methods = qcqp["methods"]
    reference = np.array(qcqp["slsqp_values"])
    assert np.all(np.isfinite(reference)) and np.all(reference < 0)  # x = 0 feasible, f(0) = 0
    for name, row in methods.items():
        gaps = (np.array(row["values"]) - reference) / np.abs(reference)
        assert np.allclose(row["gaps"], gaps), name
        assert row["median_gap"] == pytest.approx(np.median(gaps)), name
    hom_row = methods["hom_pgd"]
    feasible = np.mean(np.array(qcqp["violations"]) <= 1e-5)
    assert hom_row["feasible_fraction"] == pytest.approx(feasible)
    assert statuses[3] == _status(feasible >= 0.95, feasible >= 0.95)
    # The gap split, recomputed in numpy from the stored values (issue 41).
    hom_values = np.where(np.array(qcqp["violations"]) <= 1e-5, hom_row["values"], np.inf)
    best = np.minimum(reference, methods["slsqp_multistart"]["values"])
    reach = np.array(qcqp["reachable_values"])
    # Hom-PGD's own feasible end point counts as reachable (the optimizer part is never < 0).
    reach = np.where(np.isfinite(hom_values), np.minimum(reach, hom_values), reach)
    assert np.all(np.nan_to_num(np.array(qcqp["optimizer_gaps"]), nan=0.0) >= 0.0)
    coverage = (reach - best) / np.abs(best)
    optimizer = (hom_values - reach) / np.abs(best)
    assert np.allclose(qcqp["coverage_gaps"], coverage, equal_nan=True)
    assert np.allclose(qcqp["optimizer_gaps"], optimizer, equal_nan=True)
    assert qcqp["coverage"][0] == pytest.approx(np.nanmedian(coverage))
    assert qcqp["optimizer"][0] == pytest.approx(np.nanmedian(optimizer))
    assert qcqp["half_budget_steps"] == qcqp["train_steps"] // 2
    # Below the authors' budget a miss of either part is never a fail.
    assert statuses[4] == _gate_status(qcqp["coverage"], 0.05, False)
    assert statuses[5] == _gate_status(qcqp["optimizer"], 0.01, False)
    assert "fail" not in statuses[3:8]
    assert qcqp["inverse_error_max"] < 1e-3
    assert 0.0 <= qcqp["eps_inn"] <= 1.0
    assert qcqp["speedup_vs_exact_pgd"] == pytest.approx(
        qcqp["exact_pgd_time_per_instance_s"] / hom_row["time_per_instance_s"]
    )
    near_global = np.array(methods["slsqp_multistart"]["values"])
    assert len(qcqp["multistart_gaps"]) == qcqp["test_instances"] == 3

    # (c): the smoke case repeats (b)'s size and budget, so the same network and instances.
    (speed,) = metrics["speed"]
    assert speed["slsqp_values"] == pytest.approx(qcqp["slsqp_values"])
    assert speed["methods"]["slsqp_multistart"]["values"] == pytest.approx(near_global.tolist())
    rows = speed["methods"]
    assert statuses[6] in ("pass", "unresolved")  # below the authors' budget: never a fail
    assert statuses[6] == _gate_status(speed["coverage"], 0.05, False)
    assert statuses[7] == _gate_status(speed["optimizer"], 0.01, False)
    qualified = [k for k, r in rows.items() if k != "hom_pgd" and r["median_gap"] <= 0.05]
    hom_time = rows["hom_pgd"]["time_per_instance_s"]
    faster = all(hom_time < rows[k]["time_per_instance_s"] for k in qualified)
    assert statuses[8] == _status(faster, bool(qualified))
    for name, row in rows.items():
        assert row["speedup"] == pytest.approx(row["time_per_instance_s"] / hom_time), name


@pytest.fixture(scope="module")
def quick_result(tmp_path_factory):
    out = tmp_path_factory.mktemp("hom_pgd_quick")
    run_experiment(NAME, profile="quick", out_dir=out)
    return stored_result(out, NAME)


@pytest.mark.slow
def test_quick_profile_star_toy_feasibility_and_speed_pass(quick_result):
    """The star toy, (b)'s feasibility and (c)'s time parts reproduce at quick scale."""
    parts = quick_result["verdict"]["parts"]
    assert len(parts) == 3 + 3 + 3  # (c) at n = 10, m = 10 only (m = 100 is full's)
    assert [parts[i]["status"] for i in (0, 1, 2, 3, 8)] == ["pass"] * 5, parts
    assert quick_result["metrics"]["goal_speedup_star"] >= 5.0


@pytest.mark.slow
@pytest.mark.xfail(
    reason="measured at quick (commits 40be8f6 and 36ded04), judged by the split parts' rule (issue 41): "
    "(b) n=2 m=3 coverage 4.9% [0.8%, 10.9%] (unresolved: the interval contains the 5% gate), "
    "optimizer 0.00% (pass); (c) n=10 m=10 coverage 2.8% [2.2%, 3.2%] and optimizer 0.00% "
    "(pass); overall unresolved, not pass",
    strict=False,
)
def test_quick_profile_qcqp_gaps_pass(quick_result):
    assert quick_result["verdict"]["status"] == "pass", quick_result["verdict"]
