"""Switches and their ports: ``/v1/switches``, ``/v1/switches/{name}``, ``/v1/switches/{name}/ports``.

"Now" ends at the newest sample the collectors wrote, up to the present (one index probe): a row
stamped in the future by a switch whose clock runs ahead is not read until its time comes. A
switch's clock, as its collector last reported it (``clock_skew_s``, and whether its timestamps
are replaced: ``clock_corrected``, ``clock_replaced``), comes from ``switch_clocks``. A switch's
state (ports up and reporting, last sample, reachability) covers the last 1.5 sampling intervals and comes
from the fabric-wide snapshot :class:`api.live.SwitchStates` (at most ``ttl_s`` old). A switch
that stopped reporting falls out of that window (``last_sample_at`` null, ``ports_reporting``
0); its reachability row and the ``collection`` check say why. A switch's ports are read per
request over the analyzer's window (a few intervals): rates are window averages, oper status and
speed the latest sample.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from aiohttp import web

from api.inputs import Limit, PageQuery, SwitchesQuery, SwitchPath
from api.live import NEWEST_SQL
from api.routes.base import (
    CACHE,
    CONFIG,
    POOL,
    STATES,
    UNKNOWN_SWITCH,
    Endpoint,
    now,
    parse_path,
    parse_query,
    require_switch,
    respond,
    unknown_switch,
)
from api.schemas import PeerOut, PortList, PortOut, Reachability, SwitchList, SwitchOut, Window
from store.db import Connection, Record

_PORTS_SQL = """
WITH pc AS (
    SELECT port, last(oper_status, time) AS st, last(speed_bps, time) AS speed,
           avg(in_bps) AS in_bps, avg(out_bps) AS out_bps, avg(in_pps) AS in_pps, avg(out_pps) AS out_pps,
           avg(in_errors_ps) AS in_err, avg(out_errors_ps) AS out_err, avg(in_fcs_errors_ps) AS fcs,
           avg(in_discards_ps) AS in_disc, avg(out_discards_ps) AS out_disc, max(time) AS t,
           sum(interval_s) FILTER (WHERE NOT counter_reset) AS covered_s
    FROM port_counters WHERE switch = $1 AND time > $2 AND time <= $3 GROUP BY port
),
-- PFC rows are stored on change (collector/counters.py): pauses in the window over the seconds
-- the port's samples cover, and 0 for a port with PFC rows within a heartbeat but none now.
pfc_prio AS (
    SELECT port, priority, sum(rx_pause_pps * interval_s) AS rx, sum(tx_pause_pps * interval_s) AS tx
    FROM pfc_counters WHERE switch = $1 AND time > $2 AND time <= $3 AND NOT counter_reset GROUP BY port, priority
),
pfc_seen AS (
    SELECT DISTINCT port FROM pfc_counters WHERE switch = $1 AND time > $2 - $6::interval AND time <= $3
),
pfc AS (  -- per-priority rows when a port has them, else the all-priorities total (-1)
    SELECT port,
           CASE WHEN bool_or(priority >= 0) THEN sum(rx) FILTER (WHERE priority >= 0)
                ELSE sum(rx) FILTER (WHERE priority = -1) END AS rx,
           CASE WHEN bool_or(priority >= 0) THEN sum(tx) FILTER (WHERE priority >= 0)
                ELSE sum(tx) FILTER (WHERE priority = -1) END AS tx
    FROM pfc_prio GROUP BY port
),
fl AS (
    SELECT port, sum(flaps) FILTER (WHERE new_status IN ('down', 'flap')) AS n
    FROM link_events WHERE switch = $1 AND time > $3 - interval '24 hours' AND time <= $3 GROUP BY port
)
SELECT p.port, p.number, p.direction, p.known, p.speed_gbps, p.peer_node, p.peer_port, p.link_kind,
       pc.st, pc.speed, pc.in_bps, pc.out_bps, pc.in_pps, pc.out_pps, pc.in_err, pc.out_err, pc.fcs,
       pc.in_disc, pc.out_disc, pc.t,
       CASE WHEN pc.covered_s > 0 AND pfc.rx IS NOT NULL THEN pfc.rx / pc.covered_s
            WHEN pc.covered_s > 0 AND seen.port IS NOT NULL THEN 0 END AS rx,
       CASE WHEN pc.covered_s > 0 AND pfc.tx IS NOT NULL THEN pfc.tx / pc.covered_s
            WHEN pc.covered_s > 0 AND seen.port IS NOT NULL THEN 0 END AS tx,
       coalesce(fl.n, 0) AS flaps, count(*) OVER () AS full_count
FROM ports p
LEFT JOIN pc ON pc.port = p.port
LEFT JOIN pfc ON pfc.port = p.port
LEFT JOIN pfc_seen seen ON seen.port = p.port
LEFT JOIN fl ON fl.port = p.port
WHERE p.switch = $1
ORDER BY p.number NULLS LAST, p.port
LIMIT $4 OFFSET $5
"""
#: IF-MIB ifOperStatus.
#: No window yet: a range that matches nothing.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
OPER = {1: "up", 2: "down", 3: "testing", 4: "unknown", 5: "dormant", 6: "notPresent", 7: "lowerLayerDown"}


class PortsQuery(PageQuery):
    limit: Limit = 1000


async def latest_window(
    conn: Connection, window_s: float, at: datetime | None = None
) -> tuple[datetime | None, datetime | None]:
    """(start, end) of the latest window: ``window_s`` ending at the newest sample up to ``at``
    (default now): a switch whose clock runs ahead never moves the window into the future."""
    end = await conn.fetchval(NEWEST_SQL, at or now())
    return (None, None) if end is None else (end - timedelta(seconds=window_s), end)


def _switch(request: web.Request, r: Record) -> SwitchOut:
    verdict = request.app[CACHE].verdict
    found = verdict.by_switch.get(r["name"], []) if verdict is not None else []
    reach = None
    if r["state"] is not None:
        reach = Reachability(reachable=r["reachable"], state=r["state"], since=r["since"], detail=r["detail"])
    return SwitchOut(
        name=r["name"],
        role=r["role"],
        group=r["grp"],
        rail=r["rail"],
        plane=r["plane"],
        known=r["known"],
        status=verdict.status(found) if verdict is not None else None,
        findings=len(found),
        reachability=reach,
        last_sample_at=r["last_sample"],
        ports_up=r["up"],
        ports_reporting=r["reporting"],
        ports_total=r["total"],
        clock_skew_s=None if r["clock_skew_s"] is None else round(r["clock_skew_s"], 3),
        clock_corrected=r["clock_corrected"],
        clock_replaced=r["clock_replaced"],
    )


async def list_switches(request: web.Request) -> web.Response:
    q = parse_query(request, SwitchesQuery)
    snap = await request.app[STATES].get()
    rows = [
        r
        for r in snap.rows
        if (q.role is None or r["role"] == q.role)
        and (q.rail is None or r["rail"] == q.rail)
        and (q.group is None or r["grp"] == q.group)
    ]
    return respond(
        SwitchList(
            items=[_switch(request, r) for r in rows[q.offset : q.offset + q.limit]],
            window=Window(start=snap.start, end=snap.end),
            total=len(rows),
            limit=q.limit,
            offset=q.offset,
        )
    )


async def get_switch(request: web.Request) -> web.Response:
    name = parse_path(request, SwitchPath).name
    row = (await request.app[STATES].get()).by_name.get(name)
    if row is None:
        raise unknown_switch(name)
    return respond(_switch(request, row))


def _rate(value: Any) -> float | None:
    return None if value is None else round(float(value), 3)


def _port(r: Record) -> PortOut:
    peer = PeerOut(node=r["peer_node"], port=r["peer_port"], kind=r["link_kind"]) if r["peer_node"] else None
    return PortOut(
        name=r["port"],
        number=r["number"],
        direction=r["direction"],
        known=r["known"],
        design_speed_gbps=r["speed_gbps"],
        oper_status=None if r["st"] is None else OPER.get(r["st"], "unknown"),
        speed_bps=r["speed"],
        in_bps=_rate(r["in_bps"]),
        out_bps=_rate(r["out_bps"]),
        in_pps=_rate(r["in_pps"]),
        out_pps=_rate(r["out_pps"]),
        in_errors_ps=_rate(r["in_err"]),
        out_errors_ps=_rate(r["out_err"]),
        in_fcs_errors_ps=_rate(r["fcs"]),
        in_discards_ps=_rate(r["in_disc"]),
        out_discards_ps=_rate(r["out_disc"]),
        pfc_rx_pause_pps=_rate(r["rx"]),
        pfc_tx_pause_pps=_rate(r["tx"]),
        flaps_24h=int(r["flaps"] or 0),
        last_sample_at=r["t"],
        peer=peer,
    )


async def switch_ports(request: web.Request) -> web.Response:
    name = parse_path(request, SwitchPath).name
    q = parse_query(request, PortsQuery)
    async with request.app[POOL].acquire() as conn:
        await require_switch(conn, name)
        start, end = await latest_window(conn, request.app[CACHE].window_s)
        heartbeat = timedelta(seconds=request.app[CONFIG].collector.pfc_heartbeat_s)
        rows = await conn.fetch(_PORTS_SQL, name, start or EPOCH, end or EPOCH, q.limit, q.offset, heartbeat)
        total = (
            rows[0]["full_count"] if rows else await conn.fetchval("SELECT count(*) FROM ports WHERE switch = $1", name)
        )
    return respond(
        PortList(
            switch=name,
            items=[_port(r) for r in rows],
            window=Window(start=start, end=end),
            total=total,
            limit=q.limit,
            offset=q.offset,
        )
    )


ENDPOINTS = (
    Endpoint(
        "GET",
        "/v1/switches",
        list_switches,
        "Switches: role, group, rail, reachability, last sample, ports up/total",
        SwitchList,
        query=SwitchesQuery,
        description=__doc__ or "",
    ),
    Endpoint(
        "GET",
        "/v1/switches/{name}",
        get_switch,
        "One switch",
        SwitchOut,
        path_model=SwitchPath,
        refusals=(UNKNOWN_SWITCH,),
    ),
    Endpoint(
        "GET",
        "/v1/switches/{name}/ports",
        switch_ports,
        "A switch's ports: status, speed, rates, errors, PFC pauses, flaps in 24 h, peer",
        PortList,
        path_model=SwitchPath,
        query=PortsQuery,
        refusals=(UNKNOWN_SWITCH,),
    ),
)
