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
# # DeVA: decoupling variance adaptation from the update direction
#
# Song, Bai, Zhang, Bullins, Gleich, *Decoupling Variance and Scale-Invariant Updates in Adaptive
# Gradient Descent for Unified Vector and Matrix Optimization*, ICML 2026 (arXiv 2602.06880).
#
# Adam's step can be written as
# $$\frac{m}{\sqrt v} = \underbrace{\frac{|m|}{\sqrt v}}_{\Gamma} \odot \operatorname{sign}(m),$$
# a **variance-adaptation** factor $\Gamma$ (large when the momentum is consistent, small when it
# is noise) times the steepest-descent direction of the $\ell_\infty$ norm. DeVA keeps $\Gamma$
# and chooses the direction by geometry:
#
# * **DeVA-ℓ∞** (any tensor): $v$ is an EMA of $m^2$ (not $g^2$) and the step is
#   $\Gamma \odot \operatorname{sign}(m)$ with $\Gamma = \sqrt{m^2/(v+\varepsilon)}$;
# * **DeVA-S∞** (matrices): the direction is the polar factor $\operatorname{msign}(M) = UV^\top$
#   (Muon's direction), computed in a SOAP eigenbasis, and $\Gamma_{ij} =
#   \sqrt{r_i c_j}/\sqrt{V_{ij}+\varepsilon}$ from the row and column norms of the momentum.
#
# This notebook: (1) the two update rules on tiny examples, checked against hand computations;
# (2) the authors' 9×9 quadratic toy, against the authors' Muon, with a learning-rate sweep;
# (3) DeVA against Muon on a small byte-level GPT, each at its own tuned learning rate.

# %%
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxlab import optim
from jaxlab.experiments import NullProgress
from jaxlab.experiments import deva as experiment

PROFILE = os.environ.get("JAXLAB_NOTEBOOK_PROFILE", "quick")
CONFIG = experiment.DevaConfig.for_profile(PROFILE)
print(f"profile {PROFILE}: toy {CONFIG.toy_seeds} seeds x {CONFIG.toy_steps} steps, "
      f"GPT {CONFIG.lm_steps} steps x {CONFIG.lm_seeds} seeds per learning rate")  # fmt: skip

# %% [markdown]
# ## 1. The update rules
#
# **DeVA-ℓ∞ with a constant gradient.** With $g \equiv 1$ and $\beta = (0.9, 0.99)$ the first
# step is $0.1/\sqrt{10^{-4} + 10^{-5}} = 9.53$ learning rates: there is no bias correction, and
# $\Gamma$ and $\operatorname{sign}$ are both scale-free, so the first steps are 5-10x the steady
# state. Use a warmup.

# %%
tx = optim.scale_by_deva_vector(b1=0.9, b2=0.99)
state = tx.init(jnp.zeros(1))
update = jax.jit(tx.update)  # one compiled step instead of one dispatch per operation
steps = []
for _ in range(5):
    u, state = update(jnp.ones(1), state)
    steps.append(float(u[0]))
print("step / lr, t = 1..5:", np.round(steps, 4))
m = 0.1
print("by hand, t = 1:", round(m / np.sqrt(0.01 * m**2 + 1e-5), 4))

# %% [markdown]
# **DeVA-S∞ with a constant gradient.** The first call only builds the eigenbasis (zero update).
# Afterwards the update is $s_t \cdot 0.2\sqrt{\max(n, m)}\,\operatorname{msign}(G)$: $\Gamma$ is
# the same for every entry when the gradient never changes, and the bias correction
# $\sqrt{1-\beta_2^t}/(1-\beta_1^t)$ is not cancelled by anything ($s_1 = 20$ for
# $\beta = 0.95$).

# %%
g = jax.random.normal(jax.random.key(0), (6, 4))
tx = optim.scale_by_deva_matrix()
state = tx.init(g)
update = jax.jit(tx.update)
direction = 0.2 * np.sqrt(6) * jax.jit(optim.newton_schulz_msign)(g)
for t in range(4):
    u, state = update(g, state)
    ratio = float(jnp.sum(u * direction) / jnp.sum(direction**2))
    print(f"call {t}: update / (0.2·√6·msign(G)) = {ratio:.3f}")

# %% [markdown]
# The Newton–Schulz iteration only approximates $UV^\top$: its singular values land in about
# $[0.68, 1.2]$, which is what Muon uses too.

# %%
msign = jax.jit(optim.newton_schulz_msign)
sv = jnp.linalg.svd(msign(jax.random.normal(jax.random.key(1), (64, 16))), compute_uv=False)
print(f"singular values of msign(M): [{float(sv.min()):.3f}, {float(sv.max()):.3f}]")

# %% [markdown]
# In a network, `optim.deva` sends hidden matrices to DeVA-S∞ and everything else (biases,
# norm gains, the embedding, the LM head) to AdamW, like Muon set-ups do:

# %%
params = {"embedding": jnp.zeros((256, 32)), "wq": jnp.zeros((32, 32)), "gain": jnp.ones(32),
          "head": jnp.zeros((32, 256))}  # fmt: skip
print(optim.deva_matrix_labels(params))

# %% [markdown]
# ## 2. The quadratic toy
#
# $f(X) = \tfrac12\operatorname{tr}(X^\top H X)$ with $X \in \mathbb R^{9\times 9}$ and a
# block-diagonal $H$. *Heterogeneous*: the blocks have very different scales
# ($\{1,2,3\}, \{99,100,101\}, \{4998,4999,5000\}$) — a left preconditioner that adapts per
# block pays off. *Homogeneous*: every block has the whole spread ($\{1, 99, 4998\}, \dots$).
# Each step samples 3 rows of $H^{1/2}$ and differentiates $\tfrac12\cdot 3\,\|A_b X\|_F$ (the
# reference's non-squared loss). The authors' protocol: lr 0.1 for every adaptive method,
# $\beta_1 = 0$, $\beta_2 = 0.99$; GD uses the full gradient and lr $10^{-4}$.
#
# **Which Muon.** The authors' Muon multiplies $\operatorname{msign}(g)$ by
# $\sqrt{\max(\text{rows}, \text{cols})}$, 3 on a 9×9 matrix, so at lr 0.1 it steps 0.3.
# `optax.contrib.muon`'s default scale on a square matrix is 1 (a third of that step); its
# `consistent_rms=1.0` option gives exactly the authors' factor. The verdict compares against
# the authors' Muon (`muon`); optax's default (`muon_optax`) is shown beside it:

# %%
g = jax.random.normal(jax.random.key(2), (9, 9))
peers = {
    "muon (authors' scale)": optax.contrib.muon(0.1, beta=0.0, nesterov=False, consistent_rms=1.0),
    "muon_optax (default)": optax.contrib.muon(0.1, beta=0.0),
}
for name, tx in peers.items():
    u, _ = tx.update(g, tx.init(jnp.zeros((9, 9))), jnp.zeros((9, 9)))
    rms = float(jnp.sqrt(jnp.mean(u**2)))
    print(f"{name:22s} first update RMS {rms:.4f} = 0.1 x scale x 1/3 (msign's RMS on 9x9)")

# %% [markdown]
# Both studies run through the experiment's own `run` (the same compiled programs as `jaxlab run
# deva`); its figures and metrics are shown below. Each method runs on the same seeds (Hessian,
# start, row samples), so the medians are compared by a *paired* bootstrap over seeds: a
# comparison holds when it holds in at least 97.5 % of resamples, is contradicted at most 2.5 %,
# and is undecided in between (the part is then `unresolved`).

# %%
result = experiment.run(CONFIG, jax.random.key(0), NullProgress())
toy = result.metrics["toy"]
for hessian in ("heterogeneous", "homogeneous"):
    finals = {
        m: round(float(e["median_final_f"]), 4) for m, e in toy[f"{hessian}_frobenius"].items()
    }
    print(hessian, dict(sorted(finals.items(), key=lambda kv: kv[1])))
for c in result.metrics["toy_comparisons"]:
    print(f"{'/'.join(c['smaller'])} < {'/'.join(c['larger'])}: {c['decision']} "
          f"({100 * c['bootstrap_share']:.1f} % of resamples)")  # fmt: skip
print("toy part:", result.parts[0].status)
result.figures["quadratic_toy"]

# %% [markdown]
# The note's numpy re-run of the reference orders the heterogeneous case DeVA-S∞ (≈0.03) < Muon
# (≈0.12) < Adam ≈ DeVA-ℓ∞ ≈ SOAP (≈0.3) ≪ GD, with SOAP best on the homogeneous one.
#
# **Does the ordering depend on the lr convention?** One learning rate for every method favours
# whichever method's step size suits 0.1. The sweep below gives each method its own best lr
# (median final $f$ against lr; not gating):

# %%
result.figures["quadratic_toy_lr_sweep"]

# %% [markdown]
# ## 3. A small language model
#
# Same byte-level GPT, data, batches and lr schedule (warmup then linear decay) for Muon and
# DeVA (hidden matrices on Muon / DeVA-S∞, embeddings, head and gains on AdamW, as both use them
# in practice). Each method gets its own peak lr: a grid of at least 3 values, run on 3 seeds,
# extended while the best (mean final smoothed loss over seeds) sits on its edge. Then, per
# seed, how many steps does DeVA at its best lr need to reach Muon's best smoothed training loss
# at Muon's best lr? The verdict is the mean saving with a 95 % t-interval over seeds: pass above
# 0, fail below, `unresolved` when the interval contains 0.

# %%
lm = result.metrics["language_model"]
for name, entry in lm["methods"].items():
    means = {
        lr: round(float(np.mean(v["final_smoothed_loss"])), 4) for lr, v in entry["by_lr"].items()
    }
    print(f"{name}: best lr {entry['best_lr']:g} (bracketed: {entry['bracketed']}); {means}")
for s in lm["seeds"]:
    print(f"target {s['target_loss']:.4f}: DeVA {s['deva_steps']} vs Muon {s['muon_steps']} "
          f"steps, saving {s['saving_percent']:.1f} %")  # fmt: skip
saving = lm["saving_percent"]
low, high = float(saving["low"]), float(saving["high"])
print(f"mean saving {float(saving['mean']):.1f} %, 95 % interval [{low:.1f}, {high:.1f}] %; "
      f"part: {result.parts[1].status}")  # fmt: skip
result.figures["language_model"]

# %% [markdown]
# The paper reports DeVA reaching NanoGPT's target loss with 6.6 % fewer tokens than Muon at
# 275M parameters. Three seeds of a tiny CPU model give a wide interval; the `deva` experiment
# (`jaxlab run deva`) records the numbers and the verdict, and its `full` profile (a 6-layer,
# d = 256 GPT with AdamW as a third reference) is meant for an accelerator.
#
# To use DeVA in your own loop:
#
# ```python
# tx = optax.chain(optax.clip_by_global_norm(1.0),
#                  optim.deva(optax.warmup_cosine_decay_schedule(0, 1e-3, 200, 10_000)))
# ```

# %%
tx = optax.chain(optax.clip_by_global_norm(1.0), optim.deva(1e-3))
print(type(tx).__name__)
