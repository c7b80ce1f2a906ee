"""Link health over a simulated week: warning lead times and false checkpoint advisories (issue 26).

Each link is one simulated optic (:class:`simulator.optics.PortOptic`, the simulator's own model
with its DOM wobble) sampled every ``DOM_S`` (60 s, SONiC's DOM refresh), bucketed as the check's
SQL buckets it (a sixtieth of the 6 h window, points' mean time), and judged by the check's own
:func:`analyzer.link_health.judge` every ``EVAL_S``. An *advisory* is an evaluation whose time to
failure is within ``alerts.checkpoint_lead_s`` (2 h): what checkpoints a server link's jobs.

* ``optic_degrade`` (0.25-4 dB/h, log-uniform) and ``laser_aging`` (0.1-2 mA/h): the lead time
  is the failure instant (the simulator's) minus the first advisory; the goal is >= 1 h for every
  one. Also the first ``link_degrading`` finding (within the 24 h horizon).
* benign ``dirty_connector`` (0.5-3 dB) and ``fec_burst`` (10-600 s), each judged from its start
  until a window after it, and healthy links for the whole week (evaluated hourly: their series
  are stationary): any advisory is false. Reported per 1,000 links per week.

Pure CPU, no database: the SQL is not what is measured here (see docs/benchmarks.md).
"""

from __future__ import annotations

import math
import random
import statistics
import sys
import time
from typing import Any

from analyzer.config import ThresholdsConfig
from analyzer.link_health import SHORT, LinkLimits, Series, judge
from simulator.optics import BIAS_NOISE_MA, MODULE_THRESHOLDS, RX_NOISE_DB, PortOptic, ber_of

S = 1_000_000_000
DOM_S = 60
EVAL_S = 900
WEEK_S = 7 * 86400
LEAD_S = 7200.0


def _optic(rng: random.Random, i: int) -> PortOptic:
    return PortOptic(f"p{i}", f"x{i}", 400 * 10**9, 0, random.Random(rng.random()))


def _series(o: PortOptic, end_s: float, window_s: float, points: int = 60) -> Series:
    """The window before ``end_s`` as the check's SQL returns it: per bucket, mean time and values."""
    bucket = window_s / points
    s = Series(rx_crit=MODULE_THRESHOLDS.rx_low_critical_dbm, bias_crit=MODULE_THRESHOLDS.bias_high_critical_ma)
    s.rx_warn = MODULE_THRESHOLDS.rx_low_warning_dbm
    start = end_s - window_s
    sums: dict[int, list[float]] = {}
    t = math.floor(start / DOM_S) * DOM_S + DOM_S
    while t <= end_s:
        ns = int(t * S)
        # the simulator applies a fault at its start; here the history before it is read too
        started = {k: v for k, v in o.faults.items() if v[1] <= ns}
        loss = sum(f * (ns - st) / 3.6e12 if k == "degrade" else f for k, st, f in started.values() if k != "aging"
                   and k != "burst")  # fmt: skip
        burst = any(k == "burst" and ns < st + f * S for k, st, f in started.values())
        bias = o.bias0 + sum(f * (ns - st) / 3.6e12 for k, st, f in started.values() if k == "aging")
        rx = o.rx0 - loss + RX_NOISE_DB * o.noise(ns)
        bias += BIAS_NOISE_MA * o.noise(ns + 1)
        log_ber = math.log10(ber_of(o.base_log_ber, loss, burst))
        acc = sums.setdefault(int(t // bucket), [0.0, 0.0, 0.0, 0.0, 0.0])
        for k, v in enumerate((1.0, t, rx, bias, log_ber)):
            acc[k] += v
        t += DOM_S
    for _, (n, ts, rx, bias, lb) in sorted(sums.items()):
        s.rx_ts.append(ts / n)
        s.rx.append(rx / n)
        s.bias_ts.append(ts / n)
        s.bias.append(bias / n)
        s.ber_ts.append(ts / n)
        s.log_ber.append(lb / n)
    return s


def _ttf(o: PortOptic, at_s: float, limits: LinkLimits) -> float | None:
    recent = _series(o, at_s, limits.window_s / SHORT, 30)
    whole = _series(o, at_s, limits.window_s)
    return judge(("sw", o.name), whole, (None, None), limits, recent).time_to_failure_s


def _degrading(rng: random.Random, kind: str, n: int, limits: LinkLimits) -> dict[str, Any]:
    leads: list[float] = []
    warned: list[float] = []
    missed = 0
    for i in range(n):
        o = _optic(rng, i)
        start = 86400.0  # a day of healthy history first
        if kind == "degrade":
            o.faults["f"] = ("degrade", int(start * S), math.exp(rng.uniform(math.log(0.25), math.log(4.0))))
        else:
            o.faults["f"] = ("aging", int(start * S), math.exp(rng.uniform(math.log(0.1), math.log(2.0))))
        fail = (o.failure_at(int(start * S)) or 0) / S
        first_adv = first_warn = None
        t = start
        while t < fail:
            ttf = _ttf(o, t, limits)
            if ttf is not None and first_warn is None and ttf <= limits.horizon_s:
                first_warn = t
            if ttf is not None and ttf <= LEAD_S:
                first_adv = t
                break
            t += EVAL_S
        if first_adv is None:
            missed += 1
        else:
            leads.append((fail - first_adv) / 3600)
        if first_warn is not None:
            warned.append((fail - first_warn) / 3600)
    return {
        "links": n,
        "missed": missed,
        "lead_h": _dist(leads),
        "first_finding_before_failure_h": _dist(warned),
        "under_1h": sum(1 for x in leads if x < 1.0),
    }


def _benign(rng: random.Random, kind: str, n: int, limits: LinkLimits) -> dict[str, Any]:
    false = 0
    evals = 0
    for i in range(n):
        o = _optic(rng, i)
        start = 86400.0
        figure = rng.uniform(0.5, 3.0) if kind == "dirty" else rng.uniform(10.0, 600.0)
        o.faults["f"] = (kind, int(start * S), figure)
        t = start - EVAL_S
        flagged = False
        while t <= start + figure * (kind == "burst") + limits.window_s + 3600:
            evals += 1
            ttf = _ttf(o, t, limits)
            flagged |= ttf is not None and ttf <= LEAD_S
            t += EVAL_S
        false += flagged
    return {"links": n, "evaluations": evals, "false_advisories": false}


def _healthy(rng: random.Random, n: int, limits: LinkLimits) -> dict[str, Any]:
    false = 0
    evals = 0
    for i in range(n):
        o = _optic(rng, i)
        flagged = False
        for h in range(7 * 24):
            evals += 1
            ttf = _ttf(o, 86400.0 + h * 3600.0, limits)
            flagged |= ttf is not None and ttf <= LEAD_S
        false += flagged
    return {"links": n, "link_weeks": n, "evaluations": evals, "false_advisories": false}


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


def measure(n_degrading: int = 30, n_benign: int = 60, n_healthy: int = 30, seed: int = 26) -> dict[str, Any]:
    """Every figure of the module docstring (sizes kept small enough for a 2-core machine)."""
    rng = random.Random(seed)
    limits = LinkLimits.of(ThresholdsConfig())
    started = time.perf_counter()
    out: dict[str, Any] = {
        "optic_degrade": _degrading(rng, "degrade", n_degrading, limits),
        "laser_aging": _degrading(rng, "aging", n_degrading, limits),
        "dirty_connector": _benign(rng, "dirty", n_benign, limits),
        "fec_burst": _benign(rng, "burst", n_benign, limits),
        "healthy": _healthy(rng, n_healthy, limits),
    }
    false = sum(out[k]["false_advisories"] for k in ("dirty_connector", "fec_burst", "healthy"))
    out["false_advisories_per_1000_links_week"] = round(1000 * false / (2 * n_benign + n_healthy), 2)
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


async def sql_cost(dsn: str, ports: int = 2000, rounds: int = 12, round_s: float = 10.0) -> dict[str, Any]:
    """The check's reads (:func:`analyzer.link_health.link_health`) over ``ports`` ports with 6 h
    of DOM and FEC at 60 s: rows written, seconds per fit, extrapolated to 80K ports; then the
    analyzer's cost per round over ``rounds`` rounds ``round_s`` apart, fitting at the default
    ``analyzer.link_health_interval_s`` (60 s, analyzer/cadence.py) and reusing in between."""
    from datetime import UTC, datetime, timedelta

    from analyzer.cadence import cadences
    from analyzer.config import AnalyzerConfig
    from analyzer.engine import WORK_MEM, context_for, run_check
    from analyzer.link_health import check_link_health, link_health
    from fabric.model import FabricParams
    from fabric.topology import build_aipod
    from store.db import create_pool
    from store.dom import DomSample, write_dom
    from store.fec import FecSample, write_fec
    from store.migrate import migrate

    pool = await create_pool(dsn)
    now = datetime.now(UTC).replace(microsecond=0)
    limits = LinkLimits.of(ThresholdsConfig())
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
            await conn.execute("TRUNCATE transceiver_dom, port_fec")
            samples = int(limits.window_s // DOM_S)
            for p in range(ports):
                at = [now - timedelta(seconds=DOM_S * k) for k in range(samples)]
                await write_dom(
                    conn, [DomSample(t, f"sw{p // 64}", f"p{p % 64}", "x", -2.0, 1.0, 7.0, 40.0) for t in at]
                )
                bins = (10**9, 1000, 10, 1, *([0] * 12))
                await write_fec(
                    conn, [FecSample(t, f"sw{p // 64}", f"p{p % 64}", 1, 0, 5, 1e-9, 0.0, bins) for t in at]
                )
            await conn.execute("ANALYZE transceiver_dom; ANALYZE port_fec")
            # as analyzer.engine.evaluate sets them
            await conn.execute(f"SET work_mem = '{WORK_MEM}'")
            await conn.execute("SET max_parallel_workers_per_gather = 0")
            took = []
            for _ in range(3):
                t0 = time.perf_counter()
                found = await link_health(conn, now, limits)
                took.append(time.perf_counter() - t0)
            assert len(found) == ports
            config = AnalyzerConfig()
            fabric = build_aipod(FabricParams(gpus=128, radix=16))
            kept = cadences(config)
            per_round = []
            for r in range(rounds):
                ctx = context_for(fabric, config, now + timedelta(seconds=r * round_s), round_s, kept=kept)
                t0 = time.perf_counter()
                await run_check(conn, ctx, check_link_health)
                per_round.append(time.perf_counter() - t0)
        best = min(took)
        fits = sum(1 for t in per_round if t > best / 10)
        return {
            "ports": ports,
            "rows_per_table": ports * samples,
            "seconds_per_evaluation": round(best, 3),
            "extrapolated_80k_ports_s": round(best * 80_000 / ports, 1),
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
