"""Rule sets with hand-computed hulls and projections, and regression tasks with hard rules.

The rule sets are the reference checks of the DisjunctiveNet note (re-derived with scipy on our
own lifted QPs, ``ε → 0``); the tasks are its two quick experiments: input-decided rules
(``x`` picks the disjunct of every rule) and output-only rules (nothing in ``x`` picks one).

References:
  P. Pal, C. Li, "DisjunctiveNet: Neural Symbolic Learning via Differentiable Convexified
  Optimization Layers", ICML 2026 (arXiv 2605.30456).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxlab._src.training import scan_train
from jaxlab._src.validation import (
    check_array,
    check_bool,
    check_int,
    check_key,
    check_last_axis,
    check_nonnegative,
    check_positive_int,
)
from jaxlab.nn._disjunctive import Disjunct, Disjunction, DisjunctiveLayer, RuleSet, rule_penalty

__all__ = [
    "DisjunctiveTask",
    "gap_rules",
    "input_decided_regression_task",
    "input_decided_target",
    "input_decided_toy_rules",
    "output_only_regression_task",
    "output_only_target",
    "rule_network_apply",
    "rule_network_init",
    "rule_network_trainer",
    "tightness_rules",
]


def gap_rules() -> RuleSet:
    """The note's basic example: box ``[0, 1]²``, ``y₁ + y₂ ≥ 0.8``, rules ``y₁ ≤ 0.25 ∨ y₁ ≥
    0.75`` and ``y₂ ≤ 0.25 ∨ y₂ ≥ 0.75``.

    Every formulation's hull is ``{box, y₁ + y₂ ≥ 0.8}``: ``ŷ = (0.5, 0.1)`` projects to
    ``(0.6, 0.2)`` (violating rule 1; the exact projection is ``(0.75, 0.1)``), ``(0.3, 0.3)`` to
    ``(0.4, 0.4)``, and ``(0.5, 0.5)`` stays.

    Examples:
      >>> rules = gap_rules()
      >>> [r.name for r in rules.rules], rules.global_rhs.tolist()
      (['y1 gap', 'y2 gap'], [-0.8])
    """

    def gap(j: int) -> Disjunction:
        row = [[1.0 if i == j else 0.0 for i in range(2)]]
        low = Disjunct(row, [0.25])
        high = Disjunct([[-v for v in row[0]]], [-0.75])
        return Disjunction([low, high], f"y{j + 1} gap")

    return RuleSet(
        [0.0, 0.0], [1.0, 1.0], [gap(0), gap(1)], global_lhs=[[-1.0, -1.0]], global_rhs=[-0.8]
    )


def tightness_rules() -> RuleSet:
    """The note's example 2 (DNF strictly tighter than CNF): box ``[0, 1]²``,
    ``R₁: y₁ ≤ 0.3 ∨ y₁ ≥ 0.7``, ``R₂: y₂ ≤ y₁ - 0.4 ∨ y₂ ≥ y₁ + 0.4``.

    DNF hull ``{box, 2.8 ≤ 4y₁ + 7y₂ ≤ 8.2}`` (area 0.72), CNF ``{box, 0.4 ≤ y₁ + y₂ ≤ 1.6}``
    (0.84), true feasible area 0.27. ``ŷ = (0.5, 0)``: DNF ``(0.549231, 0.086154)``, CNF
    unchanged, exact ``(0.7, 0)``.

    Examples:
      >>> tightness_rules().num_scenarios
      4
    """
    r1 = Disjunction([Disjunct([[1.0, 0.0]], [0.3]), Disjunct([[-1.0, 0.0]], [-0.7])], "y1 gap")
    r2 = Disjunction(
        [Disjunct([[-1.0, 1.0]], [-0.4]), Disjunct([[1.0, -1.0]], [-0.4])], "y2 away from y1"
    )
    return RuleSet([0.0, 0.0], [1.0, 1.0], [r1, r2])


def input_decided_toy_rules() -> RuleSet:
    """The note's example 3: ``x ∈ [-1, 1]``, ``y ∈ [0, 10]²``,
    ``R₁: [x ≥ 0 ∧ y₁ ≤ 1] ∨ [x ≤ 0 ∧ y₁ ≥ 9]``, ``R₂: [x ≥ 0.3 ∧ y₂ ≥ 5] ∨ [x ≤ 0.3 ∧ y₂ ≤ 2]``.

    ``ŷ = (5, 3)``: ``x = 0.6 → (1, 5)``, ``x = 0.1 → (1, 2)``; at ``x = 0`` both antecedents of
    ``R₁`` hold and the hull projection ``(5, 2)`` violates ``R₁`` (the documented limitation).

    Examples:
      >>> input_decided_toy_rules().input_size
      1
    """
    ge = lambda v: ([[-1.0]], [-v])  # noqa: E731  x >= v
    le = lambda v: ([[1.0]], [v])  # noqa: E731  x <= v
    r1 = Disjunction(
        [
            Disjunct([[1.0, 0.0]], [1.0], condition=ge(0.0)),
            Disjunct([[-1.0, 0.0]], [-9.0], condition=le(0.0)),
        ],
        "R1",
    )
    r2 = Disjunction(
        [
            Disjunct([[0.0, -1.0]], [-5.0], condition=ge(0.3)),
            Disjunct([[0.0, 1.0]], [2.0], condition=le(0.3)),
        ],
        "R2",
    )
    return RuleSet(
        [0.0, 0.0], [10.0, 10.0], [r1, r2], input_size=1, input_lower=[-1.0], input_upper=[1.0]
    )


class DisjunctiveTask(NamedTuple):
    """A regression task with hard rules: the rules, train and test sets.

    Attributes:
      rule_set: the :class:`RuleSet` every target satisfies (before noise).
      x_train, y_train: ``(N_train, p)``, ``(N_train, n)`` noisy targets.
      x_test, y_test: ``(N_test, p)``, ``(N_test, n)`` noise-free targets.

    Examples:
      >>> task = input_decided_regression_task(jax.random.key(0), num_train=4, num_test=3)
      >>> task.x_train.shape, task.y_test.shape
      ((4, 3), (3, 2))
    """

    rule_set: RuleSet
    x_train: jax.Array
    y_train: jax.Array
    x_test: jax.Array
    y_test: jax.Array


def _input_decided_rules() -> RuleSet:
    # R1: [x1 >= 0.5 ∧ y1 <= 0.3] ∨ [x1 <= 0.5 ∧ y1 >= 0.6]
    # R2: [x2 + x3 >= 1 ∧ y2 >= 0.3] ∨ [x2 + x3 <= 1 ∧ y2 <= 0.5]
    r1 = Disjunction(
        [
            Disjunct([[1.0, 0.0]], [0.3], condition=([[-1.0, 0.0, 0.0]], [-0.5])),
            Disjunct([[-1.0, 0.0]], [-0.6], condition=([[1.0, 0.0, 0.0]], [0.5])),
        ],
        "R1",
    )
    r2 = Disjunction(
        [
            Disjunct([[0.0, -1.0]], [-0.3], condition=([[0.0, -1.0, -1.0]], [-1.0])),
            Disjunct([[0.0, 1.0]], [0.5], condition=([[0.0, 1.0, 1.0]], [1.0])),
        ],
        "R2",
    )
    return RuleSet(
        [0.0, 0.0],
        [1.0, 1.0],
        [r1, r2],
        input_size=3,
        input_lower=[0.0, 0.0, 0.0],
        input_upper=[1.0, 1.0, 1.0],
    )


def input_decided_target(x: jax.Array) -> jax.Array:
    """The noise-free target of :func:`input_decided_regression_task` (satisfies both rules).

    ``y₁* = 0.15 + 0.1 sin(2πx₂)`` if ``x₁ ≥ 0.5`` else ``0.8 + 0.15x₃``;
    ``y₂* = 0.35 + 0.3(x₂ + x₃ - 1)`` if ``x₂ + x₃ ≥ 1`` else ``0.45(x₂ + x₃)``.

    Examples:
      >>> y = input_decided_target(jnp.array([[0.7, 0.25, 0.0]]))
      >>> [[round(v, 4) for v in row] for row in y.tolist()]
      [[0.25, 0.1125]]
    """
    x = check_array(x, "x", kind="floating")
    check_last_axis(x, 3, "x")
    x1, x2, x3 = x[..., 0], x[..., 1], x[..., 2]
    y1 = jnp.where(x1 >= 0.5, 0.15 + 0.1 * jnp.sin(2 * jnp.pi * x2), 0.8 + 0.15 * x3)
    s = x2 + x3
    y2 = jnp.where(s >= 1.0, 0.35 + 0.3 * (s - 1.0), 0.45 * s)
    return jnp.stack([y1, y2], axis=-1)


def _output_only_rules() -> RuleSet:
    return tightness_rules()


def output_only_target(x: jax.Array) -> jax.Array:
    """The noise-free target of :func:`output_only_regression_task` (satisfies
    :func:`tightness_rules`, whose rules read no input).

    ``y₁* = 0.15 + 0.1 sin(2πx₂)`` if ``x₁ ≥ 0.5`` else ``0.8 + 0.15x₃``; ``y₂* = y₁* + 0.45 +
    0.25x₃`` when ``y₁*`` is small (``x₁ ≥ 0.5``), else ``y₁* - 0.45 - 0.3x₂``.

    Examples:
      >>> y = output_only_target(jnp.array([[0.7, 0.0, 0.0]]))
      >>> [[round(v, 4) for v in row] for row in y.tolist()]
      [[0.15, 0.6]]
    """
    x = check_array(x, "x", kind="floating")
    check_last_axis(x, 3, "x")
    x1, x2, x3 = x[..., 0], x[..., 1], x[..., 2]
    small = x1 >= 0.5
    y1 = jnp.where(small, 0.15 + 0.1 * jnp.sin(2 * jnp.pi * x2), 0.8 + 0.15 * x3)
    y2 = jnp.where(small, y1 + 0.45 + 0.25 * x3, y1 - 0.45 - 0.3 * x2)
    return jnp.stack([y1, y2], axis=-1)


def _task(rule_set, target, rng_key, num_train, num_test, noise_std) -> DisjunctiveTask:
    check_key(rng_key)
    check_int(num_train, "num_train", minimum=1)
    check_int(num_test, "num_test", minimum=1)
    check_nonnegative(noise_std, "noise_std")
    k_train, k_test, k_noise = jax.random.split(rng_key, 3)
    x_train = jax.random.uniform(k_train, (num_train, 3))
    x_test = jax.random.uniform(k_test, (num_test, 3))
    noise = noise_std * jax.random.normal(k_noise, (num_train, 2))
    return DisjunctiveTask(rule_set, x_train, target(x_train) + noise, x_test, target(x_test))


def input_decided_regression_task(
    rng_key: jax.Array, *, num_train: int = 100, num_test: int = 2000, noise_std: float = 0.02
) -> DisjunctiveTask:
    """The note's quick task A: ``x ~ U[0, 1]³``, ``y ∈ [0, 1]²``, two input-decided rules.

    ``R₁: [x₁ ≥ 0.5 ∧ y₁ ≤ 0.3] ∨ [x₁ ≤ 0.5 ∧ y₁ ≥ 0.6]``,
    ``R₂: [x₂ + x₃ ≥ 1 ∧ y₂ ≥ 0.3] ∨ [x₂ + x₃ ≤ 1 ∧ y₂ ≤ 0.5]``; targets
    :func:`input_decided_target` plus ``N(0, noise_std²)`` on the training set.

    Args:
      rng_key: a JAX PRNG key.
      num_train, num_test: sizes.
      noise_std: target noise on the training set.

    Returns:
      A :class:`DisjunctiveTask`.

    Examples:
      >>> from jaxlab.nn import rule_satisfaction
      >>> task = input_decided_regression_task(jax.random.key(0), num_train=8, num_test=50)
      >>> bool(rule_satisfaction(task.rule_set, task.x_test, task.y_test).all())
      True
    """
    return _task(
        _input_decided_rules(), input_decided_target, rng_key, num_train, num_test, noise_std
    )


def output_only_regression_task(
    rng_key: jax.Array, *, num_train: int = 100, num_test: int = 2000, noise_std: float = 0.02
) -> DisjunctiveTask:
    """The note's quick task B: the rules of :func:`tightness_rules` (outputs only) on
    :func:`output_only_target`, ``x ~ U[0, 1]³``.

    Args:
      rng_key: a JAX PRNG key.
      num_train, num_test: sizes.
      noise_std: target noise on the training set.

    Returns:
      A :class:`DisjunctiveTask`.

    Examples:
      >>> from jaxlab.nn import rule_satisfaction
      >>> task = output_only_regression_task(jax.random.key(0), num_train=8, num_test=50)
      >>> bool(rule_satisfaction(task.rule_set, None, task.y_test).all())
      True
    """
    return _task(_output_only_rules(), output_only_target, rng_key, num_train, num_test, noise_std)


def rule_network_init(
    rng_key: jax.Array, hidden: int, *, in_features: int = 3, out_features: int = 2
) -> list[dict[str, jax.Array]]:
    """The tasks' network: ``in → hidden → hidden → out``, He-normal weights, zero biases.

    Args:
      rng_key: a ``jax.random`` key (one per layer, split from it).
      hidden: hidden width.
      in_features: input size (the tasks' 3).
      out_features: output size (the tasks' 2).

    Returns:
      a list of ``{"w": (in, out), "b": (out,)}`` layers (:func:`rule_network_apply`).

    Examples:
      >>> import jax
      >>> params = rule_network_init(jax.random.key(0), 8)
      >>> [layer["w"].shape for layer in params]
      [(3, 8), (8, 8), (8, 2)]
    """
    check_key(rng_key)
    sizes = [
        check_positive_int(n, name)
        for n, name in (
            (in_features, "in_features"),
            (hidden, "hidden"),
            (hidden, "hidden"),
            (out_features, "out_features"),
        )
    ]
    keys = jax.random.split(rng_key, len(sizes) - 1)
    return [
        {"w": jax.random.normal(k, (a, b)) * math.sqrt(2.0 / a), "b": jnp.zeros((b,))}
        for k, a, b in zip(keys, sizes[:-1], sizes[1:], strict=True)
    ]


def rule_network_apply(params: list[dict[str, jax.Array]], x: jax.Array) -> jax.Array:
    """``sigmoid`` outputs in ``(0, 1)`` of ReLU hidden layers: raw predictions in the box.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> y = rule_network_apply(rule_network_init(jax.random.key(0), 8), jnp.ones((4, 3)))
      >>> y.shape, bool(jnp.all((y > 0) & (y < 1)))
      ((4, 2), True)
    """
    if not isinstance(params, list | tuple) or not params:
        raise TypeError(
            "params must be a non-empty list of {'w': (in, out), 'b': (out,)} layers "
            f"(rule_network_init's layout), got {type(params).__name__}"
        )
    h = x
    for layer in params[:-1]:
        h = jax.nn.relu(h @ layer["w"] + layer["b"][None, :])
    last = params[-1]
    return jax.nn.sigmoid(h @ last["w"] + last["b"][None, :])


def rule_network_trainer(
    layer: DisjunctiveLayer | None,
    rule_set: RuleSet | None,
    steps: int,
    *,
    uses_input: bool,
) -> Callable[..., Any]:
    """Full-batch Adam on the squared error of :func:`rule_network_apply`, optionally with rules.

    The returned ``train(params, x, y, learning_rate, penalty_weight) -> params`` (pure: jit and
    vmap it; the data, learning rate and weight are arguments, so one compilation serves them
    all) minimises ``mean ‖ŷ − y‖²`` over ``steps`` steps (:func:`jaxlab.nn.scan_train`), where
    ``ŷ`` is the network's output passed through ``layer`` when given (end-to-end training
    through the projection), plus ``penalty_weight · mean rule_penalty(rule_set, x, ŷ)`` when
    ``rule_set`` is given (the penalty baseline). ``uses_input`` passes ``x`` to the layer and the
    penalty (input-decided rules).

    Args:
      layer: a :class:`DisjunctiveLayer`, or None.
      rule_set: the penalised :class:`RuleSet`, or None.
      steps: Adam steps.
      uses_input: whether the rules read the input.

    Returns:
      ``train(params, x, y, learning_rate, penalty_weight) -> params``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> task = input_decided_regression_task(jax.random.key(0), num_train=32, num_test=8)
      >>> params = rule_network_init(jax.random.key(1), 8)
      >>> train = rule_network_trainer(None, None, 50, uses_input=True)
      >>> trained = jax.jit(train)(params, task.x_train, task.y_train, 1e-2, 0.0)
      >>> mse = lambda p: float(jnp.mean((rule_network_apply(p, task.x_train) - task.y_train)**2))
      >>> mse(trained) < mse(params)
      True
    """
    steps = check_positive_int(steps, "steps")
    uses_input = check_bool(uses_input, "uses_input")

    def train(params, x, y, learning_rate, penalty_weight):
        xs = x if uses_input else None

        def loss(params, _):
            raw = rule_network_apply(params, x)
            if layer is not None:
                raw, _ = layer(raw, xs)
            value = jnp.mean(jnp.sum((raw - y) ** 2, axis=-1))
            if rule_set is not None:
                value = value + penalty_weight * jnp.mean(rule_penalty(rule_set, xs, raw))
            return value

        return scan_train(loss, params, optax.adam(learning_rate), lambda s: None, steps).params

    return train
