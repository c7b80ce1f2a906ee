"""An analyzer pair on the real database: two ``fabricmon analyze`` processes, one leader.

The fabric (64 GPUs, 20 switches) has no collector, so every round finds the same ``collection``
incident ("20 switches silent at once"): one incident that stays open across every takeover.
Two signed receivers take its webhooks: ``ok`` accepts at once (the leader delivers it before it
dies: nobody may send it again), ``late`` answers 503 until the leader is gone (its delivery is
pending at the takeover: the new leader sends it, once).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from aiohttp import web

from analyzer.alerts import sync_alerts
from analyzer.correlation import correlate
from analyzer.findings import Finding, Scope
from analyzer.leader import LOCK_KEY, ElectionTiming, LeaderElection
from analyzer.payloads import verify_signature
from analyzer.service import AnalyzerService
from config.model import Config
from fabric.model import FabricParams
from fabric.topology import build_aipod
from store.db import create_pool
from store.migrate import migrate
from tests.support.waiting import until

pytestmark = pytest.mark.asyncio(loop_scope="function")

ROOT = Path(__file__).resolve().parents[2]
SECRET = "s3cret"
INTERVAL_S = 1.0
TIMING = ElectionTiming.for_interval(INTERVAL_S)
WARMUP_S = 3 * 1.0  # stale_intervals x the 1 s sampling interval


@dataclass
class Delivery:
    id: str
    event: str
    fingerprint: str


@dataclass
class Receivers:
    """Signed webhook receivers at ``/ok`` and ``/late``; ``late`` refuses while ``refusing``."""

    base: str = ""
    refusing: bool = True
    accepted: dict[str, list[Delivery]] = field(default_factory=lambda: {"ok": [], "late": []})
    refused: Counter[str] = field(default_factory=Counter)

    async def hook(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        body = await request.read()
        ts, sig = request.headers["X-Fabricmon-Timestamp"], request.headers["X-Fabricmon-Signature"]
        if not verify_signature(SECRET, ts, body, sig):
            return web.Response(status=401)
        if name == "late" and self.refusing:
            self.refused[name] += 1
            return web.Response(status=503)
        alert = json.loads(body)["alert"]
        self.accepted[name].append(
            Delivery(
                request.headers["X-Fabricmon-Delivery"], request.headers["X-Fabricmon-Event"], alert["fingerprint"]
            )
        )
        return web.Response(status=204)

    def check_once_each(self) -> None:
        """Every delivery id once per receiver; one ``alert.firing`` per incident, no resolve."""
        for name, got in self.accepted.items():
            ids = Counter(d.id for d in got)
            assert all(n == 1 for n in ids.values()), f"{name}: a delivery id seen twice: {ids}"
            firing = Counter(d.fingerprint for d in got if d.event == "alert.firing")
            assert list(firing.values()) == [1], f"{name}: {firing}"
            assert not [d for d in got if d.event != "alert.firing"], f"{name}: {got}"


@contextlib.asynccontextmanager
async def receivers() -> AsyncIterator[Receivers]:
    rx = Receivers()
    app = web.Application()
    app.router.add_post("/{name}", rx.hook)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    rx.base = f"http://127.0.0.1:{port}"
    try:
        yield rx
    finally:
        await runner.cleanup()


def write_config(path: Path, rx: Receivers) -> Path:
    hook = {"secret": SECRET, "timeout_s": 2, "backoff_initial_s": 0.2, "backoff_max_s": 0.5}
    config = {
        "fabric": {"generate": {"gpus": 64, "radix": 16}},
        "collector": {"gnmi_interval_s": 1.0, "snmp_interval_s": 1.0},
        "analyzer": {"interval_s": INTERVAL_S, "resolve_hold_down_s": 5.0},
        "alerts": {"webhooks": [{"url": f"{rx.base}/ok", **hook}, {"url": f"{rx.base}/late", **hook}]},
    }
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


@contextlib.asynccontextmanager
async def pool_on(dsn: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(dsn)
    try:
        yield pool
    finally:
        await pool.close()


@dataclass
class Analyzer:
    """One ``fabricmon -v analyze`` process and its log."""

    name: str
    proc: asyncio.subprocess.Process
    log: Path
    started: float

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def count(self, needle: str) -> int:
        return sum(needle in line for line in self.text().splitlines())

    def evaluations(self) -> list[str]:
        return [line for line in self.text().splitlines() if "analyzer.service: evaluation" in line]

    async def wait_for(self, needle: str, within_s: float, at_least: int = 1) -> None:
        deadline = time.monotonic() + within_s
        while self.count(needle) < at_least:
            if self.proc.returncode is not None or time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: no {needle!r} within {within_s} s:\n{self.text()[-3000:]}")
            await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def analyzers(dsn: str, config: Path, tmp: Path) -> AsyncIterator[Callable[[str], Any]]:
    """Start ``fabricmon analyze`` processes on ``dsn``; every one is killed on the way out."""
    env = {**os.environ, "FABRICMON_DATABASE__DSN": dsn}
    env.pop("FABRICMON_CONFIG", None)
    started: list[Analyzer] = []

    async def start(name: str) -> Analyzer:
        log = tmp / f"{name}.log"
        with log.open("w") as err:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "cli.main", "-v", "--config", str(config), "analyze",
                cwd=ROOT, env=env, stdout=asyncio.subprocess.DEVNULL, stderr=err,
            )  # fmt: skip
        one = Analyzer(name, proc, log, time.monotonic())
        started.append(one)
        return one

    try:
        yield start
    finally:
        for a in started:
            if a.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    a.proc.send_signal(signal.SIGCONT)
                    a.proc.kill()
            await a.proc.wait()


async def lock_holder(conn: asyncpg.Connection) -> str | None:
    """The ``application_name`` of the session holding the analyzer lock."""
    key = LOCK_KEY & (2**64 - 1)  # pg_locks shows a bigint key as two 32-bit halves
    return await conn.fetchval(  # type: ignore[no-any-return]
        """SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a USING (pid)
           WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
             AND l.classid::bigint = $1 AND l.objid::bigint = $2""",
        key >> 32,
        key & 0xFFFFFFFF,
    )


async def first_run_after(conn: asyncpg.Connection, since: datetime, within_s: float) -> tuple[datetime, float]:
    """The first ``analyzer_runs`` row of a round that started after ``since``, and when it was seen."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        at = await conn.fetchval("SELECT min(time) FROM analyzer_runs WHERE time > $1", since)
        if at is not None:
            return at, time.time()
        await asyncio.sleep(0.02)
    raise AssertionError(f"no evaluation within {within_s} s of {since}")


async def pair(start: Callable[[str], Any], delivered: Callable[[], bool]) -> tuple[Analyzer, Analyzer]:
    """A leads, B stands by and has run longer than a warm-up; the incident has been ``delivered``."""
    a = await start("a")
    await a.wait_for("analyzer.leader: leading", 30)
    b = await start("b")
    await b.wait_for("analyzer.leader: standby", 30)
    running = time.monotonic()  # the service's warm-up began just before its first try
    await until(delivered, 20, "the incident's webhooks")
    await asyncio.sleep(max(0.0, running + WARMUP_S + 0.5 - time.monotonic()))
    assert a.evaluations() and not b.evaluations(), "only the leader evaluates"
    return a, b


async def stopped(a: Analyzer) -> int:
    a.proc.send_signal(signal.SIGTERM)
    return await asyncio.wait_for(a.proc.wait(), 20)


async def test_two_electors_one_leader_and_a_takeover(fresh_db: str) -> None:
    """In one process: one of two leads; its session ended by the server, the other leads within
    a retry, the first notices at its next check and stands by; a clean close hands over."""
    async with pool_on(fresh_db) as pool:
        await _electors(pool)
        async with pool.acquire() as conn:
            assert await lock_holder(conn) is None  # both closed: the lock is free


async def _electors(pool: asyncpg.Pool) -> None:
    first = LeaderElection(pool, INTERVAL_S, identity="first")
    second = LeaderElection(pool, INTERVAL_S, identity="second")
    first.start()
    try:
        # first leads before second starts: which of two started at once wins is a race (a fresh
        # make test once saw second win under load); who stays leader while both run is the test
        await asyncio.wait_for(first.wait_leading(), 5)
        second.start()
        await asyncio.sleep(TIMING.retry_s * 2)
        assert (first.leader, second.leader) == (True, False)
        async with first._lock:  # the lock session's own settings
            assert first._conn is not None
            assert await first._conn.fetchval("SHOW idle_session_timeout") == "3s"
            assert await first._conn.fetchval("SHOW tcp_user_timeout") == "6000"  # ms
        async with pool.acquire() as conn:
            assert await lock_holder(conn) == "fabricmon-analyzer first"
            mine = await conn.fetchval("SHOW idle_session_timeout")
            pid = await conn.fetchval(
                "SELECT pid FROM pg_stat_activity WHERE application_name = $1", "fabricmon-analyzer first"
            )
            t0 = time.monotonic()
            await conn.execute("SELECT pg_terminate_backend($1)", pid)
        assert mine == "0"  # the lock session's settings stay its own
        await asyncio.wait_for(second.wait_leading(), 5)
        took = time.monotonic() - t0
        assert took <= TIMING.retry_s + 0.5
        await asyncio.wait_for(first.wait_standby(), 5)
        assert not await first.confirm() and await second.confirm()
        assert (first.transitions, second.transitions) == (2, 1)
        t0 = time.monotonic()
        await second.close()
        await asyncio.wait_for(first.wait_leading(), 5)
        print(f"\ntakeover after the session ended: {took:.2f} s; after a clean close: {time.monotonic() - t0:.2f} s")
    finally:
        await second.close()
        await first.close()


async def test_kill_9_the_leader(fresh_db: str, tmp_path: Path) -> None:
    """The standby evaluates within two intervals of the leader's kill -9; nothing is sent twice,
    and the delivery pending at the kill is sent by the new leader, once."""
    config = tmp_path / "fm.yaml"
    async with (
        pool_on(fresh_db) as check,
        receivers() as rx,
        analyzers(fresh_db, write_config(config, rx), tmp_path) as start,
    ):
        a, b = await pair(start, lambda: len(rx.accepted["ok"]) == 1 and rx.refused["late"] > 0)
        async with check.acquire() as conn:
            assert await lock_holder(conn) == f"fabricmon-analyzer {socket.gethostname()}:{a.proc.pid}"

        killed = datetime.now(UTC)
        a.proc.kill()
        rx.refusing = False
        async with check.acquire() as conn:
            began, seen = await first_run_after(conn, killed, 10)
        took, landed = (began - killed).total_seconds(), seen - killed.timestamp()
        print(f"\nkill -9 -> the standby's first evaluation: began {took:.2f} s, stored {landed:.2f} s after the kill")
        assert landed <= 2 * INTERVAL_S
        assert await a.proc.wait() == -signal.SIGKILL
        await b.wait_for("analyzer.leader: leading", 1)
        assert "warming up" not in b.evaluations()[0]  # it has run longer than a warm-up: alerts at once

        await until(lambda: len(rx.accepted["late"]) == 1, 10, "the pending delivery sent by the new leader")
        await b.wait_for("analyzer.service: evaluation", 10, at_least=len(b.evaluations()) + 2)
        rx.check_once_each()
        async with check.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM alerts") == 1
            statuses = await conn.fetch("SELECT status, count(*) AS n FROM webhook_deliveries GROUP BY status")
            assert {r["status"]: r["n"] for r in statuses} == {"delivered": 2}
        assert await stopped(b) == 0
        assert "stopped leading: the analyzer lock is released" in b.text()


async def test_sigstop_the_leader(fresh_db: str, tmp_path: Path) -> None:
    """A frozen leader keeps its socket, but its lock session goes idle: the server ends it after
    ``idle_session_timeout`` and the standby leads. Resumed, the old leader finds its session gone,
    steps down before it evaluates again, and sends nothing twice."""
    config = tmp_path / "fm.yaml"
    async with (
        pool_on(fresh_db) as check,
        receivers() as rx,
        analyzers(fresh_db, write_config(config, rx), tmp_path) as start,
    ):
        rx.refusing = False
        a, b = await pair(start, lambda: len(rx.accepted["ok"]) == len(rx.accepted["late"]) == 1)
        # Freeze it just after a round (frozen mid-transaction, its row locks: the test at the end).
        await a.wait_for("analyzer.service: evaluation", 10, at_least=len(a.evaluations()) + 1)
        a.proc.send_signal(signal.SIGSTOP)
        frozen = datetime.now(UTC)
        rounds = len(a.evaluations())
        async with check.acquire() as conn:
            _, seen = await first_run_after(conn, frozen, 15)
        landed = seen - frozen.timestamp()
        bound = TIMING.takeover_after_freeze_s() + INTERVAL_S  # + the first round, with room
        print(f"\nSIGSTOP -> the standby's first evaluation stored after {landed:.2f} s (bound {bound:.1f} s)")
        assert TIMING.idle_timeout_s - TIMING.retry_s - 0.1 <= landed <= bound
        await b.wait_for("analyzer.leader: leading", 1)

        await asyncio.sleep(1.0)  # frozen past the bound
        a.proc.send_signal(signal.SIGCONT)
        await a.wait_for("lost leadership: ", 5)
        await a.wait_for("analyzer.leader: standby", 5)
        await b.wait_for("analyzer.service: evaluation", 10, at_least=len(b.evaluations()) + 2)
        assert len(a.evaluations()) == rounds, "the resumed leader evaluated on a lock it had lost"
        async with check.acquire() as conn:
            assert await lock_holder(conn) == f"fabricmon-analyzer {socket.gethostname()}:{b.proc.pid}"
        rx.check_once_each()
        assert (len(rx.accepted["ok"]), len(rx.accepted["late"])) == (1, 1)
        assert await stopped(a) == 0 and await stopped(b) == 0


#: A leader's alert sync, frozen between its first step (:func:`analyzer.alerts.lock_firing`, as
#: ``sync_alerts`` takes it with the election's idle timeout) and its commit.
_FROZEN_SYNC = """
import asyncio, sys
from analyzer.alerts import lock_firing
from analyzer.leader import ElectionTiming
from store.db import create_pool

async def main() -> None:
    pool = await create_pool(sys.argv[1])
    async with pool.acquire() as conn:
        tx = conn.transaction()
        await tx.start()
        await lock_firing(conn, ElectionTiming.for_interval(float(sys.argv[2])).idle_timeout_s)
        print("locked", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)  # frozen here
        try:
            await tx.commit()
            print("committed", flush=True)
        except Exception as exc:
            print(f"gone: {type(exc).__name__}", flush=True)

asyncio.run(main())
"""


async def test_a_leader_frozen_inside_its_alert_sync_does_not_block_its_successor(fresh_db: str) -> None:
    """SIGSTOP inside the transaction that holds the firing alerts' row locks: PostgreSQL ends that
    session once it has been idle in the transaction for the lock session's idle timeout, so the
    new leader's alert sync waits that long at most, not until the old process resumes or dies."""
    fabric = build_aipod(FabricParams(gpus=64, radix=16))
    finding = Finding("stale_switch", "sp-r1-1", "critical", "sp-r1-1 silent", Scope(switches=("sp-r1-1",)), {})
    incidents = correlate([finding], fabric)
    async with pool_on(fresh_db) as pool:
        async with pool.acquire() as conn:
            await migrate(conn)
        assert (await sync_alerts(pool, incidents, now=datetime.now(UTC), hold_down_s=60, webhooks=[])).fired == 1
        helper = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _FROZEN_SYNC, fresh_db, str(INTERVAL_S),
            cwd=ROOT, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert helper.stdin is not None and helper.stdout is not None
        try:
            assert await asyncio.wait_for(helper.stdout.readline(), 20) == b"locked\n"
            helper.send_signal(signal.SIGSTOP)
            t0 = time.monotonic()
            result = await asyncio.wait_for(
                sync_alerts(pool, incidents, now=datetime.now(UTC), hold_down_s=60, webhooks=[]), 30
            )
            waited = time.monotonic() - t0
            print(
                f"\nsuccessor's alert sync behind a frozen one: {waited:.2f} s (idle timeout {TIMING.idle_timeout_s} s)"
            )
            assert result.updated == 1
            # it did wait on the frozen session's locks, and no longer than the server's bound
            assert TIMING.idle_timeout_s - 0.5 <= waited <= TIMING.idle_timeout_s + 2.0
            helper.send_signal(signal.SIGCONT)
            helper.stdin.write(b"\n")
            await helper.stdin.drain()
            line = await asyncio.wait_for(helper.stdout.readline(), 20)
            assert line.startswith(b"gone: "), line  # resumed, its transaction is over: nothing it held commits
        finally:
            with contextlib.suppress(ProcessLookupError):
                helper.send_signal(signal.SIGCONT)
                helper.kill()
            await helper.wait()


async def test_a_standby_keeps_the_collectors_catch_up_grace_for_its_takeover(fresh_db: str) -> None:
    """A collector replaying its spool, seen while this analyzer stands by, is in the memory the
    standby leads with: its switches get their catch-up grace after a takeover (the memory's own
    rule, tests/unit), instead of their silence being judged at once."""
    fabric = build_aipod(FabricParams(gpus=64, radix=16))
    config = Config.model_validate(
        {"fabric": {"generate": {"gpus": 64, "radix": 16}}, "analyzer": {"interval_s": INTERVAL_S}}
    )
    async with pool_on(fresh_db) as pool:
        async with pool.acquire() as conn:
            await migrate(conn)
            await conn.execute(
                """INSERT INTO collector_heartbeats (collector, started_at, heartbeat_at, replaying, switches,
                                                     interval_s, resumed_at)
                   VALUES ('c1:1', now() - interval '1 hour', now(), true, $1, 10, now() - interval '1 hour')""",
                sorted(fabric.switches),
            )
        async with pool.acquire() as holder:  # another analyzer leads
            assert await holder.fetchval("SELECT pg_try_advisory_lock($1)", LOCK_KEY)
            service = AnalyzerService(config, fabric, pool)
            stop = asyncio.Event()
            task = asyncio.create_task(service.run(stop))
            try:
                await until(lambda: "c1:1" in service.memory.last_bad, 3 * INTERVAL_S, "the standby saw c1 replay")
                assert service.rounds == 0  # it only watched
            finally:
                stop.set()
                await asyncio.wait_for(task, 10)
            await holder.execute("SELECT pg_advisory_unlock($1)", LOCK_KEY)
