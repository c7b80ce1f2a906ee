"""The binary COPY encoder (store/_copy_binary.c) against the real database: PostgreSQL stores
exactly what asyncpg's encoder would have sent; a batch the C hands back, and a table whose column
types change under a running writer, still lose nothing."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from store import copy_binary
from store.config import WriterConfig
from store.db import StoreUnavailable
from store.fec import COLUMNS as FEC_COLUMNS
from store.records import I64_MAX, PfcSample, PortSample
from store.writer import BatchWriter

pytestmark = pytest.mark.db

I64_MIN = -I64_MAX - 1
#: Values at the edges of each column type, and ordinary ones.
INTS = [None, 0, 1, -1, I64_MAX, I64_MIN, 2**32, 400_000_000_000]
FLOATS = [None, 0.0, -0.0, 1.5, 1e300, -1e-300, math.inf, -math.inf, 123456.789]
FLOAT4S = [None, 0.0, 10.0, 9.999999747378752, 3.4028234663852886e38, 1e-45]
NAMES = ["lf-g1-r1", "swp1", "Ethernet1/1", "ssp-1", "ポート", "eth 1/2/3:4", ""]
TIMES = [
    datetime(2026, 12, 2, 12, 0, 0, 123456, tzinfo=UTC),
    datetime(2000, 1, 1, tzinfo=UTC),
    datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    datetime(1970, 1, 1, tzinfo=UTC),
    datetime(2100, 2, 28, 1, 2, 3, tzinfo=UTC),
]


def port_rows(n: int, seed: int) -> list[PortSample]:
    rnd = random.Random(seed)
    rows = []
    for i in range(n):
        head = (rnd.choice(TIMES) + timedelta(seconds=i), rnd.choice(NAMES), f"p{i}", rnd.choice([None, 1, 2, 7, -1]))
        ints = [rnd.choice(INTS) for _ in range(17)]
        rates = [rnd.choice(FLOATS) for _ in range(9)]
        rows.append(PortSample._make((*head, *ints, rnd.choice(FLOAT4S), *rates, rnd.random() < 0.5)))
    return rows


def pfc_rows(n: int, seed: int) -> list[PfcSample]:
    rnd = random.Random(seed)
    rows = []
    for i in range(n):
        head = (rnd.choice(TIMES) + timedelta(seconds=i), rnd.choice(NAMES), f"p{i}", rnd.randint(-1, 7))
        pauses = (rnd.choice(INTS), rnd.choice(INTS), rnd.choice(FLOAT4S), rnd.choice(FLOATS), rnd.choice(FLOATS))
        rows.append(PfcSample._make((*head, *pauses, rnd.random() < 0.5)))
    return rows


def fec_rows(n: int, seed: int) -> list[tuple[object, ...]]:
    """``port_fec`` rows as its writer copies them (store/fec.py): the FEC bins as a list of 16
    int8 (SONiC, Cumulus), or NULL where the device has none (OpenConfig)."""
    rnd = random.Random(seed)
    rows: list[tuple[object, ...]] = []
    for i in range(n):
        head = (rnd.choice(TIMES) + timedelta(seconds=i), rnd.choice(NAMES), f"p{i}")
        counts = (rnd.choice(INTS), rnd.choice(INTS), rnd.choice(INTS), rnd.choice(FLOATS), rnd.choice(FLOATS))
        bins = None if rnd.random() < 0.3 else [rnd.choice([0, 1, 7, I64_MAX, I64_MIN, 2**40]) for _ in range(16)]
        rows.append((*head, *counts, bins))
    return rows


@pytest.mark.parametrize(
    ("table", "rows", "columns"),
    [
        ("port_counters", port_rows(600, 1), PortSample._fields),
        ("pfc_counters", pfc_rows(600, 2), PfcSample._fields),
        ("port_fec", fec_rows(600, 3), FEC_COLUMNS),
    ],
)
async def test_postgres_stores_the_same_rows_from_either_encoder(
    pool: asyncpg.Pool,
    table: str,
    rows: list[PortSample] | list[PfcSample] | list[tuple[object, ...]],
    columns: tuple[str, ...],
) -> None:
    async with pool.acquire() as conn:
        kinds = await copy_binary.column_kinds(conn, table, columns)
        assert kinds is not None
        payload = copy_binary.encode(rows, kinds)
        assert payload is not None
        await conn.copy_records_to_table(table, records=rows, columns=columns)
        by_asyncpg = await conn.fetch(f"SELECT * FROM {table} ORDER BY switch, port, time")
        await conn.execute(f"TRUNCATE {table}")
        await conn.copy_to_table(table, source=memoryview(payload), columns=columns, format="binary")
        by_c = await conn.fetch(f"SELECT * FROM {table} ORDER BY switch, port, time")
    assert len(by_c) == len(rows)
    assert [tuple(r) for r in by_c] == [tuple(r) for r in by_asyncpg]


def samples(n: int, start: int = 0) -> list[PortSample]:
    t0 = datetime(2026, 12, 2, tzinfo=UTC)
    return [
        PortSample(
            t0 + timedelta(seconds=10 * (start + i)),
            "lf-g1-r1",
            "swp1",
            1,
            400_000_000_000,
            in_octets=start + i,
            interval_s=10.0 + i / 8,
        )
        for i in range(n)
    ]


async def test_a_writer_sends_binary_and_a_batch_the_c_hands_back_goes_through_asyncpg(pool: asyncpg.Pool) -> None:
    w = BatchWriter(pool, "port_counters", PortSample._fields, WriterConfig(batch_rows=100))
    await w.put(samples(100))
    await w.flush()
    assert (w.stats.batches, w.stats.binary_batches, w.stats.asyncpg_batches, w.stats.rows_written) == (1, 1, 0, 100)
    # oper_status beyond smallint: the C hands the batch back, asyncpg refuses that one row alone.
    bad = samples(10, start=100)
    bad[3] = bad[3]._replace(oper_status=2**15)
    await w.put(bad)
    await w.close()
    assert (w.stats.binary_batches, w.stats.asyncpg_batches) == (1, 0)  # the second: bisected, row by row
    assert (w.stats.rows_written, w.stats.rows_rejected) == (109, 1)
    assert await pool.fetchval("SELECT count(*) FROM port_counters") == 109


async def test_a_column_type_changed_under_the_writer_loses_no_row(pool: asyncpg.Pool) -> None:
    w = BatchWriter(pool, "port_counters", PortSample._fields, WriterConfig(batch_rows=50))
    await w.put(samples(50))
    await w.flush()  # the kinds read: interval_s is float4
    await pool.execute("ALTER TABLE port_counters ALTER COLUMN interval_s TYPE double precision")
    await w.put(samples(50, start=50))
    await w.flush()  # sent as float4 into a float8 column: refused, written by asyncpg, kinds read again
    await w.put(samples(50, start=100))
    await w.close()
    assert (w.stats.rows_written, w.stats.rows_rejected) == (150, 0)
    assert (w.stats.binary_batches, w.stats.asyncpg_batches) == (2, 1)
    stored = await pool.fetch("SELECT in_octets, interval_s FROM port_counters ORDER BY time")
    sent = [*samples(50), *samples(50, start=50), *samples(50, start=100)]
    assert [(r["in_octets"], r["interval_s"]) for r in stored] == [(s.in_octets, s.interval_s) for s in sent]


async def test_a_batch_that_collides_goes_to_the_conflict_path_not_through_asyncpg_again(
    pool: asyncpg.Pool, caplog: pytest.LogCaptureFixture
) -> None:
    w = BatchWriter(pool, "port_counters", PortSample._fields, WriterConfig(batch_rows=50))
    await w.put(samples(50))
    await w.flush()
    await w.put(samples(60))  # a reconnect's replay: 50 stored already, 10 new
    await w.close()
    assert (w.stats.rows_written, w.stats.rows_duplicate, w.stats.conflict_batches) == (60, 50, 1)
    assert (w.stats.binary_batches, w.stats.asyncpg_batches) == (2, 0)  # the colliding one: staged
    assert "binary COPY was refused" not in caplog.text


async def test_a_table_whose_name_needs_quoting_is_still_encoded_in_c(pool: asyncpg.Pool) -> None:
    await pool.execute('CREATE TABLE "Port Counters" (LIKE port_counters INCLUDING DEFAULTS)')
    w = BatchWriter(pool, "Port Counters", PortSample._fields, WriterConfig(batch_rows=20))
    await w.put(samples(20))
    await w.close()
    assert (w.stats.rows_written, w.stats.binary_batches) == (20, 1)
    assert await pool.fetchval('SELECT count(*) FROM "Port Counters"') == 20


async def test_a_table_created_after_the_first_write_is_still_encoded_in_c(pool: asyncpg.Pool) -> None:
    """A database being re-created: the first batch finds no table (kept), the next ones are binary."""
    await pool.execute("ALTER TABLE port_counters RENAME TO port_counters_away")
    w = BatchWriter(pool, "port_counters", PortSample._fields, WriterConfig(batch_rows=10, retry_max_s=0.1))
    await w.put(samples(10))
    with pytest.raises(StoreUnavailable):
        await w.flush()  # no spool: the batch stays buffered
    await pool.execute("ALTER TABLE port_counters_away RENAME TO port_counters")
    await w.flush(force=True)
    await w.put(samples(10, start=10))
    await w.close()
    assert (w.stats.rows_written, w.stats.binary_batches, w.stats.asyncpg_batches) == (20, 2, 0)
