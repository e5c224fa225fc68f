"""The experiment registry: one paper claim per registered experiment.

An experiment module defines a frozen config dataclass with three profile constructors and a
``run`` function, and registers them under the hyphenated name its issue gives::

    @dataclasses.dataclass(frozen=True)
    class Config(ExperimentConfig):
        steps: int = 1000

        @classmethod
        def smoke(cls): return cls(steps=10)
        @classmethod
        def quick(cls): return cls()
        @classmethod
        def full(cls): return cls(steps=100_000)

    @register("my-claim", config=Config, claim="The paper says ...")
    def run(config: Config, rng_key: jax.Array, progress: Progress) -> Result:
        ...
        return Result(metrics=..., parts=[check("half one", measured, passed)], figures=...)

The verdict is computed from ``Result.parts``: ``pass`` only if every part passes. ``error`` is
reserved for an experiment that raised (the runner sets it).
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import importlib
import inspect
import pkgutil
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

import jax

__all__ = [
    "PROFILES",
    "Experiment",
    "ExperimentConfig",
    "NullProgress",
    "Part",
    "Progress",
    "Result",
    "check",
    "get",
    "names",
    "register",
    "unknown_name_message",
]

PROFILES = ("smoke", "quick", "full")
# A part's or a verdict's status, from whether the measured comparison held.
_STATUS = {True: "pass", False: "fail"}


class ExperimentConfig:
    """Base for experiment configs: a frozen dataclass with ``smoke``/``quick``/``full``.

    ``smoke`` runs in seconds and exists to prove the pipeline end to end (no claim is checked at
    that size); ``quick`` is the default and checks the claim in minutes on a 2-core CPU; ``full``
    is closer to the paper and meant for an accelerator. ``register`` checks that all three exist.

    Examples:
      >>> import dataclasses
      >>> @dataclasses.dataclass(frozen=True)
      ... class Config(ExperimentConfig):
      ...     steps: int = 100
      ...     @classmethod
      ...     def smoke(cls): return cls(steps=2)
      ...     @classmethod
      ...     def quick(cls): return cls()
      ...     @classmethod
      ...     def full(cls): return cls(steps=10_000)
      >>> Config.for_profile("smoke").steps
      2
    """

    @classmethod
    def for_profile(cls, profile: str):
        if profile not in PROFILES:
            raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")
        return getattr(cls, profile)()


@dataclasses.dataclass(frozen=True)
class Part:
    """One half (or third...) of a claim: what the paper says, what we measured, pass or fail.

    Examples:
      >>> Part("GD converges", "residual 1e-9", True).as_dict()["status"]
      'pass'
    """

    claim: str
    measured: str
    passed: bool

    def as_dict(self) -> dict[str, str]:
        return {
            "claim": self.claim,
            "measured": self.measured,
            "status": _STATUS[self.passed],
        }


def check(claim: str, measured: str, passed: Any) -> Part:
    """Builds a verdict part from a measured comparison (``passed`` is cast with ``bool``).

    Examples:
      >>> ratio = 1.4
      >>> check("optimal step needs >= 1.25x fewer iterations", f"ratio {ratio:.2f}", ratio >= 1.25)
      Part(claim='optimal step needs >= 1.25x fewer iterations', measured='ratio 1.40', passed=True)
    """
    return Part(claim=claim, measured=measured, passed=bool(passed))


@dataclasses.dataclass
class Result:
    """What an experiment returns: metrics (JSON-able), verdict parts and matplotlib figures.

    The verdict is ``pass`` only if every part passes; a result with no parts fails.

    Examples:
      >>> result = Result(metrics={"ratio": 1.4},
      ...                 parts=[check("a", "1.4 >= 1.25", True), check("b", "0.9 < 1", False)])
      >>> result.verdict()["status"]
      'fail'
    """

    metrics: dict[str, Any]
    parts: list[Part]
    figures: dict[str, Any] = dataclasses.field(default_factory=dict)
    reason: str = ""

    def verdict(self) -> dict[str, Any]:
        if not self.parts:
            return {"status": "fail", "reason": "the experiment checked nothing", "parts": []}
        passed = all(p.passed for p in self.parts)
        failed = [p.claim for p in self.parts if not p.passed]
        reason = self.reason or (
            "every part of the claim held" if passed else "failed: " + "; ".join(failed)
        )
        return {
            "status": _STATUS[passed],
            "reason": reason,
            "parts": [p.as_dict() for p in self.parts],
        }


class Progress(Protocol):
    """Progress reporting handed to ``run``; the CLI passes a rich progress bar.

    Examples:
      >>> progress: Progress = NullProgress()
      >>> sum(progress.track(range(4), total=4, description="chunks"))
      6
    """

    def track(
        self, iterable: Iterable[Any], total: int | None = None, description: str = ""
    ) -> Iterator[Any]: ...


class NullProgress:
    """A progress reporter that reports nothing (tests, notebooks).

    Examples:
      >>> list(NullProgress().track([1, 2], description="steps"))
      [1, 2]
    """

    def track(self, iterable, total=None, description=""):
        yield from iterable


@dataclasses.dataclass(frozen=True)
class Experiment:
    """A registered experiment: name, claim, config class and run function.

    Examples:
      >>> experiment = get("error-feedback")
      >>> experiment.make_config("smoke") == experiment.config.smoke()
      True
    """

    name: str
    claim: str
    config: type
    run_fn: Callable[..., Result]
    module: str

    def make_config(self, profile: str):
        return self.config.for_profile(profile)

    def run(self, config, rng_key: jax.Array, progress: Progress | None = None) -> Result:
        result = self.run_fn(config, rng_key, progress or NullProgress())
        if not isinstance(result, Result):
            raise TypeError(
                f"experiment {self.name!r} returned {type(result).__name__}, not Result"
            )
        return result

    def code_version(self) -> str:
        """Hash of the experiment module's source, so ``--resume`` reruns after a change."""
        from jaxlab import __version__

        source = inspect.getsource(importlib.import_module(self.module))
        return hashlib.sha256((__version__ + source).encode()).hexdigest()[:16]


_REGISTRY: dict[str, Experiment] = {}
_LOADED = False


def register(name: str, *, config: type, claim: str) -> Callable[[Callable], Callable]:
    """Registers ``run(config, rng_key, progress) -> Result`` under ``name``.

    Args:
      name: the hyphenated experiment name of the issue (``error-feedback``).
      config: a frozen dataclass subclassing ``ExperimentConfig``.
      claim: the paper's central claim, quoted or closely paraphrased.

    Returns:
      A decorator that registers the run function and returns it unchanged.

    Examples:
      >>> import dataclasses, jax
      >>> @dataclasses.dataclass(frozen=True)
      ... class Config(ExperimentConfig):
      ...     n: int = 3
      ...     @classmethod
      ...     def smoke(cls): return cls(n=1)
      ...     @classmethod
      ...     def quick(cls): return cls()
      ...     @classmethod
      ...     def full(cls): return cls(n=30)
      >>> @register("doc-example", config=Config, claim="sums are exact")
      ... def run(config, rng_key, progress):
      ...     total = sum(progress.track(range(config.n)))
      ...     return Result({"total": total}, [check("sum", str(total), total == 3)])
      >>> get("doc-example").run(Config.quick(), jax.random.key(0)).verdict()["status"]
      'pass'
      >>> _ = _REGISTRY.pop("doc-example")  # keep the registry to jaxlab's own experiments
    """
    if not name or name != name.lower() or "_" in name or " " in name:
        raise ValueError(f"name must be lower-case and hyphenated, got {name!r}")
    if not (isinstance(config, type) and issubclass(config, ExperimentConfig)):
        raise TypeError(f"config must be an ExperimentConfig subclass, got {config!r}")
    if not dataclasses.is_dataclass(config):
        raise TypeError(f"config {config.__name__} must be a dataclass")
    missing = [
        p for p in PROFILES if not isinstance(inspect.getattr_static(config, p, None), classmethod)
    ]
    if missing:
        raise TypeError(f"config {config.__name__} must define classmethods {missing}")

    def decorator(fn: Callable) -> Callable:
        existing = _REGISTRY.get(name)
        if existing is not None and existing.module != fn.__module__:
            raise ValueError(f"experiment name {name!r} already registered by {existing.module}")
        _REGISTRY[name] = Experiment(name, claim, config, fn, fn.__module__)
        return fn

    return decorator


def _load_all() -> None:
    global _LOADED
    if _LOADED:
        return
    import jaxlab.experiments as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{pkg.__name__}.{info.name}")
    _LOADED = True


def names() -> list[str]:
    """Sorted names of all registered experiments.

    Examples:
      >>> "error-feedback" in names()
      True
    """
    _load_all()
    return sorted(_REGISTRY)


def unknown_name_message(name: str) -> str:
    close = difflib.get_close_matches(name, names(), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"unknown experiment {name!r}{hint} (`jaxlab list` shows all)"


def get(name: str) -> Experiment:
    """The registered experiment ``name``; ``KeyError`` with close matches otherwise.

    Examples:
      >>> get("error-feedbak")
      Traceback (most recent call last):
      ...
      KeyError: "unknown experiment 'error-feedbak'; did you mean error-feedback? ..."
    """
    _load_all()
    if name not in _REGISTRY:
        raise KeyError(unknown_name_message(name))
    return _REGISTRY[name]
