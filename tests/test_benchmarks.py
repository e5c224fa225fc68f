"""Each benchmark runs at smoke size and reports ratios measured in the same run."""

import importlib

import pytest

from benchmarks.__main__ import available


@pytest.mark.parametrize("name", available())
def test_benchmark_smoke(name):
    report = importlib.import_module(f"benchmarks.bench_{name}").run("smoke")
    assert report["name"] and report["peer"]
    assert report["rows"], "a benchmark must measure something"
    for row in report["rows"]:
        assert row["step_time_s"] > 0 and row["peer_step_time_s"] > 0
        assert row["ratio"] == pytest.approx(row["step_time_s"] / row["peer_step_time_s"])
        if row.get("target_ratio") is not None:
            assert row["meets_target"] == (row["ratio"] <= row["target_ratio"])
