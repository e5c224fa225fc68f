"""The ``jaxlab`` command: ``list``, ``run NAME`` and ``reproduce``.

Exit status: 0 when every experiment ran (a ``fail`` verdict is an honest result, not a crash),
1 when any experiment raised (status ``error``), 2 for bad input (unknown experiment or profile,
unwritable output folder), 130 when interrupted.
"""

from __future__ import annotations

import argparse
import sys

from jaxlab import experiments as registry
from jaxlab._src.runner import check_output_dir

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jaxlab", description="Run the reproductions of jaxlab's paper claims."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the registered experiments and their claims")

    run = sub.add_parser("run", help="run one experiment")
    run.add_argument("name")
    run.add_argument("--profile", choices=registry.PROFILES, default="quick")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--out", default="results", help="output folder (default: results)")

    rep = sub.add_parser("reproduce", help="run experiments (default: all) and write REPORT.md")
    rep.add_argument("names", nargs="*")
    rep.add_argument("--profile", choices=registry.PROFILES, default="quick")
    rep.add_argument("--seed", type=int, default=0)
    rep.add_argument("--out", default="results", help="output folder (default: results)")
    rep.add_argument(
        "--resume", action="store_true", help="keep results that match the profile and code"
    )
    return parser


def _summary_table(records, console) -> None:
    from rich.table import Table

    table = Table(title="jaxlab results")
    for col in ("experiment", "profile", "verdict", "time (s)", "reason"):
        table.add_column(col)
    colours = {"pass": "green", "unresolved": "cyan", "fail": "yellow", "error": "red"}
    for rec in records:
        status = rec["verdict"]["status"]
        table.add_row(
            rec["name"],
            rec["profile"],
            f"[{colours.get(status, 'white')}]{status}[/]",
            f"{rec.get('wall_time_s', 0.0):.1f}",
            rec["verdict"]["reason"],
        )
    console.print(table)


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console

    args = _parser().parse_args(argv)
    console = Console()
    err = Console(stderr=True, soft_wrap=True)

    if args.command == "list":
        for name in registry.names():
            console.print(f"[bold]{name}[/]: {registry.get(name).claim}")
        return 0

    requested = [args.name] if args.command == "run" else list(args.names)
    for name in requested:
        if name not in registry.names():
            err.print(f"jaxlab: error: {registry.unknown_name_message(name)}")
            return 2
    try:
        check_output_dir(args.out)
    except OSError as e:
        err.print(f"jaxlab: error: {e}")
        return 2

    try:
        if args.command == "run":
            records = [
                registry.run_experiment(
                    args.name, profile=args.profile, seed=args.seed, out_dir=args.out
                )
            ]
        else:
            records = registry.reproduce(
                requested or None,
                profile=args.profile,
                seed=args.seed,
                out_dir=args.out,
                resume=args.resume,
                console=err,
            )
    except KeyboardInterrupt:
        err.print("jaxlab: interrupted; finished results are intact")
        return 130
    _summary_table(records, console)
    if args.command == "reproduce":
        console.print(f"report: {args.out}/REPORT.md")
    return 1 if any(r["verdict"]["status"] == "error" for r in records) else 0


if __name__ == "__main__":
    sys.exit(main())
