"""Dense ReLU networks for the harm-minimising update, and its exact full-model QP step on them.

The last-layer proxy (:func:`jaxlab.optim.harm_train_step`) builds the no-harm dual from the
head alone. For a dense network the *full-model* dual is just as cheap: the per-sample gradient
of layer ``l`` (``z_l = h_l W_l + c_l``) is ``(h_{l,i} δ_{l,i}ᵀ, δ_{l,i})`` with
``δ_{l,i} = ∂ℓ_i/∂z_{l,i}``, so::

    G = Σ_l (Δ_l Δ_lᵀ) ⊙ (H_l H_lᵀ + 11ᵀ),    b_i = Σ_l h_{l,i}ᵀ U_l δ_{l,i} + δ_{l,i}ᵀ u_l

(the head formula summed over layers), from one forward pass and one backward pass of the summed
loss with respect to the pre-activations, ``O(B² Σ_l (in_l + out_l))``, with no per-sample
gradient ever formed. :func:`mlp_exact_harm_train_step` trains with that exact dual, the
reference arm the issue asks for beside the proxy.

The network's parameters are a list of ``{"kernel": (in, out), "bias": (out,)}`` dicts, the
layout of :func:`jaxlab.uncertainty.mlp_init`.

References:
  "Mitigating Per-Sample Harm in Stochastic Optimization", ICML 2026 (the exact problem the
  paper calls intractable for large models).
"""

# No ``from __future__ import annotations``: kept like _harm.py for optax's annotations.
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree
from jax.typing import ArrayLike

from jaxlab._src.validation import (
    check_array,
    check_callable,
    check_choice,
    check_nonnegative,
    check_positive_int,
    check_static_int,
)
from jaxlab.optim._harm import (
    DEFAULT_RIDGE,
    VIOLATION_TOL,
    HarmInfo,
    exact_harm_weights,
    first_order_harm,
    harm,
    harm_dual_terms,
    harm_train_step,
    solve_harm_dual,
)

__all__ = [
    "HARM_ARMS",
    "MLPHarmTraining",
    "mlp_accuracy",
    "mlp_exact_harm_train_step",
    "mlp_harm_probe",
    "mlp_harm_step",
    "mlp_harm_step_seconds",
    "mlp_harm_training",
    "mlp_logits_and_features",
]

# The compared arms: the optimizer alone, the last-layer proxy (harm_train_step), the head-mode
# transform (harm) and the exact full-model QP (mlp_exact_harm_train_step).
HARM_ARMS = ("base", "reweight", "head", "exact")


def _check_mlp(params) -> None:
    if not isinstance(params, (list, tuple)) or not params:
        raise TypeError(
            "params must be a non-empty list of {'kernel': (in, out), 'bias': (out,)} dicts "
            f"(jaxlab.uncertainty.mlp_init's layout), got {type(params).__name__}"
        )
    for i, layer in enumerate(params):
        if not isinstance(layer, dict) or set(layer) != {"kernel", "bias"}:
            raise TypeError(f"params[{i}] must be a dict with keys 'kernel' and 'bias'")


def _forward(params, x, taps):
    """(logits, every dense layer's input); ``taps`` are added to the pre-activations."""
    h, inputs = x, []
    for i, layer in enumerate(params):
        inputs.append(h)
        z = h @ layer["kernel"] + layer["bias"][None] + taps[i]
        h = jax.nn.relu(z) if i < len(params) - 1 else z
    return h, inputs


def mlp_logits_and_features(params: Sequence[dict[str, jax.Array]], x: ArrayLike):
    """``(logits, the head's inputs)`` of a dense ReLU MLP (the ``model_fn`` the harm steps take).

    Args:
      params: the layers, ``[{"kernel": (in, out), "bias": (out,)}, ...]``.
      x: ``(B, in)`` inputs.

    Returns:
      ``(logits (B, classes), features (B, hidden))``; ``features`` is ``x`` for one layer.

    Examples:
      >>> import jax.numpy as jnp
      >>> params = [{"kernel": jnp.ones((2, 3)), "bias": jnp.zeros(3)},
      ...           {"kernel": jnp.ones((3, 2)), "bias": jnp.zeros(2)}]
      >>> logits, h = mlp_logits_and_features(params, jnp.array([[1.0, -2.0]]))
      >>> logits.tolist(), h.tolist()  # ReLU(1 - 2) = 0
      ([[0.0, 0.0]], [[0.0, 0.0, 0.0]])
    """
    _check_mlp(params)
    x = check_array(x, "x", kind="floating", ndim=2)
    taps = [jnp.zeros((), x.dtype)] * len(params)
    logits, inputs = _forward(params, x, taps)
    return logits, inputs[-1]


def mlp_exact_harm_train_step(
    optimizer: optax.GradientTransformation,
    *,
    margin: ArrayLike = 0.0,
    num_iterations: int | None = None,
    ridge: ArrayLike = DEFAULT_RIDGE,
) -> Callable[[Any, Any, Any], tuple[Any, Any, HarmInfo]]:
    r"""The exact full-model no-harm step for a dense ReLU MLP with softmax cross-entropy.

    ``step(params, opt_state, (x, y)) -> (params, opt_state, info)`` (pure, jittable), as
    :func:`jaxlab.optim.harm_train_step` but with the dual built from *every* layer:

    1. One forward pass with zero taps on the pre-activations and one backward pass of
       ``Σ_i ℓ_i`` to the taps give ``Δ_l`` (row ``i`` = ``∂ℓ_i/∂z_{l,i}``) and ``H_l``.
    2. The base update ``a`` = ``optimizer.update`` of the mean gradient (state before this
       step, the update discarded) and its secant scale ``s = ⟨a(0) − a(ḡ), ḡ⟩/‖ḡ‖²`` over
       all parameters (``η`` for SGD with momentum).
    3. ``G``, ``b`` summed over layers (module docstring) with ``u = −a``; ``w*`` of the dual;
       ``ω_i = 1/B + w*_i/s``.
    4. The gradient of ``Σ ω_i ℓ_i`` (``H_lᵀ(ω ⊙ Δ_l)``, ``ωᵀΔ_l``) fed to ``optimizer.update``.

    For SGD with momentum the step is ``−η(u + Σ w*_i g_i)`` with ``⟨g_i, ·⟩ >= 0`` for every
    sample on the *whole* model (up to the solver's tolerance); for AdamW the correction also
    enters the second moment (the same approximation as the proxy's).

    Args:
      optimizer: any optax transform.
      margin, num_iterations, ridge: the dual's, see :func:`jaxlab.optim.solve_harm_dual`.

    Returns:
      The step function; ``info.num_harmed``/``num_violated`` count full-model constraints.

    Examples:
      >>> import jax, jax.numpy as jnp, optax
      >>> params = [{"kernel": jnp.eye(2), "bias": jnp.zeros(2)}]  # a linear softmax model
      >>> opt = optax.sgd(0.5, momentum=0.9)
      >>> step = mlp_exact_harm_train_step(opt, ridge=0.0)
      >>> params, state, info = step(params, opt.init(params), (jnp.eye(2), jnp.array([0, 1])))
      >>> info.weights.round(3), round(float(info.update_scale), 3)  # orthogonal samples
      (Array([0.5, 0.5], dtype=float32), 0.5)

    References:
      "Mitigating Per-Sample Harm in Stochastic Optimization", ICML 2026 (the exact problem).
    """
    if not isinstance(optimizer, optax.GradientTransformation):
        raise TypeError(f"optimizer must be an optax.GradientTransformation, got {optimizer!r}")
    if jnp.ndim(margin) == 0:
        check_nonnegative(margin, "margin")
    else:
        check_array(margin, "margin", kind="real", ndim=1)
    check_nonnegative(ridge, "ridge")
    iterations = check_static_int(
        num_iterations,
        "num_iterations",
        default=100,
        role="sets the dual solver's loop count",
        minimum=1,
    )

    def step(params, opt_state, batch):
        _check_mlp(params)
        x, y = batch
        x = check_array(x, "x", kind="floating", ndim=2).astype(jnp.float32)
        size = x.shape[0]
        taps = [jnp.zeros((size, layer["bias"].shape[0]), jnp.float32) for layer in params]

        def losses_of(t):
            logits, inputs = _forward(params, x, t)
            return optax.softmax_cross_entropy_with_integer_labels(logits, y), inputs

        losses, vjp, inputs = jax.vjp(losses_of, taps, has_aux=True)
        # Row i of the losses depends on sample i's pre-activations only: per-sample signals.
        (deltas,) = vjp(jnp.ones_like(losses))

        def weighted_grads(weights):
            return [
                {"kernel": h.T @ (weights[:, None] * d), "bias": weights @ d}
                for h, d in zip(inputs, deltas, strict=True)
            ]

        mean = weighted_grads(jnp.full((size,), 1.0 / size, jnp.float32))
        a, _ = optimizer.update(mean, opt_state, params)
        a0, _ = optimizer.update(jax.tree.map(jnp.zeros_like, mean), opt_state, params)
        response = optax.tree.vdot(optax.tree.sub(a0, a), mean)
        scale = response / jnp.maximum(optax.tree.vdot(mean, mean), jnp.float32(1e-30))
        scale = jnp.where(scale > 0, scale, jnp.nan)  # not a descent method: flagged, not hidden
        gram = jnp.zeros((size, size), jnp.float32)
        linear = jnp.zeros((size,), jnp.float32)
        for h, d, layer in zip(inputs, deltas, a, strict=True):
            g_l, b_l = harm_dual_terms(h, d, -layer["kernel"], -layer["bias"])
            gram, linear = gram + g_l, linear + b_l
        dual = solve_harm_dual(gram, linear, margin=margin, num_iterations=iterations, ridge=ridge)
        tau = jnp.broadcast_to(jnp.asarray(margin, jnp.float32), linear.shape)
        slack = gram @ dual + linear - tau
        norm_u = jnp.sqrt(optax.tree.vdot(a, a))
        norm_d = jnp.sqrt(jnp.maximum(norm_u**2 + 2 * dual @ linear + dual @ gram @ dual, 0.0))
        tol = VIOLATION_TOL * jnp.sqrt(jnp.maximum(jnp.diagonal(gram), 0.0)) * norm_d
        weights = 1.0 / size + dual / scale
        updates, opt_state = optimizer.update(weighted_grads(weights), opt_state, params)
        params = optax.apply_updates(params, updates)
        nonfinite = ~jnp.all(jnp.isfinite(jnp.concatenate([losses, weights])))
        info = HarmInfo(
            losses,
            weights,
            dual,
            scale,
            jnp.sum(linear < tau).astype(jnp.int32),
            jnp.sum(slack < -tol).astype(jnp.int32),
            nonfinite,
        )
        return params, opt_state, info

    return step


def _cross_entropy(logits, labels):
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels)


def _mlp_loss(params, x, y):
    return _cross_entropy(mlp_logits_and_features(params, x)[0], y)


def _proxy_step(tx, params_like, num_iterations, ridge):
    last = len(params_like) - 1
    return harm_train_step(
        lambda p, b: mlp_logits_and_features(p, b[0]),
        lambda z, b: _cross_entropy(z, b[1]),
        tx,
        kernel_path=(last, "kernel"),
        bias_path=(last, "bias"),
        num_iterations=num_iterations,
        ridge=ridge,
    )


def mlp_harm_step(
    arm: str,
    tx: optax.GradientTransformation,
    params_like: Sequence[dict[str, jax.Array]],
    *,
    num_iterations: int = 100,
    ridge: ArrayLike = DEFAULT_RIDGE,
) -> tuple[Callable, Callable]:
    """One training step of a dense classifier under one of :data:`HARM_ARMS`.

    The loss is the per-sample softmax cross-entropy of :func:`mlp_logits_and_features`. Arms:
    ``"base"`` ``tx`` alone; ``"reweight"`` the last-layer proxy
    (:func:`jaxlab.optim.harm_train_step` on the head); ``"head"`` the head-mode transform
    (:func:`jaxlab.optim.harm` around ``tx``); ``"exact"`` the full-model QP
    (:func:`mlp_exact_harm_train_step`). ``ridge`` is the arm's dual ridge (not used by
    ``"base"``). The step also returns the realised harm rate: the fraction of the batch whose
    loss rose after the step, on the same batch.

    Args:
      arm: one of :data:`HARM_ARMS`.
      tx: the base optimizer.
      params_like: the network's parameters (their layout: the head is the last layer).
      num_iterations: dual iterations of the harm solver.
      ridge: the dual's ridge.

    Returns:
      ``(step, init)``: ``step(params, state, x, y) -> (params, state, harm_rate)`` and
      ``init(params) -> state``.

    Examples:
      >>> import jax, optax
      >>> from jaxlab.uncertainty import mlp_init
      >>> params = mlp_init(jax.random.key(0), (4, 8, 3))
      >>> step, init = mlp_harm_step("reweight", optax.sgd(0.1), params, num_iterations=10)
      >>> x, y = jax.random.normal(jax.random.key(1), (6, 4)), jax.numpy.arange(6) % 3
      >>> params, state, rate = step(params, init(params), x, y)
      >>> 0.0 <= float(rate) <= 1.0
      True
    """
    check_choice(arm, "arm", HARM_ARMS)
    _check_mlp(params_like)
    num_iterations = check_positive_int(num_iterations, "num_iterations")
    if arm in ("reweight", "exact"):
        if arm == "reweight":
            inner = _proxy_step(tx, params_like, num_iterations, ridge)
        else:
            inner = mlp_exact_harm_train_step(tx, num_iterations=num_iterations, ridge=ridge)

        def step(params, state, x, y):
            new, state, info = inner(params, state, (x, y))
            return new, state, jnp.mean(_mlp_loss(new, x, y) > info.losses)

        return step, tx.init
    last = len(params_like) - 1
    wrapped = harm(
        tx,
        kernel_path=(last, "kernel"),
        bias_path=(last, "bias"),
        num_iterations=num_iterations,
        ridge=ridge,
    )
    wrapped = wrapped if arm == "head" else optax.with_extra_args_support(tx)

    def step(params, state, x, y):
        logits, h = mlp_logits_and_features(params, x)
        before = _cross_entropy(logits, y)
        delta = jax.nn.softmax(logits) - jax.nn.one_hot(y, logits.shape[-1])
        grads = jax.grad(lambda p: jnp.mean(_mlp_loss(p, x, y)))(params)
        updates, state = wrapped.update(grads, state, params, features=h, logit_grads=delta)
        new = optax.apply_updates(params, updates)
        return new, state, jnp.mean(_mlp_loss(new, x, y) > before)

    return step, wrapped.init


def mlp_harm_probe(
    tx: optax.GradientTransformation,
    params: Sequence[dict[str, jax.Array]],
    state: Any,
    x: ArrayLike,
    y: ArrayLike,
    *,
    num_iterations: int = 100,
    ridge: ArrayLike = DEFAULT_RIDGE,
    probe_ridges: Sequence[float] = (),
    full_qp_iterations: int = 1000,
    tol: float = 1e-4,
) -> dict[str, jax.Array]:
    """First-order harm on the full model of the base, proxy and full-QP directions on a batch.

    From exact per-sample gradients ``g_i`` (the rows of ``J``) at ``params``: the base direction
    ``u = −update/scale`` of ``tx`` (gradient units), the proxy's corrections ``u + w·J`` with its
    dual ``w`` at ``ridge`` (``"reweight"``: on every parameter; ``"head"``: on the head only), the
    exact full-model QP ``u + w*·J`` (:func:`jaxlab.optim.exact_harm_weights`, no ridge,
    ``full_qp_iterations``) and the proxy at each of ``probe_ridges`` (``"ridge_<ρ>"``). Every
    direction is compared at the same parameters and batch, so a mass ratio to ``base`` compares
    them pairwise.

    Args:
      tx: the base optimizer.
      params: the network's parameters.
      state: ``tx``'s state at ``params``.
      x: ``(B, in)`` inputs.
      y: ``(B,)`` integer labels.
      num_iterations: the proxy's dual iterations.
      ridge: the proxy's ridge.
      probe_ridges: further ridges whose proxy directions are measured.
      full_qp_iterations: iterations of the exact QP.
      tol: :func:`jaxlab.optim.first_order_harm`'s tolerance.

    Returns:
      ``{name: harmed fraction, f"{name}_mass": harm mass}`` for ``base``, ``reweight``,
      ``head``, ``full_qp`` and each ``ridge_<ρ>``, and ``weight_correlation``, the correlation
      of the proxy's and the full QP's weights.

    Examples:
      >>> import jax, optax
      >>> from jaxlab.uncertainty import mlp_init
      >>> params = mlp_init(jax.random.key(0), (4, 8, 3))
      >>> tx = optax.sgd(0.1)
      >>> x, y = jax.random.normal(jax.random.key(1), (6, 4)), jax.numpy.arange(6) % 3
      >>> out = jax.jit(lambda p: mlp_harm_probe(tx, p, tx.init(p), x, y, num_iterations=50,
      ...                                        full_qp_iterations=200))(params)
      >>> float(out["full_qp"]) <= float(out["base"])
      True
    """
    _check_mlp(params)
    per_sample = jax.vmap(
        jax.grad(lambda p, xi, yi: _mlp_loss(p, xi[None], yi[None])[0]), in_axes=(None, 0, 0)
    )(params, x, y)
    jac = jax.vmap(lambda g: ravel_pytree(g)[0])(per_sample)
    mean_grad = jax.tree.map(lambda g: jnp.mean(g, 0), per_sample)
    update, _ = tx.update(mean_grad, state, params)
    head = jax.tree.map(jnp.zeros_like, params)
    head[-1] = jax.tree.map(jnp.ones_like, params[-1])
    head_mask = ravel_pytree(head)[0]
    _, _, info = _proxy_step(tx, params, num_iterations, ridge)(params, state, (x, y))
    u = -ravel_pytree(update)[0] / info.update_scale  # the base direction, gradient units
    w_proxy = info.dual / info.update_scale
    w_full = exact_harm_weights(jac, u, num_iterations=full_qp_iterations, ridge=0.0)
    directions = {
        "base": u,
        "reweight": u + w_proxy @ jac,
        "head": u + head_mask * (w_proxy @ jac),
        "full_qp": u + w_full @ jac,
    }
    for r in probe_ridges:
        _, _, r_info = _proxy_step(tx, params, num_iterations, r)(params, state, (x, y))
        directions[f"ridge_{r:g}"] = u + (r_info.dual / r_info.update_scale) @ jac
    out = {}
    for name, d in directions.items():
        rate, mass = first_order_harm(jac, d, tol=tol)
        out[name] = rate
        out[f"{name}_mass"] = mass
    wp, wf = w_proxy - jnp.mean(w_proxy), w_full - jnp.mean(w_full)
    out["weight_correlation"] = jnp.sum(wp * wf) / jnp.maximum(
        jnp.linalg.norm(wp) * jnp.linalg.norm(wf), 1e-30
    )
    return out


class MLPHarmTraining(NamedTuple):
    """The jitted programs of :func:`mlp_harm_training`, each vmapped over members.

    Attributes:
      init: ``(keys, learning_rates) -> (params, state)``.
      chunk: ``(params, state, keys, learning_rates, labels) -> (params, state, harm_rates)``,
        ``chunk_steps`` steps; ``harm_rates`` is ``(members, chunk_steps)``.
      probe: ``(params, state, keys, learning_rates, labels) -> dict`` of
        :func:`mlp_harm_probe` on one batch per member.

    :meth:`train` runs them chunk by chunk.

    Examples:
      >>> MLPHarmTraining._fields
      ('init', 'chunk', 'probe')
    """

    init: Callable
    chunk: Callable
    probe: Callable

    def train(
        self,
        init_keys: jax.Array,
        chunk_keys: Sequence[jax.Array],
        learning_rates: jax.Array,
        labels: jax.Array,
        *,
        probe: bool = False,
    ) -> tuple[Any, Any, np.ndarray, dict[str, np.ndarray] | None]:
        """``len(chunk_keys) − 1`` chunks from ``init``, chunk ``c`` with ``chunk_keys[c]``.

        With ``probe``, :attr:`probe` runs before every chunk and after the last one, on the
        batch of key ``fold_in(chunk_keys[c], 10_000)``.

        Returns:
          ``(params, state, harm_rates, probes)``: ``harm_rates`` ``(members, steps)``;
          ``probes`` ``{quantity: (members, len(chunk_keys))}`` (None without ``probe``).
        """
        params, state = self.init(init_keys, learning_rates)
        rates, probes = [], []
        for c, keys in enumerate(chunk_keys):
            if probe:
                probe_keys = jax.vmap(lambda k: jax.random.fold_in(k, 10_000))(keys)
                found = self.probe(params, state, probe_keys, learning_rates, labels)
                probes.append(jax.tree.map(np.asarray, found))
            if c < len(chunk_keys) - 1:
                params, state, r = self.chunk(params, state, keys, learning_rates, labels)
                rates.append(np.asarray(r))
        stacked = {k: np.stack([p[k] for p in probes], 1) for k in probes[0]} if probes else None
        return params, state, np.concatenate(rates, axis=1), stacked


def mlp_harm_training(
    arm: str,
    optimizer: Callable[[jax.Array], optax.GradientTransformation],
    init_params: Callable[[jax.Array], Any],
    train_x: ArrayLike,
    *,
    batch_size: int,
    chunk_steps: int,
    num_iterations: int = 100,
    ridge: ArrayLike = DEFAULT_RIDGE,
    probe_ridges: Sequence[float] = (),
    full_qp_iterations: int = 1000,
    tol: float = 1e-4,
) -> MLPHarmTraining:
    """Trains members (seeds, learning rates, label sets) of one arm as vmapped, jitted chunks.

    Member ``m`` has its own key, learning rate and training labels (``labels[m]`` over the
    shared inputs ``train_x``); each step of :func:`mlp_harm_step` samples ``batch_size`` rows
    uniformly with replacement (key ``split(key, chunk_steps)[t]``). Keys shared across arms give
    paired comparisons.

    Args:
      arm: one of :data:`HARM_ARMS`.
      optimizer: ``learning_rate -> optax.GradientTransformation``.
      init_params: ``key -> params`` (e.g. :func:`jaxlab.uncertainty.mlp_init` with the sizes).
      train_x: ``(n, in)`` training inputs.
      batch_size: rows per step.
      chunk_steps: steps per ``chunk`` call.
      num_iterations: dual iterations of the harm solvers.
      ridge: the arm's dual ridge (the probe's proxy uses it too).
      probe_ridges: see :func:`mlp_harm_probe`.
      full_qp_iterations: see :func:`mlp_harm_probe`.
      tol: see :func:`mlp_harm_probe`.

    Returns:
      an :class:`MLPHarmTraining`.

    Examples:
      >>> import jax, jax.numpy as jnp, optax
      >>> from jaxlab.uncertainty import mlp_init
      >>> x = jax.random.normal(jax.random.key(0), (20, 4))
      >>> labels = jnp.stack([jnp.arange(20) % 3] * 2)
      >>> programs = mlp_harm_training("base", optax.sgd, lambda k: mlp_init(k, (4, 8, 3)), x,
      ...                              batch_size=5, chunk_steps=3)
      >>> keys, lrs = jax.random.split(jax.random.key(1), 2), jnp.array([0.1, 0.2])
      >>> params, state = programs.init(keys, lrs)
      >>> params, state, rates = programs.chunk(params, state, keys, lrs, labels)
      >>> rates.shape
      (2, 3)
      >>> _, _, rates, probes = programs.train(keys, [keys, keys, keys], lrs, labels)
      >>> rates.shape, probes is None
      ((2, 6), True)
    """
    check_choice(arm, "arm", HARM_ARMS)
    check_callable(optimizer, "optimizer")
    check_callable(init_params, "init_params")
    batch_size = check_positive_int(batch_size, "batch_size")
    chunk_steps = check_positive_int(chunk_steps, "chunk_steps")
    train_x = jnp.asarray(train_x)
    step_kwargs = {"num_iterations": num_iterations, "ridge": ridge}

    def init(key, lr):
        params = init_params(key)
        _, init_state = mlp_harm_step(arm, optimizer(lr), params, **step_kwargs)
        return params, init_state(params)

    def chunk(params, state, key, lr, labels):
        step, _ = mlp_harm_step(arm, optimizer(lr), params, **step_kwargs)

        def body(carry, k):
            p, s = carry
            index = jax.random.randint(k, (batch_size,), 0, labels.shape[0])
            p, s, rate = step(p, s, train_x[index], labels[index])
            return (p, s), rate

        keys = jax.random.split(key, chunk_steps)
        (params, state), rates = jax.lax.scan(body, (params, state), keys)
        return params, state, rates

    def probe(params, state, key, lr, labels):
        index = jax.random.randint(key, (batch_size,), 0, labels.shape[0])
        return mlp_harm_probe(
            optimizer(lr),
            params,
            state,
            train_x[index],
            labels[index],
            num_iterations=num_iterations,
            ridge=ridge,
            probe_ridges=probe_ridges,
            full_qp_iterations=full_qp_iterations,
            tol=tol,
        )

    def vm(f, axes):
        return jax.jit(jax.vmap(f, in_axes=axes))

    return MLPHarmTraining(vm(init, (0, 0)), vm(chunk, (0, 0, 0, 0, 0)), vm(probe, (0, 0, 0, 0, 0)))


def mlp_harm_step_seconds(
    tx: optax.GradientTransformation,
    params: Sequence[dict[str, jax.Array]],
    x: ArrayLike,
    y: ArrayLike,
    *,
    num_iterations: int = 100,
    ridges: dict[str, float] | None = None,
    steps: int = 20,
    repeats: int = 9,
) -> dict[str, float]:
    """Median wall-clock seconds per step of each of :data:`HARM_ARMS` on one batch.

    Each arm's :func:`mlp_harm_step` runs ``steps`` times in one jitted scan (compiled and run
    once untimed); the arms are then timed in turn (base, reweight, head, exact, base, ...)
    ``repeats`` times, so that a slow spell of a shared machine hits all of them.

    Args:
      tx: the base optimizer.
      params: the network's parameters.
      x: ``(B, in)`` inputs.
      y: ``(B,)`` labels.
      num_iterations: dual iterations of the harm solvers.
      ridges: ``{arm: ridge}`` (missing arms: the library's default ridge).
      steps: steps per timed call.
      repeats: timed calls per arm.

    Returns:
      ``{arm: seconds per step}``.

    Examples:
      >>> import jax, optax
      >>> from jaxlab.uncertainty import mlp_init
      >>> params = mlp_init(jax.random.key(0), (4, 8, 3))
      >>> x, y = jax.random.normal(jax.random.key(1), (6, 4)), jax.numpy.arange(6) % 3
      >>> seconds = mlp_harm_step_seconds(optax.sgd(0.1), params, x, y, num_iterations=5,
      ...                                 steps=2, repeats=1)
      >>> sorted(seconds) == sorted(HARM_ARMS)
      True
    """
    steps = check_positive_int(steps, "steps")
    repeats = check_positive_int(repeats, "repeats")
    ridges = {} if ridges is None else dict(ridges)
    calls = {}
    for arm in HARM_ARMS:
        step, init_state = mlp_harm_step(
            arm,
            tx,
            params,
            num_iterations=num_iterations,
            ridge=ridges.get(arm, DEFAULT_RIDGE),
        )

        @jax.jit
        def many(p, s, step=step):
            def body(c, _):
                p, s, _ = step(*c, x, y)
                return (p, s), None

            return jax.lax.scan(body, (p, s), None, length=steps)[0]

        state = init_state(params)
        jax.block_until_ready(many(params, state))
        calls[arm] = lambda many=many, state=state: many(params, state)
    samples = {arm: [] for arm in HARM_ARMS}
    for _ in range(repeats):
        for arm, call in calls.items():
            start = time.perf_counter()
            jax.block_until_ready(call())
            samples[arm].append((time.perf_counter() - start) / steps)
    return {arm: float(np.median(v)) for arm, v in samples.items()}


def mlp_accuracy(params: Sequence[dict[str, jax.Array]], x: ArrayLike, y: ArrayLike) -> jax.Array:
    """Classification accuracy ``mean(argmax logits == y)`` of a dense network.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.uncertainty import mlp_init
      >>> params = mlp_init(jax.random.key(0), (4, 8, 3))
      >>> x = jax.random.normal(jax.random.key(1), (10, 4))
      >>> y = jnp.argmax(mlp_logits_and_features(params, x)[0], -1)
      >>> float(mlp_accuracy(params, x, y))
      1.0
    """
    _check_mlp(params)
    return jnp.mean(jnp.argmax(mlp_logits_and_features(params, x)[0], -1) == y)
