"""The gNMI hot path: hand-built SubscribeResponses in, readings and invalid counts out."""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from typing import Any

import pytest
from pygnmi.spec.v080 import gnmi_pb2

from collector.gnmi_decode import StreamDecoder
from collector.gnmi_values import PortState, Resolver
from collector.profile_load import load_profile
from collector.records import LldpNeighborReading
from wire.protobuf import U64_MAX, varint

SW = "lf-g1-r1"
TS = 1_700_000_000_000_000_000


def path(text: str = "", target: str = "") -> Any:
    p = gnmi_pb2.Path(target=target)
    for part in [x for x in re.split(r"/(?![^\[]*\])", text) if x]:  # not the "/" in [name=ethernet-1/1]
        name, _, rest = part.partition("[")
        keys = dict(kv.split("=", 1) for kv in rest.rstrip("]").split("][")) if rest else {}
        p.elem.add(name=name, key=keys)
    return p


def update(rel: str, **val: Any) -> Any:
    return gnmi_pb2.Update(path=path(rel), val=gnmi_pb2.TypedValue(**val))


def note(prefix: str, *updates: Any, ts: int = TS, deletes: tuple[str, ...] = (), target: str = SW) -> bytes:
    n = gnmi_pb2.Notification(timestamp=ts, prefix=path(prefix, target), update=updates)
    n.delete.extend(path(d) for d in deletes)
    data: bytes = gnmi_pb2.SubscribeResponse(update=n).SerializeToString()
    return data


SYNC: bytes = gnmi_pb2.SubscribeResponse(sync_response=True).SerializeToString()
IF = "/interfaces/interface[name=swp1]"
PFC = "/qos/interfaces/interface[interface-id=swp1]"
LLDP = "/lldp/interfaces/interface[name=swp1]"


class Harness:
    def __init__(self, profile: str = "openconfig", max_bytes: int = 1 << 20, owns_lldp: bool = True) -> None:
        self.invalid: Counter[str] = Counter()
        self.ports: dict[str, PortState] = {}
        self.dec = StreamDecoder(
            SW,
            Resolver(load_profile(profile)),
            self.ports,
            lambda what, n: self.invalid.update({what: n}),
            max_message_bytes=max_bytes,
            owns_lldp=owns_lldp,
        )
        self.dec.begin()

    def feed(self, *messages: bytes) -> tuple[list[Any], list[Any]]:
        for m in messages:
            self.dec.feed(m)
        self.dec.close_group()
        return self.dec.take()


def test_counters_state_and_pfc_merge_into_one_reading_per_port_and_timestamp() -> None:
    h = Harness()
    pfc = [update(f"switch-priority[priority={p}]/state/counters/in-pause-pkts", uint_val=10 + p) for p in range(8)]
    pfc += [update(f"switch-priority[priority={p}]/state/counters/out-pause-pkts", uint_val=20 + p) for p in range(8)]
    ports, _ = h.feed(
        note(
            IF,
            update("state/counters/in-octets", uint_val=U64_MAX),
            update("state/counters/in-errors", uint_val=0),
            update("state/counters/last-clear", uint_val=TS - 5),
            update("state/oper-status", string_val="UP"),
            update("ethernet/state/port-speed", string_val="openconfig-if-ethernet:SPEED_400GB"),
            update("ethernet/state/counters/in-mac-pause-frames", uint_val=7),
            update("state/admin-status", string_val="UP"),  # served, ignored
        ),
        note(PFC, *pfc),
    )
    assert len(ports) == 1
    r = ports[0]
    assert (r.switch, r.port, r.time_ns) == (SW, "swp1", TS)
    assert r.in_octets == U64_MAX and r.in_errors == 0 and r.in_pause_frames == 7 and r.last_clear_ns == TS - 5
    assert r.out_octets is None and r.carrier_transitions is None  # not in this notification: None, not 0
    assert r.oper_up is True and r.speed_bps == 400 * 10**9
    assert r.pfc_rx == tuple(range(10, 18)) and r.pfc_tx == tuple(range(20, 28))
    assert h.dec.values == 6 + 16 and h.dec.ignored == 1 and not h.invalid


def test_state_is_reported_only_where_the_switch_said_it_and_a_new_timestamp_is_a_new_reading() -> None:
    """Counter hygiene carries a port's state; a reading says what its notifications said."""
    h = Harness()
    h.feed(
        note(
            IF,
            update("state/oper-status", string_val="UP"),
            update("ethernet/state/port-speed", string_val="SPEED_100GB"),
        )
    )
    ports, _ = h.feed(
        note(IF, update("state/counters/in-octets", uint_val=1), ts=TS + 1),
        note(IF, update("state/oper-status", string_val="down"), ts=TS + 2),  # any case
        note(IF, update("state/counters/in-octets", uint_val=2), ts=TS + 3),
    )
    assert [(r.time_ns, r.in_octets, r.oper_up, r.speed_bps) for r in ports] == [
        (TS + 1, 1, None, None),
        (TS + 2, None, False, None),
        (TS + 3, 2, None, None),
    ]


def test_missing_timestamp_is_receive_time() -> None:
    h = Harness()
    before = time.time_ns()
    (r,), _ = h.feed(note(IF, update("state/counters/in-octets", uint_val=1), ts=0))
    assert before <= r.time_ns <= time.time_ns()


def test_value_encodings_are_accepted() -> None:
    h = Harness()
    (r,), _ = h.feed(
        note(
            IF,
            update("state/counters/in-octets", string_val="12345678901234567890"),  # SONiC: strings
            update("state/counters/out-octets", json_ietf_val=b'"42"'),  # RFC 7951 uint64
            update("state/counters/in-errors", json_val=b"7"),
            update("state/counters/out-errors", int_val=3),
            update("state/counters/in-discards", double_val=5.0),
            update("state/counters/out-discards", uint_val=0),
        )
    )
    assert (r.in_octets, r.out_octets, r.in_errors, r.out_errors, r.in_discards, r.out_discards) == (
        12345678901234567890,
        42,
        7,
        3,
        5,
        0,
    )
    assert not h.invalid


def test_malformed_values_are_skipped_and_counted_and_the_rest_kept() -> None:
    h = Harness(max_bytes=4096)
    huge = note(IF, update("state/description", string_val="x" * 8192))
    (r,), _ = h.feed(
        huge,
        b"\x0a\x05\xff\xff",  # not a SubscribeResponse
        note(
            IF,
            update("state/counters/in-octets", uint_val=100),
            update("state/counters/out-octets", string_val="abc"),  # a string for a number
            update("state/counters/in-errors", bool_val=True),  # wrong type
            update("state/counters/frobnicate", uint_val=5),  # unknown path
            update("state/counters/in-discards", int_val=-3),  # negative
            update("state/counters/out-discards", double_val=1.5),  # not whole
            update("state/counters/in-fcs-errors", json_ietf_val=b'"18446744073709551616"'),  # 2^64
            update("state/counters/out-errors", json_ietf_val=b"{not json"),
            update("state/oper-status", string_val="SIDEWAYS"),
            update("ethernet/state/port-speed", bytes_val=b"\x01"),
            update("/no/such/family", uint_val=1),
        ),
    )
    assert r.in_octets == 100
    assert (r.out_octets, r.in_errors, r.in_discards, r.out_discards, r.in_fcs_errors, r.oper_up) == (None,) * 6
    assert h.invalid == {
        "oversize": 1,
        "malformed": 1,
        "not_a_number": 2,
        "wrong_type": 2,
        "unknown_path": 2,
        "negative": 1,
        "out_of_range": 1,
        "bad_json": 1,
        "bad_enum": 1,
    }


def test_fast_path_falls_back_when_a_value_has_trailing_fields() -> None:
    h = Harness()
    p = path("state/counters/in-octets").SerializeToString()
    tv = b"\x18\x05\x18\x07"  # uint_val twice: the last one wins
    raw_update = b"\x0a" + bytes([len(p)]) + p + b"\x1a" + bytes([len(tv)]) + tv
    prefix = path(IF, SW).SerializeToString()
    body = (
        b"\x08" + varint(TS) + b"\x12" + bytes([len(prefix)]) + prefix + b"\x22" + bytes([len(raw_update)]) + raw_update
    )
    (r,), _ = h.feed(b"\x0a" + bytes([len(body)]) + body)
    assert r.in_octets == 7 and not h.invalid


def test_json_container_values_and_paths_without_a_port_prefix() -> None:
    h = Harness()
    doc = {"openconfig-interfaces:counters": {"in-octets": "11", "out-octets": "12"}}
    entries = {"interface": [{"name": "swp2", "state": {"counters": {"in-octets": "21"}}}]}
    ports, _ = h.feed(
        note(f"{IF}/state", update("", json_ietf_val=json.dumps(doc).encode())),
        note("/interfaces", update("", json_ietf_val=json.dumps(entries).encode())),
        note("", update("interfaces/interface[name=swp3]/state/counters/in-octets", uint_val=31)),
    )
    got = {r.port: (r.in_octets, r.out_octets) for r in ports}
    assert got == {"swp1": (11, 12), "swp2": (21, None), "swp3": (31, None)}
    assert not h.invalid


def test_lldp_updates_deletes_and_resync() -> None:
    h = Harness()
    nb = "neighbors/neighbor[id={}]/state/{}"
    _, lldp = h.feed(
        note(
            LLDP,
            *(
                update(nb.format(1, leaf), string_val=v)
                for leaf, v in (("system-name", "sp-r1-1"), ("port-id", "swp3"))
            ),
            update(nb.format(2, "system-name"), string_val="srv-g1-001"),
            update(nb.format(2, "chassis-id"), string_val="02:00:00:00:00:01"),
            update(nb.format(2, "ttl"), uint_val=120),  # served, not wanted
        ),
        SYNC,
    )
    assert [(r.port, r.neighbors) for r in lldp] == [
        (
            "swp1",
            (
                LldpNeighborReading("sp-r1-1", "swp3"),
                LldpNeighborReading("srv-g1-001", "", chassis_id="02:00:00:00:00:01"),
            ),
        )
    ]
    _, lldp = h.feed(note(LLDP, ts=TS + 1, deletes=(nb.format(2, "system-name"), nb.format(2, "chassis-id"))))
    assert lldp[0].neighbors == (LldpNeighborReading("sp-r1-1", "swp3"),) and lldp[0].time_ns == TS + 1
    _, lldp = h.feed(note(LLDP, ts=TS + 2, deletes=("neighbors/neighbor[id=1]",)))
    assert lldp[0].neighbors == ()
    # a new subscription whose dump does not restate a port's table: the table is gone
    h.feed(note(LLDP, update(nb.format(1, "system-name"), string_val="x"), ts=TS + 3))
    h.dec.begin()
    _, lldp = h.feed(SYNC)
    assert [(r.port, r.neighbors) for r in lldp] == [("swp1", ())]
    assert not h.invalid


def test_a_stream_without_lldp_leaves_lldp_tables_alone() -> None:
    h = Harness()
    h.feed(note(LLDP, update("neighbors/neighbor[id=1]/state/system-name", string_val="x")))
    other = StreamDecoder(SW, h.dec._r, h.ports, lambda w, n: None, owns_lldp=False)
    other.begin()
    other.feed(SYNC)
    other.close_group()
    assert other.take() == ([], []) and h.ports["swp1"].lldp == {"1": {"system_name": "x"}}


# --- SONiC ----------------------------------------------------------------------------------


def sonic_note(target: str, *updates: Any, ts: int = TS) -> bytes:
    n = gnmi_pb2.Notification(timestamp=ts, prefix=gnmi_pb2.Path(target=target), update=updates)
    data: bytes = gnmi_pb2.SubscribeResponse(update=n).SerializeToString()
    return data


def sonic_update(path_text: str, value: Any) -> Any:
    p = gnmi_pb2.Path()
    for name in path_text.split("/"):
        p.elem.add(name=name)
    if isinstance(value, str):
        return gnmi_pb2.Update(path=p, val=gnmi_pb2.TypedValue(string_val=value))
    return gnmi_pb2.Update(path=p, val=gnmi_pb2.TypedValue(json_ietf_val=json.dumps(value).encode()))


def test_sonic_counters_db_and_appl_db() -> None:
    h = Harness("sonic")
    stats = {
        "SAI_PORT_STAT_IF_IN_OCTETS": "1000",
        "SAI_PORT_STAT_IF_OUT_OCTETS": "2000",
        "SAI_PORT_STAT_IF_IN_ERRORS": "0",
        "SAI_PORT_STAT_ETHER_STATS_CRC_ALIGN_ERRORS": "4",
        "SAI_PORT_STAT_PAUSE_RX_PKTS": "5",
        "SAI_PORT_STAT_IPV6_IN_OCTETS": "9",  # not wanted: ignored, not counted invalid
        **{f"SAI_PORT_STAT_PFC_{p}_RX_PKTS": str(p) for p in range(8)},
        **{f"SAI_PORT_STAT_PFC_{p}_TX_PKTS": str(100 + p) for p in range(8)},
        **{f"SAI_PORT_STAT_PFC_{p}_ON2OFF_RX_PKTS": "0" for p in range(8)},
    }
    ports, _ = h.feed(
        # APPL_DB PORT_TABLE as a whole table: its own reading (counter hygiene carries the state)
        sonic_note(
            "APPL_DB",
            sonic_update("PORT_TABLE", {"Ethernet0": {"oper_status": "up", "speed": "400000", "mtu": "9100"}}),
        ),
        # COUNTERS_DB virtual path: every port in one JSON object, numbers as strings
        sonic_note(
            "COUNTERS_DB", sonic_update("COUNTERS/Ethernet*", {"Ethernet0": stats, "Ethernet4": stats}), ts=TS + 1
        ),
        # one counter on one port comes as string_val
        sonic_note("COUNTERS_DB", sonic_update("COUNTERS/Ethernet8/SAI_PORT_STAT_PFC_3_RX_PKTS", "77"), ts=TS + 2),
    )
    by = {(r.port, r.time_ns): r for r in ports}
    e0 = by[("Ethernet0", TS + 1)]
    assert (e0.in_octets, e0.out_octets, e0.in_errors, e0.in_fcs_errors, e0.in_pause_frames) == (1000, 2000, 0, 4, 5)
    assert e0.pfc_rx == tuple(range(8)) and e0.pfc_tx == tuple(range(100, 108))
    assert e0.oper_up is None and e0.speed_bps is None  # the counters did not say; PORT_TABLE did
    state = by[("Ethernet0", TS)]
    assert state.oper_up is True and state.speed_bps == 400 * 10**9 and state.in_octets is None
    assert by[("Ethernet4", TS + 1)].oper_up is None
    assert by[("Ethernet8", TS + 2)].pfc_rx is None  # one priority alone is not a full PFC row
    _, lldp = h.feed(
        sonic_note(
            "APPL_DB",
            sonic_update(
                "LLDP_ENTRY_TABLE",
                {
                    "Ethernet0": {
                        "lldp_rem_sys_name": "spine1",
                        "lldp_rem_port_id": "Ethernet64",
                        "lldp_rem_sys_desc": "x",
                    }
                },
            ),
            ts=TS + 3,
        )
    )
    assert lldp[0].port == "Ethernet0" and lldp[0].neighbors == (LldpNeighborReading("spine1", "Ethernet64"),)
    assert not h.invalid


@pytest.mark.parametrize("value", ["-1", "1e3", "", "0x10"])
def test_sonic_non_decimal_strings_are_invalid(value: str) -> None:
    h = Harness("sonic")
    h.feed(sonic_note("COUNTERS_DB", sonic_update("COUNTERS/Ethernet0/SAI_PORT_STAT_IF_IN_OCTETS", value)))
    assert sum(h.invalid.values()) == 1


# --- interface deletes ----------------------------------------------------------------------


def _state_up(h: Harness, ts: int = TS) -> None:
    pfc = [update(f"switch-priority[priority={p}]/state/counters/in-pause-pkts", uint_val=p) for p in range(8)]
    h.feed(
        note(
            IF,
            update("state/oper-status", string_val="UP"),
            update("ethernet/state/port-speed", string_val="SPEED_400GB"),
            update("state/last-change", uint_val=TS - 9),
            ts=ts,
        ),
        note(PFC, *pfc, ts=ts),
        note(LLDP, update("neighbors/neighbor[id=1]/state/system-name", string_val="sp-r1-1"), ts=ts),
    )


@pytest.mark.parametrize(
    ("prefix", "deleted"),
    [
        ("", "/interfaces/interface[name=swp1]"),  # the interface
        (IF, "state"),  # its state container, relative to the prefix
        (f"{IF}/state", "oper-status"),  # its oper-status leaf
        ("/openconfig-interfaces:interfaces", "interface[name=swp1]/state/oper-status"),  # module-qualified
    ],
)
def test_an_interface_delete_is_a_removed_reading_and_forgets_the_port(prefix: str, deleted: str) -> None:
    h = Harness()
    _state_up(h)
    ports, lldp = h.feed(note(prefix, ts=TS + 5, deletes=(deleted,)))
    assert len(ports) == 1
    r = ports[0]
    assert (r.port, r.time_ns, r.oper_up, r.removed) == ("swp1", TS + 5, False, True)
    assert (r.speed_bps, r.in_octets, r.pfc_rx, r.last_change_ns) == (None, None, None, None)
    assert [(x.port, x.neighbors) for x in lldp] == [("swp1", ())]  # its neighbours went with it
    # re-added: nothing carried from before (state, PFC priorities, last-change)
    ports, _ = h.feed(
        note(
            IF,
            update("state/counters/in-octets", uint_val=7),
            ts=TS + 6,
        ),
        note(PFC, update("switch-priority[priority=0]/state/counters/in-pause-pkts", uint_val=1), ts=TS + 7),
    )
    assert [(r.in_octets, r.oper_up, r.speed_bps, r.pfc_rx, r.last_change_ns, r.removed) for r in ports] == [
        (7, None, None, None, None, False),
        (None, None, None, None, None, False),  # one priority is not a full row any more
    ]
    assert not h.invalid


def test_deletes_that_do_not_remove_the_interface() -> None:
    h = Harness()
    _state_up(h)
    ports, _ = h.feed(
        note(IF, ts=TS + 1, deletes=("state/counters/in-octets", "ethernet", "state/description")),
        note(PFC, ts=TS + 2, deletes=("switch-priority[priority=3]",)),
        note("/interfaces", ts=TS + 3, deletes=("interface[name=*]",)),  # a wildcard names no port
    )
    assert ports == [] and h.ports["swp1"].oper is True and h.ports["swp1"].speed == 400 * 10**9


def test_delete_and_update_in_one_notification_replace_the_interface() -> None:
    """gNMI spec 3.5.2.3: deletes apply before the updates beside them; the port is still there."""
    h = Harness()
    _state_up(h)
    (r,), _ = h.feed(
        note(
            IF,
            update("state/oper-status", string_val="DOWN"),
            update("state/counters/in-octets", uint_val=3),
            ts=TS + 1,
            deletes=("",),
        )
    )
    assert (r.oper_up, r.in_octets, r.speed_bps, r.removed) == (False, 3, None, False)  # speed forgotten


def test_counters_sent_just_before_the_delete_stay_in_the_removed_reading() -> None:
    h = Harness()
    (r,), _ = h.feed(
        note(IF, update("state/counters/in-octets", uint_val=42), ts=TS),
        note("", ts=TS, deletes=("/interfaces/interface[name=swp1]", "/interfaces/interface[name=swp1]/state")),
    )
    assert (r.in_octets, r.oper_up, r.removed, r.time_ns) == (42, False, True, TS)


def test_lldp_deletes_apply_before_the_updates_beside_them() -> None:
    h = Harness()
    nb = "neighbors/neighbor[id={}]/state/system-name"
    h.feed(note(LLDP, update(nb.format(1), string_val="a"), update(nb.format(2), string_val="b")))
    _, lldp = h.feed(note(LLDP, update(nb.format(3), string_val="c"), ts=TS + 1, deletes=("neighbors",)))
    assert lldp[0].neighbors == (LldpNeighborReading("c", ""),)


def test_empty_updates_are_ignored_not_invalid() -> None:
    h = Harness()
    empty = gnmi_pb2.Update()
    ports, _ = h.feed(note("", empty, ts=TS, deletes=("",)), note(IF, gnmi_pb2.Update(path=path("state/oper-status"))))
    assert ports == [] and h.dec.ignored == 1 and h.invalid == {"wrong_type": 1}  # a path without a value


def test_sonic_deleted_keys() -> None:
    """sonic-gnmi's deletes: ``{"EthernetN": {}}`` for a Redis del (ON_CHANGE table), a gNMI delete on POLL."""
    h = Harness("sonic")
    lldp_entry = {"Ethernet0": {"lldp_rem_sys_name": "spine1", "lldp_rem_port_id": "Ethernet64"}}
    h.feed(
        sonic_note("APPL_DB", sonic_update("PORT_TABLE", {"Ethernet0": {"oper_status": "up"}, "Ethernet4": {}})),
        sonic_note("APPL_DB", sonic_update("LLDP_ENTRY_TABLE", lldp_entry)),
    )
    assert h.ports["Ethernet0"].oper is True and h.ports["Ethernet0"].lldp
    ports, lldp = h.feed(
        sonic_note("APPL_DB", sonic_update("LLDP_ENTRY_TABLE", {"Ethernet0": {}}), ts=TS + 1),
        sonic_note("APPL_DB", sonic_update("PORT_TABLE", {"Ethernet0": {}}), ts=TS + 2),
        sonic_note("COUNTERS_DB", sonic_update("COUNTERS/Ethernet*", {}), ts=TS + 3),  # updates-only: no change
    )
    assert [(x.port, x.time_ns, x.neighbors) for x in lldp] == [("Ethernet0", TS + 1, ())]
    assert [(r.port, r.time_ns, r.oper_up, r.removed) for r in ports] == [("Ethernet0", TS + 2, False, True)]
    n = gnmi_pb2.Notification(timestamp=TS + 4, prefix=gnmi_pb2.Path(target="COUNTERS_DB"))
    n.delete.add().elem.extend([gnmi_pb2.PathElem(name="COUNTERS"), gnmi_pb2.PathElem(name="Ethernet8")])
    ports, _ = h.feed(gnmi_pb2.SubscribeResponse(update=n).SerializeToString())
    assert [(r.port, r.removed) for r in ports] == [("Ethernet8", True)]
    assert not h.invalid


def test_native_enumerations_and_date_and_time_leaves() -> None:
    h = Harness("srlinux")
    ports, _ = h.feed(
        note(
            "/interface[name=ethernet-1/1]",
            update("oper-state", string_val="up"),
            update("ethernet/port-speed", string_val="400G"),
            update("last-change", string_val="2024-03-01T10:00:00.123456789Z"),
            update("statistics/last-clear", string_val="2024-03-01T09:00:00+01:00"),
            update("statistics/in-octets", uint_val=5),
        ),
        note("/interface[name=ethernet-1/2]", update("oper-state", string_val="testing"), ts=TS + 1),
        note(
            "/interface[name=ethernet-1/3]",
            update("ethernet/port-speed", string_val="7G"),
            update("last-change", string_val="2024-03-01 10:00:00"),  # no offset: not a date-and-time
            update("statistics/last-clear", uint_val=5),
            ts=TS + 2,
        ),
    )
    by = {r.port: r for r in ports}
    one = by["ethernet-1/1"]
    assert (one.oper_up, one.speed_bps, one.in_octets) == (True, 400 * 10**9, 5)
    assert one.last_change_ns == 1_709_287_200_123_456_789 and one.last_clear_ns == 1_709_280_000 * 10**9
    assert by["ethernet-1/2"].oper_up is False
    assert h.invalid == {"bad_enum": 1, "not_a_number": 1, "wrong_type": 1}
