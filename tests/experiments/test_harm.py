"""``harm`` end to end at smoke size, its verdict recomputed from the stored per-member
measurements with the intervals computed again here; the library pieces are tested in
``tests/optim/test_harm.py``."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from jaxlab.experiments import run_experiment
from jaxlab.experiments.harm import (
    ARMS,
    CONFIDENCE,
    FULL_QP_MAX_HARM,
    HARM_RATIO,
    MIN_ACCURACY_GAIN,
    NOTE_LEARNING_RATE,
    OPTIMIZERS,
    RIDGES,
)
from jaxlab.optim._harm import DEFAULT_RIDGE
from tests.experiments._common import run_and_check, stored_result

NAME = "harm"


def _interval(values):
    """Mean and two-sided Student-t interval, written out with scipy (not jaxlab's helper)."""
    values = np.asarray(values, float)
    half = stats.t.ppf(0.5 + CONFIDENCE / 2, len(values) - 1) * stats.sem(values)
    return values.mean(), values.mean() - half, values.mean() + half


def _members(run):
    """(data, lr) -> arm -> per-seed arrays of harm rate and accuracy (seeds in order)."""
    out = {}
    for i, cell in enumerate(run["cells"]):
        key = f"{cell['data']}@{cell['learning_rate']:g}"
        for arm in ARMS:
            row = out.setdefault(key, {}).setdefault(arm, {"harm": [], "acc": []})
            row["harm"].append(run["arms"][arm]["harm_rate"][i])
            row["acc"].append(run["arms"][arm]["test_accuracy"][i])
    return {
        k: {a: {q: np.asarray(v) for q, v in r.items()} for a, r in c.items()}
        for k, c in out.items()
    }


def _gate(values):
    mean, low, high = _interval(values)
    if low <= 0.0 <= high and low <= MIN_ACCURACY_GAIN <= high:
        return "unresolved"
    return "pass" if mean >= MIN_ACCURACY_GAIN else "fail"


def _all_cells(values_by_cell, want):
    """pass if every interval is on the ``want`` side of 0, fail if one is on the other side."""
    signs = []
    for v in values_by_cell:
        _, low, high = _interval(v)
        signs.append("up" if low > 0 else "down" if high < 0 else "?")
    other = "down" if want == "up" else "up"
    if all(s == want for s in signs):
        return "pass"
    return "fail" if other in signs or "?" not in signs else "unresolved"


def _recomputed(metrics):
    """The eight parts' statuses from the stored per-member values and the timing rows."""
    cells = {name: _members(metrics["runs"][name]) for name in OPTIMIZERS}
    note = cells["sgdm"][f"clean@{NOTE_LEARNING_RATE:g}"]
    status = lambda ok: "pass" if ok else "fail"  # noqa: E731
    part_a = status(note["reweight"]["harm"].mean() <= HARM_RATIO * note["base"]["harm"].mean())
    part_b = _gate(note["reweight"]["acc"] - note["base"]["acc"])
    rows = [row for name in OPTIMIZERS for row in cells[name].values()]
    part_c = _all_cells([r["reweight"]["harm"] - r["base"]["harm"] for r in rows], "down")
    part_d = _all_cells([r["reweight"]["acc"] - r["base"]["acc"] for r in rows], "up")
    ratios = [
        r["seconds"]["reweight"] / r["seconds"]["base"]
        for r in metrics["verdict_inputs"]["overhead"]
    ]
    part_e = status(all(b < a for a, b in zip(ratios, ratios[1:], strict=False)))
    worst = max(
        np.mean(np.asarray(metrics["runs"][name]["arms"]["reweight"]["probes"]["full_qp"])[idx])
        for name in OPTIMIZERS
        for idx in _cell_indices(metrics["runs"][name])
    )
    part_f = status(worst <= FULL_QP_MAX_HARM)
    part_g = _gate(note["exact"]["acc"] - note["base"]["acc"])
    per_ridge = {r: [] for r in RIDGES}
    for name in OPTIMIZERS:
        probes = metrics["runs"][name]["arms"]["reweight"]["probes"]
        base = np.asarray(probes["base_mass"]).sum(axis=1)
        for r in RIDGES:
            per_ridge[r].extend(np.asarray(probes[f"ridge_{r:g}_mass"]).sum(axis=1) / base)
    best = min(RIDGES, key=lambda r: np.mean(per_ridge[r]))
    tied = _interval(np.subtract(per_ridge[DEFAULT_RIDGE], per_ridge[best]))[1] <= 0.0
    part_h = status(best == DEFAULT_RIDGE or tied)
    return [part_a, part_b, part_c, part_d, part_e, part_f, part_g, part_h]


def _cell_indices(run):
    keys = {}
    for i, cell in enumerate(run["cells"]):
        keys.setdefault((cell["data"], cell["learning_rate"]), []).append(i)
    return list(keys.values())


def test_smoke_profile_end_to_end(tmp_path):
    stored = run_and_check(
        NAME,
        tmp_path,
        profile="smoke",
        num_parts=8,
        figures={"harm.png", "harm_curves.png"},
        allow_unresolved=True,
    )
    metrics, parts = stored["metrics"], stored["verdict"]["parts"]
    assert [p["status"] for p in parts] == _recomputed(metrics)
    for name in OPTIMIZERS:
        for arm, values in metrics["runs"][name]["arms"].items():
            assert values["nonfinite_members"] == 0, (name, arm)
            assert all(0.0 <= r <= 1.0 for r in values["harm_rate"])
        probes = metrics["runs"][name]["arms"]["reweight"]["probes"]
        # Probes at steps 0, 10 and 20 (smoke), one column each per member.
        assert metrics["runs"][name]["arms"]["reweight"]["probe_steps"] == [0, 10, 20]
        assert np.asarray(probes["base_mass"]).shape == (len(metrics["runs"][name]["cells"]), 3)
        # The full QP is the reference: it leaves less first-order harm mass than the base.
        assert np.sum(probes["full_qp_mass"]) <= 1e-2 * np.sum(probes["base_mass"])


@pytest.mark.slow
def test_quick_profile_verdict(tmp_path):
    run_experiment(NAME, profile="quick", out_dir=tmp_path)
    stored = stored_result(tmp_path, NAME)
    assert [p["status"] for p in stored["verdict"]["parts"]] == _recomputed(stored["metrics"])
