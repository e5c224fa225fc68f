"""The ``hom-pgd`` experiment runs end to end and computes its verdict from measurements."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab._src.runner import run_experiment
from jaxlab.experiments.hom_pgd import (
    STAR_OPTIMUM_VALUE,
    qcqp_condition,
    qcqp_constraints,
    qcqp_objective,
    sample_qcqp,
    star_constraint,
    star_projection,
)
from tests.experiments._common import run_and_check, stored_result

NAME = "hom-pgd"


def test_smoke_profile_end_to_end(tmp_path):
    stored = run_and_check(
        NAME, tmp_path, profile="smoke", num_parts=5, figures={"star.png", "qcqp.png"}
    )
    verdict = stored["verdict"]

    metrics = stored["metrics"]
    star = metrics["star"]
    hom, pgd = star["hom_pgd"], star["exact_pgd"]
    # The exact map keeps every iterate in K (float64): part 1 holds at any size.
    assert hom["max_violation"] <= 1e-10
    assert verdict["parts"][0]["status"] == "pass"
    # No feasible method beats the global optimum of the note's dense scan.
    for name in ("hom_pgd", "exact_pgd"):
        assert min(star[name]["values"]) >= STAR_OPTIMUM_VALUE - 1e-7
    # Parts 2 and 3 are computed from the recorded numbers.
    fraction = np.mean(np.array(hom["values"]) <= 0.0312)
    assert hom["fraction_global"] == pytest.approx(fraction)
    assert (verdict["parts"][1]["status"] == "pass") == (fraction >= 0.30)
    faster = hom["median_time_per_run_s"] < pgd["median_time_per_run_s"]
    assert (verdict["parts"][2]["status"] == "pass") == faster
    assert metrics["goal_speedup_star"] == pytest.approx(
        pgd["median_time_per_run_s"] / hom["median_time_per_run_s"]
    )

    (qcqp,) = metrics["qcqp"]
    assert (qcqp["n"], qcqp["m"]) == (2, 3)
    rows = qcqp["instances"]
    for row in rows:
        assert row["gap"] == pytest.approx(
            (row["value"] - row["slsqp_value"]) / abs(row["slsqp_value"])
        )
        assert 0.0 <= row["eps_inn"] <= 1.0
        # The kept end point is the best feasible one over the starts, the centre among them.
        if row["feasible"]:
            assert row["violation"] <= 1e-5
            if row["centre_violation"] <= 1e-5:
                assert row["value"] <= row["centre_value"] + 1e-7
    assert qcqp["hom_starts"] == 3
    assert qcqp["penalty_weight"] == 10.0 and qcqp["validation_median_gap"] == {}
    feasible = np.mean([row["violation"] <= 1e-5 for row in rows])
    assert qcqp["feasible_fraction"] == pytest.approx(feasible)
    assert qcqp["median_gap"] == pytest.approx(np.median([row["gap"] for row in rows]))
    assert (verdict["parts"][3]["status"] == "pass") == (feasible >= 0.95)
    assert (verdict["parts"][4]["status"] == "pass") == (qcqp["median_gap"] <= 0.05)
    assert "exact_pgd_time_s" in rows[0] and qcqp["speedup_vs_exact_pgd"] > 0


def test_sample_qcqp_follows_the_note_and_the_centre_is_feasible():
    keys = jax.random.split(jax.random.key(2030), 200)
    instances = jax.vmap(lambda k: sample_qcqp(k, 4, 5))(keys)
    # x = 0 strictly feasible for every instance (b_j = ||p_j|| + max λ² > 0).
    residuals = jax.vmap(lambda inst: qcqp_constraints(jnp.zeros(4), inst))(instances)
    assert residuals.shape == (200, 5 + 4 + 1)
    assert bool(jnp.all(residuals < 0))
    one = jax.tree.map(lambda a: a[0], instances)
    # Q_j symmetric of rank r = n // 2 = 2, indefinite across the family.
    assert np.allclose(one.constraint_quad, np.transpose(one.constraint_quad, (0, 2, 1)), atol=1e-6)
    ranks = [np.linalg.matrix_rank(np.asarray(q), tol=1e-6) for q in one.constraint_quad]
    assert ranks == [2] * 5
    eigs = np.linalg.eigvalsh(np.asarray(instances.constraint_quad).reshape(-1, 4, 4))
    assert (eigs < -1e-3).any() and (eigs > 1e-3).any()
    # b_j = ||p_j|| + max_k λ_jk² > ||p_j||; p_j ~ N(0, I)/n has E||p_j||² = 1/n.
    norms = np.linalg.norm(np.asarray(instances.constraint_linear), axis=-1)
    assert np.all(np.asarray(instances.constraint_bound) > norms)
    assert np.mean(norms**2) == pytest.approx(1.0 / 4, rel=0.1)
    # U_j has unit-norm columns: trace(n Q_j) = sum_k λ_jk, λ ~ N(0, 1) (mean 0, var r = 2).
    traces = np.trace(4 * np.asarray(instances.constraint_quad), axis1=-2, axis2=-1)
    assert abs(np.mean(traces)) < 0.1 and np.var(traces) == pytest.approx(2.0, rel=0.15)
    condition = qcqp_condition(one)
    assert condition.shape == (5, 4 * 4 + 4 + 1)
    x = jnp.array([0.3, -0.2, 0.1, 0.5])
    assert float(qcqp_objective(x, one)) == pytest.approx(
        float(0.5 * x @ one.quad @ x + one.linear @ x)
    )
    with pytest.raises(ValueError, match="n must be an int >= 2"):
        sample_qcqp(jax.random.key(0), 1, 3)
    with pytest.raises(ValueError, match="m must be a positive int"):
        sample_qcqp(jax.random.key(0), 2, 0)


def test_star_projection_is_exact(x64):
    """Against a brute-force nearest boundary point (1e6 angles, numpy)."""
    theta = np.linspace(0.0, 2.0 * np.pi, 1_000_000, endpoint=False)
    radius = 1.0 + 0.6 * np.sin(4.0 * theta)
    boundary = radius[:, None] * np.stack([np.cos(theta), np.sin(theta)], 1)
    project = jax.jit(star_projection)
    rng = np.random.default_rng(0)
    for y in rng.uniform(-2.5, 2.5, (12, 2)):
        x = np.asarray(project(jnp.asarray(y)))
        if float(star_constraint(jnp.asarray(y))[0]) <= 0:
            assert np.allclose(x, y)
            continue
        brute = np.min(np.linalg.norm(boundary - y[None, :], axis=1))
        assert np.linalg.norm(x - y) == pytest.approx(brute, abs=1e-9)
        assert abs(float(star_constraint(jnp.asarray(x))[0])) <= 1e-12


@pytest.fixture(scope="module")
def quick_result(tmp_path_factory):
    out = tmp_path_factory.mktemp("hom_pgd_quick")
    run_experiment(NAME, profile="quick", out_dir=out)
    return stored_result(out, NAME)


@pytest.mark.slow
def test_quick_profile_star_toy_and_feasibility_pass(quick_result):
    """The star-toy half and the QCQP feasibility part reproduce at quick scale."""
    parts = quick_result["verdict"]["parts"]
    assert [p["status"] for p in parts[:4]] == ["pass"] * 4, parts
    assert quick_result["metrics"]["goal_speedup_star"] >= 5.0


@pytest.mark.slow
@pytest.mark.xfail(
    reason="measured: best-of-20-starts median gap 5.4% (centre start alone 14.4%) with w_pen 1 "
    "chosen on validation instances, at 3000 training steps: just above the note's 5%",
    strict=False,
)
def test_quick_profile_qcqp_gap_passes(quick_result):
    assert quick_result["verdict"]["status"] == "pass", quick_result["verdict"]


def test_penalty_weight_selection_and_best_of_starts():
    from jaxlab.experiments.hom_pgd import _best_of_starts, _latent_starts, select_penalty_weight

    assert select_penalty_weight({1.0: 0.04, 3.0: 0.09, 10.0: 0.30}) == 1.0
    assert select_penalty_weight({1.0: 0.05, 10.0: 0.05}) == 10.0  # tie: smaller ε_inn
    assert select_penalty_weight({3.0: np.inf, 10.0: 0.2}) == 10.0  # infeasible validation
    with pytest.raises(ValueError, match="validation_gaps"):
        select_penalty_weight({})
    # Best feasible wins even when an infeasible start has a lower value.
    values = np.array([0.5, -3.0, 0.1])
    assert _best_of_starts(values, np.array([0.0, 1.0, 0.0])) == (2, True)
    assert _best_of_starts(values, np.array([3.0, 1.0, 2.0])) == (1, False)
    starts = np.asarray(_latent_starts(jax.random.key(0), 5, 2))
    assert starts.shape == (5, 2) and np.all(starts[0] == 0)
    assert np.all(np.linalg.norm(starts, axis=1) <= 0.9 + 1e-6)
