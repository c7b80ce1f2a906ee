"""A pool on a migrated database: what the ``pool`` fixture (tests/conftest.py) yields, for tests
that need it on a database of their own (a module's, a private cluster's) or with a fabric loaded."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg

from fabric.model import Fabric
from store.db import create_pool
from store.inventory import ensure_fabric
from store.migrate import migrate


@asynccontextmanager
async def migrated_pool(dsn: str, fabric: Fabric | None = None) -> AsyncIterator[asyncpg.Pool]:
    """A pool on ``dsn`` with every migration applied (and ``fabric``'s inventory, if given); closed after."""
    pool = await create_pool(dsn)
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
            if fabric is not None:
                await ensure_fabric(conn, fabric)
        yield pool
    finally:
        await pool.close()
