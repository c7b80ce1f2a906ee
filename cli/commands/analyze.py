"""``fabricmon analyze`` (the analyzer service) and ``fabricmon check`` (a one-shot report)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from analyzer.job_spec import load_job_file
from analyzer.report import human
from analyzer.service import assess
from cli import context
from cli.compose import analyzer_service
from cli.output import emit
from cli.service import database, note, stop_on_signals

EXIT = {"healthy": 0, "degraded": 1, "critical": 2}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    a = sub.add_parser("analyze", parents=[common], help="run the analyzer service (checks, alerts, webhooks)")
    a.add_argument(
        "--once",
        action="store_true",
        help="one evaluation (alerts and webhooks included), then exit; needs no leadership",
    )
    a.add_argument("--duration", type=float, metavar="S", help="stop after S seconds (default: until SIGTERM)")
    a.set_defaults(handler=run_analyze)
    c = sub.add_parser(
        "check",
        parents=[common],
        help="one-shot health report; exit 0 healthy, 1 degraded, 2 critical (3: error)",
    )
    c.add_argument("--job", type=Path, metavar="FILE", help="pre-flight for a job (YAML/JSON: hosts, expected_days)")
    c.set_defaults(handler=run_check)


def run_analyze(args: argparse.Namespace) -> int:
    config = context.config_of(args)
    fabric = context.fabric_of(config)
    dsn = context.dsn_of(config)

    async def main() -> dict[str, Any] | None:
        stop = asyncio.Event()
        stop_on_signals(stop)
        async with database(dsn, config, fabric) as pool:
            service = analyzer_service(config, fabric, pool)
            if args.once:  # one-shot: no election (the database serializes it with a running leader)
                report = await service.evaluate_once()
                if config.alerts.webhooks and (left := await service.drain_webhooks(timeout_s=30)):
                    note(f"warning: {left} webhook delivery(ies) still pending; `fabricmon analyze` will retry them")
                return report
            hooks = len(config.alerts.webhooks)
            elect = "; leads only while it holds the analyzer lock" if config.analyzer.leader_election else ""
            note(
                f"analyzing {len(fabric.switches)} switches every {config.analyzer.interval_s:g} s; {hooks} webhook(s)"
                + elect
            )
            if args.duration is not None:
                asyncio.get_running_loop().call_later(args.duration, stop.set)
            await service.run(stop)
            return service.last_report

    with contextlib.suppress(KeyboardInterrupt):
        report = asyncio.run(main())
        if args.once and report is not None:
            emit(args.json, report, lambda: human(report))
            return EXIT[report["status"]]
    return 0


def run_check(args: argparse.Namespace) -> int:
    config = context.config_of(args)
    fabric = context.fabric_of(config)
    job = load_job_file(args.job) if args.job else None
    dsn = context.dsn_of(config)

    async def main() -> dict[str, Any]:
        async with database(dsn, config, fabric) as pool, pool.acquire() as conn:
            _, _, report = await assess(conn, fabric, config, datetime.now(UTC), (job,) if job else ())
            return report

    report = asyncio.run(main())
    if job is not None:
        mine = report["jobs"][-1]  # the pre-flight job is appended after the registered ones
        report = {**report, "jobs": [mine], "job": mine}
        emit(args.json, report, lambda: human(report))
        return EXIT[mine["status"]]
    emit(args.json, report, lambda: human(report))
    return EXIT[report["status"]]
