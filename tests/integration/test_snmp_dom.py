"""Transceiver DOM over SNMP end to end: the simulator's agent on UDP loopback, the real SNMP
collector, store/dom.py into TimescaleDB.

The fabric names its ports per NOS (``mixed``): an EOS leaf (``Ethernet1/1``, EOS's sensor
precision), a SONiC leaf (``Ethernet0``, SONiC's) and a Junos leaf (``et-0/0/0:0``, ifIndex
500 + n). An ``optic_degrade`` of 3600 dB/h (1 dB per second of the simulator's real-time clock)
on one port shows as falling rx power in ``transceiver_dom`` under the port's inventory name;
every other port stays where the simulator says it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import cast

import asyncpg
import pytest
import pytest_asyncio
from pydantic import SecretStr

from collector.config import CollectorConfig
from collector.pipeline import Pipeline
from collector.records import LldpReading, PortReading, TargetState
from collector.snmp import SnmpCollector, open_poller
from collector.snmp_dom_poller import REFRESH_POLLS
from collector.snmp_pysnmp import PysnmpEngines
from collector.targets import SwitchTarget
from fabric.model import FabricParams
from simulator.runner import RunningSim, SimOptions, start_sim, stop_sim
from store.config import WriterConfig
from store.dom import DomSample, write_dom
from store.inventory import ensure_fabric
from tests.support.waiting import until

SWITCHES = ("lf-g1-r2", "lf-g1-r3", "lf-g1-r4")  # eos, sonic, junos in the ``mixed`` naming


class DomDbSink:
    """A Sink that stores DOM through store/dom.py (the table's one writer) and drops the rest."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        self.invalid: Counter[str] = Counter()
        self.dom_batches = 0

    async def put_ports(self, readings: Sequence[PortReading]) -> None:
        pass

    async def put_lldp(self, readings: Sequence[LldpReading]) -> None:
        pass

    async def put_dom(self, samples: Sequence[DomSample]) -> None:
        async with self.pool.acquire() as conn:
            await write_dom(conn, samples)
        self.dom_batches += 1

    def set_state(self, switch: str, state: TargetState, detail: str | None = None) -> None:
        pass

    def count_invalid(self, switch: str, what: str, n: int = 1) -> None:
        self.invalid[what] += n


async def _collect_until(collector: SnmpCollector, done: Callable[[], bool], within_s: float) -> None:
    """Run ``collector`` until ``done()`` (within ``within_s``), then stop it."""
    task = asyncio.create_task(collector.run())
    try:
        await until(done, within_s, lambda: f"collector stats: {collector.stats}")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _targets(sim: RunningSim) -> list[SwitchTarget]:
    """:data:`SWITCHES` at the simulator's SNMP agent, by community (as the simulator names them)."""
    assert sim.snmp is not None
    address = f"127.0.0.1:{sim.snmp.port}"
    return [SwitchTarget(sw, "snmp", address, community=SecretStr(sw), timeout_s=1.0, retries=1,
                         profile="simulator") for sw in SWITCHES]  # fmt: skip


@pytest_asyncio.fixture
async def sim() -> AsyncIterator[RunningSim]:
    running = await start_sim(
        SimOptions(params=FabricParams(gpus=64, radix=16), gnmi=None, snmp="127.0.0.1:0", control=None,
                   snmp_v3=False, naming="mixed")
    )  # fmt: skip
    try:
        yield running
    finally:
        await stop_sim(running)


async def test_optic_degrade_shows_as_falling_rx_power_in_transceiver_dom(sim: RunningSim, pool: asyncpg.Pool) -> None:
    assert sim.state is not None and sim.fabric is not None and sim.snmp is not None
    state, fabric = sim.state, sim.fabric
    cabled = {sw: [p.name for p in fabric.ports(sw) if p.peer is not None] for sw in SWITCHES}
    faulty = cabled["lf-g1-r2"][3]
    state.apply({"kind": "optic_degrade", "switch": "lf-g1-r2", "port": faulty, "db_per_hour": 3600.0})
    t0 = time.time_ns()
    sink = DomDbSink(pool)
    targets = _targets(sim)
    collector = SnmpCollector(targets, sink, CollectorConfig(snmp_interval_s=0.5, dom_interval_s=0.5), spread_s=0)
    await _collect_until(collector, lambda: sink.dom_batches >= 6 * len(SWITCHES), 20)
    assert sink.dom_batches >= 6 * len(SWITCHES)
    assert not sink.invalid, sink.invalid

    rows = await pool.fetch("SELECT * FROM transceiver_dom ORDER BY time")
    ports = {(r["switch"], r["port"]) for r in rows}
    assert ports == {(sw, p) for sw in SWITCHES for p in cabled[sw]}  # every optic, as the inventory names it

    series = [r for r in rows if (r["switch"], r["port"]) == ("lf-g1-r2", faulty)]
    rx = [r["rx_power_dbm"] for r in series]
    span_s = (series[-1]["time"] - series[0]["time"]).total_seconds()
    assert span_s >= 2.0
    assert rx[-1] - rx[0] == pytest.approx(-span_s, abs=0.35)  # 1 dB/s, within the wobble and a poll's skew
    assert all(b < a + 0.15 for a, b in itertools.pairwise(rx))  # falling, noise aside
    assert series[0]["component"] == state.optics.of("lf-g1-r2", faulty).component

    for sw in SWITCHES:  # every other optic reads as the simulator has it, to the encoding's step
        for port in cabled[sw]:
            if (sw, port) == ("lf-g1-r2", faulty):
                continue
            last = max((r for r in rows if (r["switch"], r["port"]) == (sw, port)), key=lambda r: r["time"])
            truth = {o.port: o for o in state.transceivers(sw, int(last["time"].timestamp() * 1e9))}[port]
            assert last["rx_power_dbm"] == pytest.approx(truth.rx_power_dbm, abs=0.12), (sw, port)
            assert last["tx_power_dbm"] == pytest.approx(truth.tx_power_dbm, abs=0.01), (sw, port)
            assert last["laser_bias_ma"] == pytest.approx(truth.laser_bias_ma, abs=0.05), (sw, port)
            assert last["temperature_c"] == pytest.approx(truth.temperature_c, abs=0.05), (sw, port)
            assert last["rx_low_critical_dbm"] is None  # ENTITY-SENSOR-MIB carries no thresholds
    assert collector.stats.dom_samples == len(rows)
    assert t0 < rows[0]["time"].timestamp() * 1e9


async def test_the_pipeline_stores_snmp_dom(sim: RunningSim, pool: asyncpg.Pool) -> None:
    """The production path: the collector hands DOM to the Pipeline (a DomSink), whose writer fills
    transceiver_dom with one row per optic per DOM poll."""
    assert sim.state is not None and sim.fabric is not None and sim.snmp is not None
    async with pool.acquire() as conn:
        await ensure_fabric(conn, sim.fabric)
    pipe = Pipeline(pool, sim.fabric, WriterConfig(flush_interval_s=0.05))
    pipe.start()
    targets = _targets(sim)
    collector = SnmpCollector(targets, pipe, CollectorConfig(snmp_interval_s=0.5, dom_interval_s=1.0), spread_s=0)
    try:
        await _collect_until(collector, lambda: collector.stats.polls_ok >= 4 * len(SWITCHES), 20)
    finally:
        await pipe.close()
    cabled = {(sw, p.name) for sw in SWITCHES for p in sim.fabric.ports(sw) if p.peer is not None}
    rows = await pool.fetch("SELECT switch, port, count(*) AS n FROM transceiver_dom GROUP BY 1, 2")
    assert {(r["switch"], r["port"]) for r in rows} == cabled
    polls = collector.stats.polls_ok
    assert 0 < sum(r["n"] for r in rows) == collector.stats.dom_samples  # DOM on every other poll (1 s / 0.5 s)
    assert collector.stats.dom_samples <= (polls + len(SWITCHES)) // 2 * 16


#: ENTITY-MIB (1.3.6.1.2.1.47) and ENTITY-SENSOR-MIB (1.3.6.1.2.1.99) as BER OID prefixes.
_ENTITY_OIDS = (b"\x2b\x06\x01\x02\x01\x2f", b"\x2b\x06\x01\x02\x01\x63")


class _EntityBlackHole(asyncio.DatagramProtocol):
    """A UDP hop in front of the agent that forwards every request but those naming the entity
    tables, which it drops: an agent whose entity walk never answers (too slow, or a view that
    hangs), while its counters answer as ever."""

    def __init__(self, agent: tuple[str, int]) -> None:
        self.agent = agent
        self.transport: asyncio.DatagramTransport | None = None
        self.upstream: dict[tuple[str, int], asyncio.DatagramTransport] = {}
        self.dropped = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        if any(oid in data for oid in _ENTITY_OIDS):
            self.dropped += 1
            return
        asyncio.get_running_loop().create_task(self._forward(data, addr))

    async def _forward(self, data: bytes, client: tuple[str, int]) -> None:
        up = self.upstream.get(client)
        if up is None:
            hop = self

            class _Back(asyncio.DatagramProtocol):
                def datagram_received(self, reply: bytes, _: tuple[str, int]) -> None:
                    if hop.transport is not None:
                        hop.transport.sendto(reply, client)

            up, _ = await asyncio.get_running_loop().create_datagram_endpoint(_Back, remote_addr=self.agent)
            self.upstream[client] = up
        up.sendto(data)

    def close(self) -> None:
        for up in self.upstream.values():
            up.close()
        if self.transport is not None:
            self.transport.close()


async def test_an_entity_walk_that_never_answers_leaves_the_counters_on_time(sim: RunningSim) -> None:
    """DOM is read apart from the counters: its deadline passing is a DOM failure, counted, while
    the switch stays connected and every counter poll lands (it once made the switch unreachable,
    every poll, for good)."""
    assert sim.snmp is not None
    agent = ("127.0.0.1", sim.snmp.port)
    loop = asyncio.get_running_loop()
    transport, hole = await loop.create_datagram_endpoint(lambda: _EntityBlackHole(agent),
                                                          local_addr=("127.0.0.1", 0))  # fmt: skip
    recorded: list[str] = []

    class Sink(DomDbSink):
        async def put_ports(self, readings: Sequence[PortReading]) -> None:
            recorded.extend({r.switch for r in readings})

        def set_state(self, switch: str, state: TargetState, detail: str | None = None) -> None:
            recorded.append(f"{switch}:{state.value}")

    sink = Sink(None)  # no DOM reaches it: it never needs the pool
    port = transport.get_extra_info("sockname")[1]
    target = SwitchTarget("lf-g1-r3", "snmp", f"127.0.0.1:{port}", community=SecretStr("lf-g1-r3"), timeout_s=0.2,
                          retries=0, profile="simulator")  # fmt: skip
    collector = SnmpCollector([target], sink, CollectorConfig(snmp_interval_s=0.5, dom_interval_s=0.5), spread_s=0)
    try:
        await _collect_until(collector, lambda: collector.stats.dom_failures >= 2 and collector.stats.polls_ok >= 4, 15)
    finally:
        hole.close()
    stats = collector.stats
    assert hole.dropped > 0 and stats.dom_failures >= 2 and stats.dom_samples == 0, (stats, recorded[:20])
    assert collector.stats.polls_ok >= 4 and collector.stats.polls_failed == 0
    assert recorded.count("lf-g1-r3") >= 4  # the counters landed
    assert "lf-g1-r3:unreachable" not in recorded and collector.stats.states["lf-g1-r3"] == TargetState.CONNECTED


async def test_the_periodic_check_rereads_the_entity_tables_only_when_entlastchangetime_moved(sim: RunningSim) -> None:
    """The hourly check costs one scalar and the status column while the entity tables stand
    still; an optic pulled (its rows gone, entLastChangeTime moved) makes the next check read
    every table, and the optic put back (sensors the plan does not know) is read at once."""
    assert sim.state is not None and sim.fabric is not None
    switch = SWITCHES[1]
    cabled = [p.name for p in sim.fabric.ports(switch) if p.peer is not None]
    pulled = cabled[2]
    engines = PysnmpEngines()
    invalid: list[tuple[str, int]] = []
    poller = open_poller(_targets(sim)[1], engines, 60.0, lambda what, n: invalid.append((what, n)), "auto", 60.0)
    dom, client, limiter = poller.dom, poller.dom_client or poller.client, asyncio.Semaphore(1)
    assert dom is not None

    async def dom_poll(*, check: bool = False) -> tuple[set[str], int]:
        await poller.poll(limiter)  # the interface names
        if check:
            dom.polls = REFRESH_POLLS  # the hour is up
        before = client.varbinds
        samples = await poller.poll_dom(limiter)
        return {s.port for s in samples}, client.varbinds - before

    try:
        ports, _ = await dom_poll()
        assert ports == set(cabled) and dom.refreshes == 1
        assert dom.plan is not None
        sensors = len(dom.plan.known)
        ports, read = await dom_poll(check=True)
        assert ports == set(cabled) and (dom.checks, dom.refreshes) == (1, 1)
        assert read <= 2 * (sensors + 1) + 1  # the values, the oper status and entLastChangeTime: no entity table

        fault = sim.state.apply({"kind": "link_down", "switch": switch, "port": pulled, "removed": True})
        ports, _ = await _until_ports(dom_poll, lambda got: pulled not in got)
        assert ports == set(cabled) - {pulled} and dom.refreshes == 1  # its sensors are gone from the values
        ports, read = await dom_poll(check=True)
        assert (dom.checks, dom.refreshes) == (2, 2) and read > 4 * sensors  # moved: every table again
        assert ports == set(cabled) - {pulled}

        assert sim.state.clear(fault.id)
        ports, _ = await _until_ports(dom_poll, lambda got: pulled in got)
        assert ports == set(cabled) and dom.refreshes == 3 and dom.checks == 2  # unknown sensors: at once
        assert not invalid, invalid
    finally:
        await poller.close()
        engines.close()


async def _until_ports(
    dom_poll: Callable[[], Awaitable[tuple[set[str], int]]], done: Callable[[set[str]], bool], within_s: float = 5.0
) -> tuple[set[str], int]:
    """DOM polls until their ports satisfy ``done`` (the agent's snapshot lives half a second)."""
    deadline = time.monotonic() + within_s
    while True:
        got = await dom_poll()
        if done(got[0]) or time.monotonic() > deadline:
            return got
        await asyncio.sleep(0.1)
