"""``harm`` end to end at smoke size, its verdict recomputed from the stored per-member
measurements; the library pieces are tested in ``tests/optim/test_harm.py``."""

from __future__ import annotations

import numpy as np
import pytest

from jaxlab.experiments import run_experiment
from jaxlab.experiments.harm import (
    ARMS,
    FULL_QP_MAX_HARM,
    HARM_RATIO,
    MIN_ACCURACY_GAIN,
    NOTE_LEARNING_RATE,
    OPTIMIZERS,
)
from tests.experiments._common import run_and_check, stored_result

NAME = "harm"


def _cells(run):
    """(data, lr) -> arm -> (seed-mean harm rate, seed-mean accuracy, seed-mean probes)."""
    out = {}
    for i, cell in enumerate(run["cells"]):
        key = f"{cell['data']}@{cell['learning_rate']:g}"
        for arm in ARMS:
            values = run["arms"][arm]
            row = out.setdefault(key, {}).setdefault(arm, {"harm": [], "acc": [], "probes": []})
            row["harm"].append(values["harm_rate"][i])
            row["acc"].append(values["test_accuracy"][i])
            if "probes" in values:
                row["probes"].append(values["probes"]["full_qp"][i])
    return {
        key: {arm: {k: float(np.mean(v)) if v else None for k, v in row.items()}
              for arm, row in arms.items()}
        for key, arms in out.items()
    }  # fmt: skip


def _recomputed(metrics):
    """The six parts' statuses from the stored per-member values and the timing rows."""
    cells = {name: _cells(metrics["runs"][name]) for name in OPTIMIZERS}
    note = cells["sgdm"][f"clean@{NOTE_LEARNING_RATE:g}"]
    stored = metrics["verdict_inputs"]["note_cell"]
    np.testing.assert_allclose(note["base"]["harm"], stored["base"]["harm_rate"], rtol=1e-9)
    part_a = note["reweight"]["harm"] <= HARM_RATIO * note["base"]["harm"]
    part_b = note["reweight"]["acc"] - note["base"]["acc"] >= MIN_ACCURACY_GAIN
    rows = [row for name in OPTIMIZERS for row in cells[name].values()]
    part_c = all(r["reweight"]["harm"] < r["base"]["harm"] for r in rows)
    part_d = all(r["reweight"]["acc"] > r["base"]["acc"] for r in rows)
    ratios = [r["seconds"]["reweight"] / r["seconds"]["base"]
              for r in metrics["verdict_inputs"]["overhead"]]  # fmt: skip
    part_e = all(b < a for a, b in zip(ratios, ratios[1:], strict=False))
    part_f = max(r["reweight"]["probes"] for r in rows) <= FULL_QP_MAX_HARM
    return [part_a, part_b, part_c, part_d, part_e, part_f]


def test_smoke_profile_end_to_end(tmp_path):
    stored = run_and_check(
        NAME, tmp_path, profile="smoke", num_parts=6, figures={"harm.png", "harm_curves.png"}
    )
    metrics, parts = stored["metrics"], stored["verdict"]["parts"]
    assert [p["status"] == "pass" for p in parts] == _recomputed(metrics)
    for name in OPTIMIZERS:
        for arm, values in metrics["runs"][name]["arms"].items():
            assert values["nonfinite_members"] == 0, (name, arm)
            assert all(0.0 <= r <= 1.0 for r in values["harm_rate"])
    # The full QP's weights are the reference: on the probes it leaves less harm than the base.
    for name in OPTIMIZERS:
        probes = metrics["runs"][name]["arms"]["reweight"]["probes"]
        assert np.mean(probes["full_qp"]) <= np.mean(probes["base"])


@pytest.mark.slow
def test_quick_profile_verdict(tmp_path):
    run_experiment(NAME, profile="quick", out_dir=tmp_path)
    stored = stored_result(tmp_path, NAME)
    assert [p["status"] == "pass" for p in stored["verdict"]["parts"]] == _recomputed(
        stored["metrics"]
    )
