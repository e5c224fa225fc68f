"""The README's quickstart runs as printed, and its first commands are the two make targets."""

import pathlib
import re

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def test_readme_opens_with_the_two_commands():
    head = "\n".join(README.read_text().splitlines()[:20])
    assert "make reproduce" in head and "make test" in head


def test_quickstart_runs_and_trains(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python quickstart"
    namespace: dict = {}
    exec(compile(blocks[0], "README.md:quickstart", "exec"), namespace)
    out = capsys.readouterr().out
    final = float(re.search(r"final loss ([0-9.eE+-]+)", out).group(1))
    y = namespace["y"]
    initial = float(((y - y.mean()) ** 2).mean())  # loss of the best constant predictor
    assert final < 0.25 * initial, (final, initial)


def _section_blocks(title: str) -> list[str]:
    text = README.read_text()
    start = text.index(f"## {title}")
    end = text.index("\n## ", start + 1)
    return re.findall(r"```python\n(.*?)```", text[start:end], flags=re.S)


def test_across_devices_examples_run(tmp_path, monkeypatch, capsys):
    single_host, module, launcher = _section_blocks("Across devices and hosts")
    exec(compile(single_host, "README.md:across-devices", "exec"), {})
    assert capsys.readouterr().out.split() == ["True", "True"]
    # The launch example: its module is written where the spawned processes can import it.
    (tmp_path / "my_workers.py").write_text(module)
    monkeypatch.syspath_prepend(str(tmp_path))
    exec(compile(launcher, "README.md:launch", "exec"), {})
    out = capsys.readouterr().out
    assert out.count("0.85") == 6, out  # 2 processes x 3 entries
