"""Problem instances with known answers for flow-prior inverse problems, and their baselines.

- :class:`GaussianMixtureFlow`: a Gaussian-mixture target whose flow-matching velocity is known in
  closed form (no training), with its exact moments and the exact posterior of a linear Gaussian
  observation; :func:`three_mode_mixture` is the note's 2-D instance.
- :func:`digits_images`: scikit-learn's bundled 8x8 digits (no download), scaled to [-1, 1].
- :func:`measure`: noisy measurements ``y = A x + σ ε``.
- :func:`least_squares_baseline`: the regularised least-squares reconstruction (zero-fill /
  pseudo-inverse with a smoothness penalty), and :func:`psnr`.

References:
  Y. Lipman et al., "Flow Matching for Generative Modeling", ICLR 2023 (arXiv 2210.02747), for
  the Gaussian-path velocity; A. Denker et al., "Trajectory Stitching for Solving Inverse
  Problems with Flow-Based Models", ICML 2026 (arXiv 2602.08538), for the tasks.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from jaxlab._src.validation import (
    check_array,
    check_finite_array,
    check_key,
    check_last_axis,
    check_nonnegative,
    check_positive,
    check_positive_int,
    check_real_array,
    is_concrete,
)
from jaxlab.inverse._operators import LinearOperator, check_operator

__all__ = [
    "DigitsSplit",
    "GaussianMixtureFlow",
    "digits_images",
    "least_squares_baseline",
    "measure",
    "psnr",
    "three_mode_mixture",
]


def _as_time(t: ArrayLike, dtype) -> jax.Array:
    t = jnp.asarray(t, dtype)
    if t.ndim != 0:
        raise ValueError(f"t must be a scalar time in [0, 1], got shape {t.shape}")
    check_finite_array(t, "t")
    if is_concrete(t) and not 0.0 <= float(t) <= 1.0:
        raise ValueError(f"t must be a time in [0, 1] (the flow's path), got {float(t)}")
    return t


def _check_mixture(
    weights: ArrayLike, means: ArrayLike, covariances: ArrayLike, *, zero_weights: bool = False
):
    """:class:`GaussianMixtureFlow`'s checks (concrete values): shapes, a law, SPD covariances.

    ``zero_weights`` admits weights equal to 0 (a posterior's softmax can underflow to 0).
    """
    w = check_array(weights, "weights", kind="floating", ndim=1)
    m = check_array(means, "means", kind="floating", ndim=2)
    c = check_array(covariances, "covariances", kind="floating", ndim=3)
    k, d = m.shape
    if w.shape != (k,):
        raise ValueError(f"weights must have shape (K,) = ({k},) like means, got {w.shape}")
    if c.shape != (k, d, d):
        raise ValueError(f"covariances must have shape (K, D, D) = {(k, d, d)}, got {c.shape}")
    wn = check_real_array(w, "weights", minimum=0.0, include_minimum=zero_weights)
    if wn is not None and abs(wn.sum() - 1.0) > 1e-5:
        raise ValueError(f"weights must sum to 1, got sum {wn.sum()}")
    check_real_array(m, "means")
    cn = check_real_array(c, "covariances")
    if cn is not None:
        if not np.allclose(cn, np.swapaxes(cn, 1, 2), atol=1e-6):
            raise ValueError("covariances must be symmetric")
        if np.min(np.linalg.eigvalsh(cn)) <= 0:
            raise ValueError("covariances must be positive definite")
    return w, m, c


@dataclasses.dataclass(frozen=True)
class GaussianMixtureFlow:
    """A Gaussian mixture target ``Σ_k π_k N(m_k, Σ_k)`` and its exact flow-matching velocity.

    On the linear path ``x_t = (1 - t) x_0 + t x_1`` (``x_0 ~ N(0, I)`` at ``t = 0``, data at
    ``t = 1``), given component ``k`` the marginal is ``x_t ~ N(t m_k, S_k(t))`` with
    ``S_k(t) = (1 - t)² I + t² Σ_k``, and the marginal velocity is::

        v(x, t) = Σ_k w_k(x, t) v_k(x, t),   w_k ∝ π_k N(x; t m_k, S_k(t)),
        v_k(x, t) = m_k + (t Σ_k - (1 - t) I) S_k(t)⁻¹ (x - t m_k).

    The weights are computed with a log-sum-exp (near ``t = 1`` with small ``Σ_k`` they are
    sharp). ``v(x, 0) = Σ_k π_k m_k - x`` and ``v(x, 1) = x``: integrating
    ``ẋ = v(x, t)`` from 0 to 1 maps ``N(0, I)`` onto the mixture.

    The instance is a pytree (its arrays are leaves), so it is passed to jitted code as the
    ``params`` of a velocity function: ``GaussianMixtureFlow.velocity`` has the signature
    ``velocity_fn(params, x, t)`` that :func:`~jaxlab.inverse.integrate_flow` and the solvers
    expect.

    Attributes:
      weights: mixture weights ``π`` (K,), positive, summing to 1.
      means: component means (K, D).
      covariances: component covariances (K, D, D), symmetric positive definite.

    Examples:
      >>> import jax.numpy as jnp
      >>> flow = three_mode_mixture()
      >>> v = flow.velocity(jnp.array([0.0, 0.0]), 0.0)  # Σ π_k m_k - x
      >>> [round(float(c), 6) + 0.0 for c in v]
      [0.5, 0.0]
      >>> [round(float(c), 6) for c in flow.velocity(jnp.array([0.75, 0.75]), 0.5)]
      [1.455411, 1.363843]

    References:
      Y. Lipman et al., "Flow Matching for Generative Modeling", ICLR 2023 (arXiv 2210.02747).
    """

    weights: jax.Array
    means: jax.Array
    covariances: jax.Array

    def __post_init__(self):
        # The constructor checks concrete arrays as ``create`` does (issue 44: only ``create``
        # checked, so a mixture with weights summing to 2 or an indefinite covariance was built);
        # traced leaves are left alone, and pytree operations do not come here (_flow_unflatten).
        fields = (self.weights, self.means, self.covariances)
        if all(isinstance(f, np.ndarray | jax.Array | list | tuple) for f in fields) and all(
            is_concrete(f) for f in fields
        ):
            _check_mixture(*fields, zero_weights=True)

    @classmethod
    def create(
        cls, weights: ArrayLike, means: ArrayLike, covariances: ArrayLike
    ) -> GaussianMixtureFlow:
        """Validates the arrays (concrete ones) and builds the mixture.

        Examples:
          >>> flow = GaussianMixtureFlow.create([0.5, 0.5], [[1.0], [-1.0]], [[[0.1]], [[0.1]]])
          >>> flow.dim
          1
        """
        w, m, c = _check_mixture(weights, means, covariances)
        return cls(w, m, c.astype(m.dtype))

    @property
    def dim(self) -> int:
        return int(self.means.shape[-1])

    def _component_terms(self, x: jax.Array, t: jax.Array):
        eye = jnp.eye(self.dim, dtype=x.dtype)
        cov = (1.0 - t) ** 2 * eye[None] + t**2 * self.covariances  # S_k(t), (K, D, D)
        diff = x[None, :] - t * self.means  # (K, D)
        chol = jnp.linalg.cholesky(cov)
        white = jax.scipy.linalg.solve_triangular(chol, diff[..., None], lower=True)[..., 0]
        solved = jax.scipy.linalg.solve_triangular(
            jnp.swapaxes(chol, -1, -2), white[..., None], lower=False
        )[..., 0]  # S_k(t)⁻¹ (x - t m_k)
        log_det = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)
        log_norm = -0.5 * (jnp.sum(white**2, axis=-1) + log_det + self.dim * math.log(2 * math.pi))
        return cov, solved, jnp.log(self.weights) + log_norm

    def velocity(self, x: ArrayLike, t: ArrayLike) -> jax.Array:
        """The exact marginal velocity ``v(x, t)`` for one point ``x`` (D,) at scalar time ``t``.

        Batches go through ``jax.vmap``. As a velocity function, ``GaussianMixtureFlow.velocity``
        is called as ``velocity(flow, x, t)``.

        Examples:
          >>> import jax.numpy as jnp
          >>> flow = three_mode_mixture()
          >>> v = flow.velocity(jnp.array([1.0, -1.0]), 1.0)  # v(x, 1) = x
          >>> [round(float(c), 6) for c in v]
          [1.0, -1.0]
        """
        x = jnp.asarray(x)
        check_last_axis(x, self.dim, "x", "dim")
        if x.ndim != 1:
            raise ValueError(f"x must be one point of shape ({self.dim},), got {x.shape}")
        t = _as_time(t, x.dtype)
        _, solved, log_w = self._component_terms(x, t)
        w = jax.nn.softmax(log_w)
        eye = jnp.eye(self.dim, dtype=x.dtype)
        gain = t * self.covariances - (1.0 - t) * eye[None]
        v_k = self.means + jnp.einsum("kij,kj->ki", gain, solved)
        return jnp.einsum("k,kd->d", w, v_k)

    def log_prob(self, x: ArrayLike, t: ArrayLike = 1.0) -> jax.Array:
        """Log-density of ``x_t`` (default ``t = 1``: the mixture itself) at one point ``x``.

        Examples:
          >>> import jax.numpy as jnp
          >>> flow = three_mode_mixture()
          >>> round(float(flow.log_prob(jnp.zeros(2), 0.0)), 6)  # N(0, I) at 0: -log 2π
          -1.837877
        """
        x = jnp.asarray(x)
        check_last_axis(x, self.dim, "x", "dim")
        if x.ndim != 1:
            raise ValueError(f"x must be one point of shape ({self.dim},), got {x.shape}")
        _, _, log_w = self._component_terms(x, _as_time(t, x.dtype))
        return jax.nn.logsumexp(log_w)

    def sample(self, rng_key: jax.Array, num_samples: int) -> jax.Array:
        """``num_samples`` draws from the mixture, (num_samples, D).

        Examples:
          >>> import jax
          >>> three_mode_mixture().sample(jax.random.key(0), 5).shape
          (5, 2)
        """
        check_key(rng_key)
        n = check_positive_int(num_samples, "num_samples")
        pick_key, noise_key = jax.random.split(rng_key)
        k = jax.random.categorical(pick_key, jnp.log(self.weights), shape=(n,))
        chol = jnp.linalg.cholesky(self.covariances)
        eps = jax.random.normal(noise_key, (n, self.dim), self.means.dtype)
        return self.means[k] + jnp.einsum("nij,nj->ni", chol[k], eps)

    def mean(self) -> jax.Array:
        """The exact mean ``Σ_k π_k m_k``.

        Examples:
          >>> [round(float(c), 6) + 0.0 for c in three_mode_mixture().mean()]
          [0.5, 0.0]
        """
        return jnp.einsum("k,kd->d", self.weights, self.means)

    def covariance(self) -> jax.Array:
        """The exact covariance ``Σ_k π_k (Σ_k + m_k m_kᵀ) - μ μᵀ``.

        Examples:
          >>> cov = three_mode_mixture().covariance()
          >>> [[round(float(c), 6) + 0.0 for c in row] for row in cov]
          [[2.2, 0.0], [0.0, 1.7]]
        """
        mean = self.mean()
        second = jnp.einsum(
            "k,kij->ij",
            self.weights,
            self.covariances + jnp.einsum("ki,kj->kij", self.means, self.means),
        )
        return second - jnp.outer(mean, mean)

    def posterior(
        self, matrix: ArrayLike, y: ArrayLike, noise_std: ArrayLike
    ) -> GaussianMixtureFlow:
        """The exact posterior of ``x`` given ``y = A x + σ ε`` (again a Gaussian mixture).

        Per component: ``C_k = (Σ_k⁻¹ + AᵀA/σ²)⁻¹``, ``c_k = C_k (Σ_k⁻¹ m_k + Aᵀy/σ²)`` and
        ``π'_k ∝ π_k N(y; A m_k, A Σ_k Aᵀ + σ² I)``.

        Args:
          matrix: ``A`` (M, D).
          y: the measurement (M,).
          noise_std: ``σ > 0``.

        Returns:
          The posterior mixture.

        Examples:
          >>> import jax.numpy as jnp
          >>> post = three_mode_mixture().posterior(jnp.array([[1.0, 0.0]]), jnp.array([1.5]),
          ...                                       0.05)
          >>> post.weights.round(3).tolist()  # x₁ = 1.5 rules out the third mode
          [0.5, 0.5, 0.0]
        """
        a = check_array(matrix, "matrix", kind="floating", ndim=2)
        check_last_axis(a, self.dim, "matrix", "dim")
        y = check_array(y, "y", kind="floating", ndim=1)
        if y.shape != (a.shape[0],):
            raise ValueError(f"y must have shape ({a.shape[0]},) (rows of matrix), got {y.shape}")
        check_positive(noise_std, "noise_std")
        var = jnp.asarray(noise_std, a.dtype) ** 2
        prec = jnp.linalg.inv(self.covariances)
        post_cov = jnp.linalg.inv(prec + (a.T @ a)[None] / var)
        post_cov = 0.5 * (post_cov + jnp.swapaxes(post_cov, -1, -2))  # symmetric to rounding
        post_mean = jnp.einsum(
            "kij,kj->ki",
            post_cov,
            jnp.einsum("kij,kj->ki", prec, self.means) + (a.T @ y)[None] / var,
        )
        eye = jnp.eye(a.shape[0], dtype=a.dtype)
        pred_cov = jnp.einsum("mi,kij,nj->kmn", a, self.covariances, a) + var * eye[None]
        resid = y[None] - self.means @ a.T
        chol = jnp.linalg.cholesky(pred_cov)
        white = jax.scipy.linalg.solve_triangular(chol, resid[..., None], lower=True)[..., 0]
        log_det = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)
        log_w = jnp.log(self.weights) - 0.5 * (jnp.sum(white**2, axis=-1) + log_det)
        return GaussianMixtureFlow(jax.nn.softmax(log_w), post_mean, post_cov)


_FLOW_FIELDS = ("weights", "means", "covariances")


def _flow_unflatten(_, children) -> GaussianMixtureFlow:
    # Not through __init__: pytree leaves may be gradients, tracers or placeholders, which are
    # not a mixture and must not be checked as one (the constructor checks what users build).
    flow = object.__new__(GaussianMixtureFlow)
    for name, value in zip(_FLOW_FIELDS, children, strict=True):
        object.__setattr__(flow, name, value)
    return flow


jax.tree_util.register_pytree_with_keys(
    GaussianMixtureFlow,
    lambda flow: ([(jax.tree_util.GetAttrKey(n), getattr(flow, n)) for n in _FLOW_FIELDS], None),
    _flow_unflatten,
    lambda flow: ([getattr(flow, n) for n in _FLOW_FIELDS], None),
)


def three_mode_mixture() -> GaussianMixtureFlow:
    """The note's 2-D mixture: ``π = 1/3`` each, means (1.5, 1.5), (1.5, -1.5), (-1.5, 0),
    ``Σ_k = 0.2 I``.

    Exact moments: mean (0.5, 0), covariance diag(2.2, 1.7).

    Examples:
      >>> flow = three_mode_mixture()
      >>> flow.means.tolist()
      [[1.5, 1.5], [1.5, -1.5], [-1.5, 0.0]]

    References:
      The MS-Flow note (``notes/msflow.md``), reference checks 1-4.
    """
    return GaussianMixtureFlow(
        jnp.full((3,), 1.0 / 3.0),
        jnp.asarray([[1.5, 1.5], [1.5, -1.5], [-1.5, 0.0]]),
        jnp.broadcast_to(0.2 * jnp.eye(2), (3, 2, 2)),
    )


class DigitsSplit(NamedTuple):
    """Train and test rows of the 8x8 digits, flattened (N, 64), pixels scaled to [-1, 1].

    Examples:
      >>> import jax
      >>> split = digits_images(jax.random.key(0), num_train=1500)
      >>> split.train.shape, split.test.shape, split.image_shape
      ((1500, 64), (297, 64), (8, 8))
    """

    train: jax.Array
    test: jax.Array
    train_labels: jax.Array
    test_labels: jax.Array
    image_shape: tuple[int, int]


def digits_images(rng_key: jax.Array, *, num_train: int = 1500, scale: int = 1) -> DigitsSplit:
    """scikit-learn's bundled ``load_digits`` (1797 images, no download), shuffled and split.

    Pixels (0..16) map to ``x / 8 - 1`` in [-1, 1]. With ``scale > 1`` every image is resized
    bilinearly to ``(8 scale, 8 scale)`` (larger images made in code, for the full profile).

    Args:
      rng_key: the shuffle's key.
      num_train: training rows (the rest is the test set), in [1, 1796].
      scale: resize factor ``>= 1``.

    Returns:
      A :class:`DigitsSplit`.

    Examples:
      >>> import jax
      >>> split = digits_images(jax.random.key(0), num_train=1000)
      >>> float(split.train.min()), float(split.train.max())
      (-1.0, 1.0)
    """
    from sklearn.datasets import load_digits

    check_key(rng_key)
    features, labels = load_digits(return_X_y=True)
    n = check_positive_int(num_train, "num_train")
    if n >= len(labels):
        raise ValueError(f"num_train must be < {len(labels)} (leave a test set), got {n}")
    scale = check_positive_int(scale, "scale")
    order = np.asarray(jax.random.permutation(rng_key, len(labels)))
    images = jnp.asarray(features[order] / 8.0 - 1.0, jnp.float32)
    side = 8 * scale
    if scale > 1:
        images = jax.image.resize(images.reshape(-1, 8, 8), (len(order), side, side), "bilinear")
        images = jnp.clip(images, -1.0, 1.0).reshape(len(order), side * side)
    labels = jnp.asarray(labels[order], jnp.int32)
    return DigitsSplit(images[:n], images[n:], labels[:n], labels[n:], (side, side))


def measure(
    rng_key: jax.Array, x: ArrayLike, operator: LinearOperator, noise_std: ArrayLike
) -> jax.Array:
    """Noisy measurements ``y = A x + σ ε``, ``ε ~ N(0, I)``, of a signal ``x`` (..., D).

    For an inpainting mask the noise is masked too (unobserved entries stay 0).

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.inverse import inpainting_operator
      >>> op = inpainting_operator(jnp.array([1.0, 0.0, 1.0]))
      >>> measure(jax.random.key(0), jnp.ones(3), op, 0.0).tolist()
      [1.0, 0.0, 1.0]
    """
    check_key(rng_key)
    x = check_array(x, "x", kind="floating")
    check_operator(operator, x.shape[-1], "x")
    check_nonnegative(noise_std, "noise_std")
    clean = operator.matvec(x)
    noise = jax.random.normal(rng_key, clean.shape, clean.dtype)
    return clean + jnp.asarray(noise_std, clean.dtype) * operator.noise_mask(noise)


def psnr(x: ArrayLike, reference: ArrayLike, data_range: ArrayLike = 2.0) -> jax.Array:
    """Peak signal-to-noise ratio ``10 log10(range² / mean((x - ref)²))`` over the last axis.

    ``data_range`` 2 for images in [-1, 1]. A non-finite ``x`` gives NaN (never dropped).

    Examples:
      >>> import jax.numpy as jnp
      >>> round(float(psnr(jnp.full(4, 0.1), jnp.zeros(4))), 4)  # 10 log10(4 / 0.01)
      26.0206
    """
    x = check_array(x, "x", kind="floating")
    ref = check_array(reference, "reference", kind="floating")
    if x.shape != ref.shape:
        raise ValueError(f"x and reference must have the same shape, got {x.shape}, {ref.shape}")
    check_positive(data_range, "data_range")
    mse = jnp.mean((x - ref) ** 2, axis=-1)
    value = 10.0 * jnp.log10(jnp.asarray(data_range, x.dtype) ** 2 / mse)
    return jnp.where(jnp.all(jnp.isfinite(x), axis=-1), value, jnp.nan)


def _gradient_2d(x: jax.Array, shape: tuple[int, int]) -> tuple[jax.Array, jax.Array]:
    img = x.reshape(shape)
    return img[1:, :] - img[:-1, :], img[:, 1:] - img[:, :-1]


def _gradient_2d_adjoint(gx: jax.Array, gy: jax.Array, shape: tuple[int, int]) -> jax.Array:
    h, w = shape
    out = jnp.zeros(shape, gx.dtype)
    out = out.at[1:, :].add(gx).at[:-1, :].add(-gx)
    out = out.at[:, 1:].add(gy).at[:, :-1].add(-gy)
    return out.reshape(h * w)


def least_squares_baseline(
    y: ArrayLike,
    operator: LinearOperator,
    noise_std: ArrayLike,
    *,
    smoothness: ArrayLike = 0.0,
    ridge: ArrayLike = 1e-3,
    image_shape: tuple[int, int] | None = None,
    maxiter: int = 200,
) -> jax.Array:
    """The regularised least-squares reconstruction (the baseline without a learned prior).

    Solves ``(AᵀA/σ² + β DᵀD + ρ I) x = Aᵀy/σ²`` by conjugate gradients, ``D`` the 2-D forward
    differences of an image of ``image_shape`` (``β = smoothness``; ``β = 0`` needs no shape).
    With ``β = 0`` and a small ridge it is the zero-fill (inpainting) or the minimum-norm
    pseudo-inverse (average pooling: the nearest-neighbour upsampling); ``β > 0`` fills the
    missing pixels smoothly.

    Args:
      y: a measurement (M,).
      operator: the forward model.
      noise_std: ``σ > 0``.
      smoothness: ``β >= 0``.
      ridge: ``ρ > 0`` (makes the system definite).
      image_shape: ``(H, W)`` with ``H W = D``, needed when ``β > 0``.
      maxiter: CG iterations.

    Returns:
      The reconstruction (D,).

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxlab.inverse import average_pool_operator
      >>> op = average_pool_operator(2, (2, 2))
      >>> least_squares_baseline(jnp.array([0.5]), op, 0.05, ridge=1e-6).round(4).tolist()
      [0.5, 0.5, 0.5, 0.5]
    """
    y = check_array(y, "y", kind="floating", ndim=1)
    if not isinstance(operator, LinearOperator):
        raise TypeError(f"operator must be a jaxlab.inverse.LinearOperator, got {operator!r}")
    if y.shape != (operator.output_size,):
        raise ValueError(
            f"y must have shape ({operator.output_size},) (the operator's output), got {y.shape}"
        )
    check_finite_array(y, "y")  # a NaN made CG stop at once and return zeros (issue 44)
    check_positive(noise_std, "noise_std")
    beta = check_nonnegative(smoothness, "smoothness")
    check_positive(ridge, "ridge")
    maxiter = check_positive_int(maxiter, "maxiter")
    d = operator.input_size
    if beta is None or beta > 0:
        if (
            image_shape is None
            or len(image_shape) != 2
            or int(np.prod(image_shape)) != d
            or min(image_shape) < 1
        ):
            raise ValueError(
                f"image_shape must be (H, W) with H * W = {d} when smoothness > 0, "
                f"got {image_shape!r}"
            )
        shape = (int(image_shape[0]), int(image_shape[1]))
    inv_var = 1.0 / jnp.asarray(noise_std, y.dtype) ** 2

    def normal(x):
        out = inv_var * operator.rmatvec(operator.matvec(x)) + ridge * x
        if beta is None or beta > 0:
            out = out + smoothness * _gradient_2d_adjoint(*_gradient_2d(x, shape), shape)
        return out

    rhs = inv_var * operator.rmatvec(y)
    x, _ = jax.scipy.sparse.linalg.cg(normal, rhs, x0=jnp.zeros_like(rhs), maxiter=maxiter)
    return x
