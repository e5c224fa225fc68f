"""STLA: its reductions to GPTQ, the note's check 3, the Schur identity in the loop, the grid."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from jaxlab.quant import (
    correlated_layer,
    gptq,
    layer_output_error,
    prepare_hessian,
    reference_instance,
    rtn,
    search_quant_params,
    stla,
)
from tests.quant import _reference as ref

F32_ATOL = 2e-5
# Check 3 at the defaults' 200 iterations with a larger step (traced: no recompilation), enough
# for AdaRound to settle on these 3-column clusters.
CONVERGED_LR = 0.1
# The note: after AdaRound, more than 95 % of h(V) are exactly 0 or 1 (here on the converged run,
# over all weights).
MIN_HARD_FRACTION = 0.8

LAYER = correlated_layer(jax.random.key(7), rows=8, cols=16, num_tokens=64, rank=4)


def _check3_kwargs(**extra):
    inst = reference_instance(3)
    kwargs = dict(
        bits=2,
        group_size=None,
        cluster_size=3,
        order="none",
        damp=0.0,
        params=(inst.scale, inst.zero),
    )
    kwargs.update(extra)
    return inst, kwargs


def test_note_check_3_chain_from_the_independent_reference():
    inst, _ = _check3_kwargs()
    values = {
        loss: ref.cluster_rounding(
            inst.weight, inst.hessian, inst.scale, inst.zero, 2, 3, loss=loss
        )[1]
        for loss in ("global", "local")
    }
    assert values["global"] == pytest.approx(inst.values["global"], abs=1e-6)
    assert values["local"] == pytest.approx(inst.values["local"], abs=1e-6)
    w = inst.weight.astype(np.float32)
    params = (inst.scale, inst.zero)
    g = float(gptq(w, inst.hessian, bits=2, damp=0.0, params=params).info.layer_error)
    r = float(rtn(w, inst.hessian, bits=2, params=params).info.layer_error)
    assert values["global"] < values["local"] < g < r


def test_stla_adaround_finds_the_exhaustive_optimum_of_check_3():
    inst, kwargs = _check3_kwargs(learning_rate=CONVERGED_LR)
    out = stla(inst.weight.astype(np.float32), inst.hessian, **kwargs)
    q, value = ref.cluster_rounding(inst.weight, inst.hessian, inst.scale, inst.zero, 2, 3)
    assert float(out.info.layer_error) == pytest.approx(value, abs=F32_ATOL)
    np.testing.assert_allclose(out.weight, q, atol=1e-6)
    assert float(np.mean(out.info.hard_fraction)) >= MIN_HARD_FRACTION
    # The hard global losses of the clusters sum to the layer objective (no damping here).
    assert float(np.sum(out.info.column_losses)) == pytest.approx(value, abs=F32_ATOL)


def test_cluster_rounding_without_learning_matches_the_reference():
    inst, kwargs = _check3_kwargs(learn_rounding=False)
    out = stla(inst.weight.astype(np.float32), inst.hessian, **kwargs)
    q, _ = ref.cluster_rounding(
        inst.weight, inst.hessian, inst.scale, inst.zero, 2, 3, exhaustive=False
    )
    np.testing.assert_allclose(out.weight, q, atol=1e-6)


@pytest.mark.parametrize("order", ["none", "act"])
def test_cluster_one_without_learning_is_gptq(order):
    params = (np.full(8, 0.4), np.full(8, 3.0))
    common = dict(bits=3, group_size=None, order=order, params=params)
    out = stla(LAYER.weight, LAYER.hessian, cluster_size=1, learn_rounding=False, **common)
    expected = gptq(LAYER.weight, LAYER.hessian, **common)
    np.testing.assert_array_equal(out.codes, expected.codes)
    np.testing.assert_array_equal(out.permutation, expected.permutation)


@pytest.mark.parametrize("loss", ["global", "local"])
def test_stla_on_a_correlated_layer(loss):
    out = stla(LAYER.weight, LAYER.hessian, bits=3, group_size=8, cluster_size=4, loss=loss)
    assert int(out.info.nonfinite_count) == 0
    # Results lie on the grid of their group, codes in range.
    assert int(out.codes.max()) <= 7
    s = out.scale[:, out.group_index]
    z = out.zero[:, out.group_index]
    np.testing.assert_allclose(out.weight, s * (out.codes - z), atol=1e-6)
    assert sorted(np.asarray(out.permutation).tolist()) == list(range(16))
    w_prep, h_prep = prepare_hessian(LAYER.weight, LAYER.hessian)
    damped = float(layer_output_error(w_prep, out.weight, h_prep))
    if loss == "global":  # the Schur identity, cluster by cluster, inside the loop
        assert float(np.sum(out.info.column_losses)) == pytest.approx(damped, rel=1e-3)
    # Better than RTN on the same kind of grid.
    assert float(out.info.relative_error) < float(
        rtn(LAYER.weight, LAYER.hessian, bits=3, group_size=8).info.relative_error
    )
    # The warm-up diagnostics are reported per cluster.
    assert out.info.warmup_recon.shape == (4,) and np.all(np.isfinite(out.info.warmup_reg))


def test_group_parameters_come_from_the_grid_search_on_compensated_weights():
    # The first group is searched before any compensation: on W itself, with the local metric.
    out = stla(
        LAYER.weight,
        LAYER.hessian,
        bits=3,
        group_size=8,
        cluster_size=4,
        loss="local",
        learn_rounding=False,
    )
    perm = np.asarray(out.permutation)
    _, h_prep = prepare_hessian(LAYER.weight, LAYER.hessian)
    first = perm[:8]
    scale, zero = search_quant_params(
        np.asarray(LAYER.weight)[:, first], h_prep[np.ix_(first, first)], bits=3
    )
    np.testing.assert_allclose(out.scale[:, 0], scale, rtol=1e-5)
    np.testing.assert_array_equal(out.zero[:, 0], zero)


def test_padding_when_the_cluster_does_not_divide_the_width():
    w, h = LAYER.weight[:, :12], LAYER.hessian[:12, :12]
    out = stla(w, h, bits=3, group_size=None, cluster_size=8, learn_rounding=False, order="none")
    assert out.weight.shape == (8, 12) and int(out.info.nonfinite_count) == 0
    assert out.info.column_losses.shape == (2,)


def test_group_and_cluster_must_nest():
    with pytest.raises(ValueError, match="group_size=6 must be a multiple or a divisor"):
        stla(LAYER.weight[:, :12], LAYER.hessian[:12, :12], group_size=6, cluster_size=4)
