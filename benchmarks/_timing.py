"""Timing helpers shared by the benchmarks: interleaved repeats and compile time.

Shared machines drift (other processes, frequency scaling), so candidate and peer are timed in
turn, ``candidate, peer, candidate, peer, ...``, and compared by their medians: a slow spell hits
both. Every call is blocked on (``jax.block_until_ready``) so asynchronous dispatch does not hide
the work.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any

import jax

__all__ = ["compile_time", "compiled_and_compile_time", "interleaved_times", "median_times"]


def interleaved_times(
    fns: Mapping[str, Callable[[], Any]], repeats: int, warmup: int = 2
) -> dict[str, list[float]]:
    """Wall-clock seconds of each zero-argument function, called in turn ``repeats`` times.

    Round ``r`` calls every function once, in the mapping's order rotated by ``r`` places, each
    timed from the call to the end of ``jax.block_until_ready`` on its output. ``warmup``
    untimed rounds come first (compilation, first-touch allocation).

    Args:
      fns: name -> zero-argument callable (e.g. a closure that runs one jitted step).
      repeats: timed rounds, ``>= 1``.
      warmup: untimed rounds before them, ``>= 0``.

    Returns:
      name -> the ``repeats`` durations in seconds, in call order.

    Raises:
      ValueError: ``repeats < 1``, ``warmup < 0`` or no functions.

    Examples:
      >>> import jax.numpy as jnp
      >>> times = interleaved_times({"a": lambda: jnp.ones(3) * 2, "b": lambda: jnp.zeros(3)}, 3)
      >>> sorted(times), len(times["a"])
      (['a', 'b'], 3)
    """
    if not fns:
        raise ValueError("fns must name at least one function")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    for _ in range(warmup):
        for fn in fns.values():
            jax.block_until_ready(fn())
    times: dict[str, list[float]] = {name: [] for name in fns}
    names = list(fns)
    for round_ in range(repeats):
        # Each round starts one function later: the first call of a round runs after the last
        # of the previous one (caches, allocator state), so no function always takes that seat.
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            start = time.perf_counter()
            jax.block_until_ready(fns[name]())
            times[name].append(time.perf_counter() - start)
    return times


def median_times(times: Mapping[str, list[float]]) -> dict[str, float]:
    """The median of each list of :func:`interleaved_times`.

    Examples:
      >>> median_times({"a": [3.0, 1.0, 2.0]})
      {'a': 2.0}
    """
    return {name: statistics.median(values) for name, values in times.items()}


def compile_time(jitted: Any, *args: Any, **kwargs: Any) -> float:
    """Seconds to lower and compile ``jitted`` for these arguments (``.lower(...).compile()``).

    Tracing and XLA compilation are both counted; nothing is executed. Arguments may be arrays
    or ``jax.ShapeDtypeStruct``s.

    Args:
      jitted: a ``jax.jit``-wrapped function.
      *args: positional arguments to lower with.
      **kwargs: keyword arguments to lower with.

    Returns:
      The duration in seconds.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> compile_time(jax.jit(lambda x: x + 1), jnp.ones(3)) > 0
      True
    """
    return compiled_and_compile_time(jitted, *args, **kwargs)[1]


def compiled_and_compile_time(jitted: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    """Like :func:`compile_time`, also returning the compiled executable (to run it, not again).

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> compiled, seconds = compiled_and_compile_time(jax.jit(lambda x: 2 * x), jnp.ones(2))
      >>> compiled(jnp.ones(2))
      Array([2., 2.], dtype=float32)
    """
    start = time.perf_counter()
    compiled = jitted.lower(*args, **kwargs).compile()
    return compiled, time.perf_counter() - start
