"""The latest window of every port, read once per evaluation and shared by the checks.

One query: per (switch, port), the last oper status and live speed, and the mean rates over the
last 1.5 sampling intervals (``last()`` and ``avg()`` grouped by port): every port's newest
sample, and at most one before it. A longer reach would only add rows to sort (at 16K GPUs the
query is most of an evaluation's time). A 16,384-GPU fabric is
~82K ports, so this is ~82K small Python objects per evaluation: fine, and the only per-port
allocation the capacity checks make.

Rows stamped after ``ctx.now`` are not read: a switch whose clock runs ahead (within
``collector.max_clock_skew_s``, which the collector lets through) must not report a "latest"
status or rate from the future; its rows count once their time comes.

A sample that arrives late (a busy collector, a slow flush) must not make a switch vanish from
the capacity checks, which skip a switch with a cabled port missing rather than guess. So the
switches with cabled ports missing from the window get a second, narrow query that reaches back
as far as the freshness check does (``stale_intervals``): a late port is read from its last
sample; only a port silent for longer stays unknown.

Unknown is never silence. A switch silent altogether is ``stale_switch`` (the freshness check).
A switch that reports some ports while cabled ports of it (inventory ports with a peer) have no
sample within that reach is ``ports_unreported`` (:func:`check_unreported_ports`): one warning
per switch, never one per port, listing the missing ports, with their blast radius. The
capacity checks cannot judge such a switch (oversubscription skips it; rail capacity counts a
missing uplink at its design speed), and this finding says so.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta

from analyzer.context import CheckContext
from analyzer.findings import Finding, blast_radius
from analyzer.links import human_s
from analyzer.round_data import PortNow, Snapshot
from fabric.model import Fabric
from store.db import Connection, Record

#: How far back the snapshot reaches, in sampling intervals.
SNAPSHOT_INTERVALS = 1.5
#: Missing ports named in a ``ports_unreported`` summary (details list them all).
SUMMARY_PORTS = 4

_MEANS = """
SELECT switch, port,
       last(oper_status, time) = 1 AS oper_up,
       last(speed_bps, time)    AS speed_bps,
       avg(in_bps)              AS in_bps,
       avg(out_bps)             AS out_bps,
       max(time)                AS last_time
FROM port_counters
"""
_SQL = _MEANS + "WHERE time > $1 AND time <= $2 GROUP BY switch, port"
_SWITCHES_SQL = _MEANS + "WHERE switch = ANY($1::text[]) AND time > $2 AND time <= $3 GROUP BY switch, port"

_LATE_SQL = """
SELECT switch, port,
       last(oper_status, time) = 1 AS oper_up,
       last(speed_bps, time)    AS speed_bps,
       last(in_bps, time)       AS in_bps,
       last(out_bps, time)      AS out_bps,
       max(time)                AS last_time
FROM port_counters
WHERE switch = ANY($1::text[]) AND time > $2 AND time <= $3
GROUP BY switch, port
"""


async def port_snapshot(conn: Connection, ctx: CheckContext) -> Snapshot:
    """Every port seen in the window (memoized for the evaluation)."""
    if ctx.results.ports is not None:
        return ctx.results.ports
    rows = await conn.fetch(_SQL, ctx.now - timedelta(seconds=SNAPSHOT_INTERVALS * ctx.collect_interval_s), ctx.now)
    snap: Snapshot = {(r["switch"], r["port"]): _port_now(r) for r in rows}
    if late := incomplete_switches(ctx.fabric, snap):
        reach = timedelta(seconds=ctx.thresholds.stale_intervals * ctx.collect_interval_s)
        for r in await conn.fetch(_LATE_SQL, late, ctx.now - reach, ctx.now):
            snap.setdefault((r["switch"], r["port"]), _port_now(r))
    ctx.results.ports = snap
    return snap


async def mean_rates(conn: Connection, switches: list[str], since: datetime, until: datetime) -> Snapshot:
    """Every port of ``switches`` over (``since``, ``until``]: the snapshot's columns, rates
    averaged over that window (the rail-load check's longer window, :mod:`analyzer.rails`)."""
    rows = await conn.fetch(_SWITCHES_SQL, switches, since, until)
    return {(r["switch"], r["port"]): _port_now(r) for r in rows}


def incomplete_switches(fabric: Fabric, snap: Snapshot) -> list[str]:
    """Switches with a cabled port absent from the snapshot, in the fabric's order."""
    reported = Counter(switch for switch, _ in snap)
    return [
        name
        for name, sw in fabric.switches.items()
        if reported[name] < sw.radix  # every port reported: nothing cabled can be missing
        and any((name, p.name) not in snap for p in fabric.ports(name) if p.peer is not None)
    ]


def _port_now(r: Record) -> PortNow:
    # positional: the columns of _SQL, _SWITCHES_SQL and _LATE_SQL, in order (~3x faster than by name)
    return PortNow(r[2], r[3], r[4], r[5], r[6])


def live_gbps(port: PortNow | None) -> float | None:
    """Capacity a port offers now: its live speed when up, 0 when down, None when unknown."""
    if port is None or port.oper_up is None:
        return None
    if not port.oper_up:
        return 0.0
    return (port.speed_bps or 0) / 1e9


async def check_unreported_ports(conn: Connection, ctx: CheckContext) -> list[Finding]:
    """``ports_unreported`` for switches that report, but not on all their cabled ports."""
    snap = await port_snapshot(conn, ctx)
    incomplete = incomplete_switches(ctx.fabric, snap)
    if not incomplete:
        return []
    reporting = {switch for switch, _ in snap}
    reach_s = ctx.thresholds.stale_intervals * ctx.collect_interval_s
    findings: list[Finding] = []
    for name in incomplete:
        if name not in reporting:
            continue  # silent altogether: stale_switch
        cabled = [p.name for p in ctx.fabric.ports(name) if p.peer is not None]
        missing = [p for p in cabled if (name, p) not in snap]
        shown = ", ".join(missing[:SUMMARY_PORTS]) + (", ..." if len(missing) > SUMMARY_PORTS else "")
        findings.append(
            Finding(
                rule="ports_unreported",
                key=name,
                severity="warning",
                summary=(
                    f"{name}: {len(missing)} of {len(cabled)} cabled ports sent no sample in the last "
                    f"{human_s(reach_s)} ({shown}); its capacity cannot be judged"
                ),
                scope=blast_radius(ctx.fabric, ports=[(name, p) for p in missing]),
                details={
                    "switch": name,
                    "unreported_ports": missing,
                    "cabled_ports": len(cabled),
                    "reported_ports": len(cabled) - len(missing),
                    "window_s": reach_s,
                },
                observed_at=ctx.now,
            )
        )
    return findings
