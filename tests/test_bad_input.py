"""Every public name has bad-input probes (tests/bad_input/), and every probe gets a clear error.

A probe passes when the call raises the expected ``ValueError``/``TypeError`` from jaxlab whose
message names the bad argument, or, for a traced value, when the documented status field reports
it. A public name without an entry fails ``test_every_public_name_has_an_entry``.
"""

from __future__ import annotations

import importlib
import inspect
import pathlib
import pkgutil

import pytest

import jaxlab
from tests.bad_input import ENTRIES

_SUBPACKAGES = sorted(
    info.name
    for info in pkgutil.iter_modules(jaxlab.__path__)
    if not info.name.startswith("_") and info.name != "cli"
)
for _name in _SUBPACKAGES:
    importlib.import_module(f"tests.bad_input.{_name}")


def _public_names() -> list[str]:
    names = []
    for sub in _SUBPACKAGES:
        module = importlib.import_module(f"jaxlab.{sub}")
        for name in module.__all__:
            obj = getattr(module, name)
            if callable(obj) and not inspect.ismodule(obj):
                names.append(f"jaxlab.{sub}.{name}")
    return names


PUBLIC = _public_names()
_LIBRARY = str(pathlib.Path(jaxlab.__file__).resolve().parent)
CASES = [
    pytest.param(name, probe, id=f"{name.removeprefix('jaxlab.')}-{probe.label}")
    for name, entry in sorted(ENTRIES.items())
    if not isinstance(entry, str)
    for probe in entry
]


def test_every_public_name_has_an_entry():
    missing = [name for name in PUBLIC if name not in ENTRIES]
    assert not missing, f"public names with no bad-input entry in tests/bad_input/: {missing}"


def test_every_entry_is_a_public_name():
    stale = sorted(set(ENTRIES) - set(PUBLIC))
    assert not stale, f"entries for names that are not public (renamed or removed?): {stale}"


@pytest.mark.parametrize(("name", "probe"), CASES)
def test_bad_input_gets_a_clear_error(name, probe):
    if probe.check is not None:
        out = probe.call()
        assert probe.check(out), f"{name}: the status does not report bad {probe.argument}"
        return
    with pytest.raises(probe.error) as info:
        probe.call()
    message = str(info.value)
    assert probe.argument in message, (
        f"{name}: the error does not name {probe.argument!r}: {type(info.value).__name__}: "
        f"{message}"
    )
    # A jaxlab error, not one from deep inside JAX: the raising frame is in jaxlab's code.
    raised_in = str(pathlib.Path(inspect.getinnerframes(info.tb)[-1].filename).resolve())
    assert raised_in.startswith(_LIBRARY), (
        f"{name}: {type(info.value).__name__} raised outside jaxlab ({raised_in}): {message}"
    )
