"""GP training data on padded rows, checked once: inputs, targets, the mask of rows that count."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab._src import validation

__all__ = ["GPData"]


class GPData(NamedTuple):
    """GP training data: ``x`` ``(n, d)`` floating, ``y`` ``(n,)`` in ``x``'s dtype, ``mask``
    ``(n,)`` bool (``True`` for the rows that count; padded rows are ``False``).

    Build it with :meth:`GPData.create`, which checks the three arrays once (as GPJax's
    ``Dataset`` does): shapes that agree, a bool mask selecting at least one row, and finite
    ``x`` and ``y`` at every unmasked row (when concrete; traced data are checked for shape and
    dtype only). The GP and RAMBO functions of :mod:`jaxlab.bo` take ``(x, y, mask)`` and build
    their :class:`GPData` this way. As a NamedTuple it is a pytree: pass it through ``jit``
    and ``vmap`` whole.

    Examples:
      >>> import jax.numpy as jnp
      >>> data = GPData.create(jnp.zeros((3, 2)), jnp.array([1.0, 2.0, 0.0]),
      ...                      jnp.array([True, True, False]))
      >>> data.x.shape, data.y.dtype, int(data.mask.sum())
      ((3, 2), dtype('float32'), 2)
      >>> GPData.create(jnp.zeros((3, 2)), jnp.zeros(2))
      Traceback (most recent call last):
      ...
      ValueError: y must have one entry per row of x (3), got shape (2,)
    """

    x: jax.Array
    y: jax.Array
    mask: jax.Array

    @classmethod
    def create(cls, x, y, mask=None) -> GPData:
        """Checks ``(x, y, mask)`` and returns them as a :class:`GPData` (mask default: all rows).

        Raises:
          ValueError: ``x`` not 2-D floating, ``y`` not 1-D floating or not one entry per row,
            a mask that is not ``(n,)`` bool or selects no row, or (concrete data) a NaN or
            infinite ``x`` or ``y`` at an unmasked row.
        """
        x = validation.check_array(x, "x", kind="floating", ndim=2)
        y = validation.check_array(y, "y", kind="floating", ndim=1)
        n = x.shape[0]
        if y.shape[0] != n:
            raise ValueError(f"y must have one entry per row of x ({n}), got shape {y.shape}")
        mask = jnp.ones(n, bool) if mask is None else jnp.asarray(mask)
        if mask.shape != (n,) or mask.dtype != jnp.bool_:
            raise ValueError(
                f"mask must be a bool array of shape ({n},), got {mask.dtype} {mask.shape}"
            )
        if validation.is_concrete(mask):
            chosen = np.asarray(mask)
            if not chosen.any():
                raise ValueError("mask must select at least one observation, got none")
            for name, value in (("y", y), ("x", x)):
                if validation.is_concrete(value) and not np.all(
                    np.isfinite(np.asarray(value)[chosen])
                ):
                    raise ValueError(
                        f"{name} must be finite at every unmasked observation, got NaN or inf"
                    )
        return cls(x, y.astype(x.dtype), mask)
