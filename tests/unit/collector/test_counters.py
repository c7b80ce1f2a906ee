"""Counter hygiene: rates, resets, wraps, absurd values and link events."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collector.counters import CounterTracker, Ingested
from collector.records import PFC_TOTAL_WRAP32, PortReading
from store.records import PortSample, from_int8

S = 1_000_000_000
G400 = 400 * 10**9
T0 = 1_790_000_000 * S


def row(out: Ingested) -> PortSample:
    """The reading's port_counters row (every reading here carries counters)."""
    assert out.port is not None
    return out.port


def reading(t_s: float, octets: int, **kw: object) -> PortReading:
    base: dict[str, object] = {"oper_up": True, "speed_bps": G400, "in_octets": octets, "out_octets": octets}
    base.update(kw)
    return PortReading("lf-g1-r1", "swp1", T0 + int(t_s * S), **base)  # type: ignore[arg-type]


def test_rates_over_the_interval() -> None:
    t = CounterTracker()
    first = t.ingest(reading(0, 1000, in_unicast_pkts=10, in_multicast_pkts=0, in_broadcast_pkts=0))
    assert row(first).in_bps is None and row(first).interval_s is None
    second = t.ingest(
        reading(10, 1000 + 50 * 10**9, in_unicast_pkts=10 + 1000, in_multicast_pkts=0, in_broadcast_pkts=0)
    )
    assert row(second).interval_s == 10
    assert row(second).in_bps == 40e9
    assert row(second).in_pps == 100
    assert not row(second).counter_reset


def test_decrease_is_a_reset_never_a_negative_rate() -> None:
    t = CounterTracker()
    t.ingest(reading(0, 10**12))
    after = t.ingest(reading(10, 5000))
    assert row(after).counter_reset and row(after).in_bps is None
    assert from_int8(row(after).in_octets or 0) == 5000
    # The baseline moved: the next interval has a rate again.
    nxt = t.ingest(reading(20, 5000 + 10**9))
    assert row(nxt).in_bps == 8e8 and not row(nxt).counter_reset


def test_reboot_and_clear_are_resets_even_when_counters_grew() -> None:
    t = CounterTracker()
    t.ingest(reading(0, 100, boot_ns=T0 - 3600 * S))
    assert row(t.ingest(reading(10, 200, boot_ns=T0 + 5 * S))).counter_reset
    t2 = CounterTracker()
    t2.ingest(reading(0, 100, last_clear_ns=T0 - 100 * S))
    assert row(t2.ingest(reading(10, 200, last_clear_ns=T0 + 5 * S))).counter_reset
    # sysUpTime jitter of a few ticks is not a reboot.
    t3 = CounterTracker()
    t3.ingest(reading(0, 100, boot_ns=T0 - 3600 * S))
    assert not row(t3.ingest(reading(10, 200, boot_ns=T0 - 3600 * S + 30_000_000))).counter_reset


def test_32_bit_counters_wrap() -> None:
    t = CounterTracker()
    wrap = frozenset({"in_errors"})
    t.ingest(reading(0, 0, in_errors=(1 << 32) - 10, wrap32=wrap))
    out = t.ingest(reading(10, 1, in_errors=20, wrap32=wrap))
    assert not row(out).counter_reset
    assert row(out).in_errors_ps == 3.0


def test_absurd_rate_is_dropped() -> None:
    t = CounterTracker()
    t.ingest(reading(0, 0))
    out = t.ingest(reading(1, 10**12))  # 8 Tb/s on a 400G port
    assert row(out).in_bps is None and t.stats.absurd_rates >= 1


def test_out_of_order_sample_keeps_the_baseline() -> None:
    t = CounterTracker()
    t.ingest(reading(10, 10**9))
    old = t.ingest(reading(5, 5 * 10**8))
    assert row(old).in_bps is None and t.stats.out_of_order == 1
    nxt = t.ingest(reading(20, 2 * 10**9))
    assert row(nxt).in_bps == 8e8


def test_link_events_with_outage_length() -> None:
    t = CounterTracker()
    assert t.ingest(reading(0, 0, carrier_transitions=4)).events == []
    down = t.ingest(reading(10, 1, oper_up=False, carrier_transitions=5)).events
    assert [(e.old_status, e.new_status) for e in down] == [("up", "down")]
    up = t.ingest(reading(17.5, 2, oper_up=True, carrier_transitions=6)).events
    assert [(e.old_status, e.new_status, e.down_s) for e in up] == [("down", "up", 7.5)]


def test_flaps_the_sampling_missed_come_from_carrier_transitions() -> None:
    t = CounterTracker()
    t.ingest(reading(0, 0, carrier_transitions=10))
    events = t.ingest(reading(60, 1, carrier_transitions=16)).events  # up at both samples, 3 flaps between
    assert len(events) == 1
    e = events[0]
    assert e.new_status == "flap" and e.source == "carrier-transitions" and e.flaps == 3


BOOT = T0 - 3600 * S  # an SNMP agent's boot epoch (Unix ns of sysUpTime 0)


def snmp(t_s: float, up: bool, changed_s: float, **kw: object) -> PortReading:
    """An SNMP poll's reading: ifLastChange ``changed_s`` after T0, on the agent's boot epoch."""
    fields: dict[str, object] = {"boot_ns": BOOT, "last_change_ns": T0 + int(changed_s * S), **kw}
    return reading(t_s, int(t_s), oper_up=up, **fields)


def test_a_flap_between_two_polls_comes_from_if_last_change() -> None:
    t = CounterTracker()
    assert t.ingest(snmp(0, True, -100)).events == []
    assert t.ingest(snmp(30, True, -100)).events == []  # nothing moved
    events = t.ingest(snmp(60, True, 41.5)).events  # up at both polls, down and up again between
    assert [(e.old_status, e.new_status, e.down_s, e.flaps, e.source) for e in events] == [
        ("up", "flap", None, 1, "last-change")
    ]
    assert events[0].time == _utc_s(60)
    assert t.ingest(snmp(90, True, 41.5)).events == []  # the same change is not a flap again
    down = t.ingest(snmp(120, False, 95)).events  # the poll saw this one: an oper-status event, no flap
    assert [(e.new_status, e.source) for e in down] == [("down", "oper-status")]
    assert t.ingest(snmp(150, False, 140)).events[0].source == "last-change"  # came back and went down again


@pytest.mark.parametrize(
    ("second", "why"),
    [
        (dict(boot_ns=BOOT + 600 * S), "a reboot: ifLastChange is on a new epoch"),
        (dict(boot_ns=None), "no boot epoch (a gNMI last-change)"),
        (dict(carrier_transitions=7), "carrier-transitions counts flaps instead"),
        (dict(last_change_ns=T0 - 200 * S), "it went back"),
        (dict(removed=True), "the interface is gone"),
    ],
)
def test_a_moved_last_change_is_no_flap_when_it_cannot_be_compared(second: dict[str, object], why: str) -> None:
    t = CounterTracker()
    t.ingest(snmp(0, True, -100))
    events = t.ingest(snmp(60, True, 30, **second)).events
    assert [e for e in events if e.new_status == "flap"] == [], why


def test_the_first_status_reading_only_learns_the_last_change() -> None:
    t = CounterTracker()
    assert t.ingest(reading(0, 0, oper_up=None, boot_ns=BOOT, last_change_ns=T0)).events == []  # no status
    assert t.ingest(snmp(30, True, 10)).events == []  # the first status: nothing to compare with
    assert t.ingest(snmp(60, True, 10)).events == []


def _utc_s(t_s: float) -> object:
    from collector.link_flaps import utc

    return utc(T0 + int(t_s * S))


def test_state_leaves_carry_over_between_readings() -> None:
    t = CounterTracker()
    t.ingest(reading(0, 0))
    out = t.ingest(PortReading("lf-g1-r1", "swp1", T0 + 10 * S, in_octets=10**9))  # counters only
    assert row(out).oper_status == 1 and row(out).speed_bps == G400 and row(out).in_bps == 8e8


def test_pfc_rates_per_priority_and_32_bit_totals() -> None:
    t = CounterTracker()
    wrap = frozenset({PFC_TOTAL_WRAP32})
    t.ingest(
        reading(0, 0, pfc_rx=(0,) * 8, pfc_tx=(0, 0, 0, 100, 0, 0, 0, 0), pfc_tx_total=(1 << 32) - 50, wrap32=wrap)
    )
    out = t.ingest(reading(10, 1, pfc_rx=(0,) * 8, pfc_tx=(0, 0, 0, 50_100, 0, 0, 0, 0), pfc_tx_total=50, wrap32=wrap))
    by_prio = {p.priority: p for p in out.pfc}
    assert by_prio[3].tx_pause_pps == 5000 and by_prio[0].tx_pause_pps == 0
    assert by_prio[-1].tx_pause_pps == 10.0 and not by_prio[-1].counter_reset


def _pfc(t: CounterTracker, t_s: float, tx3: int) -> list[int]:
    """Ingest a sample whose priority-3 tx pause counter is ``tx3``; the priorities stored."""
    out = t.ingest(reading(t_s, 0, pfc_rx=(0,) * 8, pfc_tx=(0, 0, 0, tx3, 0, 0, 0, 0)))
    return sorted(p.priority for p in out.pfc)


def test_pfc_rows_are_stored_on_change_with_the_end_of_pausing_and_a_heartbeat() -> None:
    t = CounterTracker(pfc_heartbeat_s=60)
    every = list(range(8))
    assert _pfc(t, 0, 0) == every  # the first sample: a baseline on record
    assert _pfc(t, 10, 500) == every  # pausing
    assert _pfc(t, 20, 900) == every
    assert _pfc(t, 30, 900) == every  # the sample after: pausing ended, on record
    assert _pfc(t, 40, 900) == []  # nothing moved
    assert _pfc(t, 80, 900) == []
    assert _pfc(t, 90, 900) == every  # 60 s since the last stored rows: a heartbeat
    assert t.stats.pfc_unchanged == 2


def test_quiet_ports_heartbeats_are_spread_not_a_burst() -> None:
    t = CounterTracker(pfc_heartbeat_s=300)
    per_tick: list[int] = []
    for tick in range(0, 310, 10):
        stored = 0
        for n in range(1000):
            out = t.ingest(PortReading("lf-g1-r1", f"swp{n}", T0 + tick * S, pfc_rx=(0,) * 8, pfc_tx=(0,) * 8))
            stored += bool(out.pfc)
        per_tick.append(stored)
    assert per_tick[0] == 1000  # every port's baseline
    # Then each port once within the heartbeat, about evenly: ~1000/30 per 10 s tick.
    assert sum(per_tick[1:]) == 1000 and max(per_tick[1:]) < 3 * 1000 / 30


def test_pfc_reset_is_stored_and_heartbeat_zero_stores_every_sample() -> None:
    t = CounterTracker()
    booted = T0 - 3600 * S
    for t_s, stored in ((0, 8), (10, 0)):
        out = t.ingest(reading(t_s, 0, pfc_rx=(0,) * 8, pfc_tx=(0, 0, 0, 100, 0, 0, 0, 0), boot_ns=booted))
        assert len(out.pfc) == stored
    out = t.ingest(reading(20, 0, pfc_rx=(0,) * 8, pfc_tx=(0, 0, 0, 100, 0, 0, 0, 0), boot_ns=T0 + 15 * S))
    assert len(out.pfc) == 8 and all(p.counter_reset for p in out.pfc)
    every = CounterTracker(pfc_heartbeat_s=0)
    assert all(_pfc(every, s, 7) == list(range(8)) for s in range(0, 100, 10))


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 600),
    st.lists(st.tuples(st.integers(1, 30), st.sampled_from([0, 0, 0, 1, 50, 10**6])), min_size=1, max_size=40),
)
def test_stored_pfc_rows_account_for_every_pause(heartbeat_s: int, steps: list[tuple[int, int]]) -> None:
    """Whatever is skipped, the stored rows' pauses (rate x interval) add up to the counter's rise,
    and the last stored raw counter is the latest one whenever it moved since."""
    t = CounterTracker(pfc_heartbeat_s=heartbeat_s)
    now, value = 0, 10
    _pfc(t, now, value)
    stored = 0.0
    last_raw = value
    for dt, inc in steps:
        now += dt
        value += inc
        out = t.ingest(reading(now, 0, pfc_rx=(0,) * 8, pfc_tx=(0, 0, 0, value, 0, 0, 0, 0)))
        for p in out.pfc:
            if p.priority == 3:
                assert p.interval_s == dt  # rates cover the interval since the previous *sample*
                stored += (p.tx_pause_pps or 0.0) * dt
                last_raw = from_int8(p.tx_pause or 0)
        assert last_raw == value or inc == 0
    assert abs(stored - (value - 10)) <= 1e-6 * max(1, value)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 20), st.integers(0, 10**11), st.booleans()), min_size=2, max_size=30))
def test_rates_are_never_negative_or_absurd(steps: list[tuple[int, int, bool]]) -> None:
    t = CounterTracker()
    now, value = 0, 0
    first = True
    for dt, inc, reset in steps:
        now += dt
        previous = value
        value = inc if reset else value + inc
        out = t.ingest(reading(now, value))
        for rate in (row(out).in_bps, row(out).out_bps):
            assert rate is None or 0 <= rate <= 1.5 * G400
        decreased = not first and value < previous
        assert row(out).counter_reset == decreased
        if decreased:
            assert row(out).in_bps is None
        first = False
    # Counters are stored as the same 64 bits.
    assert from_int8(row(out).in_octets or 0) == value
