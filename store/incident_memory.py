"""The ``incident_memory`` table (migration 023): what a firing incident is remembered by across
rounds. This module holds the table's SQL and rows, and is its only writer.

A PFC storm's origin and a rebooting switch's links are named anew every round, from samples the
switches took at other instants; the correlation continues a firing incident by the pause-tree
ports and the links it held (analyzer/incident_memory.py) instead of opening a second one. The
alert sync writes each firing incident's row in its own transaction (:func:`remember`), so the
memory and the alert commit together, and drops it when the incident resolves (:func:`forget`).
The next round, of this analyzer or of one started after it, reads it back (:func:`read_memory`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from store.db import Connection


@dataclass(frozen=True, slots=True)
class IncidentMemory:
    """One firing incident's memory."""

    alert_id: int
    #: The incident's place (``switch:NAME``, ``link:SW:PORT``...).
    incident_key: str
    #: Every port its PFC storms' pause trees hold (this round's trees).
    storm_ports: tuple[str, ...] = ()
    #: A switch incident's links (naming ends, ``SWITCH:PORT``): every link it held while it fired.
    switch_links: tuple[str, ...] = ()


async def read_memory(conn: Connection) -> list[IncidentMemory]:
    """Every firing incident's memory, by alert id."""
    rows = await conn.fetch(
        "SELECT alert_id, incident_key, storm_ports, switch_links FROM incident_memory ORDER BY alert_id"
    )
    return [
        IncidentMemory(r["alert_id"], r["incident_key"], tuple(r["storm_ports"]), tuple(r["switch_links"]))
        for r in rows
    ]


async def remember(conn: Connection, memories: Sequence[IncidentMemory], now: datetime) -> None:
    """Store this round's memory of firing incidents, in one statement: the storm ports replace
    what was stored (this round's trees); the switch links add to it (a later round may see
    fewer of the links a rebooting switch held)."""
    if not memories:
        return
    rows = [
        {"id": m.alert_id, "key": m.incident_key, "storm": list(m.storm_ports), "links": list(m.switch_links)}
        for m in memories
    ]
    await conn.execute(
        """INSERT INTO incident_memory AS m (alert_id, incident_key, storm_ports, switch_links, updated_at)
           SELECT (r ->> 'id')::bigint, r ->> 'key',
                  ARRAY(SELECT jsonb_array_elements_text(r -> 'storm')),
                  ARRAY(SELECT jsonb_array_elements_text(r -> 'links')), $2
           FROM jsonb_array_elements($1::jsonb) AS r
           ON CONFLICT (alert_id) DO UPDATE SET
               incident_key = EXCLUDED.incident_key,
               storm_ports = EXCLUDED.storm_ports,
               switch_links = ARRAY(SELECT DISTINCT x FROM unnest(m.switch_links || EXCLUDED.switch_links) AS x
                                    ORDER BY x),
               updated_at = EXCLUDED.updated_at""",
        json.dumps(rows),
        now,
    )


async def forget(conn: Connection, alert_ids: Sequence[int]) -> None:
    """Drop the memory of incidents that resolved."""
    if alert_ids:
        await conn.execute("DELETE FROM incident_memory WHERE alert_id = ANY($1::bigint[])", list(alert_ids))
