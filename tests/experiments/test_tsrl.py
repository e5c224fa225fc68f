"""``tsrl`` end to end at smoke size, its verdict recomputed from the stored measurements; the
library pieces are tested in ``tests/rl``."""

from __future__ import annotations

import numpy as np
import pytest

from jaxlab.experiments import run_experiment
from jaxlab.experiments.tsrl import (
    CORRUPTED_FLIP,
    ISSUE_ANCHORS,
    MIN_ANCHOR_GAIN,
    MIN_CORRUPTED_MARGIN,
    MIN_CORRUPTED_RETENTION,
    MIN_MARGIN_OVER_BASELINES,
    NOTE_ANCHORS,
    NOTE_MARGIN_ANCHORS,
    REFERENCE_TOL,
    REFERENCE_VARIANCE,
    RUBRIC_RANGE,
    VARIANCE_RTOL,
)
from tests.experiments._common import run_and_check, stored_result

NAME = "tsrl"


def _increasing(values):
    return all(x < y for x, y in zip(values, values[1:], strict=False))


def _recomputed(metrics):
    """The eight parts' statuses, recomputed from the stored per-seed measurements."""
    arms = metrics["tabular"]["arms"]
    q = {name: float(np.mean(a["quality"])) for name, a in arms.items()}
    for name, value in q.items():
        assert value == pytest.approx(metrics["verdict_inputs"]["quality"][name], rel=1e-6)
    lo, hi = NOTE_ANCHORS[0], NOTE_ANCHORS[-1]
    a = _increasing([q[f"tsrl_k{k}"] for k in NOTE_ANCHORS]) and (
        q[f"tsrl_k{hi}"] - q[f"tsrl_k{lo}"] >= MIN_ANCHOR_GAIN
    )
    t4 = q[f"tsrl_k{NOTE_MARGIN_ANCHORS}"]
    b = t4 - max(q["pointwise"], q["single"]) >= MIN_MARGIN_OVER_BASELINES
    corrupted, single = q[f"tsrl_k{hi}_eps{CORRUPTED_FLIP:g}"], q[f"single_eps{CORRUPTED_FLIP:g}"]
    c = (
        corrupted >= MIN_CORRUPTED_RETENTION * q[f"tsrl_k{hi}"]
        and corrupted - single >= MIN_CORRUPTED_MARGIN
    )
    ti = f"tsrl_k{ISSUE_ANCHORS}"
    seeds = zip(
        arms[ti]["quality"], arms["pointwise"]["quality"], arms["single"]["quality"], strict=True
    )
    d = q[ti] > max(q["pointwise"], q["single"]) and all(t > max(p, s) for t, p, s in seeds)
    var = {n: np.mean(x["noise_variance"]) / (RUBRIC_RANGE**2 if x["kind"] == "pointwise" else 1)
           for n, x in arms.items()}  # fmt: skip
    e = var[ti] < min(var["pointwise"], var["single"])
    anchors = metrics["config"]["anchors"]
    f = _increasing([q[f"tsrl_k{k}"] for k in anchors])
    seq = {n: np.mean(x["quality"]) for n, x in metrics["sequence"]["arms"].items()}
    g = seq[metrics["sequence"]["tsrl"]] > max(seq["pointwise"], seq["single"])
    ref = metrics["reference_checks"]
    h = max(ref["errors"].values()) <= REFERENCE_TOL and all(
        abs(ref["variance"][str(k)] - v) <= VARIANCE_RTOL * v for k, v in REFERENCE_VARIANCE.items()
    )
    return [a, b, c, d, e, f, g, h]


def test_smoke_profile_end_to_end(tmp_path):
    stored = run_and_check(NAME, tmp_path, profile="smoke", num_parts=8, figures={"tsrl.png"})
    metrics, parts = stored["metrics"], stored["verdict"]["parts"]
    assert [p["status"] == "pass" for p in parts] == _recomputed(metrics)
    assert parts[7]["status"] == "pass"  # the note's reference checks hold at any size
    held = sum(p["status"] == "pass" for p in parts[:3])
    level = "supported" if held == 3 else "partly supported" if held == 2 else "not supported"
    assert metrics["note_verdict"] == level
    assert metrics["nonfinite_steps"] == 0
    # The win rates are probabilities and the base policy's normalised quality is 0.
    for arm in metrics["tabular"]["arms"].values():
        assert all(0.0 <= w <= 1.0 for w in arm["win_rate"])
        assert abs(arm["curve_mean"][0]) < 0.5


@pytest.mark.slow
def test_quick_profile_verdict(tmp_path):
    run_experiment(NAME, profile="quick", out_dir=tmp_path)
    stored = stored_result(tmp_path, NAME)
    assert [p["status"] == "pass" for p in stored["verdict"]["parts"]] == _recomputed(
        stored["metrics"]
    )
