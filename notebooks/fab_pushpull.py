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
# # FAB: bilevel Push-Pull over time-varying directed graphs
#
# Ma, Wang, Yao, Zhang, *FAB: A First-Order AB-based Gradient Algorithm for Distributed Bilevel
# Optimization over Time-Varying Directed Graphs*, ICML 2026 (arXiv 2605.06328).
#
# $n$ agents each hold private data and want to solve a problem defined by *all* the data,
# talking only to neighbours over a network whose links are **directed** (i can hear j without j
# hearing i) and **change every round**. Two ingredients:
#
# 1. **Push-Pull (AB)** gradient tracking: decisions are *pulled* with a row-stochastic matrix
#    $A_k$ (each agent averages what it hears, knowing only its in-degree), gradient trackers are
#    *pushed* with a column-stochastic matrix $B_k$ (each agent splits what it sends, knowing only
#    its out-degree). Column sums of one keep $\sum_i y_i$ equal to the sum of the current
#    gradients, so the trackers follow the average gradient even though no doubly stochastic
#    matrix exists on an unbalanced digraph.
# 2. A fully first-order **value-function penalty** for bilevel problems
#    $\min_x f(x, y^*(x))$, $y^*(x) = \arg\min_y g(x, y)$:
#    $\min_{x,y} f(x,y) + \lambda\,(g(x,y) - \min_z g(x,z))$, whose gradients need no Hessians.
#
# This notebook: (1) the graphs and matrices; (2) Push-Pull against plain decentralised gradient
# descent; (3) FAB on a bilevel toy with a closed-form answer; (4) the `fab-hyperparameter`
# experiment (per-feature ridge tuning on `load_diabetes`).

# %%
import os

import jax

PROFILE = os.environ.get("JAXLAB_NOTEBOOK_PROFILE", "quick")
SMOKE = PROFILE == "smoke"
jax.config.update("jax_enable_x64", True)  # errors near 1e-15 need float64

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from IPython.display import display  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from jaxlab import experiments  # noqa: E402
from jaxlab.distributed import (  # noqa: E402
    check_jointly_strongly_connected,
    exponential_graph,
    pull_push_weights,
    sample_graph_sequence,
    time_varying_digraph,
)
from jaxlab.solvers import FAB, FABParams, PushPull  # noqa: E402

N = 8
print(f"profile {PROFILE}, {N} agents")

# %% [markdown]
# ## 1. Time-varying digraphs and the two matrices
#
# Convention: `adj[i, j] = True` means agent $i$ receives from agent $j$. The default generator
# keeps the directed ring $i \to i+1$ and adds every other edge with probability $p = 0.2$,
# redrawn each round from a key **shared by all agents** (`fold_in(key, k)`), so everyone agrees
# on $G_k$ without talking about it.
#
# $A_k[i, j] = 1/(1 + |N_i^{in}|)$ on $N_i^{in} \cup \{i\}$ (rows sum to 1) and
# $B_k[i, j] = 1/(1 + |N_j^{out}|)$ on $N_j^{out} \cup \{j\}$ (columns sum to 1).

# %%
adjacency = time_varying_digraph(jax.random.key(0), N)
A, B = pull_push_weights(adjacency)
print("in-degrees ", (adjacency.sum(axis=1) - 1).tolist())
print("out-degrees", (adjacency.sum(axis=0) - 1).tolist())
print("row sums of A   ", np.round(np.asarray(A.sum(axis=1)), 12).tolist())
print("column sums of B", np.round(np.asarray(B.sum(axis=0)), 12).tolist())
print("column sums of A", np.round(np.asarray(A.sum(axis=0)), 3).tolist(), "<- not 1: unbalanced")

# %% [markdown]
# The theory only needs the union of the graphs over every window of $B$ rounds to be strongly
# connected. The one-peer exponential graph (hop $2^{k \bmod 3}$ at round $k$) is disconnected
# at most rounds but connected over any 3 consecutive rounds:

# %%
sequence = sample_graph_sequence(lambda key, k: exponential_graph(N, step=k), jax.random.key(0), 6)
check_jointly_strongly_connected(sequence, window=3)
try:
    check_jointly_strongly_connected(sequence, window=1)
except ValueError as error:
    print("window 1:", error)

# %% [markdown]
# ## 2. Push-Pull against decentralised gradient descent
#
# $\varphi_i(x) = \tfrac{a_i}{2}\|x - b_i\|^2$, $a_i \in [1, 3]$: the minimiser of the average
# is $x^\star = \sum_i a_i b_i / \sum_i a_i$. Push-Pull:
#
# $$x^{k+1} = A_k(x^k - \alpha y^k),\qquad y^{k+1} = B_k y^k + \nabla\varphi(x^{k+1}) -
#   \nabla\varphi(x^k).$$
#
# Without trackers ($x^{k+1} = A_k x^k - \alpha \nabla\varphi(x^k)$) the agents settle at a
# biased point: $A_k$ weighs agents unequally and a constant step leaves a residual.

# %%
rng = np.random.default_rng(0)
a, b = jnp.asarray(rng.uniform(1, 3, N)), jnp.asarray(rng.normal(size=(N, 2)))
x_star = jnp.sum(a[:, None] * b, axis=0) / jnp.sum(a)
steps = 300 if SMOKE else 1000


def distances(tracking):
    solver = PushPull(
        grad_fn=lambda x, a_i, b_i: a_i * (x - b_i),
        graph_fn=lambda key, k: time_varying_digraph(key, N),
        stepsize=0.2,
        tracking=tracking,
        maxiter=steps,
    )
    x0 = jnp.zeros((N, 2))
    state = solver.init_state(x0, a, b, rng_key=jax.random.key(1))

    def body(carry, _):
        params, state = solver.update(*carry, a, b)
        return (params, state), jnp.max(jnp.linalg.norm(params - x_star[None], axis=1))

    return jax.lax.scan(body, (x0, state), None, steps)[1]


fig = Figure(figsize=(6, 3.5))
ax = fig.subplots()
for tracking, label in ((True, "Push-Pull"), (False, "no trackers (DGD)")):
    curve = np.asarray(distances(tracking))
    ax.semilogy(np.arange(1, steps + 1), np.maximum(curve, 1e-17), label=label)
    print(f"{label:18s} max_i ||x_i - x*|| after {steps} rounds: {curve[-1]:.2e}")
ax.set_xlabel("communication round")
ax.set_ylabel("max_i ||x_i - x*||")
ax.legend()
display(fig)

# %% [markdown]
# ## 3. FAB on a bilevel toy with a closed form
#
# $f_i(x, y) = \tfrac12 (y - c_i)^2 + \tfrac12 x^2$, $g_i(x, y) = \tfrac12 (y - x - e_i)^2$ with
# $\bar c = 1$, $\bar e = 0$: the bilevel solution is $x^\star = 1/2$ and the penalty problem's is
# $x_\lambda = \lambda / (1 + 2\lambda)$ (an $O(1/\lambda)$ bias). FAB tracks three directions,
#
# $d^x = \nabla_x f + \lambda(\nabla_x g(x, y) - \nabla_x g(x, z))$,
# $d^y = \nabla_y f / \lambda + \nabla_y g(x, y)$, $d^z = \nabla_y g(x, z)$,
#
# each with its own Push-Pull tracker. The penalty is an ordinary (traceable) number, so one
# compiled solve serves every $\lambda$.

# %%
c, e = rng.normal(size=N), rng.normal(size=N)
c, e = jnp.asarray(c - c.mean() + 1), jnp.asarray(e - e.mean())
zeros = jnp.zeros(N)


@jax.jit
def fab_toy(lam):
    solver = FAB(
        upper_grad_fn=lambda x, y, c_i, e_i: (x, y - c_i),
        lower_grad_fn=lambda x, y, c_i, e_i: (x + e_i - y, y - x - e_i),
        graph_fn=lambda key, k: time_varying_digraph(key, N),
        penalty=lam,
        upper_stepsize=0.1,
        lower_stepsize=0.3,
        maxiter=1000 if SMOKE else 5000,
        tol=1e-13,
        jit=False,  # fab_toy is the jitted function
    )
    return solver.run(FABParams(zeros, zeros, zeros), c, e, rng_key=jax.random.key(2))


for lam in (10.0, 100.0):
    out = fab_toy(jnp.asarray(lam))
    error = float(jnp.max(jnp.abs(out.params.x - lam / (1 + 2 * lam))))
    print(f"λ = {lam:5.0f}: x_λ = {lam / (1 + 2 * lam):.6f}, max_i |x_i - x_λ| = {error:.1e}")

# %% [markdown]
# ## 4. The experiment: per-feature ridge tuning on `load_diabetes`
#
# Eight agents each hold 20 training and 20 validation rows. The upper variable $x$ holds
# log-penalties $e^{x_j}$ of a ridge regression (lower level), tuned on the validation loss
# (upper level). Arms: FAB on directed time-varying graphs; the same without trackers; gradient
# tracking on the symmetrised (undirected, Metropolis-weighted) graphs; the centralised penalty
# method; the exact bilevel optimum (L-BFGS with implicit-differentiation hypergradients).

# %%
experiment = experiments.get("fab-hyperparameter")
config = experiment.make_config("smoke" if SMOKE else "quick")
result = experiment.run(config, jax.random.key(0))
for part in result.verdict()["parts"]:
    print(f"[{part['status']}] {part['claim']}\n        {part['measured']}")
display(result.figures["fab_hyperparameter"])
