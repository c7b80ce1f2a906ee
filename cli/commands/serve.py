"""``fabricmon api`` (the REST API alone) and ``fabricmon run`` (collector + analyzer + API in one process).

``run`` is for small fabrics and demos: one process, one pool, the collector's metrics on the
API's /metrics. On SIGTERM it stops collecting, drains the pipeline (to the database or the
spool), finishes the analyzer round, stops the API and closes the pool, in that order.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib

from api.app import create_app
from cli import context
from cli.compose import analyzer_metrics, analyzer_service
from cli.service import database, note, serving, stop_on_signals
from collector.metrics import CollectorMetrics
from collector.runner import CollectorService, plan


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    a = sub.add_parser("api", parents=[common], help="serve the REST API, /metrics and the dashboard")
    a.add_argument("--listen", metavar="HOST:PORT", help="override api.listen")
    a.add_argument("--duration", type=float, metavar="S", help="stop after S seconds (default: until SIGTERM)")
    a.set_defaults(handler=run_api)
    r = sub.add_parser("run", parents=[common], help="collector + analyzer + API in one process")
    r.add_argument("--listen", metavar="HOST:PORT", help="override api.listen")
    r.add_argument("--duration", type=float, metavar="S", help="stop after S seconds (default: until SIGTERM)")
    r.set_defaults(handler=run_all)


def run_api(args: argparse.Namespace) -> int:
    config = context.config_of(args)
    fabric = context.fabric_of(config)
    dsn = context.dsn_of(config)

    async def main() -> None:
        stop = asyncio.Event()
        stop_on_signals(stop)
        if args.duration is not None:
            asyncio.get_running_loop().call_later(args.duration, stop.set)
        async with database(dsn, config, fabric) as pool:
            app = create_app(config, fabric, pool=pool)
            async with serving(app, args.listen or config.api.listen):
                await stop.wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
    return 0


def run_all(args: argparse.Namespace) -> int:
    config = context.config_of(args)
    fabric = context.fabric_of(config)
    the_plan = plan(config, fabric)
    dsn = context.dsn_of(config)

    async def main() -> None:
        stop = asyncio.Event()
        stop_on_signals(stop)
        if args.duration is not None:
            asyncio.get_running_loop().call_later(args.duration, stop.set)
        async with database(dsn, config, fabric) as pool:
            collector = CollectorService(config, fabric, pool, the_plan)
            analyzer = analyzer_service(config, fabric, pool)
            metrics = CollectorMetrics(
                collector.pipeline, collector.collectors, collector.heartbeat.stats, tasks=collector.tasks
            )
            mine = analyzer_metrics(analyzer)
            app = create_app(config, fabric, pool=pool, extra_collectors=[metrics, *mine])
            note(f"collecting {the_plan.switches} switches, analyzing every {config.analyzer.interval_s:g} s")
            async with serving(app, args.listen or config.api.listen):
                collecting = asyncio.create_task(collector.run(stop), name="collector")
                analyzing = asyncio.create_task(analyzer.run(stop), name="analyzer")
                await asyncio.wait([collecting, analyzing], return_when=asyncio.FIRST_EXCEPTION)
                stop.set()  # one failed, or stop: the other drains (or finishes its round), not cancelled
                await asyncio.wait([collecting, analyzing])
                for task in (collecting, analyzing):
                    task.result()  # re-raises a service's failure after both stopped
        note("stopped: collector drained, analyzer finished its round, API closed")

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
    return 0
