"""Every route of SPEC §4 on real data: a simulated 512-GPU fabric fed through the collectors'
pipeline into TimescaleDB, with a leaf uplink down and a PFC storm, one stored analyzer verdict
and its alerts (tests/support/api_lab.py), served by the app through aiohttp's test client."""

from __future__ import annotations

import io
import time
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from typing import Any
from urllib.parse import quote

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.core import GaugeMetricFamily

from api.app import create_app
from store.db import create_pool
from store.migrate import migrate
from store.pgserver import EmbeddedStore
from tests.support.api_lab import (
    CONFIG,
    DOWN_LEAF,
    FABRIC,
    JOB_HOSTS,
    STORM_LEAF,
    STORM_PORT,
    Seeded,
    port,
    seeded_database,
)

UPLINK = port(DOWN_LEAF, 17)  # the first uplink at radix 32: et-0/0/8:0 on this Junos leaf
FIRST = port(DOWN_LEAF, 1)


def q(name: str) -> str:
    """A name as it travels in a URL: percent-encoded, "/" and ":" included."""
    return quote(name, safe="")


PROBLEM = "application/problem+json"
Client = TestClient[web.Request, web.Application]


class Extra:
    """A collector standing in for the ones ``fabricmon run`` passes."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily("fabricmon_test_extra", "an extra collector", value=7)


@pytest.fixture(scope="module")
def seeded(pg_store: EmbeddedStore) -> Iterator[Seeded]:
    with seeded_database(pg_store) as s:
        yield s


@pytest.fixture(scope="module")
async def client(seeded: Seeded) -> AsyncIterator[Client]:
    app = create_app(CONFIG, FABRIC, dsn=seeded.dsn, extra_collectors=[Extra()])
    async with TestClient(TestServer(app)) as c:
        yield c


async def get_json(client: Client, path: str, status: int = 200) -> Any:
    resp = await client.get(path)
    body = await resp.json(content_type=None)
    assert resp.status == status, (path, body)
    assert resp.content_type == ("application/json" if status < 400 else PROBLEM)
    return body


async def problem(client: Client, method: str, path: str, status: int, **kwargs: Any) -> dict[str, Any]:
    resp = await client.request(method, path, **kwargs)
    assert resp.status == status, (path, await resp.text())
    assert resp.content_type == PROBLEM
    body: dict[str, Any] = await resp.json(content_type=None)
    assert body["status"] == status and body["type"].startswith("https://") and body["title"] and body["detail"]
    return body


async def test_liveness_and_readiness(client: Client) -> None:
    assert await get_json(client, "/healthz") == {"status": "ok"}
    assert await get_json(client, "/readyz") == {"status": "ready"}


async def test_health_is_the_stored_verdict(client: Client, seeded: Seeded) -> None:
    h = await get_json(client, "/v1/health")
    assert h["status"] == "critical" == seeded.report["status"]
    assert set(h["checks"]) == {"rail_symmetry", "oversubscription", "stability", "collection"}
    assert h["checks"]["collection"]["status"] == "healthy"
    rules = {f["rule"] for c in h["checks"].values() for f in c["findings"]}
    assert {"oversubscription_drift", "rail_capacity_asymmetry", "link_outage", "pfc_storm"} <= rules
    drift = h["checks"]["oversubscription"]["findings"][0]
    assert drift["key"] == DOWN_LEAF and drift["scope"]["gpus"] == 16
    assert h["updated_at"].startswith(seeded.evaluated_at.strftime("%Y-%m-%dT%H:%M:%S"))


def incident_severity(report: dict[str, Any], member: str) -> str:
    """The severity of the sent incident holding finding ``rule|key``."""
    (severity,) = {i["severity"] for i in report["incidents"] if not i["pending"] and member in i["members"]}
    return str(severity)


async def test_switches_list_filters_and_pages(client: Client, seeded: Seeded) -> None:
    body = await get_json(client, "/v1/switches?limit=500")
    assert body["total"] == len(FABRIC.switches) == len(body["items"])
    by_name = {s["name"]: s for s in body["items"]}
    down = by_name[DOWN_LEAF]
    assert down["role"] == "leaf" and down["group"] == 2 and down["rail"] == 3
    # one severity: the leaf shows its incident's (a lost uplink, observed: a warning), not the
    # critical of the link_outage finding that incident holds
    assert incident_severity(seeded.report, f"oversubscription_drift|{DOWN_LEAF}") == "warning"
    assert down["status"] == "degraded" and down["findings"] >= 3
    assert down["reachability"]["state"] == "connected" and down["last_sample_at"] is not None
    assert (down["ports_up"], down["ports_reporting"], down["ports_total"]) == (31, 32, 32)
    assert by_name["lf-g1-r1"]["status"] == "healthy" and by_name["lf-g1-r1"]["ports_up"] == 32
    leaves = await get_json(client, "/v1/switches?role=leaf&rail=3")
    assert [s["name"] for s in leaves["items"]] == [f"lf-g{g}-r3" for g in range(1, 5)]
    page = await get_json(client, "/v1/switches?limit=7&offset=77")
    assert (page["total"], len(page["items"])) == (80, 3)
    past = await get_json(client, "/v1/switches?offset=500")
    assert (past["total"], past["items"]) == (80, [])


async def test_one_switch_and_unknown_switch(client: Client) -> None:
    sw = await get_json(client, f"/v1/switches/{DOWN_LEAF}")
    assert sw["name"] == DOWN_LEAF and sw["ports_up"] == 31
    body = await problem(client, "GET", "/v1/switches/no-such-switch", 404)
    assert "no-such-switch" in body["detail"]


async def test_ports_show_the_downed_uplink_and_the_storm(client: Client) -> None:
    body = await get_json(client, f"/v1/switches/{DOWN_LEAF}/ports")
    ports = {p["name"]: p for p in body["items"]}
    assert body["total"] == 32 == len(ports)
    up = ports[UPLINK]
    assert UPLINK == "et-0/0/8:0"  # a Junos breakout: '/' and ':' in the name
    assert up["oper_status"] == "down" and up["direction"] == "up" and up["flaps_24h"] == 1
    assert up["peer"] == {"node": "sp-r3-1", "port": port("sp-r3-1", 5), "kind": "leaf-spine"}
    assert ports[FIRST]["oper_status"] == "up" and ports[FIRST]["in_bps"] > 0
    assert ports[FIRST]["speed_bps"] == 400_000_000_000 and ports[FIRST]["peer"] == {
        "node": "srv-g2-001", "port": "mlx5_2", "kind": "server-leaf"
    }  # fmt: skip
    storm = await get_json(client, f"/v1/switches/{STORM_LEAF}/ports?limit=2&offset=1")
    assert [p["name"] for p in storm["items"]] == [port(STORM_LEAF, 2), port(STORM_LEAF, 3)]
    assert storm["items"][0]["pfc_tx_pause_pps"] > 1000
    # A quiet port's PFC rows are stored on change only: none in the window, yet it reads 0, not unknown.
    assert storm["items"][1]["pfc_tx_pause_pps"] == 0
    await problem(client, "GET", "/v1/switches/nope/ports", 404)
    await problem(client, "GET", "/v1/switches/%FF%FE/ports", 400)  # not UTF-8


async def test_rails_heat_map_and_asymmetry(client: Client, seeded: Seeded) -> None:
    body = await get_json(client, "/v1/rails")
    assert body["groups"] == [1, 2, 3, 4] and [r["rail"] for r in body["rails"]] == list(range(1, 9))
    rails = {r["rail"]: r for r in body["rails"]}
    r3 = rails[3]
    assert incident_severity(seeded.report, "rail_capacity_asymmetry|rail-3") == "warning"
    assert r3["status"] == "degraded" and r3["bottleneck"] == DOWN_LEAF  # its incident's severity
    assert r3["bottleneck_fraction"] == pytest.approx(15 / 16, abs=1e-3)
    cells = {c["group"]: c for c in r3["groups"]}
    assert cells[2]["status"] == "degraded" and cells[1]["status"] == "healthy" and cells[2]["summaries"]
    assert rails[5]["pfc_pause_ratio"] > 0 and rails[1]["pfc_pause_ratio"] == 0
    assert rails[1]["status"] == "healthy" and rails[1]["capacity_fraction"] == 1.0
    assert body["asymmetry"]["worst_rail"] == 3 and body["asymmetry"]["spread"] == pytest.approx(1 / 16, abs=1e-3)


async def test_oversubscription(client: Client) -> None:
    body = await get_json(client, "/v1/oversubscription?limit=3")
    assert body["design_ratio"] == 1.0 and body["total"] == 64  # leaves and spines
    assert body["worst"][0]["name"] == DOWN_LEAF and body["items"][0]["name"] == DOWN_LEAF
    assert body["items"][0]["ratio"] == pytest.approx(16 / 15, abs=1e-3) and body["items"][0]["drift"] > 0
    assert {r["scope"] for r in body["rollups"]} >= {"rail", "group", "fabric"}
    drifting = await get_json(client, "/v1/oversubscription?drifting=true")
    assert [r["name"] for r in drifting["items"]] == [DOWN_LEAF] and drifting["total"] == 1


async def test_slo(client: Client) -> None:
    body = await get_json(client, "/v1/slo")
    assert {o["name"] for o in body["objectives"]} == {"link_availability", "gpu_network_availability"}
    for o in body["objectives"]:
        assert {"target", "current", "error_budget_remaining", "burn_rates", "status"} <= set(o)
    assert [e["gpus"] for e in body["estimates"]] == [128, 512]
    assert all(0 <= e["interruption_probability"] <= 1 for e in body["estimates"])


async def test_alerts_list_and_ack(client: Client) -> None:
    firing = await get_json(client, "/v1/alerts")
    # two faults, two incidents: the downed uplink (its drift and rail asymmetry as symptoms) and the storm
    assert firing["state"] == "firing" and firing["total"] == len(firing["items"]) == 2
    by_rule = {a["rule"]: a for a in firing["items"]}
    assert set(by_rule) == {"link_outage", "pfc_storm"}
    uplink = by_rule["link_outage"]
    assert {"oversubscription_drift", "rail_capacity_asymmetry"} <= {s["rule"] for s in uplink["symptoms"]}
    assert uplink["root_cause"]["switch"] == DOWN_LEAF and uplink["recommended_action"] == "observe"
    assert by_rule["pfc_storm"]["recommended_action"] == "checkpoint" and by_rule["pfc_storm"]["severity"] == "critical"
    alert = firing["items"][0]
    assert {"id", "fingerprint", "rule", "severity", "state", "summary", "scope", "started_at", "ended_at"} <= set(
        alert
    )
    assert await get_json(client, "/v1/incidents") == firing
    one = await get_json(client, f"/v1/incidents/{uplink['id']}")
    assert one["id"] == uplink["id"] and [e["event"] for e in one["timeline"]] == ["opened"]
    await problem(client, "GET", "/v1/incidents/999999", 404)
    assert (await get_json(client, "/v1/alerts?state=resolved"))["items"] == []
    assert (await get_json(client, "/v1/alerts?state=all&limit=1"))["total"] == firing["total"]
    await problem(client, "GET", "/v1/alerts?state=bogus", 422)
    await problem(client, "GET", "/v1/alerts?limit=100000", 422)
    await problem(client, "GET", "/v1/alerts?limit=1.0", 422)
    await problem(client, "GET", "/v1/alerts?limit=1&limit=2", 422)
    await problem(client, "GET", "/v1/alerts?limt=1", 422)  # a typo is an error, not ignored

    resp = await client.post(f"/v1/alerts/{alert['id']}/ack", json={"by": "oncall@example"})
    acked = await resp.json()
    assert resp.status == 200 and acked["acked_by"] == "oncall@example" and acked["acked_at"]
    again = await (await client.post(f"/v1/alerts/{alert['id']}/ack")).json()  # no body: fine, first ack stands
    assert again["acked_by"] == "oncall@example"
    await problem(client, "POST", "/v1/alerts/999999/ack", 404)
    await problem(client, "POST", "/v1/alerts/abc/ack", 422)
    await problem(client, "POST", f"/v1/alerts/{2**64}/ack", 422)
    await problem(client, "POST", f"/v1/alerts/{alert['id']}/ack", 422, json={"by": "x", "extra": 1})


async def test_jobs_lifecycle_and_health(client: Client) -> None:
    job = {"id": "train-42", "hosts": JOB_HOSTS, "expected_days": 10, "started_at": "2026-11-29T00:00:00Z"}
    resp = await client.post("/v1/jobs", json=job)
    created = await resp.json()
    assert resp.status == 201 and resp.headers["Location"] == "/v1/jobs/train-42"
    assert created["gpus"] == 64 and created["hosts"] == JOB_HOSTS
    assert (await client.post("/v1/jobs", json={**job, "expected_days": 12})).status == 200  # replaced
    assert (await get_json(client, "/v1/jobs/train-42"))["expected_days"] == 12
    listed = await get_json(client, "/v1/jobs")
    assert [j["id"] for j in listed["items"]] == ["train-42"] and listed["total"] == 1

    h = await get_json(client, "/v1/jobs/train-42/health")
    # one uplink of its leaf down: one incident under the job, a warning ECMP carries (observe)
    assert h["status"] == "degraded" and h["gpus"] == 64 and h["groups"] == [2]
    rails = {r["rail"]: r for r in h["rails"]}
    assert rails[3]["leaves"] == [DOWN_LEAF] and rails[3]["status"] == "degraded" and rails[3]["faults"] == 1
    assert rails[5]["status"] == "healthy"  # the storm is in group 3, not under this job
    (fault,) = h["faults"]
    assert fault["rule"] == "link_outage" and fault["recommended_action"] == "observe" and not fault["needs_review"]
    assert all(set(f["affected_hosts"]) <= set(JOB_HOSTS) for f in h["faults"])
    assert {a["rule"] for a in h["alerts"]} >= {"link_outage"} and "pfc_storm" not in {a["rule"] for a in h["alerts"]}
    assert h["efficiency_loss"] > 0 and 0 <= h["interruption_probability"] <= 1
    assert 0 < h["remaining_days"] < 12

    assert (await client.delete("/v1/jobs/train-42")).status == 204
    await problem(client, "GET", "/v1/jobs/train-42", 404)
    await problem(client, "GET", "/v1/jobs/train-42/health", 404)
    await problem(client, "DELETE", "/v1/jobs/train-42", 404)


async def test_job_registration_rejects_bad_input(client: Client) -> None:
    body = await problem(client, "POST", "/v1/jobs", 422, json={"id": "j1", "hosts": ["srv-g1-001", "srv-zz-999"]})
    assert body["unknown"] == ["srv-zz-999"] and "srv-zz-999" in body["detail"]
    await problem(client, "POST", "/v1/jobs", 422, json={"id": "j1", "hosts": []})
    await problem(client, "POST", "/v1/jobs", 422, json={"id": "a/b", "hosts": ["srv-g1-001"]})
    await problem(client, "POST", "/v1/jobs", 422, json={"id": "j1", "hosts": ["srv-g1-001"], "expected_days": -1})
    await problem(client, "POST", "/v1/jobs", 422, json={"id": "j1", "hosts": ["srv-g1-001"], "colour": "red"})
    headers = {"Content-Type": "application/json"}
    await problem(client, "POST", "/v1/jobs", 400, data=b'{"id": "j1", "hosts": [', headers=headers)
    await problem(client, "POST", "/v1/jobs", 400, data=b'{"id": "j\xff", "hosts": ["srv-g1-001"]}', headers=headers)
    nan = b'{"id": "j1", "hosts": ["srv-g1-001"], "expected_days": NaN}'
    await problem(client, "POST", "/v1/jobs", 400, data=nan, headers=headers)
    await problem(client, "POST", "/v1/jobs", 400, data=b"", headers=headers)
    await problem(client, "POST", "/v1/jobs", 415, data=b"id=j1", headers={"Content-Type": "text/plain"})
    big = io.BytesIO(b"[" + b" " * (5 * 1024 * 1024) + b"]")
    await problem(client, "POST", "/v1/jobs", 413, data=big, headers=headers)
    assert (await get_json(client, "/v1/jobs"))["total"] == 0


async def test_series(client: Client, seeded: Seeded) -> None:
    t = int(seeded.evaluated_at.timestamp())
    body = await get_json(
        client, f"/v1/series?switch={DOWN_LEAF}&port={q(UPLINK)}&metric=oper_up&from={t - 60}&to={t + 1}&step=10s"
    )
    values = [p["value"] for p in body["points"]]
    assert body["step_s"] == 10 and values[0] == 1 and values[-1] == 0 and len(values) <= 7
    whole = await get_json(client, f"/v1/series?switch={DOWN_LEAF}&metric=in_bps&from={t - 60}&to={t + 1}")
    assert whole["port"] is None and max(p["value"] or 0 for p in whole["points"]) > 1e9
    iso = seeded.evaluated_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    pfc = await get_json(
        client, f"/v1/series?switch={STORM_LEAF}&port={q(STORM_PORT)}&metric=pfc_tx_pause_pps&to={iso}"
    )
    assert max(p["value"] or 0 for p in pfc["points"]) > 1000
    quiet_port = f"/v1/series?switch={STORM_LEAF}&port={q(port(STORM_LEAF, 3))}&from={t - 60}&to={t + 1}&step=10s"
    quiet = await get_json(client, f"{quiet_port}&metric=pfc_tx_pause_pps")
    oper = await get_json(client, f"{quiet_port}&metric=oper_up")
    assert len(quiet["points"]) == len(oper["points"]) > 1  # a point for every sampled bucket
    assert all(p["value"] == 0 for p in quiet["points"])


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ("switch=lf-g1-r1&metric=drop_table", 422),
        ("metric=in_bps", 422),  # switch is required
        ("switch=lf-g1-r1&from=yesterday", 422),
        ("switch=lf-g1-r1&from=2026-13-45", 422),
        ("switch=lf-g1-r1&from=1700000100&to=1700000000", 422),
        ("switch=lf-g1-r1&port=1%2F1%2Fc1%2F1&from=1600000000&to=1700000000", 422),  # a range too long
        ("switch=lf-g1-r1&from=1700000000&to=1700100000", 422),  # too long for a whole switch
        ("switch=lf-g1-r1&port=1%2F1%2Fc1%2F1&from=1700000000&to=1701000000&step=1s", 422),  # too many points
        ("switch=lf-g1-r1&step=0.1", 422),
        ("switch=lf-g1-r1&step=fast", 422),
        ("switch=lf-g1-r1&step=999999999d", 422),
        ("switch=lf-g1-r1&from=99999999999", 422),
        ("switch=no-such-switch", 404),
        ("switch=lf-g1-r1&port=swp1", 404),  # a port lf-g1-r1 (1/1/c1/1...) does not have
        ("switch=%FF%FE", 400),  # not UTF-8
        ("switch=lf-g1-r1%00", 422),
    ],
)
async def test_series_rejects_bad_parameters(client: Client, query: str, status: int) -> None:
    await problem(client, "GET", f"/v1/series?{query}", status)


async def test_metrics(client: Client) -> None:
    await client.get("/v1/health")
    resp = await client.get("/metrics")
    text = await resp.text()
    assert resp.status == 200 and resp.content_type == "text/plain"
    assert "fabricmon_fabric_status 2.0" in text
    assert 'fabricmon_rail_capacity_fraction{rail="3"}' in text
    assert 'fabricmon_alerts_firing{severity="critical"} 1.0' in text  # the storm; the uplink is a warning
    assert "fabricmon_oversubscription_worst_ratio 1.0667" in text
    assert 'fabricmon_api_requests_total{method="GET",route="/v1/health",status="200"}' in text
    assert 'fabricmon_slo_error_budget_remaining{objective="link_availability"}' in text
    assert "fabricmon_test_extra 7.0" in text


async def test_dashboard_openapi_and_unknown_routes(client: Client) -> None:
    page = await client.get("/")
    assert page.status == 200 and "text/html" in page.content_type and "/dashboard/app.js" in await page.text()
    for asset in ("app.js", "core.js", "charts.js", "map.js", "views/port.js", "vendor/uplot/uPlot.iife.min.js"):
        js = await client.get(f"/dashboard/{asset}")
        assert js.status == 200 and "javascript" in js.content_type, asset  # ES modules need a JS type
    spec = await get_json(client, "/openapi.json")
    assert spec["openapi"].startswith("3.1")
    routes = {(m.upper(), p) for p, ops in spec["paths"].items() for m in ops}
    for route in [
        ("GET", "/v1/health"), ("GET", "/v1/switches/{name}/ports"), ("POST", "/v1/alerts/{id}/ack"),
        ("POST", "/v1/jobs"), ("DELETE", "/v1/jobs/{id}"), ("GET", "/v1/jobs/{id}/health"), ("GET", "/v1/series"),
        ("GET", "/metrics"), ("GET", "/readyz"), ("GET", "/"),
    ]:  # fmt: skip
        assert route in routes
    assert "security" not in spec["paths"]["/v1/health"]["get"]  # no tokens configured here
    await problem(client, "GET", "/v2/nothing", 404)
    await problem(client, "DELETE", "/v1/health", 405)
    await problem(client, "GET", "/dashboard/../../etc/passwd", 404)


async def test_before_the_first_evaluation(migrated_db: str) -> None:
    pool = await create_pool(migrated_db)
    async with pool.acquire() as conn:
        await migrate(conn)
    app = create_app(CONFIG, FABRIC, pool=pool)
    try:
        async with TestClient(TestServer(app)) as c:
            body = await problem(c, "GET", "/v1/health", 503)
            assert body["type"].endswith("no-evaluation")
            for path in ("/v1/rails", "/v1/slo", "/v1/oversubscription"):
                await problem(c, "GET", path, 503)
            assert (await get_json(c, "/v1/switches"))["total"] == 0
            assert "fabricmon_fabric_status" not in await (await c.get("/metrics")).text()
            started = time.monotonic()
            await pool.close()  # the database goes away: readiness says so, routes answer 503
            await problem(c, "GET", "/readyz", 503)
            await problem(c, "GET", "/v1/jobs", 503)
            assert time.monotonic() - started < 5
            assert (await c.get("/healthz")).status == 200
    finally:
        await pool.close()


async def test_history_is_columnar_and_aligned(client: Client, seeded: Seeded) -> None:
    h = await get_json(client, "/v1/history")
    n = len(h["times"])
    assert n >= 1 and h["times"] == sorted(h["times"]) and h["rail"] is None
    # a young database: the range starts at its first evaluation, not six hours back
    assert datetime.fromisoformat(h["start"]) == seeded.evaluated_at
    assert len(h["status"]) == n and "critical" in h["status"]
    assert set(h["ratio"]) >= {"all", "leaf", "spine", "worst switch"} and all(len(v) == n for v in h["ratio"].values())
    worst = max(v for v in h["ratio"]["worst switch"] if v is not None)
    now = (await get_json(client, "/v1/oversubscription?limit=1"))["items"][0]
    assert now["name"] == DOWN_LEAF and worst == pytest.approx(now["ratio"], abs=1e-4) and worst > 1.0  # 16 down, 15 up
    assert [r["rail"] for r in h["rails"]] == list(range(1, 9))
    rail3 = next(r for r in h["rails"] if r["rail"] == 3)
    assert min(v for v in rail3["bottleneck_fraction"] if v is not None) < 1.0  # the leaf uplink down
    assert "link_availability" in h["error_budget_remaining"]

    one = await get_json(client, "/v1/history?rail=3")
    assert [r["rail"] for r in one["rails"]] == [3] and one["error_budget_remaining"] == {}
    assert max(v for v in one["ratio"]["all"] if v is not None) > 1.0  # rail 3's leaves lost uplink capacity

    end = seeded.evaluated_at.timestamp() + 5
    week = await get_json(client, f"/v1/history?from={end - 7 * 86400:.0f}&to={end:.0f}")
    assert week["step_s"] >= 7 * 86400 / 2000 and sum(s is not None for s in week["status"]) == 1
    await problem(client, "GET", f"/v1/history?from={end:.0f}&to={end - 60:.0f}", 422)
    assert (await problem(client, "GET", f"/v1/history?from={end - 86400:.0f}&to={end:.0f}&step=1s", 422))[
        "type"
    ].endswith("too-many-points")
    assert (await problem(client, "GET", f"/v1/history?from={end - 40 * 86400:.0f}&to={end:.0f}", 422))[
        "type"
    ].endswith("range-too-long")


async def test_sparklines_one_row_per_port(client: Client) -> None:
    body = await get_json(client, f"/v1/switches/{DOWN_LEAF}/sparklines?minutes=10")
    assert len(body["ports"]) == 32 and all(len(v) == len(body["times"]) for v in body["ports"].values())
    assert body["step_s"] == 20.0
    assert any(v is not None and v > 1e9 for v in body["ports"][FIRST])
    await problem(client, "GET", f"/v1/switches/{DOWN_LEAF}/sparklines?metric=pfc_rx_pause_pps", 422)
    await problem(client, "GET", "/v1/switches/nope/sparklines", 404)


async def test_pfc_series_of_one_priority(client: Client) -> None:
    base = f"/v1/series?switch={STORM_LEAF}&port={q(STORM_PORT)}&metric=pfc_tx_pause_pps"
    storm = await get_json(client, f"{base}&priority=3")  # the storm's priority
    other = await get_json(client, f"{base}&priority=4")
    total = await get_json(client, base)
    assert max(p["value"] or 0 for p in storm["points"]) > 1000
    assert all((p["value"] or 0) == 0 for p in other["points"])
    assert [p["value"] for p in storm["points"]] == [p["value"] for p in total["points"]]  # one priority paused
    body = await problem(client, "GET", f"/v1/series?switch={STORM_LEAF}&metric=in_bps&priority=3", 422)
    assert body["type"].endswith("priority-not-pfc")
