"""A ``full`` profile in parts: each part computes a slice of the run's units of work.

An accelerator may be lent for minutes at a time, so a ``full`` profile that needs half an hour
in one piece could never run. Every experiment's full profile is declared in parts
(:func:`declare_parts`), all from one table, ``jaxlab/experiments/_parts_table.py``: each
:class:`RunPart` names a slice of the run (a seed, a size, an arm, a slice of a sweep) by the
coordinates of the *units* it computes, with its estimated time on the CPU and on the device and
how that estimate was made.

A unit is one independent piece of work inside the run function, marked with :func:`unit` (or a
module-level function rebound with :func:`as_unit`), with coordinates such as
``{"seed": 2}`` or ``{"arm": "adam", "seed": 0}``. The run function runs in one of three modes:

* one piece (no part): every unit is computed, as if :func:`unit` were not there;
* part ``P``: the units ``P`` selects are computed and stored (with any unit nested inside
  one); a unit on disk from another part is read back; any other unit returns ``SKIPPED``,
  a placeholder that stops the run as soon as the run *uses* it (the aggregation after the
  loop), which ends the part;
* merge: every unit is read from the parts' stores and the run function carries on to its own
  aggregation, verdict and figures, so the merged verdict is the one-piece run's by construction
  and does not depend on the order the parts ran in (parts are read in their declared order).

A unit whose coordinates no part selects, or that a part stopped before reaching, is an error at
merge time naming the unit, never a silent recomputation.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from jaxlab._src import validation

__all__ = [
    "SKIPPED",
    "CPU_FLOPS_PER_S",
    "DEVICE_PART_LIMIT_S",
    "DEVICE_SPEEDUP",
    "DEVICE_START_S",
    "PartStopped",
    "QUICK_BUDGET_S",
    "RunPart",
    "UnitMissing",
    "as_unit",
    "declare_parts",
    "device_seconds",
    "split_parts",
    "transformer_train_flops",
    "unit",
    "unit_key",
    "whole_run_parts",
]

# The bound on one part: an accelerator call may run 10 minutes; 8 leave room for the
# start of a fresh interpreter, JAX's compilation and the transfer of the results.
DEVICE_PART_LIMIT_S = 8 * 60.0
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


@dataclasses.dataclass(frozen=True)
class RunPart:
    """One part of an experiment's ``full`` profile, with its time estimates.

    Args:
      name: lower-case, hyphenated; the folder ``results/<experiment>/parts/<name>/``.
      covers: what the part computes, in words (``"seed 2 of 10, every arm"``).
      select: axis -> the values this part computes; a unit is in the part when each of these
        axes is among its coordinates with one of the listed values. ``{}`` selects every unit
        (the whole run in one part).
      cpu_s: estimated wall seconds on a quiet 2-core CPU.
      device_s: estimated wall seconds on one H200 (compilation included).
      estimate: how the estimates were made (measured step times, FLOPs, assumed throughput).

    Examples:
      >>> part = RunPart("seed-0", "seed 0 of 3", {"seed": (0,)}, cpu_s=600, device_s=40,
      ...                estimate="smoke step time x steps")
      >>> part.selects({"seed": 0, "arm": "adam"}), part.selects({"seed": 1, "arm": "adam"})
      (True, False)
    """

    name: str
    covers: str
    select: Mapping[str, tuple]
    cpu_s: float
    device_s: float
    estimate: str
    # Computes its units only if the run asks for them once every non-optional part is on disk
    # (an lr extension of a bracket); asked for nothing then, it is done with no units.
    optional: bool = False

    def __post_init__(self):
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ValueError(f"name must be lower-case and hyphenated, got {self.name!r}")
        for field in ("covers", "estimate"):
            if not isinstance(getattr(self, field), str) or not getattr(self, field):
                raise TypeError(f"{field} must be a non-empty str, got {getattr(self, field)!r}")
        if not isinstance(self.select, Mapping):
            raise TypeError(f"select must be a mapping axis -> values, got {self.select!r}")
        select = {}
        for axis, values in self.select.items():
            if isinstance(values, str) or not isinstance(values, list | tuple | range):
                raise TypeError(f"select[{axis!r}] must be a tuple of values, got {values!r}")
            select[str(axis)] = tuple(values)
        object.__setattr__(self, "select", select)
        for field in ("cpu_s", "device_s"):
            value = getattr(self, field)
            if not isinstance(value, int | float) or not (math.isfinite(value) and value > 0):
                raise ValueError(f"{field} must be a finite number of seconds > 0, got {value!r}")

    def selects(self, coords: Mapping[str, Any]) -> bool:
        return all(axis in coords and coords[axis] in v for axis, v in self.select.items())

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "covers": self.covers,
            "select": {k: list(v) for k, v in self.select.items()},
            "cpu_s": float(self.cpu_s),
            "device_s": float(self.device_s),
            "fits_device_call": self.device_s <= DEVICE_PART_LIMIT_S,
            "optional": bool(self.optional),
            "estimate": self.estimate,
        }


def declare_parts(name: str, parts: Callable[[Any], list[RunPart]]) -> None:
    """Declares the ``full`` profile's parts of the registered experiment ``name``.

    ``parts(config)`` receives the full config and returns the parts in their fixed merge order.
    jaxlab's own experiments are declared from one table (``jaxlab.experiments._parts_table``)
    once every experiment module is imported.

    Examples:
      >>> declare_parts("no-such-claim", lambda config: [])
      Traceback (most recent call last):
      ...
      KeyError: "declare_parts: no registered experiment 'no-such-claim'"
    """
    from jaxlab._src.experiments import REGISTRY

    validation.check_callable(parts, "parts", signature="parts(config) -> list of RunPart")
    if name not in REGISTRY:
        raise KeyError(f"declare_parts: no registered experiment {name!r}")
    REGISTRY[name] = dataclasses.replace(REGISTRY[name], parts_fn=parts)


def check_parts(parts: Any, experiment: str) -> list[RunPart]:
    """The declared parts as a list, checked: RunPart items with distinct names."""
    parts = list(parts)
    if not parts or not all(isinstance(p, RunPart) for p in parts):
        raise TypeError(f"{experiment}: parts must be a non-empty list of RunPart, got {parts!r}")
    names = [p.name for p in parts]
    if len(set(names)) != len(names):
        raise ValueError(f"{experiment}: part names must be distinct, got {names}")
    return parts


def unit_key(coords: Mapping[str, Any]) -> str:
    """The stored key of a unit: its coordinates as sorted JSON (``{"seed": 2}``)."""
    return json.dumps({str(k): coords[k] for k in sorted(coords)}, sort_keys=True, default=str)


class PartStopped(BaseException):
    """Raised when a part's run uses a unit it did not compute: the part has done its work.

    A ``BaseException`` so that an experiment's own ``except Exception`` cannot swallow it.
    """


class UnitMissing(RuntimeError):
    """Raised at merge time for a unit that no stored part holds."""


class _Skipped:
    """The placeholder of a unit outside the running part; using it ends the part's run."""

    __slots__ = ()

    def __repr__(self):
        return "SKIPPED"

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self

    def __getitem__(self, item):
        return self

    def _stop(self, *args, **kwargs):
        raise PartStopped("the run used a unit outside this part")

    __array__ = __iter__ = __len__ = __bool__ = __float__ = __int__ = __index__ = _stop
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _stop
    __truediv__ = __rtruediv__ = __lt__ = __gt__ = __le__ = __ge__ = __neg__ = __call__ = _stop
    __jax_array__ = __format__ = _stop


SKIPPED = _Skipped()


@dataclasses.dataclass
class _Mode:
    part: RunPart | None  # None: merge
    stored: dict[str, Any]  # unit key -> value, read from the parts on disk
    computed: dict[str, Any] = dataclasses.field(default_factory=dict)
    skipped: list[str] = dataclasses.field(default_factory=list)
    depth: int = 0  # > 0 inside a selected unit's work: units nested in it are its own work
    unit_raised: bool = False  # a unit's own work raised (a real error, never the part's end)


_MODE: contextvars.ContextVar[_Mode | None] = contextvars.ContextVar("jaxlab_part", default=None)


@contextlib.contextmanager
def running(part: RunPart | None, stored: dict[str, Any]) -> Iterator[_Mode]:
    """Runs the body as part ``part`` (or as the merge when ``None``) over ``stored`` units."""
    mode = _Mode(part, dict(stored))
    token = _MODE.set(mode)
    try:
        yield mode
    finally:
        _MODE.reset(token)


def unit(coords: Mapping[str, Any], compute: Callable[[], Any], *, skipped: Any = SKIPPED) -> Any:
    """One unit of work of a run: ``compute()``, or its stored value when running in parts.

    Args:
      coords: the unit's coordinates (JSON-able values), distinct for every unit of a run.
      compute: the work, with no argument; its value must pickle (arrays, dicts, numbers).
      skipped: what a unit outside the running part returns (``(SKIPPED,) * 2`` for a unit
        whose value the run unpacks as a pair).

    Returns:
      ``compute()`` in a one-piece run; in a part, the stored or computed value or
      ``SKIPPED``; in the merge, the stored value.

    Examples:
      >>> unit({"seed": 0}, lambda: 41 + 1)  # outside a part: computed
      42
    """
    if not isinstance(coords, Mapping):
        raise TypeError(f"coords must be a mapping axis -> value, got {coords!r}")
    validation.check_callable(compute, "compute", signature="compute()")
    mode = _MODE.get()
    if mode is None:
        return compute()
    key = unit_key(coords)
    if key in mode.computed:
        return mode.computed[key]
    if key in mode.stored:
        return mode.stored[key]
    if mode.part is None:
        raise UnitMissing(f"unit {key} is in no stored part")
    if not mode.depth and not mode.part.selects(coords):
        mode.skipped.append(key)
        return skipped
    mode.depth += 1
    try:
        value = compute()
    except Exception:
        mode.unit_raised = True
        raise
    finally:
        mode.depth -= 1
    mode.computed[key] = value
    return value


def as_unit(
    fn: Callable, coords: Callable[..., Mapping[str, Any]], *, outputs: int | None = None
) -> Callable:
    """``fn`` as a unit: each call is :func:`unit` with ``coords(*args, **kwargs)``.

    ``outputs``: for a function returning a tuple of that many values (which the run unpacks),
    a skipped call returns as many ``SKIPPED``.

    Rebinding a module-level function at the end of its module (``_train = as_unit(_train,
    lambda config, seed, *_: {"seed": seed})``) makes every call of it from the run function
    a unit, with no edit inside the run function.

    Examples:
      >>> def train(config, seed):
      ...     return seed * 10
      >>> train = as_unit(train, lambda config, seed: {"seed": seed})
      >>> train(None, 3)  # outside a part: called as before
      30
    """
    validation.check_callable(fn, "fn")
    validation.check_callable(coords, "coords", signature="coords(*fn's arguments) -> mapping")

    skipped = SKIPPED if outputs is None else (SKIPPED,) * outputs

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        return unit(coords(*args, **kwargs), lambda: fn(*args, **kwargs), skipped=skipped)

    wrapped.__wrapped_unit__ = fn
    return wrapped


# --- Estimates -----------------------------------------------------------------------------------
# The one device time measured so far: mmfld's full profile took 94 s on an H200 (README), the
# start of a fresh interpreter, JAX's import and the compilations included. Every part is charged
# this fixed cost on the device, whatever its work.
DEVICE_START_S = 60.0
# Assumed throughput of one H200 over the quiet 2-core CPU, by the kind of work (no part has been
# timed on the device yet, so these are assumptions, stated once here and replaced by measured
# ratios when a part runs):
# - "dense": transformer training at d_model >= 128 in float32 (matmuls dominate). The CPU gives
#   ~50 GFLOP/s on such steps (2 cores of AVX2 FMA at ~2.5 GHz, small matrices); an H200 reaches
#   ~10% of its 67 TFLOP/s float32 peak at these sizes (d 256, batch 32 x 256 tokens), ~7 TFLOP/s:
#   a ratio of about 100.
# - "small": small MLPs, vmapped seeds and lanes, scans of tiny steps: launch- and latency-bound,
#   assumed 10x (mmfld's quick is 374 CPU-seconds, its larger full 94 s on the H200).
# - "host": work that stays on the host (HiGHS and SciPy solves, NumPy statistics): 1x.
DEVICE_SPEEDUP = {"dense": 100.0, "small": 10.0, "host": 1.0}


def device_seconds(cpu_s: float, kind: str) -> float:
    """The device estimate of work that takes ``cpu_s`` on the quiet 2-core CPU.

    ``DEVICE_START_S`` plus ``cpu_s / DEVICE_SPEEDUP[kind]``.

    Examples:
      >>> device_seconds(6000.0, "dense")
      120.0
    """
    validation.check_choice(kind, "kind", tuple(sorted(DEVICE_SPEEDUP)))
    return DEVICE_START_S + float(cpu_s) / DEVICE_SPEEDUP[kind]


def split_parts(
    prefix: str,
    axis: str,
    values: tuple,
    *,
    per_value_cpu_s: float,
    kind: str,
    estimate: str,
    covers: str,
    per_part: int = 1,
    shared_cpu_s: float = 0.0,
) -> list[RunPart]:
    """Parts of ``per_part`` values of ``axis`` each, with scaled estimates.

    Each part costs ``shared_cpu_s`` (setup every part repeats: data, compilation) plus
    ``per_value_cpu_s`` per value on the CPU; on the device, :func:`device_seconds` of that.

    Examples:
      >>> [p.name for p in split_parts("seed", "seed", (0, 1, 2), per_value_cpu_s=600,
      ...                              kind="dense", estimate="e", covers="seed", per_part=2)]
      ['seed-0-1', 'seed-2']
    """
    out = []
    for i in range(0, len(values), per_part):
        chunk = tuple(values[i : i + per_part])
        cpu = shared_cpu_s + per_value_cpu_s * len(chunk)
        label = "-".join(str(v) for v in chunk)
        out.append(
            RunPart(
                re.sub(r"[^a-z0-9-]+", "-", f"{prefix}-{label}".lower()).strip("-"),
                f"{covers} {', '.join(str(v) for v in chunk)}",
                {axis: chunk},
                cpu_s=cpu,
                device_s=device_seconds(cpu, kind),
                estimate=estimate,
            )
        )
    return out


# The quiet 2-core CPU's rate on float32 transformer training steps at d_model >= 128: 2 cores x
# 8-wide AVX2 FMA x 2 ports x ~2.5 GHz is ~160 GFLOP/s peak; XLA:CPU reaches about a third of it
# on these matrix sizes (assumed; the quick profiles' wall times on the shared machine include
# other jobs' load and do not measure it).
CPU_FLOPS_PER_S = 50e9


def transformer_train_flops(
    d_model: int, layers: int, seq_len: int, batch: int, steps: int, vocab: int = 256
) -> float:
    """Training FLOPs of a decoder-only transformer: ``steps x (6 P T + 6 L T seq d)``.

    ``P = 12 L d² + vocab d`` parameters and ``T = batch x seq_len`` tokens per step (the
    standard estimate of Kaplan et al., 2020, with the attention scores' forward and backward).

    Examples:
      >>> f"{transformer_train_flops(256, 6, 256, 32, 3000):.2e}"
      '7.63e+14'
    """
    params = 12 * layers * d_model**2 + vocab * d_model
    tokens = batch * seq_len
    return float(steps) * (6 * params * tokens + 6 * layers * tokens * seq_len * d_model)


# The quick profile's time where the README records none: the issues' quick budget (10 minutes on
# the 2-core CPU), an upper bound by intent rather than a measurement.
QUICK_BUDGET_S = 600.0


def whole_run_parts(
    config: Any,
    *,
    quick_cpu_s: float,
    source: str,
    work: Callable[[Any], float],
    work_text: str,
    kind: str,
    device_measured_s: float | None = None,
) -> list[RunPart]:
    """The full profile as one part (the whole run), scaled from the quick profile's time.

    ``cpu_s`` is ``quick_cpu_s x work(full) / work(quick)`` (``work``: the configs' own sizes,
    described by ``work_text``); ``device_s`` is :func:`device_seconds` of it for ``kind``, or a
    measured device time. Experiments whose run is not yet split into units use this.
    """
    quick = type(config).quick()
    ratio = float(work(config)) / float(work(quick))
    cpu = quick_cpu_s * ratio
    if device_measured_s is not None:
        device, how_device = float(device_measured_s), f"device: measured {device_measured_s:g} s"
    else:
        device = device_seconds(cpu, kind)
        how_device = f"device: DEVICE_SPEEDUP[{kind!r}] plus DEVICE_START_S"
    return [
        RunPart(
            "all",
            "the whole full profile in one part (its run is not split into units)",
            {},
            cpu_s=cpu,
            device_s=device,
            estimate=f"quick {quick_cpu_s:.0f} s ({source}) x work ratio full/quick "
            f"{ratio:.3g} ({work_text}); {how_device}",
        )
    ]
