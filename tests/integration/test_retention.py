"""Retention on the Apache-only TimescaleDB this machine builds: the service drops old chunks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from store.config import RetentionConfig
from store.migrate import migrate
from store.records import PortSample
from store.retention import RetentionMode, apply_retention, drop_expired_chunks, license_of

pytestmark = pytest.mark.db


async def test_apache_build_falls_back_to_drop_chunks(migrated_db: str) -> None:
    conn = await asyncpg.connect(migrated_db)
    try:
        await migrate(conn)
        assert await license_of(conn) == "apache"
        config = RetentionConfig(port_counters_days=2)
        assert await apply_retention(conn, config) is RetentionMode.SERVICE
        now = datetime.now(UTC)
        rows = [
            PortSample(time=now - timedelta(days=age), switch="lf-g1-r1", port="swp1", in_octets=1)
            for age in (0, 1, 3, 10)
        ]
        await conn.copy_records_to_table("port_counters", records=rows, columns=PortSample._fields)
        dropped = await drop_expired_chunks(conn, config)
        assert dropped >= 2
        ages = await conn.fetch("SELECT time FROM port_counters ORDER BY time")
        assert len(ages) == 2
        assert all(now - r["time"] < timedelta(days=2) for r in ages)
        assert await drop_expired_chunks(conn, config) == 0
    finally:
        await conn.close()


async def test_retention_loop_runs_on_schedule(migrated_db: str) -> None:
    import asyncio

    from store.db import create_pool
    from store.retention import retention_loop

    pool = await create_pool(migrated_db)
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
        config = RetentionConfig(port_counters_days=1, drop_chunks_every_s=0.05)
        task = asyncio.create_task(retention_loop(pool, config))
        old = PortSample(time=datetime.now(UTC) - timedelta(days=5), switch="s", port="p")
        async with pool.acquire() as conn:
            await conn.copy_records_to_table("port_counters", records=[old], columns=PortSample._fields)
        for _ in range(100):
            try:
                if await pool.fetchval("SELECT count(*) FROM port_counters") == 0:
                    break
            except asyncpg.DeadlockDetectedError:
                pass  # drop_chunks (every 50 ms here) took the chunk's lock first: PostgreSQL chose this read
            await asyncio.sleep(0.05)
        assert await pool.fetchval("SELECT count(*) FROM port_counters") == 0
        assert not task.done()
        task.cancel()
    finally:
        await pool.close()
