"""benchmarks/peers_hom_pgd.py without the authors' code or torch: a clear message, exit 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchmarks import peers_hom_pgd


def test_check_peer_names_what_is_missing(tmp_path):
    assert "JAXLAB_HOMPGD_PEER" in peers_hom_pgd.check_peer({})
    (tmp_path / "homopt_peer.py").write_text("")
    missing = peers_hom_pgd.check_peer({"JAXLAB_HOMPGD_PEER": str(tmp_path)})
    assert "JAXLAB_TORCH_PYTHON" in missing and "torch" in missing
    # An interpreter without torch (this one, in jaxlab's environment) is named as such.
    env = {"JAXLAB_HOMPGD_PEER": str(tmp_path), "JAXLAB_TORCH_PYTHON": sys.executable}
    try:
        import torch  # noqa: F401
    except ImportError:
        assert "cannot import torch" in peers_hom_pgd.check_peer(env)
    if peers_hom_pgd.check_peer() is not None:  # run() refuses too, before any work
        with pytest.raises(RuntimeError, match="JAXLAB_"):
            peers_hom_pgd.run(steps=1, num_instances=1)


def test_main_exits_2_with_the_message(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "JAXLAB_HOMPGD_PEER": str(tmp_path / "absent")}
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.peers_hom_pgd", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(__import__("pathlib").Path(__file__).parents[1])},
    )
    assert out.returncode == 2
    assert "JAXLAB_HOMPGD_PEER must name a folder holding homopt_peer.py" in out.stderr
    assert not (tmp_path / "hom_pgd_peer.json").exists()
