"""Simulator → collectors (gNMI and SNMP) → TimescaleDB, all real: values, link events, outages."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from collector.config import CollectorConfig
from collector.pipeline import Pipeline
from collector.runner import CollectorService
from collector.snmp import SnmpCollector
from collector.targets import SwitchTarget
from config.model import Config
from fabric.model import FabricParams
from fabric.topology import build_aipod
from simulator.fabric_state import FabricState
from simulator.runner import RunningSim, SimOptions, start_sim, stop_sim
from simulator.sim_config import sim_config
from store.db import Pool, create_pool
from store.inventory import ensure_fabric
from store.migrate import migrate
from store.pgserver import EmbeddedStore
from store.records import from_int8
from tests.integration.test_collector_snmp_device import snmpsim as snmpsim_fixture
from tests.support.collecting import polled, running_collector
from tests.support.configs import config
from tests.support.ledger import assert_complete, settle
from tests.support.sim_process import started_sim

# A loop of its own per test: simulator, collectors and analyzer share it, and tasks other suites
# left on the session loop must not steal their time.
pytestmark = pytest.mark.asyncio(loop_scope="function")

PARAMS = FabricParams(gpus=512)
snmpsim = snmpsim_fixture  # the recorded Arista, served by snmpsim (a module-scoped fixture)


@dataclass
class Rig:
    sim: RunningSim
    state: FabricState
    config: Config
    pool: Pool
    spool: Path


def _config(sim: RunningSim, spool: Path) -> Config:
    addr = sim.addresses(SimOptions(gnmi="127.0.0.1:0", snmp="127.0.0.1:0", control=None))
    data: dict[str, Any] = sim_config(
        gnmi_address=addr["gnmi"], snmp_address=addr["snmp"], params=PARAMS, gnmi_interval_s=1.0, snmp_interval_s=1.0
    )
    return config(data, spool=spool)


@contextlib.asynccontextmanager
async def rig(dsn: str, tmp_path: Path) -> AsyncIterator[Rig]:
    sim = await start_sim(
        SimOptions(
            params=PARAMS, gnmi="127.0.0.1:0", snmp="127.0.0.1:0", control=None, seed=5, snmp_v3=False, ledger=True
        )
    )
    pool = await create_pool(dsn)
    try:
        assert sim.state is not None and sim.fabric is not None
        async with pool.acquire() as conn:
            await migrate(conn)
            await ensure_fabric(conn, sim.fabric)
        yield Rig(sim, sim.state, _config(sim, tmp_path / "spool"), pool, tmp_path / "spool")
    finally:
        await pool.close()
        await stop_sim(sim)


def collecting(r: Rig) -> contextlib.AbstractAsyncContextManager[CollectorService]:
    assert r.sim.fabric is not None
    return running_collector(r.config, r.sim.fabric, r.pool)


DEBUG = "SELECT time, switch, port, old_status, new_status, down_s, source FROM link_events ORDER BY time"


async def until(pool: Pool, sql: str, within_s: float) -> None:
    """Wait for a condition on the database (collection keeps its own pace on a loaded machine)."""
    for _ in range(int(within_s / 0.25)):
        if await pool.fetchval(sql):
            return
        await asyncio.sleep(0.25)
    raise AssertionError(f"not within {within_s}s: {sql}: {[dict(r) for r in await pool.fetch(DEBUG)]}")


async def test_both_protocols_land_in_the_hypertables(fresh_db: str, tmp_path: Path) -> None:
    async with rig(fresh_db, tmp_path) as r:
        async with collecting(r) as service:
            # Wait for the rows read below: a sample's ports come in several Notifications, so a
            # stop between two of them leaves swp65 a sample behind swp1 (CI saw 2 rows, 7b594a0).
            await until(
                r.pool,
                "SELECT count(DISTINCT switch) = 20 AND bool_and(n >= 3) FROM (SELECT switch, "
                "count(*) AS n FROM port_counters WHERE port = 'swp1' GROUP BY switch) x",
                40,
            )
            await until(
                r.pool,
                "SELECT count(*) >= 3 FROM port_counters WHERE switch = 'lf-g1-r2' AND port = 'swp65'",
                40,
            )
        assert set(service.collectors) == {"gnmi", "snmp"}
        # Both counter tables went as binary COPY streams encoded in C (store/copy_binary.py), every batch.
        written = {w.table: w.stats for w in service.pipeline.writers}
        for table in ("port_counters", "pfc_counters"):
            stats = written[table]
            assert (stats.binary_batches, stats.asyncpg_batches) == (stats.batches, 0) and stats.batches, stats
        per_switch = {
            row["switch"]: row["n"]
            for row in await r.pool.fetch("SELECT switch, count(DISTINCT port) AS n FROM port_counters GROUP BY switch")
        }
        assert set(per_switch) == set(r.state.switch_names())
        assert all(n == 128 for n in per_switch.values())
        # gNMI samples carry the switch's own timestamp: the stored counters are the simulator's, exactly.
        rows = await r.pool.fetch(
            "SELECT time, in_octets, out_bps, speed_bps, oper_status FROM port_counters "
            "WHERE switch = 'lf-g1-r2' AND port = 'swp65' ORDER BY time"
        )
        assert len(rows) >= 3
        for row in rows:
            t_ns = int(row["time"].timestamp() * 1e6) * 1000
            expected = {p.name: p for p in r.state.ports("lf-g1-r2", t_ns)}["swp65"].in_octets
            assert abs(from_int8(row["in_octets"]) - expected) <= 400e9 / 8 * 1e-6  # µs rounding of the time
            assert row["speed_bps"] == 400 * 10**9 and row["oper_status"] == 1
        assert any(row["out_bps"] and 1e9 < row["out_bps"] < 400e9 for row in rows)
        # SNMP samples: HC counters between the simulator's values just before and after the poll.
        snmp = await r.pool.fetch(
            "SELECT time, in_octets FROM port_counters WHERE switch='sp-r1-1' AND port='swp1' ORDER BY time"
        )
        assert len(snmp) >= 3
        for row in snmp:
            t_ns = int(row["time"].timestamp() * 1e9)
            lo = {p.name: p for p in r.state.ports("sp-r1-1", t_ns - 2 * 10**9)}["swp1"].in_octets
            hi = {p.name: p for p in r.state.ports("sp-r1-1", t_ns)}["swp1"].in_octets
            assert lo <= from_int8(row["in_octets"]) <= hi
        assert await r.pool.fetchval("SELECT count(*) FROM lldp_neighbors WHERE switch = 'lf-g1-r1'") == 128
        assert await r.pool.fetchval("SELECT count(*) FROM pfc_counters WHERE switch = 'lf-g1-r1'") > 0
        reach = await r.pool.fetchval("SELECT count(DISTINCT switch) FROM switch_reachability WHERE reachable")
        assert reach == 20


async def test_a_flap_becomes_link_events_with_their_down_time(migrated_db: str, tmp_path: Path) -> None:
    # The simulator is a process of its own here, as a switch is: sharing this test's event loop on
    # a busy 2-core machine, it sent a 3 s outage's ON_CHANGE notifications so late that the port
    # was back up by then, and only carrier-transitions told of the flap.
    args = ["--gpus", "512", "--gnmi", "127.0.0.1:0", "--snmp", "127.0.0.1:0", "--control", "127.0.0.1:0"]
    with started_sim(tmp_path, args, 20) as sim:
        cfg = config(sim.config, spool=tmp_path / "spool", collector={"gnmi_interval_s": 1.0, "snmp_interval_s": 1.0})
        fabric = build_aipod(PARAMS)
        pool = await create_pool(migrated_db)
        try:
            async with pool.acquire() as conn:
                await migrate(conn)
                await ensure_fabric(conn, fabric)
            async with running_collector(cfg, fabric, pool):
                # Both ends collected first: a flap that ends before the leaf's stream has started
                # is one its first sample reads as up, with no transition to record.
                for switch, port in (("sp-r4-1", "swp1"), ("lf-g1-r4", "swp65")):
                    await until(
                        pool,
                        f"SELECT count(*) >= 2 FROM port_counters WHERE switch = '{switch}' AND port = '{port}'",
                        60,
                    )
                # 3 s down, 3 s up, twice: four transitions, each state outlasting a 1 s sample
                sim.control.apply({"kind": "link_flap", "switch": "lf-g1-r4", "period_s": 6.0, "count": 2})
                await until(
                    pool,
                    "SELECT count(*) >= 4 FROM link_events "
                    "WHERE switch = 'lf-g1-r4' AND port = 'swp65' AND source = 'oper-status'",
                    40,
                )
                # the spine end, polled over SNMP every second, sees the flaps too
                await until(pool, "SELECT count(*) >= 2 FROM link_events WHERE switch='sp-r4-1' AND port='swp1'", 20)
            leaf = await pool.fetch(
                "SELECT time, old_status, new_status, down_s FROM link_events "
                "WHERE switch='lf-g1-r4' AND port='swp65' AND source='oper-status' ORDER BY time"
            )
        finally:
            await pool.close()
    # Each transition the stream reported, in order; each outage is the time between the
    # notifications that saw it go down and come back: about half the 6 s period, never two flaps.
    pairs = [(e["old_status"], e["new_status"]) for e in leaf]
    assert pairs == [("up", "down"), ("down", "up")] * 2, [dict(e) for e in leaf]
    for down, up in zip(leaf[0::2], leaf[1::2], strict=True):
        assert up["down_s"] == pytest.approx((up["time"] - down["time"]).total_seconds(), abs=1e-3)
        assert 0 < up["down_s"] < 6.0


async def _outage(private_store: EmbeddedStore, tmp_path: Path, outage_s: float) -> None:
    async with rig(private_store.dsn(), tmp_path) as r:
        assert r.sim.ledger is not None
        async with collecting(r) as service:
            await until(r.pool, "SELECT count(*) >= 2 FROM port_counters WHERE switch='lf-g1-r1' AND port='swp1'", 40)
            await asyncio.to_thread(private_store.stop)
            await asyncio.sleep(outage_s)
            spooled = sum(len(w.spool) for w in service.pipeline.writers if w.spool is not None)
            assert spooled > 0
            await asyncio.to_thread(private_store.start)
            restarted = time.time()
            await asyncio.sleep(6)  # the spool replays, and collection goes on
            snap = r.sim.ledger.freeze()  # every gNMI sample the simulator sent, up to now
            report = await settle(r.pool, snap, interval_s=1.0, timeout_s=60, switches=snap.switches())
        rows = await r.pool.fetch(
            "SELECT time FROM port_counters WHERE switch='lf-g1-r1' AND port='swp1' ORDER BY time"
        )
        times = [row["time"].timestamp() for row in rows]
        gaps = [b - a for a, b in itertools.pairwise(times)]
        # Every sample sent is stored once, per switch, port and sample time: none lost to the
        # outage. (The simulator shares this event loop with the spool's replay, so it samples
        # less often than every second while it replays; the ledger counts what it did send.)
        assert_complete(report, max_gap_intervals=None)
        ports, tracked = service.pipeline.ports_writer.stats, service.pipeline.tracker.stats
        # every reading is a row, but a status-only one that changed nothing (a resubscription's dump)
        assert service.pipeline.stats.readings == ports.rows_written + ports.rows_duplicate + tracked.state_only, (
            tracked,
            service.pipeline.stats,
        )
        assert ports.rows_rejected == 0
        for w in service.pipeline.writers:
            assert w.spool is None or (len(w.spool) == 0 and w.spool.stats.rows_dropped == 0)
        # And the stream went on across it: samples after the restart, and no hole as long as the
        # 10 intervals after which a silent stream is dropped and opened again (a stall would be
        # one). Shorter holes are the simulator's: it shares this event loop with the replay of a
        # minute of spooled rows (measured up to 5.7 s).
        assert sum(t > restarted for t in times) >= 3, "no sample after the restart"
        assert max(gaps) < 10.0, "the stream stalled across the outage"


@pytest.mark.slow  # restarts PostgreSQL mid-stream (timing-heavy); test_writer_outage runs by default
async def test_database_restart_mid_stream_loses_no_sample(private_store: EmbeddedStore, tmp_path: Path) -> None:
    await _outage(private_store, tmp_path, outage_s=5)


@pytest.mark.slow
async def test_database_down_for_a_minute_mid_stream(private_store: EmbeddedStore, tmp_path: Path) -> None:
    await _outage(private_store, tmp_path, outage_s=60)


async def test_a_real_switch_lands_in_the_tables_with_unknown_ports_flagged(
    migrated_db: str,
    snmpsim: str,
    tmp_path: Path,
) -> None:
    from fabric.topology import build_aipod

    fabric = build_aipod(FabricParams(gpus=64, radix=16))
    pool = await create_pool(migrated_db)
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
            await ensure_fabric(conn, fabric)
        pipe = Pipeline(pool, fabric)
        pipe.start()
        target = SwitchTarget("arista-7150s", "snmp", snmpsim, community=SecretStr(""), timeout_s=2, retries=1)
        collector = SnmpCollector([target], pipe, CollectorConfig(snmp_interval_s=60), spread_s=0)
        await polled(collector, 1, 15)
        await pipe.close()
        assert await pool.fetchval("SELECT role FROM switches WHERE name='arista-7150s' AND NOT known") == "unknown"
        flagged = {
            r["port"] for r in await pool.fetch("SELECT port FROM ports WHERE switch='arista-7150s' AND NOT known")
        }
        assert {"Ethernet1", "Ethernet52", "Management1"} <= flagged
        octets = await pool.fetchval(
            "SELECT in_octets FROM port_counters WHERE switch='arista-7150s' AND port='Ethernet2'"
        )
        assert from_int8(octets) == 2993597393618
        assert await pool.fetchval("SELECT count(*) FROM pfc_counters WHERE switch='arista-7150s' AND priority=-1") > 0
        nbrs = await pool.fetch("SELECT system_name FROM lldp_neighbors WHERE switch='arista-7150s'")
        assert {n["system_name"] for n in nbrs} == {"ZJ-BP-Bak-Arista"}
    finally:
        await pool.close()
