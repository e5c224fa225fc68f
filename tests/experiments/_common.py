"""What every experiment's end-to-end test checks, in one place."""

from __future__ import annotations

import json

from jaxlab._src.results import read_result
from jaxlab.experiments import run_experiment


def stored_result(out_dir, name: str) -> dict:
    """The result.json that a run of ``name`` wrote under ``out_dir`` (it must exist)."""
    stored = read_result(out_dir, name)
    assert stored is not None, f"{out_dir}/{name}/result.json is missing or unreadable"
    return stored


def run_and_check(
    name: str,
    out_dir,
    *,
    profile: str,
    num_parts: int,
    figures: set[str],
    allow_unresolved: bool = False,
):
    """Runs ``name``, checks what every run must write, and returns the stored result.

    The stored verdict equals the returned one, the run completed (``pass`` or ``fail``, never
    ``error``), it has ``num_parts`` computed parts each with a measurement, and it wrote at least
    ``figures``, none of them empty. ``allow_unresolved`` admits ``unresolved`` parts (and so an
    ``unresolved`` verdict): an experiment whose smoke size cannot decide a part by design says so
    rather than failing it; the caller then checks each part's status against its own metrics.
    """
    record = run_experiment(name, profile=profile, out_dir=out_dir)
    stored = stored_result(out_dir, name)
    assert stored["verdict"] == json.loads(json.dumps(record["verdict"]))
    verdict = stored["verdict"]
    completed = ("pass", "fail", "unresolved") if allow_unresolved else ("pass", "fail")
    assert verdict["status"] in completed, verdict  # not "error": the run completed
    assert len(verdict["parts"]) == num_parts
    assert all(p["status"] in completed and p["measured"] for p in verdict["parts"])
    assert figures <= set(stored["figures"])
    for figure in stored["figures"]:
        assert (out_dir / name / figure).stat().st_size > 0
    return stored
