"""MS-Flow's optimisation step against single shooting (D-Flow) as the number of ODE steps grows.

One batch of 8x8 inpainting problems (lower half missing, ``σ = 0.05``) under a flow-matching
velocity MLP (the experiment's 64 + 16 → 256 → 256 → 256 → 64 net; weights at initialisation:
memory and time do not depend on training). For each N the candidate is one vmapped
:class:`jaxlab.inverse.MSFlow` sweep (S = 4 segments of N/4 Heun steps, Jacobian-free) and the
peers are one vmapped :class:`jaxlab.inverse.SingleShooting` Adam step through all N steps,
storing every step's activations (``"every_step"``, D-Flow as published) and storing one state
per step with diffrax's ``RecursiveCheckpointAdjoint(checkpoints=N)`` (``"checkpointed"``). All
three are compiled ahead (``memory_analysis()`` of the very executables that are timed), then
timed interleaved in the same run (medians).

Rows: ``ratio`` = MS-Flow step time / D-Flow step time, and ``memory_ratio`` = MS-Flow temp bytes
/ D-Flow temp bytes, per N and per D-Flow variant. The claim: D-Flow's memory grows with N,
MS-Flow's does not (``msflow_temp_bytes`` is flat), and a sweep costs about N forward steps
against D-Flow's forward and backward passes. There is no speed target (the issue names none).

Run: ``python -m benchmarks msflow`` or ``python -m benchmarks.bench_msflow``.
"""

from __future__ import annotations

import json
import sys

import jax
import jax.numpy as jnp
from flax import nnx

from benchmarks._timing import interleaved_times, median_times
from jaxlab.inverse import (
    MSFlow,
    SingleShooting,
    VelocityMLP,
    inpainting_operator,
    lower_half_mask,
    measure,
    split_velocity,
    step_memory,
)

__all__ = ["run"]

_SIZES = {
    # hidden widths, batch, N grid, D-Flow adjoints, timed rounds, warm-up rounds
    "smoke": ((32,), 2, (4, 8), ("every_step",), 3, 1),
    "default": ((256, 256, 256), 32, (16, 32, 64, 128), ("every_step", "checkpointed"), 7, 2),
}
_SEGMENTS = 4
_SIGMA = 0.05


def _vmapped(solver, init_fn, z0, y, op, vparams):
    update = jax.vmap(solver.update, in_axes=(0, 0, 0, None, None))
    params, state = init_fn(z0, y)
    report = step_memory(update, params, state, y, op, vparams)
    args = (params, state, y, op, vparams)
    return report, (lambda: report.compiled(*args))


def run(size: str = "default") -> dict:
    """Times and measures one MS-Flow sweep against one D-Flow step for each N.

    Args:
      size: ``"default"`` (the experiment's net, 32 images, N = 16..128) or ``"smoke"`` (a
        32-wide net, 2 images, N = 4 and 8; the every-step D-Flow only: seconds).

    Returns:
      ``{"name", "peer", "size", "shape", "rows": [{"case", "step_time_s", "peer_step_time_s",
      "ratio", "target_ratio", "meets_target", "temp_bytes", "peer_temp_bytes",
      "memory_ratio", "N"}, ...], "msflow_temp_bytes", "dflow_temp_bytes"}``.
    """
    if size not in _SIZES:
        raise ValueError(f"size must be one of {sorted(_SIZES)}, got {size!r}")
    hidden, batch, steps, adjoints, repeats, warmup = _SIZES[size]
    model = VelocityMLP(64, hidden, rngs=nnx.Rngs(0))
    velocity_fn, vparams = split_velocity(model)
    op = inpainting_operator(lower_half_mask((8, 8)))
    x_key, noise_key, z_key = jax.random.split(jax.random.key(0), 3)
    x = jnp.clip(jax.random.normal(x_key, (batch, 64)), -1.0, 1.0)
    y = jax.vmap(lambda k, xi: measure(k, xi, op, _SIGMA))(jax.random.split(noise_key, batch), x)
    z0 = jax.random.normal(z_key, (batch, 64))
    rows = []
    memory = {"msflow": {}, **{a: {} for a in adjoints}}
    for n in steps:
        ms = MSFlow(velocity_fn, _SIGMA, _SEGMENTS, n // _SEGMENTS)

        @jax.jit
        def ms_init(z0, y, ms=ms):
            traj = jax.vmap(ms.init_params, in_axes=(0, None))(z0, vparams)
            return traj, jax.vmap(ms.init_state, in_axes=(0, 0, None, None))(traj, y, op, vparams)

        ms_report, ms_call = _vmapped(ms, ms_init, z0, y, op, vparams)
        memory["msflow"][n] = ms_report.temp_bytes
        fns = {"msflow": ms_call}
        reports = {}
        for adjoint in adjoints:
            ss = SingleShooting(velocity_fn, _SIGMA, num_steps=n, adjoint=adjoint)
            init = jax.vmap(ss.init_state, in_axes=(0, 0, None, None))
            reports[adjoint], fns[adjoint] = _vmapped(
                ss,
                lambda z0, y, ss=ss, init=init: (z0, init(z0, y, op, vparams)),
                z0,
                y,
                op,
                vparams,
            )
            memory[adjoint][n] = reports[adjoint].temp_bytes
        times = median_times(interleaved_times(fns, repeats, warmup))
        for adjoint in adjoints:
            rows.append(
                {
                    "case": f"N={n}: MS-Flow sweep vs D-Flow ({adjoint}) step",
                    "N": n,
                    "step_time_s": times["msflow"],
                    "peer_step_time_s": times[adjoint],
                    "ratio": times["msflow"] / times[adjoint],
                    "target_ratio": None,
                    "meets_target": None,
                    "temp_bytes": ms_report.temp_bytes,
                    "peer_temp_bytes": reports[adjoint].temp_bytes,
                    "memory_ratio": ms_report.temp_bytes / max(reports[adjoint].temp_bytes, 1),
                    "memory_source": ms_report.source,
                }
            )
    return {
        "name": "msflow",
        "peer": "D-Flow (single shooting) through all N steps: every step's activations stored"
        + (" and one state per step (diffrax, checkpointed)" if "checkpointed" in adjoints else ""),
        "size": size,
        "shape": {"batch": batch, "dim": 64, "hidden": list(hidden), "segments": _SEGMENTS},
        "msflow_temp_bytes": memory["msflow"],
        "dflow_temp_bytes": {a: memory[a] for a in adjoints},
        "rows": rows,
    }


if __name__ == "__main__":
    json.dump(run(sys.argv[1] if len(sys.argv) > 1 else "default"), sys.stdout, indent=2)
    print()
