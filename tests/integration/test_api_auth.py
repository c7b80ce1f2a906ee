"""Bearer tokens: with ``api.tokens`` set, every ``/v1`` route answers 401 (a problem body) without
the token or with a wrong one; ``/healthz``, ``/readyz``, ``/metrics`` (``api.open_routes``), the
dashboard and ``/openapi.json`` stay open."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from api.app import create_app
from api.auth import TokenCheck, is_open
from api.routes import ENDPOINTS
from config.model import Config
from store.pgserver import EmbeddedStore
from tests.support.api_lab import FABRIC, migrated_database

TOKEN = "s3cret-token-1"
CONFIG = Config.model_validate({"api": {"tokens": [TOKEN, "another-token"]}})
V1 = sorted({(e.method, re.sub(r"\{\w+\}", "x1", e.path)) for e in ENDPOINTS if e.path.startswith("/v1/")})
Client = TestClient[web.Request, web.Application]


@pytest.fixture(scope="module")
def dsn(pg_store: EmbeddedStore) -> Iterator[str]:
    with migrated_database(pg_store) as dsn:
        yield dsn


@pytest.fixture(scope="module")
async def client(dsn: str) -> AsyncIterator[Client]:
    async with TestClient(TestServer(create_app(CONFIG, FABRIC, dsn=dsn))) as c:
        yield c


def test_every_v1_route_is_covered() -> None:
    assert len(V1) >= 13 and ("POST", "/v1/jobs") in V1 and ("GET", "/v1/series") in V1


@pytest.mark.parametrize("header", [None, "Bearer wrong", f"Basic {TOKEN}", "Bearer", f"Bearer {TOKEN}x"])
async def test_v1_routes_need_the_token(client: Client, header: str | None) -> None:
    headers = {"Authorization": header} if header is not None else {}
    for method, path in V1:
        resp = await client.request(method, path, headers=headers, json={} if method == "POST" else None)
        assert resp.status == 401, (method, path)
        assert resp.content_type == "application/problem+json"
        assert resp.headers["WWW-Authenticate"].startswith("Bearer")
        body = await resp.json(content_type=None)
        assert body["status"] == 401 and body["title"] == "Unauthorized" and TOKEN not in await resp.text()


async def test_the_right_token_passes(client: Client) -> None:
    for token in (TOKEN, "another-token"):
        for method, path in V1:
            resp = await client.request(method, path, headers={"Authorization": f"Bearer {token}"})
            assert resp.status != 401, (method, path)
    resp = await client.get("/v1/jobs", headers={"Authorization": f"bearer  {TOKEN} "})
    assert resp.status == 200  # the scheme is case-insensitive; surrounding spaces do not matter


async def test_open_routes_stay_open(client: Client) -> None:
    for path in ("/healthz", "/readyz", "/metrics", "/", "/openapi.json", "/dashboard/dashboard.css"):
        assert (await client.get(path)).status == 200, path
    spec = await (await client.get("/openapi.json")).json()
    assert spec["paths"]["/v1/health"]["get"]["security"] == [{"bearer": []}]
    assert "401" in spec["paths"]["/v1/jobs"]["post"]["responses"]
    assert "security" not in spec["paths"]["/metrics"]["get"]


async def test_open_routes_are_configurable(dsn: str) -> None:
    config = Config.model_validate({"api": {"tokens": [TOKEN], "open_routes": ["/healthz", "/v1/health*"]}})
    async with TestClient(TestServer(create_app(config, FABRIC, dsn=dsn))) as c:
        assert (await c.get("/metrics")).status == 401
        assert (await c.get("/readyz")).status == 401
        assert (await c.get("/healthz")).status == 200
        assert (await c.get("/v1/health")).status == 503  # open, and no evaluation yet
        assert (await c.get("/v1/rails")).status == 401


def test_token_check() -> None:
    check = TokenCheck(["abc", ""])
    assert check.enabled and check.accepts("Bearer abc") and not check.accepts("Bearer abd")
    assert not check.accepts(None) and not check.accepts("") and not check.accepts("abc")
    assert not check.accepts("Bearer \udcff")  # undecodable header bytes never match (nor raise)
    assert not TokenCheck([]).enabled
    assert is_open("/healthz", ["/healthz"]) and not is_open("/healthz2", ["/healthz"])
    assert is_open("/v1/x", ["/v1/*"]) and is_open("/dashboard/a.js", [])
