"""What the long-running commands share: database setup, signals, a /metrics endpoint."""

from __future__ import annotations

import asyncio
import faulthandler
import logging
import signal
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from config.model import Config
from fabric.errors import FabricmonError
from fabric.model import Fabric
from store.db import Pool, create_pool, recreate_database
from store.inventory import ensure_fabric
from store.migrate import migrate
from store.pgserver import EmbeddedStore

log = logging.getLogger(__name__)


def note(message: str) -> None:
    """A progress line for a person, on stderr."""
    print(message, file=sys.stderr, flush=True)


async def scratch_dsn(config: Config, name: str, say: Callable[[str], None]) -> str:
    """The configured database, else a fresh database ``name`` in the embedded store (started
    here): what ``demo`` and ``drill`` run on, so that earlier runs never interfere."""
    if config.database.dsn is not None:
        return config.database.dsn.get_secret_value()
    say("starting the embedded store (PostgreSQL + TimescaleDB)")
    store = EmbeddedStore()
    await asyncio.to_thread(store.start)
    await recreate_database(store.dsn(), name)
    return store.dsn(name)


@asynccontextmanager
async def database(
    dsn: str, config: Config, fabric: Fabric, *, server_settings: Mapping[str, str] | None = None
) -> AsyncIterator[Pool]:
    """A pool on a migrated database holding this fabric's inventory; closed on exit."""
    pool = await create_pool(dsn, config.database, server_settings=server_settings)
    try:
        async with pool.acquire() as conn:
            applied = await migrate(conn)
            if applied:
                note(f"database: applied {len(applied)} migration(s)")
            if await ensure_fabric(conn, fabric) is not None:
                note(f"database: loaded the fabric inventory ({len(fabric.switches)} switches)")
        yield pool
    finally:
        await pool.close()


def stop_on_signals(stop: asyncio.Event) -> None:
    """SIGINT and SIGTERM set ``stop`` (a graceful drain), instead of killing the loop; SIGUSR2
    prints what every task is waiting on (a drain that does not end: README, troubleshooting)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGUSR2, dump_tasks)
    # and every thread's Python stack at once, even when the loop itself is stuck
    faulthandler.register(signal.SIGUSR2, all_threads=True, chain=True)


def dump_tasks() -> None:
    """Every asyncio task of this loop with the line it waits at, on stderr."""
    tasks = sorted(asyncio.all_tasks(), key=lambda t: t.get_name())
    print(f"fabricmon: {len(tasks)} tasks", file=sys.stderr)
    for task in tasks:
        task.print_stack(limit=8, file=sys.stderr)
    sys.stderr.flush()


@asynccontextmanager
async def metrics_endpoint(listen: str | None, registry: CollectorRegistry) -> AsyncIterator[None]:
    """Serve ``registry`` on ``http://listen/metrics`` while the block runs (nothing if listen is None)."""
    if listen is None:
        yield
        return

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    host, _, port = listen.rpartition(":")
    await web.TCPSite(runner, host.strip("[]"), int(port)).start()
    note(f"metrics on http://{listen}/metrics")
    try:
        yield
    finally:
        await runner.cleanup()


@asynccontextmanager
async def serving(app: web.Application, listen: str) -> AsyncIterator[None]:
    """Serve an aiohttp app on ``host:port`` while the block runs; clean shutdown after."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    host, _, port = listen.rpartition(":")
    try:
        await web.TCPSite(runner, host.strip("[]") or "127.0.0.1", int(port)).start()
    except OSError as exc:
        await runner.cleanup()
        raise ServiceError(f"cannot listen on {listen}: {exc.strerror or exc}") from None
    note(f"API on http://{listen}/ (dashboard), /openapi.json, /metrics")
    try:
        yield
    finally:
        await runner.cleanup()


class ServiceError(FabricmonError, OSError):
    """A service could not start (e.g. its port is taken)."""
