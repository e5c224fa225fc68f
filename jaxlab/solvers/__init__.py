"""jaxopt-shaped iterative solvers.

Hom-PGD⁺ (Liu, Liang & Chen, ICML 2026): projected gradient in the latent ball of a (learned)
homeomorphism onto a non-convex feasible set, with the public code's bisection repair.

Push-Pull and FAB (Ma, Wang, Yao & Zhang, ICML 2026): gradient tracking over time-varying
directed graphs (row-stochastic pull, column-stochastic push) and its first-order value-function
penalty extension to distributed bilevel problems.

Stochastic variational inequalities (Alacaoglu & Kim, ICML 2026): minibatch extragradient /
forward-backward-forward with growing batches and relaxation (EG+), the Halpern-anchored variant,
projected stochastic gradient descent-ascent (baseline), and test problems with known solutions.
"""

from jaxlab.solvers._hom_pgd import HomPGD, HomPGDState, bisection_repair, project_ball
from jaxlab.solvers._push_pull import FAB, FABParams, FABState, PushPull, PushPullState
from jaxlab.solvers._vi import (
    HalpernExtragradient,
    HalpernState,
    StochasticExtragradient,
    StochasticGradientDescentAscent,
    VIState,
    constant_batch_schedule,
    halpern_anchor_schedule,
    minibatch_operator,
    natural_residual,
    polynomial_batch_schedule,
)
from jaxlab.solvers._vi_problems import VIProblem, bilinear_nonnegative, weak_minty_2d

__all__ = [
    # Hom-PGD+ (latent projected gradient through a homeomorphism)
    "HomPGD",
    "HomPGDState",
    "bisection_repair",
    "project_ball",
    # Push-Pull and FAB (distributed bilevel) over time-varying digraphs
    "FAB",
    "FABParams",
    "FABState",
    "PushPull",
    "PushPullState",
    # stochastic variational inequalities
    "HalpernExtragradient",
    "HalpernState",
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
    "weak_minty_2d",
]
