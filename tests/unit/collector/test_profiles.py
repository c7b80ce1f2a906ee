"""gNMI vendor profiles: loading, validation, resolution of concrete paths."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pygnmi.create_gnmi_path import gnmi_path_generator

from collector.profile_load import available_profiles, compile_profile, load_profile
from collector.profiles import (
    IGNORED,
    PFC_RX,
    PFC_TX,
    ROW_INDEX,
    Kind,
    ProfileError,
    parse_path,
)
from simulator.gnmi_paths import LEAVES, ROOTS

SONIC_COUNTER = (("COUNTERS", ()), ("Ethernet8", ()))


def _concrete(elems: Any, port: str = "swp7", neighbor: str = "2") -> tuple[Any, ...]:
    out = []
    for e in elems:
        keys = tuple((k, port if k in ("name", "interface-id") else neighbor if v == "*" else v) for k, v in e.keys)
        out.append((e.name, keys))
    return tuple(out)


def test_builtin_profiles() -> None:
    assert {"openconfig", "sonic"} <= set(available_profiles())
    for name in available_profiles():
        assert load_profile(name).subscriptions


def test_every_leaf_the_simulator_serves_resolves() -> None:
    profile = load_profile("openconfig")
    wanted = 0
    for family, leaves in LEAVES.items():
        for leaf in leaves:
            port, resolved = profile.resolve(_concrete(ROOTS[family] + leaf.rel))
            assert port == "swp7", leaf
            assert resolved is not None, f"{family}: {leaf.rel} is unknown to the profile"
            wanted += resolved is not IGNORED
    assert wanted == 15 + 5 + 16 + 4  # counters (+last-clear), oper/last-change/speed/2 pause, PFC, LLDP


def test_openconfig_pfc_direction_and_lldp_neighbor() -> None:
    profile = load_profile("openconfig")
    qos = parse_path("/qos/interfaces/interface[interface-id=swp1]/switch-priority[priority=3]/state/counters")
    assert profile.resolve((*qos, ("in-pause-pkts", ()))) == ("swp1", profile.resolve((*qos, ("in-pause-pkts", ())))[1])
    assert profile.resolve((*qos, ("in-pause-pkts", ())))[1].index == PFC_RX + 3  # type: ignore[union-attr]
    assert profile.resolve((*qos, ("out-pause-pkts", ())))[1].index == PFC_TX + 3  # type: ignore[union-attr]
    bad = parse_path(
        "/qos/interfaces/interface[interface-id=swp1]/switch-priority[priority=9]/state/counters/in-pause-pkts"
    )
    assert profile.resolve(bad) == ("swp1", None)
    lldp = parse_path("/openconfig-lldp:lldp/interfaces/interface[name=swp1]/neighbors/neighbor[id=4]/state/port-id")
    _, leaf = profile.resolve(lldp)
    assert leaf is not None and (leaf.kind, leaf.field, leaf.neighbor) == (Kind.TEXT, "port_id", "4")
    assert profile.resolve(parse_path("/interfaces/interface[name=*]/state/counters/in-octets")) == (None, None)
    assert profile.resolve(parse_path("/system/state/hostname")) == (None, None)


def test_sonic_profile() -> None:
    profile = load_profile("sonic")
    streams = profile.streams("ignored-configured-target", "sw1")
    assert set(streams) == {"COUNTERS_DB", "APPL_DB"}
    assert [s.mode for s in streams["COUNTERS_DB"]] == ["sample"]
    assert profile.covers_lldp(streams["APPL_DB"]) and not profile.covers_lldp(streams["COUNTERS_DB"])
    for p in range(8):
        _, rx = profile.resolve((*SONIC_COUNTER, (f"SAI_PORT_STAT_PFC_{p}_RX_PKTS", ())))
        _, tx = profile.resolve((*SONIC_COUNTER, (f"SAI_PORT_STAT_PFC_{p}_TX_PKTS", ())))
        assert rx is not None and rx.index == PFC_RX + p and tx is not None and tx.index == PFC_TX + p
    assert profile.resolve((*SONIC_COUNTER, ("SAI_PORT_STAT_IF_IN_OCTETS", ()))) == (
        "Ethernet8",
        profile.resolve((*SONIC_COUNTER, ("SAI_PORT_STAT_IF_IN_OCTETS", ())))[1],
    )
    _, leaf = profile.resolve((*SONIC_COUNTER, ("SAI_PORT_STAT_IF_IN_OCTETS", ())))
    assert leaf is not None and leaf.index == ROW_INDEX["in_octets"]
    assert profile.resolve((*SONIC_COUNTER, ("SAI_PORT_STAT_IPV6_IN_OCTETS", ()))) == ("Ethernet8", IGNORED)
    _, speed = profile.resolve((("PORT_TABLE", ()), ("Ethernet8", ()), ("speed", ())))
    assert speed is not None and speed.kind is Kind.SPEED and speed.scale == 10**6


def test_target_convention() -> None:
    profile = load_profile("openconfig")
    assert list(profile.streams("lf-g1-r1", "lf-g1-r1")) == ["lf-g1-r1"]
    assert list(profile.streams(None, "lf-g1-r1")) == [""]  # no prefix target: a one-switch device


def _doc(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": "t",
        "subscriptions": [{"path": "/interfaces", "mode": "sample"}],
        "families": [{"name": "if", "root": "/interfaces/interface[name={port}]", "leaves": {"a/b": "in_octets"}}],
    }
    doc.update(over)
    return doc


@pytest.mark.parametrize(
    ("families", "message"),
    [
        ([{"name": "f", "root": "/interfaces/interface", "leaves": {"a": "in_octets"}}], "bind '{port}'"),
        ([{"name": "f", "root": "/i[name={port}]", "leaves": {"a": "frobs"}}], "unknown field"),
        ([{"name": "f", "root": "/i[name={port}]", "leaves": {"a": "pfc_rx"}}], "needs a {priority}"),
        ([{"name": "f", "root": "/i[name={port}]", "leaves": {"a": "system_name"}}], "'lldp: true' family"),
        (
            [{"name": "f", "root": "/i[name={port}]", "leaves": {"a": {"field": "speed_bps", "unit": "furlongs"}}}],
            "unit",
        ),
        ([{"name": "f", "root": "/i[name={port}]", "leaves": {"a": "in_octets"}, "extra": 1}], "extra"),
    ],
)
def test_bad_profiles_are_clear_errors(families: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(ProfileError, match=message.replace("{", r"\{").replace("}", r"\}").replace("'", ".")):
        compile_profile(_doc(families=families))


def test_profile_from_a_file_and_missing_profiles(tmp_path: Path) -> None:
    file = tmp_path / "mine.yaml"
    file.write_text(yaml.safe_dump(_doc(encoding="json_ietf")))
    profile = load_profile(str(file))
    assert profile.name == "t" and profile.encoding == 4
    with pytest.raises(ProfileError, match=r"not found.*openconfig"):
        load_profile("no-such-nos")


def test_the_nos_profiles_exist_and_eos_is_openconfigs_paths() -> None:
    assert {"openconfig", "sonic", "xr", "srlinux", "junos", "eos", "iosxe", "huawei"} <= set(available_profiles())
    oc, eos = load_profile("openconfig"), load_profile("eos")
    assert eos.subscriptions == oc.subscriptions and eos.encoding == oc.encoding
    assert [(f.root, dict(f.leaves), f.ignore, f.removed_by) for f in eos.families] == [
        (f.root, dict(f.leaves), f.ignore, f.removed_by) for f in oc.families
    ]


def test_xr_and_iosxe_requests_name_their_origin_in_each_path() -> None:
    """The request paths are built by pygnmi's path syntax (collector.gnmi_stream.subscribe_request)."""
    xr = load_profile("xr")
    assert xr.origin == ""  # not in the prefix too: gNMI spec 2.7
    origins = {gnmi_path_generator(s.path).origin for s in xr.subscriptions}
    assert origins == {"openconfig-interfaces", "openconfig-qos", "openconfig-lldp"}
    counters = gnmi_path_generator(xr.subscriptions[0].path)
    assert [e.name for e in counters.elem] == ["interfaces", "interface", "state", "counters"]
    # IOS XE: origin rfc7951, the module kept in the first element's name (telegraf issue_14833)
    xe = gnmi_path_generator(load_profile("iosxe").subscriptions[0].path)
    assert (xe.origin, xe.elem[0].name) == ("rfc7951", "Cisco-IOS-XE-interfaces-oper:interfaces")
    assert parse_path("rfc7951:/Cisco-IOS-XE-interfaces-oper:interfaces/interface") == (
        ("interfaces", ()),
        ("interface", ()),
    )


def test_key_variables_in_ignore_entries_match_any_value() -> None:
    junos = load_profile("junos")
    unit = parse_path("/interfaces/interface[name=xe-0/1/1]/subinterfaces/subinterface[index=1410]/state/oper-status")
    assert junos.resolve(unit) == ("xe-0/1/1", IGNORED)
    srl = load_profile("srlinux")
    tlv = parse_path(
        "/system/lldp/interface[name=ethernet-1/1]/neighbor[id=x]/custom-tlv[oui=1][oui-subtype=2][type=127]/value"
    )
    assert srl.resolve(tlv) == ("ethernet-1/1", IGNORED)


def test_units_values_and_removal_paths_compile() -> None:
    srl = load_profile("srlinux")
    _, speed = srl.resolve(parse_path("/interface[name=ethernet-1/1]/ethernet/port-speed"))
    assert speed is not None and speed.kind is Kind.SPEED and speed.word("400G") == 400_000
    assert speed.word("srl_nokia-if:100G") == 100_000 and speed.word("SPEED_100GB") == "SPEED_100GB"
    _, change = srl.resolve(parse_path("/interface[name=ethernet-1/1]/last-change"))
    assert change is not None and change.kind is Kind.DATETIME
    assert [sorted(f.removed_by) for f in load_profile("openconfig").families] == [
        ["", "state", "state/oper-status"],
        [],
        [],
    ]
    sonic = {f.name: (sorted(f.removed_by), f.empty_is_delete) for f in load_profile("sonic").families}
    assert sonic == {"counters": ([""], False), "ports": ([""], True), "lldp": ([], True)}


@pytest.mark.parametrize(
    ("leaf", "message"),
    [
        ({"field": "in_octets", "values": {"x": 1}}, "'values' maps"),
        ({"field": "oper_up", "values": {"up": 1}}, "'values' maps"),
        ({"field": "speed_bps", "values": {"10G": True}}, "'values' maps"),
        ({"field": "speed_bps", "unit": "date-and-time"}, "unit"),
    ],
)
def test_bad_leaf_options_are_clear_errors(leaf: dict[str, Any], message: str) -> None:
    families = [{"name": "f", "root": "/i[name={port}]", "leaves": {"a": leaf}}]
    with pytest.raises(ProfileError, match=message):
        compile_profile(_doc(families=families))


@pytest.mark.parametrize("name", ["openconfig", "eos", "xr", "junos", "sonic", "cumulus"])
def test_link_health_paths_sample_at_their_own_intervals_not_the_counters(name: str) -> None:
    """FEC and BER at collector.fec_interval_s, DOM at dom_interval_s, the modules' thresholds at
    thresholds_interval_s: judged over hours, they are not sampled at the counters' 10 s (issue
    26's CPU goal); ON_CHANGE leaves have no interval."""
    from collector.gnmi_stream import subscribe_request

    profile = load_profile(name)
    sampled = [s for s in profile.optics_subscriptions if s.mode == "sample"]
    assert {s.interval for s in sampled} <= {"fec", "dom", "thresholds"}
    assert {"dom", "thresholds"} <= {s.interval for s in sampled}
    request = subscribe_request(profile, "t", profile.optics_subscriptions, 10.0, False, 60.0, 30.0, 600.0)
    got = {sub.sample_interval for sub in request.subscribe.subscription if sub.mode == 2}  # SAMPLE
    want = {{"dom": 60, "fec": 30, "thresholds": 600}[s.interval] * 10**9 for s in sampled}
    assert got == want


@pytest.mark.parametrize("name", ["openconfig", "eos", "xr", "junos", "cumulus"])
def test_openconfig_dom_asks_for_each_lane_instant_reading_not_the_whole_subtree(name: str) -> None:
    """A real transceiver subtree has ~30 leaves per lane (avg, min, max, interval, ...) and the
    temperature container every component's alarms: at the DOM interval only the instants are
    asked for; the subtree of thresholds comes at its own, slower interval."""
    profile = load_profile(name)
    dom = [s.path.rpartition(":")[2] for s in profile.optics_subscriptions if s.interval == "dom"]
    assert dom and all(p.endswith("/instant") for p in dom)
    assert {p.split("/")[-2] for p in dom} == {"input-power", "output-power", "laser-bias-current", "temperature"}


def test_sonic_takes_fec_from_the_counters_hash_and_subscribes_to_it_once() -> None:
    """orchagent keeps the FEC fields in the COUNTERS hash the counters' stream already receives:
    the sonic profile cuts them from there (collector/gnmi_counters_fec.py), and no link-health
    stream asks for COUNTERS a second time. The OpenConfig profiles subscribe to their FEC leaves."""
    sonic = load_profile("sonic")
    assert sonic.fec_in_counters
    optics = sonic.optics_streams(None, "sw1")
    assert "COUNTERS_DB" not in optics and all(not s.path.startswith("COUNTERS") for s in sonic.optics_subscriptions)
    assert [s.path for s in sonic.streams(None, "sw1")["COUNTERS_DB"]] == ["COUNTERS/Ethernet*"]  # the whole hash
    for name in ("openconfig", "eos", "xr", "junos", "cumulus"):
        other = load_profile(name)
        assert not other.fec_in_counters and any(s.interval == "fec" for s in other.optics_subscriptions), name


def test_fec_in_counters_needs_the_sonic_schema_and_whole_hashes() -> None:
    optics = {"schema": "openconfig", "fec": "counters", "subscriptions": [{"path": "/components", "mode": "sample"}]}
    whole = [{"path": "COUNTERS/Ethernet*", "mode": "sample"}]
    with pytest.raises(ProfileError, match="fec: counters reads SONiC's COUNTERS hash"):
        compile_profile(_doc(optics=optics, subscriptions=whole))
    with pytest.raises(ProfileError, match="fec"):
        compile_profile(_doc(optics={**optics, "schema": "sonic", "fec": "sometimes"}, subscriptions=whole))
    # the counters must ask for whole hashes, or no FEC would ever arrive: a clear error, not silence
    one_field = [{"path": "COUNTERS/Ethernet*/SAI_PORT_STAT_IF_IN_OCTETS", "mode": "sample"}]
    with pytest.raises(ProfileError, match="no subscription asks for a whole hash"):
        compile_profile(_doc(optics={**optics, "schema": "sonic"}, subscriptions=one_field))
    assert compile_profile(_doc(optics={**optics, "schema": "sonic"}, subscriptions=whole)).fec_in_counters
    assert compile_profile(
        _doc(optics={**optics, "schema": "sonic"}, subscriptions=[{**whole[0], "path": "COUNTERS/Ethernet8"}])
    )
