"""Hom-PGD⁺'s measurements as functions a user can rerun on their own sizes and instances.

The star toy from many starts against its baselines (exact-projection PGD, penalty, augmented
Lagrangian), the QCQP penalty baselines batched over instances in the authors' conventions, and
the split of a learned map's gap into coverage and optimizer parts (with 95% bootstrap
intervals of the medians over instances). The ``hom-pgd`` experiment is these calls plus its
verdict and figures.

References:
  C. Liu, E. Liang, M. Chen, "Hom-PGD⁺: Fast Reparameterized Optimization over Non-convex
  Ball-Homeomorphic Set", ICML 2026.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxlab._src.validation import (
    check_array,
    check_choice,
    check_int,
    check_nonnegative,
    check_positive_int,
)
from jaxlab.nn import InvertibleNet, invertibility_error
from jaxlab.solvers._baselines import (
    augmented_lagrangian,
    exact_projection_pgd,
    penalty_method,
    slsqp_local_solve,
    slsqp_multistart,
    slsqp_projection_pgd,
)
from jaxlab.solvers._hom_pgd import HomPGD, best_feasible_start, project_ball, split_gap
from jaxlab.solvers._hom_pgd_problems import (
    QCQPInstance,
    qcqp_condition,
    qcqp_constraints,
    qcqp_objective,
    star_constraint,
    star_hom_pgd,
    star_homeomorphism,
    star_objective,
    star_projection,
)

__all__ = [
    "StarComparison",
    "compare_qcqp_methods",
    "compare_qcqp_starts",
    "compare_star_methods",
    "qcqp_gap_split",
    "qcqp_penalty_baseline",
]

STAR_METHODS = ("hom_pgd", "exact_pgd", "penalty", "alm")
_PENALTY_METHODS = {"penalty": penalty_method, "alm": augmented_lagrangian}


def _timed(fn, *args):
    start = time.perf_counter()
    return jax.block_until_ready(fn(*args)), time.perf_counter() - start


def _median_time(fn, args, repeats: int):
    """``fn(*args)`` once to compile, then the median wall time of ``repeats`` calls."""
    return _timed(fn, *args)[0], float(np.median([_timed(fn, *args)[1] for _ in range(repeats)]))


class StarComparison(NamedTuple):
    """What :func:`compare_star_methods` returns, per method (``STAR_METHODS``) and start.

    Attributes:
      latent_starts: (S, 2) latent starts z₀, projected into the disk (Hom-PGD starts there).
      starts: (S, 2) x-space starts Φ(z₀) (the baselines start there).
      end_points: method -> (S, 2) x-space end points.
      values: method -> (S,) end objective values.
      violations: method -> (S,) end violations ``max(0, g(x))``.
      iterations: method -> (S,) steps (outer rounds for penalty and ALM).
      times: method -> (S,) wall seconds per run (the median of the repeats for Hom-PGD and
        exact-projection PGD, one run for the others).
      compile_time_s: seconds to compile the four programs.

    Examples:
      >>> StarComparison._fields[:3]
      ('latent_starts', 'starts', 'end_points')
    """

    latent_starts: np.ndarray
    starts: np.ndarray
    end_points: dict[str, np.ndarray]
    values: dict[str, np.ndarray]
    violations: dict[str, np.ndarray]
    iterations: dict[str, np.ndarray]
    times: dict[str, np.ndarray]
    compile_time_s: float

    def summary(self, success_value: float, zero_violation: float) -> dict[str, dict]:
        """Per method: best and median f, the share of starts that end at f <= ``success_value``
        with violation <= ``zero_violation``, the largest violation, median iterations and
        median time per run, and every end value.

        Examples:
          >>> import jax.numpy as jnp
          >>> out = compare_star_methods(jnp.array([[0.5, 0.1]]), maxiter=400, num_angles=256,
          ...                            outer=3, timing_repeats=1)
          >>> out.summary(0.0312, 1e-10)["hom_pgd"]["fraction_global"]
          1.0
        """
        rows = {}
        for name, values in self.values.items():
            violations = self.violations[name]
            reached = (values <= success_value) & (violations <= zero_violation)
            rows[name] = {
                "best_f": float(values.min()),
                "median_f": float(np.median(values)),
                "fraction_global": float(np.mean(reached)),
                "max_violation": float(violations.max()),
                "median_iterations": float(np.median(self.iterations[name])),
                "median_time_per_run_s": float(np.median(self.times[name])),
                "values": values.tolist(),
            }
        return rows


def compare_star_methods(
    z0s: Any,
    *,
    maxiter: int = 2000,
    num_angles: int = 2048,
    outer: int = 80,
    timing_repeats: int = 3,
    progress: Any = None,
) -> StarComparison:
    """Hom-PGD through the star's exact map against its baselines from the same starts (float64).

    Each latent start z₀ (projected into the disk) runs :func:`star_hom_pgd`; the baselines start
    from Φ(z₀): projected gradient with the exact projection :func:`star_projection` (the code's
    step and stop rule), the penalty method and the augmented Lagrangian (``outer`` rounds). The
    two timed methods alternate ``timing_repeats`` times per start (the median is kept); every
    program is compiled once before timing. Runs under ``jax.enable_x64`` (the exact map's
    zero violation is a float64 statement) without switching x64 on globally.

    Args:
      z0s: (S, 2) latent starts.
      maxiter: iteration cap of Hom-PGD and exact-projection PGD.
      num_angles: angular grid of the exact projection.
      outer: rounds of the penalty method and the augmented Lagrangian.
      timing_repeats: timed repeats per start (>= 1).
      progress: optional object with ``track(iterable, total=, description=)``.

    Returns:
      A :class:`StarComparison`.

    Examples:
      >>> import jax.numpy as jnp
      >>> out = compare_star_methods(jnp.array([[0.5, 0.1]]), maxiter=400, num_angles=256,
      ...                            outer=3, timing_repeats=1)
      >>> round(float(out.values["hom_pgd"][0]), 4), float(out.violations["hom_pgd"][0])
      (0.0309, 0.0)

    References:
      C. Liu, E. Liang, M. Chen, "Hom-PGD⁺", ICML 2026 (the star toy and its baselines).
    """
    maxiter = check_positive_int(maxiter, "maxiter")
    num_angles = check_positive_int(num_angles, "num_angles")
    outer = check_positive_int(outer, "outer")
    timing_repeats = check_positive_int(timing_repeats, "timing_repeats")
    with jax.enable_x64(True):
        z0s = check_array(z0s, "z0s", kind="floating").astype(jnp.float64)
        if z0s.ndim != 2 or z0s.shape[-1] != 2:
            raise ValueError(f"z0s must have shape (S, 2), got {z0s.shape}")
        z0s = project_ball(z0s)
        x0s = jax.vmap(star_homeomorphism)(z0s)
        solver = star_hom_pgd(maxiter)
        projection = functools.partial(star_projection, num_angles=num_angles)
        star = (star_objective, star_constraint)

        def exact_pgd(x0):
            return exact_projection_pgd(star_objective, projection, x0, maxiter=maxiter)

        programs = {  # name: (compiled run, its starts)
            "hom_pgd": (jax.jit(solver.run), z0s),
            "exact_pgd": (jax.jit(exact_pgd), x0s),
            "penalty": (jax.jit(lambda x0: penalty_method(*star, x0, outer=outer)), x0s),
            "alm": (jax.jit(lambda x0: augmented_lagrangian(*star, x0, outer=outer)), x0s),
        }
        start = time.perf_counter()
        for fn, starts in programs.values():
            jax.block_until_ready(fn(starts[0]))
        compile_s = time.perf_counter() - start
        rows = {name: [] for name in programs}
        count = z0s.shape[0]
        indices = range(count)
        if progress is not None:
            indices = progress.track(indices, total=count, description="star toy: starts")
        for i in indices:
            per, outs = {name: [] for name in programs}, {}
            # Interleaved: the two timed methods alternate, the penalty baselines run once.
            for name in [*STAR_METHODS[:2]] * timing_repeats + [*STAR_METHODS[2:]]:
                fn, starts = programs[name]
                outs[name], elapsed = _timed(fn, starts[i])
                per[name].append(elapsed)
            z, state = outs.pop("hom_pgd")
            x = star_homeomorphism(z)
            hom = (float(state.value), float(state.violation), int(state.iter_num))
            rows["hom_pgd"].append((np.asarray(x), *hom, float(np.median(per["hom_pgd"]))))
            for name, out in outs.items():
                violation = max(0.0, float(star_constraint(out.x)[0]))
                row = (np.asarray(out.x), float(out.value), violation, int(out.iterations))
                rows[name].append((*row, float(np.median(per[name]))))
        fields = [{k: np.array([r[j] for r in v]) for k, v in rows.items()} for j in range(5)]
        return StarComparison(np.asarray(z0s), np.asarray(x0s), *fields, compile_s)


@functools.cache
def qcqp_penalty_baseline(
    method: Literal["penalty", "alm"],
    num_features: int,
    *,
    inner: int = 100,
    rounds_per_feature: int = 10,
    inner_solver: Literal["adam", "gd"] = "gd",
):
    """The authors' QCQP penalty or augmented-Lagrangian baseline, batched over instances.

    From x = 0, ``rounds_per_feature * n`` outer rounds (the authors align them with Hom-PGD's
    iteration cap 10 n) of ``inner`` plain gradient steps (their ``lagrangian_baseline_config``:
    100 steps at rate 1e-3). The program is compiled once per ``(method, n, inner, ...)`` and
    cached; the learning rate is an argument.

    Args:
      method: ``"penalty"`` (:func:`penalty_method`) or ``"alm"``
        (:func:`augmented_lagrangian`).
      num_features: the dimension n.
      inner: inner gradient steps per round.
      rounds_per_feature: outer rounds per dimension.
      inner_solver: ``"gd"`` (the authors') or ``"adam"``.

    Returns:
      A jitted ``program(instances, learning_rate) -> (values, violations)`` over a batch of
      :class:`QCQPInstance` (stacked, as :func:`sample_qcqp_batch` returns), with
      ``violations = max(0, max_j g_j(x))`` per instance.

    Examples:
      >>> import jax
      >>> from jaxlab.solvers import sample_qcqp_batch
      >>> program = qcqp_penalty_baseline("alm", 2, inner=20, rounds_per_feature=2)
      >>> values, violations = program(sample_qcqp_batch(jax.random.key(0), 2, 3, 4), 1e-2)
      >>> values.shape, bool((violations >= 0).all())
      ((4,), True)

    References:
      C. Liu, E. Liang, M. Chen, "Hom-PGD⁺", ICML 2026 (the Lagrangian baselines of the code).
    """
    function = _PENALTY_METHODS[check_choice(method, "method", tuple(_PENALTY_METHODS))]
    n = check_positive_int(num_features, "num_features")
    inner = check_positive_int(inner, "inner")
    rounds = check_positive_int(rounds_per_feature, "rounds_per_feature")
    check_choice(inner_solver, "inner_solver", ("adam", "gd"))

    def one(instance, learning_rate):
        out = function(
            qcqp_objective,
            qcqp_constraints,
            jnp.zeros(n),
            instance,
            outer=rounds * n,
            inner=inner,
            learning_rate=learning_rate,
            inner_solver=inner_solver,
        )
        return out.value, jnp.maximum(jnp.max(qcqp_constraints(out.x, instance)), 0.0)

    return jax.jit(jax.vmap(one, in_axes=(0, None)))


def _median_interval(values, resamples: int, seed: int = 0) -> tuple[float, float, float]:
    """Median over instances and a 95% percentile-bootstrap interval (non-finite dropped)."""
    values = np.asarray(values, float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return np.nan, np.nan, np.nan
    draws = np.random.default_rng(seed).choice(values, (resamples, values.size))
    low, high = np.percentile(np.median(draws, axis=1), [2.5, 97.5])
    return float(np.median(values)), float(low), float(high)


def _pick(batch, i: int):
    return jax.tree.map(lambda a: a[i], batch)


def qcqp_gap_split(
    solver: HomPGD,
    model: InvertibleNet,
    hom_values: Any,
    hom_violations: Any,
    local: Any,
    multistart: Any,
    instances: QCQPInstance,
    latents: Any,
    *,
    other_models: Mapping[str, InvertibleNet] | None = None,
    num_refine: int = 8,
    maxiter: int | None = None,
    roundtrip_latents: int = 512,
    resamples: int = 2000,
) -> dict[str, Any]:
    """Hom-PGD's gap on QCQP instances split into coverage and optimizer parts, with intervals.

    Per instance: the best value reachable through ``model`` (:meth:`HomPGD.reachable_value`
    from the dense latent sample ``latents`` and ``num_refine`` refinements of ``maxiter``
    steps), then :func:`split_gap` of Hom-PGD's end value (inf where its violation exceeds the
    solver's ``feasibility_tol``) against it and the references; and the INN's round-trip error
    (:func:`jaxlab.nn.invertibility_error`) on the first ``roundtrip_latents`` latents. The
    medians over instances come with 95% percentile-bootstrap intervals (``resamples`` draws,
    seed 0). For each ``other_models[name]`` (e.g. the same run at half its budget) only the
    coverage median and interval are returned, as ``coverage_<name>``: Hom-PGD's end point is
    ``model``'s, not reachable through the other map, so it is not counted there.

    Args:
      solver: the Hom-PGD solver of ``model``'s architecture, taking ``(weights, instance)`` as
        :func:`qcqp_hom_pgd` builds it.
      model: the trained network.
      hom_values: (I,) Hom-PGD's end values.
      hom_violations: (I,) their violations.
      local: (I,) local reference values (NaN or inf where the local solve failed).
      multistart: (I,) multi-start reference values (inf where none ended feasible).
      instances: the I instances, stacked.
      latents: (N, n) dense latent sample.
      other_models: more networks of the same architecture whose coverage is wanted.
      num_refine: refinements of the best feasible samples (>= 1).
      maxiter: steps of each refinement (None: 10x the solver's ``maxiter``).
      roundtrip_latents: latents for the round-trip error (>= 1).
      resamples: bootstrap draws (>= 1).

    Returns:
      A dict: ``reachable_values``, ``coverage_gaps``, ``optimizer_gaps``,
      ``gaps_vs_multistart`` (lists over instances), ``coverage`` and ``optimizer`` (median,
      low, high), ``gap_vs_multistart`` (median), ``inverse_error_max`` and one
      ``coverage_<name>`` per other model.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.nn import sample_latents
      >>> from jaxlab.solvers import (qcqp_hom_pgd, qcqp_homeomorphism_net,
      ...                             sample_qcqp_batch)
      >>> net = qcqp_homeomorphism_net(2, hidden=8, encoder_hidden=8, rngs=nnx.Rngs(0))
      >>> instances = sample_qcqp_batch(jax.random.key(0), 2, 3, 2)
      >>> hom_values, hom_violations = jnp.array([-0.5, -0.8]), jnp.zeros(2)  # Hom-PGD's ends
      >>> out = qcqp_gap_split(qcqp_hom_pgd(net, maxiter=20), net, hom_values, hom_violations,
      ...                      jnp.full(2, -1.0), jnp.full(2, -1.0), instances,
      ...                      sample_latents(jax.random.key(1), 64, 2), num_refine=2)
      >>> len(out["coverage_gaps"]), len(out["coverage"])  # per instance; (median, low, high)
      (2, 3)

    References:
      C. Liu, E. Liang, M. Chen, "Hom-PGD⁺", ICML 2026 (learning error ε_inn vs optimization).
    """
    if not isinstance(solver, HomPGD):
        raise TypeError(f"solver must be a HomPGD, got {type(solver).__name__}")
    if not isinstance(model, InvertibleNet):
        raise TypeError(f"model must be an InvertibleNet, got {type(model).__name__}")
    other_models = dict(other_models or {})
    for name, net in other_models.items():
        if not isinstance(net, InvertibleNet):
            raise TypeError(f"other_models[{name!r}] must be an InvertibleNet")
    num_refine = check_positive_int(num_refine, "num_refine")
    maxiter = 10 * solver.maxiter if maxiter is None else check_positive_int(maxiter, "maxiter")
    roundtrip_latents = check_positive_int(roundtrip_latents, "roundtrip_latents")
    resamples = check_positive_int(resamples, "resamples")
    latents = check_array(latents, "latents", kind="floating")
    hom_values = np.asarray(hom_values, float)
    count = check_int(hom_values.size, "hom_values' size", minimum=1)
    arrays = {"hom_violations": hom_violations, "local": local, "multistart": multistart}
    for name, value in arrays.items():
        if np.shape(value) != hom_values.shape:
            raise ValueError(f"{name} must have shape {hom_values.shape}, got {np.shape(value)}")
    check_nonnegative(solver.feasibility_tol, "solver.feasibility_tol")

    networks = {"": model, **other_models}
    reach = {name: [] for name in networks}
    errors = []
    for i in range(count):
        instance = _pick(instances, i)
        for name, net in networks.items():
            weights = nnx.split(net, nnx.Param, ...)[1:]
            value, _ = solver.reachable_value(
                latents, weights, instance, num_refine=num_refine, maxiter=maxiter
            )
            reach[name].append(float(value))
        condition = qcqp_condition(instance)
        error = invertibility_error(model, latents[:roundtrip_latents], condition)
        errors.append(float(error.max()))
    feasible = np.asarray(hom_violations) <= solver.feasibility_tol
    hom = np.where(feasible, hom_values, np.inf)
    local = np.asarray(local, float)
    local = np.where(np.isfinite(local), local, np.inf)  # NaN: the local solve failed
    full = split_gap(hom, reach[""], local, multistart)
    out = {
        "reachable_values": reach[""],
        "coverage_gaps": full.coverage.tolist(),
        "optimizer_gaps": full.optimizer.tolist(),
        "gaps_vs_multistart": full.end_to_end_multistart.tolist(),
        "coverage": _median_interval(full.coverage, resamples),
        "optimizer": _median_interval(full.optimizer, resamples),
        "gap_vs_multistart": float(np.nanmedian(full.end_to_end_multistart)),
        "inverse_error_max": float(max(errors)),
    }
    for name in other_models:
        other = np.asarray(reach[name], float)
        coverage = split_gap(other, other, local, multistart).coverage
        out[f"coverage_{name}"] = _median_interval(coverage, resamples)
    return out


@functools.cache
def _batched_run(solver: HomPGD):
    """The centre solve batched over instances, compiled once per solver (identity-hashed)."""
    return jax.jit(jax.vmap(solver.run, in_axes=(None, None, 0)))


def _method(values, reference, violations, seconds, feasibility_tol) -> dict:
    gaps = (np.asarray(values, float) - reference) / np.abs(reference)
    return {
        "median_gap": float(np.nanmedian(gaps)),
        "feasible_fraction": float(np.mean(np.asarray(violations) <= feasibility_tol)),
        "time_per_instance_s": seconds,
        "values": np.asarray(values, float).tolist(),
        "gaps": gaps.tolist(),
    }


def compare_qcqp_methods(
    solver: HomPGD,
    weights: Any,
    instances: QCQPInstance,
    *,
    slsqp_starts: int = 20,
    baseline_inner: int = 100,
    baseline_learning_rate: float = 1e-3,
    timing_repeats: int = 3,
    progress: Any = None,
    label: str = "QCQP",
) -> dict[str, Any]:
    """Hom-PGD from the latent centre against the QCQP baselines on a batch of instances.

    Hom-PGD (``solver``, as :func:`qcqp_hom_pgd` builds it, with the network's ``weights``) runs
    one start per instance from z = 0, batched over the instances; the reference is a local
    SLSQP solve from x = 0 per instance (:func:`slsqp_local_solve`, the CPU stand-in for the
    authors' IPOPT); beside it :func:`slsqp_multistart` (``slsqp_starts`` starts) and the
    penalty and augmented-Lagrangian baselines in the authors' conventions
    (:func:`qcqp_penalty_baseline`, batched). Gaps are ``(value - reference) / |reference|``;
    batched programs are compiled first and timed as the median of ``timing_repeats`` calls.

    Args:
      solver: the Hom-PGD solver, ``run(z0, weights, instance)``.
      weights: the network's ``nnx.split(model, nnx.Param, ...)[1:]``.
      instances: a batch of :class:`QCQPInstance` (as :func:`sample_qcqp_batch` returns).
      slsqp_starts: starts of multi-start SLSQP.
      baseline_inner: inner gradient steps of the penalty baselines.
      baseline_learning_rate: their learning rate.
      timing_repeats: timed repeats of the batched programs (>= 1).
      progress: optional object with ``track(iterable, total=, description=)``.
      label: the progress bars' prefix.

    Returns:
      A dict: ``methods`` (``hom_pgd``, ``slsqp_multistart``, ``penalty``, ``alm``: median gap,
      feasible fraction, time per instance, values, gaps and ``speedup`` = its time / Hom-PGD's),
      ``reference`` (local values, NaN where the local solve ended infeasible),
      ``multistart_values`` (inf where no start ended feasible), ``states`` (Hom-PGD's end
      states) and ``local_time_per_instance_s``.

    Examples:
      >>> import jax
      >>> from jaxlab.solvers import qcqp_hom_pgd, qcqp_homeomorphism_net, sample_qcqp_batch
      >>> net = qcqp_homeomorphism_net(2, hidden=8, encoder_hidden=8, rngs=nnx.Rngs(0))
      >>> out = compare_qcqp_methods(qcqp_hom_pgd(net, maxiter=20),
      ...                            nnx.split(net, nnx.Param, ...)[1:],
      ...                            sample_qcqp_batch(jax.random.key(0), 2, 3, 2),
      ...                            slsqp_starts=2, baseline_inner=5, timing_repeats=1)
      >>> sorted(out["methods"]), out["reference"].shape
      (['alm', 'hom_pgd', 'penalty', 'slsqp_multistart'], (2,))

    References:
      C. Liu, E. Liang, M. Chen, "Hom-PGD⁺", ICML 2026 (QCQP comparisons of the public code).
    """
    if not isinstance(solver, HomPGD):
        raise TypeError(f"solver must be a HomPGD, got {type(solver).__name__}")
    if not isinstance(instances, QCQPInstance) or np.ndim(instances.constraint_bound) != 2:
        raise TypeError("instances must be a batch of QCQPInstance (see sample_qcqp_batch)")
    slsqp_starts = check_positive_int(slsqp_starts, "slsqp_starts")
    timing_repeats = check_positive_int(timing_repeats, "timing_repeats")
    count, n = np.shape(instances.linear)
    tol = solver.feasibility_tol
    args = (jnp.zeros(n), weights, instances)
    (_, states), seconds = _median_time(_batched_run(solver), args, timing_repeats)
    host = jax.tree.map(np.asarray, instances)

    def track(iterable, description):
        if progress is None:
            return iterable
        return progress.track(iterable, total=count, description=description)

    local = [
        slsqp_local_solve(_pick(host, i))
        for i in track(range(count), description=f"{label}: local SLSQP")
    ]
    multi = [
        slsqp_multistart(_pick(host, i), slsqp_starts, seed=i)
        for i in track(range(count), description=f"{label}: multi-start SLSQP")
    ]
    reference = np.array([r["value"] if r["feasible"] else np.nan for r in local])
    hom = _method(states.value, reference, states.violation, seconds / count, tol)
    values = np.array([r["value"] for r in multi])  # inf where no start ended feasible
    seconds = float(np.mean([r["time_s"] for r in multi]))
    methods = {
        "hom_pgd": hom,
        "slsqp_multistart": _method(values, reference, 0 * values, seconds, tol),
    }
    for name in ("penalty", "alm"):
        program = qcqp_penalty_baseline(name, n, inner=baseline_inner)
        arguments = (instances, baseline_learning_rate)
        (end_values, violations), seconds = _median_time(program, arguments, timing_repeats)
        methods[name] = _method(end_values, reference, violations, seconds / count, tol)
    for row in methods.values():
        row["speedup"] = row["time_per_instance_s"] / hom["time_per_instance_s"]  # > 1: slower
    return {
        "methods": methods,
        "reference": reference,
        "multistart_values": values,
        "states": states,
        "local_time_per_instance_s": float(np.mean([r["time_s"] for r in local])),
    }


@functools.cache
def _starts_run(solver: HomPGD):
    """Several latent starts of one instance, compiled once per solver (identity-hashed)."""
    return jax.jit(jax.vmap(solver.run, in_axes=(0, None, None)))


def compare_qcqp_starts(
    solver: HomPGD,
    weights: Any,
    instances: QCQPInstance,
    local: Any,
    multistart: Any,
    latent_starts: Any,
    *,
    exact_pgd_instances: int = 5,
    time_limit_s: float = 60.0,
    tol: float = 1e-5,
    progress: Any = None,
) -> dict[str, Any]:
    """Start against start: one start each with SLSQP-projection PGD, several on both sides.

    (1) :func:`slsqp_projection_pgd` from x = 0 on the first ``exact_pgd_instances`` instances
    (projected gradient whose projection is an SLSQP solve: Hom-PGD's step rule, η₀ = 0.1, the
    solver's ``maxiter``, ``|Δf| <= tol`` stop, a ``time_limit_s`` cap per run), its gap to the
    ``local`` reference and time per instance. (2) Hom-PGD from every row of ``latent_starts``
    on each instance, its best feasible end (:func:`best_feasible_start`, violation <= ``tol``)
    against the best of several SLSQP starts ``multistart``.

    Args:
      solver: the Hom-PGD solver, ``run(z0, weights, instance)`` (:func:`qcqp_hom_pgd`).
      weights: the network's ``nnx.split(model, nnx.Param, ...)[1:]``.
      instances: a batch of :class:`QCQPInstance`.
      local: (I,) local reference values.
      multistart: (I,) multi-start SLSQP values.
      latent_starts: (S, n) latent starts (e.g. :func:`latent_starts`).
      exact_pgd_instances: instances for SLSQP-projection PGD (>= 1).
      time_limit_s: its wall-clock limit per run (a capped run is flagged).
      tol: feasibility and stopping tolerance.
      progress: optional object with ``track(iterable, total=, description=)``.

    Returns:
      A dict: ``exact_pgd_time_per_instance_s``, ``exact_pgd_median_gap``,
      ``exact_pgd_capped``, ``multistart_gaps`` (per instance), ``multistart_median_gap`` and
      ``multistart_feasible_fraction``.

    Examples:
      >>> import jax
      >>> from jaxlab.solvers import (latent_starts, qcqp_hom_pgd, qcqp_homeomorphism_net,
      ...                             sample_qcqp_batch)
      >>> net = qcqp_homeomorphism_net(2, hidden=8, encoder_hidden=8, rngs=nnx.Rngs(0))
      >>> out = compare_qcqp_starts(qcqp_hom_pgd(net, maxiter=20),
      ...                           nnx.split(net, nnx.Param, ...)[1:],
      ...                           sample_qcqp_batch(jax.random.key(0), 2, 3, 2),
      ...                           [-1.0, -1.0], [-1.0, -1.0],
      ...                           latent_starts(jax.random.key(1), 3, 2), exact_pgd_instances=1)
      >>> len(out["multistart_gaps"]), out["exact_pgd_capped"]
      (2, False)

    References:
      C. Liu, E. Liang, M. Chen, "Hom-PGD⁺", ICML 2026 (QCQP comparisons of the public code).
    """
    if not isinstance(solver, HomPGD):
        raise TypeError(f"solver must be a HomPGD, got {type(solver).__name__}")
    if not isinstance(instances, QCQPInstance) or np.ndim(instances.constraint_bound) != 2:
        raise TypeError("instances must be a batch of QCQPInstance (see sample_qcqp_batch)")
    count, n = np.shape(instances.linear)
    local, multistart = np.asarray(local, float), np.asarray(multistart, float)
    for name, value in (("local", local), ("multistart", multistart)):
        if value.shape != (count,):
            raise ValueError(f"{name} must have shape ({count},), got {value.shape}")
    exact_pgd_instances = check_positive_int(exact_pgd_instances, "exact_pgd_instances")
    latent_starts = check_array(latent_starts, "latent_starts", kind="floating")
    host = jax.tree.map(np.asarray, instances)
    options = dict(stepsize=0.1, maxiter=solver.maxiter, tol=tol, feasibility_tol=tol)
    pgd = [
        slsqp_projection_pgd(_pick(host, i), np.zeros(n), time_limit_s=time_limit_s, **options)
        for i in range(min(exact_pgd_instances, count))
    ]
    pgd_gaps = [(r["value"] - local[i]) / abs(local[i]) for i, r in enumerate(pgd)]
    indices = range(count)
    if progress is not None:
        indices = progress.track(indices, total=count, description="QCQP: Hom-PGD starts")
    best = []
    for i in indices:
        _, states = _starts_run(solver)(latent_starts, weights, _pick(instances, i))
        index, feasible = best_feasible_start(states.value, states.violation, tol)
        best.append((float(np.asarray(states.value)[index]), feasible))
    gaps = (np.array([b[0] for b in best]) - multistart) / np.abs(multistart)
    return {
        "exact_pgd_time_per_instance_s": float(np.mean([r["time_s"] for r in pgd])),
        "exact_pgd_median_gap": float(np.median(pgd_gaps)),
        "exact_pgd_capped": any(r["capped"] for r in pgd),
        "multistart_gaps": gaps.tolist(),
        "multistart_median_gap": float(np.nanmedian(gaps)),
        "multistart_feasible_fraction": float(np.mean([b[1] for b in best])),
    }
