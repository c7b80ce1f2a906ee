"""``GET /v1/history`` over a database with a history: six evaluations 20 s apart, as a running
analyzer stores them (tests/support/api_lab.py), on the real TimescaleDB.

Bucketing is TimescaleDB's own ``time_bucket``: for any step, whole or not, the buckets the route
reports as evaluated are exactly the buckets the database puts the evaluations in. An infinite
ratio (every uplink of a switch down) is told apart from a bucket without an evaluation.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import asyncpg
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.app import create_app
from store.pgserver import EmbeddedStore
from tests.support.api_lab import CONFIG, FABRIC, Seeded, seeded_database

pytestmark = pytest.mark.db

Client = TestClient[web.Request, web.Application]
EVALUATIONS = 6


@pytest.fixture(scope="module")
def seeded(pg_store: EmbeddedStore) -> Iterator[Seeded]:
    with seeded_database(pg_store, rounds=2 * EVALUATIONS, evaluate_every=2) as s:
        yield s


@pytest.fixture(scope="module")
async def client(seeded: Seeded) -> AsyncIterator[Client]:
    async with TestClient(TestServer(create_app(CONFIG, FABRIC, dsn=seeded.dsn))) as c:
        yield c


async def history(client: Client, query: str) -> Any:
    resp = await client.get(f"/v1/history?{query}")
    body = await resp.json()
    assert resp.status == 200, body
    return body


async def test_every_evaluation_is_in_the_history(client: Client, seeded: Seeded) -> None:
    h = await history(client, "")
    evaluated = [s for s in h["status"] if s is not None]
    assert len(evaluated) == EVALUATIONS and set(evaluated) <= {"degraded", "critical"}
    assert len(h["times"]) == len(h["status"]) and h["step_s"] == CONFIG.analyzer.interval_s
    rail3 = next(r for r in h["rails"] if r["rail"] == 3)
    assert sum(v is not None for v in rail3["load_gbps"]) == EVALUATIONS


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(step_ms=st.sampled_from([1700, 2100, 2500, 3300, 7000, 13700, 20000, 60000]) | st.integers(1000, 90000))
async def test_any_step_lands_on_the_databases_own_buckets(client: Client, seeded: Seeded, step_ms: int) -> None:
    end = seeded.evaluated_at + timedelta(seconds=1)
    start = end - timedelta(minutes=5)
    h = await history(client, f"from={start.timestamp():.3f}&to={end.timestamp():.3f}&step={step_ms}ms")
    conn = await asyncpg.connect(seeded.dsn)
    try:
        buckets = await conn.fetch(
            "SELECT DISTINCT time_bucket($1::interval, time) AS b FROM analyzer_runs WHERE time >= $2 AND time < $3",
            timedelta(milliseconds=step_ms), start, end,
        )  # fmt: skip
    finally:
        await conn.close()
    want = sorted(round(r["b"].timestamp(), 6) for r in buckets)
    got = [round(t, 6) for t, s in zip(h["times"], h["status"], strict=True) if s is not None]
    assert got == want and len(want) >= 1


async def test_an_infinite_ratio_is_not_a_missing_evaluation(client: Client, seeded: Seeded) -> None:
    conn = await asyncpg.connect(seeded.dsn)
    try:  # the newest evaluation saw rail 3's leaf tier and one leaf with every uplink down
        newest = await conn.fetchval("SELECT max(time) FROM analyzer_runs")
        await conn.execute(
            "UPDATE oversubscription SET ratio = NULL, up_gbps = 0 "
            "WHERE time = $1 AND name IN ('rail-3', 'rail-3/leaf')",
            newest,
        )
        await conn.execute("UPDATE analyzer_runs SET worst_ratio = 'Infinity' WHERE time = $1", newest)
        h = await history(client, "rail=3")
        fabric = await history(client, "")
    finally:  # the module's last test: the change stays
        await conn.close()
    index = max(i for i, s in enumerate(h["status"]) if s is not None)
    assert h["ratio_infinite"]["all"] == [index] and h["ratio_infinite"]["leaf"] == [index]
    assert h["ratio"]["all"][index] is None and "spine" not in h["ratio_infinite"]
    assert fabric["ratio_infinite"]["worst switch"] == [index] and fabric["ratio"]["worst switch"][index] is None
    assert sum(v is not None for v in h["ratio"]["all"]) == EVALUATIONS - 1  # the others still finite
