"""A slow link-health fit never holds the analyzer's rounds up (analyzer/fits.py, issue 26).

The fit is made slow for real: another session holds ``transceiver_dom`` locked, so the fit's
first query waits in the database as a slow one would. Meanwhile the running service's rounds go
on at their interval, and another check's findings (a flap written while the fit waits) arrive;
link health's rules are not evaluated until the first fit ends, then its finding is there with
the fit's own time. Stopping the service while a fit waits cancels it: its query leaves the database.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from analyzer.service import AnalyzerService
from config.model import Config
from fabric.model import FabricParams
from fabric.topology import build_aipod
from store.dom import DomSample, write_dom
from store.records import LinkEvent

FABRIC = build_aipod(FabricParams(gpus=128, radix=16))
LEAF = "lf-g1-r1"
PORT = next(p.name for p in FABRIC.ports(LEAF) if p.peer is not None and p.direction == "down")
FLAPPING = ("lf-g1-r2", "swp65")
CONFIG = Config.model_validate(
    {"analyzer": {"interval_s": 0.3, "link_health_interval_s": 60.0, "leader_election": False}}
)


async def _degrading(pool: asyncpg.Pool, now: datetime) -> None:
    """6 h of DOM every 10 min up to ``now``, rx falling 1 dB/h to -8 dBm: 1 h to the module's -9 dBm."""
    t0 = now - timedelta(hours=6)
    rows = [
        DomSample(t0 + timedelta(minutes=10 * i), LEAF, PORT, "xcvr", -2.0 - i / 6, rx_low_critical_dbm=-9.0)
        for i in range(37)
    ]
    async with pool.acquire() as conn:
        await write_dom(conn, rows)


async def _flaps(pool: asyncpg.Pool) -> None:
    now = datetime.now(UTC)
    events = []
    for k in range(5):
        t = now - timedelta(seconds=40 * k + 20)
        events += [LinkEvent(t, *FLAPPING, "up", "down"), LinkEvent(t + timedelta(seconds=5), *FLAPPING, "down", "up")]
    async with pool.acquire() as conn:
        await conn.copy_records_to_table("link_events", records=events, columns=LinkEvent._fields)


@asynccontextmanager
async def _locked(pool: asyncpg.Pool) -> AsyncIterator[asyncpg.Connection]:
    """``transceiver_dom`` locked by another session until the block ends: the fit's read waits."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("LOCK TABLE transceiver_dom IN ACCESS EXCLUSIVE MODE")
        yield conn


async def _until(what: Callable[[], Any], timeout_s: float = 60.0) -> None:
    for _ in range(int(timeout_s / 0.05)):  # polls what the service's tasks change
        if what():
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"not within {timeout_s} s")


async def _waiting_fits(holder: asyncpg.Connection) -> int:
    """Sessions waiting for the lock ``holder`` holds on ``transceiver_dom`` (the fit's queries)."""
    return int(
        await holder.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))"
        )
    )


def _rules(service: AnalyzerService) -> set[str]:
    report = service.last_report or {"checks": {}}
    return {f["rule"] for check in report["checks"].values() for f in check["findings"]}


async def test_rounds_keep_their_cadence_while_a_slow_fit_runs_beside_them(pool: asyncpg.Pool) -> None:
    service = AnalyzerService(CONFIG, FABRIC, pool)
    await _degrading(pool, datetime.now(UTC))
    stop = asyncio.Event()
    async with _locked(pool) as holder:
        runner = asyncio.create_task(service.run(stop))
        try:
            kept = service.kept["check_link_health"]
            await _until(lambda: service.rounds >= 3)
            assert await _waiting_fits(holder) == 1  # the one fit waits in the database, not a round
            await _flaps(pool)
            seen = service.rounds
            await _until(lambda: "link_flapping" in _rules(service))  # another check's finding arrives
            await _until(lambda: service.rounds >= seen + 5)
            # the fit still waits, the rounds went on without it, and started no second one
            assert kept.fitting and kept.at is None and await _waiting_fits(holder) == 1
            assert "link_degrading" not in _rules(service)
            started = kept.tried
        except BaseException:
            stop.set()
            await runner
            raise
    try:
        await _until(lambda: "link_degrading" in _rules(service))  # the lock is gone: the fit ended
        assert (kept.at, kept.fitting) == (started, False)
        (found,) = kept.findings
        assert found.key == f"{LEAF}:{PORT}" and found.observed_at == started  # the fit's own time
        assert kept.fit_s is not None and kept.fit_s > 0
    finally:
        stop.set()
        async with asyncio.timeout(30):
            await runner


async def test_stopping_the_service_cancels_a_fit_in_progress(pool: asyncpg.Pool) -> None:
    service = AnalyzerService(CONFIG, FABRIC, pool)
    await _degrading(pool, datetime.now(UTC))
    stop = asyncio.Event()
    async with _locked(pool) as holder:
        runner = asyncio.create_task(service.run(stop))
        try:
            await _until(lambda: service.rounds >= 2)
            assert await _waiting_fits(holder) == 1
        finally:
            stop.set()
            async with asyncio.timeout(30):
                await runner  # returns with the fit still waiting for the lock
        kept = service.kept["check_link_health"]
        assert not kept.fitting and kept.at is None  # cancelled: nothing kept
        for _ in range(600):  # its query leaves the database (asyncpg cancels it)
            if not await _waiting_fits(holder):
                break
            await asyncio.sleep(0.05)
        assert await _waiting_fits(holder) == 0
    assert service.fits is None
