"""The solver battery's own test: a sound tiny solver passes every check; each defective solver
below breaks one rule and the matching check raises AssertionError for it."""

from __future__ import annotations

import dataclasses
import itertools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
import pytest

from jaxlab._src.solver import IterativeSolver, OptStep
from tests.batteries import (
    SOLVER_CHECK_NAMES,
    SOLVER_CHECKS,
    SolverCase,
    SolverProblem,
    check_solver_implicit_gradients,
    check_solver_optimality,
    check_solver_run_equals_loop,
    check_solver_stable_state,
    check_solver_unrolled_run,
    run_solver_check,
)


class _State(NamedTuple):
    iter_num: jax.Array
    error: jax.Array


@dataclasses.dataclass(eq=False)
class _GradientDescent(IterativeSolver):
    """Gradient descent on f(p) = 0.5 ||p - target||^2 + 0.25 ||p||^2: p* = target / 1.5."""

    stepsize: float = 0.5

    def init_state(self, params, target):
        return _State(jnp.zeros((), jnp.int32), jnp.full((), jnp.inf, params.dtype))

    def optimality_fun(self, params, target):
        return params - target + 0.5 * params

    def update(self, params, state, target):
        grad = self.optimality_fun(params, target)
        new = params - self.stepsize * grad
        return OptStep(new, _State(state.iter_num + 1, optax.tree.norm(grad)))


@dataclasses.dataclass(eq=False)
class _WeakInitState(_GradientDescent):
    """init_state's error is a weakly typed Python float: jit retraces on the second update."""

    def init_state(self, params, target):
        return _State(jnp.zeros((), jnp.int32), jnp.asarray(jnp.inf))


@dataclasses.dataclass(eq=False)
class _FloatIterNum(_GradientDescent):
    """update returns a float iteration counter: the state's dtype changes."""

    def update(self, params, state, target):
        step = super().update(params, state, target)
        return OptStep(step.params, step.state._replace(iter_num=step.state.iter_num * 1.0))


_TRACES = itertools.count()


@dataclasses.dataclass(eq=False)
class _TraceTimeOffset(_GradientDescent):
    """update adds a constant read from Python state at trace time: every trace differs."""

    def update(self, params, state, target):
        offset = 1e-3 * next(_TRACES)
        step = super().update(params, state, target)
        return OptStep(step.params + offset, step.state)


@dataclasses.dataclass(eq=False)
class _ShiftedOptimality(_GradientDescent):
    """optimality_fun is off by a constant: not zero at the solution update converges to."""

    def optimality_fun(self, params, target):
        return super().optimality_fun(params, target) + 1e-3

    def update(self, params, state, target):
        grad = params - target + 0.5 * params
        return OptStep(
            params - self.stepsize * grad, _State(state.iter_num + 1, optax.tree.norm(grad))
        )


@dataclasses.dataclass(eq=False)
class _WrongRootDependence(_GradientDescent):
    """optimality_fun has the right root at target = 1.5 only: p - target^2 / 2.25.

    At target = 1.5 it vanishes exactly where update converges (p* = target / 1.5 = 1), so the
    optimality check passes, but the root's derivative in target (2 target / 2.25 = 4/3) is
    wrong (the truth is 1 / 1.5 = 2/3).
    """

    def optimality_fun(self, params, target):
        return params - target**2 / 2.25

    def update(self, params, state, target):
        grad = params - target + 0.5 * params
        return OptStep(
            params - self.stepsize * grad, _State(state.iter_num + 1, optax.tree.norm(grad))
        )


def _case(solver_class, name=None, **kwargs) -> SolverCase:
    def make():
        return SolverProblem(
            solver=solver_class(maxiter=200, tol=1e-12),
            init_params=jnp.zeros(3),
            args=(jnp.full((3,), 1.5),),
        )

    kwargs.setdefault("implicit_diff", True)
    return SolverCase(name=name or solver_class.__name__, make=make, **kwargs)


def test_sound_gradient_descent_passes_every_check():
    case = _case(_GradientDescent)
    for check in SOLVER_CHECKS.values():
        check(case)


def test_sound_gradient_descent_passes_in_float32_too():
    case = _case(
        _GradientDescent,
        x64=False,
        optimality_tol=1e-5,
        loop_rtol=1e-6,
        loop_atol=1e-6,
        fd_step=1e-2,
        grad_rtol=1e-3,
    )
    for check in SOLVER_CHECKS.values():
        check(case)


@pytest.mark.parametrize("solver_class", [_WeakInitState, _FloatIterNum])
def test_stable_state_check_catches_changing_state_types(solver_class):
    case = _case(solver_class)
    with pytest.raises(AssertionError, match="state after update 1 differs|traced"):
        check_solver_stable_state(case)


def test_run_equals_loop_check_catches_trace_dependent_update():
    with pytest.raises(AssertionError, match="run stopped after|run params != loop's"):
        check_solver_run_equals_loop(_case(_TraceTimeOffset))


def test_unrolled_run_check_catches_trace_dependent_update():
    with pytest.raises(AssertionError, match="unrolled run params != while_loop's"):
        check_solver_unrolled_run(_case(_TraceTimeOffset))


def test_optimality_check_catches_shifted_optimality_fun():
    with pytest.raises(AssertionError, match="optimality_tol"):
        check_solver_optimality(_case(_ShiftedOptimality))


def test_implicit_gradient_check_catches_wrong_dependence_on_the_argument():
    case = _case(_WrongRootDependence)
    check_solver_optimality(case)  # the root is right at this argument...
    with pytest.raises(AssertionError, match="central difference"):
        check_solver_implicit_gradients(case)  # ...its derivative is not


def test_implicit_gradient_check_skips_cases_without_the_flag():
    case = _case(_GradientDescent, implicit_diff=False, notes="not differentiable")
    with pytest.raises(pytest.skip.Exception, match="not differentiable"):
        check_solver_implicit_gradients(case)


def test_run_solver_check_skips_listed_checks_with_their_reason():
    case = _case(_GradientDescent, skip={"unrolled_run"}, notes="host loop")
    with pytest.raises(pytest.skip.Exception, match="host loop"):
        run_solver_check(case, "unrolled_run")


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"skip": {"convergence"}}, ValueError),  # not a check name
        ({"skip": {"optimality"}}, ValueError),  # no reason in notes
        ({"optimality_tol": 0.0}, ValueError),
        ({"fd_step": -1.0}, ValueError),
        ({"loop_rtol": -1.0}, ValueError),
        ({"make": 3}, TypeError),
    ],
)
def test_solver_case_rejects_bad_fields(kwargs, error):
    fields = {"name": "bad", "make": lambda: None, **kwargs}
    with pytest.raises(error):
        SolverCase(**fields)


def test_make_must_return_a_solver_problem():
    case = SolverCase(name="bad_make", make=lambda: (1, 2))
    with pytest.raises(TypeError, match="SolverProblem"):
        check_solver_optimality(case)


def test_check_names_and_functions_agree():
    assert tuple(SOLVER_CHECKS) == SOLVER_CHECK_NAMES
