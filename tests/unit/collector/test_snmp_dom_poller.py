"""When the SNMP DOM poller reads the entity tables (collector/snmp_dom_poller.py).

The agent is the simulator's own MIB of one switch (simulator/snmp_mib.py), read column by
column as a walk returns it, with what a test changes on top: entLastChangeTime (served, absent,
or refused with an error-status) and a sensor's oper status. The real agents on UDP are in
tests/integration/test_snmp_dom.py and test_snmp_dom_recording.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from collector.oids import ENT_LAST_CHANGE, SENSOR_STATUS, Column
from collector.snmp_client import SnmpProtocolError
from collector.snmp_dom_poller import FULL_CHECKS, REFRESH_POLLS, DomPoller
from collector.snmp_walk import Value
from fabric.model import FabricParams
from fabric.topology import build_aipod
from simulator.fabric_state import FabricState
from simulator.snmp_mib import SwitchMib

T0 = 1_800_000_000 * 10**9
FABRIC = build_aipod(FabricParams(gpus=64, radix=16), "mixed")
ENTITY, SENSORS = (1, 3, 6, 1, 2, 1, 47), (1, 3, 6, 1, 2, 1, 99, 1, 1, 1)
STATUS = SENSOR_STATUS[0].oid


class Agent:
    """One simulated switch's entity and sensor columns, as a DomPoller's walk and get see them."""

    def __init__(self, switch: str = "lf-g1-r2") -> None:
        mib = SwitchMib.from_view(FabricState(FABRIC, seed=7, clock=lambda: T0), switch)
        assert mib is not None
        self.columns: dict[str, dict[str, Value]] = {}
        for pos in mib.positions(ENTITY):
            oid, _, value = mib.instance(pos)
            if oid[: len(ENTITY)] != ENTITY and oid[: len(SENSORS)] != SENSORS:
                if oid > SENSORS:
                    break
                continue
            column = ".".join(map(str, oid[:12] if oid[:7] == ENTITY else oid[:11]))
            index = ".".join(map(str, oid[12:] if oid[:7] == ENTITY else oid[11:]))
            text = ".".join(map(str, value)) if isinstance(value, tuple) else value  # OIDs come as text
            self.columns.setdefault(column, {})[index] = text
        self.names = {str(p.if_index): p.name for p in mib.ctx.ports}
        self.stamp: int | SnmpProtocolError | None = 4242
        self.walked: list[str] = []

    async def walk(self, columns: Sequence[Column], rows_hint: int | None) -> dict[str, dict[str, Value]]:
        self.walked += [c.field for c in columns]
        return {c.field: dict(self.columns.get(c.oid, {})) for c in columns}

    async def get(self, oids: Sequence[str]) -> Mapping[str, Value]:
        assert list(oids) == [ENT_LAST_CHANGE]
        if isinstance(self.stamp, SnmpProtocolError):
            raise self.stamp
        return {} if self.stamp is None else {ENT_LAST_CHANGE: self.stamp}


def _poller() -> tuple[DomPoller, list[tuple[str, int]]]:
    invalid: list[tuple[str, int]] = []
    return DomPoller("lf-g1-r2", lambda what, n: invalid.append((what, n))), invalid


async def _poll(dom: DomPoller, agent: Agent, *, check: bool = False) -> dict[str, tuple[float | None, ...]]:
    if check:
        dom.polls = REFRESH_POLLS
    agent.walked.clear()
    samples = await dom.poll(agent.walk, agent.get, agent.names, T0)
    return {s.port: (s.rx_power_dbm, s.tx_power_dbm, s.laser_bias_ma, s.temperature_c) for s in samples}


async def test_an_unmoved_stamp_costs_the_status_column_and_keeps_the_plan() -> None:
    agent, (dom, invalid) = Agent(), _poller()
    first = await _poll(dom, agent)
    assert first and dom.refreshes == 1 and set(agent.walked) > {"value", "status", "descr"}
    plan = dom.plan
    assert await _poll(dom, agent) == first and agent.walked == ["value"]
    assert await _poll(dom, agent, check=True) == first
    assert agent.walked == ["status", "value"] and (dom.refreshes, dom.checks, dom.replans) == (1, 1, 0)
    assert dom.plan is plan and not invalid  # nothing moved: the same plan


async def test_a_status_that_moved_remakes_the_plan_from_the_tables_kept() -> None:
    agent, (dom, _) = Agent(), _poller()
    first = await _poll(dom, agent)
    rx = next(i for i, d in agent.columns["1.3.6.1.2.1.47.1.1.1.1.2"].items() if "RX Power" in str(d))
    agent.columns[STATUS][rx] = 3  # nonoperational(3): its value means nothing now
    after = await _poll(dom, agent, check=True)
    assert agent.walked == ["status", "value"] and (dom.refreshes, dom.replans) == (1, 1)
    moved = [port for port in first if after[port] != first[port]]
    assert len(moved) == 1 and after[moved[0]][0] is None and after[moved[0]][1:] == first[moved[0]][1:]


@pytest.mark.parametrize("stamp", [5000, None, SnmpProtocolError("genErr")], ids=["moved", "absent", "refused"])
async def test_a_stamp_that_moved_or_cannot_be_read_reads_every_table(stamp: int | SnmpProtocolError | None) -> None:
    agent, (dom, invalid) = Agent(), _poller()
    first = await _poll(dom, agent)
    agent.stamp = stamp
    assert await _poll(dom, agent, check=True) == first  # DOM goes on, whatever the agent says of the stamp
    assert dom.refreshes == 2 and "descr" in agent.walked
    assert invalid == ([("ENTITY-MIB: entLastChangeTime refused (error-status)", 1)] if stamp is not None
                       and not isinstance(stamp, int) else [])  # fmt: skip


async def test_every_table_is_read_again_once_a_day_whatever_the_stamp_says() -> None:
    agent, (dom, _) = Agent(), _poller()
    await _poll(dom, agent)
    for _ in range(FULL_CHECKS - 1):
        await _poll(dom, agent, check=True)
    assert dom.refreshes == 1 and "descr" not in agent.walked
    await _poll(dom, agent, check=True)
    assert dom.refreshes == 2 and "descr" in agent.walked  # a stamp that never moves still ages out
