"""``fabricmon collect``: stream gNMI and poll SNMP from every configured switch into TimescaleDB."""

from __future__ import annotations

import argparse
import asyncio
import contextlib

from prometheus_client.registry import CollectorRegistry

from cli import context
from cli.service import database, metrics_endpoint, note, stop_on_signals
from collector.metrics import CollectorMetrics
from collector.runner import CollectorService, plan
from fabric.errors import FabricmonError


class CollectError(FabricmonError, ValueError):
    """Nothing to collect, or bad arguments."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("collect", parents=[common], help="run the collectors (gNMI and SNMP) into the database")
    p.add_argument("--shard", metavar="I/N", help="collect the I-th of N deterministic shards of the targets")
    p.add_argument("--metrics-listen", metavar="HOST:PORT", help="serve Prometheus /metrics here")
    p.add_argument("--duration", type=float, metavar="S", help="stop after S seconds (default: until SIGTERM)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    config = context.config_of(args)
    fabric = context.fabric_of(config)
    the_plan = plan(config, fabric, args.shard)
    if the_plan.switches == 0:
        raise CollectError("no switch matches the config's targets: nothing to collect")
    if the_plan.unmatched:
        shown = ", ".join(the_plan.unmatched[:5]) + (" …" if len(the_plan.unmatched) > 5 else "")
        note(f"warning: {len(the_plan.unmatched)} switch(es) match no target and are not collected: {shown}")
    dsn = context.dsn_of(config)

    async def main() -> None:
        stop = asyncio.Event()
        stop_on_signals(stop)
        async with database(dsn, config, fabric) as pool:
            service = CollectorService(config, fabric, pool, the_plan)
            registry = CollectorRegistry()
            registry.register(CollectorMetrics(service.pipeline, service.collectors, service.heartbeat.stats))
            counts = ", ".join(f"{p}: {len(t)}" for p, t in sorted(the_plan.targets.items()))
            shard = f" (shard {the_plan.shard[0]}/{the_plan.shard[1]})" if the_plan.shard else ""
            note(f"collecting {the_plan.switches} switches{shard} — {counts}")
            listen = args.metrics_listen or config.collector.metrics_listen
            async with metrics_endpoint(listen, registry):
                if args.duration is not None:
                    asyncio.get_running_loop().call_later(args.duration, stop.set)
                await service.run(stop)
        note("collector stopped; everything read was written or spooled")

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
    return 0
