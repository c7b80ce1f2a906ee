"""Database access: resolving the DSN (configured, or the embedded store) and the asyncpg pool.

Only the ``store`` package imports asyncpg; everyone else gets a pool from here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

import asyncpg

from store.config import DatabaseConfig
from store.errors import StoreError

log = logging.getLogger(__name__)

#: The database types other packages use; only ``store`` imports asyncpg itself.
Pool = asyncpg.Pool
Connection = asyncpg.Connection
Record = asyncpg.Record
PostgresError = asyncpg.PostgresError

#: Errors that mean "the database is not there right now", as opposed to "this data is bad".
UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    asyncio.TimeoutError,
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.ConnectionFailureError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
    asyncpg.exceptions.TooManyConnectionsError,
    asyncpg.exceptions.InterfaceError,
    # a connection left mid-operation ("cannot switch to state ..."): a fresh one will do
    asyncpg.exceptions.InternalClientError,
)


class StoreUnavailable(StoreError, ConnectionError):
    """The database cannot be reached or went away mid-operation; the caller keeps its data."""


def resolve_dsn(config: DatabaseConfig, *, start_embedded: bool = True) -> str:
    """The configured DSN, or the embedded store's (started if needed and allowed)."""
    if config.dsn is not None:
        return config.dsn.get_secret_value()
    from store.pgserver import EmbeddedStore

    store = EmbeddedStore()
    if start_embedded:
        status = store.start()
        log.info("using the embedded store on port %s (%s)", status.port, status.data_dir)
    return store.dsn()


async def create_pool(
    dsn: str, config: DatabaseConfig | None = None, *, server_settings: Mapping[str, str] | None = None
) -> asyncpg.Pool:
    """An asyncpg pool, or :class:`StoreUnavailable` naming the host (never the password).
    ``server_settings``: session settings for every connection of the pool."""
    config = config or DatabaseConfig()
    try:
        pool = await asyncpg.create_pool(
            dsn,
            min_size=config.pool_min,
            max_size=max(config.pool_max, config.pool_min),
            timeout=config.connect_timeout_s,
            command_timeout=300,
            server_settings=dict(server_settings) if server_settings else None,
        )
    except UNAVAILABLE_ERRORS as exc:
        raise StoreUnavailable(f"cannot connect to the database at {redact_dsn(dsn)}: {exc}") from exc
    except asyncpg.PostgresError as exc:
        raise StoreError(f"database at {redact_dsn(dsn)} refused the connection: {exc}") from exc
    assert pool is not None
    return pool


def redact_dsn(dsn: str) -> str:
    """The DSN with its password replaced, for logs and errors."""
    if "://" not in dsn or "@" not in dsn:
        return dsn
    scheme, rest = dsn.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in creds else f"{scheme}://{user}@{host}"


async def recreate_database(admin_dsn: str, name: str) -> None:
    """Drop (forcing sessions off) and create database ``name`` in the cluster of ``admin_dsn``."""
    if not name.replace("_", "").isalnum():
        raise StoreError(f"refusing an odd database name {name!r}")
    conn = await asyncpg.connect(admin_dsn, timeout=30)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
