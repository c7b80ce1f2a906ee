"""SNMP reboot detection against late answers, on real UDP into a real TimescaleDB.

A delaying proxy (an asyncio DatagramProtocol on loopback) sits between the collector and the
simulator's SNMP agent and holds back the answers to chosen GET requests (the poll's first
request: sysUpTime and ifNumber) by ~3 s, as a busy agent or a congested management network
does. The collector must not read that as a reboot: no ``counter_reset`` row, no index re-walk.
A real reboot (the simulator's ``reboot`` fault) is still one, and a counter clear the agent
reports through ifCounterDiscontinuityTime resets exactly the ports it names.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pytest_asyncio
from pydantic import SecretStr

from collector.config import CollectorConfig
from collector.pipeline import Pipeline
from collector.records import PortReading
from collector.snmp import SnmpCollector
from collector.targets import SwitchTarget
from fabric.model import FabricParams
from fabric.topology import build_aipod
from simulator.fabric_state import FabricState
from simulator.snmp_agent import SnmpAgent, serve_snmp
from simulator.snmp_ber import GET, BerError, decode_request
from simulator.view import PortCounters
from store.config import WriterConfig
from store.db import Pool, create_pool
from store.inventory import ensure_fabric
from store.migrate import migrate
from tests.support.views import StateView
from tests.support.waiting import until

S = 1_000_000_000
FABRIC = build_aipod(FabricParams(gpus=64, radix=16))
SWITCH = "sp-r1-1"
IF_NAME = (1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 1)  # the first column of every index walk
INTERVAL_S = 2.0
DELAY_S = 3.0


# -- the delaying proxy -----------------------------------------------------------------------


class _Upstream(asyncio.DatagramProtocol):
    """One client's leg toward the agent: answers go back to that client, on time or late."""

    def __init__(self, proxy: DelayingProxy, client: Any) -> None:
        self.proxy = proxy
        self.client = client
        self.transport: asyncio.DatagramTransport | None = None
        self.delay_next = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: Any) -> None:
        delay, self.delay_next = self.delay_next, 0.0
        if delay > 0:
            self.proxy.delayed += 1
            asyncio.get_running_loop().call_later(delay, self.proxy.answer, data, self.client)
        else:
            self.proxy.answer(data, self.client)


@dataclass(eq=False)
class DelayingProxy(asyncio.DatagramProtocol):
    """UDP between collector and agent; the answers to the next ``late`` GETs wait ``delay_s``."""

    agent: tuple[str, int]
    delay_s: float = DELAY_S
    late: int = 0
    delayed: int = 0
    #: Requests seen, by kind: "get", "bulk" (any other PDU), "index_walks" (requests that start a
    #: walk of the index tables at ifName: a walk or two per refresh, whatever the codec).
    requests: Counter[str] = field(default_factory=Counter)
    transport: asyncio.DatagramTransport | None = None
    legs: dict[Any, _Upstream] = field(default_factory=dict)
    port: int = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.port = transport.get_extra_info("sockname")[1]

    def datagram_received(self, data: bytes, addr: Any) -> None:
        asyncio.get_running_loop().create_task(self._forward(data, addr))

    async def _forward(self, data: bytes, addr: Any) -> None:
        leg = self.legs.get(addr)
        if leg is None:
            loop = asyncio.get_running_loop()
            _, proto = await loop.create_datagram_endpoint(lambda: _Upstream(self, addr), remote_addr=self.agent)
            leg = self.legs.setdefault(addr, proto)
        try:
            req = decode_request(data)
        except BerError:
            req = None
        if req is not None:
            if req.pdu_type == GET:
                self.requests["get"] += 1
                if self.late > 0:
                    self.late -= 1
                    leg.delay_next = self.delay_s
            else:
                self.requests["bulk"] += 1
                if IF_NAME in req.oids:
                    self.requests["index_walks"] += 1
        assert leg.transport is not None
        leg.transport.sendto(data)

    def answer(self, data: bytes, client: Any) -> None:
        if self.transport is not None:
            self.transport.sendto(data, client)

    def close(self) -> None:
        for leg in self.legs.values():
            if leg.transport is not None:
                leg.transport.close()
        if self.transport is not None:
            self.transport.close()


@contextlib.asynccontextmanager
async def proxy_to(agent: SnmpAgent) -> AsyncIterator[DelayingProxy]:
    loop = asyncio.get_running_loop()
    _, proxy = await loop.create_datagram_endpoint(
        lambda: DelayingProxy(("127.0.0.1", agent.port)), local_addr=("127.0.0.1", 0)
    )
    try:
        yield proxy
    finally:
        proxy.close()


# -- a switch whose counters get cleared ------------------------------------------------------


class Clearable(StateView):
    """The real FabricState, plus ``clear counters`` on chosen ports: from then on those ports count
    from zero and report the clear in ifCounterDiscontinuityTime, as IF-MIB says an agent does."""

    _FIELDS = (
        "in_octets", "out_octets", "in_unicast_pkts", "out_unicast_pkts", "in_multicast_pkts",
        "out_multicast_pkts", "in_broadcast_pkts", "out_broadcast_pkts", "in_errors", "in_fcs_errors",
    )  # fmt: skip

    def __init__(self, state: FabricState) -> None:
        super().__init__(state)
        self.cleared: dict[tuple[str, str], tuple[int, PortCounters]] = {}

    def clear(self, switch: str, ports: Sequence[str]) -> int:
        t = self.state.now_ns()
        at = {p.name: p for p in self.state.ports(switch, t)}
        for port in ports:
            self.cleared[(switch, port)] = (t, at[port])
        return t

    def ports(self, switch: str, now_ns: int | None = None) -> list[PortCounters]:
        out = []
        for p in self.state.ports(switch, now_ns):
            hit = self.cleared.get((switch, p.name))
            if hit is not None and hit[0] > p.last_clear_ns:  # a reboot since then clears it anyway
                t, base = hit
                p = replace(p, last_clear_ns=t, **{f: getattr(p, f) - getattr(base, f) for f in self._FIELDS})
            out.append(p)
        return out


# -- the rig ----------------------------------------------------------------------------------


@dataclass
class Rig:
    state: FabricState
    view: Clearable
    proxy: DelayingProxy
    pool: Pool
    pipeline: Pipeline
    collector: SnmpCollector
    seen: list[PortReading]


class Tap(Pipeline):
    """The real pipeline, keeping what the collector handed it (the readings' boot and clear times)."""

    seen: list[PortReading]

    async def put_ports(self, readings: Sequence[PortReading]) -> None:
        self.seen.extend(readings)
        await super().put_ports(readings)


@pytest_asyncio.fixture
async def rig(fresh_db: str) -> AsyncIterator[Rig]:
    state = FabricState(FABRIC, seed=3)
    view = Clearable(state)
    agent = await serve_snmp(view, "127.0.0.1", 0, v3_users=())
    pool = await create_pool(fresh_db)
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
            await ensure_fabric(conn, FABRIC)
        async with proxy_to(agent) as proxy:
            pipeline = Tap(pool, FABRIC, WriterConfig(flush_interval_s=0.1))
            pipeline.seen = []
            target = SwitchTarget(SWITCH, "snmp", f"127.0.0.1:{proxy.port}", community=SecretStr(SWITCH),
                                  timeout_s=DELAY_S + 2, retries=0, profile="simulator")  # fmt: skip
            collector = SnmpCollector([target], pipeline, CollectorConfig(snmp_interval_s=INTERVAL_S), spread_s=0)
            pipeline.start()
            task = asyncio.create_task(collector.run())
            try:
                yield Rig(state, view, proxy, pool, pipeline, collector, pipeline.seen)
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                await pipeline.close()
    finally:
        await pool.close()
        await agent.stop()


async def polls(rig: Rig, n: int) -> None:
    """Wait for ``n`` more successful polls (their rows handed to the pipeline)."""
    target = rig.collector.stats.polls_ok + n
    await until(lambda: rig.collector.stats.polls_ok >= target, n * (INTERVAL_S + DELAY_S) + 5)


async def resets(rig: Rig) -> dict[str, int]:
    await rig.pipeline.ports_writer.flush()
    rows = await rig.pool.fetch(
        "SELECT port, count(*) FILTER (WHERE counter_reset) AS n FROM port_counters WHERE switch = $1 GROUP BY port",
        SWITCH,
    )
    return {r["port"]: r["n"] for r in rows}


async def test_a_late_uptime_answer_is_no_reboot(rig: Rig) -> None:
    await polls(rig, 3)
    walks = rig.proxy.requests["index_walks"]
    assert walks >= 1  # the first poll names the ports
    boot = {r.boot_ns for r in rig.seen}
    assert len(boot) == 1
    # late, on time, late, late, on time, on time: every change of sysUpTime's arrival time
    for late in (1, 0, 2, 0, 0):
        rig.proxy.late = late
        await polls(rig, max(late, 1))
    assert rig.proxy.delayed == 3
    by_port = await resets(rig)
    assert len(by_port) == 16
    assert sum(by_port.values()) == 0, by_port
    assert rig.proxy.requests["index_walks"] == walks, "a late answer made the poller re-walk the index"
    assert {r.boot_ns for r in rig.seen} == boot
    assert len({r.last_clear_ns for r in rig.seen if r.port == "swp1"}) == 1


async def test_a_real_reboot_still_resets_during_late_answers(rig: Rig) -> None:
    await polls(rig, 2)
    rig.proxy.late = 1
    await polls(rig, 1)
    before = {r.boot_ns for r in rig.seen}
    walks = rig.proxy.requests["index_walks"]
    rig.state.apply({"kind": "reboot", "switch": SWITCH, "boot_s": 0.5})
    t_reboot = time.time_ns()
    rig.proxy.late = 1  # the first answer after the reboot is late too
    await until(lambda: any(r.time_ns > t_reboot + 2 * S for r in rig.seen), 6 * (INTERVAL_S + DELAY_S))
    await polls(rig, 1)
    by_port = await resets(rig)
    assert set(by_port.values()) == {1}, by_port  # every port: one reset, the reboot's
    after = {r.boot_ns for r in rig.seen if r.time_ns > t_reboot + S}
    assert len(after) == 1 and after.isdisjoint(before)
    (boot,) = after
    assert boot is not None and abs(boot - t_reboot) < 2 * S
    assert rig.proxy.requests["index_walks"] > walks  # a reboot may renumber: the index is walked again


async def test_counter_discontinuity_time_resets_the_cleared_ports_only(rig: Rig) -> None:
    await polls(rig, 2)
    t_clear = rig.view.clear(SWITCH, ["swp3", "swp9"])
    t_seen = time.time_ns()
    await polls(rig, 2)
    rig.proxy.late = 1
    await polls(rig, 2)
    by_port = await resets(rig)
    assert {p for p, n in by_port.items() if n} == {"swp3", "swp9"}
    assert by_port["swp3"] == by_port["swp9"] == 1
    cleared = [r for r in rig.seen if r.port == "swp3" and r.time_ns > t_seen]
    assert cleared and all(r.last_clear_ns is not None and abs(r.last_clear_ns - t_clear) < S for r in cleared)
    assert len({r.last_clear_ns for r in cleared}) == 1
    assert all(r.in_octets is not None and r.in_octets < 10**14 for r in cleared)  # counting from the clear
