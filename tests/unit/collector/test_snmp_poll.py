"""SNMP decoding pieces with no network: sysUpTime epochs, LLDP port mapping, frame checks, backends."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from pydantic import SecretStr

from collector.config import SnmpV3Config
from collector.oids import PROFILES, Column, profile_for
from collector.records import PortReading
from collector.snmp_client import SnmpClient, choose_backend
from collector.snmp_lldp import identifier, local_ports, neighbors, text
from collector.snmp_poll import TICK_NS, UPTIME_WRAP_NS, SwitchPoller, UptimeClock, wrap32_set
from collector.snmp_pysnmp import plausible_snmp
from collector.snmp_walk import Value, Walked, walk_columns
from collector.targets import SwitchTarget
from tests.unit.collector.test_snmp_walk import FakeAgent

Columns = dict[str, dict[str, Value]]

T0 = 1_767_225_600_000_000_000


def test_uptime_clock_ignores_jitter_and_keeps_the_boot_across_a_wrap() -> None:
    clock = UptimeClock()
    clock.update(100_000, T0)
    boot = clock.boot_ns
    assert boot == T0 - 100_000 * TICK_NS
    clock.update(100_000 + 6000, T0 + 60 * 10**9 + 300_000_000)  # 60 s later, 0.3 s of round trip
    assert clock.boot_ns == boot and clock.epoch_ns == boot
    # sysUpTime wrapped at 2^32 centiseconds: a new epoch, the same boot
    later = boot + UPTIME_WRAP_NS + 50 * TICK_NS
    clock.update(50, later)
    assert clock.boot_ns == boot and clock.epoch_ns == boot + UPTIME_WRAP_NS
    assert clock.stamp(10, later) == boot + UPTIME_WRAP_NS + 10 * TICK_NS
    # a TimeStamp from before the wrap lands before it, not 497 days ahead
    assert clock.stamp((1 << 32) - 100, later) == boot + ((1 << 32) - 100) * TICK_NS


def test_uptime_clock_sees_a_reboot() -> None:
    clock = UptimeClock()
    clock.update(10_000_000, T0)
    clock.update(500, T0 + 30 * 10**9)
    assert clock.boot_ns == T0 + 30 * 10**9 - 500 * TICK_NS


def test_lldp_local_ports_follow_the_port_id_before_the_number() -> None:
    # Arista EOS: EthernetN is lldpLocPortNum N = ifIndex N, Management1 is 97 (ifIndex 999001)
    names = {"1": "Ethernet1", "2": "Ethernet2", "999001": "Management1", "97": "Vlan97"}
    loc: Columns = {
        "id_subtype": {"1": 5, "2": 5, "97": 5},
        "port_id": {"1": b"Ethernet1", "2": b"Ethernet2", "97": b"Management1"},
        "port_desc": {"1": b"", "2": b"", "97": b""},
    }
    assert local_ports(loc, names, {}) == {"1": "Ethernet1", "2": "Ethernet2", "97": "Management1"}
    # a MAC port id: the description names the port, else the number is the ifIndex
    loc = {"id_subtype": {"5": 3, "6": 3}, "port_id": {"5": b"\x00\x11\x22\x33\x44\x55"}, "port_desc": {"5": b"Eth5"}}
    assert local_ports(loc, {"5": "Eth5", "6": "Eth6"}, {}) == {"5": "Eth5", "6": "Eth6"}
    # interfaceAlias subtype maps through ifAlias
    loc = {"id_subtype": {"3": 1}, "port_id": {"3": b"uplink-a"}}
    assert local_ports(loc, {"3": "et3"}, {"3": "uplink-a"}) == {"3": "et3"}


def test_lldp_neighbors_group_by_local_port_in_rem_index_order() -> None:
    rem: Columns = {
        "chassis_subtype": {"0.47.2": 4, "0.47.1": 7},
        "chassis_id": {"0.47.2": bytes.fromhex("444ca8313edf"), "0.47.1": b"chassis-x"},
        "port_subtype": {"0.47.2": 5, "0.47.1": 3},
        "port_id": {"0.47.2": b"Ethernet23", "0.47.1": bytes.fromhex("0a0b0c0d0e0f")},
        "system_name": {"0.47.2": b"ZJ-BP-Bak-Arista", "0.47.1": b"peer"},
        "port_desc": {"0.47.2": b"", "bad": b"x"},
    }
    by_port, invalid = neighbors(rem)
    assert invalid == 0
    first, second = by_port["47"]
    assert (first.system_name, first.port_id, first.chassis_id) == ("peer", "0a:0b:0c:0d:0e:0f", "chassis-x")
    assert (second.system_name, second.port_id, second.chassis_id) == (
        "ZJ-BP-Bak-Arista",
        "Ethernet23",
        "44:4c:a8:31:3e:df",
    )
    assert neighbors({"system_name": {"1.2": b"x"}})[1] == 1


def test_identifier_and_text() -> None:
    assert identifier(5, b"\x01\x0a\x00\x00\x01", mac=4, network=5) == "10.0.0.1"
    assert identifier(7, b"\xff\xfe\x00", mac=4, network=5) == "ff:fe:00"
    assert text(b"Ethernet1\x00 ") == "Ethernet1" and text(None) == "" and text(5) == "5"


def test_plausible_snmp_frames() -> None:
    v2c = bytes.fromhex("302902010104") + b"x" * 37
    assert plausible_snmp(bytes([0x30, len(v2c) - 2]) + v2c[2:])
    long_form = bytes([0x30, 0x82, 0x01, 0x00, 0x02, 0x01, 0x03]) + b"\x00" * 253
    assert plausible_snmp(long_form)
    assert not plausible_snmp(b"\x30\x05\x02\x01\x00\x00\x00")  # SNMPv1: no 64-bit counters
    assert not plausible_snmp(b"garbage that is long enough")
    assert not plausible_snmp(bytes([0x30, 0x10, 0x02, 0x01, 0x01]))  # length disagrees


def test_wrap32_sets_are_shared() -> None:
    assert wrap32_set("pfc_total") is wrap32_set("pfc_total")
    assert {"in_errors", "out_discards", "in_fcs_errors", "pfc_total"} <= wrap32_set("pfc_total")


def test_profiles_and_backends() -> None:
    assert profile_for("openconfig") is PROFILES["standard"]
    assert PROFILES["sonic-201803"].cpfc_inverted and not PROFILES["sonic"].cpfc_inverted
    v3 = SnmpV3Config(user="u", auth_key=SecretStr("k" * 8), priv_key=SecretStr("p" * 8))
    plain = SwitchTarget("s", "snmp", "h:161", community=SecretStr("c"))
    assert choose_backend(plain) == "gufo" and choose_backend(plain, "pysnmp") == "pysnmp"
    assert choose_backend(SwitchTarget("s", "snmp", "h:161", snmp_version="3", v3=v3)) == "gufo"
    with_context = v3.model_copy(update={"context": "s"})
    assert choose_backend(SwitchTarget("s", "snmp", "h:161", snmp_version="3", v3=with_context)) == "pysnmp"


# --- a whole poll against an in-memory agent ------------------------------------------------

IFX, IF, PAUSE = "1.3.6.1.2.1.31.1.1.1", "1.3.6.1.2.1.2.2.1", "1.3.6.1.2.1.10.7.10.1"
CPFC, IEEE = "1.3.6.1.4.1.9.9.813.1.2.1", "1.3.111.2.802.1.1.21.1.1.1"


def _agent_mib(*, hc: bool = True, cisco: bool = True) -> dict[tuple[int, ...], Value]:
    """Three interfaces: a 400G port, a 100M port, a VLAN (not a fabric port)."""
    rows: dict[str, Value] = {"1.3.6.1.2.1.1.3.0": 360_000, "1.3.6.1.2.1.2.1.0": 3}
    ports = {1: ("Ethernet1", 6, 400_000), 2: ("Ethernet2", 6, 100), 3: ("Vlan10", 136, 0)}
    for i, (name, if_type, mbps) in ports.items():
        rows |= {
            f"{IFX}.1.{i}": name.encode(),
            f"{IFX}.18.{i}": b"",
            f"{IF}.2.{i}": name.encode(),
            f"{IF}.3.{i}": if_type,
        }
        rows |= {f"{IF}.8.{i}": 1, f"{IF}.9.{i}": 100, f"{IF}.14.{i}": 7 * i, f"{IFX}.15.{i}": mbps, f"{IFX}.19.{i}": 0}
        rows |= {f"{IF}.10.{i}": 1000 * i, f"{IF}.16.{i}": 2000 * i, f"{IF}.11.{i}": 10 * i, f"{IF}.17.{i}": 20 * i}
        if hc:
            rows |= {f"{IFX}.6.{i}": 10**15 * i, f"{IFX}.10.{i}": 2 * 10**15 * i}
            rows |= {f"{IFX}.7.{i}": 10**12 * i, f"{IFX}.11.{i}": 2 * 10**12 * i}
            rows |= {f"{PAUSE}.5.{i}": 3 * i, f"{PAUSE}.6.{i}": 4 * i}
        else:
            rows |= {f"{PAUSE}.3.{i}": 3 * i, f"{PAUSE}.4.{i}": 4 * i}
        if cisco:
            for p in range(8):
                rows |= {f"{CPFC}.2.{i}.{p}": 100 * i + p, f"{CPFC}.3.{i}.{p}": 1000 * i + p}
        rows |= {f"{IEEE}.2.{i}": 5 * i, f"{IEEE}.3.{i}": 50 * i}
    return {tuple(int(x) for x in k.split(".")): v for k, v in rows.items()}


class FakeClient(SnmpClient):
    backend = "fake"

    def __init__(self, mib: dict[tuple[int, ...], Value]) -> None:
        super().__init__(SwitchTarget("sw", "snmp", "h:161", community=SecretStr("c")), lambda what, n: None)
        self.agent = FakeAgent(mib)

    async def get(self, oids: Sequence[str]) -> dict[str, Value]:
        found = {o: self.agent.mib.get(tuple(int(x) for x in o.split("."))) for o in oids}
        return {o: v for o, v in found.items() if v is not None}

    async def walk(self, columns: Sequence[Column], rows_hint: int | None = None) -> Walked:
        return await walk_columns(
            self.agent.bulk, [c.oid for c in columns], [c.varbind_bytes for c in columns], budget_bytes=4000
        )


async def _poll(mib: dict[tuple[int, ...], Value], profile: str = "standard") -> dict[str, PortReading]:
    invalid: list[str] = []
    poller = SwitchPoller("sw", FakeClient(mib), PROFILES[profile], 60.0, lambda what, n: invalid.append(what))
    result = await poller.poll(asyncio.Semaphore(1))
    assert not invalid, invalid
    return {r.port: r for r in result.ports}


async def test_a_poll_reads_64_bit_counters_and_pfc_per_priority() -> None:
    got = await _poll(_agent_mib())
    assert set(got) == {"Ethernet1", "Ethernet2"}  # the VLAN is not a fabric port
    e1 = got["Ethernet1"]
    assert (e1.in_octets, e1.out_octets, e1.in_errors, e1.speed_bps) == (10**15, 2 * 10**15, 7, 400 * 10**9)
    assert e1.pfc_tx == tuple(100 + p for p in range(8)) and e1.pfc_rx == tuple(1000 + p for p in range(8))
    assert e1.wrap32 == wrap32_set() and e1.pfc_tx_total is None and e1.in_pause_frames == 3
    assert e1.boot_ns is not None and e1.last_clear_ns == e1.boot_ns
    assert e1.last_change_ns == e1.boot_ns + 100 * TICK_NS


async def test_sonic_201803_pfc_directions_are_swapped() -> None:
    e1 = (await _poll(_agent_mib(), "sonic-201803"))["Ethernet1"]
    assert e1.pfc_tx == tuple(1000 + p for p in range(8)) and e1.pfc_rx == tuple(100 + p for p in range(8))


async def test_ieee_totals_when_there_is_no_cisco_table() -> None:
    e2 = (await _poll(_agent_mib(cisco=False)))["Ethernet2"]
    assert e2.pfc_tx is None and (e2.pfc_tx_total, e2.pfc_rx_total) == (10, 100)
    assert "pfc_total" in e2.wrap32


async def test_32_bit_octets_are_refused_on_fast_ports_only(caplog: pytest.LogCaptureFixture) -> None:
    got = await _poll(_agent_mib(hc=False))
    fast, slow = got["Ethernet1"], got["Ethernet2"]
    assert fast.in_octets is None and fast.out_octets is None and fast.in_unicast_pkts is None
    assert (slow.in_octets, slow.out_octets, slow.in_unicast_pkts) == (2000, 4000, 20)  # 100M: no wrap in 60 s
    assert {"in_octets", "out_octets", "in_unicast_pkts", "in_pause_frames"} <= slow.wrap32
    assert slow.in_pause_frames == 6
    assert "refusing 32-bit octet/packet counters on 1 fast ports" in caplog.text
