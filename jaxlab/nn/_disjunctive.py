"""Hard disjunctive (mixed-integer linear) rules as differentiable projection layers.

**Rules.** A network's output ``y ∈ ℝⁿ`` for an input ``x ∈ ℝᵖ`` lives in a finite box
``lower ≤ y ≤ upper`` and satisfies global constraints ``G y ≤ h``. A rule ``r`` is a
disjunction of conjunctions of linear inequalities,

    R_r = ∨_{t ∈ T_r} [cond_t(x) ∧ E_t(x) y ≤ f_t(x)],

with an optional input antecedent ``cond_t(x) = (C_t x ≤ d_t)``, coefficients ``E_t`` that may be a
function of ``x`` and right-hand sides ``f_t(x) = f_t + F_t x`` (or any function of ``x``).
:class:`Disjunct`, :class:`Disjunction` and :class:`RuleSet` spell this out; a rule set is
checked when it is built (finite box, shapes, and a rule that no input can satisfy is rejected
with an error naming it).

**Convex hull (Balas).** The hull of one disjunction over the box is lifted with one copy
``ν_t ∈ ℝⁿ`` and weight ``λ_t`` per disjunct::

    y = Σ_t ν_t,   Σ_t λ_t = 1,   0 ≤ λ_t ≤ a_t(x),
    E_t ν_t ≤ λ_t f_t,   G ν_t ≤ λ_t h,   λ_t lower ≤ ν_t ≤ λ_t upper,

where ``a_t(x) = 1[cond_t(x)]`` switches off disjuncts whose antecedent fails (finite bounds make
``ν_t = 0`` when ``λ_t = 0``). :func:`lifted_hull` builds three formulations: ``"dnf"`` (one block
over every scenario, a choice of one disjunct per rule: the convex hull of the true mixed-integer
set, ``Π_r |T_r|`` blocks), ``"cnf"`` (one block per rule: the intersection of the rules' hulls,
looser, linear size) and ``"partial_dnf"`` (Balas basic steps on the first ``k`` rules, CNF for
the rest: the hierarchical relaxation between them).

**Projection.** :class:`DisjunctiveLayer` returns, for a raw output ``ŷ``,

    y = argmin ½‖y - ŷ‖² + (ε/2)(‖ν‖² + ‖λ‖²)   over the lifted hull      (mode "hull")

solved by :class:`jaxlab.solvers.DenseQP` (ADMM + polishing) and differentiated implicitly
through its KKT conditions; ``ε > 0`` makes the lifted solution unique. The hull contains points
that satisfy no disjunct (``y ≤ 0.25 ∨ y ≥ 0.75`` projects 0.5 to itself), so hull projection
satisfies the original rules exactly only when the input decides one disjunct per rule. Mode
``"union"`` goes beyond: the exact projection onto the union of scenario polytopes,
``min_s ‖Π_{Q_s(x)}(ŷ) - ŷ‖`` with one small QP per scenario, vmapped (exact rule satisfaction,
differentiable almost everywhere, discontinuous where the nearest scenario switches).

An input for which the rules are infeasible (no applicable disjunct, or an empty lifted set) gives
back ``ŷ`` with a zero gradient and an infeasible status in :class:`DisjunctiveInfo`, inside
``jit``.

References:
  P. Pal, C. Li, "DisjunctiveNet: Neural Symbolic Learning via Differentiable Convexified
  Optimization Layers", ICML 2026 (arXiv 2605.30456); E. Balas, "Disjunctive programming and a
  hierarchy of relaxations for discrete optimization problems", SIAM J. Alg. Disc. Meth. 1985;
  J. P. Ruiz, I. E. Grossmann, "A hierarchy of relaxations for nonlinear convex generalized
  disjunctive programming", EJOR 2012; B. Amos, J. Z. Kolter, "OptNet", ICML 2017.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxlab._src.qp import DenseQP, QPSolution
from jaxlab._src.solver import SolverStatus
from jaxlab._src.validation import (
    check_array,
    check_bool,
    check_choice,
    check_finite_array,
    check_int,
    check_last_axis,
    check_nonnegative,
    check_positive,
)

__all__ = [
    "FORMULATIONS",
    "MODES",
    "Disjunct",
    "DisjunctiveInfo",
    "DisjunctiveLayer",
    "Disjunction",
    "LiftedHull",
    "RuleSet",
    "hull_size",
    "lifted_hull",
    "pinned_fractions",
    "rule_penalty",
    "rule_satisfaction",
    "rule_violation",
]

FORMULATIONS = ("dnf", "cnf", "partial_dnf")
MODES = ("hull", "union")
#: The reference skips the full DNF above this many scenarios (partial DNF instead).
MAX_DNF_SCENARIOS = 10_000
# Tolerance of the build-time feasibility LPs (HiGHS' own feasibility tolerance is 1e-7).
_LP_TOL = 1e-9


# ---------------------------------------------------------------------------------------------
# The rule language.


def _host_matrix(value: Any, name: str, ndim: int) -> np.ndarray:
    array = check_array(value, name, kind="real", ndim=ndim, host=True).astype(np.float64)
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite, got {array.tolist()}")
    return array


@dataclasses.dataclass(frozen=True, eq=False)
class Disjunct:
    """One disjunct: ``cond(x) ∧ E(x) y ≤ f(x)``, a conjunction of linear inequalities.

    Args:
      lhs: ``E`` (m, n), or a function ``x -> E(x)`` of the input (an input-dependent
        coefficient matrix of fixed shape).
      rhs: ``f`` (m,), or a function ``x -> f(x)``.
      rhs_input: ``F`` (m, p) with ``f(x) = f + F x`` (arrays only; None: no input term).
      condition: the antecedent ``(C, d)``, ``C`` (k, p), ``d`` (k,), meaning ``C x ≤ d``
        (None: always applicable). Equalities are written as two inequalities.

    Examples:
      ``x₁ ≥ 0.5 ∧ y₁ ≤ 0.3`` for ``x ∈ ℝ³``, ``y ∈ ℝ²``:

      >>> d = Disjunct([[1.0, 0.0]], [0.3], condition=([[-1.0, 0.0, 0.0]], [-0.5]))
      >>> d.num_rows, d.depends_on_input
      (1, True)
      >>> bool(d.applies(jnp.array([0.7, 0.0, 0.0]))), bool(d.applies(jnp.array([0.2, 0, 0.0])))
      (True, False)
    """

    lhs: Any
    rhs: Any
    rhs_input: Any = None
    condition: Any = None

    def __post_init__(self):
        lhs, rhs = self.lhs, self.rhs
        if not callable(lhs):
            lhs = _host_matrix(lhs, "lhs", 2)
        if not callable(rhs):
            rhs = _host_matrix(rhs, "rhs", 1)
            if not callable(lhs) and rhs.shape[0] != lhs.shape[0]:
                raise ValueError(
                    f"rhs must have one entry per row of lhs ({lhs.shape[0]}), got {rhs.shape}"
                )
        rhs_input = self.rhs_input
        if rhs_input is not None:
            if callable(rhs):
                raise TypeError("rhs_input needs an array rhs (a callable rhs holds its x term)")
            rhs_input = _host_matrix(rhs_input, "rhs_input", 2)
            if rhs_input.shape[0] != rhs.shape[0]:
                raise ValueError(
                    f"rhs_input must have shape (m, p) with m = {rhs.shape[0]}, got "
                    f"{rhs_input.shape}"
                )
        condition = self.condition
        if condition is not None:
            if not isinstance(condition, tuple | list) or len(condition) != 2:
                raise TypeError(
                    f"condition must be None or a pair (C, d) meaning C x <= d, got {condition!r}"
                )
            c = _host_matrix(condition[0], "condition C", 2)
            d = _host_matrix(condition[1], "condition d", 1)
            if d.shape[0] != c.shape[0]:
                raise ValueError(
                    f"condition d must have one entry per row of C ({c.shape[0]}), got {d.shape}"
                )
            condition = (c, d)
        object.__setattr__(self, "lhs", lhs)
        object.__setattr__(self, "rhs", rhs)
        object.__setattr__(self, "rhs_input", rhs_input)
        object.__setattr__(self, "condition", condition)

    @property
    def affine(self) -> bool:
        """Whether ``E`` is a constant array and ``f`` affine in ``x`` (checkable by an LP)."""
        return not callable(self.lhs) and not callable(self.rhs)

    @property
    def depends_on_input(self) -> bool:
        """Whether anything (coefficients, right-hand side, antecedent) reads ``x``."""
        return (
            callable(self.lhs)
            or callable(self.rhs)
            or self.rhs_input is not None
            or self.condition is not None
        )

    @property
    def num_rows(self) -> int:
        """``m``, the number of inequalities (for a callable ``lhs``: known once bound)."""
        if not callable(self.rhs):
            return int(self.rhs.shape[0])
        if not callable(self.lhs):
            return int(self.lhs.shape[0])
        raise ValueError("num_rows of a disjunct with callable lhs and rhs is known in a RuleSet")

    def input_size(self) -> int | None:
        """``p`` as fixed by the arrays that read ``x`` (None when none does)."""
        if self.rhs_input is not None:
            return int(self.rhs_input.shape[1])
        if self.condition is not None:
            return int(self.condition[0].shape[1])
        return None

    def lhs_at(self, x: jax.Array) -> jax.Array:
        """``E(x)`` (m, n) in ``x``'s dtype."""
        if callable(self.lhs):
            return jnp.asarray(self.lhs(x), x.dtype)
        return jnp.asarray(self.lhs, x.dtype)

    def rhs_at(self, x: jax.Array) -> jax.Array:
        """``f(x)`` (m,) in ``x``'s dtype."""
        if callable(self.rhs):
            return jnp.asarray(self.rhs(x), x.dtype)
        value = jnp.asarray(self.rhs, x.dtype)
        if self.rhs_input is not None:
            value = value + jnp.asarray(self.rhs_input, x.dtype) @ x
        return value

    def applies(self, x: jax.Array) -> jax.Array:
        """``cond(x)`` as a bool scalar (True without a condition)."""
        if self.condition is None:
            return jnp.asarray(True)
        c, d = self.condition
        return jnp.all(jnp.asarray(c, x.dtype) @ x <= jnp.asarray(d, x.dtype))


@dataclasses.dataclass(frozen=True, eq=False)
class Disjunction:
    """A rule: the disjunction ``∨_t D_t`` of :class:`Disjunct` s, with a name for messages.

    Args:
      disjuncts: one or more :class:`Disjunct` (one disjunct is a convex rule).
      name: the rule's name (used in errors and reports).

    Examples:
      >>> rule = Disjunction([Disjunct([[1.0]], [0.25]), Disjunct([[-1.0]], [-0.75])], "gap")
      >>> rule.name, len(rule.disjuncts)
      ('gap', 2)
    """

    disjuncts: Sequence[Disjunct]
    name: str

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"name must be a non-empty string, got {self.name!r}")
        disjuncts = tuple(self.disjuncts) if isinstance(self.disjuncts, list | tuple) else None
        if not disjuncts:
            raise ValueError(
                f"disjuncts of rule {self.name!r} must be a non-empty list of Disjunct, got "
                f"{self.disjuncts!r}"
            )
        for index, item in enumerate(disjuncts):
            if not isinstance(item, Disjunct):
                raise TypeError(
                    f"disjuncts[{index}] of rule {self.name!r} must be a Disjunct, got "
                    f"{type(item).__name__}"
                )
        object.__setattr__(self, "disjuncts", disjuncts)


class RuleSet:
    """A box, global linear constraints and disjunctive rules on a network's output.

    The feasible set for input ``x`` is ``{lower ≤ y ≤ upper, G y ≤ h} ∩ ∩_r R_r(x)``. Built once,
    on the host; checks made here:

    * ``lower``/``upper`` finite with ``lower ≤ upper`` (the hull's perspective bounds need it);
    * every disjunct's shapes agree with ``n`` and ``input_size`` (callables by ``eval_shape``);
    * the box meets ``G y ≤ h``; each rule has a disjunct that some input can satisfy (an LP per
      affine disjunct over ``(x, y)``, ``x`` in ``[input_lower, input_upper]`` or free), else a
      ``ValueError`` names the rule; with affine rules and bounded (or no) inputs, the rules
      are also checked jointly (a mixed-integer feasibility problem, HiGHS), adding them in order
      and naming the first that contradicts those before it. Disjuncts with callable
      coefficients are not checked here (an infeasible input is reported at run time).

    Args:
      lower, upper: (n,) finite bounds of ``y``.
      rules: a sequence of :class:`Disjunction` (unique names).
      global_lhs, global_rhs: ``G`` (g, n) and ``h`` (g,) (None: no global constraints).
      input_size: ``p``, the input dimension the rules read (0: rules on outputs only).
      input_lower, input_upper: (p,) optional bounds of the input domain (for the build checks).
      check_feasibility: run the feasibility checks (default True).

    Examples:
      >>> rules = [Disjunction([Disjunct([[1.0, 0.0]], [0.25]),
      ...                       Disjunct([[-1.0, 0.0]], [-0.75])], "y1 gap")]
      >>> rule_set = RuleSet([0.0, 0.0], [1.0, 1.0], rules)
      >>> rule_set.num_outputs, rule_set.num_scenarios
      (2, 2)
      >>> RuleSet([0.0], [1.0], [Disjunction([Disjunct([[1.0]], [-1.0])], "negative")])
      Traceback (most recent call last):
      ...
      ValueError: rule 'negative' is infeasible for every input: none of its 1 disjunct(s) ...
    """

    def __init__(
        self,
        lower: Any,
        upper: Any,
        rules: Sequence[Disjunction] = (),
        *,
        global_lhs: Any = None,
        global_rhs: Any = None,
        input_size: int = 0,
        input_lower: Any = None,
        input_upper: Any = None,
        check_feasibility: bool = True,
    ):
        lower = _host_matrix(lower, "lower", 1)
        upper = _host_matrix(upper, "upper", 1)
        if lower.shape != upper.shape or lower.size == 0:
            raise ValueError(
                f"lower and upper must be non-empty with the same shape (n,), got {lower.shape} "
                f"and {upper.shape}"
            )
        if np.any(lower > upper):
            bad = int(np.argmax(lower > upper))
            raise ValueError(f"lower must be <= upper, got lower[{bad}] > upper[{bad}]")
        n = lower.shape[0]
        self.lower, self.upper = lower, upper
        self.input_size = check_int(input_size, "input_size", minimum=0)
        if (global_lhs is None) != (global_rhs is None):
            raise ValueError("global_lhs and global_rhs must be given together")
        if global_lhs is None:
            self.global_lhs, self.global_rhs = np.zeros((0, n)), np.zeros((0,))
        else:
            self.global_lhs = _host_matrix(global_lhs, "global_lhs", 2)
            self.global_rhs = _host_matrix(global_rhs, "global_rhs", 1)
            if self.global_lhs.shape[1] != n or self.global_rhs.shape != (
                self.global_lhs.shape[0],
            ):
                raise ValueError(
                    f"global_lhs must be (g, n={n}) and global_rhs (g,), got "
                    f"{self.global_lhs.shape} and {self.global_rhs.shape}"
                )
        self.input_lower = self._input_bound(input_lower, "input_lower", -np.inf)
        self.input_upper = self._input_bound(input_upper, "input_upper", np.inf)
        if np.any(self.input_lower > self.input_upper):
            # Named here: the feasibility LPs below would blame the first rule (issue 44).
            bad = int(np.argmax(self.input_lower > self.input_upper))
            raise ValueError(
                f"input_lower must be <= input_upper, got input_lower[{bad}] = "
                f"{self.input_lower[bad]} > input_upper[{bad}] = {self.input_upper[bad]}"
            )
        if isinstance(rules, Disjunction) or not isinstance(rules, list | tuple):
            raise TypeError(f"rules must be a list of Disjunction, got {type(rules).__name__}")
        for index, rule in enumerate(rules):
            if not isinstance(rule, Disjunction):
                raise TypeError(f"rules[{index}] must be a Disjunction, got {type(rule).__name__}")
        names = [rule.name for rule in rules]
        duplicate = sorted({name for name in names if names.count(name) > 1})
        if duplicate:
            raise ValueError(f"rules must have unique names, got duplicates {duplicate}")
        self.rules = tuple(rules)
        self.row_counts = tuple(
            tuple(self._check_disjunct(rule, t, d) for t, d in enumerate(rule.disjuncts))
            for rule in self.rules
        )
        if check_bool(check_feasibility, "check_feasibility"):
            self._check_feasible()

    # -- construction checks -------------------------------------------------------------------
    def _input_bound(self, value, name, default):
        if value is None:
            return np.full(self.input_size, default)
        bound = check_array(value, name, kind="real", ndim=1, host=True).astype(np.float64)
        if bound.shape != (self.input_size,) or np.any(np.isnan(bound)):
            raise ValueError(f"{name} must have shape (input_size,) = ({self.input_size},)")
        return bound

    def _check_disjunct(self, rule: Disjunction, index: int, disjunct: Disjunct) -> int:
        n, p = self.num_outputs, self.input_size
        where = f"disjunct {index} of rule {rule.name!r}"
        width = disjunct.input_size()
        if width is not None and width != p:
            raise ValueError(f"{where} reads an input of size {width}, but input_size is {p}")
        if disjunct.depends_on_input and p == 0:
            raise ValueError(f"{where} depends on the input: give the RuleSet an input_size")
        x = jax.ShapeDtypeStruct((p,), jnp.float32)
        lhs = jax.eval_shape(disjunct.lhs_at, x)
        rhs = jax.eval_shape(disjunct.rhs_at, x)
        if len(lhs.shape) != 2 or lhs.shape[1] != n:
            raise ValueError(f"{where}: lhs must have shape (m, n={n}), got {lhs.shape}")
        if rhs.shape != (lhs.shape[0],):
            raise ValueError(
                f"{where}: rhs must have shape (m,) = ({lhs.shape[0]},), got {rhs.shape}"
            )
        return int(lhs.shape[0])

    def _check_feasible(self) -> None:
        from scipy.optimize import linprog

        n, p = self.num_outputs, self.input_size
        bounds_y = list(zip(self.lower, self.upper, strict=True))
        g, h = self.global_lhs, self.global_rhs
        result = linprog(
            np.zeros(n), A_ub=g if g.size else None, b_ub=h if g.size else None, bounds=bounds_y
        )
        if result.status == 2:
            raise ValueError(
                "the global constraints global_lhs y <= global_rhs do not meet the box "
                "[lower, upper]: the rule set is infeasible for every input"
            )
        bounds_x = [
            (None if not np.isfinite(a) else a, None if not np.isfinite(b) else b)
            for a, b in zip(self.input_lower, self.input_upper, strict=True)
        ]
        for rule in self.rules:
            feasible = False
            for disjunct in rule.disjuncts:
                if not disjunct.affine:
                    feasible = True  # checked per input at run time
                    break
                a_ub, b_ub = self._disjunct_rows(disjunct, 1.0)
                result = linprog(np.zeros(p + n), A_ub=a_ub, b_ub=b_ub, bounds=bounds_x + bounds_y)
                if result.status != 2:
                    feasible = True
                    break
            if not feasible:
                raise ValueError(
                    f"rule {rule.name!r} is infeasible for every input: none of its "
                    f"{len(rule.disjuncts)} disjunct(s) meets the box, the global constraints "
                    f"and its own inequalities (and antecedent) for any input"
                )
        inputs_bounded = p == 0 or bool(
            np.all(np.isfinite(self.input_lower)) and np.all(np.isfinite(self.input_upper))
        )
        uses_input = any(d.depends_on_input for r in self.rules for d in r.disjuncts)
        all_affine = all(d.affine for r in self.rules for d in r.disjuncts)
        if len(self.rules) > 1 and all_affine and (inputs_bounded or not uses_input):
            for count in range(2, len(self.rules) + 1):
                if not self._jointly_feasible(self.rules[:count], uses_input):
                    names = [r.name for r in self.rules[: count - 1]]
                    raise ValueError(
                        f"rule {self.rules[count - 1].name!r} contradicts the rules before it "
                        f"({names}): together they are infeasible for every input"
                    )

    def _disjunct_rows(self, disjunct: Disjunct, scale: float):
        """``[C 0; -F E; 0 G]`` and the right-hand sides of a disjunct in (x, y) coordinates."""
        n, p = self.num_outputs, self.input_size
        rows, rhs = [], []
        if disjunct.condition is not None:
            c, d = disjunct.condition
            rows.append(np.concatenate([c, np.zeros((c.shape[0], n))], axis=1))
            rhs.append(d * scale)
        f_input = (
            disjunct.rhs_input
            if disjunct.rhs_input is not None
            else np.zeros((disjunct.num_rows, p))
        )
        rows.append(np.concatenate([-f_input, disjunct.lhs], axis=1))
        rhs.append(disjunct.rhs * scale)
        if self.global_lhs.size:
            rows.append(
                np.concatenate([np.zeros((self.global_lhs.shape[0], p)), self.global_lhs], 1)
            )
            rhs.append(self.global_rhs * scale)
        return np.concatenate(rows, axis=0), np.concatenate(rhs)

    def _jointly_feasible(self, rules, uses_input: bool) -> bool:
        """Exact MILP check that one disjunct per rule can hold at once (binary Balas CNF)."""
        from scipy.optimize import Bounds, LinearConstraint, milp

        n = self.num_outputs
        p = self.input_size if uses_input else 0
        width = p + n
        z_lower = np.concatenate([self.input_lower[:p], self.lower])
        z_upper = np.concatenate([self.input_upper[:p], self.upper])
        copies = [(r, d) for r in rules for d in r.disjuncts]
        num = width + len(copies) * (width + 1)

        def col_z(k):
            return width + k * (width + 1)

        def col_lam(k):
            return width + k * (width + 1) + width

        a_rows, lo, hi = [], [], []

        def add(row, low, high):
            a_rows.append(row)
            lo.append(low)
            hi.append(high)

        k = 0
        for rule in rules:
            start = k
            for disjunct in rule.disjuncts:
                a_ub, b_ub = self._disjunct_rows(disjunct, 1.0)
                if not uses_input:
                    a_ub = a_ub[:, self.input_size :]
                    if disjunct.condition is not None:  # an input-free set has no antecedents
                        a_ub = a_ub[disjunct.condition[0].shape[0] :]
                        b_ub = b_ub[disjunct.condition[0].shape[0] :]
                for row, b in zip(a_ub, b_ub, strict=True):
                    full = np.zeros(num)
                    full[col_z(k) : col_z(k) + width] = row
                    full[col_lam(k)] = -b
                    add(full, -np.inf, 0.0)
                for j in range(width):
                    full = np.zeros(num)
                    full[col_z(k) + j] = 1.0
                    full[col_lam(k)] = -z_upper[j]
                    add(full, -np.inf, 0.0)
                    full = np.zeros(num)
                    full[col_z(k) + j] = 1.0
                    full[col_lam(k)] = -z_lower[j]
                    add(full, 0.0, np.inf)
                k += 1
            for j in range(width):
                full = np.zeros(num)
                full[j] = -1.0
                for kk in range(start, k):
                    full[col_z(kk) + j] = 1.0
                add(full, 0.0, 0.0)
            full = np.zeros(num)
            for kk in range(start, k):
                full[col_lam(kk)] = 1.0
            add(full, 1.0, 1.0)
        integrality = np.zeros(num)
        var_lower = np.concatenate(
            [z_lower] + [np.concatenate([np.full(width, -np.inf), [0.0]]) for _ in copies]
        )
        var_upper = np.concatenate(
            [z_upper] + [np.concatenate([np.full(width, np.inf), [1.0]]) for _ in copies]
        )
        for kk in range(len(copies)):
            integrality[col_lam(kk)] = 1
        result = milp(
            np.zeros(num),
            constraints=LinearConstraint(np.asarray(a_rows), np.asarray(lo), np.asarray(hi)),
            integrality=integrality,
            bounds=Bounds(var_lower, var_upper),
        )
        return result.status != 2

    # -- sizes ------------------------------------------------------------------------------------
    @property
    def num_outputs(self) -> int:
        """``n``."""
        return int(self.lower.shape[0])

    @property
    def num_scenarios(self) -> int:
        """``Π_r |T_r|``: the number of disjunct combinations (DNF blocks)."""
        return math.prod(len(rule.disjuncts) for rule in self.rules)

    def __repr__(self) -> str:
        sizes = [len(rule.disjuncts) for rule in self.rules]
        return (
            f"RuleSet(n={self.num_outputs}, input_size={self.input_size}, "
            f"global={self.global_lhs.shape[0]}, rules={sizes})"
        )

    # -- evaluation pieces (traced) ---------------------------------------------------------
    def _all_rows(self, x: jax.Array):
        """Every disjunct's ``E(x)``, ``f(x)`` stacked (rows in rule, disjunct order) and each
        disjunct's applicability."""
        lhs, rhs, applies = [], [], []
        for rule in self.rules:
            for disjunct in rule.disjuncts:
                lhs.append(disjunct.lhs_at(x))
                rhs.append(disjunct.rhs_at(x))
                applies.append(disjunct.applies(x))
        if not lhs:
            return (
                jnp.zeros((0, self.num_outputs), x.dtype),
                jnp.zeros((0,), x.dtype),
                jnp.zeros((0,), bool),
            )
        return jnp.concatenate(lhs, 0), jnp.concatenate(rhs, 0), jnp.stack(applies)

    def _row_offsets(self):
        offsets, start, k = [], 0, 0
        for counts in self.row_counts:
            rule_offsets = []
            for m in counts:
                rule_offsets.append((start, m, k))
                start += m
                k += 1
            offsets.append(rule_offsets)
        return offsets, start, k


def _check_rule_set(rule_set: Any) -> RuleSet:
    if not isinstance(rule_set, RuleSet):
        raise TypeError(f"rule_set must be a RuleSet, got {type(rule_set).__name__}")
    return rule_set


# ---------------------------------------------------------------------------------------------
# Satisfaction of the original rules.


def _prepare(rule_set: RuleSet, x: Any, y: Any, y_name: str = "y"):
    """``(x, y)`` flattened to ``(N, p)``, ``(N, n)`` with the shared leading shape."""
    y = check_array(y, y_name, kind="floating")
    check_last_axis(y, rule_set.num_outputs, y_name, "num_outputs")
    lead = y.shape[:-1]
    if rule_set.input_size == 0:
        if x is not None:
            x = check_array(x, "x", kind="real")
            if x.shape[:-1] != lead or (x.ndim and x.shape[-1] != 0):
                raise ValueError(
                    f"x must be None (the rules read no input) or of shape {(*lead, 0)}, got "
                    f"{x.shape}"
                )
        x = jnp.zeros((*lead, 0), y.dtype)
    else:
        if x is None:
            raise TypeError(f"x is required: the rules read an input of size {rule_set.input_size}")
        x = check_array(x, "x", kind="floating")
        check_last_axis(x, rule_set.input_size, "x", "input_size")
        if x.shape[:-1] != lead:
            raise ValueError(
                f"x and y must have the same leading shape, got x {x.shape} and y {y.shape}"
            )
    x = x.astype(y.dtype)
    count = math.prod(lead)
    return x.reshape(count, rule_set.input_size), y.reshape(count, rule_set.num_outputs), lead


def _violations_one(rule_set: RuleSet, x: jax.Array, y: jax.Array):
    """``(box/global violation, per-rule violation)``: max over rows, min over applicable
    disjuncts (inf when none applies)."""
    lower = jnp.asarray(rule_set.lower, y.dtype)
    upper = jnp.asarray(rule_set.upper, y.dtype)
    base = jnp.max(jnp.maximum(lower - y, y - upper))
    if rule_set.global_lhs.size:
        g = jnp.asarray(rule_set.global_lhs, y.dtype) @ y - jnp.asarray(
            rule_set.global_rhs, y.dtype
        )
        base = jnp.maximum(base, jnp.max(g))
    base = jnp.maximum(base, jnp.zeros((), y.dtype))
    per_rule = []
    inf = jnp.asarray(jnp.inf, y.dtype)
    for rule in rule_set.rules:
        best = inf
        for disjunct in rule.disjuncts:
            excess = disjunct.lhs_at(x) @ y - disjunct.rhs_at(x)
            value = jnp.maximum(jnp.max(excess), jnp.zeros((), y.dtype))
            best = jnp.minimum(best, jnp.where(disjunct.applies(x), value, inf))
        per_rule.append(best)
    rules = jnp.stack(per_rule) if per_rule else jnp.zeros((0,), y.dtype)
    return base, rules


def rule_violation(rule_set: RuleSet, x: Any, y: Any) -> jax.Array:
    """How far each output is from satisfying the original rules (0 when it does).

    ``max(box and global violation, max_r min_{t applicable} max_i (E_t(x) y - f_t(x))_i⁺)``,
    ``inf`` where a rule has no applicable disjunct.

    Args:
      rule_set: the :class:`RuleSet`.
      x: inputs ``[..., p]`` (None for rules that read no input).
      y: outputs ``[..., n]``.

    Returns:
      ``[...]`` violations.

    Examples:
      >>> rules = [Disjunction([Disjunct([[1.0]], [0.25]), Disjunct([[-1.0]], [-0.75])], "gap")]
      >>> rule_set = RuleSet([0.0], [1.0], rules)
      >>> rule_violation(rule_set, None, jnp.array([[0.5], [0.8]])).tolist()
      [0.25, 0.0]
    """
    rule_set = _check_rule_set(rule_set)
    x, y, lead = _prepare(rule_set, x, y)

    def one(xi, yi):
        base, rules = _violations_one(rule_set, xi, yi)
        return jnp.maximum(base, jnp.max(rules)) if rules.size else base

    return jax.vmap(one)(x, y).reshape(lead)


def rule_satisfaction(rule_set: RuleSet, x: Any, y: Any, *, tol: float = 1e-4) -> jax.Array:
    """Whether each output satisfies every original rule, the box and ``G`` up to ``tol``.

    Sample ``i`` satisfies rule ``r`` iff some disjunct ``t`` has ``cond_t(x_i)`` true and
    ``E_t(x_i) y_i ≤ f_t(x_i) + tol``. This is the claim's measure, not hull membership.

    Args:
      rule_set: the :class:`RuleSet`.
      x: inputs ``[..., p]`` (None for rules that read no input).
      y: outputs ``[..., n]``.
      tol: ``τ ≥ 0``.

    Returns:
      ``[...]`` bools.

    Examples:
      >>> rules = [Disjunction([Disjunct([[1.0]], [0.25]), Disjunct([[-1.0]], [-0.75])], "gap")]
      >>> rule_set = RuleSet([0.0], [1.0], rules)
      >>> rule_satisfaction(rule_set, None, jnp.array([[0.5], [0.8], [0.25005]])).tolist()
      [False, True, True]
    """
    check_nonnegative(tol, "tol")
    return rule_violation(rule_set, x, y) <= tol


def rule_penalty(rule_set: RuleSet, x: Any, y: Any) -> jax.Array:
    """The soft-penalty baseline: ``Σ_r min_{t applicable} Σ_i (E_t(x) y - f_t(x))_i⁺`` plus the
    box and global violations, per output (differentiable almost everywhere).

    Args:
      rule_set: the :class:`RuleSet`.
      x: inputs ``[..., p]`` (None for rules that read no input).
      y: outputs ``[..., n]``.

    Returns:
      ``[...]`` penalties (0 exactly where every rule holds). A rule with no applicable
      disjunct contributes 0 (nothing to push towards).

    Examples:
      >>> rules = [Disjunction([Disjunct([[1.0]], [0.25]), Disjunct([[-1.0]], [-0.75])], "gap")]
      >>> rule_set = RuleSet([0.0], [1.0], rules)
      >>> [round(v, 4) for v in rule_penalty(rule_set, None, jnp.array([[0.3], [0.9]])).tolist()]
      [0.05, 0.0]
    """
    rule_set = _check_rule_set(rule_set)
    x, y, lead = _prepare(rule_set, x, y)

    def one(xi, yi):
        zero = jnp.zeros((), yi.dtype)
        lower = jnp.asarray(rule_set.lower, yi.dtype)
        upper = jnp.asarray(rule_set.upper, yi.dtype)
        total = jnp.sum(jnp.maximum(lower - yi, zero) + jnp.maximum(yi - upper, zero))
        if rule_set.global_lhs.size:
            g = jnp.asarray(rule_set.global_lhs, yi.dtype) @ yi
            total = total + jnp.sum(
                jnp.maximum(g - jnp.asarray(rule_set.global_rhs, yi.dtype), zero)
            )
        inf = jnp.asarray(jnp.inf, yi.dtype)
        for rule in rule_set.rules:
            best = inf
            for disjunct in rule.disjuncts:
                excess = disjunct.lhs_at(xi) @ yi - disjunct.rhs_at(xi)
                value = jnp.sum(jnp.maximum(excess, zero))
                best = jnp.minimum(best, jnp.where(disjunct.applies(xi), value, inf))
            total = total + jnp.where(jnp.isfinite(best), best, zero)
        return total

    return jax.vmap(one)(x, y).reshape(lead)


def pinned_fractions(rule_set: RuleSet, x: Any, y: Any, *, tol: float = 1e-4) -> jax.Array:
    """Per rule and disjunct: the fraction of raw outputs the consequent pins to a face.

    Among the samples whose input satisfies disjunct ``t``'s antecedent ``cond_t(x)``, the
    fraction whose raw output violates its consequent, ``max_i (E_t(x) ŷ - f_t(x))_i > tol``.
    When the input decides one disjunct per rule, the layer projects such an output onto the
    violated face, where the projection's derivative along the face's normal is zero: the
    training signal along that direction is lost for these samples (a diagnosis of end-to-end
    training from a head that starts outside the rules).

    Args:
      rule_set: the :class:`RuleSet`.
      x: inputs ``(N, p)`` (None for rules that read no input).
      y: raw outputs ``ŷ`` ``(N, n)``, before the layer.
      tol: ``τ ≥ 0``, the violation that counts as pinned.

    Returns:
      ``(R, T_max)`` fractions, ``T_max`` the most disjuncts of a rule; NaN where a rule has
      fewer disjuncts or no input satisfies the antecedent.

    Examples:
      >>> rules = [Disjunction([Disjunct([[1.0]], [0.3], condition=([[-1.0]], [-0.5])),
      ...                       Disjunct([[-1.0]], [-0.6], condition=([[1.0]], [0.5]))], "R")]
      >>> rule_set = RuleSet([0.0], [1.0], rules, input_size=1)
      >>> x = jnp.array([[0.7], [0.9], [0.2], [0.1]])  # first two: y <= 0.3; last two: y >= 0.6
      >>> pinned_fractions(rule_set, x, jnp.array([[0.5], [0.1], [0.5], [0.5]])).tolist()
      [[0.5, 1.0]]
    """
    rule_set = _check_rule_set(rule_set)
    check_nonnegative(tol, "tol")
    xs, ys, lead = _prepare(rule_set, x, y)
    check_finite_array(ys, "y")  # a NaN output pins nothing: reported as 0 pinned (issue 44)
    if len(lead) != 1:
        raise ValueError(f"y must have shape (N, n) (one batch axis), got leading axes {lead}")
    width = max((len(rule.disjuncts) for rule in rule_set.rules), default=0)
    rows = []
    for rule in rule_set.rules:
        row = []
        for disjunct in rule.disjuncts:

            def one(xi, yi, disjunct=disjunct):
                excess = jnp.max(disjunct.lhs_at(xi) @ yi - disjunct.rhs_at(xi))
                return disjunct.applies(xi), excess > tol

            applies, violated = jax.vmap(one)(xs, ys)
            count = jnp.sum(applies)
            pinned = jnp.sum(applies & violated) / jnp.maximum(count, 1)
            row.append(jnp.where(count > 0, pinned, jnp.nan).astype(ys.dtype))
        row += [jnp.asarray(jnp.nan, ys.dtype)] * (width - len(row))
        rows.append(jnp.stack(row))
    return jnp.stack(rows) if rows else jnp.zeros((0, 0), ys.dtype)


# ---------------------------------------------------------------------------------------------
# Lifted hull formulations.


class LiftedHull:
    """The lifted (Balas) hull QP of a :class:`RuleSet`, built once with static shapes.

    Variables ``v = (y, ν_{b,s} for every block b and scenario s, λ_{b,s})``; rows, per block:
    ``Σ_s ν_{b,s} - y = 0``, ``Σ_s λ_{b,s} = 1``, and per scenario ``E_s(x) ν_s - f_s(x) λ_s ≤ 0``,
    ``G ν_s - h λ_s ≤ 0``, ``ν_s - upper λ_s ≤ 0``, ``ν_s - lower λ_s ≥ 0``,
    ``0 ≤ λ_s ≤ a_s(x)``. Without rules the rows are the box and ``G`` on ``y`` itself. Use
    :func:`lifted_hull` to build one.

    Attributes:
      rule_set: the rules.
      formulation: ``"dnf"``, ``"cnf"`` or ``"partial_dnf"``.
      blocks: per block, the rule indices it covers and its scenarios (tuples of disjunct
        indices, one per covered rule).
      num_variables, num_rows: the QP's sizes.
      lift_regularization: ``ε``.

    Examples:
      >>> rules = [Disjunction([Disjunct([[1.0]], [0.25]), Disjunct([[-1.0]], [-0.75])], "gap")]
      >>> hull = lifted_hull(RuleSet([0.0], [1.0], rules))
      >>> hull.num_variables, hull.num_rows
      (5, 10)
      >>> P, q, A, lower, upper = hull.qp(jnp.array([0.5]), jnp.zeros(0))
      >>> A.shape, float(q[0])
      ((10, 5), -0.5)
    """

    def __init__(self, rule_set, formulation, num_dnf_rules, lift_regularization, max_scenarios):
        self.rule_set = rule_set
        self.formulation = formulation
        self.lift_regularization = lift_regularization
        rules = list(range(len(rule_set.rules)))
        sizes = [len(r.disjuncts) for r in rule_set.rules]
        if formulation == "dnf":
            groups = [rules] if rules else []
        elif formulation == "cnf":
            groups = [[r] for r in rules]
        else:
            k = len(rules) if num_dnf_rules is None else num_dnf_rules
            groups = ([rules[:k]] if k > 0 else []) + [[r] for r in rules[k:]]
        self.blocks = []
        for group in groups:
            count = math.prod(sizes[r] for r in group)
            if count > max_scenarios:
                raise ValueError(
                    f"the {formulation} block over rules {[rule_set.rules[r].name for r in group]}"
                    f" has {count} scenarios > max_dnf_scenarios={max_scenarios}: use "
                    f"formulation='partial_dnf' with fewer num_dnf_rules, or raise the limit"
                )
            scenarios = list(itertools.product(*(range(sizes[r]) for r in group)))
            self.blocks.append((tuple(group), scenarios))
        self._build()

    def _build(self):
        rs = self.rule_set
        n, g = rs.num_outputs, rs.global_lhs.shape[0]
        offsets, _, _ = rs._row_offsets()
        scenarios = [(b, s) for b, (_, scen) in enumerate(self.blocks) for s in range(len(scen))]
        num_s = len(scenarios)
        self.num_scenarios_total = num_s
        nu_col = lambda k: n + k * n  # noqa: E731
        lam_col = lambda k: n + num_s * n + k  # noqa: E731
        num_vars = n + num_s * (n + 1)
        rows_a, lo, hi = [], [], []  # static rows
        e_rows, e_src, e_scen = [], [], []  # dynamic E/f rows: row id, source row, scenario
        cond_members = []  # per scenario, the global disjunct ids whose antecedents must hold
        lam_rows = []  # per scenario, its λ-bound row

        row_scenario = []  # the scenario a row belongs to (-1: block or y rows)

        def new_row(low, high, scenario=-1):
            rows_a.append(np.zeros(num_vars))
            lo.append(low)
            hi.append(high)
            row_scenario.append(scenario)
            return len(rows_a) - 1

        if not scenarios:
            for j in range(n):
                r = new_row(rs.lower[j], rs.upper[j])
                rows_a[r][j] = 1.0
            for i in range(g):
                r = new_row(-np.inf, rs.global_rhs[i])
                rows_a[r][:n] = rs.global_lhs[i]
        k = 0
        for group, scen in self.blocks:
            ks = list(range(k, k + len(scen)))
            for j in range(n):
                r = new_row(0.0, 0.0)
                rows_a[r][j] = -1.0
                for kk in ks:
                    rows_a[r][nu_col(kk) + j] = 1.0
            r = new_row(1.0, 1.0)
            for kk in ks:
                rows_a[r][lam_col(kk)] = 1.0
            for choice in scen:
                members = []
                for rule_index, t in zip(group, choice, strict=True):
                    start, m, disjunct_id = offsets[rule_index][t]
                    members.append(disjunct_id)
                    for i in range(m):
                        r = new_row(-np.inf, 0.0, k)
                        e_rows.append(r)
                        e_src.append(start + i)
                        e_scen.append(k)
                cond_members.append(members)
                for i in range(g):
                    r = new_row(-np.inf, 0.0, k)
                    rows_a[r][nu_col(k) : nu_col(k) + n] = rs.global_lhs[i]
                    rows_a[r][lam_col(k)] = -rs.global_rhs[i]
                for j in range(n):
                    r = new_row(-np.inf, 0.0, k)
                    rows_a[r][nu_col(k) + j] = 1.0
                    rows_a[r][lam_col(k)] = -rs.upper[j]
                    r = new_row(0.0, np.inf, k)
                    rows_a[r][nu_col(k) + j] = 1.0
                    rows_a[r][lam_col(k)] = -rs.lower[j]
                r = new_row(0.0, 1.0, k)
                rows_a[r][lam_col(k)] = 1.0
                lam_rows.append(r)
                k += 1
        self.num_variables = num_vars
        self.num_rows = len(rows_a)
        self._a0 = np.asarray(rows_a).reshape(self.num_rows, num_vars)
        self._lo0, self._hi0 = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
        self._e_rows = np.asarray(e_rows, np.int32)
        self._e_src = np.asarray(e_src, np.int32)
        scen_arr = np.asarray(e_scen, np.int32)
        self._e_nu_cols = (n + scen_arr * n)[:, None] + np.arange(n)[None, :]
        self._e_lam_cols = n + num_s * n + scen_arr
        self._lam_rows = np.asarray(lam_rows, np.int32)
        width = max((len(m) for m in cond_members), default=0)
        self._cond = np.zeros((num_s, width), np.int32)
        self._cond_valid = np.zeros((num_s, width), bool)
        for s, members in enumerate(cond_members):
            self._cond[s, : len(members)] = members
            self._cond_valid[s, : len(members)] = True
        self._block_of = np.asarray([b for b, _ in scenarios], np.int32)
        self._row_scenario = np.asarray(row_scenario, np.int32)

    def idle_variables(self, primal: jax.Array, threshold: Any, x: Any = None) -> jax.Array:
        """The copies ``(ν_s, λ_s)`` of scenarios whose weight ``λ_s`` is below ``threshold``.

        Such a scenario has ``ν_s = λ_s = 0`` at the solution, where all its rows bind at once:
        the degenerate part of the lifted QP, pinned when it is polished.
        """
        n, num_s = self.rule_set.num_outputs, self.num_scenarios_total
        if num_s == 0:
            return jnp.zeros((self.num_variables,), bool)
        idle = primal[n + num_s * n :] < threshold
        if x is not None:  # a scenario whose antecedent fails has λ_s = 0 exactly
            idle = idle | ~self.applicability(x)[0]
        return jnp.concatenate([jnp.zeros((n,), bool), jnp.repeat(idle, n), idle])

    def applicability(self, x: jax.Array) -> jax.Array:
        """``a_s(x)`` per scenario (bool), and per block whether any scenario applies."""
        _, _, applies = self.rule_set._all_rows(x)
        if self.num_scenarios_total == 0:
            return jnp.zeros((0,), bool), jnp.zeros((0,), bool)
        if applies.size == 0:
            a = jnp.ones((self.num_scenarios_total,), bool)
        else:
            gathered = applies[jnp.asarray(self._cond)]
            a = jnp.all(gathered | ~jnp.asarray(self._cond_valid), axis=1)
        blocks = jax.ops.segment_max(
            a.astype(jnp.int32), jnp.asarray(self._block_of), num_segments=len(self.blocks)
        )
        return a, blocks > 0

    def qp(self, y_hat: jax.Array, x: jax.Array, lift_regularization: Any = None):
        """``(P, q, A, lower, upper)`` of the projection of ``y_hat`` (n,) for input ``x`` (p,).

        ``lift_regularization`` (ε, may be traced) defaults to the hull's own.
        """
        dtype = y_hat.dtype
        n = self.rule_set.num_outputs
        eps = self.lift_regularization if lift_regularization is None else lift_regularization
        eps = jnp.asarray(eps, dtype)
        diag = jnp.concatenate(
            [jnp.ones((n,), dtype), jnp.full((self.num_variables - n,), 1.0, dtype) * eps]
        )
        P = jnp.diag(diag)
        q = jnp.concatenate([-y_hat, jnp.zeros((self.num_variables - n,), dtype)])
        A = jnp.asarray(self._a0, dtype)
        lower = jnp.asarray(self._lo0, dtype)
        upper = jnp.asarray(self._hi0, dtype)
        if self._e_rows.size:
            lhs, rhs, _ = self.rule_set._all_rows(x.astype(dtype))
            src = jnp.asarray(self._e_src)
            rows = jnp.asarray(self._e_rows)
            A = A.at[rows[:, None], jnp.asarray(self._e_nu_cols)].set(lhs[src])
            A = A.at[rows, jnp.asarray(self._e_lam_cols)].set(-rhs[src])
        if self.num_scenarios_total:
            a, _ = self.applicability(x.astype(dtype))
            upper = upper.at[jnp.asarray(self._lam_rows)].set(a.astype(dtype))
        return P, q, A, lower, upper

    def output(self, primal: jax.Array) -> jax.Array:
        """``y``, the first ``n`` entries of the lifted primal."""
        return primal[: self.rule_set.num_outputs]

    def __repr__(self) -> str:
        return (
            f"LiftedHull({self.formulation}, blocks={len(self.blocks)}, "
            f"variables={self.num_variables}, rows={self.num_rows})"
        )


def _check_formulation(formulation, num_dnf_rules, rule_set):
    check_choice(formulation, "formulation", FORMULATIONS)
    if num_dnf_rules is not None:
        if formulation != "partial_dnf":
            raise ValueError("num_dnf_rules applies to formulation='partial_dnf' only")
        check_int(num_dnf_rules, "num_dnf_rules", minimum=0, maximum=len(rule_set.rules))


def lifted_hull(
    rule_set: RuleSet,
    *,
    formulation: str = "dnf",
    num_dnf_rules: int | None = None,
    lift_regularization: float = 1e-6,
    max_dnf_scenarios: int = MAX_DNF_SCENARIOS,
) -> LiftedHull:
    """Compiles a :class:`RuleSet` to its lifted convex-hull QP (DNF, CNF or partial DNF).

    Args:
      rule_set: the rules.
      formulation: ``"dnf"`` (tightest: the hull of the mixed-integer set), ``"cnf"``
        (∩ of per-rule hulls) or ``"partial_dnf"`` (basic steps on the first ``num_dnf_rules``
        rules, CNF blocks for the rest; ``k = 0`` is CNF, ``k = R`` is DNF).
      num_dnf_rules: ``k`` of ``"partial_dnf"`` (default: all rules).
      lift_regularization: ``ε > 0`` on ``ν`` and ``λ`` (unique lifted solution). It moves
        ``y`` by ``O(ε)`` from the exact hull projection (a hull point is moved by about
        ``10 ε`` on the note's examples), so the default is 1e-6, not the note's 1e-4 (which
        moved feasible points by up to 8e-4, more than the satisfaction tolerance).
      max_dnf_scenarios: refuse a block with more scenarios.

    Returns:
      A :class:`LiftedHull`.

    Examples:
      The note's midsize example (rules with 2, 2, 3, 2, 3 disjuncts, n = 3): DNF has 72 scenarios
      and 3 + 72·4 = 291 variables, CNF 3 + 12·4 = 51:

      >>> box = ([0.0] * 3, [1.0] * 3)
      >>> rule = lambda k, i: Disjunction([Disjunct([[1.0, 0, 0]], [0.5])] * k, f"r{i}")
      >>> rules = RuleSet(*box, [rule(k, i) for i, k in enumerate([2, 2, 3, 2, 3])])
      >>> lifted_hull(rules).num_variables, lifted_hull(rules, formulation="cnf").num_variables
      (291, 51)
    """
    rule_set = _check_rule_set(rule_set)
    _check_formulation(formulation, num_dnf_rules, rule_set)
    check_positive(lift_regularization, "lift_regularization")
    check_int(max_dnf_scenarios, "max_dnf_scenarios", minimum=1)
    return LiftedHull(rule_set, formulation, num_dnf_rules, lift_regularization, max_dnf_scenarios)


def hull_size(
    rule_set: RuleSet, *, formulation: str = "dnf", num_dnf_rules: int | None = None
) -> dict[str, int]:
    """Sizes of a lifted formulation without building it: blocks, scenarios, variables.

    Returns ``{"blocks", "scenarios", "variables"}`` with ``variables = n + Σ_b S_b (n + 1)``
    (``S_b`` the scenarios of block ``b``).

    Examples:
      The note's large example, rules with [2, 3, 2, 4, 2, 3, 2, 5, 2, 3] disjuncts (their
      product is 17 280; the note's "8640" is half of it):

      >>> rule = lambda k, i: Disjunction([Disjunct([[1.0]], [0.5])] * k, f"r{i}")
      >>> sizes = [2, 3, 2, 4, 2, 3, 2, 5, 2, 3]
      >>> rules = RuleSet([0.0], [1.0], [rule(k, i) for i, k in enumerate(sizes)])
      >>> hull_size(rules)["scenarios"], hull_size(rules, formulation="cnf")["scenarios"]
      (17280, 28)
    """
    rule_set = _check_rule_set(rule_set)
    _check_formulation(formulation, num_dnf_rules, rule_set)
    sizes = [len(r.disjuncts) for r in rule_set.rules]
    if formulation == "dnf":
        blocks = [math.prod(sizes)] if sizes else []
    elif formulation == "cnf":
        blocks = sizes
    else:
        k = len(sizes) if num_dnf_rules is None else num_dnf_rules
        blocks = ([math.prod(sizes[:k])] if k > 0 else []) + sizes[k:]
    n = rule_set.num_outputs
    return {
        "blocks": len(blocks),
        "scenarios": int(sum(blocks)),
        "variables": int(n + sum(blocks) * (n + 1)),
    }


# ---------------------------------------------------------------------------------------------
# The layer.


class DisjunctiveInfo(NamedTuple):
    """Diagnostics of one :class:`DisjunctiveLayer` call (leading shape of the batch).

    Attributes:
      status: int32 per output: ``SolverStatus.CONVERGED`` (1) projected;
        ``SolverStatus.NONFINITE`` (3) the raw output or the input has a NaN or infinity: it
        is returned as is; ``SolverStatus.PRIMAL_INFEASIBLE`` (5) the rules are infeasible for
        this input (no applicable disjunct, an infeasibility certificate, or in union mode no
        feasible scenario): the raw output is returned; ``SolverStatus.MAXITER`` (2) the solver
        did not reach its tolerance: the raw output is returned.
      projected: bool, ``status == CONVERGED``.
      residual: the returned point's violation of the QP's constraints (lifted hull rows in
        hull mode, the chosen scenario's polytope in union mode): ``hull_violation``.
      iterations: ADMM iterations (max over scenarios in union mode).
      scenario: the chosen scenario in union mode (-1 in hull mode or when none).
      polished: whether the returned point is a polished (active-set) solution; otherwise it is
        ADMM's, feasible to ``10 admm_tol``.

    Examples:
      >>> DisjunctiveInfo._fields
      ('status', 'projected', 'residual', 'iterations', 'scenario', 'polished')
    """

    status: jax.Array
    projected: jax.Array
    residual: jax.Array
    iterations: jax.Array
    scenario: jax.Array
    polished: jax.Array


class _LayerTables:
    """Static pieces of a layer (solver, union-mode index tables), kept out of nnx's state."""

    def __init__(self, admm: Any):
        self.admm = admm
        self.rows = self.valid = self.members = None
        self.project = None


class DisjunctiveLayer(nnx.Module):
    """Projects a network's raw output onto the feasible set of disjunctive rules, differentiably.

    Mode ``"hull"`` (the paper's mechanism) solves the lifted hull QP of :func:`lifted_hull`
    (``formulation`` DNF/CNF/partial DNF): exact rule satisfaction when the input decides one
    disjunct per rule, hull membership otherwise. Mode ``"union"`` solves one projection QP per
    scenario (a choice of one disjunct per rule, its polytope ``box ∩ G ∩ ∩_r D_{r,s_r}``),
    vmapped, and keeps the nearest applicable feasible one: the exact projection onto the rules'
    feasible set. Both are differentiated implicitly (KKT conditions of the solved QP; in union
    mode, of the chosen scenario's QP). The solver is :class:`jaxlab.solvers.DenseQP` (ADMM to
    ``admm_tol``, then polishing; projected iff the final KKT residual is ``≤ tol``).

    Where the projection fails (infeasible input, no convergence) the raw output is returned
    with zero gradient and the status says why (:class:`DisjunctiveInfo`); nothing raises
    inside ``jit``.

    Args:
      rule_set: the :class:`RuleSet`.
      mode: ``"hull"`` or ``"union"``.
      formulation, num_dnf_rules, lift_regularization, max_dnf_scenarios: of
        :func:`lifted_hull` (hull mode; union mode enumerates all ``Π_r |T_r|`` scenarios and
        refuses more than ``max_dnf_scenarios``).
      tol: feasibility a polished point must reach to count as solved, for float64 inputs
        (times ``max(1, max|bound|)`` of the box).
      tol_float32: the same for float32 inputs, which use ``max(tol, tol_float32)``.
      admm_tol: ADMM stopping tolerance before polishing (default 1e-4).
      maxiter: ADMM iteration cap.
      rho: ADMM step size (0.3: on the note's rule sets it needs about half the iterations of
        OSQP's default 0.1; 1.0 stalled on some lifted hulls in float32).

    Examples:
      The note's example 3 (``x`` decides both rules, ``y ∈ [0, 10]²``), ``ŷ = (5, 3)``:

      >>> from jaxlab.nn import input_decided_toy_rules
      >>> layer = DisjunctiveLayer(input_decided_toy_rules())
      >>> y, info = layer(jnp.array([[5.0, 3.0], [5.0, 3.0]]), jnp.array([[0.6], [0.1]]))
      >>> [[round(v, 3) for v in row] for row in y.tolist()], info.status.tolist()
      ([[1.0, 5.0], [1.0, 2.0]], [1, 1])
    """

    def __init__(
        self,
        rule_set: RuleSet,
        *,
        mode: str = "hull",
        formulation: str = "dnf",
        num_dnf_rules: int | None = None,
        lift_regularization: float = 1e-6,
        max_dnf_scenarios: int = MAX_DNF_SCENARIOS,
        tol: float = 1e-6,
        tol_float32: float = 1e-5,
        admm_tol: float = 1e-4,
        maxiter: int = 5000,
        rho: float = 0.3,
    ):
        self.rule_set = _check_rule_set(rule_set)
        check_choice(mode, "mode", MODES)
        self.mode = mode
        check_positive(tol, "tol")
        check_positive(tol_float32, "tol_float32")
        check_positive(admm_tol, "admm_tol")
        self.tol, self.tol_float32 = float(tol), float(tol_float32)
        self.tables = _LayerTables(
            DenseQP(
                rho=rho,
                tol=float(admm_tol),
                maxiter=check_int(maxiter, "maxiter", minimum=1),
                implicit_diff=False,
            )
        )
        if mode == "hull":
            self.hull = lifted_hull(
                rule_set,
                formulation=formulation,
                num_dnf_rules=num_dnf_rules,
                lift_regularization=lift_regularization,
                max_dnf_scenarios=max_dnf_scenarios,
            )
        else:
            _check_formulation(formulation, num_dnf_rules, rule_set)
            check_positive(lift_regularization, "lift_regularization")
            check_int(max_dnf_scenarios, "max_dnf_scenarios", minimum=1)
            if rule_set.num_scenarios > max_dnf_scenarios:
                raise ValueError(
                    f"union mode enumerates {rule_set.num_scenarios} scenarios > "
                    f"max_dnf_scenarios={max_dnf_scenarios}"
                )
            self.hull = None
            self._build_union()

    # -- union mode tables ----------------------------------------------------------------------
    def _build_union(self):
        rs = self.rule_set
        offsets, total_rows, _ = rs._row_offsets()
        sizes = [len(r.disjuncts) for r in rs.rules]
        scenarios = list(itertools.product(*(range(k) for k in sizes)))
        rows = [
            [offsets[r][t][0] + i for r, t in enumerate(choice) for i in range(offsets[r][t][1])]
            for choice in scenarios
        ]
        width = max((len(r) for r in rows), default=0)
        # Padding rows read a zero row appended after the real ones, with bounds (-inf, inf).
        self.tables.rows = np.full((len(scenarios), width), total_rows, np.int32)
        self.tables.valid = np.zeros((len(scenarios), width), bool)
        for s, r in enumerate(rows):
            self.tables.rows[s, : len(r)] = r
            self.tables.valid[s, : len(r)] = True
        ids = [[offsets[r][t][2] for r, t in enumerate(choice)] for choice in scenarios]
        self.tables.members = np.asarray(ids, np.int32).reshape(len(scenarios), len(sizes))

    # -- projection ------------------------------------------------------------------------
    def _tol(self, dtype):
        # Relative to the box's scale: rows carry bounds of that size, rounding errors too.
        scale = max(
            1.0, float(np.max(np.abs(np.concatenate([self.rule_set.lower, self.rule_set.upper]))))
        )
        base = self.tol if jnp.dtype(dtype) == jnp.float64 else max(self.tol, self.tol_float32)
        return base * scale

    def _solve(self, P, q, A, lower, upper, idle_rows=None):
        n, m = q.shape[0], A.shape[0]
        init = QPSolution(jnp.zeros((n,), q.dtype), jnp.zeros((m,), q.dtype))
        tol = self._tol(q.dtype)
        # ADMM and polishing without gradients; the implicit derivative at the polished point.
        stopped = jax.lax.stop_gradient((P, q, A, lower, upper))
        admm = self.tables.admm
        rough = admm.run(init, *stopped)
        # Scenarios left at λ ≈ 0 by ADMM (10x its tolerance) are pinned at ν = λ = 0.
        fixed = None if idle_rows is None else idle_rows(rough.params.primal, 10 * admm.tol)
        # Two repair rounds per starting active set (a third added a quarter to a training step
        # and polished no more of the note's input-decided hulls).
        polished, kept = admm.polish(
            rough.params, *stopped, feasibility_tol=tol, fixed=fixed, steps=2
        )
        violation = admm.primal_violation(polished, *stopped[2:])
        solution = admm.differentiable_solution(polished, P, q, A, lower, upper, slack_tol=10 * tol)
        # Projected: ADMM reached its tolerance, and the returned point is feasible to tol
        # (polished) or, where polishing found no certified point (the lifted copies of a
        # degenerate hull are fixed only by ε, so ADMM leaves them inaccurate), to 10 admm_tol.
        admm_ok = rough.state.status == SolverStatus.CONVERGED
        # A polished point whose own KKT residual (stationarity, feasibility, complementarity
        # and dual signs) is within tol is optimal whatever ADMM reached (convex QP).
        kkt = admm.optimality_fun(polished, *stopped)
        kkt_residual = jnp.maximum(
            jnp.max(jnp.abs(kkt.primal)), jnp.max(jnp.abs(kkt.dual), initial=0.0)
        )
        certified = kept & (kkt_residual <= tol)
        solved = certified | (admm_ok & (kept | (violation <= 10 * admm.tol)))
        status = jnp.where(
            rough.state.status == SolverStatus.PRIMAL_INFEASIBLE,
            jnp.int32(SolverStatus.PRIMAL_INFEASIBLE),
            jnp.where(solved, jnp.int32(SolverStatus.CONVERGED), jnp.int32(SolverStatus.MAXITER)),
        )
        residual = violation
        return solution, status, residual, rough.state.iter_num, kept

    def _project_hull(self, y_hat, x):
        P, q, A, lower, upper = self.hull.qp(y_hat, x)
        solution, status, residual, iterations, polished = self._solve(
            P, q, A, lower, upper, idle_rows=lambda v, t: self.hull.idle_variables(v, t, x)
        )
        _, block_ok = self.hull.applicability(x)
        if block_ok.size:
            status = jnp.where(jnp.all(block_ok), status, jnp.int32(SolverStatus.PRIMAL_INFEASIBLE))
        y = self.hull.output(solution.primal)
        return y, status, residual, iterations, jnp.int32(-1), polished

    def _project_union(self, y_hat, x):
        rs = self.rule_set
        n, dtype = rs.num_outputs, y_hat.dtype
        lhs, rhs, applies = rs._all_rows(x)
        lhs = jnp.concatenate([lhs, jnp.zeros((1, n), dtype)], 0)
        rhs = jnp.concatenate([rhs, jnp.zeros((1,), dtype)], 0)
        valid = jnp.asarray(self.tables.valid)
        idx = jnp.asarray(self.tables.rows)
        e = lhs[idx]  # (S, w, n)
        f = jnp.where(valid, rhs[idx], jnp.inf)
        g_lhs = jnp.asarray(rs.global_lhs, dtype)
        num_s = idx.shape[0]
        eye = jnp.eye(n, dtype=dtype)

        def stack(block):
            return jnp.broadcast_to(block, (num_s, *block.shape))

        A = jnp.concatenate([stack(eye), stack(g_lhs), e], axis=1)
        lower = jnp.concatenate(
            [
                stack(jnp.asarray(rs.lower, dtype)),
                jnp.full((num_s, g_lhs.shape[0]), -jnp.inf, dtype),
                jnp.full(f.shape, -jnp.inf, dtype),
            ],
            axis=1,
        )
        upper = jnp.concatenate(
            [stack(jnp.asarray(rs.upper, dtype)), stack(jnp.asarray(rs.global_rhs, dtype)), f],
            axis=1,
        )
        P = stack(eye)
        q = stack(-y_hat)
        solution, status, residual, iterations, polished = jax.vmap(self._solve)(
            P, q, A, lower, upper
        )
        if applies.size:
            applicable = jnp.all(applies[jnp.asarray(self.tables.members)], axis=1)
        else:
            applicable = jnp.ones((num_s,), bool)
        ok = applicable & (status == SolverStatus.CONVERGED)
        ys = solution.primal
        distance = jnp.sum((jax.lax.stop_gradient(ys) - y_hat[None, :]) ** 2, axis=1)
        distance = jnp.where(ok, distance, jnp.inf)
        best = jnp.argmin(distance)
        any_ok = jnp.any(ok)
        y = ys[best]
        infeasible = applicable & (status == SolverStatus.PRIMAL_INFEASIBLE)
        all_infeasible = jnp.all(infeasible | ~applicable)
        status = jnp.where(
            any_ok,
            jnp.int32(SolverStatus.CONVERGED),
            jnp.where(
                all_infeasible,
                jnp.int32(SolverStatus.PRIMAL_INFEASIBLE),
                jnp.int32(SolverStatus.MAXITER),
            ),
        )
        scenario = jnp.where(any_ok, best.astype(jnp.int32), jnp.int32(-1))
        chosen = jnp.maximum(scenario, 0)
        return y, status, residual[chosen], jnp.max(iterations), scenario, polished[chosen]

    def __call__(self, y_hat: Any, x: Any = None) -> tuple[jax.Array, DisjunctiveInfo]:
        """Projects ``y_hat`` ``[..., n]`` (inputs ``x`` ``[..., p]``, None without input terms).

        Returns ``(y, info)``: ``y`` of ``y_hat``'s shape and dtype, :class:`DisjunctiveInfo`.
        """
        xs, ys, lead = _prepare(self.rule_set, x, y_hat, "y_hat")
        # One compiled program per layer and batch shape (the solver's loops compiled op by op
        # cost several times more when the layer is called outside jit).
        if self.tables.project is None:
            self.tables.project = jax.jit(self._project_batch)
        y, info = self.tables.project(ys, xs)
        y = y.reshape((*lead, self.rule_set.num_outputs))
        return y, jax.tree.map(lambda v: v.reshape(lead), info)

    def _project_batch(self, ys: jax.Array, xs: jax.Array):
        project = self._project_hull if self.mode == "hull" else self._project_union

        def one(yi, xi):
            y, status, residual, iterations, scenario, polished = project(yi, xi)
            # A non-finite raw output or input is reported as such (the solver only sees NaN).
            finite = jnp.all(jnp.isfinite(yi)) & jnp.all(jnp.isfinite(xi))
            status = jnp.where(finite, status, jnp.int32(SolverStatus.NONFINITE))
            projected = status == SolverStatus.CONVERGED
            y = jnp.where(projected, y, jax.lax.stop_gradient(yi))
            info = DisjunctiveInfo(status, projected, residual, iterations, scenario, polished)
            return y, info

        return jax.vmap(one)(ys, xs)
