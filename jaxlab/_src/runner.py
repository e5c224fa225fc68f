"""Running experiments: one (``jaxlab run``) or many (``jaxlab reproduce``).

The runner takes :class:`Experiment` objects; looking them up by name is the job of
:mod:`jaxlab.experiments` (``get``, ``run_experiment``, ``reproduce``), so this module never
imports the package above it.
"""

from __future__ import annotations

import dataclasses
import itertools
import multiprocessing
import os
import pathlib
import queue
import time
import traceback
from typing import Any

import jax

from jaxlab._src import experiments as registry
from jaxlab._src import results
from jaxlab._src.experiments import Experiment
from jaxlab._src.validation import check_int, check_positive

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MAX_SEED",
    "RichProgress",
    "check_output_dir",
    "check_seed",
    "run_experiment",
    "reproduce",
    "run_in_child",
]

# jax.random.key takes a 32-bit seed when x64 is off: 2**32 would silently run as seed 0.
MAX_SEED = 2**32 - 1
# The CLI's per-experiment wall limit (``--timeout``), per profile: ten times the longest run
# measured at that profile on a 2-core CPU (smoke: seconds, quick: minutes), so that only a hung
# or runaway experiment is stopped; ``full`` is meant for an accelerator and gets six hours.
DEFAULT_TIMEOUT_S = {"smoke": 600.0, "quick": 3600.0, "full": 6 * 3600.0}
# The child's start (a fresh interpreter importing JAX, SciPy and the experiment's module) takes a
# few seconds, up to a minute on a loaded 2-core CPU; it is timed apart from the experiment so that
# a short --timeout still bounds the experiment alone, and a hung start is stopped all the same.
STARTUP_LIMIT_S = 300.0
# How often the parent checks its child while waiting for progress messages (seconds).
_POLL_S = 0.2


def check_seed(seed) -> int:
    """An experiment seed: an int in ``[0, 2**32 - 1]`` (``ValueError``/``TypeError`` otherwise)."""
    return check_int(seed, "seed", minimum=0, maximum=MAX_SEED)


def check_timeout(timeout) -> float | None:
    """A wall limit in seconds: ``None`` (no limit, run in this process) or a number > 0."""
    if timeout is None:
        return None
    return float(check_positive(timeout, "timeout"))


class RichProgress:
    """Adapts a ``rich.progress.Progress`` to the experiments' ``track`` protocol."""

    def __init__(self, progress: Any, prefix: str = ""):
        self._progress = progress
        self._prefix = prefix

    def track(self, iterable, total=None, description=""):
        if total is None and hasattr(iterable, "__len__"):
            total = len(iterable)
        task = self.add_task(description, total)
        try:
            for item in iterable:
                yield item
                self.advance(task)
        finally:
            self.remove_task(task)

    # The task-level calls, also used to show a child process's progress (run_in_child).
    def add_task(self, description: str, total: int | None) -> Any:
        return self._progress.add_task(f"{self._prefix}{description}", total=total)

    def advance(self, task: Any) -> None:
        self._progress.advance(task)

    def remove_task(self, task: Any) -> None:
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


def _base_record(experiment: Experiment, profile: str, seed: int) -> dict[str, Any]:
    from jaxlab import __version__

    config = experiment.make_config(profile)
    return {
        "schema_version": results.SCHEMA_VERSION,
        "name": experiment.name,
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


def _error_record(record: dict[str, Any], reason: str, wall_time_s: float) -> dict[str, Any]:
    record.update(
        wall_time_s=wall_time_s,
        metrics={},
        figures=[],
        verdict={"status": "error", "reason": reason, "parts": []},
    )
    return record


def run_experiment(
    experiment: Experiment,
    *,
    profile: str = "quick",
    seed: int = 0,
    out_dir: str | os.PathLike = "results",
    progress: registry.Progress | None = None,
    timeout: float | None = None,
) -> dict[str, Any]:
    """Runs one experiment, writes its result.json and figures, and returns the record.

    An experiment that raises is recorded with status ``error`` and its traceback is saved to
    ``<out_dir>/<name>/traceback.txt``; ``KeyboardInterrupt`` propagates untouched.

    With ``timeout`` (seconds), the experiment runs in a child process (see
    :func:`run_in_child`) and is stopped past the limit, recorded as ``error: timed out after N
    s``; with ``None`` it runs in this process with no limit.
    """
    seed = check_seed(seed)
    timeout = check_timeout(timeout)
    if timeout is not None:
        return run_in_child(
            experiment,
            profile=profile,
            seed=seed,
            out_dir=out_dir,
            progress=progress,
            timeout=timeout,
        )
    name = experiment.name
    config = experiment.make_config(profile)
    exp_dir = pathlib.Path(out_dir) / name
    record = _base_record(experiment, profile, seed)
    start = time.perf_counter()
    try:
        result = experiment.run(config, jax.random.key(seed), progress)
    except Exception as e:  # the runner's job: record and carry on with the others
        tb = traceback.format_exc()
        results.atomic_write_text(exp_dir / "traceback.txt", tb)
        reason = f"{type(e).__name__}: {e} (traceback in {name}/traceback.txt)"
        _error_record(record, reason, time.perf_counter() - start)
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


class _QueueProgress:
    """The child's ``track``: forwards each task's start, steps and end to the parent's bar."""

    def __init__(self, messages):
        self._messages = messages
        self._ids = itertools.count()

    def track(self, iterable, total=None, description=""):
        if total is None and hasattr(iterable, "__len__"):
            total = len(iterable)
        task = next(self._ids)
        self._messages.put(("add", task, description, total))
        try:
            for item in iterable:
                yield item
                self._messages.put(("advance", task))
        finally:
            self._messages.put(("remove", task))


def _child(experiment: Experiment, profile: str, seed: int, out_dir: str, messages) -> None:
    """The child process: runs the experiment in-process and sends back its record."""
    messages.put(("started",))
    try:
        record = run_experiment(
            experiment,
            profile=profile,
            seed=seed,
            out_dir=out_dir,
            progress=_QueueProgress(messages),
        )
    except KeyboardInterrupt:
        messages.put(("interrupted",))
        return
    except BaseException as e:  # the record could not be written: say why, then exit
        messages.put(("crashed", f"{type(e).__name__}: {e}"))
        return
    try:
        messages.put(("done", results.jsonable(record)))
    except Exception:  # an unpicklable metric: the parent reads result.json instead
        messages.put(("done", None))


def _stop(process) -> None:
    if process.is_alive():
        process.kill()
    process.join()


def run_in_child(
    experiment: Experiment,
    *,
    profile: str = "quick",
    seed: int = 0,
    out_dir: str | os.PathLike = "results",
    progress: registry.Progress | None = None,
    timeout: float = DEFAULT_TIMEOUT_S["quick"],
) -> dict[str, Any]:
    """Runs one experiment in a fresh child process, stopped after ``timeout`` seconds.

    The child (started with ``spawn``, so it shares no threads or XLA state with this process)
    runs :func:`run_experiment` and writes the result itself. ``timeout`` bounds the experiment's
    own run, timed from the moment the child starts it; the child's start (importing JAX and the
    experiment's module) has its own limit, ``max(timeout, STARTUP_LIMIT_S)``. Past either, the
    child is killed and the experiment recorded as ``error: timed out after N s``. A child that
    dies without a record (killed by the system, a crash in native code) is an error too.
    ``KeyboardInterrupt`` in either process stops the child and propagates.
    """
    seed = check_seed(seed)
    timeout = check_timeout(timeout)
    if timeout is None:
        raise TypeError("timeout must be a number of seconds > 0, got None")
    record = _base_record(experiment, profile, seed)
    context = multiprocessing.get_context("spawn")
    messages = context.Queue()
    process = context.Process(
        target=_child,
        args=(experiment, profile, seed, str(out_dir), messages),
        name=f"jaxlab-{experiment.name}",
        daemon=True,
    )
    tasks: dict[int, Any] = {}
    start = time.perf_counter()
    limit = max(timeout, STARTUP_LIMIT_S)
    deadline = start + limit
    started = False
    try:
        process.start()  # pickles the experiment: its config and run function by reference
    except Exception as e:  # a run function defined in a local scope cannot be sent
        reason = (
            f"cannot run in a child process ({type(e).__name__}: {e}); define the run function "
            "at module level, or run without a wall limit (--timeout 0)"
        )
        _error_record(record, reason, 0.0)
        results.write_result(out_dir, record)
        messages.close()
        return record
    try:
        while True:
            now = time.perf_counter()
            if now > deadline:
                _stop(process)
                reason = f"timed out after {limit:g} s (stopped by the watchdog, --timeout)"
                if not started:
                    reason += "; the child process never started the experiment"
                _error_record(record, reason, now - start)
                results.write_result(out_dir, record)
                return record
            try:
                message = messages.get(timeout=min(_POLL_S, max(deadline - now, 0.0)))
            except queue.Empty:
                if not process.is_alive():
                    try:  # the last messages may still be in the pipe
                        message = messages.get(timeout=1.0)
                    except queue.Empty:
                        code = process.exitcode
                        reason = f"the experiment's process died (exit code {code}) with no result"
                        _error_record(record, reason, time.perf_counter() - start)
                        results.write_result(out_dir, record)
                        return record
                else:
                    continue
            kind = message[0]
            if kind == "started":
                start, limit, started = time.perf_counter(), timeout, True
                deadline = start + limit
            elif kind == "add" and isinstance(progress, RichProgress):
                _, task, description, total = message
                tasks[task] = progress.add_task(description, total)
            elif kind == "advance" and message[1] in tasks:
                progress.advance(tasks[message[1]])
            elif kind == "remove" and message[1] in tasks:
                progress.remove_task(tasks.pop(message[1]))
            elif kind == "interrupted":
                raise KeyboardInterrupt
            elif kind == "crashed":
                _error_record(record, message[1], time.perf_counter() - start)
                results.write_result(out_dir, record)
                return record
            elif kind == "done":
                process.join()
                stored = message[1] or results.read_result(out_dir, experiment.name)
                if stored is None:
                    reason = "the experiment's process finished but its result.json is unreadable"
                    _error_record(record, reason, time.perf_counter() - start)
                    return record
                return stored
    finally:
        _stop(process)
        for task in tasks.values():
            progress.remove_task(task)
        messages.close()


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
    timeout: float | None = None,
) -> list[dict[str, Any]]:
    """Runs ``experiments`` in order with a progress bar and writes REPORT.md.

    With ``resume``, experiments whose stored result matches the profile and code version are
    kept as they are. Interrupting leaves every finished result and a report of them in place.
    With ``timeout`` (seconds), each experiment runs in its own child process and is stopped
    past the limit (recorded as ``error: timed out after N s``); the others still run.
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
    timeout = check_timeout(timeout)
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
                        timeout=timeout,
                    )
                    records.append(record)
                    v = record["verdict"]
                    bar.console.log(f"{name}: {v['status']} ({record['wall_time_s']:.1f} s)")
                bar.advance(overall)
    finally:
        if records:
            results.write_report(out_dir, records)
    return records
