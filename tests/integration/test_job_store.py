"""The ``jobs`` table through :mod:`store.jobs`, its one reader and writer, on TimescaleDB."""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg

from analyzer.job_spec import job_from_dict
from store import jobs as job_store
from store.jobs import Job

START = datetime(2026, 11, 20, 12, tzinfo=UTC)


async def test_save_replace_get_list_delete(pool: asyncpg.Pool) -> None:
    first, inserted = await job_store.save_job(pool, Job("train-42", ("srv-g1-001", "srv-g1-002"), START, 12.0))
    assert inserted and first.created_at is not None
    assert (first.id, first.hosts, first.started_at, first.expected_days) == (
        "train-42",
        ("srv-g1-001", "srv-g1-002"),
        START,
        12.0,
    )
    replaced, inserted = await job_store.save_job(pool, Job("train-42", ("srv-g1-003",)))
    assert not inserted and replaced.hosts == ("srv-g1-003",) and replaced.started_at is None
    assert replaced.expected_days is None and replaced.created_at == first.created_at  # registered once
    assert await job_store.get_job(pool, "train-42") == replaced
    assert await job_store.get_job(pool, "nope") is None

    for i in range(5):
        await job_store.save_job(pool, Job(f"job-{i}", ("srv-g1-001",)))
    page, total = await job_store.list_jobs(pool, 2, 1)
    assert [j.id for j in page] == ["job-1", "job-2"] and total == 6
    past_the_end, total = await job_store.list_jobs(pool, 10, 100)
    assert past_the_end == [] and total == 6
    async with pool.acquire() as conn:  # a connection serves as well as the pool
        assert [j.id for j in await job_store.load_jobs(conn)] == [*(f"job-{i}" for i in range(5)), "train-42"]

    assert await job_store.delete_job(pool, "train-42")
    assert not await job_store.delete_job(pool, "train-42")
    assert await job_store.get_job(pool, "train-42") is None


async def test_a_job_file_and_a_registration_store_the_same_job(pool: asyncpg.Pool) -> None:
    """The pre-flight path and the API path validate alike, so what a file describes can be registered as is."""
    job = job_from_dict({"id": "slurm:7", "hosts": ["srv-g1-001", "srv-g1-001"], "started_at": "2026-11-20T12:00:00"})
    stored, _ = await job_store.save_job(pool, job)
    assert stored.hosts == ("srv-g1-001",) and stored.started_at == START
