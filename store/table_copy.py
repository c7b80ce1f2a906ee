"""How one batch is stored in one table: the :class:`~store.writer.BatchWriter`'s write.

A plain ``COPY``, its stream encoded in C (:mod:`store.copy_binary`) or, for a column type or a
value the C does not take, by asyncpg. A batch that collides with stored rows is written again
through a temp table with ``INSERT … ON CONFLICT DO NOTHING`` (duplicates stored once), bisected
until a row the database refuses stands alone: it alone is rejected and counted. With a shard
fence, the lease is checked in the write's own transaction. A failure that is the database's
state, not a row's, becomes :class:`WriteDeferred` (the writer keeps the batch).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import asyncpg

from store.copy_binary import UnknownTable, column_kinds, encode
from store.db import StoreUnavailable
from store.shard_leases import Fence, Fenced
from store.sqlstate import ErrorClass, classify

log = logging.getLogger("store.writer")  # the writer's logger: its records keep their name

Row = Sequence[Any]

#: SQLSTATEs with which the server refuses a binary COPY stream that does not fit the table's
#: column types (invalid_binary_representation, invalid_parameter_value... a short field reads as
#: protocol_violation): the batch is then written again through asyncpg's encoder.
_BINARY_REFUSED = frozenset({"22P03", "22P04", "42804", "08P01"})


class WriteDeferred(StoreUnavailable):
    """The database cannot take this batch now (:attr:`error_class` says why); it is kept."""

    def __init__(self, message: str, error_class: ErrorClass) -> None:
        super().__init__(message)
        self.error_class = error_class


@dataclass(slots=True)
class WriterStats:
    """Counters a writer keeps for /metrics."""

    rows_written: int = 0
    rows_duplicate: int = 0
    rows_rejected: int = 0
    batches: int = 0
    #: Batches stored by a plain COPY, sent as a binary stream encoded in C (store/copy_binary.py)
    #: or encoded by asyncpg (no C, or a batch the C handed back).
    binary_batches: int = 0
    asyncpg_batches: int = 0
    conflict_batches: int = 0
    flush_seconds: float = 0.0
    last_error: str | None = None
    #: Failed attempts that kept their batch, by error class (``store.sqlstate`` names).
    errors: dict[str, int] = field(default_factory=dict)
    #: Rows given up by reason (besides the spool's own drops past its limit).
    rows_dropped: dict[str, int] = field(default_factory=dict)
    #: Outages: a failed attempt after a success.
    outages: int = 0


class TableCopy:
    """Stores batches of rows in one table (see the module docstring); keeps ``watermark``."""

    def __init__(
        self,
        table: str,
        columns: tuple[str, ...],
        stats: WriterStats,
        defer: Callable[[BaseException, ErrorClass], WriteDeferred],
        fence: Fence | None = None,
    ) -> None:
        """``defer``: counts a failure that keeps its batch and makes the :class:`WriteDeferred` raised."""
        self.table, self.columns, self.stats, self.fence = table, columns, stats, fence
        self._defer = defer
        #: Newest ``time`` committed (None: nothing yet, or the table has no ``time`` column).
        self.watermark: datetime | None = None
        self._time_index = columns.index("time") if "time" in columns else None
        self._conflict_sql: dict[tuple[str, ...], str] = {}
        #: Per column set, the kinds store/copy_binary.py encodes them as (None: asyncpg encodes).
        self._kinds: dict[tuple[str, ...], str | None] = {}
        self._stage = f"_fm_stage_{table}"
        self._stage_sql = (
            f'CREATE TEMP TABLE IF NOT EXISTS "{self._stage}" (LIKE "{table}" INCLUDING DEFAULTS) ON COMMIT DELETE ROWS'
        )

    async def copy(
        self, conn: asyncpg.Connection, batch: Sequence[Row], columns: tuple[str, ...], *, binary: bool = True
    ) -> int:
        payload: bytes | None = None
        try:
            if binary:
                payload = await self._encoded(conn, batch, columns)
            if self.fence is None:
                await self._copy_in(conn, batch, columns, payload)
            else:  # the check last: the lease row is locked only from it to the commit
                async with conn.transaction():
                    await self._copy_in(conn, batch, columns, payload)
                    await self.fence.check(conn)
        except Fenced:
            raise
        except Exception as exc:
            if payload is not None and getattr(exc, "sqlstate", None) in _BINARY_REFUSED:
                # The stream did not fit the table (a column's type changed under the writer): the
                # types are read again for the next batch, and asyncpg encodes this one now.
                self._kinds.clear()
                log.info("%s: the binary COPY was refused (%s); asyncpg encodes the batch", self.table, exc)
                return await self.copy(conn, batch, columns, binary=False)
            error_class = classify(exc)
            if error_class.keep:
                raise self._defer(exc, error_class) from exc
            if isinstance(exc, asyncpg.exceptions.UniqueViolationError):
                self.stats.conflict_batches += 1
            return await self._write_safely(conn, batch, columns)
        self.stats.rows_written += len(batch)
        if payload is not None:
            self.stats.binary_batches += 1
        else:
            self.stats.asyncpg_batches += 1
        self._committed(batch, columns)
        return len(batch)

    async def _encoded(self, conn: asyncpg.Connection, batch: Sequence[Row], columns: tuple[str, ...]) -> bytes | None:
        """The batch as a binary COPY stream encoded in C (store/copy_binary.py), or None: asyncpg
        encodes it (the C is not built, a column type or a value it does not take)."""
        if columns not in self._kinds:
            try:
                self._kinds[columns] = await column_kinds(conn, self.table, columns)
            except UnknownTable:  # not there yet: asyncpg's COPY says so; asked again next batch
                return None
        kinds = self._kinds[columns]
        return None if kinds is None else encode(batch, kinds)  # type: ignore[arg-type]

    async def _copy_in(
        self, conn: asyncpg.Connection, batch: Sequence[Row], columns: tuple[str, ...], payload: bytes | None
    ) -> None:
        if payload is None:
            await conn.copy_records_to_table(self.table, records=batch, columns=columns)
        else:  # a memoryview: asyncpg would take bytes for a file name
            await conn.copy_to_table(self.table, source=memoryview(payload), columns=columns, format="binary")

    async def _write_safely(self, conn: asyncpg.Connection, batch: Sequence[Row], columns: tuple[str, ...]) -> int:
        """Conflict-safe write; bisects to isolate the rows the database or encoder refuses."""
        try:
            async with conn.transaction():
                await conn.execute(self._stage_sql)
                await conn.copy_records_to_table(self._stage, records=batch, columns=columns)
                status = await conn.execute(self._insert_sql(columns))
                if self.fence is not None:
                    await self.fence.check(conn)
        except Fenced:
            raise
        except Exception as exc:
            error_class = classify(exc)
            if error_class.keep:
                raise self._defer(exc, error_class) from exc
            if len(batch) == 1:
                self.stats.rows_rejected += 1
                self.stats.last_error = f"row rejected: {exc}"
                log.warning("%s: rejected one row (%s): %s", self.table, error_class.name, str(exc).splitlines()[0])
                return 0
            mid = len(batch) // 2
            left = await self._write_safely(conn, batch[:mid], columns)
            return left + await self._write_safely(conn, batch[mid:], columns)
        inserted = int(status.rsplit(" ", 1)[-1])
        self._committed(batch, columns)
        self.stats.rows_written += inserted
        self.stats.rows_duplicate += len(batch) - inserted
        return inserted

    def _insert_sql(self, columns: tuple[str, ...]) -> str:
        sql = self._conflict_sql.get(columns)
        if sql is None:
            cols = ", ".join(f'"{c}"' for c in columns)
            sql = f'INSERT INTO "{self.table}" ({cols}) SELECT {cols} FROM "{self._stage}" ON CONFLICT DO NOTHING'
            self._conflict_sql[columns] = sql
        return sql

    def _committed(self, batch: Sequence[Row], columns: tuple[str, ...]) -> None:
        """Advance ``watermark`` past a batch the database has committed."""
        i = self._time_index if columns == self.columns else (columns.index("time") if "time" in columns else None)
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
