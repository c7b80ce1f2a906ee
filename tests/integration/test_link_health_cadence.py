"""Link health at its own cadence on a real TimescaleDB (analyzer/cadence.py, issue 26): a round
within ``analyzer.link_health_interval_s`` of the last fit reads nothing (the rows can be gone:
the finding stays, observed when it was fitted); the first round after it reads the tables again.
The analyzer service keeps the cadence across its rounds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg

from analyzer.cadence import cadences
from analyzer.config import AnalyzerConfig
from analyzer.engine import context_for, run_check
from analyzer.link_health import check_link_health
from analyzer.service import AnalyzerService
from config.model import Config
from fabric.model import FabricParams
from fabric.topology import build_aipod
from store.dom import DomSample, write_dom

FABRIC = build_aipod(FabricParams(gpus=128, radix=16))
LEAF = "lf-g1-r1"
PORT = next(p.name for p in FABRIC.ports(LEAF) if p.peer is not None and p.direction == "down")
T0 = datetime(2026, 12, 3, 6, 0, tzinfo=UTC)
NOW = T0 + timedelta(hours=6)
CONFIG = AnalyzerConfig(link_health_interval_s=60.0)


async def _degrading(pool: asyncpg.Pool) -> None:
    """6 h of DOM every 10 min, rx falling 1 dB/h to -8 dBm: 1 h to the module's -9 dBm."""
    rows = [
        DomSample(T0 + timedelta(minutes=10 * i), LEAF, PORT, "xcvr", -2.0 - i / 6, rx_low_critical_dbm=-9.0)
        for i in range(37)
    ]
    async with pool.acquire() as conn:
        await write_dom(conn, rows)


async def test_a_round_within_the_interval_reads_nothing_and_the_next_one_reads_again(pool: asyncpg.Pool) -> None:
    await _degrading(pool)
    kept = cadences(CONFIG)
    async with pool.acquire() as conn:
        (first,) = await run_check(conn, context_for(FABRIC, CONFIG, NOW, 10.0, kept=kept), check_link_health) or []
        assert first.key == f"{LEAF}:{PORT}" and first.observed_at == NOW
        await conn.execute("TRUNCATE transceiver_dom")  # what a fresh read would now see: nothing
        (again,) = (
            await run_check(
                conn, context_for(FABRIC, CONFIG, NOW + timedelta(seconds=50), 10.0, kept=kept), check_link_health
            )
            or []
        )
        assert again == first  # not read: the finding of the fit, with its own observed_at
        after = await run_check(
            conn, context_for(FABRIC, CONFIG, NOW + timedelta(seconds=60), 10.0, kept=kept), check_link_health
        )
        assert after == []  # read again


async def test_the_service_keeps_the_cadence_across_its_rounds(pool: asyncpg.Pool) -> None:
    await _degrading(pool)
    service = AnalyzerService(Config.model_validate({"analyzer": {"link_health_interval_s": 60.0}}), FABRIC, pool)
    await service.evaluate_once(NOW, alerts=False)
    kept = service.kept["check_link_health"]
    assert kept.at == NOW and [f.key for f in kept.findings] == [f"{LEAF}:{PORT}"]
    await service.evaluate_once(NOW + timedelta(seconds=10), alerts=False)
    assert kept.at == NOW  # reused, not fitted again
    await service.evaluate_once(NOW + timedelta(seconds=70), alerts=False)
    assert kept.at == NOW + timedelta(seconds=70)
