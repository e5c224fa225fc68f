"""Problems with known answers for Hom-PGD⁺: the star toy and the non-convex QCQP family.

The star toy: K = {x : ||x|| <= R(θ)}, R(θ) = 1 + 0.6 sin(4θ) (four lobes, not convex), the
exact radial homeomorphism Φ(z) = z R(angle(z)) from the unit disk, f(x) = 0.3 (x₁-1)² +
0.7 (x₂-1)², an exact Euclidean projection onto K, and the global optimum found by a dense
boundary scan. The QCQP family: min ½xᵀQx + pᵀx over indefinite quadratic constraints, the box
|x_i| <= 5 and the ball ||x|| <= 5, sampled as in the paper's note (x = 0 strictly feasible),
with the condition vector a conditional invertible network reads.

References:
  C. Liu, E. Liang, M. Chen, "Hom-PGD⁺: Fast Reparameterized Optimization over Non-convex
  Ball-Homeomorphic Set", ICML 2026 (the toy and the QCQP family of the public code).
"""

from __future__ import annotations

import functools
import math
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxlab._src.validation import (
    check_array,
    check_choice,
    check_int,
    check_key,
    check_last_axis,
    check_positive_int,
)
from jaxlab.nn import (
    HomeomorphismTraining,
    InvertibleNet,
    QuadMixerEncoder,
    sample_latents,
    train_homeomorphism,
)
from jaxlab.solvers._hom_pgd import HomPGD

__all__ = [
    "STAR_OPTIMUM",
    "STAR_OPTIMUM_VALUE",
    "QCQPInstance",
    "qcqp_condition",
    "qcqp_condition_sampler",
    "qcqp_constraints",
    "qcqp_constraints_from_condition",
    "qcqp_hom_pgd",
    "qcqp_homeomorphism_net",
    "qcqp_objective",
    "sample_qcqp",
    "sample_qcqp_batch",
    "star_boundary",
    "star_constraint",
    "star_homeomorphism",
    "star_objective",
    "star_hom_pgd",
    "star_projection",
    "star_radius",
    "train_qcqp_homeomorphism",
]

#: Global minimum of :func:`star_objective` over the star set, by a dense boundary scan (the
#: interior has no stationary point: the unconstrained minimiser (1, 1) lies outside K).
STAR_OPTIMUM_VALUE = 0.0307132
#: Where it is attained (on the boundary, in the first lobe).
STAR_OPTIMUM = (1.04106, 0.79227)


# --------------------------------------------------------------------------------------------
# The star toy.


def star_radius(theta: jax.Array) -> jax.Array:
    """Boundary radius of the star set: R(θ) = 1 + 0.6 sin(4θ).

    Examples:
      >>> round(float(star_radius(jnp.pi / 8)), 6)
      1.6
    """
    theta = check_array(theta, "theta")
    return 1.0 + 0.6 * jnp.sin(4.0 * theta)


def _check_point(x, name: str) -> jax.Array:
    """One point of the plane: a real array of shape (2,)."""
    x = check_array(x, name)
    if x.shape != (2,):
        raise ValueError(f"{name} must be a point of the plane, shape (2,), got shape {x.shape}")
    return x


def star_homeomorphism(z: jax.Array) -> jax.Array:
    """The exact radial homeomorphism from the unit disk onto the star: Φ(z) = z R(angle(z)).

    Angle preserving, so ||Φ(z)|| = ||z|| R(θ) <= R(θ) for ||z|| <= 1. Lipschitz only away from
    the centre: start from z ≠ 0.

    Examples:
      >>> x = star_homeomorphism(jnp.array([1.0, 0.0]))
      >>> x.tolist()
      [1.0, 0.0]
    """
    z = check_array(z, "z", kind="floating")
    check_last_axis(z, 2, "z")
    return z * star_radius(jnp.arctan2(z[..., 1], z[..., 0]))[..., None]


def star_objective(x: jax.Array) -> jax.Array:
    """f(x) = 0.3 (x₁ - 1)² + 0.7 (x₂ - 1)², minimised outside the star at (1, 1).

    Examples:
      >>> float(star_objective(jnp.array([1.0, 1.0])))
      0.0
    """
    x = _check_point(x, "x")
    return 0.3 * (x[0] - 1.0) ** 2 + 0.7 * (x[1] - 1.0) ** 2


def star_constraint(x: jax.Array) -> jax.Array:
    """Residual ``||x|| - R(θ(x))`` as a (1,) array (<= 0 inside the star).

    Examples:
      >>> star_constraint(jnp.array([0.5, 0.0])).tolist()
      [-0.5]
    """
    x = _check_point(x, "x")
    norm = jnp.sqrt(jnp.sum(x * x))
    return (norm - star_radius(jnp.arctan2(x[1], x[0])))[None]


def star_boundary(phi: jax.Array) -> jax.Array:
    """Boundary points b(φ) = R(φ) (cos φ, sin φ) of the star set, shape (..., 2).

    Examples:
      >>> [round(v, 4) for v in star_boundary(jnp.asarray(jnp.pi / 8)).tolist()]
      [1.4782, 0.6123]
    """
    phi = check_array(phi, "phi")
    return star_radius(phi)[..., None] * jnp.stack([jnp.cos(phi), jnp.sin(phi)], axis=-1)


def star_projection(y: jax.Array, num_angles: int = 2048, newton_steps: int = 4) -> jax.Array:
    """Exact Euclidean projection onto the star set.

    Points inside are returned unchanged. Outside, the nearest boundary point b(φ) = R(φ)(cos φ,
    sin φ) is found by a dense search over ``num_angles`` angles, refined by safeguarded Newton
    steps on φ -> ||y - b(φ)||² (the step is clipped to one grid cell).

    Examples:
      >>> star_projection(jnp.array([0.5, 0.0])).tolist()  # inside: unchanged
      [0.5, 0.0]
      >>> x = star_projection(jnp.array([3.0, 0.0]))  # nearest boundary point: on the lobe
      >>> [round(v, 3) for v in x.tolist()], abs(float(star_constraint(x)[0])) < 1e-6
      ([1.484, 0.438], True)
    """
    num_angles = check_positive_int(num_angles, "num_angles")
    newton_steps = check_int(newton_steps, "newton_steps", minimum=0)
    y = _check_point(check_array(y, "y", kind="floating"), "y")
    cell = 2.0 * math.pi / num_angles

    def project(y):
        angles = jnp.arange(num_angles, dtype=y.dtype) * cell
        distances = jnp.sum((star_boundary(angles) - y[None, :]) ** 2, axis=1)
        phi = angles[jnp.argmin(distances)]
        distance = lambda p: jnp.sum((star_boundary(p) - y) ** 2)  # noqa: E731
        d1, d2 = jax.grad(distance), jax.grad(jax.grad(distance))

        def newton(_, p):
            h = d2(p)
            step = jnp.where(h > 0, d1(p) / jnp.where(h > 0, h, 1.0), 0.0)
            return p - jnp.clip(step, -cell, cell)

        phi = jax.lax.fori_loop(0, newton_steps, newton, phi)
        return star_boundary(phi)

    return jax.lax.cond(star_constraint(y)[0] <= 0.0, lambda y: y, project, y)


def star_hom_pgd(maxiter: int = 2000, **options) -> HomPGD:
    """Hom-PGD with the public code's star-toy settings through the exact map (no ``*args``).

    η₀ = 0.005, ×0.999 when f increases (floor 1e-6), stop when ``|Δf| <= 1e-5`` while feasible;
    the violation is measured with :func:`star_constraint`. ``jit=False`` and
    ``implicit_diff=False``: jit or vmap ``run`` yourself. ``options`` override any field.

    Examples:
      >>> with jax.enable_x64(True):
      ...     z, state = star_hom_pgd().run(jnp.array([0.3, 0.3]))
      >>> round(float(state.value), 5), float(state.violation)  # the note: 0.030886, 258 steps
      (0.03089, 0.0)

    References:
      C. Liu, E. Liang, M. Chen, "Hom-PGD⁺", ICML 2026 (the public code's 2-D toy).
    """
    settings = dict(
        stepsize=0.005,
        adaptive_decay=0.999,
        min_stepsize=1e-6,
        stopping="objective_change",
        maxiter=maxiter,
        tol=1e-5,
        implicit_diff=False,
        jit=False,
    )
    settings.update(options)
    return HomPGD(star_objective, star_homeomorphism, star_constraint, **settings)


# --------------------------------------------------------------------------------------------
# Non-convex QCQPs.


class QCQPInstance(NamedTuple):
    """min ½xᵀQx + pᵀx s.t. ½xᵀQ_jx + p_jᵀx <= b_j (j = 1..m), ``|x_i| <= 5``, ``||x||² <= 25``.

    Attributes:
      quad: ``Q``, shape ``(n, n)``.
      linear: ``p``, shape ``(n,)``.
      constraint_quad: ``Q_j``, shape ``(m, n, n)``.
      constraint_linear: ``p_j``, shape ``(m, n)``.
      constraint_bound: ``b_j``, shape ``(m,)``.

    Examples:
      >>> QCQPInstance._fields[:2]
      ('quad', 'linear')
    """

    quad: jax.Array
    linear: jax.Array
    constraint_quad: jax.Array
    constraint_linear: jax.Array
    constraint_bound: jax.Array


def sample_qcqp(rng_key: jax.Array, n: int, m: int) -> QCQPInstance:
    """Samples one non-convex QCQP instance of the note's family (x = 0 strictly feasible).

    With r = ⌊n/2⌋: λ_j ~ N(0, I_r) (indefinite), U_j ∈ ℝ^{n×r} Gaussian with unit-norm columns,
    Q_j = U_j diag(λ_j) U_jᵀ / n, p_j ~ N(0, I)/n, b_j = ||p_j|| + max_k λ_jk²; objective
    Q = U diag(μ) Uᵀ / n with μ ~ N(0, I_r), p ~ N(0, I)/n.

    Args:
      rng_key: a ``jax.random`` key.
      n: dimension (>= 2).
      m: number of quadratic constraints (>= 1).

    Returns:
      A :class:`QCQPInstance`.

    Examples:
      >>> inst = sample_qcqp(jax.random.key(0), 2, 3)
      >>> inst.constraint_quad.shape, bool(jnp.all(inst.constraint_bound > 0))
      ((3, 2, 2), True)
    """
    check_key(rng_key, "rng_key")
    n = check_int(n, "n", minimum=2)
    m = check_positive_int(m, "m")
    r = n // 2
    keys = jax.random.split(rng_key, 6)
    lam = jax.random.normal(keys[0], (m, r))
    basis = jax.random.normal(keys[1], (m, n, r))
    basis = basis / jnp.linalg.norm(basis, axis=1, keepdims=True)
    constraint_quad = jnp.einsum("mir,mr,mjr->mij", basis, lam, basis) / n
    constraint_linear = jax.random.normal(keys[2], (m, n)) / n
    constraint_bound = jnp.linalg.norm(constraint_linear, axis=1) + jnp.max(lam**2, axis=1)
    mu = jax.random.normal(keys[3], (r,))
    obj_basis = jax.random.normal(keys[4], (n, r))
    obj_basis = obj_basis / jnp.linalg.norm(obj_basis, axis=0, keepdims=True)
    quad = jnp.einsum("ir,r,jr->ij", obj_basis, mu, obj_basis) / n
    linear = jax.random.normal(keys[5], (n,)) / n
    return QCQPInstance(quad, linear, constraint_quad, constraint_linear, constraint_bound)


def sample_qcqp_batch(rng_key: jax.Array, n: int, m: int, num_instances: int) -> QCQPInstance:
    """A batch of :func:`sample_qcqp` instances, stacked along a leading axis.

    Instance i is ``sample_qcqp(jax.random.split(rng_key, num_instances)[i], n, m)``: the same
    family (x = 0 strictly feasible for each), drawn in one vmapped call, ready for a solver
    mapped over instances (``jax.vmap(..., in_axes=0)`` over the batch). The paper's sweep draws
    test instances at n ∈ {10, 30, 50}, m ∈ {10, 100, 1000} with seed 2025.

    Args:
      rng_key: a ``jax.random`` key.
      n: dimension (>= 2).
      m: number of quadratic constraints (>= 1).
      num_instances: batch size (>= 1).

    Returns:
      A :class:`QCQPInstance` whose arrays have a leading axis of size ``num_instances``
      (``quad``: (num_instances, n, n), ...). ``jax.tree.map(lambda a: a[i], batch)`` is
      instance i.

    Examples:
      >>> batch = sample_qcqp_batch(jax.random.key(2030), 2, 3, 3)
      >>> batch.constraint_quad.shape, batch.constraint_bound.shape
      ((3, 3, 2, 2), (3, 3))
      >>> third = sample_qcqp(jax.random.split(jax.random.key(2030), 3)[2], 2, 3)
      >>> bool(jnp.allclose(batch.quad[2], third.quad))
      True

    References:
      C. Liu, E. Liang, M. Chen, "Hom-PGD⁺", ICML 2026 (the QCQP family of its sweep).
    """
    check_key(rng_key, "rng_key")
    n = check_int(n, "n", minimum=2)
    m = check_positive_int(m, "m")
    num_instances = check_positive_int(num_instances, "num_instances")
    return _batch_sampler(n, m)(jax.random.split(rng_key, num_instances))


@functools.cache
def _batch_sampler(n: int, m: int):
    """One compiled vmapped sampler per size (an eager vmap would dispatch op by op)."""
    return jax.jit(jax.vmap(lambda key: sample_qcqp(key, n, m)))


def qcqp_objective(x: jax.Array, instance: QCQPInstance) -> jax.Array:
    """½xᵀQx + pᵀx.

    Examples:
      >>> float(qcqp_objective(jnp.zeros(2), sample_qcqp(jax.random.key(0), 2, 3)))
      0.0
    """
    instance = _check_instance(instance)
    _check_instance_point(x, instance.linear.shape[-1])
    return 0.5 * x @ instance.quad @ x + instance.linear @ x


def _check_instance(instance) -> QCQPInstance:
    if not isinstance(instance, QCQPInstance):
        raise TypeError(
            f"instance must be a QCQPInstance (from sample_qcqp), got {type(instance).__name__}"
        )
    return instance


def _check_instance_point(x, n: int) -> None:
    x = check_array(x, "x")
    if x.shape != (n,):
        raise ValueError(f"x must have shape (n,) = ({n},) for this instance, got shape {x.shape}")


def qcqp_condition(instance: QCQPInstance) -> jax.Array:
    """The INN condition: rows [vec Q_j, p_j, b_j], shape (m, n² + n + 1).

    Examples:
      >>> qcqp_condition(sample_qcqp(jax.random.key(0), 2, 3)).shape
      (3, 7)
    """
    m, n = _check_instance(instance).constraint_linear.shape
    return jnp.concatenate(
        [
            jnp.reshape(instance.constraint_quad, (m, n * n)),
            instance.constraint_linear,
            instance.constraint_bound[:, None],
        ],
        axis=1,
    )


def qcqp_constraints_from_condition(x: jax.Array, condition: jax.Array) -> jax.Array:
    """:func:`qcqp_constraints` read from the INN condition (the training loss's constraint).

    ``condition`` is :func:`qcqp_condition`'s (m, n² + n + 1) array, so a conditional network
    trained with ``jaxlab.nn.train_homeomorphism`` sees the instance only through it.

    Examples:
      >>> inst = sample_qcqp(jax.random.key(0), 2, 3)
      >>> x = jnp.array([0.5, -1.0])
      >>> bool(jnp.allclose(qcqp_constraints_from_condition(x, qcqp_condition(inst)),
      ...                   qcqp_constraints(x, inst)))
      True
    """
    x = check_array(x, "x")
    condition = check_array(condition, "condition", ndim=2)
    if x.ndim != 1:
        raise ValueError(f"x must be a vector of shape (n,), got shape {x.shape}")
    n = x.shape[0]
    m = condition.shape[0]
    if condition.shape[1] != n * n + n + 1:
        raise ValueError(
            f"condition must have shape (m, n² + n + 1) = (m, {n * n + n + 1}) for x of shape "
            f"({n},), got shape {condition.shape}"
        )
    quad = jnp.reshape(condition[:, : n * n], (m, n, n))
    linear = condition[:, n * n : n * n + n]
    bound = condition[:, -1]
    rows = 0.5 * jnp.einsum("i,mij,j->m", x, quad, x) + linear @ x - bound
    return jnp.concatenate([rows, jnp.abs(x) - 5.0, jnp.sum(x * x, keepdims=True) - 25.0])


def qcqp_constraints(x: jax.Array, instance: QCQPInstance) -> jax.Array:
    """All inequality residuals (<= 0 feasible): m quadratic rows, n box rows, the ball row.

    Examples:
      >>> g = qcqp_constraints(jnp.zeros(2), sample_qcqp(jax.random.key(0), 2, 3))
      >>> g.shape, bool(jnp.all(g < 0))
      ((6,), True)
    """
    instance = _check_instance(instance)
    _check_instance_point(x, instance.linear.shape[-1])
    return qcqp_constraints_from_condition(x, qcqp_condition(instance))


def _numpy_instance(instance: QCQPInstance) -> QCQPInstance:
    return QCQPInstance(*(np.asarray(a, np.float64) for a in instance))


def _numpy_problem(instance: QCQPInstance):
    """float64 objective, gradient, and SLSQP constraints (with Jacobians) of one instance."""
    q, p, qc, pc, bc = _numpy_instance(instance)
    sym = 0.5 * (q + q.T)
    qc_sym = 0.5 * (qc + np.transpose(qc, (0, 2, 1)))

    def fun(x):
        return 0.5 * x @ q @ x + p @ x

    def grad(x):
        return sym @ x + p

    def slack(x):  # >= 0 feasible; the box is passed to SLSQP as bounds
        quad = 0.5 * np.einsum("i,mij,j->m", x, qc, x) + pc @ x - bc
        return -np.concatenate([quad, [x @ x - 25.0]])

    def slack_jac(x):
        return -np.concatenate([np.einsum("mij,j->mi", qc_sym, x) + pc, 2.0 * x[None, :]])

    def violation(x):
        return max(0.0, float(np.max(-slack(x))), float(np.max(np.abs(x) - 5.0)))

    constraints = [{"type": "ineq", "fun": slack, "jac": slack_jac}]
    return fun, grad, constraints, violation


def qcqp_condition_sampler(n: int, m: int):
    """A sampler of fresh QCQP conditions: ``sample_conditions(rng_key, batch)``.

    It returns an array of shape ``(batch, m, n² + n + 1)``, one row per fresh instance.

    What ``jaxlab.nn.train_homeomorphism`` draws each step to train one conditional network
    for the whole family (``sample_qcqp`` then ``qcqp_condition``, vmapped).

    Examples:
      >>> sample_conditions = qcqp_condition_sampler(2, 3)
      >>> sample_conditions(jax.random.key(0), 4).shape
      (4, 3, 7)
    """
    n = check_int(n, "n", minimum=2)
    m = check_positive_int(m, "m")

    def sample_conditions(rng_key, batch):
        keys = jax.random.split(rng_key, batch)
        return jax.vmap(lambda k: qcqp_condition(sample_qcqp(k, n, m)))(keys)

    return sample_conditions


def qcqp_homeomorphism_net(
    n: int,
    *,
    encoder_hidden: int = 64,
    hidden: int | None = None,
    num_layers: int = 3,
    film: str = "both",
    rngs,
):
    """The public code's conditional network for the QCQP family (not yet trained).

    A ``jaxlab.nn.InvertibleNet`` of ``num_layers`` MADE + ActNorm-LU blocks onto the box
    [-5, 5]^n, conditioned through a ``jaxlab.nn.QuadMixerEncoder`` of :func:`qcqp_condition`.

    Args:
      n: dimension.
      encoder_hidden: width (and embedding size) of the condition encoder.
      hidden: MADE width (None: max(n + 1, 64)).
      num_layers: number of blocks.
      film: FiLM placement in each MADE, ``"both"`` hidden layers or the ``"first"`` only (the
        authors' code); see ``jaxlab.nn.ConditionalMADE``.
      rngs: ``flax.nnx.Rngs``.

    Returns:
      The ``InvertibleNet``; ``net(z, qcqp_condition(instance))[0]`` maps latents into the box.

    Examples:
      >>> from flax import nnx
      >>> net = qcqp_homeomorphism_net(2, encoder_hidden=8, hidden=8, rngs=nnx.Rngs(0))
      >>> condition = qcqp_condition(sample_qcqp(jax.random.key(0), 2, 3))
      >>> net(jnp.zeros((5, 2)), condition)[0].shape
      (5, 2)
    """
    n = check_int(n, "n", minimum=2)
    encoder = QuadMixerEncoder(n, encoder_hidden, hidden=encoder_hidden, rngs=rngs)
    return InvertibleNet(
        n,
        num_layers=num_layers,
        hidden=hidden,
        condition_encoder=encoder,
        bounds=(-5.0, 5.0),
        film=film,
        rngs=rngs,
    )


def train_qcqp_homeomorphism(
    rng_key: jax.Array,
    n: int,
    m: int,
    *,
    num_steps: int = 10_000,
    batch_size: int = 256,
    penalty_weight: float = 10.0,
    encoder_hidden: int = 64,
    hidden: int | None = None,
    latent_pool: int = 10_000,
    progress=None,
    snapshot_steps: tuple[int, ...] = (),
    film: str = "both",
) -> HomeomorphismTraining:
    """Builds and trains one conditional network for the whole QCQP family of size (n, m).

    The public code's recipe: :func:`qcqp_homeomorphism_net` (initial weights from ``rng_key``)
    trained by ``jaxlab.nn.train_homeomorphism`` on a fixed pool of ``latent_pool`` latents
    (``jaxlab.nn.sample_latents``) and ``batch_size`` fresh :func:`sample_qcqp` instances per
    step, minimising the homeomorphism loss
    ``-(1/n) E log|det J_Φ| + w_pen E Σ_j [g_j(Φ(z); c)]₊ + 0.01 E D + 0.1 max D`` with AdamW
    (1e-3, ×0.99 every 100 steps) and Polyak (EMA 0.99) weights. The authors train 10,000
    steps, at batch 256 for the 2-D toy and 64 for the sweep, with w_pen = 10 and width 64.

    Args:
      rng_key: a ``jax.random`` key (initial weights, latent pool, training draws).
      n: dimension (>= 2).
      m: number of quadratic constraints (>= 1).
      num_steps: training steps.
      batch_size: latents and fresh instances per step.
      penalty_weight: w_pen of the homeomorphism loss.
      encoder_hidden: width (and embedding size) of the QuadMixer condition encoder.
      hidden: MADE width (None: max(n + 1, 64)).
      latent_pool: size of the fixed latent pool.
      progress: optional object with ``track(iterable, total=, description=)``.
      snapshot_steps: steps after which the EMA network is also kept (``.snapshots``), so one
        run gives the map at several budgets.
      film: FiLM placement in each MADE (``"both"`` or ``"first"``, see
        :func:`qcqp_homeomorphism_net`).

    Returns:
      A ``jaxlab.nn.HomeomorphismTraining``; ``.model`` (EMA weights) feeds
      :func:`qcqp_hom_pgd`.

    Examples:
      >>> out = train_qcqp_homeomorphism(jax.random.key(0), 2, 3, num_steps=40, batch_size=32,
      ...                                encoder_hidden=8, hidden=8, latent_pool=512)
      >>> out.history["loss"].shape, out.model.num_features
      ((40,), 2)

    References:
      C. Liu, E. Liang, M. Chen, "Hom-PGD⁺", ICML 2026 (scripts/inn_pgd of the public code).
    """
    check_key(rng_key, "rng_key")
    n = check_int(n, "n", minimum=2)
    m = check_positive_int(m, "m")
    num_steps = check_positive_int(num_steps, "num_steps")
    latent_pool = check_positive_int(latent_pool, "latent_pool")
    train_key, latent_key, net_key = jax.random.split(rng_key, 3)
    rngs = nnx.Rngs(int(jax.random.randint(net_key, (), 0, 2**30)))
    net = qcqp_homeomorphism_net(
        n, encoder_hidden=encoder_hidden, hidden=hidden, film=film, rngs=rngs
    )
    return train_homeomorphism(
        net,
        qcqp_constraints_from_condition,
        sample_latents(latent_key, latent_pool, n),
        rng_key=train_key,
        num_steps=num_steps,
        batch_size=batch_size,
        sample_conditions=qcqp_condition_sampler(n, m),
        penalty_weight=penalty_weight,
        chunk_size=min(100, num_steps),
        progress=progress,
        snapshot_steps=snapshot_steps,
    )


def qcqp_hom_pgd(
    model,
    *,
    maxiter: int | None = None,
    projection: Literal["none", "ball", "box"] = "none",
    repair: Literal["radial", "bisection"] = "radial",
    stopping: Literal["none", "objective_change", "gradient_mapping"] = "none",
) -> HomPGD:
    """Hom-PGD with the public code's QCQP settings over a conditional network (e.g. a trained
    :func:`qcqp_homeomorphism_net`).

    Plain latent steps repaired by the authors' radial bisection toward the latent centre (20
    halvings for n <= 2, 10 above), η₀ = 0.1 with the adaptive step and no early stop (the authors'
    ``run_first_order_loop`` runs every one of its ``maxiter`` iterations), ``maxiter`` 500 for
    n = 2 and 10 n above by default. By default no latent projection
    (``projection="none"``): the authors' INN-PGD (``INNPGDOptimizer``) never projects, and
    with the paper's projection onto the ball (n <= 2) or cube the QCQP gaps were larger in
    jaxlab's runs; ``"ball"``/``"box"`` keep the paper's rule. The network's weights are an
    argument, so networks of one architecture share a compiled solve:
    call ``run(z0, weights, instance)`` with ``weights = nnx.split(model, nnx.Param, ...)[1:]``.

    Args:
      model: the conditional network, ``model(z, qcqp_condition(instance))[0] -> x``.
      maxiter: iteration cap (None: the code's default above).
      projection: latent projection: ``"none"`` (the authors' code), ``"ball"`` (the paper,
        meant for n <= 2) or ``"box"`` (the paper's rule on the code's latent cube).
      repair: ``"radial"`` (default, the authors' ``homeo_bisection``: shrink an infeasible
        step toward z = 0) or ``"bisection"`` (toward the last iterate: jaxlab's earlier
        default, which stalls once a step points out of K).
      stopping: ``"none"`` (default, the authors' code: all ``maxiter`` updates run),
        ``"objective_change"`` (``|Δf| <= 1e-5``; jaxlab's earlier default, which can stop right
        after a step the bisection cut short) or ``"gradient_mapping"``; see :class:`HomPGD`.

    Returns:
      A :class:`HomPGD` whose ``*args`` are ``(weights, instance)``.

    Examples:
      >>> from flax import nnx
      >>> net = qcqp_homeomorphism_net(2, encoder_hidden=8, hidden=8, rngs=nnx.Rngs(0))
      >>> solver = qcqp_hom_pgd(net, maxiter=20)
      >>> weights = nnx.split(net, nnx.Param, ...)[1:]
      >>> instance = sample_qcqp(jax.random.key(0), 2, 3)
      >>> z, state = solver.run(jnp.zeros(2), weights, instance)
      >>> z.shape, int(state.iter_num) <= 20
      ((2,), True)

    References:
      C. Liu, E. Liang, M. Chen, "Hom-PGD⁺", ICML 2026 (the public code's QCQP solver).
    """
    if not isinstance(model, nnx.Module) or not isinstance(
        getattr(model, "num_features", None), int
    ):
        raise TypeError(
            "model must be a conditional nnx network with num_features (e.g. "
            f"qcqp_homeomorphism_net), got {type(model).__name__}"
        )
    if maxiter is not None:
        check_positive_int(maxiter, "maxiter")
    check_choice(projection, "projection", ("none", "ball", "box"))
    check_choice(repair, "repair", ("radial", "bisection"))
    check_choice(stopping, "stopping", ("none", "objective_change", "gradient_mapping"))
    graphdef = nnx.split(model, nnx.Param, ...)[0]
    n = model.num_features

    def homeomorphism(z, weights, instance):
        return nnx.merge(graphdef, *weights)(z, qcqp_condition(instance))[0]

    return HomPGD(
        lambda x, weights, instance: qcqp_objective(x, instance),
        homeomorphism,
        lambda x, weights, instance: qcqp_constraints(x, instance),
        stepsize=0.1,
        repair=repair,
        projection=projection,
        stopping=stopping,
        maxiter=maxiter or (500 if n <= 2 else 10 * n),
        bisection_steps=20 if n <= 2 else 10,
        implicit_diff=False,
        jit=False,
    )
