"""Webhook delivery end to end: real TimescaleDB outbox, real HTTP receivers on 127.0.0.1.

The receiver verifies each signature and dedupes on ``X-Fabricmon-Delivery``, as a real one
should; the tests check that every delivery is applied exactly once through outages, slow peers,
sender restarts and two concurrent senders.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from analyzer.actions import decide_all
from analyzer.alerts import sync_alerts
from analyzer.config import WebhookConfig
from analyzer.correlation import correlate
from analyzer.findings import Finding
from analyzer.incident_model import Incident
from analyzer.links import links_scope
from analyzer.outbox import deliveries_of, webhook_key
from analyzer.payloads import ZERO_TIME, verify_signature
from analyzer.webhooks import WebhookSender
from api.app import create_app
from config.model import Config
from fabric.model import FabricParams
from fabric.topology import build_aipod
from store.db import create_pool
from tests.support.waiting import until

pytestmark = pytest.mark.db

#: four groups (up to 32 outages on 32 leaves), ports named as each leaf's NOS names them
FABRIC = build_aipod(FabricParams(gpus=2048), naming="mixed")
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
FAST = {"timeout_s": 1.0, "backoff_initial_s": 0.05, "backoff_max_s": 0.2}


class Receiver:
    """An aiohttp webhook receiver: checks signatures, applies each delivery id once."""

    def __init__(self, secret: str | None = None) -> None:
        self.secret = secret
        self.status = 200
        self.script: list[int] = []  # statuses to answer first, one per POST, before ``status``
        self.delay = 0.0
        self.lose_first_ack = False  # apply, then answer 500 once: the sender must retry, we dedupe
        self.posts: Counter[str] = Counter()
        self.applied: dict[str, dict[str, Any]] = {}
        self.order: list[tuple[str, str, int]] = []  # (delivery id, event, alert id) as applied
        self.bad_signatures = 0
        self.unsigned = 0
        self.duplicates = 0
        self.lost_acks: set[str] = set()
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def start(self, port: int = 0) -> None:
        app = web.Application()
        app.router.add_post("/hook", self.handle)
        self._runner = web.AppRunner(app, shutdown_timeout=0.2)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", port).start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        if self.delay:
            await asyncio.sleep(self.delay)
        delivery = request.headers["X-Fabricmon-Delivery"]
        self.posts[delivery] += 1
        status = self.script.pop(0) if self.script else self.status
        if status != 200:
            return web.Response(status=status)
        signature = request.headers.get("X-Fabricmon-Signature")
        if self.secret is None:
            self.unsigned += signature is None
        elif not verify_signature(self.secret, request.headers["X-Fabricmon-Timestamp"], body, signature, max_age_s=60):
            self.bad_signatures += 1
            return web.Response(status=401)
        if delivery in self.applied:
            self.duplicates += 1
            return web.Response(status=200)
        doc = json.loads(body)
        self.applied[delivery] = {"event": request.headers["X-Fabricmon-Event"], "body": doc}
        alert_id = doc["alert"]["id"] if "alert" in doc else int(doc["alerts"][0]["annotations"]["alert_id"])
        self.order.append((delivery, request.headers["X-Fabricmon-Event"], alert_id))
        if self.lose_first_ack and delivery not in self.lost_acks:
            self.lost_acks.add(delivery)
            return web.Response(status=500)
        return web.Response(status=204)


@pytest.fixture
async def receivers() -> AsyncIterator[Callable[..., Any]]:
    made: list[Receiver] = []

    async def make(secret: str | None = "s3cret", start: bool = True) -> Receiver:
        rx = Receiver(secret)
        made.append(rx)
        if start:
            await rx.start()
        return rx

    yield make
    for rx in made:
        await rx.stop()


@contextlib.asynccontextmanager
async def running(sender: WebhookSender) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(sender.run())
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def sender_for(pool: asyncpg.Pool, hooks: list[WebhookConfig], **kw: Any) -> WebhookSender:
    return WebhookSender(pool, hooks, poll_interval_s=0.1, lease_margin_s=0.3, **kw)


def outage(port: int) -> Finding:
    """Server ``port``'s link down on a leaf of its own (four of one leaf at once would be the leaf)."""
    leaf = f"lf-g{(port - 1) // 8 + 1}-r{(port - 1) % 8 + 1}"
    name = FABRIC.ports(leaf)[port - 1].name  # the port at place ``port``, as its NOS names it
    return Finding(
        rule="link_outage",
        key=f"{leaf}:{name}",
        severity="critical",
        summary=f"{leaf}:{name} is down",
        scope=links_scope(FABRIC, [(leaf, name)]),
        details={"down_now": True, "down_for_s": 30.0},
    )


def incidents(ports: range) -> list[Incident]:
    """Server-link outages, each one incident (drain its host)."""
    return decide_all(correlate([outage(i) for i in ports], FABRIC), FABRIC)


async def fire(pool: asyncpg.Pool, hooks: list[WebhookConfig], n: int, at: datetime = T0) -> int:
    r = await sync_alerts(pool, incidents(range(1, n + 1)), now=at, hold_down_s=0, webhooks=hooks)
    return r.deliveries


async def statuses(pool: asyncpg.Pool) -> Counter[str]:
    return Counter(r["status"] for r in await pool.fetch("SELECT status FROM webhook_deliveries"))


async def ids_for(pool: asyncpg.Pool, hook: WebhookConfig) -> set[str]:
    """The deliveries ``hook`` is to get (superseded ones never are)."""
    rows = await pool.fetch(
        "SELECT id FROM webhook_deliveries WHERE webhook = $1 AND status <> 'superseded'", webhook_key(hook)
    )
    return {str(r["id"]) for r in rows}


async def test_signed_bodies_in_both_formats_with_jobs(pool: asyncpg.Pool, receivers: Any) -> None:
    fm, am, plain = await receivers("s3cret"), await receivers("other"), await receivers(None)
    hooks = [
        WebhookConfig(url=fm.url, secret="s3cret", **FAST),
        WebhookConfig(url=am.url, secret="other", format="alertmanager", **FAST),
        WebhookConfig(url=plain.url, **FAST),
    ]
    await pool.execute(
        "INSERT INTO jobs (id, hosts) VALUES ('llm-a', $1), ('llm-elsewhere', $2)",
        ["srv-g1-001", "srv-g1-002", "srv-g1-003"],
        ["srv-g7-001", "srv-g7-002"],
    )
    sender = sender_for(pool, hooks)
    async with running(sender):
        assert await fire(pool, hooks, 1) == 3
        sender.notify()
        await until(lambda: all(len(rx.applied) == 1 for rx in (fm, am, plain)), 10)
        await sync_alerts(pool, [], now=T0 + timedelta(seconds=5), hold_down_s=0, webhooks=hooks)
        sender.notify()
        await until(lambda: all(len(rx.applied) == 2 for rx in (fm, am, plain)), 10)

    assert fm.bad_signatures == am.bad_signatures == 0 and plain.unsigned == 2
    (f_fire, f_res) = [v for v in fm.applied.values()]
    assert [f_fire["event"], f_res["event"]] == ["alert.firing", "alert.resolved"]
    body = f_fire["body"]
    assert body["event"] == "alert.firing" and body["recommended_action"] == "drain"
    assert body["jobs"] == [{"id": "llm-a", "affected_hosts": ["srv-g1-001"]}]
    assert body["affected"]["servers"] == ["srv-g1-001"] and body["affected"]["gpus"] == 1
    # the port as the leaf's NOS names it (OpenConfig-style here), in the scope and the summary
    assert (
        body["affected"]["ports"] == ["lf-g1-r1:1/1/c1/1"] and body["alert"]["summary"] == "lf-g1-r1:1/1/c1/1 is down"
    )
    assert body["alert"]["rule"] == "link_outage" and body["alert"]["state"] == "firing"
    assert f_res["body"]["alert"]["state"] == "resolved" and f_res["body"]["alert"]["ended_at"]

    a_fire, a_res = [v["body"] for v in am.applied.values()]
    assert a_fire["version"] == "4" and a_fire["status"] == "firing"
    assert a_fire["alerts"][0]["endsAt"] == ZERO_TIME and a_fire["alerts"][0]["labels"]["alertname"] == "link_outage"
    assert a_fire["alerts"][0]["annotations"]["jobs"] == "llm-a"
    assert (a_fire["alerts"][0]["labels"]["switch"], a_fire["alerts"][0]["labels"]["port"]) == ("lf-g1-r1", "1/1/c1/1")
    assert a_res["status"] == "resolved" and a_res["alerts"][0]["endsAt"] != ZERO_TIME
    assert await statuses(pool) == Counter(delivered=6)
    assert sum(s.delivered for s in sender.stats) == 6


async def test_receiver_down_then_back_gets_everything_once(pool: asyncpg.Pool, receivers: Any) -> None:
    rx = await receivers()
    port = rx.port
    await rx.stop()  # port closed: connection refused
    hook = WebhookConfig(url=f"http://127.0.0.1:{port}/hook", secret="s3cret", **FAST)
    await fire(pool, [hook], 6)
    await sync_alerts(pool, incidents(range(1, 4)), now=T0 + timedelta(seconds=1), hold_down_s=0, webhooks=[hook])
    expected = await ids_for(pool, hook)
    # 3 firing + 3 resolved: the firings of the 3 incidents that resolved meanwhile are superseded
    # by their resolve, never sent (a stale drain is never replayed: issue 25)
    assert len(expected) == 6

    sender = sender_for(pool, [hook])
    async with running(sender):
        await asyncio.sleep(0.6)
        row = await pool.fetchrow("SELECT max(attempts) AS a, max(last_error) AS e FROM webhook_deliveries")
        assert row["a"] >= 2 and "ClientConnectorError" in row["e"]
        assert sender.stats[0].failed_attempts > 0 and (await sender.pending())[webhook_key(hook)] == 6

        rx.status = 503  # back, but failing
        await rx.start(port)
        await asyncio.sleep(0.5)
        assert rx.applied == {} and sum(rx.posts.values()) > 0

        rx.status = 200  # healthy, but the first acknowledgement of each delivery is lost
        rx.lose_first_ack = True
        await until(lambda: set(rx.applied) == expected, 10)
        await until(lambda: sender.stats[0].delivered == 6, 10)

    assert rx.lost_acks == expected and rx.duplicates == 6  # every delivery was retried after being applied...
    assert all(rx.posts[d] >= 2 for d in expected)  # ...with its delivery id unchanged
    assert len(rx.order) == len(set(d for d, _, _ in rx.order)) == 6  # ...and applied exactly once
    assert await statuses(pool) == Counter(delivered=6, superseded=3)
    assert rx.bad_signatures == 0
    # per alert: the open ones' firing, the resolved ones' resolve only
    seen: dict[int, list[str]] = {}
    for _, event, alert_id in rx.order:
        seen.setdefault(alert_id, []).append(event)
    assert sorted(seen.values()) == sorted([["alert.resolved"]] * 3 + [["alert.firing"]] * 3)
    # an incident's view lists its deliveries, in order, as they ended
    (resolved_one, *_) = [a for a, events in seen.items() if events == ["alert.resolved"]]
    shown = await deliveries_of(pool, resolved_one)
    assert [(d["event"], d["status"]) for d in shown] == [
        ("alert.firing", "superseded"),
        ("alert.resolved", "delivered"),
    ]
    assert shown[0]["attempts"] == 0 and shown[1]["attempts"] >= 2
    assert all(d["webhook"] == webhook_key(hook) for d in shown)


async def test_slow_receiver_delays_no_other(pool: asyncpg.Pool, receivers: Any) -> None:
    slow, fast = await receivers(), await receivers()
    slow.delay = 5.0
    hooks = [
        WebhookConfig(url=slow.url, secret="s3cret", timeout_s=2.0, backoff_initial_s=0.05, backoff_max_s=0.2),
        WebhookConfig(url=fast.url, secret="s3cret", **FAST),
    ]
    await fire(pool, hooks, 20)
    sender = sender_for(pool, hooks, batch=4)
    async with running(sender):
        t0 = time.monotonic()
        sender.notify()
        await until(lambda: len(fast.applied) == 20, 10)
        elapsed = time.monotonic() - t0
        await until(lambda: sender.stats[1].delivered == 20, 10)
    assert elapsed < 1.5, f"the fast receiver waited {elapsed:.2f} s for the slow one"
    assert slow.applied == {}
    stats = {s.webhook: s for s in sender.stats}
    assert stats[webhook_key(hooks[1])].delivered == 20 and stats[webhook_key(hooks[0])].delivered == 0


async def test_sender_restart_loses_nothing(pool: asyncpg.Pool, migrated_db: str, receivers: Any) -> None:
    rx = await receivers()
    rx.delay = 0.1
    hook = WebhookConfig(url=rx.url, secret="s3cret", **FAST)
    await fire(pool, [hook], 12)
    expected = await ids_for(pool, hook)

    first = sender_for(pool, [hook], batch=2)
    async with running(first):
        await until(lambda: len(rx.applied) >= 4, 10)
    # cancelled mid-way, rows in flight released or leased
    pending = (await statuses(pool))["pending"]
    assert 0 < pending < 12

    # and a sender that died without a word: two rows claimed by it, leased for another second
    await pool.execute(
        """UPDATE webhook_deliveries SET attempts = attempts + 1, next_attempt_at = now() + interval '1 second'
           WHERE id IN (SELECT id FROM webhook_deliveries WHERE status = 'pending' ORDER BY seq LIMIT 2)"""
    )
    pool2 = await create_pool(migrated_db)  # a new process: new pool, new sender
    try:
        second = sender_for(pool2, [hook], batch=2)
        async with running(second):
            await until(lambda: set(rx.applied) == expected, 10)
            await until(lambda: second.stats[0].delivered + first.stats[0].delivered >= 12, 10)
    finally:
        await pool2.close()
    assert await statuses(pool) == Counter(delivered=12)
    assert len(rx.order) == 12 and rx.bad_signatures == 0


async def test_two_senders_never_send_one_delivery_twice(pool: asyncpg.Pool, migrated_db: str, receivers: Any) -> None:
    rx = await receivers()
    rx.delay = 0.02
    hook = WebhookConfig(url=rx.url, secret="s3cret", **FAST)
    await fire(pool, [hook], 30)
    pool2 = await create_pool(migrated_db)
    try:
        a, b = sender_for(pool, [hook], batch=3), sender_for(pool2, [hook], batch=3)
        async with running(a), running(b):
            a.notify()
            b.notify()
            await until(lambda: len(rx.applied) == 30, 10)
            await until(lambda: a.stats[0].delivered + b.stats[0].delivered == 30, 10)
    finally:
        await pool2.close()
    assert set(rx.posts.values()) == {1} and rx.duplicates == 0
    assert a.stats[0].delivered > 0 and b.stats[0].delivered > 0


async def test_max_attempts_gives_up_and_unblocks_the_next(pool: asyncpg.Pool, receivers: Any) -> None:
    rx = await receivers()
    rx.status = 503
    hook = WebhookConfig(url=rx.url, secret="s3cret", max_attempts=3, **FAST)
    await fire(pool, [hook], 1)
    sender = sender_for(pool, [hook])
    async with running(sender):
        await until(lambda: sender.stats[0].failed == 1, 10)
        row = await pool.fetchrow("SELECT status, attempts, last_error FROM webhook_deliveries")
        assert (row["status"], row["attempts"], row["last_error"]) == ("failed", 3, "HTTP 503 Service Unavailable")
        # the resolved behind it is no longer held back
        rx.status = 200
        await sync_alerts(pool, [], now=T0 + timedelta(seconds=1), hold_down_s=0, webhooks=[hook])
        sender.notify()
        await until(lambda: len(rx.applied) == 1, 10)
    assert [e for _, e, _ in rx.order] == ["alert.resolved"]
    assert await statuses(pool) == Counter(failed=1, delivered=1)


async def test_no_secret_in_logs_errors_or_outbox(
    pool: asyncpg.Pool, receivers: Any, caplog: pytest.LogCaptureFixture
) -> None:
    rx = await receivers()
    port = rx.port
    await rx.stop()
    hook = WebhookConfig(url=f"http://user:hunter2@127.0.0.1:{port}/hook?token=tok123", secret="s3cret-value", **FAST)
    await fire(pool, [hook], 1)
    sender = sender_for(pool, [hook])
    with caplog.at_level(logging.DEBUG, logger="analyzer.webhooks"):
        async with running(sender):
            await until(lambda: sender.stats[0].failed_attempts >= 2, 10)
    row = await pool.fetchrow("SELECT webhook, body, last_error FROM webhook_deliveries")
    stored = f"{row['webhook']} {bytes(row['body']).decode()} {row['last_error']}"
    shown = f"{caplog.text} {sender.stats}"
    assert f"127.0.0.1:{port}/hook" in caplog.text
    for secret in ("hunter2", "tok123", "s3cret-value"):
        assert secret not in stored and secret not in shown


async def enqueue_raw(pool: asyncpg.Pool, hook: WebhookConfig, event: str, alert_id: int | None = None) -> int:
    """One outbox row for ``hook``, written as :func:`analyzer.outbox.enqueue` writes it (a new alert
    unless ``alert_id`` is given), without going through the alert lifecycle."""
    if alert_id is None:
        alert_id = await pool.fetchval(
            """INSERT INTO alerts (fingerprint, rule, severity, state, summary, started_at, last_seen_at)
               VALUES ($1, 'link_outage', 'critical', 'firing', 'test', $2, $2) RETURNING id""",
            uuid.uuid4().hex[:16],
            T0,
        )
    body = json.dumps({"event": event, "alert": {"id": alert_id}}).encode()
    await pool.execute(
        "INSERT INTO webhook_deliveries (id, alert_id, webhook, event, body) VALUES ($1, $2, $3, $4, $5)",
        uuid.uuid4(),
        alert_id,
        webhook_key(hook),
        event,
        body,
    )
    return int(alert_id)


async def test_client_errors_fail_the_delivery_and_unblock_the_next(pool: asyncpg.Pool, receivers: Any) -> None:
    """A 4xx does not heal by retrying: after ``max_attempts_4xx`` in a row the delivery is failed,
    says why, is counted in /metrics, and the alert's next delivery goes out."""
    rx = await receivers()
    rx.status = 400
    hook = WebhookConfig(url=rx.url, secret="s3cret", **FAST)  # max_attempts 0: a 5xx would retry forever
    alert_id = await enqueue_raw(pool, hook, "alert.firing")
    await enqueue_raw(pool, hook, "alert.resolved", alert_id)  # held back behind the firing
    sender = sender_for(pool, [hook], max_attempts_4xx=3)
    async with running(sender):
        await until(lambda: sender.stats[0].failed == 1, 10)
        row = await pool.fetchrow(
            "SELECT status, attempts, last_error FROM webhook_deliveries WHERE event = 'alert.firing'"
        )
        assert (row["status"], row["attempts"]) == ("failed", 3)
        assert row["last_error"].startswith("HTTP 400 Bad Request") and "3 times in a row" in row["last_error"]
        rx.status = 200  # the resolved behind it is no longer held back
        sender.notify()
        await until(lambda: len(rx.applied) == 1, 10)
        await until(lambda: sender.stats[0].delivered == 1, 10)
    assert [e for _, e, _ in rx.order] == ["alert.resolved"]
    assert await statuses(pool) == Counter(failed=1, delivered=1)
    assert sender.stats[0].failed == 1

    # /metrics of an API on the same database: the count comes from the outbox, so an API running
    # apart from the analyzer (and every API replica) shows it too.
    config = Config.model_validate({"alerts": {"webhooks": [hook.model_dump(mode="json")]}})
    fabric = build_aipod(FabricParams(gpus=64, radix=16))
    async with TestClient(TestServer(create_app(config, fabric, pool=pool))) as client:
        text = await (await client.get("/metrics")).text()
    key = webhook_key(hook)
    assert f'fabricmon_webhook_deliveries_failed_total{{url="{rx.url}",webhook="{key}"}} 1.0' in text
    assert f'fabricmon_webhook_deliveries_pending{{url="{rx.url}",webhook="{key}"}} 0.0' in text


@pytest.mark.parametrize(
    "script",
    [
        pytest.param([429, 408, 429, 429], id="408-and-429-are-retryable"),
        pytest.param([400, 400, 503, 400, 400], id="only-consecutive-4xx-count"),
        pytest.param([404, 404, 429, 404], id="429-between-4xx-resets-the-run"),
    ],
)
async def test_retryable_answers_keep_the_delivery_alive(pool: asyncpg.Pool, receivers: Any, script: list[int]) -> None:
    rx = await receivers()
    rx.script = list(script)
    hook = WebhookConfig(url=rx.url, secret="s3cret", **FAST)
    await enqueue_raw(pool, hook, "alert.firing")
    sender = sender_for(pool, [hook], max_attempts_4xx=3)
    async with running(sender):
        await until(lambda: len(rx.applied) == 1, 10)
        await until(lambda: sender.stats[0].delivered == 1, 10)
        # the sender counts a delivery when the receiver takes it, then records it: wait for the row
        for _ in range(100):
            if await statuses(pool) == Counter(delivered=1):
                break
            await asyncio.sleep(0.02)
    assert sum(rx.posts.values()) == len(script) + 1
    assert await statuses(pool) == Counter(delivered=1) and sender.stats[0].failed == 0
