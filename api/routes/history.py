"""The fabric's history for the dashboard's charts: ``GET /v1/history?from=&to=&step=&rail=`` and
``GET /v1/switches/{name}/sparklines?metric=&minutes=``.

Without ``from``, the range is the last six hours, or since the first evaluation when the
database is younger. ``/v1/history`` reads what the analyzer stores with every verdict
(analyzer/service.py's ``store_run``): the verdict's status and its worst leaf or spine's ratio
(``analyzer_runs``), the fabric's (or with ``rail``, that rail's) down:up ratio per tier and
overall (``oversubscription`` roll-ups), each rail's live capacity, weakest-switch fraction and
load (``rail_history``) and each objective's error budget left (``slo_history``). Small rows,
read by their primary keys: a day of a 16K-GPU fabric is a few thousand rows per series.

The body is columnar, one array per series aligned with ``times`` (unix seconds, bucket start),
which is what a chart library draws without reshaping. A bucket without an evaluation is null,
so a gap in the analyzer's history shows as a gap. An infinite ratio (every uplink down) is null
in its series too, and its bucket is listed in ``ratio_infinite``: never mistaken for "no data".
Per bucket: the worst status, the highest ratio, the lowest capacity and budget, the mean load.

``/sparklines`` is one port-by-port query for a switch's ports table: 30 buckets of one metric
per port over the last ``minutes``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from aiohttp import web

from api.inputs import HistoryQuery, SparklineQuery, SwitchPath
from api.problems import Unprocessable
from api.routes.base import (
    CONFIG,
    POOL,
    UNKNOWN_SWITCH,
    Endpoint,
    Refusal,
    now,
    parse_path,
    parse_query,
    require_switch,
    respond,
)
from api.routes.series import MAX_RANGE, PORT_EXPR, choose_step, parse_duration, parse_window
from api.schemas import HistoryOut, RailHistoryOut, SparklinesOut

MAX_BUCKETS = 2_000
SPARK_POINTS = 30
DEFAULT_SPAN = timedelta(hours=6)
#: The statuses in the order of ``_STATUS_SQL``'s ranks.
_STATUS_NAME = ("healthy", "degraded", "critical")

_STATUS_SQL = """
SELECT time_bucket($1::interval, time) AS b,
       max(CASE status WHEN 'critical' THEN 2 WHEN 'degraded' THEN 1 ELSE 0 END) AS v,
       max(worst_ratio) AS worst
FROM analyzer_runs WHERE time >= $2 AND time < $3 GROUP BY b"""
# an infinite ratio (nothing up) is stored as NULL: it wins the bucket as infinity
_RATIO_SQL = """
SELECT name, time_bucket($1::interval, time) AS b,
       CASE WHEN bool_or(ratio IS NULL) THEN 'Infinity'::float8 ELSE max(ratio) END AS v
FROM oversubscription
WHERE scope = $4 AND name = ANY($5::text[]) AND time >= $2 AND time < $3 GROUP BY name, b"""
_RAILS_SQL = """
SELECT rail, time_bucket($1::interval, time) AS b,
       min(live_gbps / nullif(design_gbps, 0)) AS capacity, min(bottleneck_fraction) AS bottleneck,
       avg(load_gbps) AS load
FROM rail_history WHERE time >= $2 AND time < $3 AND ($4::int IS NULL OR rail = $4) GROUP BY rail, b"""
_SLO_SQL = """
SELECT objective, time_bucket($1::interval, time) AS b, min(budget_remaining) AS v
FROM slo_history WHERE time >= $2 AND time < $3 GROUP BY objective, b"""
_TIERS = ("leaf", "spine", "superspine")
_SPARK_SQL = """
SELECT port, time_bucket($1::interval, time) AS b, avg({expr}) AS v
FROM port_counters WHERE switch = $2 AND time >= $3 AND time < $4 GROUP BY port, b"""


def _range(q: HistoryQuery, floor_s: float, first: datetime | None) -> tuple[datetime, datetime, float]:
    # a young database: by default the chart spans the history there is
    start, end = parse_window(q.from_, q.to, DEFAULT_SPAN, earliest=first)
    if end - start > MAX_RANGE:
        raise Unprocessable(f"the range may span at most {MAX_RANGE.days} days", kind="range-too-long")
    span = (end - start).total_seconds()
    step = choose_step(span, floor_s) if q.step is None else parse_duration(q.step)
    if span / step > MAX_BUCKETS:
        raise Unprocessable(
            f"{int(span // step) + 1} buckets requested, at most {MAX_BUCKETS:,} allowed: "
            f"use step >= {int(span // MAX_BUCKETS) + 1}s",
            kind="too-many-points",
        )
    return start, end, step


#: ``time_bucket``'s default origin for timestamptz (a Monday, midnight UTC), in microseconds.
BUCKET_ORIGIN_US = 946_857_600_000_000


def _us(at: datetime) -> int:
    """A timestamptz as PostgreSQL keeps it: whole microseconds since the epoch."""
    return round(at.timestamp() * 1_000_000)


Index = dict[int, int]


def buckets(start: datetime, end: datetime, step_s: float) -> tuple[list[float], Index]:
    """The buckets ``time_bucket`` gives over [start, end): their starts in unix seconds, and each
    start (in µs) to its position. Integer µs, so a step such as 2.1 s lines up with the
    database's buckets exactly."""
    step = round(step_s * 1_000_000)
    first = BUCKET_ORIGIN_US + (_us(start) - BUCKET_ORIGIN_US) // step * step
    starts = range(first, _us(end), step)
    return [t / 1_000_000 for t in starts], {t: i for i, t in enumerate(starts)}


def _column(rows: Iterable[Any], index: Index, key: str = "v") -> list[float | None]:
    """One series aligned with the buckets; an infinite value (nothing up) is null here and listed
    by :func:`_infinite`."""
    col: list[float | None] = [None] * len(index)
    for r in rows:
        i = index.get(_us(r["b"]))
        if i is not None and r[key] is not None and math.isfinite(r[key]):
            col[i] = round(float(r[key]), 6)
    return col


def _infinite(rows: Iterable[Any], index: Index, key: str = "v") -> list[int]:
    """The buckets whose value is infinite (a switch or roll-up with every uplink down)."""
    return sorted(
        i for r in rows if r[key] is not None and math.isinf(r[key]) and (i := index.get(_us(r["b"]))) is not None
    )


def _split(rows: Sequence[Any], by: str) -> dict[Any, list[Any]]:
    out: dict[Any, list[Any]] = {}
    for r in rows:
        out.setdefault(r[by], []).append(r)
    return out


async def history(request: web.Request) -> web.Response:
    q = parse_query(request, HistoryQuery)
    config = request.app[CONFIG]
    scope, name = ("fabric", "fabric") if q.rail is None else ("rail", f"rail-{q.rail}")
    names = [name, *(f"{name}/{tier}" for tier in _TIERS)]
    async with request.app[POOL].acquire() as conn, conn.transaction(readonly=True):
        await conn.execute("SET LOCAL statement_timeout = 10000")
        first = await conn.fetchval("SELECT min(time) FROM analyzer_runs")
        start, end, step = _range(q, config.analyzer.interval_s, first)
        times, index = buckets(start, end, step)
        args = (timedelta(seconds=step), start, end)
        status_rows = await conn.fetch(_STATUS_SQL, *args)
        ratio_rows = _split(await conn.fetch(_RATIO_SQL, *args, scope, names), "name")
        rail_rows = _split(await conn.fetch(_RAILS_SQL, *args, q.rail), "rail")
        slo_rows = _split(await conn.fetch(_SLO_SQL, *args), "objective") if q.rail is None else {}
    status = [None if v is None else _STATUS_NAME[int(v)] for v in _column(status_rows, index)]
    series = {"all": ratio_rows.get(name, [])}
    series |= {t: ratio_rows[f"{name}/{t}"] for t in _TIERS if f"{name}/{t}" in ratio_rows}
    ratios = {k: _column(rows, index) for k, rows in series.items()}
    infinite = {k: _infinite(rows, index) for k, rows in series.items()}
    if q.rail is None:
        ratios["worst switch"] = _column(status_rows, index, "worst")
        infinite["worst switch"] = _infinite(status_rows, index, "worst")
    rails = [
        RailHistoryOut(
            rail=rail,
            capacity_fraction=_column(rows, index, "capacity"),
            bottleneck_fraction=_column(rows, index, "bottleneck"),
            load_gbps=_column(rows, index, "load"),
        )
        for rail, rows in sorted(rail_rows.items())
    ]
    return respond(
        HistoryOut(
            start=start,
            end=end,
            step_s=step,
            rail=q.rail,
            times=times,
            status=status,
            ratio=ratios,
            ratio_infinite={k: v for k, v in infinite.items() if v},
            rails=rails,
            error_budget_remaining={k: _column(v, index) for k, v in sorted(slo_rows.items())},
        )
    )


async def sparklines(request: web.Request) -> web.Response:
    name = parse_path(request, SwitchPath).name
    q = parse_query(request, SparklineQuery)
    if q.metric not in PORT_EXPR:
        raise Unprocessable("sparklines show the port_counters metrics (not the PFC pause rates)", kind="bad-metric")
    end = now()
    start = end - timedelta(minutes=q.minutes)
    step = max(1.0, q.minutes * 60 / SPARK_POINTS)
    times, index = buckets(start, end, step)
    async with request.app[POOL].acquire() as conn:
        await require_switch(conn, name)
        rows = await conn.fetch(_SPARK_SQL.format(expr=PORT_EXPR[q.metric]), timedelta(seconds=step), name, start, end)
    ports = {p: _column(r, index) for p, r in sorted(_split(rows, "port").items())}
    return respond(SparklinesOut(switch=name, metric=q.metric, step_s=step, times=times, ports=ports))


ENDPOINTS = (
    Endpoint(
        "GET",
        "/v1/history",
        history,
        "The fabric (or one rail) over time: verdict status, down:up ratios, rail capacity and load, SLO budgets",
        HistoryOut,
        query=HistoryQuery,
        tag="series",
        description=__doc__ or "",
        refusals=(
            Refusal(422, "bad-range", "`from` is not before `to` (`to` defaults to now, `from` to `to` minus 6 h)"),
            Refusal(422, "range-too-long", f"`to` - `from` is over {MAX_RANGE.days} days"),
            Refusal(422, "too-many-points", f"(`to` - `from`) / `step` is over {MAX_BUCKETS:,} buckets"),
        ),
    ),
    Endpoint(
        "GET",
        "/v1/switches/{name}/sparklines",
        sparklines,
        f"One metric per port of a switch, {SPARK_POINTS} buckets over the last `minutes`",
        SparklinesOut,
        path_model=SwitchPath,
        query=SparklineQuery,
        errors=(404,),
        tag="series",
        refusals=(UNKNOWN_SWITCH, Refusal(422, "bad-metric", "a PFC pause rate was asked for")),
    ),
)
