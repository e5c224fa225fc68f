"""Executing the jupytext notebooks in ``notebooks/`` headless (tests and ``make notebooks``).

Notebooks read ``JAXLAB_NOTEBOOK_PROFILE`` (``smoke`` in tests, about ten seconds each; ``quick``
for ``make notebooks``) to size themselves. Run as ``python -m jaxlab._src.notebooks FOLDER`` to
write the executed ``.ipynb`` (with figures) next to each ``.py``.
"""

from __future__ import annotations

import os
import pathlib
import sys

__all__ = ["RESET_CELL", "execute_notebook", "main"]

# Run first in a shared kernel: a clean namespace, the profile, the notebook's folder as the
# working directory, float32 (some notebooks switch float64 on for their session) and no
# figures left open.
RESET_CELL = """\
%reset -f
import os as _os
_os.environ["JAXLAB_NOTEBOOK_PROFILE"] = {profile!r}
_os.chdir({folder!r})
import jax as _jax
import matplotlib.pyplot as _plt
_jax.config.update("jax_enable_x64", False)
_plt.close("all")
del _os, _jax, _plt
"""


def execute_notebook(
    path: str | os.PathLike,
    *,
    profile: str = "smoke",
    timeout: int = 600,
    write_ipynb: bool = False,
    kernel_manager=None,
):
    """Converts a percent-format ``.py`` notebook with jupytext and executes it with nbclient.

    Args:
      path: the notebook's ``.py`` file.
      profile: value given to the kernel as ``JAXLAB_NOTEBOOK_PROFILE``.
      timeout: seconds allowed per cell.
      write_ipynb: also write the executed notebook as ``.ipynb`` beside the source.
      kernel_manager: a started ``jupyter_client.KernelManager`` to run in (kept alive, so
        several notebooks share one kernel's imports and compiled programs); ``None`` starts
        and shuts down a fresh kernel. A shared kernel first runs :data:`RESET_CELL`, which
        empties the namespace and undoes what a previous notebook may have switched on; the
        returned notebook holds only the notebook's own cells.

    Returns:
      The executed ``nbformat`` notebook. A failing cell raises ``nbclient``'s CellExecutionError.
    """
    import jupytext
    import nbformat
    from nbclient import NotebookClient

    path = pathlib.Path(path)
    notebook = jupytext.read(path)
    if kernel_manager is not None:
        reset = nbformat.v4.new_code_cell(
            RESET_CELL.format(profile=profile, folder=str(path.parent.resolve()))
        )
        notebook.cells.insert(0, reset)
    env_before = os.environ.get("JAXLAB_NOTEBOOK_PROFILE")
    os.environ["JAXLAB_NOTEBOOK_PROFILE"] = profile
    os.environ.setdefault("MPLBACKEND", "Agg")
    try:
        client = NotebookClient(
            notebook,
            timeout=timeout,
            kernel_name="python3",
            resources={"metadata": {"path": str(path.parent.resolve())}},
            km=kernel_manager,
        )
        client.execute()
        if kernel_manager is not None:
            notebook.cells.pop(0)
    finally:
        if env_before is None:
            os.environ.pop("JAXLAB_NOTEBOOK_PROFILE", None)
        else:
            os.environ["JAXLAB_NOTEBOOK_PROFILE"] = env_before
    if write_ipynb:
        nbformat.write(notebook, path.with_suffix(".ipynb"))
    return notebook


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    folder = pathlib.Path(argv[0] if argv else "notebooks")
    profile = os.environ.get("JAXLAB_NOTEBOOK_PROFILE", "quick")
    paths = sorted(folder.glob("*.py"))
    for path in paths:
        print(f"executing {path} (profile {profile})", flush=True)
        execute_notebook(path, profile=profile, write_ipynb=True)
    print(f"executed {len(paths)} notebooks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
