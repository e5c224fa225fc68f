"""Executing the jupytext notebooks in ``notebooks/`` headless (tests and ``make notebooks``).

Notebooks read ``JAXLAB_NOTEBOOK_PROFILE`` (``smoke`` in tests, about ten seconds each; ``quick``
for ``make notebooks``) to size themselves. Run as ``python -m jaxlab._src.notebooks FOLDER`` to
write the executed ``.ipynb`` (with figures) next to each ``.py``.
"""

from __future__ import annotations

import os
import pathlib
import sys

__all__ = ["execute_notebook", "main"]


def execute_notebook(
    path: str | os.PathLike,
    *,
    profile: str = "smoke",
    timeout: int = 600,
    write_ipynb: bool = False,
):
    """Converts a percent-format ``.py`` notebook with jupytext and executes it with nbclient.

    Args:
      path: the notebook's ``.py`` file.
      profile: value given to the kernel as ``JAXLAB_NOTEBOOK_PROFILE``.
      timeout: seconds allowed per cell.
      write_ipynb: also write the executed notebook as ``.ipynb`` beside the source.

    Returns:
      The executed ``nbformat`` notebook. A failing cell raises ``nbclient``'s CellExecutionError.
    """
    import jupytext
    import nbformat
    from nbclient import NotebookClient

    path = pathlib.Path(path)
    notebook = jupytext.read(path)
    env_before = os.environ.get("JAXLAB_NOTEBOOK_PROFILE")
    os.environ["JAXLAB_NOTEBOOK_PROFILE"] = profile
    os.environ.setdefault("MPLBACKEND", "Agg")
    try:
        client = NotebookClient(
            notebook,
            timeout=timeout,
            kernel_name="python3",
            resources={"metadata": {"path": str(path.parent.resolve())}},
        )
        client.execute()
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
