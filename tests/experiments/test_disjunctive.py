"""``disjunctive-rules`` end to end at smoke size; the layer and its solver are tested in
``tests/nn/test_disjunctive.py`` and ``tests/solvers/test_qp.py``."""

from __future__ import annotations

import pytest

from jaxlab.experiments import run_experiment
from jaxlab.experiments.disjunctive import (
    MAX_MSE_RATIO_TO_MLP,
    MAX_MSE_RATIO_TO_PENALTY,
    MIN_SATISFACTION,
)
from tests.experiments._common import run_and_check, stored_result

_ARMS = {"mlp", "penalty", "e2e_hull", "e2e_union", "posthoc_hull", "posthoc_union"}


def _recomputed(metrics):
    """The three parts' statuses, recomputed from the stored per-seed numbers."""
    a, b = metrics["results"]["input_decided"], metrics["results"]["output_only"]
    mean = lambda values: sum(values) / len(values)  # noqa: E731
    sat_ok = min(a["e2e_hull"]["satisfaction"]) >= MIN_SATISFACTION
    mse_ok = mean(a["e2e_hull"]["mse"]) <= MAX_MSE_RATIO_TO_MLP * mean(a["mlp"]["mse"])
    union_ok = min(a["e2e_union"]["satisfaction"] + b["e2e_union"]["satisfaction"]) >= (
        MIN_SATISFACTION
    )
    ratios = [
        mean(task[arm]["mse"]) / mean(task["penalty"]["mse"])
        for task, arm in ((a, "e2e_hull"), (a, "e2e_union"), (b, "e2e_union"))
    ]
    return [sat_ok, mse_ok, union_ok and max(ratios) <= MAX_MSE_RATIO_TO_PENALTY]


def test_smoke_profile_end_to_end(tmp_path):
    stored = run_and_check(
        "disjunctive-rules",
        tmp_path,
        profile="smoke",
        num_parts=3,
        figures={"satisfaction_vs_mse.png"},
    )
    metrics, parts = stored["metrics"], stored["verdict"]["parts"]
    assert [p["status"] == "pass" for p in parts] == _recomputed(metrics)
    for task in metrics["results"].values():
        assert set(task) == _ARMS
        # Projection arms satisfy the rules they project onto even untrained: the exact union
        # projection on both tasks, every seed (ties on antecedent boundaries have probability 0).
        assert min(task["posthoc_union"]["satisfaction"]) >= MIN_SATISFACTION
        assert min(task["posthoc_union"]["projected"]) == 1.0
    # Input-decided rules: hull projection alone is exact.
    assert min(metrics["results"]["input_decided"]["posthoc_hull"]["satisfaction"]) >= (
        MIN_SATISFACTION
    )


@pytest.mark.slow
def test_quick_profile_verdict(tmp_path):
    run_experiment("disjunctive-rules", profile="quick", out_dir=tmp_path)
    stored = stored_result(tmp_path, "disjunctive-rules")
    assert [p["status"] == "pass" for p in stored["verdict"]["parts"]] == _recomputed(
        stored["metrics"]
    )
