"""The experiment registry, the runner, result writing and the ``jaxlab`` CLI."""

import dataclasses
import json

import jax
import numpy as np
import pytest

from jaxlab import cli
from jaxlab import experiments as registry
from jaxlab._src import results

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
    from matplotlib.figure import Figure

    CALLS["ok"] += 1
    x = jax.random.normal(rng_key, (config.n,))
    total = sum(progress.track(range(config.n), description="loop"))
    fig = Figure()
    ax = fig.subplots()
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


def _undecided(config, rng_key, progress):
    return registry.Result(
        metrics={},
        parts=[
            registry.check("holds", "1 > 0", 1 > 0),
            registry.check("CI above 1", "CI [0.8, 1.3]", False, resolved=False),
        ],
    )


def _sleepy(config, rng_key, progress):
    import time

    for _ in progress.track(range(1), description="sleeping"):
        time.sleep(300)  # far past any timeout the tests give
    return registry.Result(metrics={}, parts=[registry.check("woke up", "yes", True)])


def _quick(config, rng_key, progress):
    total = sum(progress.track(range(config.n), description="loop"))
    return registry.Result(metrics={"total": total}, parts=[registry.check("ran", "yes", True)])


@pytest.fixture
def fake_experiments(monkeypatch):
    """Registers throw-away experiments and removes them afterwards.

    The CLI's default wall limit runs each experiment in a child process; these tests check the
    runner itself (and count calls in this process), so they run with ``--timeout 0``'s default.
    The watchdog has its own test below.
    """
    monkeypatch.setattr(cli, "DEFAULT_TIMEOUT_S", dict.fromkeys(cli.PROFILES, 0.0))
    registry._load_all()
    added = {
        "zz-ok": _ok,
        "zz-failing": _failing,
        "zz-bad": _bad,
        "zz-interrupt": _interrupt,
        "zz-undecided": _undecided,
        "zz-sleepy": _sleepy,
        "zz-quick": _quick,
    }
    for name, fn in added.items():
        registry.register(name, config=_Config, claim=f"claim of {name}")(fn)
    CALLS.update(ok=0, bad=0)
    yield list(added)
    for name in added:
        registry.REGISTRY.pop(name, None)


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


def test_unresolved_parts_are_kept_apart_from_failures():
    undecided = registry.unresolved("b", "bias under the noise")
    assert undecided.status == "unresolved" and not undecided.passed
    # resolved=False wins over the comparison: the measurement cannot decide.
    assert registry.check("c", "m", True, resolved=False).status == "unresolved"
    some = registry.Result({}, [registry.check("a", "m", True), undecided])
    assert some.verdict()["status"] == "unresolved"
    assert some.verdict()["reason"] == "unresolved at this scale: b"
    both = registry.Result({}, [registry.check("a", "m", False), undecided])
    assert both.verdict()["status"] == "fail"
    assert both.verdict()["reason"] == "failed: a; unresolved at this scale: b"
    with pytest.raises(ValueError, match="status"):
        registry.Part("a", "m", "maybe")


def test_report_counts_unresolved_apart(fake_experiments, tmp_path, capsys):
    rc = cli.main(
        [
            "reproduce",
            "zz-ok",
            "zz-undecided",
            "zz-failing",
            "--profile",
            "smoke",
            "--out",
            str(tmp_path),
        ]
    )
    assert rc == 0
    report = (tmp_path / "REPORT.md").read_text()
    assert "**unresolved**" in report
    assert "1 pass, 1 fail, 1 unresolved (cannot be decided at this scale), 0 error" in report
    assert "unresolved" in capsys.readouterr().out
    # an unresolved result is a finished one: --resume keeps it
    assert (
        cli.main(
            ["reproduce", "zz-undecided", "--profile", "smoke", "--out", str(tmp_path), "--resume"]
        )
        == 0
    )


def test_run_writes_result_json_and_figure(fake_experiments, tmp_path):
    record = registry.run_experiment("zz-ok", profile="smoke", seed=3, out_dir=tmp_path)
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
    a = registry.run_experiment("zz-ok", profile="smoke", seed=1, out_dir=tmp_path / "a")
    b = registry.run_experiment("zz-ok", profile="smoke", seed=1, out_dir=tmp_path / "b")
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
    assert "1 pass, 1 fail, 0 unresolved (cannot be decided at this scale), 1 error, of 3" in report
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


def test_src_never_imports_the_experiments_package():
    import ast
    import pathlib

    import jaxlab._src

    for path in pathlib.Path(jaxlab._src.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                imported = [node.module or ""]
                if node.module == "jaxlab":
                    imported += [f"jaxlab.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module":
                imported = [a.value for a in node.args if isinstance(a, ast.Constant)]
            else:
                continue
            bad = [m for m in imported if m.startswith("jaxlab.experiments")]
            assert not bad, f"{path.name}:{node.lineno} imports {bad}"


def test_importing_the_experiments_leaves_the_matplotlib_backend_alone():
    import subprocess
    import sys

    code = (
        "import matplotlib; before = matplotlib.get_backend(); "
        "import jaxlab.experiments as e; e.names(); "
        "assert matplotlib.get_backend() == before, (before, matplotlib.get_backend()); "
        "import sys; assert 'matplotlib.pyplot' not in sys.modules"
    )
    env = {"MPLBACKEND": "svg", "JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]


CORRUPTIONS = {
    "not utf-8": b"\xff\xfe{\x00 broken",
    "a json list": b"[1, 2, 3]",
    "a json string": b'"pass"',
    "a string verdict": b'{"name": "zz-ok", "profile": "smoke", "verdict": "pass"}',
    "truncated": b'{"name": "zz-ok", "verdict": {"sta',
}


@pytest.mark.parametrize("resume", [False, True], ids=["fresh", "resume"])
@pytest.mark.parametrize("content", list(CORRUPTIONS.values()), ids=list(CORRUPTIONS))
def test_a_corrupted_result_is_rerun_like_a_truncated_one(
    fake_experiments, tmp_path, capsys, content, resume
):
    (tmp_path / "zz-ok").mkdir()
    (tmp_path / "zz-ok" / "result.json").write_bytes(content)
    args = ["reproduce", "zz-ok", "--profile", "smoke", "--out", str(tmp_path)]
    assert cli.main([*args, "--resume"] if resume else args) == 0
    assert CALLS["ok"] == 1  # rerun
    stored = json.loads((tmp_path / "zz-ok" / "result.json").read_text())
    assert stored["verdict"]["status"] == "pass"
    assert "| zz-ok |" in (tmp_path / "REPORT.md").read_text()
    if resume:
        assert "stored result unusable" in capsys.readouterr().err


def test_inspect_result_says_why_a_file_is_unusable(tmp_path):
    assert results.inspect_result(tmp_path, "x") == (None, "no stored result")
    (tmp_path / "x").mkdir()
    for content, why in [
        (b"\xff", "not UTF-8"),
        (b"[1]", "JSON list"),
        (b'{"verdict": 3}', "no verdict object"),
        (b"{", "not valid JSON"),
    ]:
        (tmp_path / "x" / "result.json").write_bytes(content)
        record, problem = results.inspect_result(tmp_path, "x")
        assert record is None and why in problem, (content, problem)


@pytest.mark.parametrize("seed", [str(2**70), str(2**32), "-1", "1.5", "seven"])
def test_seeds_outside_the_key_range_are_bad_input(fake_experiments, tmp_path, capsys, seed):
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", "zz-ok", "--seed", seed, "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert "seed" in capsys.readouterr().err
    assert CALLS["ok"] == 0
    with pytest.raises((ValueError, TypeError), match="seed"):
        registry.run_experiment("zz-ok", profile="smoke", seed=2**32, out_dir=tmp_path)


def test_largest_seed_runs(fake_experiments, tmp_path):
    assert cli.main(["run", "zz-ok", "--seed", str(2**32 - 1), "--out", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "zz-ok" / "result.json").read_text())["seed"] == 2**32 - 1


def test_cli_constants_match_their_sources():
    from jaxlab._src import runner

    assert cli.PROFILES == registry.PROFILES and cli.MAX_SEED == runner.MAX_SEED
    assert cli.DEFAULT_TIMEOUT_S == runner.DEFAULT_TIMEOUT_S


def test_an_experiment_past_its_timeout_is_stopped_and_the_others_still_run(
    fake_experiments, tmp_path
):
    import time

    start = time.perf_counter()
    args = ["reproduce", "zz-sleepy", "zz-quick", "--profile", "smoke", "--out", str(tmp_path)]
    assert cli.main([*args, "--timeout", "2"]) == 1
    assert time.perf_counter() - start < 60  # stopped, not slept through (300 s)
    sleepy = json.loads((tmp_path / "zz-sleepy" / "result.json").read_text())
    assert sleepy["verdict"]["status"] == "error"
    assert sleepy["verdict"]["reason"].startswith("timed out after 2 s")
    assert 2.0 <= sleepy["wall_time_s"] < 30
    quick = json.loads((tmp_path / "zz-quick" / "result.json").read_text())
    assert quick["verdict"]["status"] == "pass" and quick["metrics"]["total"] == 1
    report = (tmp_path / "REPORT.md").read_text()
    assert "timed out after 2 s" in report and "1 pass, 0 fail" in report and "1 error" in report


@pytest.mark.parametrize("timeout", ["-1", "nan", "inf", "soon"])
def test_a_bad_timeout_is_bad_input(fake_experiments, tmp_path, capsys, timeout):
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", "zz-ok", "--timeout", timeout, "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert "timeout must be" in capsys.readouterr().err
    with pytest.raises(ValueError, match="timeout"):
        registry.run_experiment("zz-ok", timeout=-1.0, out_dir=tmp_path)


def test_result_files_get_the_users_file_mode(fake_experiments, tmp_path):
    import os
    import stat

    old = os.umask(0o022)
    try:
        assert cli.main(["reproduce", "zz-ok", "--profile", "smoke", "--out", str(tmp_path)]) == 0
    finally:
        os.umask(old)
    for path in ["zz-ok/result.json", "zz-ok/trace.png", "REPORT.md"]:
        assert stat.S_IMODE((tmp_path / path).stat().st_mode) == 0o644, path


def test_an_interrupt_during_the_imports_exits_130_without_a_traceback(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jaxlab.cli",
            "run",
            "fab-hyperparameter",
            "--profile",
            "smoke",
            "--out",
            str(tmp_path),
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    time.sleep(0.8)  # inside the imports of JAX and the experiments (they take seconds)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted" in err and "Traceback" not in err, err[-2000:]


def test_timeout_zero_runs_in_this_process(fake_experiments, tmp_path):
    args = ["run", "zz-ok", "--profile", "smoke", "--out", str(tmp_path), "--timeout", "0"]
    assert cli.main(args) == 0
    assert CALLS["ok"] == 1  # counted here: no child process
