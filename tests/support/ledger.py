"""The measuring instrument of the "storage never loses a row" fault tests.

:func:`compare` sets what the simulator sent (its sent-ledger, :mod:`simulator.ledger`) against
what ``port_counters`` holds, per (switch, port, sample time); :func:`assert_complete` turns the
report into a verdict with a short, readable failure message. Typical use::

    snap = sim.ledger.freeze()          # what was sent up to now
    report = await settle(pool, snap, interval_s=1.0, timeout_s=30)   # the collector catches up
    assert_complete(report, dropped=service_drops)

How times are matched: the collector stores ``datetime.fromtimestamp(ns / 1e9, tz=UTC)`` of a
sample's device time (collector/counters.py ``_utc``), i.e. the nearest microsecond *through a
float*, not ``ns // 1000``: about half of all nanosecond times land one microsecond above their
truncation, and near a half microsecond the float decides. :func:`stored_time` does exactly
the same (a unit test holds it to the collector's function). Two sent times that fall on one
stored microsecond can only be one row (the primary key): they are counted as ``collisions``
and expected once.

Rows are compared only where they are evidence: stored rows without any counter (state rows:
a status change the collector records on its own, collector/counters.py) are counted apart,
never as extras; and per switch, rows later than the newest sample the snapshot holds for that
switch (sent after the snapshot was taken) are counted as ``after_window``, not as extras (a
switch the snapshot has no sample of has no window: all its rows are extra).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from collector.records import COUNTER_FIELDS
from simulator.ledger import LedgerSnapshot

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)

#: The counter columns of ``port_counters``: a row with none of them set is a state row.
COUNTER_COLUMNS: tuple[str, ...] = COUNTER_FIELDS

_ROWS_SQL = f"""
SELECT switch, port, time, count(*) AS n, bool_or(num_nonnulls({", ".join(COUNTER_COLUMNS)}) > 0) AS counters
FROM port_counters WHERE switch = ANY($1::text[])
GROUP BY switch, port, time
"""

Key = tuple[str, str]


def stored_time(ns: int) -> datetime:
    """The ``time`` the collector stores for a sample stamped ``ns`` (see the module docstring)."""
    return datetime.fromtimestamp(ns / 1e9, tz=UTC)


def stored_us(ns: int) -> int:
    """:func:`stored_time` as integer microseconds since the epoch."""
    return as_us(stored_time(ns))


def as_us(when: datetime) -> int:
    """A stored ``timestamptz`` as integer microseconds since the epoch (exact)."""
    return (when - EPOCH) // _US


def _at(us: int) -> datetime:
    return EPOCH + us * _US


@dataclass(frozen=True, slots=True)
class PortReport:
    """One (switch, port): what was sent and what is stored (times in stored microseconds)."""

    switch: str
    port: str
    sent: int
    stored: int
    missing: tuple[datetime, ...] = ()
    extra: tuple[datetime, ...] = ()
    #: Stored times held by more than one row (the primary key forbids it; counted anyway).
    duplicates: int = 0
    #: The longest interval between consecutive stored samples, and the sample it starts at.
    longest_gap_s: float = 0.0
    gap_from: datetime | None = None

    @property
    def complete(self) -> bool:
        """Every sample sent is stored, nothing else, once."""
        return not (self.missing or self.extra or self.duplicates)


@dataclass(frozen=True, slots=True)
class LedgerReport:
    """The comparison over every (switch, port) the ledger or the table names."""

    interval_s: float
    ports: Mapping[Key, PortReport]
    #: Stored rows without counters (state rows), left out of the comparison.
    state_rows: int = 0
    #: Stored counter rows newer than the snapshot's newest sample of their switch.
    after_window: int = 0
    #: Sent times that share a stored microsecond with another sent time of their port.
    collisions: int = 0
    #: Sample times the simulator sent more than once (resubscribe dumps), from the ledger.
    resends: int = 0
    switches: frozenset[str] = field(default_factory=frozenset)

    @property
    def sent(self) -> int:
        return sum(p.sent for p in self.ports.values())

    @property
    def stored(self) -> int:
        return sum(p.stored for p in self.ports.values())

    @property
    def missing(self) -> int:
        return sum(len(p.missing) for p in self.ports.values())

    @property
    def extra(self) -> int:
        return sum(len(p.extra) for p in self.ports.values())

    @property
    def duplicates(self) -> int:
        return sum(p.duplicates for p in self.ports.values())

    def longest_gap(self) -> PortReport | None:
        """The port with the longest gap between stored samples (None: nothing stored)."""
        return max(self.ports.values(), key=lambda p: p.longest_gap_s, default=None)

    def summary(self) -> str:
        """One line of totals."""
        worst = self.longest_gap()
        gap = f"{worst.longest_gap_s:.2f}s on {worst.switch} {worst.port}" if worst else "n/a"
        return (
            f"{len(self.ports)} ports on {len(self.switches)} switches: sent {self.sent}, stored {self.stored}, "
            f"missing {self.missing}, extra {self.extra}, duplicates {self.duplicates}, "
            f"longest gap {gap} (interval {self.interval_s:g}s); state rows {self.state_rows}, "
            f"after window {self.after_window}, collisions {self.collisions}, resends {self.resends}"
        )


Samples = LedgerSnapshot | Mapping[Key, Sequence[int]]


async def compare(
    pool: Any, ledger_samples: Samples, *, interval_s: float, switches: Iterable[str] | None = None
) -> LedgerReport:
    """Read ``port_counters`` for the ledger's switches (or ``switches``) and set it against the ledger.

    ``pool`` is anything with asyncpg's ``fetch`` (a pool or a connection); ``ledger_samples`` a
    :class:`~simulator.ledger.LedgerSnapshot` or ``RunningSim.ledger.samples()``.
    """
    samples: Mapping[Key, Sequence[int]] = (
        ledger_samples.samples if isinstance(ledger_samples, LedgerSnapshot) else ledger_samples
    )
    resends = ledger_samples.resent if isinstance(ledger_samples, LedgerSnapshot) else 0
    wanted = frozenset(switches) if switches is not None else frozenset(sw for sw, _ in samples)
    sent: dict[Key, set[int]] = {}
    collisions = 0
    for key, times in samples.items():
        if key[0] not in wanted:
            continue
        micros = {stored_us(t) for t in times}
        collisions += len(set(times)) - len(micros)
        sent[key] = micros
    cutoff: dict[str, int] = {}  # a switch the ledger never heard from has none: its rows are all extra
    for (sw, _), micros in sent.items():
        if micros:
            cutoff[sw] = max(cutoff.get(sw, 0), max(micros))
    stored: dict[Key, dict[int, int]] = {}
    state_rows = after_window = 0
    for row in await pool.fetch(_ROWS_SQL, sorted(wanted)):
        if not row["counters"]:
            state_rows += row["n"]
            continue
        us = as_us(row["time"])
        if us > cutoff.get(row["switch"], us):
            after_window += row["n"]
            continue
        stored.setdefault((row["switch"], row["port"]), {})[us] = row["n"]
    ports = {key: _port(key, sent.get(key, set()), stored.get(key, {})) for key in sorted(set(sent) | set(stored))}
    return LedgerReport(interval_s, ports, state_rows, after_window, collisions, resends, wanted)


async def settle(
    pool: Any,
    ledger_samples: Samples,
    *,
    interval_s: float,
    timeout_s: float,
    poll_s: float = 0.25,
    switches: Iterable[str] | None = None,
    settled: Callable[[LedgerReport], bool] | None = None,
) -> LedgerReport:
    """:func:`compare` until nothing is missing (or ``settled(report)``) or ``timeout_s`` passed;
    the last report.

    For after the snapshot: what was sent before it may still be on its way (a socket, the
    writer's buffer, the spool replaying after an outage). A test that expects samples to stay
    missing (a quarantined batch, a killed process's buffer) says when it is done waiting with
    ``settled``: otherwise it would wait out the whole ``timeout_s`` for samples that never come.
    """
    done = settled or (lambda r: r.missing == 0)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        report = await compare(pool, ledger_samples, interval_s=interval_s, switches=switches)
        if done(report) or loop.time() >= deadline:
            return report
        await asyncio.sleep(poll_s)


def _port(key: Key, sent: set[int], stored: dict[int, int]) -> PortReport:
    times = sorted(stored)
    gap_us, gap_at = 0, None
    for a, b in itertools.pairwise(times):
        if b - a > gap_us:
            gap_us, gap_at = b - a, a
    return PortReport(
        key[0],
        key[1],
        sent=len(sent),
        stored=len(stored),
        missing=tuple(_at(t) for t in sorted(sent - stored.keys())),
        extra=tuple(_at(t) for t in sorted(stored.keys() - sent)),
        duplicates=sum(1 for n in stored.values() if n > 1),
        longest_gap_s=gap_us / 1e6,
        gap_from=None if gap_at is None else _at(gap_at),
    )


def assert_complete(
    report: LedgerReport,
    dropped: int = 0,
    max_gap_intervals: float | None = 2.5,
    *,
    show_ports: int = 5,
    show_times: int = 3,
) -> None:
    """Raise AssertionError unless every sample sent is stored exactly once (or counted as dropped).

    ``dropped``: samples the collector reports it dropped (spool drops, rejected rows); more
    missing samples than that is a loss. Nothing stored may be extra or duplicated. On every port
    that misses nothing, no two consecutive stored samples may be more than ``max_gap_intervals``
    sampling intervals apart (None: no gap check): a gap there is a sample never sent, i.e. a
    stream that was down.
    """
    gaps: list[PortReport] = []
    if max_gap_intervals is not None:
        limit = max_gap_intervals * report.interval_s
        gaps = [p for p in report.ports.values() if not p.missing and p.longest_gap_s > limit]
    problems = _problems(report, dropped, gaps, max_gap_intervals)
    if problems:
        lines = ["; ".join(problems), report.summary(), *_details(report, gaps, show_ports, show_times)]
        raise AssertionError("\n".join(lines))


def _problems(report: LedgerReport, dropped: int, gaps: list[PortReport], max_gap: float | None) -> list[str]:
    problems: list[str] = []
    if report.sent == 0:
        problems.append("the ledger holds no sample: nothing was compared")
    if report.missing > dropped:
        problems.append(f"{report.missing} samples missing, {dropped} counted as dropped")
    if report.extra:
        problems.append(f"{report.extra} stored samples were never sent")
    if report.duplicates:
        problems.append(f"{report.duplicates} sample times stored more than once")
    if gaps and max_gap is not None:
        problems.append(f"{len(gaps)} ports have a gap over {max_gap:g} intervals ({max_gap * report.interval_s:g}s)")
    return problems


def _details(report: LedgerReport, gaps: list[PortReport], show_ports: int, show_times: int) -> list[str]:
    """The worst ports, a line each: their first misses and extras, then the longest gaps."""
    lines: list[str] = []
    bad = [p for p in report.ports.values() if not p.complete]
    for p in sorted(bad, key=lambda p: -(len(p.missing) + len(p.extra) + p.duplicates))[:show_ports]:
        parts = [f"  {p.switch} {p.port}: sent {p.sent}, stored {p.stored}"]
        if p.missing:
            parts.append(f"missing {len(p.missing)} (first {_times(p.missing, show_times)})")
        if p.extra:
            parts.append(f"extra {len(p.extra)} (first {_times(p.extra, show_times)})")
        if p.duplicates:
            parts.append(f"duplicated {p.duplicates}")
        lines.append(", ".join(parts))
    if len(bad) > show_ports:
        lines.append(f"  ... and {len(bad) - show_ports} more ports")
    for p in sorted(gaps, key=lambda p: -p.longest_gap_s)[:show_ports]:
        start = p.gap_from.isoformat() if p.gap_from else "?"
        lines.append(f"  {p.switch} {p.port}: gap of {p.longest_gap_s:.3f}s after {start}")
    return lines


def _times(times: Sequence[datetime], n: int) -> str:
    shown = ", ".join(t.strftime("%H:%M:%S.%f") for t in times[:n])
    return shown + (", ..." if len(times) > n else "")
