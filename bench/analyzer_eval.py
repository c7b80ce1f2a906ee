"""A full evaluation of a 16,384-GPU fabric's latest window (goal: under 1 s).

Telemetry for 640 switches / 81,920 ports is written the way the collectors write it (a simulated
fabric's state through the pipeline, three 10 s samples per port, with a few faults so the checks
have something to find: a downed uplink, a 200G link, a miswire, a PFC storm, an error burst),
then every check runs once (``analyzer.engine.evaluate``) and the whole
read-only assessment (checks + SLOs + jobs) once more.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from typing import Any

from analyzer.actions import decide_all
from analyzer.correlation import correlate
from analyzer.engine import context_for, evaluate
from analyzer.service import assess
from collector.pipeline import Pipeline
from config.model import Config
from fabric.model import FabricParams
from fabric.topology import build_aipod
from simulator.fabric_state import FabricState
from simulator.feed import feed
from store.config import WriterConfig
from store.db import create_pool
from store.inventory import ensure_fabric
from store.migrate import migrate

GPUS = int(os.environ.get("FABRICMON_BENCH_ANALYZER_GPUS", "16384"))
S = 1_000_000_000


async def run(dsn: str) -> dict[str, Any]:
    fabric = build_aipod(FabricParams(gpus=GPUS))
    pool = await create_pool(dsn)
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
            await ensure_fabric(conn, fabric)
            await conn.execute("TRUNCATE port_counters, pfc_counters, link_events, lldp_neighbors")
        clock = [time.time_ns() - 40 * S]
        state = FabricState(fabric, seed=1, clock=lambda: clock[0])
        for fault in (
            {"kind": "link_down", "switch": "lf-g3-r2"},
            {"kind": "speed_degrade", "switch": "lf-g7-r5", "speed_gbps": 200},
            {"kind": "miswire", "server": "srv-g2-010", "gpu": 3, "to_leaf": "lf-g2-r6"},
            {"kind": "pfc_storm", "switch": "lf-g5-r4"},
            {"kind": "error_burst", "switch": "lf-g9-r1", "rate_pps": 500},
        ):
            state.apply(fault)
        pipe = Pipeline(pool, fabric, WriterConfig(batch_rows=20_000))
        pipe.start()
        started = time.perf_counter()
        for _ in range(3):
            clock[0] += 10 * S
            state.tick(clock[0])
            await feed(state, pipe, clock[0], lldp=True)
        await pipe.close()
        write_s = time.perf_counter() - started
        config = Config()
        now = datetime.fromtimestamp(clock[0] / 1e9, tz=UTC)
        async with pool.acquire() as conn:
            await conn.execute("ANALYZE")
            runs = []
            for _ in range(3):
                ctx = context_for(fabric, config.analyzer, now, 10.0)
                t0 = time.perf_counter()
                ev = await evaluate(conn, ctx)
                runs.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            incidents = decide_all(correlate(ev.all_findings, fabric), fabric)
            correlate_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            await assess(conn, fabric, config, now)
            full = time.perf_counter() - t0
            storage = await _storage(conn)
        return {
            "gpus": GPUS,
            "ports": sum(1 for _ in fabric.all_ports()),
            "port_rows": pipe.ports_writer.stats.rows_written,
            "write_s": round(write_s, 1),
            "evaluate_s": [round(x, 3) for x in runs],
            "evaluate_best_s": round(min(runs), 3),
            "assess_s": round(full, 3),
            "correlate_s": round(correlate_s, 4),
            "incidents": sorted(f"{i.rule}:{i.key}:{i.action}" for i in incidents),
            "check_seconds": ev.results.check_seconds,
            "findings": sorted({f"{f.rule}:{f.key}" for f in ev.all_findings}),
            "goal_s": 1.0,
            "storage": storage,
        }
    finally:
        await pool.close()


async def _storage(conn: Any) -> dict[str, dict[str, float]]:
    """Rows and on-disk bytes (heap, indexes, TOAST; uncompressed) of the telemetry tables: the
    figures docs/scaling.md multiplies out per day."""
    out: dict[str, dict[str, float]] = {}
    for table in ("port_counters", "pfc_counters"):
        rows = int(await conn.fetchval(f"SELECT count(*) FROM {table}"))
        size = int(await conn.fetchval("SELECT hypertable_size($1::regclass)", table) or 0)
        out[table] = {"rows": rows, "bytes": size, "bytes_per_row": round(size / rows, 1) if rows else 0.0}
    return out
