"""Running experiments: one (``jaxlab run``) or many (``jaxlab reproduce``).

The runner takes :class:`Experiment` objects; looking them up by name is the job of
:mod:`jaxlab.experiments` (``get``, ``run_experiment``, ``reproduce``), so this module never
imports the package above it.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import time
import traceback
from typing import Any

import jax

from jaxlab._src import experiments as registry
from jaxlab._src import results
from jaxlab._src.experiments import Experiment
from jaxlab._src.validation import check_int

__all__ = [
    "MAX_SEED",
    "RichProgress",
    "check_output_dir",
    "check_seed",
    "run_experiment",
    "reproduce",
]

# jax.random.key takes a 32-bit seed when x64 is off: 2**32 would silently run as seed 0.
MAX_SEED = 2**32 - 1


def check_seed(seed) -> int:
    """An experiment seed: an int in ``[0, 2**32 - 1]`` (``ValueError``/``TypeError`` otherwise)."""
    return check_int(seed, "seed", minimum=0, maximum=MAX_SEED)


class RichProgress:
    """Adapts a ``rich.progress.Progress`` to the experiments' ``track`` protocol."""

    def __init__(self, progress: Any, prefix: str = ""):
        self._progress = progress
        self._prefix = prefix

    def track(self, iterable, total=None, description=""):
        if total is None and hasattr(iterable, "__len__"):
            total = len(iterable)
        task = self._progress.add_task(f"{self._prefix}{description}", total=total)
        try:
            for item in iterable:
                yield item
                self._progress.advance(task)
        finally:
            self._progress.remove_task(task)


def check_output_dir(out_dir: str | os.PathLike) -> pathlib.Path:
    """Creates ``out_dir`` if needed and checks it is writable; ``OSError`` naming it otherwise."""
    path = pathlib.Path(out_dir)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".jaxlab-write-probe"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise OSError(f"output folder {str(path)!r} is not writable: {e.strerror or e}") from e
    return path


def _device_kind() -> str:
    try:
        return jax.devices()[0].device_kind
    except RuntimeError:
        return "unknown"


def run_experiment(
    experiment: Experiment,
    *,
    profile: str = "quick",
    seed: int = 0,
    out_dir: str | os.PathLike = "results",
    progress: registry.Progress | None = None,
) -> dict[str, Any]:
    """Runs one experiment, writes its result.json and figures, and returns the record.

    An experiment that raises is recorded with status ``error`` and its traceback is saved to
    ``<out_dir>/<name>/traceback.txt``; ``KeyboardInterrupt`` propagates untouched.
    """
    from jaxlab import __version__

    seed = check_seed(seed)
    name = experiment.name
    config = experiment.make_config(profile)
    exp_dir = pathlib.Path(out_dir) / name
    record: dict[str, Any] = {
        "schema_version": results.SCHEMA_VERSION,
        "name": name,
        "jaxlab_version": __version__,
        "jax_version": jax.__version__,
        "code_version": experiment.code_version(),
        "git_commit": results.git_commit(),
        "device_kind": _device_kind(),
        "seed": seed,
        "profile": profile,
        "config": dataclasses.asdict(config),
        "claim": experiment.claim,
    }
    start = time.perf_counter()
    try:
        result = experiment.run(config, jax.random.key(seed), progress)
    except Exception as e:  # the runner's job: record and carry on with the others
        record["wall_time_s"] = time.perf_counter() - start
        tb = traceback.format_exc()
        results.atomic_write_text(exp_dir / "traceback.txt", tb)
        record.update(
            metrics={},
            figures=[],
            verdict={
                "status": "error",
                "reason": f"{type(e).__name__}: {e} (traceback in {name}/traceback.txt)",
                "parts": [],
            },
        )
        results.write_result(out_dir, record)
        return record
    record["wall_time_s"] = time.perf_counter() - start
    figures = []
    for fig_name, fig in result.figures.items():
        filename = f"{fig_name}.png"
        results.save_figure(fig, exp_dir / filename)
        figures.append(filename)
    record.update(metrics=result.metrics, figures=figures, verdict=result.verdict())
    stale_tb = exp_dir / "traceback.txt"
    if stale_tb.exists():
        stale_tb.unlink()
    results.write_result(out_dir, record)
    return record


def _is_current(record: dict[str, Any] | None, experiment: Experiment, profile: str) -> bool:
    if record is None or record.get("profile") != profile:
        return False
    if record.get("verdict", {}).get("status") not in registry.STATUSES:
        return False
    return record.get("code_version") == experiment.code_version()


def reproduce(
    experiments: list[Experiment],
    *,
    profile: str = "quick",
    seed: int = 0,
    out_dir: str | os.PathLike = "results",
    resume: bool = False,
    console: Any = None,
) -> list[dict[str, Any]]:
    """Runs ``experiments`` in order with a progress bar and writes REPORT.md.

    With ``resume``, experiments whose stored result matches the profile and code version are
    kept as they are. Interrupting leaves every finished result and a report of them in place.
    """
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    seed = check_seed(seed)
    console = console or Console(stderr=True)
    records: list[dict[str, Any]] = []
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    try:
        with Progress(*columns, console=console, transient=False) as bar:
            overall = bar.add_task("experiments", total=len(experiments))
            for experiment in experiments:
                name = experiment.name
                stored, problem = results.inspect_result(out_dir, name) if resume else (None, "")
                if resume and _is_current(stored, experiment, profile):
                    records.append(stored)
                    bar.console.log(f"{name}: kept stored {profile} result (--resume)")
                else:
                    if resume and stored is None and problem != "no stored result":
                        bar.console.log(f"{name}: stored result unusable ({problem}); rerunning")
                    bar.update(overall, description=f"experiments: {name}")
                    record = run_experiment(
                        experiment,
                        profile=profile,
                        seed=seed,
                        out_dir=out_dir,
                        progress=RichProgress(bar, prefix=f"  {name}: "),
                    )
                    records.append(record)
                    v = record["verdict"]
                    bar.console.log(f"{name}: {v['status']} ({record['wall_time_s']:.1f} s)")
                bar.advance(overall)
    finally:
        if records:
            results.write_report(out_dir, records)
    return records
