"""Whether fabricmon's own collection works: the collectors' heartbeats (migration 009), judged.

A collector that is stopped (SIGSTOP), wedged, or replaying its spool after a database outage makes
every switch it collects look silent. That is a monitoring failure and must never read as every
switch failing: :meth:`CollectionState.unobserved` names the switches whose silence says nothing
about the fabric, and :attr:`CollectionState.broken` says collection itself needs attention.

A live (not cleanly stopped) collector is **healthy** when all of these hold:

* its heartbeat is fresh: ``heartbeat_age_s <= stale_after_s`` (else "silent for 42 s");
* it is not replaying spooled rows (those are written before anything newer);
* its ingest is not behind: it committed a sample newer than ``stale_after_s`` ago
  (``ingest_lag_s < stale_after_s``; "nothing written since start" when it never has);
* it is not catching up: it (re)started collecting (``resumed_at``: its start, the end of a freeze
  or of a pause in committing) at least ``stale_after_s`` ago, the grace the freshness check gives
  a connecting switch. Right after a stall the first switches to report move the watermark while
  the others have not had their turn yet; until they have, their silence is not theirs.

The ingest limit is the freshness check's own limit (``stale_intervals x`` the sampling
interval), with no slack by default. The watermark is the newest sample the collector committed,
so no switch it collects has a newer sample: the moment all its switches turn stale by data, it is
already "behind". Any slack would open a window in which a stopped or wedged collector's switches
are all stale while it still looks healthy, which is the failure this module exists to prevent. The
price is a collector reported behind a little early when ``flush_interval_s`` + the heartbeat
period reach two sampling intervals (only at 1 s sampling with a 1 s flush); pass
``ingest_slack_s`` to trade the window back.

A collector's switches do not all go stale at once, though: their newest samples are spread over
about one sampling interval, so when a collector stops, the switch sampled first turns stale up to
an interval before the collector is "behind". :meth:`CollectionState.explains` closes that gap per
switch: a stale switch whose newest sample is within ``1.5 x interval + 1 s`` of its collector's
watermark fell silent when the collector stopped committing, not before. A switch that really died
falls further behind a healthy collector's watermark every second, and is told apart by the time
it turns stale (at 10 s sampling), or within a second or so of it (at 1 s).

Rows that do not describe a current collector are left out: rows of collectors that stopped
cleanly over an hour ago, and *superseded* rows, a silent collector whose every switch a healthy
collector that beat after it now collects (a crashed process that was restarted under a new
pid, or whose shards a survivor took over). ``known`` is False when the table has no rows at all
(collectors predating heartbeats, tests that write samples directly): judge by data only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from analyzer.links import human_s
from store.db import Connection
from store.heartbeats import Heartbeat

#: Rows of collectors that stopped cleanly longer ago than this are ignored.
STOPPED_KEEP = timedelta(hours=1)
#: A switch's newest sample trailing its collector's watermark by at most this many sampling
#: intervals (+ :data:`EXPLAIN_SLACK_S`) stopped with the collector (:meth:`CollectionState.explains`).
EXPLAIN_INTERVALS = 1.5
EXPLAIN_SLACK_S = 1.0


@dataclass(frozen=True, slots=True)
class CollectorState:
    """One collector (process and shard) as the analyzer sees it at ``now``."""

    collector: str
    shard: str | None
    switches: frozenset[str]
    #: now - heartbeat_at (never negative).
    heartbeat_age_s: float
    #: now - watermark (never negative); None: nothing committed yet.
    ingest_lag_s: float | None
    backlog_rows: int
    replaying: bool
    #: stopped_at is set (a clean stop).
    stopped: bool
    #: heartbeat fresh, ingest not behind, not replaying, not catching up (False once stopped).
    healthy: bool
    #: Why not healthy, for a person: "silent for 42 s", "ingest 1 min 35 s behind (3,200 rows
    #: waiting)", "replaying 12,000 spooled rows", "starting (collecting for 2 s)", "catching up
    #: (resumed 2 s ago)", "stopped 5 min ago"; None when healthy.
    problem: str | None
    spool_rows: int = 0
    interval_s: float = 0.0
    watermark: datetime | None = None
    #: Unhealthy only because it (re)started less than ``stale_after_s`` ago ("starting",
    #: "catching up"): its switches are unobserved, but nothing may be wrong with collection.
    catching_up: bool = False


@dataclass(frozen=True, slots=True)
class CollectionState:
    """Every current collector, and which switches nobody healthy is watching."""

    collectors: tuple[CollectorState, ...]
    #: False when the table has no rows at all: judge by data only.
    known: bool
    _by_switch: dict[str, CollectorState] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        best: dict[str, CollectorState] = {}
        for c in self.collectors:
            if c.stopped:
                continue
            for s in c.switches:
                if s not in best or _rank(c) > _rank(best[s]):
                    best[s] = c
        object.__setattr__(self, "_by_switch", best)

    def collector_of(self, switch: str) -> CollectorState | None:
        """The live collector assigned ``switch``: a healthy one if any, else the most recently heard."""
        return self._by_switch.get(switch)

    def unobserved(self, among: Iterable[str] | None = None) -> frozenset[str]:
        """Switches whose collector is unhealthy, or (when ``known``) that no live collector is assigned.

        Without ``among``: of the switches any collector lists. With it (e.g. the fabric's switches):
        of those only, which also names switches no collector lists at all (none when not ``known``).
        """
        if among is None:
            names: set[str] = set()
            for c in self.collectors:
                names |= c.switches
        else:
            names = set(among)
        out = set()
        for s in names:
            owner = self._by_switch.get(s)
            if (owner is None and self.known) or (owner is not None and not owner.healthy):
                out.add(s)
        return frozenset(out)

    def explains(self, switch: str, last_seen: datetime | None) -> bool:
        """Whether ``switch`` looking stale (newest sample ``last_seen``) is collection's doing.

        True when it is :meth:`unobserved`, or when its newest sample is within
        ``EXPLAIN_INTERVALS x interval + EXPLAIN_SLACK_S`` of what its (healthy) collector last
        committed: it went quiet together with its collector, which the collector-level rules
        notice up to one interval later. False when not ``known``, or when the switch was never
        heard from while its collector is healthy.
        """
        owner = self._by_switch.get(switch)
        if owner is None:
            return self.known
        if not owner.healthy:
            return True
        if owner.watermark is None or last_seen is None:
            return False
        trail = (owner.watermark - last_seen).total_seconds()
        return trail <= EXPLAIN_INTERVALS * owner.interval_s + EXPLAIN_SLACK_S

    @property
    def live(self) -> tuple[CollectorState, ...]:
        """The collectors not stopped cleanly."""
        return tuple(c for c in self.collectors if not c.stopped)

    @property
    def broken(self) -> bool:
        """Any live collector is unhealthy."""
        return any(not c.healthy for c in self.live)


def _rank(c: CollectorState) -> tuple[bool, float]:
    return (c.healthy, -c.heartbeat_age_s)


def _age(now: datetime, t: datetime) -> float:
    return max(0.0, (now - t).total_seconds())


def judge(hb: Heartbeat, now: datetime, stale_after_s: float, ingest_slack_s: float = 0.0) -> CollectorState:
    """One row's state at ``now`` (see the module docstring for the rules)."""
    age = _age(now, hb.heartbeat_at)
    lag = None if hb.watermark is None else _age(now, hb.watermark)
    stopped = hb.stopped_at is not None
    problems: list[str] = []
    if stopped:
        assert hb.stopped_at is not None
        problems.append(f"stopped {human_s(_age(now, hb.stopped_at))} ago")
    elif age > stale_after_s:
        problems.append(f"silent for {human_s(age)}")
    else:
        if hb.replaying:
            problems.append(f"replaying {hb.spool_rows:,} spooled rows")
        up_s = _age(now, hb.started_at)
        if lag is None:
            if hb.switches and up_s >= stale_after_s:
                problems.append(f"nothing written since start {human_s(up_s)} ago")
        elif lag >= stale_after_s + ingest_slack_s:
            waiting = f"{hb.backlog_rows:,} rows waiting" if hb.backlog_rows else "nothing waiting: nothing received"
            problems.append(f"ingest {human_s(lag)} behind ({waiting})")
    resumed = max(hb.resumed_at, hb.started_at)
    resumed_s = _age(now, resumed)
    catching_up = not problems and not stopped and resumed_s < stale_after_s and bool(hb.switches)
    if catching_up:
        problems.append(
            f"starting (collecting for {human_s(resumed_s)})"
            if resumed == hb.started_at
            else f"catching up (resumed {human_s(resumed_s)} ago)"
        )
    return CollectorState(
        collector=hb.collector,
        shard=hb.shard,
        switches=frozenset(hb.switches),
        heartbeat_age_s=age,
        ingest_lag_s=lag,
        backlog_rows=hb.backlog_rows,
        replaying=hb.replaying,
        stopped=stopped,
        healthy=not problems,
        problem="; ".join(problems) or None,
        spool_rows=hb.spool_rows,
        interval_s=hb.interval_s,
        watermark=hb.watermark,
        catching_up=catching_up,
    )


def collection_state(
    heartbeats: Sequence[Heartbeat],
    now: datetime,
    stale_after_s: float,
    *,
    known: bool | None = None,
    ingest_slack_s: float = 0.0,
) -> CollectionState:
    """The collection state from the table's rows (pure; ``known`` defaults to "there are rows")."""
    rows = [hb for hb in heartbeats if hb.stopped_at is None or now - hb.stopped_at <= STOPPED_KEEP]
    states = {hb.collector: judge(hb, now, stale_after_s, ingest_slack_s) for hb in rows}
    healthy = [(hb, states[hb.collector]) for hb in rows if states[hb.collector].healthy]

    def superseded(hb: Heartbeat) -> bool:
        if hb.stopped_at is not None or _age(now, hb.heartbeat_at) <= stale_after_s:
            return False
        later = [s for other, s in healthy if other.collector != hb.collector and other.heartbeat_at > hb.heartbeat_at]
        covered: set[str] = set()
        for s in later:
            covered |= s.switches
        return bool(later) and covered.issuperset(hb.switches)

    kept = sorted((states[hb.collector] for hb in rows if not superseded(hb)), key=lambda c: c.collector)
    return CollectionState(tuple(kept), bool(heartbeats) if known is None else known)


_SQL = """
SELECT k.known, h.*
FROM (SELECT EXISTS (SELECT 1 FROM collector_heartbeats) AS known) k
LEFT JOIN collector_heartbeats h ON h.stopped_at IS NULL OR h.stopped_at > $1
"""


async def read_collection(
    conn: Connection, now: datetime, stale_after_s: float, *, ingest_slack_s: float = 0.0
) -> CollectionState:
    """The collectors' state at ``now``; ``stale_after_s`` is the analyzer's freshness limit
    (``thresholds.stale_intervals x`` the sampling interval, as :func:`analyzer.stability.check_freshness`)."""
    rows = await conn.fetch(_SQL, now - STOPPED_KEEP)
    known = bool(rows and rows[0]["known"])
    beats = [Heartbeat.from_record(r) for r in rows if r["collector"] is not None]
    return collection_state(beats, now, stale_after_s, known=known, ingest_slack_s=ingest_slack_s)
