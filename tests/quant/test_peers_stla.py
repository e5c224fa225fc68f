"""benchmarks/peers_stla.py without the authors' code or torch: a clear message, exit 2."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest

from benchmarks import peers_stla

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_check_peer_names_what_is_missing(tmp_path):
    assert "JAXLAB_STLA_PEER must name a folder holding aespa.py" in peers_stla.check_peer({})
    (tmp_path / "aespa.py").write_text("")
    partial = peers_stla.check_peer({"JAXLAB_STLA_PEER": str(tmp_path)})
    assert "missing quant_utils.py, quantizer.py" in partial
    for name in ("quant_utils.py", "quantizer.py"):
        (tmp_path / name).write_text("")
    missing = peers_stla.check_peer({"JAXLAB_STLA_PEER": str(tmp_path)})
    assert "JAXLAB_TORCH_PYTHON" in missing and "torch" in missing
    # An interpreter without torch (this one, in jaxlab's environment) is named as such.
    env = {"JAXLAB_STLA_PEER": str(tmp_path), "JAXLAB_TORCH_PYTHON": sys.executable}
    try:
        import torch  # noqa: F401
    except ImportError:
        assert "cannot import torch" in peers_stla.check_peer(env)
    if peers_stla.check_peer() is not None:  # run() refuses too, before any work
        with pytest.raises(RuntimeError, match="JAXLAB_"):
            peers_stla.run(seeds=1, num_iters=1)


def test_main_exits_2_with_the_message(tmp_path):
    env = {
        "PATH": "/usr/bin:/bin",
        "JAXLAB_STLA_PEER": str(tmp_path / "absent"),
        "PYTHONPATH": str(ROOT),
    }
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.peers_stla", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert out.returncode == 2
    assert "JAXLAB_STLA_PEER must name a folder holding aespa.py" in out.stderr
    assert not (tmp_path / "stla_peer.json").exists()


def test_relative_error_is_the_trace_ratio():
    w = np.array([[1.0, 2.0]])
    h = np.array([[2.0, 1.0], [1.0, 3.0]])
    q = np.array([[1.0, 1.0]])  # delta (0, 1): 3 over w H wᵀ = 2 + 4 + 12 = 18
    assert peers_stla.relative_error(w, q, h) == pytest.approx(3.0 / 18.0)
