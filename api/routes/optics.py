"""One port's optics: ``GET /v1/optics?switch=&port=&from=&to=&step=`` (issue 26).

What the link-health check judges (analyzer/link_health.py), for the dashboard's port view and
any client: the transceiver's DOM (``transceiver_dom``: rx and tx power, laser bias,
temperature) and the FEC counters (``port_fec``: pre/post-FEC BER, corrected and uncorrectable
codewords per second), each averaged per ``time_bucket``; the module's own thresholds, or the
configured ones (``analyzer.thresholds``) where it reports none, as the check uses them; and the
FEC histogram over the range, or since the counters were last cleared in it (bins S0..S15, where
the device has them: SONiC, Cumulus), with the post-FEC frame loss it predicts. The range
defaults to the check's trend window (``analyzer.thresholds.link_window_s``, 6 h). A port
without transceiver or FEC data answers empty lists: nothing is guessed.

Cost is bounded as ``/v1/series`` bounds it: at most 10,000 buckets, 31 days, and a 10 s
statement timeout.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

from aiohttp import web

from analyzer.link_trend import BINS, predicted_flr
from api.inputs import OpticsQuery
from api.problems import NotFound, Problem, Unprocessable
from api.routes.base import CONFIG, POOL, UNKNOWN_SWITCH, Endpoint, Refusal, parse_query, require_switch, respond
from api.routes.series import MAX_POINTS, MAX_RANGE, STATEMENT_TIMEOUT_MS, choose_step, parse_duration, parse_window
from api.schemas_optics import DomPoint, FecHistogram, FecPoint, OpticsOut, OpticsThresholds
from store.db import Connection, PostgresError
from store.records import from_int8

_DOM_SQL = """
SELECT time_bucket($1::interval, time) AS b, avg(rx_power_dbm) AS rx, avg(tx_power_dbm) AS tx,
       avg(laser_bias_ma) AS bias, avg(temperature_c) AS temp
FROM transceiver_dom WHERE switch = $2 AND port = $3 AND time >= $4 AND time < $5
GROUP BY b ORDER BY b"""

_LATEST_DOM_SQL = """
SELECT component, rx_low_warning_dbm, rx_low_critical_dbm, bias_high_warning_ma, bias_high_critical_ma
FROM transceiver_dom WHERE switch = $1 AND port = $2 AND time >= $3 AND time < $4
ORDER BY time DESC LIMIT 1"""

#: Rates from consecutive samples (the sample before the range included); a cleared counter
#: (negative step) is no rate.
_FEC_SQL = """
WITH s AS (
    SELECT time, pre_fec_ber, post_fec_ber,
           (corrected - lag(corrected) OVER w)::float8
               / nullif(extract(epoch FROM time - lag(time) OVER w), 0) AS corrected_ps,
           (uncorrectable - lag(uncorrectable) OVER w)::float8
               / nullif(extract(epoch FROM time - lag(time) OVER w), 0) AS uncorrectable_ps
    FROM port_fec WHERE switch = $2 AND port = $3 AND time >= $4::timestamptz - $1::interval AND time < $5
    WINDOW w AS (ORDER BY time))
SELECT time_bucket($1::interval, time) AS b, avg(pre_fec_ber) AS pre, avg(post_fec_ber) AS post,
       avg(corrected_ps) FILTER (WHERE corrected_ps >= 0) AS corrected,
       avg(uncorrectable_ps) FILTER (WHERE uncorrectable_ps >= 0) AS uncorrectable
FROM s WHERE time >= $4
GROUP BY b ORDER BY b"""

#: The histogram since the range's start or the last clear in it (S0 went down), whichever is later.
_BINS_SQL = """
WITH s AS (
    SELECT time, bins, bins[1] < lag(bins[1]) OVER (ORDER BY time) AS cleared
    FROM port_fec WHERE switch = $1 AND port = $2 AND time >= $3 AND time < $4 AND bins IS NOT NULL),
c AS (SELECT coalesce(max(time) FILTER (WHERE cleared), '-infinity') AS since FROM s)
SELECT first(s.time, s.time) AS t0, first(bins, s.time) AS first_bins,
       last(s.time, s.time) AS t1, last(bins, s.time) AS last_bins
FROM s, c WHERE s.time >= c.since"""


def histogram(t0: datetime, first: list[int] | None, t1: datetime, last: list[int] | None) -> FecHistogram | None:
    """The bins' growth between the first and the last sample, with its predicted FLR; None
    without two histograms of 16 bins, or when a bin went down (the counters were cleared)."""
    if first is None or last is None or len(first) != BINS or len(last) != BINS:
        return None
    grown = [from_int8(b) - from_int8(a) for a, b in zip(first, last, strict=True)]
    if any(d < 0 for d in grown):
        return None
    return FecHistogram(start=t0, end=t1, bins=grown, predicted_flr=predicted_flr(grown))


def _finite(v: Any) -> float | None:
    return None if v is None or not math.isfinite(float(v)) else float(v)


def _dom_point(r: Any) -> DomPoint:
    return DomPoint(
        time=r["b"],
        rx_power_dbm=_finite(r["rx"]),
        tx_power_dbm=_finite(r["tx"]),
        laser_bias_ma=_finite(r["bias"]),
        temperature_c=_finite(r["temp"]),
    )


def _fec_point(r: Any) -> FecPoint:
    return FecPoint(
        time=r["b"],
        pre_fec_ber=_finite(r["pre"]),
        post_fec_ber=_finite(r["post"]),
        corrected_per_s=_finite(r["corrected"]),
        uncorrectable_per_s=_finite(r["uncorrectable"]),
    )


async def _read(conn: Connection, q: OpticsQuery, step: float, start: datetime, end: datetime) -> dict[str, Any]:
    bucket = timedelta(seconds=step)
    async with conn.transaction(readonly=True):
        await conn.execute(f"SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}")
        return {
            "dom": await conn.fetch(_DOM_SQL, bucket, q.switch, q.port, start, end),
            "latest": await conn.fetchrow(_LATEST_DOM_SQL, q.switch, q.port, start, end),
            "fec": await conn.fetch(_FEC_SQL, bucket, q.switch, q.port, start, end),
            "bins": await conn.fetchrow(_BINS_SQL, q.switch, q.port, start, end),
        }


async def optics(request: web.Request) -> web.Response:
    q = parse_query(request, OpticsQuery)
    config = request.app[CONFIG]
    th = config.analyzer.thresholds
    start, end = parse_window(q.from_, q.to, timedelta(seconds=th.link_window_s))
    if end - start > MAX_RANGE:
        raise Unprocessable(f"the range may span at most {MAX_RANGE.days} days", kind="range-too-long")
    span = (end - start).total_seconds()
    step = choose_step(span, 1.0) if q.step is None else parse_duration(q.step)
    if span / step > MAX_POINTS:
        raise Unprocessable(
            f"{math.ceil(span / step)} points requested, at most {MAX_POINTS} allowed: "
            f"use step >= {math.ceil(span / MAX_POINTS)}s",
            kind="too-many-points",
        )
    async with request.app[POOL].acquire() as conn:
        await require_switch(conn, q.switch)
        if await conn.fetchval("SELECT 1 FROM ports WHERE switch = $1 AND port = $2", q.switch, q.port) is None:
            raise NotFound(f"switch {q.switch} has no port named {q.port!r}", kind="unknown-port")
        try:
            got = await _read(conn, q, step, start, end)
        except PostgresError as exc:
            if getattr(exc, "sqlstate", None) != "57014":  # query_canceled: our timeout
                raise
            problem = Problem("the optics query took too long; narrow the range or widen the step", kind="too-slow")
            problem.status, problem.title = 503, "Service Unavailable"
            raise problem from None
    latest = got["latest"]
    module = dict(latest) if latest is not None else {}
    rx_crit, bias_crit = module.get("rx_low_critical_dbm"), module.get("bias_high_critical_ma")
    thresholds = OpticsThresholds(
        rx_low_warning_dbm=module.get("rx_low_warning_dbm"),
        rx_low_critical_dbm=th.rx_low_critical_dbm if rx_crit is None else rx_crit,
        rx_from="configured" if rx_crit is None else "module",
        bias_high_warning_ma=module.get("bias_high_warning_ma"),
        bias_high_critical_ma=th.bias_high_critical_ma if bias_crit is None else bias_crit,
        bias_from="configured" if bias_crit is None else "module",
        pre_fec_ber_critical=th.pre_fec_ber_critical,
    )
    b = got["bins"]
    hist = None if b is None or b["t0"] is None else histogram(b["t0"], b["first_bins"], b["t1"], b["last_bins"])
    body = OpticsOut(
        switch=q.switch,
        port=q.port,
        component=module.get("component"),
        start=start,
        end=end,
        step_s=step,
        thresholds=thresholds,
        dom=[_dom_point(r) for r in got["dom"]],
        fec=[_fec_point(r) for r in got["fec"]],
        histogram=hist,
    )
    return respond(body)


ENDPOINTS = (
    Endpoint(
        "GET",
        "/v1/optics",
        optics,
        "One port's transceiver DOM and FEC series, its thresholds and its FEC histogram",
        OpticsOut,
        query=OpticsQuery,
        tag="series",
        description=__doc__ or "",
        refusals=(
            Refusal(422, "bad-range", "`from` is not before `to` (`to` defaults to now, `from` to `to` minus 6 h)"),
            Refusal(422, "range-too-long", f"`to` - `from` is over {MAX_RANGE.days} days"),
            Refusal(422, "too-many-points", f"(`to` - `from`) / `step` is over {MAX_POINTS:,} buckets"),
            UNKNOWN_SWITCH,
            Refusal(404, "unknown-port", "the switch has no port of that name"),
            Refusal(503, "too-slow", f"the query ran past its {STATEMENT_TIMEOUT_MS // 1000} s statement timeout"),
        ),
    ),
)
