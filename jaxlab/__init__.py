"""jaxlab: the newest optimization research as JAX code researchers use.

Subpackages: ``jaxlab.optim`` (optax transforms), ``jaxlab.distributed`` (meshes and
multi-process launch), ``jaxlab.solvers`` (jaxopt-shaped solvers), ``jaxlab.nn`` (flax.nnx
modules), ``jaxlab.particles`` (mean-field Langevin particle systems: MFLD, mirror MFLD),
``jaxlab.stochprog`` (data-driven stochastic programming: APUB, bootstrap LPs, two-stage models),
``jaxlab.quant`` (post-training weight quantization: RTN, GPTQ, STLA),
``jaxlab.inverse`` (inverse problems with flow-matching priors: MS-Flow multiple shooting and the
D-Flow single-shooting baseline, diffrax flow maps, forward models with adjoints),
``jaxlab.bo`` (Bayesian optimization: exact GPs, RAMBO's Dirichlet-process mixture of GPs, the
BO loop and its test functions),
``jaxlab.rl`` (policy optimisation over sampled sequences: a GRPO core, TSRL, UCPO),
``jaxlab.uncertainty`` (credal ensembles: CreDRO's DRO members, credal sets, epistemic
uncertainty),
``jaxlab.experiments`` (the registered paper reproductions).
"""

__version__ = "0.1.0"

import importlib as _importlib

__all__ = [
    "__version__",
    "bo",
    "distributed",
    "inverse",
    "nn",
    "optim",
    "particles",
    "quant",
    "rl",
    "solvers",
    "stochprog",
    "uncertainty",
]
_SUBPACKAGES = frozenset([*__all__[1:], "experiments"])


def __getattr__(name: str):
    # Subpackages load on first use (``jaxlab.optim``), so ``import jaxlab`` and the ``jaxlab``
    # command start without importing JAX: the CLI can then handle an interrupt at any time.
    if name in _SUBPACKAGES:
        return _importlib.import_module(f"jaxlab.{name}")
    raise AttributeError(f"module 'jaxlab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_SUBPACKAGES])
