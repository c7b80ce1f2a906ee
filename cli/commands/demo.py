"""``fabricmon demo``: everything on this machine, on the embedded store.

Today it starts the embedded store, migrates, builds an AIPod fabric, loads it and prints its
summary as the database sees it. Later stages (simulator, collectors, analyzer, API, a fault
scenario) join here as they land.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from cli import context
from cli.output import emit, table
from fabric.topology import FabricParams, build_aipod
from store.db import create_pool
from store.inventory import load_fabric
from store.migrate import migrate
from store.pgserver import EmbeddedStore

_SUMMARY_SQL = """
SELECT
  (SELECT count(*) FROM switches WHERE role = 'leaf')        AS leaves,
  (SELECT count(*) FROM switches WHERE role = 'spine')       AS spines,
  (SELECT count(*) FROM switches WHERE role = 'superspine')  AS superspines,
  (SELECT count(*) FROM servers)                             AS servers,
  (SELECT coalesce(sum(gpus), 0) FROM servers)               AS gpus,
  (SELECT count(DISTINCT rail) FROM switches WHERE rail IS NOT NULL) AS rails,
  (SELECT count(DISTINCT grp) FROM servers)                  AS groups,
  (SELECT count(*) FROM ports)                               AS ports,
  (SELECT count(*) FROM links)                               AS links,
  (SELECT count(*) FROM timescaledb_information.hypertables) AS hypertables
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("demo", parents=[common], help="run fabricmon end to end on this machine")
    p.add_argument("--gpus", type=int, default=512, help="GPUs in the simulated fabric (default 512)")
    p.set_defaults(handler=run)


def _step(message: str) -> None:
    print(f"• {message}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    config = context.config_of(args)
    started = time.monotonic()
    fabric = build_aipod(FabricParams(gpus=args.gpus))
    if config.database.dsn is None:
        _step("starting the embedded store (PostgreSQL + TimescaleDB)")
        status = EmbeddedStore().start()
        _step(f"embedded store on 127.0.0.1:{status.port}, data in {status.data_dir}")
    dsn = context.dsn_of(config)

    async def go() -> dict[str, Any]:
        pool = await create_pool(dsn, config.database)
        try:
            async with pool.acquire() as conn:
                applied = await migrate(conn)
                _step(f"schema: {len(applied)} migration(s) applied" if applied else "schema up to date")
                _step(f"loading a {fabric.params.gpus}-GPU AIPod fabric into the database")
                await load_fabric(conn, fabric)
                row = await conn.fetchrow(_SUMMARY_SQL)
                assert row is not None
                return dict(row)
        finally:
            await pool.close()

    stored = context.run(go())
    summary = fabric.summary()
    data = {"fabric": summary, "database": stored, "seconds": round(time.monotonic() - started, 2)}

    def human() -> str:
        rows = [(k, summary[k]) for k in summary]
        db_rows = [(k, v) for k, v in stored.items()]
        return (
            "AIPod fabric (design)\n"
            + table(rows)
            + "\n\nAs stored in TimescaleDB\n"
            + table(db_rows)
            + f"\n\ndone in {data['seconds']} s; `fabricmon db url` gives the database URL"
        )

    emit(args.json, data, human)
    return 0
