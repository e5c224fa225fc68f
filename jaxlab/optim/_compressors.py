"""Compression operators for communication-efficient distributed optimisation.

A compressor ``C`` maps a vector to a cheaper-to-send vector. It is *alpha-contractive* when

    E ||C(v) - v||^2 <= (1 - alpha) ||v||^2      for every v,

with the expectation over the compressor's randomness (none for deterministic ones). ``alpha`` is
Richtarik et al.'s contraction parameter; the tight-analysis paper writes ``epsilon = 1 - alpha``
(the distortion). An unbiased compressor ``Q`` (``E Q(v) = v``) with variance
``E ||Q(v) - v||^2 <= omega ||v||^2`` becomes contractive with ``alpha = 1 / (1 + omega)`` after
rescaling by ``1 / (1 + omega)``; :func:`rand_k` with ``unbiased=True`` and
:func:`natural_compression` are rescaled that way, so every compressor here is contractive and can
be used by error feedback.

Every compressor is an odd map, ``C(-v) = -C(v)`` (the random ones with the same key), which is
what lets :func:`jaxlab.optim.error_feedback` put the learning rate inside the compressed quantity.

Compressors are frozen dataclasses: hashable and compared by value, so they can be static
arguments of ``jax.jit``. They are deliberately *not* callable (apply one with
:meth:`Compressor.compress` on a flat vector or :meth:`Compressor.tree_compress` on a pytree):
``optax.inject_hyperparams`` takes every callable argument for a schedule, and a compressor that
is not one passes through it unchanged, so ``inject_hyperparams(error_feedback)(learning_rate=0.1,
compressor=top_k(ratio=0.1))`` needs no ``static_args``. Their numeric parameters (``k``,
``ratio``, ``epsilon``, ...) are static Python numbers.

Bits are counted for one message with 32-bit floats (:data:`FLOAT_BITS`) and
``ceil(log2(d))``-bit coordinate indices, whatever the array's dtype.
"""

import abc
import dataclasses
import math
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab._src.validation import (
    check_bool,
    check_choice,
    check_floating_tree,
    check_in_range,
    check_int,
    check_key,
    check_real,
)

__all__ = [
    "Compressor",
    "block_top_k",
    "identity",
    "natural_compression",
    "rand_k",
    "rotation_compressor",
    "scaled_sign",
    "threshold_top_k",
    "top_k",
]

# Bits of one transmitted value: messages are counted as float32 whatever the dtype computed in.
FLOAT_BITS = 32
# Natural compression sends a sign and an 8-bit exponent per coordinate (Horvath et al. 2019).
_NATURAL_BITS = 9
# Variance of natural compression: sup over a in [1, 2) of (a - 1)(2 - a) / a^2, at a = 4/3.
_NATURAL_OMEGA = 1.0 / 8.0
_SCOPES = ("leaf", "global")
# block_top_k selects by k rounds of reductions up to this k, by a row-wise lax.top_k beyond.
_BLOCK_ITERATIVE_MAX_K = 8
# threshold_top_k's defaults: the sampled quantile targets oversample * k entries; with these a
# sample overestimates the threshold (fallback) with probability ~1e-5 at k/d = 1% (docstring).
_THRESHOLD_SAMPLE_SIZE = 8192
_THRESHOLD_OVERSAMPLE = 1.5
# Counts of 0/1 summed in float32 are exact up to 2^24.
_FLOAT_COUNT_MAX = 2**24
# The threshold's sign count (_sign_count_proves) reads sign(|v_j| - tau): exact (never a
# flushed-to-zero difference of two distinct magnitudes) when tau is 0 or at least this; in
# between the exact count runs. The difference of two distinct floats is subnormal only if both
# lie below about 2^-103 (float32).
_SIGN_COUNT_MIN_THRESHOLD = 2.0**-100


def _index_bits(dim: int) -> int:
    """Bits of one coordinate index among ``dim``: ``ceil(log2(dim))``."""
    return max(0, int(dim) - 1).bit_length()


def _normalize(compressor: "Compressor", name: str, value: Any) -> None:
    """Stores a checked number as a plain Python int/float (compressors are hashable statics)."""
    if value is None:  # the validators let a traced value through; a compressor needs numbers
        raise TypeError(f"{name} must be a static Python number, got a traced value")
    object.__setattr__(compressor, name, value)


def _accumulation_dtype(dtype) -> Any:
    """Sums of low-precision values accumulate in float32 (float64 stays float64)."""
    return jnp.float64 if jnp.dtype(dtype) == jnp.float64 else jnp.float32


def _check_vector(v: jax.Array) -> jax.Array:
    v = jnp.asarray(v)
    if v.ndim != 1:
        raise ValueError(f"v must be a flat 1-D vector, got shape {v.shape}")
    if not jnp.issubdtype(v.dtype, jnp.floating):
        raise TypeError(f"v must have a floating dtype, got {v.dtype}")
    return v


def _check_random_key(rng_key: Any, name: str) -> None:
    if rng_key is None:
        raise ValueError(f"rng_key is required by {name} (a random compressor)")
    check_key(rng_key)


def _k_from(k: int | None, ratio: float | None, dim: int) -> int:
    """The number of kept coordinates for a ``dim``-vector; ``ValueError`` if ``k > dim``."""
    if k is not None:
        if k > dim:
            raise ValueError(
                f"k must lie in (0, d] = (0, {dim}] for a vector of size {dim}, got {k}"
            )
        return int(k)
    # Rounded first so that e.g. ratio 0.07 of 100 keeps 7 coordinates, not ceil(7.000000000000001).
    return max(1, math.ceil(round(ratio * dim, 6)))


def _check_k_ratio(compressor: "Compressor") -> None:
    """Exactly one of ``k`` (an int >= 1; ``k <= d`` is checked per vector) and ``ratio``."""
    k, ratio = compressor.k, compressor.ratio
    if (k is None) == (ratio is None):
        raise ValueError(f"pass exactly one of k and ratio, got k={k!r}, ratio={ratio!r}")
    if k is not None:
        _normalize(compressor, "k", check_int(k, "k", minimum=1))
    else:
        ratio = check_real(ratio, "ratio", minimum=0.0, maximum=1.0, include_minimum=False)
        _normalize(compressor, "ratio", ratio)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Compressor(abc.ABC):
    """A (possibly random) compression operator with its contraction parameter and bit cost.

    Subclasses implement :meth:`compress` on a flat vector, :meth:`Compressor.alpha` and
    :meth:`Compressor.bits`; the base class applies the operator to pytrees: with ``scope="leaf"``
    each leaf is flattened and compressed on its own (leaf ``i`` with the key
    ``jax.random.fold_in(rng_key, i)``), with ``scope="global"`` all leaves are concatenated into
    one vector, compressed once and split back. The whole-tree message then satisfies
    ``E ||C(x) - x||^2 <= (1 - tree_alpha(x)) ||x||^2``.

    Create compressors with the factories (:func:`top_k`, :func:`rand_k`, :func:`scaled_sign`,
    :func:`natural_compression`, :func:`rotation_compressor`, :func:`block_top_k`,
    :func:`threshold_top_k`, :func:`identity`); subclass (as a frozen dataclass) to add one.

    Attributes:
      name: the factory's name, e.g. ``"top_k"``.
      deterministic: ``True`` when the operator uses no randomness (its ``alpha`` then holds for
        every vector, not only in expectation).
      scope: ``"leaf"`` or ``"global"``, see above.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.optim import top_k
      >>> compressor = top_k(ratio=0.5)
      >>> compressor.name, compressor.deterministic, compressor.alpha(4)
      ('top_k', True, 0.5)
      >>> compressor.tree_compress({"w": jnp.array([[1.0, -3.0], [0.5, 2.0]])})["w"]
      Array([[ 0., -3.],
             [ 0.,  2.]], dtype=float32)

    References:
      D. Berg Thomsen, A. Taylor, A. Dieuleveut, "A Tight Theory of Error Feedback Algorithms in
      Distributed Optimization", ICML 2026 (arXiv 2605.31594).
    """

    name: ClassVar[str] = "compressor"
    deterministic: ClassVar[bool] = True

    scope: str = "leaf"

    def __post_init__(self):
        check_choice(self.scope, "scope", _SCOPES)

    def __repr__(self) -> str:
        args = []
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None and field.name != "scope":
                args.append(f"{field.name}={value!r}")
        args.append(f"scope={self.scope!r}")
        return f"{self.name}({', '.join(args)})"

    # -- the operator on one flat vector ---------------------------------------------------------

    @abc.abstractmethod
    def compress(self, v: jax.Array, rng_key: jax.Array | None = None) -> jax.Array:
        """Compresses a flat 1-D vector ``v``; the result has ``v``'s shape and dtype."""

    @abc.abstractmethod
    def alpha(self, dim: int) -> float:
        """The contraction parameter alpha in (0, 1] for a ``dim``-vector (1 - the distortion)."""

    @abc.abstractmethod
    def bits(self, dim: int) -> int:
        """Bits of one compressed message of a ``dim``-vector (32-bit values, see the module)."""

    def omega(self, dim: int) -> float | None:
        """Variance ``omega`` of the unbiased operator before rescaling; ``None`` if biased."""
        del dim
        return None

    # -- pytrees ---------------------------------------------------------------------------------

    def tree_compress(self, tree: Any, rng_key: jax.Array | None = None) -> Any:
        """Compresses every leaf (``scope="leaf"``) or the concatenated tree (``"global"``).

        A method rather than ``__call__``: ``optax.inject_hyperparams`` would take a callable
        compressor for a schedule (see the module docstring).

        Args:
          tree: a pytree of floating arrays.
          rng_key: a ``jax.random`` key; required by random compressors, ignored otherwise.

        Returns:
          The compressed pytree, with the structure, shapes and dtypes of ``tree``.

        Raises:
          ValueError: a random compressor without ``rng_key``.
          TypeError: a non-floating leaf, or an ``rng_key`` that is not a JAX PRNG key.

        Examples:
          >>> import jax, jax.numpy as jnp
          >>> from jaxlab.optim import rand_k, top_k
          >>> top_k(1).tree_compress({"a": jnp.array([1.0, -2.0]), "b": jnp.array([3.0])})
          {'a': Array([ 0., -2.], dtype=float32), 'b': Array([3.], dtype=float32)}
          >>> out = rand_k(1).tree_compress(jnp.ones(4), jax.random.key(0))
          >>> int((out != 0).sum())
          1
        """
        self._check_tree_key(rng_key)
        check_floating_tree(tree, "tree")
        leaves, treedef = jax.tree.flatten(tree)
        if not leaves:
            return tree
        leaves = [jnp.asarray(leaf) for leaf in leaves]
        if self.scope == "leaf":
            out = []
            for i, leaf in enumerate(leaves):
                if leaf.size == 0:
                    out.append(leaf)
                    continue
                key = None if self.deterministic else jax.random.fold_in(rng_key, i)
                out.append(self.compress(leaf.reshape(-1), key).reshape(leaf.shape))
            return jax.tree.unflatten(treedef, out)
        dtypes = {leaf.dtype for leaf in leaves}
        if len(dtypes) > 1:
            # Mixed-precision trees are joined in their common dtype, explicitly, and each part
            # is cast back to its leaf's dtype below.
            with jax.numpy_dtype_promotion("standard"):
                common = jnp.result_type(*dtypes)
        else:
            (common,) = dtypes
        flat = jnp.concatenate([leaf.reshape(-1).astype(common) for leaf in leaves])
        if flat.size == 0:
            return tree
        compressed = self.compress(flat, rng_key)
        out, start = [], 0
        for leaf in leaves:
            part = compressed[start : start + leaf.size]
            out.append(part.reshape(leaf.shape).astype(leaf.dtype))
            start += leaf.size
        return jax.tree.unflatten(treedef, out)

    def _check_tree_key(self, rng_key: Any) -> None:
        """A random compressor needs a key; any key given must be a JAX PRNG key."""
        if not self.deterministic and rng_key is None:
            raise ValueError(f"rng_key is required by the random compressor {self!r}")
        if rng_key is not None:
            check_key(rng_key)

    # -- the fused path error feedback takes (private) ------------------------------------------

    # Not pytree arithmetic that optax.tree has: the compressor's own selection, fused with
    # the error-feedback combination (the docstring says why).
    def _tree_compress_fused(
        self,
        combine: Any,
        negated: Any,
        operands: tuple[Any, ...],
        rng_key: jax.Array | None = None,
    ) -> tuple[Any, list[jax.Array | None]]:
        """:meth:`tree_compress` of ``v = combine(*operands)`` (leaf by leaf), read from operands.

        The hook :func:`jaxlab.optim.error_feedback` and EF21 call (``combine`` is ``e + u`` or
        ``g - e``); ``negated`` computes ``-v`` from the same operands as a different expression
        (``e - g``, ``-u - e``). The result equals :meth:`tree_compress` of the combined tree;
        what changes is the program: with ``scope="leaf"`` a compressor that needs a statistic
        of ``v`` before selecting (a count, a norm) reduces over ``|negated(...)|``, so XLA does
        not share one materialised ``v`` between the statistic and the select. On XLA:CPU every
        materialised full-size temporary is a write to freshly allocated memory, the dominant
        cost of these steps (see ``benchmarks/bench_error_feedback.py``).

        Returns:
          ``(compressed tree, flags)``: ``flags`` has one entry per leaf, a bool scalar that is
          False when the compressor's statistic over the whole leaf met a NaN in ``v`` (error
          feedback then need not read the operands again to find one), or None where no
          statistic read every entry.
        """
        leaves_by_operand = [jax.tree.leaves(tree) for tree in operands]
        if self.scope != "leaf":
            combined = jax.tree.map(combine, *operands)
            return self.tree_compress(combined, rng_key), [None] * len(leaves_by_operand[0])
        self._check_tree_key(rng_key)
        for tree in operands:
            check_floating_tree(tree, "tree")
        treedef = jax.tree.structure(operands[0])
        out, flags = [], []
        for i, leaves in enumerate(zip(*leaves_by_operand, strict=True)):
            leaves = [jnp.asarray(leaf) for leaf in leaves]
            shape = leaves[0].shape
            if leaves[0].size == 0:
                out.append(combine(*leaves))
                flags.append(None)
                continue
            key = None if self.deterministic else jax.random.fold_in(rng_key, i)
            flat = [leaf.reshape(-1) for leaf in leaves]
            compressed, flag = self._compress_fused(combine, negated, flat, key)
            out.append(compressed.reshape(shape))
            flags.append(flag)
        return jax.tree.unflatten(treedef, out), flags

    def _compress_fused(
        self, combine: Any, negated: Any, operands: list[jax.Array], rng_key: jax.Array | None
    ) -> tuple[jax.Array, jax.Array | None]:
        """One flat leaf of :meth:`_tree_compress_fused`; this default materialises ``v``."""
        del negated
        return self.compress(combine(*operands), rng_key), None

    def _dims(self, tree: Any) -> list[int]:
        sizes = [int(np.prod(np.shape(leaf))) for leaf in jax.tree.leaves(tree)]
        if self.scope == "global":
            return [sum(sizes)] if sum(sizes) > 0 else []
        return [s for s in sizes if s > 0]

    def tree_bits(self, tree: Any) -> int:
        """Bits of one compressed message of ``tree`` (:meth:`Compressor.bits` over messages).

        Examples:
          >>> import jax.numpy as jnp
          >>> from jaxlab.optim import top_k
          >>> top_k(1).tree_bits({"a": jnp.zeros(4), "b": jnp.zeros(8)})  # (32 + 2) + (32 + 3)
          69
        """
        return int(sum(self.bits(d) for d in self._dims(tree)))

    def tree_alpha(self, tree: Any) -> float:
        """Contraction parameter of the whole-tree message: the smallest over its messages.

        Examples:
          >>> import jax.numpy as jnp
          >>> from jaxlab.optim import top_k
          >>> top_k(1).tree_alpha({"a": jnp.zeros(4), "b": jnp.zeros(8)})
          0.125
        """
        dims = self._dims(tree)
        if not dims:
            return 1.0
        return float(min(self.alpha(d) for d in dims))


# ------------------------------------------------------------------------------------------------
# The operators.


@dataclasses.dataclass(frozen=True, kw_only=True, repr=False)
class _Identity(Compressor):
    name: ClassVar[str] = "identity"

    def compress(self, v, rng_key=None):
        return _check_vector(v)

    def alpha(self, dim):
        return 1.0

    def bits(self, dim):
        return FLOAT_BITS * int(dim)


@dataclasses.dataclass(frozen=True, kw_only=True, repr=False)
class _TopK(Compressor):
    name: ClassVar[str] = "top_k"

    k: int | None = None
    ratio: float | None = None

    def __post_init__(self):
        super().__post_init__()
        _check_k_ratio(self)

    def compress(self, v, rng_key=None):
        v = _check_vector(v)
        k = _k_from(self.k, self.ratio, v.shape[0])
        # lax.top_k breaks ties by the lower index, so |v| and |-v| select the same coordinates.
        _, index = jax.lax.top_k(jnp.abs(v), k)
        return jnp.zeros_like(v).at[index].set(v[index], unique_indices=True)

    def alpha(self, dim):
        return _k_from(self.k, self.ratio, dim) / dim

    def bits(self, dim):
        return _k_from(self.k, self.ratio, dim) * (FLOAT_BITS + _index_bits(dim))


@dataclasses.dataclass(frozen=True, kw_only=True, repr=False)
class _RandK(Compressor):
    name: ClassVar[str] = "rand_k"
    deterministic: ClassVar[bool] = False

    k: int | None = None
    ratio: float | None = None
    unbiased: bool = False

    def __post_init__(self):
        super().__post_init__()
        _check_k_ratio(self)
        check_bool(self.unbiased, "unbiased")

    def _kept(self, v, rng_key):
        _check_random_key(rng_key, "rand_k")
        k = _k_from(self.k, self.ratio, v.shape[0])
        index = jax.random.choice(rng_key, v.shape[0], (k,), replace=False)
        return k, index

    def unbiased_compress(self, v: jax.Array, rng_key: jax.Array) -> jax.Array:
        """The unbiased operator ``(d/k) * v`` on ``k`` uniformly drawn coordinates, 0 elsewhere.

        ``E[unbiased_compress(v)] = v`` with variance ``omega = d/k - 1``; :meth:`compress`
        returns this divided by ``1 + omega`` when ``unbiased=True``.
        """
        v = _check_vector(v)
        k, index = self._kept(v, rng_key)
        scale = v.shape[0] / k
        return jnp.zeros_like(v).at[index].set(v[index] * scale, unique_indices=True)

    def compress(self, v, rng_key=None):
        v = _check_vector(v)
        _check_random_key(rng_key, "rand_k")
        k, index = self._kept(v, rng_key)
        kept = v[index]
        if self.unbiased:
            # (d/k) then 1/(1 + omega) = k/d: the contractive result is rand-k itself, up to
            # the rounding of the two scalings.
            dim = v.shape[0]
            kept = kept * (dim / k) * (1.0 / (1.0 + (dim / k - 1.0)))
        return jnp.zeros_like(v).at[index].set(kept, unique_indices=True)

    def alpha(self, dim):
        return _k_from(self.k, self.ratio, dim) / dim

    def omega(self, dim):
        if not self.unbiased:
            return None
        return dim / _k_from(self.k, self.ratio, dim) - 1.0

    def bits(self, dim):
        return _k_from(self.k, self.ratio, dim) * (FLOAT_BITS + _index_bits(dim))


@dataclasses.dataclass(frozen=True, kw_only=True, repr=False)
class _ScaledSign(Compressor):
    name: ClassVar[str] = "scaled_sign"

    def compress(self, v, rng_key=None):
        v = _check_vector(v)
        acc = _accumulation_dtype(v.dtype)
        scale = (jnp.sum(jnp.abs(v), dtype=acc) / v.shape[0]).astype(v.dtype)
        return scale * jnp.sign(v)

    def _compress_fused(self, combine, negated, operands, rng_key):
        # The l1 norm reduces over |-v|, read from the operands (see _tree_compress_fused).
        v = combine(*operands)
        acc = _accumulation_dtype(v.dtype)
        l1 = jnp.sum(jnp.abs(negated(*operands)), dtype=acc)
        scale = (l1 / v.shape[0]).astype(v.dtype)
        return scale * jnp.sign(v), ~jnp.isnan(l1)

    def alpha(self, dim):
        # ||v||_1^2 / (d ||v||^2) >= 1/d, with equality at a coordinate vector.
        return 1.0 / dim

    def bits(self, dim):
        return int(dim) + FLOAT_BITS


@dataclasses.dataclass(frozen=True, kw_only=True, repr=False)
class _Natural(Compressor):
    name: ClassVar[str] = "natural_compression"
    deterministic: ClassVar[bool] = False

    def unbiased_compress(self, v: jax.Array, rng_key: jax.Array) -> jax.Array:
        """Horvath et al.'s natural compression: ``|v_j|`` rounded to a neighbouring power of 2.

        With ``2^e <= |v_j| < 2^(e+1)`` it returns ``sign(v_j) 2^(e+1)`` with probability
        ``|v_j| / 2^e - 1`` and ``sign(v_j) 2^e`` otherwise, so ``E = v`` and
        ``E ||C(v) - v||^2 <= ||v||^2 / 8``.
        """
        v = _check_vector(v)
        _check_random_key(rng_key, "natural_compression")
        work = jnp.float64 if v.dtype == jnp.float64 else jnp.float32
        a = jnp.abs(v).astype(work)
        mantissa, exponent = jnp.frexp(a)  # a = mantissa 2^exponent, mantissa in [0.5, 1)
        round_up = jax.random.uniform(rng_key, v.shape, work) < 2 * mantissa - 1
        magnitude = jnp.ldexp(jnp.where(round_up, 2.0, 1.0).astype(work), exponent - 1)
        return (jnp.sign(v).astype(work) * magnitude).astype(v.dtype)

    def compress(self, v, rng_key=None):
        v = _check_vector(v)
        work = jnp.float64 if v.dtype == jnp.float64 else jnp.float32
        q = self.unbiased_compress(v, rng_key).astype(work)
        return (q * (1.0 / (1.0 + _NATURAL_OMEGA))).astype(v.dtype)

    def alpha(self, dim):
        return 1.0 / (1.0 + _NATURAL_OMEGA)

    def omega(self, dim):
        return _NATURAL_OMEGA

    def bits(self, dim):
        return _NATURAL_BITS * int(dim)


@dataclasses.dataclass(frozen=True, kw_only=True, repr=False)
class _Rotation(Compressor):
    name: ClassVar[str] = "rotation_compressor"

    epsilon: float = 0.0
    theta: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        _normalize(self, "epsilon", check_in_range(self.epsilon, "epsilon", 0.0, 1.0))
        _normalize(self, "theta", check_real(self.theta, "theta"))  # an angle in radians

    def compress(self, v, rng_key=None):
        v = _check_vector(v)
        if v.shape[0] % 2:
            raise ValueError(
                f"rotation_compressor acts on 2-D blocks: the vector size must be even, "
                f"got {v.shape[0]}"
            )
        s = math.sqrt(self.epsilon)
        cos, sin = math.cos(self.theta), math.sin(self.theta)
        pairs = v.reshape(-1, 2)
        x, y = pairs[:, 0], pairs[:, 1]
        rotated = jnp.stack([cos * x - sin * y, sin * x + cos * y], axis=1)
        return (pairs - s * rotated).reshape(-1)

    def alpha(self, dim):
        return 1.0 - self.epsilon

    def bits(self, dim):
        return FLOAT_BITS * int(dim)


@dataclasses.dataclass(frozen=True, kw_only=True, repr=False)
class _BlockTopK(Compressor):
    name: ClassVar[str] = "block_top_k"

    k_per_block: int = 1
    block_size: int = 100

    def __post_init__(self):
        super().__post_init__()
        block_size = check_int(self.block_size, "block_size", minimum=1)
        _normalize(self, "block_size", block_size)
        k = check_int(self.k_per_block, "k_per_block", minimum=1, maximum=block_size)
        _normalize(self, "k_per_block", k)

    def compress(self, v, rng_key=None):
        v = _check_vector(v)
        dim, b, k = v.shape[0], self.block_size, self.k_per_block
        blocks = -(-dim // b)
        # Zero padding never displaces a nonzero entry, so the last, partial block keeps its
        # min(k, size) largest entries and the bound below still holds.
        padded = jnp.pad(v, (0, blocks * b - dim)) if blocks * b != dim else v
        rows = padded.reshape(blocks, b)
        magnitude = jnp.abs(rows)
        column = jax.lax.broadcasted_iota(jnp.int32, rows.shape, 1)
        if k <= _BLOCK_ITERATIVE_MAX_K:
            # k rounds of (row max, first column attaining it): plain reductions, which XLA on
            # CPU runs several times faster than argmax's variadic reduce or a row-wise top_k.
            # Taking the first maximum breaks ties by the lower index, like lax.top_k.
            keep = jnp.zeros(rows.shape, jnp.bool_)
            remaining = magnitude
            for _ in range(k):
                largest = jnp.max(remaining, axis=1, keepdims=True)
                first = jnp.min(jnp.where(remaining == largest, column, b), axis=1, keepdims=True)
                chosen = column == first
                keep = keep | chosen
                remaining = jnp.where(chosen, -1, remaining)  # magnitudes are >= 0
        else:
            _, index = jax.lax.top_k(magnitude, k)
            keep = jnp.zeros(rows.shape, jnp.bool_)
            for j in range(k):
                keep = keep | (column == index[:, j : j + 1])
        out = jnp.where(keep, rows, jnp.zeros((), v.dtype)).reshape(-1)
        return out[:dim] if blocks * b != dim else out

    def alpha(self, dim):
        return self.k_per_block / self.block_size

    def bits(self, dim):
        full, rest = divmod(int(dim), self.block_size)
        kept = full * self.k_per_block + min(self.k_per_block, rest)
        return kept * (FLOAT_BITS + _index_bits(min(self.block_size, dim)))


@dataclasses.dataclass(frozen=True, kw_only=True, repr=False)
class _ThresholdTopK(Compressor):
    name: ClassVar[str] = "threshold_top_k"
    # The sampled coordinates come from the key; the contraction bound holds for every key.
    deterministic: ClassVar[bool] = False

    k: int | None = None
    ratio: float | None = None
    sample_size: int = _THRESHOLD_SAMPLE_SIZE
    oversample: float = _THRESHOLD_OVERSAMPLE

    def __post_init__(self):
        super().__post_init__()
        _check_k_ratio(self)
        _normalize(self, "sample_size", check_int(self.sample_size, "sample_size", minimum=1))
        _normalize(self, "oversample", check_real(self.oversample, "oversample", minimum=1.0))

    def _nominal(self, dim: int) -> int:
        """The number of entries the threshold aims at, ``min(d, ceil(oversample k))``."""
        k = _k_from(self.k, self.ratio, dim)
        return min(int(dim), math.ceil(round(self.oversample * k, 6)))

    def threshold(self, v: jax.Array, rng_key: jax.Array) -> jax.Array:
        """The sampled threshold ``tau``: an order statistic of ``|v|`` on sampled coordinates.

        For ``d <= sample_size`` it is the exact ``min(d, ceil(oversample k))``-th largest
        ``|v_j|`` (no sampling, ``rng_key`` unused); otherwise the ``ceil(q s)``-th largest of
        ``|v|`` at ``s = sample_size`` coordinates drawn uniformly with replacement from
        ``rng_key``, ``q = oversample k / d`` (the ``1 - q`` sample quantile). ``tau`` is one
        of the ``|v_j|``, in ``v``'s dtype.
        """
        v = _check_vector(v)
        dim = v.shape[0]
        if dim <= self.sample_size:
            return _kth_largest(jnp.abs(v), self._nominal(dim))
        index = jax.random.randint(rng_key, (self.sample_size,), 0, dim)
        sample = jnp.abs(v.at[index].get(mode="promise_in_bounds"))
        return _kth_largest(sample, self._rank(dim))

    def compress(self, v, rng_key=None):
        v = _check_vector(v)
        _check_random_key(rng_key, "threshold_top_k")
        dim = v.shape[0]
        k = _k_from(self.k, self.ratio, dim)
        tau = self.threshold(v, rng_key)
        if dim <= self.sample_size:
            # tau is the exact r-th largest magnitude, r >= k: at least k entries pass.
            return jnp.where(jnp.abs(v) >= tau, v, jnp.zeros((), v.dtype))
        return _keep_top_set(v, tau, k)

    def _compress_fused(self, combine, negated, operands, rng_key):
        dim = operands[0].shape[0]
        if dim <= self.sample_size:
            return super()._compress_fused(combine, negated, operands, rng_key)
        _check_random_key(rng_key, "threshold_top_k")
        k = _k_from(self.k, self.ratio, dim)
        # The sample gathers from the operands: the same coordinates as threshold(v).
        index = jax.random.randint(rng_key, (self.sample_size,), 0, dim)
        sample = combine(*[op.at[index].get(mode="promise_in_bounds") for op in operands])
        tau = _kth_largest(jnp.abs(sample), self._rank(dim)).astype(sample.dtype)
        # The count over |-v| (a different expression from the select's v, see
        # _tree_compress_fused); the exact count and fallback read the operands.
        fast, s = _sign_count_proves(jnp.abs(negated(*operands)), tau, k)
        t = jax.lax.cond(
            fast, lambda *ops: tau, lambda *ops: _exact(combine(*ops), tau, k), *operands
        )
        v = combine(*operands)
        keep = (v >= t) | (v <= -t)
        return jnp.where(keep, v, jnp.zeros((), v.dtype)), ~jnp.isnan(s)

    def _rank(self, dim: int) -> int:
        """The order statistic of the sample that :meth:`threshold` reads (``dim > s``)."""
        fraction = self._nominal(dim) / dim
        return min(self.sample_size, max(1, math.ceil(round(fraction * self.sample_size, 6))))

    def alpha(self, dim):
        return _k_from(self.k, self.ratio, dim) / dim

    def bits(self, dim):
        return self._nominal(dim) * (FLOAT_BITS + _index_bits(dim))


def _count_at_least(magnitude: jax.Array, threshold: jax.Array) -> jax.Array:
    """``#{i : magnitude_i >= threshold}``: float32 (exact up to 2^24 entries), int32 beyond."""
    at_least = magnitude >= threshold
    if magnitude.shape[0] <= _FLOAT_COUNT_MAX:
        # On CPU XLA reduces a float32 sum in one vectorised pass; an int32 sum goes through a
        # cascade of reduce-windows over a materialised int32 copy (no faster in our timings).
        return jnp.sum(jnp.where(at_least, 1.0, 0.0).astype(jnp.float32))
    return jnp.sum(at_least, dtype=jnp.int32)


def _kth_largest(magnitude: jax.Array, rank: int) -> jax.Array:
    """The ``rank``-th largest entry of a non-negative float vector, by a radix search.

    Non-negative floats order like their bit patterns read as integers, so the answer, the
    largest ``t`` with ``#{x_i >= t} >= rank``, is found one bit at a time from the top: a bit
    stays set when at least ``rank`` entries lie at or above the prefix with it set (a prefix
    that reads as NaN counts nothing). That is ``bits - 1`` counting passes: on CPU several
    times faster than ``lax.top_k`` or a sort of a few thousand entries, and about 10x faster
    than ``lax.top_k`` of 1% of 2.5M entries.
    """
    bits = jnp.finfo(magnitude.dtype).bits
    itype = {16: jnp.int16, 32: jnp.int32, 64: jnp.int64}[bits]

    def step(i, prefix):
        candidate = prefix | jnp.left_shift(jnp.ones((), itype), (bits - 2 - i).astype(itype))
        value = jax.lax.bitcast_convert_type(candidate, magnitude.dtype)
        return jnp.where(_count_at_least(magnitude, value) >= rank, candidate, prefix)

    prefix = jax.lax.fori_loop(0, bits - 1, step, jnp.zeros((), itype))
    # XLA on CPU compares with subnormals treated as zero, which would leave the search at the
    # largest subnormal where the answer is 0: subnormal results are read as 0 (a threshold
    # that keeps at least as much, so the callers' top-set arguments are unchanged).
    smallest_normal = jax.lax.bitcast_convert_type(
        jnp.asarray(jnp.finfo(magnitude.dtype).tiny, magnitude.dtype), itype
    )
    prefix = jnp.where(prefix < smallest_normal, jnp.zeros((), itype), prefix)
    return jax.lax.bitcast_convert_type(prefix, magnitude.dtype)


def _sign_count_proves(magnitude: jax.Array, tau: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
    """Whether one arithmetic pass proves ``#{magnitude_j >= tau} >= k``, and the pass's sum.

    ``s = sum_j sign(magnitude_j - tau) = #{> tau} - #{< tau}``, so ``(s + d)/2 = #{> tau} +
    #{= tau}/2 <= #{>= tau}`` and ``s + d >= 2k`` proves the claim. Signs sum exactly in float32
    up to 2^24 entries; a NaN entry makes ``s`` NaN (not proven). An arithmetic producer: on
    XLA:CPU a compare/select would be materialised as a full-size temporary before its sum.
    ``tau = 0`` always keeps every entry. Between 0 and ``_SIGN_COUNT_MIN_THRESHOLD`` the
    difference of two distinct magnitudes could flush to zero, so nothing is proven there.
    """
    dim = magnitude.shape[0]
    work = _accumulation_dtype(magnitude.dtype)
    s = jnp.sum(jnp.sign(magnitude.astype(work) - tau.astype(work)), dtype=work)
    if dim > _FLOAT_COUNT_MAX:  # the float32 sum is no longer exact
        return jnp.asarray(False), s
    proven = (s + dim >= 2 * k) & (tau >= _SIGN_COUNT_MIN_THRESHOLD)
    return jnp.isfinite(s) & ((tau == 0) | proven), s


def _exact(v: jax.Array, tau: jax.Array, k: int) -> jax.Array:
    """``tau`` if ``#{|v_j| >= tau} >= k`` (counted exactly), else the exact k-th largest |v_j|."""
    magnitude = jnp.abs(v)
    enough = _count_at_least(magnitude, tau) >= k
    return jax.lax.cond(enough, lambda: tau, lambda: _kth_largest(magnitude, k))


def _keep_top_set(v: jax.Array, tau: jax.Array, k: int) -> jax.Array:
    """``v`` on ``{|v_i| >= tau}`` if that set has ``>= k`` entries, else on ``{|v_i| >= t}``.

    ``t`` is the exact ``k``-th largest ``|v_i|`` (:func:`_kth_largest` over the whole
    vector), computed under ``lax.cond`` only when the sampled threshold keeps too few entries;
    ``{|v_i| >= t}`` is ``lax.top_k``'s set when no other entry ties with the ``k``-th, and a
    larger top-set otherwise. The common case is settled by :func:`_sign_count_proves` (one
    arithmetic pass); the exact count and the fallback run under the ``cond`` only when it
    proves nothing. Only the scalar threshold crosses the ``cond``, so the final select stays
    one elementwise pass fused with its consumers (an array result would be materialised).
    """
    tau = tau.astype(v.dtype)
    proven, _ = _sign_count_proves(jnp.abs(v), tau, k)
    t = jax.lax.cond(proven, lambda: tau, lambda: _exact(v, tau, k))
    # |v| >= t without an abs that XLA would share with the count and so materialise.
    keep = (v >= t) | (v <= -t)
    return jnp.where(keep, v, jnp.zeros((), v.dtype))


# ------------------------------------------------------------------------------------------------
# Factories.


def identity(*, scope: str = "leaf") -> Compressor:
    """The identity compressor, ``C(v) = v`` (no compression, ``alpha = 1``).

    With it, error feedback and EF21 reduce to plain gradient descent. A message of a
    ``d``-vector costs ``32 d`` bits.

    Args:
      scope: ``"leaf"`` (each leaf on its own) or ``"global"`` (the concatenated tree).

    Returns:
      The :class:`Compressor`.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxlab.optim import identity
      >>> identity().compress(jnp.array([1.0, -2.0]))
      Array([ 1., -2.], dtype=float32)
      >>> identity().alpha(2), identity().bits(2)
      (1.0, 64)

    References:
      D. Berg Thomsen, A. Taylor, A. Dieuleveut, "A Tight Theory of Error Feedback Algorithms in
      Distributed Optimization", ICML 2026 (arXiv 2605.31594).
    """
    return _Identity(scope=scope)


def top_k(k: int | None = None, *, ratio: float | None = None, scope: str = "leaf") -> Compressor:
    """Top-k: keeps the ``k`` entries of largest magnitude, zeroes the rest.

    Deterministic and contractive with ``alpha = k/d``:
    ``||C(v) - v||^2 = sum of the d - k smallest v_j^2 <= (1 - k/d) ||v||^2``, with equality when
    all ``|v_j|`` are equal. Ties go to the lower index (``jax.lax.top_k``), so ``C(-v) = -C(v)``.
    A message costs ``k (32 + ceil(log2 d))`` bits (values and indices).

    Exact selection is a partial sort, not a linear pass: on XLA:CPU ``jax.lax.top_k`` lowers
    to the ``TopK`` custom call over all ``d`` magnitudes (several ms for 2.5M entries) and the
    kept values are scattered into a zero vector, both full-size temporaries
    (``jax.lax.approx_max_k`` lowers to the same call after a partial reduction).
    ``benchmarks/bench_error_feedback.py`` measures it against its memory-traffic floor. For
    speed use the linear-time :func:`threshold_top_k` (the same ``k/d`` contraction, a sampled
    threshold and one counting pass) or :func:`block_top_k`.

    Args:
      k: number of kept entries, an int in ``(0, d]`` (checked against each vector's size ``d``
        when compressing). Exactly one of ``k`` and ``ratio``.
      ratio: fraction of kept entries in ``(0, 1]``; a ``d``-vector keeps
        ``k = max(1, ceil(ratio d))``.
      scope: ``"leaf"`` (each leaf on its own) or ``"global"`` (the concatenated tree).

    Returns:
      The :class:`Compressor`.

    Raises:
      ValueError: both or neither of ``k`` and ``ratio``; ``k <= 0`` (or ``k > d`` when
        compressing a ``d``-vector); ``ratio`` outside ``(0, 1]``; an unknown ``scope``.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxlab.optim import top_k
      >>> top_k(2).compress(jnp.array([3.0, -1.0, -4.0, 0.5]))
      Array([ 3.,  0., -4.,  0.], dtype=float32)
      >>> top_k(ratio=0.01).alpha(1000)
      0.01

    References:
      D. Berg Thomsen, A. Taylor, A. Dieuleveut, "A Tight Theory of Error Feedback Algorithms in
      Distributed Optimization", ICML 2026 (arXiv 2605.31594); S. Stich, J.-B. Cordonnier,
      M. Jaggi, "Sparsified SGD with memory", NeurIPS 2018.
    """
    return _TopK(k=k, ratio=ratio, scope=scope)


def rand_k(
    k: int | None = None,
    *,
    ratio: float | None = None,
    unbiased: bool = False,
    scope: str = "leaf",
) -> Compressor:
    """Rand-k: keeps ``k`` coordinates drawn uniformly without replacement, zeroes the rest.

    Contractive in expectation only: ``E ||C(v) - v||^2 = (1 - k/d) ||v||^2`` (``alpha = k/d``).
    With ``unbiased=True`` the kept entries are first scaled by ``d/k`` (the unbiased operator,
    ``E = v``, variance ``omega = d/k - 1``, available as ``unbiased_compress``) and then rescaled
    by ``1/(1 + omega) = k/d``, which makes it contractive again; the two scalings cancel, so the
    result equals unscaled rand-k up to rounding (what changes is :meth:`Compressor.omega`). The
    same key selects the same coordinates for ``v`` and ``-v``, so ``C(-v) = -C(v)``. A message
    costs ``k (32 + ceil(log2 d))`` bits.

    Args:
      k: number of kept entries, an int in ``(0, d]``. Exactly one of ``k`` and ``ratio``.
      ratio: fraction of kept entries in ``(0, 1]``; ``k = max(1, ceil(ratio d))``.
      unbiased: report and offer the unbiased operator (see above).
      scope: ``"leaf"`` or ``"global"``.

    Returns:
      The :class:`Compressor` (random: pass a key).

    Raises:
      ValueError: as for :func:`top_k`.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.optim import rand_k
      >>> c = rand_k(2)
      >>> out = c.compress(jnp.arange(1.0, 5.0), jax.random.key(0))
      >>> int((out != 0).sum()), c.alpha(4), c.deterministic
      (2, 0.5, False)
      >>> rand_k(1, unbiased=True).omega(4)
      3.0

    References:
      S. Stich, J.-B. Cordonnier, M. Jaggi, "Sparsified SGD with memory", NeurIPS 2018;
      P. Richtarik, I. Sokolov, I. Fatkhullin, "EF21", NeurIPS 2021 (arXiv 2106.05203).
    """
    return _RandK(k=k, ratio=ratio, unbiased=unbiased, scope=scope)


def scaled_sign(*, scope: str = "leaf") -> Compressor:
    """Scaled sign: ``C(v) = (||v||_1 / d) sign(v)``.

    Deterministic; ``||C(v) - v||^2 = ||v||^2 - ||v||_1^2 / d`` when no entry is zero (smaller
    otherwise), so ``alpha = ||v||_1^2 / (d ||v||^2) >= 1/d``, and :meth:`Compressor.alpha` reports
    the guaranteed ``1/d``. Odd since ``sign`` is. A message costs ``d + 32`` bits (signs and the
    scale). The ``l1`` norm accumulates in float32 for bf16/f16 inputs.

    Args:
      scope: ``"leaf"`` or ``"global"``.

    Returns:
      The :class:`Compressor`.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxlab.optim import scaled_sign
      >>> scaled_sign().compress(jnp.array([3.0, -1.0]))
      Array([ 2., -2.], dtype=float32)

    References:
      S. P. Karimireddy, Q. Rebjock, S. Stich, M. Jaggi, "Error feedback fixes SignSGD and other
      gradient compression schemes", ICML 2019.
    """
    return _ScaledSign(scope=scope)


def natural_compression(*, scope: str = "leaf") -> Compressor:
    """Natural compression rescaled to be contractive: ``C(v) = C_nat(v) / (1 + 1/8)``.

    ``C_nat`` rounds each ``|v_j|`` with ``2^e <= |v_j| < 2^(e+1)`` to ``2^(e+1)`` with
    probability ``|v_j|/2^e - 1`` and to ``2^e`` otherwise, keeping the sign: unbiased with
    variance ``omega = 1/8`` (available as ``unbiased_compress``). Divided by ``1 + omega`` it is
    contractive in expectation with ``alpha = 8/9``. Odd with a shared key. A message costs 9 bits
    per entry (sign and 8-bit exponent).

    Args:
      scope: ``"leaf"`` or ``"global"``.

    Returns:
      The :class:`Compressor` (random: pass a key).

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.optim import natural_compression
      >>> c = natural_compression()
      >>> q = c.unbiased_compress(jnp.array([1.0, -4.0, 0.0]), jax.random.key(0))
      >>> q  # powers of two are kept exactly
      Array([ 1., -4.,  0.], dtype=float32)
      >>> round(c.alpha(3), 4), c.omega(3)
      (0.8889, 0.125)

    References:
      S. Horvath, C.-Y. Ho, L. Horvath, A. N. Sahu, M. Canini, P. Richtarik, "Natural
      compression for distributed deep learning", 2019 (arXiv 1905.10988).
    """
    return _Natural(scope=scope)


def rotation_compressor(epsilon: float, theta: float, *, scope: str = "leaf") -> Compressor:
    """The worst-case compressor of the tight analysis: ``C(v) = v - sqrt(epsilon) R_theta v``.

    ``R_theta`` rotates each consecutive pair ``(v_{2j}, v_{2j+1})`` by ``theta``, so
    ``||C(v) - v||^2 = epsilon ||v||^2`` exactly: deterministic, linear (hence odd), with
    ``alpha = 1 - epsilon`` attained with equality for every ``v``. Over ``theta`` it realises the
    worst case of error feedback on quadratics. The vector size must be even. A message is dense,
    ``32 d`` bits.

    Args:
      epsilon: the distortion, in ``[0, 1)``.
      theta: the rotation angle in radians (finite).
      scope: ``"leaf"`` or ``"global"``.

    Returns:
      The :class:`Compressor`.

    Raises:
      ValueError: ``epsilon`` outside ``[0, 1)``, a non-finite ``theta``, or (when compressing)
        an odd vector size.

    Examples:
      >>> import math
      >>> import jax.numpy as jnp
      >>> from jaxlab.optim import rotation_compressor
      >>> c = rotation_compressor(0.25, math.pi)  # R_pi = -I: C(v) = 1.5 v
      >>> c.compress(jnp.array([2.0, -2.0]))
      Array([ 3., -3.], dtype=float32)
      >>> c.alpha(2)
      0.75

    References:
      D. Berg Thomsen, A. Taylor, A. Dieuleveut, "A Tight Theory of Error Feedback Algorithms in
      Distributed Optimization", ICML 2026 (arXiv 2605.31594).
    """
    return _Rotation(epsilon=epsilon, theta=theta, scope=scope)


def block_top_k(k_per_block: int = 1, block_size: int = 100, *, scope: str = "leaf") -> Compressor:
    """Block top-k: exact top-``k_per_block`` inside each block of ``block_size`` entries.

    The vector is cut into consecutive blocks of ``b = block_size`` entries (the last one may be
    shorter) and each keeps its ``k = k_per_block`` entries of largest magnitude. Per block
    ``||C(v_B) - v_B||^2 <= (1 - k/b) ||v_B||^2`` (top-k of a ``b``-vector; a shorter last block,
    zero-padded to ``b``, loses no more), and summing over blocks gives the deterministic bound

        ||C(v) - v||^2 <= (1 - k/b) ||v||^2,     alpha = k / b,

    with equality when all ``|v_j|`` are equal. It keeps the same fraction as
    ``top_k(ratio=k/b)`` but selects in time linear in ``d``: ``k`` rounds of two row reductions
    (the block maximum, then the first entry attaining it) and elementwise passes, instead of
    exact top-k's partial sort over the whole vector (for ``k > 8`` a row-wise ``lax.top_k``
    is used). The price is a contraction that holds per block: exact top-k keeps the globally
    largest entries, so its error is never larger.
    Ties go to the lower index, so ``C(-v) = -C(v)``. A message costs
    ``(number kept) (32 + ceil(log2 b))`` bits: indices are sent within their block.

    Args:
      k_per_block: entries kept per block, an int in ``(0, block_size]``.
      block_size: entries per block, an int ``>= 1``.
      scope: ``"leaf"`` or ``"global"``.

    Returns:
      The :class:`Compressor`.

    Raises:
      ValueError: ``k_per_block`` outside ``(0, block_size]``, ``block_size < 1``, or an unknown
        ``scope``.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxlab.optim import block_top_k
      >>> c = block_top_k(1, 2)
      >>> c.compress(jnp.array([1.0, -3.0, 2.0, 0.5, 7.0]))
      Array([ 0., -3.,  2.,  0.,  7.], dtype=float32)
      >>> c.alpha(5)
      0.5

    References:
      D. Berg Thomsen, A. Taylor, A. Dieuleveut, "A Tight Theory of Error Feedback Algorithms in
      Distributed Optimization", ICML 2026 (arXiv 2605.31594) (any contractive compressor).
    """
    return _BlockTopK(k_per_block=k_per_block, block_size=block_size, scope=scope)


def threshold_top_k(
    k: int | None = None,
    *,
    ratio: float | None = None,
    sample_size: int = _THRESHOLD_SAMPLE_SIZE,
    oversample: float = _THRESHOLD_OVERSAMPLE,
    scope: str = "leaf",
) -> Compressor:
    """Sampled-threshold top-k: keeps every entry with ``|v_j| >= tau``, ``tau`` from a sample.

    ``tau`` estimates the ``1 - q`` quantile of ``|v|``, ``q = oversample k / d``: it is the
    ``ceil(q s)``-th largest ``|v_j|`` over ``s = sample_size`` coordinates drawn with
    replacement from the key (for ``d <= s``, the exact ``ceil(oversample k)``-th largest), found
    by a radix search over the bits of the sampled magnitudes (no sort). Then::

        m = #{j : |v_j| >= tau},     C(v) = v * 1[|v| >= tau],

    one counting pass and one elementwise select, in time linear in ``d``. The kept set is a
    top-set of ``|v|`` (everything at or above ``tau``, ties included), so when ``m >= k`` its
    mass is at least the top-``k`` mass, itself at least ``(k/d) ||v||^2``::

        ||C(v) - v||^2 <= (1 - k/d) ||v||^2     for every v and every key,

    ``alpha = k/d`` as for :func:`top_k`. When the sample overestimates ``tau`` (``m < k``) the
    operator falls back, under ``jax.lax.cond``, to the exact ``k``-th largest magnitude ``t``
    (a radix search over the whole vector, about 10x faster on CPU than ``jax.lax.top_k``) and
    keeps ``{|v_j| >= t}``: exactly top-``k`` when no other entry ties with the ``k``-th, a
    larger top-set otherwise. So the bound is deterministic. ``oversample`` and
    ``sample_size`` trade message size and sampling cost for the fallback's probability: for a
    continuous ``|v|`` the fraction above ``tau`` is ``Beta(r, s - r + 1)``-distributed,
    ``r = ceil(q s)``, so ``P(m < k)`` is that Beta's CDF at ``k/d``. At ``k/d = 1%``:
    ``s = 4096, oversample = 1.25`` gives 5.3% (measured 4.8% over 4000 keys on a Gaussian
    2.5M-vector), ``4096, 1.5`` gives 0.12% (measured 0.05%), the defaults ``8192, 1.5`` give
    1.3e-5 and ``16384, 1.5`` 1e-9. Under ``jax.vmap`` the ``cond`` becomes a select and both
    branches run.

    Inside :func:`jaxlab.optim.error_feedback` and :func:`jaxlab.optim.error_feedback_21`
    (``scope="leaf"``, ``d > sample_size``) the compressed vector ``e + u`` or ``g - e`` is never
    materialised: the sample gathers from the operands, one arithmetic reduction over them gives
    ``s = #{|v_j| > tau} - #{|v_j| < tau}``, and ``(s + d)/2 <= m`` settles the common case
    ``m >= k``; otherwise the exact count and fallback run, reading the operands. The message is
    the same, bit for bit; a step costs about one extra read of the operands over the update
    itself (``benchmarks/bench_error_feedback.py``).

    The same key samples the same coordinates for ``v`` and ``-v`` and ``|.|`` is symmetric, so
    ``C(-v) = -C(v)``. Messages have a data-dependent number ``m`` of entries (about
    ``oversample k`` for a continuous ``|v|``, 5% to 95% range ``[1.3k, 1.7k]`` with the defaults at
    ``k/d = 1%``; ``k`` or a few more after a fallback; up to ``d`` when many ``|v_j|`` tie at
    ``tau``, e.g. all equal); :meth:`Compressor.bits` is a static int and reports the nominal
    ``ceil(oversample k) (32 + ceil(log2 d))``, which error feedback's bit counters use: an
    approximation of the bits sent, not a bound.

    Args:
      k: the guaranteed number of kept entries, an int in ``(0, d]``. Exactly one of ``k``
        and ``ratio``.
      ratio: fraction in ``(0, 1]``; a ``d``-vector has ``k = max(1, ceil(ratio d))``.
      sample_size: number of sampled coordinates ``s``, an int ``>= 1`` (the quantile of a
        vector with ``d <= s`` entries is computed exactly, without sampling).
      oversample: the threshold aims at ``oversample k`` entries, a number in ``[1, inf)``.
      scope: ``"leaf"`` or ``"global"``.

    Returns:
      The :class:`Compressor` (random: pass a key).

    Raises:
      ValueError: as for :func:`top_k`; ``sample_size < 1``; ``oversample`` outside
        ``[1, inf)``.
      TypeError: a non-int ``k``/``sample_size``, a non-number ``ratio``/``oversample``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.optim import threshold_top_k
      >>> c = threshold_top_k(2, oversample=1.0)
      >>> c.compress(jnp.array([3.0, -1.0, -4.0, 0.5]), jax.random.key(0))  # d <= sample_size
      Array([ 3.,  0., -4.,  0.], dtype=float32)
      >>> v = jax.random.normal(jax.random.key(1), (100_000,))
      >>> out = threshold_top_k(ratio=0.01).compress(v, jax.random.key(2))
      >>> 1000 <= int((out != 0).sum()) <= 2000, threshold_top_k(ratio=0.01).alpha(100_000)
      (True, 0.01)

    References:
      D. Berg Thomsen, A. Taylor, A. Dieuleveut, "A Tight Theory of Error Feedback Algorithms in
      Distributed Optimization", ICML 2026 (arXiv 2605.31594); Y. Lin, S. Han, H. Mao, Y. Wang,
      W. J. Dally, "Deep gradient compression", ICLR 2018 (thresholds estimated on a sample).
    """
    return _ThresholdTopK(
        k=k, ratio=ratio, sample_size=sample_size, oversample=oversample, scope=scope
    )
