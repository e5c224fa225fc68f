"""GPTQ against RTN, the note's reference values and an independent NumPy implementation.

Also the Schur-complement identity of the layer objective: the residual error after the optimal
least-squares compensation of the later columns equals ``e S_c eᵀ``.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from jaxlab.quant import (
    Quantizer,
    column_order,
    correlated_layer,
    gptq,
    inverse_hessian_cholesky,
    layer_output_error,
    prepare_hessian,
    reference_instance,
    rtn,
    schur_complement,
    schur_complement_metric,
    schur_complement_objective,
    spin_cluster_order,
)
from tests.quant import _reference as ref

# float32 column loop against float64 NumPy truths: values of order 1.
F32_ATOL = 2e-5
# The mean over random draws of GPTQ's relative error must beat RTN's by this factor at least:
# compensation on strongly correlated inputs is worth far more (the note reports ~2.7x on its
# synthetic layer), so 1.5x only guards against a broken compensation.
MIN_MEAN_GAIN = 1.5
NUM_DRAWS = 50


def _spd(key, d, n=40):
    x = np.asarray(jax.random.normal(key, (n, d)), np.float64)
    x = x @ np.asarray(jax.random.normal(jax.random.fold_in(key, 1), (d, d)), np.float64)
    return x, 2.0 * x.T @ x / n


@pytest.mark.parametrize(("start", "stop"), [(0, 3), (2, 5), (4, 8), (5, 6)])
def test_schur_identity_on_random_spd(start, stop):
    x, h = _spd(jax.random.key(start), 8)
    u = inverse_hessian_cholesky(h)
    np.testing.assert_allclose(np.triu(u), u)
    np.testing.assert_allclose(u.T @ u, np.linalg.inv(h), rtol=1e-9, atol=1e-9)
    s_direct = schur_complement(h, start, stop)
    np.testing.assert_allclose(schur_complement_metric(u, start, stop), s_direct, rtol=1e-8)
    # S_c ⪯ H_cc.
    assert np.linalg.eigvalsh(h[start:stop, start:stop] - s_direct).min() > -1e-9
    # Independent truth: fix e on c (nothing on the done columns), re-fit the later columns by
    # least squares on the calibration inputs; the residual output error is e S eᵀ.
    e = np.asarray(jax.random.normal(jax.random.key(99), (3, stop - start)), np.float64)
    n = x.shape[0]
    x_c, x_r = x[:, start:stop], x[:, stop:]
    residual = 0.0
    for row in e:
        target = x_c @ row
        if x_r.shape[1]:
            delta, *_ = np.linalg.lstsq(x_r, -target, rcond=None)
            target = target + x_r @ delta
        residual += 2.0 / n * target @ target
    assert float(schur_complement_objective(e, h, start, stop)) == pytest.approx(residual, rel=1e-5)


def test_note_check_1_values():
    inst = reference_instance(1)
    u = inverse_hessian_cholesky(inst.hessian)
    np.testing.assert_allclose(np.diag(u), inst.values["diag_u"], atol=1e-6)
    expected = [
        [0.984375, 0.811899, 0.265165],
        [0.811899, 2.8125, 0.918559],
        [0.265165, 0.918559, 1.5],
    ]
    np.testing.assert_allclose(schur_complement(inst.hessian, 0, 3), expected, atol=1e-6)
    np.testing.assert_allclose(schur_complement_metric(u, 0, 3), expected, atol=1e-6)


def test_note_check_2_post_compensation_and_gptq():
    inst = reference_instance(2)
    w = inst.weight.astype(np.float32)
    q = np.asarray(rtn(w, quantizer=Quantizer(bits=2)).weight, np.float64)
    e = (q - inst.weight)[:, :3]
    compensated = float(schur_complement_objective(e, inst.hessian, 0, 3))
    assert compensated == pytest.approx(inst.values["cluster0_compensated"], abs=1e-5)
    local = float(np.einsum("ij,jk,ik->", e, inst.hessian[:3, :3], e))
    assert local == pytest.approx(inst.values["cluster0_local"], abs=1e-5)
    assert compensated < local
    rtn_error = float(rtn(w, inst.hessian, Quantizer(bits=2)).info.layer_error)
    gptq_error = float(gptq(w, inst.hessian, Quantizer(bits=2, damp=0.0)).info.layer_error)
    assert rtn_error == pytest.approx(inst.values["rtn"], abs=F32_ATOL)
    assert gptq_error == pytest.approx(inst.values["gptq"], abs=F32_ATOL)


@pytest.mark.parametrize("check", [2, 3])
def test_gptq_beats_rtn_on_the_note_instances(check):
    inst = reference_instance(check)
    w = inst.weight.astype(np.float32)
    params = (inst.scale, inst.zero)
    g = float(gptq(w, inst.hessian, Quantizer(bits=2, damp=0.0), params=params).info.layer_error)
    r = float(rtn(w, inst.hessian, Quantizer(bits=2), params=params).info.layer_error)
    assert g < r
    assert g == pytest.approx(inst.values["gptq"], abs=F32_ATOL)


def test_gptq_beats_rtn_on_average_over_random_correlated_layers():
    gains, wins = [], 0
    for seed in range(NUM_DRAWS):
        p = correlated_layer(jax.random.key(seed), rows=8, cols=16, num_tokens=64, rank=4)
        g = float(gptq(p.weight, p.hessian, Quantizer(bits=3)).info.relative_error)
        r = float(rtn(p.weight, p.hessian, Quantizer(bits=3)).info.relative_error)
        gains.append(r / g)
        wins += g < r
    assert np.mean([1 / x for x in gains]) < 1 / MIN_MEAN_GAIN  # mean error ratio GPTQ/RTN
    assert wins >= 0.9 * NUM_DRAWS


def test_gptq_on_a_diagonal_hessian_is_rtn():
    w = np.asarray(jax.random.normal(jax.random.key(3), (8, 16)), np.float32)
    h = np.diag(np.linspace(0.5, 3.0, 16))
    for group in (None, 4):
        for order in ("none", "act"):
            out = gptq(w, h, Quantizer(bits=3, group_size=group), order=order)
            if order == "none":  # same grid as RTN only when groups keep their columns
                expected = rtn(w, quantizer=Quantizer(bits=3, group_size=group))
                np.testing.assert_array_equal(out.codes, expected.codes)
                np.testing.assert_allclose(out.weight, expected.weight, atol=1e-6)
            else:
                # act-order regroups columns; each weight still rounds to nearest on its grid
                s = np.asarray(out.scale)[:, np.asarray(out.group_index)]
                z = np.asarray(out.zero)[:, np.asarray(out.group_index)]
                nearest = s * (np.clip(np.round(w / s) + z, 0, 7) - z)
                np.testing.assert_allclose(out.weight, nearest, atol=1e-6)
                assert np.all(np.asarray(out.info.column_losses) >= 0)


@pytest.mark.parametrize(
    ("group", "order", "block"),
    [(None, "none", 128), (None, "act", 3), (4, "act", 128), (4, "none", 8), (None, "none", 5)],
)
def test_gptq_matches_an_independent_numpy_implementation(group, order, block):
    p = correlated_layer(jax.random.key(7), rows=8, cols=16, num_tokens=64, rank=4)
    out = gptq(
        p.weight, p.hessian, Quantizer(bits=3, group_size=group), order=order, block_size=block
    )
    truth = ref.gptq(np.asarray(p.weight), np.asarray(p.hessian), 3, group=group, order=order)
    np.testing.assert_allclose(out.weight, truth, atol=1e-5)
    # The per-column losses ‖e_j‖² sum to the objective under the damped Hessian.
    w_prep, h_prep = prepare_hessian(p.weight, p.hessian)
    damped = float(layer_output_error(w_prep, out.weight, h_prep))
    assert float(np.sum(out.info.column_losses)) == pytest.approx(damped, rel=1e-4)


def test_gptq_in_float64_matches_numpy_exactly(x64):
    p = correlated_layer(jax.random.key(7), rows=8, cols=16, num_tokens=64, rank=4)
    w, h = np.asarray(p.weight, np.float64), np.asarray(p.hessian, np.float64)
    out = gptq(w, h, Quantizer(bits=3), order="act", block_size=4)
    assert out.weight.dtype == np.float64
    np.testing.assert_allclose(out.weight, ref.gptq(w, h, 3, order="act"), atol=1e-12)


def test_dead_columns_are_zeroed_and_counted():
    p = correlated_layer(jax.random.key(2), rows=8, cols=16, num_tokens=64, rank=4)
    h = np.array(p.hessian, np.float64)
    h[5, :] = h[:, 5] = 0.0
    out = gptq(p.weight, h, Quantizer(bits=3))
    assert out.info.dead_columns == 1 and int(out.info.nonfinite_count) == 0
    np.testing.assert_array_equal(np.asarray(out.weight)[:, 5], 0.0)


def test_non_psd_hessian_raises_with_the_remedy():
    h = np.diag([1.0, 1.0, -5.0, 1.0])
    with pytest.raises(ValueError, match="h is not positive definite after damping"):
        gptq(np.ones((2, 4), np.float32), h, Quantizer(bits=3))


def test_orders():
    inst = reference_instance(1)
    assert spin_cluster_order(inst.hessian, 3).tolist() == [3, 4, 5, 1, 2, 0]
    assert spin_cluster_order(inst.hessian, 2).tolist() == [3, 4, 5, 2, 1, 0]
    assert column_order(inst.hessian, "act").tolist() == [3, 5, 4, 1, 2, 0]
    perm = spin_cluster_order(_spd(jax.random.key(4), 10)[1], 4)
    assert sorted(perm.tolist()) == list(range(10))
