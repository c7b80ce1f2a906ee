"""Numbered SQL migrations, applied in order, each once, each in its own transaction.

Files are ``NNN_name.sql`` in ``migrations/`` (the source tree) or the copy packaged with the
wheel. Applied versions are tracked in ``schema_migrations`` with a checksum, so an edited
migration that already ran is reported instead of silently diverging. An advisory lock makes
concurrent migrators (several services starting at once) take turns.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from store.errors import StoreError

log = logging.getLogger(__name__)

_NAME = re.compile(r"^(\d{3,})_([a-z0-9_]+)\.sql$")
_LOCK_KEY = 0x6661627269636D6F  # "fabricmo"


class MigrationError(StoreError):
    """A migration file is malformed, failed to apply, or changed after it was applied."""


@dataclass(frozen=True, slots=True)
class Migration:
    """One SQL file of ``migrations/``."""

    version: int
    name: str
    path: Path
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def migrations_dir() -> Path:
    """``migrations/`` beside the packages in a source checkout, else the copy in the wheel."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "migrations", here / "migrations_sql"):
        if candidate.is_dir():
            return candidate
    raise MigrationError(f"no migrations directory found next to {here}")


def discover(directory: Path | None = None) -> list[Migration]:
    """The migrations in ``directory``, sorted by version; duplicates and odd names are errors."""
    directory = directory or migrations_dir()
    found: dict[int, Migration] = {}
    for path in sorted(directory.glob("*.sql")):
        match = _NAME.match(path.name)
        if not match:
            raise MigrationError(f"{path}: migration files are named NNN_name.sql")
        version = int(match.group(1))
        if version in found:
            raise MigrationError(f"{path}: version {version} also used by {found[version].path.name}")
        found[version] = Migration(version, match.group(2), path, path.read_text(encoding="utf-8"))
    return [found[v] for v in sorted(found)]


async def migrate(conn: asyncpg.Connection, directory: Path | None = None) -> list[Migration]:
    """Apply every pending migration; return the ones applied now (empty when up to date)."""
    migrations = discover(directory)
    await conn.execute("CREATE EXTENSION IF NOT EXISTS timescaledb")
    await conn.execute(
        """CREATE TABLE IF NOT EXISTS schema_migrations (
               version integer PRIMARY KEY,
               name text NOT NULL,
               checksum text NOT NULL,
               applied_at timestamptz NOT NULL DEFAULT now())"""
    )
    await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_KEY)
    try:
        rows = await conn.fetch("SELECT version, name, checksum FROM schema_migrations")
        applied = {r["version"]: r for r in rows}
        done: list[Migration] = []
        for m in migrations:
            if m.version in applied:
                if applied[m.version]["checksum"] != m.checksum:
                    raise MigrationError(
                        f"migration {m.path.name} changed after it was applied; add a new migration instead"
                    )
                continue
            log.info("applying migration %s", m.path.name)
            try:
                async with conn.transaction():
                    await conn.execute(m.sql)
                    await conn.execute(
                        "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                        m.version,
                        m.name,
                        m.checksum,
                    )
            except asyncpg.PostgresError as exc:
                raise MigrationError(f"migration {m.path.name} failed: {exc}") from exc
            done.append(m)
        return done
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY)
