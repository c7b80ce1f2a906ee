"""The link-health stream decoder (collector/gnmi_optics.py) on the wire forms the simulator serves
(simulator/gnmi_optics.py), in PROTO and JSON_IETF, on a JSON container form, and on hostile input.

No real OpenConfig transceiver or SONiC FEC/DOM capture exists in ../shared/fixtures (only SR
Linux's native ``interface/transceiver`` and sonic-gnmi's PFC wildcard answer, whose form
``{"<port>": {"<field>": "<n>"}}`` the FEC glob answer follows): the golden shapes are the
simulator's, built by its own renderers into SubscribeResponse bytes.
"""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pygnmi.spec.v080 import gnmi_pb2

from collector.gnmi_optics import MAX_KEYS, OpticsDecoder, _split
from collector.gnmi_values import BAD_JSON, DECODE_ERROR, MALFORMED, NEGATIVE, NOT_A_NUMBER, OUT_OF_RANGE, TOO_MANY
from fabric.model import FabricParams
from fabric.topology import build_aipod
from simulator.fabric_state import FabricState
from simulator.gnmi_optics import OPTICS_LEAVES, OpticsRenderer, SonicOpticsRenderer
from simulator.gnmi_paths import Family, Selection
from simulator.gnmi_shapes import EOS_LAYOUT
from simulator.gnmi_wire import Encoding, Group, Layout, notification, timestamp

NOW = time.time_ns()
STATE = FabricState(build_aipod(FabricParams(gpus=128, radix=16)), seed=4, clock=lambda: NOW)
SWITCH = "lf-g1-r1"
READINGS = STATE.transceivers(SWITCH)


def everything(family: Family) -> Selection:
    return Selection(family, tuple(range(len(OPTICS_LEAVES[family]))))


@pytest.fixture(autouse=True)
def _now_is_when_the_test_runs() -> None:
    """The device's time is taken when each test runs, not when the module was imported: the
    decoder bounds it against the receive time (30 s), and a full run reaches this file minutes in."""
    global NOW
    NOW = time.time_ns()


def messages(groups: list[Group], ts: int | None = None) -> list[bytes]:
    return [notification(timestamp(NOW if ts is None else ts), g.prefix, g.updates) for g in groups]


def decoder(schema: str = "openconfig") -> tuple[OpticsDecoder, Counter[str]]:
    bad: Counter[str] = Counter()
    return OpticsDecoder(SWITCH, schema, lambda kind, n: bad.update({kind: n})), bad  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("encoding", "layout"),
    [(Encoding.PROTO, None), (Encoding.JSON_IETF, None), (Encoding.PROTO, EOS_LAYOUT)],
    ids=["proto", "json_ietf", "eos-containers"],
)
def test_openconfig_wire_forms_decode_to_the_simulated_readings(encoding: Encoding, layout: Layout | None) -> None:
    r = OpticsRenderer()
    dec, bad = decoder()
    # the interfaces bring the device's map (state/transceiver); the components' DOM lands by it
    for family in (Family.OPTICS_INTERFACES, Family.OPTICS_COMPONENTS):
        for raw in messages(r.render(SWITCH, everything(family), encoding, READINGS, layout)):
            assert dec.feed(raw) is False
    fec, dom = dec.take_samples()
    assert not bad
    assert len(fec) == len(dom) == len(READINGS)
    by_port = {s.port: s for s in dom}
    for reading, f in zip(READINGS, fec, strict=True):
        assert (f.port, f.corrected, f.uncorrectable, f.symbol_errors) == (
            reading.port,
            reading.fec_corrected,
            reading.fec_uncorrectable,
            reading.symbol_errors,
        )
        assert f.pre_fec_ber == pytest.approx(reading.pre_fec_ber) and f.bins is None
        d = by_port[reading.port]  # the interface that names the component, not a name guessed
        assert d.component == reading.component != reading.port
        assert (d.rx_power_dbm, d.tx_power_dbm, d.laser_bias_ma) == (
            reading.rx_power_dbm,
            reading.tx_power_dbm,
            reading.laser_bias_ma,
        )
        assert reading.thresholds is not None and d.rx_low_critical_dbm == reading.thresholds.rx_low_critical_dbm
        assert abs(d.time.timestamp() * 1e9 - NOW) < 1e3  # the device's time, within its bound


def test_transceivers_before_any_interface_names_them_are_counted_then_land_once_mapped() -> None:
    r = OpticsRenderer()
    dec, bad = decoder()
    comps = messages(r.render(SWITCH, everything(Family.OPTICS_COMPONENTS), Encoding.PROTO, READINGS))
    for raw in comps:
        dec.feed(raw)
    assert dec.take_samples() == ([], []) and bad == {"unmapped": len(READINGS)}
    only_map = Selection(Family.OPTICS_INTERFACES, (0,))  # state/transceiver, ON_CHANGE
    for raw in messages(r.render(SWITCH, only_map, Encoding.PROTO, READINGS)):
        dec.feed(raw)
    for raw in comps:
        dec.feed(raw)
    assert len(dec.take_samples()[1]) == len(READINGS)


def test_thresholds_read_at_their_own_interval_ride_on_every_later_dom_sample() -> None:
    """The profiles ask for a module's thresholds every collector.thresholds_interval_s and its
    readings every DOM interval: separate Notifications. Each DOM sample carries the last
    thresholds its transceiver sent, not the analyzer's configured ones."""
    r = OpticsRenderer()
    dec, bad = decoder()
    for raw in messages(r.render(SWITCH, Selection(Family.OPTICS_INTERFACES, (0,)), Encoding.PROTO, READINGS)):
        dec.feed(raw)  # the interface -> transceiver map
    readings = Selection(Family.OPTICS_COMPONENTS, (0, 1, 2, 3))
    limits = Selection(Family.OPTICS_COMPONENTS, (4, 5, 6, 7))
    for raw in messages(r.render(SWITCH, readings, Encoding.PROTO, READINGS)):
        dec.feed(raw)
    before = dec.take_samples()[1]
    assert len(before) == len(READINGS) and all(d.rx_low_critical_dbm is None for d in before)
    for raw in messages(r.render(SWITCH, limits, Encoding.PROTO, READINGS)):
        dec.feed(raw)
    assert dec.take_samples() == ([], [])  # thresholds alone are no sample
    for _ in range(2):  # and they stay
        for raw in messages(r.render(SWITCH, readings, Encoding.PROTO, READINGS)):
            dec.feed(raw)
        after = {d.port: d for d in dec.take_samples()[1]}
        for reading in READINGS:
            assert reading.thresholds is not None
            d = after[reading.port]
            assert (d.rx_low_warning_dbm, d.rx_low_critical_dbm, d.bias_high_critical_ma) == (
                reading.thresholds.rx_low_warning_dbm,
                reading.thresholds.rx_low_critical_dbm,
                reading.thresholds.bias_high_critical_ma,
            )
    assert not bad


def test_a_transceiver_notification_with_no_readings_is_no_sample() -> None:
    """Once a component's Notifications are read by plan, one that brings nothing (no update: a
    device may send a bare prefix) gives no DOM row of empty columns, and nothing is counted."""
    r = OpticsRenderer()
    dec, bad = decoder()
    for raw in messages(r.render(SWITCH, Selection(Family.OPTICS_INTERFACES, (0,)), Encoding.PROTO, READINGS)):
        dec.feed(raw)
    groups = r.render(SWITCH, Selection(Family.OPTICS_COMPONENTS, (0, 1, 2, 3)), Encoding.PROTO, READINGS)
    for raw in messages(groups):
        dec.feed(raw)
    assert len(dec.take_samples()[1]) == len(READINGS)  # planned now
    for raw in messages([g._replace(keys=[], updates=[]) for g in groups]):
        dec.feed(raw)
    assert dec.take_samples() == ([], []) and not bad


@pytest.mark.parametrize("single_port", [False, True])
def test_sonic_wire_forms_decode_to_the_simulated_readings(single_port: bool) -> None:
    r = SonicOpticsRenderer()
    dec, bad = decoder("sonic")
    port = READINGS[3].port if single_port else None
    fec_sel = Selection(Family.SONIC_FEC, tuple(range(19)), port, None, None if port else "Ethernet*")
    for sel, db in (
        (fec_sel, "COUNTERS_DB"),
        (Selection(Family.SONIC_DOM_LIMITS, (0, 1, 2, 3), port), "STATE_DB"),
        (Selection(Family.SONIC_DOM, (0, 1, 2, 3, 4), port), "STATE_DB"),
    ):
        for raw in messages(r.render(db, sel, READINGS)):
            dec.feed(raw)
    fec, dom = dec.take_samples()
    assert not bad
    expected = [x for x in READINGS if port in (None, x.port)]
    assert [f.port for f in sorted(fec)] == sorted(x.port for x in expected) == [d.port for d in dom]
    for reading in expected:
        f = next(s for s in fec if s.port == reading.port)
        assert f.bins == reading.fec_bins and f.corrected == reading.fec_corrected
        d = next(s for s in dom if s.port == reading.port)
        assert d.rx_power_dbm == pytest.approx(reading.rx_power_dbm, abs=1e-4)
        assert d.rx_low_warning_dbm == -8.0  # from the other table, kept by port


def test_a_json_container_form_and_decimal64_values_decode_too() -> None:
    """XR-like: one update per ``state`` container with a JSON_IETF body; decimal_val measurements."""
    dec, bad = decoder()
    iface = gnmi_pb2.Path(
        elem=[gnmi_pb2.PathElem(name="interfaces"), gnmi_pb2.PathElem(name="interface", key={"name": "Ethernet0"})]
    )
    note = gnmi_pb2.Notification(timestamp=NOW, prefix=iface)
    state = {"transceiver": "Ethernet0-xcvr", "counters": {"in-octets": "1"}}
    note.update.add(
        path=gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name="state")]),
        val=gnmi_pb2.TypedValue(json_ietf_val=json.dumps(state).encode()),
    )
    eth = {
        "counters": {"fec-corrected-blocks": "42", "fec-uncorrectable-blocks": "0"},
        "pre-fec-ber": {"instant": "2.5e-08"},
    }
    note.update.add(
        path=gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name="ethernet"), gnmi_pb2.PathElem(name="state")]),
        val=gnmi_pb2.TypedValue(json_ietf_val=json.dumps(eth).encode()),
    )
    dec.feed(gnmi_pb2.SubscribeResponse(update=note).SerializeToString())
    comp = gnmi_pb2.Path(
        elem=[gnmi_pb2.PathElem(name="components"), gnmi_pb2.PathElem(name="component", key={"name": "Ethernet0-xcvr"})]
    )
    note = gnmi_pb2.Notification(timestamp=NOW, prefix=comp)
    chans = {
        "channel": [
            {"index": 1, "state": {"input-power": {"instant": "-3.10"}}},
            {"index": 2, "state": {"input-power": {"instant": "-4.20"}}},
        ]
    }
    note.update.add(
        path=gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name="transceiver"), gnmi_pb2.PathElem(name="physical-channels")]),
        val=gnmi_pb2.TypedValue(json_ietf_val=json.dumps(chans).encode()),
    )
    temp = [gnmi_pb2.PathElem(name=n) for n in ("state", "temperature", "instant")]
    note.update.add(
        path=gnmi_pb2.Path(elem=temp), val=gnmi_pb2.TypedValue(decimal_val=gnmi_pb2.Decimal64(digits=415, precision=1))
    )
    dec.feed(gnmi_pb2.SubscribeResponse(update=note).SerializeToString())
    (fec,), (dom,) = dec.take_samples()
    assert (fec.port, fec.corrected, fec.uncorrectable, fec.pre_fec_ber) == ("Ethernet0", 42, 0, 2.5e-08)
    assert (dom.port, dom.rx_power_dbm, dom.temperature_c) == ("Ethernet0", -4.2, 41.5)  # the worst lane
    assert not bad  # in-octets under the interface is not a link-health leaf: passed over, not an error


def _leaf(path: list[str], val: gnmi_pb2.TypedValue) -> bytes:
    elems = [gnmi_pb2.PathElem(name="interfaces"), gnmi_pb2.PathElem(name="interface", key={"name": "e1"})]
    elems += [gnmi_pb2.PathElem(name=n) for n in path]
    note = gnmi_pb2.Notification(timestamp=NOW)
    note.update.add(path=gnmi_pb2.Path(elem=elems), val=val)
    raw: bytes = gnmi_pb2.SubscribeResponse(update=note).SerializeToString()
    return raw


BER = ["ethernet", "state", "pre-fec-ber", "instant"]


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        (b"\xff\xff\xff", MALFORMED),
        (_leaf(BER, gnmi_pb2.TypedValue(double_val=float("nan"))), NOT_A_NUMBER),
        (_leaf(BER, gnmi_pb2.TypedValue(double_val=3.0)), OUT_OF_RANGE),
        (_leaf(BER, gnmi_pb2.TypedValue(json_ietf_val=b"{nope")), BAD_JSON),
        (_leaf(["ethernet", "state", "counters", "fec-corrected-blocks"], gnmi_pb2.TypedValue(int_val=-1)), NEGATIVE),
    ],
)
def test_untrusted_values_are_skipped_and_counted_never_raised(raw: bytes, kind: str) -> None:
    dec, bad = decoder()
    assert dec.feed(raw) is False
    assert dec.take_samples() == ([], []) and bad == {kind: 1}


def test_a_sonic_table_of_too_many_ports_is_cut_and_counted() -> None:
    dec, bad = decoder("sonic")
    doc = {f"Ethernet{i}": {"SAI_PORT_STAT_IF_IN_FEC_CORRECTABLE_FRAMES": "1"} for i in range(MAX_KEYS + 5)}
    note = gnmi_pb2.Notification(timestamp=NOW, prefix=gnmi_pb2.Path(target="COUNTERS_DB"))
    path = gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name="COUNTERS"), gnmi_pb2.PathElem(name="Ethernet*")])
    note.update.add(path=path, val=gnmi_pb2.TypedValue(json_ietf_val=json.dumps(doc).encode()))
    dec.feed(gnmi_pb2.SubscribeResponse(update=note).SerializeToString())
    assert len(dec.take_samples()[0]) == MAX_KEYS and bad == {TOO_MANY: 1}


def test_a_device_time_out_of_bounds_is_replaced_by_the_receive_time() -> None:
    dec, _ = decoder()
    dec.feed(_leaf(BER, gnmi_pb2.TypedValue(double_val=1e-9)))
    late = _leaf(BER, gnmi_pb2.TypedValue(double_val=1e-9))
    resp = gnmi_pb2.SubscribeResponse.FromString(late)
    resp.update.timestamp = NOW - 3600 * 10**9  # an hour behind: beyond collector.max_clock_skew_s
    dec.feed(resp.SerializeToString())
    (first, second), _ = dec.take_samples()
    assert abs(second.time.timestamp() - time.time()) < 60 and abs(first.time.timestamp() * 1e9 - NOW) < 1e3


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.sampled_from(["openconfig", "sonic"]))
def test_any_bytes_are_decoded_or_counted_never_raised(raw: bytes, schema: str) -> None:
    dec, bad = decoder(schema)
    dec.feed(raw)
    assert DECODE_ERROR not in bad
    dec.take_samples()


_SENSOR_NAMES = ["rx1power", "rx2power", "rx01power", "tx1power", "tx4power", "tx1bias", "tx8bias", "temperature",
                 "voltage", "rx1power_x", "rx123power", "x" * 257]  # fmt: skip
_SENSOR_VALUES = st.integers(0, 9).flatmap(
    lambda k: (
        st.floats(-50, 60).map(lambda x: f"{x:.4f}")  # what xcvrd writes, in bounds for every unit or not
        if k < 6
        else st.sampled_from(["N/A", "", "None", "n/a", " 7.25 ", "nan", "inf", "1e400", "junk"])
        if k < 8
        else st.text(max_size=5)
        if k == 8
        else st.floats(allow_nan=True)
        | st.integers(-(10**20), 10**20)
        | st.booleans()
        | st.none()
        | st.lists(st.integers(), max_size=2)
    )
)
_LIMIT_VALUES = st.sampled_from(["-10.0", "-8.0", "13", "N/A", "junk", "99999", None, [1]])


def _sonic_note(table: str, port: str | None, doc: dict[str, object]) -> bytes:
    """One Update at ``TABLE/<port>``, or at ``TABLE`` itself (``port`` None: a whole table)."""
    note = gnmi_pb2.Notification(timestamp=NOW, prefix=gnmi_pb2.Path(target="STATE_DB"))
    path = gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name=n) for n in (table, port) if n is not None])
    note.update.add(path=path, val=gnmi_pb2.TypedValue(json_ietf_val=json.dumps(doc).encode()))
    raw: bytes = gnmi_pb2.SubscribeResponse(update=note).SerializeToString()
    return raw


_SENSORS = st.dictionaries(st.sampled_from(_SENSOR_NAMES), _SENSOR_VALUES, max_size=8)
_LIMITS = st.dictionaries(
    st.sampled_from(["rxpowerlowalarm", "rxpowerlowwarning", "txbiashighalarm", "temphighalarm"]),
    _LIMIT_VALUES,
    max_size=4,
)
#: A whole table's ports (sonic-gnmi's answer to the table's path): hashes, and what a table
#: should not hold (a port that is no hash, an empty or long port name).
_TABLE_PORTS = st.sampled_from(["Ethernet0", "Ethernet8", "Ethernet4", "Ethernet12"] * 3 + ["Eth1/1", "", "p" * 300])
#: A module's hash as xcvrd writes it (most of a table), beside the generated ones above.
_PLAIN_SENSORS = st.dictionaries(
    st.sampled_from(["rx1power", "rx2power", "tx1power", "tx1bias", "tx2bias", "temperature", "voltage"]),
    st.floats(-20, 60).map(lambda x: f"{x:.4f}") | st.sampled_from(["N/A", "junk"]),
    min_size=1,
    max_size=5,
)
_TABLES: st.SearchStrategy[dict[str, object]] = st.dictionaries(
    _TABLE_PORTS,
    st.one_of(_PLAIN_SENSORS, _PLAIN_SENSORS, _SENSORS, st.sampled_from(["-2.5", 3, None, []])),
    max_size=4,
)
_SONIC_MESSAGES = st.lists(
    st.tuples(
        st.sampled_from(["TRANSCEIVER_DOM_SENSOR"] * 3 + ["TRANSCEIVER_DOM_THRESHOLD"]),
        st.sampled_from(["Ethernet0"] * 4 + ["Ethernet8", "Eth1/1", "Ethernet*", "", "p" * 300, None, None]),
        _SENSORS,
        _LIMITS,
        _TABLES,
    ),
    min_size=2,
    max_size=8,
)


def _sonic_decoded(messages: list[bytes], fast: bool, mp: pytest.MonkeyPatch) -> tuple[object, ...]:
    if not fast:
        mp.setattr(OpticsDecoder, "_sensor", lambda *args: False)
    dec, bad = decoder("sonic")
    for m in messages:
        dec.feed(m)
    return dec.take_samples(), dict(bad), dec.values, dec.failures


@settings(max_examples=300, deadline=None)
@given(_SONIC_MESSAGES)
def test_a_sonic_sensor_hash_read_the_fast_way_gives_what_the_careful_way_gives(
    notes: list[tuple[str, str | None, dict[str, object], dict[str, object], dict[str, object]]],
) -> None:
    """Each port's DOM hash, or the whole table once a minute, takes ``OpticsDecoder._sensor``
    (its field names' plan, the port's thresholds as last read); with that path off, every hash is
    read the careful way. Same samples, invalid counts and values either way, with thresholds that
    change between samples, values of every type and forms the fast way hands back (a glob, a long
    port, a table port that is no hash)."""
    messages = []
    for table, port, sensor, limits, whole in notes:
        doc: dict[str, object]
        if port is None:  # the table's own path: all its ports (for thresholds: one port's, by key)
            doc = whole if table == "TRANSCEIVER_DOM_SENSOR" else {"Ethernet0": limits, "Ethernet8": limits}
        else:
            doc = sensor if table == "TRANSCEIVER_DOM_SENSOR" else limits
        messages.append(_sonic_note(table, port, doc))
    with pytest.MonkeyPatch.context() as mp:
        fast = _sonic_decoded(messages, True, mp)
    with pytest.MonkeyPatch.context() as mp:
        careful = _sonic_decoded(messages, False, mp)
    assert fast == careful and fast[3] == 0


def test_the_fast_way_reads_a_sensor_hash_and_the_careful_way_only_what_it_hands_back() -> None:
    dec, bad = decoder("sonic")
    dec.feed(
        _sonic_note("TRANSCEIVER_DOM_THRESHOLD", "Ethernet0", {"rxpowerlowalarm": "-10.0", "txbiashighalarm": "x"})
    )
    taken: list[object] = []
    careful = dec._sonic_batch

    def spy(at: object, updates: object) -> object:
        taken.append(updates)
        return careful(at, updates)  # type: ignore[arg-type]

    dec._sonic_batch = spy  # type: ignore[assignment, method-assign]
    dec.feed(
        _sonic_note("TRANSCEIVER_DOM_SENSOR", "Ethernet0", {"rx1power": "-2.5", "rx2power": "-3.5", "tx1bias": "7"})
    )
    dec.feed(_sonic_note("TRANSCEIVER_DOM_SENSOR", "Ethernet0", {"rx1power": 1.5}))  # a number: handed back
    _, (first, second) = dec.take_samples()
    assert (first.rx_power_dbm, first.laser_bias_ma, first.rx_low_critical_dbm) == (-3.5, 7.0, -10.0)
    assert (second.rx_power_dbm, second.rx_low_critical_dbm) == (1.5, -10.0)
    assert len(taken) == 1 and bad == {NOT_A_NUMBER: 2}  # the bad threshold, counted with each sample


def test_a_whole_dom_table_is_one_update_and_is_read_the_fast_way() -> None:
    """sonic-gnmi answers the table's own path with all its keys in one JSON value; the decoder
    reads each port's hash by its plan, in port order, and hands nothing to the careful way."""
    r = SonicOpticsRenderer()
    dec, bad = decoder("sonic")
    for family, table, leaves in (
        (Family.SONIC_DOM_LIMITS, "TRANSCEIVER_DOM_THRESHOLD", (0, 1, 2, 3)),
        (Family.SONIC_DOM, "TRANSCEIVER_DOM_SENSOR", (0, 1, 2, 3, 4)),
    ):
        (raw,) = messages(r.render("STATE_DB", Selection(family, leaves, None), READINGS))
        (update,) = gnmi_pb2.SubscribeResponse.FromString(raw).update.update
        assert [e.name for e in update.path.elem] == [table]
        assert set(json.loads(update.val.json_ietf_val)) == {x.port for x in READINGS}
        if family is Family.SONIC_DOM:
            dec._sonic_batch = lambda *args: pytest.fail("read the careful way")  # type: ignore[method-assign]
        dec.feed(raw)
    _, dom = dec.take_samples()
    assert [d.port for d in dom] == sorted(x.port for x in READINGS) and not bad
    for d in dom:
        reading = next(x for x in READINGS if x.port == d.port)
        assert d.rx_power_dbm == pytest.approx(reading.rx_power_dbm, abs=1e-4) and d.rx_low_warning_dbm == -8.0


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=3),
    st.binary(max_size=70_000),
    st.binary(max_size=40),
)
def test_a_long_document_update_splits_into_its_path_and_value(names: list[str], text: bytes, junk: bytes) -> None:
    """``_split``: the path and value bytes of ``Update{path, val}`` whatever the value's
    length (a whole table runs to kilobytes); None for a path of 128 bytes or more, or any other
    form; never raises on bytes."""
    path = gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name=n) for n in names])
    val = gnmi_pb2.TypedValue(json_ietf_val=text)
    raw = gnmi_pb2.Update(path=path, val=val).SerializeToString()
    got = _split(raw)
    if len(path.SerializeToString()) < 128:
        assert got == (path.SerializeToString(), val.SerializeToString())
    else:
        assert got is None
    assert _split(raw + b"\x20\x01") is None  # a field after the value: not this form
    _split(junk)
    _split(raw[: len(raw) // 2])
