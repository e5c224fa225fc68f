"""What the ``peers_*`` scripts share: checking the Python interpreter that runs the authors' code.

Each peer script runs the authors' torch code in a separate interpreter, named by an environment
variable, so that torch never enters jaxlab's environment.
"""

from __future__ import annotations

import pathlib
import subprocess
from collections.abc import Mapping, Sequence


def torch_python_problem(
    environ: Mapping[str, str], env_name: str, modules: Sequence[str] = ("torch",)
) -> str | None:
    """A message saying why ``environ[env_name]`` cannot run the peer, or None when it can.

    The interpreter must exist and import every one of ``modules``.
    """
    python = environ.get(env_name)
    if not python or not pathlib.Path(python).is_file():
        return f"{env_name} must name a Python interpreter with torch installed; got {python!r}"
    probe = subprocess.run(
        [python, "-c", "import " + ", ".join(modules)], capture_output=True, text=True
    )
    if probe.returncode != 0:
        return (
            f"{env_name}={python} cannot import {'/'.join(modules)}: {probe.stderr.strip()[-200:]}"
        )
    return None
