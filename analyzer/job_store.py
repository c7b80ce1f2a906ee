"""Training jobs: the one validation of a job and the one module that reads and writes ``jobs``.

A job is ``id``, ``hosts`` (server names), optional ``started_at`` and ``expected_days`` (SPEC §4).
It is validated once, by :class:`JobSpec` (a pydantic model), wherever it comes from: a scheduler
registering it (``POST /v1/jobs``, whose body is :class:`JobIn`, the same model with ``id``
required; the API publishes it in ``/openapi.json``) or a file given to ``fabricmon check --job``
(:func:`load_job_file` → :func:`job_from_dict`, ``id`` optional: ``preflight``). The rules:

* ``id``: 1-128 characters, letters, digits and ``. _ : @ + = -``, starting with a letter or digit
  (it is a URL path segment: ``/v1/jobs/{id}``);
* ``hosts``: 1-65,536 server names (printable, at most 200 characters each); repeats are dropped,
  first one kept;
* ``started_at``: an ISO 8601 date/time (a YAML timestamp or date in a file), naive meaning UTC;
* ``expected_days``: a number > 0 and at most 3650 (ten years).

Whether the hosts are servers of the inventory is the caller's rule, not a shape: the API refuses
unknown hosts (a job the fabric cannot place would always look healthy), a pre-flight reports
them. :func:`save_job` (insert or replace), :func:`get_job`, :func:`list_jobs`, :func:`load_jobs`,
:func:`delete_job` and :func:`replace_discovered` (a scheduler's running jobs, by id prefix) are the
table's only writers and readers, except the blast-radius join of :func:`analyzer.actions.affected_jobs`.

Exception tree::

    JobError (FabricmonError, ValueError)   a job description that cannot be used
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, ValidationError

from fabric.errors import FabricmonError
from store.db import Connection, Pool, Record

#: A job id as a scheduler names it: usable in a URL path segment.
JobId = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@+=-]*$")]
#: A server name: printable, no control characters.
HostName = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]
MAX_HOSTS = 65_536
MAX_DAYS = 3650.0
#: The id of a job described without one (a pre-flight file).
PREFLIGHT_ID = "preflight"
#: Each field's rule, for the one-line errors of a job file.
RULES = {
    "id": "must be 1-128 letters, digits or . _ : @ + = -, starting with a letter or digit",
    "hosts": f"must be a non-empty list of server names (at most {MAX_HOSTS})",
    "started_at": "must be an ISO 8601 date/time",
    "expected_days": f"must be a number > 0 and <= {MAX_DAYS:g}",
}


class JobError(FabricmonError, ValueError):
    """A job description that cannot be used."""


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


def _start_time(value: Any) -> Any:
    """``started_at``: an aware datetime from an ISO 8601 string, a datetime or a date (UTC when naive)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(RULES["started_at"]) from None
    elif isinstance(value, date) and not isinstance(value, datetime):
        value = datetime.combine(value, time(), UTC)
    if not isinstance(value, datetime):  # a number is not a time here: the schema says string
        raise ValueError(RULES["started_at"])
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class JobSpec(BaseModel):
    """A job as a file describes it (``id`` optional)."""

    model_config = ConfigDict(extra="forbid")
    id: JobId | None = None
    hosts: list[HostName] = Field(min_length=1, max_length=MAX_HOSTS, description="server names from the inventory")
    started_at: Annotated[datetime | None, BeforeValidator(_start_time)] = Field(
        None, description="ISO 8601; naive means UTC"
    )
    expected_days: Annotated[float, Field(gt=0, le=MAX_DAYS, allow_inf_nan=False, strict=True)] | None = None

    def to_job(self) -> Job:
        """The :class:`Job` (hosts deduplicated, first one kept)."""
        return Job(self.id or PREFLIGHT_ID, tuple(dict.fromkeys(self.hosts)), self.started_at, self.expected_days)


class JobIn(JobSpec):
    """A training job as a scheduler registers it (``POST /v1/jobs``)."""

    id: JobId


def job_from_dict(data: Any, where: str = "job") -> Job:
    """A job from a mapping (a job file's content), or :class:`JobError` naming the first bad key."""
    if not isinstance(data, dict):
        raise JobError(f"{where}: expected a mapping with 'hosts'")
    unknown = sorted(str(k) for k in set(data) - set(JobSpec.model_fields))
    if unknown:
        raise JobError(f"{where}: unknown key(s) {', '.join(unknown)}")
    try:
        return JobSpec.model_validate(data).to_job()
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        key = str(first["loc"][0]) if first["loc"] else ""
        raise JobError(f"{where}: {key!r} {RULES.get(key, first['msg'])}") from None


def load_job_file(path: Path) -> Job:
    """A job from a YAML or JSON file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise JobError(f"{path}: cannot read job file: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise JobError(f"{path}: not UTF-8 text") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise JobError(f"{path}: not YAML/JSON: {str(exc).splitlines()[0]}") from None
    return job_from_dict(data, str(path))


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
