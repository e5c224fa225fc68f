"""CreDRO's problems: digits splits with covariate shifts made in code, the member MLP and the
deep-ensemble baseline.

Everything comes from scikit-learn's bundled ``load_digits`` (1797 8x8 images, no download).
In-distribution (ID) classes are trained on and tested clean and under shift; the other classes,
uniform-noise images and shifted ID images are the out-of-distribution (OOD) sets. The shifts are
the ones the paper argues from (train/test distribution shift): rotations (bilinear), additive
pixel noise and a class-prior shift of the training set.

References:
  Wang et al., "Learning Credal Ensembles via Distributionally Robust Optimization", ICML 2026
  (arXiv 2602.08470); Lakshminarayanan et al., deep ensembles, NeurIPS 2017 (arXiv 1612.01474).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.typing import ArrayLike

from jaxlab._src.validation import (
    check_array,
    check_int_sequence,
    check_key,
    check_last_axis,
    check_nonnegative,
    check_positive_int,
    check_probability,
    check_real,
)
from jaxlab.uncertainty._credro import train_credal_ensemble

__all__ = [
    "DigitsShiftSplits",
    "add_pixel_noise",
    "digits_shift_splits",
    "flip_labels",
    "ensemble_init",
    "mlp_apply",
    "mlp_init",
    "rotate_images",
    "train_deep_ensemble",
]

_SIDE = 8  # load_digits images are 8x8


def rotate_images(images: ArrayLike, degrees: ArrayLike) -> jax.Array:
    """Rotates ``(N, 64)`` (or ``(N, 8, 8)``) images about their centre, bilinear, zeros outside.

    Args:
      images: flattened or square 8x8 images.
      degrees: the angle (counter-clockwise), a scalar or one per image ``(N,)``.

    Returns:
      The rotated images in the input's shape.

    Examples:
      >>> import jax.numpy as jnp
      >>> image = jnp.zeros((1, 8, 8)).at[0, 0, 3].set(1.0)  # top row
      >>> rotated = rotate_images(image, 180.0)
      >>> [int(i) for i in jnp.unravel_index(jnp.argmax(rotated[0]), (8, 8))]  # bottom row
      [7, 4]
    """
    x = check_array(images, "images", kind="floating")
    flat = x.ndim == 2
    if not ((flat and x.shape[1] == _SIDE * _SIDE) or (x.ndim == 3 and x.shape[1:] == (8, 8))):
        raise ValueError(f"images must be (N, 64) or (N, 8, 8), got shape {x.shape}")
    squares = x.reshape(-1, _SIDE, _SIDE)
    angles = jnp.broadcast_to(jnp.deg2rad(jnp.asarray(degrees, x.dtype)), squares.shape[:1])
    centre = (_SIDE - 1) / 2.0
    rows, cols = jnp.meshgrid(jnp.arange(_SIDE, dtype=x.dtype), jnp.arange(_SIDE, dtype=x.dtype),
                              indexing="ij")  # fmt: skip

    def one(image, angle):
        cos, sin = jnp.cos(angle), jnp.sin(angle)
        r, c = rows - centre, cols - centre
        # Inverse rotation of the output grid (rows point down: counter-clockwise as displayed).
        source_r = cos * r + sin * c + centre
        source_c = -sin * r + cos * c + centre
        return jax.scipy.ndimage.map_coordinates(image, [source_r, source_c], order=1, cval=0.0)

    out = jax.vmap(one)(squares, angles)
    return out.reshape(x.shape)


def add_pixel_noise(rng_key: jax.Array, images: ArrayLike, std: ArrayLike) -> jax.Array:
    """``clip(x + std·ε, 0, 1)`` with ``ε ~ N(0, I)`` from ``rng_key`` (pixels in ``[0, 1]``).

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> noisy = add_pixel_noise(jax.random.key(0), jnp.full((2, 64), 0.5), 0.1)
      >>> noisy.shape, bool(jnp.all((noisy >= 0) & (noisy <= 1)))
      ((2, 64), True)
    """
    check_key(rng_key)
    check_nonnegative(std, "std")
    x = check_array(images, "images", kind="floating")
    noise = jax.random.normal(rng_key, x.shape, x.dtype)
    return jnp.clip(x + jnp.asarray(std, x.dtype) * noise, 0.0, 1.0)


def flip_labels(
    rng_key: jax.Array, labels: ArrayLike, rate: ArrayLike, num_classes: int
) -> jax.Array:
    """Symmetric label noise: each label, with probability ``rate``, moves to another class.

    A flipped label ``y`` becomes ``(y + s) mod K`` with ``s`` uniform on ``{1, …, K − 1}`` (so it
    always changes). The flips draw from ``rng_key``, the shifts from ``fold_in(rng_key, 1)``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> y = jnp.arange(1000) % 10
      >>> noisy = flip_labels(jax.random.key(0), y, 0.2, 10)
      >>> noisy.dtype, 0.15 < float(jnp.mean(noisy != y)) < 0.25
      (dtype('int32'), True)
    """
    check_key(rng_key)
    check_probability(rate, "rate")
    num_classes = check_positive_int(num_classes, "num_classes")
    y = check_array(labels, "labels", kind="integer")
    flip = jax.random.bernoulli(rng_key, rate, y.shape)
    shift = jax.random.randint(jax.random.fold_in(rng_key, 1), y.shape, 1, num_classes)
    return jnp.where(flip, (y + shift) % num_classes, y).astype(jnp.int32)


class DigitsShiftSplits(NamedTuple):
    """The ``digits_shift_splits`` arrays (images ``(n, 64)`` in ``[0, 1]``, labels ``0..K-1``).

    Attributes:
      train_x, train_y: ID training set (after the class-prior shift).
      test_x, test_y: ID test set, clean.
      shifted_x, shifted_y: the ID test set rotated and noised (covariate shift).
      near_ood_x: images of the other classes.
      noise_ood_x: uniform-noise images.
      classes: the ID classes, in label order.

    Examples:
      >>> DigitsShiftSplits._fields[:2]
      ('train_x', 'train_y')
    """

    train_x: jax.Array
    train_y: jax.Array
    test_x: jax.Array
    test_y: jax.Array
    shifted_x: jax.Array
    shifted_y: jax.Array
    near_ood_x: jax.Array
    noise_ood_x: jax.Array
    classes: tuple[int, ...]


def digits_shift_splits(
    rng_key: jax.Array,
    *,
    in_classes: Sequence[int] = (0, 1, 2, 3, 4),
    test_fraction: float = 0.3,
    train_class_weights: Sequence[float] | None = None,
    rotation: float = 30.0,
    noise_std: float = 0.1,
    num_noise_images: int = 500,
) -> DigitsShiftSplits:
    """Train/test splits of ``load_digits`` with a train/test distribution shift made in code.

    ID = ``in_classes`` (relabelled ``0..K-1``), split at random (``test_fraction`` to test);
    class-prior shift: training images of class ``k`` kept with probability
    ``train_class_weights[k]`` (None: all kept); covariate shift: the ID test images rotated by
    ``±rotation`` degrees (random sign per image) plus pixel noise ``noise_std``; OOD: the other
    classes (near) and ``num_noise_images`` uniform images (far).

    Args:
      rng_key: a ``jax.random`` key (split, class-prior subsampling, rotation signs, noise).
      in_classes: the ID digits.
      test_fraction: in ``(0, 1)``.
      train_class_weights: per ID class, in ``[0, 1]``.
      rotation: degrees of the shift.
      noise_std: ``>= 0``.
      num_noise_images: ``>= 1``.

    Returns:
      A :class:`DigitsShiftSplits` (float32 images, int32 labels).

    Examples:
      >>> import jax
      >>> splits = digits_shift_splits(jax.random.key(0))
      >>> splits.train_x.shape[1], splits.classes, splits.near_ood_x.shape
      (64, (0, 1, 2, 3, 4), (896, 64))
    """
    from sklearn.datasets import load_digits

    check_key(rng_key)
    classes = tuple(int(c) for c in in_classes)
    if not classes or len(set(classes)) != len(classes) or not set(classes) <= set(range(10)):
        raise ValueError(f"in_classes must be distinct digits in 0..9, got {in_classes!r}")
    check_probability(test_fraction, "test_fraction")
    if not 0.0 < float(test_fraction) < 1.0:
        raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction}")
    check_real(rotation, "rotation")
    check_nonnegative(noise_std, "noise_std")
    num_noise_images = check_positive_int(num_noise_images, "num_noise_images")
    weights = np.ones(len(classes)) if train_class_weights is None else np.asarray(
        check_array(train_class_weights, "train_class_weights", kind="real", ndim=1, host=True),
        float)  # fmt: skip
    if weights.shape != (len(classes),) or np.any((weights < 0) | (weights > 1)):
        raise ValueError(
            f"train_class_weights must hold {len(classes)} values in [0, 1], got {weights}"
        )
    data = load_digits()
    x = (data.data / 16.0).astype(np.float32)
    y = data.target
    inside = np.isin(y, classes)
    relabel = {c: i for i, c in enumerate(classes)}
    x_in, y_in = x[inside], np.array([relabel[int(v)] for v in y[inside]], np.int32)
    keys = jax.random.split(rng_key, 5)
    order = np.asarray(jax.random.permutation(keys[0], x_in.shape[0]))
    n_test = int(round(float(test_fraction) * x_in.shape[0]))
    test, train = order[:n_test], order[n_test:]
    keep = np.asarray(jax.random.uniform(keys[1], (train.size,))) < weights[y_in[train]]
    train = train[keep]
    signs = np.where(np.asarray(jax.random.bernoulli(keys[2], 0.5, (n_test,))), 1.0, -1.0)
    shifted = rotate_images(jnp.asarray(x_in[test]), jnp.asarray(signs * rotation, jnp.float32))
    shifted = add_pixel_noise(keys[3], shifted, noise_std)
    noise = jax.random.uniform(keys[4], (num_noise_images, _SIDE * _SIDE), jnp.float32)
    return DigitsShiftSplits(
        train_x=jnp.asarray(x_in[train]),
        train_y=jnp.asarray(y_in[train]),
        test_x=jnp.asarray(x_in[test]),
        test_y=jnp.asarray(y_in[test]),
        shifted_x=shifted,
        shifted_y=jnp.asarray(y_in[test]),
        near_ood_x=jnp.asarray(x[~inside]),
        noise_ood_x=noise,
        classes=classes,
    )


def mlp_init(rng_key: jax.Array, sizes: Sequence[int]) -> list[dict[str, jax.Array]]:
    """A ReLU MLP's parameters, He-normal kernels, zero biases (``sizes = (in, hidden..., out)``).

    Examples:
      >>> import jax
      >>> [p["kernel"].shape for p in mlp_init(jax.random.key(0), (64, 128, 5))]
      [(64, 128), (128, 5)]
    """
    check_key(rng_key)
    sizes = list(check_int_sequence(sizes, "sizes"))
    if len(sizes) < 2:
        raise ValueError(f"sizes must give at least (inputs, outputs), got {sizes}")
    keys = jax.random.split(rng_key, len(sizes) - 1)
    return [
        {
            "kernel": jax.random.normal(k, (a, b), jnp.float32) * np.sqrt(2.0 / a),
            "bias": jnp.zeros(b, jnp.float32),
        }
        for k, a, b in zip(keys, sizes[:-1], sizes[1:], strict=True)
    ]


def mlp_apply(params: Sequence[dict[str, jax.Array]], x: ArrayLike) -> jax.Array:
    """Logits of :func:`mlp_init`'s MLP (ReLU between layers).

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> mlp_apply(mlp_init(jax.random.key(0), (4, 8, 3)), jnp.ones((2, 4))).shape
      (2, 3)
    """
    h = check_array(x, "x", kind="floating")
    if (
        isinstance(params, dict)
        or not isinstance(params, Sequence)
        or not params
        or not all(isinstance(p, dict) and {"kernel", "bias"} <= set(p) for p in params)
    ):
        raise TypeError(
            "params must be mlp_init's non-empty list of {'kernel', 'bias'} layers, got "
            f"{type(params).__name__}"
        )
    check_last_axis(h, np.shape(params[0]["kernel"])[-2], "x", "the first layer's inputs")
    for i, layer in enumerate(params):
        h = h @ layer["kernel"] + layer["bias"][None]
        if i < len(params) - 1:
            h = jax.nn.relu(h)
    return h


def ensemble_init(rng_key: jax.Array, num_members: int, sizes: Sequence[int]) -> Any:
    """``num_members`` :func:`mlp_init` draws (distinct keys) stacked on a leading axis.

    Examples:
      >>> import jax
      >>> ensemble_init(jax.random.key(0), 5, (64, 16, 5))[0]["kernel"].shape
      (5, 64, 16)
    """
    num_members = check_positive_int(num_members, "num_members")
    check_key(rng_key)
    sizes = check_int_sequence(sizes, "sizes")
    keys = jax.random.split(rng_key, num_members)
    return jax.vmap(lambda k: mlp_init(k, sizes))(keys)


def train_deep_ensemble(
    apply_fn: Callable[[Any, jax.Array], jax.Array],
    init_params: Any,
    inputs: ArrayLike,
    labels: ArrayLike,
    rng_key: jax.Array,
    *,
    optimizer: optax.GradientTransformation | None = None,
    steps: int = 600,
    batch_size: int = 64,
) -> tuple[Any, jax.Array]:
    """The deep-ensemble baseline: every member by ERM, diversity from initialisation only.

    :func:`jaxlab.uncertainty.train_credal_ensemble` with every level at ``δ = 1`` (CVaR at
    level 1 is the mean), so both arms share the training code. Its box credal set and ``H̄ − H̲``
    form the credal wrapper (Wang et al., ICLR 2025).

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> init = ensemble_init(jax.random.key(0), 2, (2, 2))
      >>> x = jnp.eye(2); y = jnp.array([0, 1])
      >>> _, losses = train_deep_ensemble(mlp_apply, init, x, y, jax.random.key(1), steps=20,
      ...                                 batch_size=2)
      >>> losses.shape
      (20, 2)

    References:
      Lakshminarayanan, Pritzel, Blundell, NeurIPS 2017 (arXiv 1612.01474).
    """
    sizes = {np.shape(leaf)[0] for leaf in jax.tree.leaves(init_params) if np.ndim(leaf)}
    if len(sizes) != 1:
        raise ValueError(f"init_params must stack members on one leading axis, got {sizes}")
    (members,) = sizes
    return train_credal_ensemble(
        apply_fn, init_params, inputs, labels, rng_key, levels=jnp.ones(members),
        kind="cvar", optimizer=optimizer, steps=steps, batch_size=batch_size,
    )  # fmt: skip
