"""Stability SLOs from stored link events: availability, error budget, burn rates, job interruption."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from analyzer.config import SloConfig
from analyzer.jobs import Job, JobError, job_from_dict
from analyzer.objectives import evaluate_objectives, job_interruption
from fabric.model import FabricParams
from fabric.topology import build_aipod
from store.db import create_pool
from store.migrate import migrate
from store.records import LinkEvent

FABRIC = build_aipod(FabricParams(gpus=512))
NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


async def test_objectives_from_link_events(fresh_db: str) -> None:
    pool = await create_pool(fresh_db)
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
            events = [
                # A server link (leaf down-port) down 30 s, 3 days ago: training-fatal.
                LinkEvent(NOW - timedelta(days=3, seconds=30), "lf-g1-r1", "swp1", "up", "down"),
                LinkEvent(NOW - timedelta(days=3), "lf-g1-r1", "swp1", "down", "up", 30.0),
                # A leaf uplink down 120 s, 30 min ago, reported by both ends: counted once (the leaf's).
                LinkEvent(NOW - timedelta(minutes=32), "lf-g1-r2", "swp65", "up", "down"),
                LinkEvent(NOW - timedelta(minutes=30), "lf-g1-r2", "swp65", "down", "up", 120.0),
                LinkEvent(NOW - timedelta(minutes=30), "sp-r2-1", "swp1", "down", "up", 120.0),
            ]
            await conn.copy_records_to_table("link_events", records=events, columns=LinkEvent._fields)
            slo = SloConfig(window_days=30, link_availability=0.9999)
            objs = {o.name: o for o in await evaluate_objectives(conn, FABRIC, slo, NOW, fatal_outage_s=7)}
    finally:
        await pool.close()
    links = len(FABRIC.links)
    link = objs["link_availability"]
    assert link.current == pytest.approx(1 - 150 / (links * 30 * 86400), abs=1e-8)
    assert 0 < link.budget_remaining < 1
    # The 1 h burn: 120 down-seconds in an hour, against a 0.01 % budget.
    assert link.burn_rates["1h"] == pytest.approx((120 / (links * 3600)) / 1e-4, rel=1e-3)
    gpu = objs["gpu_network_availability"]
    assert gpu.current == pytest.approx(1 - 1 / 512)  # one fatal outage on one of 512 GPU links this month
    assert gpu.status == "critical"  # far below 0.99999


def test_job_interruption_follows_the_model() -> None:
    assert job_interruption(0.9999, 8000, 30) == pytest.approx(0.551, abs=1e-3)
    assert job_interruption(0.999, 1000, 30) == pytest.approx(0.632, abs=1e-3)
    assert job_interruption(0.9999, 8000, 0) == 0.0


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"hosts": []}, "non-empty list"),
        ({"hosts": ["a"], "expected_days": 0}, "expected_days"),
        ({"hosts": ["a"], "started_at": "yesterday"}, "ISO 8601"),
        ({"hosts": ["a"], "gpus": 8}, "unknown key"),
        ("not a mapping", "mapping"),
    ],
)
def test_bad_jobs_are_clear_errors(data: object, message: str) -> None:
    with pytest.raises(JobError, match=message):
        job_from_dict(data)


def test_remaining_days() -> None:
    job = job_from_dict({"hosts": ["srv-g1-001"], "started_at": "2026-11-20T12:00:00+00:00", "expected_days": 15})
    assert isinstance(job, Job) and job.remaining_days(NOW) == pytest.approx(5.0)
