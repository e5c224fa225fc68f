"""Every notebook in notebooks/ runs headless, top to bottom, at smoke size.

The notebooks a worker runs share one Jupyter kernel (started by the first, shut down after the
last): each begins with ``RESET_CELL``'s empty namespace, so a notebook that needs a name it
does not define still fails, while jax, jaxlab and their compiled programs are imported and
built once per worker instead of once per notebook (about 4.5 s each).
"""

import pathlib

import pytest

from jaxlab._src.notebooks import execute_notebook

NOTEBOOKS = sorted((pathlib.Path(__file__).parent.parent / "notebooks").glob("*.py"))


@pytest.fixture(scope="module")
def kernel_manager():
    from jupyter_client.manager import AsyncKernelManager
    from nbclient.util import run_sync

    manager = AsyncKernelManager(kernel_name="python3")
    yield manager
    if manager.has_kernel:
        run_sync(manager.shutdown_kernel)(now=True)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path, kernel_manager):
    notebook = execute_notebook(path, profile="smoke", timeout=300, kernel_manager=kernel_manager)
    code_cells = [c for c in notebook.cells if c.cell_type == "code"]
    assert code_cells, f"{path.name} has no code cells"
    errors = [
        o for c in code_cells for o in c.get("outputs", []) if o.get("output_type") == "error"
    ]
    assert not errors, f"{path.name} produced errors: {errors}"
    assert all(c.get("execution_count") for c in code_cells if c.source.strip()), (
        f"{path.name}: some code cells did not run"
    )


def test_a_shared_kernel_starts_each_notebook_from_an_empty_namespace(tmp_path, kernel_manager):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = tmp_path / "a" / "first.py"
    first.write_text(
        "# %%\nleft_behind = 1\nimport jax\njax.config.update('jax_enable_x64', True)\n"
    )
    second = tmp_path / "b" / "second.py"
    second.write_text(
        "# %%\nimport jax\nimport jax.numpy as jnp\n"
        "assert jnp.ones(1).dtype == jnp.float32\n"
        "import os\n"
        "print('left_behind' in dir(), os.path.basename(os.getcwd()))\n"
    )
    execute_notebook(first, kernel_manager=kernel_manager)
    notebook = execute_notebook(second, kernel_manager=kernel_manager)
    (cell,) = notebook.cells
    assert cell.outputs[0]["text"].strip() == "False b"
