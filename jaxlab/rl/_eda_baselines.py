"""Classical black-box baselines for binary maximisation: UMDA, PBIL, the (1+1)-EA and a GA.

Each is a :class:`jaxlab.rl.BlackBoxOptimizer` (blackjax's ``init``/``step`` with evaluation
counts), so it runs under ``jax.jit``, ``lax.scan`` and ``jax.vmap`` over seeds exactly like
:func:`jaxlab.rl.oi_eda`, the order-invariant EDA they are compared with.

References:
  H. Mühlenbein, G. Paaß, *From recombination of genes to the estimation of distributions I.
  Binary parameters*, PPSN 1996 (UMDA); S. Baluja, *Population-Based Incremental Learning*,
  CMU-CS-94-163, 1994 (PBIL); S. Droste, T. Jansen, I. Wegener, *On the analysis of the (1+1)
  evolutionary algorithm*, Theor. Comput. Sci., 2002; D. E. Goldberg, *Genetic Algorithms in
  Search, Optimization and Machine Learning*, 1989 (tournament selection, uniform crossover).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from jaxlab._src.optimization import counted
from jaxlab._src.validation import check_int, check_key, check_probability
from jaxlab.rl._black_box import (
    BlackBoxInfo,
    BlackBoxOptimizer,
    BlackBoxState,
    check_objective,
    evaluate,
    initial_state,
    ranked,
    record,
)

__all__ = ["genetic_algorithm", "one_plus_one_ea", "pbil", "umda"]


def _check_common(objective, num_variables, population=None, selected=None):
    n = check_int(num_variables, "num_variables", minimum=1)
    check_objective(objective, n)
    if population is not None:
        population = check_int(population, "population", minimum=2)
    if selected is not None:
        selected = check_int(selected, "num_selected", minimum=1)
        if selected > population:
            raise ValueError(f"num_selected must be <= population={population}, got {selected}")
    return n, population, selected


def _bounds(n: int) -> tuple[float, float]:
    # The usual margins [1/n, 1 - 1/n]: no bit is ever fixed for good (n = 1: [0, 1]).
    low = 1.0 / n if n > 1 else 0.0
    return low, 1.0 - low


def _sample_bits(rng_key: jax.Array, probs: jax.Array, population: int) -> jax.Array:
    shape = (population, probs.shape[0])
    return jax.random.bernoulli(rng_key, jnp.broadcast_to(probs, shape), shape).astype(jnp.int32)


def _mutation_rate(mutation_rate, n: int):
    if mutation_rate is None:
        return 1.0 / n  # the standard rate: one flip per offspring on average
    check_probability(mutation_rate, "mutation_rate")
    return mutation_rate


def _uniform_start(rng_key, objective, n: int, count: int):
    """``count`` uniform points, evaluated: the state after them, the points and their scores."""
    check_key(rng_key)
    points = jax.random.bernoulli(rng_key, 0.5, (count, n)).astype(jnp.int32)
    values = evaluate(objective, points)
    state, _ = record(initial_state(None, n), None, points, values)
    return state, points, ranked(values)


def _top_mean(points: jax.Array, values: jax.Array, k: int) -> jax.Array:
    _, index = jax.lax.top_k(ranked(values), k)
    return jnp.mean(points[index].astype(jnp.float32), axis=0)


def _probability_vector_search(objective, n, lam, mu, learning_rate) -> BlackBoxOptimizer:
    """PBIL's step; UMDA is the case ``η = 1`` (``p`` is replaced by the selected mean)."""
    low, high = _bounds(n)

    def init(rng_key) -> BlackBoxState:
        check_key(rng_key)
        return initial_state(jnp.full(n, 0.5, jnp.float32), n)

    def step(rng_key, state: BlackBoxState) -> tuple[BlackBoxState, BlackBoxInfo]:
        points = _sample_bits(rng_key, state.search, lam)
        values = evaluate(objective, points)
        target = _top_mean(points, values, mu)
        probs = (1.0 - learning_rate) * state.search + learning_rate * target
        return record(state, jnp.clip(probs, low, high).astype(jnp.float32), points, values)

    return BlackBoxOptimizer(counted(init, 0), counted(step, lam))


def umda(
    objective: Callable,
    num_variables: int,
    *,
    population: int = 64,
    num_selected: int = 32,
) -> BlackBoxOptimizer:
    """UMDA, the univariate marginal distribution algorithm (maximises ``objective``).

    Each step samples ``λ`` points from independent bits ``x_i ~ Bern(p_i)``, keeps the best
    ``μ`` and sets ``p = clip(mean of the selected, 1/n, 1 - 1/n)``; ``p`` starts at ``1/2``.

    Args:
      objective: ``f(x [N, n] int32) -> [N]`` real, maximised (traceable).
      num_variables: ``n >= 1``.
      population: ``λ >= 2`` samples (evaluations) per step.
      num_selected: ``μ <= λ``.

    Returns:
      A :class:`jaxlab.rl.BlackBoxOptimizer`; ``state.search`` is ``p`` ``[n]``.

    Examples:
      >>> from jaxlab.rl import onemax
      >>> algorithm = umda(onemax, 16, population=32, num_selected=16)
      >>> state = algorithm.init(jax.random.key(0))
      >>> for key in jax.random.split(jax.random.key(1), 30):
      ...     state, info = algorithm.step(key, state)
      >>> float(state.best_value), int(state.evaluations)
      (16.0, 960)

    References:
      H. Mühlenbein, G. Paaß, PPSN 1996.
    """
    n, lam, mu = _check_common(objective, num_variables, population, num_selected)
    return _probability_vector_search(objective, n, lam, mu, 1.0)  # PBIL with η = 1


def pbil(
    objective: Callable,
    num_variables: int,
    *,
    population: int = 64,
    num_selected: int = 2,
    learning_rate: ArrayLike = 0.1,
) -> BlackBoxOptimizer:
    """PBIL, population-based incremental learning (maximises ``objective``).

    Each step samples ``λ`` points from ``Bern(p)``, and moves ``p`` towards the mean of the best
    ``μ``: ``p ← clip((1 - η) p + η mean(best μ), 1/n, 1 - 1/n)``; ``p`` starts at ``1/2``.

    Args:
      objective: ``f(x [N, n] int32) -> [N]`` real, maximised (traceable).
      num_variables: ``n >= 1``.
      population: ``λ >= 2``.
      num_selected: ``μ <= λ``.
      learning_rate: ``η ∈ [0, 1]`` (traceable).

    Returns:
      A :class:`jaxlab.rl.BlackBoxOptimizer`; ``state.search`` is ``p`` ``[n]``.

    Examples:
      >>> from jaxlab.rl import onemax
      >>> algorithm = pbil(onemax, 8, population=16)
      >>> state = algorithm.init(jax.random.key(0))
      >>> state, info = algorithm.step(jax.random.key(1), state)
      >>> bool(jnp.all(jnp.abs(state.search - 0.5) <= 0.05 + 1e-7))  # one step of η = 0.1
      True

    References:
      S. Baluja, CMU-CS-94-163, 1994.
    """
    n, lam, mu = _check_common(objective, num_variables, population, num_selected)
    check_probability(learning_rate, "learning_rate")
    return _probability_vector_search(objective, n, lam, mu, learning_rate)


def one_plus_one_ea(
    objective: Callable,
    num_variables: int,
    *,
    mutation_rate: ArrayLike | None = None,
) -> BlackBoxOptimizer:
    """The (1+1) evolutionary algorithm (maximises ``objective``).

    ``init`` evaluates a uniformly random point; each step flips every bit independently with
    probability ``1/n`` (an offspring identical to its parent is still evaluated and counted,
    as in the textbook analysis) and keeps the offspring when ``f(y) >= f(x)``.

    Args:
      objective: ``f(x [N, n] int32) -> [N]`` real, maximised (traceable).
      num_variables: ``n >= 1``.
      mutation_rate: the flip probability (``None``: ``1/n``; traceable).

    Returns:
      A :class:`jaxlab.rl.BlackBoxOptimizer`; ``state.search`` is ``(x, f(x))``.

    Examples:
      >>> from jaxlab.rl import onemax
      >>> algorithm = one_plus_one_ea(onemax, 10)
      >>> state = algorithm.init(jax.random.key(0))
      >>> run = jax.jit(algorithm.step)
      >>> for key in jax.random.split(jax.random.key(1), 200):
      ...     state, _ = run(key, state)
      >>> float(state.best_value), int(state.evaluations)
      (10.0, 201)

    References:
      S. Droste, T. Jansen, I. Wegener, Theor. Comput. Sci. 276, 2002.
    """
    n, _, _ = _check_common(objective, num_variables)
    mutation_rate = _mutation_rate(mutation_rate, n)

    def init(rng_key) -> BlackBoxState:
        state, x, scores = _uniform_start(rng_key, objective, n, 1)
        return state._replace(search=(x[0], scores[0]))

    def step(rng_key, state: BlackBoxState) -> tuple[BlackBoxState, BlackBoxInfo]:
        x, fx = state.search
        flips = jax.random.bernoulli(rng_key, mutation_rate, (n,)).astype(jnp.int32)
        y = jnp.bitwise_xor(x, flips)
        values = evaluate(objective, y[None])
        fy = ranked(values)[0]
        accept = fy >= fx
        search = (jnp.where(accept, y, x), jnp.where(accept, fy, fx))
        return record(state, search, y[None], values)

    return BlackBoxOptimizer(counted(init, 1), counted(step, 1))


def genetic_algorithm(
    objective: Callable,
    num_variables: int,
    *,
    population: int = 64,
    crossover_probability: ArrayLike = 0.9,
    mutation_rate: ArrayLike | None = None,
) -> BlackBoxOptimizer:
    """A generational genetic algorithm with one elite (maximises ``objective``).

    ``init`` evaluates ``λ`` uniform points. Each step breeds ``λ - 1`` offspring: two parents by
    binary tournament (the better of two uniformly drawn members, ties to the first), uniform
    crossover with probability ``p_c`` (else a copy of the first parent), then bit-flip mutation
    with rate ``1/n``; the best member (the elite) survives unevaluated, so a step costs
    ``λ - 1`` evaluations.

    Args:
      objective: ``f(x [N, n] int32) -> [N]`` real, maximised (traceable).
      num_variables: ``n >= 1``.
      population: ``λ >= 2``.
      crossover_probability: ``p_c ∈ [0, 1]`` (traceable).
      mutation_rate: the flip probability (``None``: ``1/n``; traceable).

    Returns:
      A :class:`jaxlab.rl.BlackBoxOptimizer`; ``state.search`` is ``(population [λ, n],
      values [λ])``.

    Examples:
      >>> from jaxlab.rl import onemax
      >>> algorithm = genetic_algorithm(onemax, 12, population=16)
      >>> state = algorithm.init(jax.random.key(0))
      >>> for key in jax.random.split(jax.random.key(1), 40):
      ...     state, _ = algorithm.step(key, state)
      >>> float(state.best_value), int(state.evaluations)  # 16 + 40 x 15
      (12.0, 616)

    References:
      D. E. Goldberg, *Genetic Algorithms in Search, Optimization and Machine Learning*, 1989.
    """
    n, lam, _ = _check_common(objective, num_variables, population)
    check_probability(crossover_probability, "crossover_probability")
    mutation_rate = _mutation_rate(mutation_rate, n)

    def init(rng_key) -> BlackBoxState:
        state, points, scores = _uniform_start(rng_key, objective, n, lam)
        return state._replace(search=(points, scores))

    def step(rng_key, state: BlackBoxState) -> tuple[BlackBoxState, BlackBoxInfo]:
        members, scores = state.search
        pick_key, cross_key, mask_key, mutate_key = jax.random.split(rng_key, 4)
        contenders = jax.random.randint(pick_key, (2, lam - 1, 2), 0, lam)
        # Binary tournaments: the better of each pair of contenders (ties to the first).
        first, second = contenders[..., 0], contenders[..., 1]
        parents = jnp.where(scores[first] >= scores[second], first, second)  # [2, λ - 1]
        mother, father = members[parents[0]], members[parents[1]]
        cross = jax.random.bernoulli(cross_key, crossover_probability, (lam - 1, 1))
        take_father = jax.random.bernoulli(mask_key, 0.5, (lam - 1, n)) & cross
        children = jnp.where(take_father, father, mother)
        flips = jax.random.bernoulli(mutate_key, mutation_rate, (lam - 1, n)).astype(jnp.int32)
        children = jnp.bitwise_xor(children, flips)
        values = evaluate(objective, children)
        elite = jnp.argmax(scores)
        new_members = jnp.concatenate([members[elite][None], children])
        new_scores = jnp.concatenate([scores[elite][None], ranked(values)])
        return record(state, (new_members, new_scores), children, values)

    return BlackBoxOptimizer(counted(init, lam), counted(step, lam - 1))
