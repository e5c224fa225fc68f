"""Test configuration shared by the whole suite.

Eight simulated CPU devices are configured before any JAX operation, so mesh and shard_map tests
run on one machine. Rank promotion raises everywhere (silent broadcasting is a bug); strict dtype
promotion is applied only around jaxlab's own code (see ``tests/batteries.py``), because optax's
adam and muon promote dtypes internally. float64 is never switched on globally: use the ``x64``
fixture or ``jax.enable_x64(True)`` as a context manager. Compiled executables are cached on disk
under ``.pytest_cache/jax-compilation`` (delete it to measure cold compile times).
"""

import os
import pathlib

os.environ.setdefault("JAXLAB_NOTEBOOK_PROFILE", "smoke")
os.environ.setdefault("MPLBACKEND", "Agg")
# A persistent compilation cache shared by the xdist workers and the notebook kernels (which
# inherit the environment): a notebook that reruns an experiment's smoke profile reuses the
# executables its experiment test compiled. Keys cover the program, options and jax version.
os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR",
    str(pathlib.Path(__file__).resolve().parent.parent / ".pytest_cache" / "jax-compilation"),
)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")
# Executables are cached per device count: the notebook kernels (which read this variable) get
# the same 8 simulated CPU devices as the test workers, so a notebook that reruns its
# experiment's smoke profile hits the programs the experiment test compiled.
os.environ.setdefault("JAX_NUM_CPU_DEVICES", "8")
# Smoke-size runs are dominated by XLA compile time, not execution: LLVM's backend optimisation
# level 0 compiles about 40% faster. Only the test suite sets it (experiments, notebooks run by
# `make notebooks` and benchmarks compile at XLA's default level).
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0"
    ).strip()

import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
jax.config.update("jax_numpy_rank_promotion", "raise")

import pytest  # noqa: E402

NUM_DEVICES = 8


@pytest.fixture
def x64():
    """Runs the test body with float64 enabled, scoped to that test."""
    with jax.enable_x64(True):
        yield


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: quick-profile claim checks (excluded by make test)")
