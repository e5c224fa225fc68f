"""Runs every ``benchmarks/bench_*.py`` side by side with its peer and writes JSON.

Usage: ``python -m benchmarks [NAME ...] [--size smoke|default] [--out results/benchmarks]``.
Each benchmark module defines ``run(size) -> dict`` with ``name``, ``peer`` and ``rows`` (each row
has ``case``, ``ratio`` = candidate time / peer time measured in the same run, and whether it
meets its target). Absolute times on shared machines mean little; the ratios are the result.
"""

from __future__ import annotations

import argparse
import importlib
import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent


def available() -> list[str]:
    return sorted(p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("names", nargs="*", help=f"default: all of {available()}")
    parser.add_argument("--size", choices=("smoke", "default"), default="default")
    parser.add_argument("--out", default="results/benchmarks")
    args = parser.parse_args(argv)
    names = args.names or available()
    unknown = sorted(set(names) - set(available()))
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; available: {available()}")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        module = importlib.import_module(f"benchmarks.bench_{name}")
        report = module.run(args.size)
        (out / f"{name}.json").write_text(json.dumps(report, indent=2) + "\n")
        print(f"\n{report['name']} (peer: {report['peer']}, size {args.size})")
        for row in report["rows"]:
            target = row.get("target_ratio")
            verdict = "meets" if row.get("meets_target") else "misses"
            extra = f" target <= {target:.2f}x: {verdict}" if target is not None else ""
            if row.get("floor_ratio") is not None:  # a memory-traffic floor (error_feedback)
                extra += f"; {row['floor_ratio']:.2f}x its floor"
            print(f"  {row['case']:<40} ratio {row['ratio']:.2f}x{extra}")
    print(f"\nwrote {out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
