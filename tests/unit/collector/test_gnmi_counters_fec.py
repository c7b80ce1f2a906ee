"""SONiC's FEC cut from the counters' COUNTERS hash (collector/gnmi_counters_fec.py).

The wire form is the simulator's (simulator/gnmi_sonic.py: a whole hash carries the FEC fields
after the others, as orchagent keeps them in one hash), decoded by the real counters decoder
with the sonic profile. The property holds the cut to what the link-health stream's decoder
says about the same fields subscribed on their own (``COUNTERS/Ethernet*/SAI_PORT_STAT_IF_IN_FEC_*``),
invalid values included, so the two ways to collect FEC give the same rows.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pygnmi.spec.v080 import gnmi_pb2

from collector import gnmi_counters_fec
from collector.gnmi_counters_fec import MAX_PENDING, CountersFec, CountersFecStream
from collector.gnmi_decode import StreamDecoder
from collector.gnmi_optics import MAX_KEYS, OpticsDecoder
from collector.gnmi_settings import GnmiStats, GnmiTuning, StreamSettings
from collector.gnmi_values import MAX_TEXT, TOO_LONG, TOO_MANY, PortState, Resolver
from collector.optics_decode import SONIC_FEC_NAMES, SonicOptics
from collector.profile_load import load_profile
from fabric.model import FabricParams
from fabric.topology import build_aipod
from simulator.fabric_state import FabricState
from simulator.gnmi_optics import sonic_fec_texts
from simulator.gnmi_paths import Family, Selection
from simulator.gnmi_sonic import FIELDS, SonicRenderer
from simulator.gnmi_wire import notification, timestamp
from store.fec import FecSample

SWITCH = "lf-g1-r1"
SECOND = 10**9
SONIC = load_profile("sonic")


def _state(now: int) -> FabricState:
    return FabricState(build_aipod(FabricParams(gpus=128, radix=16)), seed=4, clock=lambda: now)


def _counters(state: FabricState, at: int, *, each: bool = False) -> list[bytes]:
    """The simulator's answer to COUNTERS/Ethernet* at ``at`` as responses; ``each``: to
    COUNTERS/<port> for every port, all in one notification (one sample's per-key answers)."""
    ports, fec = state.ports(SWITCH, at), sonic_fec_texts(state.transceivers(SWITCH, at))
    whole = tuple(range(len(FIELDS[Family.SONIC_COUNTERS])))
    r = SonicRenderer()
    if not each:
        groups = r.render(
            "COUNTERS_DB", Selection(Family.SONIC_COUNTERS, whole, None, None, "Ethernet*"), ports, (), fec
        )
        return [notification(timestamp(at), g.prefix, g.updates) for g in groups]
    updates = [
        u
        for p in ports
        for g in r.render("COUNTERS_DB", Selection(Family.SONIC_COUNTERS, whole, p.name), ports, (), fec)
        for u in g.updates
    ]
    return [notification(timestamp(at), r.prefix("COUNTERS_DB"), updates)]


def _decoder(every_s: float = 10.0) -> tuple[StreamDecoder, CountersFec, Counter[str]]:
    bad: Counter[str] = Counter()
    count = lambda kind, n: bad.update({kind: n})  # noqa: E731
    fec = CountersFec(SWITCH, count, every_s=every_s)
    ports: dict[str, PortState] = {}
    return StreamDecoder(SWITCH, Resolver(SONIC), ports, count, tap=fec), fec, bad


def test_the_whole_hash_gives_every_ports_fec_once_per_interval_and_the_counters_unchanged() -> None:
    t0 = (time.time_ns() // (10 * SECOND)) * 10 * SECOND  # the first second of a 10 s slot
    state = _state(t0)
    dec, fec, bad = _decoder(every_s=10.0)
    plain = StreamDecoder(SWITCH, Resolver(SONIC), {}, lambda kind, n: None)
    taken: list[list[FecSample]] = []
    for k in range(12):  # 12 samples a second apart: slots t0 and t0 + 10 s
        for raw in _counters(state, t0 + k * SECOND):
            dec.feed(raw)
            plain.feed(raw)
        taken.append(fec.take())
    dec.close_group()
    plain.close_group()
    assert not bad and fec.failures == 0
    assert [len(t) > 0 for t in taken] == [True] + [False] * 9 + [True, False]
    readings = {r.port: r for r in state.transceivers(SWITCH, t0)}
    first = {s.port: s for s in taken[0]}
    assert set(first) == set(readings) and len(first) > 8
    for port, r in readings.items():
        s = first[port]
        assert (s.bins, s.corrected, s.uncorrectable, s.symbol_errors) == (
            r.fec_bins, r.fec_corrected, r.fec_uncorrectable, r.symbol_errors
        )  # fmt: skip
        assert s.time.timestamp() == pytest.approx(t0 / 1e9)
    assert all(s.time.timestamp() == pytest.approx((t0 + 10 * SECOND) / 1e9) for s in taken[10])
    # the counters' readings are what they are without the tap
    strip = lambda rows: [(r.port, r.time_ns, r.in_octets, r.pfc_rx) for r in rows]  # noqa: E731
    assert strip(dec.take()[0]) == strip(plain.take()[0]) != []


def test_per_port_hashes_of_one_sample_are_all_taken() -> None:
    t0 = time.time_ns()
    state = _state(t0)
    dec, fec, bad = _decoder()
    for raw in _counters(state, t0, each=True):
        dec.feed(raw)
    assert not bad and {s.port for s in fec.take()} == {r.port for r in state.transceivers(SWITCH, t0)}


def test_ports_are_timed_each_on_its_own() -> None:
    """Per-port answers in notifications of their own timestamps, a glob split in two, and a first
    document without FEC fields: every port is kept once per interval, none is lost."""
    bad: Counter[str] = Counter()
    fec = CountersFec(SWITCH, lambda kind, n: bad.update({kind: n}), every_s=60.0, counters_s=10.0)
    t0 = time.time_ns()
    _offer(fec, {"Ethernet0": {"SAI_PORT_STAT_IF_IN_OCTETS": "1"}}, ts=t0)  # no FEC: claims nothing
    for i in range(4):  # one notification per port, 1 µs apart
        _offer(fec, _fec_fields(i), key=f"Ethernet{4 * i}", ts=t0 + 1000 * i)
    _offer(fec, {"Ethernet16": _fec_fields(4)}, ts=t0 + 5 * SECOND)  # the rest of a split glob
    _offer(fec, {"Ethernet20": _fec_fields(5)}, ts=t0 + 6 * SECOND)
    assert sorted(s.corrected or 0 for s in fec.take()) == [0, 1, 2, 3, 4, 5] and not bad
    for i in range(6):  # the next counters samples: nothing again until the interval has passed
        _offer(fec, _fec_fields(9), key=f"Ethernet{4 * i}", ts=t0 + 10 * SECOND + 1000 * i)
    assert fec.take() == []


def test_a_devices_jitter_never_skips_an_interval_and_a_clock_step_back_is_taken() -> None:
    fec = CountersFec(SWITCH, lambda kind, n: None, every_s=10.0, counters_s=10.0)  # FEC at the counters' pace
    t0 = time.time_ns()
    for k, ms in enumerate([0, 10_200, 19_900, 30_100, 39_800]):
        _offer(fec, {"Ethernet0": _fec_fields(k)}, ts=t0 + ms * 1_000_000)
    assert [s.corrected for s in fec.take()] == [0, 1, 2, 3, 4]  # every sample, jitter or not
    _offer(fec, {"Ethernet0": _fec_fields(7)}, ts=t0 - 3600 * SECOND)  # the device's clock went back an hour
    assert [s.corrected for s in fec.take()] == [7]


def test_samples_a_sink_refused_are_kept_bounded() -> None:
    fec = CountersFec(SWITCH, lambda kind, n: None, every_s=1.0)
    _offer(fec, {f"Ethernet{i}": _fec_fields(i) for i in range(3)})
    rows = fec.take()
    fec.give_back(rows)
    _offer(fec, {"Ethernet0": _fec_fields(9)}, ts=time.time_ns() + 2 * SECOND)
    assert [s.corrected for s in fec.take()] == [0, 1, 2, 9] and fec.dropped == 0  # oldest first
    fec.give_back(rows * (MAX_PENDING // 3 + 1))
    assert len(fec.take()) == MAX_PENDING and fec.dropped == 3 * (MAX_PENDING // 3 + 1) - MAX_PENDING


class _Sinks:
    """The counters' sink (readings kept) and a link-health sink that refuses its first ``refuse`` hand-overs."""

    def __init__(self, refuse: int) -> None:
        self.refuse = refuse
        self.ports: list[Any] = []
        self.fec: list[list[FecSample]] = []

    async def put_ports(self, readings: Any) -> None:
        self.ports.extend(readings)

    async def put_lldp(self, readings: Any) -> None:
        pass

    def set_state(self, switch: str, state: Any, detail: str | None = None) -> None:
        pass

    def count_invalid(self, switch: str, what: str, n: int = 1) -> None:
        pass

    async def put_optics(self, fec: Any, dom: Any) -> None:
        if self.refuse:
            self.refuse -= 1
            raise ConnectionError("the link-health writer is down")
        self.fec.append(list(fec))


async def test_the_stream_keeps_what_a_failing_link_health_sink_refused_and_hands_it_over_first() -> None:
    """CountersFecStream's hand-off: a sink error costs neither the counters nor the FEC samples,
    which go over at the next flush, oldest first."""
    t0 = time.time_ns()
    state = _state(t0)
    dec, fec, bad = _decoder(every_s=10.0)
    sinks = _Sinks(refuse=1)
    settings = StreamSettings(
        switch=SWITCH, target=SWITCH, request=gnmi_pb2.SubscribeRequest(), metadata=(), interval_s=10.0,
        sampled=True, poll=False, first_timeout_s=10.0, tls=False, tuning=GnmiTuning(),
    )  # fmt: skip
    stream = CountersFecStream(
        settings, decoder=dec, channel=lambda: None, sink=sinks, stats=GnmiStats(),
        limit=asyncio.Semaphore(1), on_state=lambda: None, fec=fec, optics=sinks,
    )  # fmt: skip
    for at in (t0, t0 + 10 * SECOND):  # two FEC intervals: one refused, one taken
        for raw in _counters(state, at):
            dec.feed(raw)
        await stream._flush(close=True)
    ports = {r.port for r in state.transceivers(SWITCH, t0)}
    assert sinks.refuse == 0 and len(sinks.fec) == 1 and not bad
    times = [s.time.timestamp() for s in sinks.fec[0]]
    assert times == sorted(times) and times[0] == pytest.approx(t0 / 1e9)  # the refused ones, first
    assert [s.port for s in sinks.fec[0]] == [s.port for s in sinks.fec[0][: len(ports)]] * 2
    assert {s.port for s in sinks.fec[0]} == ports and stream.samples == 2 * len(ports)
    assert len({r.time_ns for r in sinks.ports}) == 2 and fec.dropped == 0  # the counters went on


def _offer(fec: CountersFec, doc: Any, key: str = "Ethernet*", table: str = "COUNTERS", ts: int = 0) -> None:
    fec(((table, ()), (key, ())), doc, ts or time.time_ns())


def _fec_fields(n: int) -> dict[str, str]:
    return {name: str(n) for name in SONIC_FEC_NAMES}


def test_what_is_not_a_counters_hash_is_left_alone() -> None:
    bad: Counter[str] = Counter()
    fec = CountersFec(SWITCH, lambda kind, n: bad.update({kind: n}), every_s=1.0)
    _offer(fec, {"Ethernet0": _fec_fields(1)}, table="PORT_TABLE")
    _offer(fec, [1, 2], ts=time.time_ns() + 1)
    _offer(fec, {"Ethernet0": "12", "Ethernet4": {"SAI_PORT_STAT_IF_IN_OCTETS": "1"}}, ts=time.time_ns() + 2)
    fec(((("COUNTERS", ()),)), {"Ethernet0": _fec_fields(1)}, time.time_ns() + 3)  # no key element
    assert fec.take() == [] and not bad and fec.failures == 0


def test_too_many_ports_and_overlong_names_are_cut_and_counted() -> None:
    bad: Counter[str] = Counter()
    fec = CountersFec(SWITCH, lambda kind, n: bad.update({kind: n}), every_s=1.0)
    doc = {f"Ethernet{i}": _fec_fields(i) for i in range(MAX_KEYS + 5)}
    doc["x" * (MAX_TEXT + 1)] = _fec_fields(1)
    doc["Ethernet-no-fec"] = {"SAI_PORT_STAT_IF_IN_OCTETS": "1"}  # no FEC fields: not counted
    _offer(fec, doc)
    assert len(fec.take()) == MAX_KEYS and bad == {TOO_MANY: 5, TOO_LONG: 1}
    bad.clear()
    _offer(fec, {"x" * (MAX_TEXT + 1): _fec_fields(1), "Ethernet0": _fec_fields(2)}, ts=time.time_ns() + 2 * SECOND)
    assert [s.port for s in fec.take()] == ["Ethernet0"] and bad == {TOO_LONG: 1}


@pytest.mark.parametrize("plain", [True, False], ids=["plain hash", "careful way"])
def test_a_failure_costs_the_documents_fec_never_the_stream(monkeypatch: pytest.MonkeyPatch, plain: bool) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    fields = _fec_fields(1) if plain else {**_fec_fields(1), "SAI_PORT_STAT_IF_IN_FEC_SYMBOL_ERRORS": "N/A"}
    fec = CountersFec(SWITCH, lambda kind, n: None, every_s=1.0)
    if plain:
        monkeypatch.setattr(gnmi_counters_fec, "sonic_fec_plain", broken)
    else:
        monkeypatch.setattr(SonicOptics, "decode", broken)
    _offer(fec, {"Ethernet0": fields})
    assert fec.take() == [] and fec.failures == 1
    monkeypatch.undo()
    _offer(fec, {"Ethernet0": fields}, ts=time.time_ns() + 2 * SECOND)
    assert [s.corrected for s in fec.take()] == [1]


def test_a_plain_hash_is_read_without_the_careful_way(monkeypatch: pytest.MonkeyPatch) -> None:
    def careful(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("read the careful way")

    monkeypatch.setattr(SonicOptics, "decode", careful)
    fec = CountersFec(SWITCH, lambda kind, n: None, every_s=60.0)
    whole = {"SAI_PORT_STAT_IF_IN_OCTETS": "9", **{name: str(k) for k, name in enumerate(SONIC_FEC_NAMES)}}
    _offer(fec, {"Ethernet0": whole, "Ethernet4": {"SAI_PORT_STAT_IF_IN_OCTETS": "1"}})
    (s,) = fec.take()
    assert fec.failures == 0 and s.port == "Ethernet0"
    assert (s.bins, s.corrected, s.uncorrectable, s.symbol_errors) == (tuple(range(16)), 16, 17, 18)
    assert (s.pre_fec_ber, s.post_fec_ber) == (None, None)


def test_a_sample_time_out_of_bounds_is_replaced_by_the_receive_time() -> None:
    fec = CountersFec(SWITCH, lambda kind, n: None, every_s=1.0, max_skew_s=30.0)
    _offer(fec, {"Ethernet0": _fec_fields(1)}, ts=time.time_ns() - 3600 * SECOND)
    (s,) = fec.take()
    assert abs(s.time.timestamp() - time.time()) < 60


# --- the cut says what a FEC subscription's decoder says about the same fields ----------------

_VALUES = st.one_of(
    st.integers(0, 2**64 - 1).map(str),
    st.sampled_from(["", "-1", "N/A", "1e3", "18446744073709551616", " 7", "0x10"]),
    st.integers(-5, 5),
    st.none(),
    st.floats(allow_nan=True),
)
_HASH = st.fixed_dictionaries(
    {},
    optional={
        **{name: _VALUES for name in SONIC_FEC_NAMES},
        "SAI_PORT_STAT_IF_IN_OCTETS": _VALUES,
        "SAI_PORT_STAT_IF_IN_FEC_CODEWORD_ERRORS_S07": _VALUES,  # taken only by a subscription's decoder
    },
)


def _subscribed(doc: dict[str, Any], ts: int) -> tuple[list[FecSample], Counter[str]]:
    """The link-health stream's decoder on the FEC fields of ``doc`` as sonic-gnmi answers
    ``COUNTERS/Ethernet*/SAI_PORT_STAT_IF_IN_FEC_*``."""
    bad: Counter[str] = Counter()
    dec = OpticsDecoder(SWITCH, "sonic", lambda kind, n: bad.update({kind: n}))
    answer = {p: {k: v for k, v in f.items() if k in SONIC_FEC_NAMES} for p, f in doc.items()}
    answer = {p: f for p, f in answer.items() if f}
    note = gnmi_pb2.Notification(timestamp=ts, prefix=gnmi_pb2.Path(target="COUNTERS_DB"))
    path = gnmi_pb2.Path(
        elem=[gnmi_pb2.PathElem(name=n) for n in ("COUNTERS", "Ethernet*", "SAI_PORT_STAT_IF_IN_FEC_*")]
    )
    note.update.add(path=path, val=gnmi_pb2.TypedValue(json_ietf_val=json.dumps(answer).encode()))
    dec.feed(gnmi_pb2.SubscribeResponse(update=note).SerializeToString())
    return dec.take_samples()[0], bad


#: A hash as orchagent writes it: every FEC field, a decimal text (up to 2^64 - 1: 20 digits, past
#: what the plain way takes), and maybe others; then the same with one field spoilt or missing.
_WHOLE = st.fixed_dictionaries(
    {name: st.integers(0, 2**64 - 1).map(str) for name in SONIC_FEC_NAMES},
    optional={"SAI_PORT_STAT_IF_IN_OCTETS": _VALUES, "SAI_PORT_STAT_IF_IN_FEC_CODEWORD_ERRORS_S07": _VALUES},
)
_SPOILT = st.tuples(_WHOLE, st.sampled_from(SONIC_FEC_NAMES), st.one_of(_VALUES, st.just(...))).map(
    lambda t: {k: v for k, v in {**t[0], t[1]: t[2]}.items() if v is not ...}
)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from([f"Ethernet{4 * i}" for i in range(8)]), st.one_of(_HASH, _WHOLE, _SPOILT), max_size=8
    )
)
def test_the_cut_gives_what_a_fec_subscription_gives(doc: dict[str, dict[str, Any]]) -> None:
    ts = time.time_ns()
    bad: Counter[str] = Counter()
    fec = CountersFec(SWITCH, lambda kind, n: bad.update({kind: n}), every_s=60.0)
    _offer(fec, json.loads(json.dumps(doc)), ts=ts)
    want, want_bad = _subscribed(doc, ts)
    key = lambda s: s.port  # noqa: E731
    assert sorted(fec.take(), key=key) == sorted(want, key=key)
    assert bad == want_bad
