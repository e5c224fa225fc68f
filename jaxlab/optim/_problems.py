"""Distributed problems with known solutions, the compressed-GD baseline and the worst-case search.

The instances of Berg Thomsen et al.'s error-feedback study, in a form any compressed method can
run on: :class:`DistributedProblem` holds the per-worker data and constants (``L_i``, ``mu_i``),
the optimum and the objective. :func:`distributed_least_squares` (shared minimiser or noisy
targets), :func:`breast_cancer_workers` (scikit-learn's bundled data split by label, so the
workers are heterogeneous) with :func:`logistic_regression_problem` (strongly convex, minimiser
from :func:`logistic_reference_minimiser`) and :func:`nonconvex_logistic_regression_problem`
build them; :func:`run_distributed` runs a transform over the simulated workers in compiled
chunks until a tolerance; :func:`compressed_gradient_descent` is the feedback-free baseline; and
:func:`rotation_instance_rates` / :func:`worst_case_rate` measure the worst case of EF and EF21
over the paper's rotation instances (the check of :func:`jaxlab.optim.ef_tight_rate`).

References:
  D. Berg Thomsen, A. Taylor, A. Dieuleveut, "A Tight Theory of Error Feedback Algorithms in
  Distributed Optimization", ICML 2026 (arXiv 2605.31594).
"""

import functools
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.typing import ArrayLike

from jaxlab._src.deprecation import renamed_keyword
from jaxlab._src.validation import (
    check_axis_name,
    check_callable,
    check_choice,
    check_int,
    check_key,
    check_learning_rate,
    check_nonnegative,
    check_positive,
    check_positive_int,
    check_real,
    check_real_array,
)
from jaxlab.optim._compressors import Compressor
from jaxlab.optim._ef_theory import linear_one_step_matrix

__all__ = [
    "DistributedProblem",
    "DistributedRun",
    "breast_cancer_workers",
    "compressed_gradient_descent",
    "distributed_least_squares",
    "logistic_reference_minimiser",
    "logistic_regression_problem",
    "nonconvex_logistic_regression_problem",
    "rotation_instance_rates",
    "run_distributed",
    "worst_case_rate",
]

_MEASURES = ("suboptimality", "grad_sq")


class DistributedProblem(NamedTuple):
    """``f = (1/n) sum_i f_i`` with worker ``i`` holding ``(features[i], targets[i])``.

    Attributes:
      features: ``(workers, rows, dim)`` data.
      targets: ``(workers, rows)`` least-squares targets or ``+-1`` labels.
      smoothness: ``L_i`` per worker (numpy).
      strong_convexity: ``mu_i`` per worker, or ``None`` for a nonconvex problem.
      global_smoothness: ``L`` of ``f``.
      global_strong_convexity: ``mu`` of ``f`` (``None``: nonconvex).
      optimum: the minimiser ``x*`` (``None``: not known).
      optimal_value: ``f(x*)`` (``None``: not known).
      initial_value: ``f(0)``.
      value: ``value(x, features, targets) -> f(x)`` on the stacked data (jax).
      grad: ``grad(x, features_i, targets_i) -> grad f_i(x)`` for one worker (jax).

    Examples:
      >>> from jaxlab.optim import distributed_least_squares
      >>> problem = distributed_least_squares(jax.random.key(0), 2, rows=8, dim=3)
      >>> problem.features.shape, problem.smoothness.shape
      ((2, 8, 3), (2,))
    """

    features: jax.Array
    targets: jax.Array
    smoothness: np.ndarray
    strong_convexity: np.ndarray | None
    global_smoothness: float
    global_strong_convexity: float | None
    optimum: np.ndarray | None
    optimal_value: float | None
    initial_value: float
    value: Callable[[jax.Array, jax.Array, jax.Array], jax.Array]
    grad: Callable[[jax.Array, jax.Array, jax.Array], jax.Array]


# --------------------------------------------------------------------------------------------
# Least squares.


def _least_squares_value(x, features, targets):
    resid = jnp.einsum("wrd,d->wr", features, x) - targets
    return jnp.mean(jnp.sum(resid * resid, axis=1)) / (2 * features.shape[1])


def _least_squares_grad(x, features_i, targets_i):
    return features_i.T @ (features_i @ x - targets_i) / features_i.shape[0]


def distributed_least_squares(
    rng_key: jax.Array, num_workers: int, rows: int, dim: int, noise: ArrayLike = 0.0
) -> DistributedProblem:
    """Distributed least squares ``f_i(x) = ||A_i x - b_i||^2 / (2 rows)`` with known optimum.

    ``A_i`` has standard normal entries with column scales ``linspace(1, 0.3, dim)`` (so the
    workers' Hessians ``A_i^T A_i / rows`` differ and are ill-conditioned), ``b_i = A_i x_true +
    noise * N(0, 1)``. With ``noise = 0`` every worker's minimiser is ``x_true`` (a shared
    minimiser); otherwise ``x*`` solves the averaged normal equations and the local minimisers
    differ. ``L_i, mu_i`` are the extreme eigenvalues of worker ``i``'s Hessian, ``L, mu`` those
    of the mean Hessian. Built in numpy (float64) from a seed derived from ``rng_key``.

    Args:
      rng_key: a ``jax.random`` key (its key data seeds numpy).
      num_workers: ``n >= 1``.
      rows: rows per worker (``>= dim`` for strong convexity).
      dim: dimension ``d >= 1``.
      noise: standard deviation of the target noise, ``>= 0``.

    Returns:
      A :class:`DistributedProblem` (its ``value`` and ``grad`` are module-level functions, so
      two problems of one shape share compiled programs in :func:`run_distributed`).

    Examples:
      >>> from jaxlab.optim import distributed_least_squares
      >>> problem = distributed_least_squares(jax.random.key(0), 4, rows=20, dim=5)
      >>> bool(np.all(problem.strong_convexity > 0)), round(problem.optimal_value, 12)
      (True, 0.0)
    """
    check_key(rng_key)
    num_workers = check_positive_int(num_workers, "num_workers")
    rows = check_positive_int(rows, "rows")
    dim = check_positive_int(dim, "dim")
    noise = check_nonnegative(noise, "noise")
    rng = np.random.default_rng(np.asarray(jax.random.key_data(rng_key)).ravel())
    scales = np.linspace(1.0, 0.3, dim)
    a = rng.standard_normal((num_workers, rows, dim)) * scales[None, None, :]
    x_true = rng.standard_normal(dim)
    b = np.einsum("wrd,d->wr", a, x_true) + noise * rng.standard_normal((num_workers, rows))
    grams = np.einsum("wrd,wre->wde", a, a) / rows
    spectra = np.linalg.eigvalsh(grams)
    mean_gram = grams.mean(axis=0)
    global_spectrum = np.linalg.eigvalsh(mean_gram)
    optimum = np.linalg.solve(mean_gram, np.einsum("wrd,wr->d", a, b) / (num_workers * rows))

    def value(x):
        return float(np.mean(np.sum((np.einsum("wrd,d->wr", a, x) - b) ** 2, axis=1)) / (2 * rows))

    return DistributedProblem(
        jnp.asarray(a),
        jnp.asarray(b),
        spectra[:, -1],
        spectra[:, 0],
        float(global_spectrum[-1]),
        float(global_spectrum[0]),
        optimum,
        value(optimum),
        value(np.zeros(dim)),
        _least_squares_value,
        _least_squares_grad,
    )


# --------------------------------------------------------------------------------------------
# Logistic regression on heterogeneous workers.


def breast_cancer_workers(num_workers: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's breast-cancer data split across workers by label (heterogeneous data).

    The 30 features are standardised and a bias column of ones appended (31 coordinates); the
    labels are ``+-1``. Rows are sorted by label (stably) before the split, so each worker holds
    one class only (one worker may hold both where the classes meet); the last
    ``569 mod num_workers`` rows are dropped so that every worker has the same number.

    Args:
      num_workers: ``n >= 1``.

    Returns:
      ``(features, labels)`` of shapes ``(n, 569 // n, 31)`` and ``(n, 569 // n)``, float64.

    Examples:
      >>> from jaxlab.optim import breast_cancer_workers
      >>> features, labels = breast_cancer_workers(8)
      >>> features.shape, sorted(set(labels[0].tolist())), sorted(set(labels[-1].tolist()))
      ((8, 71, 31), [-1.0], [1.0])
    """
    num_workers = check_positive_int(num_workers, "num_workers")
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    x = (data.data - data.data.mean(0)) / data.data.std(0)
    x = np.concatenate([x, np.ones((x.shape[0], 1))], axis=1)
    y = 2.0 * data.target - 1.0
    order = np.argsort(y, kind="stable")
    rows = x.shape[0] // num_workers
    order = order[: num_workers * rows]
    return x[order].reshape(num_workers, rows, -1), y[order].reshape(num_workers, rows)


def logistic_reference_minimiser(features: ArrayLike, labels: ArrayLike, l2: float) -> np.ndarray:
    """Minimiser of ``mean log(1 + exp(-b a.x)) + (l2/2)||x||^2`` in float64, without JAX.

    scipy's L-BFGS-B, then five Newton steps with the exact Hessian (quadratic convergence from
    there, so the result is exact to rounding). Rows of every worker are pooled: the mean is over
    all rows.

    Args:
      features: ``(..., rows, dim)`` data (any leading worker axes).
      labels: ``(..., rows)`` labels in ``{-1, +1}``.
      l2: ``mu > 0``, the weight of the ridge term.

    Returns:
      The minimiser, a float64 numpy vector of size ``dim``.

    Examples:
      >>> from jaxlab.optim import logistic_reference_minimiser
      >>> a, b = np.array([[1.0], [-1.0], [2.0]]), np.array([1.0, -1.0, -1.0])
      >>> x = logistic_reference_minimiser(a, b, 0.1)
      >>> gradient = a.T @ (-b / (1 + np.exp(b * (a @ x)))) / 3 + 0.1 * x  # zero at the minimiser
      >>> bool(np.abs(gradient).max() < 1e-12)
      True
    """
    import scipy.optimize

    l2 = check_positive(l2, "l2")
    a = check_real_array(features, "features")
    b = check_real_array(labels, "labels")
    if a is None or b is None:
        raise TypeError("features and labels must be concrete arrays (scipy runs on the host)")
    if a.ndim < 2 or b.shape != a.shape[:-1]:
        raise ValueError(
            "features must be (..., rows, dim) and labels (..., rows), got shapes "
            f"{a.shape} and {b.shape}"
        )
    a, b = a.reshape(-1, a.shape[-1]), b.reshape(-1)

    def value(x):
        return float(np.mean(np.logaddexp(0.0, -b * (a @ x))) + 0.5 * l2 * x @ x)

    def sigmoid_neg(x):  # 1 / (1 + exp(b a.x)), the weight of each row in the gradient
        return 0.5 * (1.0 - np.tanh(0.5 * b * (a @ x)))

    def grad(x):
        return a.T @ (-b * sigmoid_neg(x)) / a.shape[0] + l2 * x

    x = scipy.optimize.minimize(
        value, np.zeros(a.shape[1]), jac=grad, method="L-BFGS-B", options={"gtol": 1e-12}
    ).x
    for _ in range(5):
        p = sigmoid_neg(x)
        hess = a.T @ ((p * (1 - p))[:, None] * a) / a.shape[0] + l2 * np.eye(a.shape[1])
        x = x - np.linalg.solve(hess, grad(x))
    return x


def _loss_curvatures(features: np.ndarray) -> tuple[np.ndarray, float]:
    """Upper bounds of the logistic loss's curvature: lambda_max(A_i^T A_i / rows) / 4."""
    rows = features.shape[1]
    grams = np.einsum("wrd,wre->wde", features, features) / rows
    return np.linalg.eigvalsh(grams)[:, -1] / 4, float(np.linalg.eigvalsh(grams.mean(0))[-1] / 4)


def _mean_over_workers(loss):
    def value(x, features, targets):
        return jnp.mean(jax.vmap(loss, in_axes=(None, 0, 0))(x, features, targets))

    return value


def _check_labelled(features: Any, labels: Any) -> tuple[np.ndarray, np.ndarray]:
    features, labels = np.asarray(features, np.float64), np.asarray(labels, np.float64)
    if features.ndim != 3 or labels.shape != features.shape[:2]:
        raise ValueError(
            "features must be (workers, rows, dim) and labels (workers, rows), got shapes "
            f"{features.shape} and {labels.shape}"
        )
    return features, labels


def logistic_regression_problem(
    features: ArrayLike, labels: ArrayLike, l2: float
) -> DistributedProblem:
    """Strongly convex logistic regression ``f_i = mean log(1 + exp(-b a.x)) + (l2/2)||x||^2``.

    The loss's curvature lies in ``[0, lambda_max(A_i^T A_i / rows) / 4]``, so ``L_i`` is that
    bound plus ``l2`` and ``mu_i = l2``. The optimum is :func:`logistic_reference_minimiser`
    (numpy, float64); ``optimal_value`` and ``initial_value`` are evaluated with ``value`` in the
    current JAX precision (enable float64 for suboptimalities below 1e-7).

    Args:
      features: ``(workers, rows, dim)`` data, e.g. from :func:`breast_cancer_workers`.
      labels: ``(workers, rows)`` labels in ``{-1, +1}``.
      l2: ``mu > 0``.

    Returns:
      A :class:`DistributedProblem`.

    Examples:
      >>> from jaxlab.optim import breast_cancer_workers, logistic_regression_problem
      >>> problem = logistic_regression_problem(*breast_cancer_workers(8), l2=0.1)
      >>> problem.strong_convexity.tolist() == [0.1] * 8, problem.optimal_value < 0.5
      (True, True)
    """
    x_np, y_np = _check_labelled(features, labels)
    mu = check_positive(l2, "l2")
    workers, _, dim = x_np.shape
    feats, targets = jnp.asarray(x_np), jnp.asarray(y_np)
    curv, curv_f = _loss_curvatures(x_np)

    def loss(x, a, b):
        return jnp.mean(jnp.logaddexp(0.0, -b * (a @ x))) + 0.5 * mu * jnp.sum(x * x)

    optimum = logistic_reference_minimiser(x_np, y_np, mu)
    value = _mean_over_workers(loss)
    evaluate = jax.jit(value)  # one compilation for both evaluations, not one per operation
    return DistributedProblem(
        feats,
        targets,
        curv + mu,
        np.full(workers, mu),
        curv_f + mu,
        mu,
        optimum,
        float(evaluate(jnp.asarray(optimum), feats, targets)),
        float(evaluate(jnp.zeros(dim), feats, targets)),
        value,
        jax.grad(loss),
    )


def nonconvex_logistic_regression_problem(
    features: ArrayLike, labels: ArrayLike, regularization: float
) -> DistributedProblem:
    """Logistic regression with the nonconvex regulariser ``reg * sum x^2 / (1 + x^2)``.

    The regulariser's second derivative lies in ``[-reg/2, 2 reg]``, so ``L_i`` is the loss's
    curvature bound plus ``2 reg``; there is no strong convexity and no known optimum (measure
    ``||grad f||^2`` instead, ``measure="grad_sq"`` in :func:`run_distributed`).

    Args:
      features: ``(workers, rows, dim)`` data.
      labels: ``(workers, rows)`` labels in ``{-1, +1}``.
      regularization: ``reg >= 0``.

    Returns:
      A :class:`DistributedProblem` with ``strong_convexity``, ``optimum`` and ``optimal_value``
      ``None``.

    Examples:
      >>> from jaxlab.optim import breast_cancer_workers, nonconvex_logistic_regression_problem
      >>> problem = nonconvex_logistic_regression_problem(*breast_cancer_workers(8), 0.1)
      >>> problem.strong_convexity is None, abs(problem.initial_value - float(np.log(2))) < 1e-6
      (True, True)
    """
    x_np, y_np = _check_labelled(features, labels)
    reg = check_nonnegative(regularization, "regularization")
    dim = x_np.shape[2]
    feats, targets = jnp.asarray(x_np), jnp.asarray(y_np)
    curv, curv_f = _loss_curvatures(x_np)

    def loss(x, a, b):
        return jnp.mean(jnp.logaddexp(0.0, -b * (a @ x))) + reg * jnp.sum(x**2 / (1 + x**2))

    value = _mean_over_workers(loss)
    return DistributedProblem(
        feats,
        targets,
        curv + 2 * reg,
        None,
        curv_f + 2 * reg,
        None,
        None,
        None,
        float(jax.jit(value)(jnp.zeros(dim), feats, targets)),
        value,
        jax.grad(loss),
    )


# --------------------------------------------------------------------------------------------
# The feedback-free baseline and the simulated-workers loop.


def compressed_gradient_descent(
    learning_rate: ArrayLike, compressor: Compressor, *, axis_name: str | None = None
) -> optax.GradientTransformationExtraArgs:
    """Naive compressed gradient descent (no feedback): ``x <- x - eta mean_i C(grad f_i(x))``.

    Each worker compresses its own gradient and the messages are averaged (``jax.lax.pmean`` over
    ``axis_name``); what the compressor drops is lost. On heterogeneous data it stalls at a
    distance from the optimum set by ``eta`` and the compression error, the failure error
    feedback fixes; :func:`jaxlab.optim.cgd_optimal_step_size` gives its best step when the
    workers share a minimiser. Deterministic compressors only (it keeps no key).

    Args:
      learning_rate: ``eta >= 0`` (a number or a possibly traced scalar array).
      compressor: a deterministic :class:`jaxlab.optim.Compressor`.
      axis_name: the workers' axis name, or ``None`` for one worker.

    Returns:
      A stateless ``optax.GradientTransformationExtraArgs``.

    Raises:
      TypeError: ``compressor`` is not a deterministic ``Compressor``, or ``learning_rate`` is a
        schedule or not a number.
      ValueError: a negative or non-finite concrete ``learning_rate``.

    Examples:
      >>> from jaxlab.optim import compressed_gradient_descent, top_k
      >>> tx = compressed_gradient_descent(0.5, top_k(1))
      >>> updates, _ = tx.update(jnp.array([1.0, -3.0]), tx.init(jnp.zeros(2)))
      >>> updates.tolist()  # top-1 keeps -3.0: the update is -0.5 * (0, -3)
      [-0.0, 1.5]
    """
    if callable(learning_rate):
        raise TypeError(
            "learning_rate must be a number or a scalar array (no schedule; for a scheduled step "
            f"use optax.inject_hyperparams(compressed_gradient_descent)), got {learning_rate!r}"
        )
    check_learning_rate(learning_rate)
    if not isinstance(compressor, Compressor) or not compressor.deterministic:
        raise TypeError(
            "compressor must be a deterministic jaxlab.optim.Compressor (top_k, scaled_sign, "
            f"...), got {compressor!r}"
        )
    check_axis_name(axis_name)

    def init(params):
        del params
        return optax.EmptyState()

    def update(updates, state, params=None, **extra_args):
        del params, extra_args
        messages = compressor.tree_compress(updates)
        if axis_name is not None:
            messages = jax.lax.pmean(messages, axis_name)
        return jax.tree.map(lambda m: -learning_rate * m, messages), state

    return optax.GradientTransformationExtraArgs(init, update)


class DistributedRun(NamedTuple):
    """What :func:`run_distributed` measured, one entry per step.

    Attributes:
      values: the measure after each step (numpy).
      bits: bits sent per worker up to each step (numpy).
      reached: whether ``values <= tolerance`` at some step.
      iterations: the first such step (1-based), or ``None``.
      bits_per_worker: the bits sent by then, or ``None``.

    Examples:
      >>> from jaxlab.optim import DistributedRun
      >>> DistributedRun(np.ones(2), np.zeros(2), False, None, None).reached
      False
    """

    values: np.ndarray
    bits: np.ndarray
    reached: bool
    iterations: int | None
    bits_per_worker: float | None


def _find_bits(state: Any) -> jax.Array | None:
    """The ``bits`` counter of an error-feedback state inside an optax chain state."""
    if hasattr(state, "_fields"):
        if "bits" in state._fields:
            return state.bits
        children = tuple(state)
    elif isinstance(state, tuple | list):
        children = tuple(state)
    else:
        return None
    for child in children:
        found = _find_bits(child)
        if found is not None:
            return found
    return None


@functools.partial(
    jax.jit,
    static_argnames=(
        "transform",
        "value",
        "grad",
        "measure",
        "length",
        "average_gradient",
        "bits_per_step",
        "axis_name",
    ),
)
def _run_chunk(
    carry,
    features,
    targets,
    learning_rate,
    reference,
    scale,
    *,
    transform,
    value,
    grad,
    measure,
    length,
    average_gradient,
    bits_per_step,
    axis_name,
):
    """``length`` steps of ``transform(learning_rate)`` over the workers, in one ``lax.scan``.

    Everything that varies between runs of one shape (the data, the step size, ``f*`` and the
    normaliser) is an argument, so runs share one compiled program.
    """
    tx = transform(learning_rate)
    grads = jax.vmap(grad, in_axes=(None, 0, 0))

    def worker_update(params, state, a, b):
        g = grad(params, a, b)
        if average_gradient:
            g = jax.lax.pmean(g, axis_name)
        return tx.update(g, state, params)

    per_worker = jax.vmap(worker_update, in_axes=(None, 0, 0, 0), axis_name=axis_name)

    def progress_measure(x):
        if measure == "suboptimality":
            return (value(x, features, targets) - reference) / scale
        g = jnp.mean(grads(x, features, targets), axis=0)
        return jnp.sum(g * g) / scale

    def step(carry, _):
        params, state, bits = carry
        updates, state = per_worker(params, state, features, targets)
        params = params + updates[0]
        if bits_per_step is None:
            bits = jnp.mean(_find_bits(state).astype(bits.dtype))
        else:
            bits = bits + bits_per_step
        return (params, state, bits), (progress_measure(params), bits)

    return jax.lax.scan(step, carry, None, length=length)


@functools.partial(jax.jit, static_argnums=0)
def _mean_gradient(grad, x, features, targets):
    return jnp.mean(jax.vmap(grad, in_axes=(None, 0, 0))(x, features, targets), axis=0)


@renamed_keyword("step_size", "learning_rate")
def run_distributed(
    problem: DistributedProblem,
    transform: Callable[[jax.Array], optax.GradientTransformation],
    learning_rate: ArrayLike,
    *,
    tolerance: float,
    max_steps: int,
    chunk: int = 500,
    measure: str = "suboptimality",
    average_gradient: bool = False,
    bits_per_step: float | None = None,
    axis_name: str = "workers",
    track: Callable[[range], Iterable[Any]] | None = None,
) -> DistributedRun:
    """Runs a transform over simulated workers from ``x = 0`` until ``measure <= tolerance``.

    Each step every worker computes ``grad f_i(x)`` on its data, feeds it to its copy of
    ``transform(learning_rate)`` (vmapped with ``axis_name``, so ``pmean`` inside the transform
    averages over workers) and the shared iterate moves by the averaged update. The steps run in
    compiled ``lax.scan`` chunks of ``chunk`` steps, stopping after the chunk where the target is
    first met. ``learning_rate``, the data and the problem's constants are traced arguments: runs
    with the same ``transform`` object (hashable; e.g. a frozen dataclass or a module-level
    function), shapes and options share one compiled program.

    Args:
      problem: a :class:`DistributedProblem`.
      transform: ``learning_rate -> GradientTransformation`` whose update returns every worker's
        (identical) update of the shared iterate, e.g.
        ``lambda eta: jaxlab.optim.error_feedback_21(eta, top_k(2), axis_name="workers")``.
      learning_rate: the step, a number or a scalar array (traced; ``step_size=`` is a
        deprecated alias).
      tolerance: the target of the measure.
      max_steps: step budget (rounded up to whole chunks).
      chunk: steps per compiled chunk.
      measure: ``"suboptimality"``, ``(f(x) - f*) / (f(0) - f*)`` (needs ``optimal_value``), or
        ``"grad_sq"``, ``||grad f(x)||^2 / ||grad f(0)||^2``.
      average_gradient: feed the workers' mean gradient (for plain optax transforms such as
        ``optax.sgd``, which do not average over workers themselves).
      bits_per_step: bits one worker sends per step, or ``None`` to read the ``bits`` counter of
        the transform's state (jaxlab's error-feedback states carry one).
      axis_name: the workers' axis name the transform averages over.
      track: optional wrapper of the chunk range (a progress bar).

    Returns:
      A :class:`DistributedRun`.

    Examples:
      >>> import optax
      >>> from jaxlab.optim import distributed_least_squares, run_distributed
      >>> problem = distributed_least_squares(jax.random.key(0), 4, rows=20, dim=5)
      >>> eta = 2 / (problem.global_smoothness + problem.global_strong_convexity)
      >>> gd = run_distributed(problem, optax.sgd, eta, tolerance=1e-4, max_steps=400,
      ...                      chunk=100, average_gradient=True, bits_per_step=160.0)
      >>> gd.reached, gd.values.size <= 400, gd.bits_per_worker == 160.0 * gd.iterations
      (True, True, True)
    """
    check_choice(measure, "measure", _MEASURES)
    if not isinstance(problem, DistributedProblem):
        raise TypeError(f"problem must be a DistributedProblem, got {type(problem).__name__}")
    check_callable(
        transform, "transform", signature="transform(learning_rate) -> GradientTransformation"
    )
    check_positive(tolerance, "tolerance")
    max_steps = check_positive_int(max_steps, "max_steps")
    chunk = check_positive_int(chunk, "chunk")
    check_axis_name(axis_name)
    feats, targets = problem.features, problem.targets
    workers, _, dim = feats.shape
    dtype = jnp.result_type(float)
    zero = jnp.zeros(dim, feats.dtype)
    if measure == "suboptimality":
        if problem.optimal_value is None:
            raise ValueError("measure='suboptimality' needs a problem with a known optimal_value")
        reference = problem.optimal_value
        scale = problem.initial_value - problem.optimal_value
    else:
        g0 = _mean_gradient(problem.grad, zero, feats, targets)
        reference, scale = 0.0, float(jnp.sum(g0 * g0))
    tx = transform(learning_rate)
    state = jax.vmap(lambda _: tx.init(zero), axis_name=axis_name)(jnp.arange(workers))
    carry = (zero, state, jnp.zeros((), dtype))
    run_chunk = functools.partial(
        _run_chunk,
        learning_rate=jnp.asarray(learning_rate, dtype),
        reference=jnp.asarray(reference, dtype),
        scale=jnp.asarray(scale, dtype),
        transform=transform,
        value=problem.value,
        grad=problem.grad,
        measure=measure,
        length=chunk,
        average_gradient=bool(average_gradient),
        bits_per_step=None if bits_per_step is None else float(bits_per_step),
        axis_name=axis_name,
    )
    chunks = range(-(-max_steps // chunk))
    values, bits = [], []
    for _ in track(chunks) if track is not None else chunks:
        carry, (v, b) = run_chunk(carry, feats, targets)
        values.append(np.asarray(v))
        bits.append(np.asarray(b))
        if values[-1].min() <= tolerance:
            break
    trace, bits_arr = np.concatenate(values), np.concatenate(bits)
    hit = np.flatnonzero(trace <= tolerance)
    reached = hit.size > 0
    return DistributedRun(
        trace,
        bits_arr,
        bool(reached),
        int(hit[0] + 1) if reached else None,
        float(bits_arr[hit[0]]) if reached else None,
    )


# --------------------------------------------------------------------------------------------
# Worst cases over the rotation instances.


@functools.partial(jax.jit, static_argnums=0)
def _one_step_matrices(method, curvature, theta, learning_rate, alpha):
    return jax.vmap(linear_one_step_matrix, in_axes=(None, 0, 0, None, None))(
        method, curvature, theta, learning_rate, alpha
    )


# Rows per compiled batch of one-step matrices. Every batch is padded to this size, so searches
# of any size reuse one compiled program per (method, workers); building a padding row costs far
# less than its compilation would (the eigenvalues are only computed for the real rows).
_BATCH = 1024


@renamed_keyword("step_size", "learning_rate")
def rotation_instance_rates(
    method: str, curvature: ArrayLike, theta: ArrayLike, learning_rate: float, alpha: float
) -> np.ndarray:
    """Linear rate (squared spectral radius) of EF or EF21 on each rotation instance.

    Row ``j`` is one instance: worker ``i`` holds ``f_i = (curvature[j, i] / 2)||x||^2`` in 2-D
    and the rotation compressor of angle ``theta[j, i]``; the rate is the squared spectral radius
    of :func:`jaxlab.optim.linear_one_step_matrix` (numpy's eigensolver, float64).

    Args:
      method: ``"ef"`` or ``"ef21"``.
      curvature: ``(instances, workers)`` curvatures ``lambda_i > 0``.
      theta: ``(instances, workers)`` angles.
      learning_rate: ``eta > 0`` (``step_size=`` is a deprecated alias).
      alpha: the compressor's contraction parameter, in ``(0, 1]``.

    Returns:
      ``(instances,)`` rates, numpy.

    Examples:
      >>> from jaxlab.optim import ef_optimal_step_size, ef_tight_rate, rotation_instance_rates
      >>> eta = float(ef_optimal_step_size(1.0, 0.1, 0.5))
      >>> rates = rotation_instance_rates("ef21", [[0.1], [1.0]], [[np.pi], [np.pi]], eta, 0.5)
      >>> print(f"{rates.max():.5f} {float(ef_tight_rate(10.0, 0.5)):.5f}")
      0.93937 0.93937
    """
    # Checked here (eagerly): inside the vmapped matrices they are traced and pass unchecked.
    check_real_array(curvature, "curvature", minimum=0.0, include_minimum=False)
    check_real_array(theta, "theta")
    curvature, theta = np.asarray(curvature, np.float64), np.asarray(theta, np.float64)
    if curvature.ndim != 2 or curvature.shape != theta.shape:
        raise ValueError(
            "curvature and theta must be (instances, workers) arrays of one shape, got "
            f"{curvature.shape} and {theta.shape}"
        )
    # Python floats: a numpy scalar would be a strongly typed argument and compile again.
    learning_rate = check_positive(learning_rate, "learning_rate")
    alpha = check_real(alpha, "alpha", minimum=0.0, maximum=1.0, include_minimum=False)
    out = []
    for start in range(0, curvature.shape[0], _BATCH):
        lam, ang = curvature[start : start + _BATCH], theta[start : start + _BATCH]
        size = lam.shape[0]
        # Padding rows repeat the last instance (valid inputs); they are dropped below.
        lam = np.concatenate([lam, np.repeat(lam[-1:], _BATCH - size, axis=0)])
        ang = np.concatenate([ang, np.repeat(ang[-1:], _BATCH - size, axis=0)])
        mats = np.asarray(_one_step_matrices(method, lam, ang, learning_rate, alpha))[:size]
        out.append(np.max(np.abs(np.linalg.eigvals(mats)), axis=-1) ** 2)
    return np.concatenate(out)


@renamed_keyword("step_size", "learning_rate")
def worst_case_rate(
    method: str,
    smallest: ArrayLike,
    largest: ArrayLike,
    learning_rate: float,
    alpha: float,
    rng: np.random.Generator,
    *,
    grid_curvatures: int = 101,
    grid_angles: int = 181,
    random_points: int = 20_000,
) -> tuple[float, np.ndarray, np.ndarray]:
    """The largest rate of EF or EF21 over rotation instances with curvatures in given bounds.

    A grid with every worker at the same relative curvature and angle (for one worker: the whole
    search), then for ``n > 1`` workers ``random_points`` random per-worker points (half of the
    curvatures at an end of the interval, a third of the angles near pi, where the worst case
    sits) and two sweeps of coordinate search (11 curvatures x 73 angles per worker). At the
    optimal step the result matches :func:`jaxlab.optim.ef_tight_rate` (the paper's tightness).

    Args:
      method: ``"ef"`` or ``"ef21"``.
      smallest: ``(workers,)`` lower curvature bounds ``mu_i > 0``.
      largest: ``(workers,)`` upper bounds ``L_i``.
      learning_rate: ``eta > 0`` (``step_size=`` is a deprecated alias).
      alpha: the compressor's contraction parameter, in ``(0, 1]``.
      rng: numpy generator of the random points.
      grid_curvatures: curvatures per worker in the grid (``>= 2``, endpoints included).
      grid_angles: angles in the grid, ``linspace(0, 2 pi)`` (pi is on it when odd).
      random_points: random points for ``n > 1`` (``>= 0``).

    Returns:
      ``(worst, curvature, theta)``: the largest rate found and its instance.

    Examples:
      >>> from jaxlab.optim import ef_optimal_step_size, ef_tight_rate, worst_case_rate
      >>> eta = float(ef_optimal_step_size(1.0, 0.1, 0.5))
      >>> worst, lam, theta = worst_case_rate(
      ...     "ef", [0.1], [1.0], eta, 0.5, np.random.default_rng(0), grid_curvatures=5,
      ...     grid_angles=19)
      >>> print(f"{worst:.5f} {float(ef_tight_rate(10.0, 0.5)):.5f}")
      0.93937 0.93937
    """
    check_real_array(smallest, "smallest", minimum=0.0, include_minimum=False)
    check_real_array(largest, "largest", minimum=0.0, include_minimum=False)
    check_positive(learning_rate, "learning_rate")
    check_real(alpha, "alpha", minimum=0.0, maximum=1.0, include_minimum=False)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator (np.random.default_rng(seed)), got {rng!r}")
    small, big = np.asarray(smallest, np.float64), np.asarray(largest, np.float64)
    if small.ndim != 1 or small.shape != big.shape:
        raise ValueError(
            f"smallest and largest must be (workers,) arrays, got {small.shape} and {big.shape}"
        )
    grid_curvatures = check_int(grid_curvatures, "grid_curvatures", minimum=2)
    grid_angles = check_positive_int(grid_angles, "grid_angles")
    random_points = check_int(random_points, "random_points", minimum=0)
    n = small.shape[0]
    t, ang = np.meshgrid(
        np.linspace(0.0, 1.0, grid_curvatures),
        np.linspace(0.0, 2 * np.pi, grid_angles),
        indexing="ij",
    )
    lam = small[None, :] + t.reshape(-1, 1) * (big - small)[None, :]
    theta = np.repeat(ang.reshape(-1, 1), n, axis=1)
    if n > 1:
        m = random_points
        ends = np.where(rng.random((m, n)) < 0.5, small[None, :], big[None, :])
        inner = small[None, :] + rng.random((m, n)) * (big - small)[None, :]
        lam_r = np.where(rng.random((m, n)) < 0.5, ends, inner)
        theta_r = np.where(
            rng.random((m, n)) < 0.3,
            np.pi + rng.normal(0.0, 0.1, (m, n)),
            rng.uniform(0.0, 2 * np.pi, (m, n)),
        )
        lam, theta = np.concatenate([lam, lam_r]), np.concatenate([theta, theta_r])
    values = rotation_instance_rates(method, lam, theta, learning_rate, alpha)
    best = int(values.argmax())
    worst, arg_lam, arg_theta = float(values[best]), lam[best].copy(), theta[best].copy()
    if n > 1:
        line_t, line_a = np.meshgrid(
            np.linspace(0.0, 1.0, 11), np.linspace(0.0, 2 * np.pi, 73), indexing="ij"
        )
        line_t, line_a = line_t.ravel(), line_a.ravel()
        for _ in range(2):
            for i in range(n):
                cand_lam = np.repeat(arg_lam[None, :], line_t.size, axis=0)
                cand_theta = np.repeat(arg_theta[None, :], line_t.size, axis=0)
                cand_lam[:, i] = small[i] + line_t * (big[i] - small[i])
                cand_theta[:, i] = line_a
                vals = rotation_instance_rates(method, cand_lam, cand_theta, learning_rate, alpha)
                if vals.max() > worst:
                    worst = float(vals.max())
                    arg_lam, arg_theta = cand_lam[vals.argmax()], cand_theta[vals.argmax()]
    return worst, arg_lam, arg_theta
