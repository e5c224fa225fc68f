"""Runs the solver battery (tests/batteries.py, SOLVER section) on every registered solver."""

import inspect

import jax
import pytest

from jaxlab import solvers
from jaxlab._src.solver import IterativeSolver
from tests.batteries import SOLVER_CASES, SOLVER_CHECK_NAMES, run_solver_check

_PAIRS = [(case, check) for case in SOLVER_CASES for check in SOLVER_CHECK_NAMES]


def test_solver_case_names_are_unique():
    names = [case.name for case in SOLVER_CASES]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    assert not duplicates, f"SOLVER_CASES has duplicate names: {duplicates}"


def test_every_public_solver_is_registered():
    public = {
        name
        for name in solvers.__all__
        if inspect.isclass(getattr(solvers, name))
        and issubclass(getattr(solvers, name), IterativeSolver)
    }
    registered = set()
    for case in SOLVER_CASES:
        with jax.enable_x64(case.x64):  # building a case constructs the solver, compiles nothing
            registered.add(type(case.make().solver).__name__)
    missing = sorted(public - registered)
    assert not missing, f"public solvers without a SolverCase in tests/batteries.py: {missing}"


@pytest.mark.parametrize(
    ("case", "check"), _PAIRS, ids=[f"{case.name}-{check}" for case, check in _PAIRS]
)
def test_solver_battery(case, check):
    run_solver_check(case, check)
