"""Two-stage linear programs with random recourse, and their SAA and APUB extensive forms.

A first-stage decision ``x`` (bounds ``x_lower <= x <= x_upper``, optional ``A x <= b``) costs
``c·x``; after scenario ``ξ_n`` is revealed the recourse costs

    Q(x, ξ_n) = min_y { q_n·y : W_n y = h_n - T_n x, y >= 0 },

with every one of ``W, T, h, q`` allowed to depend on the scenario (random recourse). With data
``ξ_1..ξ_N``:

* SAA:  ``min_x c·x + (1/N) Σ_n Q(x, ξ_n)``;
* APUB: ``min_x c·x + APUB_α[Q(x, ·)]`` over a fixed bootstrap matrix ``V ∈ ℕ^{M×N}``, the
  bootstrap sampling approximation (one LP, Rockafellar–Uryasev form of the CVaR):

      min  c·x + t + (1/(αM)) Σ_m s_m
      s.t. s_m >= (1/N) Σ_n V_mn z_n - t,   s_m >= 0,
           z_n = q_n·y_n,   W_n y_n = h_n - T_n x,   y_n >= 0,   x ∈ X.

The translation equivariance of APUB keeps ``c·x`` outside the bootstrap. Everything here runs
on the host in NumPy float64 and is solved by HiGHS (highspy): no part of it is traced, so jit
stops at the LP. :class:`jaxlab.solvers.LShaped` solves the same problems by decomposition.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np
import scipy.sparse as sp

from jaxlab._src import validation
from jaxlab._src.highs import INF, LPStatus, MasterLP, solve_lp

__all__ = [
    "ExtensiveForm",
    "TwoStageLP",
    "TwoStageSolution",
    "extensive_form",
    "recourse_lower_bound",
    "recourse_lp",
    "solve_extensive_form",
]


def _host_array(value: Any, name: str, ndim: tuple[int, ...], finite: bool = True) -> np.ndarray:
    array = validation.check_array(value, name, kind="real", host=True)
    if array.ndim not in ndim:
        axes = " or ".join(str(d) for d in ndim)
        raise ValueError(f"{name} must have {axes} axes, got shape {array.shape}")
    array = array.astype(np.float64)
    if finite and not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite, got {int(np.sum(~np.isfinite(array)))} NaN/inf")
    return array


def _expect_shape(array: np.ndarray, name: str, shape: tuple[int, ...], meaning: str) -> None:
    if array.shape != shape:
        raise ValueError(f"{name} must have shape {meaning} = {shape}, got {array.shape}")


@dataclasses.dataclass(frozen=True, eq=False)
class TwoStageLP:
    """A two-stage LP with random recourse over ``N`` scenarios (host NumPy float64 data).

    ``Q(x, ξ_n) = min {q_n·y : W_n y = h_n - T_n x, y >= 0}``; first stage ``min c·x`` over
    ``x_lower <= x <= x_upper`` and ``A x <= b``. ``h`` fixes ``N`` and the number of recourse
    rows; ``W`` (``(N, m2, n2)``, or ``(m2, n2)`` for fixed recourse), ``T`` (``(N, m2, n1)`` or
    ``(m2, n1)``) and ``q`` (``(N, n2)`` or ``(n2,)``) broadcast over scenarios.

    Attributes:
      c: first-stage costs, shape ``(n1,)``.
      W, T, h, q: recourse data as above.
      x_lower, x_upper: first-stage bounds (default ``0`` and ``+inf``).
      A, b: optional first-stage rows ``A x <= b``.

    Examples:
      >>> model = TwoStageLP(c=[1.0], W=[[1.0, -1.0]], T=[[1.0]], h=[[2.0], [4.0]],
      ...                    q=[3.0, 0.0])          # Q(x, h) = 3 (h - x)_+
      >>> model.num_scenarios, model.first_stage_dim, model.W.shape
      (2, 1, (2, 1, 2))
    """

    c: Any
    W: Any
    T: Any
    h: Any
    q: Any
    x_lower: Any = None
    x_upper: Any = None
    A: Any = None
    b: Any = None

    def __post_init__(self):
        c = _host_array(self.c, "c", (1,))
        h = _host_array(self.h, "h", (2,))
        n1, (num, m2) = c.shape[0], h.shape
        if num == 0:
            raise ValueError("h must hold at least one scenario (shape (N, m2) with N >= 1)")
        w = _host_array(self.W, "W", (2, 3))
        w = np.broadcast_to(w, (num, *w.shape)) if w.ndim == 2 else w
        if w.shape[:2] != (num, m2):
            raise ValueError(
                f"W must have shape (N, m2, n2) with (N, m2) = {(num, m2)} from h, or (m2, n2) "
                f"with m2 = {m2}, got {np.shape(self.W)}"
            )
        n2 = w.shape[2]
        t = _host_array(self.T, "T", (2, 3))
        t = np.broadcast_to(t, (num, *t.shape)) if t.ndim == 2 else t
        _expect_shape(t, "T", (num, m2, n1), "(N, m2, n1)")
        q = _host_array(self.q, "q", (1, 2))
        if q.shape[-1] != n2 or (q.ndim == 2 and q.shape[0] != num):
            raise ValueError(
                f"q must have shape (N, n2) = {(num, n2)} or (n2,) = ({n2},), got {q.shape}"
            )
        q = np.broadcast_to(q, (num, n2))
        lower = (
            np.zeros(n1)
            if self.x_lower is None
            else _host_array(self.x_lower, "x_lower", (0, 1), False)
        )
        upper = (
            np.full(n1, np.inf)
            if self.x_upper is None
            else _host_array(self.x_upper, "x_upper", (0, 1), False)
        )
        for name, bound in (("x_lower", lower), ("x_upper", upper)):
            if bound.ndim == 1 and bound.shape[0] != n1:
                raise ValueError(
                    f"{name} must be a scalar or have shape (n1,) = ({n1},) from c, got "
                    f"{bound.shape}"
                )
        lower, upper = np.broadcast_to(lower, (n1,)), np.broadcast_to(upper, (n1,))
        if np.any(np.isnan(lower)) or np.any(np.isnan(upper)) or np.any(lower > upper):
            raise ValueError(f"x_lower must be <= x_upper entrywise, got {lower} and {upper}")
        if (self.A is None) != (self.b is None):
            raise TypeError("pass both A and b (first-stage rows A x <= b), or neither")
        a_ub, b_ub = np.zeros((0, n1)), np.zeros(0)
        if self.A is not None:
            a_ub = _host_array(self.A, "A", (2,))
            b_ub = _host_array(self.b, "b", (1,))
            _expect_shape(a_ub, "A", (b_ub.shape[0], n1), "(len(b), len(c))")
        for name, value in dict(
            c=c, W=w, T=t, h=h, q=q, x_lower=lower, x_upper=upper, A=a_ub, b=b_ub
        ).items():
            value = np.array(value, dtype=np.float64)
            value.setflags(write=False)
            object.__setattr__(self, name, value)

    @property
    def num_scenarios(self) -> int:
        return int(self.h.shape[0])

    @property
    def first_stage_dim(self) -> int:
        return int(self.c.shape[0])

    @property
    def recourse_dim(self) -> int:
        return int(self.W.shape[2])

    def with_scenarios(self, W=None, T=None, h=None, q=None) -> TwoStageLP:
        """The same first stage over other scenario data (e.g. fresh test scenarios)."""
        return dataclasses.replace(
            self,
            W=self.W if W is None else W,
            T=self.T if T is None else T,
            h=self.h if h is None else h,
            q=self.q if q is None else q,
        )


@dataclasses.dataclass(frozen=True)
class ExtensiveForm:
    """The deterministic-equivalent LP of a SAA or APUB objective, ready for HiGHS.

    Columns are laid out ``[x | t | s_1..s_M | z_1..z_N | y_1..y_N]`` (``t`` and ``s`` only for
    APUB); ``columns`` maps each block name to its slice.

    Examples:
      >>> model = TwoStageLP(c=[1.0], W=[[1.0, -1.0]], T=[[1.0]], h=[[2.0], [4.0]],
      ...                    q=[3.0, 0.0])
      >>> form = extensive_form(model, alpha=0.5, multiplicities=[[2, 0], [1, 1], [0, 2]])
      >>> form.matrix.shape, form.columns["s"]   # rows: 2 z, 3 CVaR, 2 recourse
      ((7, 11), slice(2, 5, None))
    """

    cost: np.ndarray
    matrix: sp.csc_matrix
    row_lower: np.ndarray
    row_upper: np.ndarray
    col_lower: np.ndarray
    col_upper: np.ndarray
    columns: dict[str, slice]


@dataclasses.dataclass(frozen=True)
class TwoStageSolution:
    """A solved SAA/APUB problem.

    Attributes:
      x: the first-stage decision.
      value: the optimal objective: ``c·x`` plus the SAA mean or the APUB of the recourse (the
        in-sample certificate).
      recourse_values: ``Q(x, ξ_n)`` per scenario at the solution.
      threshold: the CVaR threshold ``t`` (the (1-α)-quantile of the bootstrap means; NaN for
        SAA).
      solve_seconds: HiGHS's wall time.
      num_variables, num_constraints: the LP's size.

    Examples:
      >>> model = TwoStageLP(c=[1.0], W=[[1.0, -1.0]], T=[[1.0]], h=[[2.0], [4.0]],
      ...                    q=[3.0, 0.0], x_upper=[10.0])
      >>> sol = solve_extensive_form(model, alpha=0.5, multiplicities=[[2, 0], [1, 1], [0, 2]])
      >>> sol.x.round(6).tolist(), round(sol.value, 6), sol.num_variables
      ([4.0], 4.0, 11)
    """

    x: np.ndarray
    value: float
    recourse_values: np.ndarray
    threshold: float
    solve_seconds: float
    num_variables: int
    num_constraints: int


def _check_bootstrap(model: TwoStageLP, alpha: Any, multiplicities: Any):
    alpha = validation.check_real(alpha, "alpha", minimum=0.0, maximum=1.0, include_minimum=False)
    if alpha is None:
        raise TypeError("alpha must be a concrete number: the LP is built on the host")
    if multiplicities is None:
        return alpha, None
    return alpha, validation.check_multiplicities(multiplicities, model.num_scenarios)


def extensive_form(model: TwoStageLP, *, alpha: Any = 1.0, multiplicities: Any = None):
    """Builds the SAA (``multiplicities=None``) or APUB extensive-form LP (module docstring).

    Args:
      model: the :class:`TwoStageLP`.
      alpha: the APUB level in ``(0, 1]`` (ignored by SAA).
      multiplicities: the bootstrap matrix ``V`` of shape ``(M, N)``, or None for SAA.

    Returns:
      An :class:`ExtensiveForm`.

    Examples:
      >>> model = TwoStageLP(c=[1.0], W=[[1.0, -1.0]], T=[[1.0]], h=[[2.0], [4.0]],
      ...                    q=[3.0, 0.0])
      >>> form = extensive_form(model)                  # SAA: no t and s columns
      >>> sorted(form.columns), form.cost.tolist()     # [x, z1, z2, y11, y12, y21, y22]
      (['x', 'y', 'z'], [1.0, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0])
    """
    if not isinstance(model, TwoStageLP):
        raise TypeError(f"model must be a TwoStageLP, got {type(model).__name__}")
    alpha, v = _check_bootstrap(model, alpha, multiplicities)
    n, n1, n2, m2 = model.num_scenarios, model.first_stage_dim, model.recourse_dim, model.h.shape[1]
    m = 0 if v is None else v.shape[0]
    apub = v is not None
    # Column offsets.
    x0, t0 = 0, n1
    s0 = t0 + (1 if apub else 0)
    z0 = s0 + m
    y0 = z0 + n
    num_cols = y0 + n * n2
    rows, cols, vals, lower, upper = [], [], [], [], []
    row = 0
    # z_n - q_n·y_n = 0.
    scen = np.repeat(np.arange(n), n2)
    rows += [np.arange(n), row + scen]
    cols += [z0 + np.arange(n), y0 + np.arange(n * n2)]
    vals += [np.ones(n), -model.q.reshape(-1)]
    lower.append(np.zeros(n))
    upper.append(np.zeros(n))
    row += n
    if apub:
        # s_m + t - (1/N) Σ_n V_mn z_n >= 0.
        rr, cc = np.nonzero(v)
        rows += [row + np.arange(m), row + np.arange(m), row + rr]
        cols += [s0 + np.arange(m), np.full(m, t0), z0 + cc]
        vals += [np.ones(m), np.ones(m), -v[rr, cc] / n]
        lower.append(np.zeros(m))
        upper.append(np.full(m, INF))
        row += m
    # T_n x + W_n y_n = h_n.
    r_t, k_t, j_t = np.nonzero(model.T)
    rows.append(row + r_t * m2 + k_t)
    cols.append(x0 + j_t)
    vals.append(model.T[r_t, k_t, j_t])
    r_w, k_w, j_w = np.nonzero(model.W)
    rows.append(row + r_w * m2 + k_w)
    cols.append(y0 + r_w * n2 + j_w)
    vals.append(model.W[r_w, k_w, j_w])
    lower.append(model.h.reshape(-1))
    upper.append(model.h.reshape(-1))
    row += n * m2
    # A x <= b.
    r_a, j_a = np.nonzero(model.A)
    rows.append(row + r_a)
    cols.append(x0 + j_a)
    vals.append(model.A[r_a, j_a])
    lower.append(np.full(model.b.shape[0], -INF))
    upper.append(model.b)
    row += model.b.shape[0]
    matrix = sp.csc_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
        shape=(row, num_cols),
    )
    cost = np.zeros(num_cols)
    cost[:n1] = model.c
    if apub:
        cost[t0] = 1.0
        cost[s0:z0] = 1.0 / (alpha * m)
    else:
        cost[z0:y0] = 1.0 / n
    # HiGHS's infinity is float inf, so the model's bounds go in as they are.
    x_lower, x_upper = model.x_lower, model.x_upper
    col_lower = np.concatenate([x_lower, np.full(z0 - t0, 0.0), np.full(n, -INF), np.zeros(n * n2)])
    if apub:
        col_lower[t0] = -INF
    col_upper = np.concatenate([x_upper, np.full(num_cols - n1, INF)])
    columns = {"x": slice(0, n1), "z": slice(z0, y0), "y": slice(y0, num_cols)}
    if apub:
        columns |= {"t": slice(t0, t0 + 1), "s": slice(s0, z0)}
    return ExtensiveForm(
        cost, matrix, np.concatenate(lower), np.concatenate(upper), col_lower, col_upper, columns
    )


def _joint_scenario_lp(model: TwoStageLP, scenario: int, cost: np.ndarray):
    """An LP over ``(x, y_n)``: the first stage with scenario ``n``'s recourse rows alone."""
    n2 = model.recourse_dim
    blocks = [[sp.csr_matrix(model.T[scenario]), sp.csr_matrix(model.W[scenario])]]
    if model.b.shape[0]:
        blocks.append([sp.csr_matrix(model.A), None])
    return solve_lp(
        cost,
        sp.bmat(blocks, format="csc", dtype=np.float64),
        np.concatenate([model.h[scenario], np.full(model.b.shape[0], -INF)]),
        np.concatenate([model.h[scenario], model.b]),
        np.concatenate([model.x_lower, np.zeros(n2)]),
        np.concatenate([model.x_upper, np.full(n2, INF)]),
    )


def _diagnose(model: TwoStageLP, status: LPStatus) -> str:
    """Names the stage and scenario that make the extensive form infeasible or unbounded."""
    n1, n2, m2 = model.first_stage_dim, model.recourse_dim, model.h.shape[1]
    first = solve_lp(
        np.zeros(n1),
        model.A,
        np.full(model.b.shape[0], -INF),
        model.b,
        model.x_lower,
        model.x_upper,
    )
    if first.status is LPStatus.INFEASIBLE:
        return "first stage: no x satisfies x_lower <= x <= x_upper and A x <= b"
    for scenario in range(model.num_scenarios):
        for what, cost in (
            ("infeasible", np.zeros(n1 + n2)),
            ("unbounded", np.concatenate([model.c, model.q[scenario]])),
        ):
            result = _joint_scenario_lp(model, scenario, cost)
            if result.status is LPStatus.INFEASIBLE:
                return (
                    f"second stage, scenario {scenario}: no first-stage x admits a recourse y >= 0 "
                    f"with W y = h - T x ({m2} rows)"
                )
            if what == "unbounded" and result.status is LPStatus.UNBOUNDED:
                return (
                    f"second stage, scenario {scenario}: c·x + q·y is unbounded below over "
                    "W y = h - T x, y >= 0 (bound x or make the recourse bounded)"
                )
    if status is LPStatus.INFEASIBLE:
        return (
            "second stage: every scenario alone admits a recourse, but no single first-stage x "
            "admits one in all scenarios together"
        )
    return f"the extensive form is {status.value}"


def recourse_lower_bound(model: TwoStageLP) -> float:
    """A bound below every recourse: ``min_n min_{x ∈ X, y >= 0} q_n·y``, ``W_n y = h_n - T_n x``.

    One LP per scenario over ``(x, y_n)`` with the first-stage constraints (HiGHS, host float64).
    ``Q(x, ξ_n)`` is at least this for every feasible ``x`` and ``n``, so it bounds an L-shaped
    master (:class:`jaxlab.solvers.LShaped` uses it when no ``eta_lower_bound`` is given).

    Raises:
      ValueError: naming the scenario whose minimum is unbounded or infeasible.

    Examples:
      >>> model = TwoStageLP(c=[1.0], W=[[1.0, -1.0]], T=[[1.0]], h=[[2.0], [4.0]],
      ...                    q=[3.0, 0.0], x_upper=[10.0])
      >>> recourse_lower_bound(model)              # Q = 3 (h - x)_+ is 0 for x >= h
      0.0
    """
    if not isinstance(model, TwoStageLP):
        raise TypeError(f"model must be a TwoStageLP, got {type(model).__name__}")
    n1 = model.first_stage_dim
    best = np.inf
    for scenario in range(model.num_scenarios):
        result = _joint_scenario_lp(
            model, scenario, np.concatenate([np.zeros(n1), model.q[scenario]])
        )
        if result.status is not LPStatus.OPTIMAL:
            raise ValueError(
                f"second stage, scenario {scenario}: the minimum of the recourse over x is "
                f"{result.status.value}"
            )
        best = min(best, result.objective)
    return float(best)


def solve_extensive_form(
    model: TwoStageLP, *, alpha: Any = 1.0, multiplicities: Any = None
) -> TwoStageSolution:
    """Solves the SAA or APUB extensive form with HiGHS (host, float64; not traceable).

    Args:
      model: the :class:`TwoStageLP`.
      alpha: the APUB level in ``(0, 1]``.
      multiplicities: the bootstrap matrix ``V`` (``(M, N)``,
        :func:`jaxlab.stochprog.bootstrap_multiplicities`, drawn once per solve); None solves
        SAA.

    Returns:
      A :class:`TwoStageSolution`.

    Raises:
      ValueError: the LP is infeasible or unbounded; the message names the stage and scenario.

    Examples:
      >>> model = TwoStageLP(c=[1.0], W=[[1.0, -1.0]], T=[[1.0]], h=[[2.0], [4.0]],
      ...                    q=[3.0, 0.0], x_upper=[10.0])
      >>> sol = solve_extensive_form(model)          # min x + 1.5 ((2-x)_+ + (4-x)_+)
      >>> sol.x.round(6).tolist(), round(sol.value, 6)
      ([4.0], 4.0)
    """
    form = extensive_form(model, alpha=alpha, multiplicities=multiplicities)
    start = time.perf_counter()
    result = solve_lp(
        form.cost, form.matrix, form.row_lower, form.row_upper, form.col_lower, form.col_upper
    )
    seconds = time.perf_counter() - start
    if result.status is not LPStatus.OPTIMAL:
        if result.status in (LPStatus.INFEASIBLE, LPStatus.UNBOUNDED):
            raise ValueError(
                f"the extensive form is {result.status.value}: {_diagnose(model, result.status)}"
            )
        raise ValueError(f"HiGHS did not solve the extensive form: {result.message}")
    threshold = float(result.x[form.columns["t"]][0]) if "t" in form.columns else float("nan")
    return TwoStageSolution(
        x=result.x[form.columns["x"]],
        value=result.objective,
        recourse_values=result.x[form.columns["z"]],
        threshold=threshold,
        solve_seconds=seconds,
        num_variables=int(form.cost.shape[0]),
        num_constraints=int(form.row_lower.shape[0]),
    )


class _RecourseLPs:
    """One persistent HiGHS model per scenario; each call changes only the right-hand sides."""

    def __init__(self, model: TwoStageLP):
        self.model = model
        n2 = model.recourse_dim
        self._lps = [
            MasterLP(model.q[k], model.W[k], model.h[k], model.h[k], np.zeros(n2), np.full(n2, INF))
            for k in range(model.num_scenarios)
        ]

    def __call__(self, x: Any):
        model = self.model
        x = _host_array(x, "x", (1,))
        _expect_shape(x, "x", (model.first_stage_dim,), "(n1,)")
        values = np.empty(model.num_scenarios)
        subgradients = np.empty((model.num_scenarios, model.first_stage_dim))
        for k, lp in enumerate(self._lps):
            rhs = model.h[k] - model.T[k] @ x
            lp.change_row_bounds(rhs, rhs)
            result = lp.solve()
            if result.status is not LPStatus.OPTIMAL:
                raise ValueError(
                    f"second stage, scenario {k}: the recourse LP at x = {np.round(x, 6).tolist()} "
                    f"is {result.status.value} ({result.message}); the L-shaped method needs "
                    "(relatively) complete and bounded recourse"
                )
            values[k] = result.objective
            # Q(x') >= π·(h - T x') for every x' (π dual feasible), tight at x.
            subgradients[k] = -model.T[k].T @ result.row_dual
        return values, subgradients


def recourse_lp(model: TwoStageLP):
    """The recourse by LP: a function ``x -> (values, subgradients)`` over every scenario.

    ``values[n] = Q(x, ξ_n)`` and ``subgradients[n] = -T_nᵀ π_n`` with ``π_n`` the equality duals
    of scenario ``n``'s recourse LP at ``x`` (``∂Q/∂(h - T x)``), so
    ``Q(x', ξ_n) >= Q(x, ξ_n) + g_n·(x' - x)`` for every ``x'``: the optimality cut. The returned
    function keeps one HiGHS model per scenario alive and changes only its right-hand side
    between calls (host NumPy float64; not traceable). It raises a ``ValueError`` naming the
    scenario whose recourse is infeasible or unbounded at ``x``.

    Examples:
      >>> model = TwoStageLP(c=[1.0], W=[[1.0, -1.0]], T=[[1.0]], h=[[2.0], [4.0]],
      ...                    q=[3.0, 0.0])
      >>> values, grads = recourse_lp(model)([3.0])
      >>> values.tolist(), grads.ravel().tolist()
      ([0.0, 3.0], [0.0, -3.0])
    """
    if not isinstance(model, TwoStageLP):
        raise TypeError(f"model must be a TwoStageLP, got {type(model).__name__}")
    return _RecourseLPs(model)
