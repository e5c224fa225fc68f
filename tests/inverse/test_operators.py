"""Forward models: adjoints, closed-form data steps against dense solves, CT geometry."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.inverse import (
    LinearOperator,
    average_pool_operator,
    inpainting_operator,
    lower_half_mask,
    matrix_operator,
    parallel_beam_operator,
    task_operator,
)


def _operators():
    rng = np.random.default_rng(0)
    return {
        "inpainting": inpainting_operator(rng.random((6, 4)) < 0.5),
        "inpainting_lower_half": inpainting_operator(lower_half_mask((8, 8))),
        "average_pool_2": average_pool_operator(2, (6, 4)),
        "average_pool_3": average_pool_operator(3, (6, 9)),
        "parallel_beam": parallel_beam_operator((5, 6), 7),
        "matrix": matrix_operator(rng.normal(size=(3, 5))),
    }


OPERATORS = _operators()


def _dense(op: LinearOperator) -> np.ndarray:
    return np.asarray(jax.vmap(op.matvec)(jnp.eye(op.input_size))).T  # column j = A e_j


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_adjoint_identity(name, x64):
    # <Ax, y> = <x, Aᵀy> for random x, y (float64), and rmatvec is the transpose of matvec's
    # dense matrix.
    op = _operators()[name]
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.normal(size=(4, op.input_size)))
    y = jnp.asarray(rng.normal(size=(4, op.output_size)))
    lhs = jnp.sum(op.matvec(x) * y, axis=-1)
    rhs = jnp.sum(x * op.rmatvec(y), axis=-1)
    np.testing.assert_allclose(lhs, rhs, rtol=1e-12, atol=1e-12)
    dense_t = np.asarray(jax.vmap(op.rmatvec)(jnp.eye(op.output_size)))  # row i = Aᵀ e_i
    np.testing.assert_allclose(dense_t, _dense(op), atol=1e-12)


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_normal_solve_matches_a_dense_solve(name, x64):
    op = _operators()[name]
    a = np.asarray(_dense(op))
    rng = np.random.default_rng(2)
    rhs = rng.normal(size=(3, op.input_size))
    for weight, mu in ((400.0, 1.0), (1.0, 1e3), (2.5, 0.3)):
        expected = np.linalg.solve(weight * a.T @ a + mu * np.eye(op.input_size), rhs.T).T
        got = op.normal_solve(jnp.asarray(rhs), weight, mu)
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-10)
        # The base class's conjugate gradients (relative residual 1e-7) agree with the closed
        # forms, to the accuracy that residual allows at these condition numbers.
        cg = LinearOperator.normal_solve(op, jnp.asarray(rhs), weight, mu)
        np.testing.assert_allclose(cg, expected, rtol=1e-5, atol=1e-6)


def test_average_pooling_is_the_block_mean():
    op = average_pool_operator(2, (4, 6))
    img = np.arange(24.0).reshape(4, 6)
    expected = img.reshape(2, 2, 3, 2).mean(axis=(1, 3))
    np.testing.assert_allclose(op.matvec(jnp.asarray(img.reshape(-1))), expected.reshape(-1))
    # A Aᵀ = I / factor²
    np.testing.assert_allclose(_dense(op) @ _dense(op).T, np.eye(6) / 4, atol=1e-7)


def test_inpainting_keeps_observed_pixels_and_counts_them():
    mask = lower_half_mask((4, 4))
    op = inpainting_operator(mask)
    x = jnp.arange(16.0)
    np.testing.assert_array_equal(op.matvec(x), np.where(np.asarray(mask).reshape(-1), x, 0.0))
    assert int(op.num_measurements) == 8
    assert op.matvec(jnp.ones((3, 16))).shape == (3, 16)


def test_parallel_beam_conserves_mass_and_projects_a_pixel_to_its_offset(x64):
    h, w, angles = 5, 6, 7
    op = parallel_beam_operator((h, w), angles)
    bins = op.output_size // angles
    centres = np.arange(bins) - (bins - 1) / 2
    rng = np.random.default_rng(3)
    x = rng.random(h * w)
    sino = np.asarray(op.matvec(jnp.asarray(x))).reshape(angles, bins)
    np.testing.assert_allclose(sino.sum(axis=1), x.sum(), rtol=1e-12)
    i, j = 1, 4  # one pixel: its projection's centre of mass is x cos θ + y sin θ
    one = np.zeros(h * w)
    one[i * w + j] = 1.0
    sino = np.asarray(op.matvec(jnp.asarray(one))).reshape(angles, bins)
    px, py = j - (w - 1) / 2, (h - 1) / 2 - i
    theta = np.pi * np.arange(angles) / angles
    np.testing.assert_allclose(sino @ centres, px * np.cos(theta) + py * np.sin(theta), atol=1e-12)
    # θ = 0 projects onto x: the columns' sums, interpolated at integer/half-integer offsets.
    assert np.count_nonzero(sino[0]) <= 2


def test_one_program_serves_every_mask():
    traces = []

    @jax.jit
    def apply(op, x):
        traces.append(1)
        return op.matvec(x)

    rng = np.random.default_rng(4)
    for _ in range(3):
        apply(inpainting_operator(rng.random(16) < 0.5), jnp.ones(16))
    assert len(traces) == 1


def test_task_operator_builds_the_papers_three_tasks():
    x = jax.random.normal(jax.random.key(0), (64,))
    expected = {
        "inpainting": inpainting_operator(lower_half_mask((8, 8))),
        "superres": average_pool_operator(2, (8, 8)),
        "ct": parallel_beam_operator((8, 8), 4),
    }
    for task, operator in expected.items():
        built = task_operator(task, (8, 8), ct_angles=4)
        assert type(built) is type(operator)
        np.testing.assert_array_equal(built.matvec(x), operator.matvec(x))
