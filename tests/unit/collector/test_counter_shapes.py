"""Counter hygiene holds for any notification shape: the same counters, sent as real NOSes send
them and interleaved as real streams interleave, give the same rates, PFC totals and flap counts.

The truth is one port over a few sampling intervals: counters growing at random rates, a pausing
priority, and outages (some shorter than an interval, which only ``carrier-transitions`` or an
ON_CHANGE status can reveal). The streams arrive as real ones do: each up to
:data:`MAX_LAG_INTERVALS` behind its own timestamps, with jitter, in any combination. Shapes:

* ``merged``: one reading per sample with every counter and the sampled oper status
  (today's simulator, SNMP);
* ``merged+onchange``: the same plus an ON_CHANGE status stream (an OpenConfig target with an
  ``oper-status`` ON_CHANGE subscription), the two streams interleaved in any order;
* ``eos``: interface counters at the sample time, MAC pause 1 ms and PFC 10 ms later, status on
  change and again mid-interval, in one stream or with the status on a stream of its own;
* ``sampled-no-carrier+onchange``: sampled status without ``carrier-transitions``, and ON_CHANGE
  status on another stream (a late ON_CHANGE reading is all that shows a short outage);
* ``sonic``: counters and PFC without ``carrier-transitions``, status on its own stream.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from hypothesis import example, given, settings
from hypothesis import strategies as st

from collector.counters import CounterTracker, Ingested
from collector.records import COUNTER_FIELDS, PortReading
from store.records import from_int8

S = 1_000_000_000
MS = 1_000_000
T0 = 1_790_000_000 * S
INTERVAL = 10 * S
G400 = 400 * 10**9
_IF = [f for f in COUNTER_FIELDS if f not in ("in_pause_frames", "out_pause_frames")]


@dataclass(frozen=True)
class Truth:
    """One port: per-interval byte rates, PFC pauses per interval, outages (start, end) in ns."""

    rates: tuple[int, ...]  # bytes/s in each interval (out = 2x in)
    pauses: tuple[int, ...]  # priority-3 pause frames received in each interval
    outages: tuple[tuple[int, int], ...]

    @property
    def samples(self) -> int:
        return len(self.rates) + 1

    def at(self, k: int) -> int:
        return T0 + k * INTERVAL

    def octets(self, k: int) -> int:
        return 10**9 + sum(r * INTERVAL // S for r in self.rates[:k])

    def carrier(self, t: int) -> int:
        return sum((s <= t) + (e <= t) for s, e in self.outages)

    def up(self, t: int) -> bool:
        return not any(s <= t < e for s, e in self.outages)

    def pfc_rx(self, k: int) -> tuple[int, ...]:
        p3 = 7 + sum(self.pauses[:k])
        return (0, 0, 0, p3, 0, 0, 0, 0)

    def transitions(self) -> list[tuple[int, bool]]:
        return sorted([(s, False) for s, _ in self.outages] + [(e, True) for _, e in self.outages])


@st.composite
def truths(draw: st.DrawFn) -> Truth:
    n = draw(st.integers(3, 8))
    rates = tuple(draw(st.lists(st.integers(0, G400 // 16), min_size=n, max_size=n)))  # out = 2x in: line rate
    pauses = tuple(draw(st.lists(st.sampled_from([0, 0, 0, 5000, 123]), min_size=n, max_size=n)))
    # Outage edges on a 1 ms grid, offset by 0.5 ms so that none falls on a sample instant.
    edges = draw(st.lists(st.integers(1, n * 10_000 - 2), unique=True, max_size=8).map(sorted))
    if len(edges) % 2:
        edges = edges[:-1]
    at = [T0 + e * MS + MS // 2 for e in edges]
    return Truth(rates, pauses, tuple(zip(at[0::2], at[1::2], strict=True)))


def _reading(t: int, **kw: object) -> PortReading:
    return PortReading("lf-g1-r1", "swp1", t, **kw)  # type: ignore[arg-type]


def _if_counters(truth: Truth, k: int, carrier: bool = True) -> dict[str, object]:
    t, o = truth.at(k), truth.octets(k)
    out: dict[str, object] = {f: 0 for f in _IF}
    out.update(in_octets=o, out_octets=2 * o, in_unicast_pkts=o // 1000, out_unicast_pkts=o // 500)
    out["carrier_transitions"] = truth.carrier(t) if carrier else None
    return out


def _pfc(truth: Truth, k: int) -> dict[str, object]:
    return {"pfc_rx": truth.pfc_rx(k), "pfc_tx": (0,) * 8}


def _status_stream(truth: Truth, heartbeats: bool) -> list[PortReading]:
    out = [_reading(truth.at(0) - 1, oper_up=True)]
    out += [_reading(t, oper_up=up) for t, up in truth.transitions()]
    if heartbeats:
        out += [
            _reading(truth.at(k) + INTERVAL // 2, oper_up=truth.up(truth.at(k) + INTERVAL // 2))
            for k in range(truth.samples - 1)
        ]
    return sorted(out, key=lambda r: r.time_ns)


def merged(truth: Truth) -> list[list[PortReading]]:
    return [
        [
            _reading(
                truth.at(k),
                oper_up=truth.up(truth.at(k)),
                speed_bps=G400,
                in_pause_frames=0,
                out_pause_frames=0,
                **_if_counters(truth, k),
                **_pfc(truth, k),
            )
            for k in range(truth.samples)
        ]
    ]


def merged_onchange(truth: Truth) -> list[list[PortReading]]:
    return [merged(truth)[0], _status_stream(truth, heartbeats=False)]


def sampled_no_carrier_onchange(truth: Truth) -> list[list[PortReading]]:
    """Sampled status but no carrier-transitions, plus ON_CHANGE status: late ones reveal flaps."""
    counters = merged(truth)[0]
    for r in counters:
        r.carrier_transitions = None
    return [counters, _status_stream(truth, heartbeats=False)]


def _eos_counters(truth: Truth) -> list[PortReading]:
    out: list[PortReading] = []
    for k in range(truth.samples):
        t = truth.at(k)
        out.append(_reading(t, **_if_counters(truth, k)))
        out.append(_reading(t + MS, speed_bps=G400, in_pause_frames=0, out_pause_frames=0))
        out.append(_reading(t + 10 * MS, **_pfc(truth, k)))
    return out


def eos_one_stream(truth: Truth) -> list[list[PortReading]]:
    return [sorted(_eos_counters(truth) + _status_stream(truth, heartbeats=True), key=lambda r: r.time_ns)]


def eos_two_streams(truth: Truth) -> list[list[PortReading]]:
    return [_eos_counters(truth), _status_stream(truth, heartbeats=True)]


def sonic(truth: Truth) -> list[list[PortReading]]:
    counters = [
        _reading(
            truth.at(k),
            in_pause_frames=0,
            out_pause_frames=0,
            **_if_counters(truth, k, carrier=False),
            **_pfc(truth, k),
        )
        for k in range(truth.samples)
    ]
    return [counters, _status_stream(truth, heartbeats=False)]


SHAPES: dict[str, Callable[[Truth], list[list[PortReading]]]] = {
    "merged": merged,
    "merged+onchange": merged_onchange,
    "sampled-no-carrier+onchange": sampled_no_carrier_onchange,
    "eos": eos_one_stream,
    "eos-two-streams": eos_two_streams,
    "sonic": sonic,
}


#: The most one stream lags another, in sampling intervals. A stream further behind is stale
#: (the collector's watchdog says so after 3 intervals); counter hygiene keeps what it needs to
#: set a late status against the counters for 3 intervals.
MAX_LAG_INTERVALS = 2.5


def interleave(
    streams: Sequence[list[PortReading]], lags: Sequence[float], jitter: Sequence[float]
) -> list[PortReading]:
    """The streams as they arrive: each one ``lags[i]`` intervals behind its timestamps, plus a
    jitter per reading (its own order kept, as one gRPC stream keeps it)."""
    arrivals: list[tuple[int, int, int, PortReading]] = []
    for i, stream in enumerate(streams):
        lag = int((lags[i] if i < len(lags) else 0.0) * INTERVAL)
        last = 0
        for k, r in enumerate(stream):
            at = max(last, r.time_ns + lag + int((jitter[k % len(jitter)] if jitter else 0.0) * S))
            last = at
            arrivals.append((at, i, k, r))
    return [r for *_, r in sorted(arrivals, key=lambda a: a[:3])]


def in_order(streams: Sequence[list[PortReading]]) -> list[PortReading]:
    return interleave(streams, [], [])


@dataclass
class Stored:
    rates: dict[int, float]  # sample time -> in_bps
    out_rates: dict[int, float]
    rows: int
    pauses: float  # sum of rx_pause_pps x interval_s over the priority-3 rows
    flaps: int
    events: int


def run(readings: Sequence[PortReading], heartbeat_s: float = 300.0) -> Stored:
    tracker = CounterTracker(heartbeat_s)
    outs: list[Ingested] = [tracker.ingest(r) for r in readings]
    rates: dict[int, float] = {}
    out_rates: dict[int, float] = {}
    rows = 0
    for o in outs:
        if o.port is None:
            continue
        rows += 1
        t = int(o.port.time.timestamp() * 1e9 + 0.5) // MS * MS
        if o.port.in_bps is not None:
            rates[t] = o.port.in_bps
        if o.port.out_bps is not None:
            out_rates[t] = o.port.out_bps
    pauses = sum((p.rx_pause_pps or 0.0) * (p.interval_s or 0.0) for o in outs for p in o.pfc if p.priority == 3)
    events = [e for o in outs for e in o.events]
    flaps = sum(e.flaps for e in events if e.new_status in ("down", "flap"))
    return Stored(rates, out_rates, rows, pauses, flaps, len(events))


def expected_rates(truth: Truth) -> dict[int, float]:
    return {truth.at(k) // MS * MS: truth.rates[k - 1] * 8.0 for k in range(1, truth.samples)}


#: Any truth, in any shape, its streams lagging and jittered as real ones do.
INTERLEAVINGS = {
    "truth": truths(),
    "shape": st.sampled_from(sorted(SHAPES)),
    "lags": st.lists(st.floats(0, MAX_LAG_INTERVALS), min_size=2, max_size=2),
    "jitter": st.lists(st.floats(0, 0.5), max_size=20),
}


def _two_outages(first: tuple[float, float], second: tuple[float, float]) -> Truth:
    """Two outages (their edges in seconds after T0) over three quiet intervals."""
    return Truth((0, 0, 0), (0, 0, 0), tuple((T0 + int(a * S), T0 + int(b * S)) for a, b in (first, second)))


@settings(max_examples=150, deadline=None)
@given(**INTERLEAVINGS)
# The ON_CHANGE stream lags so that the first outage's up comes, late, inside the down run that its
# own late down moved earlier, before a reading of that run that cannot have hidden a change: the
# sample that entered it (the second outage's down), or a later sample still seeing it down.
@example(_two_outages((0.0015, 0.0025), (1.2505, 10.0005)), "merged+onchange", [0.0, 1.9], [])
@example(_two_outages((0.0015, 0.0025), (5.0005, 10.0005)), "merged+onchange", [0.0, 1.5], [])
@example(_two_outages((0.0015, 10.0005), (15.0005, 20.0005)), "merged+onchange", [0.0, 1.5], [])
def test_every_shape_and_interleaving_gives_the_true_rates_pauses_and_flaps(
    truth: Truth, shape: str, lags: list[float], jitter: list[float]
) -> None:
    stored = run(interleave(SHAPES[shape](truth), lags, jitter))
    want = expected_rates(truth)
    assert stored.rates.keys() == want.keys()
    for t, bps in want.items():
        assert abs(stored.rates[t] - bps) <= 1e-6 * max(bps, 1.0), (t, stored.rates[t], bps)
        assert abs(stored.out_rates[t] - 2 * bps) <= 1e-6 * max(bps, 1.0)
    assert abs(stored.pauses - sum(truth.pauses)) < 1e-6 * max(sum(truth.pauses), 1)
    assert stored.flaps == len(truth.outages), (shape, truth.outages)


@settings(max_examples=60, deadline=None)
@given(truth=truths(), shape=st.sampled_from(sorted(SHAPES)))
def test_only_readings_with_counters_or_a_status_change_become_rows(truth: Truth, shape: str) -> None:
    streams = SHAPES[shape](truth)
    stored = run(in_order(streams))
    counter_readings = sum(1 for s in streams for r in s if any(getattr(r, f) is not None for f in COUNTER_FIELDS))
    assert counter_readings <= stored.rows <= counter_readings + 2 * len(truth.outages) + 1


@settings(max_examples=60, deadline=None)
@given(truth=truths(), shape=st.sampled_from(sorted(SHAPES)))
def test_pfc_totals_hold_with_every_row_written_too(truth: Truth, shape: str) -> None:
    assert abs(run(in_order(SHAPES[shape](truth)), heartbeat_s=0).pauses - sum(truth.pauses)) < 1e-3


# --- the cases the issue found, one by one ------------------------------------------------------


def test_a_status_reading_between_samples_does_not_shorten_the_interval() -> None:
    t = CounterTracker()
    t.ingest(_reading(T0, oper_up=True, in_octets=0, out_octets=0))
    heartbeat = t.ingest(_reading(T0 + 5 * S, oper_up=True))
    assert heartbeat.port is None and heartbeat.events == []
    after = t.ingest(_reading(T0 + 10 * S, in_octets=250 * 10**9, out_octets=250 * 10**9))
    assert after.port is not None and after.port.interval_s == 10 and after.port.in_bps == 200e9


def test_pfc_ten_milliseconds_after_the_counters_has_its_own_interval() -> None:
    t = CounterTracker()
    t.ingest(_reading(T0, in_octets=0, out_octets=0))
    t.ingest(_reading(T0 + 10 * MS, pfc_rx=(0,) * 8, pfc_tx=(0,) * 8))
    t.ingest(_reading(T0 + 10 * S, in_octets=10, out_octets=10))
    storm = t.ingest(_reading(T0 + 10 * S + 10 * MS, pfc_rx=(0, 0, 0, 50_000, 0, 0, 0, 0), pfc_tx=(0,) * 8))
    assert storm.port is None
    p3 = next(p for p in storm.pfc if p.priority == 3)
    assert p3.interval_s == 10 and p3.rx_pause_pps == 5000
    # The end of the storm is on record even though status readings came in between.
    t.ingest(_reading(T0 + 15 * S, oper_up=True))
    quiet = t.ingest(_reading(T0 + 20 * S + 10 * MS, pfc_rx=(0, 0, 0, 50_000, 0, 0, 0, 0), pfc_tx=(0,) * 8))
    assert [p.rx_pause_pps for p in quiet.pfc if p.priority == 3] == [0]


def test_a_fast_down_up_seen_on_change_and_by_carrier_transitions_is_one_flap() -> None:
    t = CounterTracker()
    t.ingest(_reading(T0, oper_up=True, in_octets=0, carrier_transitions=4))
    down = t.ingest(_reading(T0 + 2 * S, oper_up=False))
    up = t.ingest(_reading(T0 + 3 * S, oper_up=True))
    sample = t.ingest(_reading(T0 + 10 * S, in_octets=1, carrier_transitions=6))
    events = down.events + up.events + sample.events
    assert [(e.new_status, e.flaps) for e in events] == [("down", 1), ("up", 1)]
    assert down.port is not None and down.port.oper_status == 2 and down.port.in_octets is None
    assert up.events[0].down_s == 1.0


def test_the_status_arriving_after_the_counter_that_counted_it_is_not_counted_again() -> None:
    t = CounterTracker()
    t.ingest(_reading(T0, oper_up=True, in_octets=0, carrier_transitions=0))
    sample = t.ingest(_reading(T0 + 10 * S, in_octets=1, carrier_transitions=2))
    assert [(e.new_status, e.flaps, e.source) for e in sample.events] == [("flap", 1, "carrier-transitions")]
    down = t.ingest(_reading(T0 + 2 * S, oper_up=False))
    up = t.ingest(_reading(T0 + 3 * S, oper_up=True))
    assert [(e.new_status, e.flaps) for e in down.events + up.events] == [("down", 0), ("up", 1)]
    assert up.events[0].down_s == 1.0  # the outage length is still on record


def test_an_out_of_order_status_reading_keeps_its_flap() -> None:
    t = CounterTracker()
    t.ingest(_reading(T0, oper_up=True))
    t.ingest(_reading(T0 + 10 * S, oper_up=True))
    late = t.ingest(_reading(T0 + 4 * S, oper_up=False))
    assert late.events == []  # inside the newest run: the next reading in order decides
    nxt = t.ingest(_reading(T0 + 20 * S, oper_up=True))
    assert [(e.new_status, e.flaps, e.down_s) for e in nxt.events] == [("flap", 1, None)]
    # inside an older run, the readings on both sides already decide
    t.ingest(_reading(T0 + 30 * S, oper_up=True))
    older = t.ingest(_reading(T0 + 25 * S, oper_up=False))
    assert older.events == []
    t.ingest(_reading(T0 + 26 * S, oper_up=True))  # late too: it came and went
    assert t.stats.late_flaps == 2


def test_a_change_just_behind_a_jittered_heartbeat_is_one_outage_not_a_flap_and_an_outage() -> None:
    t = CounterTracker()
    t.ingest(_reading(T0, oper_up=True))
    t.ingest(_reading(T0 + 10_200 * MS, oper_up=True))  # a heartbeat, stamped 100 ms late
    late = t.ingest(_reading(T0 + 10_100 * MS, oper_up=False))  # the real change, arriving after it
    down = t.ingest(_reading(T0 + 15 * S, oper_up=False))
    up = t.ingest(_reading(T0 + 30 * S, oper_up=True))
    events = late.events + down.events + up.events
    assert [(e.new_status, e.flaps) for e in events] == [("down", 1), ("up", 1)]
    assert events[0].time.timestamp() == (T0 + 10_100 * MS) / 1e9
    assert up.events[0].down_s == 19.9


def test_a_late_reading_before_the_one_that_entered_the_newest_state_is_an_excursion_at_once() -> None:
    """The sample at 10 s sees the port down (the second outage: its transition is on record) and
    carrier-transitions three transitions (a hidden flap). The ON_CHANGE stream lags: its down at
    1.5 s moves the down run's start earlier, and its up at 2.5 s falls inside that run but before
    the reading that entered it, so the readings on both sides (down) decide at once: the first
    outage, which carrier-transitions counted. It is not a change the sample at 10 s hid: that
    would drop the second outage's down from the runs, and its own readings, coming later, would
    count it again as a flap."""
    t = CounterTracker()
    t.ingest(_reading(T0, oper_up=True, in_octets=0, carrier_transitions=0))
    sample = t.ingest(_reading(T0 + 10 * S, oper_up=False, in_octets=1, carrier_transitions=3))
    late = [t.ingest(_reading(T0 + ms * MS, oper_up=ms != 1500)) for ms in (1500, 2500)]
    back = t.ingest(_reading(T0 + 20 * S, oper_up=True, in_octets=2, carrier_transitions=4))
    later = [t.ingest(_reading(T0 + ms * MS, oper_up=ms != 5000)) for ms in (5000, 12_000)]
    assert [(e.new_status, e.flaps, e.source) for e in sample.events] == [
        ("down", 1, "oper-status"),
        ("flap", 1, "carrier-transitions"),
    ]
    assert [e for o in late + later for e in o.events] == []
    # The outage in force began after the port was seen up at 2.5 s: measured from the sample.
    assert [(e.new_status, e.down_s) for e in back.events] == [("up", 10.0)]
    assert t.stats.late_flaps == 0 and t.stats.recounted_transitions == 2


def test_a_clock_stepping_back_gives_no_rate_rather_than_a_false_one() -> None:
    """NTP steps a switch's clock back 20 s: the counter moved on at an earlier time."""
    t = CounterTracker()
    gbps10 = 10 * 10**9 // 8 * 10  # octets in 10 s at 10 Gb/s
    stored = [t.ingest(_reading(T0 + s * S, in_octets=k * gbps10)) for k, s in enumerate((1000, 990, 1000, 1010))]
    rates = [o.port.in_bps if o.port is not None else None for o in stored]
    assert rates == [None, None, 10e9, 10e9]  # the step's reading is the new baseline
    assert t.stats.clock_steps == 1


def test_pause_counters_read_after_a_clock_step_back_carry_no_rate_then_rate_from_there() -> None:
    t = CounterTracker(pfc_heartbeat_s=0)  # every PFC reading is written
    rx = [(0, 0, 0, k * 1000, 0, 0, 0, 0) for k in range(4)]
    readings = [(1000, rx[0], 0), (990, rx[1], 10), (1000, rx[2], 20), (1010, rx[3], 30)]
    rows = [t.ingest(_reading(T0 + s * S, pfc_rx=r, pfc_tx=(0,) * 8, pfc_rx_total=tot)).pfc for s, r, tot in readings]
    p3 = [[(p.rx_pause_pps, p.interval_s) for p in out if p.priority == 3] for out in rows]
    # The step's reading is the new baseline and says nothing of now (no row); rates run from it.
    assert p3 == [[(None, None)], [], [(100.0, 10.0)], [(100.0, 10.0)]]
    totals = [[p.rx_pause_pps for p in out if p.priority == -1] for out in rows]
    assert totals == [[None], [], [1.0], [1.0]]
    assert t.stats.clock_steps == 2  # the per-priority counters and the total, each stepped back


def test_a_deleted_interface_is_down_and_starts_over_when_back() -> None:
    t = CounterTracker()
    t.ingest(_reading(T0, oper_up=True, in_octets=10**12, out_octets=10**12))
    gone = t.ingest(_reading(T0 + 3 * S, removed=True))
    assert [(e.new_status, e.source) for e in gone.events] == [("down", "interface-delete")]
    assert gone.port is not None and gone.port.oper_status == 2
    back = t.ingest(_reading(T0 + 60 * S, oper_up=True, in_octets=100, out_octets=100))
    assert back.port is not None and not back.port.counter_reset and back.port.in_bps is None
    assert [e.new_status for e in back.events] == ["up"]
    assert from_int8(back.port.in_octets or 0) == 100


def test_a_counters_reading_older_than_the_first_status_carries_no_status() -> None:
    """SONiC's COUNTERS_DB stream lagging its APPL_DB stream: the first status (at T0+2 s) is a
    row; counters stamped before it must not claim that status, or in time order the status row
    would follow a row that already said it (CI run of 2026-12-02, sp-r5-1)."""
    t = CounterTracker()
    status = t.ingest(_reading(T0 + 2 * S, oper_up=True))
    assert status.port is not None and status.port.oper_status == 1
    before = t.ingest(_reading(T0 + 1 * S, in_octets=0, out_octets=0))
    assert before.port is not None and before.port.oper_status is None
    after = t.ingest(_reading(T0 + 3 * S, in_octets=10, out_octets=10))
    assert after.port is not None and after.port.oper_status == 1


def test_a_late_counters_reading_carries_the_status_of_its_own_time() -> None:
    t = CounterTracker()
    t.ingest(_reading(T0, oper_up=True, in_octets=0, out_octets=0))
    t.ingest(_reading(T0 + 5 * S, oper_up=False))
    late = t.ingest(_reading(T0 + 4 * S, in_octets=10, out_octets=10))
    assert late.port is not None and late.port.oper_status == 1
    now = t.ingest(_reading(T0 + 6 * S, in_octets=20, out_octets=20))
    assert now.port is not None and now.port.oper_status == 2


def _joining_late(streams: list[list[PortReading]], truth: Truth, start: float) -> list[list[PortReading]]:
    """A status stream of its own answers first at ``start`` intervals (sonic-gnmi's APPL_DB
    subscription stamps its first answer when it starts), not before the first counters."""
    if len(streams) < 2:
        return streams
    at = truth.at(0) + int(start * INTERVAL)
    rest = [r for r in streams[1] if r.time_ns > at]
    return [streams[0], [_reading(at, oper_up=truth.up(at)), *rest]]


def test_a_reading_that_tells_its_status_is_stored_with_it_even_late() -> None:
    """An SNMP-like reading (counters and status) older than the first status reading, and one
    inside the newest run that says otherwise: each row says what its own reading said."""
    t = CounterTracker()
    t.ingest(_reading(T0 + 5 * S, oper_up=False))
    early = t.ingest(_reading(T0, oper_up=True, in_octets=0, out_octets=0))
    assert early.port is not None and early.port.oper_status == 1
    t = CounterTracker()
    t.ingest(_reading(T0, oper_up=True, in_octets=0, out_octets=0))
    t.ingest(_reading(T0 + 20 * S, oper_up=True, in_octets=20, out_octets=20))
    dip = t.ingest(_reading(T0 + 10 * S, oper_up=False, in_octets=10, out_octets=10))
    assert dip.port is not None and dip.port.oper_status == 2


def test_a_flapping_port_keeps_its_status_for_counters_older_than_the_runs_kept() -> None:
    """Nine status runs, eight kept: counters older than the oldest kept still know the status."""
    t = CounterTracker()
    for i in range(9):
        t.ingest(_reading(T0 + i * S, oper_up=i % 2 == 0))
    late = t.ingest(_reading(T0 + S // 2, in_octets=0, out_octets=0))
    assert late.port is not None and late.port.oper_status == 1


def test_counters_older_than_every_status_reading_carry_no_status_once_runs_were_trimmed() -> None:
    """Nine status runs, one trimmed off: a counters reading older than the first status reading of
    all (a counters stream lagging the status stream) still carries no status, not the trimmed one."""
    t = CounterTracker()
    for i in range(9):
        t.ingest(_reading(T0 + S + i * S, oper_up=i % 2 == 0))
    early = t.ingest(_reading(T0, in_octets=0, out_octets=0))
    assert early.port is not None and early.port.oper_status is None


@settings(max_examples=150, deadline=None)
@given(**INTERLEAVINGS, start=st.floats(-0.1, 1.5))
def test_a_row_never_carries_a_status_from_its_future(
    truth: Truth, shape: str, lags: list[float], jitter: list[float], start: float
) -> None:
    """Whatever the interleaving, a row's oper status is its reading's own or, for counters alone,
    that of the newest status reading at or before its time among those ingested before it
    (unknown when there is none): never one told later. Where status and counters come in readings of their own (SONiC,
    EOS) on a port that never flaps, no row without counters repeats the status of the row before
    it in time (what the stored-rates test checks on every NOS). A reading that carries both can
    tell a status earlier than the status row already written, which no order of ingestion undoes."""
    readings = interleave(_joining_late(SHAPES[shape](truth), truth, start), lags, jitter)
    tracker = CounterTracker()
    told: list[tuple[int, bool]] = []
    rows = []
    for r in readings:
        if r.oper_up is not None:
            told.append((r.time_ns, r.oper_up))
        out = tracker.ingest(r)
        if out.port is None:
            continue
        rows.append(out.port)
        said = [up for x, up in sorted(told) if x <= r.time_ns]
        if r.oper_up is not None:
            assert out.port.oper_status == (1 if r.oper_up else 2)
        elif out.port.oper_status is None:
            assert not said, (r, told)
        else:
            assert said and out.port.oper_status == (1 if said[-1] else 2), (r, told)
    both = any(r.oper_up is not None and any(getattr(r, f) is not None for f in COUNTER_FIELDS) for r in readings)
    if truth.outages or both:
        return
    rows.sort(key=lambda p: p.time)
    for before, row in pairwise(rows):
        counters = any(getattr(row, f) is not None for f in COUNTER_FIELDS)
        assert counters or row.oper_status != before.oper_status, (before, row)
