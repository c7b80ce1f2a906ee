"""``fabricmon collect``: stream gNMI and poll SNMP from every configured switch into TimescaleDB."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys

from prometheus_client.registry import CollectorRegistry

from cli import context
from cli.service import database, metrics_endpoint, note, stop_on_signals
from collector import gc_tuning
from collector.auto_shards import AutoShards, LeaseMetrics, session_settings
from collector.heartbeat import sampling_interval
from collector.metrics import CollectorMetrics
from collector.runner import CollectorService, Plan, plan
from collector.workers import PARENT_ENV, Supervisor, Worker, WorkersError, die_with_parent, parse_workers
from config.model import Config
from fabric.errors import FabricmonError
from fabric.model import Fabric
from store.db import Pool, create_pool


class CollectError(FabricmonError, ValueError):
    """Nothing to collect, or bad arguments."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("collect", parents=[common], help="run the collectors (gNMI and SNMP) into the database")
    p.add_argument(
        "--shard",
        metavar="I/N|auto",
        help="collect the I-th of N deterministic shards of the targets; auto: claim shard leases of "
        "collector.shards in the database, taking over those of collectors that die",
    )
    p.add_argument(
        "--workers",
        metavar="N|auto",
        type=_workers_arg,
        help="run N shard workers (child processes, shards 0/N..N-1/N) under one supervisor that restarts "
        "them and serves one /metrics for all; auto: the usable cores minus one (default: collector.workers, "
        "else one process)",
    )
    p.add_argument(
        "--metrics-listen", metavar="HOST:PORT", help="serve Prometheus /metrics here (with --workers: all workers')"
    )
    p.add_argument("--duration", type=float, metavar="S", help="stop after S seconds (default: until SIGTERM)")
    p.set_defaults(handler=run)


def _workers_arg(text: str) -> int:
    try:
        return parse_workers(text)
    except WorkersError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--workers ")) from None


def run(args: argparse.Namespace) -> int:
    parent = os.environ.pop(PARENT_ENV, None)
    if parent is not None:  # a worker of `collect --workers`: not to outlive its supervisor
        die_with_parent(int(parent))
    config = context.config_of(args)
    if args.shard == "auto":
        if config.collector.shards is None:
            raise CollectError("--shard auto needs collector.shards (how many shards) in the config")
        config = config.model_copy(update={"collector": config.collector.model_copy(update={"shard": "auto"})})
    workers = _worker_count(args, config)
    if workers is not None:
        return _supervise(args, config, workers)
    if config.collector.shard == "auto" and args.shard in (None, "auto"):
        return _auto(args, config)
    fabric = context.fabric_of(config)
    the_plan = plan(config, fabric, args.shard)
    if the_plan.switches == 0:
        raise CollectError("no switch matches the config's targets: nothing to collect")
    _warn_unmatched(the_plan)
    dsn = context.dsn_of(config)

    async def main() -> None:
        stop = asyncio.Event()
        stop_on_signals(stop)
        async with database(dsn, config, fabric) as pool:
            service = CollectorService(config, fabric, pool, the_plan)
            registry = CollectorRegistry()
            registry.register(
                CollectorMetrics(service.pipeline, service.collectors, service.heartbeat.stats, tasks=service.tasks)
            )
            counts = ", ".join(f"{p}: {len(t)}" for p, t in sorted(the_plan.targets.items()))
            shard = f" (shard {the_plan.shard[0]}/{the_plan.shard[1]})" if the_plan.shard else ""
            note(f"collecting {the_plan.switches} switches{shard} — {counts}")
            listen = args.metrics_listen or config.collector.metrics_listen
            async with metrics_endpoint(listen, registry):
                if args.duration is not None:
                    asyncio.get_running_loop().call_later(args.duration, stop.set)
                settled = gc_tuning.settle_time(sampling_interval(config.collector, the_plan.targets))
                async with gc_tuning.tuned(settled):
                    await service.run(stop)
        note("collector stopped; everything read was written or spooled")

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
    return 0


def _warn_unmatched(the_plan: Plan) -> None:
    if the_plan.unmatched:
        shown = ", ".join(the_plan.unmatched[:5]) + (" …" if len(the_plan.unmatched) > 5 else "")
        note(f"warning: {len(the_plan.unmatched)} switch(es) match no target and are not collected: {shown}")


def _worker_count(args: argparse.Namespace, config: Config) -> int | None:
    """``--workers``, else ``collector.workers`` unless ``--shard`` says this process is one shard."""
    if args.workers is not None and args.shard is not None:
        raise CollectError("--workers runs every shard itself: drop --shard")
    if args.workers is not None:
        count: int = args.workers
    elif args.shard is None and config.collector.workers is not None:
        count = parse_workers(config.collector.workers)
    else:
        return None
    if config.collector.shard is not None:
        raise CollectError("--workers runs every shard itself: drop collector.shard from the config")
    return count


def _supervise(args: argparse.Namespace, config: Config, count: int) -> int:
    """``collect --workers N``: one ``collect --shard I/N`` per non-empty shard, supervised."""
    fabric = context.fabric_of(config)
    plans = [plan(config, fabric, f"{i}/{count}") for i in range(count)]
    shards = [i for i, p in enumerate(plans) if p.switches]
    if not shards:
        raise CollectError("no switch matches the config's targets: nothing to collect")
    _warn_unmatched(plans[0])
    if empty := [f"{i}/{count}" for i, p in enumerate(plans) if not p.switches]:
        note(f"warning: shard(s) {', '.join(empty)} have no switches: no worker for them")
    dsn = context.dsn_of(config)  # the embedded store, if that is the database: started once, here
    listen = args.metrics_listen or config.collector.metrics_listen
    base = [sys.executable, "-m", "cli.main", "collect"]
    if getattr(args, "config", None):
        base += ["--config", str(args.config)]
    if getattr(args, "verbose", 0):
        base.append("-" + "v" * args.verbose)

    def command(w: Worker) -> list[str]:
        return [*base, "--shard", w.name, "--metrics-listen", f"127.0.0.1:{w.port}"]

    # each worker's spool is <spool_dir>/shard-I-of-N, as for any --shard process (collector.runner)
    async def main() -> bool:
        stop = asyncio.Event()
        stop_on_signals(stop)
        async with database(dsn, config, fabric):
            pass  # migrations and the inventory once, before the workers would race for them
        supervisor = Supervisor(shards, count, command, say=note)
        counts = ", ".join(f"shard {i}/{count}: {plans[i].switches}" for i in shards)
        note(f"collecting {sum(p.switches for p in plans)} switches with {len(shards)} worker(s) — {counts}")
        async with supervisor.serving(listen):
            if args.duration is not None:
                asyncio.get_running_loop().call_later(args.duration, stop.set)
            return await supervisor.run(stop)

    if not asyncio.run(main()):
        raise CollectError("not every worker drained cleanly (see above)")
    note("every worker stopped; everything read was written or spooled")
    return 0


def _auto(args: argparse.Namespace, config: Config) -> int:
    """``shard: auto``: hold, take over and collect shard leases (collector/auto_shards.py)."""
    fabric = context.fabric_of(config)
    whole = plan(config, fabric, "0/1")
    if whole.switches == 0:
        raise CollectError("no switch matches the config's targets: nothing to collect")
    _warn_unmatched(whole)
    dsn = context.dsn_of(config)
    ttl = config.collector.lease_ttl_s

    async def main() -> None:
        stop = asyncio.Event()
        stop_on_signals(stop)
        settings = session_settings(ttl)
        lease_db = config.database.model_copy(update={"pool_min": 1, "pool_max": 2})
        async with database(dsn, config, fabric, server_settings=settings) as pool:
            lease_pool = await create_pool(dsn, lease_db, server_settings=settings)
            try:
                async with gc_tuning.tuned(gc_tuning.settle_time(sampling_interval(config.collector, whole.targets))):
                    await _collect_by_lease(args, config, fabric, pool, lease_pool, stop)
            finally:
                await lease_pool.close()
        note("collector stopped; leases released; everything read was written or spooled")

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
    return 0


async def _collect_by_lease(
    args: argparse.Namespace, config: Config, fabric: Fabric, pool: Pool, lease_pool: Pool, stop: asyncio.Event
) -> None:
    auto = AutoShards(config, fabric, pool, lease_pool=lease_pool, say=note)
    registry = CollectorRegistry()
    registry.register(LeaseMetrics(auto))
    switches = plan(config, fabric, "0/1").switches
    note(
        f"collecting {switches} switches in {auto.shards} shard(s) by lease as {auto.holder} "
        f"(lease_ttl_s {auto.ttl_s:g}); standing by until a shard is free"
    )
    listen = args.metrics_listen or config.collector.metrics_listen
    async with metrics_endpoint(listen, registry):
        if args.duration is not None:
            asyncio.get_running_loop().call_later(args.duration, stop.set)
        await auto.run(stop)
