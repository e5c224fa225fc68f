"""Tuning a learning rate on a grid that is extended while the best value sits on an edge.

Host-side: each grid point is a callback (typically several seeded training runs), so the
protocol is plain Python around whatever the callback compiles.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple

import numpy as np

from jaxlab._src.validation import check_callable, check_int, check_positive

__all__ = ["GridBracket", "bracketed_grid_search"]


class GridBracket(NamedTuple):
    """What :func:`bracketed_grid_search` returns.

    Attributes:
      scores: ``{value: score}`` of every evaluated point (grid and extensions).
      best: the value of the smallest score.
      bracketed: whether ``best`` has an evaluated neighbour on both sides.
      extensions: how many points were added beyond the grid's ends.
    """

    scores: dict[float, float]
    best: float
    bracketed: bool
    extensions: int


def bracketed_grid_search(
    score_fn: Callable[[float], float | None],
    grid: Iterable[float],
    *,
    factor: float = 2.0,
    max_extensions: int = 2,
) -> GridBracket | None:
    """Minimises ``score_fn`` over ``grid``, extending the grid while the minimum is on an edge.

    Every grid point is scored (NaN and infinities count as ``+inf``); while the best point is
    the smallest (largest) one evaluated and fewer than ``max_extensions`` points were added, the
    smallest divided by (the largest times) ``factor`` is scored too. Ties go to the smaller
    value. A score of None (a point computed elsewhere, e.g. in another part of a split run) stops
    the search: the function then returns None once the grid is done.

    Args:
      score_fn: ``value -> score`` (lower is better) or None.
      grid: the initial points (any order; iterated once, so a progress tracker may wrap it).
      factor: ratio of an extension beyond an edge, ``> 0``.
      max_extensions: at most this many extensions.

    Returns:
      a :class:`GridBracket`, or None when a score is None.

    Examples:
      >>> search = bracketed_grid_search(lambda lr: (lr - 0.3) ** 2, [0.01, 0.02, 0.04],
      ...                                factor=4.0, max_extensions=3)
      >>> sorted(search.scores), search.best, search.bracketed, search.extensions
      ([0.01, 0.02, 0.04, 0.16, 0.64], 0.16, True, 2)
    """
    check_callable(score_fn, "score_fn")
    factor = check_positive(factor, "factor")
    max_extensions = check_int(max_extensions, "max_extensions", minimum=0)
    scores: dict[float, float | None] = {}
    for value in grid:
        scores[value] = score_fn(value)

    def best() -> tuple[list[float], int] | None:
        if any(s is None for s in scores.values()):
            return None
        values = sorted(scores)
        finite = [s if np.isfinite(s) else np.inf for s in (scores[v] for v in values)]
        return values, int(np.argmin(finite))

    found = best()
    if found is None:
        return None
    extensions = 0
    values, i = found
    while extensions < max_extensions and i in (0, len(values) - 1):
        value = values[0] / factor if i == 0 else values[-1] * factor
        scores[value] = score_fn(value)
        found = best()
        if found is None:
            return None
        extensions += 1
        values, i = found
    return GridBracket(scores, values[i], 0 < i < len(values) - 1, extensions)
