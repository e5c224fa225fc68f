"""The shared shape of jaxlab's black-box binary optimisers (the EDA and its baselines).

Every optimiser over ``x ∈ {0, 1}^n`` (:func:`jaxlab.rl.oi_eda`, :func:`jaxlab.rl.umda`,
:func:`jaxlab.rl.pbil`, :func:`jaxlab.rl.one_plus_one_ea`, :func:`jaxlab.rl.genetic_algorithm`)
is a :class:`BlackBoxOptimizer`, the one optimizer type of :mod:`jaxlab.rl`
(:class:`jaxlab.rl.OptimizationAlgorithm`, also :func:`jaxlab.rl.grpo`'s): blackjax's
``init(rng_key) -> state`` and ``step(rng_key, state) -> (state, info)``, whose functions record
the evaluations they spend (:func:`jaxlab.rl.counted`), which turns a budget into a number of
steps (:func:`num_steps_for_budget`). States share :class:`BlackBoxState` (the
method's own part in ``search``, the best-so-far point, the evaluation count and a count of
steps with non-finite objective values); infos share :class:`BlackBoxInfo`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab._src.optimization import OptimizationAlgorithm
from jaxlab._src.validation import check_callable, check_instance, check_int, is_concrete

__all__ = [
    "BlackBoxInfo",
    "BlackBoxOptimizer",
    "BlackBoxState",
    "num_steps_for_budget",
    "run_optimizer",
]


class BlackBoxState(NamedTuple):
    """State of a black-box binary optimiser.

    Attributes:
      search: the method's own state (the EDA's :class:`jaxlab.rl.GRPOState`, UMDA's and PBIL's
        probability vector, the (1+1)-EA's current point, the GA's population).
      best_x: int32 ``[n]``, the best point evaluated so far.
      best_value: float32, its objective value (``-inf`` before the first evaluation).
      evaluations: int32, objective evaluations spent so far (every one counts).
      nonfinite_count: int32, steps in which the objective returned a non-finite value. Such
        values are never selected or kept as best (they rank below every finite value), and the
        EDA skips its update for that step.

    Examples:
      >>> from jaxlab.rl import onemax, umda
      >>> state = umda(onemax, 4).init(jax.random.key(0))
      >>> int(state.evaluations), float(state.best_value)
      (0, -inf)
    """

    search: Any
    best_x: jax.Array
    best_value: jax.Array
    evaluations: jax.Array
    nonfinite_count: jax.Array


class BlackBoxInfo(NamedTuple):
    """Diagnostics of one step of a black-box binary optimiser.

    Attributes:
      points: int32 ``[λ, n]``, the points evaluated in this step.
      values: float32 ``[λ]``, their objective values (as returned).
      best_value: the best-so-far value after this step.
      evaluations: the evaluation count after this step.
      diversity: the mean over variables of the binary entropy (nats) of each bit's frequency
        among ``points`` (0 for a single point; ``log 2`` at most): a collapsed search shows 0.
      clip_fraction: the EDA's fraction of clipped ratios at its last epoch (0 for the others).

    Examples:
      >>> from jaxlab.rl import onemax, one_plus_one_ea
      >>> algorithm = one_plus_one_ea(onemax, 8)
      >>> _, info = algorithm.step(jax.random.key(1), algorithm.init(jax.random.key(0)))
      >>> info.points.shape, int(info.evaluations)  # the initial point plus one offspring
      ((1, 8), 2)
    """

    points: jax.Array
    values: jax.Array
    best_value: jax.Array
    evaluations: jax.Array
    diversity: jax.Array
    clip_fraction: jax.Array


# The one optimizer type of jaxlab.rl (issue 43): a black-box optimiser is an
# ``OptimizationAlgorithm`` whose ``init`` and ``step`` record their evaluations (``counted``).
BlackBoxOptimizer = OptimizationAlgorithm


def _check_counted(optimizer: Any) -> tuple[int, int]:
    check_instance(optimizer, OptimizationAlgorithm, "optimizer", "built by a jaxlab.rl factory")
    initial, per_step = optimizer.initial_evaluations, optimizer.evaluations_per_step
    if initial is None or per_step is None or per_step < 1:
        raise ValueError(
            "optimizer must count its evaluations: init and step built with "
            "jaxlab.rl.counted(fn, evaluations), as the black-box factories (umda, oi_eda, ...) "
            f"do; got initial_evaluations={initial}, evaluations_per_step={per_step}"
        )
    return initial, per_step


def num_steps_for_budget(optimizer: BlackBoxOptimizer, budget: int) -> int:
    """The number of steps that fit in ``budget`` evaluations (init's evaluations included).

    Raises a ``ValueError`` naming ``budget`` when not even one step fits.

    Examples:
      >>> from jaxlab.rl import onemax, umda
      >>> num_steps_for_budget(umda(onemax, 8, population=64), 20_000)
      312
    """
    initial, per_step = _check_counted(optimizer)
    budget = check_int(budget, "budget", minimum=1)
    if budget < initial + per_step:
        raise ValueError(
            f"budget must cover at least one generation: init spends {initial} and each step "
            f"{per_step} evaluations, so budget >= {initial + per_step}, got {budget}"
        )
    return (budget - initial) // per_step


def run_optimizer(
    optimizer: BlackBoxOptimizer, rng_key: jax.Array, num_steps: int
) -> tuple[BlackBoxState, jax.Array, jax.Array]:
    """Runs ``init`` then ``num_steps`` steps in a ``lax.scan``: one traceable run.

    The key is split once into an init key and a run key, and the run key into one key per step,
    so a run is reproducible from ``rng_key``; ``jax.jit`` it, or ``jax.vmap`` it over seeds.

    Args:
      optimizer: a :class:`BlackBoxOptimizer`.
      rng_key: a JAX PRNG key.
      num_steps: the number of steps (static; :func:`num_steps_for_budget`).

    Returns:
      ``(state, best_values [T], evaluation_counts [T])``: the final state and, after each step,
      the best value so far and the evaluations spent (an anytime curve).

    Examples:
      >>> from jaxlab.rl import onemax, umda
      >>> algorithm = umda(onemax, 8, population=16, num_selected=8)
      >>> state, best, counts = jax.jit(run_optimizer, static_argnums=(0, 2))(
      ...     algorithm, jax.random.key(0), 5)
      >>> best.shape, counts.tolist()
      ((5,), [16, 32, 48, 64, 80])
    """
    check_instance(optimizer, OptimizationAlgorithm, "optimizer", "built by a jaxlab.rl factory")
    num_steps = check_int(num_steps, "num_steps", minimum=1)
    init_key, run_key = jax.random.split(rng_key)

    def body(state, key):
        state, info = optimizer.step(key, state)
        return state, (info.best_value, info.evaluations)

    state, (best, counts) = jax.lax.scan(
        body, optimizer.init(init_key), jax.random.split(run_key, num_steps)
    )
    return state, best, counts


# --------------------------------------------------------------------------------------------
# Internals shared by the optimisers.


def check_objective(objective: Any, num_variables: int) -> Callable:
    """Checks ``objective(x[N, n]) -> [N]`` real on two points (all zeros and all ones).

    The shape and dtype are checked abstractly (``jax.eval_shape``); when the function returns
    concrete values (it closes over no tracer) they must be finite. The probe is validation only:
    its evaluations are not counted and not used by the search.
    """
    check_callable(objective, "objective")
    probe = jnp.stack([jnp.zeros(num_variables, jnp.int32), jnp.ones(num_variables, jnp.int32)])
    try:
        out = jax.eval_shape(lambda points: objective(points), probe)
    except Exception as err:
        raise ValueError(
            f"objective must map int32 points [N, num_variables={num_variables}] to values [N]; "
            f"calling it on 2 points raised {type(err).__name__}: {err}"
        ) from err
    shape, dtype = tuple(getattr(out, "shape", ())), getattr(out, "dtype", None)
    if shape != (2,):
        raise ValueError(
            f"objective must return one value per point, shape (N,) = (2,) for 2 points, got "
            f"shape {shape}"
        )
    if dtype is None or not (
        jnp.issubdtype(dtype, jnp.integer) or jnp.issubdtype(dtype, jnp.floating)
    ):
        raise TypeError(f"objective must return real values, got dtype {dtype}")
    values = objective(probe)
    if is_concrete(values) and not np.all(np.isfinite(np.asarray(values, np.float64))):
        raise ValueError(
            f"objective must return finite values, got {np.asarray(values).tolist()} at all zeros "
            "and all ones"
        )
    return objective


def evaluate(objective: Callable, points: jax.Array) -> jax.Array:
    """``objective(points)`` as float32 ``[λ]``, one value per point."""
    values = jnp.asarray(objective(points)).astype(jnp.float32)
    if values.shape != points.shape[:1]:
        raise ValueError(
            f"objective must return one value per point, shape {points.shape[:1]}, got "
            f"{values.shape}"
        )
    return values


def ranked(values: jax.Array) -> jax.Array:
    """Values for selection: non-finite ones rank below every finite value."""
    return jnp.where(jnp.isfinite(values), values, -jnp.inf)


def diversity(points: jax.Array) -> jax.Array:
    """Mean per-bit binary entropy (nats) of the bit frequencies among ``points [λ, n]``."""
    p = jnp.mean(points.astype(jnp.float32), axis=0)
    return jnp.mean(jax.scipy.special.entr(p) + jax.scipy.special.entr(1.0 - p))


def initial_state(search: Any, num_variables: int) -> BlackBoxState:
    """A state before any evaluation."""
    zero = jnp.zeros([], jnp.int32)
    best_x = jnp.zeros(num_variables, jnp.int32)
    return BlackBoxState(search, best_x, jnp.asarray(-jnp.inf, jnp.float32), zero, zero)


def record(
    state: BlackBoxState,
    search: Any,
    points: jax.Array,
    values: jax.Array,
    clip_fraction: jax.Array | float = 0.0,
) -> tuple[BlackBoxState, BlackBoxInfo]:
    """The new state and info after evaluating ``points``: best-so-far, counts, diagnostics."""
    scores = ranked(values)
    i = jnp.argmax(scores)
    better = scores[i] > state.best_value
    best_x = jnp.where(better, points[i].astype(jnp.int32), state.best_x)
    best_value = jnp.where(better, scores[i], state.best_value)
    evaluations = state.evaluations + points.shape[0]
    bad = ~jnp.all(jnp.isfinite(values))
    new = BlackBoxState(
        search, best_x, best_value, evaluations, state.nonfinite_count + bad.astype(jnp.int32)
    )
    info = BlackBoxInfo(
        points=points.astype(jnp.int32),
        values=values,
        best_value=best_value,
        evaluations=evaluations,
        diversity=diversity(points),
        clip_fraction=jnp.asarray(clip_fraction, jnp.float32),
    )
    return new, info
