"""SimpleNorm and SimpleGPT: normalize the output of every linear map (Chen et al. 2026).

:class:`SimpleNorm` is a bias-free linear map followed by a norm, ``Ψ(x) = γ ⊙ u / rms(u)``
with ``u = Wx`` and the mean square taken in float32. :class:`SimpleGPT` is a decoder-only
transformer whose three placements share one code path:

* ``"simple"``: every linear map of a block is a SimpleNorm (q, k, v over the whole projected
  vector, RoPE after the norm; the output projection; each FFN map), there is no pre-norm;
* ``"pre"``: PreNorm Llama, ``h ← h + Attn(RMSNorm(h))``, ``h ← h + FFN(RMSNorm(h))``;
* ``"pre_qk"``: PreNorm plus whole-vector RMSNorms on q and k before RoPE.

All three end in a final RMSNorm and an untied head; logits are float32.

References:
  Chen, Qi, He, Ye, Xiao, "SimpleGPT: Improving GPT via A Simple Normalization Strategy",
  ICML 2026, arXiv 2602.01212.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.typing import ArrayLike

from jaxlab._src.validation import (
    check_array,
    check_bool,
    check_callable,
    check_choice,
    check_indices,
    check_int,
    check_last_axis,
    check_learning_rate,
    check_nonnegative,
    check_positive,
    check_positive_int,
)
from jaxlab.nn._moe import GATES

__all__ = [
    "GPTConfig",
    "SimpleGPT",
    "SimpleNorm",
    "depth_init_std",
    "ffn_hidden_size",
    "language_model_loss",
    "rotary_embedding",
    "simplegpt_optimizer",
    "simplegpt_schedule",
]

# The code's weight std and truncation: N(0, 0.02²) truncated at ±2 (absolute; effectively none).
_INIT_STD = 0.02
_INIT_CUTOFF = 2.0
_PLACEMENTS = ("simple", "pre", "pre_qk")
_FFNS = ("swiglu", "relu")
_NORMS = ("rms", "layer")


def truncated_normal_init(std: float, cutoff: float | None = None) -> Callable[..., jax.Array]:
    """``N(0, std²)`` truncated at ``±cutoff`` (absolute; default ``±2 std``), as an initializer."""
    bound = 2.0 * std if cutoff is None else cutoff

    def init(key: jax.Array, shape: tuple[int, ...], dtype: Any = jnp.float32) -> jax.Array:
        return std * jax.random.truncated_normal(key, -bound / std, bound / std, shape, dtype)

    return init


def depth_init_std(layer: int, num_layers: int, *, depth_init: bool = True) -> float:
    """Init std of the output maps of layer ``ℓ``: ``0.02/√(2(ℓ+1))`` (``0.02/√(2L)`` without).

    The SimpleGPT code's depth-scaled initialisation of each block's last projections (attention
    output and FFN ``w2``); without ``depth_init`` every layer uses the GPT-2 ``0.02/√(2L)``.

    Args:
      layer: ``ℓ``, 0-based.
      num_layers: ``L``.
      depth_init: scale with the layer index (True) or with the depth ``L``.

    Returns:
      The std as a float.

    Examples:
      >>> round(depth_init_std(0, 4), 6), round(depth_init_std(3, 4, depth_init=False), 6)
      (0.014142, 0.007071)

    References:
      Chen et al., "SimpleGPT: Improving GPT via A Simple Normalization Strategy", ICML 2026.
    """
    num_layers = check_positive_int(num_layers, "num_layers")
    layer = check_int(layer, "layer", minimum=0, maximum=num_layers - 1)
    depth_init = check_bool(depth_init, "depth_init")
    return _INIT_STD / math.sqrt(2.0 * ((layer + 1) if depth_init else num_layers))


class _Norm(nnx.Module):
    """RMSNorm (or bias-free LayerNorm) over the last axis, statistics in float32.

    With ``num_groups > 1`` the last axis is cut into that many equal contiguous segments
    (attention heads) and each is normalized on its own; the gain always has ``features`` entries.
    """

    def __init__(
        self, features: int, *, kind: str = "rms", epsilon: float = 1e-5, num_groups: int = 1
    ):
        check_choice(kind, "norm", _NORMS)
        if features % num_groups:
            raise ValueError(f"num_groups={num_groups} must divide features={features}")
        self.features, self.kind, self.epsilon, self.num_groups = (
            features,
            kind,
            epsilon,
            num_groups,
        )
        self.scale = nnx.Param(jnp.ones((features,), jnp.float32))

    def __call__(self, u: jax.Array) -> jax.Array:
        # Statistics in at least float32 (bf16 inputs are upcast; float64 stays float64).
        compute = jnp.promote_types(u.dtype, jnp.float32)
        z = u.astype(compute)
        # Split into groups only when there are several: a `(..., 1, d)` view of one group made
        # XLA:CPU copy `u` and run each row reduction about 10x slower (forward and backward),
        # which was most of SimpleGPT's step-time gap to PreNorm (benchmarks/bench_simplegpt.py).
        if self.num_groups > 1:
            z = jnp.reshape(z, (*u.shape[:-1], self.num_groups, -1))
        if self.kind == "layer":
            z = z - jnp.mean(z, axis=-1, keepdims=True)
        ms = jnp.mean(z * z, axis=-1, keepdims=True)
        z = jnp.reshape(z * jax.lax.rsqrt(ms + self.epsilon), u.shape).astype(u.dtype)
        gain = jnp.reshape(self.scale[...].astype(u.dtype), (1,) * (u.ndim - 1) + (-1,))
        return z * gain


class _Linear(nnx.Module):
    """Bias-free ``x @ W`` with ``W`` of shape ``(in, out)``."""

    def __init__(self, in_features: int, out_features: int, *, kernel_init, rngs: nnx.Rngs):
        self.kernel = nnx.Param(kernel_init(rngs.params(), (in_features, out_features)))

    def __call__(self, x: jax.Array) -> jax.Array:
        return x @ self.kernel[...].astype(x.dtype)


class SimpleNorm(nnx.Module):
    """A bias-free linear map followed by a norm: ``Ψ(x) = γ ⊙ Wx / √(mean((Wx)²) + ε)``.

    For ``x ∈ ℝ^m`` and ``W ∈ ℝ^{d×m}``, ``u = Wx`` and ``Ψ(x) = γ ⊙ u/√(mean_j u_j² + ε)`` with
    the gain ``γ ∈ ℝ^d`` initialized to 1. The mean square is computed in float32 and the result
    cast back to the input dtype before multiplying by ``γ``. With ``ε = 0`` and ``γ = 1``,
    ``‖Ψ(x)‖₂ = √d``, and ``Ψ`` is invariant to ``W ↦ cW`` (``c > 0``), hence
    ``⟨∂L/∂W, W⟩ = 0``; with ``ε > 0``, ``RMS(Ψ(x)) = √(ms/(ms + ε))``. ``norm="layer"``
    subtracts the mean first (bias-free LayerNorm). ``num_groups > 1`` normalizes each of that
    many equal contiguous segments of ``u`` on its own (per-head q/k norm).

    Args:
      in_features: ``m``.
      out_features: ``d``.
      norm: ``"rms"`` (default) or ``"layer"``.
      epsilon: ``ε >= 0`` (the paper's code uses 1e-5).
      num_groups: segments normalized separately (1: the whole vector).
      kernel_init: ``(key, shape) -> W`` with ``shape = (in, out)``; default ``N(0, 0.02²)``
        truncated at ``±2`` (absolute), the paper code's init for ``W_q, W_k, W_v, W_1``.
      rngs: ``nnx.Rngs`` with a ``params`` stream.

    Attributes:
      linear.kernel: ``W`` stored as ``(in, out)`` (``Ψ(x) = norm(x @ kernel)``).
      norm.scale: ``γ``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from flax import nnx
      >>> layer = SimpleNorm(8, 16, rngs=nnx.Rngs(0))
      >>> y = layer(jax.random.normal(jax.random.key(1), (4, 8)))
      >>> rms = jnp.sqrt(jnp.mean(y**2, axis=-1))  # sqrt(ms/(ms + 1e-5)), ms ≈ 8·0.02² here
      >>> y.shape, bool(jnp.all((rms > 0.99) & (rms <= 1.0)))
      ((4, 16), True)

    References:
      Chen et al., "SimpleGPT: Improving GPT via A Simple Normalization Strategy", ICML 2026.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        *,
        norm: str = "rms",
        epsilon: float = 1e-5,
        num_groups: int = 1,
        kernel_init: Callable[..., jax.Array] | None = None,
        rngs: nnx.Rngs,
    ):
        in_features = check_positive_int(in_features, "in_features")
        out_features = check_positive_int(out_features, "out_features")
        num_groups = check_positive_int(num_groups, "num_groups")
        check_nonnegative(epsilon, "epsilon")
        check_callable(kernel_init, "kernel_init", allow_none=True)
        kernel_init = kernel_init or truncated_normal_init(_INIT_STD, _INIT_CUTOFF)
        self.in_features, self.out_features = in_features, out_features
        self.linear = _Linear(in_features, out_features, kernel_init=kernel_init, rngs=rngs)
        self.norm = _Norm(out_features, kind=norm, epsilon=epsilon, num_groups=num_groups)

    def __call__(self, x: jax.Array) -> jax.Array:
        # Floating only: the bias-free map casts its kernel to x's dtype.
        x = check_array(x, "x", kind="floating")
        check_last_axis(x, self.in_features, "x", "in_features")
        return self.norm(self.linear(x))


@dataclasses.dataclass(frozen=True)
class GPTConfig:
    """Sizes and placement of a :class:`SimpleGPT` (validated on construction).

    ``head_dim = d_model // num_heads``; the FFN width is :func:`ffn_hidden_size`. ``max_len`` is
    keyword-only and bounds the sequence length (the RoPE positional range).

    Attributes:
      vocab_size: ``V``.
      d_model: residual width ``d``.
      num_layers: ``L``.
      num_heads: query heads ``H`` (must divide ``d_model``; ``head_dim`` must be even for RoPE).
      num_kv_heads: key/value heads (grouped-query attention; must divide ``num_heads``);
        None: ``num_heads``.
      ffn_multiplier: the width multiplier ``mult`` of :func:`ffn_hidden_size`.
      multiple_of: the FFN width is rounded up to a multiple of this (256 at scale, 32 tiny).
      max_len: longest sequence accepted.
      rope_theta: RoPE base ``θ``.
      norm_placement: ``"simple"`` (SimpleGPT), ``"pre"`` (PreNorm Llama) or ``"pre_qk"``
        (PreNorm + whole-vector QK norm).
      qk_norm_per_head: normalize q and k per head instead of over the whole vector.
      depth_init: ``W_o, W_2, W_3`` std ``0.02/√(2(ℓ+1))`` (else ``0.02/√(2L)``).
      ffn: ``"swiglu"`` (``Ψ_2(SiLU(Ψ_1 h) ⊙ Ψ_3 h)``) or ``"relu"`` (``Ψ_2(ReLU(Ψ_1 h))``).
      epsilon: ε of every norm.
      num_experts: 0 for a dense FFN; otherwise the FFN is a ``jaxlab.nn.MixtureOfExperts``
        of that many experts of width :func:`ffn_hidden_size` (its own activation; ``ffn`` then
        does not apply).
      experts_top_k: experts per token.
      moe_gate: the MoE gate name.
      moe_capacity_factor: MoE capacity factor (None: no capacity limit).
      moe_aux_weight: weight of the summed load-balancing loss in :func:`language_model_loss`.

    Examples:
      >>> config = GPTConfig(256, 64, 2, 4, max_len=64, multiple_of=32)
      >>> config.head_dim, ffn_hidden_size(config)
      (16, 192)
      >>> GPTConfig(256, 64, 2, 3, max_len=64)
      Traceback (most recent call last):
      ...
      ValueError: num_heads=3 must divide d_model=64
    """

    vocab_size: int
    d_model: int
    num_layers: int
    num_heads: int
    num_kv_heads: int | None = None
    ffn_multiplier: float = 1.0
    multiple_of: int = 256
    max_len: int = dataclasses.field(kw_only=True)
    rope_theta: float = 1e4
    norm_placement: str = "simple"
    qk_norm_per_head: bool = False
    depth_init: bool = True
    ffn: str = "swiglu"
    epsilon: float = 1e-5
    num_experts: int = 0
    experts_top_k: int = 2
    moe_gate: str = "softmax_topk"
    moe_capacity_factor: float | None = None
    moe_aux_weight: float = 1e-2

    def __post_init__(self):
        for name in ("vocab_size", "d_model", "num_layers", "num_heads", "multiple_of", "max_len"):
            check_positive_int(getattr(self, name), name)
        if self.d_model % self.num_heads:
            raise ValueError(f"num_heads={self.num_heads} must divide d_model={self.d_model}")
        if (self.d_model // self.num_heads) % 2:
            raise ValueError(
                f"head_dim = d_model/num_heads = {self.d_model // self.num_heads} must be even "
                "(RoPE rotates pairs)"
            )
        if self.num_kv_heads is not None:
            check_positive_int(self.num_kv_heads, "num_kv_heads")
            if self.num_heads % self.num_kv_heads:
                raise ValueError(
                    f"num_kv_heads={self.num_kv_heads} must divide num_heads={self.num_heads}"
                )
        check_positive(self.ffn_multiplier, "ffn_multiplier")
        check_positive(self.rope_theta, "rope_theta")
        check_choice(self.norm_placement, "norm_placement", _PLACEMENTS)
        check_choice(self.ffn, "ffn", _FFNS)
        check_positive(self.epsilon, "epsilon")
        check_bool(self.qk_norm_per_head, "qk_norm_per_head")
        check_bool(self.depth_init, "depth_init")
        if ffn_hidden_size(self) < 1:
            raise ValueError(
                f"ffn_multiplier={self.ffn_multiplier} gives an FFN width of 0 at "
                f"d_model={self.d_model}"
            )
        check_int(self.num_experts, "num_experts", minimum=0)
        if self.num_experts > 0:
            check_positive_int(self.experts_top_k, "experts_top_k")
            if self.experts_top_k > self.num_experts:
                raise ValueError(
                    f"experts_top_k={self.experts_top_k} must be <= num_experts={self.num_experts}"
                )
        if not isinstance(self.moe_gate, str):
            raise TypeError(f"moe_gate must be a str, got {self.moe_gate!r}")
        check_choice(self.moe_gate, "moe_gate", GATES)
        if self.moe_capacity_factor is not None:
            check_positive(self.moe_capacity_factor, "moe_capacity_factor")
        check_nonnegative(self.moe_aux_weight, "moe_aux_weight")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads

    @property
    def kv_heads(self) -> int:
        return self.num_heads if self.num_kv_heads is None else self.num_kv_heads


def ffn_hidden_size(config: GPTConfig) -> int:
    """The FFN width ``d_ff`` of the paper code (Llama's rule).

    SwiGLU: ``h = ⌊mult·⌊8d/3⌋⌋`` (``⌊2·4d/3⌋`` first, then the multiplier, as in the code);
    ReLU: ``h = ⌊mult·4d⌋``; then ``d_ff = m·⌈h/m⌉`` with ``m = multiple_of``.

    Args:
      config: a :class:`GPTConfig`.

    Returns:
      ``d_ff``.

    Examples:
      >>> ffn_hidden_size(GPTConfig(256, 2048, 1, 16, max_len=8))
      5632
      >>> ffn_hidden_size(GPTConfig(256, 4096, 1, 32, max_len=8, ffn_multiplier=1.3))
      14336
      >>> ffn_hidden_size(GPTConfig(256, 128, 1, 4, max_len=8, multiple_of=32))
      352
    """
    if not isinstance(config, GPTConfig):
        raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
    base = (2 * 4 * config.d_model) // 3 if config.ffn == "swiglu" else 4 * config.d_model
    hidden = int(config.ffn_multiplier * base)
    m = config.multiple_of
    return m * ((hidden + m - 1) // m)


def rotary_embedding(x: jax.Array, theta: float) -> jax.Array:
    """Rotary embedding of ``x[B, T, H, d_h]`` at positions ``0..T-1`` (half-split pairs).

    Pairs ``(x_i, x_{i + d_h/2})`` at position ``t`` are rotated by the angle ``t·θ^(-i/(d_h/2))``
    (the Llama layout), so ``⟨rope(q)_t, rope(k)_s⟩`` depends on ``t − s`` only. Computed in at
    least float32, returned in ``x``'s dtype.

    Args:
      x: ``[B, T, H, d_h]`` with even ``d_h``.
      theta: the base ``θ`` (1e4 in Llama).

    Returns:
      The rotated array, same shape and dtype.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> x = jax.random.normal(jax.random.key(0), (1, 5, 2, 8))
      >>> y = rotary_embedding(x, 1e4)
      >>> bool(jnp.allclose(jnp.linalg.norm(y, axis=-1), jnp.linalg.norm(x, axis=-1)))  # rotation
      True

    References:
      Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding", 2021.
    """
    x = check_array(x, "x", kind="floating", ndim=4)
    if x.shape[-1] % 2:
        raise ValueError(f"x must have an even last axis d_h (RoPE rotates pairs), got {x.shape}")
    check_positive(theta, "theta")
    seq_len, head_dim = x.shape[1], x.shape[-1]
    half = head_dim // 2
    inv_freq = theta ** (-jnp.arange(half, dtype=jnp.float32) / half)
    angles = jnp.arange(seq_len, dtype=jnp.float32)[:, None] * inv_freq[None, :]  # (T, d_h/2)
    cos = jnp.cos(angles)[None, :, None, :]
    sin = jnp.sin(angles)[None, :, None, :]
    compute = jnp.promote_types(x.dtype, jnp.float32)
    x1, x2 = x[..., :half].astype(compute), x[..., half:].astype(compute)
    out = jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)
    return out.astype(x.dtype)


class _Attention(nnx.Module):
    def __init__(self, config: GPTConfig, layer: int, *, rngs: nnx.Rngs):
        d, h, kv, dh = config.d_model, config.num_heads, config.kv_heads, config.head_dim
        self.config = config
        w_init = truncated_normal_init(_INIT_STD, _INIT_CUTOFF)
        o_init = truncated_normal_init(
            depth_init_std(layer, config.num_layers, depth_init=config.depth_init), _INIT_CUTOFF
        )
        eps = config.epsilon
        q_groups = h if config.qk_norm_per_head else 1
        k_groups = kv if config.qk_norm_per_head else 1
        if config.norm_placement == "simple":
            self.q = SimpleNorm(d, h * dh, epsilon=eps, num_groups=q_groups, rngs=rngs)
            self.k = SimpleNorm(d, kv * dh, epsilon=eps, num_groups=k_groups, rngs=rngs)
            self.v = SimpleNorm(d, kv * dh, epsilon=eps, rngs=rngs)
            self.o = SimpleNorm(h * dh, d, epsilon=eps, kernel_init=o_init, rngs=rngs)
        else:
            self.q = _Linear(d, h * dh, kernel_init=w_init, rngs=rngs)
            self.k = _Linear(d, kv * dh, kernel_init=w_init, rngs=rngs)
            self.v = _Linear(d, kv * dh, kernel_init=w_init, rngs=rngs)
            self.o = _Linear(h * dh, d, kernel_init=o_init, rngs=rngs)
            if config.norm_placement == "pre_qk":
                self.q_norm = _Norm(h * dh, epsilon=eps, num_groups=q_groups)
                self.k_norm = _Norm(kv * dh, epsilon=eps, num_groups=k_groups)

    def __call__(self, x: jax.Array, record: dict | None, prefix: str) -> jax.Array:
        c = self.config
        b, t, _ = x.shape
        q, k, v = self.q(x), self.k(x), self.v(x)
        if c.norm_placement == "pre_qk":
            q, k = self.q_norm(q), self.k_norm(k)
        if record is not None:
            record.update({f"{prefix}.q": q, f"{prefix}.k": k, f"{prefix}.v": v})
        q = rotary_embedding(jnp.reshape(q, (b, t, c.num_heads, c.head_dim)), c.rope_theta)
        k = rotary_embedding(jnp.reshape(k, (b, t, c.kv_heads, c.head_dim)), c.rope_theta)
        v = jnp.reshape(v, (b, t, c.kv_heads, c.head_dim))
        groups = c.num_heads // c.kv_heads
        if groups > 1:  # grouped-query attention: each k/v head serves `groups` query heads
            k, v = jnp.repeat(k, groups, axis=2), jnp.repeat(v, groups, axis=2)
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) / math.sqrt(c.head_dim)
        causal = jnp.tril(jnp.ones((t, t), dtype=bool))
        scores = jnp.where(causal[None, None], scores, -jnp.inf)
        weights = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
        out = jnp.reshape(
            jnp.einsum("bhqk,bkhd->bqhd", weights, v), (b, t, c.num_heads * c.head_dim)
        )
        out = self.o(out)
        if record is not None:
            record[f"{prefix}.o"] = out
        return out


class _FeedForward(nnx.Module):
    def __init__(self, config: GPTConfig, layer: int, *, rngs: nnx.Rngs):
        d, d_ff, eps = config.d_model, ffn_hidden_size(config), config.epsilon
        self.swiglu = config.ffn == "swiglu"
        w_init = truncated_normal_init(_INIT_STD, _INIT_CUTOFF)
        deep_init = truncated_normal_init(
            depth_init_std(layer, config.num_layers, depth_init=config.depth_init), _INIT_CUTOFF
        )
        if config.norm_placement == "simple":
            make = lambda i, o, init: SimpleNorm(i, o, epsilon=eps, kernel_init=init, rngs=rngs)
        else:
            make = lambda i, o, init: _Linear(i, o, kernel_init=init, rngs=rngs)
        self.w1 = make(d, d_ff, w_init)
        self.w2 = make(d_ff, d, deep_init)
        if self.swiglu:
            self.w3 = make(d, d_ff, deep_init)

    def __call__(self, x: jax.Array, record: dict | None, prefix: str) -> jax.Array:
        a = self.w1(x)
        if self.swiglu:
            g = self.w3(x)
            if record is not None:
                record.update({f"{prefix}.w1": a, f"{prefix}.w3": g})
            hidden = jax.nn.silu(a) * g
        else:
            if record is not None:
                record[f"{prefix}.w1"] = a
            hidden = jax.nn.relu(a)
        out = self.w2(hidden)
        if record is not None:
            record[f"{prefix}.w2"] = out
        return out


class _MoEFeedForward(nnx.Module):
    """The MoE FFN sublayer; with the "simple" placement its output gets an RMSNorm (Ψ_2's)."""

    def __init__(self, config: GPTConfig, *, rngs: nnx.Rngs):
        from jaxlab.nn._moe import MixtureOfExperts  # written alongside; imported only when used

        self.moe = MixtureOfExperts(
            config.d_model,
            ffn_hidden_size(config),
            config.num_experts,
            config.experts_top_k,
            gate=config.moe_gate,
            capacity_factor=config.moe_capacity_factor,
            rngs=rngs,
        )
        self.simple = config.norm_placement == "simple"
        if self.simple:
            self.out_norm = _Norm(config.d_model, epsilon=config.epsilon)

    def __call__(self, x, record, prefix):
        y, stats = self.moe(x)
        if self.simple:
            y = self.out_norm(y)
        if record is not None:
            record[f"{prefix}.moe"] = y
        return y, stats.load_balancing_loss


class _Block(nnx.Module):
    def __init__(self, config: GPTConfig, layer: int, *, rngs: nnx.Rngs):
        self.pre = config.norm_placement != "simple"
        self.moe = config.num_experts > 0
        self.attention = _Attention(config, layer, rngs=rngs)
        if self.moe:
            self.ffn = _MoEFeedForward(config, rngs=rngs)
        else:
            self.ffn = _FeedForward(config, layer, rngs=rngs)
        if self.pre:
            self.attention_norm = _Norm(config.d_model, epsilon=config.epsilon)
            self.ffn_norm = _Norm(config.d_model, epsilon=config.epsilon)

    def __call__(self, h, record, prefix):
        x = self.attention_norm(h) if self.pre else h
        h = h + self.attention(x, record, f"{prefix}.attention")
        x = self.ffn_norm(h) if self.pre else h
        aux = jnp.zeros((), jnp.float32)
        if self.moe:
            f, aux = self.ffn(x, record, f"{prefix}.ffn")
        else:
            f = self.ffn(x, record, f"{prefix}.ffn")
        h = h + f
        if record is not None:
            record[f"{prefix}.residual"] = h
        return h, aux


class SimpleGPT(nnx.Module):
    """A decoder-only transformer; ``config.norm_placement`` picks SimpleGPT or a PreNorm baseline.

    With ``norm_placement="simple"`` (SimpleGPT) a block is, with ``Ψ`` a :class:`SimpleNorm`::

        q, k, v = Ψ_q(h), Ψ_k(h), Ψ_v(h)          # RMS over the whole H·d_h (n_kv·d_h) vector
        q, k = RoPE(q), RoPE(k)                   # after the norm
        h = h + Ψ_o(softmax(q kᵀ/√d_h + causal) v)
        h = h + Ψ_2(SiLU(Ψ_1(h)) ⊙ Ψ_3(h))        # ReLU: Ψ_2(ReLU(Ψ_1(h)))

    with no pre-norm; ``"pre"`` is PreNorm Llama (plain linear maps,
    ``h ← h + Attn(RMSNorm(h))``, ``h ← h + FFN(RMSNorm(h))``) and ``"pre_qk"`` adds RMSNorms on
    q and k before RoPE. All end in ``logits = RMSNorm(h) W_head`` (untied, float32). The
    embedding is not normalized or scaled.

    Initialization (the paper code's): ``W_q, W_k, W_v, W_1 ~ N(0, 0.02²)``; ``W_o, W_2, W_3``
    with std ``0.02/√(2(ℓ+1))`` at layer ``ℓ`` (``0.02/√(2L)`` if ``depth_init=False``); gains 1;
    embedding ``N(0, 1)``; head truncated normal with std ``d^{-1/2}`` at ``±3`` std. The initial
    loss is then about ``ln V + ½``.

    With ``config.num_experts > 0`` the FFN is ``jaxlab.nn._moe.MixtureOfExperts`` (applied to
    ``h`` and wrapped in an RMSNorm for ``"simple"``, applied to ``RMSNorm(h)`` for pre-norm);
    :meth:`loss_and_aux` returns the summed load-balancing loss, and
    :func:`language_model_loss` adds it with weight ``moe_aux_weight``.

    Tokens must be integers in ``[0, V)``: concrete ones outside it raise a ``ValueError``
    (naming ``tokens``, ``vocab_size`` and the range found); a traced one (under ``jit``) reads
    a NaN embedding row, so its logits and the loss are NaN (never a clamped or wrapped row),
    and :meth:`loss_and_aux` counts such ids in ``"out_of_vocabulary"``.

    Args:
      config: a :class:`GPTConfig`.
      rngs: ``nnx.Rngs`` with a ``params`` stream.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from flax import nnx
      >>> config = GPTConfig(256, 32, 2, 2, max_len=16, multiple_of=32)
      >>> model = SimpleGPT(config, rngs=nnx.Rngs(0))
      >>> tokens = jax.random.randint(jax.random.key(1), (2, 16), 0, 256)
      >>> logits = model(tokens)
      >>> logits.shape, logits.dtype
      ((2, 16, 256), dtype('float32'))
      >>> bool(abs(language_model_loss(model, tokens, tokens) - 6.04) < 0.3)  # ≈ ln 256 + 1/2
      True

    References:
      Chen et al., "SimpleGPT: Improving GPT via A Simple Normalization Strategy", ICML 2026
      (arXiv 2602.01212).
    """

    def __init__(self, config: GPTConfig, *, rngs: nnx.Rngs):
        if not isinstance(config, GPTConfig):
            raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
        self.config = config
        d, v = config.d_model, config.vocab_size
        self.embedding = nnx.Param(jax.random.normal(rngs.params(), (v, d), jnp.float32))
        self.blocks = nnx.List([_Block(config, i, rngs=rngs) for i in range(config.num_layers)])
        self.final_norm = _Norm(d, epsilon=config.epsilon)
        head_std = d**-0.5
        self.head = nnx.Param(
            truncated_normal_init(head_std, 3.0 * head_std)(rngs.params(), (d, v))
        )

    def _check_tokens(self, tokens: jax.Array) -> jax.Array:
        tokens = check_array(tokens, "tokens", kind="integer")
        if tokens.ndim != 2:
            raise ValueError(f"tokens must have shape (batch, seq_len), got {tokens.shape}")
        if tokens.shape[1] > self.config.max_len:
            raise ValueError(
                f"tokens has seq_len={tokens.shape[1]} > max_len={self.config.max_len}"
            )
        # Concrete tokens are checked on the host; traced ones are handled in _forward.
        check_indices(tokens, "tokens", self.config.vocab_size, "vocab_size")
        return tokens

    def _out_of_vocabulary(self, ids: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``ids`` with every entry outside ``[0, V)`` replaced by ``V``, and their count.

        Only traced ids can be out of range (concrete ones are rejected). ``V`` is out of
        bounds for the gathers that read the embedding row and the target logit, which then
        fill NaN: the loss of such a batch is NaN by construction, never a silently clamped or
        wrapped (negative) index.
        """
        vocab = self.config.vocab_size
        valid = (ids >= 0) & (ids < vocab)
        return jnp.where(valid, ids, vocab), jnp.sum(~valid, dtype=jnp.int32)

    def _forward(self, tokens: jax.Array, record: dict | None) -> tuple[jax.Array, jax.Array]:
        tokens = self._check_tokens(tokens)
        ids, _ = self._out_of_vocabulary(tokens)
        h = jnp.take(self.embedding[...], ids, axis=0, mode="fill", fill_value=jnp.nan)
        aux = jnp.zeros((), jnp.float32)
        for i, block in enumerate(self.blocks):
            h, block_aux = block(h, record, f"layer{i}")
            aux = aux + block_aux
        h = self.final_norm(h)
        if record is not None:
            record["final_norm"] = h
        logits = h.astype(jnp.float32) @ self.head[...].astype(jnp.float32)
        return logits, aux

    def __call__(self, tokens: jax.Array) -> jax.Array:
        """``tokens[B, T]`` (ints in ``[0, V)``, ``T <= max_len``) -> ``logits[B, T, V]`` (f32)."""
        return self._forward(tokens, None)[0]

    def loss_and_aux(self, tokens: jax.Array, targets: jax.Array) -> tuple[jax.Array, dict]:
        """The training loss and its parts: ``(ce + moe_aux_weight·aux, {"cross_entropy",
        "moe_aux", "out_of_vocabulary"})``; ``aux`` is the load-balancing loss summed over
        layers (0 without MoE).

        Concrete ``tokens``/``targets`` outside ``[0, V)`` raise a ``ValueError``; traced ones
        make the loss NaN and are counted in ``"out_of_vocabulary"`` (int32, tokens plus
        targets; 0 for a valid batch)."""
        tokens = self._check_tokens(tokens)
        targets = check_array(targets, "targets", kind="integer")
        if targets.shape != tokens.shape:
            raise ValueError(f"targets must have shape {tokens.shape}, got {targets.shape}")
        check_indices(targets, "targets", self.config.vocab_size, "vocab_size")
        logits, aux = self._forward(tokens, None)
        target_ids, bad_targets = self._out_of_vocabulary(targets)
        ce = jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, target_ids))
        total = ce + self.config.moe_aux_weight * aux if self.config.num_experts > 0 else ce
        bad_tokens = self._out_of_vocabulary(tokens)[1]
        return total, {
            "cross_entropy": ce,
            "moe_aux": aux,
            "out_of_vocabulary": bad_tokens + bad_targets,
        }

    def activation_rms(self, tokens: jax.Array) -> dict[str, jax.Array]:
        """RMS over all entries of every sublayer output (q, k, v, o, FFN maps, residual stream
        after each block, final norm), keyed ``"layer{i}.attention.q"`` etc."""
        record: dict[str, jax.Array] = {}
        self._forward(tokens, record)
        return {
            name: jnp.sqrt(jnp.mean(jnp.square(value.astype(jnp.float32))))
            for name, value in record.items()
        }


def language_model_loss(model: SimpleGPT, tokens: jax.Array, targets: jax.Array) -> jax.Array:
    """Mean next-token cross-entropy in float32, plus the weighted MoE auxiliary loss.

    ``L = mean_{b,t} [logsumexp(z_{bt}) − z_{bt, y_{bt}}] + w·Σ_layers aux`` with ``w =
    config.moe_aux_weight`` when ``config.num_experts > 0`` (else the cross-entropy alone). This is
    the one function trainers call (:func:`jaxlab.nn.train_language_model` by default).

    Tokens and targets outside the vocabulary ``[0, V)``: concrete ones raise a ``ValueError``
    naming the argument, ``V`` and the offending range; traced ones (inside ``jit``) make the
    loss NaN by construction (never clamped or wrapped), and
    ``model.loss_and_aux(...)[1]["out_of_vocabulary"]`` counts them.

    Args:
      model: a :class:`SimpleGPT` (any module with ``loss_and_aux(tokens, targets)`` works).
      tokens: ``(B, T)`` ints in ``[0, V)``.
      targets: ``(B, T)`` ints in ``[0, V)``, the next tokens.

    Returns:
      A float32 scalar.

    Raises:
      TypeError: ``model`` has no ``loss_and_aux``, or non-integer tokens/targets.
      ValueError: wrong shapes, or concrete ids outside the vocabulary.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from flax import nnx
      >>> model = SimpleGPT(GPTConfig(256, 32, 1, 2, max_len=8, multiple_of=32), rngs=nnx.Rngs(0))
      >>> tokens = jnp.zeros((1, 8), jnp.int32)
      >>> logits = model(tokens)
      >>> manual = jnp.mean(jax.nn.logsumexp(logits, -1) - logits[..., 0])
      >>> bool(jnp.allclose(language_model_loss(model, tokens, tokens), manual))
      True
    """
    check_callable(
        getattr(model, "loss_and_aux", None),
        "model.loss_and_aux",
        signature="loss_and_aux(tokens, targets) -> (loss, aux), as a SimpleGPT's",
    )
    return model.loss_and_aux(tokens, targets)[0]


def simplegpt_schedule(peak_lr: ArrayLike, warmup_steps: int, total_steps: int) -> optax.Schedule:
    """The paper code's schedule: linear warmup, then linear decay to 0.

    ``lr(s) = peak·(s+1)/(W+1)`` for ``s < W`` (0-indexed), then ``peak·(1 − (s − W)/(S − W))``.

    Args:
      peak_lr: peak learning rate (may be a traced array).
      warmup_steps: ``W >= 0``.
      total_steps: ``S > W``.

    Returns:
      An ``optax.Schedule``.

    Examples:
      >>> schedule = simplegpt_schedule(1.0, 15, 300)
      >>> [round(float(schedule(s)), 6) for s in (0, 14, 15, 158, 299)]
      [0.0625, 0.9375, 1.0, 0.498246, 0.003509]
    """
    warmup_steps = check_int(warmup_steps, "warmup_steps", minimum=0)
    total_steps = check_positive_int(total_steps, "total_steps")
    if total_steps <= warmup_steps:
        raise ValueError(f"total_steps={total_steps} must exceed warmup_steps={warmup_steps}")
    check_positive(peak_lr, "peak_lr")

    def schedule(step):
        s = jnp.asarray(step, jnp.float32)
        warm = (s + 1.0) / (warmup_steps + 1.0)
        decay = 1.0 - (s - warmup_steps) / (total_steps - warmup_steps)
        return peak_lr * jnp.where(s < warmup_steps, warm, jnp.clip(decay, 0.0, 1.0))

    return schedule


def simplegpt_optimizer(
    learning_rate: float | optax.Schedule, weight_decay: float = 0.1
) -> optax.GradientTransformation:
    """The paper code's optimizer: global-norm clipping at 1, then AdamW(0.9, 0.95, 1e-8).

    ``optax.chain(clip_by_global_norm(1.0), adamw(lr, b1=0.9, b2=0.95, eps=1e-8, weight_decay))``
    with decay on *all* parameters (no mask), as in the code.

    Args:
      learning_rate: a float or a schedule (e.g. :func:`simplegpt_schedule`).
      weight_decay: decoupled weight decay ``>= 0`` (0.1 at 1B, 0.05 at 7B).

    Returns:
      An ``optax.GradientTransformation``.

    Examples:
      >>> import jax.numpy as jnp
      >>> tx = simplegpt_optimizer(simplegpt_schedule(1e-2, 2, 10))
      >>> params = {"w": jnp.ones(3)}
      >>> updates, _ = tx.update({"w": jnp.full(3, 5.0)}, tx.init(params), params)
      >>> updates["w"].round(5)  # -lr·(sign(g) + 0.1·w) with lr = 1e-2/3 at step 0
      Array([-0.00367, -0.00367, -0.00367], dtype=float32)
    """
    check_nonnegative(weight_decay, "weight_decay")
    check_learning_rate(learning_rate)
    return optax.chain(
        optax.clip_by_global_norm(1.0),
        optax.adamw(learning_rate, b1=0.9, b2=0.95, eps=1e-8, weight_decay=weight_decay),
    )
