"""A database that goes away mid-stream: the writer spools on disk and replays, losing nothing."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from store.config import WriterConfig
from store.db import create_pool
from store.migrate import migrate
from store.pgserver import EmbeddedStore
from store.records import PortSample
from store.spool import Spool
from store.writer import BatchWriter

T0 = datetime(2026, 11, 30, tzinfo=UTC)


def rows(start: int, n: int) -> list[PortSample]:
    return [
        PortSample(time=T0 + timedelta(seconds=i), switch="lf-g1-r1", port="swp1", in_octets=i)
        for i in range(start, start + n)
    ]


async def _outage(private_store: EmbeddedStore, tmp_path: Path, outage_s: float) -> None:
    dsn = private_store.dsn()
    pool = await create_pool(dsn)
    async with pool.acquire() as conn:
        await migrate(conn)
    spool = Spool(tmp_path / "spool", max_bytes=64 << 20)
    writer = BatchWriter(
        pool, "port_counters", PortSample._fields, WriterConfig(batch_rows=50, flush_interval_s=0.1), spool=spool
    )
    writer.start()
    produced = 0

    async def produce(seconds: float) -> None:
        nonlocal produced
        end = asyncio.get_running_loop().time() + seconds
        while asyncio.get_running_loop().time() < end:
            await writer.put(rows(produced, 20))
            produced += 20
            await asyncio.sleep(0.02)

    await produce(1.0)
    await asyncio.to_thread(private_store.stop)
    await produce(outage_s)  # the collector keeps going: nothing blocks, batches go to disk
    assert len(spool) > 0
    await asyncio.to_thread(private_store.start)
    await produce(1.0)
    for _ in range(300):
        if len(spool) == 0 and writer.pending == 0:
            break
        await asyncio.sleep(0.1)
    await writer.close()
    stored = [r["in_octets"] for r in await pool.fetch("SELECT in_octets FROM port_counters ORDER BY time")]
    await pool.close()
    assert stored == list(range(produced))  # every sample, once
    assert spool.stats.rows_dropped == 0 and spool.stats.rows_replayed > 0
    assert writer.stats.rows_rejected == 0


async def test_database_restart_loses_nothing(private_store: EmbeddedStore, tmp_path: Path) -> None:
    await _outage(private_store, tmp_path, outage_s=4.0)


@pytest.mark.slow
async def test_database_down_for_a_minute(private_store: EmbeddedStore, tmp_path: Path) -> None:
    await _outage(private_store, tmp_path, outage_s=60.0)
