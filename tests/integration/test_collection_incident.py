"""A monitoring failure is never a fabric failure: the collector frozen (SIGSTOP) for three
intervals past the confirmation wait, then killed (SIGKILL) and replaced, then the database
restarted under it, while the analyzer runs and a signed receiver counts what it is sent.

Real processes (``fabricmon sim``, ``fabricmon collect``), a real TimescaleDB cluster of the test's
own (restarted mid-stream), the real analyzer service and webhook sender. After every disruption:
no drain and no checkpoint was delivered, every delivery was about one ``collection`` incident,
and once collection has recovered no switch is called stale.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from analyzer.service import AnalyzerService, confirm_s
from config.model import Config
from fabric.model import Fabric
from store.db import Pool, create_pool
from store.inventory import ensure_fabric
from store.migrate import migrate
from store.pgserver import EmbeddedStore
from tests.integration.test_collector_heartbeats import FABRIC, INTERVAL_S, Collector, sim_config, start_collector
from tests.support.receiver import Got, receiver
from tests.support.waiting import until

pytestmark = pytest.mark.asyncio(loop_scope="function")
__all__ = ["sim_config", "start_collector"]  # fixtures used here, defined beside the heartbeat tests

STALE_S = 3 * INTERVAL_S  # stale_intervals (3) x the sampling interval


def _config(sim: dict[str, Any], dsn: str, url: str, tmp: Path) -> Config:
    data = dict(sim)
    data["collector"] = {"gnmi_interval_s": INTERVAL_S, "snmp_interval_s": INTERVAL_S}
    data["database"] = {"dsn": dsn, "writer": {"flush_interval_s": 0.2, "spool_dir": str(tmp / "analyzer-spool")}}
    data["analyzer"] = {"interval_s": 1.0, "resolve_hold_down_s": 2.0, "thresholds": {"fatal_outage_s": 3.0}}
    data["alerts"] = {
        "webhooks": [{"url": url, "secret": "s3cret", "timeout_s": 2, "backoff_initial_s": 0.2, "backoff_max_s": 1}]
    }
    return Config.model_validate(data)


def _status(service: AnalyzerService) -> str:
    return str((service.last_report or {}).get("status"))


def _report(service: AnalyzerService) -> str:
    r = service.last_report or {}
    return f"{r.get('status')}: {[(i['rule'], i['summary']) for i in r.get('incidents', [])]}"


def _judge(phase: str, sent: list[dict[str, Any]]) -> None:
    """What a disruption may have sent: only one collection incident, never an action."""
    acted = [(g["alert"]["rule"], g["recommended_action"]) for g in sent if g["recommended_action"] != "observe"]
    assert not acted, f"{phase}: a scheduler was told to act on our own failure: {acted}"
    rules = {g["alert"]["rule"] for g in sent}
    assert rules <= {"collection"}, f"{phase}: {[(g['alert']['rule'], g['alert']['summary']) for g in sent]}"
    assert len({g["alert"]["fingerprint"] for g in sent}) <= 1, f"{phase}: more than one incident"


async def _prepare(dsn: str, fabric: Fabric) -> Pool:
    pool = await create_pool(dsn)
    async with pool.acquire() as conn:
        await migrate(conn)
        await ensure_fabric(conn, fabric)
    return pool


async def test_frozen_killed_and_database_restarted_collection_never_drains(
    private_store: EmbeddedStore,
    sim_config: dict[str, Any],
    start_collector: Callable[[str], Collector],
    tmp_path: Path,
) -> None:
    dsn = private_store.dsn()
    pool = await _prepare(dsn, FABRIC)
    async with receiver() as (url, got):
        config = _config(sim_config, dsn, url, tmp_path)
        service = AnalyzerService(config, FABRIC, pool)
        stop = asyncio.Event()
        task = asyncio.create_task(service.run(stop))
        try:
            await _phases(private_store, start_collector, service, got)
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)
            await pool.close()


async def _phases(
    store: EmbeddedStore, start_collector: Callable[[str], Collector], service: AnalyzerService, got: Got
) -> None:
    collector = start_collector(store.dsn())
    await until(lambda: _status(service) == "healthy" and service.rounds > 6, 60, lambda: _report(service))
    assert got.items == [], [(g["alert"]["rule"], g["alert"]["summary"]) for g in got.items]

    # 1. Frozen for three sampling intervals past the staleness limit and the confirmation wait
    # (a collection incident waits it, as every observe-only one: a blindness that passes pages no one).
    held_s = confirm_s(service.config)
    start = len(got.items)
    collector.proc.send_signal(signal.SIGSTOP)
    await asyncio.sleep(STALE_S + held_s + 3 * INTERVAL_S)
    frozen = _report(service)
    collector.proc.send_signal(signal.SIGCONT)
    await until(lambda: _status(service) == "healthy", 40, lambda: _report(service))
    await asyncio.sleep(3.0)  # past the hold-down: the collection incident resolves, nothing else opens
    sent = got.since(start)
    _judge("frozen", sent)
    assert {g["event"] for g in sent} == {"alert.firing", "alert.resolved"}, (frozen, sent)
    assert "collection" in frozen and "critical" in frozen, frozen  # the verdict said so while it lasted

    # 2. Killed, then a new collector process takes over its switches.
    start = len(got.items)
    collector.proc.send_signal(signal.SIGKILL)
    collector.proc.wait(timeout=10)
    await asyncio.sleep(STALE_S + held_s + 2 * INTERVAL_S)
    killed = _report(service)
    replacement = start_collector(store.dsn())
    await until(lambda: _status(service) == "healthy", 60, lambda: _report(service))
    await asyncio.sleep(3.0)
    _judge("killed", got.since(start))
    assert "collection" in killed, killed

    # 3. The database restarted mid-stream: the collector spools, then replays.
    start = len(got.items)
    store.stop()
    await asyncio.sleep(4.0)
    store.start()
    await until(lambda: _status(service) == "healthy", 60, lambda: _report(service))
    await asyncio.sleep(3 * STALE_S)  # no stale alarm may follow the recovery
    _judge("database restart", got.since(start))
    report = service.last_report or {}
    assert report.get("status") == "healthy" and not report["checks"]["collection"]["findings"], _report(service)
    replacement.stop()
