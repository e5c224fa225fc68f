"""Bad-input probes for every public name, registered per subpackage next to the batteries.

Each public callable (every name in every public ``__all__``) gets an entry: either a list of
probes, each calling the name with ONE bad argument and expecting a jaxlab ``ValueError`` or
``TypeError`` whose message names that argument (or, for traced values, a documented status
field that reports the problem), or a stated reason why no bad-input family applies (a state
NamedTuple, a constant). ``tests/test_bad_input.py`` fails for a public name with no entry, so a
new public name must come with its probes.

Register in the module of its subpackage (``tests/bad_input/optim.py`` for ``jaxlab.optim``)::

    probes("jaxlab.optim.deva",
           raises("learning_rate", lambda: deva(-1.0)),
           raises("b1", lambda: deva(1e-3, b1=jnp.array(1.5)), ValueError),
           status("non-finite gradient counted", lambda: ..., lambda out: out.nonfinite == 1))
    no_probes("jaxlab.optim.ScaleByDevaVectorState", "a state NamedTuple: built by init")

Families to try where they apply (issue 14): negative / zero / NaN / inf numbers, strings,
``None``, bools and complex where a number is meant, concrete arrays with bad values, wrong
shapes and dtypes (integer params, mismatched updates/state), bad keys (``rng_key=None``), bad
``axis_name`` outside a mapped context, tokens outside the vocabulary, non-stochastic matrices.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

__all__ = ["ENTRIES", "Probe", "no_probes", "probes", "raises", "status"]


@dataclasses.dataclass(frozen=True)
class Probe:
    """One bad input: ``call()`` must raise ``error`` naming ``argument``, or pass ``check``."""

    argument: str
    call: Callable[[], Any]
    error: type | tuple[type, ...] = (ValueError, TypeError)
    check: Callable[[Any], Any] | None = None  # status probes: check(call()) must be truthy
    description: str = ""

    @property
    def label(self) -> str:
        kind = "status" if self.check is not None else "raises"
        return f"{kind}:{self.argument}" + (f":{self.description}" if self.description else "")


# public name ("jaxlab.optim.deva") -> list of probes, or a str: why no family applies.
ENTRIES: dict[str, list[Probe] | str] = {}


def raises(
    argument: str,
    call: Callable[[], Any],
    error: type | tuple[type, ...] = (ValueError, TypeError),
    description: str = "",
) -> Probe:
    """A probe whose call must raise ``error`` with ``argument`` in the message."""
    return Probe(argument=argument, call=call, error=error, description=description)


def status(
    argument: str, call: Callable[[], Any], check: Callable[[Any], Any], description: str = ""
) -> Probe:
    """A probe for a traced bad value: ``check(call())`` must hold (a documented status field)."""
    return Probe(argument=argument, call=call, check=check, description=description)


def probes(name: str, *items: Probe) -> None:
    """Registers the probes of public name ``name`` (adds to any already registered)."""
    if not items:
        raise ValueError(f"{name}: give at least one probe, or use no_probes with a reason")
    existing = ENTRIES.get(name)
    if isinstance(existing, str):
        raise ValueError(f"{name} is registered with no_probes ({existing!r})")
    ENTRIES[name] = [*(existing or []), *items]


def no_probes(name: str, reason: str) -> None:
    """Registers ``name`` as having no bad-input family, with the reason."""
    if not reason:
        raise ValueError(f"{name}: say why no bad-input family applies")
    if name in ENTRIES:
        raise ValueError(f"{name} is already registered")
    ENTRIES[name] = reason
