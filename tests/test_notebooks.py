"""Every notebook in notebooks/ runs headless, top to bottom, at smoke size."""

import pathlib

import pytest

from jaxlab._src.notebooks import execute_notebook

NOTEBOOKS = sorted((pathlib.Path(__file__).parent.parent / "notebooks").glob("*.py"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path):
    notebook = execute_notebook(path, profile="smoke", timeout=300)
    code_cells = [c for c in notebook.cells if c.cell_type == "code"]
    assert code_cells, f"{path.name} has no code cells"
    errors = [
        o for c in code_cells for o in c.get("outputs", []) if o.get("output_type") == "error"
    ]
    assert not errors, f"{path.name} produced errors: {errors}"
    assert all(c.get("execution_count") for c in code_cells if c.source.strip()), (
        f"{path.name}: some code cells did not run"
    )
