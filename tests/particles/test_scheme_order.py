"""Convergence order of the MMFLD schemes' stationary laws as the step size shrinks (issue 42).

Each scheme runs on each mirror map against an exact stationary law: the linear potential on
``[0, 1]`` (a truncated exponential, :func:`~jaxlab.particles.truncated_exponential_moments`),
on the simplex ``Δ_2`` (quadrature, :func:`~jaxlab.particles.simplex_linear_potential_mean`) and
a quadratic potential on ``ℝ`` (the Gaussian ``N(m, λ/k)``). The potentials are external (the
first variation does not depend on the measure), so the particles are independent: started
from i.i.d. draws of the exact law, each particle's time average (after a burn-in) is one
independent sample of the step's stationary expectation, and the Monte Carlo standard error is
their spread over ``√N``. On ``ℝ`` the measured statistic is the variance (Euler–Maruyama's
stationary mean of a quadratic potential is exact for every step, its variance
``λ/(k(1 - kη/2))`` is not).

Time is scaled so that ``λ = 1`` (the law depends on ``c/λ`` only; the schemes' errors on
``λη`` and ``c η``), so the step sizes below are the note's ``λη``: ``1e-3`` is the note's
``η = 1e-2`` at ``λ = 0.1``.

What the schemes do (measured by ``_order_rows``; the slow test prints the table quoted in
``mmfld.build_kernel``'s docstring and the README):

* ``"primal"`` and ``"dual_split"``: errors within Monte Carlo error plus an ``O(λη)`` bias;
* ``"dual"`` (the paper's Euler–Maruyama in the mirror coordinates): a bias of 0.04-0.06 on the
  box at ``λη ≤ 4e-3`` that a 16x smaller step reduces by about a third (by about half on the
  simplex), fitted order about 0.25: not the first-order behaviour of a consistent Euler scheme
  (see the derivation in ``mmfld.build_kernel``);
* on ``ℝ`` the three mirror schemes are Euler–Maruyama: order 1 in the variance.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import particles
from tests.conftest import EXECUTION_BOUND

# The instances, with λ = 1 (time scaled): the note's box (c/λ = 3, exact mean 0.280938) and
# simplex (c/λ = (0, 2, -1)), and the unit Gaussian. The simplex mean is the note's quadrature
# value, which test_mfld checks `simplex_linear_potential_mean` against (1 s of quadrature that
# this file need not repeat).
BOX_RATE = 3.0
SIMPLEX_COEFFICIENT = (0.0, 2.0, -1.0)
SIMPLEX_MEAN = (0.337842, 0.217856, 0.444302)
GAUSSIAN_CENTRE, GAUSSIAN_STIFFNESS = 0.5, 1.0
# Fast test: three step sizes a factor 4 apart, horizon 2 (4-6 relaxation times: the box's
# spectral gap is > 2λ, the simplex's 3λ), the first 0.5 left out; N = 1024 independent particles
# give a standard error of ~0.0045 on the box's mean.
FAST_STEPS = (4e-3, 2e-3, 1e-3)
FAST_PARTICLES, FAST_HORIZON, FAST_BURN_IN = 1024, 2.0, 0.5
# On ℝ the steps are larger (EM's variance bias kη/2 must stand above the error) and cheap.
GAUSSIAN_STEPS = (0.2, 0.1, 0.05)
GAUSSIAN_PARTICLES, GAUSSIAN_HORIZON, GAUSSIAN_BURN_IN = 16384, 20.0, 2.0
# An error is "within Monte Carlo error" below 4 standard errors (a false alarm < 1e-4 each).
SE_MULTIPLE = 4.0
# An error enters the order fit when resolved, above 3 standard errors (power_law_fit's delta
# method needs each value well above its error).
RESOLVED_SE_MULTIPLE = 3.0
# A consistent scheme's stationary error is at most FIRST_ORDER_CONSTANT · λη beyond 4 SE: the
# slow test's resolved errors of the primal and split schemes are at most ~0.5·λη (box and
# simplex); 4 leaves room, and the allowance still vanishes with the step.
FIRST_ORDER_CONSTANT = 4.0
# The paper's dual scheme on the box and the simplex: its error stays above this at every fast
# step (the issue measured 0.04-0.08; 0.02 is ≥ 4 SE above zero here and far above the primal's
# ~0.3·λη), and a 4x smaller step keeps more than this fraction of it (a scheme of order p keeps
# 4^-p: a quarter at order 1, half at order 0.5; measured: 0.8 on the box, 0.65 on the simplex).
DUAL_BIAS_FLOOR = 0.02
DUAL_KEPT_FRACTION = 0.5
# Slow test: a 256-fold range (the 16x below 4e-3, larger steps where the O(λη) biases
# of the consistent schemes stand out), at N = 8192 (standard error ~0.0013 on the box), horizon 3.
SLOW_STEPS = (6.4e-2, 3.2e-2, 1.6e-2, 8e-3, 4e-3, 2e-3, 1e-3, 2.5e-4)
SLOW_PARTICLES, SLOW_HORIZON, SLOW_BURN_IN = 8192, 3.0, 0.5
# A consistent scheme's error falls with the step: over the slow steps the paper's dual scheme's
# fitted order stays below this (measured 0.25 on the box, 0.24 on the simplex), where a
# first-order scheme's would be near 1.
DUAL_ORDER_CEILING = 0.5
# On ℝ every scheme is Euler–Maruyama: fitted order of the variance error in [0.8, 1.3]
# (exactly 1.06 between kη = 0.2 and 0.05 for (kη/2)/(1 - kη/2)).
GAUSSIAN_ORDER_RANGE = (0.8, 1.3)


@functools.partial(jax.jit, static_argnums=(0, 1), compiler_options=EXECUTION_BOUND)
def _time_averages(kernel, functional, positions, key, step_size, num_steps, burn_in):
    """Per-particle time averages of ``x`` and ``x²`` over steps ``[burn_in, num_steps)``.

    ``step_size`` and the counts are traced, so one program serves every step size of a
    ``(kernel, functional)`` pair.
    """

    def body(t, carry):
        state, total = carry
        state, _ = kernel(jax.random.fold_in(key, t), state, functional, step_size, 1.0)
        x = state.positions
        return state, total + jnp.where(t >= burn_in, jnp.stack([x, x * x]), 0.0)

    zeros = jnp.zeros((2, *positions.shape), positions.dtype)
    _, total = jax.lax.fori_loop(0, num_steps, body, (particles.MFLDState(positions), zeros))
    return total / (num_steps - burn_in).astype(positions.dtype)


class OrderRow(NamedTuple):
    """One step size's stationary error (in one coordinate) and its Monte Carlo error."""

    step_size: float
    error: float
    standard_error: float


class Problem(NamedTuple):
    name: str
    mirror_map: particles.MirrorMap
    functional: particles.MeanFieldFunctional
    exact: np.ndarray  # the exact stationary expectation of the statistic, per coordinate
    sample: object  # (key, n) -> i.i.d. draws of the exact stationary law
    variance: bool  # the statistic: the variance about the exact mean (else the mean)


def _box_sample(key, n):
    # Inverse CDF of ∝ e^{-a x} on [0, 1].
    u = jax.random.uniform(key, (n, 1), jnp.float64)
    return -jnp.log1p(-u * -jnp.expm1(-BOX_RATE)) / BOX_RATE


def _simplex_sample(key, n):
    # Rejection from the uniform law on Δ_2 (Dirichlet(1, 1, 1)), accepting with
    # exp(-(⟨c, x⟩ - min c)) ≤ 1; enough proposals that n are accepted (rate ≥ 0.15 here).
    c = jnp.asarray(SIMPLEX_COEFFICIENT, jnp.float64)
    proposal_key, accept_key = jax.random.split(key)
    proposals = jax.random.dirichlet(proposal_key, jnp.ones(3, jnp.float64), (16 * n,))
    accept = jax.random.uniform(accept_key, (16 * n,), jnp.float64) < jnp.exp(
        -(proposals @ c - jnp.min(c))
    )
    accepted = np.asarray(proposals)[np.asarray(accept)]
    assert accepted.shape[0] >= n
    return jnp.asarray(accepted[:n])


def _gaussian_sample(key, n):
    scale = math.sqrt(1.0 / GAUSSIAN_STIFFNESS)
    return GAUSSIAN_CENTRE + scale * jax.random.normal(key, (n, 1), jnp.float64)


@functools.cache
def _problems() -> dict[str, Problem]:
    box_mean, _ = particles.truncated_exponential_moments(jnp.asarray([BOX_RATE]))
    gaussian = particles.MeanFieldFunctional(
        statistics_fn=lambda x: x,
        first_variation_grad_fn=lambda x, s: GAUSSIAN_STIFFNESS * (x - GAUSSIAN_CENTRE),
    )
    return {
        "box": Problem(
            "box",
            particles.box_mirror_map(0.0, 1.0),
            particles.linear_potential_functional(jnp.asarray([BOX_RATE])),
            np.asarray(box_mean, float),
            _box_sample,
            False,
        ),
        "simplex": Problem(
            "simplex",
            particles.simplex_mirror_map(),
            particles.linear_potential_functional(jnp.asarray(SIMPLEX_COEFFICIENT)),
            np.asarray(SIMPLEX_MEAN),
            _simplex_sample,
            False,
        ),
        "euclidean": Problem(
            "euclidean",
            particles.euclidean_mirror_map(),
            gaussian,
            np.asarray([1.0 / GAUSSIAN_STIFFNESS]),
            _gaussian_sample,
            True,
        ),
    }


@functools.cache
def _kernel(problem: str, scheme: str):
    """One kernel object per (map, scheme), so ``_time_averages`` compiles once for each."""
    return particles.mmfld.build_kernel(_problems()[problem].mirror_map, scheme)


def _order_rows(problem_name, scheme, step_sizes, num_particles, horizon, burn_in, seed=0):
    """The stationary error at each step size, with its standard error, in one coordinate: the
    one furthest off (in standard errors) at the first step size."""
    problem = _problems()[problem_name]
    start = problem.sample(jax.random.key(seed), num_particles)
    rows, worst = [], None
    for i, step_size in enumerate(step_sizes):
        steps = int(round(horizon / step_size))
        averages = np.asarray(
            _time_averages(
                _kernel(problem_name, scheme),
                problem.functional,
                start,
                jax.random.fold_in(jax.random.key(seed + 1), i),
                step_size,
                steps,
                int(round(burn_in / step_size)),
            )
        )
        if problem.variance:
            # E(x - m)² = E x² - 2m E x + m², per particle.
            m = GAUSSIAN_CENTRE
            samples = averages[1] - 2 * m * averages[0] + m * m
        else:
            samples = averages[0]
        errors = samples.mean(axis=0) - problem.exact
        standard_errors = samples.std(axis=0, ddof=1) / math.sqrt(num_particles)
        if worst is None:  # the coordinate furthest off at the first step, kept for the others
            worst = int(np.argmax(np.abs(errors) / standard_errors))
        rows.append(OrderRow(step_size, float(errors[worst]), float(standard_errors[worst])))
    return rows


def _fitted_order(rows):
    """The weighted log-log slope of |error| against the step size, with its standard error,
    over the steps whose error is resolved (> RESOLVED_SE_MULTIPLE standard errors: below that
    ``log |error|`` is not nearly Gaussian and the fit follows the noise); ``nan`` when fewer
    than two are. Returns ``(order, standard_error, number_of_resolved_steps)``."""
    resolved = [r for r in rows if abs(r.error) > RESOLVED_SE_MULTIPLE * r.standard_error]
    if len(resolved) < 2:
        return math.nan, math.nan, len(resolved)
    fit = particles.power_law_fit(
        [r.step_size for r in resolved],
        [abs(r.error) for r in resolved],
        [r.standard_error for r in resolved],
    )
    return fit.exponent, fit.exponent_standard_error, len(resolved)


def _format(problem, scheme, rows):
    order, order_se, resolved = _fitted_order(rows)
    cells = ", ".join(f"λη={r.step_size:g}: {r.error:+.4f} ± {r.standard_error:.4f}" for r in rows)
    return (
        f"{problem:9s} {scheme:10s} {cells}; fitted order {order:.2f} ± {order_se:.2f} over "
        f"the {resolved} resolved steps"
    )


@pytest.mark.parametrize("problem", ["box", "simplex"])
def test_split_and_primal_schemes_are_consistent_while_the_papers_dual_is_not(problem, x64):
    table = {}
    for scheme in ("primal", "dual_split", "dual"):
        rows = _order_rows(problem, scheme, FAST_STEPS, FAST_PARTICLES, FAST_HORIZON, FAST_BURN_IN)
        table[scheme] = rows
        print(_format(problem, scheme, rows))
    for scheme in ("primal", "dual_split"):
        for row in table[scheme]:
            allowance = SE_MULTIPLE * row.standard_error + FIRST_ORDER_CONSTANT * row.step_size
            assert abs(row.error) <= allowance, (scheme, row)
    dual = table["dual"]
    for row in dual:
        assert abs(row.error) > max(DUAL_BIAS_FLOOR, SE_MULTIPLE * row.standard_error), row
    assert abs(dual[-1].error) > DUAL_KEPT_FRACTION * abs(dual[0].error), dual


def test_every_scheme_is_euler_maruyama_of_order_one_on_the_real_line(x64):
    rows = _order_rows(
        "euclidean",
        "primal",
        GAUSSIAN_STEPS,
        GAUSSIAN_PARTICLES,
        GAUSSIAN_HORIZON,
        GAUSSIAN_BURN_IN,
    )
    print(_format("euclidean", "primal", rows))
    for row in rows:
        # EM's exact stationary variance on the quadratic: λ/(k(1 - kη/2)).
        k_eta = GAUSSIAN_STIFFNESS * row.step_size
        exact_bias = (0.5 * k_eta / (1 - 0.5 * k_eta)) / GAUSSIAN_STIFFNESS
        assert abs(row.error - exact_bias) <= SE_MULTIPLE * row.standard_error, row
    order, _, resolved = _fitted_order(rows)
    assert resolved == len(rows), rows
    assert GAUSSIAN_ORDER_RANGE[0] <= order <= GAUSSIAN_ORDER_RANGE[1], order
    # On ℝ the paper's dual step is the primal step bit for bit, and the split step (whose
    # Gaussian is the first quarter of its noise) up to rounding: the table holds for all three.
    problem = _problems()["euclidean"]
    state = particles.MFLDState(problem.sample(jax.random.key(2), 64))
    steps = {
        scheme: jax.jit(_kernel("euclidean", scheme), static_argnums=2)(
            jax.random.key(3), state, problem.functional, GAUSSIAN_STEPS[0], 1.0
        )[0].positions
        for scheme in ("primal", "dual", "dual_split")
    }
    np.testing.assert_array_equal(steps["dual"], steps["primal"])
    np.testing.assert_allclose(steps["dual_split"], steps["primal"], rtol=1e-14, atol=1e-15)


@pytest.mark.slow
@pytest.mark.parametrize("problem", ["box", "simplex"])
def test_order_table_over_a_sixteenfold_range_of_steps(problem, x64):
    # The table quoted in mmfld.build_kernel's docstring and the README row.
    for scheme in ("primal", "dual_split", "dual", "projected"):
        rows = _order_rows(problem, scheme, SLOW_STEPS, SLOW_PARTICLES, SLOW_HORIZON, SLOW_BURN_IN)
        print(_format(problem, scheme, rows))
        if scheme in ("primal", "dual_split"):
            for row in rows:
                allowance = SE_MULTIPLE * row.standard_error + FIRST_ORDER_CONSTANT * row.step_size
                assert abs(row.error) <= allowance, (scheme, row)
        if scheme == "dual":
            order, _, resolved = _fitted_order(rows)
            assert resolved == len(rows) and order < DUAL_ORDER_CEILING, rows
            assert abs(rows[-1].error) > DUAL_BIAS_FLOOR, rows
