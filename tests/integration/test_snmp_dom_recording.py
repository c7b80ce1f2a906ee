"""Transceiver DOM from a real switch's recording: an Arista DCS-7150S (snmpsim-data
``cloud/arista-dcs-7150s-52-cl``), served by snmpsim on UDP loopback to the real SNMP collector.

The recording's shapes: each transceiver is a container(5) "Xcvr for EthernetN" in "Xcvr Slot N";
its temperature and voltage sensors hang off it, its bias, tx and rx power sensors off a
module(9) "Lane 0"; power is watts at milli scale, precision 4 (4025 = 0.4025 mW). The port
entities (class port(10), "EthernetN") sit in a separate "Port Container", and the recording has
no entAliasMappingTable: nothing the agent serves links a sensor to an interface, so the
collector maps none of them (their names say "for Ethernet5"; names are never read for that).

A second copy adds what an agent that maps its transceivers serves: entAliasMappingIdentifier
rows from each "Xcvr for EthernetN" to ``ifIndex.N`` (written here from the recording's own
ifName table). Then every transceiver with DOM sensors becomes one sample under its ifName,
with the recorded values.
"""

from __future__ import annotations

import asyncio
import bz2
import contextlib
import math
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from pydantic import SecretStr

from collector.config import CollectorConfig
from collector.records import LldpReading, PortReading, TargetState
from collector.snmp import SnmpCollector, open_poller
from collector.snmp_dom_poller import REFRESH_POLLS
from collector.snmp_pysnmp import PysnmpEngines
from collector.targets import SwitchTarget
from store.dom import DomSample
from tests.support.snmpsim import column, parse_snmprec, recording, serving
from tests.support.waiting import until

RECORDING = "cloud/arista-dcs-7150s-52-cl.snmprec.bz2"
SUBTREES = ("1.3.6.1.2.1.1", "1.3.6.1.2.1.2", "1.3.6.1.2.1.31", "1.3.6.1.2.1.47", "1.3.6.1.2.1.99")
ENT_DESCR = "1.3.6.1.2.1.47.1.1.1.1.2"
IF_NAME = "1.3.6.1.2.1.31.1.1.1.1"
ALIAS = "1.3.6.1.2.1.47.1.3.2.1.2"
SENSOR_TYPE = "1.3.6.1.2.1.99.1.1.1.1"

pytestmark = pytest.mark.skipif(recording(RECORDING) is None, reason="snmpsim and snmpsim-data are not installed")


def _path() -> Path:
    path = recording(RECORDING)
    assert path is not None
    return path


def _with_alias(src: Path, dst: Path) -> int:
    """The recording plus entAliasMappingTable rows "Xcvr for EthernetN" → ifIndex.N; returns how many."""
    rec = parse_snmprec(src)
    by_name = {v.decode(): i for i, v in column(rec, IF_NAME).items() if isinstance(v, bytes)}
    rows = []
    for entity, descr in column(rec, ENT_DESCR).items():
        text = descr.decode() if isinstance(descr, bytes) else ""
        if text.startswith("Xcvr for ") and text[9:] in by_name:
            rows.append((tuple(int(x) for x in f"{entity}.0".split(".")), f"1.3.6.1.2.1.2.2.1.1.{by_name[text[9:]]}"))
    with bz2.open(src, "rt", encoding="latin-1") as f:
        lines = f.read().splitlines()
    lines += [f"{ALIAS}.{'.'.join(map(str, index))}|6|{oid}" for index, oid in sorted(rows)]
    lines.sort(key=lambda line: tuple(int(x) for x in line.split("|", 1)[0].split(".") if x.isdigit()))
    with bz2.open(dst, "wt", encoding="latin-1") as f:
        f.write("\n".join(lines) + "\n")
    return len(rows)


@pytest.fixture(scope="module")
def arista(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """snmpsim serving the recording as ``arista`` and the copy with alias rows as ``aliased``."""
    base = tmp_path_factory.mktemp("arista")
    aliased = base / "aliased.snmprec.bz2"
    n = _with_alias(_path(), aliased)
    with serving({"arista": _path(), "aliased": aliased}, base / "sim", subtrees=SUBTREES) as address:
        yield address, n


class DomRecorder:
    """A Sink and DomSink keeping the DOM samples."""

    def __init__(self) -> None:
        self.dom: list[DomSample] = []
        self.invalid: Counter[str] = Counter()

    async def put_ports(self, readings: Sequence[PortReading]) -> None:
        pass

    async def put_lldp(self, readings: Sequence[LldpReading]) -> None:
        pass

    async def put_dom(self, samples: Sequence[DomSample]) -> None:
        self.dom.extend(samples)

    def set_state(self, switch: str, state: TargetState, detail: str | None = None) -> None:
        pass

    def count_invalid(self, switch: str, what: str, n: int = 1) -> None:
        self.invalid[what] += n


async def _collect(address: str, community: str) -> tuple[DomRecorder, SnmpCollector]:
    sink = DomRecorder()
    target = SwitchTarget("arista", "snmp", address, community=SecretStr(community), timeout_s=3, retries=1,
                          profile="arista-eos")  # fmt: skip
    collector = SnmpCollector([target], sink, CollectorConfig(snmp_interval_s=60), spread_s=0)
    task = asyncio.create_task(collector.run())
    try:  # one counters poll, then the DOM read its own loop makes once the counters came in
        stats = collector.stats
        await until(lambda: stats.dom_reads >= 1 or stats.polls_failed > 0, 30,
                    lambda: f"{stats.polls_ok} polls, {stats.dom_reads} DOM reads")  # fmt: skip
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert collector.stats.polls_ok == 1 and collector.stats.dom_failures == 0
    return sink, collector


async def test_recorded_sensors_without_alias_mapping_map_to_no_port(arista: tuple[str, int]) -> None:
    sink, collector = await _collect(arista[0], "arista")
    assert sink.dom == []  # "DOM RX Power Sensor for Ethernet5" names a port; nothing maps it to one
    rec = parse_snmprec(_path())
    dom_types = sum(1 for v in column(rec, SENSOR_TYPE).values() if v in (5, 6, 8))
    assert not sink.invalid, sink.invalid
    assert collector.stats.dom_unmapped == dom_types
    assert not sink.invalid, sink.invalid


async def test_recorded_transceivers_with_alias_mapping_give_their_values(arista: tuple[str, int]) -> None:
    address, mapped = arista
    sink, _ = await _collect(address, "aliased")
    assert not sink.invalid, sink.invalid
    by_port = {s.port: s for s in sink.dom}
    rec = parse_snmprec(_path())
    with_dom = {
        d.decode()[len("DOM RX Power Sensor for "):]
        for d in column(rec, ENT_DESCR).values()
        if isinstance(d, bytes) and d.startswith(b"DOM RX Power Sensor for ")
    }  # fmt: skip
    assert set(by_port) == with_dom and 0 < len(with_dom) <= mapped
    e5 = by_port["Ethernet5"]  # the recording's own figures for Ethernet5
    assert e5.component == "Xcvr for Ethernet5"
    assert e5.rx_power_dbm == pytest.approx(10 * math.log10(0.4025))
    assert e5.tx_power_dbm == pytest.approx(10 * math.log10(0.6015))
    assert e5.laser_bias_ma == pytest.approx(5.09)
    assert e5.temperature_c == pytest.approx(22.9)
    assert by_port["Ethernet50"].rx_power_dbm == pytest.approx(10 * math.log10(0.0004))  # 4 = 0.4 µW: dark


async def test_the_recordings_entlastchangetime_keeps_the_hourly_check_to_the_status_column(
    arista: tuple[str, int],
) -> None:
    """The recorded agent serves entLastChangeTime (a fixed TimeTicks, as a switch whose modules
    stayed put): the periodic check reads it and the status column, then samples as before."""
    engines = PysnmpEngines()
    target = SwitchTarget("arista", "snmp", arista[0], community=SecretStr("aliased"), timeout_s=3, retries=1,
                          profile="arista-eos")  # fmt: skip
    poller = open_poller(target, engines, 60.0, lambda what, n: None, "auto", 60.0)
    dom, limiter = poller.dom, asyncio.Semaphore(1)
    assert dom is not None
    try:
        await poller.poll(limiter)
        first = await poller.poll_dom(limiter)
        dom.polls = REFRESH_POLLS
        again = await poller.poll_dom(limiter)
    finally:
        await poller.close()
        engines.close()
    assert (dom.refreshes, dom.checks) == (1, 1)
    assert len(first) > 0 and [s.port for s in again] == [s.port for s in first]
