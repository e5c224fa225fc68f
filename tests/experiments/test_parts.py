"""A full profile in parts: part runs, the merged verdict, resume and plan (issue 45).

A tiny registered experiment of three parts (one seed each) runs in this process (``--timeout
0``: the watchdog's spawn is not what these tests check; ``tests/test_runner.py`` covers it).
"""

from __future__ import annotations

import dataclasses
import json
import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import cli
from jaxlab import experiments as registry
from jaxlab._src import experiments as _experiments
from jaxlab._src import parts as _parts
from jaxlab._src import runner

NAME = "zz-parts"
CALLS: list[int] = []  # the seeds whose unit was computed, in order


@dataclasses.dataclass(frozen=True)
class PartsConfig(_experiments.ExperimentConfig):
    seeds: int = 3
    size: int = 64

    @classmethod
    def smoke(cls):
        return cls(seeds=2, size=8)

    @classmethod
    def quick(cls):
        return cls()

    @classmethod
    def full(cls):
        return cls()


def _seed_mean(config, key, seed):
    CALLS.append(seed)
    return {"mean": jnp.mean(jax.random.normal(key, (config.size,))), "seed": seed}


def _run(config, rng_key, progress):
    keys = jax.random.split(rng_key, config.seeds)
    per_seed = [
        registry.unit({"seed": s}, lambda s=s: _seed_mean(config, keys[s], s))
        for s in progress.track(range(config.seeds), description="seeds")
    ]
    means = np.array([float(r["mean"]) for r in per_seed])  # the aggregation ends a part's run
    spread = float(np.std(means))
    return registry.Result(
        {"means": means.tolist(), "spread": spread},
        [
            registry.check("means are near 0", f"max |mean| {np.abs(means).max():.4f}", True),
            registry.check("seeds differ", f"spread {spread:.4f}", spread > 0),
        ],
    )


def _parts_of(config):
    return [
        _parts.RunPart(
            f"seed-{s}",
            f"seed {s} of {config.seeds}",
            {"seed": (s,)},
            cpu_s=1.0 + s,
            device_s=0.5,
            estimate="a test part",
        )
        for s in range(config.seeds)
    ]


@pytest.fixture
def parts_experiment():
    registry.names()  # load the real experiments first
    _experiments.register(NAME, config=PartsConfig, claim="means of normal draws are near 0")(_run)
    _parts.declare_parts(NAME, _parts_of)
    CALLS.clear()
    yield registry.get(NAME)
    _experiments.REGISTRY.pop(NAME, None)


def _cli(*argv):
    return cli.main([*argv, "--timeout", "0"])


def test_parts_in_any_order_merge_to_the_one_piece_verdict(parts_experiment, tmp_path):
    whole, pieces = tmp_path / "whole", tmp_path / "pieces"
    one_piece = registry.run_experiment(NAME, profile="full", out_dir=whole)
    assert CALLS == [0, 1, 2]

    CALLS.clear()
    assert _cli("run", NAME, "--profile", "full", "--part", "seed-2", "--out", str(pieces)) == 0
    assert _cli("run", NAME, "--profile", "full", "--part", "seed-0", "--out", str(pieces)) == 0
    assert CALLS == [2, 0]  # each part computed its own seed only
    pending = json.loads((pieces / NAME / "result.json").read_text())
    assert pending["verdict"]["status"] == "unresolved"
    assert pending["missing_parts"] == ["seed-1"]
    assert "seed-1" in pending["verdict"]["reason"]
    part_record = json.loads((pieces / NAME / "parts" / "seed-0" / "result.json").read_text())
    assert part_record["units"] == ['{"seed": 0}']
    assert part_record["wall_time_s"] > 0 and part_record["cpu_time_s"] >= 0

    # resume runs only the missing part, then merges; REPORT.md names nothing as missing.
    CALLS.clear()
    code = _cli("reproduce", NAME, "--profile", "full", "--resume", "--out", str(pieces))
    assert code == 0 and CALLS == [1]
    merged = json.loads((pieces / NAME / "result.json").read_text())
    assert merged["verdict"] == one_piece["verdict"]
    assert merged["metrics"] == json.loads((whole / NAME / "result.json").read_text())["metrics"]
    assert [p["name"] for p in merged["parts"]] == ["seed-0", "seed-1", "seed-2"]
    assert merged["missing_parts"] == [] and merged["cpu_time_s"] >= merged["merge_cpu_time_s"]
    report = (pieces / "REPORT.md").read_text()
    assert "## Full profiles in parts" in report and "| seed-1 | **done** |" in report
    assert "| time (s) | CPU (s) |" in report

    # everything on disk: resume keeps it all and computes nothing.
    CALLS.clear()
    assert _cli("reproduce", NAME, "--profile", "full", "--resume", "--out", str(pieces)) == 0
    assert CALLS == []


def test_a_part_runs_under_the_watchdog_and_declarations_travel_to_the_child(
    parts_experiment, tmp_path
):
    record = runner.run_experiment(
        parts_experiment, profile="full", out_dir=tmp_path, part="seed-1", timeout=120
    )
    assert record["status"] == "done" and record["units"] == ['{"seed": 1}']
    assert record["cpu_time_s"] > 0  # the child's own process time
    # The table's declarations travel to a child by name.
    fab = registry.get("fab-hyperparameter")
    assert pickle.loads(pickle.dumps(fab)).full_parts() == fab.full_parts()


def test_the_table_declares_every_experiment_and_binds_its_units_in_any_process():
    from jaxlab.experiments import _parts_table, hom_pgd

    assert sorted(_parts_table.TABLE) == registry.names()
    assert hom_pgd._run_size.__wrapped_unit__ is not None
    # A fresh process (a spawned child) has the module's own functions until the parts are read.
    bound = {
        u.attribute: getattr(hom_pgd, u.attribute) for u in _parts_table.TABLE["hom-pgd"].units
    }
    try:
        for attribute, fn in bound.items():
            setattr(hom_pgd, attribute, fn.__wrapped_unit__)
        declared = pickle.loads(pickle.dumps(registry.get("hom-pgd").parts_fn))
        assert declared == _parts_table.Declared("hom-pgd")
        assert [p.name for p in declared(hom_pgd.HomPGDConfig.full())][:2] == ["star", "qcqp"]
        assert all(hasattr(getattr(hom_pgd, a), "__wrapped_unit__") for a in bound)
    finally:
        for attribute, fn in bound.items():
            setattr(hom_pgd, attribute, fn)


def test_report_names_the_missing_parts(parts_experiment, tmp_path):
    registry.run_experiment(NAME, profile="full", out_dir=tmp_path, part="seed-1")
    registry.reproduce([NAME], profile="full", out_dir=tmp_path, resume=True, console=_quiet())
    assert sorted(CALLS) == [0, 1, 2]
    (tmp_path / NAME / "parts" / "seed-0" / "units.pkl").unlink()  # a lost part is missing again
    record = runner.finish_parts(parts_experiment, out_dir=tmp_path)
    assert record["verdict"]["status"] == "unresolved" and record["missing_parts"] == ["seed-0"]
    from jaxlab._src import results

    results.write_report(tmp_path, [record])
    report = (tmp_path / "REPORT.md").read_text()
    assert "part seed-0: seed 0 of 3" in report and "**unresolved**" in report
    assert "| seed-0 | **missing** |" in report


def test_a_stale_or_other_seed_part_is_rerun(parts_experiment, tmp_path):
    registry.run_experiment(NAME, profile="full", out_dir=tmp_path, part="seed-0")
    stored = {p.name: r for p, r in runner.part_status(parts_experiment, tmp_path)}
    assert stored["seed-0"] is not None and stored["seed-1"] is None
    assert all(r is None for _, r in runner.part_status(parts_experiment, tmp_path, seed=5))
    path = tmp_path / NAME / "parts" / "seed-0" / "result.json"
    path.write_text(path.read_text().replace(parts_experiment.code_version(), "0" * 16))
    assert all(r is None for _, r in runner.part_status(parts_experiment, tmp_path))


def test_a_unit_no_part_selects_is_an_error_at_merge(parts_experiment, tmp_path):
    two = lambda config: _parts_of(config)[:2]  # noqa: E731 (seed 2 in no part)
    _parts.declare_parts(NAME, two)
    for part in ("seed-0", "seed-1"):
        registry.run_experiment(NAME, profile="full", out_dir=tmp_path, part=part)
    record = json.loads((tmp_path / NAME / "result.json").read_text())
    assert record["verdict"]["status"] == "error"
    assert (
        '{"seed": 2}' in record["verdict"]["reason"]
        and "no stored part" in record["verdict"]["reason"]
    )


def test_bad_part_requests_are_bad_input(parts_experiment, tmp_path, capsys):
    assert _cli("run", NAME, "--profile", "quick", "--part", "seed-0", "--out", str(tmp_path)) == 2
    assert "--part needs --profile full" in capsys.readouterr().err
    assert _cli("run", NAME, "--profile", "full", "--part", "seed-9", "--out", str(tmp_path)) == 2
    assert "seed-0, seed-1, seed-2" in capsys.readouterr().err
    with pytest.raises(ValueError, match="name must be lower-case"):
        _parts.RunPart("Seed 0", "x", {}, cpu_s=1, device_s=1, estimate="e")
    with pytest.raises(ValueError, match="device_s must be a finite number"):
        _parts.RunPart("seed-0", "x", {}, cpu_s=1, device_s=float("inf"), estimate="e")
    with pytest.raises(TypeError, match=r"select\['seed'\] must be a tuple"):
        _parts.RunPart("seed-0", "x", {"seed": 0}, cpu_s=1, device_s=1, estimate="e")


def test_plan_prints_every_part_and_the_totals(parts_experiment, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # rich wraps to the terminal (80 columns when piped)
    registry.run_experiment(NAME, profile="full", out_dir=tmp_path, part="seed-0")
    capsys.readouterr()
    assert cli.main(["plan", NAME, "--out", str(tmp_path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for part in ("seed-0", "seed-1", "seed-2"):
        assert part in out
    assert "total: 6 s" in out and "3 parts" in out  # CPU 1 + 2 + 3
    assert "done" in out and "missing" in out
    assert "not yet stored under" in out and ": 1 s on the device" in out


# Experiments whose full profile has parts over one device call at the stated estimates, and
# why; a part that newly goes over fails the test below (issue 45 asks for <= 8 minutes each).
NOT_YET_FITTING = {
    "apub-product-mix": "whole run; HiGHS solves stay on the host (no device speed-up)",
    "async-delay": "one 10,000-step lane at d 256 is 9 to 12 min at the assumed device rate "
    "(545 s; DeVA's 700 s); "
    "cut by steps (scan_train's opt_state and start_step) a lane would carry its parameters and "
    "optimizer state, ~80 MB, from one device call to the next, for each of 288 lanes",
    "credro": "whole run; the seeds are vmapped inside one training call",
    "disjunctive-rules": "one task is ~8.2 min: the seeds are vmapped inside each task",
    "harm": "whole run; the seeds are vmapped inside each optimizer's arms",
    "hom-pgd": "the n = 50 speed cases (crude estimates: not timed at any profile)",
    "rambo": "whole run (its quick never finished: a lower bound scaled up)",
    "stochastic-vi": "the d = 200 settings (~44 min each at the estimate): their seeds and arms "
    "are vmapped inside each solver class's program",
    "tsrl": "the sequence arms (each its lr bracket and held-out run over 20 seeds x 2,000 steps, "
    "the equal-calls arm 16,000) are 44 to 137 min each at the estimate (quick's sections not "
    "timed apart: assumed shares); the bracket's runs depend on each other",
}


def test_every_registered_full_profile_is_in_parts_with_estimates():
    for name in registry.names():
        declared = registry.parts(name)
        assert declared, f"{name} declares no parts for its full profile"
        assert all(p.estimate and p.cpu_s > 0 and p.device_s > 0 for p in declared)
        over = [p.name for p in declared if p.device_s > _parts.DEVICE_PART_LIMIT_S]
        if name in NOT_YET_FITTING:
            assert over, f"{name} now fits: remove it from NOT_YET_FITTING"
        else:
            assert not over, f"{name}: parts over {_parts.DEVICE_PART_LIMIT_S} s: {over}"


def test_a_part_ends_at_the_runs_failure_on_a_skipped_unit_but_not_at_its_own_error():
    part = _parts.RunPart("a", "a", {"arm": ("x",)}, 1, 1, "e")

    def run(fail_inside):
        out = {}
        for arm in ("x", "y"):
            value = _parts.unit({"arm": arm}, lambda arm=arm: 1 / (arm != "x" or not fail_inside))
            if value is _parts.SKIPPED:
                continue
            out[arm] = value
        return out["y"]  # KeyError in a part that skipped "y"

    with _parts.running(part, {}) as mode:
        with pytest.raises(KeyError):
            run(fail_inside=False)
    assert not mode.unit_raised and mode.skipped == ['{"arm": "y"}']
    with _parts.running(part, {}) as mode:
        with pytest.raises(ZeroDivisionError):
            run(fail_inside=True)
    assert mode.unit_raised


def test_skipped_units_stop_a_part_when_used():
    with _parts.running(_parts.RunPart("a", "a", {"seed": (0,)}, 1, 1, "e"), {}) as mode:
        assert _parts.unit({"seed": 0}, lambda: 3) == 3
        skipped = _parts.unit({"seed": 1}, lambda: 4)
        assert skipped is _parts.SKIPPED and skipped["loss"].shape is _parts.SKIPPED
        with pytest.raises(_parts.PartStopped):
            float(skipped)
        with pytest.raises(_parts.PartStopped):
            np.asarray(skipped)
        pair = _parts.as_unit(lambda seed: (seed, -seed), lambda seed: {"seed": seed}, outputs=2)
        first, second = pair(2)  # skipped, and still unpacks as the run expects
        assert first is _parts.SKIPPED and second is _parts.SKIPPED
    assert mode.computed == {'{"seed": 0}': 3} and mode.skipped == ['{"seed": 1}', '{"seed": 2}']


def _quiet():
    import io

    from rich.console import Console

    return Console(file=io.StringIO())


_TIMING_KEYS = ("seconds", "time_s", "timings")


def _without_timings(value):
    if isinstance(value, dict):
        return {
            k: _without_timings(v)
            for k, v in value.items()
            if not (isinstance(k, str) and any(t in k for t in _TIMING_KEYS))
        }
    if isinstance(value, list | tuple):
        return [_without_timings(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def _one_piece_and_merged(name: str, profile: str = "smoke"):
    """The run in one piece, and run part by part (the table's parts of the ``profile`` config)
    then merged from the parts' units, as the runner does for the full profile."""
    experiment = registry.get(name)
    config, key = experiment.make_config(profile), jax.random.key(0)
    declared = experiment.parts_fn(config)
    one_piece = experiment.run(config, key)
    stored: dict = {}
    for part in declared:
        with _parts.running(part, stored) as mode:
            try:
                experiment.run(config, key)
            except _parts.PartStopped:
                pass
            except Exception:
                if mode.unit_raised or not mode.skipped:
                    raise
        assert mode.computed, f"{name}: part {part.name} computed no unit"
        stored.update(mode.computed)
    with _parts.running(None, stored):
        merged = experiment.run(config, key)
    return declared, one_piece, merged


@pytest.mark.slow
@pytest.mark.parametrize("name", ["stochastic-vi", "tsrl"])
def test_parts_of_a_real_experiment_merge_to_its_one_piece_run(name):
    declared, one_piece, merged = _one_piece_and_merged(name)
    assert len(declared) > 1
    assert merged.verdict() == one_piece.verdict()
    assert _without_timings(merged.metrics) == _without_timings(one_piece.metrics)
