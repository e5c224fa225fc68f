# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Asynchronous pipelines: one step of gradient delay, and how to correct it
#
# A. Zmushko, M. Petrov, A. Abdullaev, D. Khrushchev, S. Horváth, *One-Step Gradient Delay is
# Not a Barrier for Large-Scale Asynchronous Pipeline Parallel LLM Pretraining*, ICML 2026
# (arXiv 2606.30634).
#
# **Pipeline parallelism** splits a model into $S$ stages on $S$ devices and streams
# micro-batches through them. A synchronous schedule (GPipe, 1F1B) waits for the pipeline to
# drain before every weight update, so a fraction $(S-1)/(M+S-1)$ of the device time is idle
# (the *bubble*, $M$ micro-batches per step). **PipeDream-2BW** never drains: it keeps two weight
# versions per stage and applies each update one step late,
#
# $$x_{t+1} = x_t - \eta\, U_t\big(\nabla f(x_{t-1}; \xi_t)\big).$$
#
# The paper's finding: this one-step delay costs AdamW a lot (final-loss gap $> 0.2$) but Muon
# almost nothing ($0.012$), and a cheap correction recovers most of what is left.
#
# This notebook: (1) the delay as an optax wrapper, `jaxlab.optim.delayed`, and why delay
# shrinks the stable step size; (2) a real 2BW pipeline on simulated devices, checked against the
# wrapper, and the schedules' bubbles; (3) the AdamW-vs-Muon experiment on a tiny transformer.

# %%
import functools
import os

import jax

# Four simulated CPU devices for the pipeline stages (must precede any JAX computation), unless
# JAX_NUM_CPU_DEVICES already asks for a number (the pipeline uses the first four).
if "JAX_NUM_CPU_DEVICES" not in os.environ:
    jax.config.update("jax_num_cpu_devices", 4)

import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

from jaxlab.distributed import (  # noqa: E402
    gpipe_train,
    make_mesh,
    pipedream_2bw_train,
    pipeline_schedule,
    sequential_loss,
)
from jaxlab.optim import delayed  # noqa: E402

PROFILE = os.environ.get("JAXLAB_NOTEBOOK_PROFILE", "quick")
SMOKE = PROFILE == "smoke"
print(f"profile {PROFILE}")

# %% [markdown]
# ## 1. The delay as an optimizer wrapper
#
# `delayed(inner, delay_steps=D)` keeps a FIFO of the last $D$ gradients in the optimizer state.
# At call $t$ it receives $\nabla f(x_t)$, stores it, and hands the gradient from call $t-D$ to
# the inner optimizer; the first $D$ updates are zero (the pipeline filling up). With $D = 0$ it
# *is* the inner optimizer.

# %%
tx = delayed(optax.sgd(1.0), delay_steps=1)
params = jnp.zeros(2)
state = tx.init(params)
for g in ([1.0, 0.0], [0.0, 2.0], [3.0, 3.0]):
    update, state = tx.update(jnp.asarray(g), state, params)
    print(f"gradient {g} -> update {np.asarray(update)}")

# %% [markdown]
# On $f(x) = \tfrac{a}{2}x^2$ gradient descent is stable for $\eta a < 2$. With one step of
# delay the iteration $x_{t+1} = x_t - \eta a x_{t-1}$ is stable only for $\eta a < 1$. The
# correction `update_extrapolation` replaces the stale update $u_t$ by
# $u_t + \lambda(u_t - u_{t-1})$, a linear guess of the fresh one. Without momentum that guess
# *shrinks* the stable range further ($\eta a < 0.618$ for $\lambda = 1$): corrections are not
# free, they pay off with momentum and noise. We measure the spectral radius by simulating each
# wrapped optimizer:


# %%
@functools.partial(jax.jit, static_argnums=(0, 2))
def simulated_radius(make, eta, steps=400):
    """Growth rate of |x| per step on f(x) = x²/2 (max over windows smooths oscillation).

    ``eta`` is traced (the transform is built inside), so each variant compiles once.
    """
    tx = make(eta)
    x = jnp.ones([])

    def body(carry, _):
        x, state = carry
        update, state = tx.update(x, state, x)
        return (x + update, state), jnp.abs(x + update)

    _, path = jax.lax.scan(body, (x, tx.init(x)), None, length=steps)
    early, late = jnp.max(path[steps // 2 - 20 : steps // 2]), jnp.max(path[-20:])
    return jnp.exp((jnp.log(late) - jnp.log(early)) / (steps - steps // 2))


etas = np.linspace(0.2, 2.2, 12 if SMOKE else 41)
variants = {
    "sync GD": lambda eta: optax.sgd(eta),
    "delayed GD": lambda eta: delayed(optax.sgd(eta)),
    "delayed + extrapolation (λ=1)": lambda eta: delayed(
        optax.sgd(eta), correction="update_extrapolation"
    ),
}
fig, ax = plt.subplots(figsize=(6, 3.2))
for label, make in variants.items():
    radii = [min(float(simulated_radius(make, e)), 1.5) for e in etas]
    ax.plot(etas, radii, label=label)
ax.axhline(1.0, color="k", lw=0.8)
for threshold in (2.0, 1.0, 0.618):
    ax.axvline(threshold, color="gray", ls=":", lw=0.8)
ax.set_xlabel("ηa")
ax.set_ylabel("spectral radius (capped at 1.5)")
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# ## 2. A real PipeDream-2BW pipeline on 4 devices
#
# Each stage is an MLP layer $h \mapsto \tanh(hW_s + b_s)$ on its own device; activations go
# forward and cotangents backward with `jax.lax.ppermute` inside `jax.shard_map`. In one tick a
# stage runs one forward and one backward slot. `pipedream_2bw_train` streams micro-batches
# without flushes; `gpipe_train` flushes after every minibatch.

# %%
S, M, K, ROWS, D = 4, 8, 6, 2, 6
mesh = make_mesh((S,), ("stage",))
k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
stage_params = {
    "w": jax.random.normal(k1, (S, D, D)) / np.sqrt(D),
    "b": 0.1 * jax.random.normal(k2, (S, D)),
}
inputs = jax.random.normal(k3, (K, M, ROWS, D))
targets = jnp.sin(inputs)
opt = optax.adam(0.05)
two_bw = pipedream_2bw_train(stage_params, opt, inputs, targets, mesh=mesh)
gpipe = gpipe_train(stage_params, opt, inputs, targets, mesh=mesh)
print(
    f"2BW idle slots: {two_bw.idle_fraction():.3f} overall, "
    f"{two_bw.idle_fraction(steady_state=True):.3f} in steady state"
)
print(
    f"GPipe idle slots: {gpipe.idle_fraction():.4f}  ((S-1)/(M+S-1) = {(S - 1) / (M + S - 1):.4f})"
)

# %% [markdown]
# The 2BW trajectory is exactly the one the one-step-delay wrapper produces on the same
# sequence of minibatches (one call later: the wrapper's first call is the pipeline fill). GPipe
# is exactly plain training.


# %%
def sequential_run(tx, steps):
    grad_fn = jax.jit(
        jax.grad(lambda p, x, y: jnp.mean(jax.vmap(lambda a, b: sequential_loss(p, a, b))(x, y)))
    )
    p, s, out = stage_params, tx.init(stage_params), []
    for t in range(steps):
        b = min(t, K - 1)
        u, s = tx.update(grad_fn(p, inputs[b], targets[b]), s, p)
        p = optax.apply_updates(p, u)
        out.append(p)
    return out


sim = sequential_run(delayed(opt, delay_steps=1), K + 1)
plain = sequential_run(opt, K)
gap_2bw = max(
    float(jnp.max(jnp.abs(two_bw.trajectory["w"][t] - sim[t + 1]["w"]))) for t in range(K)
)
gap_gpipe = max(float(jnp.max(jnp.abs(gpipe.trajectory["w"][t] - plain[t]["w"]))) for t in range(K))
print(f"max |2BW - delayed simulation| = {gap_2bw:.2e};  max |GPipe - plain| = {gap_gpipe:.2e}")

# %% [markdown]
# A discrete-event model of the schedules (forward time 1, backward time 2) gives the bubble,
# activation memory and weight versions of each:

# %%
print(f"{'schedule':22s} {'bubble':>8s} {'versions':>9s}  peak activations per stage")
for kind, p, m, k in (
    ("gpipe", 4, 8, 1),
    ("1f1b", 4, 8, 1),
    ("gpipe", 8, 32, 1),
    ("2bw", 4, 8, 100),
):
    s = pipeline_schedule(kind, p, m, num_minibatches=k)
    print(
        f"{kind} p={p} m={m} K={k:<4d}  {s.bubble_fraction:8.4f} {s.weight_versions:9d}  "
        f"{s.peak_activations}"
    )

# %% [markdown]
# ## 3. AdamW versus Muon under delay, close to the loss floor
#
# The paper's gaps are differences between *final* losses of *tuned* runs of models trained
# close to convergence. A tiny GPT on a hard language stops far above its floor, where any
# speed-up (the correction included) looks like a delay fix. So the registered experiment
# `async-delay` trains a PreNorm `SimpleGPT` on a low-entropy synthetic language whose floor is
# known exactly: `jaxlab.nn.latin_markov_language`, an order-2 chain over 16 tokens where every
# context has the next-token profile (0.85, 0.10, 0.05) on its own candidates, laid out in Latin
# squares so the stationary law is uniform. Its entropy rate is exactly
# $H(p) = -\sum_j p_j \log p_j = 0.518$ nats, and a model reading windows of $T$ tokens can at
# best reach $(\log V + (T-1)H)/T$ (the first target of a window has one token of context).

# %%
from jaxlab.nn import latin_markov_language  # noqa: E402

language = latin_markov_language(16, [0.85, 0.10, 0.05], 20_000)
print(f"entropy rate {language.entropy_rate:.4f} nats/token")
print(f"floor of a 16-token window {language.window_loss_floor(16):.4f}")
print("the three successors of context (a=0, b=1):", language.candidates[1, 0])

# %% [markdown]
# Every optimizer (AdamW with β₁ = 0.9 and 0.95, Muon + AdamW for embeddings and head) runs on a
# learning-rate grid from 3e-3 to 1e-1 in factors of 2, with 3 seeds, in four modes:
# synchronous, synchronous + correction (a control), delayed, delayed + correction. The
# correction is update extrapolation with λ = 1. With $L$ the final held-out loss:
#
# * the **gap** of an optimizer is $L_\text{delayed} - L_\text{sync}$ with each arm at its own
#   best learning rate (and, beside it, the gap at the best synchronous rate);
# * the **recovery** $r = (L_\text{delayed} - L_\text{delayed+corr}) /
#   (L_\text{delayed} - L_\text{sync})$ at the best delayed rate must be at least 0.5;
# * the **staleness-specific recovery** $r' = \big((L_\text{delayed} - L_\text{delayed+corr}) -
#   (L_\text{sync} - L_\text{sync+corr})\big) / (L_\text{delayed} - L_\text{sync})$ must be above
#   zero by 2 standard errors over seeds: a correction that helps synchronous training just as
#   much is a generic speed-up, not a delay fix.
#
# Each comparison is decided only when it is 2 standard errors from its threshold; otherwise the
# part is *unresolved*. At smoke size (12 steps) the numbers mean nothing; run the quick profile
# for the claim.

# %%
from jaxlab.experiments import get  # noqa: E402

experiment = get("async-delay")
config = experiment.make_config(PROFILE)
result = experiment.run(config, jax.random.key(0))
print(f"loss floor {result.metrics['loss_floor']:.4f}")
for name, s in result.metrics["summary"].items():
    print(
        f"{name:12s} best sync {s['best_sync']:.4f} (lr {s['best_lr']['sync']:g})  "
        f"best delayed {s['best_delayed']:.4f} (lr {s['best_lr']['delayed']:g})  "
        f"relgap {s['relative_gap']['mean']:+.4f} ± {s['relative_gap']['se']:.4f}  "
        f"r {s['recovered_fraction']['mean']:.2f} ± {s['recovered_fraction']['se']:.2f}  "
        f"r' {s['staleness_specific_recovery']['mean']:.2f} "
        f"± {s['staleness_specific_recovery']['se']:.2f}"
    )
for part in result.verdict()["parts"]:
    print(f"[{part['status']}] {part['claim']}\n       {part['measured']}")

# %%
for fig in result.figures.values():
    display(fig)  # noqa: F821 (IPython's display)
plt.close("all")

# %% [markdown]
# **Reading the result.** The delay always hurts at a fixed learning rate, but what matters is
# the gap at each optimizer's own best learning rate. Momentum-heavy, normalized updates (Muon)
# change slowly from step to step, so a one-step-old update is almost the fresh one; AdamW's
# per-coordinate normalization amplifies the stale gradient's noise. The extrapolation
# correction is cheap (one extra buffer) and optimizer-agnostic, since it only touches the
# inner optimizer's output.
#
# What the quick profile measured (1,000 steps, 3 seeds, mean ± standard error over seeds; the
# best synchronous losses are AdamW 0.699 and Muon 0.694 against the exact floor 0.659, and
# every synchronous and delayed optimum sits at lr 0.025, inside the grid):
#
# | | gap (nats) | relative gap | r | r' |
# |---|---|---|---|---|
# | AdamW (β₁ 0.9) | 0.0122 ± 0.0077 | 0.018 ± 0.011 | 0.78 ± 0.06 | 0.70 ± 0.19 |
# | AdamW (β₁ 0.95) | 0.021 ± 0.017 | 0.030 ± 0.024 | 0.97 ± 0.05 | 0.80 ± 0.05 |
# | Muon | 0.0029 ± 0.0007 | 0.0042 ± 0.0010 | 1.02 ± 0.34 | −0.24 ± 0.76 |
#
# Both parts are **unresolved**: AdamW's mean relative gap is about four times Muon's, but one
# seed (0.028 nats against 0.004 and 0.005; in another seed AdamW's gap is below Muon's) carries
# most of it, so neither AdamW's gap nor "more than twice Muon's" is 2 standard errors from its
# threshold, and AdamW with β₁ = 0.95 is not more robust than with 0.9 here. The correction
# recovers most of AdamW's gap and does so specifically under delay (r' 0.70: it barely changes
# synchronous AdamW), while for Muon it helps synchronous training as much as delayed training
# (r' indistinguishable from 0). The clearest effect sits beside the gate: at lr 0.05 the delay
# costs AdamW 0.14 nats and Muon 0.006, and the correction brings AdamW back to 0.704. At this
# scale the delay shrinks AdamW's range of stable learning rates far more than Muon's, while the
# tuned final losses differ by about 0.01 nats, much less than the paper's > 0.2 at scale.
