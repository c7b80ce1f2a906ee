"""The SNMP collector against a real switch's SNMP: snmpsim serving snmpsim-data's Arista DCS-7150S.

The recording (``cloud/arista-dcs-7150s-52-cl.snmprec.bz2``) carries IF-MIB, LLDP-MIB and
IEEE8021-PFC-MIB as EOS 4.19 answered them, quirks included (lldpLocPortNum 97 for
Management1, whose ifIndex is 999001). What the collector reads is checked against the
recording file itself.

snmpsim (tests/support/snmpsim.py) serves the data file as ``self`` (snmpsim's label for its
own engine id): snmpsim then serves it to the empty v2c community and to SNMPv3 requests with
an empty context name, which lets gufo-snmp's SNMPv3 (it sends no context name) be tested.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from pydantic import SecretStr

from collector.config import CollectorConfig, SnmpV3Config
from collector.oids import ETHERNET_IF_TYPES
from collector.records import PFC_TOTAL_WRAP32, TargetState
from collector.snmp import SnmpCollector
from collector.targets import SwitchTarget
from tests.integration.test_collector_snmp import RecordingSink, collecting
from tests.support.snmpsim import column, parse_snmprec, serving
from tests.support.snmpsim import recording as recording_path
from tests.support.waiting import until

RECORDING = "cloud/arista-dcs-7150s-52-cl.snmprec.bz2"
V3_ARGS = ["--v3-user=fabricmon", "--v3-auth-key=fabricmon-auth", "--v3-auth-proto=SHA",
           "--v3-priv-key=fabricmon-priv", "--v3-priv-proto=AES"]  # fmt: skip


def _recording() -> Path | None:
    return recording_path(RECORDING)


pytestmark = pytest.mark.skipif(_recording() is None, reason="snmpsim and snmpsim-data are not installed")


@pytest.fixture(scope="module")
def recording() -> dict[str, int | bytes | str]:
    path = _recording()
    assert path is not None
    return parse_snmprec(path)


@pytest.fixture(scope="module")
def snmpsim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """snmpsim on 127.0.0.1:<port> serving the recording; yields the address."""
    path = _recording()
    assert path is not None
    with serving({"self": path}, tmp_path_factory.mktemp("snmpsim"), V3_ARGS) as address:
        yield address


def _target(
    address: str, version: str, profile: str, auth: str = "fabricmon-auth", priv: str = "fabricmon-priv"
) -> SwitchTarget:
    common: dict[str, Any] = {"timeout_s": 3.0, "retries": 1, "profile": profile}
    if version == "2c":
        return SwitchTarget("arista-1", "snmp", address, community=SecretStr(""), **common)
    v3 = SnmpV3Config(user="fabricmon", auth_key=SecretStr(auth), priv_key=SecretStr(priv), context="")
    return SwitchTarget("arista-1", "snmp", address, snmp_version="3", v3=v3, **common)


@pytest_asyncio.fixture
async def polled_once(
    request: pytest.FixtureRequest, snmpsim: str
) -> AsyncIterator[tuple[RecordingSink, SnmpCollector]]:
    version, backend, profile = request.param
    sink = RecordingSink()
    collector = SnmpCollector([_target(snmpsim, version, profile)], sink, CollectorConfig(snmp_interval_s=60),
                              backend=backend, spread_s=0.0)  # fmt: skip
    async with collecting(collector):
        done = (TargetState.ERROR, TargetState.UNREACHABLE)
        await until(lambda: bool(sink.lldp) or sink.state("arista-1") in done, 30)
    yield sink, collector


@pytest.mark.parametrize(
    "polled_once",
    [("2c", "auto", "arista-eos"), ("3", "auto", "standard"), ("2c", "pysnmp", "standard")],
    indirect=True,
    ids=["v2c-gufo", "v3-gufo", "v2c-pysnmp"],
)
async def test_a_recorded_arista_is_read_like_the_recording(
    polled_once: tuple[RecordingSink, SnmpCollector], recording: dict[str, int | bytes | str]
) -> None:
    sink, collector = polled_once
    assert sink.state("arista-1") == TargetState.CONNECTED, sink.states["arista-1"]
    rec = recording
    names = {i: v.decode() for i, v in column(rec, "1.3.6.1.2.1.31.1.1.1.1").items() if isinstance(v, bytes)}
    types = column(rec, "1.3.6.1.2.1.2.2.1.3")
    fabric_ports = {names[i] for i, t in types.items() if t in ETHERNET_IF_TYPES}
    got = sink.latest("arista-1")
    assert set(got) == fabric_ports  # Ethernet1-52, Management1, Port-Channel1; no VLANs, loopbacks
    assert {"Ethernet1", "Ethernet52", "Management1", "Port-Channel1"} <= set(got)
    hc_in, hc_out = column(rec, "1.3.6.1.2.1.31.1.1.1.6"), column(rec, "1.3.6.1.2.1.31.1.1.1.10")
    ucast_in, speed = column(rec, "1.3.6.1.2.1.31.1.1.1.7"), column(rec, "1.3.6.1.2.1.31.1.1.1.15")
    oper, errors = column(rec, "1.3.6.1.2.1.2.2.1.8"), column(rec, "1.3.6.1.2.1.2.2.1.14")
    requests, indications = column(rec, "1.3.111.2.802.1.1.21.1.1.1.2"), column(rec, "1.3.111.2.802.1.1.21.1.1.1.3")
    by_name = {v: i for i, v in names.items()}
    for port, r in got.items():
        i = by_name[port]
        assert (r.in_octets, r.out_octets, r.in_unicast_pkts) == (hc_in[i], hc_out[i], ucast_in[i]), port
        assert r.speed_bps == int(speed[i]) * 1_000_000 and r.oper_up is (oper[i] == 1), port
        assert r.in_errors == errors[i] and "in_errors" in r.wrap32
        assert r.pfc_tx is None and r.pfc_rx is None  # EOS has IEEE8021-PFC-MIB totals only
        if isinstance(requests.get(i), int):
            assert r.pfc_tx_total == requests[i] and PFC_TOTAL_WRAP32 in r.wrap32, port
        if isinstance(indications.get(i), int):
            assert r.pfc_rx_total == indications[i], port
    assert got["Ethernet2"].in_octets == 2993597393618  # a real counter, not a zero
    uptime = rec["1.3.6.1.2.1.1.3.0"]
    assert isinstance(uptime, int)
    boot = got["Ethernet1"].boot_ns
    assert boot is not None and abs(time.time_ns() - uptime * 10_000_000 - boot) < 30 * 10**9

    lldp = {r.port: r for r in sink.lldp}
    assert "Management1" in lldp  # lldpLocPortNum 97, not its ifIndex 999001
    for port in ("Ethernet47", "Ethernet48"):
        (n,) = lldp[port].neighbors
        assert n.system_name == "ZJ-BP-Bak-Arista" and n.chassis_id == "44:4c:a8:31:3e:df"
    assert lldp["Ethernet47"].neighbors[0].port_id == "Ethernet23"
    assert lldp["Ethernet48"].neighbors[0].port_id == "Ethernet24"
    assert sum(1 for r in lldp.values() if r.neighbors) == 2
    assert collector.stats.polls_ok == 1


@pytest.mark.parametrize(("auth", "priv"), [("wrong-auth-key", "fabricmon-priv"), ("fabricmon-auth", "wrong-priv-key")])
async def test_gufo_v3_wrong_key_is_an_error(snmpsim: str, auth: str, priv: str) -> None:
    sink = RecordingSink()
    collector = SnmpCollector([_target(snmpsim, "3", "arista-eos", auth, priv)], sink,
                              CollectorConfig(snmp_interval_s=60), spread_s=0.0)  # fmt: skip
    async with collecting(collector):
        await until(lambda: sink.state("arista-1") == TargetState.ERROR, 20)
    assert collector.stats.backends == {"gufo": 1}
    detail = sink.states["arista-1"][-1][1] or ""
    assert "authentication failed" in detail and "'fabricmon'" in detail and "wrong" not in detail.split(":")[0]
