"""The incident memory's table on a real TimescaleDB: an upgrade moves what alerts.details held
into it (migration 023), and its writer keeps a switch's links while it fires."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest

from store.incident_memory import IncidentMemory, forget, read_memory, remember
from store.migrate import discover, migrate

pytestmark = pytest.mark.db

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
INSERT = """INSERT INTO alerts (fingerprint, rule, severity, state, summary, details, started_at, last_seen_at)
            VALUES ($1, 'pfc_storm', 'critical', $2, 's', $3::jsonb, $4, $4) RETURNING id"""


async def test_the_upgrade_moves_the_memory_out_of_the_payload(fresh_db: str, tmp_path: Path) -> None:
    for m in discover():
        if m.version < 23:
            shutil.copy(m.path, tmp_path / m.path.name)
    conn = await asyncpg.connect(fresh_db)
    try:
        await migrate(conn, tmp_path)
        stored = {"affected_ports": ["a:1"], "incident_key": "link:a:1", "storm_ports": ["a:1", "b:2"],
                  "notified_servers": ["srv-1"]}  # fmt: skip
        storm = await conn.fetchval(INSERT, "f1", "firing", json.dumps(stored), T0)
        links = {"incident_key": "switch:sp-1", "switch_links": ["lf-1:swp65"], "notified_servers": []}
        spine = await conn.fetchval(INSERT, "f2", "firing", json.dumps(links), T0)
        old = await conn.fetchval(INSERT, "f3", "resolved", json.dumps(stored), T0)
        await migrate(conn)  # 023 and anything after it
        assert await read_memory(conn) == [
            IncidentMemory(storm, "link:a:1", ("a:1", "b:2"), ()),
            IncidentMemory(spine, "switch:sp-1", (), ("lf-1:swp65",)),
        ]  # a resolved incident is remembered by nobody
        rows = await conn.fetch("SELECT id, details, notified_servers FROM alerts ORDER BY id")
        assert [(r["id"], json.loads(r["details"]), r["notified_servers"]) for r in rows] == [
            (storm, {"affected_ports": ["a:1"]}, ["srv-1"]),
            (spine, {}, []),
            (old, {"affected_ports": ["a:1"]}, ["srv-1"]),
        ]
    finally:
        await conn.close()


async def test_a_switch_keeps_every_link_it_held_and_storms_only_this_rounds_ports(fresh_db: str) -> None:
    conn = await asyncpg.connect(fresh_db)
    try:
        await migrate(conn)
        a = await conn.fetchval(INSERT, "f1", "firing", "{}", T0)
        b = await conn.fetchval(INSERT, "f2", "firing", "{}", T0)
        await remember(
            conn, [IncidentMemory(a, "switch:sp-1", (), ("x:1", "x:2")), IncidentMemory(b, "link:y:1", ("y:1",))], T0
        )
        await remember(
            conn, [IncidentMemory(a, "switch:sp-1", (), ("x:3",)), IncidentMemory(b, "link:y:1", ("z:9",))], T0
        )
        assert await read_memory(conn) == [
            IncidentMemory(a, "switch:sp-1", (), ("x:1", "x:2", "x:3")),
            IncidentMemory(b, "link:y:1", ("z:9",), ()),
        ]
        await forget(conn, [a])
        assert [m.alert_id for m in await read_memory(conn)] == [b]
        await conn.execute("DELETE FROM alerts WHERE id = $1", b)  # retention: the memory goes with it
        assert await read_memory(conn) == []
    finally:
        await conn.close()
