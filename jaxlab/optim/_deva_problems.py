"""DeVA's benchmark problems: the authors' quadratic toy and its optimizers, and the LM's Muon peer.

The toy (Song et al., Section 6.1 and their ``trace_quadratic.py``) minimises
``f(X) = ½ tr(XᵀHX)``, ``X ∈ ℝ^{d×d}``, with the block-diagonal Hessian of
:func:`jaxlab.optim.quadratic_toy_hessian`, from stochastic gradients of
``½ (d/b) ‖A_b X‖_F`` where ``A_b`` holds ``b`` rows of ``H^{1/2}`` sampled with replacement (not
squared, as in the reference; the squared loss is an option), under the reference's schedule
(constant for half the steps, then linear to 0). :func:`quadratic_toy_optimizer` builds every
method the paper compares on it by name, with the authors' conventions.

References:
  Song, Bai, Zhang, Bullins, Gleich, "Decoupling Variance and Scale-Invariant Updates in Adaptive
  Gradient Descent for Unified Vector and Matrix Optimization" (DeVA), ICML 2026,
  arXiv 2602.06880; code: github.com/Tsedao/Decoupled-Variance-Adaptation.
"""

# No ``from __future__ import annotations``: kept like _deva.py for optax's annotations.
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.typing import ArrayLike

from jaxlab._src import linalg
from jaxlab._src.validation import (
    check_bool,
    check_choice,
    check_key,
    check_learning_rate,
    check_nonnegative,
    check_positive_int,
)
from jaxlab.optim._deva import (
    deva,
    deva_matrix_labels,
    deva_vector,
    quadratic_toy_hessian,
    scale_by_deva_matrix,
)
from jaxlab.optim._soap import scale_by_soap

__all__ = [
    "DEVA_LM_METHODS",
    "QUADRATIC_TOY_HETEROGENEOUS",
    "QUADRATIC_TOY_HOMOGENEOUS",
    "QUADRATIC_TOY_METHODS",
    "deva_lm_optimizer",
    "deva_muon_baseline",
    "quadratic_toy_problems",
    "quadratic_toy_curve",
    "quadratic_toy_optimizer",
    "quadratic_toy_schedule",
    "quadratic_toy_sweep",
]

# The paper's block eigenvalues: heterogeneous blocks (each block's eigenvalues close together,
# the blocks far apart) and homogeneous ones (every block spans the whole range).
QUADRATIC_TOY_HETEROGENEOUS = ((1.0, 2.0, 3.0), (99.0, 100.0, 101.0), (4998.0, 4999.0, 5000.0))
QUADRATIC_TOY_HOMOGENEOUS = ((1.0, 99.0, 4998.0), (2.0, 100.0, 4999.0), (3.0, 101.0, 5000.0))
# The language-model comparison's optimizers (:func:`deva_lm_optimizer`).
DEVA_LM_METHODS = ("adamw", "muon", "deva")
# ``muon``: the authors' Muon; ``muon_optax``: optax's default scale.
QUADRATIC_TOY_METHODS = (
    "gd",
    "adam",
    "muon",
    "muon_optax",
    "soap",
    "deva_vector",
    "deva_matrix",
)


def quadratic_toy_problems(*, squared: bool = True) -> tuple[list[str], jax.Array, jax.Array]:
    """The paper's toy instances: heterogeneous and homogeneous blocks, each loss variant.

    Args:
      squared: also list the squared-loss variant of each Hessian (after the reference's).

    Returns:
      ``(names, eigenvalues, squared_flags)``: names like ``"heterogeneous_frobenius"``,
      ``(problems, 3, 3)`` block eigenvalues (:data:`QUADRATIC_TOY_HETEROGENEOUS`,
      :data:`QUADRATIC_TOY_HOMOGENEOUS`) and ``(problems,)`` flags, 1.0 for the squared loss
      (the arguments of :func:`quadratic_toy_sweep`).

    Examples:
      >>> names, eigenvalues, flags = quadratic_toy_problems(squared=False)
      >>> names, eigenvalues.shape, flags.tolist()
      (['heterogeneous_frobenius', 'homogeneous_frobenius'], (2, 3, 3), [0.0, 0.0])
    """
    squared = check_bool(squared, "squared")
    blocks = {
        "heterogeneous": QUADRATIC_TOY_HETEROGENEOUS,
        "homogeneous": QUADRATIC_TOY_HOMOGENEOUS,
    }
    losses = ("frobenius", "squared") if squared else ("frobenius",)
    names = [f"{h}_{loss}" for h in blocks for loss in losses]
    eigenvalues = jnp.asarray([blocks[name.split("_")[0]] for name in names])
    flags = jnp.asarray([float(name.endswith("squared")) for name in names])
    return names, eigenvalues, flags


def quadratic_toy_schedule(peak_lr: ArrayLike, steps: int) -> optax.Schedule:
    """The toy's schedule: ``peak_lr`` for ``steps // 2`` steps, then linear to 0.

    Args:
      peak_lr: the constant phase's learning rate (may be traced).
      steps: the run's length.

    Returns:
      an ``optax.Schedule``.

    Examples:
      >>> schedule = quadratic_toy_schedule(0.1, 4)
      >>> [round(float(schedule(t)), 3) for t in range(5)]
      [0.1, 0.1, 0.1, 0.05, 0.0]
    """
    steps = check_positive_int(steps, "steps")
    half = steps // 2
    return optax.join_schedules(
        [optax.constant_schedule(peak_lr), optax.linear_schedule(peak_lr, 0.0, steps - half)],
        [half],
    )


def quadratic_toy_optimizer(
    method: str,
    learning_rate: optax.ScalarOrSchedule,
    *,
    b2: ArrayLike = 0.99,
    precondition_frequency: int = 10,
) -> optax.GradientTransformation:
    """One of the toy's methods by name, with ``β₁ = 0`` and the authors' conventions.

    ``"gd"`` SGD; ``"adam"`` Adam; ``"muon"`` the authors' Muon, ``√max(rows, cols)·msign(g)``,
    momentum 0, no Nesterov (optax's ``consistent_rms=1``: exactly the reference's factor, 3 on a
    9×9 matrix; the reference's Newton-Schulz starts from ``(Σσ⁸)^{1/8}`` in bfloat16, optax's
    from the Frobenius norm in float32); ``"muon_optax"`` optax's default scale
    ``√max(1, fan_out/fan_in)`` (1 on a square matrix, a third of the authors' step);
    ``"soap"`` :func:`jaxlab.optim.scale_by_soap`; ``"deva_vector"`` DeVA-ℓ∞;
    ``"deva_matrix"`` DeVA-S∞ (:func:`jaxlab.optim.scale_by_deva_matrix`).

    Args:
      method: one of :data:`QUADRATIC_TOY_METHODS`.
      learning_rate: a scalar or schedule (:func:`quadratic_toy_schedule`).
      b2: ``β₂`` of the adaptive methods.
      precondition_frequency: SOAP's and DeVA-S∞'s eigenbasis refresh period.

    Returns:
      an ``optax.GradientTransformation``.

    Examples:
      >>> import jax.numpy as jnp
      >>> tx = quadratic_toy_optimizer("deva_matrix", 0.1)
      >>> updates, _ = tx.update(jnp.eye(3), tx.init(jnp.zeros((3, 3))))
      >>> updates.shape
      (3, 3)
    """
    check_choice(method, "method", QUADRATIC_TOY_METHODS)
    lr, freq = learning_rate, precondition_frequency
    if method == "gd":
        return optax.sgd(lr)
    if method == "adam":
        return optax.adam(lr, b1=0.0, b2=b2)
    if method == "muon":
        return optax.contrib.muon(lr, beta=0.0, nesterov=False, consistent_rms=1.0)
    if method == "muon_optax":
        return optax.contrib.muon(lr, beta=0.0)
    if method == "soap":
        return optax.chain(
            scale_by_soap(0.0, b2, precondition_frequency=freq),
            optax.scale_by_learning_rate(lr),
        )
    if method == "deva_vector":
        return deva_vector(lr, b1=0.0, b2=b2)
    return optax.chain(
        scale_by_deva_matrix(0.0, b2, precondition_frequency=freq),
        optax.scale_by_learning_rate(lr),
    )


def quadratic_toy_curve(
    rng_key: jax.Array,
    eigenvalues: ArrayLike,
    tx: optax.GradientTransformation,
    *,
    steps: int,
    batch_size: int = 3,
    squared: ArrayLike = False,
    full_batch: bool = False,
) -> jax.Array:
    """``f(X_t)``, ``t = 0..steps``, of ``tx`` on the toy whose Hessian blocks have ``eigenvalues``.

    ``rng_key`` splits into the Hessian's key (:func:`jaxlab.optim.quadratic_toy_hessian`), the
    start ``X_0 ~ N(0, 1)^{d×d}`` and the row samples (step ``t``: ``fold_in(key, t)``). The
    stochastic gradient is that of ``½ (d/b) ‖A_b X‖_F`` (``‖A_b X‖_F²`` where ``squared``, which
    may be traced); ``full_batch`` uses ``∇f = HX`` instead (the reference's GD). Pure and
    traceable: vmap it over keys, problems and learning rates.

    Args:
      rng_key: a ``jax.random`` key.
      eigenvalues: ``(K, b)`` block eigenvalues (``d = K·b``).
      tx: the optimizer (:func:`quadratic_toy_optimizer`).
      steps: iterations.
      batch_size: rows of ``H^{1/2}`` per stochastic gradient.
      squared: use the squared Frobenius loss.
      full_batch: use the exact gradient.

    Returns:
      ``(steps + 1,)`` values of ``f``.

    Examples:
      >>> import jax
      >>> tx = quadratic_toy_optimizer("adam", 0.1)
      >>> curve = quadratic_toy_curve(jax.random.key(0), [[1.0, 2.0], [50.0, 60.0]], tx, steps=50)
      >>> curve.shape, bool(curve[-1] < curve[0])
      ((51,), True)
    """
    check_key(rng_key)
    steps = check_positive_int(steps, "steps")
    batch = check_positive_int(batch_size, "batch_size")
    full_batch = check_bool(full_batch, "full_batch")
    dim = math.prod(np.shape(eigenvalues))
    h_key, x_key, sample_key = jax.random.split(rng_key, 3)
    h = quadratic_toy_hessian(h_key, eigenvalues)
    values, vectors = linalg.eigh(h)
    root = (vectors * jnp.sqrt(jnp.maximum(values, 0.0))[None, :]) @ vectors.T

    def f(x):
        return 0.5 * jnp.trace(x.T @ h @ x)

    def stochastic_loss(x, rows):
        ax = root[rows] @ x
        norm2 = jnp.sum(ax * ax)  # > 0 almost surely, so both branches have finite grads
        return 0.5 * (dim / batch) * jnp.where(squared > 0.5, norm2, jnp.sqrt(norm2))

    def step(carry, t):
        x, state = carry
        if full_batch:
            grad = h @ x
        else:
            rows = jax.random.randint(jax.random.fold_in(sample_key, t), (batch,), 0, dim)
            grad = jax.grad(stochastic_loss)(x, rows)
        updates, state = tx.update(grad, state, x)
        x = optax.apply_updates(x, updates)
        return (x, state), f(x)

    x0 = jax.random.normal(x_key, (dim, dim), jnp.float32)
    _, trace = jax.lax.scan(step, (x0, tx.init(x0)), jnp.arange(steps))
    return jnp.concatenate([f(x0)[None], trace])


def deva_muon_baseline(
    learning_rate: optax.ScalarOrSchedule, *, weight_decay: ArrayLike = 0.01
) -> optax.GradientTransformation:
    """Muon with DeVA's parameter split and step scale: the fair Muon peer of :func:`deva`.

    Hidden matrices (:func:`jaxlab.optim.deva_matrix_labels`' ``"deva"`` leaves) go to Muon
    (``β = 0.95``, Nesterov: DeVA-S∞'s defaults) with decoupled ``weight_decay``, the rest to
    AdamW (``0.9, 0.95``, no decay: DeVA's fallback). ``consistent_rms=0.2`` gives the hidden
    update RMS ``0.2·lr``, DeVA's ``rms_scale``, so the hidden-to-fallback step ratio is the same
    for both and one peak learning rate means the same thing (with the rate tuned per method the
    hidden scale is only a reparametrisation of it).

    Args:
      learning_rate: a scalar or schedule.
      weight_decay: decoupled decay on the hidden matrices.

    Returns:
      an ``optax.GradientTransformation``.

    Examples:
      >>> import jax.numpy as jnp
      >>> params = {"hidden": {"kernel": jnp.ones((4, 4))}, "bias": jnp.zeros(4)}
      >>> tx = deva_muon_baseline(1e-2)
      >>> updates, _ = tx.update(params, tx.init(params), params)
      >>> updates["hidden"]["kernel"].shape
      (4, 4)
    """

    check_learning_rate(learning_rate)
    check_nonnegative(weight_decay, "weight_decay")

    def dimension_numbers(params: Any):
        labels = deva_matrix_labels(params)
        hidden = lambda label: optax.contrib.MuonDimensionNumbers() if label == "deva" else None
        return jax.tree.map(hidden, labels)

    return optax.contrib.muon(
        learning_rate,
        beta=0.95,
        weight_decay=weight_decay,
        adam_b1=0.9,
        adam_b2=0.95,
        muon_weight_dimension_numbers=dimension_numbers,
        consistent_rms=0.2,
    )


def quadratic_toy_sweep(
    method: str,
    rng_keys: jax.Array,
    eigenvalues: ArrayLike,
    squared: ArrayLike,
    learning_rates: ArrayLike,
    *,
    steps: int,
    batch_size: int = 3,
    b2: ArrayLike = 0.99,
    precondition_frequency: int = 10,
) -> jax.Array:
    """:func:`quadratic_toy_curve` of ``method`` over problems, peak learning rates and seeds.

    One jitted, vmapped program serves every problem, learning rate and seed (the peak learning
    rate of :func:`quadratic_toy_schedule` is traced); ``"gd"`` takes the exact gradient.

    Args:
      method: one of :data:`QUADRATIC_TOY_METHODS`.
      rng_keys: ``(seeds,)`` keys (each: Hessian, start and row samples).
      eigenvalues: ``(problems, K, b)`` block eigenvalues.
      squared: ``(problems,)``, 1.0 for the squared loss, 0.0 for the reference's.
      learning_rates: ``(lrs,)`` peak learning rates.
      steps: iterations.
      batch_size: rows per stochastic gradient.
      b2: ``β₂`` of the adaptive methods.
      precondition_frequency: SOAP's and DeVA-S∞'s refresh period.

    Returns:
      ``f`` curves, ``(problems, lrs, seeds, steps + 1)``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> curves = quadratic_toy_sweep("adam", jax.random.split(jax.random.key(0), 2),
      ...                              jnp.ones((1, 2, 2)), jnp.zeros(1), jnp.array([0.1, 0.3]),
      ...                              steps=5)
      >>> curves.shape
      (1, 2, 2, 6)
    """
    check_choice(method, "method", QUADRATIC_TOY_METHODS)
    steps = check_positive_int(steps, "steps")

    def one(key, eig, sq, peak_lr):
        schedule = quadratic_toy_schedule(peak_lr, steps)
        tx = quadratic_toy_optimizer(
            method, schedule, b2=b2, precondition_frequency=precondition_frequency
        )
        return quadratic_toy_curve(
            key,
            eig,
            tx,
            steps=steps,
            batch_size=batch_size,
            squared=sq,
            full_batch=method == "gd",
        )

    over_seeds = jax.vmap(one, in_axes=(0, None, None, None))
    over_lrs = jax.vmap(over_seeds, in_axes=(None, None, None, 0))
    over_problems = jax.vmap(over_lrs, in_axes=(None, 0, 0, None))
    # eigh/QR inside vmapped scans run one matrix per LAPACK call on CPU (jaxlab._src.linalg),
    # where batched calls could hang.
    args = (rng_keys, jnp.asarray(eigenvalues), jnp.asarray(squared), jnp.asarray(learning_rates))
    return jax.jit(over_problems)(*args)


def deva_lm_optimizer(
    method: str, learning_rate: optax.ScalarOrSchedule, *, weight_decay: ArrayLike = 0.01
) -> optax.GradientTransformation:
    """The language-model comparison's optimizers by name, on the same footing.

    ``"adamw"``: AdamW ``(0.9, 0.95)`` with decay on every parameter; ``"muon"``:
    :func:`deva_muon_baseline` (DeVA's parameter split and hidden step scale); ``"deva"``:
    :func:`jaxlab.optim.deva` with its defaults. ``weight_decay`` is decoupled in each.

    Args:
      method: one of :data:`DEVA_LM_METHODS`.
      learning_rate: a scalar or schedule.
      weight_decay: decoupled weight decay.

    Returns:
      an ``optax.GradientTransformation``.

    Examples:
      >>> import jax.numpy as jnp
      >>> params = {"hidden": {"kernel": jnp.ones((4, 4))}, "bias": jnp.zeros(4)}
      >>> tx = deva_lm_optimizer("deva", 1e-2)
      >>> updates, _ = tx.update(params, tx.init(params), params)
      >>> updates["bias"].shape
      (4,)
    """
    check_choice(method, "method", DEVA_LM_METHODS)
    check_learning_rate(learning_rate)
    if method == "adamw":
        return optax.adamw(learning_rate, b1=0.9, b2=0.95, weight_decay=weight_decay)
    if method == "muon":
        return deva_muon_baseline(learning_rate, weight_decay=weight_decay)
    return deva(learning_rate, weight_decay=weight_decay)
