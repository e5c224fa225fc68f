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
# # CreDRO: credal ensembles from distributionally robust members
#
# K. Wang, A. Faza, F. Cuzzolin, S. Chau, M.-F. Moens, H. Hallez, *Learning Credal Ensembles via
# Distributionally Robust Optimization*, ICML 2026 (arXiv 2602.08470). The reconstruction
# choices are in `notes/credro.md`.
#
# **Idea.** Train each ensemble member under a different degree of relaxation of the i.i.d.
# train/test assumption: member $m$ minimises a distributionally robust objective (DRO) at level
# $\delta_m$, here CVaR, the mean of the $\lceil\delta B\rceil$ largest minibatch losses
# ($\delta = 1$ is ordinary ERM). Where train and test differ, members that weight hard samples
# differently disagree. Their softmax outputs span a **credal set**, the box
# $K(x) = \{p \in \Delta_C: \min_m p_m \le p \le \max_m p_m\}$, and its width in entropy,
#
# $$\mathrm{EU}(x) = \max_{p\in K} H(p) - \min_{p\in K} H(p),$$
#
# is the epistemic uncertainty: zero when all members agree.
#
# This notebook: (1) DRO objectives; (2) the credal set and its entropies; (3) a credal
# ensemble on digits under distribution shift; (4) the experiment.

# %%
import os

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from jaxlab.experiments import get
from jaxlab.uncertainty import (
    accuracy_rejection_curve,
    auroc,
    chi2_dro_loss,
    credal_box,
    cvar_loss,
    digits_shift_splits,
    ensemble_init,
    entropy_of_mean,
    epistemic_uncertainty,
    lower_entropy,
    mlp_apply,
    mutual_information,
    tilted_loss,
    train_credal_ensemble,
    upper_entropy,
)

PROFILE = os.environ.get("JAXLAB_NOTEBOOK_PROFILE", "quick")
SMOKE = PROFILE == "smoke"
print(f"profile {PROFILE}")

# %% [markdown]
# ## 1. Three DRO families at several levels
#
# On the losses $(1, 2, 3, 4, 5)$: CVaR moves from the mean (3) to the maximum (5) as $\delta$
# shrinks; the KL (tilted) objective as the temperature falls; the $\chi^2$ objective as the
# radius grows.

# %%
losses = jnp.array([1.0, 2.0, 3.0, 4.0, 5.0])
for d in (1.0, 0.8, 0.4, 0.2):
    print(f"CVaR δ={d}: {float(cvar_loss(losses, level=d)):.3f}", end="   ")
print()
for t in (jnp.inf, 2.0, 0.5):
    print(f"KL τ={float(t)}: {float(tilted_loss(losses, temperature=t)):.3f}", end="   ")
print()
for r in (0.0, 0.1, 0.5, 2.0):
    print(f"χ² ρ={r}: {float(chi2_dro_loss(losses, radius=r)):.3f}", end="   ")
print()

# %% [markdown]
# ## 2. A credal set by hand
#
# Three members over three classes (the note's check 1). The upper entropy is attained by
# water-filling, the lower one at a vertex of the box (enumerated exactly).

# %%
members = jnp.array([[0.7, 0.2, 0.1], [0.5, 0.3, 0.2], [0.6, 0.1, 0.3]])
lower, upper = credal_box(members)
print("box lower", lower, "upper", upper)
print(f"H̄ = {float(upper_entropy(lower, upper)):.6f}  H̲ = {float(lower_entropy(lower, upper)):.6f}")
print(
    f"EU = {float(epistemic_uncertainty(members)):.6f}  (identical members give 0: "
    f"{float(epistemic_uncertainty(jnp.stack([members[0]] * 3))):.1f})"
)
print(
    f"deep-ensemble measures: H(p̄) = {float(entropy_of_mean(members)):.6f}, "
    f"MI = {float(mutual_information(members)):.6f}"
)

# %% [markdown]
# ## 3. Digits under distribution shift
#
# Digits 0-4 are in distribution; training under-samples classes 3 and 4 (a class-prior shift);
# the shifted test set is the ID test set rotated by ±30° with pixel noise. We train a deep
# ensemble (all members at ERM) and a CreDRO ensemble (CVaR levels 1 ... 0.2) from the same
# initialisations and minibatches, vmapped over members, and compare their EU on digits 5-9.

# %%
splits = digits_shift_splits(jax.random.key(0), train_class_weights=(1, 1, 1, 0.3, 0.3))
steps = 600
init = ensemble_init(jax.random.key(1), 5, (64, 128, 5))  # the experiment's members
arms = {"deep ensemble": jnp.ones(5), "CreDRO": jnp.array([1.0, 0.8, 0.6, 0.4, 0.2])}
train = jax.jit(
    lambda levels: train_credal_ensemble(
        mlp_apply, init, splits.train_x, splits.train_y, jax.random.key(2), levels=levels,
        steps=steps,
    )[0]
)  # fmt: skip
probs = jax.jit(lambda p, x: jax.nn.softmax(jax.vmap(mlp_apply, in_axes=(0, None))(p, x)))


@jax.jit
def evaluate(params):
    """EU on the ID test set, on digits 5-9 and on the shifted set; shifted-set correctness."""
    shifted = probs(params, splits.shifted_x)
    correct = jnp.argmax(shifted.mean(0), -1) == splits.shifted_y
    eus = [epistemic_uncertainty(probs(params, x)) for x in (splits.test_x, splits.near_ood_x)]
    return *eus, epistemic_uncertainty(shifted), correct


fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.5))
for name, levels in arms.items():
    params = train(levels)
    eu_in, eu_out, eu_shifted, correct = (np.asarray(v) for v in evaluate(params))
    rates = np.arange(10) / 10
    curve = accuracy_rejection_curve(correct, eu_shifted, rates)
    print(
        f"{name:14s} AUROC(EU) digits 5-9: {auroc(eu_in, eu_out):.3f}; accuracy on the shifted "
        f"set {correct.mean():.3f}, after rejecting the 50% most uncertain {curve[5]:.3f}"
    )
    left.hist(np.asarray(eu_out), bins=30, alpha=0.5, label=f"{name}: digits 5-9")
    right.plot(rates, curve, "o-", label=name)
left.set_xlabel("EU (bits)")
left.legend(fontsize=8)
right.set_xlabel("rejection rate")
right.set_ylabel("accuracy of retained (shifted set)")
right.legend(fontsize=8)
plt.show()

# %% [markdown]
# ## 4. The experiment
#
# `credro` repeats this over 10 paired seeds (the arms share initialisations and minibatches)
# with three OOD sets (digits 5-9, uniform noise, the shifted ID images), the KL variant, mutual
# information, entropy of the mean and a single model's entropy as baselines. Every decision is a
# paired 95% interval over the seeds, classified against the note's ±0.01 AUROC margin:
# *supported* when the whole interval is at or above +0.01, *contradicted* at or below −0.01,
# *not reproduced at this scale* strictly inside, *undecided* when it straddles a margin.
#
# What the quick profile (seed 0, 2-core CPU, 2.4-3.8 min on a loaded machine) measured:
#
# - **The main comparison** (800 steps, the note's CVaR grid): CreDRO's EU AUROC is
#   +0.0036 above the deep ensemble's, 95% interval [+0.0013, +0.0058], positive in 9 of 10
#   seeds. The effect is real but resolved *below* the note's +0.01: not reproduced at this
#   scale. It comes mostly from the uniform-noise set (+0.0088 [+0.0051, +0.0125]); digits 5-9
#   (+0.0012 [−0.0017, +0.0041]) and the rotated images (+0.0007 [−0.0015, +0.0028]) are
#   unresolved. Selective classification on the shifted set is better at every rejection rate
#   (AUC 0.819 vs 0.802).
# - **The sweep** over training budgets and relaxation grids (AUROC difference, 95% interval):
#
#   | steps (member train accuracy) | note's grid (1 ... 0.2) | strong grid (1 ... 1/16) |
#   |---|---|---|
#   | 50 (0.90: no interpolation) | −0.291 [−0.332, −0.249] | −0.342 [−0.389, −0.295] |
#   | 200 (0.998) | −0.039 [−0.053, −0.024] | −0.425 [−0.460, −0.391] |
#   | 800 (1.000) | +0.0036 [+0.0013, +0.0058] | +0.0030 [−0.0005, +0.0065] |
#
#   The four cells below 800 steps are contradicted (the whole interval at or below −0.01), the
#   two at 800 steps not reproduced (inside ±0.01).
#
#   Before the members converge, the DRO members (trained on the hardest few samples of each
#   batch) disagree on in-distribution images too, so the credal EU ranks ID and OOD images
#   *worse* than the deep ensemble's; the small advantage appears only once every member
#   interpolates its training set.
# - **CreDRO's EU against the deep ensemble's mutual information** (the ensemble's usual score):
#   +0.0028 [+0.0003, +0.0053], again resolved inside ±0.01; the deep ensemble's MI and its own
#   credal EU are indistinguishable (+0.0008 [−0.0005, +0.0020]).
#
# The smoke profile only shows the experiment's setup; the quick run prints every part.

# %%
experiment = get("credro")
print(experiment.claim)
if not SMOKE:
    result = experiment.run(experiment.make_config("quick"), jax.random.key(0))
    for part in result.parts:
        print(part.status.upper(), part.claim, "\n    ", part.measured)
else:
    print(experiment.make_config("quick"))
