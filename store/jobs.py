"""The ``jobs`` table: its rows (:class:`Job`) and its SQL; this module is its only writer.

:func:`save_job` (insert or replace), :func:`get_job`, :func:`list_jobs`, :func:`load_jobs`,
:func:`delete_job` and :func:`replace_discovered` (a scheduler's running jobs, by id prefix) are the
table's only writers and readers, except the blast-radius join of :func:`analyzer.actions.affected_jobs`.
What a valid job is (the one validation of a job, from the API or a file) is :mod:`analyzer.job_spec`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from store.db import Connection, Pool, Record


@dataclass(frozen=True, slots=True)
class Job:
    """A training job: where it runs and for how long."""

    id: str
    hosts: tuple[str, ...]
    started_at: datetime | None = None
    expected_days: float | None = None
    #: When it was registered (None: not stored, e.g. a pre-flight job).
    created_at: datetime | None = None

    def remaining_days(self, now: datetime) -> float:
        """Days left (the whole expected duration when the start is unknown)."""
        if self.expected_days is None:
            return 30.0
        if self.started_at is None:
            return self.expected_days
        return max(0.0, self.expected_days - (now - self.started_at).total_seconds() / 86400)


_COLUMNS = "id, hosts, started_at, expected_days, created_at"


def _job(r: Record) -> Job:
    return Job(r["id"], tuple(r["hosts"]), r["started_at"], r["expected_days"], r["created_at"])


async def save_job(db: Pool | Connection, job: Job) -> tuple[Job, bool]:
    """Insert ``job``, or replace the one with its id; the stored job and whether it is new."""
    row = await db.fetchrow(
        f"""INSERT INTO jobs (id, hosts, started_at, expected_days) VALUES ($1, $2, $3, $4)
            ON CONFLICT (id) DO UPDATE SET hosts = EXCLUDED.hosts, started_at = EXCLUDED.started_at,
                                           expected_days = EXCLUDED.expected_days
            RETURNING {_COLUMNS}, (xmax = 0) AS inserted""",
        job.id,
        list(job.hosts),
        job.started_at,
        job.expected_days,
    )
    assert row is not None  # INSERT ... RETURNING always returns the row
    return _job(row), bool(row["inserted"])


async def get_job(db: Pool | Connection, job_id: str) -> Job | None:
    """The job with this id, if registered."""
    row = await db.fetchrow(f"SELECT {_COLUMNS} FROM jobs WHERE id = $1", job_id)
    return None if row is None else _job(row)


async def list_jobs(db: Pool | Connection, limit: int, offset: int) -> tuple[list[Job], int]:
    """One page of the registered jobs (by id) and how many there are."""
    rows = await db.fetch(
        f"SELECT {_COLUMNS}, count(*) OVER () AS total FROM jobs ORDER BY id LIMIT $1 OFFSET $2", limit, offset
    )
    total = rows[0]["total"] if rows else await db.fetchval("SELECT count(*) FROM jobs")
    return [_job(r) for r in rows], int(total)


async def load_jobs(db: Pool | Connection) -> list[Job]:
    """Every registered job (by id)."""
    return [_job(r) for r in await db.fetch(f"SELECT {_COLUMNS} FROM jobs ORDER BY id")]


async def delete_job(db: Pool | Connection, job_id: str) -> bool:
    """Forget a job; whether it was registered."""
    return await db.fetchval("DELETE FROM jobs WHERE id = $1 RETURNING id", job_id) is not None


async def replace_discovered(pool: Pool, prefix: str, jobs: list[Job]) -> tuple[int, int]:
    """Make the jobs whose id starts with ``prefix`` exactly ``jobs`` (a scheduler's running jobs):
    upsert each, delete the others of that prefix, in one transaction. Jobs of other ids (registered
    by hand or by another scheduler) are not touched. Returns (stored, removed)."""
    assert all(j.id.startswith(prefix) for j in jobs)
    async with pool.acquire() as conn, conn.transaction():
        if jobs:
            await conn.execute(
                """INSERT INTO jobs (id, hosts, started_at, expected_days)
                   SELECT j.id, string_to_array(j.hosts, E'\\x1f'), j.started_at, j.expected_days
                   FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::float8[])
                        AS j(id, hosts, started_at, expected_days)
                   ON CONFLICT (id) DO UPDATE SET hosts = EXCLUDED.hosts, started_at = EXCLUDED.started_at,
                                                  expected_days = EXCLUDED.expected_days
                   WHERE (jobs.hosts, jobs.started_at, jobs.expected_days)
                         IS DISTINCT FROM (EXCLUDED.hosts, EXCLUDED.started_at, EXCLUDED.expected_days)""",
                [j.id for j in jobs],
                ["\x1f".join(j.hosts) for j in jobs],
                [j.started_at for j in jobs],
                [j.expected_days for j in jobs],
            )
        removed = await conn.fetchval(
            """WITH gone AS (DELETE FROM jobs WHERE starts_with(id, $1) AND NOT id = ANY($2::text[]) RETURNING 1)
               SELECT count(*) FROM gone""",
            prefix,
            [j.id for j in jobs],
        )
    return len(jobs), int(removed)


__all__ = ["Job", "delete_job", "get_job", "list_jobs", "load_jobs", "replace_discovered", "save_job"]
