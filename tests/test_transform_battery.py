"""Runs the shared battery (tests/batteries.py) on every registered jaxlab transform."""

import pytest

from tests.batteries import CHECK_NAMES, TRANSFORM_CASES, run_check

_PAIRS = [(case, check) for case in TRANSFORM_CASES for check in CHECK_NAMES]


def test_case_names_are_unique():
    names = [case.name for case in TRANSFORM_CASES]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    assert not duplicates, f"TRANSFORM_CASES has duplicate names: {duplicates}"


@pytest.mark.parametrize(
    ("case", "check"), _PAIRS, ids=[f"{case.name}-{check}" for case, check in _PAIRS]
)
def test_transform_battery(case, check):
    run_check(case, check)
