"""Counter hygiene: raw readings in, per-interval rates and link events out, whatever their shape.

The collector is the only place that knows about resets, so rates are computed here once and
stored beside the raw counters. Real switches do not send a port's counters, status and PFC in
one message with one timestamp: EOS sends a Notification per container, PFC a few milliseconds
after the interface counters, oper-status ON_CHANGE and again between samples; SONiC streams
status from another database on another stream. So every counter keeps a baseline of its own
(its last value and the time it was read), and:

- A counter's rate covers the interval since that counter's previous reading: a reading that
  carries no counters (status, speed, LLDP), or only other counters (PFC ten milliseconds after
  the interface counters), never moves it, so it never shortens an interval. ``interval_s`` is
  the interval of the row's first rated counter (``in_octets`` when it is there).
- A reading older than or as old as a counter's baseline (a replay after reconnect, another
  stream that lags) gives that counter no rate and leaves its baseline alone.
- A counter that went down is a reset (reboot, clear), never a negative rate; so is any change of
  ``boot_ns`` (SNMP sysUpTime went back) or ``last_clear_ns`` (gNMI ``last-clear``). A reset
  drops every baseline of the port (a clear clears them all); the resetting reading keeps its
  raw counters, carries no rates and is flagged ``counter_reset``.
- 32-bit source counters (``PortReading.wrap32``) wrap mod 2^32 instead.
- A rate above what the port can physically carry (150 % of line rate, or of 800G when the
  speed is unknown) is absurd: dropped (None), never stored as data.
- A ``port_counters`` row is written for a reading that carries counters. A reading without
  counters is state: it is a row only when it changes the port's oper status or is the first to
  tell it (so the latest row always says whether the port is up; that row has no counters), and
  never otherwise (EOS re-sends status between samples). A row's oper status is the one its
  reading told or, for a reading of counters alone, the one in force at the row's time: a
  counters reading older than every status reading (a lagging stream) says nothing of it, rather
  than a status learned later.
  An interface the switch deleted (``PortReading.removed``) is down, and its counters start over.

Link events, one per flap whichever signals reveal it, are :mod:`collector.link_flaps`'s; each
port's baselines and status live in a :class:`collector.port_state.PortState`.

PFC rows are stored on change, as gNMI's ``suppress_redundant`` with a ``heartbeat_interval``
does on the wire: a port's per-priority rows are written for a reading in which any of its pause
counters moved, for its next PFC reading (so the end of pausing is on record), on its first and
on a reset, and at least every ``pfc_heartbeat_s`` (so a reader can tell a quiet port from a
silent one; each port's heartbeat has a phase of its own, so they do not burst). Between rows, a
port's pause counters stood still: zero pauses. A healthy 16K-GPU fabric otherwise writes eight
all-zero rows per port per interval, eight times its interface rows (docs/decisions.md).
``pfc_heartbeat_s = 0`` writes every PFC reading.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from operator import attrgetter
from typing import cast

from collector.config import PFC_HEARTBEAT_S as PFC_HEARTBEAT_S  # the knob's default, where it is declared
from collector.link_flaps import carrier, last_change, on_status, status_at, utc
from collector.port_state import PFC0, PFC_KEYS, SLOTS, PortState, TrackerStats
from collector.records import COUNTER_FIELDS, PFC_TOTAL_WRAP32, PortReading
from collector.speedups import deltas as _c_deltas
from collector.speedups import port_row as _c_port_row
from fabric.record import PER_SECOND
from store.records import I64_MAX, U64, LinkEvent, PfcSample, PortSample, to_int8

_PortState = PortState  # the names this module (and tests/unit/collector/test_speedups.py) use
_utc = utc

WRAP32 = 1 << 32
MAX_SPEED_BPS = 800 * 10**9
ABSURD_FACTOR = 1.5
MIN_FRAME_BITS = 84 * 8  # 64-byte frame + preamble + inter-frame gap
PFC_PRIORITIES = 8
#: SNMP derives boot and clear instants from sysUpTime, which jitters by the poll's round trip.
RESET_TOLERANCE_NS = 2_000_000_000

_PKTS_IN = ("in_unicast_pkts", "in_multicast_pkts", "in_broadcast_pkts")
_PKTS_OUT = ("out_unicast_pkts", "out_multicast_pkts", "out_broadcast_pkts")
_DIRECTIONS = (("in", "in_octets", _PKTS_IN), ("out", "out_octets", _PKTS_OUT))
_PER_SECOND = PER_SECOND
_CARRIER = "carrier_transitions"
#: The counters behind the rates, in the order collector/_speedups.c port_row reads them.
_RATE_NAMES = (*(n for _, octets, pkts in _DIRECTIONS for n in (octets, *pkts)), *_PER_SECOND)
#: The port_counters row as :meth:`CounterTracker._sample` and the C ``port_row`` build it, by
#: position: the head, the counters, interval_s, the nine rates, counter_reset. It must be
#: PortSample's fields (tests/unit/fabric/test_record_shape.py).
PORT_ROW: tuple[str, ...] = (
    *("time", "switch", "port", "oper_status", "speed_bps"),
    *COUNTER_FIELDS,
    *("interval_s", "in_bps", "out_bps", "in_pps", "out_pps", *(f"{n}_ps" for n in _PER_SECOND), "counter_reset"),
)

#: A counter's change and the interval it covers (seconds).
_Delta = tuple[int, float]


@dataclass(slots=True)
class Ingested:
    """What one reading becomes: a ``port_counters`` row (None: the reading was only state)."""

    port: PortSample | None
    pfc: list[PfcSample]
    events: list[LinkEvent]


def _moved(before: int | None, after: int | None) -> bool:
    return before is not None and after is not None and abs(after - before) > RESET_TOLERANCE_NS


def _counter(v: int | None) -> int | None:
    return None if v is None else to_int8(v % U64)


def _limits(speed: int | None) -> tuple[float, float]:
    """The bits and frames per second above which a port's rate is absurd."""
    line = float(speed) if speed else float(MAX_SPEED_BPS)
    max_bps = line * ABSURD_FACTOR
    return max_bps, max_bps / MIN_FRAME_BITS


#: A reading's 16 counters, in PortSample order, in one call.
_counter_values: Callable[[PortReading], tuple[int | None, ...]] = attrgetter(*COUNTER_FIELDS)
_CARRIER_INDEX = COUNTER_FIELDS.index("carrier_transitions")
_pfc_values: Callable[[PortReading], tuple[int | tuple[int, ...] | None, ...]] = attrgetter(*PFC_KEYS)
_NO_RATES: dict[str, float | None] = {}


def _deltas(
    st: _PortState, values: tuple[int | None, ...], t: int, wrap32: frozenset[str], reset: bool
) -> tuple[dict[str, _Delta], int | None, bool, int, int, int]:
    """(deltas, carrier baseline time, a counter went down, counters carried, counters stale,
    counters whose clock stepped back);
    moves the baseline of every counter this reading carries that is newer than it."""
    deltas: dict[str, _Delta] = {}
    counters = stale = steps = 0
    carrier_t0: int | None = None
    decreased = False
    vals, times = st.vals, st.times
    for i, new in enumerate(values):
        if new is None:
            continue
        counters += 1
        before = vals[i]
        if before is None or reset:
            vals[i], times[i] = new, t
            continue
        bt = times[i]
        if t <= bt:
            if new > before and COUNTER_FIELDS[i] not in wrap32:
                # The counter moved on at an earlier time: the switch's clock stepped back. A new
                # baseline, no rate (its interval is unknown).
                vals[i], times[i] = new, t
                steps += 1
            else:
                stale += 1
            continue
        vals[i], times[i] = new, t
        name = COUNTER_FIELDS[i]
        d = new - before
        if d < 0:
            if name not in wrap32:
                decreased = True
                continue
            d %= WRAP32
        deltas[name] = (d, (t - bt) / 1e9)
        if i == _CARRIER_INDEX:
            carrier_t0 = bt
    return deltas, carrier_t0, decreased, counters, stale, steps


def _note_epochs(st: _PortState, r: PortReading) -> None:
    """Keep the reading's boot and clear instants (the reset evidence of the next reading)."""
    if r.boot_ns is not None:
        st.boot_ns = r.boot_ns
    if r.last_clear_ns is not None:
        st.last_clear_ns = r.last_clear_ns


def _forget_baselines(st: _PortState, values: tuple[int | None, ...], t: int) -> None:
    """A reset: every baseline goes; the resetting reading's counters are the new ones."""
    st.vals[:] = [*values, *(None for _ in PFC_KEYS)]
    st.times[:] = [t] * len(SLOTS)
    st.transitions.clear()
    st.credit = 0


class CounterTracker:
    """Keeps every port's baselines and derives rates and events from each next reading."""

    def __init__(self, pfc_heartbeat_s: float = PFC_HEARTBEAT_S) -> None:
        self._ports: dict[tuple[str, str], _PortState] = {}
        self.stats = TrackerStats()
        self._pfc_heartbeat_ns = int(pfc_heartbeat_s * 1e9)

    def ingest(self, r: PortReading) -> Ingested:
        """Rates, resets and link events for one reading."""
        stats = self.stats
        stats.readings += 1
        key = (r.switch, r.port)
        st = self._ports.get(key)
        first = st is None
        if st is None:
            st = self._ports[key] = _PortState(newest_ns=r.time_ns)
        t = r.time_ns
        newer = first or t > st.newest_ns
        reset = not first and newer and (_moved(st.boot_ns, r.boot_ns) or _moved(st.last_clear_ns, r.last_clear_ns))
        if r.removed:
            reset = False
            st.vals[:] = [None] * len(SLOTS)  # the interface is gone; when back, its counters start over
        values = _counter_values(r)
        done = None if _c_deltas is None else _c_deltas(
            st.vals, st.times, values, t, r.wrap32, reset, COUNTER_FIELDS, _CARRIER_INDEX
        )  # fmt: skip
        deltas, carrier_t0, decreased, counters, stale, steps = done or _deltas(st, values, t, r.wrap32, reset)
        stats.clock_steps += steps
        if decreased or reset:
            reset = True
            deltas, carrier_t0 = {}, None
            stats.resets += 1
            _forget_baselines(st, values, t)
        stats.counter_values += counters
        if counters and stale == counters:
            stats.out_of_order += 1
        if newer or reset:
            _note_epochs(st, r)

        events: list[LinkEvent] = []
        has_pfc = not (r.pfc_rx is None and r.pfc_tx is None and r.pfc_rx_total is None and r.pfc_tx_total is None)
        was = st.oper_up
        changed = (
            False if r.oper_up is None and not r.removed else on_status(st, r, events, counters or has_pfc, self.stats)
        )
        if r.last_change_ns is not None and r.oper_up is not None and newer:
            last_change(st, r, was, changed, events)
        if carrier_t0 is not None:
            carrier(st, r, deltas[_CARRIER][0], carrier_t0, events)
        if r.speed_bps is not None and newer:
            st.speed_bps = r.speed_bps

        pfc = self._pfc(st, r, key, reset, first) if has_pfc else []
        if counters:
            port: PortSample | None = self._sample(r, st, values, deltas or None, reset=reset)
        elif changed:
            port = self._sample(r, st, values, None, reset=False)
        else:
            port = None
            stats.state_only += 1
        if newer:
            st.newest_ns = t
        return Ingested(port, pfc, events)

    # --- counters -------------------------------------------------------------------------

    def _rates(self, d: dict[str, _Delta], speed: int | None) -> dict[str, float | None]:
        max_bps, max_pps = _limits(speed)
        out: dict[str, float | None] = {}
        absurd = 0
        for direction, octets_name, pkts in _DIRECTIONS:
            x = d.get(octets_name)
            if x is not None:
                bps = x[0] * 8 / x[1]
                if bps > max_bps:
                    absurd += 1
                else:
                    out[f"{direction}_bps"] = bps
            if all(n in d for n in pkts):
                a, b, c = (d[n][0] / d[n][1] for n in pkts)
                pps = a + b + c  # not sum(): Python 3.12's compensates, and the C adds left to right
                if pps > max_pps:
                    absurd += 1
                else:
                    out[f"{direction}_pps"] = pps
        for name in _PER_SECOND:
            x = d.get(name)
            if x is not None:
                ps = x[0] / x[1]
                if ps > max_pps:
                    absurd += 1
                else:
                    out[f"{name}_ps"] = ps
        if absurd:
            self.stats.absurd_rates += absurd
        out["interval_s"] = next((d[n][1] for n in COUNTER_FIELDS if n in d), None)
        return out

    def _sample(
        self,
        r: PortReading,
        st: _PortState,
        values: tuple[int | None, ...],
        deltas: dict[str, _Delta] | None,
        *,
        reset: bool,
    ) -> PortSample:
        """The ``port_counters`` row: the reading's counters, and the rates of ``deltas`` (None: none)."""
        # A reading that tells its status says it of its own time; else the status then in force.
        oper = False if r.removed else r.oper_up
        if oper is None:
            oper = status_at(st, r.time_ns)
        code = None if oper is None else 1 if oper else 2
        speed = st.speed_bps if st.speed_bps is not None else r.speed_bps
        if _c_port_row is not None:  # the same in C, or None: an input it leaves to us
            max_bps, max_pps = _limits(st.speed_bps) if deltas else (0.0, 0.0)
            args = (_utc(r.time_ns), r.switch, r.port, code, speed, values, deltas, max_bps, max_pps, reset)
            done = _c_port_row(PortSample, *args, COUNTER_FIELDS, _RATE_NAMES)
            if done is not None:
                row, absurd = done
                if absurd:
                    self.stats.absurd_rates += absurd
                return cast(PortSample, row)
        rt = self._rates(deltas, st.speed_bps) if deltas else _NO_RATES
        return PortSample._make((
            _utc(r.time_ns), r.switch, r.port, code, speed,
            *[v if v is None or 0 <= v <= I64_MAX else _counter(v) for v in values],
            rt.get("interval_s"),
            rt.get("in_bps"), rt.get("out_bps"), rt.get("in_pps"), rt.get("out_pps"),
            rt.get("in_errors_ps"), rt.get("out_errors_ps"), rt.get("in_discards_ps"), rt.get("out_discards_ps"),
            rt.get("in_fcs_errors_ps"),
            reset,
        ))  # fmt: skip

    # --- PFC ------------------------------------------------------------------------------

    def _phase_ns(self, key: tuple[str, str]) -> int:
        hb = self._pfc_heartbeat_ns
        return zlib.crc32(f"{key[0]}\0{key[1]}".encode()) * hb >> 32  # spread over [0, hb)

    def _pfc(self, st: _PortState, r: PortReading, key: tuple[str, str], reset: bool, first: bool) -> list[PfcSample]:
        t = r.time_ns
        vals, times = st.vals, st.times
        # The baselines before this reading (its rows' previous values); a slot whose clock stepped
        # back loses its own (its rows carry no rate).
        old_vals, old_times = vals[PFC0:], times[PFC0:]
        late = moving = False
        fresh = True
        for j, v in enumerate(_pfc_values(r)):
            if v is None:
                continue
            i = PFC0 + j
            before = old_vals[j]
            if before is None:
                vals[i], times[i] = v, t
                continue
            fresh = False
            if t > old_times[j]:
                moving = moving or v != before
                vals[i], times[i] = v, t
            elif _advanced(v, before):  # further on at an earlier time: the clock stepped back
                vals[i], times[i] = v, t
                old_vals[j] = None
                self.stats.clock_steps += 1
                late = True
            else:
                late = True
        if late:
            moving = st.pfc_moving  # a late reading says nothing about whether the counters move now
        due = (
            fresh
            or reset
            or moving
            or st.pfc_moving
            or st.pfc_written_ns is None
            or t - st.pfc_written_ns >= self._pfc_heartbeat_ns
        )
        st.pfc_moving = moving
        if not due:
            self.stats.pfc_unchanged += 1
            return []
        out: list[PfcSample] = []
        now = _utc(t)
        if r.pfc_rx is not None and r.pfc_tx is not None:
            for p in range(min(PFC_PRIORITIES, len(r.pfc_rx), len(r.pfc_tx))):
                rx = (r.pfc_rx[p], *_previous(old_vals[0], old_times[0], p))
                tx = (r.pfc_tx[p], *_previous(old_vals[1], old_times[1], p))
                out.append(_pfc_row(r, now, p, rx, tx, False, reset))
        if r.pfc_rx_total is not None or r.pfc_tx_total is not None:
            rx_all: _Pause = (r.pfc_rx_total, *_previous(old_vals[2], old_times[2], None))
            tx_all: _Pause = (r.pfc_tx_total, *_previous(old_vals[3], old_times[3], None))
            out.append(_pfc_row(r, now, -1, rx_all, tx_all, PFC_TOTAL_WRAP32 in r.wrap32, reset))
        # A port's first heartbeat comes at a phase of its own, so that a fabric whose collector
        # started at once does not write every quiet port's rows in one burst.
        st.pfc_written_ns = t - (self._phase_ns(key) if first or st.pfc_written_ns is None else 0)
        return out


def _advanced(new: int | tuple[int, ...], old: int | tuple[int, ...]) -> bool:
    """Whether a pause counter (or any priority's) is further on than its baseline."""
    if isinstance(new, tuple) and isinstance(old, tuple):
        return any(a > b for a, b in zip(new, old, strict=False))
    return isinstance(new, int) and isinstance(old, int) and new > old


def _previous(v: int | tuple[int, ...] | None, bt: int, priority: int | None) -> tuple[int | None, int | None]:
    """A PFC baseline's value (one priority's, or the total) and its time (value None: no baseline)."""
    if v is None:
        return None, None
    if priority is None:
        return (v if isinstance(v, int) else None), bt
    return (v[priority] if isinstance(v, tuple) and priority < len(v) else None), bt


#: One direction of a PFC row: (this reading's counter, the previous one, its time).
_Pause = tuple[int | None, int | None, int | None]


def _pfc_row(r: PortReading, now: datetime, prio: int, rx: _Pause, tx: _Pause, wrap: bool, reset: bool) -> PfcSample:
    """One priority's row (-1: the port's totals); each direction's rate over its own interval."""
    t = r.time_ns
    intervals: list[float] = []
    went_down = False

    def rate(new: int | None, old: int | None, old_t: int | None) -> float | None:
        nonlocal went_down
        if new is None or old is None or old_t is None or t <= old_t:
            return None
        d = new - old
        if d < 0:
            if not wrap:
                went_down = True
                return None
            d %= WRAP32
        dt = (t - old_t) / 1e9
        intervals.append(dt)
        return d / dt

    rx_rate, tx_rate = rate(*rx), rate(*tx)
    reset = reset or went_down
    if reset:
        rx_rate = tx_rate = None
    return PfcSample(
        now, r.switch, r.port, prio,
        _counter(rx[0]), _counter(tx[0]),
        intervals[0] if intervals and not reset else None, rx_rate, tx_rate, reset,
    )  # fmt: skip
