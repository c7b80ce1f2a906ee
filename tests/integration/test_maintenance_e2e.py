"""A planned leaf reboot, inside a maintenance window and outside one, end to end: simulator →
collectors → TimescaleDB → analyzer → a signed webhook receiver, the window opened and the
incident read through the real API (SPEC §10.4).

The circuit breaker and the fleet's drain budget are opened wide here (64 hosts, the whole
fabric), so the reboot outside the window drains what the action table says a leaf reboot
drains: the leaf's 32 servers, which lost their only path on its rail (docs/guide/analyzer.md,
"Actions"; with the default breaker it would observe with ``needs_review``: tests/integration/test_incidents_e2e.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from analyzer.service import AnalyzerService
from api.app import create_app
from tests.integration.test_analyze_e2e import Lab, lab
from tests.integration.test_incidents_e2e import HOLD_DOWN_S
from tests.support.receiver import receiver
from tests.support.waiting import until

pytestmark = pytest.mark.asyncio(loop_scope="function")

LEAF = "lf-g1-r2"
BOOT_S = 15

#: the per-incident breaker and the fleet-wide drain budget (16 hosts, 5 % by default), wide open
WIDE = {"max_drain_hosts": 64, "max_drain_fraction": 1.0, "drain_budget_hosts": 64, "drain_budget_fraction": 1.0}


@contextlib.asynccontextmanager
async def analyzing(lb: Lab) -> AsyncIterator[AnalyzerService]:
    """The analyzer with the breaker and the drain budget wide open (a leaf's 32 hosts may be drained)."""
    config = lb.config.model_copy(
        update={
            "analyzer": lb.config.analyzer.model_copy(update={"resolve_hold_down_s": HOLD_DOWN_S}),
            "alerts": lb.config.alerts.model_copy(update=WIDE),
        }
    )
    service = AnalyzerService(config, lb.sim.fabric, lb.pool)
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(stop))
    try:
        yield service
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)


def rfc3339(t: datetime) -> str:
    return t.astimezone(UTC).isoformat().replace("+00:00", "Z")


def about_leaf(g: dict[str, Any]) -> bool:
    return LEAF in g["alert"]["scope"]["switches"] or g["alert"]["root_cause"].get("switch") == LEAF


def rules_of(g: dict[str, Any]) -> set[str]:
    return {g["alert"]["rule"], *(s["rule"] for s in g["alert"]["symptoms"])}


async def reboot(lb: Lab, service: AnalyzerService, got: list[dict[str, Any]], start: int) -> set[str]:
    """Reboot the leaf, wait for an incident about it, let the reboot end and every incident it
    opened resolve; every rule seen meanwhile in the analyzer's verdicts."""
    seen: set[str] = set()
    fault = lb.sim.state.apply({"kind": "reboot", "switch": LEAF, "boot_s": BOOT_S})

    def watch() -> bool:
        for inc in (service.last_report or {}).get("incidents", []):
            seen.update(inc["rules"])
        return any(g["event"] == "alert.firing" and about_leaf(g) for g in got[start:])

    await until(watch, 40, f"an incident about the rebooting {LEAF}")
    await asyncio.sleep(BOOT_S)
    lb.sim.state.clear(fault.id)

    def resolved() -> bool:
        watch()
        fired = {g["alert"]["id"] for g in got[start:] if g["event"] == "alert.firing"}
        return fired <= {g["alert"]["id"] for g in got[start:] if g["event"] == "alert.resolved"}

    await until(resolved, 60, "every incident of the reboot resolved")
    await until(lambda: (service.last_report or {}).get("status") == "healthy", 40, "a healthy fabric again")
    return seen


@pytest.mark.slow  # two leaf reboots through real collectors, ~2 min on 2 busy cores (make test-slow)
@pytest.mark.timeout(400)
async def test_a_planned_reboot_in_a_window_is_observed_the_same_reboot_outside_drains(
    fresh_db: str, tmp_path: Path
) -> None:
    async with receiver() as (url, got), lab(fresh_db, tmp_path, webhook=url) as lb, analyzing(lb) as service:
        hosts = sorted(lb.sim.fabric.servers_on(LEAF))
        assert len(hosts) == 32
        app: web.Application = create_app(lb.config, lb.sim.fabric, pool=lb.pool)
        async with TestClient(TestServer(app)) as api:
            await until(lambda: service.rounds > 6, 30, "the analyzer past its warm-up")
            now = datetime.now(UTC)
            resp = await api.post(
                "/v1/maintenance",
                json={
                    "switches": [LEAF],
                    "start": rfc3339(now - timedelta(seconds=5)),
                    "end": rfc3339(now + timedelta(minutes=30)),
                    "reason": "firmware upgrade",
                },
            )
            window = await resp.json()
            assert resp.status == 201, window

            # inside the window: one incident, marked, observed; no drain, no checkpoint, no error burst
            seen = await reboot(lb, service, got.items, 0)
            inside = [g for g in got.items if about_leaf(g)]
            assert inside and all(g["maintenance"] and g["alert"]["maintenance"] for g in inside), inside
            assert {g["recommended_action"] for g in got.items} == {"observe"}, [
                (g["alert"]["rule"], g["recommended_action"]) for g in got.items
            ]
            assert all(g["alert"]["severity"] == "warning" and not g["needs_review"] for g in inside)
            assert "error_rate" not in seen | {r for g in got.items for r in rules_of(g)}, seen
            incident = await (await api.get(f"/v1/incidents/{inside[0]['alert']['id']}")).json()
            assert incident["maintenance"] is True and incident["recommended_action"] == "observe"
            assert incident["details"]["maintenance_windows"] == [window["id"]]
            assert "firmware upgrade" in incident["reason"]

            # the work is done: the window is cancelled (it ends now, its events stay the window's)
            assert (await api.delete(f"/v1/maintenance/{window['id']}")).status == 204
            await asyncio.sleep(3 * lb.config.analyzer.interval_s)
            after = len(got.items)

            # the same reboot outside any window: the leaf's hosts lost their rail-2 path, drained
            await reboot(lb, service, got.items, after)
            outside = [g for g in got.items[after:] if about_leaf(g)]
            drains = [g for g in outside if g["recommended_action"] == "drain"]
            assert drains and not any(g["maintenance"] for g in outside), [
                (g["alert"]["rule"], g["recommended_action"], g["maintenance"]) for g in outside
            ]
            assert sorted(drains[0]["action_hosts"]) == hosts
