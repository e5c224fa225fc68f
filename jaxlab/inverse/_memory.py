"""Memory of a compiled step: XLA's memory analysis, or the saved residuals of a VJP as fallback.

The note measures memory as ``jax.jit(f).lower(*args).compile().memory_analysis()
.temp_size_in_bytes`` (the scratch buffers of the program: for a gradient step, what the
backward pass keeps). Some backends do not report it; then the bytes of the residuals JAX saves
for the backward pass of a given function (``jax.ad_checkpoint.print_saved_residuals``,
arguments excluded) stand in, and the report says which was used.
"""

from __future__ import annotations

import contextlib
import io
import math
import re
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.ad_checkpoint

from jaxlab._src.validation import check_callable

__all__ = ["StepMemory", "saved_residual_bytes", "step_memory"]

_RESIDUAL = re.compile(r"^\s*([a-z]+)(\d+)\[([0-9,]*)\]")


class StepMemory(NamedTuple):
    """What :func:`step_memory` measured.

    Attributes:
      temp_bytes: the program's temporary buffers (the note's measure), or the saved residuals'
        bytes when ``source == "saved_residuals"``.
      argument_bytes: the inputs' bytes (``None`` with the fallback).
      output_bytes: the outputs' bytes (``None`` with the fallback).
      peak_bytes: ``argument + output + temp - alias`` (``None`` with the fallback).
      source: ``"memory_analysis"`` or ``"saved_residuals"``.
      compiled: the compiled executable (``None`` with the fallback), so a caller can run the
        very program it measured without compiling it again.

    Examples:
      >>> StepMemory._fields[-2:]
      ('source', 'compiled')
    """

    temp_bytes: int
    argument_bytes: int | None
    output_bytes: int | None
    peak_bytes: int | None
    source: str
    compiled: Any

    def summary(self) -> dict:
        """The numbers as a JSON-ready dict, with ``compiled_bytes = temp + output`` (the
        program's own buffers; ``temp`` alone with the fallback).

        Examples:
          >>> StepMemory(100, 8, 4, 112, "memory_analysis", None).summary()["compiled_bytes"]
          104
        """
        return {
            "temp_bytes": self.temp_bytes,
            "output_bytes": self.output_bytes,
            "compiled_bytes": self.temp_bytes + (self.output_bytes or 0),
            "peak_bytes": self.peak_bytes,
            "source": self.source,
        }


def saved_residual_bytes(fn: Callable[..., Any], *args: Any) -> int:
    """Bytes of the residuals JAX saves for ``fn``'s backward pass, its arguments excluded.

    Parsed from ``jax.ad_checkpoint.print_saved_residuals(fn, *args)`` (``fn`` returns a scalar
    or any differentiable output).

    Examples:
      >>> import jax.numpy as jnp
      >>> saved_residual_bytes(lambda x: jnp.sum(jnp.sin(jnp.sin(x))), jnp.ones(3))  # 2 cos f32[3]
      24
    """
    check_callable(fn, "fn")
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        jax.ad_checkpoint.print_saved_residuals(fn, *args)
    total = 0
    for line in buffer.getvalue().splitlines():
        if "from the argument" in line:
            continue
        match = _RESIDUAL.match(line)
        if match is None:
            continue
        kind, bits, dims = match.groups()
        if kind == "bool" or kind == "pred":
            bits = "8"
        shape = [int(d) for d in dims.split(",") if d]
        total += math.prod(shape) * int(bits) // 8
    return total


def step_memory(
    fn: Callable[..., Any],
    *args: Any,
    residual_fn: Callable[..., Any] | None = None,
    residual_args: tuple = (),
) -> StepMemory:
    """Compiles ``fn`` for ``args`` and reports its memory (``memory_analysis()``), with fallback.

    Args:
      fn: the step (jitted or not; it is jitted here).
      *args: its arguments (arrays or ``jax.ShapeDtypeStruct``).
      residual_fn: the differentiated function inside the step, for the fallback when the
        backend has no memory analysis (``saved_residual_bytes(residual_fn, *residual_args)``).
      residual_args: its arguments.

    Returns:
      A :class:`StepMemory`.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> report = step_memory(jax.grad(lambda x: jnp.sum(jnp.sin(x) ** 2)), jnp.ones(1000))
      >>> report.source, report.argument_bytes
      ('memory_analysis', 4000)
    """
    check_callable(fn, "fn")
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    compiled = jitted.lower(*args).compile()
    try:
        stats = compiled.memory_analysis()
    except Exception:  # backends without the analysis raise NotImplementedError or similar
        stats = None
    if stats is not None:
        temp = int(stats.temp_size_in_bytes)
        arg = int(stats.argument_size_in_bytes)
        out = int(stats.output_size_in_bytes)
        alias = int(getattr(stats, "alias_size_in_bytes", 0))
        return StepMemory(temp, arg, out, arg + out + temp - alias, "memory_analysis", compiled)
    if residual_fn is None:
        raise ValueError(
            "this backend reports no memory analysis: pass residual_fn (the differentiated "
            "function) to count its saved residuals instead"
        )
    return StepMemory(
        saved_residual_bytes(residual_fn, *residual_args), None, None, None, "saved_residuals", None
    )
