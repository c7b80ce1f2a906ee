"""The test's own database connection, on an event loop of its own, for synchronous tests that
watch real processes write."""

from __future__ import annotations

import asyncio
from typing import Any, Self

import asyncpg


class SyncDb:
    """One connection; queries run to completion on the object's own loop."""

    def __init__(self, dsn: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.conn: asyncpg.Connection = self.loop.run_until_complete(asyncpg.connect(dsn, timeout=30))

    def fetch(self, sql: str, *args: Any) -> list[Any]:
        """Rows of ``sql``; none while the processes under test have not migrated the database yet."""
        try:
            rows: list[Any] = self.loop.run_until_complete(self.conn.fetch(sql, *args))
        except asyncpg.UndefinedTableError:
            return []
        return rows

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.loop.run_until_complete(self.conn.close(timeout=5))
        self.loop.close()
