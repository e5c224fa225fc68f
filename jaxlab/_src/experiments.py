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

The verdict is computed from ``Result.parts``: ``pass`` only if every part passes, ``fail`` if
one fails, ``unresolved`` when none fails but one cannot be decided at this scale. ``error`` is
reserved for an experiment that raised (the runner sets it).

This module holds the registry's data types and ``register``; discovery (importing every
experiment module, ``names``, ``get``) lives in :mod:`jaxlab.experiments`, so nothing under
``jaxlab._src`` imports the package above it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import inspect
import pickle
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

import jax
import numpy as np

from jaxlab._src.validation import check_choice

__all__ = [
    "PROFILES",
    "REGISTRY",
    "STATUSES",
    "Experiment",
    "ExperimentConfig",
    "NullProgress",
    "Part",
    "Progress",
    "Result",
    "check",
    "register",
    "skipped_steps_check",
    "unresolved",
    "verdict_status",
]

PROFILES = ("smoke", "quick", "full")
# A part's status. ``unresolved``: the measurement cannot decide at this scale (a confidence
# interval that contains the threshold, a bias under the Monte Carlo noise). The notes' three-level
# wording maps onto them: supported -> pass, not reproduced at this scale -> unresolved,
# contradicted -> fail.
STATUSES = ("pass", "unresolved", "fail")


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
        check_choice(profile, "profile", PROFILES)
        return getattr(cls, profile)()


@dataclasses.dataclass(frozen=True)
class Part:
    """One half (or third...) of a claim: what the paper says, what we measured, and its status.

    ``status`` is ``pass``, ``fail`` or ``unresolved`` (the measurement cannot decide at this
    scale). Build parts with :func:`check` (and :func:`unresolved`) rather than by hand.

    Examples:
      >>> Part("GD converges", "residual 1e-9", "pass").as_dict()["status"]
      'pass'
      >>> Part("GD converges", "residual 1e-9", "pass").passed
      True
    """

    claim: str
    measured: str
    status: str

    def __post_init__(self):
        for field in ("claim", "measured"):
            value = getattr(self, field)
            if not isinstance(value, str):
                raise TypeError(f"{field} must be a str, got {type(value).__name__} {value!r}")
        check_choice(self.status, "status", STATUSES)

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def as_dict(self) -> dict[str, str]:
        return {"claim": self.claim, "measured": self.measured, "status": self.status}


def check(claim: str, measured: str, passed: Any, *, resolved: Any = True) -> Part:
    """Builds a verdict part from a measured comparison (``passed`` is cast with ``bool``).

    Args:
      claim: what the paper says (one half of its central claim).
      measured: what was measured, with the numbers.
      passed: whether the measured comparison held.
      resolved: ``False`` when the measurement cannot decide at this scale (for example a
        confidence interval that contains the threshold); the part is then ``unresolved``
        whatever ``passed`` says.

    Examples:
      >>> ratio = 1.4
      >>> check("optimal step needs >= 1.25x fewer iterations", f"ratio {ratio:.2f}", ratio >= 1.25)
      ... # doctest: +NORMALIZE_WHITESPACE
      Part(claim='optimal step needs >= 1.25x fewer iterations', measured='ratio 1.40',
           status='pass')
      >>> low, high = 0.9, 1.3  # a 95% interval around the measured ratio
      >>> part = check("ratio >= 1.25", f"[{low}, {high}]", low >= 1.25,
      ...              resolved=not low < 1.25 <= high)
      >>> part.status
      'unresolved'
    """
    if not bool(resolved):
        return Part(claim=claim, measured=measured, status="unresolved")
    return Part(claim=claim, measured=measured, status="pass" if bool(passed) else "fail")


def unresolved(claim: str, measured: str) -> Part:
    """A part the measurement cannot decide at this scale (``check(..., resolved=False)``).

    Examples:
      >>> unresolved("bias falls as 1/N", "bias 0.04/N under Monte Carlo noise 1e-3").status
      'unresolved'
    """
    return Part(claim=claim, measured=measured, status="unresolved")


# An arm that skipped more than this fraction of its updates (non-finite rewards, log-probs, KL or
# gradients in the GRPO core) is not the method its name says: a verdict on it would be about
# the fault, not the paper (issue 37: one arm silently lost a quarter of its updates).
MAX_SKIPPED_FRACTION = 0.01


def skipped_steps_check(
    skipped: dict[str, Any], steps_per_run: int, *, explained: dict[str, str] | None = None
) -> Part:
    """The verdict part that every arm trained its updates: at most 1% skipped per run.

    Args:
      skipped: arm name -> skipped-update counts, one per seed (a number or a sequence).
      steps_per_run: the updates each run attempted.
      explained: arm name -> why that arm may skip more (then it is reported, not failed).

    Returns:
      A :class:`Part` that fails when an unexplained arm skipped more than
      ``MAX_SKIPPED_FRACTION`` of its steps in some seed.

    Examples:
      >>> skipped_steps_check({"grpo": [0, 0], "tsrl": [0, 1]}, 500).status
      'pass'
      >>> skipped_steps_check({"grpo": [0, 0], "tsrl": [0, 80]}, 312).status
      'fail'
    """
    steps = max(int(steps_per_run), 1)
    explained = dict(explained or {})
    worst = {arm: int(np.max(np.atleast_1d(np.asarray(v)))) for arm, v in skipped.items()}
    bad = [a for a, w in worst.items() if w > MAX_SKIPPED_FRACTION * steps and a not in explained]
    total = sum(int(np.sum(np.asarray(v))) for v in skipped.values())
    measured = f"{total} skipped updates in all; worst run per arm of {steps} steps: " + ", ".join(
        f"{arm} {w}" for arm, w in worst.items()
    )
    if explained:
        measured += "; explained: " + "; ".join(f"{a}: {why}" for a, why in explained.items())
    return check(
        f"every arm trains: no run skipped more than {MAX_SKIPPED_FRACTION:.0%} of its updates "
        "without a stated reason",
        measured + (f"; over the limit: {', '.join(bad)}" if bad else ""),
        not bad,
    )


def verdict_status(statuses: Iterable[str]) -> str:
    """``pass`` if every part passes, ``fail`` if any fails, else ``unresolved``.

    Examples:
      >>> verdict_status(["pass", "unresolved"]), verdict_status(["unresolved", "fail"])
      ('unresolved', 'fail')
    """
    statuses = list(statuses)
    unknown = [s for s in statuses if s not in STATUSES]
    if unknown:
        raise ValueError(f"statuses must each be one of {STATUSES}, got {unknown}")
    if not statuses or "fail" in statuses:
        return "fail"
    return "pass" if all(s == "pass" for s in statuses) else "unresolved"


@dataclasses.dataclass
class Result:
    """What an experiment returns: metrics (JSON-able), verdict parts and matplotlib figures.

    The verdict is ``pass`` only if every part passes, ``fail`` if any part fails, and
    ``unresolved`` otherwise (no failure, but some part cannot be decided at this scale); a
    result with no parts fails.

    Examples:
      >>> result = Result(metrics={"ratio": 1.4},
      ...                 parts=[check("a", "1.4 >= 1.25", True), check("b", "0.9 < 1", False)])
      >>> result.verdict()["status"]
      'fail'
      >>> undecided = Result({}, [check("a", "1.4", True), unresolved("b", "CI [0.8, 1.2]")])
      >>> undecided.verdict()["reason"]
      'unresolved at this scale: b'
    """

    metrics: dict[str, Any]
    parts: list[Part]
    figures: dict[str, Any] = dataclasses.field(default_factory=dict)
    reason: str = ""

    def __post_init__(self):
        if not isinstance(self.metrics, dict):
            raise TypeError(f"metrics must be a dict, got {type(self.metrics).__name__}")
        if not isinstance(self.parts, list | tuple) or not all(
            isinstance(p, Part) for p in self.parts
        ):
            raise TypeError(f"parts must be a list of Part (built with check), got {self.parts!r}")
        if not isinstance(self.figures, dict):
            raise TypeError(f"figures must be a dict of name -> Figure, got {self.figures!r}")

    def verdict(self) -> dict[str, Any]:
        if not self.parts:
            return {"status": "fail", "reason": "the experiment checked nothing", "parts": []}
        status = verdict_status(p.status for p in self.parts)
        failed = [p.claim for p in self.parts if p.status == "fail"]
        undecided = [p.claim for p in self.parts if p.status == "unresolved"]
        explained = []
        if failed:
            explained.append("failed: " + "; ".join(failed))
        if undecided:
            explained.append("unresolved at this scale: " + "; ".join(undecided))
        reason = self.reason or (
            "every part of the claim held" if status == "pass" else "; ".join(explained)
        )
        return {
            "status": status,
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
      >>> from jaxlab.experiments import get
      >>> experiment = get("error-feedback")
      >>> experiment.make_config("smoke") == experiment.config.smoke()
      True
    """

    name: str
    claim: str
    config: type
    run_fn: Callable[..., Result]
    module: str
    # config -> the full profile's parts (jaxlab._src.parts.declare_parts); None: one piece.
    parts_fn: Callable[[Any], list] | None = None

    def make_config(self, profile: str):
        return self.config.for_profile(profile)

    def run(self, config, rng_key: jax.Array, progress: Progress | None = None) -> Result:
        result = self.run_fn(config, rng_key, progress or NullProgress())
        if not isinstance(result, Result):
            raise TypeError(
                f"experiment {self.name!r} returned {type(result).__name__}, not Result"
            )
        return result

    def __getstate__(self):
        # The parts declaration may be a lambda (not picklable): a child process (the watchdog's)
        # finds it again through the experiment's module, which declares it on import.
        state = dict(self.__dict__)
        if state.get("parts_fn") is not None:
            try:
                pickle.dumps(state["parts_fn"])
            except (pickle.PicklingError, AttributeError, TypeError):
                state["parts_fn"] = _PartsOf(self.module, self.name)
        return state

    def full_parts(self) -> list:
        """The ``full`` profile's parts (:class:`jaxlab._src.parts.RunPart`), in merge order.

        An empty list when the experiment declared none (its full profile runs in one piece).
        """
        from jaxlab._src import parts

        if self.parts_fn is None:
            return []
        return parts.check_parts(self.parts_fn(self.make_config("full")), self.name)

    def code_version(self) -> str:
        """Hash of the experiment module's source, so ``--resume`` reruns after a change."""
        from jaxlab import __version__

        source = inspect.getsource(importlib.import_module(self.module))
        return hashlib.sha256((__version__ + source).encode()).hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class _PartsOf:
    """The parts declaration of experiment ``name``, looked up through its module (picklable)."""

    module: str
    name: str

    def __call__(self, config):
        importlib.import_module(self.module)
        parts_fn = REGISTRY[self.name].parts_fn
        if parts_fn is None or isinstance(parts_fn, _PartsOf):
            raise RuntimeError(f"{self.name}: its module {self.module} declares no parts")
        return parts_fn(config)


# name -> Experiment, filled by ``register`` as experiment modules are imported.
REGISTRY: dict[str, Experiment] = {}


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
      >>> REGISTRY["doc-example"].run(Config.quick(), jax.random.key(0)).verdict()["status"]
      'pass'
      >>> _ = REGISTRY.pop("doc-example")  # keep the registry to jaxlab's own experiments
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
        existing = REGISTRY.get(name)
        if existing is not None and existing.module != fn.__module__:
            raise ValueError(f"experiment name {name!r} already registered by {existing.module}")
        REGISTRY[name] = Experiment(name, claim, config, fn, fn.__module__)
        return fn

    return decorator
