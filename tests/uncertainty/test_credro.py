"""CreDRO (jaxlab/uncertainty) against independent truths: DRO losses computed directly (sorting,
a primal LP over reweightings, the closed forms of the note), uncertainty measures on hand-made
credal sets with known values (the note's check 1, brute-force grids on the simplex), AUROC
against scikit-learn, identical members with zero epistemic uncertainty, reproducibility."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import linprog
from sklearn.metrics import roc_auc_score

from jaxlab.uncertainty import (
    accuracy_rejection_curve,
    add_pixel_noise,
    auroc,
    chi2_dro_loss,
    credal_box,
    cvar_loss,
    digits_shift_splits,
    dro_loss,
    ensemble_init,
    entropy,
    entropy_of_mean,
    epistemic_uncertainty,
    lower_entropy,
    mlp_apply,
    mutual_information,
    rotate_images,
    tilted_loss,
    train_credal_ensemble,
    train_deep_ensemble,
    upper_entropy,
)

LOSSES = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
NOTE_MEMBERS = np.array([[0.7, 0.2, 0.1], [0.5, 0.3, 0.2], [0.6, 0.1, 0.3]])


def _exact_cvar_lp(losses, level):
    """sup Σ w ℓ over w in the simplex with w_i <= 1/(δB): a linear program."""
    n = losses.size
    res = linprog(-losses, A_eq=np.ones((1, n)), b_eq=[1.0], bounds=[(0, 1 / (level * n))] * n)
    return -res.fun


def _chi2_primal(losses, radius):
    """sup Σ w ℓ, w in the simplex, ½ mean((Bw - 1)²) <= ρ: SLSQP from uniform weights."""
    from scipy.optimize import minimize

    n = losses.size
    divergence = lambda w: 0.5 * np.mean((n * w - 1) ** 2)  # noqa: E731
    cons = [{"type": "eq", "fun": lambda w: w.sum() - 1},
            {"type": "ineq", "fun": lambda w: radius - divergence(w)}]  # fmt: skip
    res = minimize(lambda w: -w @ losses, np.full(n, 1 / n), constraints=cons,
                   bounds=[(0, 1)] * n, method="SLSQP", options={"ftol": 1e-12})  # fmt: skip
    return -res.fun


def test_cvar_against_sorting_and_the_exact_lp():
    rng = np.random.default_rng(0)
    for losses in (LOSSES, rng.exponential(size=13)):
        for level in (1.0, 0.8, 0.5, 0.37, 0.2, 0.05):
            k = max(int(np.ceil(level * losses.size - 1e-9)), 1)
            direct = np.sort(losses)[::-1][:k].mean()
            np.testing.assert_allclose(cvar_loss(jnp.asarray(losses), level=level), direct,
                                       rtol=1e-5)  # fmt: skip
            np.testing.assert_allclose(cvar_loss(jnp.asarray(losses), level=level, exact=True),
                                       _exact_cvar_lp(losses, level), rtol=1e-5)  # fmt: skip
    np.testing.assert_allclose(cvar_loss(jnp.asarray(LOSSES), level=0.5, exact=True), 4.2,
                               rtol=1e-6)  # fmt: skip


def test_cvar_level_may_be_traced_and_vmapped():
    levels = jnp.array([1.0, 0.4, 0.2])
    got = jax.jit(jax.vmap(lambda d: dro_loss(jnp.asarray(LOSSES), kind="cvar", level=d)))(levels)
    np.testing.assert_allclose(got, [3.0, 4.5, 5.0], rtol=1e-6)
    grad = jax.grad(lambda ls: cvar_loss(ls, level=0.4))(jnp.asarray(LOSSES))
    np.testing.assert_allclose(grad, [0, 0, 0, 0.5, 0.5])  # the two largest, weight 1/k


def test_chi2_against_the_primal_and_the_closed_form():
    chi2 = jax.jit(lambda losses, radius: chi2_dro_loss(losses, radius=radius))
    for radius, note in ((0.1, 3.632456), (0.5, 4.365148), (2.0, 5.0)):
        value = float(chi2(jnp.asarray(LOSSES), radius))
        np.testing.assert_allclose(value, note, rtol=1e-5)
        np.testing.assert_allclose(value, _chi2_primal(LOSSES, radius), rtol=1e-4)
    rng = np.random.default_rng(1)
    losses = rng.exponential(size=9)
    for radius in (0.05, 0.3, 1.0):  # all active at small ρ: μ + σ√(2ρ); primal in general
        np.testing.assert_allclose(chi2(jnp.asarray(losses, jnp.float32), radius),
                                   _chi2_primal(losses, radius), rtol=1e-4)  # fmt: skip
    assert float(chi2(jnp.asarray(LOSSES), 0.0)) == pytest.approx(3.0)


def test_tilted_against_direct_computation_and_limits():
    for tau in (0.5, 1.0, 3.0):
        direct = tau * np.log(np.mean(np.exp(LOSSES / tau)))
        np.testing.assert_allclose(tilted_loss(jnp.asarray(LOSSES), temperature=tau), direct,
                                   rtol=1e-5)  # fmt: skip
    assert float(tilted_loss(jnp.asarray(LOSSES), temperature=jnp.inf)) == pytest.approx(3.0)
    assert float(tilted_loss(jnp.asarray(LOSSES), temperature=1e-3)) == pytest.approx(5.0, 1e-3)
    weights = jax.grad(lambda ls: tilted_loss(ls, temperature=1.0))(jnp.asarray(LOSSES))
    np.testing.assert_allclose(weights, jax.nn.softmax(jnp.asarray(LOSSES)), rtol=1e-5)


def test_note_credal_set_values():
    @jax.jit
    def measures(members):
        lower, upper = credal_box(members)
        return (lower, upper, upper_entropy(lower, upper), lower_entropy(lower, upper),
                epistemic_uncertainty(members), entropy_of_mean(members),
                mutual_information(members))  # fmt: skip

    lower, upper, top, bottom, eu, hbar, mi = measures(jnp.asarray(NOTE_MEMBERS))
    np.testing.assert_allclose(lower, [0.5, 0.1, 0.1])
    np.testing.assert_allclose(upper, [0.7, 0.3, 0.3])
    note = [1.5, 1.156780, 0.343220, 1.370951, 0.058378]  # H̄, H̲, EU, H(p̄), MI
    np.testing.assert_allclose([top, bottom, eu, hbar, mi], note, atol=1e-6)


def _grid_extremes(lower, upper, step=0.001):
    """Max and min entropy over a grid of the simplex inside the box (C = 3), base 2."""
    a, b = np.meshgrid(np.arange(0, 1 + 1e-9, step), np.arange(0, 1 + 1e-9, step))
    p = np.stack([a.ravel(), b.ravel(), 1 - a.ravel() - b.ravel()], axis=1)
    p = p[np.all((p >= lower - 1e-12) & (p <= upper + 1e-12), axis=1)]
    h = -np.sum(np.where(p > 0, p * np.log2(np.where(p > 0, p, 1)), 0), axis=1)
    return h.max(), h.min()


def test_upper_and_lower_entropy_against_a_brute_force_grid():
    rng = np.random.default_rng(2)
    # One compiled program for the four boxes (eagerly, every op compiles apart).
    entropies = jax.jit(
        lambda lower, upper: (upper_entropy(lower, upper), lower_entropy(lower, upper))
    )
    for _ in range(4):
        members = rng.dirichlet(np.ones(3), size=4)
        lower, upper = members.min(0), members.max(0)
        best, worst = _grid_extremes(lower, upper)
        top, bottom = (float(h) for h in entropies(jnp.asarray(lower), jnp.asarray(upper)))
        assert best - 1e-5 <= top <= best + 4e-3  # the grid misses the optimum by < its step
        assert worst - 4e-3 <= bottom <= worst + 1e-5


def test_maximal_ignorance_and_identical_members():
    c = 5

    @jax.jit
    def measures(lower, upper, same, p):
        return (upper_entropy(lower, upper), lower_entropy(lower, upper),
                epistemic_uncertainty(same), mutual_information(same),
                upper_entropy(*credal_box(same)), entropy(p))  # fmt: skip

    p = jax.nn.softmax(jnp.asarray(np.random.default_rng(0).normal(size=(7, c)), jnp.float32))
    same = jnp.broadcast_to(p, (4, 7, c))
    top, bottom, eu, mi, top_same, h = measures(jnp.zeros(c), jnp.ones(c), same, p)
    assert float(top) == pytest.approx(np.log2(c), abs=1e-6)
    assert float(bottom) == pytest.approx(0.0, abs=1e-6)
    np.testing.assert_allclose(eu, 0.0, atol=1e-5)
    np.testing.assert_allclose(mi, 0.0, atol=1e-6)
    np.testing.assert_allclose(top_same, h, atol=1e-5)


def test_auroc_matches_scikit_learn_with_ties_and_the_rejection_curve():
    rng = np.random.default_rng(3)
    s_in, s_out = rng.integers(0, 5, 40).astype(float), rng.integers(1, 6, 30).astype(float)
    expected = roc_auc_score(np.r_[np.zeros(40), np.ones(30)], np.r_[s_in, s_out])
    assert auroc(s_in, s_out) == pytest.approx(expected)
    correct = rng.random(50) < 0.7
    scores = rng.random(50)
    curve = accuracy_rejection_curve(correct, scores, [0.0, 0.5])
    keep = np.argsort(scores)[:25]
    np.testing.assert_allclose(curve, [correct.mean(), correct[keep].mean()])


def test_ensemble_training_is_reproducible_and_dro_members_weight_hard_samples():
    x = jax.random.normal(jax.random.key(0), (40, 4))
    y = (x[:, 0] > 0).astype(jnp.int32)
    init = ensemble_init(jax.random.key(1), 2, (4, 8, 2))
    run = jax.jit(
        lambda levels: train_credal_ensemble(
            mlp_apply, init, x, y, jax.random.key(2), levels=levels, steps=30, batch_size=16
        )
    )
    (p1, l1), (p2, _) = run(jnp.array([1.0, 0.2])), run(jnp.array([1.0, 0.2]))
    jax.tree.map(np.testing.assert_array_equal, p1, p2)
    assert l1.shape == (30, 2)
    # The CVaR-0.2 member's objective is the mean of its batch's 4 largest losses: above ERM's.
    assert float(jnp.mean(l1[:, 1])) > float(jnp.mean(l1[:, 0]))
    # ERM members (level 1) are the deep ensemble.
    p3, _ = jax.jit(
        lambda: train_deep_ensemble(
            mlp_apply, init, x, y, jax.random.key(2), steps=30, batch_size=16
        )
    )()
    pe, _ = run(jnp.ones(2))
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7), p3, pe)


def test_splits_and_shifts():
    splits = digits_shift_splits(jax.random.key(0), train_class_weights=(1, 1, 1, 0.3, 0.3))
    counts = np.bincount(np.asarray(splits.train_y), minlength=5)
    assert counts[3] < 0.5 * counts[0] and splits.near_ood_x.shape == (896, 64)
    again = digits_shift_splits(jax.random.key(0), train_class_weights=(1, 1, 1, 0.3, 0.3))
    np.testing.assert_array_equal(splits.shifted_x, again.shifted_x)
    image = np.zeros((1, 8, 8), np.float32)
    image[0, 2, 5] = 1.0
    np.testing.assert_allclose(rotate_images(image, 90.0)[0], np.rot90(image[0]), atol=1e-6)
    np.testing.assert_allclose(rotate_images(image, 0.0), image, atol=1e-6)
    noisy = add_pixel_noise(jax.random.key(1), jnp.full((500, 64), 0.5), 0.1)
    assert float(jnp.std(noisy)) == pytest.approx(0.1, rel=0.05)
