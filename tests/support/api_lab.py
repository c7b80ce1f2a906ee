"""Test support for the API: a database holding a simulated fabric with faults, one stored verdict,
its alerts, and a registered job.

A 512-GPU fabric at radix 32 (4 groups x 8 rails, 80 switches) so the rails x groups map has
more than one column, its ports named as seven NOSes name them (``--naming mixed``: the downed
leaf is a Junos one, ``et-0/0/8:0``; the storm's a Cumulus one, ``swp1s1``). :func:`seed`
feeds what ``FabricState`` reports through the collectors' ``Pipeline`` (as
``tests/support/feed.py`` does) for a few 10 s rounds ending now, a leaf uplink going down
and a PFC storm starting after the first, then runs one analyzer evaluation (``assess`` +
``store_run``) and syncs its alerts, exactly as ``fabricmon analyze`` would.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg
from aiohttp import web

from analyzer.service import AnalyzerService
from collector.pipeline import Pipeline
from config.model import Config
from fabric.model import Fabric, FabricParams
from fabric.topology import build_aipod
from simulator.fabric_state import FabricState
from simulator.feed import feed_rounds
from store.db import create_pool
from store.inventory import ensure_fabric
from store.migrate import migrate
from store.pgserver import EmbeddedStore
from tests.conftest import run_sync

S = 1_000_000_000
FABRIC = build_aipod(FabricParams(gpus=512, radix=32), "mixed")
CONFIG = Config()
DOWN_LEAF = "lf-g2-r3"  # its first uplink goes down: drift, rail 3 asymmetry, an outage
STORM_LEAF = "lf-g3-r5"


def port(switch: str, place: int) -> str:
    """The name of the ``place``-th port (1-based, design order) of ``switch``."""
    return FABRIC.ports(switch)[place - 1].name


STORM_PORT = port(STORM_LEAF, 2)  # a server-facing port pausing the leaf
JOB_HOSTS = [f"srv-g2-{i:03d}" for i in range(1, 9)]  # under the downed uplink's leaf (rail 3)


def faults_for(fabric: Fabric) -> list[dict[str, Any]]:
    """The leaf uplink down and the PFC storm, the storm's port named as ``fabric`` names it."""
    storm_port = fabric.ports(STORM_LEAF)[1].name
    return [
        {"kind": "link_down", "switch": DOWN_LEAF},
        {"kind": "pfc_storm", "switch": STORM_LEAF, "port": storm_port, "rate_pps": 20000},
    ]


FAULTS: list[dict[str, Any]] = faults_for(FABRIC)


@dataclass(frozen=True)
class Seeded:
    """What :func:`seed` left in the database."""

    dsn: str
    evaluated_at: datetime
    report: dict[str, Any]


async def seed(
    dsn: str,
    *,
    rounds: int = 4,
    faults: list[dict[str, Any]] | None = None,
    evaluate_every: int = 0,
    fabric: Fabric = FABRIC,
) -> Seeded:
    """Migrate, load the fabric, feed ``rounds`` samples ending now, evaluate once, sync alerts.

    ``evaluate_every`` = k > 0: the analyzer also evaluates after every k-th round, at that
    round's time, as a running analyzer would have, so the history tables hold a series."""
    pool = await create_pool(dsn)
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
            await ensure_fabric(conn, fabric)
        clock = [time.time_ns() - rounds * 10 * S]
        state = FabricState(fabric, seed=7, clock=lambda: clock[0])
        pipe = Pipeline(pool, fabric)
        pipe.start()
        service = AnalyzerService(CONFIG, fabric, pool)
        chosen = faults_for(fabric) if faults is None else faults
        if evaluate_every <= 0:
            await feed_rounds(state, pipe, clock, rounds, chosen)
        else:
            done = 0
            while done < rounds:
                n = min(evaluate_every, rounds - done)
                # feed_rounds applies faults after its own second round: as in one call from the start
                await feed_rounds(state, pipe, clock, n, chosen if done == 0 else ())
                done += n
                if done < rounds:
                    for w in pipe.writers:
                        await w.flush(force=True)
                    await service.evaluate_once(datetime.fromtimestamp(clock[0] / 1e9, tz=UTC), confirm=False)
        await pipe.close()
        now = datetime.fromtimestamp(clock[0] / 1e9, tz=UTC)
        report = await service.evaluate_once(now, confirm=False)
        return Seeded(dsn, now, report)
    finally:
        await pool.close()


async def _admin(store: EmbeddedStore, sql: str) -> None:
    conn = await asyncpg.connect(store.dsn("postgres"), timeout=30)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def _extension(dsn: str) -> None:
    conn = await asyncpg.connect(dsn, timeout=30)
    try:
        await conn.execute("SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS timescaledb")
    finally:
        await conn.close()


async def _migrated(dsn: str) -> None:
    pool = await create_pool(dsn)
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
            await ensure_fabric(conn, FABRIC)
    finally:
        await pool.close()


@contextmanager
def database(store: EmbeddedStore) -> Iterator[str]:
    """A new database in the test cluster with TimescaleDB; dropped afterwards."""
    name = f"fm_api_{uuid.uuid4().hex[:12]}"
    run_sync(_admin(store, f"CREATE DATABASE {name}"))
    dsn = store.dsn(name)
    try:
        run_sync(_extension(dsn))
        yield dsn
    finally:
        run_sync(_admin(store, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


@contextmanager
def migrated_database(store: EmbeddedStore) -> Iterator[str]:
    """A new database, migrated and holding the fabric's inventory, without telemetry or verdicts."""
    with database(store) as dsn:
        run_sync(_migrated(dsn))
        yield dsn


@contextmanager
def seeded_database(store: EmbeddedStore, **kwargs: Any) -> Iterator[Seeded]:
    """A new database, seeded by :func:`seed` (synchronously, on a private loop); dropped afterwards."""
    with database(store) as dsn:
        yield run_sync(seed(dsn, **kwargs))


@contextmanager
def serve_in_thread(make_app: Callable[[], web.Application]) -> Iterator[str]:
    """Serve ``make_app()`` on 127.0.0.1 (a free port) from a thread with its own event loop, for
    synchronous clients (schemathesis, a browser driver); yields the base URL."""
    ready: list[str] = []
    started = threading.Event()
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    async def main() -> None:
        runner = web.AppRunner(make_app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        ready.append(f"http://{host}:{port}")
        started.set()
        try:
            await stop.wait()
        finally:
            await runner.cleanup()

    def run() -> None:
        try:
            loop.run_until_complete(main())
        finally:
            started.set()
            loop.close()

    thread = threading.Thread(target=run, name="api-test-server", daemon=True)
    thread.start()
    started.wait(timeout=60)
    if not ready:
        thread.join(timeout=5)
        raise RuntimeError("the API test server did not start")
    try:
        yield ready[0]
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=30)
