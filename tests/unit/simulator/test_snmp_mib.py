"""The simulator's SNMP MIB view and BER codec: OID order, lookups, values, PDU assembly."""

from __future__ import annotations

import bisect
import contextlib
import itertools
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyasn1.codec.ber import decoder as ber_decoder  # no stubs
from pyasn1.codec.ber import encoder as ber_encoder
from pysnmp.proto import api

from simulator import snmp_ber as ber
from simulator.snmp_agent import SnmpAgent
from simulator.snmp_mib import NO_SUCH_INSTANCE, NO_SUCH_OBJECT, MibCache, SwitchMib
from simulator.view import LldpNeighbor, PortCounters, SwitchInfo

BOOT = 1_700_000_000_000_000_000
NOW = BOOT + 123_456_780_000_000  # 1234567.8 s after boot
IF_X = (1, 3, 6, 1, 2, 1, 31, 1, 1, 1)
IF = (1, 3, 6, 1, 2, 1, 2, 2, 1)
SYS_UPTIME = (1, 3, 6, 1, 2, 1, 1, 3)
LLDP_REM = (1, 0, 8802, 1, 1, 2, 1, 4, 1, 1)
CPFC_PRIO = (1, 3, 6, 1, 4, 1, 9, 9, 813, 1, 2, 1)
IEEE_PFC = (1, 3, 111, 2, 802, 1, 1, 21, 1, 1, 1)


def port(i: int, **kw: object) -> PortCounters:
    base = PortCounters(
        name=f"swp{i}",
        if_index=i,
        description=f"peer-{i}:swp1",
        admin_up=True,
        oper_up=i != 3,
        speed_bps=400_000_000_000,
        last_change_ns=BOOT + 10**9 * i,
        last_clear_ns=BOOT,
        in_octets=2**40 + i,
        out_octets=2**33 + i,
        in_unicast_pkts=1000 + i,
        out_unicast_pkts=2000 + i,
        in_multicast_pkts=30 + i,
        out_multicast_pkts=40 + i,
        in_broadcast_pkts=5,
        out_broadcast_pkts=6,
        in_errors=7,
        out_errors=8,
        in_discards=9,
        out_discards=10,
        in_fcs_errors=11 * i,
        carrier_transitions=1,
        in_pause_frames=12,
        out_pause_frames=13,
        pfc_rx=tuple(100 * i + p for p in range(8)),
        pfc_tx=tuple(1000 * i + p for p in range(8)),
    )
    return replace(base, **kw)  # type: ignore[arg-type]


class FakeView:
    """A hand-made FabricView: two switches, a few ports, a settable clock."""

    def __init__(self) -> None:
        self.now = NOW
        self.infos = {
            "sw-a": SwitchInfo("sw-a", "spine", BOOT, True),
            "sw-b": SwitchInfo("sw-b", "leaf", BOOT, False),
        }
        # ifIndex order differs from list order on purpose
        self.port_list = [port(2), port(1), port(3, speed_bps=800_000_000_000), port(10)]
        self.neighbors = [
            LldpNeighbor("swp1", 1, "02:00:00:00:00:01", "lf-1", "swp65", "lf-1:swp65"),
            LldpNeighbor("swp1", 1, "not-a-mac", "srv-1", "nic3", "nic3 GPU NIC"),
            LldpNeighbor("swp10", 10, "02-00-00-00-00-0a", "lf-2", "swp66", ""),
        ]
        self.port_calls = 0

    def switch_names(self) -> list[str]:
        return list(self.infos)

    def switch(self, name: str) -> SwitchInfo | None:
        return self.infos.get(name)

    def ports(self, switch: str, now_ns: int | None = None) -> list[PortCounters]:
        self.port_calls += 1
        return list(self.port_list) if switch in self.infos else []

    def lldp(self, switch: str) -> list[LldpNeighbor]:
        return list(self.neighbors) if switch in self.infos else []

    def now_ns(self) -> int:
        return self.now

    def add_listener(self, listener: object) -> None:
        pass

    def remove_listener(self, listener: object) -> None:
        pass


@pytest.fixture
def mib() -> SwitchMib:
    m = SwitchMib.from_view(FakeView(), "sw-a")
    assert m is not None
    return m


def all_oids(mib: SwitchMib) -> list[tuple[int, ...]]:
    return [mib.instance(p)[0] for p in mib.positions(())]


def value(mib: SwitchMib, oid: tuple[int, ...]) -> object:
    pos = mib.lookup(oid)
    assert not isinstance(pos, int), oid
    return mib.instance(pos)[2]


def test_walk_is_strictly_increasing_and_agrees_with_lookup(mib: SwitchMib) -> None:
    positions = list(mib.positions(()))
    oids = [mib.instance(p)[0] for p in positions]
    assert all(a < b for a, b in itertools.pairwise(oids))
    assert len(oids) == len(set(oids)) > 4 * 50
    for pos, oid, following in zip(positions, oids, [*positions[1:], None], strict=True):
        assert mib.lookup(oid) == pos
        assert mib.next_position(oid) == following
        name, _ = mib.encoded(pos)
        assert name == ber.encode_oid(oid)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 2**32 - 1), max_size=14), st.sampled_from([(), (1,), (1, 3, 6, 1, 2, 1), IF_X, LLDP_REM])
)
def test_next_position_is_the_least_greater_oid(tail: list[int], prefix: tuple[int, ...]) -> None:
    m = SwitchMib.from_view(FakeView(), "sw-a")
    assert m is not None
    oids = all_oids(m)
    probe = prefix + tuple(tail)
    k = bisect.bisect_right(oids, probe)
    pos = m.next_position(probe)
    assert (None if pos is None else m.instance(pos)[0]) == (oids[k] if k < len(oids) else None)


def test_lookup_tells_no_such_object_from_no_such_instance(mib: SwitchMib) -> None:
    assert mib.lookup((1, 3, 6, 1, 2, 1, 1, 9, 0)) == NO_SUCH_OBJECT  # sysORTable: not served
    assert mib.lookup(IF) == NO_SUCH_OBJECT  # the entry, not a column
    assert mib.lookup((*IF, 6, 1)) == NO_SUCH_OBJECT  # ifPhysAddress is not served
    assert mib.lookup((1, 3)) == NO_SUCH_OBJECT
    assert mib.lookup(SYS_UPTIME) == NO_SUCH_INSTANCE
    assert mib.lookup((*SYS_UPTIME, 0, 1)) == NO_SUCH_INSTANCE
    assert mib.lookup((*IF_X, 6, 99)) == NO_SUCH_INSTANCE
    assert mib.lookup((*IF_X, 6)) == NO_SUCH_INSTANCE


def test_values_follow_the_mib_syntaxes(mib: SwitchMib) -> None:
    assert value(mib, (*SYS_UPTIME, 0)) == 123_456_78
    assert value(mib, (1, 3, 6, 1, 2, 1, 2, 1, 0)) == 4  # ifNumber
    assert [mib.instance(p)[0][-1] for p in mib.positions((*IF, 1)) if mib.instance(p)[0][:10] == (*IF, 1)] == [
        1,
        2,
        3,
        10,
    ]
    pos = mib.lookup((*IF, 10, 1))  # ifInOctets: Counter32, wraps on the wire
    assert not isinstance(pos, int)
    assert mib.encoded(pos)[1] == ber.encode_value(ber.COUNTER32, 1)
    assert value(mib, (*IF_X, 6, 1)) == 2**40 + 1  # ifHCInOctets
    pos = mib.lookup((*IF, 5, 3))  # ifSpeed of an 800G port: Gauge32 capped
    assert not isinstance(pos, int)
    assert mib.encoded(pos)[1] == ber.encode_value(ber.GAUGE32, 2**32 - 1) == b"\x42\x05\x00\xff\xff\xff\xff"
    assert value(mib, (*IF_X, 15, 3)) == 800_000  # ifHighSpeed, Mb/s
    assert value(mib, (*IF, 8, 3)) == 2  # ifOperStatus down
    assert value(mib, (*IF, 9, 2)) == 200  # ifLastChange, centiseconds since boot
    assert value(mib, (*IF_X, 18, 2)) == b"peer-2:swp1"
    assert value(mib, (1, 3, 6, 1, 2, 1, 10, 7, 2, 1, 3, 10)) == 110  # dot3StatsFCSErrors


def test_lldp_remote_table_index_and_subtypes(mib: SwitchMib) -> None:
    assert value(mib, (*LLDP_REM, 4, 0, 1, 1)) == 4  # macAddress
    assert value(mib, (*LLDP_REM, 5, 0, 1, 1)) == bytes([2, 0, 0, 0, 0, 1])
    assert value(mib, (*LLDP_REM, 4, 0, 1, 2)) == 7  # local
    assert value(mib, (*LLDP_REM, 5, 0, 1, 2)) == b"not-a-mac"
    assert value(mib, (*LLDP_REM, 9, 0, 1, 2)) == b"srv-1"
    assert value(mib, (*LLDP_REM, 7, 0, 10, 1)) == b"swp66"
    assert value(mib, (*LLDP_REM, 5, 0, 10, 1)) == bytes([2, 0, 0, 0, 0, 10])
    assert mib.lookup((*LLDP_REM, 9, 0, 2, 1)) == NO_SUCH_INSTANCE


def test_pfc_tables_requests_are_sent_indications_received(mib: SwitchMib) -> None:
    for prio in range(8):
        assert value(mib, (*CPFC_PRIO, 2, 10, prio)) == 10_000 + prio  # cpfcIfPriorityRequests = pfc_tx
        assert value(mib, (*CPFC_PRIO, 3, 10, prio)) == 1000 + prio  # cpfcIfPriorityIndications = pfc_rx
    assert mib.lookup((*CPFC_PRIO, 2, 10, 8)) == NO_SUCH_INSTANCE
    assert value(mib, (*IEEE_PFC, 2, 2)) == sum(2000 + p for p in range(8))
    assert value(mib, (*IEEE_PFC, 3, 2)) == sum(200 + p for p in range(8))
    assert value(mib, (1, 3, 6, 1, 4, 1, 9, 9, 813, 1, 1, 1, 1, 2)) == sum(2000 + p for p in range(8))


def test_cache_keeps_a_snapshot_for_its_ttl_and_drops_it_on_reboot() -> None:
    view = FakeView()
    clock = [0.0]
    cache = MibCache(view, ttl_s=0.5, clock=lambda: clock[0])
    first = cache.get("sw-a")
    clock[0] = 0.4
    assert cache.get("sw-a") is first
    assert cache.get("sw-a", replace(view.infos["sw-a"], boot_time_ns=BOOT + 1)) is not first
    clock[0] = 1.0
    second = cache.get("sw-a")
    assert second is not first and cache.builds == 3
    assert cache.get("nope") is None


@pytest.mark.parametrize(
    "oid", [(0, 0), (1, 3, 6, 1), (2, 999, 3), (1, 3, 6, 1, 4, 1, 2**32 - 1, 128, 16383, 16384), (1, 0, 8802, 1)]
)
def test_oid_codec_round_trips_and_matches_pyasn1(oid: tuple[int, ...]) -> None:
    encoded = ber.encode_oid(oid)
    assert encoded == ber_encoder.encode(api.v2c.ObjectIdentifier(oid))
    assert ber.decode_oid(encoded[2:]) == oid


def pysnmp_request(pdu_cls: type, oids: Sequence[tuple[int, ...]], community: str = "sw-a", **bulk: int) -> bytes:
    pdu = pdu_cls()
    api.v2c.apiPDU.set_defaults(pdu)
    api.v2c.apiPDU.set_request_id(pdu, 4242)
    api.v2c.apiPDU.set_varbinds(pdu, [(o, api.v2c.Null("")) for o in oids])
    if bulk:
        api.v2c.apiBulkPDU.set_non_repeaters(pdu, bulk["non_repeaters"])
        api.v2c.apiBulkPDU.set_max_repetitions(pdu, bulk["max_repetitions"])
    msg = api.v2c.Message()
    api.v2c.apiMessage.set_defaults(msg)
    api.v2c.apiMessage.set_community(msg, community)
    api.v2c.apiMessage.set_pdu(msg, pdu)
    return bytes(ber_encoder.encode(msg))


def pysnmp_decode(data: bytes) -> tuple[int, int, list[tuple[tuple[int, ...], Any]]]:
    msg, rest = ber_decoder.decode(data, asn1Spec=api.v2c.Message())
    assert not rest
    pdu = api.v2c.apiMessage.get_pdu(msg)
    assert api.v2c.apiPDU.get_request_id(pdu) == 4242
    vbs = [(tuple(n), v) for n, v in api.v2c.apiPDU.get_varbinds(pdu)]
    return int(api.v2c.apiPDU.get_error_status(pdu)), int(api.v2c.apiPDU.get_error_index(pdu)), vbs


def answer(view: FakeView, data: bytes, max_response_bytes: int = 65000) -> bytes:
    agent = SnmpAgent(view, max_response_bytes=max_response_bytes)
    req = ber.decode_request(data)
    return agent._answer(req, agent.cache.get(req.community.decode()))


def test_get_request_decodes_and_answers_like_pysnmp_expects() -> None:
    data = pysnmp_request(api.v2c.GetRequestPDU, [(*SYS_UPTIME, 0), (*IF_X, 6, 2), (1, 3, 6, 1, 2, 1, 1, 9, 0)])
    req = ber.decode_request(data)
    assert (req.version, req.community, req.pdu_type) == (1, b"sw-a", ber.GET)
    status, _, vbs = pysnmp_decode(answer(FakeView(), data))
    assert status == 0
    assert int(vbs[0][1]) == 123_456_78 and vbs[0][1].tagSet == api.v2c.TimeTicks.tagSet
    assert int(vbs[1][1]) == 2**40 + 2 and vbs[1][1].tagSet == api.v2c.Counter64.tagSet
    assert vbs[2][1].tagSet == api.v2c.NoSuchObject.tagSet


def test_get_bulk_repeats_truncates_and_stops_past_the_end() -> None:
    view = FakeView()
    data = pysnmp_request(
        api.v2c.GetBulkRequestPDU, [(*SYS_UPTIME,), (*IF_X, 6), (*IEEE_PFC, 3, 3)], non_repeaters=1, max_repetitions=5
    )
    status, _, vbs = pysnmp_decode(answer(view, data))
    assert status == 0
    names = [n for n, _ in vbs]
    assert names[0] == (*SYS_UPTIME, 0)
    # two repeaters interleaved; the second runs past the end (IEEE PFC is the last object)
    assert names[1::2] == [(*IF_X, 6, i) for i in (1, 2, 3, 10)] + [(*IF_X, 7, 1)]
    assert names[2] == (*IEEE_PFC, 3, 10)
    assert [v.tagSet for _, v in vbs[4::2]] == [api.v2c.EndOfMibView.tagSet] * 4
    assert names[4::2] == [(*IEEE_PFC, 3, 10)] * 4  # endOfMibView repeats the last name
    # only past-the-end repeaters left: the response stops early
    data = pysnmp_request(api.v2c.GetBulkRequestPDU, [(*IEEE_PFC, 3, 10)], non_repeaters=0, max_repetitions=50)
    assert len(pysnmp_decode(answer(view, data))[2]) == 1
    # a small message budget truncates the repetitions, never the message
    data = pysnmp_request(api.v2c.GetBulkRequestPDU, [IF_X], non_repeaters=0, max_repetitions=1000)
    short = answer(view, data, max_response_bytes=400)
    assert len(short) <= 400
    status, _, vbs = pysnmp_decode(short)
    assert status == 0 and 5 < len(vbs) < 20


def test_get_that_does_not_fit_answers_too_big_and_set_answers_no_access() -> None:
    data = pysnmp_request(api.v2c.GetRequestPDU, [(*IF_X, 18, i) for i in (1, 2, 3, 10)] * 10)
    status, index, vbs = pysnmp_decode(answer(FakeView(), data, max_response_bytes=200))
    assert (status, index, vbs) == (1, 0, [])  # tooBig
    data = pysnmp_request(api.v2c.SetRequestPDU, [(1, 3, 6, 1, 2, 1, 1, 5, 0)])
    status, index, vbs = pysnmp_decode(answer(FakeView(), data))
    assert (status, index, [n for n, _ in vbs]) == (6, 1, [(1, 3, 6, 1, 2, 1, 1, 5, 0)])  # noAccess


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_only_ever_raises_ber_error(data: bytes) -> None:
    with contextlib.suppress(ber.BerError):
        ber.decode_request(data)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 40), st.binary(min_size=1, max_size=8))
def test_truncated_or_corrupted_requests_raise_ber_error(cut: int, junk: bytes) -> None:
    data = pysnmp_request(api.v2c.GetNextRequestPDU, [(*IF_X, 6), LLDP_REM])
    for bad in (data[: len(data) - cut - 1], data[:cut] + junk + data[cut + len(junk) :]):
        try:
            req = ber.decode_request(bad)
        except ber.BerError:
            continue
        assert all(isinstance(o, tuple) for o in req.oids)
