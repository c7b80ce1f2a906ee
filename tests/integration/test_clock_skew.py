"""Device clocks on a real TimescaleDB: rows stamped in the future, and switch clocks persisted.

Rows in the future are written for real (the collectors' pipeline, as a collector that trusted a
clock 5 minutes ahead would have stored them); no reader may take them as "now": the API's newest
window, the switch list, and the analyzer's port snapshot all end at the present. The collector's
heartbeat writes what its :class:`~collector.clock.ClockGuard` saw to ``switch_clocks``, and
``/v1/switches/{name}`` shows it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from analyzer.engine import context_for
from analyzer.snapshot import port_snapshot
from api.app import create_app
from collector.clock import ClockGuard
from collector.heartbeat import HeartbeatTask
from collector.pipeline import Pipeline
from collector.records import PortReading
from config.model import Config
from fabric.model import FabricParams
from fabric.topology import build_aipod
from store import clocks
from store.config import WriterConfig
from store.db import Pool
from tests.support.db import migrated_pool

S = 1_000_000_000
FABRIC = build_aipod(FabricParams(gpus=64, radix=16))
CONFIG = Config()
AHEAD = "lf-g1-r1"  # its clock runs 5 minutes ahead
PORTS = ("swp1", "swp2", "swp3", "swp9")
Client = TestClient[web.Request, web.Application]


@pytest.fixture
async def pool(fresh_db: str) -> AsyncIterator[Pool]:
    async with migrated_pool(fresh_db, FABRIC) as pool:
        yield pool


def rounds(switch: str, end_ns: int, *, up: Sequence[bool] = (True, True, True), step_s: int = 10) -> list[PortReading]:
    """Three samples of a few ports, ``step_s`` apart, the last at ``end_ns``: 100 Gb/s in each."""
    out = []
    for k, oper in enumerate(up):
        t = end_ns - (len(up) - 1 - k) * step_s * S
        octets = k * step_s * 125 * 10**8
        for port in PORTS:
            out.append(
                PortReading(switch, port, t, oper_up=oper, speed_bps=400 * 10**9, in_octets=octets, out_octets=octets)
            )
    return out


async def store(pool: Pool, *batches: list[PortReading]) -> None:
    pipe = Pipeline(pool, FABRIC, WriterConfig(flush_interval_s=0.05))
    pipe.start()
    for batch in batches:
        await pipe.put_ports(batch)
    await pipe.close()


async def get_json(client: Client, path: str) -> Any:
    resp = await client.get(path)
    assert resp.status == 200, (path, await resp.text())
    return await resp.json()


async def test_rows_in_the_future_do_not_move_now(pool: Pool) -> None:
    now = time.time_ns()
    await store(pool, rounds("lf-g1-r2", now - S), rounds("sp-r1-1", now - 2 * S), rounds(AHEAD, now + 300 * S))
    newest = await pool.fetchval("SELECT max(time) FROM port_counters")
    assert (newest - datetime.now(UTC)).total_seconds() > 250  # the future rows are really there

    async with TestClient(TestServer(create_app(CONFIG, FABRIC, pool=pool))) as client:
        page = await get_json(client, "/v1/switches/lf-g1-r2/ports")
        assert page["window"]["end"] is not None
        end = datetime.fromisoformat(page["window"]["end"])
        assert end <= datetime.now(UTC)
        ports = {p["name"]: p for p in page["items"] if p["name"] in PORTS}
        assert all(p["last_sample_at"] is not None and p["oper_status"] == "up" for p in ports.values())
        assert ports["swp1"]["in_bps"] == pytest.approx(1e11)
        spine = await get_json(client, "/v1/switches/sp-r1-1/ports")
        assert all(p["in_bps"] == pytest.approx(1e11) for p in spine["items"] if p["name"] in PORTS)
        listed = {s["name"]: s for s in (await get_json(client, "/v1/switches?limit=500"))["items"]}
        assert listed["lf-g1-r2"]["ports_reporting"] == len(PORTS)
        assert listed["sp-r1-1"]["ports_reporting"] == len(PORTS)
        # the switch ahead: nothing of it is "now" yet
        assert listed[AHEAD]["ports_reporting"] == 0 and listed[AHEAD]["last_sample_at"] is None
        for s in listed.values():
            assert s["last_sample_at"] is None or datetime.fromisoformat(s["last_sample_at"]) <= end


async def test_the_analyzer_snapshot_ignores_rows_in_the_future(pool: Pool) -> None:
    now = time.time_ns()
    # up until now; a row 20 s ahead (within the bound the collector lets through) says down
    await store(pool, rounds("lf-g1-r2", now - S), [PortReading("lf-g1-r2", "swp1", now + 20 * S, oper_up=False)])
    at = datetime.fromtimestamp(now / 1e9, tz=UTC)
    ctx = context_for(FABRIC, CONFIG.analyzer, at, CONFIG.collector.gnmi_interval_s)
    async with pool.acquire() as conn:
        snap = await port_snapshot(conn, ctx)
    swp1 = snap[("lf-g1-r2", "swp1")]
    assert swp1.oper_up is True and swp1.last_time <= at
    assert all(p.last_time <= at for p in snap.values())


async def test_the_heartbeat_persists_switch_clocks_for_the_api(pool: Pool) -> None:
    guard = ClockGuard(CONFIG.collector.max_clock_skew_s)
    now = time.time_ns()
    slow: list[PortReading] = []
    for t in (now - 10 * S, now):  # two batches: a change of clock is believed from the second
        batch, ok = rounds(AHEAD, t - 300 * S, step_s=1), rounds("lf-g1-r2", t - S // 2, step_s=1)
        assert guard.correct([*batch, *ok], t) == len(batch)
        assert all(abs(r.time_ns - t) <= 3 * S for r in batch)
        slow += batch
    gone = clocks.SwitchClockRow("ssp-1", "old-host:1", 45.0, True, 9, datetime.now(UTC) - 2 * clocks.PRUNE_AFTER)
    async with pool.acquire() as conn:
        await clocks.upsert(conn, [gone])  # a switch no collector has reported for two days
    pipeline = Pipeline(pool, FABRIC)
    beat = HeartbeatTask(pool, pipeline, switches=lambda: [AHEAD, "lf-g1-r2"], interval_s=10.0, clock=guard)
    assert await beat.beat()

    async with pool.acquire() as conn:
        row = await clocks.fetch(conn, AHEAD)
        assert row is not None and row.collector == beat.collector and row.corrected
        assert row.skew_s == pytest.approx(-300, abs=0.01) and row.replaced == len(slow)
        assert await clocks.fetch(conn, "sp-r1-1") is None
        assert await clocks.fetch(conn, "ssp-1") is None  # pruned by the collector's first beat
    async with TestClient(TestServer(create_app(CONFIG, FABRIC, pool=pool))) as client:
        ahead = await get_json(client, f"/v1/switches/{AHEAD}")
        assert ahead["clock_skew_s"] == pytest.approx(-300, abs=0.01)
        assert ahead["clock_corrected"] is True and ahead["clock_replaced"] == len(slow)
        fine = await get_json(client, "/v1/switches/lf-g1-r2")
        assert fine["clock_skew_s"] == pytest.approx(-0.5) and fine["clock_corrected"] is False
        assert fine["clock_replaced"] == 0
        unseen = await get_json(client, "/v1/switches/sp-r1-1")
        assert (unseen["clock_skew_s"], unseen["clock_corrected"], unseen["clock_replaced"]) == (None, None, None)

    # more readings, the next beat: the row follows the guard
    more = rounds(AHEAD, now - 300 * S + 10 * S, step_s=1)
    guard.correct(more, now + 10 * S)
    assert await beat.beat()
    async with pool.acquire() as conn:
        row = await clocks.fetch(conn, AHEAD)
        assert row is not None and row.replaced == len(slow) + len(more)

    # without the table (migration 011 not applied): the heartbeat row is still written
    await pool.execute("DROP TABLE switch_clocks")
    before = await pool.fetchval("SELECT heartbeat_at FROM collector_heartbeats WHERE collector = $1", beat.collector)
    assert await beat.beat()
    assert beat.stats.clock_errors == 1 and beat.stats.skipped == 0
    after = await pool.fetchval("SELECT heartbeat_at FROM collector_heartbeats WHERE collector = $1", beat.collector)
    assert after > before
