"""gNMI path parsing and matching, the leaf tables, and the hand-built wire bytes of the simulator."""

from __future__ import annotations

import time
from typing import Any

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pygnmi.spec.v080 import gnmi_pb2

from simulator.gnmi_paths import (
    IF_COUNTERS,
    LEAVES,
    OPENCONFIG_FAMILIES,
    Elem,
    Family,
    PathError,
    Selection,
    UnknownPathError,
    format_path,
    merge,
    parse_xpath,
    path_elems,
    select,
)
from simulator.gnmi_subscribe import ON_CHANGE, SAMPLE, TARGET_DEFINED, RequestError, _advance, build_plans
from simulator.gnmi_wire import SYNC_RESPONSE, Encoding, Renderer, notification, timestamp, varints
from simulator.view import LldpNeighbor, PortCounters
from wire.protobuf import varint


def gpath(text: str, origin: str = "") -> Any:
    path = gnmi_pb2.Path(origin=origin)
    for e in parse_xpath(text):
        path.elem.add(name=e.name, key=dict(e.keys))
    return path


def sel(text: str) -> list[Selection]:
    return merge(select(parse_xpath(text)))


def port(name: str = "swp1", **kw: Any) -> PortCounters:
    base: dict[str, Any] = {
        "name": name,
        "if_index": int(name[3:]),
        "description": "sp-r1-1:swp3",
        "admin_up": True,
        "oper_up": True,
        "speed_bps": 400 * 10**9,
        "last_change_ns": 1_700_000_000_000_000_000,
        "last_clear_ns": 1_690_000_000_000_000_000,
        "pfc_rx": tuple(range(8)),
        "pfc_tx": tuple(range(100, 108)),
        "in_pause_frames": 7,
        "out_pause_frames": 9,
    }
    base.update({f: i * 1_000_003 + 2**40 for i, (_, f) in enumerate(IF_COUNTERS) if f != "last_clear_ns"})
    base.update(kw)
    return PortCounters(**base)


# --- parsing --------------------------------------------------------------------------------


def test_parse_xpath() -> None:
    assert parse_xpath("/interfaces/interface[name=swp1]/state") == [
        Elem("interfaces"),
        Elem("interface", (("name", "swp1"),)),
        Elem("state"),
    ]
    assert parse_xpath("a[k2=v2][k1=x/y\\]z]") == [Elem("a", (("k1", "x/y]z"), ("k2", "v2")))]
    assert parse_xpath("/") == parse_xpath("") == []
    assert format_path(parse_xpath("/a/b[k=v]")) == "/a/b[k=v]"


@pytest.mark.parametrize("text", ["/a[k", "/a[k=v", "/a[kv]", "/a[k=v]x", "/a/[k=v]"])
def test_parse_xpath_rejects_malformed(text: str) -> None:
    with pytest.raises(PathError):
        parse_xpath(text)


def test_path_elems_strips_modules_and_checks() -> None:
    assert path_elems(gpath("/openconfig-interfaces:interfaces/interface[name=*]", origin="openconfig")) == (
        Elem("interfaces"),
        Elem("interface", (("name", "*"),)),
    )
    for bad in (
        gnmi_pb2.Path(element=["interfaces"]),
        gnmi_pb2.Path(origin="cli", elem=[gnmi_pb2.PathElem(name="show")]),
        gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name="")]),
        gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name="a[b")]),
        gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name="a", key={"k": ""})]),
        gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name="...", key={"k": "v"})]),
    ):
        with pytest.raises(PathError):
            path_elems(bad)


# --- matching -------------------------------------------------------------------------------


def test_leaf_tables() -> None:
    assert len(LEAVES[Family.INTERFACES]) == 22
    assert len(LEAVES[Family.PFC]) == 16
    assert len(LEAVES[Family.LLDP]) == 4
    on_change = {format_path(x.rel) for x in LEAVES[Family.INTERFACES] if x.on_change}
    assert "/state/oper-status" in on_change and "/ethernet/state/port-speed" in on_change
    assert not any(x.on_change for x in LEAVES[Family.PFC])


def test_select_containers_wildcards_and_keys() -> None:
    (s,) = sel("/interfaces/interface[name=*]/state/counters")
    assert (s.family, s.port, len(s.leaves)) == (Family.INTERFACES, None, 15)
    (s,) = sel("/interfaces/interface[name=swp7]/ethernet")
    assert (s.port, len(s.leaves)) == ("swp7", 3)
    assert {x.family for x in sel("/")} == set(OPENCONFIG_FAMILIES)
    assert {x.family for x in sel("/...")} == set(OPENCONFIG_FAMILIES)
    assert {x.family for x in sel("/*/interfaces")} == {Family.PFC, Family.LLDP}
    (s,) = sel("/.../in-pause-pkts")
    assert (s.family, len(s.leaves)) == (Family.PFC, 8)
    (s,) = sel("/qos/interfaces/interface[interface-id=swp2]/switch-priority[priority=3]/state/counters")
    assert (s.port, len(s.leaves)) == ("swp2", 2)
    (s,) = sel("/lldp/interfaces/interface[name=swp1]/neighbors/neighbor[id=1]/state/system-name")
    assert (s.family, s.port, s.neighbor, s.leaves) == (Family.LLDP, "swp1", "1", (0,))
    (s,) = sel("/interfaces/interface/state/oper-status")  # an omitted key is a wildcard
    assert s.port is None


@pytest.mark.parametrize(
    "text",
    [
        "/system",
        "/interfaces/interface[ifname=swp1]",  # not the list's key
        "/qos/interfaces/interface/switch-priority[priority=9]",
        "/interfaces/interface/state/counters/in-octets/extra",
    ],
)
def test_select_unknown(text: str) -> None:
    with pytest.raises(UnknownPathError):
        select(parse_xpath(text))


def test_merge_unions_leaves_of_the_same_filter() -> None:
    a = select(parse_xpath("/interfaces/interface/state/oper-status"))
    b = select(parse_xpath("/interfaces/interface/state/counters/in-octets"))
    c = select(parse_xpath("/interfaces/interface[name=swp1]/state/oper-status"))
    merged = merge(a + b + c)
    assert sorted(len(m.leaves) for m in merged) == [1, 2]


# --- plans ----------------------------------------------------------------------------------


def _sl(*subs: Any) -> Any:
    return gnmi_pb2.SubscriptionList(prefix=gnmi_pb2.Path(target="sw"), subscription=list(subs))


def test_target_defined_splits_counters_and_state() -> None:
    sub = gnmi_pb2.Subscription(path=gpath("/interfaces"), mode=TARGET_DEFINED, sample_interval=10**10)
    plans = build_plans(_sl(sub), True, 10**9)
    by_mode = {p.sample_ns: p for p in plans if p.sel.family is Family.INTERFACES}
    assert set(by_mode) == {0, 10**10}
    assert len(by_mode[0].sel.leaves) == 5 and len(by_mode[10**10].sel.leaves) == 17
    # /interfaces also holds the link-health leaves: the transceiver's name is state, FEC and BER samples
    optics = {p.sample_ns: len(p.sel.leaves) for p in plans if p.sel.family is Family.OPTICS_INTERFACES}
    assert optics == {0: 1, 10**10: 5}


def test_plan_validation() -> None:
    fast = gnmi_pb2.Subscription(path=gpath("/interfaces"), mode=SAMPLE, sample_interval=10**6)
    with pytest.raises(RequestError) as err:
        build_plans(_sl(fast), True, 10**9)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert build_plans(_sl(fast), False, 10**9)[0].sample_ns  # ONCE / POLL ignore intervals
    zero = gnmi_pb2.Subscription(path=gpath("/interfaces"), mode=SAMPLE)
    assert build_plans(_sl(zero), True, 10**9)[0].sample_ns == 10**9  # 0: the minimum
    change = gnmi_pb2.Subscription(path=gpath("/lldp"), mode=ON_CHANGE)
    assert build_plans(_sl(change), True, 10**9)[0].sample_ns == 0
    with pytest.raises(RequestError) as err:
        build_plans(_sl(gnmi_pb2.Subscription(path=gpath("/nope"))), True, 10**9)
    assert err.value.code == grpc.StatusCode.NOT_FOUND


def test_advance_skips_missed_ticks() -> None:
    assert _advance(10.0, 2 * 10**9, 10.0) == 12.0
    assert _advance(10.0, 2 * 10**9, 15.5) == 16.0
    assert _advance(20.0, 2 * 10**9, 15.5) == 20.0
    assert _advance(float("inf"), 0, 15.5) == float("inf")


# --- wire bytes -----------------------------------------------------------------------------


@given(st.lists(st.integers(min_value=0, max_value=2**64 - 1), max_size=50))
def test_varints_match_protobuf(values: list[int]) -> None:
    expected = [gnmi_pb2.TypedValue(uint_val=v).SerializeToString()[1:] for v in values]
    assert varints(values) == expected
    assert [varint(v) for v in values] == expected


def test_varints_wrap_out_of_range_values() -> None:
    assert varints([-1, 2**64 + 5]) == [varint(2**64 - 1), varint(5)]


def _expected(target: str, p: PortCounters, ts: int) -> Any:
    """The same Notification built with the protobuf runtime."""
    note = gnmi_pb2.Notification(timestamp=ts)
    note.prefix.target = target
    note.prefix.elem.add(name="interfaces")
    note.prefix.elem.add(name="interface", key={"name": p.name})
    for leaf, value in (
        ("state/counters/in-octets", gnmi_pb2.TypedValue(uint_val=p.in_octets)),
        ("state/oper-status", gnmi_pb2.TypedValue(string_val="UP" if p.oper_up else "DOWN")),
        ("state/description", gnmi_pb2.TypedValue(string_val=p.description)),
        ("ethernet/state/port-speed", gnmi_pb2.TypedValue(string_val="openconfig-if-ethernet:SPEED_200GB")),
    ):
        update = note.update.add(val=value)
        for e in parse_xpath(leaf):
            update.path.elem.add(name=e.name)
    return gnmi_pb2.SubscribeResponse(update=note)


def test_rendered_bytes_decode_as_gnmi_messages() -> None:
    renderer = Renderer()
    ports = [port("swp1", speed_bps=200 * 10**9), port("swp2", oper_up=False, speed_bps=200 * 10**9, description="é")]
    # in-octets, oper-status, description, port-speed: counters first, then the other leaves
    groups = renderer.render("lf-g1-r1", Selection(Family.INTERFACES, (0, 15, 18, 19)), Encoding.PROTO, ports, ())
    assert [g.port for g in groups] == ["swp1", "swp2"]
    for g, p in zip(groups, ports, strict=True):
        got = gnmi_pb2.SubscribeResponse.FromString(notification(timestamp(123), g.prefix, g.updates))
        assert got == _expected("lf-g1-r1", p, 123)
        assert len(g.keys) == len(g.updates)
    # the GetResponse form is the same bytes concatenated
    body = b"".join(notification(timestamp(5), g.prefix, g.updates) for g in groups)
    assert len(gnmi_pb2.GetResponse.FromString(body).notification) == 2
    assert gnmi_pb2.SubscribeResponse.FromString(SYNC_RESPONSE).sync_response


def test_json_ietf_values_and_deletes() -> None:
    renderer = Renderer()
    (s,) = sel("/interfaces/interface[name=swp1]/state/counters/in-octets")
    (g,) = renderer.render("sw", s, Encoding.JSON_IETF, [port("swp1"), port("swp2")], ())
    got = gnmi_pb2.SubscribeResponse.FromString(notification(timestamp(1), g.prefix, g.updates, [g.keys[0]]))
    assert got.update.update[0].val.json_ietf_val == b'"%d"' % port().in_octets
    assert got.update.delete[0] == got.update.update[0].path


def test_lldp_groups_per_port_with_neighbor_ids() -> None:
    table = [
        LldpNeighbor("swp1", 1, "02:00:00:00:00:01", "srv-g1-001", "nic1", "GPU 1"),
        LldpNeighbor("swp1", 1, "02:00:00:00:00:09", "srv-g1-009", "nic1", "GPU 1"),
        LldpNeighbor("swp2", 2, "02:00:00:00:00:02", "srv-g1-002", "nic1", "GPU 1"),
    ]
    renderer = Renderer()
    (s,) = sel("/lldp")
    groups = renderer.render("sw", s, Encoding.PROTO, (), table)
    assert [(g.port, len(g.updates)) for g in groups] == [("swp1", 8), ("swp2", 4)]
    (s,) = sel("/lldp/interfaces/interface[name=swp1]/neighbors/neighbor[id=2]/state/system-name")
    (g,) = renderer.render("sw", s, Encoding.PROTO, (), table)
    note = gnmi_pb2.SubscribeResponse.FromString(notification(timestamp(1), g.prefix, g.updates)).update
    assert note.update[0].val.string_val == "srv-g1-009"
    assert note.update[0].path.elem[1].key["id"] == "2"


@pytest.mark.slow
def test_encode_rate_beats_the_protobuf_runtime(capsys: pytest.CaptureFixture[str]) -> None:
    """Values/s on one core: the wire encoder vs building gnmi_pb2 objects (printed for the record)."""
    ports = [port(f"swp{i}", in_octets=i * 987_654_321_123) for i in range(1, 129)]
    (s,) = sel("/interfaces")
    leaves = [format_path(x.rel)[1:] for x in LEAVES[Family.INTERFACES]]
    renderer = Renderer()

    def wire() -> int:
        n = 0
        for sw in range(20):
            ts = timestamp(time.time_ns())
            for g in renderer.render(f"sw{sw}", s, Encoding.PROTO, ports, ()):
                notification(ts, g.prefix, g.updates)
                n += len(g.updates)
        return n

    def runtime() -> int:
        n = 0
        for sw in range(20):
            for p in ports:
                note = gnmi_pb2.Notification(timestamp=time.time_ns())
                note.prefix.target = f"sw{sw}"
                note.prefix.elem.add(name="interfaces")
                note.prefix.elem.add(name="interface", key={"name": p.name})
                for leaf in leaves:
                    u = note.update.add()
                    for e in leaf.split("/"):
                        u.path.elem.add(name=e)
                    u.val.uint_val = p.in_octets
                gnmi_pb2.SubscribeResponse(update=note).SerializeToString()
                n += len(leaves)
        return n

    rates = {}
    for name, fn in (("wire", wire), ("runtime", runtime)):
        fn()
        best = 0.0
        for _ in range(3):
            t0 = time.perf_counter()
            n = fn()
            best = max(best, n / (time.perf_counter() - t0))
        rates[name] = best
    with capsys.disabled():
        print(f"\ngNMI encode, values/s on one core: wire {rates['wire']:,.0f}, runtime {rates['runtime']:,.0f}")
    assert rates["wire"] > 3 * rates["runtime"]
