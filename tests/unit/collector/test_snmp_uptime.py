"""sysUpTime through round trips: a late answer is no reboot, an uptime that went back is one."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from collector.snmp_poll import EPOCH_TOLERANCE_NS, TICK_NS, UPTIME_WRAP_NS, UptimeClock

S = 1_000_000_000
T0 = 1_767_225_600_000_000_000
BOOT = T0 - 40 * 86_400 * S  # up for 40 days


def ticks_at(t_ns: int, boot: int = BOOT) -> int:
    return ((t_ns - boot) // TICK_NS) % (1 << 32)


def test_the_reading_is_placed_at_the_round_trips_midpoint() -> None:
    clock = UptimeClock()
    # the agent read sysUpTime at T0; the answer took 4 s to come back
    clock.update(ticks_at(T0), T0, T0 + 4 * S)
    assert clock.boot_ns is not None and abs(clock.boot_ns - BOOT) <= 2 * S + TICK_NS
    assert clock.uncertainty_ns == 2 * S


def test_answers_late_then_on_time_keep_the_boot() -> None:
    clock = UptimeClock()
    clock.update(ticks_at(T0), T0, T0 + 2_000_000)
    boot, epoch = clock.boot_ns, clock.epoch_ns
    for k, late_s in enumerate([3, 0, 3, 3, 0, 5, 0, 10, 0]):
        sent = T0 + (k + 1) * 60 * S
        # the agent answered at once; the answer came back late_s later
        clock.update(ticks_at(sent), sent, sent + late_s * S + 1_000_000)
        assert (clock.boot_ns, clock.epoch_ns) == (boot, epoch), k


def test_a_late_first_answer_widens_the_tolerance_it_set() -> None:
    clock = UptimeClock()
    clock.update(ticks_at(T0), T0, T0 + 6 * S)  # agent read at send time: the estimate is 3 s late
    boot = clock.boot_ns
    sent = T0 + 60 * S
    clock.update(ticks_at(sent), sent, sent + 1_000_000)  # on time: 3 s from the first estimate
    assert clock.boot_ns == boot


def test_a_reboot_is_seen_through_late_answers() -> None:
    clock = UptimeClock()
    clock.update(ticks_at(T0), T0, T0 + 3 * S)
    rebooted = T0 + 30 * S
    sent = T0 + 60 * S
    clock.update(ticks_at(sent, rebooted), sent, sent + 3 * S)
    assert clock.boot_ns is not None and abs(clock.boot_ns - rebooted) <= 2 * S + TICK_NS


def test_a_wrap_seen_late_is_still_a_wrap() -> None:
    clock = UptimeClock()
    boot = T0 - UPTIME_WRAP_NS + 30 * S  # sysUpTime wraps 30 s after T0
    clock.update(ticks_at(T0, boot), T0, T0 + 2_000_000)
    first = clock.boot_ns
    sent = T0 + 60 * S
    clock.update(ticks_at(sent, boot), sent, sent + 3 * S)
    assert clock.boot_ns == first and clock.epoch_ns is not None
    assert abs(clock.epoch_ns - (boot + UPTIME_WRAP_NS)) <= 2 * S + TICK_NS


@settings(max_examples=300, deadline=None)
@given(
    polls=st.lists(
        st.tuples(st.integers(0, 8 * S), st.floats(0.0, 1.0)),  # round trip, where in it the agent read
        min_size=2,
        max_size=30,
    ),
    reboot_at=st.one_of(st.none(), st.integers(1, 29)),
)
def test_the_boot_changes_exactly_at_a_reboot(polls: list[tuple[int, float]], reboot_at: int | None) -> None:
    clock = UptimeClock()
    boot, boots = BOOT, []
    for k, (rtt, where) in enumerate(polls):
        sent = T0 + k * 30 * S
        if reboot_at is not None and k == reboot_at:
            boot = sent - 10 * S  # rebooted 10 s before this poll
        read = sent + int(rtt * where)
        clock.update(ticks_at(read, boot), sent, sent + rtt)
        boots.append(clock.boot_ns)
        assert clock.boot_ns is not None and abs(clock.boot_ns - boot) <= 4 * S + TICK_NS + EPOCH_TOLERANCE_NS
    changes = [k for k in range(1, len(boots)) if boots[k] != boots[k - 1]]
    assert changes == ([reboot_at] if reboot_at is not None and reboot_at < len(polls) else [])
