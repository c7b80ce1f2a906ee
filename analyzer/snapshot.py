"""The latest window of every port, read once per evaluation and shared by the checks.

One query: per (switch, port), the last oper status and live speed, and the mean rates over the
last 1.5 sampling intervals (``last()`` and ``avg()`` grouped by port): every port's newest
sample, and at most one before it. A longer reach would only add rows to sort (at 16K GPUs the
query is most of an evaluation's time). A 16,384-GPU fabric is
~82K ports, so this is ~82K small Python objects per evaluation: fine, and the only per-port
allocation the capacity checks make.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from analyzer.context import CheckContext
from store.db import Connection

#: How far back the snapshot reaches, in sampling intervals.
SNAPSHOT_INTERVALS = 1.5

_SQL = """
SELECT switch, port,
       last(oper_status, time)  AS oper_status,
       last(speed_bps, time)    AS speed_bps,
       avg(in_bps)              AS in_bps,
       avg(out_bps)             AS out_bps,
       max(time)                AS last_time
FROM port_counters
WHERE time > $1
GROUP BY switch, port
"""


@dataclass(frozen=True, slots=True)
class PortNow:
    """One port over the latest window."""

    oper_up: bool | None
    speed_bps: int | None
    in_bps: float | None
    out_bps: float | None
    last_time: datetime


Snapshot = dict[tuple[str, str], PortNow]


async def port_snapshot(conn: Connection, ctx: CheckContext) -> Snapshot:
    """Every port seen in the window (memoized for the evaluation)."""
    cached: Snapshot | None = ctx.memo.get("ports")
    if cached is not None:
        return cached
    rows = await conn.fetch(_SQL, ctx.now - timedelta(seconds=SNAPSHOT_INTERVALS * ctx.collect_interval_s))
    snap: Snapshot = {
        (r["switch"], r["port"]): PortNow(
            None if r["oper_status"] is None else r["oper_status"] == 1,
            r["speed_bps"],
            r["in_bps"],
            r["out_bps"],
            r["last_time"],
        )
        for r in rows
    }
    ctx.memo["ports"] = snap
    return snap


def live_gbps(port: PortNow | None) -> float | None:
    """Capacity a port offers now: its live speed when up, 0 when down, None when unknown."""
    if port is None or port.oper_up is None:
        return None
    if not port.oper_up:
        return 0.0
    return (port.speed_bps or 0) / 1e9
