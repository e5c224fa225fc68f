"""jaxlab's single-GP BO (both options) and RAMBO beside BoTorch's SingleTaskGP + LogEI.

Issue 38's comparison: on 2-D Levy, Branin and 6-D Hartmann (all made in code below, NumPy,
minimized), each seed starts every arm from the same scrambled-Sobol design (jaxlab's,
``num_init`` points) and runs ``num_iters`` proposals; the final simple regret ``best - f*`` is
compared on the log10 scale, per seed (paired). Arms:

* ``sgp``: ``bayes_opt(surrogate="sgp")``, the released baseline (type-II ML, EI, ``ξ = 0.1``);
* ``sgp_botorch``: ``bayes_opt(surrogate="sgp_botorch")``, BoTorch's defaults (priors,
  ``σ_n² >= 1e-4``, Normalize/Standardize), fit as BoTorch fits (``fit_sgp_botorch``'s
  ``"lbfgsb"``: SciPy's L-BFGS-B on the natural parameters from the priors' modes) and LogEI;
* ``rambo``: ``bayes_opt(surrogate="rambo")`` with the quick ``RamboConfig()`` (fewer seeds
  when ``--rambo-seeds`` says so: it is the slow arm on 2 cores);
* ``botorch``: BoTorch's standard loop, ``SingleTaskGP`` (its default priors and likelihood,
  ``Normalize`` to the box, ``Standardize``), ``fit_gpytorch_mll``, ``LogExpectedImprovement``
  maximized by ``optimize_acqf`` (10 restarts from 512 raw samples), float64.

Reported per function and arm: the median and mean log10 regret, each with a percentile
bootstrap 95% interval over seeds; per jaxlab arm the paired mean difference of log10 regret
against BoTorch (the log10 of the regret ratio) with its bootstrap interval, and the verdict
``better`` (interval below 0), ``parity`` (interval contains 0) or ``worse`` (interval above 0).
The issue's target: ``sgp_botorch`` at parity or better on each function.

BoTorch runs in a separate interpreter with torch and BoTorch (jaxlab's environment has neither):
``JAXLAB_BOTORCH_PYTHON=/path/to/python`` (default: this interpreter). Without torch/BoTorch
there, the script says so and exits with status 2; ``make test`` never needs them. Each finished
run is cached in ``<out>/botorch_peer_runs.json``, so an interrupted run resumes.

Run: ``JAXLAB_BOTORCH_PYTHON=... python -m benchmarks.peers_botorch [--seeds 10]
[--rambo-seeds 10] [--first-seed 0] [--num-iters 20] [--out results/benchmarks]``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

import numpy as np

ENV_PYTHON = "JAXLAB_BOTORCH_PYTHON"
ARMS = ("sgp", "sgp_botorch", "rambo", "botorch")
# arm -> bayes_opt's surrogate and extra keywords
_JAXLAB_ARMS = {
    "sgp": ("sgp", {}),
    "sgp_botorch": ("sgp_botorch", {}),
    "rambo": ("rambo", {}),
}
BOOTSTRAP = 10_000  # resamples of the percentile bootstrap (fixed seed: a rerun gives the same)
REGRET_FLOOR = 1e-12  # a regret below this (float64 round-off at the optimum) counts as 1e-12

# Hartmann-6 (Hartmann, 1972; the constants of Surjanovic and Bingham's library)
_H6_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])
_H6_A = np.array(
    [
        [10, 3, 17, 3.5, 1.7, 8],
        [0.05, 10, 17, 0.1, 8, 14],
        [3, 3.5, 1.7, 10, 17, 8],
        [17, 8, 0.05, 10, 0.1, 14],
    ]
)
_H6_P = 1e-4 * np.array(
    [
        [1312, 1696, 5569, 124, 8283, 5886],
        [2329, 4135, 8307, 3736, 1004, 9991],
        [2348, 1451, 3522, 2883, 3047, 6650],
        [4047, 8828, 8732, 5743, 1091, 381],
    ]
)


def levy(x):
    x = np.asarray(x, np.float64)
    w = 1.0 + (x - 1.0) / 4.0
    head = np.sin(np.pi * w[0]) ** 2
    mid = np.sum((w[:-1] - 1) ** 2 * (1 + 10 * np.sin(np.pi * w[:-1] + 1) ** 2))
    tail = (w[-1] - 1) ** 2 * (1 + np.sin(2 * np.pi * w[-1]) ** 2)
    return float(head + mid + tail)


def branin(x):
    x1, x2 = np.asarray(x, np.float64)
    b, c, t = 5.1 / (4 * np.pi**2), 5 / np.pi, 1 / (8 * np.pi)
    return float((x2 - b * x1**2 + c * x1 - 6) ** 2 + 10 * (1 - t) * np.cos(x1) + 10)


def hartmann6(x):
    x = np.asarray(x, np.float64)
    return float(-np.sum(_H6_ALPHA * np.exp(-np.sum(_H6_A * (x - _H6_P) ** 2, axis=1))))


# name -> (objective, bounds, optimal value)
PROBLEMS = {
    "levy2": (levy, [[-10.0, 10.0]] * 2, 0.0),
    "branin": (branin, [[-5.0, 10.0], [0.0, 15.0]], 0.39788735772973816),
    "hartmann6": (hartmann6, [[0.0, 1.0]] * 6, -3.3223680114155147),
}


def _botorch_worker() -> int:
    """Reads {"problem", "designs", "seeds", "num_iters"} on stdin; writes one JSON line per run."""
    import torch
    from botorch.acquisition import LogExpectedImprovement
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from botorch.models.transforms import Normalize, Standardize
    from botorch.optim import optimize_acqf
    from gpytorch.mlls import ExactMarginalLogLikelihood

    torch.set_num_threads(1)
    job = json.loads(sys.stdin.read())
    objective, box, _ = PROBLEMS[job["problem"]]
    bounds = torch.tensor(np.asarray(box).T, dtype=torch.float64)
    for seed, design in zip(job["seeds"], job["designs"], strict=True):
        torch.manual_seed(seed)
        x = torch.tensor(design, dtype=torch.float64)
        y = torch.tensor([[-objective(row)] for row in design], dtype=torch.float64)
        start = time.perf_counter()
        for _ in range(job["num_iters"]):
            model = SingleTaskGP(
                x,
                y,
                input_transform=Normalize(d=x.shape[-1], bounds=bounds),
                outcome_transform=Standardize(m=1),
            )
            fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
            acq = LogExpectedImprovement(model, best_f=y.max())
            cand, _ = optimize_acqf(acq, bounds=bounds, q=1, num_restarts=10, raw_samples=512)
            value = torch.tensor([[-objective(cand[0].numpy())]], dtype=torch.float64)
            x, y = torch.cat([x, cand]), torch.cat([y, value])
        seconds = time.perf_counter() - start
        print(json.dumps({"seed": seed, "best": float(-y.max()), "seconds": seconds}), flush=True)
    return 0


def _botorch_python() -> str | None:
    """The interpreter that has torch and BoTorch, or None (and why, printed)."""
    python = os.environ.get(ENV_PYTHON, sys.executable)
    if not pathlib.Path(python).exists():
        print(f"{ENV_PYTHON}={python} does not exist: point it at a Python with torch and BoTorch")
        return None
    probe = subprocess.run(
        [python, "-c", "import torch, botorch"], capture_output=True, text=True, check=False
    )
    if probe.returncode != 0:
        print(
            f"torch/BoTorch are not importable by {python}: install them there (make "
            f"bench-bo-peers installs the peers-bo extra, several GB) or set {ENV_PYTHON}"
        )
        return None
    return python


def bootstrap_interval(values, statistic=np.mean, *, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap 95% interval of ``statistic`` over the entries of ``values``."""
    values = np.asarray(values, np.float64)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(values), (BOOTSTRAP, len(values)))
    stats = statistic(values[idx], axis=1)
    return float(np.quantile(stats, 0.025)), float(np.quantile(stats, 0.975))


def verdict(interval) -> str:
    low, high = interval
    return "better" if high < 0 else "worse" if low > 0 else "parity"


def _jaxlab_runs(problem, arm, seeds, num_init, num_iters, cache, save):
    import jax

    from jaxlab.bo import bayes_opt, sobol_points

    objective, box, optimum = PROBLEMS[problem]
    for seed in seeds:
        key = f"{problem}/{arm}/{seed}"
        if key in cache:
            continue
        with jax.enable_x64(True):
            rng_key = jax.random.key(seed)
            surrogate, extra = _JAXLAB_ARMS[arm]
            result = bayes_opt(
                rng_key,
                objective,
                box,
                surrogate=surrogate,
                num_init=num_init,
                num_iters=num_iters,
                **extra,
            )
            design = sobol_points(jax.random.split(rng_key)[0], num_init, box)
        np.testing.assert_allclose(design, result.x[:num_init])  # the design BoTorch gets
        cache[key] = {
            "regret": float(result.best_so_far[-1] - optimum),
            "seconds": float(np.sum(result.seconds)),
        }
        save()
        print(f"  {key}: regret {cache[key]['regret']:.3g}", flush=True)


def _botorch_runs(python, problem, seeds, num_init, num_iters, cache, save):
    import jax

    from jaxlab.bo import sobol_points

    _, box, optimum = PROBLEMS[problem]
    todo = [s for s in seeds if f"{problem}/botorch/{s}" not in cache]
    if not todo:
        return
    with jax.enable_x64(True):
        designs = [
            sobol_points(jax.random.split(jax.random.key(s))[0], num_init, box).tolist()
            for s in todo
        ]
    job = {"problem": problem, "designs": designs, "seeds": todo, "num_iters": num_iters}
    here = pathlib.Path(__file__).resolve()
    proc = subprocess.Popen(
        [python, str(here), "--botorch-worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=here.parent,  # not the repository root: its botorch-free jaxlab is not needed there
    )
    proc.stdin.write(json.dumps(job))
    proc.stdin.close()
    for line in proc.stdout:
        run = json.loads(line)
        key = f"{problem}/botorch/{run['seed']}"
        cache[key] = {"regret": run["best"] - optimum, "seconds": run["seconds"]}
        save()
        print(f"  {key}: regret {cache[key]['regret']:.3g}", flush=True)
    if proc.wait() != 0:
        raise RuntimeError(f"the BoTorch worker failed with status {proc.returncode}")


def summarize(cache, seeds, rambo_seeds) -> dict:
    """Per problem and arm: median/mean log10 regret with intervals; paired ratios vs BoTorch."""
    rows = []
    for problem in PROBLEMS:
        logs = {}
        for arm in ARMS:
            arm_seeds = rambo_seeds if arm == "rambo" else seeds
            done = [s for s in arm_seeds if f"{problem}/{arm}/{s}" in cache]  # an interrupted run
            runs = [cache[f"{problem}/{arm}/{s}"] for s in done]
            if len(runs) < 2:
                continue
            logs[arm] = {
                s: float(np.log10(max(r["regret"], REGRET_FLOOR)))
                for s, r in zip(done, runs, strict=True)
            }
            values = list(logs[arm].values())
            row = {
                "problem": problem,
                "arm": arm,
                "seeds": len(values),
                "median_log10_regret": float(np.median(values)),
                "median_interval": bootstrap_interval(values, np.median),
                "mean_log10_regret": float(np.mean(values)),
                "mean_interval": bootstrap_interval(values),
                "seconds_per_run": float(np.mean([r["seconds"] for r in runs])),
            }
            rows.append(row)
        if "botorch" not in logs:
            continue
        for row in rows:
            arm = row["arm"]
            if row["problem"] != problem or arm == "botorch":
                continue
            paired = [logs[arm][s] - logs["botorch"][s] for s in logs[arm] if s in logs["botorch"]]
            interval = bootstrap_interval(paired)
            row.update(
                {
                    "paired_seeds": len(paired),
                    "log10_ratio_vs_botorch": float(np.mean(paired)),
                    "ratio_interval": interval,
                    "verdict_vs_botorch": verdict(interval),
                }
            )
    return {"name": "single-GP BO and RAMBO vs BoTorch", "rows": rows}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peers_botorch")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--rambo-seeds", type=int, default=10)
    # fresh seeds (e.g. 10 for seeds 10-19) confirm a change decided on the first ones
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--num-init", type=int, default=10)
    # 20 proposals keep BoTorch's 30 runs under ~30 min on 2 shared cores (the README's budget)
    parser.add_argument("--num-iters", type=int, default=20)
    parser.add_argument("--problems", default=",".join(PROBLEMS))
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--out", default="results/benchmarks")
    parser.add_argument("--botorch-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.botorch_worker:
        return _botorch_worker()
    arms = args.arms.split(",")
    python = _botorch_python() if "botorch" in arms else None
    if "botorch" in arms and python is None:
        return 2
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cache_path = out / "botorch_peer_runs.json"
    cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    tag = f"{args.num_init}+{args.num_iters}"
    if cache.get("_budget", tag) != tag:
        cache = {}  # another budget: start over
    cache["_budget"] = tag

    def save():
        tmp = cache_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(cache, indent=1) + "\n")
        tmp.replace(cache_path)

    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    rambo_seeds = list(range(args.first_seed, args.first_seed + args.rambo_seeds))
    for problem in args.problems.split(","):
        for arm in arms:
            if arm == "botorch":
                _botorch_runs(python, problem, seeds, args.num_init, args.num_iters, cache, save)
            else:
                arm_seeds = rambo_seeds if arm == "rambo" else seeds
                _jaxlab_runs(problem, arm, arm_seeds, args.num_init, args.num_iters, cache, save)
    report = summarize(cache, seeds, rambo_seeds)
    report["budget"] = f"{args.num_init} Sobol points + {args.num_iters} iterations"
    (out / "botorch_peer.json").write_text(json.dumps(report, indent=2) + "\n")
    for row in report["rows"]:
        lo, hi = row["mean_interval"]
        mlo, mhi = row["median_interval"]
        line = (
            f"  {row['problem']:<10} {row['arm']:<12} n={row['seeds']:>2}  median "
            f"{row['median_log10_regret']:6.2f} [{mlo:6.2f}, {mhi:6.2f}]  mean "
            f"{row['mean_log10_regret']:6.2f} [{lo:6.2f}, {hi:6.2f}]"
        )
        if "ratio_interval" in row:
            rlo, rhi = row["ratio_interval"]
            line += (
                f"  vs BoTorch {row['log10_ratio_vs_botorch']:+.2f} [{rlo:+.2f}, {rhi:+.2f}]"
                f" {row['verdict_vs_botorch']}"
            )
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
