"""Projection-layer forward + backward time: jaxlab's DisjunctiveLayer against cvxpylayers (JAX).

The problems: the hull projection QPs of :func:`jaxlab.nn.input_decided_regression_task`'s rules
(the note's quick A: two input-decided rules on ``y ∈ [0, 1]²``), lifted by
:func:`jaxlab.nn.lifted_hull` in DNF and CNF, for a batch of raw outputs and inputs. The peer
solves *the same lifted QP* (same matrices from :meth:`LiftedHull.qp`, same ε) with cvxpylayers'
JAX interface (cvxpy canonicalization, a conic solver, diffcp's derivative), batched over the
leading axis as its documentation shows. One timed call is ``jax.grad`` of ``Σ w ⊙ y`` with
respect to the raw outputs: a forward projection and its backward pass, as in a training step.
jaxlab's call is jitted (compiled once, in the warm-up round); cvxpylayers' is not jittable
with its default solvers. ``ratio`` = jaxlab time / cvxpylayers time, interleaved in one run;
``max_abs_diff`` compares the two gradients. No targets: the ratios are the result.

Run: ``python -m benchmarks disjunctive`` or ``python -m benchmarks.bench_disjunctive [smoke]``.
"""

from __future__ import annotations

import json
import sys

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks._timing import interleaved_times, median_times
from jaxlab.nn import DisjunctiveLayer, input_decided_regression_task

__all__ = ["cvxpylayers_hull_projection", "run"]

_SIZES = {
    # batch sizes, timed rounds, warm-up rounds
    "smoke": ((4,), 2, 1),
    "default": ((16, 64, 256), 3, 1),
}


def cvxpylayers_hull_projection(layer: DisjunctiveLayer):
    """The hull projection of ``layer`` (hull mode) as a cvxpylayers JAX layer.

    Variables ``v = (y, ν, λ)``; parameters the raw output ``ŷ`` and the QP's ``A``, ``lower``
    and ``upper`` (``A`` and the bounds depend on the input through the rules). Rows whose bound
    is infinite for the sample input are left out on that side (the pattern of infinite bounds is
    fixed by the rule set, not by the input). Returns ``project(y_hat, x) -> y`` for batches
    ``y_hat`` ``(B, n)``, ``x`` ``(B, p)``, differentiable with ``jax.grad``.

    Raises:
      ImportError: cvxpylayers (the ``bench``/``test`` extra) is not installed.
    """
    import cvxpy as cp
    from cvxpylayers.jax import CvxpyLayer

    hull = layer.hull
    if hull is None:
        raise ValueError("layer must be a hull-mode DisjunctiveLayer")
    n = layer.rule_set.num_outputs
    p = max(layer.rule_set.input_size, 1)
    _, _, a0, lo0, hi0 = hull.qp(jnp.zeros((n,)), jnp.zeros((p,)))
    lo_rows = np.flatnonzero(np.isfinite(np.asarray(lo0)))
    hi_rows = np.flatnonzero(np.isfinite(np.asarray(hi0)))
    num_v = a0.shape[1]
    v = cp.Variable(num_v)
    y_hat = cp.Parameter(n)
    a_lo = cp.Parameter((lo_rows.size, num_v))
    a_hi = cp.Parameter((hi_rows.size, num_v))
    lo = cp.Parameter(lo_rows.size)
    hi = cp.Parameter(hi_rows.size)
    eps = float(hull.lift_regularization)
    objective = 0.5 * cp.sum_squares(v[:n] - y_hat) + 0.5 * eps * cp.sum_squares(v[n:])
    problem = cp.Problem(cp.Minimize(objective), [a_lo @ v >= lo, a_hi @ v <= hi])
    peer = CvxpyLayer(problem, parameters=[y_hat, a_lo, a_hi, lo, hi], variables=[v])

    def data(y, x):
        _, _, a, lower, upper = hull.qp(y, x)
        return a[lo_rows], a[hi_rows], lower[lo_rows], upper[hi_rows]

    batched_data = jax.jit(jax.vmap(data))

    def project(y, x):
        a_l, a_h, lower, upper = jax.lax.stop_gradient(batched_data(y, x))
        (solution,) = peer(y, a_l, a_h, lower, upper)
        return solution[:, :n]

    return project


def run(size: str = "default") -> dict:
    """Times jaxlab's hull projection layer (DNF, CNF) against cvxpylayers on the same QPs.

    Args:
      size: ``"default"`` (batches 16, 64, 256) or ``"smoke"`` (batch 4: seconds).

    Returns:
      ``{"name", "peer", "size", "shape", "rows": [{"case", "step_time_s", "peer_step_time_s",
      "ratio", "target_ratio", "meets_target", "max_abs_diff"}, ...]}``.

    Examples:
      >>> report = run("smoke")  # doctest: +SKIP
      >>> [row["case"] for row in report["rows"]]  # doctest: +SKIP
      ['dnf B=4', 'cnf B=4']
    """
    if size not in _SIZES:
        raise ValueError(f"size must be one of {sorted(_SIZES)}, got {size!r}")
    batches, repeats, warmup = _SIZES[size]
    task = input_decided_regression_task(jax.random.key(0), num_train=8, num_test=max(batches))
    raw = jax.random.uniform(jax.random.key(1), (max(batches), 2), minval=-0.2, maxval=1.2)
    weights = jax.random.normal(jax.random.key(2), raw.shape)
    rows = []
    for formulation in ("dnf", "cnf"):
        layer = DisjunctiveLayer(task.rule_set, formulation=formulation)
        peer_project = cvxpylayers_hull_projection(layer)
        ours = jax.jit(jax.grad(lambda y, x, w, layer=layer: jnp.sum(w * layer(y, x)[0])))
        theirs = jax.grad(lambda y, x, w, f=peer_project: jnp.sum(w * f(y, x)))
        for batch in batches:
            args = (raw[:batch], task.x_test[:batch], weights[:batch])
            times = median_times(
                interleaved_times(
                    {"ours": lambda a=args: ours(*a), "peer": lambda a=args: theirs(*a)},
                    repeats,
                    warmup,
                )
            )
            diff = float(jnp.max(jnp.abs(ours(*args) - theirs(*args))))
            rows.append(
                {
                    "case": f"{formulation} B={batch}",
                    "step_time_s": times["ours"],
                    "peer_step_time_s": times["peer"],
                    "ratio": times["ours"] / times["peer"],
                    "target_ratio": None,
                    "meets_target": None,
                    "max_abs_diff": diff,
                }
            )
    return {
        "name": "disjunctive",
        "peer": "cvxpylayers (JAX interface, default solver) on the same lifted hull QPs",
        "size": size,
        "shape": {"batches": list(batches), "outputs": 2, "rules": 2, "formulations": 2},
        "rows": rows,
    }


if __name__ == "__main__":
    json.dump(run(sys.argv[1] if len(sys.argv) > 1 else "default"), sys.stdout, indent=2)
    print()
