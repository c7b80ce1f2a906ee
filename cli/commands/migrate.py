"""``fabricmon migrate``: apply the SQL migrations, and optionally load the fabric inventory."""

from __future__ import annotations

import argparse
from typing import Any

from cli import context
from cli.output import emit
from store.db import create_pool
from store.inventory import load_fabric
from store.migrate import migrate
from store.retention import apply_retention


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("migrate", parents=[common], help="apply database migrations (once each)")
    p.add_argument(
        "--load-fabric", action="store_true", help="also load the configured fabric's inventory into the database"
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    config = context.config_of(args)
    fabric = context.fabric_of(config) if args.load_fabric else None
    dsn = context.dsn_of(config)

    async def go() -> dict[str, Any]:
        pool = await create_pool(dsn, config.database)
        try:
            async with pool.acquire() as conn:
                applied = await migrate(conn)
                mode = await apply_retention(conn, config.database.retention)
                result: dict[str, Any] = {
                    "applied": [m.path.name for m in applied],
                    "retention": str(mode),
                }
                if fabric is not None:
                    loaded = await load_fabric(conn, fabric)
                    result["fabric"] = {
                        "switches": loaded.switches,
                        "servers": loaded.servers,
                        "ports": loaded.ports,
                        "links": loaded.links,
                    }
                return result
        finally:
            await pool.close()

    result = context.run(go())

    def human() -> str:
        lines = [f"applied {m}" for m in result["applied"]] or ["database schema is up to date"]
        lines.append(f"retention enforced by: {result['retention']}")
        if "fabric" in result:
            f = result["fabric"]
            counts = ", ".join(f"{f[k]} {k}" for k in ("switches", "servers", "ports", "links"))
            lines.append(f"loaded fabric: {counts}")
        return "\n".join(lines)

    emit(args.json, result, human)
    return 0
