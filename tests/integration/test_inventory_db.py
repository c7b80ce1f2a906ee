"""Loading a fabric inventory into the real database, and the demo's first stage."""

from __future__ import annotations

import json

import asyncpg
import pytest

from cli.main import main
from fabric.topology import FabricParams, build_aipod
from store.inventory import load_fabric
from store.migrate import migrate

pytestmark = pytest.mark.db


async def test_load_and_reload(fresh_db: str) -> None:
    fabric = build_aipod(FabricParams(gpus=1024))
    conn = await asyncpg.connect(fresh_db)
    try:
        await migrate(conn)
        # A port the collector discovered before the inventory knew the switch.
        await conn.execute("INSERT INTO ports (switch, port, known) VALUES ('lf-g1-r1', 'swp999', false)")
        result = await load_fabric(conn, fabric)
        summary = fabric.summary()
        assert result.switches == summary["switches"]
        assert result.links == summary["links"]
        assert result.servers == summary["servers"]
        assert result.ports == summary["ports"]
        assert await conn.fetchval("SELECT count(*) FROM switches WHERE role = 'leaf'") == summary["leaves"]
        assert await conn.fetchval("SELECT count(*) FROM ports WHERE NOT known") == 1
        # Leaf uplinks land on spines of their own rail, as the design says.
        wrong = await conn.fetchval(
            """SELECT count(*) FROM links l JOIN switches a ON a.name = l.a_node JOIN switches b ON b.name = l.b_node
               WHERE l.kind = 'leaf-spine' AND a.rail <> b.rail"""
        )
        assert wrong == 0
        meta = await conn.fetchrow("SELECT params, summary FROM fabric_meta")
        assert json.loads(meta["summary"])["gpus"] == 1024
        # Reloading a smaller fabric replaces the design; discovered ports survive.
        small = build_aipod(FabricParams(gpus=512))
        await load_fabric(conn, small)
        assert await conn.fetchval("SELECT count(*) FROM servers") == 64
        assert await conn.fetchval("SELECT count(*) FROM ports WHERE NOT known") == 1
    finally:
        await conn.close()


def test_demo_prints_summary_from_the_store(pg_dsn: str, capsys: pytest.CaptureFixture[str]) -> None:
    # The fixture's autouse FABRICMON_DATA_DIR points the demo at the test run's private cluster.
    code = main(["demo", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["fabric"]["gpus"] == 512 and out["fabric"]["group_gpus"] == 512
    assert out["database"]["gpus"] == 512
    assert out["database"]["leaves"] == 8
    assert out["database"]["hypertables"] >= 4
