"""APUB solve time: the L-shaped method against the extensive-form LP as the bootstrap size grows.

One product-mix data set (``N`` scenarios, :func:`jaxlab.stochprog.product_mix_config` of any
size ``I x J``) and, per bootstrap size ``M``, one fixed bootstrap matrix. The candidate is
:class:`jaxlab.solvers.LShaped` (single cuts, and multi cuts as a second row) with the closed-form
recourse in JAX; the peer is :func:`jaxlab.stochprog.solve_extensive_form` (the whole bootstrap
LP, one HiGHS solve, building included). Both are timed interleaved in the same run (medians);
``ratio`` = L-shaped / extensive form, so a ratio below 1 means decomposition wins, and the
report's ``crossover_M`` is the smallest ``M`` where single cuts win. Both return the same
optimum (checked here to 1e-6 relative); the rows also carry the L-shaped iteration counts.

For context, the paper (Table 1: ``N = 120``, ``M = 5000``, ``I = 20``, ``J = 8``, Gurobi, its own
hours matrix) reports SAA 5.7 s in 8 iterations and APUB 7.2 s in 9.2 iterations; this
benchmark's default is that size with the reconstructed hours matrix of the note.

Run: ``python -m benchmarks apub`` or ``python -m benchmarks.bench_apub``.
"""

from __future__ import annotations

import json
import sys

import jax
import numpy as np

from benchmarks._timing import interleaved_times, median_times
from jaxlab.solvers import LShaped
from jaxlab.stochprog import (
    bootstrap_multiplicities,
    product_mix_config,
    product_mix_model,
    product_mix_recourse,
    sample_product_mix,
    solve_extensive_form,
)

__all__ = ["run"]

_SIZES = {
    # (I, J, N, bootstrap sizes M), timed rounds, warm-up rounds
    "smoke": ((4, 2, 20, (100, 400)), 1, 1),
    "default": ((20, 8, 120, (1000, 2000, 3000, 5000)), 3, 1),
}
_ALPHA = 0.1
_AGREEMENT = 1e-6


def run(size: str = "default", *, instance: tuple[int, int, int] | None = None) -> dict:
    """Times L-shaped (single and multi cuts) against the extensive form for each ``M``.

    Args:
      size: ``"default"`` (20 products x 8 stations, N = 120, M = 1000..5000) or ``"smoke"``
        (4 x 2, N = 20, M = 100 and 400: seconds).
      instance: ``(products, stations, N)`` to override the size's instance.

    Returns:
      ``{"name", "peer", "size", "shape", "crossover_M", "rows": [{"case", "step_time_s",
      "peer_step_time_s", "ratio", "target_ratio", "meets_target", "iterations",
      "relative_gap"}, ...]}``.
    """
    if size not in _SIZES:
        raise ValueError(f"size must be one of {sorted(_SIZES)}, got {size!r}")
    (i, j, n, sizes), repeats, warmup = _SIZES[size]
    if instance is not None:
        i, j, n = instance
    rows, crossover = [], None
    with jax.enable_x64(True):
        config = product_mix_config(i, j)
        scenarios = sample_product_mix(jax.random.key(0), n, config)
        model = product_mix_model(scenarios, config)
        hours = np.asarray(config.hours)
        recourse = jax.jit(product_mix_recourse)
        closed_form = lambda x: recourse(x, scenarios, hours)  # noqa: E731
        for m in sizes:
            v = np.asarray(bootstrap_multiplicities(jax.random.key(m), n, m))
            results = {}

            def timed(name, fn):
                def call():
                    results[name] = fn()
                    return 0

                return call

            fns = {
                "extensive": timed(
                    "extensive",
                    lambda v=v: solve_extensive_form(model, alpha=_ALPHA, multiplicities=v),
                ),
                **{
                    cuts: timed(
                        cuts,
                        lambda v=v, cuts=cuts: LShaped(
                            model,
                            alpha=_ALPHA,
                            multiplicities=v,
                            cuts=cuts,
                            recourse_fun=closed_form,
                        ).run(),
                    )
                    for cuts in ("single", "multi")
                },
            }
            times = median_times(interleaved_times(fns, repeats, warmup))
            reference = results["extensive"].value
            for cuts in ("single", "multi"):
                state = results[cuts].state
                gap = abs(state.value - reference) / max(1.0, abs(reference))
                if gap > _AGREEMENT:
                    raise AssertionError(f"M={m} {cuts}: L-shaped gap {gap:.2e} to the LP")
                ratio = times[cuts] / times["extensive"]
                if cuts == "single" and crossover is None and ratio < 1:
                    crossover = m
                rows.append(
                    {
                        "case": f"M={m}: L-shaped {cuts} cut vs extensive form",
                        "step_time_s": times[cuts],
                        "peer_step_time_s": times["extensive"],
                        "ratio": ratio,
                        "target_ratio": None,
                        "meets_target": None,
                        "iterations": int(state.iter_num),
                        "relative_gap": gap,
                        "extensive_form_size": [
                            results["extensive"].num_variables,
                            results["extensive"].num_constraints,
                        ],
                    }
                )
    return {
        "name": "apub",
        "peer": "the extensive-form bootstrap LP (HiGHS), same data and V",
        "size": size,
        "shape": {"products": i, "stations": j, "N": n, "alpha": _ALPHA, "M": list(sizes)},
        "crossover_M": crossover,
        "rows": rows,
    }


if __name__ == "__main__":
    json.dump(run(sys.argv[1] if len(sys.argv) > 1 else "default"), sys.stdout, indent=2)
    print()
