"""Loading a fabric inventory into the real database, and the demo's first stage."""

from __future__ import annotations

import json
from pathlib import Path

import asyncpg
import pytest

from cli.main import main
from fabric.topology import FabricParams, build_aipod
from store.inventory import load_fabric
from store.migrate import migrate

pytestmark = pytest.mark.db


async def test_load_and_reload(migrated_db: str) -> None:
    fabric = build_aipod(FabricParams(gpus=1024))
    conn = await asyncpg.connect(migrated_db)
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


def test_migrate_loads_the_configured_fabric_into_the_store(
    pg_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The fixture's autouse FABRICMON_DATA_DIR points the command at the test run's private cluster.
    config = tmp_path / "fabricmon.yaml"
    config.write_text("fabric:\n  generate: {gpus: 1024}\n")
    code = main(["migrate", "--load-fabric", "--config", str(config), "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    summary = build_aipod(FabricParams(gpus=1024)).summary()
    assert out["fabric"] == {k: summary[k] for k in ("switches", "servers", "ports", "links")}
    assert out["retention"] == "service"  # the Apache-only build: the service drops chunks
