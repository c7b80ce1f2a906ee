"""A collector service running in the test's event loop, stopped and drained on the way out."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from collector.runner import CollectorService, plan
from config.model import Config
from fabric.model import Fabric
from store.db import Pool


@contextlib.asynccontextmanager
async def running_collector(config: Config, fabric: Fabric, pool: Pool) -> AsyncIterator[CollectorService]:
    """``fabricmon collect`` in-process for the duration of the block."""
    service = CollectorService(config, fabric, pool, plan(config, fabric))
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(stop))
    try:
        yield service
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
