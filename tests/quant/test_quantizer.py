"""The Quantizer config: checked once, frozen and static; the old keywords warn and agree."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

from jaxlab.quant import Quantizer, correlated_layer, gptq, rtn, stla
from jaxlab.quant._stla import DEFAULT_QUANTIZER

LAYER = correlated_layer(jax.random.key(7), rows=8, cols=16, num_tokens=64, rank=4)
FIELDS = ("weight", "codes", "scale", "zero", "group_index", "permutation")


def _assert_same(a, b):
    for field in FIELDS:
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    np.testing.assert_array_equal(a.info.layer_error, b.info.layer_error)


def test_a_quantizer_is_frozen_hashable_and_normalised():
    quantizer = Quantizer(bits=np.int64(3), group_size=8, damp=0)
    assert type(quantizer.bits) is int and type(quantizer.damp) is float
    assert quantizer == Quantizer(bits=3, group_size=8, damp=0.0)
    assert hash(quantizer) == hash(Quantizer(bits=3, group_size=8, damp=0.0))
    assert quantizer.qmax == 7.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        quantizer.bits = 4  # type: ignore[misc]
    with pytest.raises(ValueError, match="group_size=8 must divide the width d=12"):
        quantizer.group_width(12)


@pytest.mark.parametrize(
    ("method", "keywords", "options"),
    [
        (rtn, dict(bits=3, group_size=4, grid="search"), {}),
        (gptq, dict(bits=2, damp=0.0, symmetric=True), dict(order="act")),
        (gptq, dict(bits=3, group_size=8, grid="search", num_ratios=20), dict(block_size=4)),
        (stla, dict(bits=2, group_size=8), dict(cluster_size=4, num_iters=5)),
    ],
)
def test_the_old_keywords_warn_and_give_the_same_result(method, keywords, options):
    with pytest.warns(DeprecationWarning, match=rf"{method.__name__}\(\.\.\., bits="):
        old = method(LAYER.weight, LAYER.hessian, **keywords, **options)
    # stla's old keyword defaults were the reference's: the keywords replace those fields.
    base = DEFAULT_QUANTIZER if method is stla else Quantizer(bits=keywords["bits"])
    new = method(LAYER.weight, LAYER.hessian, dataclasses.replace(base, **keywords), **options)
    _assert_same(old, new)


def test_stla_without_a_quantizer_uses_the_reference_grid():
    w, h = LAYER.weight[:, :8], LAYER.hessian[:8, :8]
    assert DEFAULT_QUANTIZER == Quantizer(bits=3, group_size=256, grid="search")
    # d = 8 < 256: the reference's groups of 256 do not divide this layer (the old default too).
    with pytest.raises(ValueError, match="group_size=256 must divide the width d=8"):
        stla(w, h)
    quantizer = dataclasses.replace(DEFAULT_QUANTIZER, group_size=None)
    with pytest.warns(DeprecationWarning):
        old = stla(w, h, group_size=None, cluster_size=4, num_iters=5)
    _assert_same(old, stla(w, h, quantizer, cluster_size=4, num_iters=5))


def test_the_quantizer_is_required_and_never_mixed_with_the_old_keywords():
    with pytest.raises(TypeError, match=r"gptq\(\) needs quantizer=Quantizer"):
        gptq(LAYER.weight, LAYER.hessian)
    with pytest.raises(TypeError, match="got both quantizer= and the keywords bits=3"):
        rtn(LAYER.weight, LAYER.hessian, Quantizer(bits=3), bits=3)
    with pytest.raises(TypeError, match="unexpected keyword argument 'bit'"):
        rtn(LAYER.weight, LAYER.hessian, bit=3)
