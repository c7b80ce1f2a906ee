"""API latency under concurrent load at 16,384 GPUs (issue 6): ``/v1/health``, ``/v1/rails`` and a
job health query, p50/p99 as a client sees them.

Setup, as in production: the 16,384-GPU AIPod's inventory, three 10 s rounds of simulated
telemetry (81,920 ports) written through the collectors' pipeline, with a leaf uplink down, a
spine uplink down and a PFC storm; one analyzer evaluation stored with its alerts; a
4,096-GPU job registered. The API runs in its own process (``create_app`` on 127.0.0.1, a free
port); this process is the load generator: ``CONCURRENCY`` connections, ``REQUESTS`` requests
per route after a warm-up. Also measured, with fewer requests: the switch list, one switch's
ports, the alerts, a series and ``/metrics``.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from subprocess import PIPE
from typing import Any

import aiohttp
from aiohttp import web

from analyzer.service import AnalyzerService
from api.app import create_app
from collector.pipeline import Pipeline
from config.model import Config
from fabric.model import Fabric, FabricParams
from fabric.topology import build_aipod
from simulator.fabric_state import FabricState
from simulator.feed import feed_rounds
from store.db import Pool, create_pool
from store.inventory import ensure_fabric
from store.jobs import Job, save_job
from store.migrate import migrate

ROOT = Path(__file__).resolve().parent.parent
GPUS = 16_384
ROUNDS = 3
CONCURRENCY = 32
REQUESTS = 2_000
WARMUP = 100
S = 1_000_000_000
JOB_ID = "bench-4096"
JOB_GROUPS = range(5, 13)  # 8 groups x 64 servers x 8 GPUs = 4,096 GPUs
FAULTS: list[dict[str, Any]] = [
    {"kind": "link_down", "switch": "lf-g5-r3"},
    {"kind": "link_down", "switch": "sp-r6-2"},
    {"kind": "pfc_storm", "switch": "lf-g9-r2", "port": "swp3", "rate_pps": 20000},
]


async def _seed(pool: Pool, fabric: Fabric, config: Config) -> dict[str, float]:
    """Inventory, telemetry, one stored evaluation with its alerts, and the job."""
    started = time.perf_counter()
    async with pool.acquire() as conn:
        await migrate(conn)
        await ensure_fabric(conn, fabric)
    clock = [time.time_ns() - ROUNDS * 10 * S]
    state = FabricState(fabric, seed=11, clock=lambda: clock[0])
    pipe = Pipeline(pool, fabric)
    pipe.start()
    await feed_rounds(
        state, pipe, clock, ROUNDS, FAULTS, lldp_every_round=False,
        progress=lambda i: print(f"bench api: telemetry round {i + 1}/{ROUNDS} written", file=sys.stderr, flush=True),
    )  # fmt: skip
    await pipe.close()
    fed = time.perf_counter()
    hosts = [s.name for s in fabric.servers.values() if s.group in JOB_GROUPS]
    async with pool.acquire() as conn:
        await save_job(conn, Job(JOB_ID, tuple(hosts), expected_days=20.0))
        now = datetime.fromtimestamp(clock[0] / 1e9, tz=UTC)
    report = await AnalyzerService(config, fabric, pool).evaluate_once(now, confirm=False)
    evaluated = time.perf_counter()
    return {
        "telemetry_s": round(fed - started, 1),
        "evaluation_s": round(evaluated - fed, 2),
        "findings": sum(len(c["findings"]) for c in report["checks"].values()),
        "job_gpus": sum(fabric.servers[h].gpus for h in hosts),
    }


async def _serve() -> None:
    """The API process (``python -m bench.api_latency``): the DSN comes on stdin (never argv, which
    other users can read), the port goes to stdout; serve until stdin closes."""
    loop = asyncio.get_running_loop()
    dsn = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
    fabric = build_aipod(FabricParams(gpus=GPUS))
    runner = web.AppRunner(create_app(Config(), fabric, dsn=dsn), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(runner.addresses[0][1], flush=True)
    await loop.run_in_executor(None, sys.stdin.read)
    await runner.cleanup()


@contextlib.asynccontextmanager
async def _server(dsn: str) -> AsyncIterator[str]:
    """Start the API process; yields its base URL."""
    root = ROOT
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.api_latency", cwd=root, stdin=PIPE, stdout=PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(dsn.encode() + b"\n")
        await proc.stdin.drain()
        line = await asyncio.wait_for(proc.stdout.readline(), 120)
        if not line.strip().isdigit():
            raise RuntimeError("the API process did not start")
        yield f"http://127.0.0.1:{int(line)}"
    finally:
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 30)
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def _load(session: aiohttp.ClientSession, url: str, n: int, concurrency: int) -> dict[str, Any]:
    """``n`` GETs of ``url`` over ``concurrency`` connections: latency percentiles and throughput."""
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    size = 0
    todo = iter(range(n))

    async def worker() -> None:
        nonlocal size
        for _ in todo:
            t = time.perf_counter()
            async with session.get(url) as resp:
                body = await resp.read()
            latencies.append(time.perf_counter() - t)
            statuses[resp.status] += 1
            size = len(body)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.perf_counter() - started
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    return {
        "requests": n,
        "p50_ms": round(cuts[49] * 1000, 2),
        "p99_ms": round(cuts[98] * 1000, 2),
        "max_ms": round(max(latencies) * 1000, 2),
        "req_per_s": round(n / wall),
        "non_2xx": sum(v for k, v in statuses.items() if not 200 <= k < 300),
        "body_bytes": size,
    }


async def run(dsn: str) -> dict[str, Any]:
    fabric = build_aipod(FabricParams(gpus=GPUS))
    config = Config()
    pool = await create_pool(dsn)
    try:
        setup = await _seed(pool, fabric, config)
    finally:
        await pool.close()
    async with _server(dsn) as base:
        t = int(time.time())
        routes = {
            "/v1/health": REQUESTS,
            "/v1/rails": REQUESTS,
            f"/v1/jobs/{JOB_ID}/health": REQUESTS,
            "/v1/switches?limit=1000": 200,
            "/v1/switches/lf-g5-r3/ports": 500,
            "/v1/alerts": 500,
            f"/v1/series?switch=lf-g5-r3&port=swp65&metric=in_bps&from={t - 600}&to={t}": 500,
            "/metrics": 500,
        }
        results: dict[str, Any] = {}
        connector = aiohttp.TCPConnector(limit=CONCURRENCY)
        async with aiohttp.ClientSession(connector=connector) as session:
            for path, n in routes.items():
                await _load(session, base + path, min(WARMUP, n), CONCURRENCY)
                results[path.split("?")[0]] = await _load(session, base + path, n, CONCURRENCY)
                print(f"bench api: {path.split('?')[0]}: {results[path.split('?')[0]]}", file=sys.stderr, flush=True)
    return {
        "gpus": GPUS,
        "switches": len(fabric.switches),
        "ports": sum(sw.radix for sw in fabric.switches.values()),
        "concurrency": CONCURRENCY,
        **setup,
        "routes": results,
    }


if __name__ == "__main__":
    asyncio.run(_serve())
