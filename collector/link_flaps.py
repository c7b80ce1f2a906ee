"""Link status and flaps in counter hygiene: the link events a port's readings reveal.

Called by :class:`collector.counters.CounterTracker` for each reading, on the port's
:class:`collector.port_state.PortState`.

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
- SNMP has no transition counter; its ``ifLastChange`` (sysUpTime at the port's last oper
  change, a Unix time on the agent's boot epoch: :mod:`collector.snmp_poll`) tells instead. When
  it moved between two readings of the same status on the same epoch, the link went and came
  back between them: one ``flap`` event (``last-change``; at least one flap, no outage length).
  A source with ``carrier-transitions`` counts them instead, and a time without a boot epoch (a
  gNMI ``last-change``, whose notifications may arrive apart from the status's) is not compared.
"""

from __future__ import annotations

import bisect
from datetime import UTC, datetime
from typing import Any

from collector.port_state import PortState, TrackerStats
from collector.records import PortReading
from store.records import LinkEvent

#: Runs of equal status readings kept per port ([first, last, up]), to place a late reading among them.
STATUS_RUNS = 8


def utc(ns: int) -> datetime:
    """A device time (Unix ns) as a row's timestamp."""
    return datetime.fromtimestamp(ns / 1e9, tz=UTC)


def status_name(up: bool | None) -> str:
    return "unknown" if up is None else "up" if up else "down"


#: Status transitions kept per port for the carrier-transitions check: each carrier interval
#: takes its own and drops them; a port without carrier-transitions (SONiC, SNMP) keeps the last few.
MAX_TRANSITIONS = 32


def _note_transitions(st: PortState, t: int, n: int) -> None:
    """Remember ``n`` status transitions at ``t`` for the carrier-transitions interval they fall in."""
    st.transitions.extend([t] * n)
    if len(st.transitions) > MAX_TRANSITIONS:
        del st.transitions[:-MAX_TRANSITIONS]


def status_at(st: PortState, t: int) -> bool | None:
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


def _trim_runs(st: PortState) -> None:
    """Keep the newest :data:`STATUS_RUNS` runs, and the state of the last one dropped."""
    runs = st.status
    extra = len(runs) - STATUS_RUNS
    if extra > 0:
        st.trimmed_up = bool(runs[extra - 1][2])
        del runs[:extra]


def _run_start(run: list[Any]) -> int:
    return int(run[0])


def on_status(st: PortState, r: PortReading, events: list[LinkEvent], sample: object, stats: TrackerStats) -> bool:
    """Link events for a status reading (``sample``: it carries counters too, so its status is
    of its time); True when it changed the port's oper status."""
    up = False if r.removed else r.oper_up
    if up is None:
        return False
    t = r.time_ns
    st.first_status_ns = t if st.first_status_ns is None else min(st.first_status_ns, t)
    runs = st.status
    if runs and t <= runs[-1][1]:
        _late_status(st, r, t, up, events, bool(sample), stats)
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
            _excursion(st, r, pt, runs[-1][2], events, stats)
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
    counted = _credit(st, at, 1, stats)
    if up:
        down_s = (at - st.down_since_ns) / 1e9 if st.down_since_ns is not None else None
        events.append(LinkEvent(utc(at), r.switch, r.port, "down", "up", down_s, source))
        st.down_since_ns = None
    else:
        events.append(LinkEvent(utc(at), r.switch, r.port, "up", "down", None, source, 0 if counted else 1))
        st.down_since_ns = at
    _note_transitions(st, at, 1)
    return True


def _late_status(
    st: PortState,
    r: PortReading,
    t: int,
    up: bool,
    events: list[LinkEvent],
    sample: bool,
    stats: TrackerStats,
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
            _late_in_newest_run(st, r, t, up, was, events, stats)
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
        _excursion(st, r, t, was, events, stats)
    elif was == up:
        runs[i][1] = t  # between runs: the state before lasted longer
    else:
        runs[i + 1][0] = t  # the state after began earlier
        if not up and i + 1 == len(runs) - 1 and st.oper_up is False and st.down_since_ns is not None:
            st.down_since_ns = min(st.down_since_ns, t)  # the outage began earlier than we knew


def _late_in_newest_run(
    st: PortState, r: PortReading, t: int, up: bool, was: bool, events: list[LinkEvent], stats: TrackerStats
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
        _excursion(st, r, pt, was, events, stats)


def _excursion(
    st: PortState, r: PortReading, t: int, around: bool, events: list[LinkEvent], stats: TrackerStats
) -> None:
    """A state that came and went at ``t`` between readings of ``around``: one flap."""
    _note_transitions(st, t, 2)
    if _credit(st, t, 2, stats):
        return
    stats.late_flaps += 1
    events.append(LinkEvent(utc(t), r.switch, r.port, status_name(around), "flap", None, "oper-status", 1))


def _credit(st: PortState, t: int, n: int, stats: TrackerStats) -> bool:
    """Whether ``n`` transitions at ``t`` were already counted by carrier-transitions."""
    if st.credit >= n and t <= st.credit_until_ns:
        st.credit -= n
        stats.recounted_transitions += n
        return True
    return False


def carrier(st: PortState, r: PortReading, delta: int, t0: int, events: list[LinkEvent]) -> None:
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
            LinkEvent(utc(t), r.switch, r.port, status_name(st.oper_up), "flap", None, "carrier-transitions", hidden)
        )


def last_change(st: PortState, r: PortReading, was: bool | None, changed: bool, events: list[LinkEvent]) -> None:
    """The flap an SNMP ``ifLastChange`` reveals (see the module docstring), for a newer reading
    carrying status and last change; ``was``: the port's status before it, ``changed``: whether
    it changed that status. The reading's last change and boot epoch are kept for the next one."""
    seen, epoch = st.last_change_ns, st.last_change_boot_ns
    st.last_change_ns, st.last_change_boot_ns = r.last_change_ns, r.boot_ns
    if (
        seen is None
        or r.last_change_ns is None
        or r.last_change_ns <= seen
        or r.boot_ns is None
        or r.boot_ns != epoch
        or r.carrier_transitions is not None
        or changed
        or r.removed
        or was is None
        or r.oper_up != was
    ):
        return
    events.append(LinkEvent(utc(r.time_ns), r.switch, r.port, status_name(was), "flap", None, "last-change", 1))
