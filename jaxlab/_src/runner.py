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
import pickle
import queue
import time
import traceback
from typing import Any

import jax

from jaxlab._src import experiments as registry
from jaxlab._src import parts as _parts
from jaxlab._src import results
from jaxlab._src.experiments import Experiment
from jaxlab._src.validation import check_int, check_positive

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MAX_SEED",
    "RichProgress",
    "check_output_dir",
    "check_seed",
    "finish_parts",
    "part_status",
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


def _error_record(
    record: dict[str, Any], reason: str, wall_time_s: float, cpu_time_s: float | None = None
) -> dict[str, Any]:
    record.update(
        wall_time_s=wall_time_s,
        cpu_time_s=cpu_time_s,
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
    part: str | None = None,
) -> dict[str, Any]:
    """Runs one experiment, writes its result.json and figures, and returns the record.

    ``part`` (``full`` profile only) runs one declared part and writes its record and units under
    ``<out_dir>/<name>/parts/<part>/``; :data:`MERGE` runs the merge of the stored parts. The
    record holds ``wall_time_s`` and ``cpu_time_s`` (``time.process_time`` of the process that
    ran it: this one, or the child under a wall limit).

    An experiment that raises is recorded with status ``error`` and its traceback is saved to
    ``<out_dir>/<name>/traceback.txt``; ``KeyboardInterrupt`` propagates untouched.

    With ``timeout`` (seconds), the experiment runs in a child process (see
    :func:`run_in_child`) and is stopped past the limit, recorded as ``error: timed out after N
    s``; with ``None`` it runs in this process with no limit.
    """
    seed = check_seed(seed)
    timeout = check_timeout(timeout)
    if part is not None:
        _check_part_request(experiment, profile, part)
    if timeout is not None:
        return run_in_child(
            experiment,
            profile=profile,
            seed=seed,
            out_dir=out_dir,
            progress=progress,
            timeout=timeout,
            part=part,
        )
    if part == MERGE:
        return _merge_here(experiment, seed, out_dir, progress)
    if part is not None:
        return _run_part_here(experiment, part, seed, out_dir, progress)
    name = experiment.name
    config = experiment.make_config(profile)
    exp_dir = pathlib.Path(out_dir) / name
    record = _base_record(experiment, profile, seed)
    start, cpu_start = time.perf_counter(), time.process_time()
    try:
        result = experiment.run(config, jax.random.key(seed), progress)
    except Exception as e:  # the runner's job: record and carry on with the others
        tb = traceback.format_exc()
        results.atomic_write_text(exp_dir / "traceback.txt", tb)
        reason = f"{type(e).__name__}: {e} (traceback in {name}/traceback.txt)"
        _error_record(record, reason, time.perf_counter() - start, time.process_time() - cpu_start)
        results.write_result(out_dir, record)
        return record
    record["wall_time_s"] = time.perf_counter() - start
    record["cpu_time_s"] = time.process_time() - cpu_start
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


def _child(
    experiment: Experiment, profile: str, seed: int, out_dir: str, messages, part=None
) -> None:
    """The child process: runs the experiment (or a part) in-process and sends back its record."""
    messages.put(("started",))
    try:
        record = run_experiment(
            experiment,
            profile=profile,
            seed=seed,
            out_dir=out_dir,
            progress=_QueueProgress(messages),
            part=part,
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


def _child_cpu_seconds(process) -> float | None:
    """The CPU seconds (user + system) a live child has used, from ``/proc`` (Linux), or None."""
    try:
        fields = pathlib.Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, TypeError):
        return None


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
    part: str | None = None,
) -> dict[str, Any]:
    """Runs one experiment (or one ``part``) in a fresh child process, stopped after ``timeout`` s.

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
    write = results.write_result
    if part is not None and part != MERGE:
        record["part"] = _find_part(experiment, part).as_dict()
        write = _write_part_record
    context = multiprocessing.get_context("spawn")
    messages = context.Queue()
    process = context.Process(
        target=_child,
        args=(experiment, profile, seed, str(out_dir), messages, part),
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
        write(out_dir, record)
        messages.close()
        return record
    try:
        while True:
            now = time.perf_counter()
            if now > deadline:
                cpu = _child_cpu_seconds(process)  # the child's own, read before it is stopped
                _stop(process)
                reason = f"timed out after {limit:g} s (stopped by the watchdog, --timeout)"
                if not started:
                    reason += "; the child process never started the experiment"
                _error_record(record, reason, now - start, cpu)
                write(out_dir, record)
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
                        write(out_dir, record)
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
                write(out_dir, record)
                return record
            elif kind == "done":
                process.join()
                stored = message[1] or (
                    results.read_result(out_dir, experiment.name)
                    if write is results.write_result
                    else _read_part_record(out_dir, experiment.name, part)
                )
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


# --- The full profile in parts -------------------------------------------------------------------

# ``run_experiment(..., part=MERGE)``: merge the stored parts (not a valid part name).
MERGE = ":merge"
_UNITS_FILE = "units.pkl"
# The stored key of a whole run's Result (a part selecting every unit), never a unit's key.
_WHOLE_RUN = "(whole run)"


def _part_dir(out_dir, name: str, part: str) -> pathlib.Path:
    return pathlib.Path(out_dir) / name / "parts" / part


def _find_part(experiment: Experiment, part: str) -> _parts.RunPart:
    declared = experiment.full_parts()
    for p in declared:
        if p.name == part:
            return p
    known = ", ".join(p.name for p in declared) or "none (its full profile runs in one piece)"
    raise ValueError(f"part must be one of {experiment.name}'s parts ({known}), got {part!r}")


def _check_part_request(experiment: Experiment, profile: str, part: str) -> None:
    if profile != "full":
        raise ValueError(f"parts exist for the full profile only, got profile {profile!r}")
    if part != MERGE:
        _find_part(experiment, part)


def _write_part_record(out_dir, record: dict[str, Any]) -> pathlib.Path:
    path = _part_dir(out_dir, record["name"], record["part"]["name"]) / "result.json"
    results.atomic_write_text(path, results.json_text(record))
    return path


def _read_part_record(out_dir, name: str, part: str) -> dict[str, Any] | None:
    record, _ = results.inspect_result(pathlib.Path(out_dir) / name / "parts", part)
    return record


def part_status(
    experiment: Experiment, out_dir: str | os.PathLike, seed: int = 0
) -> list[tuple[_parts.RunPart, dict[str, Any] | None]]:
    """Each declared part with its stored record, or ``None`` when it must (re)run.

    A stored part counts when it finished, with this seed and this code version, and its units
    file is on disk.
    """
    out = []
    for p in experiment.full_parts():
        record = _read_part_record(out_dir, experiment.name, p.name)
        current = (
            record is not None
            and record.get("status") == "done"
            and record.get("seed") == seed
            and record.get("code_version") == experiment.code_version()
            and (_part_dir(out_dir, experiment.name, p.name) / _UNITS_FILE).is_file()
        )
        out.append((p, record if current else None))
    return out


def _times(record: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": record["part"]["name"],
        "status": record.get("status", "error"),
        "wall_time_s": record.get("wall_time_s"),
        "cpu_time_s": record.get("cpu_time_s"),
        "device_kind": record.get("device_kind"),
        "estimated_cpu_s": record["part"]["cpu_s"],
        "estimated_device_s": record["part"]["device_s"],
    }


def _run_part_here(experiment: Experiment, part: str, seed: int, out_dir, progress):
    """Runs one part in this process: computes its units, stores them, records the time."""
    run_part = _find_part(experiment, part)
    record = _base_record(experiment, "full", seed)
    record["part"] = run_part.as_dict()
    folder = _part_dir(out_dir, experiment.name, part)
    # Units another current part already holds are read back, never recomputed here.
    stored: dict[str, Any] = {}
    for other, other_record in part_status(experiment, out_dir, seed):
        if other.name != part and other_record is not None:
            for key, value in _load_units(out_dir, experiment.name, other.name).items():
                stored.setdefault(key, value)
    config = experiment.make_config("full")
    start, cpu_start = time.perf_counter(), time.process_time()
    try:
        with _parts.running(run_part, stored) as mode:
            try:
                result = experiment.run(config, jax.random.key(seed), progress)
                ending = "the run reached its end"
                if not run_part.select:  # the whole run in this part: keep its result
                    mode.computed[_WHOLE_RUN] = result
            except _parts.PartStopped:
                ending = "the run stopped at the first use of a unit outside this part"
            except Exception as e:
                # After a unit was skipped, the run's own aggregation may fail on what is
                # missing (a KeyError on a skipped arm): the part has done its work. An error
                # inside a unit's work, or with nothing skipped, is a real error.
                if mode.unit_raised or not mode.skipped:
                    raise
                ending = (
                    f"the run stopped at {type(e).__name__} after skipping units outside this part"
                )
        others_in = all(
            r is not None or p.optional or p.name == part
            for p, r in part_status(experiment, out_dir, seed)
        )
        if not mode.computed and run_part.optional and others_in:
            ending += "; the run asked for none of this optional part's units"
        elif not mode.computed and ending != "the run reached its end":
            waiting = ", ".join(mode.skipped[:3]) + (" ..." if len(mode.skipped) > 3 else "")
            raise RuntimeError(
                f"part {part!r} computed no unit: nothing in the run matched its selection "
                f"{run_part.select} before the run used a unit outside it (units not on disk: "
                f"{waiting}; run the parts holding them first)"
            )
        blob = pickle.dumps(mode.computed, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as e:
        results.atomic_write_text(folder / "traceback.txt", traceback.format_exc())
        reason = f"{type(e).__name__}: {e} (traceback in {experiment.name}/parts/{part}/)"
        _error_record(record, reason, time.perf_counter() - start, time.process_time() - cpu_start)
        record["status"] = "error"
        _write_part_record(out_dir, record)
        return record
    results.atomic_write_bytes(folder / _UNITS_FILE, blob)
    record.update(
        status="done",
        wall_time_s=time.perf_counter() - start,
        cpu_time_s=time.process_time() - cpu_start,
        units=sorted(k for k in mode.computed if k != _WHOLE_RUN),
        # a part whose units the run did not need (an lr extension the bracket did not ask for)
        needed=bool(mode.computed),
        ending=ending,
        metrics={},
        figures=[],
        verdict={
            "status": "unresolved",
            "reason": f"part {part} of the full profile: the verdict is computed when every "
            "part is in",
            "parts": [],
        },
    )
    stale = folder / "traceback.txt"
    if stale.exists():
        stale.unlink()
    _write_part_record(out_dir, record)
    return record


def _load_units(out_dir, name: str, part: str) -> dict[str, Any]:
    path = _part_dir(out_dir, name, part) / _UNITS_FILE
    with open(path, "rb") as f:
        units = pickle.load(f)  # written by this runner (trusted, local)
    if not isinstance(units, dict):
        raise ValueError(f"{path} does not hold a dict of units")
    return units


def _missing_record(experiment: Experiment, seed: int, status) -> dict[str, Any]:
    record = _base_record(experiment, "full", seed)
    missing = [p for p, r in status if r is None]
    done = [r for _, r in status if r is not None]
    names = ", ".join(p.name for p in missing)
    record.update(
        wall_time_s=sum(r.get("wall_time_s") or 0.0 for r in done),
        cpu_time_s=sum(r.get("cpu_time_s") or 0.0 for r in done),
        metrics={},
        figures=[],
        parts=[_times(r) for r in done]
        + [
            {"name": p.name, "status": "missing", "estimated_device_s": p.device_s} for p in missing
        ],
        missing_parts=[p.name for p in missing],
        verdict={
            "status": "unresolved",
            "reason": f"{len(missing)} of {len(status)} parts of the full profile not on disk: "
            f"{names} (`jaxlab reproduce --profile full --resume {experiment.name}` runs them)",
            "parts": [
                registry.unresolved(
                    f"part {p.name}: {p.covers}",
                    f"not on disk; estimated {p.device_s:.0f} s on the device, {p.cpu_s:.0f} s on "
                    "the CPU",
                ).as_dict()
                for p in missing
            ],
        },
    )
    return record


def _merge_here(experiment: Experiment, seed: int, out_dir, progress) -> dict[str, Any]:
    """Merges the stored parts: the run function over their units, in the parts' order."""
    status = part_status(experiment, out_dir, seed)
    if any(r is None for _, r in status):
        record = _missing_record(experiment, seed, status)
        results.write_result(out_dir, record)
        return record
    record = _base_record(experiment, "full", seed)
    exp_dir = pathlib.Path(out_dir) / experiment.name
    start, cpu_start = time.perf_counter(), time.process_time()
    try:
        stored: dict[str, Any] = {}
        for p, _ in status:  # the declared order: the first part holding a unit wins
            for key, value in _load_units(out_dir, experiment.name, p.name).items():
                stored.setdefault(key, value)
        if _WHOLE_RUN in stored:  # a part that held the whole run: its result is the merge's
            result = stored[_WHOLE_RUN]
        else:
            with _parts.running(None, stored):
                config = experiment.make_config("full")
                result = experiment.run(config, jax.random.key(seed), progress)
    except Exception as e:
        results.atomic_write_text(exp_dir / "traceback.txt", traceback.format_exc())
        reason = f"merging the parts: {type(e).__name__}: {e} (traceback in {experiment.name}/)"
        _error_record(record, reason, time.perf_counter() - start, time.process_time() - cpu_start)
        record["parts"] = [_times(r) for _, r in status]
        results.write_result(out_dir, record)
        return record
    merge_wall, merge_cpu = time.perf_counter() - start, time.process_time() - cpu_start
    figures = []
    for fig_name, fig in result.figures.items():
        results.save_figure(fig, exp_dir / f"{fig_name}.png")
        figures.append(f"{fig_name}.png")
    record.update(
        wall_time_s=merge_wall + sum(r["wall_time_s"] for _, r in status),
        cpu_time_s=merge_cpu + sum(r.get("cpu_time_s") or 0.0 for _, r in status),
        merge_wall_time_s=merge_wall,
        merge_cpu_time_s=merge_cpu,
        parts=[_times(r) for _, r in status],
        missing_parts=[],
        metrics=result.metrics,
        figures=figures,
        verdict=result.verdict(),
    )
    stale = exp_dir / "traceback.txt"
    if stale.exists():
        stale.unlink()
    results.write_result(out_dir, record)
    return record


def finish_parts(
    experiment: Experiment,
    *,
    seed: int = 0,
    out_dir: str | os.PathLike = "results",
    progress: registry.Progress | None = None,
    timeout: float | None = None,
) -> dict[str, Any]:
    """The experiment's full record from its parts: merged when all are in, else ``unresolved``.

    The unresolved record names the missing parts (REPORT.md shows one row per missing part).
    """
    seed = check_seed(seed)
    status = part_status(experiment, out_dir, seed)
    if any(r is None for _, r in status):
        record = _missing_record(experiment, seed, status)
        results.write_result(out_dir, record)
        return record
    return run_experiment(
        experiment,
        profile="full",
        seed=seed,
        out_dir=out_dir,
        progress=progress,
        timeout=timeout,
        part=MERGE,
    )


def _is_current(record: dict[str, Any] | None, experiment: Experiment, profile: str) -> bool:
    if record is None or record.get("profile") != profile:
        return False
    if record.get("verdict", {}).get("status") not in registry.STATUSES:
        return False
    return record.get("code_version") == experiment.code_version()


def _reproduce_parts(experiment, seed, out_dir, resume, bar, timeout) -> dict[str, Any]:
    """Runs the full profile's parts (with ``resume``, only those not on disk), then merges."""
    name = experiment.name
    ran, errors = False, []
    for part, stored in part_status(experiment, out_dir, seed):
        if resume and stored is not None:
            bar.console.log(f"{name}/{part.name}: kept stored part (--resume)")
            continue
        record = run_experiment(
            experiment,
            profile="full",
            seed=seed,
            out_dir=out_dir,
            progress=RichProgress(bar, prefix=f"  {name}/{part.name}: "),
            timeout=timeout,
            part=part.name,
        )
        ran = True
        if record.get("status") != "done":
            errors.append(f"part {part.name}: {record['verdict']['reason']}")
        bar.console.log(
            f"{name}/{part.name}: {record.get('status', 'error')} "
            f"({record['wall_time_s']:.1f} s; estimated {part.cpu_s:.0f} s CPU, "
            f"{part.device_s:.0f} s device)"
        )
    stored = results.read_result(out_dir, name)
    if resume and not ran and _is_current(stored, experiment, "full") and stored.get("parts"):
        if not stored.get("missing_parts") and stored.get("seed") == seed:
            bar.console.log(f"{name}: kept stored merged full result (--resume)")
            return stored
    record = finish_parts(
        experiment,
        seed=seed,
        out_dir=out_dir,
        progress=RichProgress(bar, prefix=f"  {name} (merge): "),
        timeout=timeout,
    )
    if errors:  # a part that raised or timed out is an error of the run, not a missing part
        record["verdict"] = dict(
            record["verdict"],
            status="error",
            reason="; ".join(errors) + "; " + record["verdict"]["reason"],
        )
        results.write_result(out_dir, record)
    v = record["verdict"]
    bar.console.log(f"{name}: {v['status']} ({record['wall_time_s']:.1f} s over its parts)")
    return record


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

    At the ``full`` profile, an experiment with declared parts runs part by part (each in its own
    child under ``timeout``; with ``resume``, only the parts not on disk), and its verdict is
    merged from them when all are in (``unresolved``, naming the missing parts, until then).
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
                if profile == "full" and experiment.full_parts():
                    bar.update(overall, description=f"experiments: {name}")
                    records.append(
                        _reproduce_parts(experiment, seed, out_dir, resume, bar, timeout)
                    )
                    bar.advance(overall)
                    continue
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
