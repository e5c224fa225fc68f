"""The experiment registry, the runner, result writing and the ``jaxlab`` CLI."""

import dataclasses
import json

import jax
import numpy as np
import pytest

from jaxlab import cli
from jaxlab._src import experiments as registry
from jaxlab._src import results, runner

CALLS = {"ok": 0, "bad": 0}


@dataclasses.dataclass(frozen=True)
class _Config(registry.ExperimentConfig):
    n: int = 4

    @classmethod
    def smoke(cls):
        return cls(n=2)

    @classmethod
    def quick(cls):
        return cls()

    @classmethod
    def full(cls):
        return cls(n=8)


def _ok(config, rng_key, progress):
    import matplotlib.pyplot as plt

    CALLS["ok"] += 1
    x = jax.random.normal(rng_key, (config.n,))
    total = sum(progress.track(range(config.n), description="loop"))
    fig, ax = plt.subplots()
    ax.plot(np.asarray(x))
    return registry.Result(
        metrics={"x": x, "total": total, "nan": float("nan")},
        parts=[
            registry.check("sum of 0..n-1", str(total), total == config.n * (config.n - 1) // 2),
            registry.check("n is at least 2", str(config.n), config.n >= 2),
        ],
        figures={"trace": fig},
    )


def _failing(config, rng_key, progress):
    return registry.Result(metrics={}, parts=[registry.check("impossible", "1 < 0", 1 < 0)])


def _bad(config, rng_key, progress):
    CALLS["bad"] += 1
    raise FloatingPointError("diverged at step 3")


def _interrupt(config, rng_key, progress):
    raise KeyboardInterrupt


@pytest.fixture
def fake_experiments(monkeypatch):
    """Registers throw-away experiments and removes them afterwards."""
    registry._load_all()
    added = {"zz-ok": _ok, "zz-failing": _failing, "zz-bad": _bad, "zz-interrupt": _interrupt}
    for name, fn in added.items():
        registry.register(name, config=_Config, claim=f"claim of {name}")(fn)
    CALLS.update(ok=0, bad=0)
    yield list(added)
    for name in added:
        registry._REGISTRY.pop(name, None)


def test_register_rejects_bad_names_and_configs():
    with pytest.raises(ValueError, match="name"):
        registry.register("Bad_Name", config=_Config, claim="c")

    class NotAConfig:
        pass

    with pytest.raises(TypeError, match="config"):
        registry.register("ok-name", config=NotAConfig, claim="c")

    @dataclasses.dataclass(frozen=True)
    class MissingProfiles(registry.ExperimentConfig):
        @classmethod
        def smoke(cls):
            return cls()

    with pytest.raises(TypeError, match="quick"):
        registry.register("ok-name", config=MissingProfiles, claim="c")
    with pytest.raises(ValueError, match="profile"):
        _Config.for_profile("huge")


def test_unknown_name_suggests_close_matches(fake_experiments):
    with pytest.raises(KeyError, match="did you mean zz-ok"):
        registry.get("zz-okk")


def test_result_verdict_is_computed_from_parts():
    good = registry.Result({}, [registry.check("a", "m", True), registry.check("b", "m", True)])
    mixed = registry.Result({}, [registry.check("a", "m", True), registry.check("b", "m", False)])
    assert good.verdict()["status"] == "pass"
    assert mixed.verdict()["status"] == "fail"
    assert [p["status"] for p in mixed.verdict()["parts"]] == ["pass", "fail"]
    assert registry.Result({}, []).verdict()["status"] == "fail"


def test_run_writes_result_json_and_figure(fake_experiments, tmp_path):
    record = runner.run_experiment("zz-ok", profile="smoke", seed=3, out_dir=tmp_path)
    stored = json.loads((tmp_path / "zz-ok" / "result.json").read_text())
    assert stored == json.loads(json.dumps(results.jsonable(record)))
    for key in (
        "schema_version",
        "jaxlab_version",
        "jax_version",
        "git_commit",
        "device_kind",
        "seed",
        "profile",
        "wall_time_s",
        "metrics",
        "claim",
        "verdict",
        "code_version",
    ):
        assert key in stored, key
    assert stored["seed"] == 3 and stored["profile"] == "smoke"
    assert stored["verdict"]["status"] == "pass"
    assert len(stored["verdict"]["parts"]) == 2
    assert stored["metrics"]["nan"] == "nan"
    expected_x = np.asarray(jax.random.normal(jax.random.key(3), (2,)))
    np.testing.assert_allclose(stored["metrics"]["x"], expected_x, rtol=1e-6)
    png = (tmp_path / "zz-ok" / "trace.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list((tmp_path / "zz-ok").glob(".*tmp"))  # no temp files left behind


def test_same_seed_same_result(fake_experiments, tmp_path):
    a = runner.run_experiment("zz-ok", profile="smoke", seed=1, out_dir=tmp_path / "a")
    b = runner.run_experiment("zz-ok", profile="smoke", seed=1, out_dir=tmp_path / "b")
    np.testing.assert_array_equal(np.asarray(a["metrics"]["x"]), np.asarray(b["metrics"]["x"]))


def test_error_is_recorded_and_others_still_run(fake_experiments, tmp_path, capsys):
    rc = cli.main(
        ["reproduce", "zz-bad", "zz-ok", "zz-failing", "--profile", "smoke", "--out", str(tmp_path)]
    )
    assert rc == 1
    bad = json.loads((tmp_path / "zz-bad" / "result.json").read_text())
    assert bad["verdict"]["status"] == "error"
    assert "diverged at step 3" in bad["verdict"]["reason"]
    assert "FloatingPointError" in (tmp_path / "zz-bad" / "traceback.txt").read_text()
    assert (
        json.loads((tmp_path / "zz-ok" / "result.json").read_text())["verdict"]["status"] == "pass"
    )
    failing = json.loads((tmp_path / "zz-failing" / "result.json").read_text())
    assert failing["verdict"]["status"] == "fail"
    report = (tmp_path / "REPORT.md").read_text()
    assert "| zz-bad |" in report and "| zz-ok |" in report and "**fail**" in report
    assert "1 pass, 1 fail, 1 error, of 3 experiments" in report
    assert "](zz-ok/trace.png)" in report


def test_fail_verdict_exits_zero(fake_experiments, tmp_path):
    assert cli.main(["run", "zz-failing", "--profile", "smoke", "--out", str(tmp_path)]) == 0


def test_resume_skips_current_results(fake_experiments, tmp_path):
    args = ["reproduce", "zz-ok", "--profile", "smoke", "--out", str(tmp_path)]
    assert cli.main(args) == 0
    assert CALLS["ok"] == 1
    assert cli.main([*args, "--resume"]) == 0
    assert CALLS["ok"] == 1  # kept
    assert (
        cli.main(["reproduce", "zz-ok", "--profile", "quick", "--out", str(tmp_path), "--resume"])
        == 0
    )
    assert CALLS["ok"] == 2  # other profile: rerun


def test_interrupt_keeps_finished_results(fake_experiments, tmp_path):
    rc = cli.main(
        ["reproduce", "zz-ok", "zz-interrupt", "--profile", "smoke", "--out", str(tmp_path)]
    )
    assert rc == 130
    assert (
        json.loads((tmp_path / "zz-ok" / "result.json").read_text())["verdict"]["status"] == "pass"
    )
    assert "| zz-ok |" in (tmp_path / "REPORT.md").read_text()
    assert not (tmp_path / "zz-interrupt" / "result.json").exists()


def test_cli_bad_input(fake_experiments, tmp_path, capsys):
    assert cli.main(["run", "zz-okk", "--out", str(tmp_path)]) == 2
    assert "did you mean zz-ok" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", "zz-ok", "--profile", "huge"])
    assert exc.value.code == 2
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert cli.main(["run", "zz-ok", "--out", str(blocker / "sub")]) == 2
    assert "not writable" in capsys.readouterr().err
    assert cli.main(["reproduce", "zz-ok", "nope-nope", "--out", str(tmp_path)]) == 2


def test_cli_list_shows_registered(fake_experiments, capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "zz-ok" in out and "claim of zz-ok" in out


def test_atomic_write_never_leaves_partial_file(tmp_path, monkeypatch):
    target = tmp_path / "r.json"
    results.atomic_write_text(target, "old")

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(results.os, "replace", boom)
    with pytest.raises(OSError):
        results.atomic_write_text(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]
