"""The product-mix two-stage problem of the APUB paper, with its exact sampler and recourse.

``I`` products, ``J`` stations. The first stage chooses production ``x ∈ [0, x_upper]^I`` at cost
``c = -profit``. Product ``i`` needs ``t_ji`` hours at station ``j``; a scenario ``ξ = (h, q, w)``
brings ``h`` regular labour hours (shared by all stations) and, per station, the unit cost
``q_j`` of extra labour and its efficiency ``w_j``. The recourse ``y = (u, v, s) >= 0`` buys extra
labour ``u_j``, allocates regular hours ``v_j`` and leaves surplus ``s_j``:

    Q(x, ξ) = min Σ_j q_j u_j   s.t.  w_j u_j + v_j - s_j = t_j·x  (j = 1..J),   Σ_j v_j = h.

Every coefficient of ``W = [[diag(w), I, -I], [0, 1ᵀ, 0]]`` and ``q`` is random (random
recourse), and the recourse is complete. Its closed form: with ``κ_j = q_j / w_j``, give the
regular hours to stations in decreasing ``κ`` order (allocation ``a_j``), then
``Q = Σ_j κ_j (t_j·x - a_j)_+``.

The scenario law: regime "regular" with probability ``p``, else "worst"; inside a regime the
``2J + 1`` coordinates ``(h, q, w)`` have a Gumbel copula with the regime's ``θ`` and uniform
marginals on the regime's intervals.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab._src import validation
from jaxlab.stochprog._twostage import TwoStageLP

__all__ = [
    "ProductMixConfig",
    "ProductMixScenarios",
    "Regime",
    "gumbel_copula",
    "positive_stable",
    "product_mix_config",
    "product_mix_model",
    "product_mix_recourse",
    "product_mix_reference_scenarios",
    "sample_product_mix",
]

# The 4-product, 2-station instance (hours from the reference code, profits of the classic
# product-mix model) and the 20-product costs of the reference code.
_HOURS_4X2 = ((10.0, 6.0, 8.0, 4.0), (6.0, 2.0, 3.0, 2.0))
_PROFIT_4 = (12.0, 20.0, 18.0, 40.0)
_PROFIT_20 = (14, 9, 20, 15, 4, 40, 18, 11, 13, 16, 17, 8, 9, 24, 10, 7, 12, 3, 4, 5)


@dataclasses.dataclass(frozen=True)
class Regime:
    """One regime of the scenario law: copula parameter and the marginals' intervals.

    Attributes:
      theta: Gumbel copula parameter ``θ >= 1`` (1: independent coordinates).
      hours: interval of the regular labour hours ``h``.
      cost: interval of each station's extra-labour unit cost ``q_j``.
      efficiency: interval of each station's efficiency ``w_j`` (positive).

    Examples:
      >>> calm = Regime(theta=1.0, hours=(5000.0, 6000.0), cost=(6.0, 8.0),
      ...               efficiency=(0.8, 1.0))     # independent coordinates
      >>> calm.theta
      1.0
    """

    theta: float
    hours: tuple[float, float]
    cost: tuple[float, float]
    efficiency: tuple[float, float]

    def __post_init__(self):
        validation.check_real(self.theta, "theta", minimum=1.0)
        for name in ("hours", "cost", "efficiency"):
            low, high = (validation.check_real(v, name) for v in getattr(self, name))
            if not low <= high:
                raise ValueError(f"{name} must be an interval (low, high) with low <= high")
        if self.efficiency[0] <= 0:
            raise ValueError(f"efficiency must be positive, got {self.efficiency}")


REGULAR = Regime(theta=2.0, hours=(5000.0, 6000.0), cost=(6.0, 8.0), efficiency=(0.8, 1.0))
WORST = Regime(theta=5.0, hours=(500.0, 600.0), cost=(20.0, 25.0), efficiency=(0.5, 0.6))


@dataclasses.dataclass(frozen=True)
class ProductMixConfig:
    """A product-mix instance: profits, hours matrix, regime law and first-stage bound.

    Attributes:
      profit: per-product profit (``c = -profit``), length ``I``.
      hours: ``t``, ``J`` rows of ``I`` hours.
      regular_probability: ``p``, the probability of the regular regime.
      regular: the regular :class:`Regime` (probability ``regular_probability``).
      worst: the rare worst :class:`Regime`.
      x_upper: the first-stage box ``0 <= x <= x_upper``.

    Examples:
      >>> config = ProductMixConfig(profit=(12.0, 20.0), hours=((10.0, 6.0),),
      ...                           regular_probability=0.8)
      >>> config.num_products, config.num_stations, config.cost.tolist()
      (2, 1, [-12.0, -20.0])
    """

    profit: tuple[float, ...]
    hours: tuple[tuple[float, ...], ...]
    regular_probability: float = 0.9
    regular: Regime = REGULAR
    worst: Regime = WORST
    x_upper: float = 2000.0

    def __post_init__(self):
        hours = np.asarray(self.hours, dtype=np.float64)
        if hours.ndim != 2 or hours.shape[1] != len(self.profit):
            raise ValueError(
                f"hours must have shape (J, I) with I = {len(self.profit)} products, got "
                f"{hours.shape}"
            )
        if not np.all(np.isfinite(hours)) or np.any(hours < 0):
            raise ValueError("hours must be finite and >= 0")
        validation.check_real_array(list(self.profit), "profit")
        validation.check_probability(self.regular_probability, "regular_probability")
        validation.check_positive(self.x_upper, "x_upper")

    @property
    def num_products(self) -> int:
        return len(self.profit)

    @property
    def num_stations(self) -> int:
        return len(self.hours)

    @property
    def cost(self) -> np.ndarray:
        return -np.asarray(self.profit, dtype=np.float64)


def product_mix_config(
    num_products: int = 4, num_stations: int = 2, *, seed: int = 0, **overrides: Any
) -> ProductMixConfig:
    """The note's instances: 4x2 (hours and profits as in the paper's code), 20 products with the
    reference profits, and any other size with integer hours in ``[1, 10]`` (and profits in
    ``[3, 40]``) drawn from ``seed``.

    Examples:
      >>> config = product_mix_config()
      >>> config.num_products, config.num_stations, config.hours[0]
      (4, 2, (10.0, 6.0, 8.0, 4.0))
      >>> product_mix_config(20, 8).num_stations
      8
    """
    i = validation.check_positive_int(num_products, "num_products")
    j = validation.check_positive_int(num_stations, "num_stations")
    validation.check_int(seed, "seed", minimum=0)
    rng = np.random.default_rng(seed)
    if (i, j) == (4, 2):
        hours, profit = _HOURS_4X2, _PROFIT_4
    else:
        hours = tuple(tuple(float(v) for v in row) for row in rng.integers(1, 11, size=(j, i)))
        if i == len(_PROFIT_20):
            profit = tuple(float(v) for v in _PROFIT_20)
        else:
            profit = tuple(float(v) for v in rng.integers(3, 41, size=i))
    return ProductMixConfig(profit=profit, hours=hours, **overrides)


class ProductMixScenarios(NamedTuple):
    """Scenario data: regular hours ``h`` ``(n,)``, costs ``q`` and efficiencies ``w`` ``(n, J)``.

    ``regime`` is 1 for the regular regime, 0 for the worst.

    Examples:
      >>> s = sample_product_mix(jax.random.key(0), 1000, product_mix_config())
      >>> round(float(s.regime.mean()), 1)            # the regular regime's probability
      0.9
    """

    hours: jax.Array
    cost: jax.Array
    efficiency: jax.Array
    regime: jax.Array


def positive_stable(rng_key: jax.Array, shape: tuple[int, ...], a: Any) -> jax.Array:
    """Exact draws of ``S >= 0`` with Laplace transform ``E e^{-sS} = exp(-s^a)``, ``0 < a < 1``.

    Kanter's representation: ``U ~ Unif(0, π)``, ``E ~ Exp(1)``,
    ``A(U) = (sin(aU)/sin U)^{1/(1-a)} · sin((1-a)U)/sin(aU)``, ``S = (A(U)/E)^{(1-a)/a}``.

    Examples:
      >>> s = positive_stable(jax.random.key(0), (100_000,), 0.5)
      >>> round(float(jnp.exp(-2.0 * s).mean()), 2)  # exp(-sqrt(2)) = 0.243
      0.24
    """
    validation.check_key(rng_key)
    a = validation.check_real(
        a, "a", minimum=0.0, maximum=1.0, include_minimum=False, include_maximum=False
    )
    shape = validation.check_shape(shape, "shape")
    key_u, key_e = jax.random.split(rng_key)
    u = jax.random.uniform(key_u, shape, minval=0.0, maxval=math.pi)
    # Keep U off 0 and π, where sin vanishes and the ratio is 0/0.
    tiny = jnp.finfo(u.dtype).eps
    u = jnp.clip(u, tiny, math.pi - tiny)
    e = jax.random.exponential(key_e, shape)
    kanter = (
        (jnp.sin(a * u) / jnp.sin(u)) ** (1.0 / (1.0 - a)) * jnp.sin((1.0 - a) * u) / jnp.sin(a * u)
    )
    return (kanter / e) ** ((1.0 - a) / a)


def gumbel_copula(rng_key: jax.Array, num_samples: int, dim: int, theta: Any) -> jax.Array:
    """Exact Gumbel-copula draws (Marshall–Olkin): ``U_k = exp(-(E_k/S)^{1/θ})``.

    ``S`` positive stable with index ``1/θ`` (:func:`positive_stable`), ``E_k ~ Exp(1)``; ``θ = 1``
    gives independent uniforms. Returns shape ``(num_samples, dim)`` with uniform marginals.

    Examples:
      >>> u = gumbel_copula(jax.random.key(0), 20_000, 3, 2.0)
      >>> u.shape, bool(abs(u.mean() - 0.5) < 0.01)
      ((20000, 3), True)
    """
    validation.check_key(rng_key)
    n = validation.check_positive_int(num_samples, "num_samples")
    d = validation.check_positive_int(dim, "dim")
    theta = validation.check_real(theta, "theta", minimum=1.0)
    key_s, key_e = jax.random.split(rng_key)
    e = jax.random.exponential(key_e, (n, d))
    if theta == 1.0:
        return jnp.exp(-e)
    s = positive_stable(key_s, (n, 1), 1.0 / theta)
    return jnp.exp(-((e / s) ** (1.0 / theta)))


def _regime_draw(rng_key, n, j, regime: Regime):
    u = gumbel_copula(rng_key, n, 2 * j + 1, regime.theta)

    def scale(v, interval):
        return interval[0] + (interval[1] - interval[0]) * v

    return (
        scale(u[:, 0], regime.hours),
        scale(u[:, 1 : j + 1], regime.cost),
        scale(u[:, j + 1 :], regime.efficiency),
    )


def sample_product_mix(
    rng_key: jax.Array, num_samples: int, config: ProductMixConfig
) -> ProductMixScenarios:
    """Draws ``num_samples`` i.i.d. scenarios from the regime-switching Gumbel-copula law.

    Examples:
      >>> s = sample_product_mix(jax.random.key(0), 5, product_mix_config())
      >>> s.hours.shape, s.cost.shape, s.efficiency.shape
      ((5,), (5, 2), (5, 2))
    """
    validation.check_key(rng_key)
    n = validation.check_positive_int(num_samples, "num_samples")
    if not isinstance(config, ProductMixConfig):
        raise TypeError(f"config must be a ProductMixConfig, got {type(config).__name__}")
    j = config.num_stations
    key_regime, key_regular, key_worst = jax.random.split(rng_key, 3)
    regular = jax.random.bernoulli(key_regime, config.regular_probability, (n,))
    good = _regime_draw(key_regular, n, j, config.regular)
    bad = _regime_draw(key_worst, n, j, config.worst)
    pick = lambda a, b: jnp.where(regular.reshape((n,) + (1,) * (a.ndim - 1)), a, b)
    h, q, w = (pick(a, b) for a, b in zip(good, bad, strict=True))
    return ProductMixScenarios(h, q, w, regular.astype(jnp.int32))


def _check_scenarios(scenarios: Any, num_stations: int | None = None) -> None:
    if not isinstance(scenarios, ProductMixScenarios):
        raise TypeError(f"scenarios must be ProductMixScenarios, got {type(scenarios).__name__}")
    n = np.shape(scenarios.hours)[0]
    j = np.shape(scenarios.cost)[-1] if num_stations is None else num_stations
    for name, value, shape in (
        ("scenarios.cost", scenarios.cost, (n, j)),
        ("scenarios.efficiency", scenarios.efficiency, (n, j)),
    ):
        if tuple(np.shape(value)) != shape:
            raise ValueError(f"{name} must have shape (n, J) = {shape}, got {np.shape(value)}")
    for name in ProductMixScenarios._fields:
        validation.check_finite_array(getattr(scenarios, name), f"scenarios.{name}")


def product_mix_reference_scenarios() -> ProductMixScenarios:
    """The note's four hand-checked scenarios of the 4 x 2 instance (its reference checks 3-4).

    ``(h, q, w)`` = ``(5500, (7, 7), (0.9, 0.9))``, ``(6000, (6, 8), (1.0, 0.8))``,
    ``(5800, (7, 6), (0.8, 1.0))`` and the worst-regime ``(550, (15, 15), (0.6, 0.6))``. At
    ``x = (100, 200, 300, 400)`` their recourse costs are 26444.444, 17400, 19700 and 208750; over
    all 256 bootstrap index sequences, SAA's optimum is -5729.1667 at ``x = (0, 0, 0, 916.667)``
    and APUB's, for every ``α <= 0.9375``, -3666.6667 at ``x = (0, 0, 0, 550/6)``. NumPy float64.

    Examples:
      >>> product_mix_reference_scenarios().hours.tolist()
      [5500.0, 6000.0, 5800.0, 550.0]
    """
    return ProductMixScenarios(
        hours=np.array([5500.0, 6000.0, 5800.0, 550.0]),
        cost=np.array([[7.0, 7.0], [6.0, 8.0], [7.0, 6.0], [15.0, 15.0]]),
        efficiency=np.array([[0.9, 0.9], [1.0, 0.8], [0.8, 1.0], [0.6, 0.6]]),
        regime=np.array([1, 1, 1, 0]),
    )


def product_mix_recourse(x: Any, scenarios: ProductMixScenarios, hours: Any):
    """The closed-form recourse ``Q(x, ξ_n)`` and a subgradient in ``x``, vectorized in JAX.

    ``κ_j = q_j / w_j``; regular hours go to stations in decreasing ``κ`` order (allocation
    ``a_j``), ``Q = Σ_j κ_j (t_j·x - a_j)_+``. Duals: ``μ = 0`` if hours are left over, else the
    ``κ`` of the first short station in that order; ``π_j = κ_j`` if station ``j`` is short,
    else ``min(κ_j, μ)``; the subgradient is ``Σ_j π_j t_j``. Jittable; the dtype follows the
    inputs (use float64 for LP-level agreement: costs are O(1e4-1e5)).

    Args:
      x: production, shape ``(I,)``.
      scenarios: :class:`ProductMixScenarios` with ``n`` scenarios.
      hours: ``t``, shape ``(J, I)``.

    Returns:
      ``(values, subgradients)`` of shapes ``(n,)`` and ``(n, I)``.

    Examples:
      >>> s = ProductMixScenarios(jnp.array([6000.0]), jnp.array([[6.0, 8.0]]),
      ...                         jnp.array([[1.0, 0.8]]), jnp.array([1]))
      >>> q, g = product_mix_recourse(jnp.array([100.0, 200, 300, 400]), s,
      ...                             jnp.array([[10.0, 6, 8, 4], [6.0, 2, 3, 2]]))
      >>> round(float(q[0]), 3)
      17400.0
    """
    _check_scenarios(scenarios)
    t = validation.check_array(hours, "hours", kind="real", ndim=2)
    x = validation.check_array(x, "x", kind="real", ndim=1)
    validation.check_last_axis(x, t.shape[1], "x", "hours.shape[1]")
    if scenarios.cost.shape[-1] != t.shape[0]:
        raise ValueError(
            f"scenarios.cost has {scenarios.cost.shape[-1]} stations but hours has {t.shape[0]}"
        )
    dtype = jnp.result_type(x.dtype, t.dtype, scenarios.cost.dtype)
    x, t = x.astype(dtype), t.astype(dtype)
    need = t @ x  # (J,)

    def one(h, q, w):
        kappa = q / w
        order = jnp.argsort(-kappa)
        k_sorted, d_sorted = kappa[order], need[order]
        before = jnp.cumsum(d_sorted) - d_sorted
        allocated = jnp.clip(h - before, 0.0, d_sorted)
        short_sorted = d_sorted - allocated
        value = jnp.sum(k_sorted * short_sorted)
        is_short = short_sorted > 0
        left_over = h > jnp.sum(d_sorted)
        first_short = jnp.argmax(is_short)
        mu = jnp.where(left_over | ~jnp.any(is_short), 0.0, k_sorted[first_short])
        pi_sorted = jnp.where(is_short, k_sorted, jnp.minimum(k_sorted, mu))
        pi = jnp.zeros_like(pi_sorted).at[order].set(pi_sorted)
        return value, pi @ t

    h = scenarios.hours.astype(dtype)
    return jax.vmap(one)(h, scenarios.cost.astype(dtype), scenarios.efficiency.astype(dtype))


def product_mix_model(
    scenarios: ProductMixScenarios, config: ProductMixConfig, *, x_upper: Any = None
) -> TwoStageLP:
    """The product-mix problem over ``scenarios`` as a :class:`TwoStageLP` (random recourse).

    ``W_n = [[diag(w_n), I, -I], [0, 1ᵀ, 0]]``, ``T_n = [[-t], [0]]``, ``h_n = (0, ..., 0, h_n)``,
    ``q_n = (q_n, 0, 0)``, first stage ``c = -profit`` and ``0 <= x <= x_upper`` (default the
    config's).

    Examples:
      >>> config = product_mix_config()
      >>> model = product_mix_model(sample_product_mix(jax.random.key(0), 3, config), config)
      >>> model.W.shape, model.T.shape
      ((3, 3, 6), (3, 3, 4))
    """
    if not isinstance(config, ProductMixConfig):
        raise TypeError(f"config must be a ProductMixConfig, got {type(config).__name__}")
    _check_scenarios(scenarios, config.num_stations)
    j, i = config.num_stations, config.num_products
    h = np.asarray(scenarios.hours, np.float64)
    q = np.asarray(scenarios.cost, np.float64)
    w = np.asarray(scenarios.efficiency, np.float64)
    n = h.shape[0]
    big_w = np.zeros((n, j + 1, 3 * j))
    rows = np.arange(j)
    big_w[:, rows, rows] = w
    big_w[:, rows, j + rows] = 1.0
    big_w[:, rows, 2 * j + rows] = -1.0
    big_w[:, j, j : 2 * j] = 1.0
    big_t = np.zeros((j + 1, i))
    big_t[:j] = -np.asarray(config.hours, np.float64)
    rhs = np.zeros((n, j + 1))
    rhs[:, j] = h
    costs = np.concatenate([q, np.zeros((n, 2 * j))], axis=1)
    upper = config.x_upper if x_upper is None else x_upper
    return TwoStageLP(
        c=config.cost,
        W=big_w,
        T=big_t,
        h=rhs,
        q=costs,
        x_lower=np.zeros(i),
        x_upper=np.full(i, validation.check_positive(upper, "x_upper")),
    )
