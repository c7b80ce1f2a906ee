"""Migrations on a real TimescaleDB: the schema appears once, with hypertables and keys."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import pytest

from store.migrate import MigrationError, discover, migrate
from store.records import TABLES

pytestmark = pytest.mark.db


async def test_applies_in_order_once(fresh_db: str) -> None:
    conn = await asyncpg.connect(fresh_db)
    try:
        first = await migrate(conn)
        assert [m.version for m in first] == [m.version for m in discover()]
        assert await migrate(conn) == []
        rows = await conn.fetch("SELECT version FROM schema_migrations ORDER BY version")
        assert [r["version"] for r in rows] == [m.version for m in discover()]
        hypertables = {
            r["hypertable_name"]
            for r in await conn.fetch("SELECT hypertable_name FROM timescaledb_information.hypertables")
        }
        assert {"port_counters", "pfc_counters", "link_events", "switch_reachability"} <= hypertables
        tables = {r["tablename"] for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname='public'")}
        assert {"switches", "ports", "links", "servers", "alerts", "webhook_deliveries", "jobs"} <= tables
    finally:
        await conn.close()


async def test_records_match_table_columns(fresh_db: str) -> None:
    conn = await asyncpg.connect(fresh_db)
    try:
        await migrate(conn)
        for record, table in TABLES.items():
            cols = await conn.fetch(
                "SELECT column_name FROM information_schema.columns WHERE table_name = $1 ORDER BY ordinal_position",
                table,
            )
            assert [c["column_name"] for c in cols] == list(record._fields), table  # type: ignore[attr-defined]
    finally:
        await conn.close()


async def test_changed_migration_is_refused(fresh_db: str, tmp_path: Path) -> None:
    (tmp_path / "001_one.sql").write_text("CREATE TABLE t_one (x int);")
    conn = await asyncpg.connect(fresh_db)
    try:
        assert len(await migrate(conn, tmp_path)) == 1
        (tmp_path / "001_one.sql").write_text("CREATE TABLE t_one (x bigint);")
        with pytest.raises(MigrationError, match=r"changed after it was applied"):
            await migrate(conn, tmp_path)
    finally:
        await conn.close()


async def test_failed_migration_rolls_back(fresh_db: str, tmp_path: Path) -> None:
    (tmp_path / "001_ok.sql").write_text("CREATE TABLE t_ok (x int);")
    (tmp_path / "002_bad.sql").write_text("CREATE TABLE t_half (x int); SELECT nope_no_such_function();")
    conn = await asyncpg.connect(fresh_db)
    try:
        with pytest.raises(MigrationError, match=r"002_bad\.sql failed"):
            await migrate(conn, tmp_path)
        assert await conn.fetchval("SELECT to_regclass('t_ok') IS NOT NULL")
        assert await conn.fetchval("SELECT to_regclass('t_half') IS NULL")
        assert await conn.fetchval("SELECT max(version) FROM schema_migrations") == 1
    finally:
        await conn.close()


def test_bad_file_names(tmp_path: Path) -> None:
    (tmp_path / "1-init.sql").write_text("")
    with pytest.raises(MigrationError, match=r"NNN_name\.sql"):
        discover(tmp_path)
    (tmp_path / "1-init.sql").unlink()
    (tmp_path / "001_a.sql").write_text("")
    (tmp_path / "001_b.sql").write_text("")
    with pytest.raises(MigrationError, match="also used by"):
        discover(tmp_path)
