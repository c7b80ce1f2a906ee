"""Safe actions at fleet scale (issue 25, item 3) on a real TimescaleDB: the drain budget and the
checkpoint breaker across incidents, no replay of a held-back or stale action, resumes released
only after the clean window, and one escalation per growth of a blast radius."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from analyzer.actions import ActionPolicy, decide_all
from analyzer.alert_queries import list_alerts
from analyzer.alerts import SyncResult, sync_alerts
from analyzer.budget import FleetLimits
from analyzer.config import AlertsConfig, WebhookConfig
from analyzer.correlation import correlate
from analyzer.findings import Finding
from analyzer.incident_model import Incident
from analyzer.links import links_scope
from fabric.model import FabricParams
from fabric.topology import build_aipod
from schedulers.config import SlurmConfig
from schedulers.executor import SCHEDULER, SlurmExecutor
from store.scheduler_actions import Policy, claim, list_actions

pytestmark = pytest.mark.db

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
HOLD = 60.0
HOOK = WebhookConfig(url="http://127.0.0.1:9/a")
FABRIC = build_aipod(FabricParams(gpus=1024))  # 128 servers
#: one incident may drain up to 8 hosts here (the per-incident breaker is not what is tested)
SETTINGS = AlertsConfig(max_drain_hosts=8, max_drain_fraction=1.0)
SLURM = Policy(SCHEDULER, drain=True, checkpoint=True)


def server_link(leaf: str, port: int, rule: str = "link_flapping", severity: str = "critical") -> Finding:
    key = f"{leaf}:swp{port}"
    details: dict[str, Any] = {"flaps": 5} if rule == "link_flapping" else {"down_now": True, "down_for_s": 30.0}
    return Finding(rule, key, severity, f"{key} {rule}", links_scope(FABRIC, [(leaf, f"swp{port}")]), details)  # type: ignore[arg-type]


def storm(held: list[str]) -> Finding:
    """A PFC storm from lf-g1-r2's first uplink whose pause tree holds ``held`` too."""
    ports = [("lf-g1-r2", "swp65"), *(tuple(h.split(":", 1)) for h in held)]
    return Finding(
        rule="pfc_storm",
        key="lf-g1-r2:swp65:3",
        severity="critical",
        summary="PFC storm from lf-g1-r2:swp65",
        scope=links_scope(FABRIC, ports),  # type: ignore[arg-type]
        details={"origin": {"port": "lf-g1-r2:swp65"}, "affected_ports": sorted({f"{s}:{p}" for s, p in ports})},
    )


def decided(findings: list[Finding]) -> list[Incident]:
    return decide_all(correlate(findings, FABRIC), FABRIC, ActionPolicy.from_config(SETTINGS))


async def sync(pool: asyncpg.Pool, findings: list[Finding], at: datetime, **kw: Any) -> SyncResult:
    kw.setdefault("fleet", FleetLimits(drain=1, checkpoint=1000))
    return await sync_alerts(pool, decided(findings), now=at, hold_down_s=HOLD, webhooks=[HOOK], **kw)


async def alert_of(pool: asyncpg.Pool, key: str) -> dict[str, Any]:
    return next(a for a in await list_alerts(pool, "all") if a["root_cause"].get("key") == key)


async def sent(pool: asyncpg.Pool) -> list[dict[str, Any]]:
    """The deliveries a receiver gets (superseded ones never are), oldest first."""
    rows = await pool.fetch("SELECT body FROM webhook_deliveries WHERE status <> 'superseded' ORDER BY seq")
    return [json.loads(bytes(r["body"])) for r in rows]


async def test_the_second_of_two_unrelated_drains_exceeds_the_budget_and_is_held_for_review(
    pool: asyncpg.Pool,
) -> None:
    a, b = server_link("lf-g1-r1", 3), server_link("lf-g2-r5", 7)
    r = await sync(pool, [a], T0, schedulers=(SLURM,))
    assert (r.fired, r.actions) == (1, 1)
    r = await sync(pool, [a, b], T0 + timedelta(seconds=10), schedulers=(SLURM,))
    assert r.fired == 1
    first, second = await alert_of(pool, "lf-g1-r1:swp3"), await alert_of(pool, "lf-g2-r5:swp7")
    assert (first["recommended_action"], first["needs_review"]) == ("drain", False)
    assert (second["recommended_action"], second["needs_review"], second["severity"]) == ("observe", True, "critical")
    assert second["action_hosts"] == ["srv-g2-007"]
    assert "drain budget" in second["reason"] and "more than 1" in second["reason"]
    body = (await sent(pool))[-1]
    assert body["alert"]["id"] == second["id"] and body["recommended_action"] == "observe"
    rows, _ = await list_actions(pool)
    assert {(x.alert_id, x.action, x.status) for x in rows} == {
        (first["id"], "drain", "pending"),
        (second["id"], "drain", "withheld"),  # audited, never executed
    }

    # the smaller of hosts and fraction wins: 5 % of 128 servers is 6 hosts, whatever the absolute cap
    policy = ActionPolicy.from_config(AlertsConfig(drain_budget_hosts=16, drain_budget_fraction=0.05))
    assert policy.drain_budget(128) == 6 and policy.drain_budget(1000) == 16 and policy.drain_budget(3) == 1


async def test_a_host_drained_by_a_resolved_incident_counts_until_it_is_resumed(pool: asyncpg.Pool) -> None:
    a, b = server_link("lf-g1-r1", 3), server_link("lf-g2-r5", 7)
    await sync(pool, [a], T0, schedulers=(SLURM,), resume_after_s=600)
    await sync(pool, [], T0 + timedelta(seconds=HOLD), schedulers=(SLURM,), resume_after_s=600)
    assert (await alert_of(pool, "lf-g1-r1:swp3"))["state"] == "resolved"
    # srv-g1-003 stays drained for the clean window: the budget is still spent
    await sync(pool, [b], T0 + timedelta(seconds=HOLD + 10), schedulers=(SLURM,), resume_after_s=600)
    assert (await alert_of(pool, "lf-g2-r5:swp7"))["needs_review"] is True


async def test_a_budget_that_frees_up_never_replays_the_held_back_drain(pool: asyncpg.Pool) -> None:
    a, b = server_link("lf-g1-r1", 3), server_link("lf-g2-r5", 7)
    await sync(pool, [a], T0)
    await sync(pool, [a, b], T0 + timedelta(seconds=10))
    held = await alert_of(pool, "lf-g2-r5:swp7")
    assert held["needs_review"] is True
    # the first incident resolves: the budget frees up, the held one's fault is still there
    for i in range(1, 5):
        await sync(pool, [b], T0 + timedelta(seconds=10 + HOLD * i))
    assert (await alert_of(pool, "lf-g1-r1:swp3"))["state"] == "resolved"
    again = await alert_of(pool, "lf-g2-r5:swp7")
    assert (again["recommended_action"], again["needs_review"]) == ("observe", True)
    assert "drain budget" in again["reason"]  # it keeps saying why it was held back
    mine = [x for x in await sent(pool) if x["alert"]["id"] == held["id"]]
    assert [(x["event"], x["recommended_action"]) for x in mine] == [("alert.firing", "observe")]  # nothing more
    # the held incident ends; its fault, seen again in a later evaluation, is decided afresh: a drain
    end = T0 + timedelta(seconds=10 + HOLD * 6)
    await sync(pool, [], end)
    r = await sync(pool, [b], end + timedelta(seconds=10))
    assert r.fired == 1
    (fresh,) = await list_alerts(pool, "firing")
    assert (fresh["recommended_action"], fresh["needs_review"], fresh["id"] != held["id"]) == ("drain", False, True)


async def test_a_stale_firing_delivery_is_superseded_never_sent(pool: asyncpg.Pool) -> None:
    """A drain sent while the receiver is away, then held back by the budget and resolved: after a
    restart the sender finds only what is true now."""
    a, b = server_link("lf-g1-r1", 3), server_link("lf-g2-r5", 7)
    await sync(pool, [b], T0, fleet=FleetLimits(drain=8, checkpoint=8))  # fires as a drain
    await sync(pool, [b], T0 + timedelta(seconds=10), fleet=None)
    await sync(pool, [], T0 + timedelta(seconds=10 + HOLD))  # resolved before the receiver came back
    rows = await pool.fetch("SELECT event, status FROM webhook_deliveries ORDER BY seq")
    assert [(r["event"], r["status"]) for r in rows] == [("alert.firing", "superseded"), ("alert.resolved", "pending")]
    # a delivery already sent is history, not superseded: only pending ones are
    await sync(pool, [a], T0 + timedelta(seconds=200))
    await pool.execute("UPDATE webhook_deliveries SET status = 'delivered' WHERE status = 'pending'")
    await sync(pool, [], T0 + timedelta(seconds=200 + HOLD))
    rows = await pool.fetch("SELECT event, status FROM webhook_deliveries ORDER BY seq")
    assert [r["status"] for r in rows[2:]] == ["delivered", "pending"]


async def test_a_checkpoint_over_the_breaker_across_incidents_is_held_and_a_stored_one_not_run(
    pool: asyncpg.Pool,
) -> None:
    errors = server_link("lf-g2-r5", 7, rule="error_rate")  # a critical error rate: checkpoint that host
    fleet = FleetLimits(drain=100, checkpoint=64)
    r = await sync(pool, [storm(["sp-r2-1:swp1"])], T0, fleet=fleet, schedulers=(SLURM,))
    (st,) = await list_alerts(pool, "firing")
    assert (st["recommended_action"], len(st["action_hosts"]), r.actions) == ("checkpoint", 64, 1)
    await sync(pool, [storm(["sp-r2-1:swp1"]), errors], T0 + timedelta(seconds=10), fleet=fleet, schedulers=(SLURM,))
    second = await alert_of(pool, "lf-g2-r5:swp7")
    assert (second["recommended_action"], second["needs_review"]) == ("observe", True)
    assert second["action_hosts"] == ["srv-g2-007"] and "checkpoint circuit breaker" in second["reason"]
    rows, _ = await list_actions(pool)
    assert {(x.alert_id, x.action, x.status) for x in rows} == {
        (st["id"], "checkpoint", "pending"),
        (second["id"], "checkpoint", "withheld"),  # audited, never run
    }

    # the storm's own checkpoint, still queued when a breaker holds its incident back: never signalled
    await pool.execute("UPDATE alerts SET needs_review = true WHERE id = $1", st["id"])
    executor = SlurmExecutor(pool, SlurmConfig(checkpoint_signal="USR1"))
    row = await claim(pool, SCHEDULER, 60)
    assert row is not None
    plan = await executor.plan(row)
    assert plan.status == "withheld" and plan.ops == ()


async def test_a_storm_that_spreads_escalates_once_per_growth_not_per_flicker(pool: asyncpg.Pool) -> None:
    fleet = FleetLimits(drain=100, checkpoint=1000)
    r = await sync(pool, [storm(["sp-r2-1:swp1"])], T0, fleet=fleet)
    assert r.deliveries == 1
    (a,) = await list_alerts(pool, "firing")
    told = await pool.fetchval("SELECT notified_servers FROM alerts WHERE id = $1", a["id"])
    assert len(a["scope"]["servers"]) == 64 and told == a["scope"]["servers"] and "notified_servers" not in a["details"]
    # it spreads through the spine to group 2's leaf: 128 hosts now, one escalation
    grown = storm(["sp-r2-1:swp1", "sp-r2-1:swp33"])
    r = await sync(pool, [grown], T0 + timedelta(seconds=10), fleet=fleet)
    assert (r.escalated, r.deliveries) == (1, 1)
    body = (await sent(pool))[-1]
    assert body["event"] == "alert.firing" and body["alert"]["id"] == a["id"]
    assert len(body["alert"]["scope"]["servers"]) == 128
    # it flickers between the two: nothing more
    for i, f in enumerate([storm(["sp-r2-1:swp1"]), grown, storm(["sp-r2-1:swp1"]), grown]):
        r = await sync(pool, [f], T0 + timedelta(seconds=20 + 10 * i), fleet=fleet)
        assert (r.escalated, r.deliveries) == (0, 0)
    assert await pool.fetchval("SELECT count(*) FROM webhook_deliveries") == 2
