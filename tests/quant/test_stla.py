"""STLA: its reductions to GPTQ, the note's check 3, the Schur identity in the loop, the grid."""

from __future__ import annotations

import dataclasses
import inspect

import jax
import numpy as np
import pytest

from jaxlab.quant import (
    Quantizer,
    correlated_layer,
    gptq,
    layer_output_error,
    prepare_hessian,
    reference_instance,
    rtn,
    search_quant_params,
    stla,
)
from jaxlab.quant._stla import HARD_LOGIT
from tests.quant import _reference as ref

F32_ATOL = 2e-5
# The note: after AdaRound, more than 95 % of h(V) are exactly 0 or 1.
MIN_HARD_FRACTION = 0.95
# The old budget (200 iterations at lr 0.015): its summed step 1.95 < ln 11, so the weights with a
# fractional part near 1/2 cannot end hard; about half stayed soft. Below this it must stay.
OLD_BUDGET_MAX_HARD = 0.8

LAYER = correlated_layer(jax.random.key(7), rows=8, cols=16, num_tokens=64, rank=4)


def _check3_kwargs(**extra):
    inst = reference_instance(3)
    kwargs = dict(
        quantizer=Quantizer(bits=2, damp=0.0, grid="search"),
        cluster_size=3,
        order="none",
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
    g = float(gptq(w, inst.hessian, Quantizer(bits=2, damp=0.0), params=params).info.layer_error)
    r = float(rtn(w, inst.hessian, Quantizer(bits=2), params=params).info.layer_error)
    assert values["global"] < values["local"] < g < r


def test_stla_adaround_finds_the_exhaustive_optimum_of_check_3():
    inst, kwargs = _check3_kwargs()  # the defaults: 2000 iterations at lr 0.015
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
    common = dict(quantizer=Quantizer(bits=3), order=order, params=params)
    out = stla(LAYER.weight, LAYER.hessian, cluster_size=1, learn_rounding=False, **common)
    expected = gptq(LAYER.weight, LAYER.hessian, **common)
    np.testing.assert_array_equal(out.codes, expected.codes)
    np.testing.assert_array_equal(out.permutation, expected.permutation)


@pytest.mark.parametrize("grid", ["search", "minmax"])
@pytest.mark.parametrize(("group", "order"), [(4, "none"), (8, "act"), (None, "none")])
def test_cluster_one_without_learning_is_gptq_on_the_same_grid_rule(group, order, grid):
    common = dict(quantizer=Quantizer(bits=3, group_size=group, grid=grid), order=order)
    out = stla(LAYER.weight, LAYER.hessian, cluster_size=1, learn_rounding=False, **common)
    # Lazy blocks of one column apply each column's compensation as STLA does, in the same
    # floating-point operations: codes and grid agree bit for bit.
    expected = gptq(LAYER.weight, LAYER.hessian, block_size=1, **common)
    for field in ("codes", "scale", "zero", "group_index", "permutation"):
        np.testing.assert_array_equal(getattr(out, field), getattr(expected, field), err_msg=field)
    # Wider lazy blocks sum the same compensation in another order: the same codes, and the
    # grid to float32 rounding of the compensated weights it is computed from.
    lazy = gptq(LAYER.weight, LAYER.hessian, **common)
    np.testing.assert_array_equal(out.codes, lazy.codes)
    np.testing.assert_array_equal(out.zero, lazy.zero)
    np.testing.assert_allclose(out.scale, lazy.scale, rtol=1e-6)
    if grid == "search":  # and the searched grid is not the min-max one
        on_minmax = dataclasses.replace(common["quantizer"], grid="minmax")
        minmax = gptq(LAYER.weight, LAYER.hessian, **{**common, "quantizer": on_minmax})
        assert not np.array_equal(out.scale, minmax.scale)


def test_the_default_rounding_budget_ends_hard_on_the_correlated_layer():
    # The experiment's per-channel layer and grid; the note: > 95 % of h(V) end at 0 or 1.
    p = correlated_layer(jax.random.key(0), rows=64, cols=128, num_tokens=2048, rank=16)
    w, h = np.asarray(p.weight), np.asarray(p.hessian, np.float64)
    _, h_damped = prepare_hessian(w, h)
    params = search_quant_params(w, h_damped, bits=3)
    kwargs = dict(quantizer=Quantizer(bits=3, grid="search"), cluster_size=16, params=params)
    defaults = inspect.signature(stla).parameters
    lr, iters = defaults["learning_rate"].default, defaults["num_iters"].default
    # The summed step of the cosine schedule (to 0.3 lr) covers the distance ln 11 a logit
    # started at 0 must travel; 200 iterations do not.
    assert 0.65 * lr * iters > HARD_LOGIT > 0.65 * lr * 200
    out = stla(w, h, **kwargs)
    assert float(np.mean(out.info.hard_fraction)) >= MIN_HARD_FRACTION
    old = stla(w, h, num_iters=200, **kwargs)
    assert float(np.mean(old.info.hard_fraction)) < OLD_BUDGET_MAX_HARD


@pytest.mark.parametrize("loss", ["global", "local"])
def test_stla_on_a_correlated_layer(loss):
    searched = Quantizer(bits=3, group_size=8, grid="search")
    out = stla(LAYER.weight, LAYER.hessian, searched, cluster_size=4, loss=loss)
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
        rtn(LAYER.weight, LAYER.hessian, Quantizer(bits=3, group_size=8)).info.relative_error
    )
    # The warm-up diagnostics are reported per cluster.
    assert out.info.warmup_recon.shape == (4,) and np.all(np.isfinite(out.info.warmup_reg))


def test_group_parameters_come_from_the_grid_search_on_compensated_weights():
    # The first group is searched before any compensation: on W itself, with the local metric.
    out = stla(
        LAYER.weight,
        LAYER.hessian,
        Quantizer(bits=3, group_size=8, grid="search"),
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
    quantizer = Quantizer(bits=3, grid="search")
    out = stla(w, h, quantizer, cluster_size=8, learn_rounding=False, order="none")
    assert out.weight.shape == (8, 12) and int(out.info.nonfinite_count) == 0
    assert out.info.column_losses.shape == (2,)


def test_group_and_cluster_must_nest():
    with pytest.raises(ValueError, match="group_size=6 must be a multiple or a divisor"):
        quantizer = Quantizer(bits=3, group_size=6, grid="search")
        stla(LAYER.weight[:, :12], LAYER.hessian[:12, :12], quantizer, cluster_size=4)
