"""The registered reproductions, one module per paper claim.

Importing a module registers its experiment; :func:`names` and :func:`get` import them all
first (every module of this package whose name does not start with ``_``). :func:`run_experiment`
and :func:`reproduce` look experiments up by name and hand them to the runner.
"""

from __future__ import annotations

import difflib
import importlib
import os
import pkgutil
from typing import Any

from jaxlab._src import runner as _runner
from jaxlab._src.experiments import (
    PROFILES,
    REGISTRY,
    STATUSES,
    Experiment,
    ExperimentConfig,
    NullProgress,
    Part,
    Progress,
    Result,
    check,
    register,
    unresolved,
    verdict_status,
)
from jaxlab._src.parts import DEVICE_PART_LIMIT_S, RunPart, as_unit, declare_parts, unit

__all__ = [
    "DEVICE_PART_LIMIT_S",
    "PROFILES",
    "STATUSES",
    "Experiment",
    "ExperimentConfig",
    "NullProgress",
    "Part",
    "Progress",
    "Result",
    "RunPart",
    "as_unit",
    "check",
    "declare_parts",
    "get",
    "names",
    "parts",
    "register",
    "reproduce",
    "run_experiment",
    "unit",
    "unknown_name_message",
    "unresolved",
    "verdict_status",
]

_LOADED = False


def _load_all() -> None:
    """Imports every experiment module of this package once (each registers itself)."""
    global _LOADED
    if _LOADED:
        return
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")
    from jaxlab.experiments import _parts_table  # every full profile's parts, in one table

    _parts_table.declare_all()
    _LOADED = True


def _check_name(name: Any) -> None:
    if not isinstance(name, str):
        raise TypeError(
            f"name must be an experiment name (str), got {type(name).__name__} {name!r}"
        )


def names() -> list[str]:
    """Sorted names of all registered experiments.

    Examples:
      >>> "error-feedback" in names()
      True
    """
    _load_all()
    return sorted(REGISTRY)


def unknown_name_message(name: str) -> str:
    """The error text for an unknown experiment name, with close matches.

    Examples:
      >>> unknown_name_message("mmfdl")
      "unknown experiment 'mmfdl'; did you mean mmfld, msflow? (`jaxlab list` shows all)"
    """
    _check_name(name)
    close = difflib.get_close_matches(name, names(), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"unknown experiment {name!r}{hint} (`jaxlab list` shows all)"


def get(name: str) -> Experiment:
    """The registered experiment ``name``; ``KeyError`` with close matches otherwise.

    Examples:
      >>> get("error-feedbak")
      Traceback (most recent call last):
      ...
      KeyError: "unknown experiment 'error-feedbak'; did you mean error-feedback..."
    """
    _check_name(name)
    _load_all()
    if name not in REGISTRY:
        raise KeyError(unknown_name_message(name))
    return REGISTRY[name]


def run_experiment(
    name: str,
    *,
    profile: str = "quick",
    seed: int = 0,
    out_dir: str | os.PathLike = "results",
    progress: Progress | None = None,
    timeout: float | None = None,
    part: str | None = None,
) -> dict[str, Any]:
    """Runs the experiment ``name``, writes its ``result.json`` and figures, returns the record.

    An experiment that raises is recorded with status ``error`` (traceback saved beside it).
    With ``timeout`` (seconds) it runs in a child process and is stopped past the limit
    (recorded as ``error: timed out after N s``); ``None`` runs it here with no limit.

    With ``part`` (``full`` profile only; :func:`parts` lists them) it runs that part of the
    full profile, writes it under ``<out_dir>/<name>/parts/<part>/``, then writes the
    experiment's ``result.json``: merged from the parts when all are in, ``unresolved`` naming
    the missing ones otherwise; the returned record is the experiment's.

    Examples:
      >>> import tempfile
      >>> record = run_experiment("fab-hyperparameter", profile="smoke", out_dir=tempfile.mkdtemp())
      >>> record["verdict"]["status"] in STATUSES
      True
    """
    experiment = get(name)
    record = _runner.run_experiment(
        experiment,
        profile=profile,
        seed=seed,
        out_dir=out_dir,
        progress=progress,
        timeout=timeout,
        part=part,
    )
    if part is None:
        return record
    merged = _runner.finish_parts(
        experiment, seed=seed, out_dir=out_dir, progress=progress, timeout=timeout
    )
    if record.get("status") != "done":  # the part raised or timed out: say so, not "missing"
        merged["verdict"] = {
            "status": "error",
            "reason": f"part {part}: {record['verdict']['reason']}",
            "parts": merged["verdict"].get("parts", []),
        }
    return merged


def parts(name: str) -> list[RunPart]:
    """The parts of experiment ``name``'s ``full`` profile, in their merge order.

    Examples:
      >>> [p.name for p in parts("moe-topk")][:2]
      ['top-k-1', 'top-k-2']
    """
    return get(name).full_parts()


def reproduce(
    selected: list[str] | None = None,
    *,
    profile: str = "quick",
    seed: int = 0,
    out_dir: str | os.PathLike = "results",
    resume: bool = False,
    console: Any = None,
    timeout: float | None = None,
) -> list[dict[str, Any]]:
    """Runs the selected (default: all) experiments with a progress bar and writes REPORT.md.

    With ``resume``, experiments whose stored result matches the profile and code version are
    kept as they are. With ``timeout`` (seconds), each experiment runs in its own child process
    and is stopped past the limit (recorded as ``error: timed out after N s``) while the others
    still run; ``None`` runs them all here with no limit.

    Examples:
      >>> import tempfile, io
      >>> from rich.console import Console
      >>> out = tempfile.mkdtemp()
      >>> records = reproduce(["fab-hyperparameter"], profile="smoke", out_dir=out,
      ...                     console=Console(file=io.StringIO()))
      >>> [r["name"] for r in records], os.path.exists(os.path.join(out, "REPORT.md"))
      (['fab-hyperparameter'], True)
    """
    if selected is not None and (
        isinstance(selected, str) or not isinstance(selected, list | tuple)
    ):
        raise TypeError(f"selected must be a list of experiment names or None, got {selected!r}")
    experiments = [get(name) for name in (selected or names())]
    return _runner.reproduce(
        experiments,
        profile=profile,
        seed=seed,
        out_dir=out_dir,
        resume=resume,
        console=console,
        timeout=timeout,
    )
