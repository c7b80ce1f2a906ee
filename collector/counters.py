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

Link events, one per flap whichever signals reveal it:

- An oper-status change becomes a link event; an up transition carries the outage length.
- A status reading older than the newest one (another stream lagging) is placed among the
  port's recent runs of equal status readings: a state that differs from the readings on both
  sides of it is an excursion they hid, i.e. a flap (one ``flap`` event, no outage length: how
  long it lasted is unknown, so it can never make an outage look training-fatal). A reading
  older than the port's last ``STATUS_RUNS`` runs is too late to place.
- ``carrier-transitions`` counts transitions. Those it counted between two of its readings that
  no status reading in that interval explains are flaps the sampling missed: one ``flap`` event
  with their count. Status readings that arrive later for that interval are still link events
  (their outage length matters) but a ``down`` among them carries ``flaps = 0``: it was counted.

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

import bisect
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from operator import attrgetter
from typing import Any, cast

from collector.config import PFC_HEARTBEAT_S as PFC_HEARTBEAT_S  # the knob's default, where it is declared
from collector.records import COUNTER_FIELDS, PFC_TOTAL_WRAP32, PortReading
from collector.speedups import deltas as _c_deltas
from collector.speedups import port_row as _c_port_row
from fabric.record import PER_SECOND
from store.records import I64_MAX, U64, LinkEvent, PfcSample, PortSample, to_int8

WRAP32 = 1 << 32
MAX_SPEED_BPS = 800 * 10**9
ABSURD_FACTOR = 1.5
MIN_FRAME_BITS = 84 * 8  # 64-byte frame + preamble + inter-frame gap
PFC_PRIORITIES = 8
#: Runs of equal status readings kept per port ([first, last, up]), to place a late reading among them.
STATUS_RUNS = 8
#: SNMP derives boot and clear instants from sysUpTime, which jitters by the poll's round trip.
RESET_TOLERANCE_NS = 2_000_000_000

_PKTS_IN = ("in_unicast_pkts", "in_multicast_pkts", "in_broadcast_pkts")
_PKTS_OUT = ("out_unicast_pkts", "out_multicast_pkts", "out_broadcast_pkts")
_DIRECTIONS = (("in", "in_octets", _PKTS_IN), ("out", "out_octets", _PKTS_OUT))
_PER_SECOND = PER_SECOND
_PFC_KEYS = ("pfc_rx", "pfc_tx", "pfc_rx_total", "pfc_tx_total")
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

#: The baselines' slots: the 16 counters, then the PFC groups.
_SLOTS = (*COUNTER_FIELDS, *_PFC_KEYS)
#: The first PFC slot; the four groups follow in :data:`_PFC_KEYS` order.
_PFC0 = len(COUNTER_FIELDS)
#: A counter's change and the interval it covers (seconds).
_Delta = tuple[int, float]


@dataclass(slots=True)
class _PortState:
    #: The newest reading of any kind (reset evidence is only taken from newer readings).
    newest_ns: int
    #: Per slot of :data:`_SLOTS`: the baseline value (None: none yet) and its device time. Two
    #: short lists, not a dict of tuples: 82K ports keep them (~0.4 KB a port instead of ~1.6 KB).
    vals: list[Any] = field(default_factory=lambda: [None] * len(_SLOTS))
    times: list[int] = field(default_factory=lambda: [0] * len(_SLOTS))
    boot_ns: int | None = None
    last_clear_ns: int | None = None
    oper_up: bool | None = None
    speed_bps: int | None = None
    down_since_ns: int | None = None
    #: Runs of equal status readings, [first time, last time, up], oldest first.
    status: list[list[Any]] = field(default_factory=list)
    #: The state of the newest run trimmed off ``status`` (what held before the oldest kept run).
    trimmed_up: bool | None = None
    #: The oldest status reading ever seen: before it no status is known, even once the runs that
    #: began there were trimmed off.
    first_status_ns: int | None = None
    #: When the newest run's state was entered as far as the readings in order tell (the reading
    #: whose transition is on record, or the first status reading): a late reading of the same
    #: state can move the run's start earlier, never this.
    entered_ns: int = 0
    #: The newest time a sample (a reading with counters, stamped when it was read) told the newest
    #: run's state (older than the run's start when none did).
    sampled_ns: int = 0
    #: Times of status transitions not yet set against a carrier-transitions interval.
    transitions: list[int] = field(default_factory=list)
    #: Transitions carrier-transitions counted (as hidden flaps) up to ``credit_until_ns`` that
    #: status readings arriving later must not count again.
    credit: int = 0
    credit_until_ns: int = 0
    #: A late status reading inside the newest run, (time, up): an excursion, or the start of a
    #: change; the next status reading in order decides.
    pending: tuple[int, bool] | None = None
    #: Whether the last PFC reading's pause counters moved, and when PFC rows were last written.
    pfc_moving: bool = False
    pfc_written_ns: int | None = None


@dataclass(slots=True)
class Ingested:
    """What one reading becomes: a ``port_counters`` row (None: the reading was only state)."""

    port: PortSample | None
    pfc: list[PfcSample]
    events: list[LinkEvent]


@dataclass(slots=True)
class TrackerStats:
    """For /metrics."""

    readings: int = 0
    #: Counter values the readings carried.
    counter_values: int = 0
    resets: int = 0
    absurd_rates: int = 0
    #: Readings whose counters were all as old as their baselines (replays, lagging streams).
    out_of_order: int = 0
    #: PFC samples not stored because no pause counter moved (see the module docstring).
    pfc_unchanged: int = 0
    #: Counters read at an earlier time than their baseline but further on: the switch's clock
    #: stepped back (a new baseline, no rate).
    clock_steps: int = 0
    #: Readings that carried no counters and changed nothing: no row (status heartbeats).
    state_only: int = 0
    #: Flaps found from a late status reading, and status transitions carrier-transitions had counted.
    late_flaps: int = 0
    recounted_transitions: int = 0


def _utc(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC)


def _moved(before: int | None, after: int | None) -> bool:
    return before is not None and after is not None and abs(after - before) > RESET_TOLERANCE_NS


def _status(up: bool | None) -> str:
    return "unknown" if up is None else "up" if up else "down"


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
_pfc_values: Callable[[PortReading], tuple[int | tuple[int, ...] | None, ...]] = attrgetter(*_PFC_KEYS)
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


#: Status transitions kept per port for the carrier-transitions check: each carrier interval
#: takes its own and drops them; a port without carrier-transitions (SONiC, SNMP) keeps the last few.
MAX_TRANSITIONS = 32


def _note_transitions(st: _PortState, t: int, n: int) -> None:
    """Remember ``n`` status transitions at ``t`` for the carrier-transitions interval they fall in."""
    st.transitions.extend([t] * n)
    if len(st.transitions) > MAX_TRANSITIONS:
        del st.transitions[:-MAX_TRANSITIONS]


def _note_epochs(st: _PortState, r: PortReading) -> None:
    """Keep the reading's boot and clear instants (the reset evidence of the next reading)."""
    if r.boot_ns is not None:
        st.boot_ns = r.boot_ns
    if r.last_clear_ns is not None:
        st.last_clear_ns = r.last_clear_ns


def _status_at(st: _PortState, t: int) -> bool | None:
    """The oper status in force at ``t`` as far as the status readings so far tell: that of the
    newest run begun at or before ``t`` (before the oldest kept, the one trimmed off last); None
    before the first status reading (a counters reading older than any, e.g. SONiC's COUNTERS_DB
    stream lagging APPL_DB's, must not carry a status learned later, or the status row that told
    it would follow a row that already said it)."""
    runs = st.status
    if not runs or t >= runs[-1][0]:
        return st.oper_up
    if st.first_status_ns is not None and t < st.first_status_ns:
        return None
    i = bisect.bisect_right(runs, t, key=_run_start) - 1
    return st.trimmed_up if i < 0 else bool(runs[i][2])


def _trim_runs(st: _PortState) -> None:
    """Keep the newest :data:`STATUS_RUNS` runs, and the state of the last one dropped."""
    runs = st.status
    extra = len(runs) - STATUS_RUNS
    if extra > 0:
        st.trimmed_up = bool(runs[extra - 1][2])
        del runs[:extra]


def _run_start(run: list[Any]) -> int:
    return int(run[0])


def _forget_baselines(st: _PortState, values: tuple[int | None, ...], t: int) -> None:
    """A reset: every baseline goes; the resetting reading's counters are the new ones."""
    st.vals[:] = [*values, *(None for _ in _PFC_KEYS)]
    st.times[:] = [t] * len(_SLOTS)
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
            st.vals[:] = [None] * len(_SLOTS)  # the interface is gone; when back, its counters start over
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
        changed = False if r.oper_up is None and not r.removed else self._status(st, r, events, counters or has_pfc)
        if carrier_t0 is not None:
            self._carrier(st, r, deltas[_CARRIER][0], carrier_t0, events)
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
            oper = _status_at(st, r.time_ns)
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
        old_vals, old_times = vals[_PFC0:], times[_PFC0:]
        late = moving = False
        fresh = True
        for j, v in enumerate(_pfc_values(r)):
            if v is None:
                continue
            i = _PFC0 + j
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

    # --- status and flaps -----------------------------------------------------------------

    def _status(self, st: _PortState, r: PortReading, events: list[LinkEvent], sample: object) -> bool:
        """Link events for a status reading (``sample``: it carries counters too, so its status is
        of its time); True when it changed the port's oper status."""
        up = False if r.removed else r.oper_up
        if up is None:
            return False
        t = r.time_ns
        st.first_status_ns = t if st.first_status_ns is None else min(st.first_status_ns, t)
        runs = st.status
        if runs and t <= runs[-1][1]:
            self._late_status(st, r, t, up, events, bool(sample))
            return False
        at = t  # when the state this reading reports began, as far as we know
        if st.pending is not None:
            pt, pup = st.pending
            st.pending = None
            if up == pup:  # the late reading began a change a reading stamped just after it hid
                if runs[-1][0] >= pt:
                    runs.pop()
                else:
                    runs[-1][1] = min(runs[-1][1], pt - 1)
                runs.append([pt, pt, up])
                _trim_runs(st)
                at = st.entered_ns = pt
            else:  # it came and went between the newest run's readings
                self._excursion(st, r, pt, runs[-1][2], events)
        if runs and runs[-1][2] == up:
            runs[-1][1] = t
        else:
            runs.append([t, t, up])
            _trim_runs(st)
            st.entered_ns = t
        if sample:
            st.sampled_ns = t
        was = st.oper_up
        st.oper_up = up
        if was is None:  # the port's state is known from now on: on record, though not a transition
            if not up:
                st.down_since_ns = at
            return True
        if was == up:
            return False
        source = "interface-delete" if r.removed else "oper-status"
        counted = self._credit(st, at, 1)
        if up:
            down_s = (at - st.down_since_ns) / 1e9 if st.down_since_ns is not None else None
            events.append(LinkEvent(_utc(at), r.switch, r.port, "down", "up", down_s, source))
            st.down_since_ns = None
        else:
            events.append(LinkEvent(_utc(at), r.switch, r.port, "up", "down", None, source, 0 if counted else 1))
            st.down_since_ns = at
        _note_transitions(st, at, 1)
        return True

    def _late_status(
        self, st: _PortState, r: PortReading, t: int, up: bool, events: list[LinkEvent], sample: bool
    ) -> None:
        """A status reading older than the newest, placed among the port's status runs."""
        runs = st.status
        i = bisect.bisect_right(runs, t, key=_run_start) - 1  # the run that began last at or before t
        if i < 0:
            if runs[0][2] == up:
                runs[0][0] = t  # the same state, seen earlier; older than that is too late to place
            return
        first, last, was = runs[i]
        newest = i == len(runs) - 1
        if t <= last and newest:
            # Before a reading of the run's state that cannot have hidden a change (see below)?
            pinned = t < st.entered_ns or t <= st.sampled_ns
            if sample and was == up:
                st.sampled_ns = max(st.sampled_ns, t)
            if not pinned:
                self._late_in_newest_run(st, r, t, up, was, events)
                return
        if t <= last:
            # Inside an older run, or inside the newest one before a reading of its state that
            # cannot have hidden a change: the readings on both sides decide at once. The reading in
            # order that entered the newest run's state (a late one can move the run's start earlier
            # than that) has its transition on record, and a sample's status is of its own time; a
            # change here would drop them from the runs, and the readings that explain them, when
            # they come, would be counted again as an excursion.
            if was == up:
                return
            # An excursion the readings on both sides of it hid: a flap.
            after = last if not newest else st.entered_ns if t < st.entered_ns else st.sampled_ns
            runs[i : i + 1] = [[first, first, was], [t, t, up], [after, last, was]]
            if newest and not was and st.down_since_ns is not None:
                st.down_since_ns = after  # the port was up at t: the outage in force began after it
            _trim_runs(st)
            self._excursion(st, r, t, was, events)
        elif was == up:
            runs[i][1] = t  # between runs: the state before lasted longer
        else:
            runs[i + 1][0] = t  # the state after began earlier
            if not up and i + 1 == len(runs) - 1 and st.oper_up is False and st.down_since_ns is not None:
                st.down_since_ns = min(st.down_since_ns, t)  # the outage began earlier than we knew

    def _late_in_newest_run(
        self, st: _PortState, r: PortReading, t: int, up: bool, was: bool, events: list[LinkEvent]
    ) -> None:
        """A late status reading inside the newest run, after the reading that entered its state and
        after every sample of it: an excursion, or a change that a repeat of the state stamped just
        after it (jitter, another stream, state placed at its receive time) hid. The next reading in
        order tells which."""
        if st.pending is None:
            if was != up:
                st.pending = (t, up)
        elif up == st.pending[1]:
            st.pending = (min(st.pending[0], t), up)
        elif t > st.pending[0]:  # back to the run's state: it came and went
            pt, st.pending = st.pending[0], None
            self._excursion(st, r, pt, was, events)

    def _excursion(self, st: _PortState, r: PortReading, t: int, around: bool, events: list[LinkEvent]) -> None:
        """A state that came and went at ``t`` between readings of ``around``: one flap."""
        _note_transitions(st, t, 2)
        if self._credit(st, t, 2):
            return
        self.stats.late_flaps += 1
        events.append(LinkEvent(_utc(t), r.switch, r.port, _status(around), "flap", None, "oper-status", 1))

    def _credit(self, st: _PortState, t: int, n: int) -> bool:
        """Whether ``n`` transitions at ``t`` were already counted by carrier-transitions."""
        if st.credit >= n and t <= st.credit_until_ns:
            st.credit -= n
            self.stats.recounted_transitions += n
            return True
        return False

    @staticmethod
    def _carrier(st: _PortState, r: PortReading, delta: int, t0: int, events: list[LinkEvent]) -> None:
        """Flaps carrier-transitions counted in (t0, t] that no status reading explains."""
        t = r.time_ns
        explained = sum(1 for x in st.transitions if t0 < x <= t)
        st.transitions = [x for x in st.transitions if x > t]
        if st.credit and st.credit_until_ns < t0 - 2 * (t - t0):
            st.credit = 0  # flaps counted intervals ago whose status never came: it will not now
        hidden = (delta - explained) // 2
        if hidden > 0:
            st.credit += 2 * hidden
            st.credit_until_ns = t
            events.append(
                LinkEvent(_utc(t), r.switch, r.port, _status(st.oper_up), "flap", None, "carrier-transitions", hidden)
            )


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
