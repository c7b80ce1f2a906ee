"""The batched COPY writer: one per table, flushing on batch size or on a timer.

Fast path: a plain ``COPY`` into the hypertable. When the batch collides with rows already
stored (the same sample after a reconnect), it is written again through a temp table with
``INSERT … ON CONFLICT DO NOTHING``, so duplicates are stored once. When the batch holds a row
the database or the encoder refuses (a NULL key, a value out of range, a wrong type), the batch
is bisected until that row stands alone; it alone is rejected and counted.

``put`` blocks while ``max_pending_rows`` are buffered (back-pressure, never a silent drop).
When the database is unreachable: with a :class:`~store.spool.Spool`, batches go to disk and are
replayed in order, before anything newer, once it is back; without one, the failed batch stays
buffered and ``flush`` raises :class:`~store.db.StoreUnavailable`.

``watermark`` is the newest ``time`` among the rows the database has committed (capped at the
wall clock of the commit, so one sample stamped by a clock running ahead cannot hide a writer
that has stopped): the collector's heartbeat reports it, and a wedged writer shows as a stale one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg

from store.config import WriterConfig
from store.db import UNAVAILABLE_ERRORS, StoreUnavailable
from store.spool import Spool

log = logging.getLogger(__name__)

Row = Sequence[Any]

#: Errors a single row can cause (besides connection loss, told apart by ``_unavailable``).
_ROW_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    ValueError,
    TypeError,
    ArithmeticError,
)
#: Errors no row causes: the table itself is wrong, so bisecting would only repeat them.
_SCHEMA_ERRORS = (asyncpg.exceptions.UndefinedTableError, asyncpg.exceptions.UndefinedColumnError)


def _unavailable(exc: BaseException) -> bool:
    """True for connection loss; asyncpg's DataError (bad input) is an InterfaceError but is not."""
    return isinstance(exc, UNAVAILABLE_ERRORS) and not isinstance(exc, asyncpg.exceptions.DataError | ValueError)


@dataclass(slots=True)
class WriterStats:
    """Counters a writer keeps for /metrics."""

    rows_written: int = 0
    rows_duplicate: int = 0
    rows_rejected: int = 0
    batches: int = 0
    conflict_batches: int = 0
    flush_seconds: float = 0.0
    last_error: str | None = None


class BatchWriter:
    """Buffers rows for one table and writes them with COPY."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        table: str,
        columns: Sequence[str],
        config: WriterConfig | None = None,
        spool: Spool | None = None,
    ) -> None:
        self.pool = pool
        self.spool = spool
        self.table = table
        self.columns = list(columns)
        self.config = config or WriterConfig()
        self.stats = WriterStats()
        #: Newest ``time`` committed (None: nothing yet, or the table has no ``time`` column).
        self.watermark: datetime | None = None
        self._time_index = self.columns.index("time") if "time" in self.columns else None
        self._pending: list[Row] = []
        self._flush_lock = asyncio.Lock()
        self._room = asyncio.Condition()
        self._timer: asyncio.Task[None] | None = None
        self._closed = False
        cols = ", ".join(f'"{c}"' for c in self.columns)
        self._stage = f"_fm_stage_{table}"
        self._stage_sql = (
            f'CREATE TEMP TABLE IF NOT EXISTS "{self._stage}" (LIKE "{table}" INCLUDING DEFAULTS) ON COMMIT DELETE ROWS'
        )
        self._conflict_sql = f'INSERT INTO "{table}" ({cols}) SELECT {cols} FROM "{self._stage}" ON CONFLICT DO NOTHING'

    @property
    def pending(self) -> int:
        """Rows buffered and not yet written."""
        return len(self._pending)

    def start(self) -> None:
        """Start the flush timer (idempotent)."""
        if self._timer is None:
            self._timer = asyncio.create_task(self._tick(), name=f"writer-{self.table}")

    async def put(self, rows: Sequence[Row]) -> None:
        """Buffer ``rows``; flush when a batch is full; wait while the buffer is at its limit."""
        if self._closed:
            raise RuntimeError(f"writer for {self.table} is closed")
        async with self._room:
            await self._room.wait_for(lambda: len(self._pending) < self.config.max_pending_rows)
            self._pending.extend(rows)
        if len(self._pending) >= self.config.batch_rows:
            try:
                await self.flush()
            except StoreUnavailable as exc:  # rows stay buffered; put() waits once the buffer is full
                self.stats.last_error = str(exc)

    async def flush(self) -> int:
        """Write everything buffered (after the spool); return rows stored.

        Without a spool, raises StoreUnavailable keeping the rows; with one, spools them instead.
        """
        async with self._flush_lock:
            try:
                stored = await self._drain_spool()
            except StoreUnavailable:
                self._spool_pending()
                await self._release(0)
                return 0
            while self._pending:
                batch = self._pending[: self.config.batch_rows]
                started = time.perf_counter()
                try:
                    stored += await self._write_batch(batch)
                except StoreUnavailable:
                    if self.spool is None:
                        raise
                    self._spool_pending()
                    await self._release(0)
                    return stored
                finally:
                    self.stats.flush_seconds += time.perf_counter() - started
                await self._release(len(batch))
            return stored

    async def _release(self, n: int) -> None:
        del self._pending[:n]
        async with self._room:
            self._room.notify_all()

    async def _drain_spool(self) -> int:
        """Replay spooled batches, oldest first; stop (raising) at the first outage."""
        stored = 0
        while self.spool is not None and (batch := self.spool.peek()) is not None:
            stored += await self._write_batch(batch)
            self.spool.pop()
        return stored

    def _spool_pending(self) -> None:
        if self.spool is None:
            return
        while self._pending:
            batch = self._pending[: self.config.batch_rows]
            self.spool.push(batch)
            del self._pending[: len(batch)]
        log.warning("%s: database unavailable, %d batch(es) spooled on disk", self.table, len(self.spool))

    async def close(self) -> None:
        """Stop the timer and flush what is left."""
        self._closed = True
        if self._timer is not None:
            # Never cancel the timer mid-flush: a COPY cut off leaves its connection mid-operation
            # ("cannot switch to state ...") and the final flush below would fail on it.
            async with self._flush_lock:
                self._timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer
            self._timer = None
        await self.flush()

    def spool_pending(self) -> int:
        """Move what is buffered to the spool (a last resort at shutdown); rows that stay unsaved."""
        self._spool_pending()
        return len(self._pending)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.config.flush_interval_s)
            if not self._pending and not (self.spool is not None and len(self.spool)):
                continue
            try:
                await self.flush()
            except StoreUnavailable as exc:
                self.stats.last_error = str(exc)
                log.warning("%s: database unavailable, %d rows kept for retry", self.table, self.pending)

    async def _write_batch(self, batch: Sequence[Row]) -> int:
        self.stats.batches += 1
        try:
            async with self.pool.acquire() as conn:
                try:
                    await conn.copy_records_to_table(self.table, records=batch, columns=self.columns)
                except _ROW_ERRORS as exc:
                    if _unavailable(exc):
                        raise
                    if isinstance(exc, asyncpg.exceptions.UniqueViolationError):
                        self.stats.conflict_batches += 1
                    return await self._write_safely(conn, batch)
        except UNAVAILABLE_ERRORS as exc:
            if not _unavailable(exc):
                raise
            raise StoreUnavailable(f"writing {self.table}: {exc}") from exc
        self.stats.rows_written += len(batch)
        self._committed(batch)
        return len(batch)

    def _committed(self, batch: Sequence[Row]) -> None:
        """Advance ``watermark`` past a batch the database has committed."""
        i = self._time_index
        if i is None or not batch:
            return
        try:
            newest = max(r[i] for r in batch)
        except TypeError:  # a NULL or odd time somewhere: skip those
            newest = max((r[i] for r in batch if isinstance(r[i], datetime) and r[i].tzinfo), default=None)
        if not isinstance(newest, datetime) or newest.tzinfo is None:
            return
        newest = min(newest, datetime.now(UTC))
        if self.watermark is None or newest > self.watermark:
            self.watermark = newest

    async def _write_safely(self, conn: asyncpg.Connection, batch: Sequence[Row]) -> int:
        """Conflict-safe write; bisects to isolate rows the database or encoder refuses."""
        try:
            async with conn.transaction():
                await conn.execute(self._stage_sql)
                await conn.copy_records_to_table(self._stage, records=batch, columns=self.columns)
                status = await conn.execute(self._conflict_sql)
        except _ROW_ERRORS as exc:
            if _unavailable(exc) or isinstance(exc, _SCHEMA_ERRORS):
                raise
            if len(batch) == 1:
                self.stats.rows_rejected += 1
                self.stats.last_error = f"row rejected: {exc}"
                log.warning("%s: rejected one row: %s", self.table, str(exc).splitlines()[0])
                return 0
            mid = len(batch) // 2
            return await self._write_safely(conn, batch[:mid]) + await self._write_safely(conn, batch[mid:])
        inserted = int(status.rsplit(" ", 1)[-1])
        self._committed(batch)
        self.stats.rows_written += inserted
        self.stats.rows_duplicate += len(batch) - inserted
        return inserted
