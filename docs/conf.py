"""Sphinx configuration of jaxlab's API reference (``make docs``).

The API pages are generated at build time from the package itself: one page per public
subpackage (every subpackage of ``jaxlab`` whose name does not start with ``_``), documenting
every name of its ``__all__`` with autodoc and napoleon (Google style), so a new name or a new
subpackage needs no edit here. The landing page is the README (its feature table included).
Executed notebooks (``notebooks/*.ipynb``, written by ``make notebooks``) are rendered as pages
without re-executing them, when present; ``-t api_only`` (the test suite's build) leaves them and
the README out.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pathlib
import pkgutil
import re
import shutil
import sys

HERE = pathlib.Path(__file__).resolve().parent
# The repository (README, notebooks): the folder above this one, unless JAXLAB_DOCS_ROOT says
# otherwise (the test suite builds a copy of this configuration in a temporary folder).
ROOT = pathlib.Path(os.environ.get("JAXLAB_DOCS_ROOT", HERE.parent)).resolve()
sys.path.insert(0, str(ROOT))

import jaxlab  # noqa: E402

project = "jaxlab"
author = "the jaxlab authors"
release = version = jaxlab.__version__
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "myst_nb",
]
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_use_ivar = True  # "Attributes:" as fields, not a second description of each member
napoleon_attr_annotations = False  # the text says what a field holds; no expanded unions
autodoc_member_order = "bysource"
# Signatures without annotations: the docstrings' Args say what each argument is, and JAX's
# array-tree unions would otherwise repeat, expanded, under every parameter.
autodoc_typehints = "none"
autodoc_docstring_signature = False  # a first line like "f(x) -> y" is prose here, not a signature
nb_execution_mode = "off"  # render the notebooks make notebooks executed, never re-execute
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3
html_theme = "furo"
# MathJax from its CDN by default; JAXLAB_DOCS_MATHJAX points at a local copy for offline reading
# (MathJax 3, e.g. es5/tex-mml-chtml.js of the npm package mathjax@3; Debian's MathJax 2 does not
# read the configuration Sphinx writes).
if os.environ.get("JAXLAB_DOCS_MATHJAX"):
    mathjax_path = os.environ["JAXLAB_DOCS_MATHJAX"]
html_title = f"jaxlab {version}"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
suppress_warnings = ["myst.header"]  # the README starts at h1 and is included as a page
# Every cross-reference to a jaxlab name must resolve (nitpicky); types from other packages and
# private base classes are not documented here, so references to them are not checked.
nitpicky = True
nitpick_ignore_regex = [
    (
        r"py:.*",
        r"(jax|jaxlib|numpy|np|optax|flax|scipy|collections|typing|os|chex|enum|abc)(\..*)?",
    ),
    (r"py:.*", r"jaxlab\.(.*\.)?_\w+(\..*)?"),  # private modules and bases
    (r"py:class", r"ArrayTree|ArrayLike|PRNGKey|Array|Callable|Any|Sequence|Mapping"),
]

# -t api_only: the API pages alone (the test suite's build, about 10 s).
API_ONLY = "api_only" in tags  # noqa: F821 (tags is injected by Sphinx)


def public_subpackages() -> list[str]:
    return sorted(
        info.name
        for info in pkgutil.iter_modules(jaxlab.__path__)
        if not info.name.startswith("_") and info.name != "cli"
    )


def _directive(module, name: str) -> str:
    obj = getattr(module, name)
    if inspect.isclass(obj):
        return (
            f".. autoclass:: {module.__name__}.{name}\n   :members:\n   :undoc-members:\n"
            "   :show-inheritance:\n"
        )
    if callable(obj):
        return f".. autofunction:: {module.__name__}.{name}\n"
    return f".. autodata:: {module.__name__}.{name}\n   :no-value:\n"


def write_api_pages() -> list[str]:
    """One ``api/<subpackage>.rst`` per public subpackage; returns the page names."""
    out = HERE / "api"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir()
    pages = []
    for sub in public_subpackages():
        module = importlib.import_module(f"jaxlab.{sub}")
        title = f"jaxlab.{sub}"
        lines = [
            title,
            "=" * len(title),
            "",
            f".. automodule:: jaxlab.{sub}",
            "   :no-members:",
            "",
        ]
        for name in module.__all__:
            lines += [_directive(module, name)]
        (out / f"{sub}.rst").write_text("\n".join(lines))
        pages.append(f"api/{sub}")
    return pages


def copy_notebooks() -> list[str]:
    """Executed notebooks from ``make notebooks`` (``notebooks/*.ipynb``), when present."""
    out = HERE / "notebooks"
    if out.exists():
        shutil.rmtree(out)
    found = sorted((ROOT / "notebooks").glob("*.ipynb"))
    if API_ONLY or not found:
        return []
    out.mkdir()
    for path in found:
        shutil.copy(path, out / path.name)
    return [f"notebooks/{p.stem}" for p in found]


def write_index(api_pages: list[str], notebook_pages: list[str]) -> None:
    body = ["# jaxlab API reference", ""]
    if not API_ONLY:
        readme = os.path.relpath(ROOT / "README.md", HERE)
        body = [f"```{{include}} {readme}", "```", ""]
    body += ["```{toctree}", ":caption: API reference", ":maxdepth: 1", "", *api_pages, "```", ""]
    if notebook_pages:
        body += [
            "```{toctree}",
            ":caption: Notebooks",
            ":maxdepth: 1",
            "",
            *notebook_pages,
            "```",
            "",
        ]
    (HERE / "index.md").write_text("\n".join(body))


_ARXIV = re.compile(r"arXiv[: ]+(\d{4}\.\d{4,5})")


def link_arxiv(app, what, name, obj, options, lines):
    """Turns every ``arXiv NNNN.NNNNN`` of a docstring into a link to the paper's page, and
    drops namedtuple's "Alias for field number k" (each field is described in its class's
    Attributes; the field itself stays documented, so references to it resolve)."""
    if lines and lines[0].startswith("Alias for field number"):
        lines[:] = []
    # A public constant (a dict or tuple) has no docstring of its own: autodoc falls back to its
    # type's (dict's, with reST-breaking indentation), which says nothing about the constant.
    doc = inspect.getdoc(type(obj))
    if what == "data" and doc and "\n".join(lines).strip() == doc.strip():
        lines[:] = []
    for i, line in enumerate(lines):
        lines[i] = _ARXIV.sub(r"`arXiv \1 <https://arxiv.org/abs/\1>`__", line)


write_index(write_api_pages(), copy_notebooks())


def setup(app):
    app.connect("autodoc-process-docstring", link_arxiv)
    os.environ.setdefault("MPLBACKEND", "Agg")
