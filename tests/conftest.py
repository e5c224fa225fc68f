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
# Every program is cached, not only those above jax's default one second of compile time: most
# of the suite's programs compile in tens of milliseconds, and reading one back costs a few.
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
# Executables are cached per device count: the notebook kernels (which read this variable) get
# the same 8 simulated CPU devices as the test workers, so a notebook that reruns its
# experiment's smoke profile hits the programs the experiment test compiled.
os.environ.setdefault("JAX_NUM_CPU_DEVICES", "8")
# Smoke-size runs are dominated by XLA compile time, not execution. Only the test suite sets these
# flags (experiments, notebooks run by `make notebooks` and benchmarks compile with XLA's
# defaults); each is measured on the suite, cold cache, 2 cores:
# - LLVM backend optimisation level 0: about 40% less compile time.
# - XLA:CPU's classic elemental fusion emitters instead of the MLIR fusion emitters: half the
#   remaining compile time (64 s -> 28 s on the DeVA, Hom-PGD and transform-battery tests). The
#   generated code runs slower, so the few execution-bound tests compile with
#   ``tests.conftest.EXECUTION_BOUND`` (XLA's default emitters and optimisation level).
# - One LLVM module per program instead of parallel codegen splits: the two xdist workers
#   already occupy both cores, so the split only adds work (about 20% less compile time).
_TEST_XLA_FLAGS = {
    "xla_backend_optimization_level": "0",
    "xla_cpu_use_fusion_emitters": "false",
    "xla_cpu_parallel_codegen_split_count": "1",
}
for _flag, _value in _TEST_XLA_FLAGS.items():
    if _flag not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" --{_flag}={_value}").strip()

# ``jax.jit(..., compiler_options=EXECUTION_BOUND)`` for the Monte Carlo tests whose run time is
# execution, not compilation (thousands of steps over thousands of particles).
EXECUTION_BOUND = {"xla_backend_optimization_level": 2, "xla_cpu_use_fusion_emitters": True}

import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
jax.config.update("jax_numpy_rank_promotion", "raise")

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

NUM_DEVICES = 8

# CI (CI=true) draws the same hypothesis examples on every run, so a landing never depends on a
# lucky or unlucky draw; a developer's runs keep exploring new examples (and .hypothesis/ keeps
# the failures they find for replay).
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
    settings.load_profile("ci")


@pytest.fixture
def x64():
    """Runs the test body with float64 enabled, scoped to that test."""
    with jax.enable_x64(True):
        yield


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: quick-profile claim checks (excluded by make test)")
