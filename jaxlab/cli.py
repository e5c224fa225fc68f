"""The ``jaxlab`` command: ``list``, ``run NAME``, ``reproduce`` and ``plan``.

A ``full`` profile runs in parts that each fit one accelerator call: ``run NAME --profile full
--part P`` runs one part (under ``results/NAME/parts/P/``), ``reproduce --profile full --resume``
runs the parts not yet on disk, and ``plan --profile full [NAME ...]`` prints every part with its
estimated time on the CPU and on the device, and the totals.

Exit status: 0 when every experiment ran (a ``fail`` verdict is an honest result, not a crash),
1 when any experiment raised or ran past its wall limit (status ``error``), 2 for bad input
(unknown experiment or profile, a seed outside [0, 2**32), unwritable output folder), 130 when
interrupted, at any time: the heavy imports (JAX, SciPy, the experiments) happen inside
:func:`main` under its own SIGINT handler, so an interrupt during them ends the same way as one
during a run.

``--timeout SECONDS`` bounds each experiment's wall time (default per profile:
``DEFAULT_TIMEOUT_S``): each experiment runs in its own child process, which is stopped past the
limit and recorded as ``error: timed out after N s`` while the others still run. ``--timeout 0``
runs every experiment in this process with no limit (for a debugger).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

__all__ = ["main"]

# The profiles, repeated here so that parsing needs no import of JAX (experiments.PROFILES is
# the source; tests/test_runner.py checks they agree).
PROFILES = ("smoke", "quick", "full")
# jax.random.key takes a 32-bit seed when x64 is off (2**32 would run as seed 0); the runner's
# MAX_SEED is the source, repeated so that parsing needs no import of JAX (checked in tests).
MAX_SEED = 2**32 - 1
# The runner's DEFAULT_TIMEOUT_S (the source, with its reason), repeated for the same reason.
DEFAULT_TIMEOUT_S = {"smoke": 600.0, "quick": 3600.0, "full": 6 * 3600.0}


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"seed must be an integer, got {text!r}") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"seed must lie in [0, 2**32 - 1], got {value}")
    return value


def _timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"timeout must be a number of seconds, got {text!r}"
        ) from None
    if not (value >= 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(
            f"timeout must be finite and >= 0 seconds (0: no limit), got {text}"
        )
    return value


def _add_timeout(parser: argparse.ArgumentParser) -> None:
    defaults = ", ".join(f"{p} {DEFAULT_TIMEOUT_S[p]:g}" for p in PROFILES)
    parser.add_argument(
        "--timeout",
        type=_timeout,
        default=None,
        help=f"wall limit per experiment in seconds (default per profile: {defaults}); "
        "0 runs in this process with no limit",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jaxlab", description="Run the reproductions of jaxlab's paper claims."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the registered experiments and their claims")

    run = sub.add_parser("run", help="run one experiment")
    run.add_argument("name")
    run.add_argument("--profile", choices=PROFILES, default="quick")
    run.add_argument("--seed", type=_seed, default=0)
    run.add_argument("--out", default="results", help="output folder (default: results)")
    run.add_argument(
        "--part",
        default=None,
        help="run one part of the full profile (`jaxlab plan` lists them); the verdict is "
        "merged when every part is in",
    )
    _add_timeout(run)

    rep = sub.add_parser("reproduce", help="run experiments (default: all) and write REPORT.md")
    rep.add_argument("names", nargs="*")
    rep.add_argument("--profile", choices=PROFILES, default="quick")
    rep.add_argument("--seed", type=_seed, default=0)
    rep.add_argument("--out", default="results", help="output folder (default: results)")
    rep.add_argument(
        "--resume", action="store_true", help="keep results that match the profile and code"
    )
    _add_timeout(rep)

    plan = sub.add_parser(
        "plan", help="print the full profile's parts with their estimated CPU and device times"
    )
    plan.add_argument("names", nargs="*")
    plan.add_argument("--profile", choices=("full",), default="full")
    plan.add_argument("--out", default=None, help="mark the parts already stored under this folder")
    return parser


def _summary_table(records, console) -> None:
    from rich.table import Table

    table = Table(title="jaxlab results")
    for col in ("experiment", "profile", "verdict", "time (s)", "CPU (s)", "reason"):
        table.add_column(col)
    colours = {"pass": "green", "unresolved": "cyan", "fail": "yellow", "error": "red"}
    for rec in records:
        status = rec["verdict"]["status"]
        table.add_row(
            rec["name"],
            rec["profile"],
            f"[{colours.get(status, 'white')}]{status}[/]",
            f"{rec.get('wall_time_s') or 0.0:.1f}",
            f"{rec.get('cpu_time_s') or 0.0:.1f}",
            rec["verdict"]["reason"],
        )
    console.print(table)


class _Interrupted(Exception):
    pass


_STATE = {"importing": True, "interrupted": False}
_INTERRUPTED_MESSAGE = "jaxlab: interrupted; finished results are intact\n"


def _on_sigint(signum, frame):
    _STATE["interrupted"] = True
    if _STATE["importing"]:
        # Nothing is written yet, and an exception raised here can be swallowed (a signal that
        # lands in a garbage-collection callback during JAX's import is printed and dropped).
        sys.stderr.write(_INTERRUPTED_MESSAGE)
        sys.stderr.flush()
        os._exit(130)
    raise _Interrupted


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    previous = signal.signal(signal.SIGINT, _on_sigint)
    _STATE.update(importing=True, interrupted=False)
    try:
        code = _main(args)
        if _STATE["interrupted"]:  # an interrupt some library swallowed: still an interrupt
            raise _Interrupted
        return code
    except (_Interrupted, KeyboardInterrupt):
        sys.stderr.write(_INTERRUPTED_MESSAGE)
        return 130
    finally:
        signal.signal(signal.SIGINT, previous)


def _main(args: argparse.Namespace) -> int:
    from rich.console import Console

    from jaxlab import experiments as registry
    from jaxlab._src.runner import check_output_dir

    registry.names()  # imports every experiment module (JAX, SciPy, ...) while _STATE says so
    _STATE["importing"] = False
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
    if args.command == "plan":
        return _plan(registry, requested or registry.names(), args.out, console)
    if args.command == "run" and args.part is not None:
        known = [p.name for p in registry.parts(args.name)]
        problem = None
        if args.profile != "full":
            problem = f"--part needs --profile full (parts divide it), got {args.profile}"
        elif args.part not in known:
            choices = ", ".join(known) or "none: its full profile runs in one piece"
            problem = f"part must be one of {args.name}'s parts ({choices}), got {args.part!r}"
        if problem:
            err.print(f"jaxlab: error: {problem}")
            return 2
    try:
        check_output_dir(args.out)
    except OSError as e:
        err.print(f"jaxlab: error: {e}")
        return 2

    timeout = DEFAULT_TIMEOUT_S[args.profile] if args.timeout is None else args.timeout
    timeout = timeout or None  # 0: no limit, in this process
    if args.command == "run":
        records = [
            registry.run_experiment(
                args.name,
                profile=args.profile,
                seed=args.seed,
                out_dir=args.out,
                timeout=timeout,
                part=args.part,
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
            timeout=timeout,
        )
    _summary_table(records, console)
    if args.command == "reproduce":
        console.print(f"report: {args.out}/REPORT.md")
    return 1 if any(r["verdict"]["status"] == "error" for r in records) else 0


def _plan(registry, names: list[str], out: str | None, console) -> int:
    """Prints every part of the selected full profiles with its estimates, and the totals."""
    from rich.table import Table

    from jaxlab._src.runner import part_status

    limit = registry.DEVICE_PART_LIMIT_S
    table = Table(title="jaxlab plan: the full profile in parts (estimated seconds)")
    for col in ("experiment", "part", "covers", "CPU (s)", "device (s)", "fits", "stored"):
        table.add_column(col)
    cpu_total = device_total = 0.0
    todo_device = 0.0
    over = []
    for name in names:
        experiment = registry.get(name)
        declared = experiment.full_parts()
        if not declared:
            table.add_row(name, "(one piece)", "no parts declared", "–", "–", "?", "")
            continue
        stored = dict((p.name, r) for p, r in part_status(experiment, out)) if out else {}
        for i, part in enumerate(declared):
            fits = part.device_s <= limit
            if not fits:
                over.append(f"{name}/{part.name}")
            done = stored.get(part.name) is not None
            if not done:
                todo_device += part.device_s
            table.add_row(
                name if i == 0 else "",
                part.name,
                part.covers,
                f"{part.cpu_s:.0f}",
                f"{part.device_s:.0f}",
                "yes" if fits else "NO",
                ("done" if done else "missing") if out else "",
            )
        cpu = sum(p.cpu_s for p in declared)
        device = sum(p.device_s for p in declared)
        cpu_total, device_total = cpu_total + cpu, device_total + device
        table.add_row("", "[bold]total[/]", f"{len(declared)} parts", f"{cpu:.0f}", f"{device:.0f}")
    console.print(table)
    console.print(
        f"total: {cpu_total:.0f} s ({cpu_total / 3600:.1f} h) on a quiet 2-core CPU, "
        f"{device_total:.0f} s ({device_total / 60:.1f} min) on one H200; each part must fit "
        f"one device call of {limit / 60:.0f} min"
    )
    if out:
        console.print(f"not yet stored under {out}: {todo_device:.0f} s on the device")
    if over:
        console.print(f"over the {limit / 60:.0f}-minute limit: {', '.join(over)}")
    console.print("estimates and how each was made: `jaxlab.experiments.parts(NAME)`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
