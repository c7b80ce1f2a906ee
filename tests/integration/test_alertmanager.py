"""Incidents pushed to a real Alertmanager (Debian's ``prometheus-alertmanager``), which routes them
to a webhook receiver in the test: firing then resolved with the same labels, a silence made with
``amtool`` mutes its match only, an HA pair both get every push, a dead one is counted and logged
once and catches up, and pushes never queue behind a slow Alertmanager.

Incidents are real rows: findings correlated and synced into TimescaleDB by ``sync_alerts``,
then pushed by :class:`~analyzer.alertmanager.AlertmanagerPusher` as the analyzer does. Times
are the wall clock's: Alertmanager judges ``endsAt`` against its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest
from aiohttp import web

from analyzer.actions import decide_all
from analyzer.alertmanager import AlertmanagerPusher
from analyzer.alerts import SyncResult, sync_alerts
from analyzer.config import AlertmanagerConfig
from analyzer.correlation import correlate
from analyzer.findings import Finding
from analyzer.links import links_scope
from analyzer.service import AnalyzerService
from config.model import Config
from fabric.model import FabricParams
from fabric.topology import build_aipod
from store.db import create_pool
from store.migrate import migrate
from tests.support.ports import free_port
from tests.support.waiting import until

pytestmark = pytest.mark.db

ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
AMTOOL = shutil.which("amtool")
if ALERTMANAGER is None or AMTOOL is None:
    pytest.skip(
        "needs Alertmanager and amtool: apt-get install prometheus-alertmanager (Debian package)",
        allow_module_level=True,
    )

FABRIC = build_aipod(FabricParams(gpus=1024), naming="mixed")  # vendor port names
EXTERNAL = "http://fabricmon.test:8080"
#: Long enough that no alert ends by itself during a test: a resolve seen is one fabricmon sent.
INTERVAL_S = 60.0
AM_CONFIG = """\
route:
  receiver: test
  group_by: ['...']
  group_wait: 300ms
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: test
    webhook_configs:
      - url: {hook}
        send_resolved: true
"""


@dataclass
class Receiver:
    """Alertmanager's webhook notifications, per path (one path per Alertmanager)."""

    url: str = ""
    got: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def alerts(self, path: str, status: str | None = None, **labels: str) -> list[dict[str, Any]]:
        """The notified alerts on ``path`` whose labels include ``labels``."""
        return [
            a
            for n in self.got.get(path, [])
            for a in n["alerts"]
            if (status is None or a["status"] == status) and labels.items() <= a["labels"].items()
        ]


@contextlib.asynccontextmanager
async def receiving() -> AsyncIterator[Receiver]:
    rx = Receiver()

    async def hook(request: web.Request) -> web.Response:
        rx.got.setdefault(request.path, []).append(json.loads(await request.read()))
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/{name}", hook)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    rx.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
    try:
        yield rx
    finally:
        await runner.cleanup()


class Alertmanager:
    """A real Alertmanager on loopback, clustering off, routing everything to ``hook``."""

    def __init__(self, base: Path, hook: str) -> None:
        self.dir = base
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: asyncio.subprocess.Process | None = None
        base.mkdir(parents=True, exist_ok=True)
        (base / "alertmanager.yml").write_text(AM_CONFIG.format(hook=hook))

    async def start(self) -> None:
        assert ALERTMANAGER is not None
        with (self.dir / "log.txt").open("ab") as log_file:
            self.proc = await asyncio.create_subprocess_exec(
                ALERTMANAGER,
                f"--config.file={self.dir / 'alertmanager.yml'}",
                f"--storage.path={self.dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--cluster.listen-address=",  # no gossip: a lone instance
                "--log.level=warn",
                stdout=log_file,
                stderr=log_file,
            )
        async with aiohttp.ClientSession() as session:
            deadline = time.monotonic() + 10
            while True:
                with contextlib.suppress(aiohttp.ClientError):
                    async with session.get(f"{self.url}/-/ready") as resp:
                        if resp.status == 200:
                            return
                if self.proc.returncode is not None or time.monotonic() > deadline:
                    raise AssertionError(f"Alertmanager did not start: {(self.dir / 'log.txt').read_text()[-2000:]}")
                await asyncio.sleep(0.05)

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()

    async def alerts(self) -> list[dict[str, Any]]:
        """What Alertmanager holds (``GET /api/v2/alerts``), silenced ones included."""
        async with aiohttp.ClientSession() as session, session.get(f"{self.url}/api/v2/alerts") as resp:
            assert resp.status == 200
            return list(await resp.json())

    def config(self, **kw: Any) -> AlertmanagerConfig:
        return AlertmanagerConfig(url=self.url, **kw)


@dataclass
class Lab:
    """Alertmanagers notifying one receiver, ``<receiver.url>/<name>`` each."""

    base: Path
    receiver: Receiver
    running: list[Alertmanager] = field(default_factory=list)

    async def __call__(self, name: str, start: bool = True) -> Alertmanager:
        am = Alertmanager(self.base / name, f"{self.receiver.url}/{name}")
        self.running.append(am)
        if start:
            await am.start()
        return am


@pytest.fixture
async def alertmanagers(tmp_path: Path) -> AsyncIterator[Lab]:
    async with receiving() as rx:
        lab = Lab(tmp_path, rx)
        try:
            yield lab
        finally:
            for am in lab.running:
                await am.stop()


@contextlib.asynccontextmanager
async def pushing(pool: asyncpg.Pool, ams: list[AlertmanagerConfig], **kw: Any) -> AsyncIterator[AlertmanagerPusher]:
    pusher = AlertmanagerPusher(pool, ams, interval_s=INTERVAL_S, fabric="pod-test", external_url=EXTERNAL, **kw)
    pusher.start()
    try:
        yield pusher
    finally:
        await pusher.close()


def outage(port: int) -> Finding:
    """Server ``port``'s link down, on a leaf of its own: one incident each."""
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


async def sync(pool: asyncpg.Pool, ports: list[int]) -> SyncResult:
    """One evaluation that sees exactly these outages (hold-down 0: the others resolve now)."""
    incidents = decide_all(correlate([outage(p) for p in ports], FABRIC), FABRIC)
    return await sync_alerts(pool, incidents, now=datetime.now(UTC), hold_down_s=0, webhooks=[])


async def push(pusher: AlertmanagerPusher) -> None:
    pusher.push(datetime.now(UTC))
    assert await pusher.flush(10), "push not done in time"


def at(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


async def test_an_incident_fires_then_resolves_with_the_same_labels(pool: asyncpg.Pool, alertmanagers: Lab) -> None:
    am = await alertmanagers("am")
    rx = alertmanagers.receiver
    assert (await sync(pool, [4])).fired == 1  # a Junos breakout port: '/' and ':' in its name
    (alert_id,) = [r["id"] for r in await pool.fetch("SELECT id FROM alerts")]
    async with pushing(pool, [am.config()]) as pusher:
        await push(pusher)
        await until(lambda: rx.alerts("/am", "firing"), 10, "a firing notification")
        (firing,) = rx.alerts("/am", "firing")
        assert firing["labels"] == {
            "alertname": "link_outage",
            "fingerprint": firing["labels"]["fingerprint"],
            "switch": "lf-g1-r4",
            "port": "et-0/0/1:1",
            "rail": "4",
            "group": "1",
            "server": "srv-g1-004",
            "fabric": "pod-test",
        }
        ann = firing["annotations"]
        assert ann["summary"] == "lf-g1-r4:et-0/0/1:1 is down" and ann["recommended_action"] == "drain"
        assert ann["hosts"] == "srv-g1-004" and ann["action_hosts"] == "srv-g1-004"
        assert ann["incident_url"] == f"{EXTERNAL}/v1/incidents/{alert_id}" == firing["generatorURL"]

        await push(pusher)  # re-sent while firing: still one alert, notified once
        assert (await sync(pool, [])).resolved == 1
        ended = await pool.fetchval("SELECT ended_at FROM alerts WHERE id = $1", alert_id)
        await push(pusher)
        await until(lambda: rx.alerts("/am", "resolved"), 10, "a resolved notification")
        (resolved,) = rx.alerts("/am", "resolved")
        assert resolved["labels"] == firing["labels"] and resolved["startsAt"] == firing["startsAt"]
        assert abs((at(resolved["endsAt"]) - ended).total_seconds()) < 0.01  # fabricmon's resolve, not a timeout
        assert len(rx.alerts("/am", "firing")) == 1
        (stats,) = pusher.stats
        assert (stats.alertmanager, stats.pushes, stats.failures) == (f"127.0.0.1:{am.port}", 3, 0)
        assert stats.alerts == 1 and stats.last_success_at is not None


async def test_an_amtool_silence_mutes_its_match_only(pool: asyncpg.Pool, alertmanagers: Lab) -> None:
    am = await alertmanagers("am")
    rx = alertmanagers.receiver
    assert AMTOOL is not None
    proc = await asyncio.create_subprocess_exec(
        AMTOOL,
        "silence",
        "add",
        f"--alertmanager.url={am.url}",
        "--author=test",
        "--comment=lf-g1-r2 under maintenance",
        "--duration=10m",
        "switch=lf-g1-r2",
        "fabric=pod-test",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    silence = out.decode().strip()
    assert (await sync(pool, [1, 2])).fired == 2  # lf-g1-r1 and lf-g1-r2
    async with pushing(pool, [am.config()]) as pusher:
        await push(pusher)
        await until(lambda: rx.alerts("/am", switch="lf-g1-r1"), 10, "the unsilenced notification")
        held = {a["labels"]["switch"]: a for a in await am.alerts()}
        assert set(held) == {"lf-g1-r1", "lf-g1-r2"}  # both arrived ...
        assert held["lf-g1-r2"]["status"] == {"state": "suppressed", "silencedBy": [silence], "inhibitedBy": []}
        assert held["lf-g1-r1"]["status"]["state"] == "active"
        await asyncio.sleep(2.5)  # group_wait and two group intervals: the silenced one had its chance
        await push(pusher)
        await asyncio.sleep(1.5)
        assert rx.alerts("/am", switch="lf-g1-r2") == []  # ... and only the unsilenced one was notified
        assert len(rx.alerts("/am", switch="lf-g1-r1")) == 1


async def test_an_ha_pair_both_get_every_push(pool: asyncpg.Pool, alertmanagers: Lab) -> None:
    a, b = await alertmanagers("a"), await alertmanagers("b")
    rx = alertmanagers.receiver
    await sync(pool, [5])
    async with pushing(pool, [a.config(), b.config()]) as pusher:
        await push(pusher)
        await until(lambda: rx.alerts("/a") and rx.alerts("/b"), 10, "both notified")
        assert rx.alerts("/a")[0]["labels"] == rx.alerts("/b")[0]["labels"]
        assert [(s.pushes, s.failures) for s in pusher.stats] == [(1, 0), (1, 0)]


async def test_a_dead_alertmanager_delays_no_other_and_catches_up(
    pool: asyncpg.Pool, alertmanagers: Lab, caplog: pytest.LogCaptureFixture
) -> None:
    live = await alertmanagers("live")
    dead = await alertmanagers("dead", start=False)
    rx = alertmanagers.receiver
    caplog.set_level(logging.INFO, logger="analyzer.alertmanager")
    await sync(pool, [7])
    async with pushing(pool, [dead.config(timeout_s=2), live.config()]) as pusher:
        dead_stats, live_stats = pusher.stats
        for _ in range(2):
            await push(pusher)
        await until(lambda: rx.alerts("/live"), 10, "the live one notified")
        assert (dead_stats.pushes, dead_stats.failures, live_stats.failures) == (2, 2, 0)
        assert dead_stats.last_error is not None and dead_stats.last_success_at is None
        assert "ClientConnectorError" in dead_stats.last_error or "refused" in dead_stats.last_error
        mine = [r for r in caplog.records if r.name == "analyzer.alertmanager"]
        warnings = [r for r in mine if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and dead.url in warnings[0].getMessage()  # once per outage

        await dead.start()
        await push(pusher)
        await until(lambda: rx.alerts("/dead"), 10, "the revived one notified")
        assert (dead_stats.pushes, dead_stats.failures) == (3, 2) and pusher.stats[0].last_success_at is not None
        back = [r for r in caplog.records if r.name == "analyzer.alertmanager" and "accepting" in r.getMessage()]
        assert len(back) == 1 and back[0].levelno == logging.INFO


@contextlib.asynccontextmanager
async def slow_alertmanager(delay_s: float) -> AsyncIterator[tuple[str, list[list[dict[str, Any]]]]]:
    """An Alertmanager API that takes ``delay_s`` per POST and records each list it was sent."""
    posts: list[list[dict[str, Any]]] = []

    async def alerts(request: web.Request) -> web.Response:
        posts.append(json.loads(await request.read()))
        await asyncio.sleep(delay_s)
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/api/v2/alerts", alerts)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}", posts  # type: ignore[union-attr]
    finally:
        await runner.cleanup()


async def test_latest_state_wins_batches_and_a_database_outage(fresh_db: str) -> None:
    """Pushes to a slow Alertmanager never queue (the newest state replaces one not yet sent), a long
    list goes in batches, and a round that cannot read the database re-sends the last state."""
    pool = await create_pool(fresh_db)
    async with pool.acquire() as conn:
        await migrate(conn)
    await sync(pool, [1, 2, 3, 4, 5])
    async with slow_alertmanager(0.3) as (url, posts):
        pusher = AlertmanagerPusher(pool, [AlertmanagerConfig(url=url)], interval_s=10, fabric="f", batch=2)
        pusher.start()
        try:
            spent = 0.0
            for _ in range(6):
                started = time.monotonic()
                pusher.push(datetime.now(UTC))
                spent += time.monotonic() - started
                await asyncio.sleep(0.1)
            assert spent < 0.05  # push() never waits for the database or the Alertmanager
            assert await pusher.flush(10)
            (stats,) = pusher.stats
            assert stats.superseded >= 1 and stats.pushes + stats.superseded <= 6 and stats.failures == 0
            assert [len(p) for p in posts[:3]] == [2, 2, 1]  # five incidents, two per POST
            assert len(posts) == 3 * stats.pushes
            last = posts[-1][0]["endsAt"]

            await pool.close()  # the database goes away
            pusher.push(datetime.now(UTC))
            assert await pusher.flush(10)
            assert pusher.read_failures == 1 and stats.failures == 0
            assert [a["labels"] for p in posts[-3:] for a in p] == [a["labels"] for p in posts[:3] for a in p]
            assert at(posts[-1][0]["endsAt"]) > at(last)  # the last state read, endsAt renewed
        finally:
            await pusher.close()
            await pool.close()


async def test_the_push_query_finds_its_rows_by_index(pool: asyncpg.Pool) -> None:
    from analyzer import alertmanager

    async with pool.acquire() as conn:
        await conn.execute("SET enable_seqscan = off")
        rows = await conn.fetch("EXPLAIN " + alertmanager._SQL, datetime.now(UTC))
    plan = "\n".join(r[0] for r in rows)
    assert "alerts_resolved_ended" in plan and "alerts_one_firing" in plan, plan


async def test_the_analyzer_pushes_every_round_warm_up_included(pool: asyncpg.Pool, alertmanagers: Lab) -> None:
    """The service wiring: a restarted analyzer, still warming up (it raises no alerts yet), keeps
    pushing the incidents stored before, so Alertmanager does not see them end; stop closes it."""
    am = await alertmanagers("am")
    rx = alertmanagers.receiver
    await sync(pool, [9])
    config = Config.model_validate({"analyzer": {"interval_s": 0.5}, "alerts": {"alertmanagers": [{"url": am.url}]}})
    service = AnalyzerService(config, FABRIC, pool)
    assert service.warmup_s() > 10
    stop = asyncio.Event()
    running = asyncio.create_task(service.run(stop))
    try:
        await until(lambda: rx.alerts("/am", "firing") and service.alertmanagers.stats[0].pushes >= 3, 10)
    finally:
        stop.set()
        await asyncio.wait_for(running, 10)
    (alert,) = rx.alerts("/am", "firing")
    assert alert["labels"]["switch"] == "lf-g2-r1" and alert["labels"]["fabric"] == "aipod-1024"
    assert service.alertmanagers.stats[0].failures == 0
    assert all(t.get_name() != "alertmanager-pusher" for t in asyncio.all_tasks())
