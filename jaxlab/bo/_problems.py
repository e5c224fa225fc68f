"""Test functions for Bayesian optimization (values to *minimize*) and a two-regime GP sampler.

* :func:`levy` on ``[-10, 10]^d``, minimum 0 at ``(1, ..., 1)``;
* :func:`schwefel` on ``[-500, 500]^d``, minimum ``≈ 0`` at ``(420.9687, ...)``;
* :func:`two_regime` on ``[-1, 1]²`` (the RAMBO note's function, negated): a smooth bowl for
  ``x₁ < 0`` and a rough sinusoidal regime holding the optimum for ``x₁ >= 0``;
* :func:`bo_problem` bundles one with its box and optimal value, for regret curves;
* :func:`sample_two_gp_regimes` draws data from two GPs on the two halves of ``[0, 1]``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab._src import validation

__all__ = [
    "BOProblem",
    "TWO_REGIME_MINIMIZER",
    "TWO_REGIME_MINIMUM",
    "bo_problem",
    "levy",
    "sample_two_gp_regimes",
    "schwefel",
    "two_regime",
]

# The two-regime function's global minimum (the note's maximum 0.772621, negated) and its
# location (L-BFGS-B from the optimum of a 2001² grid, recomputed for the note).
TWO_REGIME_MINIMUM = -0.772621
TWO_REGIME_MINIMIZER = (0.397460, -0.125094)
_SCHWEFEL_CONSTANT = 418.9829
_SCHWEFEL_MINIMIZER = 420.9687


def _points(x, name="x"):
    x = validation.check_array(x, name, kind="floating")
    if x.ndim < 1 or x.shape[-1] < 1:
        raise ValueError(f"{name} must have a last axis of at least 1 entry, got shape {x.shape}")
    return x


def levy(x) -> jax.Array:
    """Levy's function over the last axis.

    ``w = 1 + (x - 1)/4``, ``sin²(πw₁) + Σ_{i<d} (w_i - 1)²[1 + 10 sin²(πw_i + 1)]
    + (w_d - 1)²[1 + sin²(2πw_d)]``.

    Examples:
      >>> import jax.numpy as jnp
      >>> round(float(levy(jnp.zeros(2))), 6)  # RAMBO note, check 10
      0.715845
    """
    x = _points(x)
    w = 1.0 + (x - 1.0) / 4.0
    head = jnp.sin(jnp.pi * w[..., 0]) ** 2
    mid = jnp.sum(
        (w[..., :-1] - 1.0) ** 2 * (1.0 + 10.0 * jnp.sin(jnp.pi * w[..., :-1] + 1.0) ** 2), -1
    )
    last = (w[..., -1] - 1.0) ** 2 * (1.0 + jnp.sin(2.0 * jnp.pi * w[..., -1]) ** 2)
    return head + mid + last


def schwefel(x) -> jax.Array:
    """Schwefel's function ``418.9829 d - Σ_i x_i sin(√|x_i|)`` over the last axis.

    Examples:
      >>> import jax.numpy as jnp
      >>> round(float(schwefel(jnp.zeros(2))), 4)  # RAMBO note, check 10
      837.9658
    """
    x = _points(x)
    return _SCHWEFEL_CONSTANT * x.shape[-1] - jnp.sum(x * jnp.sin(jnp.sqrt(jnp.abs(x))), -1)


def two_regime(x) -> jax.Array:
    """The RAMBO note's two-regime function, negated (to minimize), on ``[-1, 1]²``.

    ``g(x) = -2((x₁ + 0.5)² + x₂²)`` for ``x₁ < 0``, else
    ``0.5 + 0.3 sin(12x₁) sin(12x₂) - ((x₁ - 0.5)² + x₂²)``; returns ``-g``.

    Examples:
      >>> import jax.numpy as jnp
      >>> [round(float(two_regime(jnp.array(p))), 4) for p in ([-0.5, 0.0], [0.0, 0.0], [0.5, 0.0])]
      [0.0, -0.25, -0.5]
    """
    x = _points(x)
    validation.check_last_axis(x, 2, "x")
    x1, x2 = x[..., 0], x[..., 1]
    left = -2.0 * ((x1 + 0.5) ** 2 + x2**2)
    right = 0.5 + 0.3 * jnp.sin(12.0 * x1) * jnp.sin(12.0 * x2) - ((x1 - 0.5) ** 2 + x2**2)
    return -jnp.where(x1 < 0.0, left, right)


class BOProblem(NamedTuple):
    """A test problem: ``objective`` (to minimize, over the last axis), its ``bounds`` ``(d, 2)``,
    ``optimal_value`` and ``name``; simple regret is ``best observed - optimal_value``.

    Examples:
      >>> bo_problem("two_regime").optimal_value
      -0.772621
    """

    name: str
    objective: Callable[[jax.Array], jax.Array]
    bounds: np.ndarray
    optimal_value: float


def bo_problem(name: str, dim: int = 2) -> BOProblem:
    """``"levy"``, ``"schwefel"`` (any ``dim``) or ``"two_regime"`` (``dim = 2``) as a problem.

    Schwefel's optimal value is the function at its minimizer ``(420.9687, ...)`` (``2.5e-5``
    in 2-D, not exactly 0).

    Examples:
      >>> p = bo_problem("levy", 6)
      >>> p.bounds.shape, p.optimal_value
      ((6, 2), 0.0)
    """
    validation.check_choice(name, "name", ("levy", "schwefel", "two_regime"))
    dim = validation.check_positive_int(dim, "dim")
    if name == "two_regime":
        if dim != 2:
            raise ValueError(f"dim must be 2 for the two-regime function, got {dim}")
        return BOProblem(name, two_regime, np.array([[-1.0, 1.0]] * 2), TWO_REGIME_MINIMUM)
    if name == "levy":
        return BOProblem(name, levy, np.array([[-10.0, 10.0]] * dim), 0.0)
    x_opt = np.full(dim, _SCHWEFEL_MINIMIZER)
    value = _SCHWEFEL_CONSTANT * dim - float(np.sum(x_opt * np.sin(np.sqrt(x_opt))))
    return BOProblem(name, schwefel, np.array([[-500.0, 500.0]] * dim), value)


def sample_two_gp_regimes(
    rng_key, num_points: int = 60, *, lengthscales=(0.05, 0.5), signal_std=1.0, noise_std=0.05
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Data from two independent GPs on the halves of ``[0, 1]``: ``(x (n, 1), y (n,), labels)``.

    Points ``x ~ U[0, 1]``; ``y`` on ``[0, ½)`` is a draw of a GP with RBF lengthscale
    ``lengthscales[0]``, on ``[½, 1]`` of an independent one with ``lengthscales[1]`` (same
    signal std), plus Gaussian noise; ``labels`` is 0 or 1 by half. The generative truth for
    checking that a mixture of GPs recovers a partition.

    Examples:
      >>> import jax
      >>> x, y, labels = sample_two_gp_regimes(jax.random.key(0), 20)
      >>> x.shape, int(labels.sum()) == int((x[:, 0] >= 0.5).sum())
      ((20, 1), True)
    """
    validation.check_key(rng_key)
    n = validation.check_int(num_points, "num_points", minimum=2)
    validation.check_real_array(lengthscales, "lengthscales", minimum=0.0, include_minimum=False)
    if np.shape(lengthscales) != (2,):
        raise ValueError(f"lengthscales must hold the two regimes' lengthscales, got shape "
                         f"{np.shape(lengthscales)}")  # fmt: skip
    validation.check_real(signal_std, "signal_std", minimum=0.0, include_minimum=False)
    validation.check_real(noise_std, "noise_std", minimum=0.0)
    kx, kf, kn = jax.random.split(rng_key, 3)
    x = jax.random.uniform(kx, (n,))
    labels = (x >= 0.5).astype(jnp.int32)
    sq = (x[:, None] - x[None, :]) ** 2
    ls = jnp.asarray(lengthscales, x.dtype)[labels]
    same = labels[:, None] == labels[None, :]
    cov = jnp.where(same, signal_std**2 * jnp.exp(-0.5 * sq / (ls[:, None] * ls[None, :])), 0.0)
    chol = jnp.linalg.cholesky(cov + 1e-6 * jnp.eye(n))
    f = chol @ jax.random.normal(kf, (n,))
    y = f + noise_std * jax.random.normal(kn, (n,))
    return x[:, None], y, labels
