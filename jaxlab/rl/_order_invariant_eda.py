"""Order-invariant EDA: an any-order autoregressive model of binary points trained with GRPO.

(σ, σ′)-RL-EDA (Goudet et al., ICML 2026) maximises a black-box ``f: {0, 1}^n -> ℝ`` with an
autoregressive generative model that has no fixed variable order: each sample is generated in
its own random order σ, the likelihood ratios of the GRPO/PPO update are taken under fresh random
training orders σ′ (information-preserving dropout), and the advantages are group-relative
(scale-invariant z-scores, or ranks: invariant to every increasing transform of ``f``). The
update is :func:`jaxlab.rl.grpo` unchanged: one "prompt", ``G`` samples per step.

Models: :class:`AnyOrderLogistic` (linear conditionals, all ``n`` of them for one sample in one
masked product) and :class:`AnyOrderMLP` (the note's ``[x ⊙ m, m] -> MLP -> n`` logits).

References:
  O. Goudet, Q. Suire, A. Goëffon, F. Saubion, S. Lamprier, *Black-Box Combinatorial
  Optimization with Order-Invariant Reinforcement Learning*, ICML 2026, arXiv 2510.01824;
  B. Uria, I. Murray, H. Larochelle, *A Deep and Tractable Density Estimator*, ICML 2014.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.typing import ArrayLike

from jaxlab._src.optimization import counted
from jaxlab._src.validation import (
    check_array,
    check_choice,
    check_int,
    check_key,
    check_nonnegative,
    check_positive_int,
    is_concrete,
)
from jaxlab.rl._black_box import (
    BlackBoxInfo,
    BlackBoxOptimizer,
    BlackBoxState,
    check_objective,
    evaluate,
    initial_state,
    num_steps_for_budget,
    record,
    run_optimizer,
)
from jaxlab.rl._eda_baselines import genetic_algorithm, one_plus_one_ea, pbil, umda
from jaxlab.rl._grpo import grpo
from jaxlab.rl._policy import _check_permutations, order_masks, random_orders

__all__ = [
    "AnyOrderLogistic",
    "AnyOrderMLP",
    "BlackBoxResult",
    "log_prob_any_order",
    "maximize",
    "oi_eda",
    "sample_any_order",
]

ORDER_MODES = ("fixed", "sigma", "sigma_sigmap")


def _check_orders(orders: Any, num_variables: int) -> jax.Array:
    o = check_array(orders, "orders", kind="integer", ndim=2).astype(jnp.int32)
    if o.shape[1] != num_variables:
        raise ValueError(
            f"orders must have shape (N, num_variables={num_variables}), got {o.shape}"
        )
    _check_permutations(o, num_variables, "num_variables")
    return o


def _binary_points(x: Any, num_variables: int, name: str = "x") -> jax.Array:
    v = check_array(x, name, kind="real", ndim=2)
    if v.shape[1] != num_variables:
        raise ValueError(
            f"{name} must have shape (N, num_variables={num_variables}), got {v.shape}"
        )
    if is_concrete(v) and not np.all(np.isin(np.asarray(v), (0, 1))):
        raise ValueError(f"{name} must hold 0/1 values")
    return v.astype(jnp.float32)


def _ancestral_sample(logits_fn: Callable, rng_key: jax.Array, orders: jax.Array) -> jax.Array:
    """Samples ``x_{σ_k} ~ Bern(sigmoid(logits_fn(x, revealed)[σ_k]))`` for ``k = 1..n``."""
    n_samples, n = orders.shape
    rows = jnp.arange(n_samples)
    uniforms = jax.random.uniform(rng_key, (n, n_samples))

    def body(carry, xs):
        x, revealed = carry
        k, u = xs
        position = orders[:, k]
        logit = logits_fn(x, revealed)[rows, position]
        bit = (u < jax.nn.sigmoid(logit)).astype(jnp.float32)
        return (x.at[rows, position].set(bit), revealed.at[rows, position].set(1.0)), None

    zeros = jnp.zeros((n_samples, n), jnp.float32)
    (x, _), _ = jax.lax.scan(body, (zeros, zeros), (jnp.arange(n), uniforms))
    return x.astype(jnp.int32)


class AnyOrderLogistic(nnx.Module):
    """Any-order logistic conditionals ``ℓ_i = b_i + Σ_{j ≠ i} (W_ij x_j + V_ij) m_j``.

    ``p(x | σ) = Π_k Bern(x_{σ_k}; sigmoid(ℓ_{σ_k}(x ⊙ m_k, m_k)))`` with ``m_k`` the indicator of
    the variables generated before step ``k``. ``V`` lets a conditional depend on *which*
    variables are revealed, not only on their values. With ``M = order_masks(σ)`` all ``n``
    conditionals of a sample are ``ℓ = b + (W ⊙ M) x + (V ⊙ M) 1`` in one product; sampling
    updates every pending logit by one column of ``W`` and ``V`` per step (``O(n)`` a step).
    All parameters start at 0: the uniform distribution, whatever the order.

    Args:
      num_variables: ``n >= 1``.
      rngs: unused (the zero start needs none); accepted so both models build alike.

    Examples:
      >>> model = AnyOrderLogistic(4)
      >>> x = jnp.array([[1, 0, 1, 1]])
      >>> round(float(log_prob_any_order(model, x, jnp.array([[3, 1, 0, 2]]))[0]), 4)  # -4 log 2
      -2.7726

    References:
      O. Goudet et al., ICML 2026, arXiv 2510.01824 (the reconstruction of ``notes/oi_eda.md``).
    """

    def __init__(self, num_variables: int, *, rngs: nnx.Rngs | None = None):
        n = check_positive_int(num_variables, "num_variables")
        self.num_variables = n
        self.bias = nnx.Param(jnp.zeros(n, jnp.float32))
        self.weights = nnx.Param(jnp.zeros((n, n), jnp.float32))
        self.revealed_weights = nnx.Param(jnp.zeros((n, n), jnp.float32))

    def _off_diagonal(self) -> tuple[jax.Array, jax.Array]:
        off = 1.0 - jnp.eye(self.num_variables, dtype=jnp.float32)
        return self.weights[...] * off, self.revealed_weights[...] * off

    def __call__(self, x: jax.Array, revealed: jax.Array) -> jax.Array:
        """Logits ``[N, n]`` of every variable given the revealed set ``revealed [N, n]``."""
        w, v = self._off_diagonal()
        return self.bias[...][None, :] + (x * revealed) @ w.T + revealed @ v.T

    def conditional_logits(self, x: jax.Array, orders: jax.Array) -> jax.Array:
        """``ℓ_i`` of each variable given those before it under its sample's order, ``[N, n]``."""
        masks = order_masks(orders)
        w, v = self._off_diagonal()
        return (
            self.bias[...][None, :]
            + jnp.einsum("gij,ij,gj->gi", masks, w, x.astype(jnp.float32))
            + jnp.einsum("gij,ij->gi", masks, v)
        )

    def sample(self, rng_key: jax.Array, orders: jax.Array) -> jax.Array:
        """One point per order, int32 ``[N, n]`` (``n`` steps of ``O(n)`` work per sample)."""
        n_samples, n = orders.shape
        rows = jnp.arange(n_samples)
        w, v = self._off_diagonal()
        uniforms = jax.random.uniform(rng_key, (n, n_samples))

        def body(carry, xs):
            x, logits = carry
            k, u = xs
            position = orders[:, k]
            bit = (u < jax.nn.sigmoid(logits[rows, position])).astype(jnp.float32)
            # Every later conditional gains x_j W_{:, j} + V_{:, j} once x_j is revealed.
            logits = logits + bit[:, None] * w[:, position].T + v[:, position].T
            return (x.at[rows, position].set(bit), logits), None

        start = (
            jnp.zeros((n_samples, n), jnp.float32),
            jnp.broadcast_to(self.bias[...], (n_samples, n)),
        )
        (x, _), _ = jax.lax.scan(body, start, (jnp.arange(n), uniforms))
        return x.astype(jnp.int32)


class AnyOrderMLP(nnx.Module):
    """Any-order MLP conditionals: ``[x ⊙ m, m] ∈ ℝ^{2n} -> hidden (GELU) -> ℝ^n`` logits.

    The conditional of ``x_i`` reads the logit ``i`` of the network applied to the revealed
    part of ``x`` (mask ``m`` without ``i``); a sample's ``n`` conditionals take ``n`` masked
    rows, batched. The output layer starts at 0 (the uniform distribution).

    Args:
      num_variables: ``n >= 1``.
      hidden: widths of the hidden layers (the note: ``(128, 128)``).
      rngs: ``nnx.Rngs`` for the hidden layers' initialisation.

    Examples:
      >>> model = AnyOrderMLP(5, hidden=(16,), rngs=nnx.Rngs(0))
      >>> x = sample_any_order(model, jax.random.key(0), jnp.tile(jnp.arange(5), (3, 1)))
      >>> x.shape, log_prob_any_order(model, x, jnp.tile(jnp.arange(5), (3, 1))).shape
      ((3, 5), (3,))

    References:
      O. Goudet et al., ICML 2026, arXiv 2510.01824; B. Uria et al., ICML 2014.
    """

    def __init__(self, num_variables: int, hidden: Sequence[int] = (128, 128), *, rngs: nnx.Rngs):
        n = check_positive_int(num_variables, "num_variables")
        if isinstance(hidden, int) or not isinstance(hidden, Sequence):
            raise TypeError(f"hidden must be a sequence of ints (widths), got {hidden!r}")
        widths = [check_positive_int(h, f"hidden[{i}]") for i, h in enumerate(hidden)]
        if not isinstance(rngs, nnx.Rngs):
            raise TypeError(f"rngs must be an nnx.Rngs, got {type(rngs).__name__}")
        self.num_variables = n
        sizes = [2 * n, *widths]
        self.layers = nnx.List(
            [nnx.Linear(a, b, rngs=rngs) for a, b in zip(sizes[:-1], sizes[1:], strict=True)]
        )
        self.head = nnx.Linear(sizes[-1], n, kernel_init=nnx.initializers.zeros, rngs=rngs)

    def __call__(self, x: jax.Array, revealed: jax.Array) -> jax.Array:
        """Logits ``[..., n]`` of every variable given ``revealed [..., n]``."""
        h = jnp.concatenate([x.astype(jnp.float32) * revealed, revealed], axis=-1)
        for layer in self.layers:
            h = jax.nn.gelu(layer(h))
        return self.head(h)

    def conditional_logits(self, x: jax.Array, orders: jax.Array) -> jax.Array:
        """``ℓ_i`` of each variable given those before it under its sample's order, ``[N, n]``."""
        masks = order_masks(orders)  # [N, n (row i), n]
        xs = jnp.broadcast_to(x.astype(jnp.float32)[:, None, :], masks.shape)
        logits = self(xs, masks)  # [N, n (row i), n (output)]
        return jnp.diagonal(logits, axis1=1, axis2=2)

    def sample(self, rng_key: jax.Array, orders: jax.Array) -> jax.Array:
        """One point per order, int32 ``[N, n]`` (``n`` network calls on ``N`` rows)."""
        return _ancestral_sample(self, rng_key, orders)


_MODELS = (AnyOrderLogistic, AnyOrderMLP)


def _check_model(model: Any) -> Any:
    if not isinstance(model, _MODELS):
        raise TypeError(
            f"model must be an AnyOrderLogistic or AnyOrderMLP, got {type(model).__name__}"
        )
    return model


def sample_any_order(model: Any, rng_key: jax.Array, orders: ArrayLike) -> jax.Array:
    """Ancestral samples of an any-order model, one per order: int32 ``[N, n]``.

    Variable ``orders[g, k]`` of sample ``g`` is drawn at step ``k`` from its conditional given
    the variables drawn before it.

    Args:
      model: an :class:`AnyOrderLogistic` or :class:`AnyOrderMLP`.
      rng_key: a JAX PRNG key.
      orders: int ``[N, n]`` permutations (:func:`jaxlab.rl.random_orders`).

    Examples:
      >>> model = AnyOrderLogistic(6)
      >>> sample_any_order(model, jax.random.key(0), random_orders(jax.random.key(1), 4, 6)).shape
      (4, 6)
    """
    model = _check_model(model)
    check_key(rng_key)
    return model.sample(rng_key, _check_orders(orders, model.num_variables))


def log_prob_any_order(model: Any, x: ArrayLike, orders: ArrayLike) -> jax.Array:
    """``log p(x_g | σ_g) = Σ_i [x_i ℓ_i - log(1 + e^{ℓ_i})]`` per sample, ``[N]``.

    Args:
      model: an :class:`AnyOrderLogistic` or :class:`AnyOrderMLP`.
      x: 0/1 points ``[N, n]``.
      orders: int ``[N, n]`` permutations.

    Examples:
      >>> model = AnyOrderLogistic(3)
      >>> points = jnp.array([[0, 1, 1], [1, 1, 1]])
      >>> logp = log_prob_any_order(model, points, jnp.array([[0, 1, 2], [2, 1, 0]]))
      >>> [round(float(v), 4) for v in logp]  # -3 log 2 under every order
      [-2.0794, -2.0794]
    """
    model = _check_model(model)
    n = model.num_variables
    v = _binary_points(x, n)
    o = _check_orders(orders, n)
    if o.shape[0] != v.shape[0]:
        raise ValueError(f"orders must have one row per point ({v.shape[0]}), got {o.shape[0]}")
    return _log_likelihood(model, v, o)


def _log_likelihood(model, x: jax.Array, orders: jax.Array) -> jax.Array:
    """``Σ_i [x_i ℓ_i - log(1 + e^{ℓ_i})]`` per sample, from the model's conditional logits."""
    logits = model.conditional_logits(x, orders)
    return jnp.sum(x * logits - jax.nn.softplus(logits), axis=-1)


# --------------------------------------------------------------------------------------------
# The EDA.


def oi_eda(
    objective: Callable,
    num_variables: int,
    *,
    population: int = 64,
    num_epochs: int = 4,
    clip_epsilon: ArrayLike = 0.2,
    order_mode: str = "sigma_sigmap",
    advantage: str = "zscore",
    optimizer: optax.GradientTransformation | None = None,
    model: str | AnyOrderLogistic | AnyOrderMLP = "linear",
    hidden: Sequence[int] = (128, 128),
    kl_coef: ArrayLike = 0.0,
) -> BlackBoxOptimizer:
    """(σ, σ′)-RL-EDA: an any-order autoregressive model trained by GRPO to maximise ``f``.

    Each step draws ``G`` points, each under its own generation order σ_g, evaluates
    ``f(x_g)``, turns the values into group-relative advantages ``Â`` (z-scores, or ranks), and
    takes ``num_epochs`` optimizer steps on the clipped surrogate
    ``(1/G) Σ_g min(ρ_g Â_g, clip(ρ_g, 1 - ε_c, 1 + ε_c) Â_g)`` with the sequence ratio
    ``ρ_g = p_θ(x_g | σ′_g) / p_θold(x_g | σ′_g)`` under training orders σ′ (:func:`grpo`,
    unchanged, with one prompt). ``order_mode``: ``"fixed"`` (σ = σ′ = identity),
    ``"sigma"`` (random σ, σ′ = σ) or ``"sigma_sigmap"`` (independent random σ and σ′: the
    paper's). The best point ever evaluated is kept; every evaluation counts. A step whose
    values are not finite skips its update and is counted (``state.nonfinite_count``; the
    GRPO core's ``state.search.skipped_count`` counts every skipped update, by cause).

    Args:
      objective: ``f(x [N, n] int32) -> [N]`` real, maximised (traceable, vmappable).
      num_variables: ``n >= 1``.
      population: ``G >= 2`` points (evaluations) per step.
      num_epochs: optimizer steps per sampled group ``E >= 1``.
      clip_epsilon: ``ε_c >= 0`` (traceable).
      order_mode: ``"fixed"``, ``"sigma"`` or ``"sigma_sigmap"``.
      advantage: ``"zscore"`` or ``"rank"`` (invariant to increasing transforms of ``f``).
      optimizer: an optax transformation (``None``: Adam with learning rate 0.01 for the linear
        model, 1e-3 for the MLP, the note's defaults).
      model: ``"linear"`` (:class:`AnyOrderLogistic`, zero start), ``"mlp"``
        (:class:`AnyOrderMLP` with ``hidden``, initialised from ``init``'s key), or a model
        instance whose parameters are the start.
      hidden: the MLP's hidden widths.
      kl_coef: weight of the KL to the initial model (traceable; 0 in the paper's variant).

    Returns:
      A :class:`jaxlab.rl.BlackBoxOptimizer`; ``state.search`` is the :class:`GRPOState`.

    Examples:
      >>> from jaxlab.rl import leading_ones
      >>> algorithm = oi_eda(leading_ones, 12, population=32)
      >>> state = algorithm.init(jax.random.key(0))
      >>> run = jax.jit(algorithm.step)
      >>> for key in jax.random.split(jax.random.key(1), 60):
      ...     state, info = run(key, state)
      >>> float(state.best_value), int(state.evaluations)
      (12.0, 1920)

    References:
      O. Goudet, Q. Suire, A. Goëffon, F. Saubion, S. Lamprier, *Black-Box Combinatorial
      Optimization with Order-Invariant Reinforcement Learning*, ICML 2026, arXiv 2510.01824.
    """
    n = check_positive_int(num_variables, "num_variables")
    check_objective(objective, n)
    group = check_int(population, "population", minimum=2)
    check_choice(order_mode, "order_mode", ORDER_MODES)
    if advantage not in ("zscore", "rank"):
        raise ValueError(f"advantage must be 'zscore' or 'rank', got {advantage!r}")
    check_nonnegative(clip_epsilon, "clip_epsilon")
    check_nonnegative(kl_coef, "kl_coef")
    if isinstance(model, str):
        if model not in ("linear", "mlp"):
            raise ValueError(
                f"model must be 'linear', 'mlp' or an AnyOrderLogistic/AnyOrderMLP, got {model!r}"
            )
        build = (
            (lambda key: AnyOrderLogistic(n))
            if model == "linear"
            else (lambda key: AnyOrderMLP(n, hidden, rngs=nnx.Rngs(key)))
        )
        kind = model
    else:
        start = _check_model(model)
        if start.num_variables != n:
            raise ValueError(
                f"model must have num_variables={n} variables, got {start.num_variables}"
            )
        kind = "linear" if isinstance(start, AnyOrderLogistic) else "mlp"

        def build(key):
            return start

    graphdef, _ = nnx.split(build(jax.random.key(0)))
    if optimizer is None:
        optimizer = optax.adam(1e-2 if kind == "linear" else 1e-3)
    sample_fn, log_prob_fn = _model_fns(graphdef)

    def reward_fn(rng_key, tokens, prompts):
        return evaluate(objective, tokens[0])[None]

    random = functools.partial(random_orders, length=n)
    grpo_init, grpo_step = grpo(
        sample_fn,
        log_prob_fn,
        reward_fn,
        optimizer,
        group_size=group,
        advantage=advantage,
        clip_epsilon=clip_epsilon,
        kl_coef=kl_coef,
        num_epochs=check_positive_int(num_epochs, "num_epochs"),
        order_fn=None if order_mode == "fixed" else random,
        training_order_fn=random if order_mode == "sigma_sigmap" else None,
    )
    prompts = jnp.zeros(1, jnp.int32)

    def init(rng_key) -> BlackBoxState:
        check_key(rng_key)
        _, params = nnx.split(build(rng_key))
        return initial_state(grpo_init(params), n)

    def step(rng_key, state: BlackBoxState) -> tuple[BlackBoxState, BlackBoxInfo]:
        search, info = grpo_step(rng_key, state.search, prompts)
        return record(state, search, info.tokens[0], info.rewards[0], info.clip_fraction)

    return BlackBoxOptimizer(counted(init, 0), counted(step, group))


@functools.lru_cache(maxsize=32)
def _model_fns(graphdef):
    def merged(params, num):
        # The GRPO core passes orders=None for the fixed (left-to-right) mode.
        model = nnx.merge(graphdef, params)
        identity = jnp.broadcast_to(
            jnp.arange(model.num_variables, dtype=jnp.int32), (num, model.num_variables)
        )
        return model, identity

    def sample_fn(params, rng_key, prompts, orders):
        model, identity = merged(params, prompts.shape[0])
        return model.sample(rng_key, identity if orders is None else orders)

    def log_prob_fn(params, tokens, prompts, orders):
        model, identity = merged(params, tokens.shape[0])
        x = tokens.astype(jnp.float32)
        return _log_likelihood(model, x, identity if orders is None else orders)

    return sample_fn, log_prob_fn


# --------------------------------------------------------------------------------------------
# One call.


class BlackBoxResult(NamedTuple):
    """What :func:`maximize` returns.

    Attributes:
      best_x: int32 ``[n]``, the best point evaluated.
      best_value: its value.
      evaluations: evaluations spent (at most the budget).
      best_values: the best-so-far value after each step ``[T]`` (an anytime curve).
      evaluation_counts: the evaluation count after each step ``[T]``.
      nonfinite_count: steps with non-finite objective values (``maximize`` raises on any).

    Examples:
      >>> from jaxlab.rl import onemax
      >>> result = maximize(onemax, 8, jax.random.key(0), 640)
      >>> result.best_values.shape, int(result.evaluation_counts[-1])
      ((10,), 640)
    """

    best_x: jax.Array
    best_value: jax.Array
    evaluations: jax.Array
    best_values: jax.Array
    evaluation_counts: jax.Array
    nonfinite_count: jax.Array


METHODS = {
    "oi_eda": oi_eda,
    "umda": umda,
    "pbil": pbil,
    "one_plus_one_ea": one_plus_one_ea,
    "genetic_algorithm": genetic_algorithm,
}


def maximize(
    objective: Callable,
    num_variables: int,
    rng_key: jax.Array,
    budget: int,
    *,
    method: str = "oi_eda",
    **options: Any,
) -> BlackBoxResult:
    """Maximises ``objective`` over ``{0, 1}^n`` within ``budget`` evaluations, in one program.

    Builds ``METHODS[method](objective, num_variables, **options)`` (:func:`oi_eda` by default;
    ``"umda"``, ``"pbil"``, ``"one_plus_one_ea"``, ``"genetic_algorithm"``), runs as many steps
    as the budget allows in a jitted ``lax.scan`` and returns the best point with its anytime
    curve. Raises a ``ValueError`` naming ``objective`` if it returned a non-finite value.

    Args:
      objective: ``f(x [N, n] int32) -> [N]`` real, maximised (traceable).
      num_variables: ``n >= 1``.
      rng_key: a JAX PRNG key (same key, same result).
      budget: evaluations allowed (at least one generation).
      method: a key of ``METHODS``.
      **options: keyword arguments of the method (``population``, ``order_mode``, ...).

    Returns:
      A :class:`BlackBoxResult`.

    Examples:
      >>> from jaxlab.rl import onemax
      >>> result = maximize(onemax, 32, jax.random.key(0), budget=6_400)
      >>> float(result.best_value), int(result.evaluations)
      (32.0, 6400)
    """
    check_choice(method, "method", METHODS)
    check_key(rng_key)
    algorithm = METHODS[method](objective, num_variables, **options)
    steps = num_steps_for_budget(algorithm, budget)

    run = jax.jit(functools.partial(run_optimizer, algorithm, num_steps=steps))
    state, best, counts = run(rng_key)
    if int(state.nonfinite_count):
        raise ValueError(
            f"objective returned non-finite values in {int(state.nonfinite_count)} of {steps} "
            "steps (those values were never selected); return finite values, for example a large "
            "negative penalty for infeasible points"
        )
    return BlackBoxResult(
        state.best_x, state.best_value, state.evaluations, best, counts, state.nonfinite_count
    )
