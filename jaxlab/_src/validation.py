"""Argument checks shared by every public entry point: one place, one wording.

Each check accepts a Python number **or** a concrete (non-traced) JAX/NumPy array, and lets a
traced value through unchecked (returning ``None``), so ``optax.inject_hyperparams`` and ``jit``
keep working: a traced hyperparameter is checked where it is a concrete number, at the call
that built it. Strings, ``None``, bools and complex numbers are rejected where a real number is
meant, and so are NaN and infinities; every message names the argument and its allowed range.

Examples:
  >>> check_positive(0.1, "learning_rate")
  0.1
  >>> check_positive(jnp.array(-1.0), "learning_rate")
  Traceback (most recent call last):
  ...
  ValueError: learning_rate must be finite and > 0, got -1.0
  >>> check_int(3, "num_steps", minimum=1)
  3
  >>> check_real("0.1", "eps")
  Traceback (most recent call last):
  ...
  TypeError: eps must be a real number, got str '0.1'
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "check_array",
    "check_axis_bound",
    "check_axis_name",
    "check_bool",
    "check_bootstrap_counts",
    "check_callback_shape",
    "check_distribution",
    "check_finite_array",
    "check_floating_tree",
    "check_in_range",
    "check_indices",
    "check_instance",
    "check_int",
    "check_key",
    "check_last_axis",
    "check_multiplicities",
    "check_learning_rate",
    "check_nonnegative",
    "check_positive",
    "check_positive_int",
    "check_probability",
    "check_real",
    "check_real_array",
    "check_seed",
    "check_shape",
    "check_traceable_int",
    "check_tree_like",
    "concrete_float",
    "count_nonfinite",
    "count_nonfinite_entries",
    "tree_all_finite",
    "nonfinite_count_init",
    "is_concrete",
]


def is_concrete(value: Any) -> bool:
    """Whether ``value`` is not a JAX tracer (a Python value or a concrete array)."""
    return not isinstance(value, jax.core.Tracer)


def _describe(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"


def concrete_float(value: Any, name: str) -> float | None:
    """``float(value)`` for a concrete real scalar, ``None`` for a traced one.

    Rejects (``TypeError``) strings, ``None``, bools, complex numbers, non-numeric objects and
    non-scalar arrays; non-finite values are returned as they are (see :func:`check_real`).

    Examples:
      >>> concrete_float(np.float32(0.5), "tau")
      0.5
      >>> concrete_float(True, "tau")
      Traceback (most recent call last):
      ...
      TypeError: tau must be a real number, got bool True
    """
    if not is_concrete(value):
        return None
    if isinstance(value, bool | np.bool_) or value is None or isinstance(value, str | bytes):
        raise TypeError(f"{name} must be a real number, got {_describe(value)}")
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, numbers.Complex):
        raise TypeError(f"{name} must be a real number, got {_describe(value)}")
    try:
        array = np.asarray(value)
    except Exception as err:  # objects numpy cannot read
        raise TypeError(f"{name} must be a real number, got {_describe(value)}") from err
    if array.dtype == np.bool_ or not (
        np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
    ):
        raise TypeError(f"{name} must be a real number, got {_describe(value)}")
    if array.shape != ():
        raise ValueError(f"{name} must be a scalar, got an array of shape {array.shape}")
    return float(array)


def check_real(
    value: Any,
    name: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    include_minimum: bool = True,
    include_maximum: bool = True,
) -> float | None:
    """Checks a finite real scalar in ``[minimum, maximum]`` (ends open where asked).

    Returns ``float(value)``, or ``None`` for a traced value (left unchecked).

    Examples:
      >>> check_real(0.5, "b1", minimum=0.0, maximum=1.0, include_maximum=False)
      0.5
      >>> check_real(float("nan"), "b1", minimum=0.0)
      Traceback (most recent call last):
      ...
      ValueError: b1 must be finite and >= 0.0, got nan
    """
    number = concrete_float(value, name)
    if number is None:
        return None
    low_ok = minimum is None or (number >= minimum if include_minimum else number > minimum)
    high_ok = maximum is None or (number <= maximum if include_maximum else number < maximum)
    if not (math.isfinite(number) and low_ok and high_ok):
        raise ValueError(
            f"{name} must be {_range_text(minimum, maximum, include_minimum, include_maximum)}"
            f", got {number}"
        )
    return number


def _range_text(minimum, maximum, include_minimum, include_maximum) -> str:
    if minimum is not None and maximum is not None:
        left = "[" if include_minimum else "("
        right = "]" if include_maximum else ")"
        return f"finite and in {left}{minimum}, {maximum}{right}"
    if minimum is not None:
        return f"finite and {'>=' if include_minimum else '>'} {minimum}"
    if maximum is not None:
        return f"finite and {'<=' if include_maximum else '<'} {maximum}"
    return "finite"


def check_positive(value: Any, name: str) -> float | None:
    """A finite real ``> 0`` (``None`` when traced).

    Examples:
      >>> check_positive(0, "eps")
      Traceback (most recent call last):
      ...
      ValueError: eps must be finite and > 0, got 0.0
    """
    number = concrete_float(value, name)
    if number is not None and not (math.isfinite(number) and number > 0):
        raise ValueError(f"{name} must be finite and > 0, got {number}")
    return number


def check_nonnegative(value: Any, name: str) -> float | None:
    """A finite real ``>= 0`` (``None`` when traced).

    Examples:
      >>> check_nonnegative(-1e-3, "weight_decay")
      Traceback (most recent call last):
      ...
      ValueError: weight_decay must be finite and >= 0, got -0.001
    """
    number = concrete_float(value, name)
    if number is not None and not (math.isfinite(number) and number >= 0):
        raise ValueError(f"{name} must be finite and >= 0, got {number}")
    return number


def check_in_range(
    value: Any, name: str, low: float, high: float, *, include_high: bool = False
) -> float | None:
    """A finite real in ``[low, high)`` (``[low, high]`` with ``include_high``).

    Examples:
      >>> check_in_range(1.0, "b1", 0.0, 1.0)
      Traceback (most recent call last):
      ...
      ValueError: b1 must be finite and in [0.0, 1.0), got 1.0
    """
    return check_real(value, name, minimum=low, maximum=high, include_maximum=include_high)


def check_probability(value: Any, name: str) -> float | None:
    """A finite real in ``[0, 1]``.

    Examples:
      >>> check_probability(0.25, "ratio")
      0.25
    """
    return check_real(value, name, minimum=0.0, maximum=1.0)


def check_int(value: Any, name: str, *, minimum: int | None = None, maximum: int | None = None):
    """A static integer in ``[minimum, maximum]``: a Python/NumPy int or a concrete 0-d int array.

    Bools, floats (even ``3.0``), strings and traced values are rejected, since an integer that
    sets a shape or a loop length must be known when the program is traced.

    Examples:
      >>> check_int(np.int64(4), "num_steps", minimum=1)
      4
      >>> check_int(2.0, "num_steps", minimum=1)
      Traceback (most recent call last):
      ...
      TypeError: num_steps must be a (static) int, got float 2.0
    """
    if isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be a (static) int, got {_describe(value)}")
    if isinstance(value, numbers.Integral):
        number = int(value)
    elif (
        is_concrete(value)
        and isinstance(value, jax.Array | np.ndarray)
        and value.shape == ()
        and jnp.issubdtype(value.dtype, jnp.integer)
    ):
        number = int(value)
    else:
        raise TypeError(f"{name} must be a (static) int, got {_describe(value)}")
    if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        if maximum is None:
            bound = f">= {minimum}"
        elif minimum is None:
            bound = f"<= {maximum}"
        else:
            bound = f"in [{minimum}, {maximum}]"
        raise ValueError(f"{name} must be an int {bound}, got {number}")
    return number


def check_static_int(value: Any, name: str, *, default: int, role: str, minimum: int) -> int:
    """A transform's shape- or loop-setting integer: ``None`` (``default``) or a static int.

    ``optax.inject_hyperparams`` injects numeric arguments as traced arrays, so a traced value
    raises a ``TypeError`` that says why the value must be static (``role``) and how to keep it
    static (``static_args``); a concrete one goes through :func:`check_int`.

    Examples:
      >>> check_static_int(None, "delay_steps", default=1, role="sets the FIFO's length",
      ...                  minimum=0)
      1
      >>> jax.jit(lambda d: check_static_int(d, "delay_steps", default=1,
      ...                                    role="sets the FIFO's length", minimum=0))(2)
      Traceback (most recent call last):
      ...
      TypeError: delay_steps sets the FIFO's length, so it must be a static int: leave it ...
    """
    if value is None:
        return default
    if not is_concrete(value):
        raise TypeError(
            f"{name} {role}, so it must be a static int: leave it None ({default}) or list it "
            f"in optax.inject_hyperparams(..., static_args=('{name}',))"
        )
    return check_int(value, name, minimum=minimum)


def check_real_triple(value: Any, name: str) -> None:
    """A sequence ``(a, b, c)`` of three finite real numbers (polynomial coefficients).

    Examples:
      >>> check_real_triple((3.4445, -4.775, 2.0315), "coeffs")
      >>> check_real_triple((1.0, 2.0), "coeffs")
      Traceback (most recent call last):
      ...
      ValueError: coeffs must be (a, b, c), got (1.0, 2.0)
    """
    if isinstance(value, str | bytes) or not hasattr(value, "__len__"):
        raise TypeError(f"{name} must be a sequence (a, b, c) of reals, got {value!r}")
    if len(value) != 3:
        raise ValueError(f"{name} must be (a, b, c), got {value!r}")
    for index, entry in enumerate(value):
        check_real(entry, f"{name}[{index}]")


def check_positive_int(value: Any, name: str) -> int:
    """A static integer ``>= 1``.

    Examples:
      >>> check_positive_int(0, "batch_size")
      Traceback (most recent call last):
      ...
      ValueError: batch_size must be an int >= 1, got 0
    """
    return check_int(value, name, minimum=1)


def check_bool(value: Any, name: str) -> bool:
    """A Python bool (a flag that selects code, so it must be static).

    Examples:
      >>> check_bool(1, "nesterov")
      Traceback (most recent call last):
      ...
      TypeError: nesterov must be a bool, got int 1
    """
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be a bool, got {_describe(value)}")
    return bool(value)


def check_learning_rate(value: Any, name: str = "learning_rate") -> None:
    """A schedule (callable), or a finite real ``>= 0`` (concrete values checked, traced pass).

    Examples:
      >>> check_learning_rate(lambda count: 0.1)
      >>> check_learning_rate(float("inf"))
      Traceback (most recent call last):
      ...
      ValueError: learning_rate must be finite and >= 0, got inf
    """
    if callable(value) and not isinstance(value, jax.Array | np.ndarray):
        return
    try:
        check_nonnegative(value, name)
    except TypeError as err:
        raise TypeError(
            f"{name} must be a number, a scalar array or a schedule, got {_describe(value)}"
        ) from err


def check_seed(value: Any, name: str = "seed") -> None:
    """An integer seed: a Python int or a (possibly traced) integer scalar array.

    ``optax.inject_hyperparams`` passes a transform's integer default as an array, so integer
    arrays are accepted; floats, bools and strings are not.

    Examples:
      >>> check_seed(jnp.asarray(3))
      >>> check_seed(1.5)
      Traceback (most recent call last):
      ...
      TypeError: seed must be an int, got float 1.5
    """
    if isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be an int, got {_describe(value)}")
    if isinstance(value, numbers.Integral):
        return
    if (
        isinstance(value, jax.Array | np.ndarray)
        and value.ndim == 0
        and jnp.issubdtype(value.dtype, jnp.integer)
    ):
        return
    raise TypeError(f"{name} must be an int, got {_describe(value)}")


def check_axis_name(value: Any, name: str = "axis_name") -> None:
    """``None``, a non-empty string, or a non-empty tuple of strings (mesh/vmap axis names).

    Examples:
      >>> check_axis_name(("data", "model"))
      >>> check_axis_name(0)
      Traceback (most recent call last):
      ...
      TypeError: axis_name must be None, a non-empty string or a tuple of them, got int 0
    """
    if value is None or (isinstance(value, str) and value):
        return
    if isinstance(value, tuple) and value and all(isinstance(a, str) and a for a in value):
        return
    raise TypeError(
        f"{name} must be None, a non-empty string or a tuple of them, got {_describe(value)}"
    )


def check_axis_bound(axis_name: Any, name: str = "axis_name") -> None:
    """Checks that the mapped axis ``axis_name`` (or each of a tuple) is bound where this runs.

    Collectives (``pmean``, ``psum``, ``axis_index``) over an axis name need a surrounding
    ``jax.vmap(..., axis_name=...)`` or ``jax.shard_map`` over a mesh with that axis; outside one
    JAX raises a bare ``NameError``. Call this at trace time, before the first collective.
    ``None`` (no mapped axis) passes.

    Examples:
      >>> check_axis_bound(None)
      >>> jax.vmap(lambda x: check_axis_bound("workers") or x, axis_name="workers")(jnp.ones(2))
      Array([1., 1.], dtype=float32)
      >>> check_axis_bound("workers")  # doctest: +ELLIPSIS
      Traceback (most recent call last):
      ...
      ValueError: axis_name 'workers' is not bound here: run this inside jax.vmap(..., \
axis_name='workers') or jax.shard_map over a mesh with that axis, or pass axis_name=None ...
    """
    if axis_name is None:
        return
    check_axis_name(axis_name, name)
    for axis in (axis_name,) if isinstance(axis_name, str) else axis_name:
        try:
            jax.lax.axis_size(axis)
        except NameError as err:
            raise ValueError(
                f"{name} {axis!r} is not bound here: run this inside jax.vmap(..., "
                f"axis_name={axis!r}) or jax.shard_map over a mesh with that axis, or pass "
                f"{name}=None for a single, unmapped run"
            ) from err


def check_real_array(
    value: Any,
    name: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    include_minimum: bool = True,
    include_maximum: bool = True,
) -> np.ndarray | None:
    """Checks that every entry of a real scalar or array is finite and in ``[minimum, maximum]``.

    The array form of :func:`check_real` (e.g. one value per worker). Returns the value as a
    float64 NumPy array, or ``None`` when it is traced (left unchecked). Strings, ``None``, bools
    and complex values are rejected with a ``TypeError``.

    Examples:
      >>> check_real_array([1.0, 2.0], "smoothness", minimum=0.0, include_minimum=False)
      array([1., 2.])
      >>> check_real_array(jnp.array([0.5, 1.5]), "alpha", minimum=0.0, maximum=1.0)
      Traceback (most recent call last):
      ...
      ValueError: alpha must be finite and in [0.0, 1.0] entrywise, got [0.5, 1.5]
    """
    if not is_concrete(value):
        return None
    leaves = jax.tree.leaves(value) if isinstance(value, list | tuple) else [value]
    if value is None or any(
        isinstance(v, bool | np.bool_ | str | bytes) or v is None for v in leaves
    ):
        raise TypeError(f"{name} must be a real number or array, got {_describe(value)}")
    if not all(is_concrete(v) for v in leaves):
        return None
    try:
        array = np.asarray(value)
    except Exception as err:  # ragged lists, objects numpy cannot read
        raise TypeError(f"{name} must be a real number or array, got {_describe(value)}") from err
    if not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)):
        raise TypeError(f"{name} must be a real number or array, got {_describe(value)}")
    array = array.astype(np.float64)
    ok = np.isfinite(array)
    if minimum is not None:
        ok &= array >= minimum if include_minimum else array > minimum
    if maximum is not None:
        ok &= array <= maximum if include_maximum else array < maximum
    if not np.all(ok):
        shown = array.tolist()
        raise ValueError(
            f"{name} must be {_range_text(minimum, maximum, include_minimum, include_maximum)}"
            f"{' entrywise' if array.ndim else ''}, got {shown}"
        )
    return array


def _leaf_dtype(leaf: Any):
    return getattr(leaf, "dtype", None) or np.asarray(leaf).dtype


def check_floating_tree(tree: Any, name: str = "params") -> None:
    """Every leaf of ``tree`` is a floating-point array (a traced or abstract leaf included).

    Integer or bool params would silently truncate buffers built like them (an error-feedback
    residual of 0.5 stored as 0), so transforms check this in ``init``.

    Examples:
      >>> check_floating_tree({"w": jnp.zeros(3)})
      >>> check_floating_tree({"w": jnp.zeros(3, jnp.int32)})
      Traceback (most recent call last):
      ...
      TypeError: params['w'] must have a floating dtype, got int32
    """
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
        dtype = _leaf_dtype(leaf)
        if not jnp.issubdtype(dtype, jnp.floating):
            raise TypeError(
                f"{name}{jax.tree_util.keystr(path)} must have a floating dtype, got {dtype}"
            )


def check_tree_like(
    tree: Any, reference: Any, name: str = "updates", reference_name: str = "the state"
) -> None:
    """``tree`` has ``reference``'s structure and, leaf by leaf, its shape and a floating dtype.

    Checked on shapes and dtypes only, so it works on traced leaves too (inside ``jit``) and
    costs nothing at run time. Messages name the leaf's path.

    Examples:
      >>> state = {"w": jnp.zeros(5)}
      >>> check_tree_like({"w": jnp.ones(5)}, state)
      >>> check_tree_like({"w": jnp.ones((3, 5))}, state)
      Traceback (most recent call last):
      ...
      ValueError: updates['w'] has shape (3, 5), but the state's leaf has shape (5,)
    """
    leaves, treedef = jax.tree_util.tree_flatten_with_path(tree)
    ref_leaves, ref_treedef = jax.tree_util.tree_flatten(reference)
    if treedef != ref_treedef:
        raise ValueError(
            f"{name} must have the same tree structure as {reference_name}: got {treedef}, "
            f"expected {ref_treedef}"
        )
    for (path, leaf), ref in zip(leaves, ref_leaves, strict=True):
        where = f"{name}{jax.tree_util.keystr(path)}"
        shape, ref_shape = tuple(np.shape(leaf)), tuple(np.shape(ref))
        if shape != ref_shape:
            raise ValueError(
                f"{where} has shape {shape}, but {reference_name}'s leaf has shape {ref_shape}"
            )
        dtype = _leaf_dtype(leaf)
        if not jnp.issubdtype(dtype, jnp.floating):
            raise TypeError(f"{where} must have a floating dtype, got {dtype}")


def check_key(value: Any, name: str = "rng_key") -> None:
    """A JAX PRNG key: a typed ``jax.random.key`` or a raw ``uint32[2]`` key (possibly traced).

    Examples:
      >>> check_key(jax.random.key(0))
      >>> check_key(None)
      Traceback (most recent call last):
      ...
      TypeError: rng_key must be a JAX PRNG key (jax.random.key(seed)), got NoneType None
    """
    dtype = getattr(value, "dtype", None)
    if dtype is not None and jnp.issubdtype(dtype, jax.dtypes.prng_key):
        return
    if dtype == jnp.uint32 and tuple(np.shape(value))[-1:] == (2,):
        return
    raise TypeError(f"{name} must be a JAX PRNG key (jax.random.key(seed)), got {_describe(value)}")


def check_instance(value: Any, cls: type, name: str, origin: str | None = None) -> None:
    """``value`` is a ``cls`` (a state or posterior NamedTuple, a config dataclass).

    Examples:
      >>> from typing import NamedTuple
      >>> class State(NamedTuple):
      ...     count: int
      >>> check_instance((1, 2), State, "state", "built by init")
      Traceback (most recent call last):
      ...
      TypeError: state must be a State (built by init), got tuple
    """
    if not isinstance(value, cls):
        where = f" ({origin})" if origin else ""
        raise TypeError(f"{name} must be a {cls.__name__}{where}, got {type(value).__name__}")


def check_traceable_int(
    value: Any, name: str, *, minimum: int | None = None, maximum: int | None = None
) -> int | None:
    """An integer that only enters arithmetic (a frequency, a period): static or traced.

    ``optax.inject_hyperparams`` injects a transform's integer defaults as int32 arrays, traced
    under ``jit``, so an integer that never sets a shape or a Python loop accepts a traced
    integer scalar (left unchecked, ``None`` returned). Concrete values (Python/NumPy ints,
    concrete integer scalar arrays) are range-checked and returned as ``int``. Bools, floats
    (even ``3.0``), strings and non-scalar arrays are rejected. An integer that sets a shape
    belongs in :func:`check_int` instead.

    Examples:
      >>> check_traceable_int(jnp.asarray(10), "precondition_frequency", minimum=1)
      10
      >>> jax.jit(lambda f: check_traceable_int(f, "precondition_frequency") or f)(3)
      Array(3, dtype=int32, weak_type=True)
      >>> check_traceable_int(0, "precondition_frequency", minimum=1)
      Traceback (most recent call last):
      ...
      ValueError: precondition_frequency must be an int >= 1, got 0
      >>> check_traceable_int(2.0, "precondition_frequency")
      Traceback (most recent call last):
      ...
      TypeError: precondition_frequency must be an int or an integer scalar array, got float 2.0
    """
    if isinstance(value, bool | np.bool_) or not (
        isinstance(value, numbers.Integral)
        or (
            isinstance(value, jax.Array | np.ndarray)
            and value.ndim == 0
            and jnp.issubdtype(value.dtype, jnp.integer)
        )
    ):
        raise TypeError(f"{name} must be an int or an integer scalar array, got {_describe(value)}")
    if not is_concrete(value):
        return None
    return check_int(value, name, minimum=minimum, maximum=maximum)


def count_nonfinite(counter: Any, tree: Any, *, also: Any = True) -> jax.Array:
    """``counter + 1`` when any leaf of ``tree`` has a NaN or infinite entry, else ``counter``.

    ``also`` is a bool the caller already knows (False: count this call as well, e.g. a NaN
    met by a reduction the transform computes anyway).

    The status counter of rule 2 (traced values cannot be checked in Python): a transform keeps
    an int32 ``nonfinite_count`` in its state and advances it with this on every call, so a
    user can read how many calls received a non-finite gradient (as ``optax.apply_if_finite``
    counts). It saturates at the int32 maximum instead of wrapping.

    Examples:
      >>> count_nonfinite(jnp.zeros([], jnp.int32), {"w": jnp.array([1.0, jnp.nan])})
      Array(1, dtype=int32)
      >>> count_nonfinite(jnp.ones([], jnp.int32), {"w": jnp.ones(2)})
      Array(1, dtype=int32)
    """
    counter = jnp.asarray(counter)
    finite = tree_all_finite(tree) & jnp.asarray(also)
    saturated = counter == jnp.iinfo(counter.dtype).max
    return jnp.where(finite | saturated, counter, counter + jnp.ones_like(counter))


def count_nonfinite_entries(x: Any) -> jax.Array:
    """The number of NaN or infinite entries of an array (int32; traceable).

    Integer and boolean arrays have none. The documented count a function returns for traced
    input, where :func:`check_finite_array` cannot look at the values.

    Examples:
      >>> count_nonfinite_entries(jnp.array([1.0, jnp.nan, -jnp.inf]))
      Array(2, dtype=int32)
      >>> count_nonfinite_entries(jnp.arange(3))
      Array(0, dtype=int32)
    """
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        return jnp.zeros([], jnp.int32)
    return jnp.sum(~jnp.isfinite(x), dtype=jnp.int32)


def check_finite_array(value: Any, name: str, *, reason: str = "") -> None:
    """A concrete array holds no NaN or infinite entry (``ValueError`` naming it and the count).

    A traced array is let through unchecked: callers that accept traced input document what
    a non-finite entry does there, or return :func:`count_nonfinite_entries`. ``reason``, when
    given, says why the function cannot take such an entry.

    Examples:
      >>> check_finite_array(jnp.ones(3), "w")
      >>> check_finite_array(jnp.array([0.5, jnp.nan]), "w", reason="it has no integer code")
      Traceback (most recent call last):
      ...
      ValueError: w must be finite: 1 of its 2 entries are NaN/inf (it has no integer code)
    """
    if not is_concrete(value):
        return
    # On the host: inside a jit trace, a JAX op on a concrete (closed-over) array is traced too.
    array = np.asarray(value)
    if not np.issubdtype(array.dtype, np.inexact):
        return
    finite = np.isfinite(array)
    if finite.all():
        return
    bad = int(array.size - np.count_nonzero(finite))
    why = f" ({reason})" if reason else ""
    raise ValueError(f"{name} must be finite: {bad} of its {array.size} entries are NaN/inf{why}")


def tree_all_finite(tree: Any) -> jax.Array:
    """Whether every entry of every floating leaf of ``tree`` is finite (a bool scalar).

    Integer, boolean and key leaves count as finite. One cheap sum per leaf (see
    :func:`_leaf_finite`), the check :func:`count_nonfinite` and the solvers' status use.

    Examples:
      >>> tree_all_finite({"w": jnp.array([1.0, jnp.inf]), "n": jnp.arange(3)})
      Array(False, dtype=bool)
    """
    leaves = [jnp.asarray(leaf) for leaf in jax.tree.leaves(tree)]
    leaves = [leaf for leaf in leaves if jnp.issubdtype(leaf.dtype, jnp.inexact) and leaf.size]
    if not leaves:
        return jnp.asarray(True)
    return jnp.all(jnp.stack([_leaf_finite(leaf) for leaf in leaves]))


def _leaf_finite(leaf: jax.Array) -> jax.Array:
    """Whether every entry is finite: ``sum(x - x)`` is 0, or NaN if some entry is NaN or ±inf.

    One plain sum, which fuses with an elementwise producer on XLA:CPU (no overflow: the terms
    are zeros); ``jnp.all(jnp.isfinite(x))`` materialises a boolean array and reduces it by a
    cascade of windows, several times slower on a large leaf.
    """
    return jnp.isfinite(jnp.sum(leaf - leaf))


def check_last_axis(x: Any, size: int, name: str, size_name: str | None = None) -> None:
    """``x`` has at least one axis and a last axis of ``size`` entries.

    Checked on the shape only, so it works on traced arrays too; call it before a matrix
    product so a mismatch names the argument instead of surfacing as a ``dot_general`` error.

    Examples:
      >>> check_last_axis(jnp.zeros((4, 3)), 3, "x")
      >>> check_last_axis(jnp.zeros((4, 2)), 3, "x", "in_features")
      Traceback (most recent call last):
      ...
      ValueError: x must have last axis of size in_features=3, got shape (4, 2)
    """
    shape = tuple(np.shape(x))
    if not shape or shape[-1] != size:
        what = f"{size_name}={size}" if size_name else f"{size}"
        raise ValueError(f"{name} must have last axis of size {what}, got shape {shape}")


_ARRAY_KINDS = {
    "floating": ("a floating array", lambda dtype: jnp.issubdtype(dtype, jnp.floating)),
    "integer": ("an array of integers", lambda dtype: jnp.issubdtype(dtype, jnp.integer)),
    "real": (
        "a real (integer or floating) array",
        lambda dtype: jnp.issubdtype(dtype, jnp.integer) or jnp.issubdtype(dtype, jnp.floating),
    ),
}


def check_array(
    value: Any, name: str, *, kind: str = "real", ndim: int | None = None, host: bool = False
) -> Any:
    """``value`` as an array of ``kind`` (``"floating"``, ``"integer"`` or ``"real"``).

    Strings, ``None`` and objects that do not convert raise a ``TypeError`` naming the argument
    (not an error from inside ``jnp.asarray``); so do bool and complex dtypes, and integers where
    floats are meant (a float layer run on integers would cast its weights to integers). With
    ``ndim``, the number of axes is checked too (``ValueError``). Returns a ``jax.Array``
    (traced values pass through), or with ``host=True`` a NumPy array (float64 kept, for
    functions that compute on the host).

    Examples:
      >>> check_array([1.0, 2.0], "x", kind="floating").dtype
      dtype('float32')
      >>> check_array(jnp.zeros(3, jnp.int32), "x", kind="floating")
      Traceback (most recent call last):
      ...
      TypeError: x must be a floating array, got dtype int32
      >>> check_array("abc", "tokens", kind="integer")
      Traceback (most recent call last):
      ...
      TypeError: tokens must be an array of integers, got str 'abc'
    """
    what, accepts = _ARRAY_KINDS[kind]
    if value is None or isinstance(value, str | bytes):
        raise TypeError(f"{name} must be {what}, got {_describe(value)}")
    try:
        array = np.asarray(value) if host else jnp.asarray(value)
    except Exception as err:  # ragged lists, objects the array libraries cannot read
        raise TypeError(f"{name} must be {what}, got {_describe(value)}") from err
    if not accepts(array.dtype):
        raise TypeError(f"{name} must be {what}, got dtype {array.dtype}")
    if ndim is not None and array.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} axes, got shape {array.shape}")
    return array


def check_indices(value: Any, name: str, size: int, size_name: str = "size") -> None:
    """Integer entries of a concrete ``value`` lie in ``[0, size)`` (tokens, labels, experts).

    A traced value is left unchecked (a negative index would wrap and a too-large one reads
    NaN or a clamped row, depending on the op): callers document what a traced one does.

    Examples:
      >>> check_indices(jnp.array([0, 3]), "tokens", 4, "vocab_size")
      >>> check_indices(jnp.array([-1, 4]), "tokens", 4, "vocab_size")
      Traceback (most recent call last):
      ...
      ValueError: tokens must lie in [0, vocab_size=4), got values in [-1, 4]
    """
    if not is_concrete(value):
        return
    values = np.asarray(value)
    if not np.issubdtype(values.dtype, np.integer):
        raise TypeError(f"{name} must be an array of integers, got dtype {values.dtype}")
    if values.size == 0:
        return
    low, high = int(values.min()), int(values.max())
    if low < 0 or high >= size:
        raise ValueError(
            f"{name} must lie in [0, {size_name}={size}), got values in [{low}, {high}]"
        )


def nonfinite_count_init(tree: Any) -> jax.Array:
    """The int32 zero that starts a ``nonfinite_count``, typed like ``tree``'s first leaf.

    :func:`count_nonfinite` reduces over the gradient's leaves, so under ``shard_map`` its result
    varies over the manual axes the leaves vary over; ``zeros_like`` of a params leaf starts the
    counter with that same type, so the state is a valid scan/while carry.

    Examples:
      >>> nonfinite_count_init({"w": jnp.ones(3)})
      Array(0, dtype=int32)
    """
    leaves = jax.tree.leaves(tree)
    if not leaves:
        return jnp.zeros([], jnp.int32)
    return jnp.zeros_like(leaves[0], dtype=jnp.int32, shape=())


def check_bootstrap_counts(value: Any, num_samples: int, name: str = "multiplicities") -> None:
    """Concrete bootstrap counts ``(M, N)``: finite whole numbers ``>= 0``, each row summing to N.

    Row ``m`` counts how often each of the ``N`` samples is drawn into resample ``m``, so a row
    that sums to anything else, or a negative or fractional count, is not a bootstrap resample
    (a bound built on it can fall below the sample mean). A traced value is left unchecked.

    Examples:
      >>> check_bootstrap_counts(np.array([[2, 0], [1, 1]]), 2)
      >>> check_bootstrap_counts(np.array([[2, 1], [1, 1]]), 2)
      Traceback (most recent call last):
      ...
      ValueError: multiplicities must be bootstrap counts: every row must sum to N = 2, got row ...
    """
    if not is_concrete(value):
        return
    v = np.asarray(value, np.float64)
    if v.ndim != 2 or v.shape[1] != num_samples or v.shape[0] == 0:
        raise ValueError(
            f"{name} must have shape (M, N) with M >= 1 and N = {num_samples}, got {v.shape}"
        )
    finite = np.isfinite(v)
    if not np.all(finite):
        raise ValueError(f"{name} must be finite, got {int(np.sum(~finite))} non-finite entries")
    if np.any(v < 0):
        raise ValueError(f"{name} must be counts >= 0, got a minimum of {v.min()}")
    if np.any(v != np.round(v)):
        raise ValueError(f"{name} must be whole-number counts, got fractional entries")
    sums = v.sum(axis=1)
    bad = np.flatnonzero(sums != num_samples)
    if bad.size:
        raise ValueError(
            f"{name} must be bootstrap counts: every row must sum to N = {num_samples}, got row "
            f"{bad[0]} summing to {sums[bad[0]]}"
        )


def check_multiplicities(value: Any, num_samples: int, name: str = "multiplicities") -> np.ndarray:
    """A concrete bootstrap matrix ``(M, N)`` of counts, as float64 on the host.

    For the host-side bootstrap LPs (``jaxlab.stochprog``, ``jaxlab.solvers.LShaped``):
    ``N = num_samples`` columns, at least one row, whole counts ``>= 0`` summing to ``N`` per row
    (:func:`check_bootstrap_counts`).

    Examples:
      >>> check_multiplicities([[2, 0], [1, 1]], 2).tolist()
      [[2.0, 0.0], [1.0, 1.0]]
      >>> check_multiplicities([[1, 1, 1]], 2)
      Traceback (most recent call last):
      ...
      ValueError: multiplicities must have shape (M, N) with M >= 1 and N = 2, got (1, 3)
    """
    v = check_array(value, name, kind="real", ndim=2, host=True)
    check_bootstrap_counts(v, num_samples, name)
    return v.astype(np.float64)


def check_distribution(value: Any, name: str, *, atol: float = 1e-3) -> None:
    """Concrete probabilities over the last axis: finite, in ``[0, 1]``, each row summing to 1.

    ``atol`` is the slack on the sum (float32 softmax outputs sum to 1 within 1e-6; 1e-3 also
    admits probabilities rounded to three decimals). A traced value is left unchecked.

    Examples:
      >>> check_distribution(np.array([0.5, 0.5]), "probs")
      >>> check_distribution(np.array([1.0, 1.0]), "probabilities")
      Traceback (most recent call last):
      ...
      ValueError: probabilities must sum to 1 over the last axis (within 0.001), got sums in ...
    """
    if not is_concrete(value):
        return
    p = np.asarray(value, np.float64)
    if not np.all(np.isfinite(p)):
        bad = int(np.sum(~np.isfinite(p)))
        raise ValueError(f"{name} must be finite probabilities, got {bad} non-finite entries")
    if p.size and (p.min() < 0 or p.max() > 1):
        raise ValueError(f"{name} must lie in [0, 1], got values in [{p.min()}, {p.max()}]")
    sums = p.sum(axis=-1) if p.ndim else p
    if np.size(sums) and np.any(np.abs(sums - 1.0) > atol):
        raise ValueError(
            f"{name} must sum to 1 over the last axis (within {atol:g}), got sums in "
            f"[{np.min(sums)}, {np.max(sums)}]"
        )


def check_shape(value: Any, name: str = "shape") -> tuple[int, ...]:
    """An array shape: an int ``>= 0`` or a sequence of them, returned as a tuple.

    Examples:
      >>> check_shape((3, 2))
      (3, 2)
      >>> check_shape((-1,))
      Traceback (most recent call last):
      ...
      ValueError: shape must hold ints >= 0, got (-1,)
    """
    dims = (value,) if isinstance(value, numbers.Integral) else value
    if isinstance(dims, str | bytes) or not isinstance(dims, tuple | list):
        raise TypeError(f"{name} must be an int or a tuple of ints, got {_describe(value)}")
    out = []
    for d in dims:
        if isinstance(d, bool | np.bool_) or not isinstance(d, numbers.Integral):
            raise TypeError(f"{name} must hold ints, got {_describe(value)}")
        out.append(int(d))
    if any(d < 0 for d in out):
        raise ValueError(f"{name} must hold ints >= 0, got {tuple(out)}")
    return tuple(out)


def check_callback_shape(out: Any, shape: tuple[int, ...], name: str, what: str) -> None:
    """A user callback's output (an array or ``ShapeDtypeStruct``) has ``shape``.

    Checked on the shape only, so it works on traced outputs and on ``jax.eval_shape``'s.

    Examples:
      >>> check_callback_shape(jnp.zeros(3), (2,), "velocity_fn", "shaped like x")
      Traceback (most recent call last):
      ...
      ValueError: velocity_fn must return an array shaped like x (2,), got shape (3,)
    """
    got = getattr(out, "shape", None)
    if got is None or tuple(got) != tuple(shape):
        described = f"shape {tuple(got)}" if got is not None else _describe(out)
        raise ValueError(f"{name} must return an array {what} {tuple(shape)}, got {described}")


def check_named_tuple(value: Any, cls: type, name: str) -> None:
    """``value`` is an instance of the NamedTuple ``cls`` (a plain tuple is not: its fields
    would be read by position and misread silently, or fail later as an ``AttributeError``).

    Examples:
      >>> from typing import NamedTuple
      >>> class Pair(NamedTuple):
      ...     a: float
      ...     b: float
      >>> check_named_tuple(Pair(1.0, 2.0), Pair, "pair")
      >>> check_named_tuple((1.0, 2.0), Pair, "pair")
      Traceback (most recent call last):
      ...
      TypeError: pair must be a Pair(a, b), got tuple (1.0, 2.0); wrap plain values as Pair(*pair)
    """
    if not isinstance(value, cls):
        fields = ", ".join(cls._fields)
        got = f"{type(value).__name__} {value!r}" if isinstance(value, tuple) else _describe(value)
        raise TypeError(
            f"{name} must be a {cls.__name__}({fields}), got {got}; wrap plain values as "
            f"{cls.__name__}(*{name})"
        )


def check_progress(value: Any, name: str = "progress") -> None:
    """``value`` is ``None`` or a progress reporter with a callable ``track(iterable, total,
    description)`` (``jaxlab._src.experiments.NullProgress`` or the CLI's bar).

    Examples:
      >>> check_progress(None)
      >>> check_progress(5)
      Traceback (most recent call last):
      ...
      TypeError: progress must be None or a progress reporter with a track(iterable, ...
    """
    if value is not None and not callable(getattr(value, "track", None)):
        raise TypeError(
            f"{name} must be None or a progress reporter with a track(iterable, total, "
            f"description) method (e.g. NullProgress()), got {_describe(value)}"
        )


def check_callable(
    value: Any, name: str, *, signature: str | None = None, allow_none: bool = False
) -> Any:
    """A callable (or ``None`` with ``allow_none``); ``signature`` says how it will be called.

    Examples:
      >>> check_callable(len, "size_fn") is len
      True
      >>> check_callable(None, "callback", allow_none=True) is None
      True
      >>> check_callable(3, "callback", allow_none=True)
      Traceback (most recent call last):
      ...
      TypeError: callback must be None or callable, got int 3
      >>> check_callable("f", "loss_fn", signature="loss_fn(params, batch) -> scalar")
      Traceback (most recent call last):
      ...
      TypeError: loss_fn must be callable as loss_fn(params, batch) -> scalar, got str 'f'
    """
    if value is None and allow_none:
        return None
    if not callable(value):
        how = f" as {signature}" if signature else ""
        alternative = "None or " if allow_none else ""
        raise TypeError(f"{name} must be {alternative}callable{how}, got {_describe(value)}")
    return value


def check_choice(value: Any, name: str, choices: Any, *, alternative: str | None = None) -> Any:
    """One of the static options ``choices`` (a tuple, or a mapping's keys); returns ``value``.

    ``alternative`` names what else the caller accepts (checked by the caller), for the message.

    Examples:
      >>> check_choice("cvar", "kind", ("cvar", "chi2"))
      'cvar'
      >>> check_choice("kl", "kind", ("cvar", "chi2"))
      Traceback (most recent call last):
      ...
      ValueError: kind must be one of ('cvar', 'chi2'), got 'kl'
      >>> check_choice("rk4", "method", ("euler",), alternative="a diffrax solver")
      Traceback (most recent call last):
      ...
      ValueError: method must be one of ('euler',) or a diffrax solver, got 'rk4'
    """
    options = tuple(choices)
    try:
        known = value in options
    except (TypeError, ValueError):  # unhashable, or an array's ambiguous truth: no option
        known = False
    if not known:
        other = f" or {alternative}" if alternative else ""
        raise ValueError(f"{name} must be one of {options}{other}, got {value!r}")
    return value


def check_mesh_axis(
    mesh: Any, axis_name: Any, *, name: str = "mesh", axis_arg: str = "axis_name"
) -> int:
    """``mesh`` is a ``jax.sharding.Mesh`` and ``axis_name`` (a non-empty string) one of its
    axes; returns that axis' size.

    Examples:
      >>> mesh = jax.make_mesh((1,), ("data",))
      >>> check_mesh_axis(mesh, "data")
      1
      >>> check_mesh_axis(mesh, "model")
      Traceback (most recent call last):
      ...
      ValueError: axis_name 'model' is not an axis of mesh ('data',)
      >>> check_mesh_axis("mesh", "data")
      Traceback (most recent call last):
      ...
      TypeError: mesh must be a jax.sharding.Mesh, got str
    """
    if not isinstance(mesh, jax.sharding.Mesh):
        raise TypeError(f"{name} must be a jax.sharding.Mesh, got {type(mesh).__name__}")
    if not isinstance(axis_name, str) or not axis_name:
        raise TypeError(f"{axis_arg} must be a non-empty string, got {axis_name!r}")
    if axis_name not in mesh.axis_names:
        raise ValueError(f"{axis_arg} {axis_name!r} is not an axis of {name} {mesh.axis_names}")
    return int(mesh.shape[axis_name])


def check_gp_hyperparameters(params: Any, dim: int, name: str = "params") -> None:
    """The fields of a GP hyper-parameter NamedTuple ``(signal_std, lengthscale, noise_std)``.

    Concrete fields are finite, ``signal_std`` and ``lengthscale`` ``> 0`` and ``noise_std``
    ``>= 0`` (a negative one would be squared into a plausible variance and pass unnoticed);
    ``lengthscale`` is a scalar or one entry per input dimension (checked on the shape, so traced
    values are checked too).

    Examples:
      >>> from typing import NamedTuple
      >>> class P(NamedTuple):
      ...     signal_std: float
      ...     lengthscale: Any
      ...     noise_std: float
      >>> check_gp_hyperparameters(P(1.0, [0.5, 0.5], 0.1), 2)
      >>> check_gp_hyperparameters(P(1.0, 0.5, -0.1), 2)
      Traceback (most recent call last):
      ...
      ValueError: params.noise_std must be finite and >= 0.0, got -0.1
    """
    for field in ("signal_std", "lengthscale"):
        value = getattr(params, field)
        check_real_array(value, f"{name}.{field}", minimum=0.0, include_minimum=False)
    check_real_array(params.noise_std, f"{name}.noise_std", minimum=0.0)
    shape = tuple(np.shape(params.lengthscale))
    if len(shape) > 1 or (shape and shape[0] not in (1, dim)):
        raise ValueError(
            f"{name}.lengthscale must be a scalar or have one entry per input dimension "
            f"({dim},), got shape {shape}"
        )


def check_broadcastable(arrays: dict[str, Any]) -> None:
    """Real arrays (named by the keys) whose shapes broadcast together, checked on shapes only.

    Strings, ``None`` and non-numeric values raise a ``TypeError`` naming the argument; shapes
    that do not broadcast raise a ``ValueError`` naming every argument and its shape (instead of
    a JAX broadcasting error from inside the arithmetic).

    Examples:
      >>> check_broadcastable({"mean": jnp.zeros(3), "std": jnp.ones(3), "best": 0.0})
      >>> check_broadcastable({"mean": jnp.zeros(3), "std": jnp.ones(2)})
      Traceback (most recent call last):
      ...
      ValueError: mean and std must have shapes that broadcast together, got mean (3,), std (2,)
    """
    shapes = {}
    for name, value in arrays.items():
        if value is None or isinstance(value, str | bytes):
            raise TypeError(f"{name} must be a real number or array, got {_describe(value)}")
        shapes[name] = tuple(np.shape(value))
    try:
        np.broadcast_shapes(*shapes.values())
    except ValueError:
        names = " and ".join([", ".join(list(shapes)[:-1]), list(shapes)[-1]])
        got = ", ".join(f"{n} {s}" for n, s in shapes.items())
        raise ValueError(f"{names} must have shapes that broadcast together, got {got}") from None


def check_scalar_callback(fn: Any, name: str, *args: Any) -> None:
    """``fn`` is callable and, traced abstractly on ``args``, returns one real scalar.

    Run once at entry with :func:`jax.eval_shape` (no compilation, no FLOPs), so a callback that
    returns a vector or a string is named here rather than failing as "gradient only defined for
    scalar-output functions" several calls deep.

    Examples:
      >>> check_scalar_callback(lambda v: jnp.sum(v), "objective", jnp.ones(3))
      >>> check_scalar_callback(lambda v: v, "objective", jnp.ones(3))
      Traceback (most recent call last):
      ...
      ValueError: objective must return one real scalar, got shape (3,)
    """
    if not callable(fn):
        raise TypeError(f"{name} must be callable, got {_describe(fn)}")
    out = jax.eval_shape(fn, *args)
    shape = getattr(out, "shape", None)
    dtype = getattr(out, "dtype", None)
    if shape is None or dtype is None:
        raise TypeError(f"{name} must return one real scalar, got {_describe(out)}")
    if tuple(shape) not in ((), (1,)):
        raise ValueError(f"{name} must return one real scalar, got shape {tuple(shape)}")
    if not (jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer)):
        raise TypeError(f"{name} must return one real scalar, got dtype {dtype}")


def check_int_sequence(value: Any, name: str, *, minimum: int = 1) -> tuple[int, ...]:
    """A list or tuple of ints ``>= minimum`` (layer sizes), returned as a tuple.

    Examples:
      >>> check_int_sequence([4, 3], "sizes")
      (4, 3)
      >>> check_int_sequence(4, "sizes")
      Traceback (most recent call last):
      ...
      TypeError: sizes must be a list or tuple of ints, got int 4
    """
    if not isinstance(value, list | tuple):
        raise TypeError(f"{name} must be a list or tuple of ints, got {_describe(value)}")
    return tuple(check_int(v, f"{name}[{i}]", minimum=minimum) for i, v in enumerate(value))


def check_permutation(value: Any, size: int, name: str) -> None:
    """A concrete ``value`` of shape ``(size,)`` holding each of ``0 .. size-1`` once.

    Examples:
      >>> check_permutation(np.array([2, 0, 1]), 3, "order")
      >>> check_permutation(np.array([0, 0, 1]), 3, "order")
      Traceback (most recent call last):
      ...
      ValueError: order must be a permutation of 0..2, got [0, 0, 1]
    """
    if not is_concrete(value):
        return
    v = np.asarray(value)
    if v.shape != (size,):
        raise ValueError(f"{name} must have shape ({size},), got {v.shape}")
    if not np.issubdtype(v.dtype, np.integer):
        raise TypeError(f"{name} must be an array of integers, got dtype {v.dtype}")
    if not np.array_equal(np.sort(v), np.arange(size)):
        shown = v.tolist() if size <= 10 else f"{v[:10].tolist()}..."
        raise ValueError(f"{name} must be a permutation of 0..{size - 1}, got {shown}")


def check_weighting_matrix(value: Any, name: str) -> None:
    """A concrete square weighting matrix (a Hessian, a Gram or Schur-complement metric) that
    can be positive semidefinite: finite, with a diagonal ``>= 0``.

    The diagonal test is the cheap necessary condition (``e_iᵀ M e_i = M_ii``), kept O(n) so it
    runs on every call even for 4096-wide layers; a NaN/inf entry, or a negative diagonal (a
    sign-flipped or wrongly assembled matrix), would otherwise give a finite but meaningless
    (even negative) weighted error. A traced value is left unchecked.

    Examples:
      >>> check_weighting_matrix(np.eye(3), "h")
      >>> check_weighting_matrix(-np.eye(3), "h")
      Traceback (most recent call last):
      ...
      ValueError: h must be a PSD weighting: its diagonal must be >= 0, got a minimum of -1.0
    """
    if not is_concrete(value):
        return
    m = np.asarray(value)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {m.shape}")
    check_finite_array(m, name)
    low = float(np.min(np.diagonal(m))) if m.size else 0.0
    if low < 0:
        raise ValueError(
            f"{name} must be a PSD weighting: its diagonal must be >= 0, got a minimum of {low}"
        )


def check_symmetric(value: Any, name: str, *, rtol: float = 1e-5) -> None:
    """A concrete square matrix equal to its transpose up to ``rtol`` of its largest entry.

    Solvers that read only one triangle, or take ``½xᵀMx`` as the quadratic, otherwise answer a
    different problem without a word (a non-symmetric ``P`` or Gram). A traced value is left
    unchecked; the check runs on the host.

    Examples:
      >>> check_symmetric(np.eye(2), "P")
      >>> check_symmetric(np.array([[1.0, 2.0], [0.0, 1.0]]), "P")
      Traceback (most recent call last):
      ...
      ValueError: P must be symmetric: |P - Pᵀ| = 2 at (0, 1) > 1e-05 max|P|
    """
    if not is_concrete(value):
        return
    m = np.asarray(value)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {m.shape}")
    if m.size == 0 or not np.all(np.isfinite(m)):
        return  # the finiteness check, where a caller has one, names NaN/inf
    gap = np.abs(m - m.T)
    limit = rtol * float(np.max(np.abs(m)))
    worst = float(np.max(gap))
    if worst > limit:
        i, j = np.unravel_index(int(np.argmax(gap)), gap.shape)
        raise ValueError(
            f"{name} must be symmetric: |{name} - {name}ᵀ| = {worst:.3g} at ({i}, {j}) > "
            f"{rtol:g} max|{name}|"
        )
