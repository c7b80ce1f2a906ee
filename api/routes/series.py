"""Time-bucketed series: ``GET /v1/series?switch=&port=&metric=&from=&to=&step=&agg=``.

``time_bucket`` over the rate columns the collector stored (``port_counters``) or the PFC pause
rates (``pfc_counters``: per-priority rows summed, or the all-priorities total where a port has
only that; a port sample without a PFC row, which the collector stores on change, counts as 0).
Without ``port``, each bucket is the sum over the switch's ports of each port's ``agg``.
Times are unix seconds or ISO 8601 (naive: UTC), years 1970-2999; ``step`` is 1 s to 31 days.
Both rules are the parameters' patterns in /openapi.json, so a value that matches is accepted.

Cost is bounded before the query runs: at most 10,000 buckets, a range of at most 31 days for
one port and one day for a whole switch, and a 10 s statement timeout. Those rules involve two
parameters (or the clock) and no schema can state them; they are this route's refusals below.
"""

from __future__ import annotations

import functools
import math
import re
from datetime import UTC, datetime, timedelta

from aiohttp import web

from api.inputs import SeriesQuery
from api.problems import NotFound, Problem, Unprocessable
from api.routes.base import (
    CACHE,
    CONFIG,
    POOL,
    UNKNOWN_SWITCH,
    Endpoint,
    Refusal,
    now,
    parse_query,
    require_switch,
    respond,
)
from api.schemas import SeriesOut, SeriesPoint
from store.db import PostgresError

MAX_POINTS = 10_000
DEFAULT_POINTS = 300
MIN_STEP_S = 1.0
MAX_RANGE = timedelta(days=31)
MAX_RANGE_SWITCH = timedelta(days=1)
STATEMENT_TIMEOUT_MS = 10_000
NICE_STEPS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "": 1.0}
_DURATION = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d)?$")

#: metric → SQL expression over ``port_counters`` (a whitelist: nothing else reaches SQL).
PORT_EXPR = {
    "in_bps": "in_bps",
    "out_bps": "out_bps",
    "in_pps": "in_pps",
    "out_pps": "out_pps",
    "in_errors_ps": "in_errors_ps",
    "out_errors_ps": "out_errors_ps",
    "in_discards_ps": "in_discards_ps",
    "out_discards_ps": "out_discards_ps",
    "in_fcs_errors_ps": "in_fcs_errors_ps",
    "speed_bps": "speed_bps::float8",
    "oper_up": "(oper_status = 1)::int::float8",
}
PFC_COLUMN = {"pfc_rx_pause_pps": "rx_pause_pps", "pfc_tx_pause_pps": "tx_pause_pps"}
_PORT_FILTER = {True: "AND port = $5", False: ""}


def _port_sql(metric: str, agg: str, one_port: bool) -> str:
    return f"""
SELECT b, sum(v) AS v FROM (
    SELECT time_bucket($1::interval, time) AS b, port, {agg}({PORT_EXPR[metric]}) AS v
    FROM port_counters WHERE switch = $2 AND time >= $3 AND time < $4 {_PORT_FILTER[one_port]}
    GROUP BY b, port) x
GROUP BY b ORDER BY b"""


#: Per port and bucket, over the port's samples (``m.samples``) and the stored PFC rows joined
#: to them: rows are stored on change (collector/counters.py), so a sample without a row paused
#: 0 times. ``avg`` divides by the samples; ``max``/``min`` count the missing rows as zeros.
_PFC_AGG = {
    "avg": "sum(coalesce(s.v, 0)) / m.samples",
    "max": "CASE WHEN count(s.time) < m.samples THEN greatest(max(s.v), 0) ELSE max(s.v) END",
    "min": "CASE WHEN count(s.time) < m.samples THEN least(min(s.v), 0) ELSE min(s.v) END",
}


def _pfc_sql(metric: str, agg: str, one_port: bool, heartbeat_s: float = 0.0, priority: int | None = None) -> str:
    col = PFC_COLUMN[metric]
    port = _PORT_FILTER[one_port]
    if priority is None:  # per-priority rows summed, else the total
        value = f"""CASE WHEN bool_or(priority >= 0) THEN sum({col}) FILTER (WHERE priority >= 0)
                ELSE sum({col}) FILTER (WHERE priority = -1) END"""
        rows = ""
    else:  # one priority, on the ports that report it
        value, rows = f"sum({col})", f"AND priority = {int(priority)}"
    return f"""
WITH s AS (  -- one value per stored (time, port)
    SELECT time, port, {value} AS v
    FROM pfc_counters WHERE switch = $2 AND time >= $3 AND time < $4 {port} {rows}
    GROUP BY time, port),
pfc_ports AS (  -- ports that report PFC: a row in the range, or a heartbeat's worth before it
    SELECT DISTINCT port FROM pfc_counters
    WHERE switch = $2 AND time >= $3 - interval '1 second' * {float(heartbeat_s)!r} AND time < $4 {port} {rows}),
m AS (
    SELECT time_bucket($1::interval, time) AS b, port, count(*) AS samples
    FROM port_counters WHERE switch = $2 AND time >= $3 AND time < $4 {port} AND port IN (SELECT port FROM pfc_ports)
    GROUP BY b, port),
per_port AS (
    SELECT m.b, {_PFC_AGG[agg]} AS v
    FROM m LEFT JOIN s ON s.port = m.port AND time_bucket($1::interval, s.time) = m.b
    GROUP BY m.b, m.port, m.samples)
SELECT b, sum(v) AS v FROM per_port GROUP BY b ORDER BY b"""


def parse_time(value: str, name: str) -> datetime:
    """Unix seconds or ISO 8601 (naive: UTC), as :data:`api.inputs.TimeParam` lets through."""
    try:
        if re.fullmatch(r"[0-9]+(\.[0-9]+)?", value):
            at = datetime.fromtimestamp(float(value), tz=UTC)
        else:
            at = datetime.fromisoformat(value.replace(" ", "T"))
            at = at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
    except (ValueError, OverflowError, OSError):  # not reached through the query's pattern
        raise Unprocessable(f"{name}: not a unix time or ISO 8601 date/time: {value!r}", kind="bad-time") from None
    return at


def parse_window(
    from_: str | None, to: str | None, default_span: timedelta, earliest: datetime | None = None
) -> tuple[datetime, datetime]:
    """``[from, to)`` as asked: ``to`` defaults to now, ``from`` to ``to`` minus ``default_span``
    (or ``earliest``, when that is later and still before ``to``); 422 ``bad-range`` when empty."""
    end = parse_time(to, "to") if to is not None else now()
    start = parse_time(from_, "from") if from_ is not None else end - default_span
    if from_ is None and earliest is not None and start < earliest < end:
        start = earliest
    if start >= end:
        raise Unprocessable("from must be before to", kind="bad-range")
    return start, end


def parse_duration(value: str) -> float:
    match = _DURATION.match(value)
    if not match:
        raise Unprocessable(f"step: not a duration: {value!r}", kind="bad-step")
    return float(match.group(1)) * _UNITS[match.group(2) or ""]


def choose_step(span_s: float, floor_s: float) -> float:
    """A round step giving about :data:`DEFAULT_POINTS` buckets, never below ``floor_s``."""
    want = max(span_s / DEFAULT_POINTS, floor_s, MIN_STEP_S)
    return float(next((s for s in NICE_STEPS_S if s >= want), math.ceil(want / 86400) * 86400))


async def series(request: web.Request) -> web.Response:
    q = parse_query(request, SeriesQuery)
    start, end = parse_window(q.from_, q.to, timedelta(hours=1))
    limit = MAX_RANGE if q.port is not None else MAX_RANGE_SWITCH
    if end - start > limit:
        raise Unprocessable(
            f"the range may span at most {limit.days} day(s) {'per port' if q.port else 'for a whole switch'}",
            kind="range-too-long",
        )
    span = (end - start).total_seconds()
    if q.step is None:
        step = choose_step(span, request.app[CACHE].window_s / 3)
    else:
        step = parse_duration(q.step)
        if not MIN_STEP_S <= step <= MAX_RANGE.total_seconds():  # not reached through the query's pattern
            raise Unprocessable(f"step must be between {MIN_STEP_S:g} s and {MAX_RANGE.days} days", kind="bad-step")
        if span / step > MAX_POINTS:
            raise Unprocessable(
                f"{math.ceil(span / step)} points requested, at most {MAX_POINTS} allowed: "
                f"use step >= {math.ceil(span / MAX_POINTS)}s",
                kind="too-many-points",
            )
    pool = request.app[POOL]
    async with pool.acquire() as conn:
        await require_switch(conn, q.switch)
        if (
            q.port is not None
            and await conn.fetchval("SELECT 1 FROM ports WHERE switch = $1 AND port = $2", q.switch, q.port) is None
        ):
            raise NotFound(f"switch {q.switch} has no port named {q.port!r}", kind="unknown-port")
        heartbeat_s = request.app[CONFIG].collector.pfc_heartbeat_s
        if q.priority is not None and q.metric not in PFC_COLUMN:
            raise Unprocessable("priority applies to the PFC metrics only", kind="priority-not-pfc")
        build = (
            functools.partial(_pfc_sql, heartbeat_s=heartbeat_s, priority=q.priority)
            if q.metric in PFC_COLUMN
            else _port_sql
        )
        args: list[object] = [timedelta(seconds=step), q.switch, start, end]
        if q.port is not None:
            args.append(q.port)
        try:
            async with conn.transaction(readonly=True):
                await conn.execute(f"SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}")
                rows = await conn.fetch(build(q.metric, q.agg, q.port is not None), *args)
        except PostgresError as exc:
            if getattr(exc, "sqlstate", None) != "57014":  # query_canceled: our timeout
                raise
            problem = Problem("the series query took too long; narrow the range or widen the step", kind="too-slow")
            problem.status, problem.title = 503, "Service Unavailable"
            raise problem from None
    points = [SeriesPoint(time=r["b"], value=None if r["v"] is None else float(r["v"])) for r in rows]
    return respond(
        SeriesOut(
            switch=q.switch, port=q.port, metric=q.metric, agg=q.agg, start=start, end=end, step_s=step, points=points
        )
    )


ENDPOINTS = (
    Endpoint(
        "GET",
        "/v1/series",
        series,
        "A time-bucketed series of one port's (or a whole switch's) rate",
        SeriesOut,
        query=SeriesQuery,
        tag="series",
        description=__doc__ or "",
        refusals=(
            Refusal(422, "bad-range", "`from` is not before `to` (`to` defaults to now, `from` to `to` minus an hour)"),
            Refusal(
                422,
                "range-too-long",
                f"`to` - `from` is over {MAX_RANGE.days} days for one port, or over {MAX_RANGE_SWITCH.days} day "
                "for a whole switch (no `port`)",
            ),
            Refusal(422, "priority-not-pfc", "`priority` is given with a metric that is not a PFC pause rate"),
            Refusal(422, "too-many-points", f"(`to` - `from`) / `step` is over {MAX_POINTS:,} buckets"),
            UNKNOWN_SWITCH,
            Refusal(404, "unknown-port", "the switch has no port of that name"),
            Refusal(503, "too-slow", f"the query ran past its {STATEMENT_TIMEOUT_MS // 1000} s statement timeout"),
        ),
    ),
)
