"""Writer rows/s against raw asyncpg ``copy_records_to_table`` of the same rows, same table.

Goal (issue 4): the writer reaches at least 80 % of raw COPY.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from store.config import WriterConfig
from store.db import create_pool
from store.migrate import migrate
from store.records import PortSample
from store.shard_leases import Fence, claim, ensure_shards
from store.writer import BatchWriter

ROWS = 200_000
BATCH = 5_000


def _rows(n: int, offset_s: int) -> list[PortSample]:
    t0 = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=offset_s)
    return [
        PortSample(
            time=t0 + timedelta(seconds=10 * (i // 128)),
            switch=f"lf-g{i // 16384 + 1}-r1",
            port=f"swp{i % 128 + 1}",
            oper_status=1,
            speed_bps=400_000_000_000,
            in_octets=i * 1000,
            out_octets=i * 1000,
            in_unicast_pkts=i,
            out_unicast_pkts=i,
            in_errors=0,
            out_errors=0,
            in_discards=0,
            out_discards=0,
            in_fcs_errors=0,
            interval_s=10.0,
            in_bps=1e11,
            out_bps=1e11,
        )
        for i in range(n)
    ]


async def run(dsn: str) -> dict[str, Any]:
    pool = await create_pool(dsn)
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
            await conn.execute("TRUNCATE port_counters")
        raw_rows = _rows(ROWS, 0)
        started = time.perf_counter()
        async with pool.acquire() as conn:
            for i in range(0, ROWS, BATCH):
                await conn.copy_records_to_table(
                    "port_counters", records=raw_rows[i : i + BATCH], columns=PortSample._fields
                )
        raw_s = time.perf_counter() - started

        writer = BatchWriter(pool, "port_counters", PortSample._fields, WriterConfig(batch_rows=BATCH))
        rows = _rows(ROWS, 86_400)
        started = time.perf_counter()
        for i in range(0, ROWS, 1000):
            await writer.put(rows[i : i + 1000])
        await writer.close()
        writer_s = time.perf_counter() - started
        dup = _dups(pool)
        fenced = await _fenced(pool)
        return {
            "rows": ROWS,
            "batch_rows": BATCH,
            "raw_copy_rows_per_s": round(ROWS / raw_s),
            "writer_rows_per_s": round(ROWS / writer_s),
            "writer_vs_raw": round(raw_s / writer_s, 3),
            "goal_writer_vs_raw": 0.8,
            "duplicate_batch_rows_per_s": await dup,
            "fenced_writer_rows_per_s": fenced,
        }
    finally:
        await pool.close()


async def _dups(pool: asyncpg.Pool) -> int:
    """Rows/s when every batch collides (a reconnect replaying what is already stored)."""
    writer = BatchWriter(pool, "port_counters", PortSample._fields, WriterConfig(batch_rows=BATCH))
    rows = _rows(50_000, 86_400)
    started = time.perf_counter()
    await writer.put(rows)
    await writer.close()
    return round(len(rows) / (time.perf_counter() - started))


async def _fenced(pool: asyncpg.Pool) -> int:
    """Rows/s of a writer under ``shard: auto``: each batch checks its shard lease first."""
    async with pool.acquire() as conn:
        await ensure_shards(conn, 1)
        epoch = await claim(conn, "bench", 1, 0, 600.0)
    assert epoch is not None
    fence = Fence(1, 0, "bench", epoch)
    writer = BatchWriter(pool, "port_counters", PortSample._fields, WriterConfig(batch_rows=BATCH), fence=fence)
    rows = _rows(ROWS, 2 * 86_400)
    started = time.perf_counter()
    for i in range(0, ROWS, 1000):
        await writer.put(rows[i : i + 1000])
    await writer.close()
    assert writer.stats.rows_written == ROWS
    return round(ROWS / (time.perf_counter() - started))
