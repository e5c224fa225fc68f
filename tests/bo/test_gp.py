"""Exact GPs against the closed form, gpjax, explicit refits and the RAMBO note's check values."""

from __future__ import annotations

import gpjax as gpx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.bo import (
    GPParams,
    expected_improvement,
    fit_gp,
    gp_log_marginal,
    gp_loo_predictive,
    gp_posterior,
    gp_predict,
    rbf_kernel,
    upper_confidence_bound,
)


def _data(n=12, d=2, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, (n, d))
    y = np.sin(3.0 * x[:, 0]) + 0.5 * np.cos(2.0 * x[:, 1]) + 0.05 * rng.normal(size=n)
    return x, y


def _closed_form(x, y, xt, sf, ls, sn, jitter=1e-6):
    def k(a, b):
        return sf**2 * np.exp(-0.5 * (((a[:, None, :] - b[None]) / ls) ** 2).sum(-1))

    cov = k(x, x) + (sn**2 + jitter) * np.eye(len(x))
    mean = k(xt, x) @ np.linalg.solve(cov, y)
    var = sf**2 - np.einsum("ij,ji->i", k(xt, x), np.linalg.solve(cov, k(x, xt)))
    sign, logdet = np.linalg.slogdet(cov)
    mll = -0.5 * y @ np.linalg.solve(cov, y) - 0.5 * logdet - 0.5 * len(y) * np.log(2 * np.pi)
    return mean, var, mll


def test_note_check_7_marginal_and_prediction():
    with jax.enable_x64(True):
        params = GPParams(jnp.array(1.0), jnp.array(0.5), jnp.array(0.1))
        x, y = jnp.array([[0.0], [1.0]]), jnp.array([0.5, -0.3])
        assert float(gp_log_marginal(x, y, params)) == pytest.approx(-2.030428, abs=1e-6)
        mean, var = gp_predict(x, y, jnp.array([[0.5]]), params)
        assert float(mean[0]) == pytest.approx(0.105913, abs=1e-6)
        assert float(var[0]) == pytest.approx(0.357604, abs=1e-6)


@pytest.mark.parametrize("ard", [False, True])
def test_posterior_equals_closed_form_and_gpjax(ard):
    x, y = _data()
    xt = np.random.default_rng(1).uniform(-1, 1, (7, 2))
    ls = np.array([0.4, 0.9]) if ard else 0.6
    with jax.enable_x64(True):
        params = GPParams(jnp.array(1.3), jnp.asarray(ls), jnp.array(0.2))
        mean, var = gp_predict(jnp.asarray(x), jnp.asarray(y), jnp.asarray(xt), params)
        mll = gp_log_marginal(jnp.asarray(x), jnp.asarray(y), params)
        ref_mean, ref_var, ref_mll = _closed_form(x, y, xt, 1.3, ls, 0.2)
        np.testing.assert_allclose(mean, ref_mean, rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(var, ref_var, rtol=1e-9, atol=1e-10)
        assert float(mll) == pytest.approx(ref_mll, rel=1e-10)
        # gpjax: the same kernel, Gaussian likelihood (jitter on the kernel diagonal: the same sum)
        kernel = gpx.kernels.RBF(lengthscale=jnp.asarray(ls, float), variance=1.3**2)
        prior = gpx.Prior(kernel=kernel, mean_function=gpx.mean_functions.Zero(), jitter=1e-6)
        model = gpx.construct_model(prior, gpx.likelihoods.Gaussian(obs_stddev=0.2))
        data = gpx.Dataset(X=jnp.asarray(x), y=jnp.asarray(y)[:, None])
        latent = model.condition(data).predict(jnp.asarray(xt), covariance="diagonal")
        np.testing.assert_allclose(mean, latent.mean, rtol=1e-7, atol=1e-9)
        # gpjax adds its jitter to the test covariance too
        np.testing.assert_allclose(var, np.asarray(latent.variance) - 1e-6, rtol=1e-6, atol=1e-8)
        assert float(mll) == pytest.approx(
            float(gpx.objectives.conjugate_mll(model, data)), rel=1e-9
        )


def test_mask_equals_refit_on_members():
    x, y = _data(10)
    mask = np.array([1, 1, 0, 1, 0, 1, 1, 1, 0, 1], bool)
    xt = jnp.asarray(x[:4])
    with jax.enable_x64(True):
        params = GPParams(jnp.array(0.8), jnp.array([0.5, 0.7]), jnp.array(0.1))
        padded = gp_predict(
            jnp.asarray(x), jnp.asarray(y).at[2].set(99.0), xt, params, jnp.asarray(mask)
        )
        sub = gp_predict(jnp.asarray(x[mask]), jnp.asarray(y[mask]), xt, params)
        np.testing.assert_allclose(padded, sub, rtol=1e-10, atol=1e-12)
        lm = gp_log_marginal(jnp.asarray(x), jnp.asarray(y), params, jnp.asarray(mask))
        assert float(lm) == pytest.approx(
            float(gp_log_marginal(x[mask], y[mask], params)), rel=1e-12
        )


def test_leave_one_out_identity_equals_explicit_refit():
    x, y = _data(9)
    mask = np.ones(9, bool)
    mask[4] = False
    with jax.enable_x64(True):
        params = GPParams(jnp.array(1.1), jnp.array(0.5), jnp.array(0.15))
        mean, var = gp_loo_predictive(jnp.asarray(x), jnp.asarray(y), params, jnp.asarray(mask))
        for i in np.flatnonzero(mask):
            keep = mask.copy()
            keep[i] = False
            m, v = gp_predict(x[keep], y[keep], x[i : i + 1], params)
            assert float(mean[i]) == pytest.approx(float(m[0]), abs=1e-10)
            assert float(var[i]) == pytest.approx(float(v[0]) + 0.15**2 + 1e-6, abs=1e-10)
        assert float(mean[4]) == 0.0 and float(var[4]) == 0.0


def test_fit_gp_improves_the_likelihood_both_optimizers():
    x, y = _data(16)
    with jax.enable_x64(True):
        start = GPParams(jnp.array(1.0), jnp.ones(2), jnp.array(0.1))
        before = -float(gp_log_marginal(x, y, start))
        for method in ("lbfgs", "adam"):
            params, info = fit_gp(x, y, method=method, steps=40, learning_rate=0.05)
            assert float(info.objective) < before - 1.0
            assert int(info.nonfinite) == 0
            assert float(info.objective) == pytest.approx(-float(gp_log_marginal(x, y, params)))
        # L-BFGS reaches a stationary point: the gradient in log-parameters is small there
        params, _ = fit_gp(x, y, steps=100)
        u = jnp.log(jnp.concatenate([jnp.ravel(v) for v in params]))

        def nll(u):
            t = jnp.exp(u)
            return -gp_log_marginal(x, y, GPParams(t[0], t[1:3], t[3]))

        assert float(jnp.max(jnp.abs(jax.grad(nll)(u)))) < 1e-3


def test_fit_gp_reports_nonfinite_steps_instead_of_absorbing_them():
    x, y = _data(8)

    def bad_prior(params):
        return jnp.where(params.noise_std > 0.05, 0.0, jnp.nan)

    _, info = fit_gp(x, y, log_prior=bad_prior, method="adam", learning_rate=0.5, steps=10)
    assert int(info.nonfinite) >= 1
    assert np.isfinite(float(info.objective))


def test_kernel_and_acquisitions():
    k = rbf_kernel(
        jnp.zeros((1, 2)),
        jnp.array([[1.0, 2.0]]),
        signal_std=1.0,
        lengthscale=jnp.array([1.0, 2.0]),
    )
    assert float(k[0, 0]) == pytest.approx(np.exp(-1.0), rel=1e-6)
    # EI closed form (note check 5) and its zero-variance limit; UCB
    assert float(expected_improvement(1.0, 0.5, 0.8, xi=0.1)) == pytest.approx(0.253447, abs=1e-6)
    assert float(expected_improvement(1.0, 0.0, 0.8, xi=0.1)) == pytest.approx(0.1)
    assert float(expected_improvement(0.5, 0.0, 0.8, xi=0.1)) == 0.0
    assert float(upper_confidence_bound(1.0, 0.5, beta=3.0)) == pytest.approx(2.5)
    # EI = E[max(f - f* - xi, 0)] by Monte Carlo
    f = np.random.default_rng(0).normal(1.0, 0.5, 400_000)
    assert float(expected_improvement(1.0, 0.5, 0.8)) == pytest.approx(
        np.maximum(f - 0.9, 0).mean(), abs=2e-3
    )


def test_gp_posterior_rejects_bad_data():
    params = GPParams(1.0, 1.0, 0.1)
    with pytest.raises(ValueError, match="y must be finite"):
        gp_posterior(jnp.zeros((2, 1)), jnp.array([0.0, jnp.nan]), params)
    with pytest.raises(ValueError, match="mask must select"):
        gp_posterior(jnp.zeros((2, 1)), jnp.zeros(2), params, jnp.zeros(2, bool))
