"""Link health end to end on a real TimescaleDB (issue 26): the simulator's optics faults, read as
OpenConfig leaves through the collector's decoder into ``transceiver_dom``/``port_fec``, judged by
``link_health``, turned into a ``checkpoint`` incident delivered to a signed webhook, and a
``drain`` only once the link actually fails. Benign faults (a dirty connector, a FEC burst) are
never a finding; a module without thresholds is judged against the configured ones; a port
without transceiver data is not a finding.

Time is the simulator's stepped clock (10 s per round); rates are per hour and large (36 dB/h,
36 mA/h) so a degradation reaches failure within minutes of simulated time, and the trend
window is 5 minutes (30 samples) instead of 6 hours, the horizon an hour instead of a day. The
simulated DOM wobbles (±0.05 dB, ±0.02 mA) on every port, so every healthy port is a chance for
a false finding.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from analyzer.config import ThresholdsConfig
from analyzer.context import CheckContext
from analyzer.link_health import LinkLimits, check_link_health, link_health
from analyzer.service import AnalyzerService
from collector.pipeline import Pipeline
from config.model import Config
from fabric.model import Endpoint, FabricParams
from fabric.topology import build_aipod
from simulator.fabric_state import FabricState
from simulator.feed import OpticsFeed, feed
from store.config import WriterConfig
from store.db import Pool, create_pool
from store.dom import DomSample, write_dom
from store.inventory import ensure_fabric
from store.jobs import Job, save_job
from store.migrate import migrate
from tests.support.receiver import Got, receiver

S = 1_000_000_000
FABRIC = build_aipod(FabricParams(gpus=128, radix=16))
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
LEAF = "lf-g1-r1"
DOWN = [p for p in FABRIC.ports(LEAF) if p.peer is not None and p.direction == "down"]
UP = [p for p in FABRIC.ports(LEAF) if p.peer is not None and p.direction == "up"]
# the trend window is 30 samples (as 6 h of 60 s DOM is 60 buckets), the horizon 12 windows
THRESHOLDS = {"link_window_s": 300.0, "link_flr_window_s": 30.0, "link_horizon_s": 3600.0, "stale_intervals": 5.0}


@dataclass
class Lab:
    pool: Pool
    state: FabricState
    pipe: Pipeline
    optics: OpticsFeed
    clock: list[int]

    async def step(self, n: int = 1) -> None:
        for _ in range(n):
            self.clock[0] += 10 * S
            self.state.tick(self.clock[0])
            await feed(self.state, self.pipe, self.clock[0], lldp=False)
            async with self.pool.acquire() as conn:
                await self.optics.feed(conn, self.clock[0])
        for w in self.pipe.writers:
            await w.flush()

    @property
    def now(self) -> datetime:
        return datetime.fromtimestamp(self.clock[0] / S, tz=UTC)

    def oper(self, switch: str, port: str) -> bool:
        return next(p for p in self.state.ports(switch, self.clock[0]) if p.name == port).oper_up

    async def degrading(self, **thresholds: Any) -> list[Any]:
        ctx = CheckContext(FABRIC, ThresholdsConfig(**{**THRESHOLDS, **thresholds}), self.now, 10.0, 30.0)
        async with self.pool.acquire() as conn:
            return await check_link_health(conn, ctx)


@pytest.fixture
async def lab(fresh_db: str) -> AsyncIterator[Lab]:
    pool = await create_pool(fresh_db)
    async with pool.acquire() as conn:
        await migrate(conn)
        await ensure_fabric(conn, FABRIC)
    clock = [int(T0.timestamp()) * S]
    state = FabricState(FABRIC, seed=5, clock=lambda: clock[0])
    pipe = Pipeline(pool, FABRIC, WriterConfig(batch_rows=5000, flush_interval_s=0.05))
    pipe.start()
    try:
        yield Lab(pool, state, pipe, OpticsFeed(state), clock)
    finally:
        await pipe.close()
        await pool.close()


@contextlib.asynccontextmanager
async def analyzing(lab: Lab, url: str) -> AsyncIterator[AnalyzerService]:
    config = Config.model_validate(
        {
            "collector": {"gnmi_interval_s": 10.0, "snmp_interval_s": 10.0},
            "analyzer": {"interval_s": 10.0, "resolve_hold_down_s": 0.0, "thresholds": THRESHOLDS},
            "alerts": {"webhooks": [{"url": url, "secret": "s3cret", "timeout_s": 2, "backoff_initial_s": 0.2}]},
        }
    )
    service = AnalyzerService(config, FABRIC, lab.pool)
    sender = asyncio.create_task(service.sender.run())
    try:
        yield service
    finally:
        sender.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sender


async def delivered(got: Got, n: int, within_s: float = 20.0) -> list[dict[str, Any]]:
    for _ in range(int(within_s * 10)):
        if len(got.items) >= n:
            return got.items
        await asyncio.sleep(0.1)
    raise AssertionError(f"{len(got.items)} deliveries, wanted {n}: {got.items}")


@pytest.mark.slow
async def test_optic_degrade_checkpoints_the_job_then_drains_once_the_link_fails(lab: Lab) -> None:
    port = DOWN[0].name
    peer = FABRIC.peer(Endpoint(LEAF, port))
    assert peer is not None
    host = peer.node
    await lab.step(3)
    await save_job(lab.pool, Job("train-1", (host,), T0, 10.0))
    lab.state.apply({"kind": "optic_degrade", "switch": LEAF, "port": port, "db_per_hour": 36.0})
    await lab.step(30)  # five minutes: 3 dB lost, about 8 min to go
    async with receiver() as (url, got), analyzing(lab, url) as service:
        await service.evaluate_once(lab.now, confirm=False)
        items = await delivered(got, 1)
        assert len(items) == 1, [(g["alert"]["rule"], g["alert"]["summary"]) for g in items]
        (first,) = items
        alert = first["alert"]
        assert first["event"] == "alert.firing" and alert["rule"] == "link_degrading"
        assert first["recommended_action"] == "checkpoint" and first["action_hosts"] == [host]
        assert [j["id"] for j in first["jobs"]] == ["train-1"]
        assert f"{LEAF}:{port}" in alert["summary"]
        ttf = alert["details"]["time_to_failure_s"]
        optic = lab.state.optics.of(LEAF, port)
        fails_in = (optic.failure_at(lab.clock[0]) or 0) / S - lab.clock[0] / S
        assert 0.6 * fails_in < ttf < 1.4 * fails_in  # the estimate against the simulator's own truth
        assert ttf >= 300  # warned minutes ahead (hours, at real rates)
        assert alert["details"]["confidence"] >= 0.6
        evidence = alert["details"]["evidence"]
        assert evidence["rx_low_critical_dbm"] == -10.0 and evidence["thresholds_from"] == "module"
        assert evidence["rx_power_dbm"] == pytest.approx(optic.rx0 - optic.loss_db(lab.clock[0]), abs=0.06)
        assert evidence["pre_fec_ber"] > 1e-9 and evidence["rx_power_slope_per_hour"] == pytest.approx(-36, rel=0.05)
        assert "min" in alert["reason"] and "sure" in alert["reason"]
        # still up: no drain yet, and the next rounds repeat nothing
        await lab.step(3)
        await service.evaluate_once(lab.now, confirm=False)
        await asyncio.sleep(0.5)
        assert len(got.items) == 1 and lab.oper(LEAF, port)
        # the link dies: the existing outage logic drains the host, in the same incident
        while lab.oper(LEAF, port):
            await lab.step(6)
        await lab.step(2)
        await service.evaluate_once(lab.now, confirm=False)
        items = await delivered(got, 2)
        drain = items[-1]
        assert drain["alert"]["id"] == alert["id"]
        assert drain["recommended_action"] == "drain" and drain["action_hosts"] == [host]


async def test_laser_aging_is_found_on_its_bias_trend(lab: Lab) -> None:
    port = DOWN[1].name
    await lab.step(2)
    lab.state.apply({"kind": "laser_aging", "switch": LEAF, "port": port, "ma_per_hour": 36.0})
    await lab.step(30)
    (f,) = await lab.degrading()
    assert f.key == f"{LEAF}:{port}" and f.details["basis"] == "laser_bias"
    left = (13.0 - lab.state.optics.of(LEAF, port).bias_ma(lab.clock[0])) / 0.01  # s to the module's critical
    assert f.details["time_to_failure_s"] == pytest.approx(left, rel=0.2)


@pytest.mark.slow
async def test_benign_faults_are_never_a_finding(lab: Lab) -> None:
    await lab.step(2)
    lab.state.apply({"kind": "dirty_connector", "switch": LEAF, "port": DOWN[2].name, "loss_db": 2.0})
    lab.state.apply({"kind": "fec_burst", "switch": LEAF, "port": UP[0].name, "duration_s": 20.0})
    for _ in range(12):
        await lab.step(3)
        assert await lab.degrading() == []
    async with lab.pool.acquire() as conn:
        health = {
            (h.switch, h.port): h
            for h in await link_health(conn, lab.now, LinkLimits.of(ThresholdsConfig(**THRESHOLDS)))
        }
    dirty = health[(LEAF, DOWN[2].name)]
    assert dirty.time_to_failure_s is None and dirty.evidence["rx_power_dbm"] < -3.0  # seen, and judged stable
    assert all(lab.oper(LEAF, p.name) for p in DOWN[2:3] + UP[:1])


async def test_a_module_without_thresholds_uses_the_configured_ones_and_no_data_is_no_finding(lab: Lab) -> None:
    now = T0 + timedelta(hours=6)
    rows = []
    for i in range(37):  # every 10 min for 6 h, rx falling 1 dB/h from -2 dBm
        at = T0 + timedelta(minutes=10 * i)
        rx = -2.0 - i / 6
        rows.append(DomSample(at, LEAF, DOWN[0].name, "xcvr-a", rx))  # no thresholds of its own
        rows.append(DomSample(at, LEAF, DOWN[1].name, "xcvr-b", rx, rx_low_warning_dbm=-5.0, rx_low_critical_dbm=-9.0))
    async with lab.pool.acquire() as conn:
        await write_dom(conn, rows)
    thresholds = {"link_window_s": 6 * 3600.0, "rx_low_critical_dbm": -12.0}
    ctx = CheckContext(FABRIC, ThresholdsConfig(**thresholds), now, 10.0, 30.0)
    async with lab.pool.acquire() as conn:
        found = {f.key: f for f in await check_link_health(conn, ctx)}
    assert set(found) == {f"{LEAF}:{DOWN[0].name}", f"{LEAF}:{DOWN[1].name}"}  # no other port: no data, no finding
    configured = found[f"{LEAF}:{DOWN[0].name}"].details
    module = found[f"{LEAF}:{DOWN[1].name}"].details
    # at -8 dBm now: 4 dB to the configured -12, 1 dB to the module's own -9, at 1 dB/h
    assert configured["evidence"]["thresholds_from"] == "configured"
    assert configured["time_to_failure_s"] == pytest.approx(4 * 3600, rel=0.01)
    assert module["evidence"]["thresholds_from"] == "module"
    assert module["time_to_failure_s"] == pytest.approx(3600, rel=0.01)
