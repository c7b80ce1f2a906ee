"""The storage fault fixtures do what they say, on the real kernel and a real cluster."""

from __future__ import annotations

import asyncio
import errno
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest

from store.db import create_pool
from store.migrate import migrate
from store.pgserver import EmbeddedStore, process_state
from store.records import PortSample
from tests.support.faults import (
    dsn_for,
    fill,
    free,
    free_bytes,
    kill_postgres,
    postmaster_pid,
    read_only,
    small_filesystem,
    tablespace_on,
    terminate_sessions,
)

MB = 1 << 20
T0 = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)  # all rows in one hour's chunk


def _mounted(where: Path) -> bool:
    with open("/proc/self/mounts", encoding="utf-8") as mounts:
        return any(line.split()[1] == str(where) for line in mounts)


def _write(path: Path, size: int) -> None:
    with path.open("wb") as out:
        out.write(bytes(size))


# --- small filesystem, fill and free ------------------------------------------------------------


def test_small_filesystem_is_small_and_goes_away() -> None:
    with small_filesystem("1m") as where:
        assert _mounted(where) and where.stat().st_mode & 0o777 == 0o755
        with pytest.raises(OSError) as full:
            _write(where / "big", 2 * MB)
        assert full.value.errno == errno.ENOSPC
        (where / "big").unlink()
        filler = fill(where, leave_bytes=64 << 10)
        assert 64 << 10 <= free_bytes(where) < (64 << 10) + 2 * os.statvfs(where).f_frsize
        with pytest.raises(OSError):
            _write(where / "more", 128 << 10)
        (where / "more").unlink()
        assert free(filler) > 900 << 10
        assert free_bytes(where) > 900 << 10
        _write(where / "more", 128 << 10)
        fill(where)
        fill(where)  # a second filler on a full filesystem is empty
        assert free_bytes(where) == 0
        assert free(where) > 700 << 10 and not list(where.glob(".fabricmon-filler-*"))
    assert not _mounted(where) and not where.exists()


def test_a_busy_small_filesystem_is_unmounted_lazily() -> None:
    with small_filesystem("1m") as where, (where / "held").open("w") as held:
        held.write("x")
    assert not _mounted(where) and not where.exists()


# --- a tablespace that fills up -----------------------------------------------------------------


def _rows(n: int, start: int = 0, switch: str = "lf-g1-r1") -> list[PortSample]:
    return [PortSample(T0 + timedelta(milliseconds=i), switch, "swp1", in_octets=i) for i in range(start, start + n)]


async def _copy(conn: asyncpg.Connection, rows: list[PortSample]) -> None:
    await conn.copy_records_to_table("port_counters", records=rows, columns=PortSample._fields)


async def _tablespace_of_chunks(conn: asyncpg.Connection) -> set[str]:
    return {
        r["ts"]
        for r in await conn.fetch(
            "SELECT coalesce(t.spcname, 'pg_default') AS ts FROM show_chunks('port_counters') c "
            "JOIN pg_class k ON k.oid = c LEFT JOIN pg_tablespace t ON t.oid = k.reltablespace"
        )
    }


async def test_a_tablespace_on_a_full_filesystem_refuses_inserts_until_freed(fresh_db: str) -> None:
    conn = await asyncpg.connect(fresh_db)
    try:
        await migrate(conn)
        await _copy(conn, _rows(100))  # a chunk that exists before: it moves too
        with small_filesystem("8m") as mnt:
            async with tablespace_on(fresh_db, mnt / "ts") as name:
                assert await _tablespace_of_chunks(conn) == {name}
                await _copy(conn, _rows(1000, 100))
                filler = fill(mnt)
                with pytest.raises(asyncpg.DiskFullError) as full:
                    await _copy(conn, _rows(5000, 1100))  # the writer's COPY
                assert full.value.sqlstate == "53100" and "No space left on device" in str(full.value)
                with pytest.raises(asyncpg.DiskFullError):
                    await conn.execute(
                        "INSERT INTO port_counters (time, switch, port) "
                        "SELECT $1::timestamptz + i * interval '1 us', 'x', 'swp1' FROM generate_series(1, 5000) i",
                        T0,
                    )
                free(filler)
                await _copy(conn, _rows(5000, 1100))
            assert await _tablespace_of_chunks(conn) == {"pg_default"}
            assert not await conn.fetchval("SELECT count(*) FROM pg_tablespace WHERE spcname = $1", name)
        assert await conn.fetchval("SELECT count(*) FROM port_counters") == 6100
    finally:
        await conn.close()


async def test_a_tablespace_is_dropped_when_the_block_fails(fresh_db: str) -> None:
    conn = await asyncpg.connect(fresh_db)
    try:
        await migrate(conn)
        with small_filesystem("4m") as mnt:
            with pytest.raises(RuntimeError, match="the test failed"):
                async with tablespace_on(fresh_db, mnt / "ts") as name:
                    await _copy(conn, _rows(10))
                    raise RuntimeError("the test failed")
            assert not await conn.fetchval("SELECT count(*) FROM pg_tablespace WHERE spcname = $1", name)
        assert await _tablespace_of_chunks(conn) == {"pg_default"}
    finally:
        await conn.close()


# --- read-only --------------------------------------------------------------------------------


async def test_read_only_reaches_existing_pooled_connections(private_store: EmbeddedStore) -> None:
    pool = await create_pool(private_store.dsn())
    try:
        await pool.execute("CREATE TABLE t (x int)")
        held = await pool.acquire()  # a session that exists before, held by the test
        try:
            async with pool.acquire() as idle:  # and one that waits in the pool
                idle_pid = idle.get_server_pid()
            async with read_only(private_store.dsn("postgres"), "fabricmon"):
                with pytest.raises(asyncpg.ReadOnlySQLTransactionError) as refused:
                    await held.execute("INSERT INTO t VALUES (1)")
                assert refused.value.sqlstate == "25006"
                async with pool.acquire() as pooled:
                    assert pooled.get_server_pid() == idle_pid
                    with pytest.raises(asyncpg.ReadOnlySQLTransactionError):
                        await pooled.execute("INSERT INTO t VALUES (2)")
                fresh = await asyncpg.connect(private_store.dsn())
                try:
                    with pytest.raises(asyncpg.ReadOnlySQLTransactionError):
                        await fresh.execute("INSERT INTO t VALUES (2)")
                finally:
                    await fresh.close()
                assert await held.fetchval("SELECT count(*) FROM t") == 0  # reading still works
            await held.execute("INSERT INTO t VALUES (3)")  # the same session writes again
            with pytest.raises(RuntimeError):
                async with read_only(private_store.dsn("postgres")):
                    raise RuntimeError("the test failed")
            await held.execute("INSERT INTO t VALUES (4)")  # undone on error too
        finally:
            await pool.release(held)
        assert [r["x"] for r in await pool.fetch("SELECT x FROM t ORDER BY x")] == [3, 4]
    finally:
        await pool.close()


async def test_read_only_for_one_database_ends_its_sessions(fresh_db: str) -> None:
    database = fresh_db.rsplit("/", 1)[1]
    admin = dsn_for(fresh_db, "postgres")
    conn = await asyncpg.connect(fresh_db)
    await conn.execute("CREATE TABLE t (x int)")
    async with read_only(admin, database, scope="database"):
        assert conn.is_closed() or not await _usable(conn)  # terminated on the way in
        fresh = await asyncpg.connect(fresh_db)
        with pytest.raises(asyncpg.ReadOnlySQLTransactionError):
            await fresh.execute("INSERT INTO t VALUES (1)")
        assert await terminate_sessions(admin, database) == 1
        assert not await _usable(fresh)
    again = await asyncpg.connect(fresh_db)
    try:
        await again.execute("INSERT INTO t VALUES (2)")
        assert await again.fetchval("SELECT count(*) FROM t") == 1
    finally:
        await again.close()
        await conn.close()
        await fresh.close()


async def _usable(conn: asyncpg.Connection) -> bool:
    try:
        await conn.fetchval("SELECT 1")
    except (asyncpg.PostgresConnectionError, asyncpg.InterfaceError, ConnectionError):
        return False
    return True


# --- SIGKILL ------------------------------------------------------------------------------------


async def test_sigkilled_postgres_recovers_every_committed_row(private_store: EmbeddedStore) -> None:
    dsn = private_store.dsn()
    conn = await asyncpg.connect(dsn)
    await conn.execute("CREATE TABLE t (x int PRIMARY KEY)")
    committed = 0
    stop = asyncio.Event()

    async def write() -> None:  # one row per transaction, as fast as it goes; counts what was acknowledged
        nonlocal committed
        while not stop.is_set():
            await conn.execute("INSERT INTO t VALUES ($1)", committed)
            committed += 1

    writer = asyncio.create_task(write())
    pending = await asyncpg.connect(dsn)
    await pending.execute("BEGIN; INSERT INTO t SELECT -generate_series(1, 1000)")  # never committed
    await asyncio.sleep(0.5)
    pid = await asyncio.to_thread(kill_postgres, private_store)
    assert postmaster_pid(private_store) == pid  # the stale pid file stays, for crash recovery to find
    # how the loss shows depends on where the INSERT was: a reset, a closed connection, or a
    # protocol left mid-operation (store/db.py lists the same)
    with pytest.raises((asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError, OSError)):
        await asyncio.wait_for(writer, 10)
    assert committed > 10
    log_size = private_store.log_file.stat().st_size

    began = time.monotonic()
    status = await asyncio.to_thread(private_store.start)
    recovery_s = time.monotonic() - began
    assert status.running and status.pid not in (None, pid) and recovery_s < 30
    log = private_store.log_file.read_text()[log_size:]
    assert "automatic recovery in progress" in log
    after = await asyncpg.connect(private_store.dsn())
    try:
        stored = await after.fetchval("SELECT count(*) FROM t WHERE x >= 0")
        assert committed <= stored <= committed + 1  # the one in flight may have committed unacknowledged
        assert await after.fetchval("SELECT count(*) FROM t WHERE x < 0") == 0
    finally:
        await after.close()
        conn.terminate()
        pending.terminate()


async def test_start_right_after_sigkill(private_store: EmbeddedStore) -> None:
    """``start()`` at once after a SIGKILL, before PID 1 reaped the postmaster: a zombie is dead.

    ``os.kill(pid, 0)`` succeeds on a zombie, and the dead postmaster's pid file still says
    "ready"; PostgreSQL itself refuses to start meanwhile ("lock file postmaster.pid already
    exists"). ``start()`` must wait for the reaping and then run crash recovery.
    """
    pid = kill_postgres(private_store, wait=False)
    for _ in range(200):  # the signal landed: a zombie, or reaped already (not the race of a live kill)
        if process_state(pid) != "alive":
            break
        await asyncio.sleep(0.005)
    status = await asyncio.to_thread(private_store.start)
    assert status.running and status.pid != pid
    conn = await asyncpg.connect(private_store.dsn(), timeout=5)
    try:
        assert await conn.fetchval("SELECT 1") == 1
    finally:
        await conn.close()
