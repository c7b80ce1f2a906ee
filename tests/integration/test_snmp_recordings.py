"""SNMP recordings of real Cisco, Huawei and Juniper switches, stored as ports the inventory knows.

snmpsim serves three snmpsim-data recordings (a Cisco Nexus 5000 on NX-OS 6.0, a Huawei
S12704 and a Juniper MX960 on Junos 16.1), one per community. A version 2 inventory lists
each switch's ports as that switch names them in ifName (``Ethernet1/1``, ``40GE1/0/0``,
``ge-0/0/1``), the way ``inventory discover`` or a site's cabling plan would. The real
collector pipeline stores what it reads in TimescaleDB: every port is known, none is flagged,
and each port's counters are the recording's, under the recording's name.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from pydantic import SecretStr

from collector.config import CollectorConfig
from collector.oids import ETHERNET_IF_TYPES
from collector.pipeline import Pipeline
from collector.snmp import SnmpCollector
from collector.targets import SwitchTarget
from fabric.inventory import load_inventory
from fabric.model import Fabric
from store.db import create_pool
from store.inventory import ensure_fabric
from store.migrate import migrate
from store.records import from_int8
from tests.support.collecting import polled
from tests.support.snmpsim import column, parse_snmprec, recording, serving

#: switch name in the inventory → its snmpsim-data recording
RECORDINGS = {
    "nx1": "network/switch/cisco-n5000.snmprec.bz2",
    "hw1": "network/switch/huawei-s12704.snmprec.bz2",
    "jn1": "network/router/juniper-mx960-16-1r6-7-a.snmprec.bz2",
}
#: what the collector walks: system, IF-MIB, ifXTable, LLDP-MIB, IEEE8021-PFC-MIB
WALKED = ("1.3.6.1.2.1.1", "1.3.6.1.2.1.2", "1.3.6.1.2.1.31", "1.0.8802.1.1.2", "1.3.111.2.802.1.1.21")
IF_NAME, IF_TYPE, HC_IN_OCTETS = "1.3.6.1.2.1.31.1.1.1.1", "1.3.6.1.2.1.2.2.1.3", "1.3.6.1.2.1.31.1.1.1.6"


def _paths() -> dict[str, Path] | None:
    paths = {sw: recording(rel) for sw, rel in RECORDINGS.items()}
    return None if None in paths.values() else {sw: p for sw, p in paths.items() if p is not None}


pytestmark = [
    pytest.mark.asyncio(loop_scope="function"),
    pytest.mark.skipif(_paths() is None, reason="snmpsim and snmpsim-data are not installed"),
]


@pytest.fixture(scope="module")
def snmpsim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    paths = _paths()
    assert paths is not None
    with serving(paths, tmp_path_factory.mktemp("snmpsim"), subtrees=WALKED) as address:
        yield address


def _ethernet_ports(rec: Mapping[str, int | bytes | str]) -> dict[str, int]:
    """ifName → 64-bit in-octets of the Ethernet-like interfaces the collector reads."""
    names, types, octets = column(rec, IF_NAME), column(rec, IF_TYPE), column(rec, HC_IN_OCTETS)
    out = {}
    for index, kind in types.items():
        name = names.get(index)
        if kind in ETHERNET_IF_TYPES and isinstance(name, bytes):
            value = octets.get(index)
            out[name.decode()] = value if isinstance(value, int) else -1
    return out


def _inventory(ports: Mapping[str, list[str]], listed: bool) -> Fabric:
    lines = ["version: 2", "fabric: {name: recorded, rails: 1}", "switches:"]
    for sw, names in ports.items():
        quoted = ", ".join(f'"{p}"' for p in names)
        lines.append(f"- {{name: {sw}, role: leaf, speed_gbps: 400{f', ports: [{quoted}]' if listed else ''}}}")
    return load_inventory(io.StringIO("\n".join(lines) + "\n"))


@pytest.mark.parametrize("listed", [True, False], ids=["inventory-names-the-ports", "ports-not-listed"])
async def test_real_switches_over_snmp_are_stored_as_the_ports_the_inventory_names(
    migrated_db: str, snmpsim: str, listed: bool
) -> None:
    paths = _paths()
    assert paths is not None
    expected = {sw: _ethernet_ports(parse_snmprec(p)) for sw, p in paths.items()}
    assert {"Ethernet1/1", "40GE1/0/0", "ge-0/0/1"} <= {p for ports in expected.values() for p in ports}
    fabric = _inventory({sw: sorted(ports) for sw, ports in expected.items()}, listed)
    pool = await create_pool(migrated_db)
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
            await ensure_fabric(conn, fabric)
        pipe = Pipeline(pool, fabric)
        pipe.start()
        targets = [
            SwitchTarget(sw, "snmp", snmpsim, community=SecretStr(sw), timeout_s=3, retries=1, profile="standard")
            for sw in expected
        ]
        collector = SnmpCollector(targets, pipe, CollectorConfig(snmp_interval_s=60), spread_s=0)
        await polled(collector, len(targets), 30)
        await pipe.close()
        assert collector.stats.polls_ok == len(targets)

        stored = await pool.fetch("SELECT switch, port, known FROM ports ORDER BY 1, 2")
        by_switch: dict[str, dict[str, bool]] = {}
        for row in stored:
            by_switch.setdefault(row["switch"], {})[row["port"]] = row["known"]
        for sw, ports in expected.items():
            # every port the switch reports is stored; known exactly when the inventory lists it
            assert by_switch[sw] == dict.fromkeys(ports, listed), sw
            rows = await pool.fetch(
                "SELECT DISTINCT ON (port) port, in_octets FROM port_counters WHERE switch = $1 ORDER BY port, time",
                sw,
            )
            got = {r["port"]: from_int8(r["in_octets"]) for r in rows if r["in_octets"] is not None}
            assert got and got == {p: v for p, v in ports.items() if v >= 0 and p in got}, sw
            assert set(got) == {p for p, v in ports.items() if v >= 0}, sw
        switches = {r["name"]: r["known"] for r in await pool.fetch("SELECT name, known FROM switches")}
        assert switches == dict.fromkeys(expected, True)
    finally:
        await pool.close()
