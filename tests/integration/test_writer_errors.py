"""The writer on a real TimescaleDB, one error class at a time: kept and retried, or one row rejected.

Errors that need a cluster-wide fault (PostgreSQL killed, the disk full under a tablespace) are in
tests/integration/test_storage_faults.py. Here the database raises each SQLSTATE for real: from a
trigger that fails the first attempts (a sequence counts them: ``nextval`` survives the rollback),
from a read-only database, from a table dropped under the writer.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest

from store.config import DatabaseConfig, WriterConfig
from store.db import StoreUnavailable, create_pool
from store.migrate import migrate
from store.pgserver import EmbeddedStore
from store.records import PortSample
from store.spool import Spool
from store.writer import BatchWriter
from tests.support.faults import small_filesystem
from tests.support.waiting import until

pytestmark = pytest.mark.db

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
FAST = WriterConfig(batch_rows=100, flush_interval_s=0.02, retry_max_s=0.1)


def samples(n: int, port: str = "swp1", start: int = 0) -> list[PortSample]:
    return [
        PortSample(time=T0 + timedelta(seconds=i), switch="lf-g1-r1", port=port, in_octets=i)
        for i in range(start, start + n)
    ]


async def fail_first(pool: asyncpg.Pool, attempts: int, sqlstate: str, when: str = "true") -> None:
    """Make the database raise ``sqlstate`` for the first ``attempts`` writes to port_counters."""
    await pool.execute(f"""
        CREATE SEQUENCE fm_attempts;
        CREATE FUNCTION fm_fail() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF ({when}) AND nextval('fm_attempts') <= {attempts} THEN
                RAISE EXCEPTION 'injected by the test' USING ERRCODE = '{sqlstate}';
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER fm_fail BEFORE INSERT ON port_counters FOR EACH ROW EXECUTE FUNCTION fm_fail();
    """)  # fmt: skip


async def until_stored(pool: asyncpg.Pool, n: int, within_s: float = 20.0) -> None:
    seen = [0]

    async def stored() -> bool:
        seen[0] = await pool.fetchval("SELECT count(*) FROM port_counters", timeout=10)
        return seen[0] >= n

    await until(stored, within_s, lambda: f"{seen[0]} of {n} rows stored", every_s=0.02)


async def stored_octets(pool: asyncpg.Pool) -> list[int]:
    return [r["in_octets"] for r in await pool.fetch("SELECT in_octets FROM port_counters ORDER BY time, port")]


@pytest.mark.parametrize(
    ("sqlstate", "name"),
    [
        ("40001", "rollback"),  # serialization failure
        ("40P01", "rollback"),  # deadlock detected
        ("53100", "resources"),  # disk full
        ("53200", "resources"),  # out of memory
        ("25006", "read_only"),  # read-only transaction
        ("57014", "operator"),  # statement canceled
        ("58030", "server"),  # I/O error
        ("XX001", "server"),  # data corrupted
        ("P0001", "other"),  # an error nobody classified: kept, never a reason to drop rows
    ],
)
async def test_a_database_that_cannot_take_writes_keeps_the_batch(
    pool: asyncpg.Pool, tmp_path: Path, sqlstate: str, name: str
) -> None:
    await fail_first(pool, 3, sqlstate)
    w = BatchWriter(pool, "port_counters", PortSample._fields, FAST, spool=Spool(tmp_path / "spool", 1 << 26))
    w.start()
    await w.put(samples(250))
    await until_stored(pool, 250)
    await w.close()
    assert await stored_octets(pool) == list(range(250))  # every row, once
    assert w.stats.rows_rejected == 0
    # Three failed attempts, no bisection: the batch was kept whole each time, not tried row by row.
    assert w.stats.errors == {name: 3}
    assert await pool.fetchval("SELECT last_value FROM fm_attempts") == 3 + 250  # 3 failures, then each row once
    assert w.stats.outages == 1 and not w.deferring


async def test_without_a_spool_the_batch_stays_buffered_and_flush_says_so(pool: asyncpg.Pool) -> None:
    await fail_first(pool, 1, "53100")
    w = BatchWriter(pool, "port_counters", PortSample._fields, FAST)
    await w.put(samples(30))
    with pytest.raises(StoreUnavailable, match="resources 53100: injected"):
        await w.flush()
    assert w.pending == 30 and w.deferring
    await w.close()  # one last attempt, whatever the backoff
    assert await stored_octets(pool) == list(range(30)) and w.pending == 0


@pytest.mark.parametrize("sqlstate", ["22023", "23514", "22P02"])
async def test_a_row_the_database_refuses_is_rejected_alone(pool: asyncpg.Pool, sqlstate: str) -> None:
    await fail_first(pool, 1_000_000, sqlstate, when="NEW.port = 'swp-bad'")
    w = BatchWriter(pool, "port_counters", PortSample._fields, WriterConfig(batch_rows=1000))
    rows = samples(300)
    await w.put([*rows[:123], *samples(2, port="swp-bad", start=7), *rows[123:]])
    await w.close()
    assert w.stats.rows_rejected == 2 and w.stats.rows_written == 300 and w.stats.errors == {}
    assert await stored_octets(pool) == list(range(300))


async def test_a_read_only_database_keeps_everything(fresh_db: str, tmp_path: Path) -> None:
    """``default_transaction_read_only`` (a failover to a replica does this): 25006 for real."""
    admin = await create_pool(fresh_db)
    async with admin.acquire() as conn:
        await migrate(conn)
    database = await admin.fetchval("SELECT current_database()")
    await admin.execute(f'ALTER DATABASE "{database}" SET default_transaction_read_only = on')
    pool = await create_pool(fresh_db)  # its sessions start read-only
    try:
        w = BatchWriter(pool, "port_counters", PortSample._fields, FAST, spool=Spool(tmp_path / "spool", 1 << 26))
        w.start()
        for k in range(10):
            await w.put(samples(50, start=50 * k))
            await asyncio.sleep(0.02)
        await until(lambda: w.stats.errors.get("read_only", 0) >= 2, 2, lambda: f"errors: {w.stats.errors}")
        assert w.stats.rows_rejected == 0
        assert w.spool is not None and w.spool.stats.rows >= 1  # on disk, not thrown away row by row
        await admin.execute(f'ALTER DATABASE "{database}" RESET default_transaction_read_only')
        await pool.expire_connections()  # sessions started read-only stay so: new ones are not
        await until_stored(admin, 500)
        await w.close()
        assert await stored_octets(admin) == list(range(500))
        assert w.stats.rows_rejected == 0 and w.spool.stats.rows == 0 and w.spool.stats.rows_dropped == 0
    finally:
        await pool.close()
        await admin.close()


async def test_a_table_dropped_under_the_writer_waits_for_the_migration(
    pool: asyncpg.Pool, migrated_db: str, tmp_path: Path
) -> None:
    """A re-initialised database: the table is gone (42P01) until the migrations run again."""
    w = BatchWriter(pool, "port_counters", PortSample._fields, FAST, spool=Spool(tmp_path / "spool", 1 << 26))
    w.start()
    await w.put(samples(100))
    await until_stored(pool, 100)
    await pool.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")  # `fabricmon db reset`, by hand
    await w.put(samples(200, start=100))
    await until(lambda: w.stats.errors.get("undefined", 0) >= 2, 4, lambda: f"errors: {w.stats.errors}")
    assert w.stats.rows_rejected == 0
    conn = await asyncpg.connect(migrated_db)  # a new session: TimescaleDB is created as its first command
    try:
        await migrate(conn)
    finally:
        await conn.close()
    await pool.expire_connections()  # the test's own reads were prepared for the old table too
    await until_stored(pool, 200)
    await w.close()
    assert await stored_octets(pool) == list(range(100, 300))  # the rows written after the drop, all
    assert w.stats.rows_rejected == 0


async def test_a_session_terminated_mid_stream_loses_nothing(pool: asyncpg.Pool, tmp_path: Path) -> None:
    """An operator's pg_terminate_backend (57P01 for the session, then a dead connection)."""
    w = BatchWriter(pool, "port_counters", PortSample._fields, FAST, spool=Spool(tmp_path / "spool", 1 << 26))
    w.start()
    for k in range(20):
        await w.put(samples(25, start=25 * k))
        if k % 5 == 2:
            await pool.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        await asyncio.sleep(0.03)
    await until_stored(pool, 500)
    await w.close()
    assert await stored_octets(pool) == list(range(500)) and w.stats.rows_rejected == 0


async def test_a_spooled_batch_replays_in_its_own_columns(pool: asyncpg.Pool, tmp_path: Path) -> None:
    """A batch spooled by a version with fewer columns: the rest take their defaults."""
    spool = Spool(tmp_path / "spool", 1 << 26)
    old = [(T0 + timedelta(seconds=i), "lf-g1-r1", "swp1", i) for i in range(5)]
    assert spool.push(old, ("time", "switch", "port", "in_octets"))
    w = BatchWriter(pool, "port_counters", PortSample._fields, FAST, spool=spool)
    await w.put(samples(5, start=5))
    await w.close()
    assert await stored_octets(pool) == list(range(10))
    assert await pool.fetchval("SELECT count(*) FROM port_counters WHERE counter_reset = false") == 10


async def test_a_full_spool_disk_during_an_outage_drops_the_oldest_counted(
    private_store: EmbeddedStore, tmp_path: Path
) -> None:
    """Database away and the spool's disk full: collection goes on, every row stored or counted,
    through shutdown and the next start."""
    pool = await create_pool(private_store.dsn())
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
        with small_filesystem("128k") as disk:
            spool = Spool(disk / "spool", 1 << 30)
            config = WriterConfig(batch_rows=200, flush_interval_s=0.02, retry_max_s=0.1, max_pending_rows=2_000)
            w = BatchWriter(pool, "port_counters", PortSample._fields, config, spool=spool)
            w.start()
            await asyncio.to_thread(private_store.stop)
            produced = 0

            async def produce(k: int) -> None:  # three producers: one may wait while the spool gives out
                nonlocal produced
                for _ in range(35):
                    start = 1_000_000 * k + produced
                    produced += 150
                    await asyncio.wait_for(w.put(samples(150, start=start)), 5)  # never blocks for long
                    await asyncio.sleep(0.005)

            await asyncio.gather(*(produce(k) for k in range(3)))  # 15,750 rows: ~210 KB of batches, 128 KB of disk
            assert spool.stats.write_errors > 0 and w.stats.rows_dropped.get("spool_unwritable", 0) > 0
            assert w.pending <= config.max_pending_rows
            await w.close()  # still down: what the spool cannot take is counted, not lost unseen
            dropped = sum(w.stats.rows_dropped.values()) + spool.stats.rows_dropped
            assert w.pending == 0 and spool.stats.rows + dropped == produced
            on_disk = spool.stats.rows
            await asyncio.to_thread(private_store.start)
            again = BatchWriter(pool, "port_counters", PortSample._fields, config, spool=Spool(disk / "spool", 1 << 30))
            await again.flush()
        octets = await stored_octets(pool)
        assert len(octets) == on_disk == len(set(octets)) > 0 and again.stats.rows_rejected == 0
    finally:
        await pool.close()


def postgres_processes(store: EmbeddedStore) -> list[int]:
    """The postmaster of ``store`` and its children (backends, checkpointer, ...)."""
    top = int((store.data_dir / "postmaster.pid").read_text().split()[0])
    pids = [top]
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == top:
                pids.append(int(stat.parent.name))
    return pids


async def put_at_once(w: BatchWriter, rows: list[PortSample]) -> bool:
    """``w.put(rows)``; True if it finished in its first step, giving the loop away for nothing (no
    database, no room). Counted in steps of the loop, not seconds: a loaded machine runs late, not
    differently. (A bound of 0.5 s on each put flaked on a busy 2-core machine.)"""
    task = asyncio.create_task(w.put(rows))
    await asyncio.sleep(0)  # one turn of the loop: the put's first step runs, and ends it unless it waits
    at_once = task.done()
    await asyncio.wait_for(task, 10)
    return at_once


@pytest.mark.timeout(180)
async def test_a_database_that_stops_answering_times_out_into_the_spool(
    private_store: EmbeddedStore, tmp_path: Path
) -> None:
    """SIGSTOP on every PostgreSQL process (a failover without a TCP reset): writes time out, rows
    spool, put() never waits, and after SIGCONT all of it is stored once."""
    pool = await create_pool(private_store.dsn(), DatabaseConfig(connect_timeout_s=1.0))
    reader = await create_pool(private_store.dsn())  # the test's own reads: not the writer's sessions
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
        config = WriterConfig(batch_rows=100, flush_interval_s=0.05, retry_max_s=0.5, write_timeout_s=1.0)
        w = BatchWriter(pool, "port_counters", PortSample._fields, config, spool=Spool(tmp_path / "spool", 1 << 26))
        w.start()
        await w.put(samples(100))
        await until_stored(reader, 100)
        stopped = postgres_processes(private_store)
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        try:
            waited = []
            for k in range(1, 40):
                if not await put_at_once(w, samples(50, start=50 * k + 50)):
                    waited.append(k)
                await asyncio.sleep(0.05)
            assert w.stats.errors.get("connection", 0) >= 1 and w.deferring
            assert w.spool is not None and w.spool.stats.rows_spooled > 0
            assert waited == []  # the caller never waited for the hung database
        finally:
            for pid in stopped:
                os.kill(pid, signal.SIGCONT)
        await until_stored(reader, 100 + 39 * 50, within_s=60)
        await w.close()
        assert await stored_octets(reader) == list(range(100 + 39 * 50)) and w.stats.rows_rejected == 0
    finally:
        await asyncio.wait_for(pool.close(), 30)
        await reader.close()


async def test_callers_do_not_wait_behind_a_long_replay(pool: asyncpg.Pool, tmp_path: Path) -> None:
    """After an outage the spool replays; meanwhile the newest rows go to its tail, never a full buffer."""
    spool = Spool(tmp_path / "spool", 1 << 28)
    for k in range(60):  # the backlog of an outage
        assert spool.push(samples(100, start=100 * k), PortSample._fields)
    await pool.execute("""
        CREATE FUNCTION fm_slow() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_sleep(0.05); RETURN NULL; END $$;
        CREATE TRIGGER fm_slow AFTER INSERT ON port_counters FOR EACH STATEMENT EXECUTE FUNCTION fm_slow();
    """)  # fmt: skip  # each COPY takes 50 ms: the replay takes ~3 s
    config = WriterConfig(batch_rows=100, flush_interval_s=0.02, max_pending_rows=300)
    w = BatchWriter(pool, "port_counters", PortSample._fields, config, spool=spool)
    w.start()
    slowest, k = 0.0, 0
    while len(spool) > 0 or k < 20:
        began = time.monotonic()
        await asyncio.wait_for(w.put(samples(100, start=6_000 + 100 * k)), 10)
        slowest = max(slowest, time.monotonic() - began)
        k += 1
        await asyncio.sleep(0.1)  # 1,000 rows/s: slower than the replay's 2,000, so it drains
        assert k < 300
    await w.close()
    # behind the replay a caller would wait ~3 s; 0.52 s was seen on a loaded CI-sized machine
    assert slowest < 1.5, slowest
    assert await stored_octets(pool) == list(range(6_000 + 100 * k))


async def test_a_spooled_batch_refused_for_good_is_quarantined_not_a_block(pool: asyncpg.Pool, tmp_path: Path) -> None:
    """A trigger refuses the spool's oldest batch (P0001, no row named) while newer rows are stored."""
    await fail_first(pool, 1_000_000, "P0001", when="NEW.port = 'swp-poison'")
    spool = Spool(tmp_path / "spool", 1 << 26)
    assert spool.push(samples(20, port="swp-poison"), PortSample._fields)
    assert spool.push(samples(10, start=20), PortSample._fields)  # behind it, fine
    w = BatchWriter(pool, "port_counters", PortSample._fields, FAST, spool=spool)
    w.start()
    await w.put(samples(30, start=30))
    await until_stored(pool, 40)
    await w.close()
    assert await stored_octets(pool) == list(range(20, 60))
    assert spool.stats.batches_quarantined == 1 and spool.stats.rows_quarantined == 20 and len(spool) == 0
    assert w.stats.rows_rejected == 0 and w.stats.errors["other"] == 2  # refused twice, then set aside
    reason = next((tmp_path / "quarantine" / "spool").glob("*.reason")).read_text()
    assert "refused by the database while newer rows were stored" in reason and "P0001" in reason


async def test_an_outage_never_quarantines_a_spooled_batch(pool: asyncpg.Pool, tmp_path: Path) -> None:
    """The same, but the database refuses everything (a disk full): the batch waits, whole."""
    await fail_first(pool, 6, "53100")
    spool = Spool(tmp_path / "spool", 1 << 26)
    assert spool.push(samples(20), PortSample._fields)
    w = BatchWriter(pool, "port_counters", PortSample._fields, FAST, spool=spool)
    w.start()
    await w.put(samples(30, start=20))
    await until_stored(pool, 50)
    await w.close()
    assert await stored_octets(pool) == list(range(50)) and spool.stats.batches_quarantined == 0


async def test_rows_narrower_than_the_table_are_quarantined_unwritten(pool: asyncpg.Pool, tmp_path: Path) -> None:
    """A batch without column names (version 1) whose rows are not as wide as the table."""
    spool = Spool(tmp_path / "spool", 1 << 26)
    assert spool.push([(T0, "lf-g1-r1", "swp1", 5)])  # four values, no names: which columns?
    w = BatchWriter(pool, "port_counters", PortSample._fields, FAST, spool=spool)
    await w.put(samples(3))
    await w.close()
    assert await stored_octets(pool) == [0, 1, 2] and spool.stats.batches_quarantined == 1


async def test_the_flush_timer_survives_a_bug(pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception nobody foresaw in a timer round: logged, counted, the timer runs on."""
    w = BatchWriter(pool, "port_counters", PortSample._fields, FAST)
    real = w.flush
    calls = 0

    async def flaky(*, force: bool = False) -> int:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("a bug in a flush")
        return await real(force=force)

    monkeypatch.setattr(w, "flush", flaky)
    w.start()
    await w.put(samples(40))
    await until_stored(pool, 40)
    assert w.health.restarts == 1 and w.health.last_error == "RuntimeError: a bug in a flush"
    assert w.health.healthy
    monkeypatch.undo()
    await w.close()
