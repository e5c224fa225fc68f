"""CreDRO ensemble training throughput: members vmapped against a Python loop over members.

:func:`jaxlab.uncertainty.train_credal_ensemble` trains ``M`` MLP members (64 → H → 5, Adam,
batch 64, CVaR levels spread over ``(0.2, 1]``) in one jitted program, members stacked on a
leading axis (``jax.vmap``). The peer trains the same members one at a time: the same function
with ``M = 1``, compiled once and called ``M`` times. ``step_time_s`` is the candidate's time
per ensemble step (all members), ``peer_step_time_s`` the loop's; ``ratio`` = vmapped / loop,
timed interleaved in one run. No fixed target: vmapping should win once per-call overhead
dominates (small members) and approach 1 when the members' matmuls saturate the cores.

Run: ``python -m benchmarks credro`` or ``python -m benchmarks.bench_credro``.
"""

from __future__ import annotations

import json
import sys

import jax
import jax.numpy as jnp

from benchmarks._timing import interleaved_times, median_times
from jaxlab.uncertainty import digits_shift_splits, ensemble_init, mlp_apply, train_credal_ensemble

__all__ = ["run"]

# size -> (hidden widths, member counts, steps per timed call, repeats, warmup)
_SIZES = {
    "smoke": ((16,), (2,), 5, 2, 1),
    "default": ((128, 512), (5, 10), 200, 5, 1),
}


def run(size: str = "default") -> dict:
    """Times vmapped ensemble training against a loop over members.

    Args:
      size: ``"default"`` (hidden 128 and 512, 5 and 10 members, 200 steps) or ``"smoke"``.

    Returns:
      ``{"name", "peer", "size", "rows": [{"case", "hidden", "members", "step_time_s",
      "peer_step_time_s", "ratio", "members_per_second", "target_ratio", "meets_target"}]}``.
    """
    if size not in _SIZES:
        raise ValueError(f"size must be one of {sorted(_SIZES)}, got {size!r}")
    hiddens, member_counts, steps, repeats, warmup = _SIZES[size]
    splits = digits_shift_splits(jax.random.key(0))
    key = jax.random.key(1)
    rows = []
    for hidden in hiddens:
        for members in member_counts:
            init = ensemble_init(jax.random.fold_in(key, hidden), members, (64, hidden, 5))
            levels = jnp.linspace(1.0, 0.2, members)

            @jax.jit
            def train(init, levels):
                return train_credal_ensemble(mlp_apply, init, splits.train_x, splits.train_y,
                                             key, levels=levels, steps=steps)[0]  # fmt: skip

            singles = [(jax.tree.map(lambda v, m=m: v[m : m + 1], init), levels[m : m + 1])
                       for m in range(members)]  # fmt: skip
            fns = {
                "vmapped": lambda: train(init, levels),
                "loop": lambda: [train(p, lv) for p, lv in singles],
            }
            times = median_times(interleaved_times(fns, repeats, warmup))
            rows.append({
                "case": f"hidden {hidden}, {members} members: vmapped vs loop",
                "hidden": hidden,
                "members": members,
                "step_time_s": times["vmapped"] / steps,
                "peer_step_time_s": times["loop"] / steps,
                "ratio": times["vmapped"] / times["loop"],
                "members_per_second": members * steps / times["vmapped"],
                "target_ratio": None,
                "meets_target": None,
            })  # fmt: skip
    return {
        "name": "credro",
        "peer": "the same members trained one at a time (train_credal_ensemble with M = 1)",
        "size": size,
        "shape": {"batch": 64, "inputs": 64, "classes": 5, "steps": steps},
        "rows": rows,
    }


if __name__ == "__main__":
    json.dump(run(sys.argv[1] if len(sys.argv) > 1 else "default"), sys.stdout, indent=2)
    print()
