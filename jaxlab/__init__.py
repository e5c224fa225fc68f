"""jaxlab: the newest optimization research as JAX code researchers use.

Subpackages: ``jaxlab.optim`` (optax transforms), ``jaxlab.distributed`` (meshes and
multi-process launch), ``jaxlab.solvers`` (jaxopt-shaped solvers), ``jaxlab.nn`` (flax.nnx
modules), ``jaxlab.particles`` (mean-field Langevin particle systems: MFLD, mirror MFLD),
``jaxlab.experiments`` (the registered paper reproductions).
"""

__version__ = "0.1.0"

from jaxlab import distributed, nn, optim, particles, solvers  # noqa: E402

__all__ = ["__version__", "distributed", "nn", "optim", "particles", "solvers"]
