"""Closed forms of the tight theory of error feedback (EF, EF21): steps, rates, Lyapunov functions.

Notation (Berg Thomsen, Taylor, Dieuleveut, ICML 2026): ``f = (1/n) sum_i f_i`` with ``f_i``
``L_i``-smooth and ``mu_i``-strongly convex, ``kappa = L / mu`` in the homogeneous case. A
compressor ``C`` is *alpha-contractive* if ``||C(v) - v||^2 <= (1 - alpha) ||v||^2``; ``alpha`` is
Richtarik's contraction parameter and the paper's distortion is ``epsilon = 1 - alpha``. Every
formula below is written with ``s = sqrt(1 - alpha) = sqrt(epsilon)``.

The methods, for worker ``i`` and shared iterate ``x`` (step ``eta``):

* EF: ``p_i = e_i + eta grad f_i(x)``, ``x <- x - mean_i C(p_i)``, ``e_i <- p_i - C(p_i)``.
* EF21: ``x <- x - eta mean_i g_i``, then ``g_i <- g_i + C(grad f_i(x) - g_i)`` at the new ``x``.

All functions are pure and jit-able (``method`` of :func:`linear_one_step_matrix` and the keyword
flags are static). Arguments are validated eagerly when they are concrete (Python numbers or
arrays); under ``jax.jit`` the checks are skipped because the values are not known.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.typing import ArrayLike

from jaxlab._src.deprecation import renamed_keyword
from jaxlab._src.validation import check_choice, check_real_array

__all__ = [
    "cgd_optimal_step_size",
    "ef21_lyapunov",
    "ef21_two_worker_rate",
    "ef_lyapunov",
    "ef_optimal_step_size",
    "ef_tight_rate",
    "iterations_to_tolerance",
    "linear_one_step_matrix",
    "richtarik_ef21_rate",
    "richtarik_ef21_step_size",
]

_METHODS = ("ef", "ef21")


# --------------------------------------------------------------------------------------------
# Argument checks (eager when concrete, skipped for tracers).


def _check_alpha(alpha: ArrayLike) -> None:
    check_real_array(alpha, "alpha", minimum=0.0, include_minimum=False, maximum=1.0)


def _check_constants(smoothness: ArrayLike, strong_convexity: ArrayLike) -> None:
    """0 < strong_convexity <= smoothness < inf, elementwise, with matching shapes."""
    small = check_real_array(
        strong_convexity, "strong_convexity", minimum=0.0, include_minimum=False
    )
    big = check_real_array(smoothness, "smoothness", minimum=0.0, include_minimum=False)
    if np.ndim(smoothness) > 1 or np.ndim(strong_convexity) > 1:
        raise ValueError(
            "smoothness and strong_convexity must be scalars or 1-D per-worker arrays, got shapes "
            f"{np.shape(smoothness)} and {np.shape(strong_convexity)}"
        )
    if np.ndim(smoothness) == 1 and np.ndim(strong_convexity) == 1:
        if np.shape(smoothness) != np.shape(strong_convexity):
            raise ValueError(
                "smoothness and strong_convexity must have the same per-worker shape, got "
                f"{np.shape(smoothness)} and {np.shape(strong_convexity)}"
            )
    if big is not None and small is not None and np.any(big < small):
        raise ValueError(
            "smoothness must be >= strong_convexity for every worker, got smoothness="
            f"{big.tolist()!r}, strong_convexity={small.tolist()!r}"
        )


def _sqrt_distortion(alpha: ArrayLike) -> jax.Array:
    """s = sqrt(1 - alpha), clipped at 0 against rounding when alpha is 1."""
    alpha = jnp.asarray(alpha, dtype=jnp.result_type(float))
    return jnp.sqrt(jnp.maximum(1.0 - alpha, 0.0))


def _mean_sum(smoothness: ArrayLike, strong_convexity: ArrayLike) -> jax.Array:
    """mean_i (L_i + mu_i), scalars broadcast against per-worker arrays."""
    big = jnp.asarray(smoothness, dtype=jnp.result_type(float))
    small = jnp.asarray(strong_convexity, dtype=jnp.result_type(float))
    shape = jnp.broadcast_shapes(big.shape, small.shape)
    return jnp.mean(jnp.broadcast_to(big, shape) + jnp.broadcast_to(small, shape))


# --------------------------------------------------------------------------------------------
# Step sizes and rates.


def ef_optimal_step_size(
    smoothness: ArrayLike, strong_convexity: ArrayLike, alpha: ArrayLike
) -> jax.Array:
    r"""The worst-case optimal step size eta* of EF and EF21 (any number of workers).

    .. math::

       \eta^\star = \frac{2n}{\sum_i (L_i + \mu_i)}\,\frac{1 - s}{1 + s}
       = \frac{2}{\operatorname{mean}_i(L_i + \mu_i)}\,\frac{\alpha}{(1 + \sqrt{1-\alpha})^2},
       \qquad s = \sqrt{1 - \alpha}.

    ``alpha = 1`` (no compression) recovers gradient descent's ``2 / (L + mu)``. For EF the step
    multiplies the gradient *inside* the compressed quantity (``jaxlab.optim.error_feedback``);
    for EF21 it multiplies the averaged estimate (``jaxlab.optim.error_feedback_21``).

    Args:
      smoothness: ``L`` (scalar) or per-worker ``L_i`` (1-D array).
      strong_convexity: ``mu`` (scalar) or per-worker ``mu_i``; ``0 < mu_i <= L_i``.
      alpha: contraction parameter of the compressor, in ``(0, 1]``.

    Returns:
      The step size eta* as a scalar array.

    Examples:
      >>> from jaxlab.optim import ef_optimal_step_size
      >>> print(f"{float(ef_optimal_step_size(1.0, 0.1, 0.5)):.4f}")
      0.3120
      >>> print(f"{float(ef_optimal_step_size(1.0, 0.1, 1.0)):.4f}")  # GD: 2 / (L + mu)
      1.8182

    References:
      D. Berg Thomsen, A. Taylor, A. Dieuleveut, "A Tight Theory of Error Feedback Algorithms in
      Distributed Optimization", ICML 2026 (arXiv 2605.31594).
    """
    _check_constants(smoothness, strong_convexity)
    _check_alpha(alpha)
    s = _sqrt_distortion(alpha)
    return 2.0 / _mean_sum(smoothness, strong_convexity) * (1.0 - s) / (1.0 + s)


def ef_tight_rate(condition_number: ArrayLike, alpha: ArrayLike) -> jax.Array:
    r"""The tight linear rate rho* of EF and EF21 at eta* (homogeneous workers, any n).

    The Lyapunov functions of :func:`ef_lyapunov` and :func:`ef21_lyapunov` satisfy
    ``V_{t+1} <= rho* V_t``, and the rotation-compressor quadratics attain it, with

    .. math::

       \rho^\star = s + \frac{1-s}{2}\,q^2\Big[1 - s + \sqrt{(1+s)^2
       + \frac{16\, s\, \kappa}{(\kappa-1)^2}}\Big],
       \qquad q = \frac{\kappa-1}{\kappa+1},\; s = \sqrt{1-\alpha}.

    ``s = 0`` gives gradient descent's ``q^2``; ``kappa = 1`` gives ``s``. The bracket is
    evaluated as ``q^2 (1 - s) + sqrt(q^4 (1+s)^2 + 16 s kappa (kappa-1)^2 / (kappa+1)^4)``, which
    is finite at ``kappa = 1``. Iterations to shrink ``V`` by a factor ``tol``:
    :func:`iterations_to_tolerance`.

    Args:
      condition_number: ``kappa = L / mu >= 1``.
      alpha: contraction parameter of the compressor, in ``(0, 1]``.

    Returns:
      rho* in ``[0, 1)``, broadcast over the arguments.

    Examples:
      >>> from jaxlab.optim import ef_tight_rate
      >>> print(f"{float(ef_tight_rate(10.0, 0.5)):.5f}")
      0.93937
      >>> print(f"{float(ef_tight_rate(10.0, 1.0)):.5f}")  # ((kappa - 1) / (kappa + 1))^2
      0.66942

    References:
      D. Berg Thomsen, A. Taylor, A. Dieuleveut, "A Tight Theory of Error Feedback Algorithms in
      Distributed Optimization", ICML 2026 (arXiv 2605.31594).
    """
    check_real_array(condition_number, "condition_number", minimum=1.0)
    _check_alpha(alpha)
    kappa = jnp.asarray(condition_number, dtype=jnp.result_type(float))
    s = _sqrt_distortion(alpha)
    q = (kappa - 1.0) / (kappa + 1.0)
    q2 = q * q
    root = jnp.sqrt(
        q2 * q2 * (1.0 + s) ** 2 + 16.0 * s * kappa * (kappa - 1.0) ** 2 / (kappa + 1.0) ** 4
    )
    return s + 0.5 * (1.0 - s) * (q2 * (1.0 - s) + root)


def _largest_real_cubic_root(b: jax.Array, c: jax.Array, d: jax.Array) -> jax.Array:
    """Largest real root of x^3 - b x^2 + c x - d (closed form, then two Newton polishes)."""
    shift = b / 3.0
    # Depressed cubic t^3 + p t + q with x = t + b/3.
    p = c - b * b / 3.0
    q = -2.0 * b**3 / 27.0 + b * c / 3.0 - d
    disc = (q / 2.0) ** 2 + (p / 3.0) ** 3
    # One real root (disc > 0): Cardano.
    sq = jnp.sqrt(jnp.maximum(disc, 0.0))
    cardano = jnp.cbrt(-q / 2.0 + sq) + jnp.cbrt(-q / 2.0 - sq)
    # Three real roots (disc <= 0, so p <= 0): the trigonometric form, k = 0 is the largest.
    m = jnp.sqrt(jnp.maximum(-p / 3.0, 0.0))
    safe_m = jnp.where(m > 0, m, 1.0)
    cos_arg = jnp.clip(-q / (2.0 * safe_m**3), -1.0, 1.0)
    trig = 2.0 * m * jnp.cos(jnp.arccos(cos_arg) / 3.0)
    x = shift + jnp.where(disc > 0, cardano, trig)
    for _ in range(2):
        value = ((x - b) * x + c) * x - d
        slope = (3.0 * x - 2.0 * b) * x + c
        x = jnp.where(jnp.abs(slope) > 0, x - value / jnp.where(slope == 0, 1.0, slope), x)
    return x


def ef21_two_worker_rate(
    smoothness: ArrayLike, strong_convexity: ArrayLike, alpha: ArrayLike
) -> jax.Array:
    r"""The paper's fitted worst-case rate of EF21 at eta* for two heterogeneous workers.

    rho is the largest real root of the cubic :math:`\rho^3 - B\rho^2 + C\rho - D = 0` with

    .. math::

       r = \frac{(1-s)^2}{1+s},\quad \Sigma_i = L_i + \mu_i,\quad \Delta_i = L_i - \mu_i,\\
       K_1 = \frac{\Delta_2^2\Sigma_1 + \Delta_1^2\Sigma_2}{\Sigma_1\Sigma_2(\Sigma_1+\Sigma_2)},
       \quad K_2 = \frac{(\Delta_1+\Delta_2)^2}{(\Sigma_1+\Sigma_2)^2},\\
       B = s(2+s) + r(sK_1 + K_2),\quad C = s^2\big(1 + 2s + r(K_1 + sK_2)\big),\quad D = s^4.

    It is an empirical law (symbolic regression of the performance-estimation worst case); with
    homogeneous constants it reduces to :func:`ef_tight_rate`. The root is computed in closed form
    (Cardano or the trigonometric form) and polished with two Newton steps, so this is jit-able.

    Args:
      smoothness: ``(L_1, L_2)``.
      strong_convexity: ``(mu_1, mu_2)``, ``0 < mu_i <= L_i``.
      alpha: contraction parameter of the compressor, in ``(0, 1]``.

    Returns:
      The rate as a scalar array.

    Examples:
      >>> from jaxlab.optim import ef21_two_worker_rate
      >>> print(f"{float(ef21_two_worker_rate((1.0, 2.0), (0.1, 0.5), 0.5)):.5f}")
      0.89192
      >>> print(f"{float(ef21_two_worker_rate((1.0, 1.0), (0.1, 0.1), 0.5)):.5f}")  # = rho*
      0.93937

    References:
      D. Berg Thomsen, A. Taylor, A. Dieuleveut, "A Tight Theory of Error Feedback Algorithms in
      Distributed Optimization", ICML 2026 (arXiv 2605.31594), the two-worker law.
    """
    if np.shape(smoothness) != (2,) or np.shape(strong_convexity) != (2,):
        raise ValueError(
            "smoothness and strong_convexity must each hold two per-worker values, got shapes "
            f"{np.shape(smoothness)} and {np.shape(strong_convexity)}"
        )
    _check_constants(smoothness, strong_convexity)
    _check_alpha(alpha)
    big = jnp.asarray(smoothness, dtype=jnp.result_type(float))
    small = jnp.asarray(strong_convexity, dtype=jnp.result_type(float))
    s = _sqrt_distortion(alpha)
    r = (1.0 - s) ** 2 / (1.0 + s)
    sig = big + small
    dif = big - small
    k1 = (dif[1] ** 2 * sig[0] + dif[0] ** 2 * sig[1]) / (sig[0] * sig[1] * (sig[0] + sig[1]))
    k2 = (dif[0] + dif[1]) ** 2 / (sig[0] + sig[1]) ** 2
    b = s * (2.0 + s) + r * (s * k1 + k2)
    c = s * s * (1.0 + 2.0 * s + r * (k1 + s * k2))
    d = s**4
    return _largest_real_cubic_root(b, c, d)


def cgd_optimal_step_size(
    smoothness: ArrayLike, strong_convexity: ArrayLike, alpha: ArrayLike
) -> jax.Array:
    r"""Step size of naive compressed gradient descent (no feedback), the reference in the paper.

    CGD is ``x <- x - eta mean_i C(grad f_i(x))``; its worst-case tuned step is

    .. math:: \eta^\star_{\mathrm{CGD}} = \frac{2}{(1 + s)\operatorname{mean}_i(L_i + \mu_i)},
       \qquad s = \sqrt{1 - \alpha}.

    CGD converges only to a neighbourhood when the workers' minimisers differ.

    Args:
      smoothness: ``L`` or per-worker ``L_i``.
      strong_convexity: ``mu`` or per-worker ``mu_i``, ``0 < mu_i <= L_i``.
      alpha: contraction parameter of the compressor, in ``(0, 1]``.

    Returns:
      The step size as a scalar array.

    Examples:
      >>> from jaxlab.optim import cgd_optimal_step_size
      >>> print(f"{float(cgd_optimal_step_size(1.0, 0.1, 0.75)):.4f}")  # 2 / (1.5 * 1.1)
      1.2121

    References:
      D. Berg Thomsen, A. Taylor, A. Dieuleveut, "A Tight Theory of Error Feedback Algorithms in
      Distributed Optimization", ICML 2026 (arXiv 2605.31594).
    """
    _check_constants(smoothness, strong_convexity)
    _check_alpha(alpha)
    s = _sqrt_distortion(alpha)
    return 2.0 / ((1.0 + s) * _mean_sum(smoothness, strong_convexity))


def _richtarik_constants(smoothness, alpha, reloaded, global_smoothness):
    big = jnp.asarray(smoothness, dtype=jnp.result_type(float))
    alpha = jnp.asarray(alpha, dtype=jnp.result_type(float))
    theta = 1.0 - _sqrt_distortion(alpha)
    beta = (1.0 - alpha) / theta
    l_avg = jnp.mean(big) if reloaded else jnp.sqrt(jnp.mean(big * big))
    if global_smoothness is None:
        l_f = jnp.mean(big)
    else:
        check_real_array(global_smoothness, "global_smoothness", minimum=0.0, include_minimum=False)
        l_f = jnp.asarray(global_smoothness, dtype=jnp.result_type(float))
    return theta, beta, l_avg, l_f


def richtarik_ef21_step_size(
    smoothness: ArrayLike,
    strong_convexity: ArrayLike | None,
    alpha: ArrayLike,
    *,
    nonconvex: bool = False,
    reloaded: bool = False,
    global_smoothness: ArrayLike | None = None,
) -> jax.Array:
    r"""The older EF21 step size of Richtarik, Sokolov, Fatkhullin (2021), the paper's baseline.

    With :math:`\theta = 1 - \sqrt{1-\alpha}`, :math:`\beta = (1-\alpha)/\theta` and
    :math:`\tilde L = \sqrt{\operatorname{mean}_i L_i^2}`:

    .. math::

       \gamma_R = \min\Big\{\frac{1}{L + \tilde L\sqrt{2\beta/\theta}},\;
       \frac{\theta}{2\mu}\Big\}\ \text{(strongly convex / PL)},\qquad
       \gamma_R = \frac{1}{L + \tilde L\sqrt{\beta/\theta}}\ \text{(nonconvex)}.

    "EF21 Reloaded" (Richtarik, Gasanov, Burlachenko 2024) replaces :math:`\tilde L` by
    :math:`\operatorname{mean}_i L_i`. ``L`` is the smoothness of ``f``: ``global_smoothness`` when
    given, else ``mean_i L_i`` (a valid upper bound). ``mu`` is taken as ``mean_i mu_i`` (a valid
    lower bound of the PL constant of ``f``).

    Args:
      smoothness: ``L`` or per-worker ``L_i``.
      strong_convexity: ``mu`` or per-worker ``mu_i``; ignored (may be None) when ``nonconvex``.
      alpha: contraction parameter of the compressor, in ``(0, 1]``.
      nonconvex: static flag, the step of the nonconvex theorem.
      reloaded: static flag, the "EF21 Reloaded" constant ``mean_i L_i``.
      global_smoothness: optional smoothness constant of ``f`` itself.

    Returns:
      The step size as a scalar array.

    Examples:
      >>> from jaxlab.optim import richtarik_ef21_step_size
      >>> print(f"{float(richtarik_ef21_step_size(1.0, 0.1, 0.5)):.4f}")
      0.2265
      >>> print(f"{float(richtarik_ef21_step_size(1.0, None, 0.5, nonconvex=True)):.4f}")
      0.2929

    References:
      P. Richtarik, I. Sokolov, I. Fatkhullin, "EF21: A New, Simpler, Theoretically Better, and
      Practically Faster Error Feedback", NeurIPS 2021 (arXiv 2106.05203); P. Richtarik,
      E. Gasanov, K. Burlachenko, "Error Feedback Reloaded", 2024. Used as the baseline in
      D. Berg Thomsen, A. Taylor, A. Dieuleveut, ICML 2026 (arXiv 2605.31594).
    """
    _check_alpha(alpha)
    if nonconvex:
        check_real_array(smoothness, "smoothness", minimum=0.0, include_minimum=False)
    else:
        if strong_convexity is None:
            raise ValueError("strong_convexity is required unless nonconvex=True")
        _check_constants(smoothness, strong_convexity)
    theta, beta, l_avg, l_f = _richtarik_constants(smoothness, alpha, reloaded, global_smoothness)
    if nonconvex:
        return 1.0 / (l_f + l_avg * jnp.sqrt(beta / theta))
    mu = jnp.mean(jnp.asarray(strong_convexity, dtype=jnp.result_type(float)))
    return jnp.minimum(1.0 / (l_f + l_avg * jnp.sqrt(2.0 * beta / theta)), theta / (2.0 * mu))


def richtarik_ef21_rate(
    smoothness: ArrayLike,
    strong_convexity: ArrayLike,
    alpha: ArrayLike,
    *,
    reloaded: bool = False,
    global_smoothness: ArrayLike | None = None,
) -> jax.Array:
    r"""The linear rate ``1 - gamma_R mu`` that Richtarik et al. (2021) prove for EF21.

    ``gamma_R`` is :func:`richtarik_ef21_step_size` (strongly convex form) and ``mu`` is
    ``mean_i mu_i``. Compare with :func:`ef_tight_rate`: ``log(rho*) / log(1 - gamma_R mu)`` is the
    factor of iterations the tight analysis saves (2.6 to 3.4 for the note's table).

    Args:
      smoothness: ``L`` or per-worker ``L_i``.
      strong_convexity: ``mu`` or per-worker ``mu_i``, ``0 < mu_i <= L_i``.
      alpha: contraction parameter of the compressor, in ``(0, 1]``.
      reloaded: static flag, the "EF21 Reloaded" constant ``mean_i L_i``.
      global_smoothness: optional smoothness constant of ``f`` itself.

    Returns:
      The rate as a scalar array.

    Examples:
      >>> from jaxlab.optim import richtarik_ef21_rate
      >>> print(f"{float(richtarik_ef21_rate(1.0, 0.1, 0.5)):.5f}")
      0.97735

    References:
      P. Richtarik, I. Sokolov, I. Fatkhullin, "EF21: A New, Simpler, Theoretically Better, and
      Practically Faster Error Feedback", NeurIPS 2021 (arXiv 2106.05203).
    """
    step = richtarik_ef21_step_size(
        smoothness,
        strong_convexity,
        alpha,
        reloaded=reloaded,
        global_smoothness=global_smoothness,
    )
    return 1.0 - step * jnp.mean(jnp.asarray(strong_convexity, dtype=jnp.result_type(float)))


def iterations_to_tolerance(rate: ArrayLike, tolerance: ArrayLike) -> jax.Array:
    r"""Iterations a linear rate needs to shrink a quantity by the factor ``tolerance``.

    .. math:: T = \Big\lceil \frac{\log(\mathrm{tolerance})}{\log(\mathrm{rate})} \Big\rceil .

    Args:
      rate: per-step contraction factor, in ``(0, 1)``.
      tolerance: target ratio ``V_T / V_0``, in ``(0, 1)``.

    Returns:
      ``T`` as a float array (an integer value; float so that huge counts do not overflow).

    Examples:
      >>> from jaxlab.optim import iterations_to_tolerance
      >>> print(int(iterations_to_tolerance(0.5, 1e-3)))  # 2^-10 < 1e-3 <= 2^-9
      10

    References:
      D. Berg Thomsen, A. Taylor, A. Dieuleveut, "A Tight Theory of Error Feedback Algorithms in
      Distributed Optimization", ICML 2026 (arXiv 2605.31594).
    """
    check_real_array(
        rate, "rate", minimum=0.0, include_minimum=False, maximum=1.0, include_maximum=False
    )
    check_real_array(
        tolerance,
        "tolerance",
        minimum=0.0,
        include_minimum=False,
        maximum=1.0,
        include_maximum=False,
    )
    rate = jnp.asarray(rate, dtype=jnp.result_type(float))
    tolerance = jnp.asarray(tolerance, dtype=jnp.result_type(float))
    ratio = jnp.log(tolerance) / jnp.log(rate)
    # A ratio that is an integer up to rounding (0.5 -> 1e-3 is not, 0.5 -> 0.125 is) must not be
    # pushed to the next integer by a last-bit error.
    rounded = jnp.round(ratio)
    exact = jnp.abs(ratio - rounded) <= 8 * jnp.finfo(ratio.dtype).eps * jnp.maximum(ratio, 1.0)
    return jnp.where(exact, rounded, jnp.ceil(ratio))


# --------------------------------------------------------------------------------------------
# Lyapunov functions.


def _per_worker_sq_norms(tree) -> jax.Array:
    """sum over leaves of ||leaf[i]||^2 for each worker i (leading axis)."""
    leaves = jax.tree.leaves(tree)
    if not leaves:
        raise ValueError("expected a non-empty pytree of per-worker arrays")
    return sum(jnp.sum(jnp.reshape(leaf, (leaf.shape[0], -1)) ** 2, axis=1) for leaf in leaves)


def _num_workers(name: str, tree) -> int:
    sizes = {np.shape(leaf)[0] if np.ndim(leaf) else None for leaf in jax.tree.leaves(tree)}
    if len(sizes) != 1 or None in sizes:
        raise ValueError(
            f"{name} must be a pytree whose leaves share a leading worker axis, got leading sizes "
            f"{sorted(map(str, sizes))}"
        )
    return sizes.pop()


def ef_lyapunov(iterate, errors, minimiser, alpha: ArrayLike) -> jax.Array:
    r"""The Lyapunov function of EF that contracts by rho* per step (shared minimiser x*).

    With the paper's errors ``e_i`` (``p_i = e_i + eta grad f_i(x)``, ``e_i <- p_i - C(p_i)``):

    .. math::

       V = n\|x - x^\star\|^2 - 2\sum_i\langle x - x^\star, e_i\rangle + \sum_i\|e_i\|^2
         + \frac{1}{n s}\Big\|\sum_i e_i\Big\|^2
         = \sum_i \|x - x^\star - e_i\|^2 + \frac{1}{n s}\Big\|\sum_i e_i\Big\|^2 .

    For ``n = 1`` this is ``||x - x* - e||^2 + ||e||^2 / s`` (``x - e`` is the virtual iterate).
    ``alpha = 1`` (``s = 0``) makes the last term 0 when the errors sum to 0 and inf otherwise.
    ``jaxlab.optim.error_feedback`` receives the step-scaled *negative* gradient, so its state's
    ``error`` is ``-e_i``: pass ``-state.error`` here.

    Args:
      iterate: the shared iterate ``x`` (a pytree).
      errors: the errors ``e_i``, the pytree of ``x`` with a leading worker axis of size ``n``.
      minimiser: ``x*``, the common minimiser of every ``f_i`` (same pytree as ``x``).
      alpha: contraction parameter of the compressor, in ``(0, 1]``.

    Returns:
      ``V`` as a scalar array.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxlab.optim import ef_lyapunov
      >>> x, e = jnp.array([1.0, 0.0]), jnp.array([[0.5, 0.0]])  # one worker
      >>> print(float(ef_lyapunov(x, e, jnp.zeros(2), alpha=0.75)))  # 0.25 + 0.25 / 0.5
      0.75

    References:
      D. Berg Thomsen, A. Taylor, A. Dieuleveut, "A Tight Theory of Error Feedback Algorithms in
      Distributed Optimization", ICML 2026 (arXiv 2605.31594).
    """
    _check_alpha(alpha)
    n = _num_workers("errors", errors)
    if jax.tree.structure(iterate) != jax.tree.structure(errors) or jax.tree.structure(
        iterate
    ) != jax.tree.structure(minimiser):
        raise ValueError("iterate, errors and minimiser must share one pytree structure")
    s = _sqrt_distortion(alpha)
    shifted = jax.tree.map(lambda x, e, m: (x - m)[None] - e, iterate, errors, minimiser)
    total = jax.tree.map(lambda e: jnp.sum(e, axis=0)[None], errors)
    sum_sq = _per_worker_sq_norms(total)[0]
    safe_s = jnp.where(s > 0, s, 1.0)
    last = jnp.where(sum_sq == 0, 0.0, jnp.where(s > 0, sum_sq / (n * safe_s), jnp.inf))
    return jnp.sum(_per_worker_sq_norms(shifted)) + last


def ef21_lyapunov(
    gradients,
    estimates,
    alpha: ArrayLike,
    *,
    smoothness: ArrayLike | None = None,
    strong_convexity: ArrayLike | None = None,
) -> jax.Array:
    r"""The Lyapunov function of EF21 that contracts by rho* per step.

    With per-worker gradients ``grad f_i(x)`` and estimates ``g_i``:

    .. math::

       V = \frac{s}{n}\Big\|\sum_i\nabla f_i(x)\Big\|^2
         + \frac{1}{n}\sum_i w_i\|\nabla f_i(x) - g_i\|^2,\qquad
       w_i = \frac{\sum_j (L_j + \mu_j)}{L_i + \mu_i}.

    Homogeneous workers (no constants given) have ``w_i = n``; for ``n = 1`` this is
    ``s||grad f(x)||^2 + ||grad f(x) - g||^2``. The state ``(x, g)`` is the one *after* the
    estimates were updated at ``x``, i.e. the next step is ``x <- x - eta mean_i g_i``
    (``jaxlab.optim.error_feedback_21``'s ``state.estimate`` with the parameters it was computed
    at).

    Args:
      gradients: ``grad f_i(x)`` stacked along a leading worker axis (a pytree).
      estimates: ``g_i``, the same pytree and shapes.
      alpha: contraction parameter of the compressor, in ``(0, 1]``.
      smoothness: optional per-worker ``L_i`` (1-D, size ``n``) for the weights.
      strong_convexity: optional per-worker ``mu_i``; give both constants or neither.

    Returns:
      ``V`` as a scalar array.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxlab.optim import ef21_lyapunov
      >>> grads, g = jnp.array([[2.0, 0.0]]), jnp.array([[1.0, 0.0]])  # one worker
      >>> print(float(ef21_lyapunov(grads, g, alpha=0.75)))  # 0.5 * 4 + 1
      3.0

    References:
      D. Berg Thomsen, A. Taylor, A. Dieuleveut, "A Tight Theory of Error Feedback Algorithms in
      Distributed Optimization", ICML 2026 (arXiv 2605.31594).
    """
    _check_alpha(alpha)
    n = _num_workers("gradients", gradients)
    if jax.tree.structure(gradients) != jax.tree.structure(estimates):
        raise ValueError("gradients and estimates must share one pytree structure")
    if (smoothness is None) != (strong_convexity is None):
        raise ValueError("give both smoothness and strong_convexity, or neither")
    if smoothness is None:
        weights = jnp.full((n,), float(n), dtype=jnp.result_type(float))
    else:
        _check_constants(smoothness, strong_convexity)
        sig = jnp.broadcast_to(
            jnp.asarray(smoothness, dtype=jnp.result_type(float))
            + jnp.asarray(strong_convexity, dtype=jnp.result_type(float)),
            (n,),
        )
        weights = jnp.sum(sig) / sig
    s = _sqrt_distortion(alpha)
    total = jax.tree.map(lambda g: jnp.sum(g, axis=0)[None], gradients)
    gaps = optax.tree.sub(gradients, estimates)
    return (
        s / n * _per_worker_sq_norms(total)[0] + jnp.sum(weights * _per_worker_sq_norms(gaps)) / n
    )


# --------------------------------------------------------------------------------------------
# The worst-case instances.


@renamed_keyword("step_size", "learning_rate")
def linear_one_step_matrix(
    method: str,
    curvature: ArrayLike,
    theta: ArrayLike,
    learning_rate: ArrayLike,
    alpha: ArrayLike,
) -> jax.Array:
    r"""The one-step matrix of EF or EF21 on the paper's worst-case instances in 2-D.

    Worker ``i`` holds ``f_i(x) = (lambda_i / 2)||x||^2`` and the rotation compressor
    ``C_i(v) = v - s R(theta_i) v`` (``R`` the 2-D rotation, ``||C_i(v) - v|| = s||v||`` exactly).
    Both methods are then linear in the state ``z = (x, y_1, ..., y_n)`` (size ``2 + 2n``):

    * EF, ``y_i = e_i``: ``x+ = x - (1/n) sum_i C_i(e_i + eta lambda_i x)``,
      ``e_i+ = s R_i (e_i + eta lambda_i x)``.
    * EF21, ``y_i = g_i``: ``x+ = x - (eta/n) sum_i g_i``,
      ``g_i+ = s R_i g_i + lambda_i C_i x+``.

    The squared spectral radius of the matrix is the linear rate of the instance; its maximum over
    ``lambda_i in [mu, L]`` and ``theta_i`` at ``eta*`` equals :func:`ef_tight_rate`.

    Args:
      method: ``"ef"`` or ``"ef21"`` (static).
      curvature: ``lambda_i > 0``, a scalar (one worker) or a 1-D array of ``n`` values.
      theta: rotation angles ``theta_i``, the same shape as ``curvature``.
      learning_rate: ``eta > 0`` (``step_size=`` is a deprecated alias).
      alpha: contraction parameter of the compressor, in ``(0, 1]``.

    Returns:
      The ``(2 + 2n, 2 + 2n)`` matrix ``M`` with ``z_{t+1} = M z_t``.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxlab.optim import linear_one_step_matrix, ef_optimal_step_size, ef_tight_rate
      >>> eta = ef_optimal_step_size(1.0, 0.1, 0.5)
      >>> m = linear_one_step_matrix("ef21", 1.0, jnp.pi, eta, 0.5)  # the worst case
      >>> radius = max(abs(complex(v)) for v in __import__("numpy").linalg.eigvals(m))
      >>> print(f"{radius**2:.5f} {float(ef_tight_rate(10.0, 0.5)):.5f}")
      0.93937 0.93937

    References:
      D. Berg Thomsen, A. Taylor, A. Dieuleveut, "A Tight Theory of Error Feedback Algorithms in
      Distributed Optimization", ICML 2026 (arXiv 2605.31594).
    """
    check_choice(method, "method", _METHODS)
    if np.shape(curvature) != np.shape(theta) or np.ndim(curvature) > 1:
        raise ValueError(
            "curvature and theta must be scalars or 1-D arrays of one shape, got "
            f"{np.shape(curvature)} and {np.shape(theta)}"
        )
    check_real_array(curvature, "curvature", minimum=0.0, include_minimum=False)
    check_real_array(learning_rate, "learning_rate", minimum=0.0, include_minimum=False)
    _check_alpha(alpha)
    dtype = jnp.result_type(float)
    lam = jnp.atleast_1d(jnp.asarray(curvature, dtype=dtype))
    ang = jnp.atleast_1d(jnp.asarray(theta, dtype=dtype))
    eta = jnp.asarray(learning_rate, dtype=dtype)
    n = lam.shape[0]
    s = _sqrt_distortion(alpha)
    cos, sin = jnp.cos(ang), jnp.sin(ang)
    rot = jnp.stack([jnp.stack([cos, -sin], -1), jnp.stack([sin, cos], -1)], -2)  # (n, 2, 2)
    eye = jnp.eye(2, dtype=dtype)
    comp = eye[None] - s * rot  # C_i as matrices
    lam3 = lam[:, None, None]
    if method == "ef":
        top_left = eye - eta * jnp.mean(lam3 * comp, axis=0)
        top_right = -comp / n  # (n, 2, 2) blocks acting on e_i
        left = s * eta * lam3 * rot  # e_i+ from x
        diag = s * rot  # e_i+ from e_i
    else:
        # x+ = x - (eta/n) sum_j g_j; g_i+ = s R_i g_i + lambda_i C_i x+.
        top_left = jnp.broadcast_to(eye, (2, 2))
        top_right = jnp.broadcast_to(-eta / n * eye, (n, 2, 2))
        left = lam3 * comp
        diag = s * rot
    # Assemble with block-diagonal coupling; EF21 additionally couples g_i+ to every g_j.
    first_row = jnp.concatenate([top_left, *top_right], axis=1)  # (2, 2 + 2n)
    blocks = jnp.zeros((n, 2, 2 * n), dtype=dtype)
    for i in range(n):
        blocks = blocks.at[i, :, 2 * i : 2 * i + 2].set(diag[i])
    if method == "ef21":
        blocks = blocks + jnp.tile(-(eta / n) * left, (1, 1, n))  # lambda_i C_i (-eta/n) g_j
    rows = jnp.concatenate([left, blocks], axis=2)  # (n, 2, 2 + 2n)
    return jnp.concatenate([first_row, rows.reshape(2 * n, 2 + 2 * n)], axis=0)
