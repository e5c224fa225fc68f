"""``credro`` end to end at smoke size, its verdict recomputed from the stored per-seed
measurements; the library pieces are tested in ``tests/uncertainty``."""

from __future__ import annotations

import numpy as np
import pytest

from jaxlab.experiments import run_experiment
from jaxlab.experiments.credro import (
    AUROC_MARGIN,
    LOW_COVERAGE_REJECTION,
    MAX_ACCURACY_DROP,
    OOD_SETS,
    REFERENCE_TOL,
    REJECTION_RATES,
)
from tests.experiments._common import run_and_check, stored_result

NAME = "credro"


def _recomputed(metrics):
    """The four parts' statuses from the stored per-seed AUROCs, accuracies and curves."""
    de, cre = metrics["evaluation"]["deep_ensemble"], metrics["evaluation"]["credro"]
    per_seed = [
        np.mean([c["eu"][o] - d["eu"][o] for o in OOD_SETS]) for d, c in zip(de, cre, strict=True)
    ]
    delta = float(np.mean(per_seed))
    np.testing.assert_allclose(delta, metrics["verdict_inputs"]["delta"], rtol=1e-9)
    drop = np.mean([r["id_accuracy"] for r in de]) - np.mean([r["id_accuracy"] for r in cre])
    supported = delta >= AUROC_MARGIN and drop <= MAX_ACCURACY_DROP
    level = ("supported" if supported else "contradicted" if delta <= -AUROC_MARGIN
             else "not reproduced at this scale")  # fmt: skip
    assert metrics["note_verdict"] == level
    above = all(
        np.mean([r["eu"][o] for r in cre]) > np.mean([r["eu"][o] for r in de]) for o in OOD_SETS
    )
    curve = lambda rows: np.mean([r["rejection"]["eu"] for r in rows], axis=0)  # noqa: E731
    low = [i for i, r in enumerate(REJECTION_RATES) if r >= LOW_COVERAGE_REJECTION]
    dominates = all(curve(cre)[i] >= curve(de)[i] for i in low)
    reference = max(metrics["reference_checks"]["errors"].values()) <= REFERENCE_TOL
    return [supported, above, dominates, reference]


def test_smoke_profile_end_to_end(tmp_path):
    stored = run_and_check(NAME, tmp_path, profile="smoke", num_parts=4, figures={"credro.png"})
    metrics, parts = stored["metrics"], stored["verdict"]["parts"]
    assert [p["status"] == "pass" for p in parts] == _recomputed(metrics)
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
    assert [p["status"] == "pass" for p in stored["verdict"]["parts"]] == _recomputed(
        stored["metrics"]
    )
