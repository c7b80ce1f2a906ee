"""Stability SLOs from stored link events: availability, error budget, burn rates, job interruption."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from analyzer.config import SloConfig
from analyzer.jobs import Job, JobError, job_from_dict
from analyzer.objectives import evaluate_objectives, job_interruption
from fabric.model import FabricParams
from fabric.topology import build_aipod
from store.db import Connection, create_pool
from store.migrate import migrate
from store.records import LinkEvent

FABRIC = build_aipod(FabricParams(gpus=512))
NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)
LINKS = len(FABRIC.links)
UPLINKS = [f"swp{n}" for n in range(65, 70)]  # lf-g1-r1's uplinks: links counted from this end


def ago(**kw: float) -> datetime:
    return NOW - timedelta(**kw)


def burn(down_s: float, window_s: float, target: float = 0.9999) -> float:
    """The burn rate ``down_s`` link-seconds down in ``window_s`` stand for."""
    return (down_s / (LINKS * window_s)) / (1 - target)


async def _history(conn: Connection, since: datetime) -> None:
    """The deployment's first stored sample."""
    await conn.execute(
        "INSERT INTO port_counters (time, switch, port, oper_status) VALUES ($1, 'lf-g1-r8', 'swp1', 1) "
        "ON CONFLICT DO NOTHING",
        since,
    )


OLD = ago(days=40)  # a deployment older than the SLO window


async def _objectives(dsn: str, events: list[LinkEvent], first_sample: datetime | None = OLD) -> dict[str, Any]:
    pool = await create_pool(dsn)
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
            if first_sample is not None:
                await _history(conn, first_sample)
            await conn.copy_records_to_table("link_events", records=events, columns=LinkEvent._fields)
            objs = await evaluate_objectives(conn, FABRIC, SloConfig(), NOW, fatal_outage_s=7)
    finally:
        await pool.close()
    return {o.name: o for o in objs}


def _down(port: str, since: datetime, until: datetime | None = None, switch: str = "lf-g1-r1") -> list[LinkEvent]:
    """A link's outage as the collector records it: down, then (unless still down) up with its length."""
    out = [LinkEvent(since, switch, port, "up", "down")]
    if until is not None:
        out.append(LinkEvent(until, switch, port, "down", "up", (until - since).total_seconds()))
    return out


async def test_objectives_from_link_events(migrated_db: str) -> None:
    pool = await create_pool(migrated_db)
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
            await _history(conn, OLD)
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
    assert link.burn_rates["5m"] == link.burn_rates["30m"] == 0.0  # it ended 30 min ago
    assert link.measured_days == 30 and link.burn_alert is None and link.status == "ok"
    gpu = objs["gpu_network_availability"]
    assert gpu.current == pytest.approx(1 - 1 / 512)  # one fatal outage on one of 512 GPU links this month
    assert gpu.status == "critical"  # far below 0.99999


async def test_a_link_down_for_two_hours_burns_every_window_it_overlaps(fresh_db: str) -> None:
    # Three uplinks down since 2 h ago, still down: the down events are older than the 1 h window.
    objs = await _objectives(fresh_db, [e for p in UPLINKS[:3] for e in _down(p, ago(hours=2))])
    link = objs["link_availability"]
    for window, seconds in (("1h", 3600), ("30m", 1800), ("5m", 300)):
        assert link.burn_rates[window] == pytest.approx(burn(3 * seconds, seconds), rel=1e-3)
    assert link.burn_rates["6h"] == pytest.approx(burn(3 * 7200, 6 * 3600), rel=1e-3)
    assert link.burn_rates["1h"] > 14.4 and link.burn_rates["5m"] > 14.4
    assert link.burn_alert == "page" and link.status == "critical"
    assert link.as_dict()["burn_alert"] == "page" and set(link.as_dict()["burn_rates"]) == {"5m", "30m", "1h", "6h"}


async def test_a_burn_that_stopped_pages_no_one(fresh_db: str) -> None:
    # The same three links were down from 70 to 10 minutes ago: the 1 h window still burns fast,
    # the 5 min window has nothing, so no page (the workbook's short window resets the alert).
    objs = await _objectives(fresh_db, [e for p in UPLINKS[:3] for e in _down(p, ago(minutes=70), ago(minutes=10))])
    link = objs["link_availability"]
    assert link.burn_rates["1h"] == pytest.approx(burn(3 * 3000, 3600), rel=1e-3) and link.burn_rates["1h"] > 14.4
    assert link.burn_rates["5m"] == 0.0
    assert link.burn_rates["30m"] == pytest.approx(burn(3 * 1200, 1800), rel=1e-3)
    assert link.burn_alert is None and link.status == "ok"


async def test_a_slow_burn_opens_a_ticket(fresh_db: str) -> None:
    objs = await _objectives(fresh_db, [e for p in UPLINKS[:2] for e in _down(p, ago(hours=5))])
    link = objs["link_availability"]
    assert link.burn_rates["6h"] == pytest.approx(burn(2 * 5 * 3600, 6 * 3600), rel=1e-3) and link.burn_rates["6h"] > 6
    assert 6 < link.burn_rates["30m"] < 14.4 and link.burn_rates["1h"] < 14.4
    assert link.burn_alert == "ticket" and link.status == "warning"


async def test_an_ongoing_fatal_server_link_outage_lowers_gpu_availability(fresh_db: str) -> None:
    # A server's link (leaf down-port) down for a minute now, past the 7 s that stall a job.
    objs = await _objectives(fresh_db, _down("swp1", ago(minutes=1)))
    gpu = objs["gpu_network_availability"]
    assert gpu.current == pytest.approx(1 - 1 / 512)
    assert gpu.status == "critical"


async def test_a_server_link_down_for_less_than_the_fatal_threshold_is_not_fatal_yet(fresh_db: str) -> None:
    objs = await _objectives(fresh_db, _down("swp2", ago(seconds=3)))
    assert objs["gpu_network_availability"].current == 1.0


async def test_a_port_seen_up_without_an_up_event_is_not_down_forever(migrated_db: str) -> None:
    # The collector restarted while the link was down and came back to it up: no up transition
    # was recorded, but the port's first up sample ends the outage.
    pool = await create_pool(migrated_db)
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
            await _history(conn, OLD)
            await conn.copy_records_to_table(
                "link_events", records=_down("swp65", ago(hours=3)), columns=LinkEvent._fields
            )
            await conn.execute(
                "INSERT INTO port_counters (time, switch, port, oper_status) VALUES ($1, 'lf-g1-r1', 'swp65', 1)",
                ago(hours=2),
            )
            objs = {o.name: o for o in await evaluate_objectives(conn, FABRIC, SloConfig(), NOW, fatal_outage_s=7)}
    finally:
        await pool.close()
    link = objs["link_availability"]
    assert link.burn_rates["1h"] == 0.0
    assert link.burn_rates["6h"] == pytest.approx(burn(3600, 6 * 3600), rel=1e-3)


async def test_a_young_deployment_measures_the_history_it_has(fresh_db: str) -> None:
    # Monitoring began a day ago; a 10 min uplink outage 12 h ago and a 30 s server-link outage.
    events = _down("swp65", ago(hours=12, minutes=10), ago(hours=12))
    events += _down("swp1", ago(hours=6, seconds=30), ago(hours=6))
    objs = await _objectives(fresh_db, events, first_sample=ago(days=1))
    link, gpu = objs["link_availability"], objs["gpu_network_availability"]
    assert link.window_days == 30 and link.measured_days == pytest.approx(1.0)
    down = 600 + 30
    assert link.current == pytest.approx(1 - down / (LINKS * 86400), abs=1e-8)
    assert link.budget_remaining == pytest.approx(1 - (down / (LINKS * 86400)) / 1e-4, abs=1e-5)
    assert gpu.current == pytest.approx(1 - 30 / 512)  # one fatal outage a day is 30 a month
    assert gpu.measured_days == pytest.approx(1.0)


async def test_no_history_is_no_verdict_yet(fresh_db: str) -> None:
    objs = await _objectives(fresh_db, [], first_sample=None)
    for o in objs.values():
        assert o.current == 1.0 and o.budget_remaining == 1.0 and o.measured_days == 0.0 and o.status == "ok"
    assert set(objs["link_availability"].burn_rates.values()) == {0.0}


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
