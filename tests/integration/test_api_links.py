"""``GET /v1/links/health`` (SPEC §10.5) on a real server and database: links ranked by predicted
time to failure, null (no trend) last, each with its peer, confidence and evidence; a link without
transceiver data is not listed; the OpenAPI document describes the route."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from api.app import create_app
from config.model import Config
from fabric.model import Endpoint, FabricParams
from fabric.topology import build_aipod
from store.db import create_pool
from store.dom import DomSample, write_dom
from store.fec import FecSample, write_fec
from store.inventory import ensure_fabric
from store.migrate import migrate

FABRIC = build_aipod(FabricParams(gpus=128, radix=16))
LEAF = "lf-g1-r1"
PORTS = [p.name for p in FABRIC.ports(LEAF) if p.peer is not None]
UP = next(p for p in FABRIC.ports(LEAF) if p.peer is not None and p.direction == "up")


@pytest.fixture
async def client(fresh_db: str) -> AsyncIterator[TestClient[Any, Any]]:
    pool = await create_pool(fresh_db)
    now = datetime.now(UTC)
    rows: list[DomSample] = []
    for i in range(36):  # every 10 min for the last 6 h
        at = now - timedelta(minutes=10 * (35 - i))
        hours = i / 6
        rows.append(DomSample(at, LEAF, PORTS[0], "x0", -2.0 - 1.0 * hours, rx_low_critical_dbm=-10.0))  # 2 h left
        rows.append(DomSample(at, LEAF, PORTS[1], "x1", -2.0 - 0.5 * hours, rx_low_critical_dbm=-10.0))  # 10.5 h
        rows.append(DomSample(at, LEAF, PORTS[2], "x2", -2.0, rx_low_critical_dbm=-10.0))  # flat
        # the spine end of the leaf's uplink degrades: the link is named by its leaf end
        rows.append(DomSample(at, UP.peer.node, UP.peer.port, "xs", -2.0 - 2.0 * hours))  # type: ignore[union-attr]
    bins = [10**12, 10**6, 10**3, 1] + [0] * 12
    async with pool.acquire() as conn:
        await migrate(conn)
        await ensure_fabric(conn, FABRIC)
        await write_dom(conn, rows)
        await write_fec(conn, [FecSample(now - timedelta(seconds=5), LEAF, PORTS[2], bins=tuple(bins))])
    app = create_app(Config(), FABRIC, pool=pool)
    try:
        async with TestClient(TestServer(app)) as c:
            yield c
    finally:
        await pool.close()


async def test_links_are_ranked_by_time_to_failure_with_their_evidence(client: TestClient[Any, Any]) -> None:
    resp = await client.get("/v1/links/health")
    assert resp.status == 200, await resp.text()
    body = await resp.json()
    links = [i["link"] for i in body["items"]]
    spine = UP.peer
    assert spine is not None
    # the uplink first (its spine end, 2 dB/h from -2 dBm, is past the configured -10 after 4 h: 0 s
    # left), then -7.83 dBm at 1 dB/h (2.17 h), then 0.5 dB/h (10.3 h), then the flat one (no trend)
    assert links == [f"{LEAF}:{UP.name}", f"{LEAF}:{PORTS[0]}", f"{LEAF}:{PORTS[1]}", f"{LEAF}:{PORTS[2]}"]
    assert body["total"] == 4 and len(PORTS) > 4  # other ports have no transceiver data: not listed
    first, second, _, flat = body["items"]
    assert (first["switch"], first["port"]) == (spine.node, spine.port) and first["peer"] == f"{LEAF}:{UP.name}"
    assert first["time_to_failure_s"] == 0.0 and first["evidence"]["thresholds_from"] == "configured"
    peer = FABRIC.peer(Endpoint(LEAF, PORTS[0]))
    assert peer is not None and second["peer"] == f"{peer.node}:{peer.port}"
    assert second["time_to_failure_s"] == pytest.approx(2.17 * 3600, rel=0.05) and second["basis"] == "rx_power"
    assert second["confidence"] > 0.9 and second["evidence"]["rx_low_critical_dbm"] == -10.0
    assert second["evidence"]["rx_power_slope_per_hour"] == pytest.approx(-1.0, rel=0.01)
    assert flat["time_to_failure_s"] is None and flat["confidence"] == 0.0 and flat["basis"] is None
    assert flat["evidence"]["predicted_flr"] is None  # one sample of bins in the window: no interval
    page = await (await client.get("/v1/links/health?limit=2&offset=1")).json()
    assert [i["link"] for i in page["items"]] == links[1:3] and page["total"] == 4


async def test_the_openapi_document_describes_the_route(client: TestClient[Any, Any]) -> None:
    doc = await (await client.get("/openapi.json")).json()
    op = doc["paths"]["/v1/links/health"]["get"]
    assert "time to failure" in op["summary"]
    assert "LinkHealthOut" in str(doc["components"]["schemas"]["LinksHealthOut"])
