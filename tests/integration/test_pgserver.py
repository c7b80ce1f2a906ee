"""The embedded store on this machine's PostgreSQL + TimescaleDB: one cluster for the whole file."""

from __future__ import annotations

import os
import stat
import subprocess
import uuid
from pathlib import Path

import asyncpg
import pytest

from store.errors import EmbeddedStoreError, StoreError
from store.pgserver import EmbeddedStore, default_root, mask_password
from store.pgsystem import find_bindir


@pytest.mark.db
def test_start_is_idempotent(pg_store: EmbeddedStore) -> None:
    first = pg_store.status()
    again = pg_store.start()
    assert first.running and again.running
    assert again.pid == first.pid and again.port == first.port
    assert again.version and again.timescaledb_version


@pytest.mark.db
def test_dsn_shape(pg_store: EmbeddedStore, pg_dsn: str) -> None:
    port = pg_store.status().port
    assert pg_dsn.startswith("postgresql://fabricmon:") and pg_dsn.endswith(f"@127.0.0.1:{port}/fabricmon")
    assert mask_password(pg_dsn) == f"postgresql://fabricmon:***@127.0.0.1:{port}/fabricmon"
    assert "***" in repr(pg_store.status().as_dict()) and "dsn=" not in repr(pg_store.status())


@pytest.mark.db
async def test_dsn_works_with_asyncpg(pg_dsn: str) -> None:
    conn = await asyncpg.connect(pg_dsn)
    try:
        version = await conn.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'timescaledb'")
        assert version and version[0].isdigit()
        assert await conn.fetchval("SHOW max_locks_per_transaction") == "256"
        assert await conn.fetchval("SHOW timescaledb.telemetry_level") == "off"
        assert await conn.fetchval("SELECT inet_server_addr()::text") == "127.0.0.1/32"
    finally:
        await conn.close()


@pytest.mark.db
def test_dsn_works_with_psql(pg_dsn: str) -> None:
    psql = find_bindir() / "psql"
    out = subprocess.run(
        [str(psql), pg_dsn, "-X", "-Atc", "SELECT current_database()"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert out.stdout.strip() == "fabricmon"


@pytest.mark.db
async def test_create_hypertable(fresh_db: str) -> None:
    conn = await asyncpg.connect(fresh_db)
    try:
        await conn.execute("CREATE TABLE t (time timestamptz NOT NULL, v double precision)")
        await conn.execute("SELECT create_hypertable('t', 'time', chunk_time_interval => interval '1 hour')")
        await conn.execute(
            "INSERT INTO t SELECT g, 1 FROM generate_series(now() - interval '5 hours', now(), interval '1 minute') g"
        )
        buckets = await conn.fetchval("SELECT count(DISTINCT time_bucket('1 hour', time)) FROM t")
        chunks = await conn.fetchval("SELECT count(*) FROM timescaledb_information.chunks WHERE hypertable_name = 't'")
        assert buckets >= 5 and chunks >= 5
    finally:
        await conn.close()


@pytest.mark.db
def test_files_and_permissions(pg_store: EmbeddedStore) -> None:
    assert stat.S_IMODE(pg_store.password_file.stat().st_mode) == 0o600
    assert pg_store.password_file.stat().st_uid == os.geteuid()
    assert stat.S_IMODE(pg_store.data_dir.stat().st_mode) == 0o700
    assert pg_store.log_file.is_file()
    if os.geteuid() == 0:  # the server runs as the postgres account, never root
        assert pg_store.data_dir.stat().st_uid != 0


@pytest.mark.db
def test_stop_then_restart_keeps_data(pg_store: EmbeddedStore, pg_dsn: str) -> None:
    table = f"keep_{uuid.uuid4().hex[:8]}"
    psql = str(find_bindir() / "psql")

    def sql(query: str) -> str:
        done = subprocess.run([psql, pg_store.dsn(), "-X", "-Atc", query], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    sql(f"CREATE TABLE {table} AS SELECT 42 AS answer")
    stopped = pg_store.stop()
    assert not stopped.running and stopped.pid is None
    assert pg_store.stop() == stopped  # idempotent
    assert stopped.port == pg_store.status().port and pg_store.dsn() == pg_dsn  # url works while down
    restarted = pg_store.start()
    assert restarted.running and restarted.port == stopped.port
    assert sql(f"SELECT answer FROM {table}") == "42"
    sql(f"DROP TABLE {table}")


def test_missing_binaries_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FABRICMON_PG_BIN", str(tmp_path / "nowhere"))
    with pytest.raises(EmbeddedStoreError, match="make setup") as caught:
        EmbeddedStore(tmp_path / "pg").start()
    assert isinstance(caught.value, StoreError)
    assert not (tmp_path / "pg").exists()


def test_uninitialized_store_reports_and_refuses_url(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path / "pg")
    status = store.stop()
    assert not status.running and not status.initialized and status.dsn is None
    with pytest.raises(EmbeddedStoreError, match="fabricmon db start"):
        store.dsn()


def test_default_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FABRICMON_DATA_DIR", str(tmp_path))
    assert default_root() == tmp_path / "pg"
    monkeypatch.delenv("FABRICMON_DATA_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    expected = Path("/var/lib/fabricmon/pg") if os.geteuid() == 0 else tmp_path / "xdg" / "fabricmon" / "pg"
    assert default_root() == expected
