"""The ``switch_clocks`` table (migration 011): each switch's clock as its collector sees it.

This module owns writing the table; the collector's heartbeat task (:mod:`collector.heartbeat`)
calls :func:`upsert` with every beat, one row per switch its :class:`~collector.clock.ClockGuard`
has seen, in one statement. The API reads the rows back with :func:`fetch` or a join
(:mod:`api.live`). ``replaced`` counts since the reporting collector started; ``updated_at`` is
the beat that wrote the row, so a row nobody refreshes any more says how old it is; rows nobody
refreshed for :data:`PRUNE_AFTER` (a switch no longer collected) are deleted by :func:`prune`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from store.db import Connection

#: Rows no collector refreshed for this long are deleted when a collector starts.
PRUNE_AFTER = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class SwitchClockRow:
    """One row of ``switch_clocks``."""

    switch: str
    collector: str
    #: The switch's clock minus receive time, seconds (positive: ahead).
    skew_s: float
    #: Whether its timestamps are being replaced now.
    corrected: bool
    #: Readings whose timestamp was replaced since ``collector`` started.
    replaced: int
    updated_at: datetime

    @classmethod
    def from_record(cls, r: Any) -> SwitchClockRow:
        """From a database row (an asyncpg Record or a mapping with the column names)."""
        return cls(r["switch"], r["collector"], float(r["skew_s"]), bool(r["corrected"]), int(r["replaced"]),
                   r["updated_at"])  # fmt: skip


_COLUMNS = ("switch", "collector", "skew_s", "corrected", "replaced", "updated_at")
_UPSERT = """
INSERT INTO switch_clocks (switch, collector, skew_s, corrected, replaced, updated_at)
SELECT * FROM unnest($1::text[], $2::text[], $3::float8[], $4::bool[], $5::int8[], $6::timestamptz[])
ON CONFLICT (switch) DO UPDATE SET
    collector = EXCLUDED.collector, skew_s = EXCLUDED.skew_s, corrected = EXCLUDED.corrected,
    replaced = EXCLUDED.replaced, updated_at = EXCLUDED.updated_at
"""


async def upsert(conn: Connection, rows: Sequence[SwitchClockRow], *, timeout_s: float | None = None) -> None:
    """Write ``rows`` in one statement (each switch's row is replaced)."""
    if rows:
        await conn.execute(_UPSERT, *([getattr(r, c) for r in rows] for c in _COLUMNS), timeout=timeout_s)


async def fetch(conn: Connection, switch: str) -> SwitchClockRow | None:
    """The row of one switch, if a collector reported it."""
    r = await conn.fetchrow("SELECT * FROM switch_clocks WHERE switch = $1", switch)
    return None if r is None else SwitchClockRow.from_record(r)


async def prune(conn: Connection, now: datetime, *, timeout_s: float | None = None) -> int:
    """Delete rows no collector refreshed for :data:`PRUNE_AFTER`; returns how many."""
    status = await conn.execute("DELETE FROM switch_clocks WHERE updated_at < $1", now - PRUNE_AFTER, timeout=timeout_s)
    return int(status.rsplit(" ", 1)[-1])
