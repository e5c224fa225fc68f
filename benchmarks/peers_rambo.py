"""jaxlab's RAMBO sampler beside the authors' code on the same data (issue 38).

Both samplers run on the same 20 scrambled-Sobol points of 6-D Levy (the BO surrogates' sign:
``-f``), standardized once by jaxlab (population spreads) and handed to both, under the same
priors (``σ_f ~ IG(3, 2)``, ``ℓ ~ IG(3, 1.5)``, ``σ_n ~ IG(3, 0.3)``), ``α = 2``, the authors'
likelihood (``variant="reference"``: latent predictive variance, new-regime standard deviation
``σ_f + σ_n``), k-means start, MAP refits (30 Adam steps of 0.01) every 5 sweeps and no
split-merge moves; jaxlab gets ``max_clusters = n`` slots, so its regime count is never capped
(the authors' code has no cap). The authors' side is their ``DPMGPR`` driven sweep for sweep as
its ``fit`` does (``benchmarks/_rambo_peer_torch.py``; float32, one torch thread), jaxlab's is
:func:`jaxlab.bo.rambo_fit` (float64), ``chains`` independent chains.

Compared over the sweeps after ``burn_in``:

* the number of occupied regimes: its distribution and mean; the mean's Monte Carlo standard
  error by batch means (``batches`` batches per chain); the two sides agree when the means
  differ by at most ``K_Z`` combined standard errors;
* the co-occurrence matrix (posterior similarity: the fraction of sweeps in which two points
  share a regime), per pair with batch-means standard errors; the sides agree when no pair's
  difference exceeds ``CO_Z`` combined standard errors (Bonferroni over the 190 pairs at a 1%
  two-sided level);
* seconds per sweep of both, in the same run (the authors' includes their per-sweep total
  log likelihood, as their ``fit`` computes it; jaxlab's is a compiled 1000-sweep fit divided
  by its sweeps).

The authors' code is not in this repository: fetch AnthonyZhangYan/RAMBO (the commit this was
run with is ``PEER_COMMIT``) into a folder outside it and point ``JAXLAB_RAMBO_PEER`` at it;
``JAXLAB_TORCH_PYTHON`` names a Python with torch, tqdm and scipy. Neither is part of
``make test``; without them this exits 2 saying what is missing. Their sampler costs about
0.3-1.3 s a sweep on a 2-core CPU, so 1,000 sweeps take several to twenty minutes.

Run: ``python -m benchmarks.peers_rambo [--sweeps 1000] [--burn-in 200] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

from benchmarks._peers import torch_python_problem

HERE = pathlib.Path(__file__).resolve().parent
PEER_ENV, TORCH_ENV = "JAXLAB_RAMBO_PEER", "JAXLAB_TORCH_PYTHON"
PEER_COMMIT = "7c132cceb377c1ed79427fae14a7345dda2696cc"  # AnthonyZhangYan/RAMBO, 2026-07-10
NUM_POINTS, DIM, ALPHA, OPTIM_EVERY = 20, 6, 2.0, 5
K_Z = 3.0  # mean occupied regimes: agreement within 3 combined Monte Carlo standard errors
PAIR_LEVEL = 0.01  # co-occurrence: two-sided level of the family of pairwise comparisons


def check_peer(environ=os.environ) -> str | None:
    """A message saying what is missing, or None when the peer can run."""
    peer = environ.get(PEER_ENV)
    if not peer or not (pathlib.Path(peer) / "models" / "rambo.py").is_file():
        return (
            f"{PEER_ENV} must name a checkout of AnthonyZhangYan/RAMBO (holding models/rambo.py; "
            f"commit {PEER_COMMIT[:10]} was used), outside this repository; got {peer!r}"
        )
    return torch_python_problem(environ, TORCH_ENV, ("torch", "tqdm", "scipy"))


def _data(seed):
    import jax

    from jaxlab.bo import bo_problem, sobol_points, standardize

    problem = bo_problem("levy", DIM)
    x = sobol_points(jax.random.key(seed), NUM_POINTS, problem.bounds)
    y = -np.array([float(problem.objective(row)) for row in x])  # the BO surrogates maximize
    with jax.enable_x64(True):
        xs, ys, _ = standardize(jax.numpy.asarray(x), jax.numpy.asarray(y))
        return np.asarray(xs, np.float64), np.asarray(ys, np.float64)


def _occupied(assignments):
    return np.array([len(np.unique(z)) for z in assignments])


def _co_occurrence(assignments):
    z = np.asarray(assignments)
    return (z[:, :, None] == z[:, None, :]).mean(0)


def _batch_stats(chains, batches, stat):
    """Mean of ``stat`` over every post-burn-in sweep of every chain, and its batch-means
    standard error (``batches`` consecutive batches per chain, their means' spread)."""
    means = []
    for chain in chains:
        for part in np.array_split(np.asarray(chain), batches):
            means.append(stat(part))
    means = np.array(means)
    return means.mean(0), means.std(0, ddof=1) / np.sqrt(len(means))


def _jaxlab_side(xs, ys, sweeps, burn_in, chains, seed):
    import jax

    from jaxlab.bo import RamboConfig, rambo_fit

    config = RamboConfig(
        num_sweeps=sweeps,
        burn_in=burn_in,
        hyper_update_every=OPTIM_EVERY,
        max_clusters=NUM_POINTS,
        variant="reference",
    )
    with jax.enable_x64(True):
        fit = jax.jit(lambda k: rambo_fit(k, xs, ys, config=config, alpha=ALPHA))
        jax.block_until_ready(fit(jax.random.key(10_000 + seed)))  # compile
        samples, co, seconds = [], [], []
        for c in range(chains):
            start = time.perf_counter()
            _, info = jax.block_until_ready(fit(jax.random.key(seed * 100 + c)))
            seconds.append((time.perf_counter() - start) / sweeps)
            samples.append(np.asarray(info.assignments)[burn_in:])
            co.append(np.asarray(info.co_occurrence))
            assert int(info.nonfinite) == 0
    # The fit's own co-occurrence is the mean over its stored post-burn-in samples.
    for chain, matrix in zip(samples, co, strict=True):
        np.testing.assert_allclose(_co_occurrence(chain), matrix, atol=1e-12)
    return samples, float(np.median(seconds))


def _authors_side(xs, ys, sweeps, seed):
    with tempfile.TemporaryDirectory() as tmp:
        data, out = pathlib.Path(tmp) / "data.npz", pathlib.Path(tmp) / "out.npz"
        np.savez(data, xs=xs, ys=ys, alpha=ALPHA, sweeps=sweeps, optim_every=OPTIM_EVERY,
                 seed=seed)  # fmt: skip
        command = [os.environ[TORCH_ENV], str(HERE / "_rambo_peer_torch.py"),
                   os.environ[PEER_ENV], str(data), str(out)]  # fmt: skip
        subprocess.run(command, check=True)
        result = np.load(out)
        return result["assignments"], result["seconds"], str(result["torch"])


def _peer_commit(path) -> str | None:
    probe = subprocess.run(
        ["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    return probe.stdout.strip() if probe.returncode == 0 else None


def run(sweeps: int = 1000, burn_in: int = 200, chains: int = 4, batches: int = 10,
        seed: int = 0) -> dict:  # fmt: skip
    missing = check_peer()
    if missing:
        raise RuntimeError(missing)
    from scipy.stats import norm

    xs, ys = _data(seed)
    theirs, their_seconds, torch_version = _authors_side(xs, ys, sweeps, seed)
    ours, our_seconds = _jaxlab_side(xs, ys, sweeps, burn_in, chains, seed)
    theirs = [theirs[burn_in:]]
    sides = {"authors": theirs, "jaxlab": ours}
    report = {
        "name": "rambo sampler vs the authors' code",
        "peer_commit": _peer_commit(os.environ[PEER_ENV]) or f"not a git checkout ({PEER_COMMIT}?)",
        "data": f"{NUM_POINTS} scrambled-Sobol points of {DIM}-D Levy (seed {seed}), standardized",
        "sweeps": sweeps,
        "burn_in": burn_in,
        "chains": {"authors": 1, "jaxlab": chains},
        "batches_per_chain": batches,
        "torch": torch_version,
    }
    stats = {}
    for name, chains_ in sides.items():
        k_mean, k_se = _batch_stats(chains_, batches, lambda part: _occupied(part).mean())
        co, co_se = _batch_stats(chains_, batches, _co_occurrence)
        counts = np.bincount(np.concatenate([_occupied(c) for c in chains_]),
                             minlength=NUM_POINTS + 1)  # fmt: skip
        stats[name] = dict(k_mean=k_mean, k_se=k_se, co=co, co_se=co_se,
                           k_distribution=(counts / counts.sum()).tolist())  # fmt: skip
    a, b = stats["authors"], stats["jaxlab"]
    k_z = abs(a["k_mean"] - b["k_mean"]) / np.hypot(a["k_se"], b["k_se"])
    upper = np.triu_indices(NUM_POINTS, 1)
    pair_se = np.hypot(a["co_se"], b["co_se"])[upper]
    pair_z = np.abs(a["co"] - b["co"])[upper] / np.maximum(pair_se, 1e-12)
    co_z = float(norm.ppf(1 - PAIR_LEVEL / 2 / len(pair_z)))
    report["occupied_regimes"] = {
        name: {"mean": float(s["k_mean"]), "mc_se": float(s["k_se"]),
               "distribution": {k: round(p, 4) for k, p in enumerate(s["k_distribution"]) if p}}
        for name, s in stats.items()
    }  # fmt: skip
    report["occupied_regimes"]["z"] = float(k_z)
    report["occupied_regimes"]["agree"] = bool(k_z <= K_Z)
    report["co_occurrence"] = {
        "mean_abs_difference": float(np.abs(a["co"] - b["co"])[upper].mean()),
        "max_abs_difference": float(np.abs(a["co"] - b["co"])[upper].max()),
        "median_mc_se": {n: float(np.median(s["co_se"][upper])) for n, s in stats.items()},
        "max_z": float(pair_z.max()),
        "pairs_beyond": int(np.sum(pair_z > co_z)),
        "z_threshold": co_z,
        "agree": bool(pair_z.max() <= co_z),
        "authors": np.round(a["co"], 4).tolist(),
        "jaxlab": np.round(b["co"], 4).tolist(),
    }
    report["seconds_per_sweep"] = {
        "authors_mean": float(np.mean(their_seconds)),
        "authors_median": float(np.median(their_seconds)),
        "jaxlab": our_seconds,
        "speedup": float(np.mean(their_seconds) / our_seconds),
    }
    return report


def _print(report) -> None:
    k, co, t = report["occupied_regimes"], report["co_occurrence"], report["seconds_per_sweep"]
    print(f"{report['sweeps']} sweeps, burn-in {report['burn_in']}, peer {report['peer_commit']}")
    for name in ("authors", "jaxlab"):
        print(f"  {name:<8} occupied regimes {k[name]['mean']:.3f} +/- {k[name]['mc_se']:.3f} "
              f"{k[name]['distribution']}")  # fmt: skip
    print(f"  regimes: z = {k['z']:.2f} (agree: {k['agree']})")
    print(f"  co-occurrence: mean |diff| {co['mean_abs_difference']:.4f}, max |diff| "
          f"{co['max_abs_difference']:.4f}, max z {co['max_z']:.2f} vs {co['z_threshold']:.2f}, "
          f"{co['pairs_beyond']} pairs beyond (agree: {co['agree']})")  # fmt: skip
    print(f"  seconds per sweep: authors {t['authors_mean']:.3f} (median "
          f"{t['authors_median']:.3f}), jaxlab {t['jaxlab']:.5f}, {t['speedup']:.0f}x")  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peers_rambo")
    parser.add_argument("--sweeps", type=int, default=1000)
    parser.add_argument("--burn-in", type=int, default=200)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--out", default="results/benchmarks")
    args = parser.parse_args(argv)
    missing = check_peer()
    if missing:
        print(f"peers_rambo: cannot run the authors' side: {missing}", file=sys.stderr)
        return 2
    report = run(args.sweeps, args.burn_in, args.chains, args.batches)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rambo_peer.json").write_text(json.dumps(report, indent=2) + "\n")
    _print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
