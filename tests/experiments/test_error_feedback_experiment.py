"""The ``error-feedback`` experiment runs end to end and computes its verdict from measurements."""

from __future__ import annotations

import numpy as np
import pytest

from jaxlab import optim
from jaxlab.experiments import run_experiment
from tests.experiments._common import run_and_check, stored_result

NAME = "error-feedback"


def test_smoke_profile_end_to_end(tmp_path):
    stored = run_and_check(
        NAME,
        tmp_path,
        profile="smoke",
        num_parts=3,
        figures={"tightness.png", "least_squares.png", "heterogeneous.png", "logistic.png"},
    )
    verdict = stored["verdict"]

    metrics = stored["metrics"]
    # The tightness rows agree with the closed form computed here, independently of the run.
    for row in metrics["tightness"]:
        rho = float(optim.ef_tight_rate(row["kappa"], 1.0 - row["epsilon"]))
        assert row["rho_star"] == pytest.approx(rho, abs=1e-7)
        for method in ("ef", "ef21"):
            assert row[f"gap_{method}"] == pytest.approx(row[f"worst_{method}"] - row["rho_star"])
    # The smoke grid contains the worst point (lambda = mu, theta = pi), so part 1 holds even here.
    assert metrics["tightness_max_abs_gap"] <= 1e-3
    assert verdict["parts"][0]["status"] == "pass"
    # Each run's "reached" agrees with its best suboptimality and its iteration count.
    for res in (metrics["least_squares"], metrics["heterogeneous"]):
        for run in res["runs"].values():
            assert run["reached"] == (run["best_suboptimality"] <= res["tolerance"])
            if run["reached"]:
                assert 1 <= run["iterations"] <= run["steps_run"]
                assert run["bits_per_worker"] > 0
    # The logistic runs (full profile; smoke runs them at tiny size): the same bookkeeping.
    logistic, config = metrics["logistic"], stored["config"]
    convex, nonconvex = logistic["strongly_convex"], logistic["nonconvex"]
    assert set(convex["runs"]) == {"ef21_eta_star", "ef_eta_star", "ef21_gamma_r", "gd", "cgd"}
    assert set(nonconvex["runs"]) == {"top_k", "scaled_sign", "natural"}
    for res, measure in ((convex, "suboptimality"), (nonconvex, "grad_sq")):
        for run in res["runs"].values():
            assert run["reached"] == (run[f"best_{measure}"] <= res["tolerance"])
            assert (
                run["steps_run"]
                <= -(-config["logistic_steps"] // config["chunk"]) * config["chunk"]
            )
    # The smoke budget leaves the compressed runs short of the target; GD gets close.
    assert convex["runs"]["ef21_eta_star"]["best_suboptimality"] < 1.0
    assert convex["runs"]["gd"]["best_suboptimality"] < 1e-6
    # Bits per worker, read from the EF21 state: a dense first message, then top-k messages.
    (it1, bits1), (it2, bits2) = nonconvex["runs"]["top_k"]["trace_bits"][:2]
    assert (it1, it2) == (1, 2)
    assert bits1 == optim.identity().bits(logistic["dim"])
    assert bits2 - bits1 == optim.top_k(convex["keep"]).bits(logistic["dim"])
    # The reference minimiser (scipy + Newton, numpy) is below every iterate's objective.
    assert convex["optimal_value"] < 0.5
    for run in convex["runs"].values():
        assert run["best_suboptimality"] > -1e-12
    # Step sizes from the closed forms, recomputed here from the reported constants.
    c = convex["constants"]
    assert convex["steps"]["eta_star"] == pytest.approx(
        float(
            optim.ef_optimal_step_size(
                np.array(c["smoothness"]), np.array(c["strong_convexity"]), convex["steps"]["alpha"]
            )
        ),
        rel=1e-6,
    )
    assert convex["steps"]["eta_gd"] == pytest.approx(
        2.0 / (c["global_smoothness"] + c["global_strong_convexity"])
    )

    steps = metrics["least_squares"]["steps"]
    assert steps["eta_star"] == pytest.approx(
        float(
            optim.ef_optimal_step_size(
                np.array(metrics["least_squares"]["constants"]["smoothness"]),
                np.array(metrics["least_squares"]["constants"]["strong_convexity"]),
                steps["alpha"],
            )
        ),
        rel=1e-6,
    )


@pytest.mark.slow
def test_quick_profile_passes(tmp_path):
    record = run_experiment(NAME, profile="quick", out_dir=tmp_path)
    verdict = stored_result(tmp_path, NAME)["verdict"]
    assert verdict["status"] == "pass", verdict
    metrics = record["metrics"]
    assert metrics["least_squares_ratio_ef21"] >= 1.25
    assert metrics["least_squares_ratio_ef"] >= 1.25
    assert not metrics["heterogeneous"]["runs"]["cgd"]["reached"]
    assert metrics["heterogeneous"]["runs"]["ef21_eta_star"]["reached"]
