"""Golden tests: recorded real-device telemetry (../shared/fixtures/) through the decoder.

Each capture is parsed (protobuf JSON → ``SubscribeResponse``), serialized and fed to a
:class:`StreamDecoder` with the profile of its NOS, exactly as bytes off the wire. The
expectations are written from reading the capture: every counter, status and speed it carries
is in a reading of the right port with the right value; everything else is counted, as ignored
(served, not wanted: descriptions, logical units) or as an invalid kind with the reason the test
names. The captures' counters are mostly zero (they show shapes); where a test varies values on
top of a capture's shape, it says so.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from collector.gnmi_decode import StreamDecoder
from collector.gnmi_values import PortState, Resolver
from collector.profile_load import load_profile
from collector.profiles import IGNORED, parse_path
from collector.records import COUNTER_FIELDS, LldpNeighborReading, LldpReading, PortReading
from tests.support.captures import DEVICES, SHARED, serialized, sonic_file, sonic_response, telegraf_case, xr_sim_shape

SW = "dut"
ZERO13 = dict.fromkeys(COUNTER_FIELDS[:13], 0)  # the interface counters every interface capture carries


class Replay:
    """One Subscribe stream's decoder fed with recorded responses."""

    def __init__(self, profile: str) -> None:
        self.profile = load_profile(profile)
        self.invalid: Counter[str] = Counter()
        self.ports: dict[str, PortState] = {}
        self.dec = StreamDecoder(SW, Resolver(self.profile), self.ports, lambda k, n: self.invalid.update({k: n}))
        self.dec.begin()
        self.synced = False

    def feed(self, responses: list[Any]) -> tuple[list[PortReading], list[LldpReading]]:
        for raw in serialized(responses):
            self.synced |= self.dec.feed(raw)
        self.dec.close_group()
        return self.dec.take()

    def resolve(self, text: str) -> tuple[str | None, Any]:
        return self.profile.resolve(parse_path(text))


def stored(r: PortReading) -> dict[str, Any]:
    """What a reading carries: its non-None fields (``removed`` only when set; not when it arrived)."""
    skip = ("switch", "wrap32", "removed", "received_ns")
    out = {k: getattr(r, k) for k in PortReading.__slots__ if k not in skip}
    out = {k: v for k, v in out.items() if v is not None}
    if r.removed:
        out["removed"] = True
    return out


def unix_ns(year: int, month: int, day: int, hour: int, minute: int, second: int) -> int:
    return int(datetime(year, month, day, hour, minute, second, tzinfo=UTC).timestamp()) * 10**9


# --- OpenConfig shapes --------------------------------------------------------------------------


@pytest.mark.parametrize("profile", ["openconfig", "eos"])
def test_issue_14530_prefix_key_and_relative_counter_leaves(profile: str) -> None:
    """Prefix ``/interfaces/interface[name=Ethernet35]/state/counters``, 15 uint_val leaves."""
    replay = Replay(profile)
    (r,), lldp = replay.feed(telegraf_case("issue_14530"))
    assert stored(r) == {"port": "Ethernet35", "time_ns": 1704442117721474264, **ZERO13}
    assert lldp == [] and replay.dec.values == 13
    assert replay.dec.ignored == 2 and not replay.invalid  # in-pkts, out-pkts: served, not wanted


def test_issue_14530_shape_with_distinct_values_maps_every_leaf() -> None:
    """The capture's shape, each uint_val replaced by its position (1..15), to tell the leaves apart."""
    responses = telegraf_case("issue_14530")
    for i, u in enumerate(responses[0].update.update, start=1):
        u.val.uint_val = i
    (r,), _ = Replay("eos").feed(responses)
    # capture order: in-broadcast-pkts, in-discards, in-errors, in-fcs-errors, in-multicast-pkts,
    # in-octets, in-pkts, in-unicast-pkts, out-broadcast-pkts, out-discards, out-errors,
    # out-multicast-pkts, out-octets, out-pkts, out-unicast-pkts
    assert stored(r) == {
        "port": "Ethernet35",
        "time_ns": 1704442117721474264,
        "in_broadcast_pkts": 1,
        "in_discards": 2,
        "in_errors": 3,
        "in_fcs_errors": 4,
        "in_multicast_pkts": 5,
        "in_octets": 6,
        "in_unicast_pkts": 8,
        "out_broadcast_pkts": 9,
        "out_discards": 10,
        "out_errors": 11,
        "out_multicast_pkts": 12,
        "out_octets": 13,
        "out_unicast_pkts": 15,
    }


def test_issue_11778_module_qualified_prefix_with_origin_and_target() -> None:
    """Prefix ``origin: openconfig-interfaces``, ``interfaces/interface[name=eth42]/state``, target set."""
    replay = Replay("junos")
    assert replay.feed(telegraf_case("issue_11778")) == ([], [])
    # `counters` with intVal 5678: a number at a container, no leaf there (the port is known)
    assert replay.resolve("/interfaces/interface[name=eth42]/state/counters") == ("eth42", None)
    assert replay.resolve("/interfaces/interface[name=eth42]/state/description") == ("eth42", IGNORED)
    assert replay.invalid == {"unknown_path": 1} and replay.dec.ignored == 1


def test_issue_14063_oc_if_qualified_names_without_an_interface_key() -> None:
    """Prefix ``oc-if:interfaces/oc-if:interface/oc-if:state/oc-if:counters``: no ``[name=...]``."""
    replay = Replay("openconfig")
    assert replay.feed(telegraf_case("issue_14063")) == ([], [])
    # The module prefixes resolve, but the interface list has no key: no port to store under.
    assert replay.resolve("/oc-if:interfaces/oc-if:interface/oc-if:state/oc-if:counters/in-octets") == (None, None)
    assert replay.invalid == {"unknown_path": 35} and replay.dec.ignored == 0


def test_issue_14063_shape_with_an_interface_key_lands_every_openconfig_leaf() -> None:
    """The same capture with ``[name=Ethernet1]`` added to its ``oc-if:interface`` prefix element."""
    responses = telegraf_case("issue_14063")
    responses[0].update.prefix.elem[1].key["name"] = "Ethernet1"
    replay = Replay("openconfig")
    (r,), _ = replay.feed(responses)
    zeros = dict.fromkeys(
        ("in_broadcast_pkts", "in_discards", "in_errors", "in_multicast_pkts", "in_octets", "in_unicast_pkts"), 0
    )
    zeros |= dict.fromkeys(
        ("out_broadcast_pkts", "out_errors", "out_multicast_pkts", "out_octets", "out_unicast_pkts"), 0
    )
    assert stored(r) == {
        "port": "Ethernet1",
        "time_ns": 1696617695101000000,
        "last_clear_ns": 1691859140059797458,
        **zeros,
    }
    # Not OpenConfig leaves (size buckets, in-crc-error-pkts, in-dropped-*, link-flap-events,
    # in-jabber/oversize/undersize-pkts, in-discards-octets, `name`): unknown, 21 of them.
    assert replay.invalid == {"unknown_path": 21} and replay.dec.ignored == 2  # in-pkts, out-pkts


def test_issue_14044_ios_xr_origin_and_json_ietf_state_container() -> None:
    """Prefix only ``origin: openconfig-interfaces``; path ``.../interface[name=FourHundredGigE0/2/0/3]/state``."""
    replay = Replay("xr")
    assert replay.feed(telegraf_case("issue_14044")) == ([], [])
    # the container {"description": "REDACTED"}: a description, served and not stored
    port = "FourHundredGigE0/2/0/3"
    assert replay.resolve(f"/interfaces/interface[name={port}]/state/description") == (port, IGNORED)
    assert replay.dec.ignored == 1 and not replay.invalid


def test_issue_14044_shape_as_the_xr_simulator_sends_it() -> None:
    """The capture's prefix and path with fuller containers (tests.support.captures.xr_sim_shape)."""
    replay = Replay("xr")
    (r,), _ = replay.feed(xr_sim_shape())
    assert stored(r) == {
        "port": "FourHundredGigE0/2/0/3",
        "time_ns": 1696324083211000000,
        "oper_up": True,
        "speed_bps": 400 * 10**9,
        "in_octets": (1 << 64) - 1,
        "out_octets": 12,
        "carrier_transitions": 2,
        "in_pause_frames": 4,
        "pfc_rx": (0, 1, 2, 3, 4, 5, 6, 7),
        "pfc_tx": (0,) * 8,
    }
    assert not replay.invalid and replay.dec.ignored == 3  # description, type, in-pkts


def test_tagging_subinterfaces_juniper_logical_units_are_not_ports() -> None:
    """One notification per leaf, prefix down to ``subinterface[index=...]`` of xe-0/1/1."""
    replay = Replay("junos")
    assert replay.feed(telegraf_case("tagging_subinterfaces")) == ([], [])
    assert replay.synced  # the capture ends with its sync_response
    unit = "/interfaces/interface[name=xe-0/1/1]/subinterfaces/subinterface[index=32767]/state/oper-status"
    assert replay.resolve(unit) == ("xe-0/1/1", IGNORED)
    assert replay.dec.ignored == 6 and not replay.invalid  # 3 units x (description, oper-status)


# --- native models ------------------------------------------------------------------------------


def test_issue_14833_ios_xe_native_statistics_container() -> None:
    """``Cisco-IOS-XE-interfaces-oper:interfaces/interface[name=...]/statistics`` as json_ietf_val."""
    replay = Replay("iosxe")
    ports, _ = replay.feed(telegraf_case("issue_14833"))
    clear = unix_ns(2023, 11, 15, 5, 50, 40)  # "discontinuity-time": "2023-11-15T05:50:40+00:00"
    ts = 1708069483623763000
    assert [stored(r) for r in ports] == [
        {"port": "AppGigabitEthernet1/0/1", "time_ns": ts, "last_clear_ns": clear},
        {"port": "FortyGigabitEthernet1/1/1", "time_ns": ts, "last_clear_ns": clear},
    ]
    assert not replay.invalid and replay.dec.ignored == 0


def test_issue_12931_sr_linux_native_interface_paths() -> None:
    """Paths with ``origin: srl_nokia-interfaces`` from ``interface[name=ethernet-1/1]``: values on containers."""
    replay = Replay("srlinux")
    assert replay.feed(telegraf_case("issue_12931")) == ([], [])
    for rest in ("", "/transceiver", "/ethernet", "/ethernet/flow-control", "/sflow"):
        assert replay.resolve(f"/interface[name=ethernet-1/1]{rest}") == ("ethernet-1/1", None), rest
    assert replay.invalid == {"unknown_path": 5} and replay.dec.ignored == 0


def test_issue_17412_huawei_delete_then_json_val_status() -> None:
    """A delete of ``huawei-ifm:ifm/.../interface[name=Eth-Trunk5.1234]/dynamic/oper-status``, then ``"down"``."""
    replay = Replay("huawei")
    ports, _ = replay.feed(telegraf_case("issue_17412"))
    assert [stored(r) for r in ports] == [
        {"port": "Eth-Trunk5.1234", "time_ns": 1753972805570000000, "oper_up": False, "removed": True},
        {"port": "Eth-Trunk5.1234", "time_ns": 1753972839609000000, "oper_up": False},
    ]
    # the empty Update beside the delete: ignored; the empty delete path beside the update: nothing
    assert replay.dec.ignored == 1 and not replay.invalid


# --- SONiC --------------------------------------------------------------------------------------
# The testdata files are Redis hashes; the responses around them are what sonic-gnmi sends for
# them (sonic_data_client/db_client.go: json_ietf_val at the subscribed path, the port's hash for
# COUNTERS/Ethernet68, {"Ethernet1": {...}, ...} for COUNTERS/Ethernet*, string_val for one
# field; prefix target = the database), see tests.support.captures.sonic_response.

T0 = 1_700_000_000_000_000_000
PFC_RX_7 = "SAI_PORT_STAT_PFC_7_RX_PKTS"


def test_sonic_counters_db_as_sonic_gnmi_serves_it() -> None:
    replay = Replay("sonic")
    ports, _ = replay.feed(
        [
            sonic_response(
                "COUNTERS_DB",
                "COUNTERS/Ethernet*",
                T0,
                json_ietf=sonic_file("COUNTERS__Ethernet_wildcard_expected.txt"),
            ),
            sonic_response(
                "COUNTERS_DB", "COUNTERS/Ethernet68", T0 + 1, json_ietf=sonic_file("COUNTERS__Ethernet68.txt")
            ),
            sonic_response(
                "COUNTERS_DB", "COUNTERS/Ethernet1", T0 + 2, json_ietf=sonic_file("COUNTERS__Ethernet1.txt")
            ),
            sonic_response(
                "COUNTERS_DB",
                f"COUNTERS/Ethernet*/{PFC_RX_7}",
                T0 + 3,
                json_ietf=sonic_file("COUNTERS__Ethernet_wildcard_PFC_7_RX.txt"),
            ),
            sonic_response("COUNTERS_DB", f"COUNTERS/Ethernet68/{PFC_RX_7}", T0 + 4, string="2"),
        ]
    )
    # Each hash: 106 SAI stats, 13 interface counters + 16 PFC of them wanted (no PAUSE_RX/TX_PKTS
    # in this testdata: pause frames stay None); PFC 7 received is 1 on Ethernet1, 2 on Ethernet68.
    pfc1, pfc68, tx = (0,) * 7 + (1,), (0,) * 7 + (2,), (0,) * 8
    assert [stored(r) for r in ports] == [
        {"port": "Ethernet1", "time_ns": T0, **ZERO13, "pfc_rx": pfc1, "pfc_tx": tx},
        {"port": "Ethernet68", "time_ns": T0, **ZERO13, "pfc_rx": pfc68, "pfc_tx": tx},
        {"port": "Ethernet68", "time_ns": T0 + 1, **ZERO13, "pfc_rx": pfc68, "pfc_tx": tx},
        {"port": "Ethernet1", "time_ns": T0 + 2, **ZERO13, "pfc_rx": pfc1, "pfc_tx": tx},
        # one priority per port: the other seven carried from the full rows before
        {"port": "Ethernet1", "time_ns": T0 + 3, "pfc_rx": pfc1},
        {"port": "Ethernet68", "time_ns": T0 + 3, "pfc_rx": pfc68},
        {"port": "Ethernet68", "time_ns": T0 + 4, "pfc_rx": pfc68},  # string_val "2"
    ]
    assert replay.dec.ignored == 4 * 77 and not replay.invalid


def test_sonic_pfc_watchdog_port_name_map_and_lldp_tables() -> None:
    counters = Replay("sonic")
    ports, _ = counters.feed(
        [
            sonic_response(
                "COUNTERS_DB", "COUNTERS/Ethernet68/Pfcwd", T0, json_ietf=sonic_file("COUNTERS__Ethernet68__Pfcwd.txt")
            ),
            sonic_response(
                "COUNTERS_DB", "COUNTERS_PORT_NAME_MAP", T0 + 1, json_ietf=sonic_file("COUNTERS_PORT_NAME_MAP.txt")
            ),
        ]
    )
    # Pfcwd: queues 3 and 4 of Ethernet68, 15 fields each, under the port's COUNTERS root: not wanted
    assert ports == [] and counters.dec.ignored == 30
    # the name map is no family's table: each of its 55 entries an unknown path (no port)
    assert counters.resolve("COUNTERS_PORT_NAME_MAP/Ethernet0") == (None, None)
    assert counters.invalid == {"unknown_path": 55}
    appl = Replay("sonic")
    _, lldp = appl.feed(
        [sonic_response("APPL_DB", "LLDP_ENTRY_TABLE", T0, json_ietf=sonic_file("LLDP_ENTRY_TABLE_UPDATE.txt"))]
    )
    assert lldp == [LldpReading(SW, "eth0", T0, (LldpNeighborReading(system_name="dummy", port_id="dummy"),))]
    assert not appl.invalid


def test_the_captures_are_the_published_ones() -> None:
    """The repository's copy is the project's shared one, byte for byte, where that one is present."""
    mine = sorted(p.relative_to(DEVICES) for p in DEVICES.rglob("*") if p.is_file())
    assert len(mine) >= 16 and Path("README.md") in mine
    if not SHARED.is_dir():
        pytest.skip(f"no shared fixtures beside the repository ({SHARED})")
    theirs = sorted(p.relative_to(SHARED) for p in SHARED.rglob("*") if p.is_file())
    assert mine == theirs
    assert all((DEVICES / p).read_bytes() == (SHARED / p).read_bytes() for p in mine)
