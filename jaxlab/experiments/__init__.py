"""The registered reproductions, one module per paper claim.

Importing a module registers its experiment; ``jaxlab.experiments.get(name)`` loads them all.
"""

from jaxlab._src.experiments import (
    PROFILES,
    Experiment,
    ExperimentConfig,
    NullProgress,
    Part,
    Progress,
    Result,
    check,
    get,
    names,
    register,
)

__all__ = [
    "PROFILES",
    "Experiment",
    "ExperimentConfig",
    "NullProgress",
    "Part",
    "Progress",
    "Result",
    "check",
    "get",
    "names",
    "register",
]
