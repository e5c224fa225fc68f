"""The BoTorch-style single GP and log EI against NumPy/SciPy float64, gpjax and asymptotics."""

from __future__ import annotations

import importlib.util
import math
import sys

import gpjax as gpx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, optimize, special

from jaxlab.bo import (
    GPParams,
    botorch_log_prior,
    expected_improvement,
    fit_sgp_botorch,
    gp_posterior,
    log_expected_improvement,
    sgp_botorch_log_posterior,
)

# BoTorch 0.18.1's SingleTaskGP, read from botorch/models/utils/gpytorch_modules.py and written
# out here by hand (not imported from jaxlab), so a slip in jaxlab's constants is caught.
_LS_LOC = lambda d: math.sqrt(2.0) + 0.5 * math.log(d)  # noqa: E731
_LS_SCALE = math.sqrt(3.0)
_NOISE_LOC, _NOISE_SCALE = -4.0, 1.0
_JITTER = 1e-6


def _data(n=9, d=2, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 1.0, (n, d))
    y = np.sin(5.0 * x[:, 0]) + x[:, 1] ** 2 + 0.05 * rng.normal(size=n)
    return x, (y - y.mean()) / y.std(ddof=1)


def _lognormal(v, loc, scale):
    return (
        -np.log(v)
        - np.log(scale)
        - 0.5 * np.log(2 * np.pi)
        - (np.log(v) - loc) ** 2 / (2 * scale**2)
    )


def _numpy_log_posterior(x, y, ls, noise_var, c):
    """Hand-written float64: log N(y - c; 0, K + (σ_n² + jitter) I) + the BoTorch log priors."""
    d = x.shape[1]
    k = np.exp(-0.5 * (((x[:, None, :] - x[None]) / ls) ** 2).sum(-1))
    cov = k + (noise_var + _JITTER) * np.eye(len(x))
    r = y - c
    _, logdet = np.linalg.slogdet(cov)
    mll = -0.5 * r @ np.linalg.solve(cov, r) - 0.5 * logdet - 0.5 * len(x) * np.log(2 * np.pi)
    prior = _lognormal(ls, _LS_LOC(d), _LS_SCALE).sum() + _lognormal(
        noise_var, _NOISE_LOC, _NOISE_SCALE
    )
    return mll + prior


def test_log_posterior_equals_numpy_float64():
    x, y = _data()
    mask = np.ones(len(x), bool)
    mask[3] = False
    ls, noise_std, c = np.array([0.3, 0.8]), 0.05, 0.2
    with jax.enable_x64(True):
        params = GPParams(jnp.array(1.0), jnp.asarray(ls), jnp.array(noise_std))
        got = sgp_botorch_log_posterior(
            jnp.asarray(x), jnp.asarray(y).at[3].set(50.0), params, jnp.asarray(mask), mean=c
        )
        prior = botorch_log_prior(params, dim=2)
    ref = _numpy_log_posterior(x[mask], y[mask], ls, noise_std**2, c)
    assert float(got) == pytest.approx(ref, rel=1e-12)
    ref_prior = _lognormal(ls, _LS_LOC(2), _LS_SCALE).sum() + _lognormal(
        noise_std**2, _NOISE_LOC, _NOISE_SCALE
    )
    assert float(prior) == pytest.approx(ref_prior, rel=1e-12)


def test_posterior_with_constant_mean_equals_gpjax():
    """On the same hyper-parameters (σ_f = 1, ARD ℓ, σ_n, constant mean c) as gpjax."""
    x, y = _data(10)
    xt = np.random.default_rng(3).uniform(0.0, 1.0, (6, 2))
    ls, noise_std, c = np.array([0.25, 0.6]), 0.03, -0.4
    with jax.enable_x64(True):
        params = GPParams(jnp.array(1.0), jnp.asarray(ls), jnp.array(noise_std))
        post = gp_posterior(jnp.asarray(x), jnp.asarray(y) - c, params)
        mean, var = post.predict(jnp.asarray(xt))
        mean = mean + c
        kernel = gpx.kernels.RBF(lengthscale=jnp.asarray(ls), variance=1.0)
        prior = gpx.Prior(
            kernel=kernel, mean_function=gpx.mean_functions.Constant(c), jitter=_JITTER
        )
        model = gpx.construct_model(prior, gpx.likelihoods.Gaussian(obs_stddev=noise_std))
        data = gpx.Dataset(X=jnp.asarray(x), y=jnp.asarray(y)[:, None])
        latent = model.condition(data).predict(jnp.asarray(xt), covariance="diagonal")
        np.testing.assert_allclose(mean, latent.mean, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(var, np.asarray(latent.variance) - _JITTER, atol=1e-8)
        # the marginal likelihood part of the log posterior is gpjax's conjugate MLL
        lp = sgp_botorch_log_posterior(jnp.asarray(x), jnp.asarray(y), params, mean=c)
        mll = float(gpx.objectives.conjugate_mll(model, data))
        assert float(lp - botorch_log_prior(params, dim=2)) == pytest.approx(mll, rel=1e-9)


def _scipy_map(x, y):
    """SciPy L-BFGS-B on the NumPy float64 log posterior, over BoTorch's raw parameters
    (c, ℓ_1..d, σ_n²) with its bounds, from three starts."""
    d = x.shape[1]

    def neg(theta):
        return -_numpy_log_posterior(x, y, theta[1 : 1 + d], theta[-1], theta[0])

    bounds = [(None, None)] + [(0.025, None)] * d + [(1e-4, None)]
    starts = ([0.0] + [0.3] * d + [0.0067], [0.0] + [1.0] * d + [0.05], [0.5] + [0.1] * d + [1e-3])
    return min(
        (optimize.minimize(neg, s, method="L-BFGS-B", bounds=bounds) for s in starts),
        key=lambda r: r.fun,
    )


@pytest.mark.slow  # compiles the vmapped multi-start L-BFGS (~10-30 s on 2 cores)
def test_fit_reaches_the_scipy_map_and_keeps_the_noise_floor():
    """The multi-start MAP (``method="lbfgs"``) reaches SciPy's best optimum of the float64 log
    posterior (noisy data, and noise-free data where the likelihood alone would push σ_n² far
    below BoTorch's 1e-4)."""
    x, y = _data(10)
    xs = np.linspace(0.0, 1.0, 12)[:, None]
    ys = np.sin(4.0 * xs[:, 0])
    ys = (ys - ys.mean()) / ys.std(ddof=1)
    for seed, (xd, yd) in enumerate(((x, y), (xs, ys))):
        with jax.enable_x64(True):
            params, c, info = fit_sgp_botorch(
                jax.random.key(seed), jnp.asarray(xd), jnp.asarray(yd), method="lbfgs"
            )
        ours = -float(info.objective)
        ls, noise_var = np.asarray(params.lengthscale), float(params.noise_std) ** 2
        assert ours == pytest.approx(
            _numpy_log_posterior(xd, yd, ls, noise_var, float(c)), rel=1e-8
        )
        assert float(params.signal_std) == 1.0 and int(info.nonfinite) == 0
        assert noise_var >= 1e-4 * (1 - 1e-9) and np.all(ls >= 0.025 * (1 - 1e-9))
        assert ours >= -_scipy_map(xd, yd).fun - 1e-5  # at least SciPy's best optimum


# 13 points of a BoTorch 0.18.1 run on 2-D Levy over [-10, 10]² (benchmarks/peers_botorch.py's
# loop, seed 10: its 10 Sobol points and 3 proposals) and BoTorch's own fit to them
# (fit_gpytorch_mll of SingleTaskGP with Normalize/Standardize), recorded from that run.
_LEVY_X = [
    [7.6590838097035885, 8.273494020104408], [-3.478668797761202, -6.272705476731062],
    [-5.226150266826153, 1.8885166570544243], [0.9700433537364006, -2.61740917339921],
    [2.981375642120838, 4.265284743160009], [-8.175946362316608, -1.1879149451851845],
    [-0.5289013125002384, 5.572094190865755], [5.647799205034971, -9.921360090374947],
    [6.617654953151941, 0.12499416247010231], [-2.0492799393832684, -4.391298145055771],
    [1.0465777762269395, 2.1180582271517796], [-10.0, -10.0], [-10.0, 2.884891854687627],
]  # fmt: skip
_LEVY_Y = [
    9.644182455302968, 11.710097146007472, 14.707591580101784, 1.0803378780354567,
    3.2178793748385806, 6.5299918104650265, 3.179895585080277, 29.833158685922065,
    14.522547046542117, 9.704968138766855, 0.15607825176940826, 95.38280895184609, 80.487040734058,
]  # fmt: skip
_BOTORCH_FIT = {  # lengthscales, noise variance, constant mean, log likelihood + log priors
    "ls": [0.20902496275783788, 0.17398826501944767],
    "noise": 0.006819348134427223,
    "c": -0.32356835910190934,
    "log_posterior": -16.29858482798758,
}


def _botorch_coordinates():
    x = (np.asarray(_LEVY_X) + 10.0) / 20.0  # Normalize to the unit cube
    v = -np.asarray(_LEVY_Y)  # BoTorch maximizes
    return x, (v - v.mean()) / v.std(ddof=1)  # Standardize (n - 1)


def test_lbfgsb_fit_equals_botorchs_fit():
    """BoTorch's procedure (the default ``method="lbfgsb"``) lands on BoTorch's recorded
    optimum, under jit too."""
    x, y = _botorch_coordinates()
    with jax.enable_x64(True):
        args = (jax.random.key(0), jnp.asarray(x), jnp.asarray(y))
        params, c, info = fit_sgp_botorch(*args, jitter=0.0)
        jitted = jax.jit(lambda k, a, b: fit_sgp_botorch(k, a, b, jitter=0.0))(*args)
    np.testing.assert_allclose(params.lengthscale, _BOTORCH_FIT["ls"], rtol=1e-4)
    assert float(params.noise_std) ** 2 == pytest.approx(_BOTORCH_FIT["noise"], rel=1e-4)
    assert float(c) == pytest.approx(_BOTORCH_FIT["c"], abs=1e-4)
    assert -float(info.objective) == pytest.approx(_BOTORCH_FIT["log_posterior"], abs=1e-6)
    assert int(info.nonfinite) == 0
    np.testing.assert_allclose(jitted[0].lengthscale, params.lengthscale, rtol=1e-12)


@pytest.mark.slow  # compiles the vmapped multi-start L-BFGS
def test_multistart_finds_a_higher_mode_than_botorch_on_the_levy_data():
    """On the same 13 Levy points the multi-start ``"lbfgs"`` reaches a mode more than 1 nat
    above BoTorch's (the difference the Levy comparison turns on; see fit_sgp_botorch)."""
    x, y = _botorch_coordinates()
    with jax.enable_x64(True):
        _, _, info = fit_sgp_botorch(
            jax.random.key(0), jnp.asarray(x), jnp.asarray(y), jitter=0.0, method="lbfgs"
        )
    assert -float(info.objective) > _BOTORCH_FIT["log_posterior"] + 1.0


def test_lbfgsb_gradient_equals_central_differences():
    """The host fit's closed-form gradient against central differences of its own loss, and its
    loss against the hand-written NumPy log posterior divided by n."""
    from jaxlab.bo._gp import _botorch_objective_numpy

    x, y = _botorch_coordinates()
    n, d = x.shape
    u = np.array([0.3, 0.2, 0.7, 0.01])
    value, grad = _botorch_objective_numpy(u, x, y, d, _JITTER)
    assert value == pytest.approx(-_numpy_log_posterior(x, y, u[1:3], u[3], u[0]) / n, rel=1e-12)
    step = 1e-6 * np.maximum(np.abs(u), 1e-2)
    central = [
        (_botorch_objective_numpy(u + h, x, y, d, _JITTER)[0]
         - _botorch_objective_numpy(u - h, x, y, d, _JITTER)[0]) / (2 * h[i])
        for i, h in enumerate(np.diag(step))
    ]  # fmt: skip
    np.testing.assert_allclose(grad, central, rtol=1e-6, atol=1e-8)


def test_lbfgsb_fit_float32_and_floors():
    """float32 data: the host fit runs in float64 and returns float32 at the float64 optimum,
    with σ_n² and every ℓ at or above BoTorch's floors."""
    xs = np.linspace(0.0, 1.0, 12)[:, None]
    ys = np.sin(4.0 * xs[:, 0])
    ys = (ys - ys.mean()) / ys.std(ddof=1)
    params, c, info = fit_sgp_botorch(jax.random.key(0), jnp.asarray(xs), jnp.asarray(ys))
    with jax.enable_x64(True):
        ref = fit_sgp_botorch(jax.random.key(0), jnp.asarray(xs), jnp.asarray(ys))
    assert params.lengthscale.dtype == jnp.float32 and info.objective.dtype == jnp.float32
    np.testing.assert_allclose(params.lengthscale, ref[0].lengthscale, rtol=1e-5)
    assert float(info.objective) == pytest.approx(float(ref[2].objective), rel=1e-5)
    assert float(params.noise_std) ** 2 >= 1e-4 and float(np.min(params.lengthscale)) >= 0.025


def _log_h_quad(z):
    """float64 log(φ(z) + z Φ(z)) = log ∫_0^∞ Φ(z - u) du by quadrature (an independent path)."""
    c = special.log_ndtr(z)
    val, _ = integrate.quad(
        lambda u: np.exp(special.log_ndtr(z - u) - c), 0, np.inf, epsabs=0, epsrel=1e-12
    )
    return c + np.log(val)


def _log_h_asymptotic(z):
    """Leading terms of log h for z -> -inf: log φ(z) - 2 log|z| + log(1 - 3/z² + 15/z⁴)."""
    t = -z
    return -0.5 * t * t - 0.5 * np.log(2 * np.pi) - 2 * np.log(t) + np.log1p(-3 / t**2 + 15 / t**4)


_ZS = [4.0, 0.0, -1.0, -2.5, -7.99, -8.01, -14.0, -39.9, -40.1, -80.0]


def test_log_ei_matches_float64_quadrature_where_ei_underflows_in_float32():
    sigma, best = 0.7, 0.3
    z = np.array(_ZS)
    mean = (best + sigma * z).astype(np.float32)
    ours32 = np.asarray(log_expected_improvement(jnp.asarray(mean), jnp.full(len(z), sigma), best))
    with jax.enable_x64(True):
        z64 = (jnp.asarray(mean, jnp.float64) - best) / sigma
        ours64 = np.asarray(log_expected_improvement(z64, 1.0, 0.0))
        ei32 = expected_improvement(
            jnp.asarray(mean), jnp.full(len(z), sigma, jnp.float32), best, xi=0.0
        )
    ref = np.array([_log_h_quad(v) for v in np.asarray(z64)]) + np.log(sigma)
    ref64 = ref - np.log(sigma)
    assert np.all(np.asarray(ei32)[z <= -14.0] == 0.0)  # plain EI is 0 there in float32
    assert np.all(np.isfinite(ours32))
    # float32: the error of rounding mean to float32 moves z by ~1e-7 |z|, log h by ~|z|² 1e-7
    np.testing.assert_allclose(ours32, ref, rtol=2e-6, atol=1e-5)
    np.testing.assert_allclose(ours64, ref64, rtol=1e-12, atol=1e-12)
    # in the bulk, log EI is the log of EI
    bulk = z > -3
    np.testing.assert_allclose(ours32[bulk], np.log(np.asarray(ei32)[bulk]), rtol=1e-5, atol=1e-5)


def test_log_ei_far_tail_matches_the_asymptotic_expansion_with_finite_gradients():
    for z in (-1e2, -1e3, -1e4, -1e5):
        ref = _log_h_asymptotic(z)
        ours = float(log_expected_improvement(jnp.float32(z), 1.0, 0.0))
        assert ours == pytest.approx(ref, rel=1e-6)
        grad = float(jax.grad(lambda m: log_expected_improvement(m, 1.0, 0.0))(jnp.float32(z)))
        # d log h/dz = Φ(z)/h(z) -> |z| + 2/|z| (from the same expansion)
        assert grad == pytest.approx(-z + 2.0 / -z, rel=1e-5)
    with jax.enable_x64(True):
        for z in (-1e3, -1e7):  # where the two-term expansion is exact in float64
            ours = float(log_expected_improvement(jnp.float64(z), 1.0, 0.0))
            assert ours == pytest.approx(_log_h_asymptotic(z), rel=1e-14)
        ours = float(log_expected_improvement(jnp.float64(-60.0), 1.0, 0.0))
        assert ours == pytest.approx(_log_h_quad(-60.0), rel=1e-13)
        # the branches meet: log h is continuous across z = -1, -8 and -40 to float64 accuracy
        for edge in (-1.0, -8.0, -40.0):
            below, above = (
                float(log_expected_improvement(jnp.float64(edge + s), 1.0, 0.0))
                for s in (-1e-9, 1e-9)
            )
            assert abs(below - above) < 1e-7 * max(1.0, abs(edge))
    # zero spread: log max(gain, 0)
    assert float(log_expected_improvement(1.0, 0.0, 0.5)) == pytest.approx(math.log(0.5))
    assert float(log_expected_improvement(0.2, 0.0, 0.5)) == -math.inf


def test_peers_botorch_exits_with_a_message_without_torch(monkeypatch, capsys, tmp_path):
    from benchmarks import peers_botorch

    monkeypatch.setenv(peers_botorch.ENV_PYTHON, str(tmp_path / "no-python"))
    assert peers_botorch.main(["--arms", "botorch", "--out", str(tmp_path)]) == 2
    assert peers_botorch.ENV_PYTHON in capsys.readouterr().out
    monkeypatch.setenv(peers_botorch.ENV_PYTHON, sys.executable)  # jaxlab's: no torch
    if importlib.util.find_spec("torch") is None:
        assert peers_botorch.main(["--arms", "botorch", "--out", str(tmp_path)]) == 2
        assert "torch/BoTorch are not importable" in capsys.readouterr().out
    assert not (tmp_path / "botorch_peer.json").exists()
