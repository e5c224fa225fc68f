"""``credro`` end to end at smoke size, its verdict recomputed from the stored per-seed
measurements; the library pieces are tested in ``tests/uncertainty``."""

from __future__ import annotations

import numpy as np
import pytest

from jaxlab._src.stats import t_interval
from jaxlab.experiments import run_experiment
from jaxlab.experiments.credro import (
    AUROC_MARGIN,
    CONFIDENCE,
    LOW_COVERAGE_REJECTION,
    MAX_ACCURACY_DROP,
    OOD_SETS,
    REFERENCE_TOL,
    REJECTION_RATES,
)
from tests.experiments._common import run_and_check, stored_result

NAME = "credro"


def _level(per_seed, drop):
    """The note's wording from a paired 95% interval, written out again here (not imported)."""
    _, low, high = t_interval(per_seed, CONFIDENCE)
    if low >= AUROC_MARGIN:
        return "pass" if drop <= MAX_ACCURACY_DROP else "fail"
    if high <= -AUROC_MARGIN:
        return "fail"
    return "unresolved"  # not reproduced at this scale, or undecided


def _per_seed(rows, baseline, score="eu", baseline_score="eu"):
    return [
        np.mean([r[score][o] - b[baseline_score][o] for o in OOD_SETS])
        for b, r in zip(baseline, rows, strict=True)
    ]


def _recomputed(metrics):
    """The six parts' statuses from the stored per-seed AUROCs, accuracies and curves."""
    de, cre = metrics["evaluation"]["deep_ensemble"], metrics["evaluation"]["credro"]
    per_seed = _per_seed(cre, de)
    np.testing.assert_allclose(per_seed, metrics["verdict_inputs"]["per_seed_delta"], rtol=1e-9)
    drop = np.mean([r["id_accuracy"] for r in de]) - np.mean([r["id_accuracy"] for r in cre])
    status = lambda ok: "pass" if ok else "fail"  # noqa: E731
    above = all(
        np.mean([r["eu"][o] for r in cre]) > np.mean([r["eu"][o] for r in de]) for o in OOD_SETS
    )
    curve = lambda rows: np.mean([r["rejection"]["eu"] for r in rows], axis=0)  # noqa: E731
    low = [i for i, r in enumerate(REJECTION_RATES) if r >= LOW_COVERAGE_REJECTION]
    dominates = all(curve(cre)[i] >= curve(de)[i] for i in low)
    reference = max(metrics["reference_checks"]["errors"].values()) <= REFERENCE_TOL
    cells = [_level(c["per_seed_delta"], c["accuracy_drop"]) for c in metrics["sweep"]]
    sweep = next(s for s in ("pass", "unresolved", "fail") if s in cells)
    eu_vs_mi = _level(_per_seed(cre, de, "eu", "mi"), drop)
    return [
        _level(per_seed, drop),
        status(above),
        status(dominates),
        status(reference),
        sweep,
        eu_vs_mi,
    ]


def test_smoke_profile_end_to_end(tmp_path):
    stored = run_and_check(
        NAME,
        tmp_path,
        profile="smoke",
        num_parts=6,
        figures={"credro.png"},
        allow_unresolved=True,
    )
    metrics, parts = stored["metrics"], stored["verdict"]["parts"]
    assert [p["status"] for p in parts] == _recomputed(metrics)
    # The sweep: every budget (smoke: 10 and 20 steps) crossed with both grids, paired seeds.
    assert sorted((c["steps"], c["grid"]) for c in metrics["sweep"]) == [
        (10, "note"),
        (10, "strong"),
        (20, "note"),
        (20, "strong"),
    ]
    main = [c for c in metrics["sweep"] if c["steps"] == 20 and c["grid"] == "note"][0]
    np.testing.assert_allclose(main["per_seed_delta"], metrics["verdict_inputs"]["per_seed_delta"])
    assert parts[3]["status"] == "pass"  # the note's reference values hold at any size
    for rows in metrics["evaluation"].values():
        assert len(rows) == 2  # smoke's seeds
        for row in rows:
            assert all(0.0 <= row["eu"][o] <= 1.0 for o in OOD_SETS)
            assert len(row["rejection"]["eu"]) == len(REJECTION_RATES)


@pytest.mark.slow
def test_quick_profile_verdict(tmp_path):
    run_experiment(NAME, profile="quick", out_dir=tmp_path)
    stored = stored_result(tmp_path, NAME)
    assert [p["status"] for p in stored["verdict"]["parts"]] == _recomputed(stored["metrics"])
    # The smallest budget is the one where the members do not interpolate their training set.
    smallest = min(c["steps"] for c in stored["metrics"]["sweep"])
    fits = [
        c["member_train_accuracy"]["deep_ensemble"]
        for c in stored["metrics"]["sweep"]
        if c["steps"] == smallest
    ]
    assert max(fits) < 1.0
