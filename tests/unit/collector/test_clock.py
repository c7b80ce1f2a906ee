"""ClockGuard: device timestamps bounded near receive time, with the switch's own intervals kept."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collector.clock import CORRECTED_TOLERANCE_S, ClockGuard
from collector.records import LldpReading, PortReading

S = 1_000_000_000
T0 = 1_790_000_000 * S
MAX = 30.0
TOL = int(CORRECTED_TOLERANCE_S * S)


def ports(switch: str, t: int, n: int = 2) -> list[PortReading]:
    return [PortReading(switch, f"swp{i}", t, in_octets=1) for i in range(1, n + 1)]


def test_a_good_clock_is_left_alone() -> None:
    guard = ClockGuard(MAX)
    batch = ports("lf1", T0 - S // 2)
    assert guard.correct(batch, T0) == 0
    assert [r.time_ns for r in batch] == [T0 - S // 2] * 2
    assert guard.skew_s("lf1") == -0.5 and guard.replaced("lf1") == 0 and not guard.corrected("lf1")
    assert guard.skew_s("never-seen") is None and guard.replaced("never-seen") == 0


@pytest.mark.parametrize("skew_s", [-300.0, 300.0, -31.0, 86_400.0 * 365])
def test_a_clock_off_lands_at_receive_time_and_keeps_its_intervals(skew_s: float) -> None:
    guard = ClockGuard(MAX)
    skew = int(skew_s * S)
    stored = []
    for k in range(6):
        received = T0 + k * 10 * S
        jitter = random.Random(k).randrange(0, 2 * S)  # handed over up to 2 s after arrival
        batch = ports("lf1", received + skew)
        guard.correct(batch, received + jitter)
        assert abs(batch[0].time_ns - received) <= 2 * S
        stored.append(batch[0].time_ns)
    assert [b - a for a, b in itertools.pairwise(stored)] == [10 * S] * 5  # exact, not jittery
    assert guard.replaced("lf1") == 12 and guard.corrected("lf1")
    assert guard.skew_s("lf1") == pytest.approx(skew_s, abs=2.0)
    assert guard.clocks()["lf1"].learned == 1


def test_the_bound_is_symmetric_and_a_clock_within_it_is_trusted() -> None:
    guard = ClockGuard(MAX)
    ahead, behind = ports("ahead", T0 + 29 * S), ports("behind", T0 - 29 * S)
    assert guard.correct([*ahead, *behind], T0) == 0
    assert ahead[0].time_ns == T0 + 29 * S and behind[0].time_ns == T0 - 29 * S
    assert guard.skew_s("ahead") == 29.0 and guard.skew_s("behind") == -29.0


def test_hovering_at_the_bound_does_not_flip_flop() -> None:
    guard = ClockGuard(MAX)
    stored = []
    for k, skew in enumerate([-29.5, -30.5, -29.5, -30.5, -29.0, -31.0]):
        received = T0 + k * 10 * S
        batch = ports("lf1", received + int(skew * S), 1)
        guard.correct(batch, received)
        stored.append(batch[0].time_ns)
    # trusted at -29.5 s, then corrected from the first reading past the bound on, for good
    assert stored[0] == T0 - int(29.5 * S) and stored[1] == T0 + 10 * S
    assert guard.clocks()["lf1"].learned == 1 and guard.corrected("lf1")


def test_a_clock_that_gets_fixed_is_trusted_again_and_a_step_is_relearned() -> None:
    guard = ClockGuard(MAX)

    def two_batches(at: int, skew: int) -> list[PortReading]:
        for t in (at, at + 10 * S):
            batch = ports("lf1", t + skew)
            guard.correct(batch, t)
        return batch

    two_batches(T0, -300 * S)
    assert guard.corrected("lf1") and guard.skew_s("lf1") == -300.0
    batch = two_batches(T0 + 20 * S, 0)  # NTP fixed it: its own time again
    assert batch[0].time_ns == T0 + 30 * S and not guard.corrected("lf1")
    batch = two_batches(T0 + 40 * S, 600 * S)  # and it stepped 10 min ahead
    assert batch[0].time_ns == T0 + 50 * S and guard.skew_s("lf1") == 600.0
    batch = two_batches(T0 + 60 * S, 500 * S)  # stepped back by 100 s: still off, learned again
    assert batch[0].time_ns == T0 + 70 * S and guard.skew_s("lf1") == 500.0
    assert guard.clocks()["lf1"].learned == 3


def test_a_change_of_clock_is_applied_at_once_and_believed_from_the_next_batch() -> None:
    guard = ClockGuard(MAX)
    first = ports("lf1", T0 - 300 * S)
    assert guard.correct(first, T0) == 2 and first[0].time_ns == T0  # placed at once
    assert not guard.corrected("lf1") and guard.clocks()["lf1"].learned == 0  # not believed yet
    second = ports("lf1", T0 - 290 * S)
    guard.correct(second, T0 + 10 * S + S // 2)
    assert second[0].time_ns == T0 + 10 * S  # the first batch's offset: the interval is exact
    assert guard.corrected("lf1") and guard.skew_s("lf1") == -300.0 and guard.clocks()["lf1"].learned == 1


@pytest.mark.parametrize("skew_s", [0.0, -300.0])
def test_a_batch_of_old_state_leaves_the_clock_alone(skew_s: float) -> None:
    """An ON_CHANGE sync stamps state with when it last changed: hours old from any clock."""
    guard = ClockGuard(MAX)
    skew = int(skew_s * S)
    samples = []
    for k in range(8):
        received = T0 + k * 10 * S
        if k == 4:
            state = [PortReading("lf1", "swp1", received + skew - 7200 * S, oper_up=True)]
            guard.correct(state, received - 5 * S)
            assert state[0].time_ns == received - 5 * S  # at receive time
        batch = ports("lf1", received + skew, 1)
        guard.correct(batch, received)
        samples.append(batch[0].time_ns)
    assert [b - a for a, b in itertools.pairwise(samples)] == [10 * S] * 7  # the samples never noticed
    assert guard.corrected("lf1") is (skew_s != 0) and guard.clocks()["lf1"].learned == (1 if skew_s else 0)
    assert guard.skew_s("lf1") == skew_s


def test_switches_in_one_batch_are_judged_apart_and_lldp_too() -> None:
    guard = ClockGuard(MAX)
    lldp = LldpReading("lf2", "swp1", T0 + 3600 * S, ())
    good = PortReading("lf1", "swp1", T0 - S, in_octets=1)
    bad = PortReading("lf2", "swp1", T0 + 3600 * S, in_octets=1)
    assert guard.correct([good, bad, lldp], T0) == 2
    assert (good.time_ns, bad.time_ns, lldp.time_ns) == (T0 - S, T0, T0)
    assert guard.replaced("lf2") == 2 and guard.replaced("lf1") == 0


def test_a_batch_is_placed_by_its_newest_reading() -> None:
    guard = ClockGuard(MAX)
    skew = -600 * S
    batch = [PortReading("lf1", "swp1", T0 + skew + k * S, in_octets=k) for k in range(3)]  # 3 samples, 1 s apart
    guard.correct(batch, T0 + 2 * S)
    assert [r.time_ns for r in batch] == [T0, T0 + S, T0 + 2 * S]  # none in the future, spacing kept


def test_a_batch_across_a_clock_step_never_stores_beyond_the_bound() -> None:
    guard = ClockGuard(MAX)
    batch = [PortReading("lf1", "swp1", T0 - 3600 * S, in_octets=1), PortReading("lf1", "swp2", T0, in_octets=1)]
    guard.correct(batch, T0)
    assert all(abs(r.time_ns - T0) <= MAX * S for r in batch)


def test_the_tolerance_is_never_wider_than_the_bound() -> None:
    guard = ClockGuard(2.0)
    assert guard.tolerance_ns == 2 * S
    with pytest.raises(ValueError, match="positive"):
        ClockGuard(0)


# -- properties ---------------------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class Stream:
    skew_ns: int
    interval_ns: int
    #: Per sample: network latency, and how long after arrival its batch reached the guard.
    latency_ns: list[int]
    delay_ns: list[int]
    batch_sizes: list[int]

    def __repr__(self) -> str:
        return (f"Stream(skew_s={self.skew_ns / S}, interval_s={self.interval_ns / S}, latency_ns={self.latency_ns}, "
                f"delay_ns={self.delay_ns}, batch_sizes={self.batch_sizes})")  # fmt: skip


@st.composite
def streams(draw: st.DrawFn, skew: st.SearchStrategy[float]) -> Stream:
    n = draw(st.integers(2, 60))
    return Stream(
        skew_ns=int(draw(skew) * S),
        interval_ns=int(draw(st.floats(0.1, 120.0)) * S),
        latency_ns=draw(st.lists(st.integers(0, 50_000_000), min_size=n, max_size=n)),
        delay_ns=draw(st.lists(st.integers(0, 2 * S), min_size=n, max_size=n)),
        batch_sizes=draw(st.lists(st.integers(1, 5), min_size=n, max_size=n)),
    )


def run(stream: Stream, guard: ClockGuard) -> list[tuple[int, int, int, int]]:
    """Feed the stream in batches; (device time, arrival, hand-over time, stored time) per sample.
    Every third batch is followed by a batch of state stamped an hour before (an ON_CHANGE sync)."""
    n = len(stream.latency_ns)
    out: list[tuple[int, int, int, int]] = []
    k = 0
    sizes = iter(itertools.cycle(stream.batch_sizes))
    per_batch = 1 + 2 * S // stream.interval_ns  # a batch holds what arrived within ~2 s
    while k < n:
        group = range(k, min(n, k + min(next(sizes), per_batch)))
        arrivals = [T0 + i * stream.interval_ns + stream.latency_ns[i] for i in group]
        now = max(arrivals) + stream.delay_ns[group[-1]]
        batch = [PortReading("lf1", "swp1", T0 + i * stream.interval_ns + stream.skew_ns, in_octets=i) for i in group]
        device = [r.time_ns for r in batch]
        guard.correct(batch, now)
        out.extend((d, a, now, r.time_ns) for d, a, r in zip(device, arrivals, batch, strict=True))
        if k % 3 == 0:  # state an hour old, or two where that would look like a good clock
            age = 3600 * S if abs(stream.skew_ns - 3600 * S) > (MAX + 2.1) * S else 7200 * S
            state = PortReading("lf1", "swp1", device[-1] - age, oper_up=True)
            guard.correct([state], now)
            assert state.time_ns == now
        k = group[-1] + 1
    return out


#: Off by more than the bound whatever the latency and hand-over delay (they make a clock look
#: further behind, up to 2.05 s, never further ahead). A batch spans up to 2 s of samples more, so
#: its oldest sample can look 4.05 s further behind than the clock is: see WITHIN.
OFF = st.one_of(st.floats(-7 * 86_400.0, -(MAX + 0.1)), st.floats(MAX + 2.1, 7 * 86_400.0))


@settings(max_examples=300, deadline=None)
@given(streams(OFF))
def test_any_clock_off_is_bounded_with_its_intervals_kept(stream: Stream) -> None:
    guard = ClockGuard(MAX)
    seen = run(stream, guard)
    for _device, arrival, now, stored in seen:
        assert stored <= now + MAX * S  # never more than the bound in the future
        assert abs(stored - now) <= TOL  # within the tolerance of the time it reached the guard
        assert -50_000_000 <= stored - arrival <= 2 * S + 50_000_000  # at arrival, or up to a hand-over later
    stored_times = [s for *_, s in seen]
    assert all(b - a == stream.interval_ns for a, b in itertools.pairwise(stored_times))
    assert guard.replaced("lf1") >= len(seen) and guard.clocks()["lf1"].learned <= 1


#: Within the bound even for a batch's oldest sample: 2 s of batch, 2 s of hand-over, 50 ms latency.
WITHIN = st.floats(-(MAX - 4.1), MAX)


@settings(max_examples=200, deadline=None)
@given(streams(WITHIN))
def test_any_clock_within_the_bound_is_kept_as_is(stream: Stream) -> None:
    guard = ClockGuard(MAX)
    seen = run(stream, guard)
    assert all(stored == device for device, _, _, stored in seen)
    assert not guard.corrected("lf1") and guard.clocks()["lf1"].learned == 0


@settings(max_examples=200, deadline=None)
@given(
    skew=st.floats(-86_400.0, 86_400.0),
    ppm=st.floats(-500.0, 500.0),
    interval_s=st.floats(1.0, 60.0),
    delays=st.lists(st.integers(0, 2 * S), min_size=50, max_size=400),
)
def test_a_drifting_clock_stays_bounded_and_rarely_relearns(
    skew: float, ppm: float, interval_s: float, delays: list[int]
) -> None:
    guard = ClockGuard(MAX)
    interval = int(interval_s * S)
    stored: list[int] = []
    device: list[int] = []
    for k, delay in enumerate(delays):
        arrival = T0 + k * interval
        d = arrival + int(skew * S) + int(k * interval * ppm * 1e-6)
        r = PortReading("lf1", "swp1", d, in_octets=1)
        guard.correct([r], arrival + delay)
        off = abs(r.time_ns - (arrival + delay))
        assert off <= MAX * S  # never stored further than the bound from receive time
        if r.time_ns != d:
            assert off <= TOL  # a replaced time: near receive time
        stored.append(r.time_ns)
        device.append(d)
    # intervals are the device's own except where an offset was learned again
    distorted = sum(1 for i in range(1, len(stored)) if stored[i] - stored[i - 1] != device[i] - device[i - 1])
    assert distorted <= 2 * guard.clocks()["lf1"].learned + 1  # at changes of clock only
    span = len(delays) * interval_s * abs(ppm) * 1e-6
    assert guard.clocks()["lf1"].learned <= 2 + span / (CORRECTED_TOLERANCE_S - 2)


def test_receive_time_is_when_the_stream_read_it_not_when_the_batch_was_handed_over() -> None:
    """A collector 40 s behind (a writer waiting for the database) must not make a good clock late."""
    guard = ClockGuard(MAX)
    for k in range(4):
        batch = ports("lf1", T0 + k * 10 * S)
        for r in batch:
            r.received_ns = T0 + k * 10 * S + S // 10  # read 100 ms after the switch stamped it
        assert guard.correct(batch, T0 + k * 10 * S + 40 * S) == 0  # ... handed over 40 s later
        assert [r.time_ns for r in batch] == [T0 + k * 10 * S] * 2
    assert not guard.corrected("lf1")


def test_readings_the_collector_stamped_itself_are_left_alone() -> None:
    """SNMP readings carry the collector's own time (no received_ns): there is no device clock."""
    guard = ClockGuard(MAX)
    batch = ports("sp1", T0 - 300 * S)  # a poll answered long before the hand-over
    assert guard.correct(batch) == 0
    assert [r.time_ns for r in batch] == [T0 - 300 * S] * 2 and guard.skew_s("sp1") is None


def test_state_stamped_when_it_last_changed_never_makes_a_good_clock_corrected() -> None:
    """An initial sync split in two batches of status only, each stamped hours ago (its last change)."""
    guard = ClockGuard(MAX)
    assert guard.correct(ports("lf1", T0 - S // 10), T0) == 0
    for k in (1, 2):
        old = [PortReading("lf1", f"swp{i}", T0 - 7200 * S, oper_up=True) for i in range(4)]
        assert guard.correct(old, T0 + k * S) == 4  # the state lands at receive time ...
        assert {r.time_ns for r in old} == {T0 + k * S}
    assert not guard.corrected("lf1") and abs((guard.skew_s("lf1") or 0) + 0.1) < 1e-9  # ... the clock stays good
    assert guard.correct(ports("lf1", T0 + 10 * S), T0 + 10 * S + S // 10) == 0
