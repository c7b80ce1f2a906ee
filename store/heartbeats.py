"""The ``collector_heartbeats`` table (migration 009): what each collector says about itself.

This module owns writing the table; the collector's heartbeat task (:mod:`collector.heartbeat`)
fills a :class:`Heartbeat` and calls :func:`upsert` every few seconds, and the analyzer reads the
rows back as :class:`Heartbeat` too (:mod:`analyzer.collection`). Times are the collector's wall
clock, the clock its samples are stamped in.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from store.db import Connection

#: Rows of collectors that stopped cleanly this long ago are deleted when a collector starts.
PRUNE_STOPPED_AFTER = timedelta(days=1)


def collector_id(pid: int, shard: tuple[int, int] | None = None, host: str | None = None) -> str:
    """``<hostname>:<pid>``, plus ``/shard-I-of-N`` when sharded: stable for one process and shard."""
    base = f"{host or socket.gethostname()}:{pid}"
    return f"{base}/shard-{shard[0]}-of-{shard[1]}" if shard else base


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """One row of ``collector_heartbeats``."""

    collector: str
    shard: str | None
    started_at: datetime
    heartbeat_at: datetime
    #: Newest ``port_counters`` sample time committed to the database (None: nothing yet).
    watermark: datetime | None
    #: Rows held in writer buffers and the spool, not yet written.
    backlog_rows: int
    #: Of those, rows in the on-disk spool.
    spool_rows: int
    #: The spool holds rows from a database outage; they are written before anything newer.
    replaying: bool
    switches: tuple[str, ...]
    interval_s: float
    #: ``started_at``, or when the collector last came back from a stall (its loop frozen, or its
    #: writer committing again after a pause).
    resumed_at: datetime
    #: Set on a clean shutdown.
    stopped_at: datetime | None = None

    @classmethod
    def from_record(cls, r: Any) -> Heartbeat:
        """From a database row (an asyncpg Record or a mapping with the column names)."""
        return cls(
            collector=r["collector"],
            shard=r["shard"],
            started_at=r["started_at"],
            heartbeat_at=r["heartbeat_at"],
            watermark=r["watermark"],
            backlog_rows=int(r["backlog_rows"]),
            spool_rows=int(r["spool_rows"]),
            replaying=bool(r["replaying"]),
            switches=tuple(r["switches"] or ()),
            interval_s=float(r["interval_s"]),
            resumed_at=r["resumed_at"],
            stopped_at=r["stopped_at"],
        )


COLUMNS = (
    "collector", "shard", "started_at", "heartbeat_at", "watermark", "backlog_rows", "spool_rows",
    "replaying", "switches", "interval_s", "resumed_at", "stopped_at",
)  # fmt: skip

_UPSERT = f"""
INSERT INTO collector_heartbeats ({", ".join(COLUMNS)})
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::text[], $10, $11, $12)
ON CONFLICT (collector) DO UPDATE SET
    {", ".join(f"{c} = EXCLUDED.{c}" for c in COLUMNS[1:])}
"""


async def upsert(conn: Connection, beat: Heartbeat, *, timeout_s: float | None = None) -> None:
    """Write ``beat`` (its collector's row is replaced; a restart under the same id starts afresh)."""
    await conn.execute(_UPSERT, *(getattr(beat, c) for c in COLUMNS), timeout=timeout_s)


async def prune(conn: Connection, now: datetime, *, timeout_s: float | None = None) -> int:
    """Delete rows of collectors that stopped cleanly more than :data:`PRUNE_STOPPED_AFTER` ago."""
    status = await conn.execute(
        "DELETE FROM collector_heartbeats WHERE stopped_at < $1", now - PRUNE_STOPPED_AFTER, timeout=timeout_s
    )
    return int(status.rsplit(" ", 1)[-1])
