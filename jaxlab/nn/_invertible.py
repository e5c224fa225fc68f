"""Conditional invertible networks that map the unit ball onto a constraint set (Hom-PGD⁺).

An :class:`InvertibleNet` Φ_θ is a stack of ``num_layers`` blocks, each a conditional MADE affine
layer followed by ActNorm and an LU-factorised linear map, then an affine map onto a box
``[lb, ub]``. It is trained with :func:`homeomorphism_loss` (volume + constraint penalty +
distortion) so that Φ_θ(𝔹) fills the feasible set K without leaving it; the solver
``jaxlab.solvers.HomPGD`` then runs projected gradient in the latent ball.

Shapes: every module acts on the last axis; leading axes are batch axes. The condition
embedding e(c) of a condition encoder is shared by all blocks (FiLM modulation of the MADE's
hidden layers).

References:
  C. Liu, E. Liang, M. Chen, "Hom-PGD⁺: Fast Reparameterized Optimization over Non-convex
  Ball-Homeomorphic Set", ICML 2026.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import scipy.linalg
from flax import nnx
from jax.typing import ArrayLike

from jaxlab._src.training import scan_train
from jaxlab._src.validation import (
    check_array,
    check_bool,
    check_callable,
    check_choice,
    check_in_range,
    check_int,
    check_key,
    check_last_axis,
    check_nonnegative,
    check_positive,
    check_positive_int,
    check_real,
    check_real_array,
)

__all__ = [
    "ActNormLU",
    "ConditionalMADE",
    "DeepSetsEncoder",
    "HomeomorphismTraining",
    "InvertibleNet",
    "MLPEncoder",
    "QuadMixerEncoder",
    "homeomorphism_loss",
    "invertibility_error",
    "sample_latents",
    "train_homeomorphism",
]


FILM_PLACEMENTS = ("both", "first")  # hidden layers of a MADE that the condition modulates


class Buffer(nnx.Variable):
    """A non-trainable array of a module (masks, permutations, signs, bounds)."""


def _check_input(x: Any, size: int, name: str) -> jax.Array:
    """A floating array whose last axis has ``size`` entries (checked before any matmul)."""
    x = check_array(x, name, kind="floating")
    check_last_axis(x, size, name)
    return x


def _flatten(x: jax.Array, size: int) -> tuple[jax.Array, tuple[int, ...]]:
    """(..., size) -> (B, size) and the leading shape, so internals are plain matrices."""
    lead = x.shape[:-1]
    return jnp.reshape(x, (math.prod(lead), size)), lead


class _MLP(nnx.Module):
    """Linear -> ReLU -> ... -> Linear on the last axis."""

    def __init__(self, sizes: Sequence[int], *, rngs: nnx.Rngs):
        self.layers = nnx.List(
            [nnx.Linear(a, b, rngs=rngs) for a, b in zip(sizes[:-1], sizes[1:], strict=True)]
        )

    def __call__(self, x: jax.Array) -> jax.Array:
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = jax.nn.relu(x)
        return x


class ConditionalMADE(nnx.Module):
    """Conditional masked autoregressive affine layer (MADE) with FiLM-modulated hidden layers.

    A masked MLP ``v -> h -> h -> (mu, alpha)`` whose i-th outputs depend only on ``v_{<i}``
    defines the map and its triangular Jacobian::

        u = (v - mu(v)) * exp(-alpha(v)),     log|det du/dv| = -sum_i alpha_i(v).

    The hidden activations are modulated by the condition embedding,
    ``h <- h * (1 + w(e)) + b(e)``: both hidden layers (``film="both"``, the default) or only the
    first (``film="first"``, the placement of the authors' code, whose FiLM sits on the input
    layer of the masked MLP only). The inverse is sequential over coordinates:
    ``v = u * exp(alpha(v)) + mu(v)`` iterated ``n`` times is exact (pass i fixes ``v_i``).
    The output layer starts at zero, so a fresh layer is the identity. With
    ``clamp_log_scale=True``, ``alpha <- tanh(alpha) log 2`` keeps the layer bi-Lipschitz
    (every coordinate scale in [1/2, 2]).

    Args:
      num_features: dimension n of ``v``.
      hidden: width h of the two hidden layers.
      embed_features: size of the condition embedding (0: unconditional).
      clamp_log_scale: clamp ``alpha`` to (-log 2, log 2).
      film: which hidden layers the embedding modulates, ``"both"`` or ``"first"``.
      rngs: ``nnx.Rngs`` for the initial weights.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from flax import nnx
      >>> layer = ConditionalMADE(3, 16, rngs=nnx.Rngs(0))
      >>> v = jax.random.normal(jax.random.key(1), (5, 3))
      >>> u, log_det, max_log_scale = layer(v)
      >>> bool(jnp.allclose(u, v)), log_det.shape   # identity at initialisation
      (True, (5,))

    References:
      M. Germain et al., "MADE: Masked Autoencoder for Distribution Estimation", ICML 2015;
      C. Liu, E. Liang, M. Chen, "Hom-PGD⁺", ICML 2026 (conditional MADE blocks).
    """

    def __init__(
        self,
        num_features: int,
        hidden: int,
        embed_features: int = 0,
        *,
        clamp_log_scale: bool = False,
        film: str = "both",
        rngs: nnx.Rngs,
    ):
        n = check_positive_int(num_features, "num_features")
        h = check_positive_int(hidden, "hidden")
        check_choice(film, "film", FILM_PLACEMENTS)
        self.film_layers = 2 if film == "both" else 1
        embed_features = check_int(embed_features, "embed_features", minimum=0)
        self.num_features = n
        self.hidden = h
        self.embed_features = embed_features
        self.clamp_log_scale = check_bool(clamp_log_scale, "clamp_log_scale")

        # MADE degrees: inputs 1..n, outputs 1..n; a hidden unit of degree d sees the inputs with
        # index <= d, and output i sees hidden units of degree < i. Unconditional hidden units
        # cycle through 1..n-1. With a condition they cycle through 0..n-1: degree-0 units see no
        # input, only the condition (through FiLM), so that the first coordinate's (mu, alpha)
        # also depend on the condition instead of being constants.
        in_degree = np.arange(1, n + 1)
        if embed_features:
            hidden_degree = np.arange(h) % n
        else:
            hidden_degree = np.arange(h) % max(n - 1, 1) + 1
        out_degree = np.concatenate([in_degree, in_degree])
        mask_in = (hidden_degree[None, :] >= in_degree[:, None]).astype(np.float32)
        mask_hidden = (hidden_degree[None, :] >= hidden_degree[:, None]).astype(np.float32)
        mask_out = (out_degree[None, :] > hidden_degree[:, None]).astype(np.float32)
        self.mask_in = Buffer(jnp.asarray(mask_in))
        self.mask_hidden = Buffer(jnp.asarray(mask_hidden))
        self.mask_out = Buffer(jnp.asarray(mask_out))

        init = nnx.initializers.lecun_normal()
        self.w_in = nnx.Param(init(rngs.params(), (n, h)))
        self.b_in = nnx.Param(jnp.zeros((h,)))
        self.w_hidden = nnx.Param(init(rngs.params(), (h, h)))
        self.b_hidden = nnx.Param(jnp.zeros((h,)))
        self.w_out = nnx.Param(jnp.zeros((h, 2 * n)))
        self.b_out = nnx.Param(jnp.zeros((2 * n,)))
        if embed_features:
            # FiLM: one linear map of the embedding gives (scale, shift) for each modulated
            # hidden layer.
            self.film = nnx.Linear(
                embed_features,
                2 * self.film_layers * h,
                kernel_init=nnx.initializers.zeros_init(),
                rngs=rngs,
            )
        else:
            self.film = None

    def _check_embedding(self, embedding: Any) -> jax.Array | None:
        if not self.embed_features:
            if embedding is not None:
                raise ValueError("embedding must be None: this layer has embed_features=0")
            return None
        if embedding is None:
            raise ValueError("embedding is required: this layer has embed_features > 0")
        embedding = _check_input(embedding, self.embed_features, "embedding")
        return _flatten(embedding, self.embed_features)[0]

    def _shift_and_log_scale(self, v: jax.Array, embedding: jax.Array | None):
        h = self.hidden
        if self.embed_features:
            film = self.film(embedding)
            scales = [1.0 + film[:, 2 * k * h : (2 * k + 1) * h] for k in range(self.film_layers)]
            shifts = [film[:, (2 * k + 1) * h : (2 * k + 2) * h] for k in range(self.film_layers)]
        act = jax.nn.relu(v @ (self.w_in[...] * self.mask_in[...]) + self.b_in[...][None, :])
        if self.embed_features:
            act = act * scales[0] + shifts[0]
        act = jax.nn.relu(
            act @ (self.w_hidden[...] * self.mask_hidden[...]) + self.b_hidden[...][None, :]
        )
        if self.embed_features and self.film_layers == 2:
            act = act * scales[1] + shifts[1]
        out = act @ (self.w_out[...] * self.mask_out[...]) + self.b_out[...][None, :]
        mu, alpha = out[:, : self.num_features], out[:, self.num_features :]
        if self.clamp_log_scale:
            alpha = jnp.tanh(alpha) * math.log(2.0)
        return mu, alpha

    def __call__(
        self, v: jax.Array, embedding: jax.Array | None = None
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Returns ``(u, log_det, max_log_scale)`` for ``v`` of shape (..., n).

        ``max_log_scale = max_i(-alpha_i)`` is the layer's worst-direction log expansion.
        """
        v = _check_input(v, self.num_features, "v")
        flat, lead = _flatten(v, self.num_features)
        emb = self._check_embedding(embedding)
        mu, alpha = self._shift_and_log_scale(flat, emb)
        u = (flat - mu) * jnp.exp(-alpha)
        log_det = -jnp.sum(alpha, axis=-1)
        max_log_scale = jnp.max(-alpha, axis=-1)
        return u.reshape(v.shape), log_det.reshape(lead), max_log_scale.reshape(lead)

    def inverse(self, u: jax.Array, embedding: jax.Array | None = None) -> jax.Array:
        """The exact inverse, sequential over coordinates (``lax.fori_loop`` of n passes)."""
        u = _check_input(u, self.num_features, "u")
        flat, _ = _flatten(u, self.num_features)
        emb = self._check_embedding(embedding)

        def one_pass(_, v):
            mu, alpha = self._shift_and_log_scale(v, emb)
            return flat * jnp.exp(alpha) + mu

        v = jax.lax.fori_loop(0, self.num_features, one_pass, jnp.zeros_like(flat))
        return v.reshape(u.shape)


class ActNormLU(nnx.Module):
    """ActNorm followed by an LU-factorised invertible linear map.

    ``y = ((v - b) * exp(s)) P L U`` (row vectors), with P a fixed permutation, L unit lower
    triangular and U upper triangular with ``diag(U) = sign * exp(log_S)``::

        log|det dy/dv| = sum_i (s_i + log_S_i).

    P, L, U start from the LU factors of a random orthogonal matrix; ``b`` and ``s`` are set by
    :meth:`initialize_from_batch` (data-dependent: ``b = mean``, ``s = -log std``), which must be
    called once, outside ``jax.jit``, before training.

    Args:
      num_features: dimension n.
      rngs: ``nnx.Rngs`` for the random orthogonal matrix.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from flax import nnx
      >>> layer = ActNormLU(3, rngs=nnx.Rngs(0))
      >>> v = 2.0 + 3.0 * jax.random.normal(jax.random.key(1), (256, 3))
      >>> layer.initialize_from_batch(v)
      >>> y, log_det, _ = layer(v)
      >>> bool(jnp.allclose(layer.inverse(y), v, atol=1e-4))
      True

    References:
      D. P. Kingma, P. Dhariwal, "Glow: Generative Flow with Invertible 1x1 Convolutions",
      NeurIPS 2018; C. Liu, E. Liang, M. Chen, "Hom-PGD⁺", ICML 2026.
    """

    def __init__(self, num_features: int, *, rngs: nnx.Rngs):
        n = check_positive_int(num_features, "num_features")
        self.num_features = n
        # Factorised on the host (numpy/scipy): no per-op compilation when a net is built.
        gaussian = np.asarray(jax.random.normal(rngs.params(), (n, n)), np.float64)
        orthogonal, _ = np.linalg.qr(gaussian)
        perm, lower, upper = scipy.linalg.lu(orthogonal)
        diag = np.diag(upper)
        as_param = lambda a: jnp.asarray(a, jnp.float32)  # noqa: E731
        self.permutation = Buffer(as_param(perm))
        self.sign = Buffer(as_param(np.sign(diag)))
        self.lower = nnx.Param(as_param(np.tril(lower, -1)))
        self.upper = nnx.Param(as_param(np.triu(upper, 1)))
        self.log_diag = nnx.Param(as_param(np.log(np.abs(diag))))
        self.bias = nnx.Param(jnp.zeros((n,)))
        self.log_scale = nnx.Param(jnp.zeros((n,)))
        self.initialized = False

    def _factors(self) -> tuple[jax.Array, jax.Array]:
        eye = jnp.eye(self.num_features)
        lower = jnp.tril(self.lower[...], -1) + eye
        upper = jnp.triu(self.upper[...], 1) + jnp.diag(
            self.sign[...] * jnp.exp(self.log_diag[...])
        )
        return lower, upper

    def initialize_from_batch(self, v: ArrayLike) -> None:
        """Data-dependent init: after it the ActNorm output of ``v`` has zero mean, unit std.

        Call once, outside ``jax.jit`` (it writes the parameters). A concrete batch must be
        finite (a NaN would make every later output NaN); a traced one (as
        :meth:`InvertibleNet.initialize_from_batch` passes) is not checked.
        """
        v = _check_input(v, self.num_features, "v")
        flat, _ = _flatten(v, self.num_features)
        if flat.shape[0] < 2:
            raise ValueError(f"v must hold at least 2 samples, got {flat.shape[0]}")
        check_real_array(flat, "v")
        self.bias.set_value(jnp.mean(flat, axis=0))
        self.log_scale.set_value(-jnp.log(jnp.std(flat, axis=0) + 1e-6))
        self.initialized = True

    def __call__(self, v: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Returns ``(y, log_det, max_log_scale)`` with ``max_log_scale = max_i(s_i + log_S_i)``."""
        v = _check_input(v, self.num_features, "v")
        flat, lead = _flatten(v, self.num_features)
        lower, upper = self._factors()
        w = (flat - self.bias[...][None, :]) * jnp.exp(self.log_scale[...])[None, :]
        y = w @ self.permutation[...] @ lower @ upper
        log_scales = self.log_scale[...] + self.log_diag[...]
        log_det = jnp.sum(log_scales)
        max_log_scale = jnp.max(log_scales)
        ones = jnp.ones(lead)
        return y.reshape(v.shape), log_det * ones, max_log_scale * ones

    def inverse(self, y: jax.Array) -> jax.Array:
        """``v = y U^-1 L^-1 P^T exp(-s) + b`` by two triangular solves."""
        y = _check_input(y, self.num_features, "y")
        flat, _ = _flatten(y, self.num_features)
        lower, upper = self._factors()
        solve = jax.scipy.linalg.solve_triangular
        a = solve(upper.T, flat.T, lower=True)  # a^T with a U = y
        b = solve(lower.T, a, lower=False, unit_diagonal=True)  # b^T with b L = a
        w = b.T @ self.permutation[...].T
        v = w * jnp.exp(-self.log_scale[...])[None, :] + self.bias[...][None, :]
        return v.reshape(y.shape)


class MLPEncoder(nnx.Module):
    """Condition encoder: an MLP on the flattened condition parameters.

    ``e(c) = MLP(vec c)`` with one hidden ReLU layer.

    Args:
      condition_shape: shape of one condition (the trailing axes of the input).
      out_features: size of the embedding.
      hidden: hidden width.
      rngs: ``nnx.Rngs``.

    Examples:
      >>> import jax.numpy as jnp
      >>> from flax import nnx
      >>> encoder = MLPEncoder((3, 4), 8, rngs=nnx.Rngs(0))
      >>> encoder(jnp.ones((5, 3, 4))).shape
      (5, 8)

    References:
      C. Liu, E. Liang, M. Chen, "Hom-PGD⁺", ICML 2026 (condition encoders of the INN).
    """

    def __init__(
        self, condition_shape: Sequence[int], out_features: int, hidden: int = 64, *, rngs
    ):
        if not isinstance(condition_shape, Sequence) or isinstance(condition_shape, str):
            raise TypeError(
                f"condition_shape must be a tuple of ints >= 1, got {condition_shape!r}"
            )
        self.condition_shape = tuple(
            check_positive_int(s, "condition_shape entries") for s in condition_shape
        )
        self.out_features = check_positive_int(out_features, "out_features")
        size = math.prod(self.condition_shape)
        self.mlp = _MLP([size, check_positive_int(hidden, "hidden"), out_features], rngs=rngs)

    def __call__(self, condition: jax.Array) -> jax.Array:
        condition = check_array(condition, "condition")
        k = len(self.condition_shape)
        if condition.shape[condition.ndim - k :] != self.condition_shape:
            raise ValueError(
                f"condition must end with shape {self.condition_shape}, got {condition.shape}"
            )
        lead = condition.shape[: condition.ndim - k]
        return self.mlp(jnp.reshape(condition, lead + (-1,)))


class DeepSetsEncoder(nnx.Module):
    """Permutation-invariant condition encoder for a set of elements (scenario sets).

    ``e(c) = rho(mean_j phi(c_j))`` over the set axis -2 of ``c`` (shape (..., m, d)).

    Args:
      element_features: size d of one set element.
      out_features: size of the embedding.
      hidden: hidden width of phi and rho.
      rngs: ``nnx.Rngs``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from flax import nnx
      >>> encoder = DeepSetsEncoder(2, 8, rngs=nnx.Rngs(0))
      >>> c = jax.random.normal(jax.random.key(0), (7, 2))
      >>> bool(jnp.allclose(encoder(c), encoder(c[::-1]), atol=1e-6))  # order does not matter
      True

    References:
      M. Zaheer et al., "Deep Sets", NeurIPS 2017; C. Liu, E. Liang, M. Chen, "Hom-PGD⁺",
      ICML 2026.
    """

    def __init__(self, element_features: int, out_features: int, hidden: int = 64, *, rngs):
        d = check_positive_int(element_features, "element_features")
        h = check_positive_int(hidden, "hidden")
        self.element_features = d
        self.out_features = check_positive_int(out_features, "out_features")
        self.phi = _MLP([d, h, h], rngs=rngs)
        self.rho = _MLP([h, h, out_features], rngs=rngs)

    def __call__(self, condition: jax.Array) -> jax.Array:
        condition = check_array(condition, "condition")
        if condition.ndim < 2 or condition.shape[-1] != self.element_features:
            raise ValueError(
                f"condition must have shape (..., m, {self.element_features}), "
                f"got {condition.shape}"
            )
        return self.rho(jnp.mean(self.phi(condition), axis=-2))


class QuadMixerEncoder(nnx.Module):
    """Condition encoder for quadratic constraints ``1/2 x^T Q_j x + p_j^T x <= b_j``.

    The condition holds one row ``[vec Q_j, p_j, b_j]`` (size n² + n + 1) per constraint. Per
    constraint, a row-MLP maps each row of Q_j (n -> d), a column-MLP then mixes each of the d
    channels along the row index (n -> 1), and an MLP on ``[p_j, b_j]`` is added; then
    ``e = rho(max_j phi(.))`` (max-pool over constraints, so their order does not matter).

    Args:
      num_features: the dimension n of x.
      out_features: size of the embedding.
      hidden: width d.
      rngs: ``nnx.Rngs``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from flax import nnx
      >>> encoder = QuadMixerEncoder(2, 8, hidden=16, rngs=nnx.Rngs(0))
      >>> c = jax.random.normal(jax.random.key(0), (3, 2 * 2 + 2 + 1))
      >>> encoder(c).shape, bool(jnp.allclose(encoder(c), encoder(c[::-1]), atol=1e-6))
      ((8,), True)

    References:
      C. Liu, E. Liang, M. Chen, "Hom-PGD⁺", ICML 2026 (the "QuadMixer" QCQP encoder).
    """

    def __init__(self, num_features: int, out_features: int, hidden: int = 64, *, rngs):
        n = check_positive_int(num_features, "num_features")
        h = check_positive_int(hidden, "hidden")
        self.num_features = n
        self.out_features = check_positive_int(out_features, "out_features")
        self.row_mlp = _MLP([n, h, h], rngs=rngs)
        self.column_mlp = _MLP([n, h, 1], rngs=rngs)
        self.linear_mlp = _MLP([n + 1, h, h], rngs=rngs)
        self.phi = _MLP([h, h, h], rngs=rngs)
        self.rho = _MLP([h, h, out_features], rngs=rngs)

    def __call__(self, condition: jax.Array) -> jax.Array:
        condition = check_array(condition, "condition")
        n = self.num_features
        if condition.ndim < 2 or condition.shape[-1] != n * n + n + 1:
            raise ValueError(
                f"condition must have shape (..., m, {n * n + n + 1}) = (..., m, n^2 + n + 1), "
                f"got {condition.shape}"
            )
        quad = jnp.reshape(condition[..., : n * n], condition.shape[:-1] + (n, n))
        rows = self.row_mlp(quad)  # (..., m, n, d): each row of Q_j mapped to d features
        mixed = self.column_mlp(jnp.swapaxes(rows, -1, -2))  # (..., m, d, 1): mixed over rows
        per_constraint = mixed[..., 0] + self.linear_mlp(condition[..., n * n :])
        return self.rho(jnp.max(self.phi(per_constraint), axis=-2))


class InvertibleNet(nnx.Module):
    """Conditional invertible network Φ_θ(z; c) from the latent ball onto a box ``[lb, ub]``.

    ``num_layers`` blocks of :class:`ConditionalMADE` then :class:`ActNormLU`, then
    ``x = (u + 1) / 2 * (ub - lb) + lb``. The log-determinant is the sum of the layers' (and
    ``sum log((ub - lb) / 2)`` for the box map), and each layer reports its worst-direction log
    expansion, used by :func:`homeomorphism_loss` as a distortion (Lipschitz) proxy.

    Args:
      num_features: dimension n of z and x.
      num_layers: number of MADE + ActNorm-LU blocks.
      hidden: MADE width; default ``max(n + 1, 64)``.
      condition_encoder: module mapping a condition c to an embedding (it must have an
        ``out_features`` attribute), or None for an unconditional map.
      bounds: ``(lb, ub)`` scalars or (n,) arrays with ``lb < ub``, or None (no box map).
      clamp_log_scale: bi-Lipschitz clamp of every MADE layer.
      film: FiLM placement in every MADE layer, ``"both"`` hidden layers or only the ``"first"``
        (see :class:`ConditionalMADE`).
      rngs: ``nnx.Rngs``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from flax import nnx
      >>> net = InvertibleNet(2, hidden=16, bounds=(-2.0, 2.0), rngs=nnx.Rngs(0))
      >>> z = sample_latents(jax.random.key(0), 256, 2)
      >>> net.initialize_from_batch(z)
      >>> x, log_det, max_log_scale = net(z)
      >>> x.shape, log_det.shape, max_log_scale.shape
      ((256, 2), (256,), (256, 6))
      >>> bool(jnp.max(jnp.abs(net.inverse(x) - z)) < 1e-4)
      True

    References:
      C. Liu, E. Liang, M. Chen, "Hom-PGD⁺: Fast Reparameterized Optimization over Non-convex
      Ball-Homeomorphic Set", ICML 2026.
    """

    def __init__(
        self,
        num_features: int,
        num_layers: int = 3,
        hidden: int | None = None,
        condition_encoder: nnx.Module | None = None,
        bounds: tuple[ArrayLike, ArrayLike] | None = None,
        *,
        clamp_log_scale: bool = False,
        film: str = "both",
        rngs: nnx.Rngs,
    ):
        n = check_positive_int(num_features, "num_features")
        num_layers = check_positive_int(num_layers, "num_layers")
        hidden = max(n + 1, 64) if hidden is None else check_positive_int(hidden, "hidden")
        embed = 0
        if condition_encoder is not None:
            embed = getattr(condition_encoder, "out_features", None)
            if not isinstance(embed, int) or embed < 1:
                raise TypeError(
                    "condition_encoder must be a module with a positive int `out_features`, "
                    f"got {type(condition_encoder).__name__}"
                )
        self.num_features = n
        self.num_layers = num_layers
        self.condition_encoder = condition_encoder
        self.made = nnx.List(
            [
                ConditionalMADE(
                    n, hidden, embed, clamp_log_scale=clamp_log_scale, film=film, rngs=rngs
                )
                for _ in range(num_layers)
            ]
        )
        self.actnorm = nnx.List([ActNormLU(n, rngs=rngs) for _ in range(num_layers)])
        if bounds is None:
            self.lower_bound = None
            self.upper_bound = None
        else:
            if isinstance(bounds, str) or not hasattr(bounds, "__len__") or len(bounds) != 2:
                raise ValueError(f"bounds must be a pair (lb, ub), got {bounds!r}")
            for side, bound in zip(("lb", "ub"), bounds, strict=True):
                values = check_real_array(bound, f"bounds ({side})")
                if values.ndim > 1 or values.size not in (1, n):
                    raise ValueError(
                        f"bounds ({side}) must be a scalar or have shape ({n},), got shape "
                        f"{values.shape}"
                    )
            lb = jnp.broadcast_to(jnp.asarray(bounds[0], jnp.float32), (n,))
            ub = jnp.broadcast_to(jnp.asarray(bounds[1], jnp.float32), (n,))
            if not bool(jnp.all(ub > lb)):
                raise ValueError(f"bounds must satisfy lb < ub elementwise, got {bounds!r}")
            self.lower_bound = Buffer(lb)
            self.upper_bound = Buffer(ub)

    def _embedding(self, condition, lead: tuple[int, ...]) -> jax.Array | None:
        if self.condition_encoder is None:
            if condition is not None:
                raise ValueError("condition must be None: this network has no condition_encoder")
            return None
        if condition is None:
            raise ValueError("condition is required: this network has a condition_encoder")
        embedding = self.condition_encoder(check_array(condition, "condition"))
        if embedding.shape[:-1] != lead:
            target = lead + embedding.shape[-1:]
            try:
                np.broadcast_shapes(embedding.shape, target)
            except ValueError:
                raise ValueError(
                    f"condition's leading axes {embedding.shape[:-1]} must equal or broadcast to "
                    f"the latents' {lead}"
                ) from None
            embedding = jnp.broadcast_to(embedding, target)
        return embedding

    def _check_z(self, z: ArrayLike, name: str) -> jax.Array:
        return _check_input(z, self.num_features, name)

    def __call__(
        self, z: ArrayLike, condition: ArrayLike | None = None
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Maps latents z (..., n) to ``(x, log_det, max_log_scale_per_layer)``.

        ``log_det`` has shape (...), ``max_log_scale_per_layer`` (..., 2 * num_layers). The
        condition's leading axes must equal z's or broadcast to them (one shared condition).
        """
        z = self._check_z(z, "z")
        lead = z.shape[:-1]
        embedding = self._embedding(condition, lead)
        v, log_det, scales = z, jnp.zeros(lead, z.dtype), []
        for made, actnorm in zip(self.made, self.actnorm, strict=True):
            v, ld, s = made(v, embedding)
            log_det, scales = log_det + ld, scales + [s]
            v, ld, s = actnorm(v)
            log_det, scales = log_det + ld, scales + [s]
        if self.lower_bound is not None:
            half = (self.upper_bound[...] - self.lower_bound[...]) / 2.0
            v = (v + 1.0) * jnp.broadcast_to(half, v.shape) + jnp.broadcast_to(
                self.lower_bound[...], v.shape
            )
            log_det = log_det + jnp.sum(jnp.log(half))
        return v, log_det, jnp.stack(scales, axis=-1)

    def inverse(self, x: ArrayLike, condition: ArrayLike | None = None) -> jax.Array:
        """The exact inverse z = Φ⁻¹(x; c) (MADE layers inverted by ``lax.fori_loop``)."""
        x = self._check_z(x, "x")
        embedding = self._embedding(condition, x.shape[:-1])
        v = x
        if self.lower_bound is not None:
            half = (self.upper_bound[...] - self.lower_bound[...]) / 2.0
            v = (v - jnp.broadcast_to(self.lower_bound[...], v.shape)) / jnp.broadcast_to(
                half, v.shape
            ) - 1.0
        for made, actnorm in zip(reversed(self.made), reversed(self.actnorm), strict=True):
            v = made.inverse(actnorm.inverse(v), embedding)
        return v

    def initialize_from_batch(self, z: ArrayLike, condition: ArrayLike | None = None) -> None:
        """Data-dependent ActNorm init on a batch of latents (once, outside ``jax.jit``).

        Each ActNorm is set from the statistics of its own input, block after block. The pass
        is compiled as one function (it writes the parameters of this module afterwards).
        """
        z = self._check_z(z, "z")
        if z.ndim < 2 or math.prod(z.shape[:-1]) < 2:
            raise ValueError(f"z must hold at least 2 samples, got shape {z.shape}")
        self._embedding(condition, z.shape[:-1])  # validates the condition eagerly
        graphdef, state = nnx.split(self)

        def initialized_state(state, z, condition):
            model = nnx.merge(graphdef, state)
            embedding = model._embedding(condition, z.shape[:-1])
            v = z
            for made, actnorm in zip(model.made, model.actnorm, strict=True):
                v, _, _ = made(v, embedding)
                actnorm.initialize_from_batch(v)
                v, _, _ = actnorm(v)
            return nnx.state(model)

        nnx.update(self, jax.jit(initialized_state)(state, z, condition))
        for actnorm in self.actnorm:
            actnorm.initialized = True


def sample_latents(rng_key: jax.Array, num_samples: int, num_features: int) -> jax.Array:
    """Uniform latent samples: in the unit disk for n <= 2, in the cube [-1, 1]^n for n > 2.

    Uniform in the n-ball needs radius ``U^{1/n}`` times a uniform direction; the public code
    (and jaxlab) use the cube for n > 2, where the ball's volume concentrates badly.

    Args:
      rng_key: a ``jax.random`` key.
      num_samples: number of samples.
      num_features: dimension n.

    Returns:
      Array of shape (num_samples, num_features).

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> z = sample_latents(jax.random.key(0), 1000, 2)
      >>> bool(jnp.all(jnp.linalg.norm(z, axis=1) <= 1.0))
      True

    References:
      C. Liu, E. Liang, M. Chen, "Hom-PGD⁺", ICML 2026 (latent sampling of the public code).
    """
    check_key(rng_key)
    num_samples = check_positive_int(num_samples, "num_samples")
    n = check_positive_int(num_features, "num_features")
    if n > 2:
        return jax.random.uniform(rng_key, (num_samples, n), minval=-1.0, maxval=1.0)
    direction_key, radius_key = jax.random.split(rng_key)
    direction = jax.random.normal(direction_key, (num_samples, n))
    direction = direction / jnp.linalg.norm(direction, axis=-1, keepdims=True)
    radius = jax.random.uniform(radius_key, (num_samples, 1)) ** (1.0 / n)
    return direction * radius


def invertibility_error(
    model: InvertibleNet, latents: ArrayLike, condition: ArrayLike | None = None
) -> jax.Array:
    """Round-trip error ``||Φ⁻¹(Φ(z; c); c) - z||_∞`` of an :class:`InvertibleNet`, per latent.

    An exact bijection gives 0 up to rounding; a trained map whose MADE scales blow up (or a
    float32 round trip through near-singular ActNorm-LU factors) shows a large error, and then
    Hom-PGD's latent iterates no longer correspond one to one to points of Φ(𝔹).

    Args:
      model: the network.
      latents: (N, n) latent points.
      condition: the condition (one shared condition, or one per latent), None when
        unconditional.

    Returns:
      Array (N,) of max-abs round-trip errors.

    Examples:
      >>> import jax
      >>> from flax import nnx
      >>> net = InvertibleNet(2, hidden=8, rngs=nnx.Rngs(0))
      >>> err = invertibility_error(net, sample_latents(jax.random.key(0), 64, 2))
      >>> err.shape, bool(err.max() < 1e-4)
      ((64,), True)

    References:
      C. Liu, E. Liang, M. Chen, "Hom-PGD⁺", ICML 2026 (ε_inn and the INN's invertibility).
    """
    if not isinstance(model, InvertibleNet):
        raise TypeError(f"model must be an InvertibleNet, got {type(model).__name__}")
    latents = check_array(latents, "latents", kind="floating")
    if latents.ndim != 2 or latents.shape[-1] != model.num_features:
        raise ValueError(f"latents must have shape (N, {model.num_features}), got {latents.shape}")
    return _round_trip_error(model, latents, condition)


@nnx.jit
def _round_trip_error(model: InvertibleNet, latents: jax.Array, condition) -> jax.Array:
    # One compiled program per architecture and shape: eagerly, the inverse's lax.fori_loop
    # (one per MADE layer) would be traced and compiled again at every call.
    x = model(latents, condition)[0]
    return jnp.max(jnp.abs(model.inverse(x, condition) - latents), axis=-1)


def homeomorphism_loss(
    model: InvertibleNet,
    latents: jax.Array,
    conditions: jax.Array | None,
    constraint_fn: Callable[..., jax.Array],
    *,
    penalty_weight: ArrayLike = 10.0,
    distortion_weight: ArrayLike = 0.01,
    lipschitz_weight: ArrayLike = 0.1,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The minimum-distortion homeomorphism loss of Hom-PGD⁺.

    For latents z_b and conditions c_b (one per latent), x_b = Φ_θ(z_b; c_b)::

        L(θ) = -(1/n) mean_b log|det J_Φ(z_b)| + w_pen mean_b sum_j [g_j(x_b; c_b)]_+
               + w_dist mean_b D(z_b) + w_lip max_b D(z_b),

    with ``D(z) = sum_layers max_i log-scale_i`` (worst-direction expansion per layer). The
    volume term pushes Φ(𝔹) to fill K, the penalty keeps it inside.

    Args:
      model: an :class:`InvertibleNet`.
      latents: (B, n) latent samples.
      conditions: (B, ...) conditions, or None for an unconditional model.
      constraint_fn: ``constraint_fn(x, condition) -> residuals`` (or ``constraint_fn(x)`` when
        ``conditions`` is None) for ONE point; residuals <= 0 means feasible.
      penalty_weight: w_pen >= 0.
      distortion_weight: w_dist >= 0.
      lipschitz_weight: w_lip >= 0.

    Returns:
      ``(loss, aux)`` with aux holding ``volume``, ``penalty``, ``distortion``, ``lipschitz``
      and ``violation_fraction`` (share of the batch with a positive residual > 1e-5).

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from flax import nnx
      >>> net = InvertibleNet(2, hidden=8, bounds=(-2.0, 2.0), rngs=nnx.Rngs(0))
      >>> z = sample_latents(jax.random.key(0), 64, 2)
      >>> disk = lambda x: jnp.sum(x**2, keepdims=True) - 1.0  # K = unit disk
      >>> loss, aux = homeomorphism_loss(net, z, None, disk)
      >>> round(float(aux["volume"]), 4)  # a fresh net is 2 x orthogonal: -(1/2) log 2² = -log 2
      -0.6931
      >>> float(aux["penalty"]) > 0  # Φ(𝔹) = disk of radius 2 leaves K
      True

    References:
      C. Liu, E. Liang, M. Chen, "Hom-PGD⁺", ICML 2026 (training loss; weights of the code).
    """
    if not isinstance(model, InvertibleNet):
        raise TypeError(f"model must be an InvertibleNet, got {type(model).__name__}")
    check_callable(constraint_fn, "constraint_fn", signature="constraint_fn(x[, condition])")
    for name, weight in (
        ("penalty_weight", penalty_weight),
        ("distortion_weight", distortion_weight),
        ("lipschitz_weight", lipschitz_weight),
    ):
        check_nonnegative(weight, name)  # traced weights (a sweep under vmap) pass unchecked
    latents = check_array(latents, "latents", kind="floating")
    if latents.ndim != 2:
        raise ValueError(f"latents must have shape (B, n), got {latents.shape}")
    x, log_det, scales = model(latents, conditions)
    if conditions is None:
        residuals = jax.vmap(constraint_fn)(x)
    else:
        residuals = jax.vmap(constraint_fn)(x, conditions)
    residuals = jnp.reshape(residuals, (x.shape[0], -1))
    distortion = jnp.sum(scales, axis=-1)
    volume = -jnp.mean(log_det) / latents.shape[-1]
    penalty = jnp.mean(jnp.sum(jax.nn.relu(residuals), axis=-1))
    aux = {
        "volume": volume,
        "penalty": penalty,
        "distortion": jnp.mean(distortion),
        "lipschitz": jnp.max(distortion),
        "violation_fraction": jnp.mean(jnp.max(residuals, axis=-1) > 1e-5),
    }
    loss = (
        volume
        + penalty_weight * penalty
        + distortion_weight * aux["distortion"]
        + lipschitz_weight * aux["lipschitz"]
    )
    return loss, aux


class HomeomorphismTraining(NamedTuple):
    """What :func:`train_homeomorphism` returns.

    Attributes:
      model: the trained network with Polyak (EMA) weights.
      last_model: the network with the last iterate's weights.
      history: dict of per-step arrays (``loss`` and every entry of the loss's aux).
      snapshots: ``{step: network with the EMA weights after that step}`` for every step of
        ``snapshot_steps`` (empty by default): one run gives the map at several budgets.

    Examples:
      >>> HomeomorphismTraining._fields
      ('model', 'last_model', 'history', 'snapshots')
    """

    model: InvertibleNet
    last_model: InvertibleNet
    history: dict[str, np.ndarray]
    snapshots: dict[int, InvertibleNet] = {}


def _with_polyak_average(
    tx: optax.GradientTransformation, decay: float
) -> optax.GradientTransformation:
    """``tx``, with an EMA of the parameters after each update kept in its state (Polyak weights).

    The average is ``optax.ema`` (no debiasing) fed the updated parameters, its accumulator
    started at the initial parameters (``optax.ema`` starts at zero, which would weigh the
    first steps toward 0): ``ema <- decay ema + (1 - decay) params``. The state is
    ``(tx's state, optax.EmaState)``; the updates are ``tx``'s, unchanged.
    """
    # The same average as the hand-written ``decay * e + (1 - decay) * p`` this replaced, but
    # not bitwise: optax sums the two products in the other order, and XLA:CPU contracts one of
    # them into an FMA, so the EMA weights differ at float32 rounding (at most 6e-6 on weights
    # of size 1.3 after 230 steps; the loss history and the last iterate are bitwise equal).
    average = optax.ema(decay, debias=False)

    def init(params):
        return tx.init(params), optax.EmaState(count=jnp.zeros([], jnp.int32), ema=params)

    def update(grads, state, params):
        inner, ema = state
        updates, inner = tx.update(grads, inner, params)
        _, ema = average.update(optax.apply_updates(params, updates), ema)
        return updates, (inner, ema)

    return optax.GradientTransformation(init, update)


def train_homeomorphism(
    model: InvertibleNet,
    constraint_fn: Callable[..., jax.Array],
    latents: jax.Array,
    *,
    rng_key: jax.Array,
    num_steps: int,
    batch_size: int = 256,
    sample_conditions: Callable[[jax.Array, int], jax.Array] | None = None,
    learning_rate: float = 1e-3,
    weight_decay: float = 1e-5,
    decay_rate: float = 0.99,
    decay_every: int = 100,
    ema_decay: float = 0.99,
    penalty_weight: float = 10.0,
    distortion_weight: float = 0.01,
    lipschitz_weight: float = 0.1,
    chunk_size: int = 100,
    initialize: bool = True,
    progress: Any = None,
    snapshot_steps: Sequence[int] = (),
) -> HomeomorphismTraining:
    """Trains an :class:`InvertibleNet` with :func:`homeomorphism_loss` (the code's recipe).

    Each step draws a batch of ``batch_size`` latents from the fixed ``latents`` pool and, for a
    conditional model, ``batch_size`` fresh conditions from ``sample_conditions(key, batch)``;
    AdamW (lr ``learning_rate``, times ``decay_rate`` every ``decay_every`` steps, weight decay
    ``weight_decay``) updates θ and an EMA with ``ema_decay`` keeps Polyak weights. Steps run in
    jitted ``lax.scan`` chunks of ``chunk_size``. With ``initialize=True`` the ActNorm layers are
    first initialised from a batch (outside jit). ``model`` itself is not modified beyond that
    initialisation; the trained networks are returned.

    Args:
      model: the network to train.
      constraint_fn: per-point residuals, see :func:`homeomorphism_loss`.
      latents: (N, n) pool of latent samples (e.g. :func:`sample_latents`).
      rng_key: a ``jax.random`` key.
      num_steps: number of optimiser steps.
      batch_size: latents (and conditions) per step.
      sample_conditions: ``(key, batch_size) -> (batch_size, ...)`` conditions; None for an
        unconditional model.
      learning_rate: AdamW learning rate (> 0).
      weight_decay: AdamW weight decay (>= 0).
      decay_rate: staircase decay factor in (0, 1].
      decay_every: steps between decays.
      ema_decay: Polyak averaging factor in [0, 1).
      penalty_weight: see :func:`homeomorphism_loss`.
      distortion_weight: see :func:`homeomorphism_loss`.
      lipschitz_weight: see :func:`homeomorphism_loss`.
      chunk_size: steps per jitted chunk (one progress tick each).
      initialize: run the data-dependent ActNorm init first.
      progress: optional object with ``track(iterable, total=, description=)``.
      snapshot_steps: steps in [1, num_steps] after which the EMA network is also kept
        (``snapshots``); chunks are cut there, so a snapshot costs one extra compile at most.

    Returns:
      A :class:`HomeomorphismTraining` (EMA model, last model, history, snapshots). A
      non-finite loss (a ``constraint_fn`` that returns NaN, a diverging learning rate) is not
      masked: it shows in ``history["loss"]``, so check
      ``np.isfinite(history["loss"]).all()``.

    Raises:
      TypeError: a non-callable ``constraint_fn``, a bad ``rng_key``, non-floating latents,
        strings or ``None`` where a number is meant.
      ValueError: latents of the wrong shape or non-finite, numbers outside their range.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from flax import nnx
      >>> net = InvertibleNet(2, hidden=8, rngs=nnx.Rngs(0))
      >>> z = sample_latents(jax.random.key(0), 512, 2)
      >>> disk = lambda x: jnp.sum(x**2, keepdims=True) - 16.0  # disk of radius 4
      >>> out = train_homeomorphism(net, disk, z, rng_key=jax.random.key(1), num_steps=200,
      ...                           batch_size=64, learning_rate=1e-2, chunk_size=100)
      >>> out.history["loss"].shape
      (200,)
      >>> bool(out.history["volume"][-1] < out.history["volume"][0])  # Φ(𝔹) grew toward K
      True

    References:
      C. Liu, E. Liang, M. Chen, "Hom-PGD⁺", ICML 2026 (training recipe of the public code).
    """
    num_steps = check_positive_int(num_steps, "num_steps")
    batch_size = check_positive_int(batch_size, "batch_size")
    decay_every = check_positive_int(decay_every, "decay_every")
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    if not isinstance(model, InvertibleNet):
        raise TypeError(f"model must be an InvertibleNet, got {type(model).__name__}")
    check_callable(constraint_fn, "constraint_fn", signature="constraint_fn(x[, condition])")
    check_callable(sample_conditions, "sample_conditions", allow_none=True)
    check_key(rng_key)
    latents = check_array(latents, "latents", kind="floating")
    if latents.ndim != 2 or latents.shape[-1] != model.num_features:
        raise ValueError(f"latents must have shape (N, {model.num_features}), got {latents.shape}")
    check_real_array(latents, "latents")  # a NaN latent would make every step's loss NaN
    check_positive(learning_rate, "learning_rate")
    check_nonnegative(weight_decay, "weight_decay")
    check_real(decay_rate, "decay_rate", minimum=0.0, include_minimum=False, maximum=1.0)
    check_in_range(ema_decay, "ema_decay", 0.0, 1.0)
    for name, weight in (
        ("penalty_weight", penalty_weight),
        ("distortion_weight", distortion_weight),
        ("lipschitz_weight", lipschitz_weight),
    ):
        check_nonnegative(weight, name)
    initialize = check_bool(initialize, "initialize")
    if isinstance(snapshot_steps, (str, bytes)) or not isinstance(snapshot_steps, Sequence):
        raise TypeError(f"snapshot_steps must be a sequence of ints, got {snapshot_steps!r}")
    snapshot_steps = sorted(
        {
            check_int(s, "snapshot_steps' entry", minimum=1, maximum=num_steps)
            for s in snapshot_steps
        }
    )
    conditional = model.condition_encoder is not None
    if conditional != (sample_conditions is not None):
        raise ValueError(
            "sample_conditions must be given exactly when the model has a condition_encoder"
        )

    def conditions_for(key, size):
        return None if sample_conditions is None else sample_conditions(key, size)

    init_key, rng_key = jax.random.split(rng_key)
    if initialize:
        first = latents[: min(batch_size, latents.shape[0])]
        # jitted: sampling a batch of conditions eagerly would compile op by op.
        conditions = jax.jit(conditions_for, static_argnums=1)(init_key, first.shape[0])
        model.initialize_from_batch(first, conditions)

    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    schedule = optax.exponential_decay(
        learning_rate, transition_steps=decay_every, decay_rate=decay_rate, staircase=True
    )
    tx = _with_polyak_average(optax.adamw(schedule, weight_decay=weight_decay), ema_decay)
    weights = dict(
        penalty_weight=penalty_weight,
        distortion_weight=distortion_weight,
        lipschitz_weight=lipschitz_weight,
    )

    def loss_fn(p, key):
        # The batch is drawn from the step's key inside the loss (it does not depend on p).
        latent_key, condition_key = jax.random.split(key)
        idx = jax.random.randint(latent_key, (batch_size,), 0, latents.shape[0])
        net = nnx.merge(graphdef, p, rest)
        conditions = conditions_for(condition_key, batch_size)
        return homeomorphism_loss(net, latents[idx], conditions, constraint_fn, **weights)

    @jax.jit
    def run_chunk(p, opt_state, chunk_keys):
        # The library's loop (one lax.scan); the step keys are its stacked batches.
        steps = chunk_keys.shape[0]
        result = scan_train(loss_fn, p, tx, chunk_keys, steps, opt_state=opt_state, has_aux=True)
        return result.params, result.opt_state, {"loss": result.losses, **result.aux}

    opt_state = tx.init(params)
    keys = jax.random.split(rng_key, num_steps)
    cuts = sorted(set(range(0, num_steps, chunk_size)) | {s for s in snapshot_steps} - {num_steps})
    chunks = list(zip(cuts, [*cuts[1:], num_steps], strict=True))
    if progress is not None:
        chunks = progress.track(chunks, total=len(chunks), description="training the INN")
    history, snapshots = [], {}
    for start, stop in chunks:
        params, opt_state, metrics = run_chunk(params, opt_state, keys[start:stop])
        history.append(jax.device_get(metrics))
        if stop in snapshot_steps:
            snapshots[stop] = nnx.merge(graphdef, opt_state[1].ema, rest)
    ema = opt_state[1].ema
    merged = {k: np.concatenate([h[k] for h in history]) for k in history[0]}
    return HomeomorphismTraining(
        model=nnx.merge(graphdef, ema, rest),
        last_model=nnx.merge(graphdef, params, rest),
        history=merged,
        snapshots=snapshots,
    )
