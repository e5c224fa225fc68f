"""Linear programs on the host with HiGHS (highspy), in NumPy float64.

HiGHS cannot be traced, so everything here runs outside ``jit``: callers build the LP data in
NumPy (or pull it off the device), solve here, and go back to JAX with the solution. Used by
:mod:`jaxlab.stochprog` (extensive-form bootstrap LPs, recourse LPs) and
:class:`jaxlab.solvers.LShaped` (master problems with cuts added between solves).
"""

from __future__ import annotations

import dataclasses
import enum
import os
import sys

import highspy
import numpy as np
import scipy.sparse as sp

__all__ = ["INF", "LPSolution", "LPStatus", "MasterLP", "solve_lp"]

INF = highspy.kHighsInf


class LPStatus(enum.Enum):
    """The outcome of one LP solve."""

    OPTIMAL = "optimal"
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    OTHER = "other"


@dataclasses.dataclass(frozen=True)
class LPSolution:
    """An LP's primal solution ``x``, row duals (``∂ objective / ∂ row bound``) and value."""

    status: LPStatus
    x: np.ndarray
    row_dual: np.ndarray
    objective: float
    message: str


def _status(highs: highspy.Highs) -> tuple[LPStatus, str]:
    model_status = highs.getModelStatus()
    message = highs.modelStatusToString(model_status)
    if model_status == highspy.HighsModelStatus.kOptimal:
        return LPStatus.OPTIMAL, message
    if model_status == highspy.HighsModelStatus.kInfeasible:
        return LPStatus.INFEASIBLE, message
    if model_status in (
        highspy.HighsModelStatus.kUnbounded,
        highspy.HighsModelStatus.kUnboundedOrInfeasible,
    ):
        return LPStatus.UNBOUNDED, message
    return LPStatus.OTHER, message


_BANNER_SHOWN = False


def _new_highs() -> highspy.Highs:
    # HiGHS prints a two-line banner on the process's first instance, from C++ to file
    # descriptor 1 (before any option can be set); send that one to /dev/null.
    global _BANNER_SHOWN
    if _BANNER_SHOWN:
        highs = highspy.Highs()
    else:
        sys.stdout.flush()
        saved = os.dup(1)
        try:
            with open(os.devnull, "w") as devnull:
                os.dup2(devnull.fileno(), 1)
                highs = highspy.Highs()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        _BANNER_SHOWN = True
    highs.setOptionValue("output_flag", False)
    return highs


def _pass_model(highs, cost, matrix, row_lower, row_upper, col_lower, col_upper) -> None:
    matrix = sp.csc_matrix(matrix, dtype=np.float64)
    lp = highspy.HighsLp()
    lp.num_col_ = int(matrix.shape[1])
    lp.num_row_ = int(matrix.shape[0])
    lp.col_cost_ = np.asarray(cost, np.float64)
    lp.col_lower_ = np.asarray(col_lower, np.float64)
    lp.col_upper_ = np.asarray(col_upper, np.float64)
    lp.row_lower_ = np.asarray(row_lower, np.float64)
    lp.row_upper_ = np.asarray(row_upper, np.float64)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = matrix.indptr.astype(np.int32)
    lp.a_matrix_.index_ = matrix.indices.astype(np.int32)
    lp.a_matrix_.value_ = matrix.data
    highs.passModel(lp)


def _solution(highs: highspy.Highs, num_col: int, num_row: int) -> LPSolution:
    status, message = _status(highs)
    if status is not LPStatus.OPTIMAL:
        nan_x, nan_dual = np.full(num_col, np.nan), np.full(num_row, np.nan)
        return LPSolution(status, nan_x, nan_dual, float("nan"), message)
    solution = highs.getSolution()
    return LPSolution(
        status,
        np.asarray(solution.col_value, np.float64),
        np.asarray(solution.row_dual, np.float64),
        float(highs.getInfo().objective_function_value),
        message,
    )


def solve_lp(cost, matrix, row_lower, row_upper, col_lower, col_upper) -> LPSolution:
    """``min cost·x  s.t.  row_lower <= matrix x <= row_upper, col_lower <= x <= col_upper``.

    ``matrix`` is dense or scipy-sparse; infinite bounds are ``±INF`` (or ``±np.inf``). Returns
    an :class:`LPSolution`; a non-optimal status carries NaN arrays and HiGHS's message (the
    caller names the stage and scenario in its error).
    """
    highs = _new_highs()
    _pass_model(highs, cost, matrix, row_lower, row_upper, col_lower, col_upper)
    highs.run()
    return _solution(highs, int(np.shape(cost)[0]), int(np.shape(row_lower)[0]))


class MasterLP:
    """An LP kept alive between solves: rows (cuts) are added and HiGHS re-solves warm.

    Examples:
      >>> lp = MasterLP(np.array([1.0]), np.zeros((0, 1)), [], [], [-10.0], [10.0])
      >>> lp.solve().x.tolist()
      [-10.0]
      >>> lp.add_rows(np.array([[1.0]]), [-2.0], [INF])
      >>> lp.solve().x.tolist()
      [-2.0]
    """

    def __init__(self, cost, matrix, row_lower, row_upper, col_lower, col_upper):
        self._highs = _new_highs()
        self._num_col = int(np.shape(cost)[0])
        self._num_row = int(np.shape(matrix)[0])
        _pass_model(self._highs, cost, matrix, row_lower, row_upper, col_lower, col_upper)

    @property
    def num_rows(self) -> int:
        return self._num_row

    def add_rows(self, rows, row_lower, row_upper) -> None:
        rows = sp.csr_matrix(np.atleast_2d(np.asarray(rows, np.float64)))
        self._highs.addRows(
            int(rows.shape[0]),
            np.asarray(row_lower, np.float64),
            np.asarray(row_upper, np.float64),
            int(rows.nnz),
            rows.indptr[:-1].astype(np.int32),
            rows.indices.astype(np.int32),
            rows.data,
        )
        self._num_row += int(rows.shape[0])

    def change_row_bounds(self, row_lower, row_upper) -> None:
        """Replaces the bounds of every row (e.g. a recourse LP's right-hand side)."""
        self._highs.changeRowsBounds(
            self._num_row,
            np.arange(self._num_row, dtype=np.int32),
            np.asarray(row_lower, np.float64),
            np.asarray(row_upper, np.float64),
        )

    def solve(self) -> LPSolution:
        self._highs.run()
        return _solution(self._highs, self._num_col, self._num_row)
