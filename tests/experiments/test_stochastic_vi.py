"""The ``stochastic-vi`` experiment runs end to end and computes its verdict from measurements."""

from __future__ import annotations

import numpy as np
import pytest

from jaxlab.experiments import run_experiment
from tests.experiments._common import run_and_check, stored_result

NAME = "stochastic-vi"

# The note's table (check 1), a = -0.3, b = 1: spectral radius of one deterministic step.
_NOTE_RADII = {"gda": 1.0332, "eg": 1.5747, "eg+0.5": 1.0470, "eg+0.25": 0.9419}


def test_smoke_profile_end_to_end(tmp_path):
    stored = run_and_check(
        NAME,
        tmp_path,
        profile="smoke",
        num_parts=4,
        figures={"bilinear_residual.png", "weak_minty.png"},
    )
    verdict = stored["verdict"]

    metrics = stored["metrics"]
    minty = metrics["weak_minty"][0]
    # Deterministic radii are exact at any size: they match the note's table.
    for name, value in _NOTE_RADII.items():
        assert minty["radii"][name] == pytest.approx(value, abs=6e-5)
    assert minty["switch_predicted_alpha"] == pytest.approx(1 - minty["rho_times_lipschitz"])
    assert minty["switch_agrees"]
    # Part (a) is computed from the stochastic runs' numbers.
    stoch = minty["stochastic"]
    expected_a = (
        stoch["eg"]["final_norm_growth_median"] > 10
        and stoch["gda"]["final_norm_growth_median"] > 10
        and stoch["eg+"]["final_residual_median"] < 1e-3 * stoch["eg+"]["initial_residual"]
    )
    assert (verdict["parts"][0]["status"] == "pass") == expected_a

    bilinear = metrics["bilinear"][0]
    budget, tenth = "1e+04", "1e+03"
    arms = bilinear["arms"]
    assert {"sgda_b1", "fbf_const10", "fbf_const100", "fbf_p1", "fbf_p2"} <= set(arms)
    constant = arms["fbf_const100"]["residual_at"]
    assert (verdict["parts"][2]["status"] == "pass") == (constant[budget] >= 0.8 * constant[tenth])
    for name in ("fbf_p1", "fbf_p2"):
        arm = arms[name]
        # The reported slope is the least-squares fit of the median curve over two decades.
        calls = np.asarray(arm["calls_curve_median"])
        residual = np.asarray(arm["residual_curve_median"], dtype=float)
        mask = (calls >= 100) & (calls <= 1.5e4)
        slope = np.polyfit(np.log10(calls[mask]), np.log10(residual[mask]), 1)[0]
        assert arm["slope_last_two_decades"] == pytest.approx(slope, rel=1e-9)
        # Medians are over the per-seed curves.
        curves = np.asarray(arm["residual_curves"], dtype=float)
        np.testing.assert_allclose(np.median(curves, axis=0), residual, rtol=1e-12)
    assert metrics["theory_slope"] == -0.25


@pytest.mark.slow
def test_quick_profile_passes(tmp_path):
    record = run_experiment(NAME, profile="quick", out_dir=tmp_path)
    verdict = stored_result(tmp_path, NAME)["verdict"]
    assert verdict["status"] == "pass", verdict
    metrics = record["metrics"]
    # Growing batches keep decreasing: negative slopes over the last two decades.
    for name in ("fbf_p1", "fbf_p2"):
        assert metrics["slopes"][name] < 0
    for minty in metrics["weak_minty"]:
        assert minty["switch_agrees"]
