"""A collector running in the test's event loop, stopped and drained on the way out: the whole
service (:func:`running_collector`), or one SNMP collector for a given number of polls (:func:`polled`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from collector.runner import CollectorService, plan
from collector.snmp import SnmpCollector
from config.model import Config
from fabric.model import Fabric
from store.db import Pool
from tests.support.waiting import until


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


async def polled(collector: SnmpCollector, polls: int, within_s: float = 30.0) -> None:
    """Run ``collector`` until ``polls`` polls succeeded (or one failed: it will not be retried
    within a test's interval), then cancel it; a failure it ended with is raised."""
    task = asyncio.create_task(collector.run())
    try:
        stats = collector.stats
        await until(lambda: stats.polls_ok >= polls or stats.polls_failed, within_s,
                    lambda: f"{polls} polls: {stats.polls_ok} ok, {stats.polls_failed} failed")  # fmt: skip
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
