"""The collectors' pipeline: readings → clocks bounded → counter hygiene → batched COPY writers (→ spool).

:class:`Pipeline` is the :class:`~collector.records.Sink` every protocol collector writes into.
``put_ports`` runs counter hygiene inline and hands rows to one :class:`~store.writer.BatchWriter`
per table; a writer's bounded buffer is the queue (``put`` waits when it is full: back-pressure
toward the gNMI streams and SNMP polls, never a silent drop), and its spool takes batches to
disk while the database is away. State that is "latest wins" (LLDP tables, reachability,
unknown ports) is kept in memory and written by one supervised housekeeping task
(:func:`~fabric.supervise.supervise`), so an outage delays it but never loses the final state.

Housekeeping writes through the tables' owners (:mod:`store.inventory`, :mod:`store.lldp`). Text
the database cannot store (NUL, lone surrogates) is cleaned when it arrives
(:func:`store.text.clean_text`). A round's writes are judged by :mod:`store.sqlstate`: a port's
LLDP table or a discovered port the database refuses is found by halving the round in savepoints,
then rejected alone, counted and dropped, never retried; when the database cannot take writes
now, everything stays pending for the next round.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from collector.clock import ClockGuard
from collector.counters import PFC_HEARTBEAT_S, CounterTracker
from collector.records import LldpReading, PortReading, TargetState
from fabric.model import Fabric
from fabric.supervise import TaskHealth, supervise
from fabric.tasks import stop_task
from store.config import WriterConfig
from store.db import UNAVAILABLE_ERRORS, Connection, Pool, PostgresError
from store.dom import COLUMNS as DOM_COLUMNS
from store.dom import DomSample
from store.fec import COLUMNS as FEC_COLUMNS
from store.fec import FecSample, fec_rows
from store.inventory import DiscoveredPort, record_discovered
from store.lldp import Neighbor, NeighborTable, replace_neighbors
from store.records import LinkEvent, PfcSample, PortSample, Reachability
from store.shard_leases import Fence, Fenced
from store.spool import Spool, prepare_directory
from store.sqlstate import classify, is_row_error
from store.text import clean_text, is_clean
from store.writer import BatchWriter

log = logging.getLogger(__name__)

_REACHABLE = {TargetState.CONNECTED, TargetState.STALE}

T = TypeVar("T")

#: How long ``close`` waits for a housekeeping round in progress before cutting it off.
_CLOSE_WAIT_S = 10.0


@dataclass(slots=True)
class TargetStatus:
    """What the pipeline last heard about a switch."""

    state: TargetState = TargetState.CONNECTING
    detail: str | None = None
    since: float = field(default_factory=time.time)
    last_seen: float | None = None


@dataclass(slots=True)
class PipelineStats:
    """For /metrics."""

    readings: int = 0
    lldp_tables: int = 0
    invalid: dict[str, int] = field(default_factory=dict)
    unknown_ports: int = 0
    #: Text values stored cleaned (NUL removed, surrogates replaced) in unknown ports and LLDP tables.
    texts_cleaned: int = 0
    #: Unknown ports and LLDP tables the database refused on their own: dropped, not retried.
    state_rows_rejected: int = 0
    #: Housekeeping rounds the database could not take (everything kept for the next round).
    state_writes_deferred: int = 0


class Pipeline:
    """The Sink: owns the tracker, the writers and the housekeeping task."""

    def __init__(
        self,
        pool: Pool,
        fabric: Fabric,
        config: WriterConfig | None = None,
        *,
        spool_dir: Path | None = None,
        housekeeping_s: float = 1.0,
        pfc_heartbeat_s: float = PFC_HEARTBEAT_S,
        clock: ClockGuard | None = None,
        fence: Fence | None = None,
    ) -> None:
        self.pool = pool
        #: The shard lease every write must still hold (``shard: auto``); None: unfenced.
        self.fence = fence
        #: Bounds device timestamps (``collector.max_clock_skew_s``) before anything reads them. The
        #: collector always has one; without one (labs and benchmarks writing recorded or synthetic
        #: times), timestamps are stored as given.
        self.clock = clock
        self.config = config or WriterConfig()
        self.tracker = CounterTracker(pfc_heartbeat_s)
        self.stats = PipelineStats()
        self.targets: dict[str, TargetStatus] = {}
        self._known_ports = {(p.switch, p.name) for p in fabric.all_ports()}
        self._known_switches = set(fabric.switches)
        self._unknown_seen: set[tuple[str, str]] = set()
        self._unknown_pending: list[DiscoveredPort] = []
        #: The latest table per (cleaned) port, not yet written.
        self._lldp_dirty: dict[tuple[str, str], NeighborTable] = {}
        self._housekeeping_s = housekeeping_s
        self._task: asyncio.Task[None] | None = None
        #: The housekeeping task, for /metrics.
        self.housekeeping_health = TaskHealth("pipeline-housekeeping")
        #: Held by a round of housekeeping, so ``close`` never cancels one mid-write.
        self._state_lock = asyncio.Lock()
        #: Housekeeping rounds in a row the database could not take (0: writes work).
        self._state_failures = 0
        #: Ports already logged about (cleaned text; a rejected LLDP table until one lands again).
        self._cleaned_logged: set[tuple[str, str]] = set()
        self._rejected_logged: set[tuple[str, str]] = set()

        if spool_dir is not None:
            prepare_directory(spool_dir)  # 0700, ours: whoever writes it decides what we replay

        def writer(table: str, columns: Sequence[str]) -> BatchWriter:
            spool = None
            if spool_dir is not None:
                limit = int(self.config.spool_max_mb * 1024 * 1024)
                spool = Spool(spool_dir / table, limit, quarantine=spool_dir / "quarantine" / table)
            return BatchWriter(pool, table, columns, self.config, spool=spool, fence=fence)

        self.ports_writer = writer("port_counters", PortSample._fields)
        self.pfc_writer = writer("pfc_counters", PfcSample._fields)
        self.events_writer = writer("link_events", LinkEvent._fields)
        self.reach_writer = writer("switch_reachability", Reachability._fields)
        #: Link health (collector/gnmi_optics.py): one writer per table, rows as store/fec.py and
        #: store/dom.py lay them out.
        self.fec_writer = writer("port_fec", FEC_COLUMNS)
        self.dom_writer = writer("transceiver_dom", DOM_COLUMNS)
        self.writers = [
            self.ports_writer, self.pfc_writer, self.events_writer, self.reach_writer, self.fec_writer, self.dom_writer,
        ]  # fmt: skip
        self._reach_pending: list[Reachability] = []

    # --- lifecycle ------------------------------------------------------------------------

    def tasks(self) -> list[TaskHealth]:
        """The supervised background tasks: each writer's flush timer, and housekeeping."""
        return [*(w.health for w in self.writers), self.housekeeping_health]

    def start(self) -> None:
        """Start the writers' timers and the housekeeping task."""
        for w in self.writers:
            w.start()
        if self._task is None:
            self._task = asyncio.create_task(self._housekeeping(), name="pipeline-housekeeping")

    async def close(self) -> None:
        """Write what is left (spooling it if the database is away); never raises."""
        if self._task is not None:
            # Not mid-round if it can be helped: a COPY cut off leaves its connection unusable.
            idle = False
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_CLOSE_WAIT_S):
                    idle = await self._state_lock.acquire()
            await stop_task(self._task, "the pipeline's housekeeping", log)
            self._task = None
            if idle:
                self._state_lock.release()
        try:
            await self._flush_state()
        except Exception as exc:  # shutdown must finish
            log.error("writing collector state at shutdown failed: %s", exc, exc_info=exc)
        if self._unknown_pending or self._lldp_dirty:
            log.error(
                "%d unknown ports and %d LLDP tables not written at shutdown",
                len(self._unknown_pending), len(self._lldp_dirty),
            )  # fmt: skip
        for w in self.writers:
            try:
                await w.close()
            except UNAVAILABLE_ERRORS as exc:  # no spool configured: the writer counted what is lost
                log.error("%s: not written at shutdown (no spool configured): %s", w.table, exc)
            except Exception as exc:  # shutdown must finish; what the spool takes is not lost
                lost = w.spool_pending()
                log.error("%s: closing failed (%s); %d rows not saved", w.table, exc, lost)

    # --- Sink -----------------------------------------------------------------------------

    async def put_ports(self, readings: Sequence[PortReading]) -> None:
        """Rates, resets and events for each reading, then into the writers (may wait)."""
        if self.clock is not None:
            self.clock.correct(readings)
        ports: list[PortSample] = []
        pfc: list[PfcSample] = []
        events: list[LinkEvent] = []
        now = time.time()
        for r in readings:
            if not (is_clean(r.port) and is_clean(r.switch)):  # a NUL-padded name must match the inventory's
                r.switch, r.port = self._clean(r.switch), self._clean(r.port)
                self._log_cleaned(r.switch, r.port, "the interface name")
            out = self.tracker.ingest(r)
            if out.port is not None:
                ports.append(out.port)
            pfc.extend(out.pfc)
            events.extend(out.events)
            key = (r.switch, r.port)
            if key not in self._known_ports and key not in self._unknown_seen:
                self._unknown_seen.add(key)
                self._discovered(r)
            status = self.targets.get(r.switch)
            if status is not None:
                status.last_seen = now
        self.stats.readings += len(readings)
        if ports:
            await self.ports_writer.put(ports)
        if pfc:
            await self.pfc_writer.put(pfc)
        if events:
            await self.events_writer.put(events)

    async def put_optics(self, fec: Sequence[FecSample], dom: Sequence[DomSample]) -> None:
        """Link-health samples (times bounded by their decoder) into their writers (may wait)."""
        if fec:
            await self.fec_writer.put(fec_rows(fec))
        if dom:
            await self.dom_writer.put(dom)

    async def put_dom(self, samples: Sequence[DomSample]) -> None:
        """Transceiver DOM alone (the SNMP collector's :class:`~collector.records.DomSink`): the same writer."""
        if samples:
            await self.dom_writer.put(samples)

    async def put_lldp(self, readings: Sequence[LldpReading]) -> None:
        """Keep the latest table per port; housekeeping writes it."""
        if self.clock is not None:
            self.clock.correct(readings)
        for r in readings:
            table = self._neighbor_table(r)
            self._lldp_dirty[(table.switch, table.port)] = table
        self.stats.lldp_tables += len(readings)

    def set_state(self, switch: str, state: TargetState, detail: str | None = None) -> None:
        """Record a reachability change (a row per change in ``switch_reachability``)."""
        status = self.targets.get(switch)
        if status is not None and status.state == state and status.detail == detail:
            return
        if status is None:
            status = self.targets[switch] = TargetStatus(state, detail)
        else:
            status.state, status.detail, status.since = state, detail, time.time()
        self._reach_pending.append(
            Reachability(datetime.now(UTC), switch, state in _REACHABLE, str(state), None, detail)
        )
        level = logging.INFO if state in _REACHABLE or state is TargetState.CONNECTING else logging.WARNING
        log.log(level, "%s: %s%s", switch, state, f" ({detail})" if detail else "")

    def count_invalid(self, switch: str, what: str, n: int = 1) -> None:
        """Count skipped values by kind."""
        self.stats.invalid[what] = self.stats.invalid.get(what, 0) + n

    # --- housekeeping ---------------------------------------------------------------------

    async def _housekeeping(self) -> None:
        """Write the state every ``housekeeping_s``; a round that raises (a bug) is logged and run again."""
        await supervise(self.housekeeping_health, self._flush_state, interval_s=self._housekeeping_s)

    async def _flush_state(self) -> None:
        """One round: reachability rows to their writer; unknown ports and LLDP tables in one transaction."""
        if self._reach_pending:
            rows = list(self._reach_pending)
            await self.reach_writer.put(rows)  # may wait (a full buffer): the rows stay listed till then
            del self._reach_pending[: len(rows)]
        async with self._state_lock:
            if not self._unknown_pending and not self._lldp_dirty:
                return
            unknown, lldp = list(self._unknown_pending), dict(self._lldp_dirty)
            try:
                async with self.pool.acquire() as conn, conn.transaction():
                    if self.fence is not None:
                        await self.fence.check(conn)
                    bad_ports = await _isolate(conn, unknown, self._record_discovered)
                    bad_tables = await _isolate(conn, list(lldp.values()), replace_neighbors)
            except Fenced as exc:  # another collector holds the shard now: its state, not ours
                log.warning("collector state not written: %s", exc)
                self._unknown_pending = self._unknown_pending[len(unknown) :]
                self._lldp_dirty.clear()
                return
            except Exception as exc:
                if not _database_cannot_take(exc):
                    raise  # a bug, or a refusal no single row explains: supervise logs it; all is kept
                self._deferred(exc)
                return
            self._written(bad_ports, bad_tables, lldp)
            self._unknown_pending = self._unknown_pending[len(unknown) :]
            for key, table in lldp.items():
                if self._lldp_dirty.get(key) is table:  # not replaced by a newer table meanwhile
                    del self._lldp_dirty[key]

    async def _record_discovered(self, conn: Connection, ports: Sequence[DiscoveredPort]) -> None:
        await record_discovered(conn, ports, self._known_switches)

    def _deferred(self, exc: BaseException) -> None:
        """The database cannot take the round now: logged at the first failure of an outage only."""
        self.stats.state_writes_deferred += 1
        self._state_failures += 1
        if self._state_failures == 1:
            log.warning(
                "collector state not written: the database cannot take writes (%s); "
                "%d unknown ports and %d LLDP tables kept and retried",
                _describe(exc), len(self._unknown_pending), len(self._lldp_dirty),
            )  # fmt: skip
        else:
            log.debug("collector state still not written (%s), round %d", _describe(exc), self._state_failures)

    def _written(
        self,
        bad_ports: list[tuple[DiscoveredPort, BaseException]],
        bad_tables: list[tuple[NeighborTable, BaseException]],
        lldp: dict[tuple[str, str], NeighborTable],
    ) -> None:
        """A round committed: end the outage, if any; count and log what the database refused."""
        if self._state_failures:
            log.info("collector state written again after %d failed round(s)", self._state_failures)
            self._state_failures = 0
        for port, exc in bad_ports:  # a port is discovered once: logged once
            self.stats.state_rows_rejected += 1
            log.warning(
                "%s %s: the database refused this unknown port (%s); dropped", port.switch, port.port, _describe(exc)
            )
        refused: set[tuple[str, str]] = set()
        for table, exc in bad_tables:
            self.stats.state_rows_rejected += 1
            key = (table.switch, table.port)
            refused.add(key)
            if key in self._rejected_logged:
                log.debug("%s %s: LLDP table refused again (%s)", *key, _describe(exc))
                continue
            self._rejected_logged.add(key)
            log.warning(
                "%s %s: the database refused this LLDP table (%s); dropped, the next one is tried", *key, _describe(exc)
            )
        if self._rejected_logged:  # a port whose table lands again is logged again if refused later
            self._rejected_logged.difference_update(lldp.keys() - refused)

    def _discovered(self, r: PortReading) -> None:
        """A port the inventory does not know, reported for the first time: pending as a row of ``ports``."""
        before = self.stats.texts_cleaned
        first_seen = datetime.fromtimestamp(r.time_ns / 1e9, tz=UTC)
        port = DiscoveredPort(self._clean(r.switch), self._clean(r.port), first_seen)
        self._unknown_pending.append(port)
        self.stats.unknown_ports += 1
        log.warning("%s reports port %s, which the inventory does not know: stored and flagged", port.switch, port.port)
        if self.stats.texts_cleaned > before:
            self._log_cleaned(port.switch, port.port, f"its name {r.switch!r} {r.port!r}")

    def _neighbor_table(self, r: LldpReading) -> NeighborTable:
        """The store's record of a reading, its text made storable."""
        c, before = self._clean, self.stats.texts_cleaned
        neighbors = tuple(
            Neighbor(c(n.system_name), c(n.port_id), c(n.port_description), c(n.chassis_id)) for n in r.neighbors
        )
        table = NeighborTable(c(r.switch), c(r.port), datetime.fromtimestamp(r.time_ns / 1e9, tz=UTC), neighbors)
        if self.stats.texts_cleaned > before:
            self._log_cleaned(table.switch, table.port, "its LLDP table")
        return table

    def _clean(self, s: str) -> str:
        if is_clean(s):
            return s
        self.stats.texts_cleaned += 1
        return clean_text(s)

    def _log_cleaned(self, switch: str, port: str, what: str) -> None:
        """Once per port: its text had NULs or bytes that are not UTF-8."""
        if (switch, port) in self._cleaned_logged:
            return
        self._cleaned_logged.add((switch, port))
        log.warning(
            "%s %s: %s held text the database cannot store (NUL, or not UTF-8): stored without NULs, "
            "undecodable characters as U+FFFD",
            switch, port, what,
        )  # fmt: skip


def _describe(exc: BaseException) -> str:
    """``class SQLSTATE: first line``, for a log line."""
    err = classify(exc)
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"{err.name}{f' {err.sqlstate}' if err.sqlstate else ''}: {detail}"


def _refused_by_rule(exc: BaseException) -> bool:
    """A refusal of the database's own making that names no row (a trigger's ``RAISE``, SQLSTATE
    P0001): halved like a row error, so one refused item cannot stop the others."""
    return isinstance(exc, PostgresError) and classify(exc).name == "other"


def _database_cannot_take(exc: BaseException) -> bool:
    """Whether a failed round is the database's (unavailable, read-only, full...), not this code's."""
    err = classify(exc)
    return err.keep and (err.name != "other" or isinstance(exc, PostgresError))


async def _isolate(
    conn: Connection, items: list[T], write: Callable[[Connection, Sequence[T]], Awaitable[object]]
) -> list[tuple[T, BaseException]]:
    """Write ``items`` in a savepoint; when the database refuses a row, halve them until each item
    at fault stands alone. Returns those (with the error), all the others written. An error that
    is not about a row propagates: the caller's transaction rolls back, keeping everything.

    Halving, not one savepoint per item: a round can hold every port's table (the first SNMP
    poll of a fabric), and one bad table then costs ~2·log2(n) attempts, not n."""
    if not items:
        return []
    try:
        async with conn.transaction():
            await write(conn, items)
        return []
    except Exception as exc:
        if not (is_row_error(exc) or _refused_by_rule(exc)):
            raise
        if len(items) == 1:
            return [(items[0], exc)]
    mid = len(items) // 2
    return await _isolate(conn, items[:mid], write) + await _isolate(conn, items[mid:], write)
