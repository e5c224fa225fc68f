"""The public subpackages import each other without a cycle (read from the source with ``ast``).

Every ``import jaxlab.<sub>...`` / ``from jaxlab.<sub>... import ...`` in a subpackage's modules,
lazy ones inside functions included, is an edge ``<package> -> <sub>``; the graph must have a
topological order. ``jaxlab._src`` is the neutral home both sides may use, so it is no node.
"""

from __future__ import annotations

import ast
import functools
import graphlib
import pathlib

import jaxlab

ROOT = pathlib.Path(jaxlab.__file__).parent
SUBPACKAGES = sorted(
    p.name for p in ROOT.iterdir() if (p / "__init__.py").exists() and not p.name.startswith("_")
)


def _imported_subpackages(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from jaxlab import nn` names the subpackage in the imported names.
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "jaxlab" and len(parts) > 1 and parts[1] in SUBPACKAGES:
                found.add(parts[1])
    return found


@functools.cache
def _read_graph() -> dict[str, frozenset[str]]:
    graph = {}
    for package in SUBPACKAGES:
        edges = set()
        for path in (ROOT / package).rglob("*.py"):
            edges |= _imported_subpackages(ast.parse(path.read_text(), str(path)))
        graph[package] = frozenset(edges - {package})
    return graph


def import_graph() -> dict[str, set[str]]:
    return {package: set(edges) for package, edges in _read_graph().items()}


def test_the_graph_reader_sees_a_planted_cycle():
    # The reader must see both spellings and lazy imports, or an acyclic verdict means nothing.
    tree = ast.parse(
        "import jaxlab.optim\nfrom jaxlab import solvers\n"
        "def f():\n    from jaxlab.nn._text import x\n"
    )
    assert _imported_subpackages(tree) == {"optim", "solvers", "nn"}
    graph = import_graph()
    assert "solvers" in graph["experiments"] and "nn" in graph["solvers"]  # known real edges
    graph["nn"] = graph["nn"] | {"solvers"}
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError:
        return
    raise AssertionError("a planted nn -> solvers edge was not reported as a cycle")


def test_public_subpackages_import_graph_is_acyclic():
    graph = import_graph()
    try:
        order = tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as error:
        raise AssertionError(f"import cycle between subpackages: {error.args[1]}") from None
    assert set(order) == set(SUBPACKAGES)
