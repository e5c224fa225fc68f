"""``msflow`` end to end at smoke size, its verdict recomputed from the stored measurements; the
library pieces are tested in ``tests/inverse``."""

from __future__ import annotations

import numpy as np
import pytest

from jaxlab.experiments import run_experiment
from jaxlab.experiments.msflow import (
    MAX_MEMORY_RATIO,
    MAX_MSFLOW_SLOPE_FRACTION,
    MEMORY_RATIO_STEPS,
    MIN_DFLOW_MEMORY_R2,
    PSNR_SLACK_DB,
    REFERENCE_TOL,
)
from tests.experiments._common import run_and_check, stored_result

NAME = "msflow"


def _fit(steps, values):
    """Slope and R² by a least-squares solve (independent of the experiment's np.polyfit)."""
    n, v = np.asarray(steps, float), np.asarray(values, float)
    design = np.stack([n, np.ones_like(n)], axis=1)
    (slope, intercept), *_ = np.linalg.lstsq(design, v, rcond=None)
    total = np.sum((v - v.mean()) ** 2)
    r2 = 1 - np.sum((v - design @ [slope, intercept]) ** 2) / total if total > 0 else np.nan
    return slope, r2


def _recomputed(metrics):
    """The four parts' statuses, recomputed from the stored per-N bytes and per-image PSNRs."""
    memory = metrics["digits"]["memory"]
    steps = sorted(int(n) for n in memory)
    inputs = metrics["verdict_inputs"]
    for n in steps:  # compiled bytes are temp + output, as stored
        for row in memory[str(n)].values():
            assert row["compiled_bytes"] == row["temp_bytes"] + row["output_bytes"]
    fits = {}
    for arm in ("dflow_every_step", "msflow"):
        slope, r2 = _fit(steps, [memory[str(n)][arm]["compiled_bytes"] for n in steps])
        stored = inputs["memory"]["fits"][arm]
        assert slope == pytest.approx(stored["slope"], rel=1e-6, abs=1e-6)
        if np.isfinite(r2):
            assert r2 == pytest.approx(stored["r2"], abs=1e-9)
        fits[arm] = slope, r2
    ratio_n = MEMORY_RATIO_STEPS if str(MEMORY_RATIO_STEPS) in memory else steps[-1]
    at = memory[str(ratio_n)]
    peak_ratio = at["msflow"]["peak_bytes"] / at["dflow_every_step"]["peak_bytes"]
    part_a = (
        fits["dflow_every_step"][0] > 0
        and fits["dflow_every_step"][1] >= MIN_DFLOW_MEMORY_R2
        and fits["msflow"][0] <= MAX_MSFLOW_SLOPE_FRACTION * fits["dflow_every_step"][0]
        and peak_ratio <= MAX_MEMORY_RATIO
    )
    n = inputs["verdict_steps"]
    per_seed = {}
    for task, out in metrics["digits"]["tasks"].items():
        for arm in ("msflow", "dflow_every_step"):
            per_seed[task, arm] = [np.mean(s[f"{arm}@{n}"]["psnr"]) for s in out["seeds"]]
    tasks = inputs["tasks"]
    ms = [np.mean(per_seed[t, "msflow"]) for t in tasks]
    df = [np.mean(per_seed[t, "dflow_every_step"]) for t in tasks]
    np.testing.assert_allclose(ms, inputs["msflow_psnr"], rtol=1e-6)
    np.testing.assert_allclose(df, inputs["dflow_psnr"], rtol=1e-6)
    part_b = any(m >= d for m, d in zip(ms, df, strict=True)) and all(
        m >= d - PSNR_SLACK_DB for m, d in zip(ms, df, strict=True)
    )
    at_n = memory[str(n)]
    peak_ok = at_n["msflow"]["peak_bytes"] < at_n["dflow_every_step"]["peak_bytes"]
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
