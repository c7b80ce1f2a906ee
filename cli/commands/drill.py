"""``fabricmon drill``: what fabricmon would do about hundreds of faults, measured before it drains.

Starts the embedded store (a fresh ``fabricmon_drill`` database), simulates the fabric (the
AIPod of ``--gpus``, or a site's ``--inventory``), runs collectors, analyzer and a webhook
receiver, injects a seeded random campaign of faults and benign events, up to
``--concurrency`` at once at unrelated places, and scores what was sent against the truth:
precision, recall, top-1 localization, detection and resolution times, deliveries per fault,
false and missed actions (:mod:`drill.score`). Prints a table (``--json``: the report) and
writes the JSON report with ``--report``. Exit 0 when every goal (built in, or ``--goals FILE``)
holds, 1 when one does not, 2 on bad input.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from pathlib import Path

from rich.console import Console

from cli import context
from cli.service import scratch_dsn
from config.errors import ConfigError
from drill.campaign import BENIGN_KINDS, FAULT_KINDS
from drill.goals import DEFAULT_GOALS, load_goals
from drill.report import finding_lines, goals_table, kinds_table, report_dict
from drill.runner import DrillOptions, DrillResult, run_drill
from fabric.naming import NAMINGS

DRILL_DB = "fabricmon_drill"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "drill", parents=[common], help="score fabricmon on a seeded campaign of faults and benign events"
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("--inventory", type=Path, metavar="FILE", help="simulate this inventory (version 1 or 2)")
    where.add_argument("--gpus", type=int, default=1024, help="simulate the AIPod of N GPUs (default 1024)")
    p.add_argument("--faults", type=int, default=20, metavar="N", help="faults to inject (default 20)")
    p.add_argument("--benign", type=int, default=10, metavar="N", help="benign events to inject (default 10)")
    p.add_argument("--concurrency", type=int, default=4, metavar="K", help="events on at once, at most (default 4)")
    p.add_argument("--seed", type=int, default=1, metavar="S", help="campaign seed (default 1): same seed, same drill")
    p.add_argument("--interval", type=float, default=2.0, metavar="S", help="sampling and evaluation interval (2 s)")
    p.add_argument("--naming", default="mixed", choices=NAMINGS, help="port names of a generated fabric (mixed)")
    p.add_argument("--kinds", default="", metavar="K,K",
                   help="only these fault and benign kinds, comma-separated (default: every kind)")  # fmt: skip
    p.add_argument("--report", type=Path, metavar="FILE", help="write the JSON report here")
    p.add_argument("--goals", type=Path, metavar="FILE", help="YAML figure: bound (default: the built-in goals)")
    p.set_defaults(handler=run)


def _check(args: argparse.Namespace) -> None:
    for name in ("faults", "benign", "concurrency"):
        if getattr(args, name) < (1 if name == "concurrency" else 0):
            raise ConfigError(f"--{name} must be {'at least 1' if name == 'concurrency' else '0 or more'}")
    if args.inventory is not None and not args.inventory.is_file():
        raise ConfigError(f"--inventory {args.inventory}: no such file")
    if args.interval <= 0:
        raise ConfigError("--interval must be positive")
    kinds = _kinds(args)
    if unknown := sorted(set(kinds) - set(FAULT_KINDS) - set(BENIGN_KINDS)):
        raise ConfigError(f"--kinds: unknown kind(s) {', '.join(unknown)} "
                          f"(faults: {', '.join(FAULT_KINDS)}; benign: {', '.join(BENIGN_KINDS)})")  # fmt: skip
    for n, table, what in ((args.faults, FAULT_KINDS, "fault"), (args.benign, BENIGN_KINDS, "benign")):
        if kinds and n and not set(kinds) & set(table):
            raise ConfigError(f"--kinds names no {what} kind, but --{'faults' if what == 'fault' else 'benign'} is {n}")


def _kinds(args: argparse.Namespace) -> tuple[str, ...]:
    return tuple(k.strip() for k in str(args.kinds).split(",") if k.strip())


def run(args: argparse.Namespace) -> int:
    config = context.config_of(args)
    _check(args)
    goals = load_goals(args.goals) if args.goals is not None else DEFAULT_GOALS
    opts = DrillOptions(gpus=args.gpus, inventory=args.inventory, faults=args.faults, benign=args.benign,
                        concurrency=args.concurrency, seed=args.seed, interval_s=args.interval,
                        naming=args.naming, kinds=_kinds(args), goals=tuple(goals.items()))  # fmt: skip
    console = Console(stderr=True, highlight=False)

    def say(line: str) -> None:
        console.print(line, markup=False)

    async def main() -> DrillResult:
        dsn = await scratch_dsn(config, DRILL_DB, say)
        return await run_drill(opts, dsn, say)

    result: DrillResult | None = None
    with contextlib.suppress(KeyboardInterrupt):
        result = asyncio.run(main())
    if result is None:
        return 130
    report = report_dict(result)
    if args.report:
        args.report.write_text(json.dumps(report, indent=2) + "\n")
    if args.json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        out = Console()
        out.print(goals_table(result))
        out.print(kinds_table(result))
        for line in finding_lines(result):
            out.print(line, markup=False, highlight=False)
    return 0 if result.ok else 1
