"""Writing results: atomic JSON, PNG figures, provenance, and the REPORT.md table."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import pathlib
import subprocess
import sys
import tempfile
from typing import Any

import numpy as np

SCHEMA_VERSION = 1

__all__ = [
    "SCHEMA_VERSION",
    "atomic_write_bytes",
    "atomic_write_text",
    "git_commit",
    "json_text",
    "jsonable",
    "inspect_result",
    "read_result",
    "save_figure",
    "write_report",
    "write_result",
]


def _user_file_mode() -> int:
    """``0o666`` less the process umask: the mode ``open()`` would give a new file."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Writes ``text`` to ``path`` through a temporary file and a rename (never half-written).

    The file gets the user's normal mode (``0o666`` less the umask), not ``mkstemp``'s 0600.
    """
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Writes ``data`` to ``path`` atomically, like :func:`atomic_write_text`."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _user_file_mode())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def jsonable(value: Any) -> Any:
    """Converts metrics (numpy/jax scalars and arrays, dataclasses, tuples) to JSON values.

    Non-finite floats become the strings ``"nan"``, ``"inf"``, ``"-inf"`` so the file stays valid
    JSON.
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if hasattr(value, "__array__") and not isinstance(value, (str, bytes)):
        arr = np.asarray(value)
        if arr.ndim == 0:
            return jsonable(arr.item())
        return [jsonable(v) for v in arr.tolist()]
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, (bool, int, str)) or value is None:
        return value
    if isinstance(value, np.generic):
        return jsonable(value.item())
    return str(value)


def git_commit() -> str:
    """The commit of the jaxlab checkout, or ``"unknown"`` outside a git work tree."""
    here = pathlib.Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def save_figure(fig: Any, path: str | os.PathLike) -> None:
    """Saves a matplotlib figure as PNG atomically (and closes it if pyplot manages it).

    Experiments build figures with ``matplotlib.figure.Figure``, which needs no backend and no
    pyplot; a figure made through pyplot is closed here so pyplot releases it.
    """
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".png")
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png")
        os.chmod(tmp, _user_file_mode())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is not None:
            pyplot.close(fig)


def json_text(record: dict[str, Any]) -> str:
    """``record`` as the indented JSON text of a result file."""
    return json.dumps(jsonable(record), indent=2, sort_keys=False) + "\n"


def write_result(out_dir: str | os.PathLike, record: dict[str, Any]) -> pathlib.Path:
    """Writes ``record`` as ``<out_dir>/<name>/result.json`` atomically; returns the path."""
    path = pathlib.Path(out_dir) / record["name"] / "result.json"
    atomic_write_text(path, json_text(record))
    return path


def inspect_result(out_dir: str | os.PathLike, name: str) -> tuple[dict[str, Any] | None, str]:
    """The stored result of ``name`` and ``""``, or ``None`` and why it cannot be used.

    A file that is missing, truncated, not UTF-8, not a JSON object, or whose ``verdict`` is not
    an object with a string ``status`` is unusable: the caller reruns the experiment.
    """
    path = pathlib.Path(out_dir) / name / "result.json"
    try:
        record = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        return None, "no stored result"
    except OSError as e:
        return None, f"{path} cannot be read ({e.strerror or e})"
    except UnicodeDecodeError:
        return None, f"{path} is not UTF-8 text"
    except json.JSONDecodeError as e:
        return None, f"{path} is not valid JSON ({e.msg} at line {e.lineno})"
    if not isinstance(record, dict):
        return None, f"{path} holds a JSON {type(record).__name__}, not an object"
    verdict = record.get("verdict")
    if not isinstance(verdict, dict) or not isinstance(verdict.get("status"), str):
        return None, f"{path} has no verdict object with a status"
    return record, ""


def read_result(out_dir: str | os.PathLike, name: str) -> dict[str, Any] | None:
    """The stored result of ``name`` under ``out_dir``, or None when absent or unusable."""
    return inspect_result(out_dir, name)[0]


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _seconds(value: Any) -> str:
    return f"{value:.1f}" if isinstance(value, int | float) else "–"


def _parts_section(records: list[dict[str, Any]]) -> list[str]:
    """The table of every full profile run in parts: each part's status and times."""
    rows = [rec for rec in records if rec.get("parts")]
    if not rows:
        return []
    lines = [
        "",
        "## Full profiles in parts",
        "",
        "Each part is one slice of a full profile (`jaxlab run NAME --profile full --part P`);",
        "the verdict above is merged from them when every part is in.",
        "",
        "| experiment | part | status | time (s) | CPU (s) | device | estimated device (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for rec in rows:
        for i, part in enumerate(rec["parts"]):
            lines.append(
                "| "
                + " | ".join(
                    [
                        _cell(rec["name"]) if i == 0 else "",
                        _cell(part.get("name", "")),
                        "**" + _cell(part.get("status", "")) + "**",
                        _seconds(part.get("wall_time_s")),
                        _seconds(part.get("cpu_time_s")),
                        _cell(part.get("device_kind") or "–"),
                        _seconds(part.get("estimated_device_s")),
                    ]
                )
                + " |"
            )
    return lines


def write_report(out_dir: str | os.PathLike, records: list[dict[str, Any]]) -> pathlib.Path:
    """Writes ``<out_dir>/REPORT.md``: one row per verdict part, with time and figure links."""
    lines = [
        "# jaxlab reproduction report",
        "",
        "Each row is one part of a paper's central claim, the value measured, and the verdict",
        "computed from it. Regenerate with `make reproduce` (or `jaxlab reproduce`).",
        "",
        "Times: wall seconds, and CPU seconds of the process that ran the experiment (a full",
        "profile run in parts: summed over its parts and their merge).",
        "",
        "| experiment | profile | claim | measured | verdict | time (s) | CPU (s) | figures |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for rec in records:
        verdict = rec.get("verdict", {})
        figs = " ".join(
            f"[{pathlib.Path(f).stem}]({rec['name']}/{f})" for f in rec.get("figures", [])
        )
        parts = verdict.get("parts") or [
            {
                "claim": rec.get("claim", ""),
                "measured": verdict.get("reason", ""),
                "status": verdict.get("status", "error"),
            }
        ]
        for i, part in enumerate(parts):
            lines.append(
                "| "
                + " | ".join(
                    [
                        _cell(rec["name"]) if i == 0 else "",
                        _cell(rec.get("profile", "")) if i == 0 else "",
                        _cell(part["claim"]),
                        _cell(part["measured"]),
                        "**" + part["status"] + "**",
                        _seconds(rec.get("wall_time_s")) if i == 0 else "",
                        _seconds(rec.get("cpu_time_s")) if i == 0 else "",
                        figs if i == 0 else "",
                    ]
                )
                + " |"
            )
    statuses = [rec.get("verdict", {}).get("status", "error") for rec in records]
    lines += _parts_section(records)
    lines += [
        "",
        f"Summary: {statuses.count('pass')} pass, {statuses.count('fail')} fail, "
        f"{statuses.count('unresolved')} unresolved (cannot be decided at this scale), "
        f"{statuses.count('error')} error, of {len(records)} experiments.",
        "",
    ]
    path = pathlib.Path(out_dir) / "REPORT.md"
    atomic_write_text(path, "\n".join(lines))
    return path
