"""The batched COPY writer: one per table, flushing on batch size or on a timer.

Fast path: a plain ``COPY`` into the hypertable. When the batch collides with rows already
stored (the same sample after a reconnect), it is written again through a temp table with
``INSERT … ON CONFLICT DO NOTHING``, so duplicates are stored once (one batch's write:
:mod:`store.table_copy`).

A failed write is judged by its class (:mod:`store.sqlstate`), never by trying rows one by one:

- the database cannot take writes *now* (connection lost, read-only, disk full, out of memory,
  deadlock, a table missing while the database is re-initialised): the batch is **kept**, whole.
  With a :class:`~store.spool.Spool`, what is buffered goes to disk and replays in order, before
  anything newer; without one it stays buffered and ``flush`` raises
  :class:`~store.db.StoreUnavailable`. Attempts back off (``flush_interval_s`` doubling up to
  ``retry_max_s``); the first failure of an outage is logged, the end of it too.
- a value the database or the encoder refuses: the batch is bisected until that row stands
  alone; it alone is rejected and counted.

``put`` waits while ``max_pending_rows`` are buffered (back-pressure, never a silent drop), unless
the database is away *and* the spool cannot take rows (its disk is full): then the oldest
buffered rows make room, counted in ``rows_dropped``, so collection goes on. The flush timer runs
supervised (:mod:`fabric.supervise`): an unexpected exception is logged, counted and the timer
started again; ``health`` is what /metrics reports.

``watermark`` is the newest ``time`` among the rows the database has committed (capped at the
wall clock of the commit, so one sample stamped by a clock running ahead cannot hide a writer
that has stopped): the collector's heartbeat reports it, and a wedged writer shows as a stale one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Sequence
from datetime import datetime

import asyncpg

from fabric.supervise import TaskHealth, backoff_s, supervise
from fabric.tasks import stop_task
from store.config import WriterConfig
from store.db import StoreUnavailable
from store.shard_leases import Fence, Fenced
from store.spool import Spool
from store.sqlstate import ErrorClass, classify
from store.table_copy import Row, TableCopy, WriteDeferred, WriterStats

log = logging.getLogger(__name__)


#: Error classes after which the pool's sessions may hold stale state (prepared statements).
_STALE_SESSION_CLASSES = frozenset({"undefined", "server", "other"})
#: ``rows_dropped`` reasons: the database was away and the spool's disk refused the rows; the
#: same at shutdown (or no spool configured), when nothing else can be done with them.
DROPPED_SPOOL_UNWRITABLE = "spool_unwritable"
DROPPED_SHUTDOWN = "shutdown"
#: How long a closing writer goes on replaying its spool (shutdown must end: systemd and
#: Kubernetes kill after 90 and 30 s).
CLOSE_REPLAY_S = 5.0
#: Error classes that are the database's state, never one batch's fault.
_OUTAGE_CLASSES = frozenset({"connection", "operator", "read_only", "resources", "rollback"})


class BatchWriter:
    """Buffers rows for one table and writes them with COPY."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        table: str,
        columns: Sequence[str],
        config: WriterConfig | None = None,
        spool: Spool | None = None,
        fence: Fence | None = None,
    ) -> None:
        """``fence``: a shard lease every write checks in its own transaction; a batch it refuses
        (the shard was taken over) is dropped and counted (``rows_dropped["fenced"]``)."""
        self.pool = pool
        self.spool = spool
        self.table = table
        self.columns = tuple(columns)
        self.config = config or WriterConfig()
        self.stats = WriterStats()
        self.health = TaskHealth(f"writer-{table}")
        self._pending: list[Row] = []
        self._flush_lock = asyncio.Lock()
        self._room = asyncio.Condition()
        self._timer: asyncio.Task[None] | None = None
        #: Set by ``put`` when a batch is full: the timer's next round starts at once.
        self._full = asyncio.Event()
        self._closed = False
        self._replay_until = 0.0  # once closing: when the replay of the spool stops
        #: Failed attempts in a row, and when the next may start (``time.monotonic``).
        self._failures = 0
        self._retry_at = 0.0
        self._outage_started: float | None = None
        self._spool_refused = False
        #: A spool replay was refused by the shard lease's fence (logged once).
        self._spool_fenced = False
        #: The spool batch at the head that failed, and how often in a row (see _refused_for_good).
        self._head_failures: tuple[str, int] = ("", 0)
        self._copier = TableCopy(table, self.columns, self.stats, self._defer, fence)

    @property
    def fence(self) -> Fence | None:
        """The shard lease every write checks (None: none); replaced when the lease is taken again."""
        return self._copier.fence

    @fence.setter
    def fence(self, value: Fence | None) -> None:
        self._copier.fence = value

    @property
    def watermark(self) -> datetime | None:
        """Newest ``time`` committed (None: nothing yet, or the table has no ``time`` column)."""
        return self._copier.watermark

    @watermark.setter
    def watermark(self, value: datetime | None) -> None:
        self._copier.watermark = value

    @property
    def pending(self) -> int:
        """Rows buffered and not yet written."""
        return len(self._pending)

    @property
    def deferring(self) -> bool:
        """Whether the last attempt failed and the database is being waited for."""
        return self._failures > 0

    def start(self) -> None:
        """Start the flush timer (idempotent)."""
        if self._timer is None:
            interval = self.config.flush_interval_s
            self._timer = asyncio.create_task(
                supervise(self.health, self._tick, interval_s=interval, first_backoff_s=interval, wake=self._full),
                name=f"writer-{self.table}",
            )

    async def put(self, rows: Sequence[Row]) -> None:
        """Buffer ``rows``; wait while the buffer is at its limit. A full batch wakes the timer,
        which writes it: the caller never waits for the database itself."""
        if self._closed:
            raise RuntimeError(f"writer for {self.table} is closed")
        limit = self.config.max_pending_rows
        async with self._room:
            while len(self._pending) >= limit:
                if self._spool_refused and self.deferring:  # nothing can take rows: the oldest make room
                    self._drop_oldest(len(self._pending) + len(rows) - limit, DROPPED_SPOOL_UNWRITABLE)
                    break
                await self._room.wait()
            self._pending.extend(rows)
        if len(self._pending) >= self.config.batch_rows:
            self._full.set()

    async def flush(self, *, force: bool = False) -> int:
        """Write the spool, then everything buffered; return rows stored.

        While backing off after a failure (unless ``force``) nothing is attempted: what is buffered
        goes to the spool. A failure keeps the rows: with a spool they go to disk, without one
        :class:`~store.db.StoreUnavailable` is raised."""
        async with self._flush_lock:
            if not force and self.deferring and time.monotonic() < self._retry_at:
                if not self._probing:
                    await self._spool_pending()
                if self.spool is None:
                    raise StoreUnavailable(f"writing {self.table}: waiting to retry ({self.stats.last_error})")
                return 0
            stored = 0
            try:
                stored += await self._drain_spool()
                while self._pending:
                    stored += await self._write_pending()
            except WriteDeferred:
                if not self._probing:
                    await self._spool_pending()
                if self.spool is None:
                    raise
            return stored

    async def close(self) -> None:
        """Stop the timer; replay the spool for up to ``CLOSE_REPLAY_S`` more (the rest waits for the
        next start), then write what is buffered; while the database is away, spool it instead.
        Rows that neither the database nor the spool took are counted as dropped (``shutdown``)."""
        self._closed = True
        self._replay_until = time.monotonic() + CLOSE_REPLAY_S
        if self._timer is not None:
            # Never cancel the timer mid-write: a COPY cut off leaves its connection mid-operation
            # ("cannot switch to state ..."). A replay goes on for CLOSE_REPLAY_S at most.
            async with self._flush_lock:
                self._timer.cancel()
            await stop_task(self._timer, f"the {self.table} flush timer", log)
            self._timer = None
        try:
            if self.spool is not None and self.deferring:
                async with self._flush_lock:
                    await self._spool_pending()
            else:
                await self.flush(force=True)
        finally:
            if self._pending:
                n = len(self._pending)
                self._drop_oldest(n, DROPPED_SHUTDOWN)

    def spool_pending(self) -> int:
        """Move what is buffered to the spool (a last resort at shutdown); rows that stay unsaved."""
        while self.spool is not None and self._pending:
            batch = self._pending[: self.config.batch_rows]
            if not self.spool.push(batch, self.columns):
                break
            del self._pending[: len(batch)]
        return len(self._pending)

    # --- the timer --------------------------------------------------------------------------

    async def _tick(self) -> None:
        """One round of the timer (run by :func:`~fabric.supervise.supervise`)."""
        if not self._pending and not (self.spool is not None and len(self.spool)):
            return
        if self.deferring and time.monotonic() < self._retry_at:
            if self.spool is not None and self._pending and not self._probing:
                async with self._flush_lock:
                    # To disk every round while waiting to retry: memory stays bounded, and a crash
                    # of the collector loses at most one flush interval of rows.
                    await self._spool_pending()
            return
        with contextlib.suppress(StoreUnavailable):  # kept; _defer logged it
            await self.flush()

    # --- outcomes ---------------------------------------------------------------------------

    def _defer(self, exc: BaseException, error_class: ErrorClass) -> WriteDeferred:
        """Count a failed attempt that keeps its batch, and schedule the next one."""
        now = time.monotonic()
        name = error_class.name
        self.stats.errors[name] = self.stats.errors.get(name, 0) + 1
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        code = f" {error_class.sqlstate}" if error_class.sqlstate else ""
        self.stats.last_error = f"{name}{code}: {detail}"
        self._failures += 1
        first = min(self.config.flush_interval_s, 1.0)
        wait = backoff_s(self._failures, first, self.config.retry_max_s)
        self._retry_at = now + wait * random.uniform(0.8, 1.0)
        if self._outage_started is None:
            self._outage_started = now
            self.stats.outages += 1
            log.warning(
                "%s: the database cannot take writes (%s); rows are kept%s and retried",
                self.table, self.stats.last_error, " (spooled on disk)" if self.spool is not None else "",
            )  # fmt: skip
        else:
            log.debug("%s: still cannot write (%s), attempt %d", self.table, self.stats.last_error, self._failures)
        return WriteDeferred(f"writing {self.table}: {self.stats.last_error}", error_class)

    def _recovered(self) -> None:
        if self._outage_started is not None:
            log.info(
                "%s: writes work again after %.1f s (%d attempt(s) failed)",
                self.table, time.monotonic() - self._outage_started, self._failures,
            )  # fmt: skip
        self._failures = 0
        self._retry_at = 0.0
        self._outage_started = None

    def _drop_oldest(self, n: int, reason: str) -> None:
        """Give up the ``n`` oldest buffered rows (nothing can store them), counted by reason."""
        n = min(n, len(self._pending))
        if n <= 0:
            return
        del self._pending[:n]
        self.stats.rows_dropped[reason] = self.stats.rows_dropped.get(reason, 0) + n
        why = {DROPPED_SHUTDOWN: "not written at shutdown (the database is away and the spool cannot write)"}
        log.error("%s: dropped the %d oldest rows: %s", self.table, n, why.get(reason, "the database is away "
                  "and the spool cannot write"))  # fmt: skip

    async def _wake(self) -> None:
        async with self._room:
            self._room.notify_all()

    # --- the spool --------------------------------------------------------------------------

    async def _drain_spool(self) -> int:
        """Replay spooled batches, oldest first, in the columns they were spooled with.

        Stops after the current batch once the writer has been closing for ``CLOSE_REPLAY_S``
        (what is left replays at the next start). The newest rows do not wait
        behind a long replay: past a batch, they go to the spool's tail. A batch the database
        refuses for a reason that is not an outage, twice, while newer rows of the table are
        stored, is refused for good: quarantined, so it cannot hold the table up."""
        stored = 0
        while self.spool is not None and not (self._closed and time.monotonic() > self._replay_until):
            batch = await asyncio.to_thread(self.spool.peek)
            if batch is None:
                break
            if batch.columns is None and any(len(r) != len(self.columns) for r in batch.rows):
                widths = sorted({len(r) for r in batch.rows})
                self.spool.quarantine_batch(f"version 1 rows of {widths} values for {len(self.columns)} columns")
                continue
            try:
                stored += await self._write_batch(batch.rows, batch.columns or self.columns)
            except Fenced as exc:
                # Spooled under a lease another collector holds now: kept on disk, replayed when
                # this collector holds the shard again (docs/decisions.md, shard failover).
                self._note_fenced_spool(exc)
                break
            except WriteDeferred as exc:
                if not await self._refused_for_good(batch.name, exc):
                    raise
                self.spool.quarantine_batch(f"refused by the database while newer rows were stored: {exc}")
                continue
            self.spool.pop()
            self._head_failures = ("", 0)
            if len(self._pending) >= self.config.batch_rows:
                await self._spool_pending()
        return stored

    async def _refused_for_good(self, name: str, exc: WriteDeferred) -> bool:
        """Whether the spool's head batch is at fault, not the database: it failed twice for a reason
        no outage explains, and the newest buffered rows are then stored (raises if they are not).

        After the first such failure the buffered rows stay in memory (``_probing``), not on the
        spool's tail, so that the second attempt can try them."""
        if exc.error_class.name in _OUTAGE_CLASSES:
            self._head_failures = ("", 0)
            return False
        seen, count = self._head_failures
        self._head_failures = (name, count + 1 if seen == name else 1)
        if self._head_failures[1] < 2 or not self._pending:
            return False
        try:
            await self._write_pending()
        except WriteDeferred:  # the table refuses newer rows too: an outage of its own kind, wait
            self._head_failures = ("", 0)
            raise
        return True

    @property
    def _probing(self) -> bool:
        """The spool's head failed once for a reason no outage explains: keep buffered rows to try."""
        return self._head_failures[1] == 1 and bool(self._pending)

    async def _write_pending(self) -> int:
        """Write the oldest buffered batch; it stays buffered (in front) if the write fails."""
        batch = self._pending[: self.config.batch_rows]
        del self._pending[: len(batch)]  # in flight: put() may drop from what is left
        started = time.perf_counter()
        try:
            stored = await self._write_batch(batch, self.columns)
        except Fenced as exc:  # read under a lease another collector holds now: not ours to write
            self._fenced(len(batch), exc)
            stored = 0
        except BaseException:
            self._pending[:0] = batch
            raise
        finally:
            self.stats.flush_seconds += time.perf_counter() - started
        await self._wake()
        return stored

    async def _spool_pending(self) -> None:
        """Everything buffered onto the spool, off the event loop; what the disk refuses stays buffered."""
        if self.spool is None or not self._pending:
            return
        before = len(self.spool)
        while self._pending:
            batch = self._pending[: self.config.batch_rows]
            del self._pending[: len(batch)]  # in flight, as for a write
            try:
                ok = await asyncio.to_thread(self.spool.push, batch, self.columns)
            except BaseException:
                self._pending[:0] = batch
                raise
            if not ok:
                self._pending[:0] = batch
                self._spool_refused = True  # kept buffered; put() drops the oldest past the limit
                break
        else:
            self._spool_refused = False
        await self._wake()
        if before == 0 and len(self.spool):
            log.warning("%s: %d batch(es) spooled on disk until the database takes writes", self.table, len(self.spool))

    # --- writing ----------------------------------------------------------------------------

    async def _write_batch(self, batch: Sequence[Row], columns: Sequence[str]) -> int:
        """Store one batch; raises :class:`WriteDeferred` (batch kept) for anything not about a row,
        a write that takes longer than ``write_timeout_s`` included (a database that stopped answering)."""
        self.stats.batches += 1
        limit = self.config.write_timeout_s
        try:
            # No acquire timeout: asyncpg leaks the connection of an acquire cancelled mid-connect
            # (MagicStack/asyncpg#467, #955); connecting is bounded by database.connect_timeout_s.
            async with self.pool.acquire() as conn:
                # Not a cancellation either: a COPY or a transaction cancelled mid-way waits for the
                # silent server to roll back. A terminated session fails every await on it at once.
                watchdog = asyncio.get_running_loop().call_later(limit, self._abandon, conn)
                try:
                    stored = await self._copier.copy(conn, batch, tuple(columns))
                finally:
                    watchdog.cancel()
        except Fenced:
            raise
        except WriteDeferred as deferred:
            if deferred.error_class.name in _STALE_SESSION_CLASSES:
                # A table dropped and made again leaves sessions with statements prepared for the old
                # one ("could not open relation with OID ..."): the next attempt gets new sessions.
                await self.pool.expire_connections()
            raise
        except Exception as exc:  # acquiring or releasing a connection: never a row's fault
            error_class = classify(exc)
            if not error_class.keep:
                error_class = ErrorClass("connection", keep=True, sqlstate=error_class.sqlstate)
            raise self._defer(exc, error_class) from exc
        self._recovered()
        return stored

    def _abandon(self, conn: asyncpg.Connection) -> None:
        """A write outlived ``write_timeout_s``: end its session (the database stopped answering)."""
        log.warning("%s: a write took over %.0f s: its session is ended, the batch kept", self.table,
                    self.config.write_timeout_s)  # fmt: skip
        conn.terminate()

    def _note_fenced_spool(self, exc: Fenced) -> None:
        if not self._spool_fenced:
            self._spool_fenced = True
            log.warning("%s: %s; the spool stays on disk for when the shard is ours again", self.table, exc)

    def _fenced(self, rows: int, exc: Fenced) -> None:
        """Another collector holds this shard now: the batch is not ours to write."""
        dropped = self.stats.rows_dropped.get("fenced", 0)
        self.stats.rows_dropped["fenced"] = dropped + rows
        if not dropped:
            log.warning("%s: %s; its rows are not written (dropped, counted)", self.table, exc)
