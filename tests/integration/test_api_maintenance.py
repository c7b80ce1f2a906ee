"""Maintenance windows through the API (SPEC §10.4) on a real server and TimescaleDB: the round
trip (POST → GET → ``?active`` → DELETE), every class of refusal with its problem type, and the
bearer token the other writes need."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from api.app import create_app
from config.model import Config
from store.pgserver import EmbeddedStore
from tests.support.api_lab import FABRIC, migrated_database

TOKEN = "maintenance-token"
CONFIG = Config.model_validate({"api": {"tokens": [TOKEN]}})
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PROBLEM = "application/problem+json"
TYPES = "https://fabricmon.dev/problems/"
Client = TestClient[web.Request, web.Application]

LEAF = "lf-g1-r2"
SERVER = "srv-g1-003"


def rfc3339(t: datetime) -> str:
    return t.astimezone(UTC).isoformat().replace("+00:00", "Z")


NOW = datetime.now(UTC)
ACTIVE = {
    "switches": [LEAF],
    "servers": [SERVER],
    "rails": [3],
    "start": rfc3339(NOW - timedelta(minutes=5)),
    "end": rfc3339(NOW + timedelta(hours=2)),
    "reason": "optics swap, CHG-1234",
}
LATER = {
    "switches": [LEAF],
    "start": rfc3339(NOW + timedelta(days=1)),
    "end": rfc3339(NOW + timedelta(days=1, hours=1)),
}


@pytest.fixture(scope="module")
def dsn(pg_store: EmbeddedStore) -> Iterator[str]:
    with migrated_database(pg_store) as dsn:
        yield dsn


@pytest.fixture(scope="module")
async def client(dsn: str) -> AsyncIterator[Client]:
    async with TestClient(TestServer(create_app(CONFIG, FABRIC, dsn=dsn))) as c:
        yield c


async def call(client: Client, method: str, path: str, status: int, **kwargs: Any) -> Any:
    resp = await client.request(method, path, headers=AUTH, **kwargs)
    body = await resp.json(content_type=None) if resp.status != 204 else None
    assert resp.status == status, (method, path, body)
    if status >= 400:
        assert body is not None and resp.content_type == PROBLEM and body["status"] == status and body["detail"]
    return body


async def test_a_window_round_trip(client: Client) -> None:
    resp = await client.post("/v1/maintenance", json=ACTIVE, headers=AUTH)
    created = await resp.json()
    assert resp.status == 201, created
    assert resp.headers["Location"] == f"/v1/maintenance/{created['id']}"
    assert created["switches"] == [LEAF] and created["servers"] == [SERVER] and created["rails"] == [3]
    assert created["source"] == "api" and created["active"] is True and created["reason"] == ACTIVE["reason"]
    assert datetime.fromisoformat(created["start"]) == datetime.fromisoformat(str(ACTIVE["start"]))
    later = await call(client, "POST", "/v1/maintenance", 201, json=LATER)
    assert later["active"] is False

    listed = await call(client, "GET", "/v1/maintenance", 200)
    ids = [w["id"] for w in listed["items"]]
    assert created["id"] in ids and later["id"] in ids and listed["total"] >= 2
    active = await call(client, "GET", "/v1/maintenance?active=true", 200)
    assert [w["id"] for w in active["items"]] == [created["id"]] and active["total"] == 1
    inactive = await call(client, "GET", "/v1/maintenance?active=false", 200)
    assert later["id"] in [w["id"] for w in inactive["items"]] and created["id"] not in [
        w["id"] for w in inactive["items"]
    ]

    # cancelled in progress: it ends now and stays listed (what happened in it was planned)
    await call(client, "DELETE", f"/v1/maintenance/{created['id']}", 204)
    assert (await call(client, "GET", "/v1/maintenance?active=true", 200))["items"] == []
    (ended,) = [w for w in (await call(client, "GET", "/v1/maintenance", 200))["items"] if w["id"] == created["id"]]
    assert ended["active"] is False and datetime.fromisoformat(ended["end"]) <= datetime.now(UTC)
    # not started, or over: removed
    await call(client, "DELETE", f"/v1/maintenance/{later['id']}", 204)
    await call(client, "DELETE", f"/v1/maintenance/{created['id']}", 204)
    assert (await call(client, "GET", "/v1/maintenance", 200))["items"] == []
    body = await call(client, "DELETE", f"/v1/maintenance/{created['id']}", 404)
    assert body["type"] == TYPES + "unknown-window"


async def test_unknown_places_are_named_by_kind(client: Client) -> None:
    body = await call(
        client,
        "POST",
        "/v1/maintenance",
        422,
        json={**ACTIVE, "switches": [LEAF, "lf-g9-r9"], "servers": ["srv-zz-001"], "rails": [3, 99]},
    )
    assert body["type"] == TYPES + "unknown-places"
    assert body["unknown"] == {"switches": ["lf-g9-r9"], "servers": ["srv-zz-001"], "rails": ["99"]}
    assert "lf-g9-r9" in body["detail"] and "srv-zz-001" in body["detail"] and "99" in body["detail"]


@pytest.mark.parametrize(
    ("change", "kind"),
    [
        ({"end": ACTIVE["start"]}, "window-order"),  # end == start
        ({"start": ACTIVE["end"], "end": ACTIVE["start"]}, "window-order"),
        ({"switches": [], "servers": [], "rails": []}, "empty-window"),
        ({"start": "2026-05-01 22:00:00Z"}, "validation"),  # ISO 8601, not RFC 3339 (a space)
        ({"start": "2026-05-01T22:00:00"}, "validation"),  # no offset
        ({"start": "2026-02-30T22:00:00Z"}, "validation"),  # no such day
        ({"start": 1_777_000_000}, "validation"),  # a number is not a time here
        ({"rails": ["3"]}, "validation"),
        ({"colour": "red"}, "validation"),  # unknown key
    ],
)
async def test_refusals(client: Client, change: dict[str, Any], kind: str) -> None:
    body = await call(client, "POST", "/v1/maintenance", 422, json={**ACTIVE, **change})
    assert body["type"] == TYPES + kind


async def test_malformed_requests(client: Client) -> None:
    assert (await call(client, "POST", "/v1/maintenance", 400, data=b"{"))["type"] == TYPES + "bad-json"
    await call(client, "DELETE", "/v1/maintenance/abc", 422)
    await call(client, "GET", "/v1/maintenance?active=maybe", 422)
    await call(client, "GET", "/v1/maintenance?activ=true", 422)


async def test_writes_need_the_token(client: Client) -> None:
    for method, path, body in (
        ("POST", "/v1/maintenance", ACTIVE),
        ("GET", "/v1/maintenance", None),
        ("DELETE", "/v1/maintenance/1", None),
    ):
        resp = await client.request(method, path, json=body, headers={"Authorization": "Bearer nope"})
        assert resp.status == 401, (method, path)
    assert (await call(client, "GET", "/v1/maintenance?active=true", 200))["items"] == []  # nothing was stored
