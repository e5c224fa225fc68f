"""Renamed keywords: the old name keeps working for a while, with a ``DeprecationWarning``."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

__all__ = ["renamed_keyword"]


def renamed_keyword(old: str, new: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: ``fn(..., old=value)`` calls ``fn(..., new=value)`` and warns.

    Passing both names is a ``TypeError``. The wrapped function's signature (``inspect``) is the
    new one.

    Examples:
      >>> import warnings
      >>> @renamed_keyword("step_size", "stepsize")
      ... def step(x, stepsize):
      ...     return x - stepsize
      >>> with warnings.catch_warnings(record=True) as caught:
      ...     warnings.simplefilter("always")
      ...     value = step(1.0, step_size=0.25)
      >>> value, caught[0].category.__name__
      (0.75, 'DeprecationWarning')
    """

    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if old in kwargs:
                if new in kwargs:
                    raise TypeError(
                        f"{fn.__qualname__} got both {new}= and its deprecated name {old}=; "
                        f"pass {new}= only"
                    )
                warnings.warn(
                    f"{fn.__qualname__}: the keyword {old}= is deprecated, use {new}=",
                    DeprecationWarning,
                    stacklevel=2,
                )
                kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)

        return wrapper

    return decorator
