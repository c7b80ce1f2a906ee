"""Link health over a simulated week: warning lead times and false checkpoint advisories (issue 26).

Each link is one simulated optic (:class:`simulator.optics.PortOptic`, the simulator's own model
with its DOM wobble) sampled every ``DOM_S`` (60 s, SONiC's DOM refresh), bucketed as the check's
SQL buckets it (``time_bucket`` of a sixtieth of the 6 h window, and of a thirtieth of its last
third; the points' mean time), and judged by the check's own :func:`analyzer.link_health.judge`
at the analyzer's cadence, ``analyzer.link_health_interval_s`` (60 s). An *advisory* is an
evaluation whose time to failure is within ``alerts.checkpoint_lead_s`` (2 h): what checkpoints a
server link's jobs.

* ``optic_degrade`` (0.25-4 dB/h, log-uniform) and ``laser_aging`` (0.1-2 mA/h), after a day of
  healthy history: the lead time is the failure instant (the simulator's) minus the first
  advisory; the goal is >= 1 h for every one. Also the first ``link_degrading`` finding (within
  the 24 h horizon).
* benign: ``links`` link-weeks, each with one ``dirty_connector`` (0.5-3 dB) or ``fec_burst``
  (10-600 s) at a random time of its week, half each. Every link is judged at the cadence from
  just before its event until a window and an hour after it, and hourly for the rest of its week
  (a stationary series then). A link with any advisory is one false advisory; the goal is <= 1
  per 1,000 links per week.

Pure CPU, no database: the SQL is not what is measured here (see :func:`sql_cost`). Each link's
samples are computed once and bucketed by prefix sums; the links are judged in parallel by
``FABRICMON_BENCH_WORKERS`` processes (default: the CPU count).
"""

from __future__ import annotations

import math
import os
import random
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from analyzer.config import AnalyzerConfig, ThresholdsConfig
from analyzer.link_health import SHORT, LinkLimits, Series, judge
from simulator.optics import BIAS_NOISE_MA, MODULE_THRESHOLDS, RX_NOISE_DB, PortOptic, ber_of

S = 1_000_000_000
DOM_S = 60
EVAL_S = int(AnalyzerConfig().link_health_interval_s)
WEEK_S = 7 * 86400
DAY_S = 86400
LEAD_S = 7200.0
_POINTS, _SHORT_POINTS = 60, 30


def _optic(seed: float, i: int) -> PortOptic:
    return PortOptic(f"p{i}", f"x{i}", 400 * 10**9, 0, random.Random(seed))


@dataclass
class _Trace:
    """An optic's DOM samples every ``DOM_S`` from ``first`` (seconds), as prefix sums."""

    first: int
    n: int
    sums: list[list[float]]  # t, rx, bias, log10(BER): sums[k][i] = sum of the first i samples

    def series(self, end: int, window: int, points: int) -> Series:
        """The window ``(end - window, end]`` as the check's SQL returns it: per bucket, mean time and values."""
        bucket = window // points
        lo = (end - window) // DOM_S * DOM_S + DOM_S  # the first sample after the window's start
        w0, w1 = (lo - self.first) // DOM_S, (end - self.first) // DOM_S + 1
        assert w0 >= 0 and w1 <= self.n, "the trace does not cover the window"
        s = Series(rx_crit=MODULE_THRESHOLDS.rx_low_critical_dbm, bias_crit=MODULE_THRESHOLDS.bias_high_critical_ma)
        s.rx_warn = MODULE_THRESHOLDS.rx_low_warning_dbm
        t, rx, bias, ber = self.sums
        k = lo // bucket
        while k * bucket <= end:
            i0 = max(w0, -(-(k * bucket - self.first) // DOM_S))
            i1 = min(w1, -(-((k + 1) * bucket - self.first) // DOM_S))
            if i1 > i0:
                n = i1 - i0
                mean_t = (t[i1] - t[i0]) / n
                s.rx_ts.append(mean_t)
                s.rx.append((rx[i1] - rx[i0]) / n)
                s.bias_ts.append(mean_t)
                s.bias.append((bias[i1] - bias[i0]) / n)
                s.ber_ts.append(mean_t)
                s.log_ber.append((ber[i1] - ber[i0]) / n)
            k += 1
        return s


def _trace(o: PortOptic, first: int, last: int) -> _Trace:
    """Samples at every multiple of ``DOM_S`` in ``[first, last]``, as the simulator serves them."""
    first = first // DOM_S * DOM_S
    cols: list[list[float]] = [[], [], [], []]
    for t in range(first, last + 1, DOM_S):
        ns = t * S
        # the simulator applies a fault at its start; here the history before it is read too
        started = [v for v in o.faults.values() if v[1] <= ns]
        loss = sum(f * (ns - st) / 3.6e12 if k == "degrade" else f for k, st, f in started if k in ("degrade", "dirty"))
        burst = any(k == "burst" and ns < st + f * S for k, st, f in started)
        bias = o.bias0 + sum(f * (ns - st) / 3.6e12 for k, st, f in started if k == "aging")
        values = (
            float(t),
            o.rx0 - loss + RX_NOISE_DB * o.noise(ns),
            bias + BIAS_NOISE_MA * o.noise(ns + 1),
            math.log10(ber_of(o.base_log_ber, loss, burst)),
        )
        for col, v in zip(cols, values, strict=True):
            col.append(v)
    return _Trace(first, len(cols[0]), [list(accumulate(c, initial=0.0)) for c in cols])


def _ttf(tr: _Trace, at: int, limits: LinkLimits) -> float | None:
    window = int(limits.window_s)
    recent = tr.series(at, window // SHORT, _SHORT_POINTS)
    whole = tr.series(at, window, _POINTS)
    return judge(("sw", "p"), whole, (None, None), limits, recent).time_to_failure_s


def _limits() -> LinkLimits:
    return LinkLimits.of(ThresholdsConfig())


def _degrading(job: tuple[str, float, int, float]) -> tuple[float | None, float | None]:
    """(lead h, first finding h before failure) of one degrading optic; a lead of None: missed."""
    kind, seed, i, figure = job
    limits = _limits()
    o = _optic(seed, i)
    start = DAY_S  # a day of healthy history first
    o.faults["f"] = (kind, start * S, figure)
    fail = math.ceil((o.failure_at(start * S) or 0) / S)
    tr = _trace(o, start - int(limits.window_s), fail)
    first_warn = None
    t = start
    while t < fail:
        ttf = _ttf(tr, t, limits)
        if ttf is not None and first_warn is None and ttf <= limits.horizon_s:
            first_warn = t
        if ttf is not None and ttf <= LEAD_S:
            return (fail - t) / 3600, (fail - (first_warn or t)) / 3600
        t += EVAL_S
    return None, None if first_warn is None else (fail - first_warn) / 3600


def _benign(job: tuple[str, float, int, float, int]) -> tuple[str, bool, int]:
    """(kind, whether any evaluation of the link's week advised a checkpoint, evaluations)."""
    kind, seed, i, figure, at = job
    limits = _limits()
    o = _optic(seed, i)
    o.faults["f"] = (kind, at * S, figure)
    week_end = DAY_S + WEEK_S
    tr = _trace(o, DAY_S - int(limits.window_s), week_end)
    dense_from = at - EVAL_S
    dense_to = min(week_end, at + math.ceil(figure if kind == "burst" else 0) + int(limits.window_s) + 3600)
    dense = range(dense_from, dense_to + 1, EVAL_S)
    hourly = [t for t in range(DAY_S, week_end + 1, 3600) if not dense_from <= t <= dense_to]
    evals = 0
    for t in (*dense, *hourly):
        evals += 1
        ttf = _ttf(tr, t, limits)
        if ttf is not None and ttf <= LEAD_S:
            return kind, True, evals
    return kind, False, evals


def _dist(xs: list[float]) -> dict[str, float | None]:
    if not xs:
        return {"min": None, "p10": None, "median": None, "max": None}
    s = sorted(xs)
    return {
        "min": round(s[0], 2),
        "p10": round(s[len(s) // 10], 2),
        "median": round(statistics.median(s), 2),
        "max": round(s[-1], 2),
    }


def _workers() -> int:
    return int(os.environ.get("FABRICMON_BENCH_WORKERS", "0")) or os.cpu_count() or 1


def measure(n_degrading: int = 30, links: int = 1000, seed: int = 26) -> dict[str, Any]:
    """Every figure of the module docstring."""
    rng = random.Random(seed)
    degrading = [
        (kind, rng.random(), i, math.exp(rng.uniform(math.log(lo), math.log(hi))))
        for kind, lo, hi in (("degrade", 0.25, 4.0), ("aging", 0.1, 2.0))
        for i in range(n_degrading)
    ]
    margin = int(_limits().window_s) + 2 * 3600  # the event and its dense evaluations inside the week
    benign = [
        (kind, rng.random(), i, rng.uniform(0.5, 3.0) if kind == "dirty" else rng.uniform(10.0, 600.0),
         rng.randrange(DAY_S + 3600, DAY_S + WEEK_S - margin, DOM_S))
        for i in range(links) for kind in ("dirty" if i % 2 == 0 else "burst",)
    ]  # fmt: skip
    started = time.perf_counter()
    with ProcessPoolExecutor(_workers()) as pool:
        leads = list(pool.map(_degrading, degrading, chunksize=4))
        judged = list(pool.map(_benign, benign, chunksize=16))
    out: dict[str, Any] = {"evaluation_interval_s": EVAL_S}
    for name, kind in (("optic_degrade", "degrade"), ("laser_aging", "aging")):
        mine = [r for job, r in zip(degrading, leads, strict=True) if job[0] == kind]
        found = [lead for lead, _ in mine if lead is not None]
        out[name] = {
            "links": len(mine),
            "missed": len(mine) - len(found),
            "lead_h": _dist(found),
            "first_finding_before_failure_h": _dist([w for _, w in mine if w is not None]),
            "under_1h": sum(1 for x in found if x < 1.0),
        }
    for name, kind in (("dirty_connector", "dirty"), ("fec_burst", "burst")):
        mine_b = [(flagged, evals) for k, flagged, evals in judged if k == kind]
        out[name] = {
            "link_weeks": len(mine_b),
            "evaluations": sum(e for _, e in mine_b),
            "false_advisories": sum(f for f, _ in mine_b),
        }
    false = sum(flagged for _, flagged, _ in judged)
    out["link_weeks"] = links
    out["false_advisories_per_1000_links_week"] = round(1000 * false / links, 2)
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


_DOM_ROWS = """
INSERT INTO transceiver_dom (time, switch, port, component, rx_power_dbm, tx_power_dbm, laser_bias_ma,
                             temperature_c, rx_low_warning_dbm, rx_low_critical_dbm, bias_high_warning_ma,
                             bias_high_critical_ma)
SELECT $1::timestamptz - make_interval(secs => $4 * k), 'sw' || (p / 64), 'p' || (p % 64), 'x',
       -2.0 + (random() - 0.5) * 0.2 - CASE WHEN p % 100 = 0 THEN ($3 - k) * $4 / 3600.0 * 0.5 ELSE 0 END,
       1.0, 7.0 + (random() - 0.5) * 0.05, 40.0, -8.0, -10.0, 12.0, 13.0
FROM generate_series($3 - 1, 0, -1) k, generate_series(0, $2 - 1) p
"""

_FEC_ROWS = """
INSERT INTO port_fec (time, switch, port, corrected, uncorrectable, symbol_errors, pre_fec_ber, post_fec_ber, bins)
SELECT $1::timestamptz - make_interval(secs => $4 * k), 'sw' || (p / 64), 'p' || (p % 64), 1000 + $3 - k, 0, 5,
       power(10, -9 + (random() - 0.5) * 0.2), 0.0,
       ARRAY[1000000000 + $3 - k, 1000, 10, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]::bigint[]
FROM generate_series($3 - 1, 0, -1) k, generate_series(0, $2 - 1) p
"""


async def _timed(what: Any) -> float:
    t0 = time.perf_counter()
    await what
    return time.perf_counter() - t0


async def sql_cost(dsn: str, ports: int = 8000, rounds: int = 12, round_s: float = 10.0) -> dict[str, Any]:
    """The check's reads (:func:`analyzer.link_health.link_health`) over ``ports`` ports with 6 h
    of DOM and FEC at 60 s (1 % of them degrading, in the order collectors write: minute by
    minute), seconds per fit extrapolated to 80K ports:

    * ``fit_from_rows_s``: nothing rolled, every row read (a one-shot ``fabricmon check``);
    * ``first_roll_s``: an analyzer starting on that history rolls the window's buckets once;
    * ``fit_s``: the analyzer's fit as it runs every ``link_health_interval_s``: the roll (no new
      bucket, 4 counted again: store/link_rollup.py) and the fit (median of 3); ``fit_new_bucket_s``
      the same when a new bucket is rolled (once per 10 min).

    Then the analyzer's cost per round over ``rounds`` rounds ``round_s`` apart, fitting inline at
    the default interval (60 s, analyzer/cadence.py) and reusing in between: in the service the fit
    runs beside the rounds (analyzer/fits.py) and a round pays none of it."""
    from datetime import UTC, datetime, timedelta

    from analyzer.cadence import cadences
    from analyzer.config import AnalyzerConfig
    from analyzer.engine import WORK_MEM, context_for, run_check
    from analyzer.link_health import check_link_health, link_health
    from fabric.model import FabricParams
    from fabric.topology import build_aipod
    from store.db import create_pool
    from store.link_rollup import BUCKET, roll
    from store.migrate import migrate

    pool = await create_pool(dsn)
    now = datetime.now(UTC).replace(microsecond=0)
    limits = _limits()
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
            await conn.execute("TRUNCATE transceiver_dom, port_fec, dom_rollup, fec_rollup, link_rollup_buckets")
            samples = int(limits.window_s // DOM_S)
            t0 = time.perf_counter()
            await conn.execute(_DOM_ROWS, now, ports, samples, DOM_S)
            await conn.execute(_FEC_ROWS, now, ports, samples, DOM_S)
            await conn.execute("ANALYZE transceiver_dom; ANALYZE port_fec")
            written_s = time.perf_counter() - t0
            # as analyzer.engine.session sets them
            await conn.execute(f"SET work_mem = '{WORK_MEM}'")
            await conn.execute("SET max_parallel_workers_per_gather = 0")
            found = await link_health(conn, now, limits)
            assert len(found) == ports
            from_rows = min([await _timed(link_health(conn, now, limits)) for _ in range(2)])
            first_roll = await _timed(roll(conn, now - BUCKET, limits.window_s))
            await conn.execute("ANALYZE dom_rollup; ANALYZE fec_rollup")

            async def fit(at: datetime) -> float:
                return await _timed(roll(conn, at, limits.window_s)) + await _timed(link_health(conn, at, limits))

            new_bucket = await fit(now)
            steady = statistics.median([await fit(now + timedelta(milliseconds=k)) for k in range(1, 4)])
            assert [(h.port, h.time_to_failure_s) for h in await link_health(conn, now, limits)] == [
                (h.port, h.time_to_failure_s) for h in found
            ], "the rollup changed the findings"
            config = AnalyzerConfig()
            fabric = build_aipod(FabricParams(gpus=128, radix=16))
            kept = cadences(config)
            per_round = []
            for r in range(rounds):
                ctx = context_for(fabric, config, now + timedelta(seconds=r * round_s), round_s, kept=kept)
                t0 = time.perf_counter()
                await run_check(conn, ctx, check_link_health)
                per_round.append(time.perf_counter() - t0)
        scale = 80_000 / ports

        def at_80k(seconds: float) -> float:
            return round(seconds * scale, 1)

        fits = sum(1 for t in per_round if t > steady / 10)
        return {
            "ports": ports,
            "rows_per_table": ports * samples,
            "written_s": round(written_s, 1),
            "degrading_ports": len([h for h in found if h.time_to_failure_s is not None]),
            "fit_from_rows_s": round(from_rows, 3),
            "first_roll_s": round(first_roll, 3),
            "fit_s": round(steady, 3),
            "fit_new_bucket_s": round(new_bucket, 3),
            "extrapolated_80k_ports_s": {
                "fit": at_80k(steady),
                "fit_new_bucket": at_80k(new_bucket),
                "fit_from_rows": at_80k(from_rows),
                "first_roll": at_80k(first_roll),
            },
            "cadence": {
                "interval_s": config.link_health_interval_s,
                "rounds": rounds,
                "round_s": round_s,
                "fits": fits,
                "mean_seconds_per_round": round(sum(per_round) / rounds, 3),
                "median_seconds_per_round": round(statistics.median(per_round), 6),
            },
        }
    finally:
        await pool.close()


async def run(dsn: str) -> dict[str, Any]:
    """``make bench`` entry: the week's figures (pure CPU) and the check's SQL cost."""
    return {"week": measure(), "sql": await sql_cost(dsn)}


if __name__ == "__main__":
    import json

    print(json.dumps(measure(*(int(a) for a in sys.argv[1:])), indent=2))
