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
    "check_axis_name",
    "check_bool",
    "check_in_range",
    "check_int",
    "check_learning_rate",
    "check_nonnegative",
    "check_positive",
    "check_positive_int",
    "check_probability",
    "check_real",
    "check_real_array",
    "check_seed",
    "concrete_float",
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
