"""The shared shape of jaxlab's black-box and policy optimizers: one ``(init, step)`` NamedTuple.

:class:`OptimizationAlgorithm` is what every optimizer factory of :mod:`jaxlab.rl` returns, the
black-box binary optimisers (``oi_eda``, ``umda``, ``pbil``, ``one_plus_one_ea``,
``genetic_algorithm``: ``init(rng_key)``, ``step(rng_key, state)``) and the policy optimizer
``grpo`` (``init(params)``, ``step(rng_key, state, prompts)``), as blackjax's factories return
one ``SamplingAlgorithm``. It unpacks as ``init, step = ...``.

An optimizer that spends a known number of objective evaluations per call records it on its
functions (:func:`counted`); :attr:`OptimizationAlgorithm.initial_evaluations` and
:attr:`OptimizationAlgorithm.evaluations_per_step` read it (``None`` when it does not count, as
GRPO, whose evaluations depend on the prompts of each step).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from jaxlab._src.validation import check_callable, check_int

__all__ = ["OptimizationAlgorithm", "counted"]


class OptimizationAlgorithm(NamedTuple):
    """An optimizer in blackjax's shape: ``init`` and a traceable ``step``.

    Attributes:
      init: ``init(...) -> state`` (a black-box optimiser's ``init(rng_key)``, GRPO's
        ``init(params)``).
      step: ``step(rng_key, state, *data) -> (state, info)``, the diagnostics kept apart from
        the state; traceable, so ``jax.jit``, ``lax.scan`` and ``jax.vmap`` over seeds apply.

    Examples:
      >>> import jax
      >>> from jaxlab.rl import BlackBoxOptimizer, PolicyOptimizer, onemax, umda
      >>> algorithm = umda(onemax, 8, population=16, num_selected=8)
      >>> isinstance(algorithm, OptimizationAlgorithm), BlackBoxOptimizer is PolicyOptimizer
      (True, True)
      >>> init, step = algorithm
      >>> state, info = step(jax.random.key(1), init(jax.random.key(0)))
      >>> algorithm.initial_evaluations, algorithm.evaluations_per_step, int(state.evaluations)
      (0, 16, 16)
    """

    init: Callable[..., Any]
    step: Callable[..., tuple[Any, Any]]

    @property
    def initial_evaluations(self) -> int | None:
        """Objective evaluations spent by ``init`` (``None``: this optimizer does not count)."""
        return getattr(self.init, "evaluations", None)

    @property
    def evaluations_per_step(self) -> int | None:
        """Objective evaluations spent by each ``step`` (``None``: not counted)."""
        return getattr(self.step, "evaluations", None)


def counted(fn: Callable[..., Any], evaluations: int) -> Callable[..., Any]:
    """``fn`` itself, recording that each call spends ``evaluations`` objective evaluations.

    The count is an attribute of the function (``fn.evaluations``), read by
    :attr:`OptimizationAlgorithm.initial_evaluations` and
    :attr:`OptimizationAlgorithm.evaluations_per_step`; pass a function of your own (a fresh
    closure or ``def``), as the factories do.

    Examples:
      >>> def init(rng_key):
      ...     return 0
      >>> counted(init, 8) is init, init.evaluations
      (True, 8)
    """
    check_callable(fn, "fn")
    evaluations = check_int(evaluations, "evaluations", minimum=0)
    try:
        fn.evaluations = evaluations
    except AttributeError as err:  # a builtin or a bound method holds no attributes
        raise TypeError(
            f"fn must be a Python function that can hold an attribute (a def or a lambda), got "
            f"{type(fn).__name__}; wrap it: lambda *args: fn(*args)"
        ) from err
    return fn
