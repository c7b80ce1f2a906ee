"""Link health's rollup (tables ``dom_rollup``, ``fec_rollup``, ``link_rollup_buckets``): its one writer.

Link health's summary (analyzer/link_summary.py) fits a least-squares line per port and series
over hours of DOM and FEC sampled every 60 s: ~360 rows per port and table at 6 h, ~57M rows at
16K GPUs (~80K optical ports). Per port and :data:`BUCKET_S` bucket, the rollup keeps what such a
line needs, exactly: n, Σu, Σu², Σy, Σuy (u: seconds from the bucket's start, small enough for
float8 to stay exact when shifted to any reference time) and the bucket's latest row. Summed over
a window's buckets they give the same line as the rows do; the summary reads the rows only for
the parts of its window no rolled bucket covers.

:func:`roll` is run by the analyzer before each link-health fit (analyzer/cadence.py):

* every closed bucket of the window that is not rolled yet, once it ended :data:`SETTLE_S` ago
  (rows reach the database within the collectors' flush interval, seconds);
* late rows (a collector's spool replayed after a database outage) land in buckets rolled
  already: each roll counts the raw rows of the :data:`RECOUNT` least recently counted rolled
  buckets (a cheap ``count(*)``: the whole window every ``36 / RECOUNT`` fits) and rolls again the
  ones whose count changed. Until then the summary's lines miss those rows; the robust fits of the
  ports it selects read the raw rows, late ones included.

Rolling again is an upsert of the bucket's aggregates, so two rollers (a leader and the one taking
over) write the same rows. ``link_rollup_buckets`` keeps the window's buckets only.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg

BUCKET_S = 600
BUCKET = timedelta(seconds=BUCKET_S)
#: A bucket is rolled once it ended this long ago.
SETTLE_S = 120.0
#: Rolled buckets counted again per roll, the least recently counted first.
RECOUNT = 4

_DOM_SERIES = ("rx", "rx_power_dbm"), ("bias", "laser_bias_ma")
_DOM_COLUMNS = (
    "bucket", "switch", "port", "n", "last_time", "rx_power_dbm", "laser_bias_ma", "rx_low_warning_dbm",
    "rx_low_critical_dbm", "bias_high_critical_ma",
    *(f"{s}_{k}" for s, _ in _DOM_SERIES for k in ("n", "su", "suu", "sy", "suy")),
)  # fmt: skip


def regr_sums(y: str, u: str) -> str:
    """n, Σu, Σu², Σy, Σuy of the rows where ``y`` is not NULL, as SQL aggregates: the ``regr_*``
    aggregates of one (y, u) pair share one transition in C (Youngs-Cramer: Sxx stays exact)."""
    n, ax, ay = f"regr_count({y}, {u})", f"regr_avgx({y}, {u})", f"regr_avgy({y}, {u})"
    return (
        f"{n}, coalesce({ax} * {n}, 0), coalesce(regr_sxx({y}, {u}) + {n} * {ax} * {ax}, 0), "
        f"coalesce({ay} * {n}, 0), coalesce(regr_sxy({y}, {u}) + {n} * {ax} * {ay}, 0)"
    )


def _upsert(table: str, columns: tuple[str, ...], select: str, rows: str) -> str:
    """Insert or replace the buckets' rows of ``select``; the statement returns the raw rows rolled."""
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns[3:])
    return (
        f"WITH rolled AS (INSERT INTO {table} ({', '.join(columns)}) {select} "
        f"ON CONFLICT (switch, port, bucket) DO UPDATE SET {updates} RETURNING {rows}) "
        f"SELECT coalesce(sum({rows}), 0) FROM rolled"
    )


_ROLL_DOM = _upsert(
    "dom_rollup",
    _DOM_COLUMNS,
    "SELECT $1::timestamptz, switch, port, count(*), max(time), last(rx_power_dbm, time), last(laser_bias_ma, time), "
    "last(rx_low_warning_dbm, time), last(rx_low_critical_dbm, time), last(bias_high_critical_ma, time), "
    + ", ".join(regr_sums(col, "u") for _, col in _DOM_SERIES)
    + " FROM (SELECT *, date_part('epoch', time - $1) AS u FROM transceiver_dom WHERE time >= $1 AND time < $2 "
    "OFFSET 0) d"
    " GROUP BY switch, port",
    "n",
)

_FEC_COLUMNS = ("bucket", "switch", "port", "n_rows", "last_time", "log_ber", "n", "su", "suu", "sy", "suy")
_BER = "pre_fec_ber > 0"
_ROLL_FEC = _upsert(
    "fec_rollup",
    _FEC_COLUMNS,
    f"SELECT $1::timestamptz, switch, port, count(*), max(time) FILTER (WHERE {_BER}), "
    f"last(log_ber, time) FILTER (WHERE {_BER}), {regr_sums('log_ber', 'u')} "
    f"FROM (SELECT switch, port, time, pre_fec_ber, CASE WHEN {_BER} THEN log(pre_fec_ber) END AS log_ber, "
    "date_part('epoch', time - $1) AS u FROM port_fec WHERE time >= $1 AND time < $2 OFFSET 0) f "
    "GROUP BY switch, port",
    "n_rows",
)

_RECORD = """
INSERT INTO link_rollup_buckets (bucket, dom_rows, fec_rows, counted_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (bucket) DO UPDATE SET dom_rows = excluded.dom_rows, fec_rows = excluded.fec_rows,
                                   counted_at = excluded.counted_at
"""

_COUNT = """
SELECT v.b AS bucket,
       (SELECT count(*) FROM transceiver_dom WHERE time >= v.b AND time < v.b + $2::interval) AS dom_rows,
       (SELECT count(*) FROM port_fec WHERE time >= v.b AND time < v.b + $2::interval) AS fec_rows
FROM unnest($1::timestamptz[]) AS v(b)
"""


@dataclass(frozen=True, slots=True)
class Rolled:
    """What one :func:`roll` did: buckets rolled for the first time, counted again, rolled again."""

    new: int = 0
    counted: int = 0
    again: int = 0


def floor_bucket(t: datetime) -> datetime:
    """The start of the bucket holding ``t`` (buckets start at multiples of :data:`BUCKET_S` since the epoch)."""
    epoch = datetime(1970, 1, 1, tzinfo=t.tzinfo)
    return t - timedelta(seconds=(t - epoch).total_seconds() % BUCKET_S)


async def rolled_buckets(conn: asyncpg.Connection, since: datetime, now: datetime) -> list[datetime]:
    """The rolled buckets lying wholly in the window ``(since, now]``, oldest first."""
    rows = await conn.fetch(
        "SELECT bucket FROM link_rollup_buckets WHERE bucket > $1 AND bucket + $3::interval <= $2 ORDER BY bucket",
        since,
        now,
        BUCKET,
    )
    return [r["bucket"] for r in rows]


async def _roll_one(conn: asyncpg.Connection, bucket: datetime, counted_at: datetime) -> None:
    async with conn.transaction():
        dom = await conn.fetchval(_ROLL_DOM, bucket, bucket + BUCKET)
        fec = await conn.fetchval(_ROLL_FEC, bucket, bucket + BUCKET)
        await conn.execute(_RECORD, bucket, dom, fec, counted_at)


async def roll(conn: asyncpg.Connection, now: datetime, window_s: float, recount: int = RECOUNT) -> Rolled:
    """Roll the window's closed buckets not rolled yet, count ``recount`` rolled ones again and roll
    again those whose rows changed; forget buckets older than the window."""
    first = floor_bucket(now - timedelta(seconds=window_s))
    end = floor_bucket(now - timedelta(seconds=SETTLE_S))  # buckets starting before it are settled
    await conn.execute("DELETE FROM link_rollup_buckets WHERE bucket < $1", first)
    rows = await conn.fetch(
        "SELECT bucket, dom_rows, fec_rows FROM link_rollup_buckets WHERE bucket < $1 ORDER BY counted_at, bucket",
        end,
    )
    have = {r["bucket"]: (r["dom_rows"], r["fec_rows"]) for r in rows}
    new = 0
    b = first
    while b < end:
        if b not in have:
            await _roll_one(conn, b, now)
            new += 1
        b += BUCKET
    counted = again = 0
    check = [r["bucket"] for r in rows][:recount]
    if check:
        for r in await conn.fetch(_COUNT, check, BUCKET):
            counted += 1
            if (r["dom_rows"], r["fec_rows"]) != have[r["bucket"]]:
                await _roll_one(conn, r["bucket"], now)
                again += 1
            else:
                await conn.execute("UPDATE link_rollup_buckets SET counted_at = $2 WHERE bucket = $1", r["bucket"], now)
    return Rolled(new, counted, again)
