"""The spool during and after an outage: rows/s onto disk, back off it, and replayed into the database.

A 16,384-GPU fabric at 10 s sampling writes ~8,200 port rows/s and ~2,000 PFC rows/s (see
docs/benchmarks.md). Goals (issue 13): the spool takes rows at least 5x that fast (50K rows/s:
an outage never slows collection), and a backlog replays at least 5x faster than it built up
(50K rows/s from disk into TimescaleDB). Bytes per row size ``spool_max_mb``.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from store.config import WriterConfig
from store.db import create_pool
from store.migrate import migrate
from store.records import PortSample
from store.spool import Spool
from store.writer import BatchWriter

BATCH = 5_000
BATCHES = 40  # 200,000 rows
#: Rows a 16,384-GPU fabric writes per second at 10 s sampling (ports, and PFC on change).
FABRIC_16K_ROWS_PER_S = 10_200


def rows(n: int, seed: int = 1) -> list[PortSample]:
    """Port rows with realistic values: counters of 13-15 digits, rates with full float precision."""
    rng = random.Random(seed)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    return [
        PortSample(
            time=t0 + timedelta(seconds=10 * (i // 1024), microseconds=rng.randrange(10**6)),
            switch=f"lf-g{i // 1024 + 1}-r{i % 8 + 1}",
            port=f"swp{i % 128 + 1}",
            oper_status=1,
            speed_bps=400_000_000_000,
            in_octets=rng.randrange(10**12, 10**15),
            out_octets=rng.randrange(10**12, 10**15),
            in_unicast_pkts=rng.randrange(10**9, 10**12),
            out_unicast_pkts=rng.randrange(10**9, 10**12),
            in_multicast_pkts=rng.randrange(10**6),
            out_multicast_pkts=rng.randrange(10**6),
            in_broadcast_pkts=0,
            out_broadcast_pkts=0,
            in_errors=0,
            out_errors=0,
            in_discards=rng.randrange(100),
            out_discards=0,
            in_fcs_errors=0,
            carrier_transitions=2,
            interval_s=10.0 + rng.random() / 100,
            in_bps=rng.random() * 4e11,
            out_bps=rng.random() * 4e11,
            in_pps=rng.random() * 1e7,
            out_pps=rng.random() * 1e7,
            in_errors_ps=0.0,
            out_errors_ps=0.0,
            in_discards_ps=rng.random(),
            out_discards_ps=0.0,
            in_fcs_errors_ps=0.0,
        )
        for i in range(n)
    ]


async def run(dsn: str) -> dict[str, Any]:
    data = rows(BATCH * BATCHES)
    total = len(data)
    root = Path(tempfile.mkdtemp(prefix="fabricmon-bench-spool-"))
    try:
        spool = Spool(root / "port_counters", 1 << 34)
        started = time.perf_counter()
        for i in range(0, total, BATCH):
            assert spool.push(data[i : i + BATCH], PortSample._fields)
        push_s = time.perf_counter() - started
        on_disk = spool.stats.bytes

        replay = Spool(root / "port_counters", 1 << 34)  # as a restarted collector finds it
        started = time.perf_counter()
        read = 0
        while (batch := replay.peek()) is not None:
            read += len(batch.rows)
            replay.pop()
        peek_s = time.perf_counter() - started
        assert read == total

        for i in range(0, total, BATCH):
            assert replay.push(data[i : i + BATCH], PortSample._fields)
        pool = await create_pool(dsn)
        try:
            async with pool.acquire() as conn:
                await migrate(conn)
                await conn.execute("TRUNCATE port_counters")
            writer = BatchWriter(pool, "port_counters", PortSample._fields, WriterConfig(batch_rows=BATCH), replay)
            started = time.perf_counter()
            await writer.flush()  # the spool first, oldest batch first
            drain_s = time.perf_counter() - started
            stored = await pool.fetchval("SELECT count(*) FROM port_counters")
        finally:
            await pool.close()
        assert stored == total and len(replay) == 0
    finally:
        shutil.rmtree(root, ignore_errors=True)
    bytes_per_row = on_disk / total
    return {
        "rows": total,
        "batch_rows": BATCH,
        "push_rows_per_s": round(total / push_s),
        "read_rows_per_s": round(total / peek_s),
        "replay_into_db_rows_per_s": round(total / drain_s),
        "goal_rows_per_s": 5 * FABRIC_16K_ROWS_PER_S,
        "bytes_per_row": round(bytes_per_row, 1),
        "outage_minutes_per_gb_16k_gpus": round((1 << 30) / bytes_per_row / FABRIC_16K_ROWS_PER_S / 60, 1),
    }
