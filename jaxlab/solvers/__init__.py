"""jaxopt-shaped iterative solvers.

Hom-PGD⁺ (Liu, Liang & Chen, ICML 2026): projected gradient in the latent ball of a (learned)
homeomorphism onto a non-convex feasible set, with the public code's bisection repair; its star
toy and non-convex QCQP family (single instances and batches), and the baselines it is measured
against (exact-projection PGD, penalty, augmented Lagrangian, local and multi-start SLSQP).

Implicit differentiation of a solver's solution solves a linear system through
``implicit_diff_solve`` (dense for small problems, matrix-free GMRES or CG otherwise).

Push-Pull and FAB (Ma, Wang, Yao & Zhang, ICML 2026): gradient tracking over time-varying
directed graphs (row-stochastic pull, column-stochastic push) and its first-order value-function
penalty extension to distributed bilevel problems.

Stochastic variational inequalities (Alacaoglu & Kim, ICML 2026): minibatch extragradient /
forward-backward-forward with growing batches and relaxation (EG+), the Halpern-anchored variant,
projected stochastic gradient descent-ascent (baseline), and test problems with known solutions.

A dense convex QP solver (DisjunctiveNet's projection layers): OSQP-style ADMM with an
infeasibility certificate, active-set polishing and implicit differentiation of the KKT system.

The L-shaped method (Liu, Gao & Hu, ICML 2026, APUB-M): single- and multi-cut decomposition of
the SAA and APUB problems of a :class:`jaxlab.stochprog.TwoStageLP`, HiGHS master on the host.
"""

from jaxlab._src.qp import (
    DenseQP,
    QPSolution,
    QPState,
    qp_kkt_regularized_solve,
    qp_kkt_tangent_solve,
)
from jaxlab._src.solver import (
    DENSE_SOLVE_MAX_SIZE,
    SolverStatus,
    cg_tangent_solve,
    default_tangent_solve,
    dense_tangent_solve,
    gmres_tangent_solve,
)
from jaxlab.solvers._baselines import (
    BaselineRun,
    augmented_lagrangian,
    exact_projection_pgd,
    penalty_method,
    slsqp_local_solve,
    slsqp_multistart,
    slsqp_projection_pgd,
)
from jaxlab.solvers._bilevel_problems import (
    BilevelProblem,
    BilevelSolution,
    centralized_penalty_trajectory,
    diabetes_ridge_tuning,
    digits_hyper_cleaning,
    exact_bilevel_solution,
    exact_hypergradient,
    lower_level_solution,
)
from jaxlab.solvers._hom_pgd import (
    GapSplit,
    HomPGD,
    HomPGDState,
    best_feasible_start,
    bisection_repair,
    latent_starts,
    project_ball,
    select_penalty_weight,
    split_gap,
)
from jaxlab.solvers._hom_pgd_problems import (
    STAR_OPTIMUM,
    STAR_OPTIMUM_VALUE,
    QCQPInstance,
    qcqp_condition,
    qcqp_condition_sampler,
    qcqp_constraints,
    qcqp_constraints_from_condition,
    qcqp_hom_pgd,
    qcqp_homeomorphism_net,
    qcqp_objective,
    sample_qcqp,
    sample_qcqp_batch,
    star_boundary,
    star_constraint,
    star_hom_pgd,
    star_homeomorphism,
    star_objective,
    star_projection,
    star_radius,
    train_qcqp_homeomorphism,
)
from jaxlab.solvers._hom_pgd_studies import (
    StarComparison,
    compare_qcqp_methods,
    compare_qcqp_starts,
    compare_star_methods,
    qcqp_gap_split,
    qcqp_penalty_baseline,
)
from jaxlab.solvers._lshaped import LShaped, LShapedState
from jaxlab.solvers._push_pull import FAB, FABParams, FABState, PushPull, PushPullState
from jaxlab.solvers._vi import (
    HalpernExtragradient,
    HalpernState,
    OracleCount,
    StochasticExtragradient,
    StochasticGradientDescentAscent,
    VIState,
    constant_batch_schedule,
    halpern_anchor_schedule,
    minibatch_operator,
    natural_residual,
    polynomial_batch_schedule,
    run_to_checkpoints,
)
from jaxlab.solvers._vi_problems import VIProblem, bilinear_nonnegative, weak_minty_2d

__all__ = [
    # linear solves for implicit differentiation (a solver's implicit_diff_solve)
    "DENSE_SOLVE_MAX_SIZE",
    "cg_tangent_solve",
    "default_tangent_solve",
    "dense_tangent_solve",
    "gmres_tangent_solve",
    # why a solver's loop stopped (every solver state's int32 `status` field)
    "SolverStatus",
    # the L-shaped method for SAA/APUB two-stage LPs (jaxlab.stochprog models; HiGHS, host loop)
    "LShaped",
    "LShapedState",
    # Hom-PGD+ (latent projected gradient through a homeomorphism)
    "GapSplit",
    "HomPGD",
    "HomPGDState",
    "best_feasible_start",
    "bisection_repair",
    "latent_starts",
    "project_ball",
    "select_penalty_weight",
    "split_gap",
    # its problems (star toy, non-convex QCQPs) and baselines
    "STAR_OPTIMUM",
    "STAR_OPTIMUM_VALUE",
    "BaselineRun",
    "QCQPInstance",
    "augmented_lagrangian",
    "exact_projection_pgd",
    "penalty_method",
    "qcqp_condition",
    "qcqp_condition_sampler",
    "qcqp_constraints",
    "qcqp_constraints_from_condition",
    "qcqp_hom_pgd",
    "qcqp_homeomorphism_net",
    "qcqp_objective",
    "sample_qcqp",
    "sample_qcqp_batch",
    "slsqp_local_solve",
    "slsqp_multistart",
    "slsqp_projection_pgd",
    "star_boundary",
    "star_constraint",
    "star_homeomorphism",
    "star_hom_pgd",
    "star_objective",
    "star_projection",
    "star_radius",
    "train_qcqp_homeomorphism",
    # its measurements on a user's sizes (star toy vs baselines, QCQP baselines, gap split)
    "StarComparison",
    "compare_qcqp_methods",
    "compare_qcqp_starts",
    "compare_star_methods",
    "qcqp_gap_split",
    "qcqp_penalty_baseline",
    # Push-Pull and FAB (distributed bilevel) over time-varying digraphs
    "FAB",
    "FABParams",
    "FABState",
    "PushPull",
    "PushPullState",
    # distributed bilevel problems with exact references (FAB's instances and baselines)
    "BilevelProblem",
    "BilevelSolution",
    "centralized_penalty_trajectory",
    "diabetes_ridge_tuning",
    "digits_hyper_cleaning",
    "exact_bilevel_solution",
    "exact_hypergradient",
    "lower_level_solution",
    # dense convex QP (OSQP-style ADMM, polishing, implicit differentiation)
    "DenseQP",
    "QPSolution",
    "QPState",
    "qp_kkt_regularized_solve",
    "qp_kkt_tangent_solve",
    # stochastic variational inequalities
    "HalpernExtragradient",
    "HalpernState",
    "OracleCount",
    "StochasticExtragradient",
    "StochasticGradientDescentAscent",
    "VIProblem",
    "VIState",
    "bilinear_nonnegative",
    "constant_batch_schedule",
    "halpern_anchor_schedule",
    "minibatch_operator",
    "natural_residual",
    "polynomial_batch_schedule",
    "run_to_checkpoints",
    "weak_minty_2d",
]


def __getattr__(name):
    # QP_PRIMAL_INFEASIBLE (5) was public before SolverStatus named the code.
    if name == "QP_PRIMAL_INFEASIBLE":
        import warnings

        warnings.warn(
            "jaxlab.solvers.QP_PRIMAL_INFEASIBLE is deprecated: use "
            "jaxlab.solvers.SolverStatus.PRIMAL_INFEASIBLE (the same code, 5)",
            DeprecationWarning,
            stacklevel=2,
        )
        return SolverStatus.PRIMAL_INFEASIBLE
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
