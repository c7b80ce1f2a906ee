"""The LLDP neighbour tables (table ``lldp_neighbors``): each port's latest table replaces its last.

The collector keeps only the newest table per port and hands them over here as
:class:`NeighborTable` records. Text must already be storable (:func:`store.text.clean_text`): a
value PostgreSQL or the encoder refuses fails the call, as any write does, for the caller to
isolate (:mod:`store.sqlstate`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

import asyncpg

_COLUMNS = ("switch", "port", "system_name", "port_id", "port_description", "chassis_id", "seen_at")


class Neighbor(NamedTuple):
    """One entry of a port's LLDP remote table."""

    system_name: str
    port_id: str
    port_description: str | None = None
    chassis_id: str | None = None


class NeighborTable(NamedTuple):
    """A port's whole LLDP remote table as seen at ``seen_at`` (no neighbours: none now)."""

    switch: str
    port: str
    seen_at: datetime
    neighbors: tuple[Neighbor, ...] = ()


async def replace_neighbors(conn: asyncpg.Connection, tables: Sequence[NeighborTable]) -> int:
    """Replace each given port's stored neighbours with its table's; return the rows written.

    A port given twice keeps its last table; within a table the last entry per
    (system_name, port_id), the table's key, wins. Run it in the caller's transaction to make the
    replacement atomic (a reader never sees a port without its neighbours)."""
    latest = list({(t.switch, t.port): t for t in tables}.values())
    if not latest:
        return 0
    await conn.execute(
        "DELETE FROM lldp_neighbors n USING unnest($1::text[], $2::text[]) AS k(switch, port) "
        "WHERE n.switch = k.switch AND n.port = k.port",
        [t.switch for t in latest],
        [t.port for t in latest],
    )
    rows = [
        (t.switch, t.port, n.system_name, n.port_id, n.port_description, n.chassis_id, t.seen_at)
        for t in latest
        for n in {(x.system_name, x.port_id): x for x in t.neighbors}.values()
    ]
    if rows:
        await conn.copy_records_to_table("lldp_neighbors", records=rows, columns=_COLUMNS)
    return len(rows)
