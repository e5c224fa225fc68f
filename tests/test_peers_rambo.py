"""benchmarks/peers_rambo.py without the authors' code or torch: a clear message, exit 2."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from benchmarks import peers_rambo


def test_check_peer_names_what_is_missing(tmp_path):
    assert "JAXLAB_RAMBO_PEER" in peers_rambo.check_peer({})
    assert "models/rambo.py" in peers_rambo.check_peer({"JAXLAB_RAMBO_PEER": str(tmp_path)})
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "rambo.py").write_text("")
    missing = peers_rambo.check_peer({"JAXLAB_RAMBO_PEER": str(tmp_path)})
    assert "JAXLAB_TORCH_PYTHON" in missing and "torch" in missing
    # An interpreter without torch (this one, in jaxlab's environment) is named as such.
    env = {"JAXLAB_RAMBO_PEER": str(tmp_path), "JAXLAB_TORCH_PYTHON": sys.executable}
    try:
        import torch  # noqa: F401
    except ImportError:
        assert "cannot import torch" in peers_rambo.check_peer(env)
    if peers_rambo.check_peer() is not None:  # run() refuses too, before any work
        with pytest.raises(RuntimeError, match="JAXLAB_"):
            peers_rambo.run(sweeps=2, burn_in=0)


def test_main_exits_2_with_the_message(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "JAXLAB_RAMBO_PEER": str(tmp_path / "absent")}
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.peers_rambo", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(pathlib.Path(__file__).parents[1])},
    )
    assert out.returncode == 2
    assert "JAXLAB_RAMBO_PEER must name a checkout of AnthonyZhangYan/RAMBO" in out.stderr
    assert not (tmp_path / "rambo_peer.json").exists()
