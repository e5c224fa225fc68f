"""jaxopt-shaped iterative solvers.

Hom-PGD⁺ (Liu, Liang & Chen, ICML 2026): projected gradient in the latent ball of a (learned)
homeomorphism onto a non-convex feasible set, with the public code's bisection repair.

Stochastic variational inequalities (Alacaoglu & Kim, ICML 2026): minibatch extragradient /
forward-backward-forward with growing batches and relaxation (EG+), the Halpern-anchored variant,
projected stochastic gradient descent-ascent (baseline), and test problems with known solutions.
"""

from jaxlab.solvers._hom_pgd import HomPGD, HomPGDState, bisection_repair, project_ball
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
