"""A NumPy float64 implementation of RAMBO's collapsed Gibbs sweep, written the direct way.

For checking :func:`jaxlab.bo.rambo_sweep` (a second implementation path: given the same
:class:`jaxlab.bo.SweepRandomness` it must make the same moves) and as the benchmark's peer.
Each point is scored against each regime by an explicit GP fit on that regime's other members
(a Cholesky factorization per regime per point, ``O(K n³)`` per point), the way the released
PyTorch code computes it, instead of the rank-one inverse updates of the jitted sweep.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from jaxlab._src import validation

__all__ = ["numpy_gibbs_sweep"]


def _standardize(x, y):
    def spread(v):
        s = v.std(0)
        return np.where(s > 1e-12, s, 1.0)

    return (x - x.mean(0)) / spread(x), (y - y.mean()) / spread(y)


def _log_normal(y, mean, var):
    return -0.5 * (np.log(2.0 * np.pi) + np.log(var) + (y - mean) ** 2 / var)


def numpy_gibbs_sweep(
    x,
    y,
    assignments,
    log_params,
    alpha: float,
    order,
    uniforms,
    prior_draws,
    *,
    variant: str = "textbook",
    jitter: float = 1e-6,
) -> tuple[np.ndarray, np.ndarray]:
    """One collapsed Gibbs sweep over all rows of ``(x, y)``, in NumPy float64.

    The same sweep as :func:`jaxlab.bo.rambo_sweep` on unpadded data (every row an
    observation): visit rows in ``order``; score each regime with other members by
    ``log(n_k^{-i}/(n - 1 + α)) + log N(y_i; μ, v)`` from an explicit GP fit on those members,
    the new-regime option by the prior draws; pick by inverse CDF at ``1 - uniforms[t]``; a new
    regime takes the lowest free slot and the draw under which ``y_i`` is most likely.

    Args:
      x: ``(n, d)`` raw inputs; y: ``(n,)`` raw observations (standardized inside).
      assignments: ``(n,)`` starting slots; log_params: ``(K, 3)`` log ``(σ_f, ℓ, σ_n)``.
      alpha: CRP concentration ``> 0``.
      order, uniforms, prior_draws: the fields of a :class:`jaxlab.bo.SweepRandomness`.
      variant: ``"textbook"`` or ``"reference"``.
      jitter: added to the noise variance.

    Returns:
      ``(assignments, log_params)`` after the sweep.

    Examples:
      >>> import jax, numpy as np
      >>> from jaxlab.bo import sweep_randomness
      >>> x = np.linspace(0.0, 1.0, 8)[:, None]
      >>> r = sweep_randomness(jax.random.key(0), 8)
      >>> z, lp = numpy_gibbs_sweep(x, np.sin(6 * x[:, 0]), np.zeros(8, int), np.zeros((8, 3)),
      ...                           2.0, r.order, r.uniforms, r.prior_draws)
      >>> z.shape, lp.shape
      ((8,), (8, 3))
    """
    x = validation.check_array(x, "x", kind="floating", ndim=2, host=True).astype(np.float64)
    y = validation.check_array(y, "y", kind="floating", ndim=1, host=True).astype(np.float64)
    validation.check_real(alpha, "alpha", minimum=0.0, include_minimum=False)
    if variant not in ("textbook", "reference"):
        raise ValueError(f"variant must be 'textbook' or 'reference', got {variant!r}")
    n = x.shape[0]
    lp = validation.check_array(log_params, "log_params", kind="real", ndim=2, host=True)
    validation.check_last_axis(lp, 3, "log_params")
    validation.check_finite_array(lp, "log_params")
    validation.check_indices(np.asarray(assignments), "assignments", lp.shape[0], "len(log_params)")
    validation.check_permutation(order, n, "order")
    validation.check_real_array(uniforms, "uniforms", minimum=0.0, maximum=1.0)
    if np.shape(uniforms) != (n,):
        raise ValueError(f"uniforms must have shape ({n},), got {np.shape(uniforms)}")
    shape = np.shape(prior_draws)  # rows indexed by point (a padded sweep's draws are longer)
    if len(shape) != 3 or shape[0] < n or shape[2] != 3:
        raise ValueError(f"prior_draws must have shape (>= {n}, draws, 3), got {shape}")
    xs, ys = _standardize(x, y)
    z = np.array(assignments, dtype=np.int64)
    lp = np.array(log_params, dtype=np.float64)
    draws = np.asarray(prior_draws, dtype=np.float64)
    n, num_slots = len(ys), lp.shape[0]
    log_denom = np.log(n - 1 + alpha)
    for t, i in enumerate(np.asarray(order)):
        others = np.arange(n) != i
        logits = np.full(num_slots + 1, -np.inf)
        for k in range(num_slots):
            idx = np.flatnonzero((z == k) & others)
            if idx.size == 0:
                continue
            sf, ls, sn = np.exp(lp[k])
            sq = ((xs[idx, None, :] - xs[None, idx, :]) ** 2).sum(-1)
            cov = sf**2 * np.exp(-0.5 * sq / ls**2) + (sn**2 + jitter) * np.eye(idx.size)
            cross = sf**2 * np.exp(-0.5 * ((xs[idx] - xs[i]) ** 2).sum(-1) / ls**2)
            chol = np.linalg.cholesky(cov)
            w = np.linalg.solve(chol, cross)
            mean = w @ np.linalg.solve(chol, ys[idx])
            latent = sf**2 - w @ w
            var = latent + sn**2 + jitter if variant == "textbook" else latent + jitter
            logits[k] = np.log(idx.size) - log_denom + _log_normal(ys[i], mean, max(var, jitter))
        counts = np.bincount(z[others], minlength=num_slots)
        free = counts == 0
        dsf, dsn = np.exp(draws[i, :, 0]), np.exp(draws[i, :, 2])
        new_var = dsf**2 + dsn**2 if variant == "textbook" else (dsf + dsn) ** 2
        new_ll = _log_normal(ys[i], 0.0, new_var)
        if free.any():
            logits[-1] = np.log(alpha) - log_denom + logsumexp(new_ll) - np.log(len(new_ll))
        probs = np.exp(logits - logits.max())
        cdf = np.cumsum(probs)
        choice = min(int(np.sum(cdf < (1.0 - uniforms[t]) * cdf[-1])), num_slots)
        if choice == num_slots:
            choice = int(np.argmax(free))
            lp[choice] = draws[i, int(np.argmax(new_ll))]
        z[i] = choice
    return z, lp
