"""The API reference builds warning-free (``make docs``' API pages, without README or notebooks).

Sphinx (autodoc, napoleon, MathJax) runs on a copy of ``docs/conf.py`` in a temporary folder with
``-W``: a docstring napoleon cannot parse, a cross-reference to a jaxlab name that does not
resolve, or any other warning fails the test.
"""

from __future__ import annotations

import importlib.util
import pathlib
import shutil

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
MISSING = [m for m in ("sphinx", "myst_nb", "furo") if importlib.util.find_spec(m) is None]


@pytest.mark.skipif(bool(MISSING), reason=f"the docs extra is not installed ({MISSING})")
# Sphinx 9's napoleon itself uses an autodoc interface Sphinx 11 removes: not our docstrings.
@pytest.mark.filterwarnings("ignore:The mapping interface for autodoc options")
def test_api_pages_build_without_warnings(tmp_path, monkeypatch, capsys):
    from sphinx.cmd.build import build_main

    source = tmp_path / "docs"
    source.mkdir()
    shutil.copy(ROOT / "docs" / "conf.py", source / "conf.py")
    monkeypatch.setenv("JAXLAB_DOCS_ROOT", str(ROOT))
    out = tmp_path / "html"
    status = build_main(
        ["-W", "--keep-going", "-q", "-t", "api_only", "-b", "html", str(source), str(out)]
    )
    warnings = capsys.readouterr().err
    assert status == 0, warnings
    import jaxlab

    pages = sorted(p.stem for p in (out / "api").glob("*.html"))
    assert pages == sorted([*(n for n in jaxlab.__all__ if n != "__version__"), "experiments"])
    optim = (out / "api" / "optim.html").read_text()
    for name in jaxlab.optim.__all__:
        assert f'id="jaxlab.optim.{name}"' in optim, name
    assert "arxiv.org/abs/" in (out / "api" / "stochprog.html").read_text()
