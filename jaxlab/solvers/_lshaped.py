"""The L-shaped method for SAA and APUB two-stage problems (single and multi cuts).

S. Liu, M. Gao, J. Hu, *Minimizing Upper Confidence Bounds: A Data-Driven Framework for
Stochastic Programming*, ICML 2026 (APUB-M); R. Van Slyke and R. Wets (1969) for the method.

The risk of the recourse ``ρ(x) = Σ_m ω_m r_m(x)`` (SAA: the mean of ``Q(x, ξ_n)``; APUB: the
upper-tail CVaR at level ``α`` of the bootstrap means ``r_m(x) = (1/N) Σ_n V_mn Q(x, ξ_n)`` over a
fixed ``V``) is convex and piecewise linear in ``x``. Iteration ``k``:

1. solve the master ``min c·x + η`` over ``x ∈ X`` and the cuts so far → ``(x^k, η^k)``;
2. evaluate every recourse at ``x^k``: values ``Q_n`` and subgradients ``g_n`` (``-T_nᵀ π_n`` from
   the LP duals, or a closed form);
3. single cut: with the CVaR weights ``ω`` of the sorted ``r_m(x^k)`` and scenario weights
   ``p_n = (1/N) Σ_m ω_m V_mn``, add ``η >= Σ_n p_n (Q_n + g_n·(x - x^k))`` (a supporting plane of
   ``ρ``, since the CVaR is the maximum of ``Σ ω_m r_m`` over its dual set); multi cut: one
   variable ``θ_n`` per scenario with ``θ_n >= Q_n + g_n·(x - x^k)``, and the master carries the
   CVaR itself, ``η = t + (1/(αM)) Σ_m s_m``, ``s_m >= (1/N) Σ_n V_mn θ_n - t``, ``s >= 0``;
4. stop when the relative optimality gap is small, ``ρ(x^k) - η^k <= tol · max(1, |U_k|)`` with
   the upper bound ``U_k = c·x^k + ρ(x^k)``: the lower bound ``c·x^k + η^k`` is then the optimal
   value (the in-sample certificate) to ``tol`` relative. (The note scales by ``|ρ(x^k)|``; the
   recourse risk can be several times the objective, whose first-stage part cancels much of it,
   so that scale misses a 1e-6 relative agreement on the optimum by about the ratio.)

``V`` is fixed for the whole solve (the paper's reference code redraws it every iteration, so its
cuts come from different problems), the CVaR weights include the fractional atom, and SAA
scenarios weigh ``1/N``. With ``V`` fixed, the method converges to the extensive form's optimum.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np
import scipy.sparse as sp

from jaxlab._src import validation
from jaxlab._src.highs import INF, LPStatus, solve_lp
from jaxlab._src.risk import tail_weights
from jaxlab._src.solver import OptStep, SolverStatus
from jaxlab.stochprog import TwoStageLP, recourse_lower_bound, recourse_lp

__all__ = ["LShaped", "LShapedState"]

_CUTS = ("single", "multi")
# Relative excess of the master's estimate over the recourse's risk that proves
# eta_lower_bound invalid (far above HiGHS's 1e-9-level optimality noise).
_INVALID_BOUND_TOL = 1e-7


class LShapedState(NamedTuple):
    """The L-shaped method's state (host NumPy values; the loop runs in Python around HiGHS).

    Attributes:
      iter_num: recourse evaluations done.
      error: relative gap ``(ρ(x) - η)/max(1, |c·x + ρ(x)|)`` at the last evaluated ``x``.
      value: the master's value ``c·x + η`` at ``params`` (a lower bound on the optimum; the
        optimum itself, to ``tol``, once converged).
      upper_bound: ``c·x + ρ(x)`` at the last evaluated ``x`` (an upper bound on the optimum).
      eta: the master's estimate of ``ρ`` at ``params`` (multi cut: its CVaR of ``θ``).
      status: a :class:`jaxlab.solvers.SolverStatus` code.
      cut_slopes: the optimality cuts' slopes, ``(k, n1)`` for single cuts, ``(k, N, n1)`` for
        multi cuts.
      cut_intercepts: their intercepts, ``(k,)`` or ``(k, N)``.
      num_nonfinite: recourse evaluations that returned NaN or infinity (the solve stops with
        ``NONFINITE`` at the first).
      eta_lower_bound: the lower bound on each recourse value that bounds the master.

    Examples:
      >>> from jaxlab.stochprog import TwoStageLP
      >>> model = TwoStageLP(c=[1.0], W=[[1.0, -1.0]], T=[[1.0]], h=[[2.0], [4.0]],
      ...                    q=[3.0, 0.0], x_upper=[10.0])
      >>> state = LShaped(model, cuts="multi").run().state
      >>> state.cut_slopes.shape[1:], state.eta_lower_bound   # (N, n1) per cut; Q >= 0
      ((2, 1), 0.0)
    """

    iter_num: int
    error: float
    value: float
    upper_bound: float
    eta: float
    status: int
    cut_slopes: np.ndarray
    cut_intercepts: np.ndarray
    num_nonfinite: int
    eta_lower_bound: float


@dataclasses.dataclass(frozen=True, eq=False)
class LShaped:
    """The L-shaped method for a :class:`jaxlab.stochprog.TwoStageLP` (SAA or APUB objective).

    jaxopt's shape on the host: ``init_state``, ``update`` (one recourse evaluation and one round
    of cuts), ``run``. HiGHS cannot be traced, so ``run`` is a Python loop: jit stops at the
    master LP. A closed-form ``recourse_fun`` (a JAX function, jitted or vmapped by the user) is
    evaluated inside ``jax.enable_x64(True)`` and its outputs are read back as float64.

    Attributes:
      model: the two-stage problem.
      alpha: the APUB level in ``(0, 1]`` (unused by SAA).
      multiplicities: the bootstrap matrix ``V`` ``(M, N)``, drawn once
        (:func:`jaxlab.stochprog.bootstrap_multiplicities`); None solves SAA.
      cuts: ``"single"`` (one aggregated cut per iteration) or ``"multi"`` (one per scenario).
      recourse_fun: ``x -> (values (N,), subgradients (N, n1))``; None solves every scenario's
        recourse LP with HiGHS and takes ``-T_nᵀ π_n`` from its duals.
      eta_lower_bound: a lower bound on every ``Q(x, ξ_n)`` over ``X`` (it bounds the master);
        None computes one, :func:`jaxlab.stochprog.recourse_lower_bound`. A bound above
        the recourse is detected and raises.
      tol: relative optimality gap at which to stop (upper minus lower bound over the upper).
      maxiter: maximum number of iterations.

    Examples:
      >>> from jaxlab.stochprog import TwoStageLP, solve_extensive_form
      >>> model = TwoStageLP(c=[1.0], W=[[1.0, -1.0]], T=[[1.0]], h=[[2.0], [4.0]],
      ...                    q=[3.0, 0.0], x_upper=[10.0])
      >>> out = LShaped(model).run()
      >>> out.params.round(6).tolist(), round(out.state.value, 6)
      ([4.0], 4.0)
      >>> SolverStatus(out.state.status).name
      'CONVERGED'
      >>> round(solve_extensive_form(model).value, 6)
      4.0
    """

    model: TwoStageLP
    alpha: float = 1.0
    multiplicities: Any = None
    cuts: str = "single"
    recourse_fun: Callable[[np.ndarray], tuple[Any, Any]] | None = None
    eta_lower_bound: float | None = None
    tol: float = 1e-6
    maxiter: int = 100

    def __post_init__(self):
        if not isinstance(self.model, TwoStageLP):
            raise TypeError(f"model must be a TwoStageLP, got {type(self.model).__name__}")
        alpha = validation.check_real(
            self.alpha, "alpha", minimum=0.0, maximum=1.0, include_minimum=False
        )
        if alpha is None:
            raise TypeError("alpha must be a concrete number: the L-shaped loop runs on the host")
        validation.check_choice(self.cuts, "cuts", _CUTS)
        validation.check_callable(self.recourse_fun, "recourse_fun", allow_none=True)
        validation.check_nonnegative(self.tol, "tol")
        validation.check_int(self.maxiter, "maxiter", minimum=1)
        if self.eta_lower_bound is not None:
            validation.check_real(self.eta_lower_bound, "eta_lower_bound")
        v = None
        if self.multiplicities is not None:
            v = validation.check_multiplicities(self.multiplicities, self.model.num_scenarios)
        object.__setattr__(self, "_v", v)
        object.__setattr__(self, "_evaluate_lp", None)

    # ---------------------------------------------------------------------------------------
    # Pieces.

    def _lower_bound(self) -> float:
        if self.eta_lower_bound is not None:
            return float(self.eta_lower_bound)
        try:
            return recourse_lower_bound(self.model)
        except ValueError as err:
            if "unbounded" in str(err):  # no finite bound exists to compute: the user's helps
                raise ValueError(f"eta_lower_bound: {err}; pass a finite eta_lower_bound") from err
            # An infeasible scenario: no eta_lower_bound can help (issue 44).
            raise ValueError(
                f"model: {err}; the two-stage problem has no feasible recourse"
            ) from err

    def _evaluate(self, x: np.ndarray):
        if self.recourse_fun is None:
            if self._evaluate_lp is None:  # built once: one HiGHS model per scenario
                object.__setattr__(self, "_evaluate_lp", recourse_lp(self.model))
            return self._evaluate_lp(x)
        with jax.enable_x64(True):
            values, grads = self.recourse_fun(x)
            values = np.asarray(values, np.float64)
            grads = np.asarray(grads, np.float64)
        n, n1 = self.model.num_scenarios, self.model.first_stage_dim
        if values.shape != (n,) or grads.shape != (n, n1):
            raise ValueError(
                f"recourse_fun must return values of shape (N,) = {(n,)} and subgradients of "
                f"shape (N, n1) = {(n, n1)}, got {values.shape} and {grads.shape}"
            )
        return values, grads

    def _scenario_weights(self, values: np.ndarray) -> tuple[float, np.ndarray]:
        """The risk ``ρ`` of the recourse values and its scenario weights ``p`` (``ρ = p·Q``)."""
        n = values.shape[0]
        if self._v is None:
            return float(values.mean()), np.full(n, 1.0 / n)
        means = self._v @ values / n
        omega = tail_weights(np, means, float(self.alpha))
        return float(omega @ means), omega @ self._v / n

    def _master(self, slopes, intercepts, lower_bound):
        """Solves the master over the cuts: returns ``(x, η)``."""
        model = self.model
        n, n1 = model.num_scenarios, model.first_stage_dim
        x_lower, x_upper = model.x_lower, model.x_upper  # HiGHS's infinity is float inf
        a_rows = sp.csr_matrix(model.A)
        if self.cuts == "single":
            k = slopes.shape[0]
            cost = np.concatenate([model.c, [1.0]])
            cut_rows = sp.csr_matrix(np.hstack([-slopes, np.ones((k, 1))]))
            matrix = sp.vstack([cut_rows, sp.hstack([a_rows, sp.csr_matrix((a_rows.shape[0], 1))])])
            row_lower = np.concatenate([intercepts, np.full(model.b.shape[0], -INF)])
            row_upper = np.concatenate([np.full(k, INF), model.b])
            col_lower = np.concatenate([x_lower, [lower_bound]])
            col_upper = np.concatenate([x_upper, [INF]])
            result = solve_lp(cost, matrix, row_lower, row_upper, col_lower, col_upper)
            self._check_master(result)
            return result.x[:n1], float(result.x[n1])
        # Multi cut: columns [x | θ (N) | t | s (M)] (t and s for APUB only).
        k, m = slopes.shape[0], 0 if self._v is None else self._v.shape[0]
        extra = 0 if self._v is None else 1 + m
        zeros = lambda rows, cols: sp.csr_matrix((rows, cols))
        blocks = [
            [
                sp.csr_matrix(-slopes.reshape(k * n, n1)),
                sp.csr_matrix(np.tile(np.eye(n), (k, 1))),
                zeros(k * n, extra),
            ]
        ]
        row_lower, row_upper = [intercepts.reshape(-1)], [np.full(k * n, INF)]
        cost = np.concatenate([model.c, np.zeros(n + extra)])
        col_lower = np.concatenate([x_lower, np.full(n, lower_bound), np.zeros(extra)])
        col_upper = np.concatenate([x_upper, np.full(n + extra, INF)])
        if self._v is None:
            cost[n1 : n1 + n] = 1.0 / n
        else:
            # t + (1/(αM)) Σ s_m with s_m + t - (1/N) Σ_n V_mn θ_n >= 0.
            cost[n1 + n] = 1.0
            cost[n1 + n + 1 :] = 1.0 / (float(self.alpha) * m)
            col_lower[n1 + n] = -INF
            t_and_s = sp.hstack([np.ones((m, 1)), sp.identity(m)])
            blocks.append([zeros(m, n1), sp.csr_matrix(-self._v / n), t_and_s])
            row_lower.append(np.zeros(m))
            row_upper.append(np.full(m, INF))
        if model.b.shape[0]:
            blocks.append([a_rows, zeros(a_rows.shape[0], n), zeros(a_rows.shape[0], extra)])
            row_lower.append(np.full(model.b.shape[0], -INF))
            row_upper.append(model.b)
        if not extra:
            blocks = [row[:2] for row in blocks]
        result = solve_lp(
            cost,
            sp.bmat(blocks, format="csc"),
            np.concatenate(row_lower),
            np.concatenate(row_upper),
            col_lower,
            col_upper,
        )
        self._check_master(result)
        x = result.x[:n1]
        return x, float(result.objective - model.c @ x)

    @staticmethod
    def _check_master(result) -> None:
        if result.status is not LPStatus.OPTIMAL:
            raise ValueError(
                f"first stage: the L-shaped master LP is {result.status.value} "
                f"({result.message}); check x_lower/x_upper and A x <= b"
            )

    # ---------------------------------------------------------------------------------------
    # jaxopt's interface.

    def init_state(self, init_params: Any = None) -> LShapedState:
        """The state before any cut; ``init_params`` is checked (the start is the master's)."""
        n1, n = self.model.first_stage_dim, self.model.num_scenarios
        if self.cuts == "single":
            slopes, intercepts = np.zeros((0, n1)), np.zeros(0)
        else:
            slopes, intercepts = np.zeros((0, n, n1)), np.zeros((0, n))
        lower_bound = self._lower_bound()
        return LShapedState(
            iter_num=0,
            error=float("inf"),
            value=-float("inf"),
            upper_bound=float("inf"),
            eta=lower_bound,
            status=int(SolverStatus.RUNNING),
            cut_slopes=slopes,
            cut_intercepts=intercepts,
            num_nonfinite=0,
            eta_lower_bound=lower_bound,
        )

    def _start(self, init_params, state):
        if init_params is not None:
            x = np.asarray(
                validation.check_array(init_params, "init_params", kind="real", ndim=1, host=True),
                np.float64,
            )
            if x.shape != (self.model.first_stage_dim,):
                raise ValueError(
                    f"init_params must have shape (n1,) = ({self.model.first_stage_dim},), "
                    f"got {x.shape}"
                )
            validation.check_finite_array(x, "init_params")
            return x
        x, _ = self._master(state.cut_slopes, state.cut_intercepts, state.eta_lower_bound)
        return x

    def update(self, params: Any, state: LShapedState) -> OptStep:
        """Evaluates the recourse at ``params``, adds its cuts and re-solves the master.

        Returns ``params`` unchanged with status ``CONVERGED`` when the gap is within ``tol``.
        """
        x = np.asarray(params, np.float64)
        model = self.model
        values, grads = self._evaluate(x)
        if not (np.all(np.isfinite(values)) and np.all(np.isfinite(grads))):
            return OptStep(
                x,
                state._replace(
                    iter_num=state.iter_num + 1,
                    status=int(SolverStatus.NONFINITE),
                    num_nonfinite=state.num_nonfinite + 1,
                ),
            )
        rho, weights = self._scenario_weights(values)
        lower_bound = state.eta_lower_bound
        eta = self._eta_at(x, state, lower_bound)
        gap = (rho - eta) / max(1.0, abs(float(model.c @ x) + rho))
        # Cuts never exceed the recourse, so the master's model can exceed ρ only through a
        # lower bound that is not one.
        if gap < -_INVALID_BOUND_TOL:
            raise ValueError(
                f"eta_lower_bound={lower_bound} is above the recourse's risk {rho} at x = "
                f"{np.round(x, 6).tolist()}: pass a valid (lower) eta_lower_bound"
            )
        iter_num = state.iter_num + 1
        common = dict(
            iter_num=iter_num,
            error=max(gap, 0.0),
            upper_bound=float(model.c @ x + rho),
        )
        if gap <= self.tol:
            return OptStep(
                x,
                state._replace(
                    value=float(model.c @ x + eta),
                    eta=eta,
                    status=int(SolverStatus.CONVERGED),
                    **common,
                ),
            )
        intercept_n = values - grads @ x
        if self.cuts == "single":
            slopes = np.vstack([state.cut_slopes, weights @ grads])
            intercepts = np.append(state.cut_intercepts, weights @ intercept_n)
        else:
            slopes = np.concatenate([state.cut_slopes, grads[None]], axis=0)
            intercepts = np.concatenate([state.cut_intercepts, intercept_n[None]], axis=0)
        new_x, new_eta = self._master(slopes, intercepts, lower_bound)
        status = SolverStatus.MAXITER if iter_num >= self.maxiter else SolverStatus.RUNNING
        return OptStep(
            new_x,
            state._replace(
                value=float(model.c @ new_x + new_eta),
                eta=new_eta,
                status=int(status),
                cut_slopes=slopes,
                cut_intercepts=intercepts,
                **common,
            ),
        )

    def _eta_at(self, x, state, lower_bound) -> float:
        """The master's model of ``ρ`` at ``x``: the cuts' maximum (and the lower bound)."""
        if state.cut_intercepts.shape[0] == 0:
            return lower_bound
        if self.cuts == "single":
            return float(max(lower_bound, np.max(state.cut_intercepts + state.cut_slopes @ x)))
        theta = np.maximum(lower_bound, np.max(state.cut_intercepts + state.cut_slopes @ x, axis=0))
        rho, _ = self._scenario_weights(theta)
        return rho

    def run(self, init_params: Any = None) -> OptStep:
        """Iterates ``update`` from ``init_params`` (default: the cut-free master's solution)
        until the gap is within ``tol``, ``maxiter`` iterations, or a non-finite recourse."""
        state = self.init_state(init_params)
        x = self._start(init_params, state)
        while state.status == SolverStatus.RUNNING:
            x, state = self.update(x, state)
        return OptStep(x, state)
