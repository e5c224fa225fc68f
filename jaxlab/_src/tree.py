"""The two pytree operations the solvers need beyond ``optax.tree``: a scalar cast per leaf.

``optax.tree.add_scale(x, s, y)`` computes ``x + s y`` with ``s`` as an array, so a float32 step
size (a traced hyperparameter) promotes bfloat16 or float16 leaves to float32. The solvers keep
every leaf's dtype, so these cast the scalar to each leaf's dtype first; all other pytree
arithmetic (``sub``, ``add``, ``norm``, ``where``) is ``optax.tree``'s.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

__all__ = ["add_scale", "convex_combination"]


def add_scale(tree_x: Any, scalar: jax.typing.ArrayLike, tree_y: Any) -> Any:
    """``tree_x + scalar * tree_y`` leaf by leaf, ``scalar`` cast to each leaf's dtype.

    Examples:
      >>> x = {"a": jnp.ones(2, jnp.bfloat16)}
      >>> out = add_scale(x, jnp.float32(0.5), x)
      >>> out["a"].dtype, out["a"].tolist()
      (dtype(bfloat16), [1.5, 1.5])
    """
    return jax.tree.map(lambda a, b: a + jnp.asarray(scalar, b.dtype) * b, tree_x, tree_y)


def convex_combination(weight: jax.typing.ArrayLike, tree_x: Any, tree_y: Any) -> Any:
    """``weight * tree_x + (1 - weight) * tree_y`` leaf by leaf, ``weight`` cast per leaf.

    Examples:
      >>> convex_combination(0.25, jnp.array([4.0]), jnp.array([0.0])).tolist()
      [1.0]
    """
    return jax.tree.map(
        lambda a, b: jnp.asarray(weight, a.dtype) * a + (1 - jnp.asarray(weight, b.dtype)) * b,
        tree_x,
        tree_y,
    )
