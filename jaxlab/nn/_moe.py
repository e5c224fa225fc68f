"""Mixture-of-experts feed-forward layer with top-K routing, load balancing and capacity.

A token ``x ∈ ℝ^d`` is scored by a linear router, ``s = W_r x ∈ ℝ^M``; the K experts with the
largest scores ``𝒮 = TopK(s)`` process it and their outputs are mixed by gates::

    y = Σ_{e ∈ 𝒮} p_e E_e(x),        E_e(x) = W₂ᵉ φ(W₁ᵉ x)      (d -> h -> d, no biases)

with ``p`` one of two gates:

* ``"softmax_topk"`` (default; Switch/GShard): ``p = softmax(s)`` restricted to ``𝒮``, not
  renormalised, so even at K = 1 the gate ``p_e = softmax(s)_e`` depends on every logit and the
  router receives a gradient from the task loss;
* ``"topk_softmax"``: ``p = softmax(s_𝒮)`` renormalised over ``𝒮``. At K = 1 the single gate is
  identically 1: the router gets **no task gradient** (only the balance loss trains it).

By default the layer is computed densely with masking: every expert runs on every token through
one matmul over a stacked expert axis and the gates zero out the unselected ones, so shapes are
static and the layer jits and vmaps; ``dispatch="sparse"`` uses per-expert capacity buffers
instead. The *analytic* cost of ideal sparse execution is
:meth:`MixtureOfExperts.flops_per_token`; the FLOPs that the configured dispatch really executes
are :meth:`MixtureOfExperts.dispatch_flops_per_token`.

References:
  Q. Zhu, Shi, Wei, Wang, Zhou, Zhang, "Rethinking Convergence in MoE Training: The Role of
  Routing Sparsity", ICML 2026;
  W. Fedus, B. Zoph, N. Shazeer, "Switch Transformers", JMLR 2022 (balance loss, capacity);
  D. Lepikhin et al., "GShard", ICLR 2021 (top-2 gating, capacity, priority of first choices).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx
from jax.typing import ArrayLike

from jaxlab._src.validation import (
    check_array,
    check_callable,
    check_choice,
    check_indices,
    check_int,
    check_key,
    check_last_axis,
    check_nonnegative,
    check_positive,
    check_positive_int,
)

__all__ = [
    "GATES",
    "MixtureOfExperts",
    "MoEStats",
    "RouterOutput",
    "TopKRouter",
    "capacity_keep_mask",
    "load_balancing_loss",
]

GATES = ("softmax_topk", "topk_softmax")


_DISPATCHES = ("dense", "sparse")


def _check_top_k(top_k: Any, num_experts: int) -> int:
    # A static int: it fixes the shapes of the selection.
    return check_int(top_k, "top_k", minimum=1, maximum=num_experts)


def _check_gate(gate: Any) -> str:
    return check_choice(gate, "gate", GATES)


def _check_capacity_factor(capacity_factor: Any) -> float | None:
    if capacity_factor is None:
        return None
    number = check_positive(capacity_factor, "capacity_factor")
    if number is None:
        raise TypeError("capacity_factor must be None or a concrete number (it sets shapes)")
    return number


def _check_input(x: Any, size: int, rng_key: Any) -> jax.Array:
    # Floating tokens only: an integer input would cast the weights to integers (and return
    # zeros); the last axis is checked before any matmul so a mismatch names ``x``.
    x = check_array(x, "x", kind="floating")
    check_last_axis(x, size, "x")
    if rng_key is not None:
        check_key(rng_key)
    return x


class RouterOutput(NamedTuple):
    """What :class:`TopKRouter` returns (leading token axes as in its input).

    Attributes:
      gates: ``[..., M]`` gate ``p_e`` of each selected expert, zero off the top-K.
      router_probs: ``[..., M]`` ``softmax(s)`` over all experts (the balance loss's ``P``).
      dispatch_mask: ``[..., M]`` bool, the top-K selection.
      expert_index: ``[..., K]`` int32 selected experts, best first (capacity priority).
      logits: ``[..., M]`` router scores ``s = W_r x`` (at least float32).

    Examples:
      >>> import jax.numpy as jnp
      >>> from flax import nnx
      >>> out = TopKRouter(4, 8, 2, rngs=nnx.Rngs(0))(jnp.ones((3, 4)))
      >>> out.gates.shape, out.expert_index.shape, int(out.dispatch_mask.sum())
      ((3, 8), (3, 2), 6)
    """

    gates: jax.Array
    router_probs: jax.Array
    dispatch_mask: jax.Array
    expert_index: jax.Array
    logits: jax.Array


class MoEStats(NamedTuple):
    """Routing statistics of one :class:`MixtureOfExperts` call (tokens flattened to ``N``).

    Attributes:
      load_balancing_loss: scalar Switch loss ``M Σ_e f_e P_e`` (unweighted: the caller
        multiplies by α); 1 for perfectly uniform routing, ``M`` for total collapse.
      router_probs: ``[N, M]`` ``softmax(s)`` over all experts.
      expert_load: ``[M]`` ``f_e = #{tokens routed to e} / (K N)``, the fraction of routed
        assignments each expert receives (before capacity; sums to 1).
      dropped_fraction: scalar fraction of the ``K N`` token-expert assignments dropped because
        an expert was full (0 with ``capacity_factor=None``).
      num_dropped: int32 count of dropped assignments.
      combine_weights: ``[N, M]`` gates actually applied (after capacity).
      dispatch_mask: ``[N, M]`` bool top-K selection (before capacity).

    Examples:
      >>> import jax.numpy as jnp
      >>> from flax import nnx
      >>> moe = MixtureOfExperts(4, 8, num_experts=4, top_k=2, rngs=nnx.Rngs(0))
      >>> y, stats = moe(jnp.ones((2, 3, 4)))
      >>> stats.router_probs.shape, float(stats.expert_load.sum()), float(stats.dropped_fraction)
      ((6, 4), 1.0, 0.0)
    """

    load_balancing_loss: jax.Array
    router_probs: jax.Array
    expert_load: jax.Array
    dropped_fraction: jax.Array
    num_dropped: jax.Array
    combine_weights: jax.Array
    dispatch_mask: jax.Array


def load_balancing_loss(router_probs: ArrayLike, dispatch_mask: ArrayLike, top_k: int) -> jax.Array:
    """Switch-Transformer load-balancing loss ``M Σ_e f_e P_e`` (unweighted).

    ``f_e = (1/(K N)) Σ_n mask[n, e]`` is the fraction of the ``K N`` routed assignments sent to
    expert ``e`` (piecewise constant, so no gradient flows through it) and
    ``P_e = (1/N) Σ_n probs[n, e]`` the mean router probability; both sum to 1 over experts, so
    the loss is 1 when routing is uniform (``f = P = 1/M``) and ``M`` when every token goes to one
    expert with probability 1. Multiply by ``α`` (1e-2 in Switch) when adding it to the task loss.

    Args:
      router_probs: ``[..., M]`` router softmax probabilities; leading axes are tokens.
      dispatch_mask: ``[..., M]`` (bool or 0/1) top-K selection, same shape.
      top_k: K, the number of experts per token (``1 <= top_k <= M``).

    Returns:
      A scalar (float32, or float64 for float64 probabilities).

    Raises:
      ValueError: shapes differ, or ``top_k`` outside ``[1, M]``.

    Examples:
      >>> import jax.numpy as jnp
      >>> probs = jnp.full((4, 2), 0.5)                 # uniform router
      >>> mask = jnp.asarray([[1, 0], [0, 1], [1, 0], [0, 1]], bool)
      >>> float(load_balancing_loss(probs, mask, top_k=1))
      1.0
      >>> collapsed = jnp.asarray([[1.0, 0.0]] * 4)     # everything on expert 0
      >>> float(load_balancing_loss(collapsed, collapsed > 0.5, top_k=1))
      2.0

    References:
      W. Fedus, B. Zoph, N. Shazeer, "Switch Transformers", JMLR 2022, eq. (4).
    """
    router_probs = check_array(router_probs, "router_probs")
    if getattr(dispatch_mask, "dtype", None) == jnp.bool_:
        dispatch_mask = jnp.asarray(dispatch_mask)
    else:  # 0/1 numbers
        dispatch_mask = check_array(dispatch_mask, "dispatch_mask")
    if router_probs.ndim < 1 or router_probs.shape != dispatch_mask.shape:
        raise ValueError(
            "router_probs and dispatch_mask must have the same shape [..., M], got "
            f"{router_probs.shape} and {dispatch_mask.shape}"
        )
    num_experts = router_probs.shape[-1]
    top_k = _check_top_k(top_k, num_experts)
    dtype = jnp.promote_types(router_probs.dtype, jnp.float32)
    probs = jnp.reshape(router_probs, (-1, num_experts)).astype(dtype)
    mask = jnp.reshape(dispatch_mask, (-1, num_experts)).astype(dtype)
    num_tokens = probs.shape[0]
    fraction = jax.lax.stop_gradient(jnp.sum(mask, axis=0)) / (top_k * num_tokens)
    mean_prob = jnp.mean(probs, axis=0)
    return num_experts * jnp.sum(fraction * mean_prob)


class TopKRouter(nnx.Module):
    """Linear top-K router: logits ``s = W_r x``, top-K selection and gates.

    ``𝒮 = TopK(s)`` (ties go to the lower expert index, ``jax.lax.top_k``'s rule). Gates:
    ``"softmax_topk"`` ``p_e = softmax(s)_e`` for ``e ∈ 𝒮`` (not renormalised) or
    ``"topk_softmax"`` ``p_e = exp(s_e) / Σ_{e' ∈ 𝒮} exp(s_{e'})``. The renormalised gate at
    K = 1 is identically 1, so its derivative with respect to the logits is exactly zero: the
    router then learns only from the balance loss (the note's pitfall). The logits and gates are
    computed in at least float32.

    Tie-breaking: the note suggests 1e-6 noise on the logits against ties (e.g. a zero-initialised
    router). Pass ``rng_key`` to add ``tie_break_noise · U(0, 1)`` to the logits used for the
    *selection* only (gates use the clean logits); without a key, selection is deterministic.

    Args:
      in_features: d, size of the token's last axis.
      num_experts: M.
      top_k: K in ``[1, M]`` (static Python int: it fixes shapes).
      gate: ``"softmax_topk"`` or ``"topk_softmax"``.
      init_std: standard deviation of the ``N(0, init_std²)`` router weights.
      tie_break_noise: scale of the optional selection noise.
      rngs: ``nnx.Rngs`` for the initial weights.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from flax import nnx
      >>> router = TopKRouter(4, 8, 2, rngs=nnx.Rngs(0))
      >>> out = router(jax.random.normal(jax.random.key(1), (5, 4)))
      >>> out.gates.shape, (out.gates > 0).sum(axis=-1).tolist()
      ((5, 8), [2, 2, 2, 2, 2])
      >>> bool(jnp.all(out.gates.sum(-1) < 1))        # softmax_topk: not renormalised
      True

    References:
      Zhu et al., "Rethinking Convergence in MoE Training: The Role of Routing Sparsity",
      ICML 2026; N. Shazeer et al., "Outrageously Large Neural Networks", ICLR 2017.
    """

    def __init__(
        self,
        in_features: int,
        num_experts: int,
        top_k: int,
        *,
        gate: str = "softmax_topk",
        init_std: float = 0.02,
        tie_break_noise: float = 1e-6,
        rngs: nnx.Rngs,
    ):
        self.in_features = check_positive_int(in_features, "in_features")
        self.num_experts = check_positive_int(num_experts, "num_experts")
        self.top_k = _check_top_k(top_k, self.num_experts)
        self.gate = _check_gate(gate)
        init_std = check_nonnegative(init_std, "init_std")
        self.tie_break_noise = check_nonnegative(tie_break_noise, "tie_break_noise")
        if init_std is None or self.tie_break_noise is None:
            raise TypeError("init_std and tie_break_noise must be concrete numbers")
        self.kernel = nnx.Param(
            init_std * jax.random.normal(rngs.params(), (self.in_features, self.num_experts))
        )

    def __call__(self, x: ArrayLike, *, rng_key: jax.Array | None = None) -> RouterOutput:
        x = _check_input(x, self.in_features, rng_key)
        # Routing in at least float32 (bf16 logits make near-ties and gates coarse).
        dtype = jnp.promote_types(jnp.promote_types(x.dtype, self.kernel.dtype), jnp.float32)
        logits = jnp.matmul(x.astype(dtype), self.kernel[...].astype(dtype))
        selection = logits
        if rng_key is not None:
            noise = jax.random.uniform(rng_key, logits.shape, dtype)
            selection = logits + self.tie_break_noise * noise
        _, expert_index = jax.lax.top_k(selection, self.top_k)
        dispatch_mask = jnp.any(
            jax.nn.one_hot(expert_index, self.num_experts, dtype=jnp.int32) > 0, axis=-2
        )
        router_probs = jax.nn.softmax(logits, axis=-1)
        if self.gate == "softmax_topk":
            gates = jnp.where(dispatch_mask, router_probs, 0.0)
        else:
            # softmax over the selected logits only; masked entries are exp(-inf) = 0 exactly, and
            # at K = 1 the gate is exactly 1 with an exactly zero derivative.
            gates = jax.nn.softmax(jnp.where(dispatch_mask, logits, -jnp.inf), axis=-1)
        return RouterOutput(gates, router_probs, dispatch_mask, expert_index, logits)


def _assignment_slots(expert_index: jax.Array, num_experts: int):
    """Each top-K assignment's 0-based slot in its expert, in GShard's priority order.

    Assignments are ordered choice-major (every first choice, then every second choice, ...),
    tokens in order within a choice. Returns ``(experts, slots)``, both ``[K·N]`` int32 in that
    order. The one capacity rule that :func:`capacity_keep_mask` and the sparse dispatch share.
    """
    num_tokens, top_k = expert_index.shape
    experts = jnp.reshape(expert_index.T, (top_k * num_tokens,)).astype(jnp.int32)
    one_hot = jax.nn.one_hot(experts, num_experts, dtype=jnp.int32)  # [K·N, M]
    slots = jnp.sum(jnp.cumsum(one_hot, axis=0) * one_hot, axis=1) - 1
    return experts, slots


def capacity_keep_mask(expert_index: jax.Array, num_experts: int, capacity: int) -> jax.Array:
    """``[N, M]`` bool: which of the top-K assignments fit in the experts' buffers.

    Priority (GShard): every token's first choice is placed before any second choice, and within
    a choice rank earlier tokens come first; an assignment is kept if it is among the first
    ``capacity`` assignments of its expert in that order.

    Args:
      expert_index: ``[N, K]`` int, the experts chosen by each token, best first.
      num_experts: M.
      capacity: slots per expert.

    Returns:
      ``[N, M]`` bool mask of the kept assignments.

    Raises:
      TypeError: non-integer ``expert_index``; a ``capacity`` that is not an int.
      ValueError: ``expert_index`` not 2-D, or (when concrete) an index outside
        ``[0, num_experts)``; a negative ``capacity``. A traced out-of-range index is not
        checked: its one-hot row is zero, so that assignment is never kept.

    Examples:
      >>> import jax.numpy as jnp
      >>> # three tokens all choose expert 0 first, then expert 1; one slot per expert
      >>> capacity_keep_mask(jnp.array([[0, 1], [0, 1], [0, 1]]), 2, 1).astype(int).tolist()
      [[1, 1], [0, 0], [0, 0]]

    References:
      Lepikhin et al., "GShard: Scaling Giant Models with Conditional Computation and Automatic
      Sharding", ICLR 2021 (the priority order).
    """
    num_experts = check_positive_int(num_experts, "num_experts")
    expert_index = check_array(expert_index, "expert_index", kind="integer", ndim=2)
    check_indices(expert_index, "expert_index", num_experts, "num_experts")
    if not isinstance(capacity, jax.core.Tracer):
        capacity = check_int(capacity, "capacity", minimum=0)
    num_tokens, top_k = expert_index.shape
    experts, slots = _assignment_slots(expert_index, num_experts)
    # An out-of-range (traced) index has an all-zero one-hot row: slot -1, never kept.
    kept = (slots >= 0) & (slots < capacity)
    one_hot = jax.nn.one_hot(experts, num_experts, dtype=jnp.bool_) & kept[:, None]
    return jnp.any(jnp.reshape(one_hot, (top_k, num_tokens, num_experts)), axis=0)


class MixtureOfExperts(nnx.Module):
    """Mixture-of-experts feed-forward layer with top-K routing, balance loss and capacity.

    ``y = Σ_{e ∈ TopK(s)} p_e W₂ᵉ φ(W₁ᵉ x)`` with the gates ``p`` of :class:`TopKRouter`
    (``"softmax_topk"`` by default). Leading axes of ``x`` are flattened into ``N`` tokens.

    **Capacity.** With ``capacity_factor=c`` each expert holds at most
    ``C = ceil(c · K · N / M)`` tokens; assignments beyond that (first choices before second
    choices, then token order) are dropped: their gate is set to 0 (not renormalised), so in a
    residual block the token passes through that expert unchanged. Drops are counted in
    :class:`MoEStats`. ``capacity_factor=None`` means no limit.

    **Balance loss.** ``stats.load_balancing_loss = M Σ_e f_e P_e`` (see
    :func:`load_balancing_loss`) is returned unweighted; add ``α ·`` it (α = 1e-2) to the loss.

    **Dispatch.** ``dispatch="dense"`` (default) evaluates every expert on every token and masks
    (static shapes, one matmul over the stacked experts), so wall time does not fall with K.
    ``dispatch="sparse"`` sorts the kept assignments into per-expert buffers of ``C`` slots
    (gather), runs one batched matmul per layer over ``[M, C, ·]`` and scatter-adds the gated
    outputs back: ``M·C ≈ c·K·N`` rows instead of ``M·N``, the FLOPs of
    :meth:`flops_per_token` (router ``2dM`` plus ``4dh`` per active expert) up to the capacity
    slack: about ``c`` times the expert term (:meth:`dispatch_flops_per_token` counts what either
    dispatch executes). It needs ``capacity_factor`` (``C`` sets the buffers' shape) and returns
    the same outputs and statistics as ``"dense"`` with the same capacity.

    Weights: router ``N(0, router_init_std²)``; ``W₁ᵉ ~ N(0, 1/d)``, ``W₂ᵉ ~ N(0, 1/h)``
    (``1/fan_in`` variance), stored stacked as ``[M, d, h]`` and ``[M, h, d]``.

    Args:
      in_features: d.
      hidden_features: h, hidden width of each expert.
      num_experts: M.
      top_k: K in ``[1, M]`` (static Python int).
      gate: ``"softmax_topk"`` or ``"topk_softmax"``.
      capacity_factor: ``None`` (no limit) or ``c > 0``.
      dispatch: ``"dense"`` (masked, the default) or ``"sparse"`` (per-expert buffers; needs
        ``capacity_factor``).
      activation: φ (GELU by default).
      router_init_std: standard deviation of the router weights.
      rngs: ``nnx.Rngs`` for the initial weights.

    Call:
      ``moe(x[..., d], *, rng_key=None) -> (y[..., d], MoEStats)``; ``rng_key`` only enables
      the router's 1e-6 tie-breaking noise. ``x`` must be floating (an integer input would run
      the experts in integer arithmetic): a ``TypeError`` names it, and a last axis other than
      ``d`` is a ``ValueError`` raised before any matmul.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from flax import nnx
      >>> moe = MixtureOfExperts(8, 16, num_experts=4, top_k=2, capacity_factor=1.0,
      ...                        rngs=nnx.Rngs(0))
      >>> x = jax.random.normal(jax.random.key(1), (2, 10, 8))
      >>> y, stats = moe(x)
      >>> y.shape, stats.load_balancing_loss.shape, stats.expert_load.shape
      ((2, 10, 8), (), (4,))
      >>> int(stats.combine_weights.astype(bool).sum(0).max()) <= 10   # C = ceil(2*20/4)
      True
      >>> moe.flops_per_token()                       # 2*8*4 + 2 * 4*8*16
      1088

    References:
      Zhu et al., "Rethinking Convergence in MoE Training: The Role of Routing Sparsity",
      ICML 2026; Fedus, Zoph, Shazeer, "Switch Transformers", JMLR 2022; Lepikhin et al.,
      "GShard", ICLR 2021.
    """

    def __init__(
        self,
        in_features: int,
        hidden_features: int,
        num_experts: int,
        top_k: int,
        *,
        gate: str = "softmax_topk",
        capacity_factor: float | None = None,
        dispatch: str = "dense",
        activation: Callable[[jax.Array], jax.Array] = jax.nn.gelu,
        router_init_std: float = 0.02,
        rngs: nnx.Rngs,
    ):
        self.in_features = check_positive_int(in_features, "in_features")
        self.hidden_features = check_positive_int(hidden_features, "hidden_features")
        self.num_experts = check_positive_int(num_experts, "num_experts")
        self.top_k = _check_top_k(top_k, self.num_experts)
        self.gate = _check_gate(gate)
        self.capacity_factor = _check_capacity_factor(capacity_factor)
        check_choice(dispatch, "dispatch", _DISPATCHES)
        if dispatch == "sparse" and self.capacity_factor is None:
            raise ValueError(
                "dispatch='sparse' needs a capacity_factor: the per-expert buffers have "
                "ceil(capacity_factor * K * N / M) slots (a static shape)"
            )
        self.dispatch = dispatch
        check_callable(activation, "activation")
        self.activation = activation
        check_nonnegative(router_init_std, "router_init_std")
        self.router = TopKRouter(
            self.in_features,
            self.num_experts,
            self.top_k,
            gate=self.gate,
            init_std=router_init_std,
            rngs=rngs,
        )
        d, h, m = self.in_features, self.hidden_features, self.num_experts
        self.w_in = nnx.Param(jax.random.normal(rngs.params(), (m, d, h)) / math.sqrt(d))
        self.w_out = nnx.Param(jax.random.normal(rngs.params(), (m, h, d)) / math.sqrt(h))

    def capacity(self, num_tokens: int) -> int | None:
        """Per-expert capacity ``ceil(capacity_factor · K · N / M)`` (``None``: unlimited)."""
        if self.capacity_factor is None:
            return None
        return math.ceil(self.capacity_factor * self.top_k * num_tokens / self.num_experts)

    def flops_per_token(self) -> int:
        """Analytic forward FLOPs per token of sparse execution: ``2dM + K · 4dh``.

        The router's matmul costs ``2dM``; each of the K active experts two matmuls of ``2dh``.
        Gating, softmax and the activation are ignored; a training step costs about 3x.
        """
        d, h = self.in_features, self.hidden_features
        return 2 * d * self.num_experts + self.top_k * 4 * d * h

    def dispatch_flops_per_token(self, num_tokens: int) -> float:
        """Forward FLOPs per token that the configured ``dispatch`` executes on ``N`` tokens.

        :meth:`flops_per_token` is the ideal ``2dM + K · 4dh``; this counts the matmuls the layer
        really runs on a batch of ``N`` tokens (``N`` = product of the input's leading axes)::

            dense:   2dM + M · 4dh                  every expert on every token, then masked
            sparse:  2dM + (M · C / N) · 4dh,       C = ceil(c · K · N / M) = capacity(N)

        Sparse dispatch runs every one of the ``M · C`` buffer slots, empty or not, so it costs
        ``M · C / N ≈ c · K`` experts per token rather than ``K``: ``c`` times the ideal expert
        term, plus the ceiling's rounding (exactly ``K`` when ``c = 1`` and ``M`` divides
        ``K · N``). Its buffers are not clipped at ``N`` slots, so for ``c · K > M`` it costs more
        than dense. As in :meth:`flops_per_token`, gating, softmax, the activation, the gather and
        the scatter-add are ignored (``O(M + d)`` per token against ``O(dh)``).

        Args:
          num_tokens: N, tokens per call (``>= 1``; only the sparse cost depends on it).

        Returns:
          FLOPs per token (a float: ``M · C / N`` need not be an integer).

        Raises:
          ValueError, TypeError: ``num_tokens`` is not a positive int.

        Examples:
          >>> from flax import nnx
          >>> moe = MixtureOfExperts(8, 16, num_experts=4, top_k=2, rngs=nnx.Rngs(0))
          >>> moe.dispatch_flops_per_token(20)            # 2*8*4 + 4 * 4*8*16, dense
          2112.0
          >>> sparse = MixtureOfExperts(8, 16, num_experts=4, top_k=2, capacity_factor=1.25,
          ...                           dispatch="sparse", rngs=nnx.Rngs(0))
          >>> sparse.capacity(20), sparse.dispatch_flops_per_token(20)  # 64 + 512 * 4*13/20
          (13, 1395.2)
          >>> sparse.flops_per_token()                    # the ideal: 64 + 512 * 2
          1088

        References:
          Fedus, Zoph, Shazeer, "Switch Transformers", JMLR 2022 (capacity factor and the
          compute it costs).
        """
        num_tokens = check_positive_int(num_tokens, "num_tokens")
        d, h, m = self.in_features, self.hidden_features, self.num_experts
        # Integer numerators, one division: the closed forms come out exactly rounded.
        if self.dispatch == "sparse":
            rows = m * self.capacity(num_tokens)
            return (2 * d * m * num_tokens + rows * 4 * d * h) / num_tokens
        return float(2 * d * m + m * 4 * d * h)

    def _dense_experts(self, tokens: jax.Array, combine: jax.Array) -> jax.Array:
        # All experts at once as one dense layer of width M·h over the stacked weights, and
        # Σ_e c_e W₂ᵉ φ(W₁ᵉx) = Σ_e W₂ᵉ (c_e φ(W₁ᵉx)): gate the hidden units, then contract
        # (expert, hidden) in one matmul. Plain 2-D matmuls run ~2x faster on CPU than the
        # equivalent batched einsums.
        d, h, m = self.in_features, self.hidden_features, self.num_experts
        num_tokens = tokens.shape[0]
        w_in = jnp.reshape(jnp.transpose(self.w_in[...], (1, 0, 2)), (d, m * h))
        hidden = self.activation(tokens @ w_in.astype(tokens.dtype))
        gated = jnp.reshape(hidden, (num_tokens, m, h)) * combine.astype(hidden.dtype)[:, :, None]
        w_out = jnp.reshape(self.w_out[...], (m * h, d)).astype(tokens.dtype)
        return jnp.reshape(gated, (num_tokens, m * h)) @ w_out

    def _sparse_experts(self, tokens: jax.Array, route: RouterOutput, capacity: int) -> jax.Array:
        # Slot e·C + s holds the s-th kept assignment of expert e (GShard priority); dropped
        # assignments go to a dummy slot M·C, empty slots read a zero row (token index N).
        d, m = self.in_features, self.num_experts
        num_tokens, top_k = route.expert_index.shape
        experts, slots = _assignment_slots(route.expert_index, m)
        token_of = jnp.tile(jnp.arange(num_tokens, dtype=jnp.int32), top_k)
        gates_topk = jnp.take_along_axis(route.gates, route.expert_index, axis=1)  # [N, K]
        gate_of = jnp.reshape(gates_topk.T, (top_k * num_tokens,))
        kept = (slots >= 0) & (slots < capacity)
        target = jnp.where(kept, experts * capacity + slots, m * capacity)
        slot_token = jnp.full((m * capacity + 1,), num_tokens, jnp.int32).at[target].set(token_of)
        slot_gate = jnp.zeros((m * capacity + 1,), gate_of.dtype).at[target].set(gate_of)
        slot_token, slot_gate = slot_token[:-1], slot_gate[:-1]
        padded = jnp.concatenate([tokens, jnp.zeros((1, d), tokens.dtype)])
        buffers = jnp.reshape(padded[slot_token], (m, capacity, d))
        hidden = self.activation(
            jnp.einsum("mcd,mdh->mch", buffers, self.w_in[...].astype(tokens.dtype))
        )
        out = jnp.einsum("mch,mhd->mcd", hidden, self.w_out[...].astype(tokens.dtype))
        out = jnp.reshape(out, (m * capacity, d)) * slot_gate.astype(out.dtype)[:, None]
        return jnp.zeros((num_tokens + 1, d), out.dtype).at[slot_token].add(out)[:num_tokens]

    def __call__(
        self, x: ArrayLike, *, rng_key: jax.Array | None = None
    ) -> tuple[jax.Array, MoEStats]:
        x = _check_input(x, self.in_features, rng_key)
        lead = x.shape[:-1]
        tokens = jnp.reshape(x, (math.prod(lead), self.in_features))
        num_tokens = tokens.shape[0]
        route = self.router(tokens, rng_key=rng_key)
        capacity = self.capacity(num_tokens)
        if capacity is None:
            kept = route.dispatch_mask
        else:
            kept = capacity_keep_mask(route.expert_index, self.num_experts, capacity)
        combine = jnp.where(kept, route.gates, 0.0)
        num_dropped = self.top_k * num_tokens - jnp.sum(kept, dtype=jnp.int32)

        if self.dispatch == "sparse":
            y = self._sparse_experts(tokens, route, capacity)
        else:
            y = self._dense_experts(tokens, combine)

        expert_load = jnp.sum(route.dispatch_mask, axis=0, dtype=jnp.float32) / (
            self.top_k * num_tokens
        )
        stats = MoEStats(
            load_balancing_loss=load_balancing_loss(
                route.router_probs, route.dispatch_mask, self.top_k
            ),
            router_probs=route.router_probs,
            expert_load=expert_load,
            dropped_fraction=num_dropped.astype(jnp.float32) / (self.top_k * num_tokens),
            num_dropped=num_dropped,
            combine_weights=combine,
            dispatch_mask=route.dispatch_mask,
        )
        return jnp.reshape(y, (*lead, self.in_features)).astype(x.dtype), stats
