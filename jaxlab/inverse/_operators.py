"""Linear forward models ``y = A x`` with their adjoints: inpainting, downsampling, CT, matrices.

Every operator acts on the last axis of a flattened signal ``x`` (..., D) and provides

* ``matvec(x) = A x`` and ``rmatvec(y) = Aᵀ y`` (the exact adjoint: ``<Ax, y> = <x, Aᵀy>``);
* ``normal_solve(rhs, a, μ) = (a AᵀA + μ I)⁻¹ rhs``, the data step of multiple shooting, in
  closed form where ``AᵀA`` has structure (diagonal for masks, block-constant for average
  pooling, an eigendecomposition for small dense matrices) and by conjugate gradients otherwise.

Operators are pytrees (masks and matrices are leaves, sizes are static), so one compiled program
serves every mask or matrix of the same shape.

References:
  A. Denker et al., "Trajectory Stitching for Solving Inverse Problems with Flow-Based Models"
  (MS-Flow), ICML 2026 (arXiv 2602.08538): inpainting, super-resolution and CT tasks.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from jaxlab._src.validation import (
    check_array,
    check_choice,
    check_int,
    check_positive_int,
    check_real_array,
    is_concrete,
)

__all__ = [
    "AveragePoolOperator",
    "InpaintingOperator",
    "LinearOperator",
    "MatrixOperator",
    "average_pool_operator",
    "check_operator",
    "inpainting_operator",
    "lower_half_mask",
    "matrix_operator",
    "parallel_beam_operator",
    "task_operator",
]

TASKS = ("inpainting", "superres", "ct")  # MS-Flow's three image tasks


def _broadcast(v: jax.Array, like: jax.Array) -> jax.Array:
    # Explicit broadcasting: jaxlab's tests raise on implicit rank promotion.
    return jnp.broadcast_to(v.astype(like.dtype), like.shape)


class LinearOperator(abc.ABC):
    """Base class of the forward models: ``A: R^D -> R^M`` on the last axis, with its adjoint.

    Subclasses define ``input_size``, ``output_size``, ``matvec`` and ``rmatvec``; they may
    override ``normal_solve`` with a closed form (the default runs conjugate gradients, which is
    exact for ``maxiter >= D``) and ``noise_mask`` (where measurement noise exists).

    Examples:
      >>> import jax.numpy as jnp
      >>> op = matrix_operator(jnp.array([[1.0, 0.0]]))
      >>> isinstance(op, LinearOperator), op.input_size, op.output_size
      (True, 2, 1)
    """

    #: Conjugate-gradient iterations and relative tolerance of the default ``normal_solve``.
    cg_maxiter: int = 200
    cg_tol: float = 1e-7

    @property
    @abc.abstractmethod
    def input_size(self) -> int:
        """``D``, the size of the signal's last axis."""

    @property
    @abc.abstractmethod
    def output_size(self) -> int:
        """``M``, the size of ``A x``'s last axis."""

    @property
    def num_measurements(self) -> int | jax.Array:
        """The number of real measurements (``M``; the observed pixels of a mask)."""
        return self.output_size

    @abc.abstractmethod
    def matvec(self, x: jax.Array) -> jax.Array:
        """``A x`` on the last axis."""

    @abc.abstractmethod
    def rmatvec(self, y: jax.Array) -> jax.Array:
        """``Aᵀ y`` on the last axis (the exact adjoint of :meth:`matvec`)."""

    def noise_mask(self, noise: jax.Array) -> jax.Array:
        """The part of ``noise`` (shaped like ``A x``) that reaches the measurements."""
        return noise

    def normal_solve(self, rhs: jax.Array, data_weight: ArrayLike, mu: ArrayLike) -> jax.Array:
        """``(a AᵀA + μ I)⁻¹ rhs`` over the last axis (default: conjugate gradients).

        Examples:
          >>> import jax.numpy as jnp
          >>> op = matrix_operator(jnp.array([[1.0, 0.0]]))
          >>> LinearOperator.normal_solve(op, jnp.array([401.0, 2.0]), 400.0, 1.0).tolist()
          [1.0, 2.0]
        """
        a = jnp.asarray(data_weight, rhs.dtype)
        mu = jnp.asarray(mu, rhs.dtype)

        def solve_one(b):
            normal = lambda v: a * self.rmatvec(self.matvec(v)) + mu * v  # noqa: E731
            return jax.scipy.sparse.linalg.cg(
                normal, b, x0=b / mu, tol=self.cg_tol, maxiter=self.cg_maxiter
            )[0]

        flat = rhs.reshape(-1, rhs.shape[-1])
        return jax.vmap(solve_one)(flat).reshape(rhs.shape)

    def describe(self) -> str:
        return type(self).__name__

    def _size_error(self, size: int, name: str) -> str:
        return (
            f"{name} has {size} features on its last axis, but the operator "
            f"({self.describe()}) acts on {self.input_size}"
        )


def check_operator(operator: Any, size: int, name: str) -> LinearOperator:
    """``operator`` is a :class:`LinearOperator` acting on signals of ``size`` features.

    The error names the argument that defines the operator's size (``mask``, ``image_shape``,
    ``matrix``) and the argument ``name`` whose size disagrees.

    Examples:
      >>> import jax.numpy as jnp
      >>> op = inpainting_operator(jnp.ones(5))
      >>> check_operator(op, 64, "z0")
      Traceback (most recent call last):
      ...
      ValueError: z0 has 64 features on its last axis, but the inpainting mask has 5 entries ...
    """
    if not isinstance(operator, LinearOperator):
        raise TypeError(
            f"operator must be a jaxlab.inverse.LinearOperator (inpainting_operator, "
            f"average_pool_operator, parallel_beam_operator, matrix_operator), got "
            f"{type(operator).__name__}"
        )
    if operator.input_size != size:
        raise ValueError(operator._size_error(size, name))
    return operator


# --------------------------------------------------------------------------------------------
# Inpainting.


@dataclasses.dataclass(frozen=True)
class InpaintingOperator(LinearOperator):
    """Inpainting: ``A = diag(mask)``, the observed entries kept and the others set to 0.

    ``M = D`` (unobserved measurements are 0 with no noise); ``AᵀA = diag(mask)``, so the data
    step is the closed form ``rhs / (a · mask + μ)``. Build with :func:`inpainting_operator`.

    Attributes:
      mask: (D,) 0/1 floats, 1 = observed.
      image_shape: the mask's shape before flattening (static).

    Examples:
      >>> import jax.numpy as jnp
      >>> op = inpainting_operator(jnp.array([[1, 0], [0, 1]]))
      >>> op.matvec(jnp.array([1.0, 2.0, 3.0, 4.0])).tolist(), int(op.num_measurements)
      ([1.0, 0.0, 0.0, 4.0], 2)
    """

    mask: jax.Array
    image_shape: tuple[int, ...]

    @property
    def input_size(self) -> int:
        return int(self.mask.shape[-1])

    @property
    def output_size(self) -> int:
        return self.input_size

    @property
    def num_measurements(self):
        return jnp.sum(self.mask)

    def matvec(self, x):
        return _broadcast(self.mask, x) * x

    def rmatvec(self, y):
        return _broadcast(self.mask, y) * y

    def noise_mask(self, noise):
        return self.matvec(noise)

    def normal_solve(self, rhs, data_weight, mu):
        a = jnp.asarray(data_weight, rhs.dtype)
        return rhs / (a * _broadcast(self.mask, rhs) + jnp.asarray(mu, rhs.dtype))

    def describe(self) -> str:
        return f"inpainting mask of shape {self.image_shape}"

    def _size_error(self, size, name):
        return (
            f"{name} has {size} features on its last axis, but the inpainting mask has "
            f"{self.input_size} entries (shape {self.image_shape}): the mask must have the "
            "signal's shape"
        )


jax.tree_util.register_dataclass(
    InpaintingOperator, data_fields=["mask"], meta_fields=["image_shape"]
)


def inpainting_operator(mask: ArrayLike) -> InpaintingOperator:
    """The inpainting operator of a 0/1 (or boolean) ``mask`` of the image's shape.

    Args:
      mask: any shape (e.g. (8, 8)); 1 (True) = observed. Flattened in C order, like the
        signals.

    Returns:
      An :class:`InpaintingOperator`.

    Examples:
      >>> import jax.numpy as jnp
      >>> op = inpainting_operator(lower_half_mask((4, 4)))
      >>> op.input_size, int(op.num_measurements)
      (16, 8)

    References:
      A. Denker et al., "Trajectory Stitching ..." (MS-Flow), ICML 2026 (inpainting task).
    """
    if mask is None or isinstance(mask, str | bytes):
        raise TypeError(f"mask must be a 0/1 array, got {type(mask).__name__} {mask!r}")
    array = jnp.asarray(mask) if is_concrete(mask) else mask
    if getattr(array, "dtype", None) == jnp.bool_:
        array = array.astype(jnp.float32)
    array = check_array(array, "mask", kind="real")
    if array.ndim < 1 or array.size == 0:
        raise ValueError(f"mask must be a non-empty array of the image's shape, got {array.shape}")
    if is_concrete(array):
        values = np.asarray(array)
        if not np.all((values == 0) | (values == 1)):
            raise ValueError("mask must hold only 0 and 1 (or booleans)")
    dtype = array.dtype if jnp.issubdtype(array.dtype, jnp.floating) else jnp.float32
    return InpaintingOperator(array.reshape(-1).astype(dtype), tuple(int(s) for s in array.shape))


def lower_half_mask(image_shape: tuple[int, int]) -> jax.Array:
    """A mask observing the upper half of an image (rows ``< H/2``), the lower half missing.

    Examples:
      >>> lower_half_mask((2, 2)).tolist()
      [[1.0, 1.0], [0.0, 0.0]]
    """
    h, w = _image_shape(image_shape, "image_shape")
    rows = jnp.arange(h)[:, None] < h // 2
    return jnp.broadcast_to(rows, (h, w)).astype(jnp.float32)


# --------------------------------------------------------------------------------------------
# Average pooling (super-resolution).


def _image_shape(value: Any, name: str) -> tuple[int, int]:
    if not isinstance(value, tuple | list) or len(value) != 2:
        raise TypeError(f"{name} must be a pair (H, W) of ints, got {value!r}")
    return (
        check_positive_int(value[0], f"{name}[0]"),
        check_positive_int(value[1], f"{name}[1]"),
    )


@dataclasses.dataclass(frozen=True)
class AveragePoolOperator(LinearOperator):
    """Super-resolution: ``A`` averages non-overlapping ``factor x factor`` blocks of an image.

    ``Aᵀ y`` spreads each low-resolution pixel over its block divided by ``factor²``, so
    ``A Aᵀ = I / factor²`` and ``AᵀA = P / factor²`` with ``P`` the block-mean projector; the
    data step is ``(I - P) rhs / μ + P rhs / (μ + a / factor²)``. Build with
    :func:`average_pool_operator`.

    Attributes:
      factor: the block size (static).
      image_shape: ``(H, W)`` of the high-resolution image, divisible by ``factor`` (static).

    Examples:
      >>> import jax.numpy as jnp
      >>> op = average_pool_operator(2, (2, 4))
      >>> op.matvec(jnp.arange(8.0)).tolist()
      [2.5, 4.5]
    """

    factor: int
    image_shape: tuple[int, int]

    @property
    def input_size(self) -> int:
        return self.image_shape[0] * self.image_shape[1]

    @property
    def output_size(self) -> int:
        return self.input_size // self.factor**2

    def _blocks(self, x):
        h, w = self.image_shape
        f = self.factor
        return x.reshape(*x.shape[:-1], h // f, f, w // f, f)

    def matvec(self, x):
        return jnp.mean(self._blocks(x), axis=(-3, -1)).reshape(*x.shape[:-1], self.output_size)

    def rmatvec(self, y):
        h, w = self.image_shape
        f = self.factor
        low = y.reshape(*y.shape[:-1], h // f, 1, w // f, 1)
        up = jnp.broadcast_to(low, (*y.shape[:-1], h // f, f, w // f, f)) / f**2
        return up.reshape(*y.shape[:-1], self.input_size)

    def normal_solve(self, rhs, data_weight, mu):
        a = jnp.asarray(data_weight, rhs.dtype)
        mu = jnp.asarray(mu, rhs.dtype)
        block_mean = self.rmatvec(self.matvec(rhs)) * self.factor**2  # P rhs
        return (rhs - block_mean) / mu + block_mean / (mu + a / self.factor**2)

    def describe(self) -> str:
        return f"{self.factor}x{self.factor} average pooling of {self.image_shape} images"

    def _size_error(self, size, name):
        return (
            f"{name} has {size} features on its last axis, but the average-pooling operator's "
            f"image_shape {self.image_shape} has {self.input_size} pixels"
        )


jax.tree_util.register_dataclass(
    AveragePoolOperator, data_fields=[], meta_fields=["factor", "image_shape"]
)


def average_pool_operator(factor: int, image_shape: tuple[int, int]) -> AveragePoolOperator:
    """The ``factor``x``factor`` average-pooling (downsampling) operator on ``image_shape``.

    Args:
      factor: block size ``>= 1`` (2: ×2 super-resolution).
      image_shape: ``(H, W)``, both divisible by ``factor``.

    Returns:
      An :class:`AveragePoolOperator`.

    Examples:
      >>> op = average_pool_operator(2, (8, 8))
      >>> op.input_size, op.output_size
      (64, 16)

    References:
      A. Denker et al., "Trajectory Stitching ..." (MS-Flow), ICML 2026 (super-resolution).
    """
    f = check_positive_int(factor, "factor")
    h, w = _image_shape(image_shape, "image_shape")
    if h % f or w % f:
        raise ValueError(f"image_shape {(h, w)} must be divisible by factor={f}")
    return AveragePoolOperator(f, (h, w))


# --------------------------------------------------------------------------------------------
# Dense matrices (small problems, the CT projector).


@dataclasses.dataclass(frozen=True)
class MatrixOperator(LinearOperator):
    """A dense matrix ``A`` (M, D) with the eigendecomposition of ``AᵀA`` for the data step.

    ``AᵀA = V diag(λ) Vᵀ`` is computed once on the host (float64) when the operator is built,
    so ``(a AᵀA + μ I)⁻¹ rhs = V ((Vᵀ rhs) / (a λ + μ))`` is exact at ``O(D²)`` per solve
    (instead of CG iterations per sweep). Build with :func:`matrix_operator` or
    :func:`parallel_beam_operator`.

    Attributes:
      matrix: ``A`` (M, D).
      gram_eigenvalues: ``λ`` (D,), ``>= 0``.
      gram_eigenvectors: ``V`` (D, D).
      label: what the matrix is (static; in error messages).

    Examples:
      >>> import jax.numpy as jnp
      >>> op = matrix_operator(jnp.array([[1.0, 0.0]]))
      >>> op.normal_solve(jnp.array([401.0, 2.0]), 400.0, 1.0).round(5).tolist()
      [1.0, 2.0]
    """

    matrix: jax.Array
    gram_eigenvalues: jax.Array
    gram_eigenvectors: jax.Array
    label: str = "matrix"

    @property
    def input_size(self) -> int:
        return int(self.matrix.shape[1])

    @property
    def output_size(self) -> int:
        return int(self.matrix.shape[0])

    def matvec(self, x):
        return x @ self.matrix.T.astype(x.dtype)

    def rmatvec(self, y):
        return y @ self.matrix.astype(y.dtype)

    def normal_solve(self, rhs, data_weight, mu):
        v = self.gram_eigenvectors.astype(rhs.dtype)
        lam = self.gram_eigenvalues.astype(rhs.dtype)
        scale = jnp.asarray(data_weight, rhs.dtype) * lam + jnp.asarray(mu, rhs.dtype)
        coef = rhs @ v
        return (coef / _broadcast(scale, coef)) @ v.T

    def describe(self) -> str:
        return f"{self.label} of shape {tuple(self.matrix.shape)}"

    def _size_error(self, size, name):
        return (
            f"{name} has {size} features on its last axis, but the {self.label} has "
            f"{self.input_size} columns (matrix of shape {tuple(self.matrix.shape)})"
        )


jax.tree_util.register_dataclass(
    MatrixOperator,
    data_fields=["matrix", "gram_eigenvalues", "gram_eigenvectors"],
    meta_fields=["label"],
)


def _matrix_operator(matrix: np.ndarray, dtype, label: str) -> MatrixOperator:
    gram = matrix.T @ matrix
    lam, vec = np.linalg.eigh(gram)
    lam = np.maximum(lam, 0.0)  # AᵀA is positive semidefinite; clip rounding below zero
    return MatrixOperator(
        jnp.asarray(matrix, dtype), jnp.asarray(lam, dtype), jnp.asarray(vec, dtype), label
    )


def matrix_operator(matrix: ArrayLike) -> MatrixOperator:
    """A dense forward model ``y = A x`` (concrete ``A``; its ``AᵀA`` is diagonalised on the host).

    Args:
      matrix: ``A`` (M, D), finite, concrete.

    Returns:
      A :class:`MatrixOperator`.

    Examples:
      >>> import jax.numpy as jnp
      >>> op = matrix_operator(jnp.array([[1.0, 0.0]]))  # observe the first coordinate
      >>> op.rmatvec(jnp.array([2.0])).tolist()
      [2.0, 0.0]

    References:
      The MS-Flow note's 2-D toy, ``A = [1, 0]``.
    """
    a = check_array(matrix, "matrix", kind="floating", ndim=2)
    values = check_real_array(a, "matrix")
    if values is None:
        raise TypeError("matrix must be concrete: its AᵀA is diagonalised when it is built")
    if 0 in a.shape:
        raise ValueError(f"matrix must be non-empty, got shape {a.shape}")
    return _matrix_operator(values, a.dtype, "matrix")


def parallel_beam_operator(
    image_shape: tuple[int, int], num_angles: int, *, num_detectors: int | None = None
) -> MatrixOperator:
    """A small parallel-beam CT projector (pixel-driven, linear interpolation on the detector).

    Pixels are unit squares centred at ``(j - (W-1)/2, (H-1)/2 - i)``; angles ``θ_a = π a / A``
    (``a < A``); detector bins of unit width centred at ``s_b = b - (B-1)/2``. Each pixel's value
    is carried to its projected position ``s = x cos θ + y sin θ`` and split linearly between
    the two nearest bins, so every projection conserves mass
    (``Σ_b (A x)_{a,b} = Σ_pixels x`` for each angle) and a single pixel lands at ``s``. The
    adjoint is the matching linear-interpolation backprojection (``Aᵀ``).

    Args:
      image_shape: ``(H, W)``.
      num_angles: ``A >= 1`` projection angles in [0, π).
      num_detectors: ``B`` bins (default: the smallest odd number covering every pixel centre
        with a bin to spare).

    Returns:
      A :class:`MatrixOperator` with ``M = A · B`` rows (angle-major).

    Examples:
      >>> import jax.numpy as jnp
      >>> op = parallel_beam_operator((8, 8), 6)
      >>> sino = op.matvec(jnp.ones(64)).reshape(6, -1)
      >>> sino.sum(axis=1).round(4).tolist()  # mass conserved at every angle
      [64.0, 64.0, 64.0, 64.0, 64.0, 64.0]

    References:
      A. Denker et al., "Trajectory Stitching ..." (MS-Flow), ICML 2026 (CT task); A. C. Kak,
      M. Slaney, *Principles of Computerized Tomographic Imaging*, IEEE Press 1988 (parallel
      projections).
    """
    h, w = _image_shape(image_shape, "image_shape")
    num_angles = check_positive_int(num_angles, "num_angles")
    ii, jj = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    px = (jj - (w - 1) / 2.0).reshape(-1)
    py = ((h - 1) / 2.0 - ii).reshape(-1)
    reach = math.hypot((w - 1) / 2.0, (h - 1) / 2.0)
    minimum = 2 * math.ceil(reach) + 3
    if num_detectors is None:
        bins = minimum
    else:
        bins = check_int(num_detectors, "num_detectors", minimum=minimum)
    angles = np.pi * np.arange(num_angles) / num_angles
    matrix = np.zeros((num_angles, bins, h * w))
    pixels = np.arange(h * w)
    for a, theta in enumerate(angles):
        u = px * np.cos(theta) + py * np.sin(theta) + (bins - 1) / 2.0
        low = np.floor(u).astype(int)
        frac = u - low
        np.add.at(matrix[a], (low, pixels), 1.0 - frac)
        np.add.at(matrix[a], (low + 1, pixels), frac)
    # JAX's default float dtype: float32, or float64 where x64 is on.
    dtype = jnp.asarray(0.0).dtype
    return _matrix_operator(
        matrix.reshape(num_angles * bins, h * w), dtype, "parallel-beam projector"
    )


def task_operator(task: str, image_shape: tuple[int, int], *, ct_angles: int = 6) -> LinearOperator:
    """The forward model of one of MS-Flow's image tasks on ``(H, W)`` images.

    * ``"inpainting"``: the lower half missing (:func:`inpainting_operator` of
      :func:`lower_half_mask`);
    * ``"superres"``: ×2 super-resolution, 2x2 average pooling (:func:`average_pool_operator`);
    * ``"ct"``: a parallel-beam projector with ``ct_angles`` angles
      (:func:`parallel_beam_operator`).

    Args:
      task: ``"inpainting"``, ``"superres"`` or ``"ct"``.
      image_shape: ``(H, W)`` (even sides for ``"superres"``).
      ct_angles: projection angles of ``"ct"`` (ignored otherwise).

    Returns:
      A :class:`LinearOperator` on flattened images (``H · W`` inputs).

    Examples:
      >>> [task_operator(t, (8, 8)).output_size for t in ("inpainting", "superres", "ct")]
      [64, 16, 78]

    References:
      A. Denker et al., "Trajectory Stitching ..." (MS-Flow), ICML 2026 (the three tasks).
    """
    check_choice(task, "task", TASKS)
    if task == "inpainting":
        return inpainting_operator(lower_half_mask(image_shape))
    if task == "superres":
        return average_pool_operator(2, image_shape)
    return parallel_beam_operator(image_shape, ct_angles)
