"""The shard_map varying-type shim, written once.

Under ``jax.shard_map`` (with its default ``check_vma=True``) every value carries the set of mesh
axes it varies over. A fresh buffer (zeros built inside the mapped function) starts out
invariant; if an update then makes it worker-dependent, a ``lax.scan``/``fori_loop`` carrying it
rejects the change of type. These helpers mark such buffers as varying up front. Under
``jax.vmap`` or outside any mapped computation there are no such types and they change nothing.
"""

from __future__ import annotations

from typing import Any

import jax

__all__ = ["mark_varying", "varying_axes"]


def varying_axes(x: Any) -> frozenset:
    """The mesh axes ``x`` is typed as varying over (empty outside ``shard_map`` and under vmap).

    Examples:
      >>> import jax.numpy as jnp
      >>> varying_axes(jnp.zeros(3))
      frozenset()
    """
    aval = jax.typeof(x)
    manual = getattr(aval, "manual_axis_type", None)  # jax >= 0.10
    if manual is not None:
        return frozenset(manual.varying)
    return frozenset(getattr(aval, "vma", frozenset()))  # earlier jax


def mark_varying(tree: Any, axis_name: Any) -> Any:
    """Marks every leaf of ``tree`` as varying over ``axis_name`` when inside ``shard_map``.

    ``axis_name`` is ``None`` (nothing to do), a name or a tuple of names. Outside the mapped
    computation (the axis is unbound) and under ``jax.vmap`` (the axis index itself is not typed
    as varying) the tree is returned unchanged.

    Examples:
      >>> import jax.numpy as jnp
      >>> mark_varying({"e": jnp.zeros(2)}, "workers")  # outside any mapped context
      {'e': Array([0., 0.], dtype=float32)}
    """
    if axis_name is None:
        return tree
    names = frozenset(axis_name if isinstance(axis_name, tuple) else (axis_name,))
    try:
        index = jax.lax.axis_index(axis_name)
    except NameError:  # outside the mapped computation
        return tree
    if not names <= varying_axes(index):  # under vmap: no varying types to match
        return tree

    def cast(leaf):
        missing = tuple(sorted(names - varying_axes(leaf)))
        return jax.lax.pcast(leaf, missing, to="varying") if missing else leaf

    return jax.tree.map(cast, tree)
