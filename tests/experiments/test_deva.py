"""The ``deva`` experiment runs end to end; its helpers and verdict follow from the numbers."""

from __future__ import annotations

import numpy as np
import pytest

from jaxlab.experiments import deva as experiment
from tests.experiments._common import run_and_check

NAME = "deva"


def test_smoke_profile_end_to_end(tmp_path):
    stored = run_and_check(
        NAME, tmp_path, profile="smoke", num_parts=2,
        figures={"quadratic_toy.png", "language_model.png"},
    )  # fmt: skip
    metrics, parts = stored["metrics"], stored["verdict"]["parts"]
    het = {m: v["median_final_f"] for m, v in metrics["toy"]["heterogeneous_frobenius"].items()}
    hom = {m: v["median_final_f"] for m, v in metrics["toy"]["homogeneous_frobenius"].items()}
    assert set(het) == set(experiment.TOY_METHODS)
    ordered = het["deva_matrix"] < het["muon"] < min(het["adam"], het["soap"], het["deva_vector"])
    ordered = ordered and min(het["adam"], het["soap"], het["deva_vector"]) < het["gd"]
    expected = ordered and hom["soap"] <= min(hom.values())
    assert (parts[0]["status"] == "pass") == expected
    lm = metrics["language_model"]
    savings = []
    for run in lm["seeds"]:
        deva_steps = run["deva"]["steps_to_muon_final"]
        muon_steps = run["muon"]["steps_to_muon_final"]
        assert muon_steps is not None  # Muon reaches its own final smoothed loss by the last step
        if deva_steps is None:
            assert run["saving_percent"] is None
            savings.append(-np.inf)
        else:
            assert run["saving_percent"] == pytest.approx(100 * (1 - deva_steps / muon_steps))
            savings.append(run["saving_percent"])
    assert (parts[1]["status"] == "pass") == (np.median(savings) > 0)


def test_trailing_mean_and_steps_to_reach_against_loops():
    values = np.random.default_rng(0).normal(size=37)
    smoothed = experiment.trailing_mean(values, 5)
    loop = [values[max(0, t - 4) : t + 1].mean() for t in range(values.size)]
    np.testing.assert_allclose(smoothed, loop, rtol=1e-12)
    target = float(np.median(smoothed))
    first = next(t + 1 for t, v in enumerate(smoothed) if v <= target)
    assert experiment.steps_to_reach(smoothed, target) == first
    assert experiment.steps_to_reach(smoothed, smoothed.min() - 1.0) is None
    with pytest.raises(ValueError, match="window must be"):
        experiment.trailing_mean(values, 0)
