"""The collector's heartbeat: every few seconds, this process tells the database how it is doing.

The analyzer reads the row (:mod:`analyzer.collection`) to tell a monitoring failure from a fabric
failure: a collector that is stopped (SIGSTOP), wedged or replaying its spool makes every switch
it collects look silent, and that must not read as every switch failing.

The row (``collector_heartbeats``, written by :mod:`store.heartbeats`) is upserted every
``max(1 s, min(5 s, interval/2))``. Its ``watermark`` is the newest sample time the
``port_counters`` writer has *committed*, not what was read: a wedged writer shows a stale
watermark while this task still runs. A beat that fails (the database is down, the pool is busy)
is skipped, logged at debug and counted; it never raises into the service and never waits on the
pipeline. A clean stop writes ``stopped_at``, so a graceful stop is not a silent collector; a crash
writes nothing more, and the row goes silent.

With each beat the switches' clocks as the :class:`~collector.clock.ClockGuard` sees them (skew,
whether their timestamps are replaced, how many were) go to ``switch_clocks`` (:mod:`store.clocks`,
migration 011), in a statement of their own after the heartbeat row: a failure there (the
migration not applied yet) is logged once and counted (``clock_errors``), and never costs the
heartbeat its row (a connection and a timeout of its own).

``resumed_at`` is when collection last (re)started: ``started_at``, then each time this task finds
that it was frozen (two beats further apart than ``2 x period + 1 s``: SIGSTOP, a starved loop)
or that the watermark moves again after standing still for ``2 x interval + 1 s`` (a writer that
was wedged, a database that was away). After a stall the switches need up to an interval to report
again, and until they have, their silence is the collector's, not theirs.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from collector.clock import ClockGuard
from collector.config import CollectorConfig
from collector.pipeline import Pipeline
from fabric.tasks import stop_task
from store import clocks as clock_rows
from store.clocks import SwitchClockRow
from store.db import UNAVAILABLE_ERRORS, Pool, PostgresError
from store.heartbeats import Heartbeat, collector_id, prune, upsert

log = logging.getLogger(__name__)

#: A beat that meets one of these is skipped: the database is away, or it or the pool is too slow.
_SKIPPED: tuple[type[BaseException], ...] = (*UNAVAILABLE_ERRORS, TimeoutError)


def heartbeat_period(interval_s: float) -> float:
    """Seconds between beats: ``max(1 s, min(5 s, interval/2))``."""
    return max(1.0, min(5.0, interval_s / 2))


def sampling_interval(config: CollectorConfig, protocols: Iterable[str]) -> float:
    """The slowest sampling interval among ``protocols`` (the analyzer's freshness follows it too)."""
    intervals = {"gnmi": config.gnmi_interval_s, "snmp": config.snmp_interval_s}
    return max((intervals[p] for p in protocols if p in intervals), default=config.gnmi_interval_s)


@dataclass(slots=True)
class HeartbeatStats:
    """For /metrics."""

    written: int = 0
    skipped: int = 0
    #: Unix time of the last beat written.
    last_written: float | None = None
    last_error: str | None = None
    #: Beats whose ``switch_clocks`` rows were not written (the heartbeat row itself was).
    clock_errors: int = 0


class HeartbeatTask:
    """Upserts this process's ``collector_heartbeats`` row on a timer; owned by the collector service."""

    def __init__(
        self,
        pool: Pool,
        pipeline: Pipeline,
        *,
        switches: Callable[[], Iterable[str]],
        interval_s: float,
        shard: tuple[int, int] | None = None,
        collector: str | None = None,
        period_s: float | None = None,
        clock: ClockGuard | None = None,
    ) -> None:
        self.pool = pool
        self.pipeline = pipeline
        #: Whose switch clocks each beat writes to ``switch_clocks`` (None: none).
        self.clock = clock
        self.collector = collector or collector_id(os.getpid(), shard)
        self.shard = f"{shard[0]}/{shard[1]}" if shard else None
        self.interval_s = interval_s
        self.period_s = period_s if period_s is not None else heartbeat_period(interval_s)
        self.stats = HeartbeatStats()
        self.started_at = datetime.now(UTC)
        self._switches = switches
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self.resumed_at = self.started_at
        self._pruned = False
        self._warned = False
        self._clock_warned = False
        self._clocks_pruned = False
        self._last_beat: float | None = None
        self._seen_watermark: datetime | None = None
        self._watermark_moved = time.monotonic()

    def snapshot(self, now: datetime, *, stopped: bool = False) -> Heartbeat:
        """The row as of ``now``: the committed watermark and what waits in buffers and spools."""
        spool = sum(w.spool.stats.rows for w in self.pipeline.writers if w.spool is not None)
        return Heartbeat(
            collector=self.collector,
            shard=self.shard,
            started_at=self.started_at,
            heartbeat_at=now,
            watermark=self.pipeline.ports_writer.watermark,
            backlog_rows=sum(w.pending for w in self.pipeline.writers) + spool,
            spool_rows=spool,
            replaying=spool > 0,
            switches=tuple(sorted(set(self._switches()))),
            interval_s=self.interval_s,
            resumed_at=self.resumed_at,
            stopped_at=now if stopped else None,
        )

    def clock_rows(self, now: datetime) -> list[SwitchClockRow]:
        """The ``switch_clocks`` rows as of ``now``: every switch the clock guard has seen."""
        if self.clock is None:
            return []
        return [
            SwitchClockRow(switch, self.collector, c.skew_s, c.corrected, c.replaced, now)
            for switch, c in sorted(self.clock.clocks().items())
        ]

    def start(self) -> None:
        """Start beating (idempotent); the first beat is now."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="collector-heartbeat")

    async def stop(self, *, clean: bool = True) -> None:
        """Stop the timer (never mid-write); on a clean stop, write the final row with ``stopped_at``."""
        if self._task is not None:
            async with self._lock:
                self._task.cancel()  # never mid-write
            await stop_task(self._task, "the collector heartbeat", log)
            self._task = None
        if clean:
            await self.beat(stopped=True)

    async def beat(self, *, stopped: bool = False) -> bool:
        """Write the row once; False (counted, logged at debug) when the database did not take it."""
        async with self._lock:
            now = datetime.now(UTC)
            if not stopped:  # the drain before a stop is no stall
                self._note_stalls(now)
            row = self.snapshot(now, stopped=stopped)
            try:
                async with asyncio.timeout(self.period_s), self.pool.acquire() as conn:
                    if not self._pruned:
                        await prune(conn, now)
                        self._pruned = True
                    await upsert(conn, row)
            except _SKIPPED as exc:
                return self._skipped(exc, logging.DEBUG)
            except PostgresError as exc:  # e.g. migration 009 not applied: say so once, keep collecting
                level, self._warned = (logging.DEBUG if self._warned else logging.WARNING), True
                return self._skipped(exc, level)
            self.stats.written += 1
            self.stats.last_written = time.time()
            self.stats.last_error = None
            await self._write_clocks(now)
            return True

    async def _write_clocks(self, now: datetime) -> None:
        """The switches' clocks, after the heartbeat row (a connection and a timeout of their own):
        what goes wrong here stays here."""
        rows = self.clock_rows(now)
        if not rows:
            return
        try:
            async with asyncio.timeout(self.period_s), self.pool.acquire() as conn:
                if not self._clocks_pruned:
                    await clock_rows.prune(conn, now)
                    self._clocks_pruned = True
                await clock_rows.upsert(conn, rows)
        except (*_SKIPPED, PostgresError) as exc:  # e.g. migration 011 not applied yet
            self.stats.clock_errors += 1
            level, self._clock_warned = (logging.DEBUG if self._clock_warned else logging.WARNING), True
            log.log(level, "switch clocks of %s not written: %s: %s", self.collector, type(exc).__name__, exc)

    def _note_stalls(self, now: datetime) -> None:
        """Move ``resumed_at`` to ``now`` when this beat ends a freeze or a pause in committing."""
        mono = time.monotonic()
        if self._last_beat is not None and mono - self._last_beat > 2 * self.period_s + 1.0:
            log.warning("%s: resumed after %.0f s frozen", self.collector, mono - self._last_beat)
            self.resumed_at = now
        self._last_beat = mono
        watermark = self.pipeline.ports_writer.watermark
        if watermark != self._seen_watermark:
            if mono - self._watermark_moved > 2 * self.interval_s + 1.0:  # the first commit, too, if it was late
                log.info("%s: committing again after %.0f s", self.collector, mono - self._watermark_moved)
                self.resumed_at = now
            self._seen_watermark, self._watermark_moved = watermark, mono

    def _skipped(self, exc: BaseException, level: int) -> bool:
        self.stats.skipped += 1
        self.stats.last_error = f"{type(exc).__name__}: {exc}"
        log.log(level, "heartbeat of %s skipped: %s", self.collector, self.stats.last_error)
        return False

    async def _run(self) -> None:
        while True:
            try:
                await self.beat()
            except Exception:  # a bug here must not end the collector; the row going silent says enough
                self.stats.skipped += 1
                log.exception("heartbeat of %s failed", self.collector)
            await asyncio.sleep(self.period_s)
