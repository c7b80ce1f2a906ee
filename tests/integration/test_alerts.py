"""The alert lifecycle on a real TimescaleDB: fire once, hold down, resolve, survive restarts, ack."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from analyzer.alerts import AlertInputError, SyncResult, ack_alert, get_alert, list_alerts, sync_alerts
from analyzer.config import AlertsConfig, WebhookConfig
from analyzer.findings import Finding, Scope
from analyzer.outbox import webhook_key
from store.db import create_pool
from store.migrate import migrate

pytestmark = pytest.mark.db

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
HOLD = 60.0
HOOKS = [
    WebhookConfig(url="http://127.0.0.1:9/a", secret="s3cret"),
    WebhookConfig(url="http://127.0.0.1:9/b", format="alertmanager"),
]


@pytest.fixture
async def pool(fresh_db: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(fresh_db)
    async with pool.acquire() as conn:
        await migrate(conn)
    yield pool
    await pool.close()


def outage(port: int = 3, severity: str = "critical", **details: object) -> Finding:
    server = f"srv-g1-{port:03d}"
    return Finding(
        rule="link_outage",
        key=f"lf-g1-r1:swp{port}",
        severity=severity,  # type: ignore[arg-type]
        summary=f"lf-g1-r1:swp{port} is down",
        scope=Scope(
            switches=("lf-g1-r1",),
            ports=(f"lf-g1-r1:swp{port}",),
            rails=(1,),
            groups=(1,),
            servers=(server,),
            gpus=1,
        ),
        details=dict(details),
    )


def drift(severity: str = "warning", loss: float = 0.01) -> Finding:
    servers = tuple(f"srv-g2-{i:03d}" for i in range(1, 5))
    return Finding(
        rule="oversubscription_drift",
        key="lf-g2-r3",
        severity=severity,  # type: ignore[arg-type]
        summary="lf-g2-r3 down:up 1.33 (design 1.00)",
        scope=Scope(switches=("lf-g2-r3",), rails=(3,), groups=(2,), servers=servers, gpus=4),
        details={"ratio": 1.333, "efficiency_loss": loss},
    )


async def deliveries(pool: asyncpg.Pool) -> list[Any]:
    return list(await pool.fetch("SELECT * FROM webhook_deliveries ORDER BY seq"))


async def sync(pool: asyncpg.Pool, findings: list[Finding], at: datetime, **kw: Any) -> SyncResult:
    return await sync_alerts(pool, findings, now=at, hold_down_s=HOLD, webhooks=HOOKS, **kw)


async def test_fire_hold_down_resolve(pool: asyncpg.Pool) -> None:
    f = outage()
    r = await sync(pool, [f], T0)
    assert (r.fired, r.updated, r.resolved, r.deliveries) == (1, 0, 0, 2)
    firing = await list_alerts(pool, "firing")
    assert len(firing) == 1
    a = firing[0]
    assert a["fingerprint"] == f.fingerprint and a["rule"] == "link_outage" and a["state"] == "firing"
    assert a["scope"]["servers"] == ["srv-g1-003"] and a["started_at"] == "2026-11-30T12:00:00.000Z"
    assert a["ended_at"] is None
    rows = await deliveries(pool)
    assert {r["webhook"] for r in rows} == {webhook_key(h) for h in HOOKS}
    assert {r["event"] for r in rows} == {"alert.firing"} and all(r["status"] == "pending" for r in rows)
    # the outbox never stores a secret or the URL
    assert all(b"s3cret" not in bytes(r["body"]) and "127.0.0.1" not in r["webhook"] for r in rows)
    by_key = {r["webhook"]: json.loads(bytes(r["body"])) for r in rows}
    body = by_key[webhook_key(HOOKS[0])]
    assert body["event"] == "alert.firing" and body["alert"]["id"] == a["id"]
    assert body["recommended_action"] == "drain"
    assert by_key[webhook_key(HOOKS[1])]["version"] == "4"

    # the same finding again: no new alert, no new delivery
    r = await sync(pool, [f], T0 + timedelta(seconds=10))
    assert (r.fired, r.updated, r.resolved, r.deliveries) == (0, 1, 0, 0)
    assert len(await deliveries(pool)) == 2
    assert (await get_alert(pool, a["id"])).last_seen_at == T0 + timedelta(seconds=10)  # type: ignore[union-attr]

    # gone, but for less than the hold-down: still firing
    r = await sync(pool, [], T0 + timedelta(seconds=10 + HOLD - 1))
    assert (r.resolved, r.deliveries) == (0, 0)
    assert [x["id"] for x in await list_alerts(pool, "firing")] == [a["id"]]

    # gone for the hold-down: resolved, one delivery per webhook
    end = T0 + timedelta(seconds=10 + HOLD)
    r = await sync(pool, [], end)
    assert (r.resolved, r.deliveries) == (1, 2)
    assert await list_alerts(pool, "firing") == []
    (done,) = await list_alerts(pool, "resolved")
    assert done["state"] == "resolved" and done["ended_at"] == "2026-11-30T12:01:10.000Z"
    rows = await deliveries(pool)
    assert [r["event"] for r in rows[2:]] == ["alert.resolved", "alert.resolved"]
    resolved = json.loads(bytes(rows[2]["body"]))
    assert resolved["alert"]["state"] == "resolved" and resolved["recommended_action"] == "observe"

    # it comes back: a new alert, fired again
    r = await sync(pool, [f], end + timedelta(seconds=10))
    assert r.fired == 1 and r.deliveries == 2
    assert len(await list_alerts(pool, "all")) == 2


async def test_restart_neither_refires_nor_forgets(pool: asyncpg.Pool, fresh_db: str) -> None:
    await sync(pool, [outage(1), outage(2)], T0)
    assert len(await deliveries(pool)) == 4
    await pool.close()

    # a new analyzer process: new pool, nothing in memory
    pool2 = await create_pool(fresh_db)
    try:
        r = await sync(pool2, [outage(1), outage(2)], T0 + timedelta(seconds=30))
        assert (r.fired, r.updated, r.deliveries) == (0, 2, 0)
        assert len(await deliveries(pool2)) == 4
        # it remembers what was last seen: outage(2) gone just after the restart resolves on time
        r = await sync(pool2, [outage(1)], T0 + timedelta(seconds=30 + HOLD))
        assert (r.resolved, r.deliveries) == (1, 2)
        assert [a["fingerprint"] for a in await list_alerts(pool2, "firing")] == [outage(1).fingerprint]
    finally:
        await pool2.close()


async def test_escalation_notifies_once(pool: asyncpg.Pool) -> None:
    settings = AlertsConfig(checkpoint_efficiency_loss=0.05)
    r = await sync(pool, [drift("warning", 0.01)], T0, settings=settings)
    assert r.deliveries == 2
    body = json.loads(bytes((await deliveries(pool))[0]["body"]))
    assert body["recommended_action"] == "observe"
    # the efficiency loss crosses the checkpoint threshold: one more firing, same alert
    r = await sync(pool, [drift("warning", 0.08)], T0 + timedelta(seconds=10), settings=settings)
    assert (r.escalated, r.deliveries) == (1, 2)
    rows = await deliveries(pool)
    again = json.loads(bytes(rows[-2]["body"]))
    assert again["event"] == "alert.firing" and again["alert"]["id"] == body["alert"]["id"]
    assert again["recommended_action"] == "checkpoint"
    # critical now: escalation again; then see-saw between warning and critical: silent
    r = await sync(pool, [drift("critical", 0.08)], T0 + timedelta(seconds=20), settings=settings)
    assert r.escalated == 1
    for i, sev in enumerate(["warning", "critical", "warning", "critical"]):
        r = await sync(pool, [drift(sev, 0.08)], T0 + timedelta(seconds=30 + 10 * i), settings=settings)
        assert r.escalated == 0 and r.deliveries == 0
    (a,) = await list_alerts(pool, "firing")
    assert a["severity"] == "critical" and len(await deliveries(pool)) == 6


async def test_duplicates_and_unevaluated_rules(pool: asyncpg.Pool) -> None:
    r = await sync(pool, [outage(1, "warning"), outage(1, "critical"), drift()], T0)
    assert r.fired == 2
    sev = {a["rule"]: a["severity"] for a in await list_alerts(pool)}
    assert sev == {"link_outage": "critical", "oversubscription_drift": "warning"}
    # the stability check did not run this round: its alert stays firing past the hold-down
    later = T0 + timedelta(seconds=2 * HOLD)
    r = await sync(pool, [drift()], later, evaluated_rules={"oversubscription_drift"})
    assert r.resolved == 0
    r = await sync(pool, [drift()], later, evaluated_rules={"oversubscription_drift", "link_outage"})
    assert r.resolved == 1


async def test_no_webhooks_no_deliveries(pool: asyncpg.Pool) -> None:
    r = await sync_alerts(pool, [outage()], now=T0, hold_down_s=0, webhooks=[])
    assert r.fired == 1 and r.deliveries == 0
    r = await sync_alerts(pool, [], now=T0, hold_down_s=0, webhooks=[])
    assert r.resolved == 1
    assert await deliveries(pool) == []


async def test_ack(pool: asyncpg.Pool) -> None:
    await sync(pool, [outage()], T0)
    (a,) = await list_alerts(pool)
    acked = await ack_alert(pool, a["id"], "oncall@example.com")
    assert acked is not None and acked.acked_at is not None and acked.acked_by == "oncall@example.com"
    again = await ack_alert(pool, a["id"], "someone-else")
    assert again is not None and again.acked_by == "oncall@example.com" and again.acked_at == acked.acked_at
    assert (await list_alerts(pool))[0]["acked_by"] == "oncall@example.com"
    assert await ack_alert(pool, 999_999, None) is None
    # acknowledging sends nothing and keeps it firing
    assert len(await deliveries(pool)) == 2
    assert (await list_alerts(pool, "firing"))[0]["state"] == "firing"


async def test_list_paging_and_bad_input(pool: asyncpg.Pool) -> None:
    await sync(pool, [outage(i) for i in range(1, 6)], T0)
    page1 = await list_alerts(pool, "all", limit=2)
    page2 = await list_alerts(pool, "all", limit=2, offset=2)
    assert len(page1) == 2 and len(page2) == 2 and not {a["id"] for a in page1} & {a["id"] for a in page2}
    expected = {"id", "fingerprint", "rule", "severity", "state", "summary", "scope", "started_at", "ended_at"}
    assert expected <= set(page1[0])
    for kw in ({"state": "open"}, {"limit": 0}, {"limit": 10_000}, {"offset": -1}):
        with pytest.raises(AlertInputError):
            await list_alerts(pool, **kw)
    with pytest.raises(AlertInputError):
        await sync_alerts(pool, [], now=datetime(2026, 1, 1), hold_down_s=1, webhooks=[])  # noqa: DTZ001
    with pytest.raises(AlertInputError):
        await sync_alerts(pool, [], now=T0, hold_down_s=-1, webhooks=[])


async def test_affected_jobs_and_inventory_placement(pool: asyncpg.Pool) -> None:
    await pool.execute(
        "INSERT INTO jobs (id, hosts) VALUES ('llm-a', $1), ('llm-b', $2)",
        ["srv-g1-003", "srv-g1-004"],
        ["srv-g9-001"],
    )
    # the inventory says swp3 is an uplink: an outage there is no host's only path (critical -> checkpoint)
    await pool.execute("INSERT INTO switches (name, role, rail, grp) VALUES ('lf-g1-r1', 'leaf', 1, 1)")
    await pool.execute("INSERT INTO ports (switch, port, direction) VALUES ('lf-g1-r1', 'swp3', 'up')")
    await sync(pool, [outage(3)], T0)
    body = json.loads(bytes((await deliveries(pool))[0]["body"]))
    assert body["jobs"] == [{"id": "llm-a", "affected_hosts": ["srv-g1-003"]}]
    assert body["recommended_action"] == "checkpoint"
    assert body["affected"] == {
        "switches": ["lf-g1-r1"],
        "ports": ["lf-g1-r1:swp3"],
        "rails": [1],
        "servers": ["srv-g1-003"],
        "gpus": 1,
    }
