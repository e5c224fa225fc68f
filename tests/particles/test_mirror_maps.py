"""Mirror maps: inverses, Hessians, Itô corrections and noise covariances, as properties.

Each identity is checked against a second path: ``jax.hessian`` of the potential, ``jax.jacfwd``
of ``∇φ*`` and of the inverse metric, exact covariance algebra and Monte Carlo.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxlab.particles import (
    box_mirror_map,
    euclidean_mirror_map,
    simplex_mirror_map,
)

DIM = 3  # box and Euclidean dimension; the simplex has DIM + 1 full coordinates
_SETTINGS = settings(max_examples=25, deadline=None)


def _box_bounds():
    # No subnormals: XLA on CPU flushes them to zero (a bound of 1e-308 becomes 0).
    lower = st.lists(st.floats(-5.0, 5.0, allow_subnormal=False), min_size=DIM, max_size=DIM)
    width = st.lists(st.floats(0.1, 10.0), min_size=DIM, max_size=DIM)
    return st.tuples(lower, width)


def _unit_points(size):
    return st.lists(st.floats(0.01, 0.99), min_size=size, max_size=size)


def _embed(reduced):
    """Full simplex coordinates from the reduced ones (x_0 = 1 - Σ x_{1:})."""
    return jnp.concatenate([1.0 - jnp.sum(reduced, keepdims=True), reduced])


def _dense(matvec, x, size):
    """The matrix of the linear map ``v ↦ matvec(x, v)`` (columns = images of unit vectors)."""
    return jax.vmap(lambda e: matvec(x, e), out_axes=1)(jnp.eye(size, dtype=x.dtype))


@pytest.fixture(autouse=True)
def _float64():
    with jax.enable_x64(True):
        yield


@_SETTINGS
@given(_box_bounds(), _unit_points(DIM), st.lists(st.floats(-30, 30), min_size=DIM, max_size=DIM))
def test_box_map_inverts_and_its_hessian_is_the_potentials(bounds, fractions, dual):
    lower, width = np.asarray(bounds[0]), np.asarray(bounds[1])
    mirror_map = box_mirror_map(lower, lower + width)
    x = jnp.asarray(lower + width * np.asarray(fractions))
    np.testing.assert_allclose(mirror_map.to_primal(mirror_map.to_dual(x)), x, rtol=1e-12)
    y = jnp.asarray(dual)
    primal = mirror_map.to_primal(y)
    assert np.all(np.asarray(primal) >= lower) and np.all(np.asarray(primal) <= lower + width)
    # Away from saturation of the logistic, the dual point comes back too.
    y_mid = jnp.clip(y, -15, 15)
    np.testing.assert_allclose(
        mirror_map.to_dual(mirror_map.to_primal(y_mid)), y_mid, rtol=1e-6, atol=1e-6
    )
    hessian = mirror_map.hessian(x)
    np.testing.assert_allclose(hessian, jax.hessian(mirror_map.potential)(x), rtol=1e-9)
    assert np.all(np.linalg.eigvalsh(np.asarray(hessian)) > 0)
    inverse = _dense(mirror_map.inverse_hessian_vector, x, DIM)
    np.testing.assert_allclose(inverse @ hessian, np.eye(DIM), atol=1e-9)
    # jacfwd(∇φ*) at y = ∇φ(x) is G(x)⁻¹.
    jacobian = jax.jacfwd(mirror_map.to_primal)(mirror_map.to_dual(x))
    np.testing.assert_allclose(jacobian, inverse, rtol=1e-8, atol=1e-12)
    # ∇·G⁻¹, row-wise, by autodiff of the inverse metric.
    autodiff = jnp.trace(
        jax.jacfwd(lambda z: _dense(mirror_map.inverse_hessian_vector, z, DIM))(x),
        axis1=1,
        axis2=2,
    )
    np.testing.assert_allclose(mirror_map.inverse_hessian_divergence(x), autodiff, atol=1e-10)


@_SETTINGS
@given(_unit_points(DIM + 1), st.lists(st.floats(-20, 20), min_size=DIM, max_size=DIM))
def test_simplex_map_inverts_and_its_hessian_is_the_reduced_potentials(weights, dual):
    mirror_map = simplex_mirror_map()
    x = jnp.asarray(weights) / np.sum(weights)
    np.testing.assert_allclose(mirror_map.to_primal(mirror_map.to_dual(x)), x, rtol=1e-12)
    y = jnp.asarray(dual)
    np.testing.assert_allclose(mirror_map.to_dual(mirror_map.to_primal(y)), y, atol=1e-8)
    assert float(jnp.sum(mirror_map.to_primal(y))) == pytest.approx(1.0, abs=1e-14)
    hessian = mirror_map.hessian(x)
    reduced = jax.hessian(lambda z: mirror_map.potential(_embed(z)))(x[1:])
    np.testing.assert_allclose(hessian, reduced, rtol=1e-9)
    assert np.all(np.linalg.eigvalsh(np.asarray(hessian)) > 0)
    inverse = _dense(mirror_map.inverse_hessian_vector, x, DIM + 1)
    np.testing.assert_allclose(inverse, np.diag(x) - np.outer(x, x), atol=1e-15)
    # The reduced block of G⁻¹ inverts the reduced Hessian.
    np.testing.assert_allclose(inverse[1:, 1:] @ hessian, np.eye(DIM), atol=1e-9)
    # jacfwd(softmax(0, y)) = G⁻¹ in the reduced columns.
    jacobian = jax.jacfwd(mirror_map.to_primal)(mirror_map.to_dual(x))
    np.testing.assert_allclose(jacobian, inverse[:, 1:], atol=1e-12)

    # ∇·G⁻¹ in the reduced (free) coordinates; x_0's entry is minus the sum of the others.
    def reduced_inverse(z):
        return jnp.diag(z) - jnp.outer(z, z)

    autodiff = jnp.trace(jax.jacfwd(reduced_inverse)(x[1:]), axis1=1, axis2=2)
    divergence = mirror_map.inverse_hessian_divergence(x)
    np.testing.assert_allclose(divergence[1:], autodiff, atol=1e-12)
    assert float(jnp.sum(divergence)) == pytest.approx(0.0, abs=1e-12)


@_SETTINGS
@given(_box_bounds(), _unit_points(DIM))
def test_box_noise_covariances_are_the_metric_and_its_inverse(bounds, fractions):
    lower, width = np.asarray(bounds[0]), np.asarray(bounds[1])
    mirror_map = box_mirror_map(lower, lower + width)
    x = jnp.asarray(lower + width * np.asarray(fractions))
    inverse = _dense(mirror_map.inverse_hessian_vector, x, DIM)
    root = _dense(mirror_map.inverse_hessian_sqrt_noise, x, DIM)
    np.testing.assert_allclose(root @ root.T, inverse, rtol=1e-10, atol=1e-14)
    root = _dense(mirror_map.hessian_sqrt_noise, x, DIM)
    np.testing.assert_allclose(root @ root.T, mirror_map.hessian(x), rtol=1e-10)


@_SETTINGS
@given(_unit_points(DIM + 1))
def test_simplex_noise_covariance_is_exactly_diag_x_minus_xxT(weights):
    mirror_map = simplex_mirror_map()
    x = jnp.asarray(weights) / np.sum(weights)
    root = _dense(mirror_map.inverse_hessian_sqrt_noise, x, DIM + 1)
    np.testing.assert_allclose(root @ root.T, np.diag(x) - np.outer(x, x), atol=1e-14)
    root = _dense(mirror_map.hessian_sqrt_noise, x, DIM + 1)  # (DIM, DIM + 1)
    np.testing.assert_allclose(root @ root.T, mirror_map.hessian(x), rtol=1e-10)


def test_simplex_noise_covariance_by_monte_carlo():
    mirror_map = simplex_mirror_map()
    x = jnp.asarray([0.1, 0.2, 0.3, 0.4])
    samples = 200_000
    noise = jax.random.normal(jax.random.key(0), (samples, DIM + 1))
    draws = np.asarray(jax.vmap(mirror_map.inverse_hessian_sqrt_noise, (None, 0))(x, noise))
    expected = np.diag(x) - np.outer(x, x)
    # Entry (i, j) of a sample covariance has standard error sqrt((Σ_ii Σ_jj + Σ_ij²)/n).
    diag = np.diag(expected)
    se = np.sqrt((np.outer(diag, diag) + expected**2) / samples)
    assert np.all(np.abs(np.cov(draws.T) - expected) <= 5 * se)
    np.testing.assert_allclose(draws.sum(axis=1), 0.0, atol=1e-12)  # stays on the hyperplane


@_SETTINGS
@given(st.lists(st.floats(-3.0, 3.0), min_size=DIM + 1, max_size=DIM + 1))
def test_simplex_projection_is_feasible_idempotent_and_matches_bisection(point):
    mirror_map = simplex_mirror_map()
    v = np.asarray(point)
    projected = np.asarray(mirror_map.project(jnp.asarray(v)))
    assert np.all(projected >= 0) and projected.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(mirror_map.project(jnp.asarray(projected)), projected, atol=1e-12)
    # Independent path: the KKT threshold τ with Σ max(v - τ, 0) = 1, by bisection.
    low, high = v.min() - 1.0, v.max()
    for _ in range(200):
        tau = 0.5 * (low + high)
        low, high = (tau, high) if np.maximum(v - tau, 0).sum() > 1 else (low, tau)
    np.testing.assert_allclose(projected, np.maximum(v - 0.5 * (low + high), 0), atol=1e-10)


@_SETTINGS
@given(
    _box_bounds(),
    st.lists(st.floats(-20.0, 20.0, allow_subnormal=False), min_size=DIM, max_size=DIM),
)
def test_box_clip_is_strictly_inside_and_project_is_feasible(bounds, point):
    lower, width = np.asarray(bounds[0]), np.asarray(bounds[1])
    upper = lower + width
    mirror_map = box_mirror_map(lower, upper)
    v = jnp.asarray(point)
    clipped = np.asarray(mirror_map.clip(v, 1e-9))
    assert np.all(clipped > lower) and np.all(clipped < upper)
    assert float(mirror_map.boundary_distance(jnp.asarray(clipped))) > 0
    inside = np.clip(np.asarray(point), lower + 1e-3 * width, upper - 1e-3 * width)
    np.testing.assert_array_equal(mirror_map.clip(jnp.asarray(inside), 1e-9), inside)
    projected = np.asarray(mirror_map.project(v))
    np.testing.assert_array_equal(projected, np.clip(point, lower, upper))
    np.testing.assert_array_equal(mirror_map.project(jnp.asarray(projected)), projected)


def test_clip_margin_survives_float32_near_one():
    with jax.enable_x64(False):
        x = jnp.asarray([1.0, 0.0], jnp.float32)
        box = box_mirror_map(0.0, 1.0).clip(x, 1e-9)
        assert float(box[0]) < 1.0 and float(box[1]) > 0.0  # 1 - 1e-9 rounds to 1 in float32
        simplex = simplex_mirror_map().clip(jnp.asarray([1.0, 0.0, 0.0], jnp.float32), 1e-9)
        assert float(jnp.min(simplex)) > 0 and float(jnp.max(simplex)) < 1.0


def test_euclidean_map_is_the_identity_geometry():
    mirror_map = euclidean_mirror_map()
    x = jnp.asarray([3.0, -1.0, 100.0])
    np.testing.assert_array_equal(mirror_map.to_dual(x), x)
    np.testing.assert_array_equal(mirror_map.to_primal(x), x)
    np.testing.assert_array_equal(mirror_map.hessian(x), jax.hessian(mirror_map.potential)(x))
    np.testing.assert_array_equal(mirror_map.inverse_hessian_divergence(x), np.zeros(3))
    assert np.isinf(float(mirror_map.boundary_distance(x)))


@pytest.mark.parametrize(
    "lower, upper, match",
    [
        (1.0, 1.0, "upper must be > lower"),
        ([0.0, 2.0], [1.0, 1.0], "upper must be > lower"),
        (0.0, np.inf, "upper must be finite"),
    ],
)
def test_bad_box_bounds_raise(lower, upper, match):
    with pytest.raises(ValueError, match=match):
        box_mirror_map(lower, upper)


# The mirror-diffusion samplers (the "dual_split" scheme's noise step), by Monte Carlo on
# DIFFUSION_SAMPLES draws: 4 standard errors bound a false alarm below 1e-4 per moment.
DIFFUSION_SAMPLES = 40_000
DIFFUSION_SE_MULTIPLE = 4.0


def _diffusion_step(mirror_map, positions, duration, seed):
    """One ``mirror_diffusion`` draw per row of ``positions``, back in primal coordinates."""
    return np.asarray(_jitted_diffusion_step(mirror_map, positions, duration, jax.random.key(seed)))


@functools.partial(jax.jit, static_argnums=0)
def _jitted_diffusion_step(mirror_map, positions, duration, key):
    noise = jax.random.normal(key, (positions.shape[0], 4, positions.shape[1]), positions.dtype)
    dual = jax.vmap(mirror_map.to_dual)(positions)
    moved = jax.vmap(mirror_map.mirror_diffusion, in_axes=(0, None, 0))(dual, duration, noise)
    return jax.vmap(mirror_map.to_primal)(moved)


def _within_monte_carlo(samples, expected):
    se = samples.std(axis=0, ddof=1) / np.sqrt(samples.shape[0])
    np.testing.assert_array_less(
        np.abs(samples.mean(axis=0) - expected), DIFFUSION_SE_MULTIPLE * se
    )


@pytest.mark.parametrize("duration", [1e-3, 0.3])
def test_mirror_diffusion_leaves_the_uniform_law_invariant(duration):
    # Lebesgue measure is the driftless mirror diffusion's invariant law, and the Wright–Fisher
    # kernel keeps it exactly, for any step: uniform draws stay uniform (first two moments).
    lower, upper = np.array([-1.0, 0.0, 2.0]), np.array([1.0, 0.5, 5.0])
    box = box_mirror_map(lower, upper)
    uniform = np.random.default_rng(0).uniform(size=(DIFFUSION_SAMPLES, 3))
    start = lower + (upper - lower) * uniform
    moved = (_diffusion_step(box, jnp.asarray(start), duration, 1) - lower) / (upper - lower)
    _within_monte_carlo(moved, 0.5)
    _within_monte_carlo(moved**2, 1.0 / 3.0)
    simplex = simplex_mirror_map()
    start = np.random.default_rng(2).dirichlet(np.ones(4), DIFFUSION_SAMPLES)
    moved = _diffusion_step(simplex, jnp.asarray(start), duration, 3)
    np.testing.assert_allclose(moved.sum(axis=1), 1.0, rtol=1e-12)
    _within_monte_carlo(moved, 0.25)
    _within_monte_carlo(moved**2, 2.0 / 20.0)  # E x_j² = 2/((d + 1)(d + 2)) for Dir(1, ..., 1)


def test_mirror_diffusion_moves_like_the_wright_fisher_diffusion():
    # From a fixed point, the neutral Wright–Fisher diffusion (θ_j = 1, |θ| = d + 1) has mean
    # x + (1/|θ| - x)(1 - e^{-|θ|t/2}) after Wright–Fisher time t (here 2·duration; on a box of
    # width w, 2·duration/w per coordinate). At t = 0.05 the step's O(t²) error is ~1e-4, below
    # the Monte Carlo error.
    duration = 0.025
    x = jnp.asarray([0.05, 0.15, 0.3, 0.5])
    moved = _diffusion_step(simplex_mirror_map(), jnp.tile(x, (DIFFUSION_SAMPLES, 1)), duration, 4)
    decay = np.exp(-4 * (2 * duration) / 2)
    _within_monte_carlo(moved, np.asarray(x) + (0.25 - np.asarray(x)) * (1 - decay))
    box = box_mirror_map(0.0, 2.0)
    z = jnp.asarray([0.02, 0.5, 0.9])
    moved = _diffusion_step(box, jnp.tile(2 * z, (DIFFUSION_SAMPLES, 1)), 2 * duration, 5) / 2
    decay = np.exp(-2 * (2 * 2 * duration / 2) / 2)
    _within_monte_carlo(moved, np.asarray(z) + (0.5 - np.asarray(z)) * (1 - decay))
    # Nothing rounds to a face: a point at logit -40 moves, finite, strictly inside (float32).
    with jax.enable_x64(False):
        y = jnp.asarray([-40.0, 40.0], jnp.float32)
        out = box_mirror_map(0.0, 1.0).mirror_diffusion(y, 1e-4, jnp.zeros((4, 2), jnp.float32))
        assert np.all(np.isfinite(np.asarray(out)))
        x = box_mirror_map(0.0, 1.0).to_primal(out)
        assert float(x[0]) > 0 and float(x[1]) <= 1.0


def test_euclidean_mirror_diffusion_is_brownian_motion():
    noise = jnp.asarray(np.random.default_rng(0).normal(size=(4, 3)))
    y = jnp.asarray([0.5, -2.0, 7.0])
    np.testing.assert_allclose(
        euclidean_mirror_map().mirror_diffusion(y, 0.08, noise), y + 0.4 * noise[0], rtol=1e-15
    )
