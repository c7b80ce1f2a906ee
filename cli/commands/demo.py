"""``fabricmon demo``: everything on this machine, on the embedded store.

Starts the embedded store (a fresh ``fabricmon_demo`` database in it, so earlier runs never
interfere), simulates the fabric, runs the collectors over gNMI and SNMP, the analyzer, the
API and dashboard and a webhook receiver, registers an example job, then tours one fault of
each kind and times injection → finding → webhook → resolution. Ends with a report; the API
stays up until Ctrl-C unless ``--duration`` is given. ``--scenario clean`` injects nothing and
reports any alert as a false alarm.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from cli import context
from cli.service import scratch_dsn, stop_on_signals
from config.errors import ConfigError
from demo.runner import DemoOptions, DemoResult, auto_interval, run_demo
from demo.tour import builtin_tours, load_tour
from fabric.naming import NAMINGS
from simulator.nos import NosError, parse_nos

DEMO_DB = "fabricmon_demo"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("demo", parents=[common], help="run fabricmon end to end on this machine, with a fault tour")
    p.add_argument("--gpus", type=int, default=512, help="GPUs in the simulated fabric (default 512)")
    tours = ", ".join(builtin_tours())
    p.add_argument(
        "--scenario", default="tour", metavar="NAME|FILE", help=f"tour: {tours}, 'clean' (no faults) or a YAML file"
    )
    p.add_argument("--duration", type=float, metavar="S", help="exit S seconds after the start (default: stay up)")
    p.add_argument("--listen", default="127.0.0.1:8080", metavar="HOST:PORT", help="API and dashboard address")
    p.add_argument(
        "--interval",
        type=float,
        metavar="S",
        help="sampling and evaluation interval (default: 2 s up to 1,024 GPUs, then 2 s per 512 GPUs)",
    )
    p.add_argument("--report", type=Path, metavar="FILE", help="write the detection figures as JSON")
    p.add_argument(
        "--naming",
        default="mixed",
        choices=NAMINGS,
        help="port names: every NOS's, switch by switch (mixed, the default), one NOS's, or swp",
    )
    p.add_argument(
        "--nos",
        default="mixed",
        metavar="NAME[,NAME...]",
        help="the switches' gNMI notification shapes (as `fabricmon sim --nos`; default mixed: every one)",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    config = context.config_of(args)
    steps = () if args.scenario == "clean" else tuple(load_tour(args.scenario)[1])
    try:
        nos = parse_nos(args.nos)
    except NosError as exc:
        raise ConfigError(f"--nos: {exc}") from None
    opts = DemoOptions(gpus=args.gpus, steps=steps, tour=args.scenario, duration_s=args.duration,
                       listen=args.listen, interval_s=args.interval or auto_interval(args.gpus), nos=nos,
                       naming=args.naming)  # fmt: skip
    console = Console(stderr=True, highlight=False)

    def say(line: str) -> None:
        console.print(line, markup=False)

    async def main() -> DemoResult:
        stop = asyncio.Event()
        stop_on_signals(stop)
        dsn = await scratch_dsn(config, DEMO_DB, say)
        return await run_demo(opts, dsn, say, stop)

    result: DemoResult | None = None
    with contextlib.suppress(KeyboardInterrupt):
        result = asyncio.run(main())
    if result is None:
        return 130
    if args.report:
        args.report.write_text(json.dumps(result.as_dict(), indent=2) + "\n")
    if args.json:
        sys.stdout.write(json.dumps(result.as_dict(), indent=2) + "\n")
    else:
        Console().print(_table(result))
    return 0 if result.ok else 1


def _table(result: DemoResult) -> Table:
    t = Table(title=f"fabricmon demo: {result.gpus} GPUs, tour '{result.tour}'", title_justify="left")
    for col in ("fault", "found", "webhook", "resolved", "GPUs", "jobs", "incident (root: symptoms)", "sent", "action"):
        t.add_column(col)

    def s(v: float | None) -> str:
        return "—" if v is None else f"{v:.1f} s"

    for r in result.steps:
        root = f"{r.rule}: {', '.join(r.symptoms) or 'no symptoms'}" if r.rule else "—"
        sent = f"{r.firing}+{r.resolved}" + ("" if r.clean else " ✗")
        t.add_row(r.title, s(r.found_s) if r.found else "MISSED", s(r.webhook_s), s(r.resolved_s), str(r.gpus),
                  ", ".join(r.jobs) or "—", root, sent, " → ".join(dict.fromkeys(r.actions)) or "—")  # fmt: skip
    if not result.steps or result.unexpected_alerts:
        t.add_row("unexpected alerts", str(len(result.unexpected_alerts)), "", "", "", "", "", "", "")
    clean = all(r.clean for r in result.steps)
    t.caption = (
        ("every fault found and announced" if result.ok else "SOMETHING WAS MISSED")
        + (", one incident each with one action" if result.steps and clean else "")
        + f"; {result.deliveries} signed webhook deliveries (firing+resolved per fault above); API at {result.api}"
    )
    return t
