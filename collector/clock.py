"""Device clocks, bounded: a reading's timestamp is trusted only near the time it was received.

A switch stamps its readings with its own clock (gNMI ``Notification.timestamp``). A clock minutes
off makes a healthy switch look silent (its newest sample is minutes old) or pushes rows into the
future, where they hide every other switch's newest window. SPEC §9.2: a device timestamp further
than ``collector.max_clock_skew_s`` from receive time is replaced by the receive time, and counted.

Replacing each timestamp by its own receive time would make rates jitter with the network and the
collector's batching, though a switch whose clock is off still stamps exact intervals. So
:class:`ClockGuard` learns an *offset* per switch instead: when a batch's newest reading is further
than ``max_skew_s`` from receive time, the offset is ``receive - device`` for that reading (it lands
at its receive time), and it is added to every later reading of the switch while the corrected
times stay within ``tolerance_s`` of receive time: intervals stay the switch's own, exact. When they
drift out (a clock that steps or drifts, a clock that got fixed) the offset is learned again, or
dropped when the device's own time is within ``max_skew_s`` again. A switch within the bound keeps
its own timestamps, ahead or behind. Every reading whose time was changed is counted for its switch,
and no stored time is ever further than ``max_skew_s`` from the time it reached the guard (a reading
its batch's offset does not bring within the bound is placed at receive time itself).

A change of clock is applied to the batch that shows it, but believed (the switch's mode, skew and
log line change) only when a later batch shows it too (one of the last two changes proposed). NOSes
stamp ON_CHANGE state with the time it last changed, so a batch of nothing but such readings (a
subscription's initial sync, a status notification of its own) may be hours "old" from a perfect
clock: it is placed at receive time, and the switch's clock, good or corrected, is left as it was.

"Receive time" is when the gNMI stream read the notification (``received_ns``, stamped by the
decoder), not when the batch reaches the guard: a collector that falls behind (a busy event loop,
a writer waiting for the database) must not make good clocks look late. Readings the collector
stamps itself (SNMP: ``received_ns`` None) have no device clock and are left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

log = logging.getLogger(__name__)

#: Default for ``collector.max_clock_skew_s`` (SPEC §9.2).
DEFAULT_MAX_CLOCK_SKEW_S = 30.0
#: How far a corrected time may stray from receive time before the offset is learned again: above
#: the collectors' hand-over delay (~2 s) twice over (the reading an offset was learned from may
#: have waited, the next one not), and far below a sampling interval's worth of staleness.
CORRECTED_TOLERANCE_S = 5.0


class Stamped(Protocol):
    """What the guard corrects: :class:`~collector.records.PortReading`, :class:`~collector.records.LldpReading`."""

    @property
    def switch(self) -> str: ...

    time_ns: int
    received_ns: int | None


@dataclass(frozen=True, slots=True)
class SwitchClock:
    """One switch's clock as the guard sees it (for /metrics and ``switch_clocks``)."""

    #: The switch's clock minus receive time, seconds (positive: ahead). While ``corrected``, the
    #: learned offset (stable); otherwise the newest reading's, batching delay included.
    skew_s: float
    #: Whether its timestamps are being replaced now.
    corrected: bool
    #: Readings whose timestamp was replaced since this process started.
    replaced: int
    #: Times an offset was learned (the first time, and again after a drift or a step).
    learned: int


@dataclass(slots=True)
class _Clock:
    offset_ns: int = 0
    corrected: bool = False
    skew_ns: int = 0
    replaced: int = 0
    learned: int = 0
    #: Changes of clock the last batches showed, (corrected, offset), newest last: each was applied
    #: to the batch that showed it, and is believed once a later batch shows it too.
    candidates: list[tuple[bool, int]] = field(default_factory=list)


def _is_sample(r: Stamped) -> bool:
    """Whether a reading is a sample (counters, stamped when they were read), not state alone."""
    return any(getattr(r, name, None) is not None for name in _SAMPLE_FIELDS)


#: Any of these makes a reading a sample: interface counters (first the usual ones) or PFC.
_SAMPLE_FIELDS = ("in_octets", "out_octets", "in_unicast_pkts", "in_errors", "pfc_rx", "pfc_tx", "pfc_rx_total")


class ClockGuard:
    """Bounds device timestamps per switch; one per collector process, called by the pipeline."""

    def __init__(self, max_skew_s: float = DEFAULT_MAX_CLOCK_SKEW_S, *, tolerance_s: float | None = None) -> None:
        if max_skew_s <= 0:
            raise ValueError(f"max_skew_s must be positive, got {max_skew_s}")
        tolerance = CORRECTED_TOLERANCE_S if tolerance_s is None else tolerance_s
        self.max_skew_ns = int(max_skew_s * 1e9)
        #: Never wider than the bound itself: no stored time further than ``max_skew_s`` from receipt.
        self.tolerance_ns = int(min(tolerance, max_skew_s) * 1e9)
        self._clocks: dict[str, _Clock] = {}

    def correct(self, readings: Sequence[Stamped], now_ns: int | None = None) -> int:
        """Bound the readings' ``time_ns`` in place; returns how many were replaced.

        A reading's receive time is its ``received_ns`` (when the stream read it, before any
        queueing in the collector), else ``now_ns`` (default: now). Readings the collector
        stamped itself (``received_ns`` None while ``now_ns`` is None: SNMP) are left alone."""
        if not readings:
            return 0
        fallback = now_ns
        newest: dict[str, tuple[int, int]] = {}
        state_only: set[str] = set()
        for r in readings:
            recv = r.received_ns if r.received_ns is not None else fallback
            if recv is None:
                continue
            if not _is_sample(r):  # state stamped when it last changed, maybe hours ago: no clock
                state_only.add(r.switch)
                continue
            seen = newest.get(r.switch)
            if seen is None or r.time_ns > seen[0]:
                newest[r.switch] = (r.time_ns, recv)
        if not newest and not state_only:
            return 0
        offsets = {switch: self._offset(switch, t, recv) for switch, (t, recv) in newest.items()}
        for switch in state_only - offsets.keys():
            offsets[switch] = self._current(switch)
        bound = self.max_skew_ns
        replaced = 0
        for r in readings:
            recv = r.received_ns if r.received_ns is not None else fallback
            if recv is None:
                continue
            t = r.time_ns + offsets[r.switch]
            if not recv - bound <= t <= recv + bound:
                t = recv  # beyond the bound even so (old state, a batch across a clock step)
            if t != r.time_ns:
                r.time_ns = t
                self._clocks[r.switch].replaced += 1
                replaced += 1
        return replaced

    def _current(self, switch: str) -> int:
        """The switch's believed offset (0 while its own clock is used), for a batch without samples."""
        c = self._clocks.get(switch)
        if c is None:
            c = self._clocks[switch] = _Clock()
        return c.offset_ns if c.corrected else 0

    def skew_s(self, switch: str) -> float | None:
        """The switch's clock minus receive time (seconds, positive: ahead); None: never seen."""
        c = self._clocks.get(switch)
        return None if c is None else c.skew_ns / 1e9

    def replaced(self, switch: str) -> int:
        """Readings of ``switch`` whose timestamp was replaced."""
        c = self._clocks.get(switch)
        return 0 if c is None else c.replaced

    def corrected(self, switch: str) -> bool:
        """Whether the switch's timestamps are being replaced now."""
        c = self._clocks.get(switch)
        return c is not None and c.corrected

    def clocks(self) -> dict[str, SwitchClock]:
        """Every switch seen, by name."""
        return {
            name: SwitchClock(c.skew_ns / 1e9, c.corrected, c.replaced, c.learned) for name, c in self._clocks.items()
        }

    def _offset(self, switch: str, newest_ns: int, now_ns: int) -> int:
        """The offset for this batch of ``switch``, judged by its newest reading."""
        c = self._clocks.get(switch)
        if c is None:
            c = self._clocks[switch] = _Clock()
        for corrected, offset in reversed(c.candidates):
            if self._fits(corrected, offset, newest_ns, now_ns):
                self._believe(switch, c, corrected, offset, newest_ns, now_ns)
                return offset
        if self._fits(c.corrected, c.offset_ns, newest_ns, now_ns):
            c.candidates.clear()
            if not c.corrected:
                c.skew_ns = newest_ns - now_ns
            return c.offset_ns
        skew = newest_ns - now_ns
        proposal = (False, 0) if abs(skew) <= self.max_skew_ns else (True, -skew)
        # Two kept: a batch of old state right before or after a real change must not hide it.
        c.candidates = [*c.candidates[-1:], proposal]
        return proposal[1]

    def _fits(self, corrected: bool, offset_ns: int, newest_ns: int, now_ns: int) -> bool:
        if corrected:
            return abs(newest_ns + offset_ns - now_ns) <= self.tolerance_ns
        return abs(newest_ns - now_ns) <= self.max_skew_ns

    def _believe(self, switch: str, c: _Clock, corrected: bool, offset_ns: int, newest_ns: int, now_ns: int) -> None:
        """Two batches in a row showed the clock changed: make it the switch's."""
        bound = self.max_skew_ns / 1e9
        if corrected:
            level = logging.INFO if c.corrected or c.learned else logging.WARNING
            log.log(level, "%s: clock %+.1f s off ours (bound %.0f s): its timestamps are replaced by receive time",
                    switch, -offset_ns / 1e9, bound)  # fmt: skip
            c.learned += 1
            c.skew_ns = -offset_ns
        else:
            log.info("%s: clock within %.0f s of ours again: its timestamps are used again", switch, bound)
            c.skew_ns = newest_ns - now_ns
        c.corrected, c.offset_ns = corrected, offset_ns
        c.candidates.clear()
