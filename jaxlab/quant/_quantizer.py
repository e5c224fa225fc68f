"""The quantizer configuration shared by :func:`rtn`, :func:`gptq` and :func:`stla`.

A :class:`Quantizer` says *what* grid a layer is quantized to (bit width, group size, symmetric or
asymmetric, how a group's scale and zero are chosen) and how the Hessian is prepared (damping,
dead columns); the methods say *how* the codes are chosen (GPTQ's block size and column order,
STLA's clusters and AdaRound budget). It is a frozen, hashable dataclass checked once when it is
built (like :class:`jaxlab.optim.Compressor`), passed whole to every method, and static under
``jit``.

The keywords the methods took before (``rtn(w, h, bits=3, group_size=32)``) still work through
:func:`resolve_quantizer`, with a ``DeprecationWarning``.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

from jaxlab._src.validation import (
    check_bool,
    check_choice,
    check_instance,
    check_int,
    check_nonnegative,
    check_positive,
)
from jaxlab.quant._hessian import DAMP, DEAD_VALUE
from jaxlab.quant._uniform import NUM_RATIOS, check_bits

__all__ = ["GRIDS", "Quantizer"]

GRIDS = ("minmax", "search")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Quantizer:
    """A uniform integer grid per row or per group of columns, and the Hessian's preparation.

    ``code = clip(round(w/s) + z, 0, 2^bits − 1)`` with one ``(s, z)`` per row of every group of
    ``group_size`` columns (see :mod:`jaxlab.quant._uniform`).

    Attributes:
      bits: ``b`` in ``[1, 8]`` (codes are stored as uint8).
      group_size: columns per group (must divide the layer's width); ``None``: one group per
        row.
      symmetric: the symmetric grid (``z = (q_max + 1)/2``) instead of the asymmetric one.
      grid: how a group's ``(s, z)`` is chosen: ``"minmax"`` (GPTQ's min-max rule) or
        ``"search"`` (:func:`search_quant_params` against the method's metric).
      num_ratios: shrink ratios of the ``"search"`` grid (100 in the note).
      damp: relative damping ``p >= 0``: ``p · mean(diag H)`` is added to the diagonal.
      dead_value: the diagonal given to dead columns (``H_jj = 0``), ``> 0``.

    Examples:
      >>> import numpy as np
      >>> from jaxlab.quant import Quantizer, rtn
      >>> quantizer = Quantizer(bits=2, group_size=2)
      >>> quantizer
      Quantizer(bits=2, group_size=2, symmetric=False, grid='minmax', num_ratios=100, damp=0.01, dead_value=0.00048828125)
      >>> w = np.array([[0.3, -0.7, 0.9, 0.1]], np.float32)
      >>> rtn(w, quantizer=quantizer).group_index.tolist()
      [0, 0, 1, 1]
      >>> Quantizer(bits=9)
      Traceback (most recent call last):
      ...
      ValueError: bits must be an int in [1, 8], got 9
    """  # noqa: E501 (the repr is one line)

    bits: int
    group_size: int | None = None
    symmetric: bool = False
    grid: str = "minmax"
    num_ratios: int = NUM_RATIOS
    damp: float = DAMP
    dead_value: float = DEAD_VALUE

    def __post_init__(self):
        def normalize(name, value):
            object.__setattr__(self, name, value)

        normalize("bits", check_bits(self.bits))
        if self.group_size is not None:
            normalize("group_size", check_int(self.group_size, "group_size", minimum=1))
        normalize("symmetric", check_bool(self.symmetric, "symmetric"))
        check_choice(self.grid, "grid", GRIDS)
        normalize("num_ratios", check_int(self.num_ratios, "num_ratios", minimum=1))
        normalize("damp", check_nonnegative(self.damp, "damp"))
        normalize("dead_value", check_positive(self.dead_value, "dead_value"))

    @property
    def qmax(self) -> float:
        """The largest code, ``2^bits − 1``."""
        return float(2**self.bits - 1)

    def group_width(self, d: int) -> int | None:
        """``group_size`` checked against a layer of width ``d`` (``None``: one group per row)."""
        if self.group_size is not None and d % self.group_size:
            raise ValueError(
                f"group_size={self.group_size} must divide the width d={d} of w (its number of "
                "columns), or be None for one group per row"
            )
        return self.group_size


_FIELDS = tuple(field.name for field in dataclasses.fields(Quantizer))


def resolve_quantizer(
    quantizer: Any, legacy: dict[str, Any], method: str, default: Quantizer | None = None
) -> Quantizer:
    """The method's :class:`Quantizer`: ``quantizer``, or one built from deprecated keywords.

    ``legacy`` holds the keywords the method took before the :class:`Quantizer` (``bits=``,
    ``group_size=``, ...); they replace ``default``'s fields (``Quantizer(**legacy)`` without a
    default) and warn. Unknown keywords are a ``TypeError``, as Python's own.
    """
    unknown = sorted(set(legacy) - set(_FIELDS))
    if unknown:
        raise TypeError(f"{method}() got an unexpected keyword argument {unknown[0]!r}")
    if legacy:
        given = ", ".join(f"{k}={v!r}" for k, v in legacy.items())
        if quantizer is not None:
            raise TypeError(
                f"{method}() got both quantizer= and the keywords {given}: put them in the "
                "Quantizer"
            )
        warnings.warn(
            f"{method}(..., {given}) is deprecated: pass quantizer=Quantizer({given})"
            + ("" if default is None else f" (the default is {default!r})"),
            DeprecationWarning,
            stacklevel=3,
        )
        return Quantizer(**legacy) if default is None else dataclasses.replace(default, **legacy)
    if quantizer is None:
        if default is None:
            raise TypeError(f"{method}() needs quantizer=Quantizer(bits=..., ...)")
        return default
    check_instance(quantizer, Quantizer, "quantizer")
    return quantizer
