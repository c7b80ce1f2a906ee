"""Link health's summary pass: per port, the latest values and least-squares lines over the window.

:func:`analyzer.link_health.link_health` picks from it the ports whose line may reach a threshold
(only those get bucketed series and robust fits). The lines are fitted on seconds before ``now``
(``rel``: the latest row's), exactly as ``regr_slope``/``regr_intercept`` over the rows would,
from sums: the rolled buckets lying in the window give theirs (store/link_rollup.py, shifted from
the bucket's start to ``now``), the rows outside them (the window's first partial bucket, the
buckets not rolled yet) give their own. At 6 h that is ~36 rollup rows and ~10-30 rows per port
instead of ~360 (docs/benchmarks.md). With nothing rolled (a one-shot check, the API on a
database no analyzer rolls) every row is read: the same lines, slower.

Times go through ``date_part`` (float8): ``extract`` returns numeric, and numeric arithmetic was
two thirds of the summary's cost (EXPLAIN ANALYZE, docs/benchmarks-history.md). ``OFFSET 0`` keeps
each part's subquery whole: pulled up, its ``u``/``b`` would be computed again at every use.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from store.db import Connection
from store.link_rollup import BUCKET, regr_sums, rolled_buckets


def _line(name: str) -> str:
    """Slope and intercept of ``name``'s sums (None under two points, or all at one time)."""
    n, su, suu, sy, suy = (f"{name}_{k}" for k in ("n", "su", "suu", "sy", "suy"))
    det = f"({n} * {suu} - {su} * {su})"
    ok = f"{n} >= 2 AND {det} > 1e-9 * {n} * {suu}"
    slope = f"({n} * {suy} - {su} * {sy}) / {det}"
    return (
        f"CASE WHEN {ok} THEN {slope} END AS {name}_slope, "
        f"CASE WHEN {ok} THEN ({sy} - {slope} * {su}) / {n} END AS {name}_icpt"
    )


def _shifted(name: str) -> str:
    """A rollup row's sums, u shifted from its bucket's start to ``now`` (b: the start, relative)."""
    n, su, suu, sy, suy = (f"{name}_{k}" for k in ("n", "su", "suu", "sy", "suy"))
    return f"{n}, {su} + {n} * b, {suu} + 2 * b * {su} + {n} * b * b, {sy}, {suy} + b * {sy}"


def _sums(name: str) -> str:
    return ", ".join(f"sum({name}_{k}) AS {name}_{k}" for k in ("n", "su", "suu", "sy", "suy"))


def _names(name: str) -> str:
    return ", ".join(f"{name}_{k}" for k in ("n", "su", "suu", "sy", "suy"))


#: Rows outside the rolled run [$3, $4): before it and after it, each a range scan of the time index.
_OUTSIDE = ("time > $1 AND time < $3", "time >= $4 AND time <= $2")

_DOM_VALUES = "rx, bias, rx_warn, rx_crit, bias_crit"
_DOM_PARTS = " UNION ALL ".join(
    [
        f"SELECT switch, port, last_time, rx_power_dbm, laser_bias_ma, rx_low_warning_dbm, rx_low_critical_dbm, "
        f"bias_high_critical_ma, {_shifted('rx')}, {_shifted('bias')} "
        "FROM (SELECT *, date_part('epoch', bucket - $2) AS b FROM dom_rollup WHERE bucket >= $3 AND bucket < $4 "
        "OFFSET 0) r",
        *(
            "SELECT switch, port, max(time), last(rx_power_dbm, time), last(laser_bias_ma, time), "
            "last(rx_low_warning_dbm, time), last(rx_low_critical_dbm, time), last(bias_high_critical_ma, time), "
            f"{regr_sums('rx_power_dbm', 'u')}, {regr_sums('laser_bias_ma', 'u')} "
            f"FROM (SELECT *, date_part('epoch', time - $2) AS u FROM transceiver_dom WHERE {where} OFFSET 0) d "
            "GROUP BY switch, port"
            for where in _OUTSIDE
        ),
    ]
)

DOM_SUMMARY_SQL = f"""
SELECT switch, port, t, rx, bias, rel, rx_warn, rx_crit, bias_crit, {_line("rx")}, {_line("bias")}
FROM (
    SELECT switch, port, date_part('epoch', max(last_time)) AS t, date_part('epoch', max(last_time) - $2) AS rel,
           last(rx, last_time) AS rx, last(bias, last_time) AS bias, last(rx_warn, last_time) AS rx_warn,
           last(rx_crit, last_time) AS rx_crit, last(bias_crit, last_time) AS bias_crit,
           {_sums("rx")}, {_sums("bias")}
    FROM ({_DOM_PARTS}) AS p (switch, port, last_time, {_DOM_VALUES}, {_names("rx")}, {_names("bias")})
    GROUP BY switch, port
) s
"""

_BER = "pre_fec_ber > 0"
_BER_PARTS = " UNION ALL ".join(
    [
        f"SELECT switch, port, last_time, log_ber, {_shifted('ber')} FROM (SELECT *, date_part('epoch', bucket - $2) "
        "AS b, n AS ber_n, su AS ber_su, suu AS ber_suu, sy AS ber_sy, suy AS ber_suy "
        "FROM fec_rollup WHERE bucket >= $3 AND bucket < $4 AND n > 0 OFFSET 0) r",
        *(
            f"SELECT switch, port, max(time), last(log_ber, time), {regr_sums('log_ber', 'u')} "
            "FROM (SELECT switch, port, time, log(pre_fec_ber) AS log_ber, date_part('epoch', time - $2) AS u "
            f"FROM port_fec WHERE {where} AND {_BER} OFFSET 0) f GROUP BY switch, port"
            for where in _OUTSIDE
        ),
    ]
)

BER_SUMMARY_SQL = f"""
SELECT switch, port, t, log_ber, rel, {_line("ber")}
FROM (
    SELECT switch, port, date_part('epoch', max(last_time)) AS t, date_part('epoch', max(last_time) - $2) AS rel,
           last(log_ber, last_time) AS log_ber, {_sums("ber")}
    FROM ({_BER_PARTS}) AS p (switch, port, last_time, log_ber, {_names("ber")})
    GROUP BY switch, port
) s
"""


def latest_run(buckets: Sequence[datetime]) -> tuple[datetime, datetime] | None:
    """The latest run of consecutive buckets, as [first start, last end); None: no bucket."""
    if not buckets:
        return None
    lo = hi = buckets[-1]
    for b in reversed(buckets[:-1]):
        if b != lo - BUCKET:
            break
        lo = b
    return lo, hi + BUCKET


async def summaries(conn: Connection, since: datetime, now: datetime) -> tuple[list[Any], list[Any]]:
    """The DOM and the BER summaries of the window ``(since, now]``: one record per port with
    ``t``, ``rel``, the latest values and thresholds, and ``rx_``/``bias_``/``ber_`` ``slope`` and ``icpt``."""
    run = latest_run(await rolled_buckets(conn, since, now))
    lo, hi = run if run is not None else (now, now)  # nothing rolled: every row is outside [now, now)
    return (
        list(await conn.fetch(DOM_SUMMARY_SQL, since, now, lo, hi)),
        list(await conn.fetch(BER_SUMMARY_SQL, since, now, lo, hi)),
    )
