"""The COPY writer on a real TimescaleDB: round trip, duplicates once, poison rows alone."""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from store.config import WriterConfig
from store.records import PfcSample, PortSample, from_int8, to_int8
from store.writer import BatchWriter

pytestmark = pytest.mark.db

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def samples(n: int, start: datetime = T0, switch: str = "lf-g1-r1") -> list[PortSample]:
    return [
        PortSample(
            time=start + timedelta(seconds=10 * (i // 4)),
            switch=switch,
            port=f"swp{i % 4 + 1}",
            oper_status=1,
            speed_bps=400_000_000_000,
            in_octets=to_int8(1000 * i),
            out_octets=to_int8((1 << 64) - 1 - i),
            in_bps=8.0 * i,
        )
        for i in range(n)
    ]


def writer_for(pool: asyncpg.Pool, record: type, **kw: object) -> BatchWriter:
    table = {PortSample: "port_counters", PfcSample: "pfc_counters"}[record]
    return BatchWriter(pool, table, record._fields, WriterConfig(**kw))  # type: ignore[attr-defined]


async def test_round_trip(pool: asyncpg.Pool) -> None:
    rows = samples(1000)
    w = writer_for(pool, PortSample, batch_rows=300)
    await w.put(rows)
    await w.close()
    assert w.stats.rows_written == 1000 and w.stats.rows_rejected == 0
    got = await pool.fetch("SELECT * FROM port_counters ORDER BY time, port")
    assert len(got) == 1000
    first = got[0]
    assert first["switch"] == "lf-g1-r1" and first["speed_bps"] == 400_000_000_000
    # The full unsigned 64-bit range survives the trip.
    assert {from_int8(r["out_octets"]) for r in got} == {(1 << 64) - 1 - i for i in range(1000)}


async def test_duplicates_stored_once(pool: asyncpg.Pool) -> None:
    rows = samples(400)
    w = writer_for(pool, PortSample, batch_rows=1000)
    await w.put(rows[:250])
    await w.flush()
    # A reconnect replays part of what was already stored, plus new rows.
    await w.put(rows[200:])
    await w.put(rows[390:])
    await w.close()
    assert await pool.fetchval("SELECT count(*) FROM port_counters") == 400
    assert w.stats.rows_written == 400
    assert w.stats.rows_duplicate == 60
    assert w.stats.conflict_batches >= 1


@pytest.mark.parametrize(
    "poison",
    [
        PortSample(time=T0, switch=None, port="swp9"),  # type: ignore[arg-type]  # NULL key
        PortSample(time=math.nan, switch="lf-g1-r1", port="swp9"),  # type: ignore[arg-type]  # NaN key
        PortSample(time=T0, switch="lf-g1-r1", port="swp9", in_octets=1 << 64),  # out of bigint range
        PortSample(time=T0, switch="lf-g1-r1", port="swp9", oper_status=70000),  # out of smallint range
        PortSample(time=T0, switch="lf-g1-r1", port="swp9", in_bps="fast"),  # type: ignore[arg-type]  # wrong type
    ],
)
async def test_poison_row_loses_only_itself(pool: asyncpg.Pool, poison: PortSample) -> None:
    rows = samples(500)
    batch = [*rows[:321], poison, *rows[321:]]
    w = writer_for(pool, PortSample, batch_rows=10_000)
    await w.put(batch)
    await w.close()
    assert w.stats.rows_rejected == 1
    assert w.stats.rows_written == 500
    assert await pool.fetchval("SELECT count(*) FROM port_counters") == 500


async def test_pfc_priority_check_rejects_one(pool: asyncpg.Pool) -> None:
    rows = [PfcSample(T0, "lf-g1-r1", "swp1", p, rx_pause=p, tx_pause=0) for p in range(-1, 9)]
    w = writer_for(pool, PfcSample)
    await w.put(rows)
    await w.close()
    assert w.stats.rows_rejected == 1  # priority 8 breaks the CHECK
    assert await pool.fetchval("SELECT count(*) FROM pfc_counters") == 9


async def test_flushes_on_timer(pool: asyncpg.Pool) -> None:
    w = writer_for(pool, PortSample, batch_rows=1_000_000, flush_interval_s=0.05)
    w.start()
    await w.put(samples(10))
    for _ in range(100):
        if await pool.fetchval("SELECT count(*) FROM port_counters") == 10:
            break
        await asyncio.sleep(0.02)
    assert await pool.fetchval("SELECT count(*) FROM port_counters") == 10
    await w.close()


async def test_put_waits_when_buffer_full(pool: asyncpg.Pool) -> None:
    w = writer_for(pool, PortSample, batch_rows=1_000_000, max_pending_rows=50, flush_interval_s=0.05)
    rows = samples(200)
    await w.put(rows[:60])  # fills past the limit
    blocked = asyncio.create_task(w.put(rows[60:]))
    await asyncio.sleep(0.05)
    assert not blocked.done()  # back-pressure, not a drop
    w.start()
    await asyncio.wait_for(blocked, 5)
    await w.close()
    assert await pool.fetchval("SELECT count(*) FROM port_counters") == 200


async def test_close_while_the_timer_flushes_loses_nothing(pool: asyncpg.Pool) -> None:
    """close() waits for a timer flush in progress rather than cutting its COPY off."""
    w = writer_for(pool, PortSample, batch_rows=100_000, flush_interval_s=0.01, max_pending_rows=1_000_000)
    w.start()
    rows = samples(40_000)
    await w.put(rows)  # below a batch: only the timer flushes it
    for _ in range(200):  # until the timer's flush holds the lock (its COPY under way)
        if w._flush_lock.locked():
            break
        await asyncio.sleep(0.001)
    assert w._flush_lock.locked()
    await w.close()
    assert w.pending == 0 and w.stats.rows_rejected == 0
    assert w.stats.batches == 1  # the timer's COPY ran to its end; nothing was cut off and redone
    assert await pool.fetchval("SELECT count(*) FROM port_counters") == 40_000
