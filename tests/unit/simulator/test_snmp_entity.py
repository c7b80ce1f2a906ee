"""The simulator's ENTITY-MIB / ENTITY-SENSOR-MIB view (simulator/snmp_entity.py) of a real FabricState.

Walked the way an agent's table is walked (SwitchMib positions, in OID order), read back with the
collector's own decoding (collector/snmp_dom.py): every present optic is one module in its port,
mapped to the port's ifIndex, with values the simulator's reading gives; the optics faults move
them; a pulled optic leaves its port entity and takes its module and sensors.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from collector.snmp_dom import EntityTree, decode
from collector.snmp_walk import Value
from fabric.model import FabricParams
from fabric.topology import build_aipod
from simulator.fabric_state import FabricState
from simulator.snmp_mib import SwitchMib

ENT = (1, 3, 6, 1, 2, 1, 47, 1, 1, 1, 1)
ALIAS = (1, 3, 6, 1, 2, 1, 47, 1, 3, 2, 1)
SENSOR = (1, 3, 6, 1, 2, 1, 99, 1, 1, 1)
T0 = 1_800_000_000 * 10**9
FABRIC = build_aipod(FabricParams(gpus=64, radix=16), "mixed")


def _state(clock: list[int]) -> FabricState:
    return FabricState(FABRIC, seed=7, clock=lambda: clock[0])


def _walk(mib: SwitchMib) -> dict[tuple[int, ...], dict[str, dict[str, Value]]]:
    """Every instance under the three tables: entry → column sub → index text → value (as a client sees it)."""
    out: dict[tuple[int, ...], dict[str, dict[str, Value]]] = {ENT: {}, ALIAS: {}, SENSOR: {}}
    last: tuple[int, ...] = ()
    for pos in mib.positions(ENT):
        oid, _, value = mib.instance(pos)
        assert oid > last  # strictly increasing: a walk never loops
        last = oid
        entry = next((e for e in out if oid[: len(e)] == e), None)
        if entry is None:
            if oid > SENSOR:
                break
            continue
        sub, index = oid[len(entry)], ".".join(map(str, oid[len(entry) + 1 :]))
        v: Value = ".".join(map(str, value)) if isinstance(value, tuple) else value  # OIDs come as text
        out[entry].setdefault(str(sub), {})[index] = v
    return out


def _decode(mib: SwitchMib, switch: str) -> dict[str, tuple[float | None, ...]]:
    tables = _walk(mib)
    ent, alias, sensor = tables[ENT], tables[ALIAS], tables[SENSOR]
    tree = EntityTree.from_walk(
        {"descr": ent["2"], "contained_in": ent["4"], "cls": ent["5"], "name": ent["7"]}, {"identifier": alias["2"]}
    )
    names = {str(p.if_index): p.name for p in mib.ctx.ports}
    static = {"type": sensor["1"], "scale": sensor["2"], "precision": sensor["3"], "units": sensor["6"]}
    live = {"value": sensor["4"], "status": sensor["5"]}
    samples, counts = decode(datetime.now(tz=UTC), switch, tree, static, live, names)
    assert counts.unmapped == 0 and not counts.invalid
    return {s.port: (s.rx_power_dbm, s.tx_power_dbm, s.laser_bias_ma, s.temperature_c) for s in samples}


@pytest.mark.parametrize("switch", ["lf-g1-r2", "lf-g1-r3", "lf-g1-r4", "sp-r1-1", "ssp-1"])
def test_every_optic_reads_back_as_the_simulator_has_it(switch: str) -> None:
    clock = [T0]
    state = _state(clock)
    mib = SwitchMib.from_view(state, switch)
    assert mib is not None
    got = _decode(mib, switch)
    truth = {r.port: r for r in state.transceivers(switch, clock[0])}
    assert set(got) == set(truth) and truth
    for port, (rx, tx, bias, temp) in got.items():
        r = truth[port]
        assert rx == pytest.approx(r.rx_power_dbm, abs=0.01)  # 0.1 µW steps at ~0.5 mW
        assert tx == pytest.approx(r.tx_power_dbm, abs=0.01)
        assert bias == pytest.approx(r.laser_bias_ma, abs=0.0051)  # EOS: 0.01 mA steps
        assert temp == pytest.approx(r.temperature_c, abs=0.05)


def test_optics_faults_move_the_sensors_and_a_pulled_optic_leaves_its_port() -> None:
    clock = [T0]
    state = _state(clock)
    sw = "lf-g1-r2"
    ports = [p.name for p in FABRIC.ports(sw) if p.peer is not None]
    degrade, aging, dirty, pulled = ports[0], ports[1], ports[2], ports[3]
    state.apply({"kind": "optic_degrade", "switch": sw, "port": degrade, "db_per_hour": 2.0})
    state.apply({"kind": "laser_aging", "switch": sw, "port": aging, "ma_per_hour": 0.5})
    state.apply({"kind": "dirty_connector", "switch": sw, "port": dirty, "loss_db": 3.0})
    mib = SwitchMib.from_view(state, sw)
    assert mib is not None
    before = _decode(mib, sw)
    clock[0] += 2 * 3600 * 10**9
    state.tick(clock[0])
    state.apply({"kind": "link_down", "switch": sw, "port": pulled, "removed": True})
    mib = SwitchMib.from_view(state, sw)
    assert mib is not None
    after = _decode(mib, sw)
    rx0, bias0 = before[degrade][0], before[aging][2]
    assert rx0 is not None and bias0 is not None
    assert after[degrade][0] == pytest.approx(rx0 - 4.0, abs=0.15)  # 2 dB/h for 2 h
    assert after[aging][2] == pytest.approx(bias0 + 1.0, abs=0.06)  # 0.5 mA/h for 2 h
    assert after[aging][1] == before[aging][1]  # at constant tx power
    assert after[dirty][0] == pytest.approx(before[dirty][0], abs=0.12)  # a step, then stable
    assert pulled in before and pulled not in after
    names = {v for v in _walk(mib)[ENT]["7"].values()}
    assert pulled.encode() in names  # the port entity stays; its module and sensors left with the optic
