"""Shared fixtures: the test run's private TimescaleDB cluster, and fresh databases in it.

- ``pg_store`` (session): an :class:`EmbeddedStore` in a fresh directory under ``/tmp``, started
  once per run (about a second), stopped and removed at the end.
- ``pg_dsn`` (session): its DSN, database ``fabricmon``.
- ``fresh_db`` (function): the DSN of a new, empty database with TimescaleDB, dropped afterwards.
- ``module_db`` (module): the same, shared by one module's tests.
- ``migrated_db`` (function): a new database with every migration applied, copied from a template
  migrated once per run (a copy takes a fraction of the seconds the migrations take).
- ``pool`` (function): a pool on a ``migrated_db``.
- ``private_store`` (function): a cluster of the test's own, copied from one made once per run.

For the whole run ``FABRICMON_DATA_DIR`` points at that same directory, so code that falls back
to the embedded store (``fabricmon db``, ``migrate`` without a DSN) uses the test cluster and
never the user's own. Tests using these fixtures are marked ``db`` automatically.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import pytest

from store.pgserver import EmbeddedStore

T = TypeVar("T")
DB_FIXTURES = frozenset({"pg_store", "pg_dsn", "fresh_db", "module_db", "migrated_db", "pool", "private_store"})


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if DB_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.db)


@pytest.fixture(scope="session", autouse=True)
def fabricmon_data_dir() -> Iterator[Path]:
    """A data dir for the run, reachable by the ``postgres`` account (pytest's own tmp is mode 700)."""
    base = Path(tempfile.mkdtemp(prefix="fabricmon-test-", dir="/tmp"))
    base.chmod(0o755)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FABRICMON_DATA_DIR", str(base))
        try:
            yield base
        finally:
            EmbeddedStore(base / "pg").stop()
            shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_store(fabricmon_data_dir: Path) -> EmbeddedStore:
    """The run's cluster, started on first use (stopped by ``fabricmon_data_dir`` at the end)."""
    store = EmbeddedStore(fabricmon_data_dir / "pg")
    store.start()
    for setting in THROWAWAY:
        run_sync(_admin(store, f"ALTER SYSTEM SET {setting} = off"))
    run_sync(_admin(store, "SELECT pg_reload_conf()"))
    return store


#: The run's cluster is thrown away at the end, so it does not sync to disk (``fsync``,
#: ``full_page_writes``: only an OS crash could lose what they protect). Each test's ``CREATE`` and
#: ``DROP DATABASE`` force a checkpoint: 1.5 s each with syncing, 0.05 s without. Commits stay
#: synchronous (``synchronous_commit``): a test that stops PostgreSQL abruptly loses nothing committed.
THROWAWAY = ("fsync", "full_page_writes")


@pytest.fixture(scope="session")
def pg_dsn(pg_store: EmbeddedStore) -> str:
    """DSN of the cluster's ``fabricmon`` database."""
    return pg_store.dsn()


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on a private loop, leaving pytest-asyncio's loop (and the current-loop slot) alone."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


async def _admin(pg_store: EmbeddedStore, sql: str) -> None:
    conn = await asyncpg.connect(pg_store.dsn("postgres"), timeout=30)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def _create_extension(dsn: str) -> None:
    conn = await asyncpg.connect(dsn, timeout=30)
    try:
        await conn.execute("SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS timescaledb")
    finally:
        await conn.close()


@pytest.fixture
def fresh_db(pg_store: EmbeddedStore) -> Iterator[str]:
    """DSN of a brand-new database with TimescaleDB and nothing else; dropped after the test."""
    yield from _new_database(pg_store)


@pytest.fixture(scope="module")
def module_db(pg_store: EmbeddedStore) -> Iterator[str]:
    """As ``fresh_db``, shared by one module's tests (one long run, several checks of it)."""
    yield from _new_database(pg_store)


@pytest.fixture(scope="session")
def migrated_template(pg_store: EmbeddedStore) -> str:
    """The name of a database migrated once for the run, closed to connections: what ``migrated_db`` copies."""
    from store.migrate import migrate

    name = f"fm_template_{uuid.uuid4().hex[:12]}"
    run_sync(_admin(pg_store, f"CREATE DATABASE {name}"))

    async def prepare() -> None:
        conn = await asyncpg.connect(pg_store.dsn(name), timeout=30)
        try:
            await conn.execute("SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS timescaledb")
            await migrate(conn)
        finally:
            await conn.close()

    run_sync(prepare())
    # A copy needs its template without sessions; TimescaleDB's scheduler keeps one open in every
    # database with the extension, so none may connect any more and the scheduler's is ended.
    run_sync(_admin(pg_store, f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS false"))
    run_sync(_admin(pg_store, f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"))
    return name


@pytest.fixture
def migrated_db(pg_store: EmbeddedStore, migrated_template: str) -> Iterator[str]:
    """DSN of a new database with every migration applied (a copy of the run's template); dropped after the test."""
    yield from _new_database(pg_store, migrated_template)


def _new_database(pg_store: EmbeddedStore, template: str | None = None) -> Iterator[str]:
    name = f"fm_test_{uuid.uuid4().hex[:12]}"
    if template is None:
        run_sync(_admin(pg_store, f"CREATE DATABASE {name}"))
    else:
        run_sync(_copy(pg_store, name, template))
    dsn = pg_store.dsn(name)
    try:
        if template is None:
            run_sync(_create_extension(dsn))
        yield dsn
    finally:
        # FORCE: a test that leaked a connection (or TimescaleDB's scheduler) must not keep it alive.
        run_sync(_admin(pg_store, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


async def _copy(pg_store: EmbeddedStore, name: str, template: str) -> None:
    """``CREATE DATABASE name TEMPLATE template``, retried while a session of the template is still
    ending (the scheduler's, just terminated). FILE_COPY: a copy of the files and a checkpoint, quick
    without syncing (WAL_LOG, the default, writes the template through the WAL)."""
    for attempt in range(50):
        try:
            await _admin(pg_store, f"CREATE DATABASE {name} TEMPLATE {template} STRATEGY FILE_COPY")
            return
        except asyncpg.ObjectInUseError:
            if attempt == 49:
                raise
            await asyncio.sleep(0.1)


@pytest.fixture
async def pool(migrated_db: str) -> AsyncIterator[asyncpg.Pool]:
    """A pool on a ``migrated_db`` (``tests.support.db.migrated_pool``: migrating it again is a no-op)."""
    from tests.support.db import migrated_pool

    async with migrated_pool(migrated_db) as pool:
        yield pool


@pytest.fixture(scope="session")
def private_store_template(fabricmon_data_dir: Path) -> Path:
    """A stopped cluster made once per run (initdb and the first start's bootstrap: about 4 s),
    with the run cluster's ``THROWAWAY`` settings: what ``private_store`` copies."""
    store = EmbeddedStore(fabricmon_data_dir / "private-template" / "pg")
    store.start()
    for setting in THROWAWAY:
        run_sync(_admin(store, f"ALTER SYSTEM SET {setting} = off"))
    store.stop()
    return store.root


@pytest.fixture
def private_store(private_store_template: Path) -> Iterator[EmbeddedStore]:
    """A cluster of the test's own, which it may stop and restart (outage tests), removed afterwards:
    a file copy of ``private_store_template`` (ownership kept: the server runs as its own account),
    started on a free port."""
    base = Path(tempfile.mkdtemp(prefix="fabricmon-outage-", dir="/tmp"))
    base.chmod(0o755)
    subprocess.run(["cp", "-a", str(private_store_template), str(base / "pg")], check=True)
    store = EmbeddedStore(base / "pg")
    store.start()
    try:
        yield store
    finally:
        store.stop()
        shutil.rmtree(base, ignore_errors=True)
