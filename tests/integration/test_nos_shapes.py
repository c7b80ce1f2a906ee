"""Every NOS shape of the simulator, collected by ``fabricmon collect`` into TimescaleDB.

For each ``--nos`` shape the simulator serves a small fabric over gNMI, the in-process
CollectorService (with the profiles ``--write-config`` picks) streams it at 1 s into a fresh
database, and the stored rates are checked against the simulator's ground truth: each row's
``in_bps``/``out_bps`` is the octet delta the simulated port really had between that row's time
and the previous counter row's time (within 1 %), no row without counters unless it changes the
oper status (status heartbeats and PFC-only notifications are not rows), and both ends of every
switch-to-switch link agree (each end's rate matches what the other end's counters did over the
same interval).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from analyzer.service import assess
from collector.clock import CORRECTED_TOLERANCE_S
from collector.runner import CollectorService
from config.model import Config
from fabric.model import Endpoint, FabricParams, LinkKind
from simulator.fabric_state import FabricState
from simulator.nos import Devices, Nos, parse_nos
from simulator.runner import RunningSim, SimOptions, start_sim, stop_sim
from simulator.sim_config import sim_config
from simulator.view import PortCounters
from store.db import Pool, create_pool
from store.inventory import ensure_fabric
from store.migrate import migrate
from tests.support.collecting import running_collector
from tests.support.configs import config

pytestmark = pytest.mark.asyncio(loop_scope="function")

PARAMS = FabricParams(gpus=64, radix=16)
ROWS = 5  # counter rows per switch port before the checks (at 1 s)
TOLERANCE = 0.01


@dataclass
class Rig:
    sim: RunningSim
    state: FabricState
    devices: Devices
    config: Config
    pool: Pool


@contextlib.asynccontextmanager
async def rig(dsn: str, tmp_path: Path, nos: str, **options: Any) -> AsyncIterator[Rig]:
    sim = await start_sim(
        SimOptions(
            params=PARAMS,
            gnmi="127.0.0.1:0",
            snmp="127.0.0.1:0",
            control=None,
            seed=3,
            snmp_v3=False,
            nos=parse_nos(nos),
            **options,
        )
    )
    pool = await create_pool(dsn)
    try:
        assert sim.state is not None and sim.fabric is not None and sim.devices is not None
        async with pool.acquire() as conn:
            await migrate(conn)
            await ensure_fabric(conn, sim.fabric)
        addr = sim.addresses(SimOptions(gnmi="127.0.0.1:0", snmp="127.0.0.1:0", control=None))
        data: dict[str, Any] = sim_config(
            gnmi_address=addr["gnmi"],
            snmp_address=addr["snmp"],
            protocols="gnmi",
            params=PARAMS,
            gnmi_interval_s=1.0,
            snmp_interval_s=1.0,
            nos=sim.devices.assignment(),
        )
        yield Rig(sim, sim.state, sim.devices, config(data, spool=tmp_path / "spool"), pool)
    finally:
        await pool.close()
        await stop_sim(sim)


def collecting(r: Rig) -> contextlib.AbstractAsyncContextManager[CollectorService]:
    assert r.sim.fabric is not None
    return running_collector(r.config, r.sim.fabric, r.pool)


async def until_rows(r: Rig, within_s: float = 40.0) -> None:
    """Until every switch has ROWS counter rows on its first port."""
    switches = len(r.state.switch_names())
    sql = (
        "SELECT count(*) FROM (SELECT switch FROM port_counters WHERE port = 'swp1' AND in_octets IS NOT NULL "
        "GROUP BY switch HAVING count(*) >= $1) x"
    )
    for _ in range(int(within_s / 0.25)):
        if await r.pool.fetchval(sql, ROWS) == switches:
            return
        await asyncio.sleep(0.25)
    got = await r.pool.fetch("SELECT switch, count(*) AS n FROM port_counters WHERE port='swp1' GROUP BY switch")
    raise AssertionError(f"not every switch reached {ROWS} rows within {within_s}s: {[dict(x) for x in got]}")


def _ns(t: datetime) -> int:
    return round(t.timestamp() * 1e6) * 1000  # timestamptz keeps microseconds


class Truth:
    """The simulator's counters at simulation times, cached."""

    def __init__(self, state: FabricState) -> None:
        self.state = state
        self._cache: dict[tuple[str, int], dict[str, PortCounters]] = {}

    def port(self, switch: str, port: str, t: int) -> PortCounters:
        key = (switch, t)
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = {p.name: p for p in self.state.ports(switch, t)}
        return found[port]

    def bps(self, switch: str, port: str, field: str, t0: int, t1: int) -> float:
        a = getattr(self.port(switch, port, t0), field)
        b = getattr(self.port(switch, port, t1), field)
        return float(b - a) * 8e9 / (t1 - t0)


def _close(got: float, want: float) -> bool:
    return abs(got - want) <= TOLERANCE * abs(want) + 1e3  # + 1 kb/s: idle ports carry ~0.2 pkt/s


async def check_rates(r: Rig, learned: dict[str, int] | None = None) -> dict[str, int]:
    """Every stored rate of every switch port against the truth; returns rows checked per NOS.
    ``learned``: per switch, what the collector added to the switch's timestamps (a corrected clock)."""
    learned = learned or {}
    rows = await r.pool.fetch(
        "SELECT switch, port, time, oper_status, in_octets, in_bps, out_bps FROM port_counters "
        "ORDER BY switch, port, time"
    )
    truth = Truth(r.state)
    fabric = r.sim.fabric
    assert fabric is not None
    peers: dict[tuple[str, str], Endpoint] = {}
    for link in fabric.links:
        if link.kind is not LinkKind.SERVER_LEAF:
            peers[(link.a.node, link.a.port)] = link.b
            peers[(link.b.node, link.b.port)] = link.a
    bad: list[str] = []
    checked: dict[str, int] = {}
    # A reading without counters is a row only when it changes the oper status (the first status
    # of a port, e.g. SONiC's APPL_DB stream answering before COUNTERS_DB): status heartbeats,
    # PFC-only and unchanged status readings are never rows.
    status: dict[tuple[str, str], Any] = {}
    redundant = []
    for x in rows:
        key = (x["switch"], x["port"])
        if x["in_octets"] is None and key in status and status[key] == x["oper_status"]:
            redundant.append(f"{x['switch']} {x['port']} {x['time']}")
        status[key] = x["oper_status"]
    assert not redundant, f"rows without counters that change nothing: {redundant[:5]}"
    previous: dict[tuple[str, str], int] = {}
    for row in rows:
        if row["in_octets"] is None:
            continue
        sw, port = row["switch"], row["port"]
        # stored time → the switch's time → simulation time
        t = _ns(row["time"]) - learned.get(sw, 0) - r.devices.get(sw).clock_offset_ns
        t0 = previous.get((sw, port))
        previous[(sw, port)] = t
        if t0 is None or row["in_bps"] is None:
            continue
        nos = r.devices.nos_of(sw).value
        checked[nos] = checked.get(nos, 0) + 1
        for field, stored in (("in_octets", row["in_bps"]), ("out_octets", row["out_bps"])):
            want = truth.bps(sw, port, field, t0, t)
            if not _close(stored, want):
                bad.append(f"{nos} {sw} {port} {field[:-7]}_bps {stored:.6g} != {want:.6g} ({stored / want:.4f}x)")
        peer = peers.get((sw, port))
        if peer is not None:  # the other end's counters over the same interval (a shared cable)
            other = truth.bps(peer.node, peer.port, "in_octets", t0, t)
            if not _close(row["out_bps"], other):
                bad.append(f"{nos} {sw} {port} out_bps {row['out_bps']:.6g} != {peer.node} {peer.port} in {other:.6g}")
    assert not bad, f"{len(bad)} rates off the truth, e.g.:\n" + "\n".join(bad[:12])
    return checked


@pytest.mark.parametrize("nos", [n.value for n in Nos] + ["mixed"])
async def test_each_shape_stores_the_true_rates(fresh_db: str, tmp_path: Path, nos: str) -> None:
    async with rig(fresh_db, tmp_path, nos) as r:
        async with collecting(r):
            await until_rows(r)
        checked = await check_rates(r)
        shapes = {s.value for s in parse_nos(nos)}
        assert set(checked) == shapes
        assert r.sim.fabric is not None
        ports = await r.pool.fetchval("SELECT count(DISTINCT (switch, port)) FROM port_counters")
        assert ports == sum(sw.radix for sw in r.sim.fabric.switches.values())


async def test_skewed_clocks_keep_true_rates(fresh_db: str, tmp_path: Path) -> None:
    """±5 s clocks (within the collector's max_clock_skew_s): rows in device time, rates exact."""
    async with rig(fresh_db, tmp_path, "mixed", clock_skew_s=5.0) as r:
        offsets = [d for d in r.devices.offsets().values() if d]
        assert offsets and max(abs(d) for d in offsets) <= 5e9
        async with collecting(r):
            await until_rows(r)
        await check_rates(r)


async def test_a_pulled_optic_on_every_shape_stops_the_port_and_comes_back(fresh_db: str, tmp_path: Path) -> None:
    """Each leaf (one per shape) loses an optic: the interface is deleted, its rows stop, the link
    goes down; when it is back its rows resume."""
    async with rig(fresh_db, tmp_path, "mixed") as r:
        leaves = [n for n in r.state.switch_names() if n.startswith("lf-")][:5]
        assert {r.devices.nos_of(n) for n in leaves} == set(Nos)
        async with collecting(r):
            await until_rows(r)
            faults = [
                r.state.apply({"kind": "link_down", "switch": n, "port": "swp9", "removed": True}) for n in leaves
            ]
            pulled = r.state.now_ns()
            await asyncio.sleep(4.0)
            back = r.state.now_ns()
            for f in faults:
                r.state.clear(f.id)
            await asyncio.sleep(3.5)
        for leaf in leaves:
            nos = r.devices.nos_of(leaf).value
            times = [
                _ns(x["time"])
                for x in await r.pool.fetch(
                    "SELECT time FROM port_counters WHERE switch = $1 AND port = 'swp9' AND in_octets IS NOT NULL",
                    leaf,
                )
            ]
            assert not [t for t in times if pulled + 1.5e9 < t < back], f"{nos}: rows while the optic was out"
            assert [t for t in times if t > back + 0.5e9], f"{nos}: no rows once it was back"
            down = await r.pool.fetchval(
                "SELECT count(*) FROM link_events WHERE switch = $1 AND port = 'swp9' AND new_status = 'down'", leaf
            )
            assert down >= 1, f"{nos}: the link never went down"


async def test_clocks_five_minutes_off_raise_no_alarm_and_write_no_future_row(fresh_db: str, tmp_path: Path) -> None:
    """±5 min clocks (a leaf 5 minutes slow used to read as stale, one ahead emptied the port
    pages): the collector corrects every clock beyond max_clock_skew_s (30 s), keeps the
    switches' intervals (rates stay true), stores nothing beyond the 5 s tolerance in the future, and the analyzer calls
    no switch stale, including those slow by less than the bound."""
    async with rig(fresh_db, tmp_path, "mixed", clock_skew_s=300.0) as r:
        offsets = r.devices.offsets()
        beyond = {sw for sw, d in offsets.items() if abs(d) > 30e9}
        assert beyond and len(beyond) < len(offsets)  # seed 3: most beyond the bound, some within
        async with collecting(r) as service:
            await until_rows(r)
            await asyncio.sleep(2.5)  # a heartbeat writes switch_clocks
            clocks = service.clock.clocks()
            assert {sw for sw, c in clocks.items() if c.corrected} == beyond
            learned = {sw: round(-c.skew_s * 1e9) for sw, c in clocks.items() if c.corrected}
            assert r.sim.fabric is not None
            async with r.pool.acquire() as conn:
                now = await conn.fetchval("SELECT now()")
                ev, _, _ = await assess(conn, r.sim.fabric, r.config, now)
        assert {"stale_switch", "ports_unreported"} <= ev.evaluated_rules  # the checks ran, and found:
        stale = [f.key for f in ev.all_findings if f.rule in ("stale_switch", "ports_unreported")]
        assert not stale, f"clock skew read as silence: {stale}"
        for table in ("port_counters", "pfc_counters", "link_events"):
            # A corrected time may run up to the guard's tolerance ahead of its receive time (the
            # reading the offset was learned from waited in a loaded collector); never more.
            ahead = f"now() + interval '{CORRECTED_TOLERANCE_S} seconds'"
            future = await r.pool.fetchval(f"SELECT count(*) FROM {table} WHERE time > {ahead}")
            assert future == 0, f"{table}: {future} rows in the future"
        stored = {x["switch"]: x for x in await r.pool.fetch("SELECT switch, skew_s, corrected FROM switch_clocks")}
        assert {sw for sw, x in stored.items() if x["corrected"]} == beyond
        for sw in beyond:  # the learned skew is the simulator's offset, give or take the hand-over delay
            assert abs(stored[sw]["skew_s"] - offsets[sw] / 1e9) < 2.5, (sw, stored[sw]["skew_s"], offsets[sw])
        # the learned offset moved every reading by the same amount: rates are exact
        checked = await check_rates(r, learned)
        assert set(checked) == {n.value for n in Nos}
