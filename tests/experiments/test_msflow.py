"""``msflow`` end to end at smoke size, its verdict recomputed from the stored measurements; the
library pieces are tested in ``tests/inverse``."""

from __future__ import annotations

import numpy as np
import pytest

from jaxlab.experiments import run_experiment
from jaxlab.experiments.msflow import (
    MAX_MEMORY_RATIO,
    MAX_MSFLOW_MEMORY_GROWTH,
    MEMORY_VERDICT_STEPS,
    MIN_DFLOW_MEMORY_GROWTH,
    PSNR_SLACK_DB,
    REFERENCE_TOL,
)
from tests.experiments._common import run_and_check, stored_result

NAME = "msflow"


def _recomputed(metrics):
    """The four parts' statuses, recomputed from the stored per-N bytes and per-image PSNRs."""
    memory = metrics["digits"]["memory"]
    steps = sorted(int(n) for n in memory)
    if all(str(n) in memory for n in MEMORY_VERDICT_STEPS):
        steps = list(MEMORY_VERDICT_STEPS)
    lo, hi = memory[str(steps[0])], memory[str(steps[-1])]
    ms_growth = hi["msflow"]["temp_bytes"] / lo["msflow"]["temp_bytes"]
    df_growth = hi["dflow_backprop"]["temp_bytes"] / lo["dflow_backprop"]["temp_bytes"]
    ratio = hi["msflow"]["temp_bytes"] / hi["dflow_backprop"]["temp_bytes"]
    inputs = metrics["verdict_inputs"]
    assert ms_growth == pytest.approx(inputs["memory"]["msflow_growth"])
    assert df_growth == pytest.approx(inputs["memory"]["dflow_growth"])
    part_a = (
        ms_growth < MAX_MSFLOW_MEMORY_GROWTH
        and df_growth >= MIN_DFLOW_MEMORY_GROWTH
        and ratio <= MAX_MEMORY_RATIO
    )
    n = inputs["verdict_steps"]
    per_seed = {}
    for task, out in metrics["digits"]["tasks"].items():
        for arm in ("msflow", "dflow_backprop"):
            per_seed[task, arm] = [np.mean(s[f"{arm}@{n}"]["psnr"]) for s in out["seeds"]]
    tasks = inputs["tasks"]
    ms = [np.mean(per_seed[t, "msflow"]) for t in tasks]
    df = [np.mean(per_seed[t, "dflow_backprop"]) for t in tasks]
    np.testing.assert_allclose(ms, inputs["msflow_psnr"], rtol=1e-6)
    np.testing.assert_allclose(df, inputs["dflow_psnr"], rtol=1e-6)
    part_b = any(m >= d for m, d in zip(ms, df, strict=True)) and all(
        m >= d - PSNR_SLACK_DB for m, d in zip(ms, df, strict=True)
    )
    at_n = memory[str(n)]
    peak_ok = at_n["msflow"]["peak_bytes"] < at_n["dflow_backprop"]["peak_bytes"]
    mean_ok = all(m >= d for m, d in zip(ms, df, strict=True))
    part_d = max(metrics["reference_checks"]["errors"].values()) <= REFERENCE_TOL
    return [part_a, part_b, mean_ok and peak_ok, part_d]


def test_smoke_profile_end_to_end(tmp_path):
    stored = run_and_check(
        NAME, tmp_path, profile="smoke", num_parts=4, figures={"msflow.png", "reconstructions.png"}
    )
    metrics, parts = stored["metrics"], stored["verdict"]["parts"]
    assert [p["status"] == "pass" for p in parts] == _recomputed(metrics)
    assert parts[3]["status"] == "pass"  # the note's reference values hold at any size
    level = metrics["note_verdict"]
    a, b = parts[0]["status"] == "pass", parts[1]["status"] == "pass"
    assert level == ("supported" if a and b else "partly supported" if a else "not supported")
    # The stored PSNRs are those of the stored example reconstructions (first seed, 4 images).
    digits = metrics["digits"]
    truth = np.asarray(digits["examples"]["x_true"])
    n = metrics["verdict_inputs"]["verdict_steps"]
    for out in digits["tasks"].values():
        for arm, images in out["examples"].items():
            mse = np.mean((np.asarray(images) - truth) ** 2, axis=-1)
            row = out["seeds"][0][arm if arm.endswith("squares") else f"{arm}@{n}"]
            np.testing.assert_allclose(10 * np.log10(4.0 / mse), row["psnr"][:4], rtol=1e-4)
    # The toy's residuals are |x̂₁ - y| of the stored reconstructions.
    toy = metrics["toy"]
    for arm in ("dflow", "msflow", "msflow_resimulated"):
        rec = np.asarray(toy[arm]["reconstruction"])
        np.testing.assert_allclose(
            toy[arm]["residual"], np.abs(rec[:, 0] - np.asarray(toy["y"])), atol=1e-6
        )
    assert toy["nonfinite"] == {"dflow": 0, "msflow": 0}


@pytest.mark.slow
def test_quick_profile_verdict(tmp_path):
    run_experiment(NAME, profile="quick", out_dir=tmp_path)
    stored = stored_result(tmp_path, NAME)
    assert [p["status"] == "pass" for p in stored["verdict"]["parts"]] == _recomputed(
        stored["metrics"]
    )
