"""The collectors' pipeline: readings → counter hygiene → batched COPY writers (→ spool).

:class:`Pipeline` is the :class:`~collector.records.Sink` every protocol collector writes into.
``put_ports`` runs counter hygiene inline and hands rows to one :class:`~store.writer.BatchWriter`
per table; a writer's bounded buffer is the queue (``put`` waits when it is full: back-pressure
toward the gNMI streams and SNMP polls, never a silent drop), and its spool takes batches to
disk while the database is away. State that is "latest wins" (LLDP tables, reachability,
unknown ports) is kept in memory and written by one housekeeping task, so an outage delays it
but never loses the final state.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from collector.counters import PFC_HEARTBEAT_S, CounterTracker
from collector.records import LldpReading, PortReading, TargetState
from fabric.model import Fabric
from store.config import WriterConfig
from store.db import UNAVAILABLE_ERRORS, Connection, Pool, PostgresError
from store.records import LinkEvent, PfcSample, PortSample, Reachability
from store.spool import Spool
from store.writer import BatchWriter

log = logging.getLogger(__name__)

_REACHABLE = {TargetState.CONNECTED, TargetState.STALE}


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
    values: int = 0
    lldp_tables: int = 0
    invalid: dict[str, int] = field(default_factory=dict)
    unknown_ports: int = 0


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
    ) -> None:
        self.pool = pool
        self.config = config or WriterConfig()
        self.tracker = CounterTracker(pfc_heartbeat_s)
        self.stats = PipelineStats()
        self.targets: dict[str, TargetStatus] = {}
        self._known_ports = {(p.switch, p.name) for p in fabric.all_ports()}
        self._known_switches = set(fabric.switches)
        self._unknown_seen: set[tuple[str, str]] = set()
        self._unknown_pending: list[tuple[str, str, datetime]] = []
        self._lldp_dirty: dict[tuple[str, str], LldpReading] = {}
        self._housekeeping_s = housekeeping_s
        self._task: asyncio.Task[None] | None = None

        def writer(table: str, columns: Sequence[str]) -> BatchWriter:
            spool = None
            if spool_dir is not None:
                spool = Spool(spool_dir / table, int(self.config.spool_max_mb * 1024 * 1024))
            return BatchWriter(pool, table, columns, self.config, spool=spool)

        self.ports_writer = writer("port_counters", PortSample._fields)
        self.pfc_writer = writer("pfc_counters", PfcSample._fields)
        self.events_writer = writer("link_events", LinkEvent._fields)
        self.reach_writer = writer("switch_reachability", Reachability._fields)
        self.writers = [self.ports_writer, self.pfc_writer, self.events_writer, self.reach_writer]
        self._reach_pending: list[Reachability] = []

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Start the writers' timers and the housekeeping task."""
        for w in self.writers:
            w.start()
        if self._task is None:
            self._task = asyncio.create_task(self._housekeeping(), name="pipeline-housekeeping")

    async def close(self) -> None:
        """Write what is left (spooling it if the database is away); never raises."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._flush_state()
        for w in self.writers:
            try:
                await w.close()
            except UNAVAILABLE_ERRORS as exc:
                log.error("%s: %d rows not written at shutdown (no spool configured): %s", w.table, w.pending, exc)
            except Exception as exc:  # shutdown must finish; what the spool takes is not lost
                lost = w.spool_pending()
                log.error("%s: closing failed (%s); %d rows not saved", w.table, exc, lost)

    # --- Sink -----------------------------------------------------------------------------

    async def put_ports(self, readings: Sequence[PortReading]) -> None:
        """Rates, resets and events for each reading, then into the writers (may wait)."""
        ports: list[PortSample] = []
        pfc: list[PfcSample] = []
        events: list[LinkEvent] = []
        now = time.time()
        for r in readings:
            out = self.tracker.ingest(r)
            ports.append(out.port)
            pfc.extend(out.pfc)
            events.extend(out.events)
            key = (r.switch, r.port)
            if key not in self._known_ports and key not in self._unknown_seen:
                self._unknown_seen.add(key)
                self._unknown_pending.append((r.switch, r.port, out.port.time))
                self.stats.unknown_ports += 1
                log.warning("%s reports port %s, which the inventory does not know: stored and flagged", *key)
            status = self.targets.get(r.switch)
            if status is not None:
                status.last_seen = now
        self.stats.readings += len(readings)
        self.stats.values += sum(sum(v is not None for v in s[5:21]) for s in ports)
        await self.ports_writer.put(ports)
        if pfc:
            await self.pfc_writer.put(pfc)
        if events:
            await self.events_writer.put(events)

    async def put_lldp(self, readings: Sequence[LldpReading]) -> None:
        """Keep the latest table per port; housekeeping writes it."""
        for r in readings:
            self._lldp_dirty[(r.switch, r.port)] = r
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
        while True:
            await asyncio.sleep(self._housekeeping_s)
            try:
                await self._flush_state()
            except PostgresError as exc:  # a bad row must not stop the task; it retries
                log.error("writing collector state failed: %s", exc)

    async def _flush_state(self) -> None:
        if self._reach_pending:
            rows, self._reach_pending = self._reach_pending, []
            await self.reach_writer.put(rows)
        if not self._unknown_pending and not self._lldp_dirty:
            return
        unknown, lldp = list(self._unknown_pending), dict(self._lldp_dirty)
        try:
            async with self.pool.acquire() as conn, conn.transaction():
                if unknown:
                    await self._write_unknown(conn, unknown)
                if lldp:
                    await self._write_lldp(conn, list(lldp.values()))
        except UNAVAILABLE_ERRORS as exc:
            log.warning("state not written yet (database unavailable): %s", exc)
            return
        self._unknown_pending = self._unknown_pending[len(unknown) :]
        for key, reading in lldp.items():
            if self._lldp_dirty.get(key) is reading:
                del self._lldp_dirty[key]

    async def _write_unknown(self, conn: Connection, rows: list[tuple[str, str, datetime]]) -> None:
        switches = sorted({s for s, _, _ in rows if s not in self._known_switches})
        if switches:
            await conn.executemany(
                "INSERT INTO switches (name, role, known) VALUES ($1, 'unknown', false) ON CONFLICT DO NOTHING",
                [(s,) for s in switches],
            )
        await conn.executemany(
            "INSERT INTO ports (switch, port, known, first_seen) VALUES ($1, $2, false, $3) ON CONFLICT DO NOTHING",
            rows,
        )

    async def _write_lldp(self, conn: Connection, tables: list[LldpReading]) -> None:
        await conn.execute(
            "DELETE FROM lldp_neighbors n USING unnest($1::text[], $2::text[]) AS k(switch, port) "
            "WHERE n.switch = k.switch AND n.port = k.port",
            [t.switch for t in tables],
            [t.port for t in tables],
        )
        rows = [
            (t.switch, t.port, n.system_name, n.port_id, n.port_description, n.chassis_id,
             datetime.fromtimestamp(t.time_ns / 1e9, tz=UTC))
            for t in tables
            for n in {(x.system_name, x.port_id): x for x in t.neighbors}.values()
        ]  # fmt: skip
        if rows:
            await conn.copy_records_to_table(
                "lldp_neighbors",
                records=rows,
                columns=["switch", "port", "system_name", "port_id", "port_description", "chassis_id", "seen_at"],
            )
