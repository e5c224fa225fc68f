"""Uniform quantizers: codes on the grid, the round trip, min-max and the note's grid search."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.quant import (
    Quantizer,
    correlated_layer,
    dequantize,
    minmax_params,
    prepare_hessian,
    quantize,
    quantize_uniform,
    reference_instance,
    rtn,
    search_quant_params,
)

W = jax.random.normal(jax.random.key(0), (8, 16))


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("bits", [1, 2, 3, 4, 8])
def test_codes_lie_on_the_grid_and_round_trip(bits, symmetric):
    scale, zero = minmax_params(W, bits=bits, symmetric=symmetric)
    codes = quantize(W, scale, zero, bits=bits)
    assert codes.dtype == jnp.uint8
    assert int(codes.min()) >= 0 and int(codes.max()) <= 2**bits - 1
    assert np.all(np.asarray(zero) == np.round(np.asarray(zero)))  # integer zero points
    values = dequantize(codes, scale, zero)
    np.testing.assert_allclose(values, quantize_uniform(W, scale, zero, bits=bits), atol=1e-6)
    # Dequantized values are grid points: quantizing them again changes nothing.
    again = quantize(values, scale, zero, bits=bits)
    np.testing.assert_array_equal(again, codes)
    # Within the range the rounding error is at most half a step.
    inside = (codes > 0) & (codes < 2**bits - 1)
    err = np.abs(np.asarray(values - W))
    assert np.all(
        err[np.asarray(inside)]
        <= 0.5 * np.asarray(scale)[:, None].repeat(16, 1)[np.asarray(inside)] + 1e-6
    )
    if symmetric:
        assert np.all(np.asarray(zero) == 2 ** (bits - 1))


def test_minmax_matches_the_note_and_handles_zero_rows():
    inst = reference_instance(2)
    scale, zero = minmax_params(jnp.asarray(inst.weight, jnp.float32), bits=2)
    np.testing.assert_allclose(scale, [0.566667, 0.58], atol=1e-6)
    np.testing.assert_array_equal(zero, [1.0, 2.0])
    scale, zero = minmax_params(jnp.zeros((1, 4)), bits=2)  # range ±1
    np.testing.assert_allclose(scale, [2 / 3])
    assert float(quantize_uniform(jnp.zeros((1, 4)), scale, zero, bits=2).max()) == 0.0


def test_round_is_half_to_even():
    codes = quantize(jnp.array([[0.5, 1.5, 2.5]]), jnp.ones(1), jnp.zeros(1), bits=3)
    assert codes.tolist() == [[0, 2, 2]]


def _score(w, metric, scale, zero, bits):
    q = np.asarray(quantize_uniform(w, scale, zero, bits=bits), np.float64)
    e = q - np.asarray(w, np.float64)
    return np.einsum("ij,jk,ik->i", e, metric, e)


def test_grid_search_reproduces_the_note_check_5():
    inst = reference_instance(1)
    w = jnp.asarray(inst.weight, jnp.float32)
    scale, zero = search_quant_params(w, inst.hessian, bits=2)
    # Row 0: r = 0.93 of the min-max scale 1.7/3, z = 1; row 1: r = 1, s = 0.58, z = 1.
    np.testing.assert_allclose(scale, [0.93 * 1.7 / 3, 0.58], rtol=1e-6)
    np.testing.assert_array_equal(zero, [1.0, 1.0])
    np.testing.assert_allclose(
        _score(w, inst.hessian, scale, zero, 2), [0.231951, 0.234882], atol=2e-6
    )


def test_grid_search_is_never_worse_than_minmax():
    x = jax.random.normal(jax.random.key(1), (64, 16))
    metric = np.asarray(x.T @ x / 32, np.float64)
    for bits in (2, 3, 4):
        searched = _score(W, metric, *search_quant_params(W, metric, bits=bits), bits)
        plain = _score(W, metric, *minmax_params(W, bits=bits), bits)
        assert np.all(searched <= plain + 1e-5)
        assert np.mean(searched) < np.mean(plain)  # it actually improves on average


def test_rtn_groups_use_their_own_ranges():
    out = rtn(W, quantizer=Quantizer(bits=3, group_size=4))
    assert out.scale.shape == (8, 4)
    for g in range(4):
        block = W[:, 4 * g : 4 * g + 4]
        scale, zero = minmax_params(block, bits=3)
        np.testing.assert_allclose(out.scale[:, g], scale, rtol=1e-6)
        np.testing.assert_allclose(
            out.weight[:, 4 * g : 4 * g + 4], quantize_uniform(block, scale, zero, bits=3)
        )
    values = out.scale[:, out.group_index] * (out.codes - out.zero[:, out.group_index])
    np.testing.assert_allclose(out.weight, values, atol=1e-6)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_a_non_finite_weight_has_no_code(bad):
    # A NaN cast to uint8 used to come out as code 0, a plausible weight.
    w = np.array([[0.3, bad, -0.2, 0.9]], np.float32)
    with pytest.raises(ValueError, match=r"w must be finite: 1 of its 4 entries are NaN/inf"):
        quantize(w, np.array([0.1]), np.array([3.0]), bits=3)
    if np.isnan(bad):  # the fake quantizer propagates a NaN instead
        fake = quantize_uniform(w, np.array([0.1]), np.array([3.0]), bits=3)
        assert np.isnan(np.asarray(fake)[0, 1])


@pytest.mark.parametrize("bad", [0.0, -0.1, float("nan"), float("inf")])
def test_a_scale_that_is_not_positive_and_finite_raises(bad):
    # A zero scale made w / s infinite (clipped to the grid's end, or NaN for w = 0) silently.
    w = np.array([[0.3, -0.2], [0.1, 0.9]], np.float32)
    with pytest.raises(ValueError, match=r"scale must be finite"):
        quantize(w, np.array([0.1, bad]), np.array([3.0, 3.0]), bits=3)
    with pytest.raises(ValueError, match=r"zero must be finite: 1 of its 2 entries"):
        quantize(w, np.array([0.1, 0.1]), np.array([3.0, float("nan")]), bits=3)


def test_under_jit_the_weights_without_a_code_are_counted():
    w = np.array([[0.3, np.nan, -0.2, 0.9], [0.1, np.inf, 0.0, -0.4]], np.float32)
    scale, zero = np.array([0.1, 0.0], np.float32), np.array([3.0, 3.0], np.float32)

    @jax.jit
    def coded(w, scale):
        return quantize(w, scale, zero, bits=3, return_nonfinite=True)

    codes, nonfinite = coded(w, scale)
    # Row 0: the NaN; row 1 (scale 0): every entry's w / s is inf or NaN.
    assert int(nonfinite) == 1 + 4
    assert codes.dtype == jnp.uint8 and np.all(np.asarray(codes)[1] == 0)
    # The finite entries of row 0 are coded as without jit.
    expected = quantize(w[:1, [0, 2, 3]], scale[:1], zero[:1], bits=3)
    np.testing.assert_array_equal(np.asarray(codes)[0, [0, 2, 3]], np.asarray(expected)[0])
    assert int(coded(np.nan_to_num(w, posinf=1.0), np.array([0.1, 0.2], np.float32))[1]) == 0
    # Concrete input: the count comes back beside the codes (0, or the call raised).
    _, none = quantize(w[:1, [0, 2, 3]], scale[:1], zero[:1], bits=3, return_nonfinite=True)
    assert int(none) == 0


@pytest.mark.parametrize("group", [None, 4])
def test_rtn_searched_grid_is_the_grid_search_on_each_hessian_block(group):
    p = correlated_layer(jax.random.key(5), rows=6, cols=12, num_tokens=48, rank=3)
    w = np.asarray(p.weight)
    out = rtn(w, p.hessian, Quantizer(bits=3, group_size=group, grid="search"))
    _, h_damped = prepare_hessian(w, p.hessian)
    g = group or 12
    for k in range(12 // g):
        cols = slice(k * g, (k + 1) * g)
        scale, zero = search_quant_params(w[:, cols], h_damped[cols, cols], bits=3)
        np.testing.assert_array_equal(out.scale[:, k], scale)
        np.testing.assert_array_equal(out.zero[:, k], zero)
