"""The fabric inventory in the database (tables switches, servers, ports, links): its one writer.

A reload replaces the design wholesale in one transaction. Ports the collector discovered that
the inventory does not know (``known = false``, added by :func:`record_discovered`) are kept,
unless the new inventory knows them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

import asyncpg

from fabric.model import Fabric


@dataclass(frozen=True, slots=True)
class LoadResult:
    """How many rows each inventory table holds after a load."""

    switches: int
    servers: int
    ports: int
    links: int


class DiscoveredPort(NamedTuple):
    """A port a switch reports that the inventory does not know, and when it was first seen."""

    switch: str
    port: str
    first_seen: datetime


def fabric_digest(fabric: Fabric) -> str:
    """A stable digest of the design (params, switches, servers, links)."""
    h = hashlib.sha256(json.dumps(_params(fabric), sort_keys=True).encode())
    for s in sorted(fabric.switches.values(), key=lambda s: s.name):
        h.update(f"{s.name}|{s.role}|{s.group}|{s.rail}|{s.plane}|{s.radix}|{s.speed_gbps}|{s.mgmt_address}".encode())
        h.update(f"|{s.nos}|{','.join(s.ports)}\n".encode() if s.ports or s.nos else b"\n")
    for v in sorted(fabric.servers.values(), key=lambda v: v.name):
        h.update(f"{v.name}|{v.group}|{v.index}|{v.gpus}".encode())
        h.update(f"|{v.nics}\n".encode() if v.nics else b"\n")
    for ln in fabric.links:
        h.update(f"{ln.a.node}:{ln.a.port}>{ln.b.node}:{ln.b.port}|{ln.kind}|{ln.speed_gbps}\n".encode())
    return h.hexdigest()


async def ensure_fabric(conn: asyncpg.Connection, fabric: Fabric) -> LoadResult | None:
    """Load ``fabric`` unless the database already holds exactly this design; None when skipped."""
    digest = fabric_digest(fabric)
    if await conn.fetchval("SELECT digest FROM fabric_meta") == digest:
        return None
    return await load_fabric(conn, fabric, digest=digest)


async def load_fabric(conn: asyncpg.Connection, fabric: Fabric, *, digest: str | None = None) -> LoadResult:
    """Replace the stored inventory with ``fabric``'s, atomically."""
    switches = [
        (s.name, str(s.role), s.index, s.group, s.rail, s.plane, s.radix, float(s.speed_gbps), s.mgmt_address)
        for s in fabric.switches.values()
    ]
    servers = [(s.name, s.group, s.index, s.gpus) for s in fabric.servers.values()]
    ports = [
        (
            p.switch,
            p.name,
            p.number,
            p.direction,
            float(p.speed_gbps),
            p.peer.node if p.peer else None,
            p.peer.port if p.peer else None,
            str(p.link_kind) if p.link_kind else None,
        )
        for p in fabric.all_ports()
    ]
    links = [
        (ln.a.node, ln.a.port, ln.b.node, ln.b.port, str(ln.kind), ln.rail, float(ln.speed_gbps)) for ln in fabric.links
    ]
    async with conn.transaction():
        await conn.execute("LOCK TABLE switches, servers, ports, links IN EXCLUSIVE MODE")
        await conn.execute("DELETE FROM links")
        await conn.execute("DELETE FROM ports WHERE known")
        await conn.execute("DELETE FROM switches WHERE known OR name = ANY($1::text[])", list(fabric.switches))
        await conn.execute("DELETE FROM servers")
        await conn.copy_records_to_table(
            "switches",
            records=switches,
            columns=["name", "role", "idx", "grp", "rail", "plane", "radix", "speed_gbps", "mgmt_address"],
        )
        await conn.copy_records_to_table("servers", records=servers, columns=["name", "grp", "idx", "gpus"])
        # Discovered ports that the new inventory knows become known ports.
        await conn.execute(
            "DELETE FROM ports p USING unnest($1::text[], $2::text[]) AS k(switch, port) "
            "WHERE p.switch = k.switch AND p.port = k.port",
            [p[0] for p in ports],
            [p[1] for p in ports],
        )
        await conn.copy_records_to_table(
            "ports",
            records=ports,
            columns=["switch", "port", "number", "direction", "speed_gbps", "peer_node", "peer_port", "link_kind"],
        )
        await conn.copy_records_to_table(
            "links",
            records=links,
            columns=["a_node", "a_port", "b_node", "b_port", "kind", "rail", "speed_gbps"],
        )
        await conn.execute(
            "INSERT INTO fabric_meta (id, params, summary, digest, loaded_at) "
            "VALUES (true, $1::jsonb, $2::jsonb, $3, now()) "
            "ON CONFLICT (id) DO UPDATE SET params = EXCLUDED.params, summary = EXCLUDED.summary, "
            "digest = EXCLUDED.digest, loaded_at = now()",
            json.dumps(_params(fabric)),
            json.dumps(fabric.summary()),
            digest or fabric_digest(fabric),
        )
    return LoadResult(len(switches), len(servers), len(ports), len(links))


async def record_discovered(
    conn: asyncpg.Connection,
    ports: Sequence[tuple[str, str, datetime]],
    known_switches: Collection[str],
) -> int:
    """Add discovered ports (``known = false``), and their switches the inventory does not know
    either (role ``unknown``); return how many ports were new. Rows already there are left as
    they are: a port keeps its first ``first_seen``, an inventory port stays known."""
    switches = sorted({s for s, _, _ in ports if s not in known_switches})
    if switches:
        await conn.execute(
            "INSERT INTO switches (name, role, known) SELECT name, 'unknown', false "
            "FROM unnest($1::text[]) AS name ON CONFLICT DO NOTHING",
            switches,
        )
    if not ports:
        return 0
    status = await conn.execute(
        "INSERT INTO ports (switch, port, known, first_seen) SELECT k.switch, k.port, false, k.first_seen "
        "FROM unnest($1::text[], $2::text[], $3::timestamptz[]) AS k(switch, port, first_seen) "
        "ON CONFLICT DO NOTHING",
        [p[0] for p in ports],
        [p[1] for p in ports],
        [p[2] for p in ports],
    )
    return int(status.rsplit(" ", 1)[-1])  # "INSERT 0 <rows>"


def _params(fabric: Fabric) -> dict[str, object]:
    p = fabric.params
    if p is None:  # a cabling plan: its name and figures
        return {"name": fabric.label, "gpus": fabric.gpus, "rails": fabric.rails, "speed_gbps": fabric.gpu_speed_gbps}
    return {"gpus": p.gpus, "rails": p.rails, "radix": p.radix, "speed_gbps": p.speed_gbps}
