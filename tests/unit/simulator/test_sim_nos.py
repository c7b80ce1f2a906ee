"""NOS assignment, device clocks, the new fault fields, ``--write-config`` per profile, and the
shapes' wire bytes: whatever the shape, the values decode to the same simulated counters."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pygnmi.spec.v080 import gnmi_pb2

from fabric.model import FabricParams
from fabric.topology import build_aipod
from simulator.fabric_state import FabricState
from simulator.faults import FaultError, FaultKind, FaultSpec
from simulator.gnmi_paths import IF_FIELDS, LEAVES, PFC_PRIORITIES, Family, Selection
from simulator.gnmi_shapes import make_shapes
from simulator.gnmi_sonic import FIELDS, select_sonic
from simulator.gnmi_wire import SPEEDS, Encoding, Renderer, notification, timestamp
from simulator.nos import MIXED, PROFILES, Devices, Nos, NosError, assign_nos, clock_offset_ns, parse_nos
from simulator.sim_config import sim_config
from simulator.view import PortCounters

FABRIC = build_aipod(FabricParams(gpus=64, radix=16))
NAMES = st.lists(st.text("abcdefgh-0123", min_size=1, max_size=8), unique=True, max_size=40)
SHAPES = st.lists(st.sampled_from(list(Nos)), min_size=1, max_size=7)


# --- assignment and clocks -------------------------------------------------------------------


def test_parse_nos() -> None:
    assert parse_nos("openconfig") == (Nos.OPENCONFIG,)
    assert parse_nos("EOS, sonic") == (Nos.EOS, Nos.SONIC)
    assert parse_nos("mixed") == MIXED == (Nos.OPENCONFIG, Nos.EOS, Nos.SONIC, Nos.XR, Nos.CUMULUS)
    assert parse_nos(["xr", "mixed"]) == (Nos.XR, *MIXED)
    for bad, message in (("junos", "unknown NOS 'junos'"), ("", "at least one"), (",", "at least one")):
        with pytest.raises(NosError, match=message):
            parse_nos(bad)


@given(NAMES, SHAPES)
def test_assignment_is_round_robin_in_switch_order(names: list[str], shapes: list[Nos]) -> None:
    got = assign_nos(names, shapes)
    assert list(got) == names
    assert all(got[name] is shapes[i % len(shapes)] for i, name in enumerate(names))
    assert assign_nos(names, shapes) == got  # deterministic
    per_slot = [sum(1 for i in range(len(names)) if i % len(shapes) == k) for k in range(len(shapes))]
    assert max(per_slot, default=0) - min(per_slot, default=0) <= 1  # shapes share the switches evenly


def test_a_mixed_small_fabric_has_every_shape_among_its_leaves() -> None:
    devices = Devices(tuple(FABRIC.switches), MIXED)
    leaves = [n for n in FABRIC.switches if n.startswith("lf-")]
    assert [devices.nos_of(n) for n in leaves[:5]] == list(MIXED)
    assert devices.nos_of("no-such-switch") is Nos.OPENCONFIG
    assert not devices.uniform and Devices(tuple(FABRIC.switches)).uniform


@settings(max_examples=50)
@given(NAMES, st.floats(0.0, 86_400.0), st.integers(0, 2**32))
def test_clock_offsets_are_bounded_seeded_and_order_free(names: list[str], skew: float, seed: int) -> None:
    devices = Devices(names, clock_skew_s=skew, seed=seed)
    backwards = Devices(names[::-1], clock_skew_s=skew, seed=seed)
    for name in names:
        offset = devices.get(name).clock_offset_ns
        assert abs(offset) <= round(skew * 1e9)
        assert offset == backwards.get(name).clock_offset_ns == clock_offset_ns(name, skew, seed)
    if skew == 0:
        assert all(d == 0 for d in devices.offsets().values())


def test_clock_offsets_spread_both_ways() -> None:
    offsets = [clock_offset_ns(f"sw{i}", 300.0, 1) for i in range(200)]
    assert min(offsets) < -200e9 and max(offsets) > 200e9
    assert clock_offset_ns("sw1", 300.0, 1) != clock_offset_ns("sw1", 300.0, 2)


@pytest.mark.parametrize(
    ("kw", "message"), [({"clock_skew_s": -1.0}, "clock-skew"), ({"clock_jitter_ms": -1}, "jitter")]
)
def test_bad_clock_figures_are_refused(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(NosError, match=message):
        Devices(("a",), **kw)


# --- --write-config --------------------------------------------------------------------------


def test_write_config_collects_each_switch_with_its_nos_profile() -> None:
    nos = Devices(tuple(FABRIC.switches), MIXED).assignment()
    config = sim_config(gnmi_address="127.0.0.1:9339", snmp_address="127.0.0.1:1161", nos=nos)
    targets = config["targets"]
    by_profile = {t.get("profile", "openconfig"): t for t in targets if t["protocol"] == "gnmi"}
    leaves = [n for n in FABRIC.switches if n.startswith("lf-")]
    for profile in ("eos", "sonic", "xr"):
        assert by_profile[profile]["switches"] == [n for n in leaves if PROFILES[nos[n]] == profile]
    assert by_profile["sonic"]["username"] == "{switch}" and "username" not in by_profile["eos"]
    assert targets[-2:] == sim_config(gnmi_address="127.0.0.1:9339", snmp_address="127.0.0.1:1161")["targets"]
    # All gNMI: the spines get their profiles too; one NOS that needs no other profile: as before.
    everything = sim_config(gnmi_address="a:1", snmp_address=None, protocols="gnmi", nos=nos)["targets"]
    assert sum(len(t["switches"]) for t in everything[:-1]) == sum(1 for n in nos if PROFILES[nos[n]] != "openconfig")
    plain = {n: Nos.CUMULUS for n in nos}
    assert sim_config(gnmi_address="a:1", snmp_address="b:2", nos=plain) == sim_config(
        gnmi_address="a:1", snmp_address="b:2"
    )


# --- the fault fields ------------------------------------------------------------------------


def test_removed_and_snmp_slow_fault_fields() -> None:
    spec = FaultSpec.from_dict({"kind": "link_down", "switch": "lf-g1-r1", "removed": True})
    assert spec.removed is True and spec.to_dict()["removed"] is True
    slow = FaultSpec.from_dict({"kind": "snmp_slow", "switch": "sp-r1-1", "delay_s": 2})
    assert slow.kind is FaultKind.SNMP_SLOW and slow.delay_s == 2.0
    for bad, message in (
        ({"kind": "link_down", "switch": "x", "removed": "yes"}, "true or false"),
        ({"kind": "link_flap", "switch": "x", "removed": True}, "does not apply"),
        ({"kind": "snmp_slow", "switch": "x", "port": "swp1"}, "does not apply"),
    ):
        with pytest.raises(FaultError, match=message):
            FaultSpec.from_dict(bad)


def test_a_pulled_optic_is_not_present_and_slow_snmp_is_switch_state() -> None:
    clock = [10**18]
    state = FabricState(FABRIC, seed=1, clock=lambda: clock[0])
    fault = state.apply({"kind": "link_down", "switch": "lf-g1-r1", "port": "swp9", "removed": True})
    ports = {p.name: p for p in state.ports("lf-g1-r1")}
    assert not ports["swp9"].present and not ports["swp9"].oper_up
    assert all(p.present for n, p in ports.items() if n != "swp9")
    peer = {p.name: p for p in state.ports("sp-r1-1")}["swp1"]
    assert peer.present and not peer.oper_up  # the other end is just down
    clock[0] += 10**9
    state.clear(fault.id)
    assert all(p.present for p in state.ports("lf-g1-r1"))
    with pytest.raises(FaultError, match="delay_s"):
        state.apply({"kind": "snmp_slow", "switch": "sp-r1-1", "delay_s": 0})
    slow = state.apply({"kind": "snmp_slow", "switch": "sp-r1-1"})
    info = state.switch("sp-r1-1")
    assert info is not None and info.snmp_delay_s == 3.0 and info.reachable
    state.clear(slow.id)
    info = state.switch("sp-r1-1")
    assert info is not None and info.snmp_delay_s == 0.0


# --- shapes: the same truth in every wire form -----------------------------------------------

U64 = st.integers(0, 2**64 - 1)
_COUNTER_FIELDS = [f for f in IF_FIELDS if f not in ("oper_up", "admin_up", "speed_bps", "description")]


@st.composite
def port_rows(draw: st.DrawFn) -> list[PortCounters]:
    n = draw(st.integers(1, 4))
    out = []
    for i in range(1, n + 1):
        values: dict[str, Any] = {f: draw(U64) for f in _COUNTER_FIELDS}
        out.append(
            PortCounters(
                name=f"swp{i}",
                if_index=i,
                description=draw(st.text(max_size=12)),
                admin_up=True,
                oper_up=draw(st.booleans()),
                speed_bps=400 * 10**9,
                pfc_rx=tuple(draw(U64) for _ in range(PFC_PRIORITIES)),
                pfc_tx=tuple(draw(U64) for _ in range(PFC_PRIORITIES)),
                **values,
            )
        )
    return out


#: leaf path below the interface root → PortCounters field (or ("pfc_rx"|"pfc_tx", priority))
_OC_FIELDS: dict[str, Any] = {}
for _i, _leaf in enumerate(LEAVES[Family.INTERFACES]):
    _OC_FIELDS["/".join(e.name for e in _leaf.rel)] = IF_FIELDS[_leaf.column]
for _leaf in LEAVES[Family.PFC]:
    _OC_FIELDS["/".join(str(e) for e in _leaf.rel)] = (
        ("pfc_rx", _leaf.column) if _leaf.column < PFC_PRIORITIES else ("pfc_tx", _leaf.column - PFC_PRIORITIES)
    )


def _flat(prefix: list[str], doc: Any, out: dict[str, Any]) -> None:
    if isinstance(doc, dict):
        for k, v in doc.items():
            _flat([*prefix, k], v, out)
    else:
        out["/".join(prefix)] = doc


def _elem(e: Any) -> str:
    return str(e.name) + "".join(f"[{k}={v}]" for k, v in sorted(e.key.items()))


def decode(raw: list[bytes]) -> dict[tuple[str, Any], Any]:
    """(port, field) → value, from OpenConfig-tree Notifications (any of the four shapes)."""
    out: dict[tuple[str, Any], Any] = {}
    for data in raw:
        note = gnmi_pb2.SubscribeResponse.FromString(data).update
        for u in note.update:
            elems = list(note.prefix.elem) + list(u.path.elem)
            port = next(v for e in elems for v in e.key.values() if e.name == "interface")
            below = [_elem(e) for e in elems[3 if elems[0].name == "qos" else 2 :]]
            which = u.val.WhichOneof("value")
            value = getattr(u.val, which)
            leaves: dict[str, Any] = {}
            if which == "json_ietf_val":
                doc = json.loads(value)
                if isinstance(doc, dict):
                    _flat(below, doc, leaves)
                else:
                    leaves["/".join(below)] = doc
            else:
                leaves["/".join(below)] = value
            for path, v in leaves.items():
                field = _OC_FIELDS.get(path)
                if field is not None:
                    out[(port, field)] = v
    return out


def expected(ports: list[PortCounters], fields: Any) -> dict[tuple[str, Any], Any]:
    out: dict[tuple[str, Any], Any] = {}
    for p in ports:
        for f in fields:
            out[(p.name, f)] = getattr(p, f[0])[f[1]] if isinstance(f, tuple) else getattr(p, f)
    return out


_SPEED_BPS = {f"openconfig-if-ethernet:{name}": bps for bps, name in SPEEDS.items()}


def _plain(v: Any) -> Any:
    """A wire value as the view has it (JSON strings of uint64, UP/DOWN, speed identities)."""
    if isinstance(v, str) and v.isascii() and v.isdigit():  # ("²".isdigit() is True)
        return int(v)
    if isinstance(v, str):
        return {"UP": True, "DOWN": False, **_SPEED_BPS}.get(v, v)
    return v


_COUNTERS = _COUNTER_FIELDS
_PFC = [(d, p) for d in ("pfc_rx", "pfc_tx") for p in range(PFC_PRIORITIES)]


@settings(max_examples=40, deadline=None)
@given(port_rows(), st.sampled_from([Encoding.PROTO, Encoding.JSON_IETF]))
def test_every_openconfig_tree_shape_carries_the_same_counters(ports: list[PortCounters], encoding: Encoding) -> None:
    shapes = make_shapes(Renderer())
    everything = {
        Family.INTERFACES: Selection(Family.INTERFACES, tuple(range(len(LEAVES[Family.INTERFACES])))),
        Family.PFC: Selection(Family.PFC, tuple(range(len(LEAVES[Family.PFC])))),
    }
    want = expected(ports, [*_COUNTERS, "oper_up", "admin_up", "speed_bps", "description", *_PFC])
    for nos in (Nos.OPENCONFIG, Nos.CUMULUS, Nos.EOS, Nos.XR):
        raw = [
            notification(timestamp(1), g.prefix, g.updates)
            for sel in everything.values()
            for g in shapes[nos].render("sw", sel, encoding, ports, ())
        ]
        got = {k: _plain(v) for k, v in decode(raw).items()}
        assert got == {k: _plain(v) for k, v in want.items()}, nos


@settings(max_examples=40, deadline=None)
@given(port_rows())
def test_sonic_counters_carry_the_same_counters_as_strings(ports: list[PortCounters]) -> None:
    shape = make_shapes(Renderer())[Nos.SONIC]
    (sel,) = select_sonic("COUNTERS_DB", [*_names("COUNTERS/Ethernet*")])
    (g,) = shape.render("COUNTERS_DB", sel, Encoding.PROTO, ports, ())
    note = gnmi_pb2.SubscribeResponse.FromString(notification(timestamp(1), g.prefix, g.updates)).update
    (u,) = note.update
    table = json.loads(u.val.json_ietf_val)
    by_name = {f.name: f for f in FIELDS[Family.SONIC_COUNTERS]}
    for p in ports:
        row = table[p.name]
        assert all(isinstance(v, str) for v in row.values())
        assert int(row["SAI_PORT_STAT_IF_IN_OCTETS"]) == p.in_octets
        assert int(row["SAI_PORT_STAT_ETHER_STATS_CRC_ALIGN_ERRORS"]) == p.in_fcs_errors
        assert int(row["SAI_PORT_STAT_PAUSE_TX_PKTS"]) == p.out_pause_frames
        for prio in range(PFC_PRIORITIES):
            assert int(row[f"SAI_PORT_STAT_PFC_{prio}_RX_PKTS"]) == p.pfc_rx[prio]
            assert int(row[f"SAI_PORT_STAT_PFC_{prio}_TX_PKTS"]) == p.pfc_tx[prio]
        assert set(row) == set(by_name)


def _names(text: str) -> list[Any]:
    from simulator.gnmi_paths import parse_xpath

    return parse_xpath(text)


@pytest.mark.parametrize(
    ("db", "path", "message"),
    [
        ("COUNTERS_DB", "COUNTERS", "keyed by SAI object id"),
        ("COUNTERS_DB", "COUNTERS/swp1/NOPE", "no field"),
        ("COUNTERS_DB", "PORT_TABLE", "serves COUNTERS"),
        ("APPL_DB", "PORT_TABLE/swp1/speed/x", "serves PORT_TABLE"),
        ("CONFIG_DB", "PORT_TABLE", "not served"),
        ("STATE_DB", "PORT_TABLE", "served tables: TRANSCEIVER_DOM_SENSOR"),  # link health only
    ],
)
def test_sonic_paths_that_select_nothing(db: str, path: str, message: str) -> None:
    from simulator.gnmi_paths import UnknownPathError

    with pytest.raises(UnknownPathError, match=message):
        select_sonic(db, _names(path))


def test_sonic_field_globs_and_single_fields() -> None:
    (sel,) = select_sonic("COUNTERS_DB", _names("COUNTERS/Ethernet*/SAI_PORT_STAT_PFC_*"))
    names = [FIELDS[Family.SONIC_COUNTERS][i].name for i in sel.leaves]
    assert len(names) == 16 and all(n.startswith("SAI_PORT_STAT_PFC_") for n in names)
    assert (sel.port, sel.glob) == (None, "Ethernet*")
    (one,) = select_sonic("APPL_DB", _names("PORT_TABLE/swp3/oper_status"))
    assert (one.family, one.port, len(one.leaves)) == (Family.SONIC_PORTS, "swp3", 1)
