"""Docs check: every public name of every public subpackage has a docstring with an example."""

import importlib
import inspect
import pkgutil

import pytest

import jaxlab


def _public_modules():
    mods = [jaxlab]
    for info in pkgutil.iter_modules(jaxlab.__path__):
        if not info.name.startswith("_") and info.name != "cli":
            mods.append(importlib.import_module(f"jaxlab.{info.name}"))
    return mods


def _public_objects():
    out = []
    for mod in _public_modules():
        assert hasattr(mod, "__all__"), f"{mod.__name__} declares no __all__"
        for name in mod.__all__:
            obj = getattr(mod, name)
            if inspect.ismodule(obj) or not callable(obj):
                continue  # subpackages are checked themselves; constants cannot carry docstrings
            out.append((f"{mod.__name__}.{name}", obj))
    return out


OBJECTS = _public_objects()


def test_every_public_all_entry_exists():
    for mod in _public_modules():
        missing = [n for n in mod.__all__ if not hasattr(mod, n)]
        assert not missing, f"{mod.__name__}.__all__ names missing attributes: {missing}"


@pytest.mark.parametrize("qualname,obj", OBJECTS, ids=[q for q, _ in OBJECTS])
def test_public_name_has_docstring_with_example(qualname, obj):
    doc = inspect.getdoc(obj) or ""
    assert doc.strip(), f"{qualname} has no docstring"
    assert "Examples:" in doc and ">>>" in doc, f"{qualname}'s docstring has no `Examples:` doctest"


@pytest.mark.parametrize("qualname,obj", OBJECTS, ids=[q for q, _ in OBJECTS])
def test_docstring_examples_run(qualname, obj):
    """The examples are doctests: they must run and print what they show."""
    import doctest

    finder = doctest.DocTestFinder(recurse=False)
    runner = doctest.DocTestRunner(
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE | doctest.FLOAT_CMP
        if hasattr(doctest, "FLOAT_CMP")
        else doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    )
    module = inspect.getmodule(obj)
    globs = dict(vars(module)) if module else {}
    tests = finder.find(obj, qualname, globs=globs)
    assert tests and any(t.examples for t in tests), f"{qualname}: no doctest examples found"
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{qualname}: {result.failed} doctest example(s) failed"
