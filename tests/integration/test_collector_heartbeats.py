"""Collector heartbeats, end to end: ``fabricmon sim`` and ``fabricmon collect`` as real processes,
a real TimescaleDB, the analyzer's reading of it (analyzer.collection).

The point of the table: a collector that is frozen (SIGSTOP), wedged or replaying its spool makes
its switches look stale, and that must read as a monitoring failure, never as the fabric failing.
So besides the row itself, the tests check that every switch the freshness check calls stale while
collection is disturbed is one the collection state explains.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import yaml

from analyzer.collection import CollectionState, CollectorState, read_collection
from analyzer.config import AnalyzerConfig
from analyzer.engine import context_for
from analyzer.findings import Finding
from analyzer.stability import check_freshness
from fabric.topology import FabricParams, build_aipod
from store.config import WriterConfig
from store.db import create_pool
from store.heartbeats import Heartbeat, prune, upsert
from store.migrate import migrate
from store.pgserver import EmbeddedStore
from store.records import PortSample
from store.writer import BatchWriter
from tests.support.ports import free_port
from tests.support.sim_process import sim_process
from tests.support.waiting import until_sync

FABRIC = build_aipod(FabricParams(gpus=16, rails=2, radix=8))  # 10 switches: 4 leaves (gNMI), 6 over SNMP
SWITCHES = frozenset(FABRIC.switches)
INTERVAL_S = 1.0
S = 3.0 * INTERVAL_S  # the analyzer's staleness limit: stale_intervals (3) x the sampling interval


@pytest.fixture(scope="module")
def sim_config(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A small simulated fabric (one process for the module) and the config that points at it."""
    d = tmp_path_factory.mktemp("heartbeat-sim")
    args = [
        "--gpus",
        "16",
        "--rails",
        "2",
        "--radix",
        "8",
        "--gnmi",
        "127.0.0.1:0",
        "--snmp",
        "127.0.0.1:0",
        "--control",
        "",
    ]
    with sim_process(d, args, len(SWITCHES)) as config:
        yield config


class Db:
    """The test's own connection, on a loop of its own (the test itself is synchronous)."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.loop = asyncio.new_event_loop()
        self.conn: asyncpg.Connection = self.run(asyncpg.connect(dsn, timeout=30))
        self.run(migrate(self.conn))
        self.locker: asyncpg.Connection | None = None

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def row(self, collector: str) -> Heartbeat | None:
        r = self.run(self.conn.fetchrow("SELECT * FROM collector_heartbeats WHERE collector = $1", collector))
        return None if r is None else Heartbeat.from_record(r)

    def row_if(self, collector: str, cond: Callable[[Heartbeat], bool]) -> Heartbeat | None:
        r = self.row(collector)
        return r if r is not None and cond(r) else None

    def judge(self) -> tuple[CollectionState, list[Finding]]:
        """The collection state and the freshness check's findings, at one instant."""

        async def both() -> tuple[CollectionState, list[Finding]]:
            now = datetime.now(UTC)
            state = await read_collection(self.conn, now, S)
            return state, await check_freshness(self.conn, context_for(FABRIC, AnalyzerConfig(), now, INTERVAL_S))

        result: tuple[CollectionState, list[Finding]] = self.run(both())
        return result

    def lock_port_counters(self) -> None:
        """Hold a lock that makes every COPY into port_counters wait: a wedged writer."""
        self.locker = self.run(asyncpg.connect(self.dsn, timeout=30))
        self.run(self.locker.execute("BEGIN; LOCK TABLE port_counters IN SHARE MODE"))

    def unlock(self) -> None:
        assert self.locker is not None
        self.run(self.locker.execute("ROLLBACK"))
        self.run(self.locker.close())
        self.locker = None

    def close(self) -> None:
        if self.loop.is_closed():
            return
        for conn in (self.conn, self.locker):
            if conn is not None and not conn.is_closed():
                self.run(conn.close(timeout=5))
        self.loop.close()


@dataclass
class Collector:
    proc: subprocess.Popen[str]
    log: Path
    metrics: str

    @property
    def id(self) -> str:
        return f"{socket.gethostname()}:{self.proc.pid}"

    def stderr(self) -> str:
        return self.log.read_text()

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=40) == 0, self.stderr()


@pytest.fixture
def start_collector(sim_config: dict[str, Any], tmp_path: Path) -> Iterator[Callable[[str], Collector]]:
    started: list[Collector] = []

    def start(dsn: str) -> Collector:
        config = dict(sim_config)
        config["collector"] = {"gnmi_interval_s": INTERVAL_S, "snmp_interval_s": INTERVAL_S}
        config["database"] = {"dsn": dsn, "writer": {"flush_interval_s": 0.2, "spool_dir": str(tmp_path / "spool")}}
        path = tmp_path / "fabricmon.yaml"
        path.write_text(yaml.safe_dump(config))
        log = tmp_path / f"collect-{len(started)}.err"
        listen = f"127.0.0.1:{free_port()}"
        with log.open("w") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "cli.main", "collect", "--config", str(path), "--metrics-listen", listen],
                env=os.environ.copy(),
                stdout=subprocess.DEVNULL,
                stderr=err,
                text=True,
            )
        started.append(Collector(proc, log, f"http://{listen}/metrics"))
        return started[-1]

    try:
        yield start
    finally:
        for c in started:
            if c.proc.poll() is None:
                c.proc.send_signal(signal.SIGCONT)
                c.proc.kill()
            c.proc.wait(timeout=20)


@pytest.fixture
def db(fresh_db: str) -> Iterator[Db]:
    d = Db(fresh_db)
    try:
        yield d
    finally:
        d.close()


def mine(state: CollectionState, c: Collector) -> CollectorState:
    (one,) = [x for x in state.collectors if x.collector == c.id]
    return one


def healthy(db: Db, c: Collector) -> CollectorState | None:
    state, _ = db.judge()
    one = [x for x in state.collectors if x.collector == c.id]
    return one[0] if one and one[0].healthy else None


def explained(db: Db, seen: list[str]) -> tuple[CollectionState, list[Finding]]:
    """Judge once and check that no stale switch is blamed on the fabric while collection is at fault."""
    state, findings = db.judge()
    blamed = [f.summary for f in findings if not state.explains(f.key, f.observed_at)]
    assert not blamed, f"stale switches not explained by {state.collectors}: {blamed}\nbefore: {seen[-5:]}"
    seen.append(f"{[(c.problem, c.heartbeat_age_s, c.ingest_lag_s) for c in state.collectors]} {len(findings)}")
    return state, findings


def watch(db: Db, seconds: float, seen: list[str]) -> list[tuple[CollectionState, list[Finding]]]:
    out = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        out.append(explained(db, seen))
        time.sleep(0.25)
    return out


def test_a_collector_heartbeats_and_says_when_it_stopped(db: Db, start_collector: Callable[[str], Collector]) -> None:
    c = start_collector(db.dsn)
    first = until_sync(lambda: db.row_if(c.id, lambda r: r.watermark is not None), 40, c.stderr)
    assert first.shard is None and first.switches == tuple(sorted(SWITCHES)) and first.interval_s == INTERVAL_S
    assert first.stopped_at is None and first.started_at <= first.resumed_at <= first.heartbeat_at
    until_sync(lambda: healthy(db, c), 20, lambda: f"{db.judge()[0]}\n{c.stderr()}")
    a = db.row(c.id)
    time.sleep(2.5)
    b = db.row(c.id)
    assert a is not None and b is not None and a.watermark is not None and b.watermark is not None
    assert b.heartbeat_at > a.heartbeat_at and b.watermark > a.watermark  # the watermark advances
    assert (b.heartbeat_at - b.watermark).total_seconds() < S and not b.replaying and b.spool_rows == 0
    with urllib.request.urlopen(c.metrics, timeout=5) as r:
        metrics = r.read().decode()
    assert 'fabricmon_collector_heartbeats_total{outcome="written"}' in metrics
    assert 'fabricmon_writer_watermark_seconds{table="port_counters"}' in metrics

    c.stop()
    last = db.row(c.id)
    assert last is not None and last.stopped_at is not None and last.heartbeat_at == last.stopped_at
    state, _ = db.judge()
    gone = mine(state, c)
    assert gone.stopped and not gone.healthy and gone.problem and gone.problem.startswith("stopped")
    assert not state.broken and state.collector_of("lf-g1-r1") is None
    assert state.unobserved() == SWITCHES  # nobody collects them now: their silence is not theirs


def test_a_frozen_collector_is_silent_not_the_fabric(db: Db, start_collector: Callable[[str], Collector]) -> None:
    c = start_collector(db.dsn)
    until_sync(lambda: healthy(db, c), 40, lambda: f"{db.judge()[0]}\n{c.stderr()}")
    seen: list[str] = []
    c.proc.send_signal(signal.SIGSTOP)
    stopped_at = datetime.now(UTC)
    time.sleep(0.5)
    frozen = db.row(c.id)
    rounds = watch(db, S + 3.0, seen)  # every switch turns stale meanwhile; none may be blamed on the fabric
    state, findings = rounds[-1]
    one = mine(state, c)
    assert one.problem is not None and one.problem.startswith("silent for"), one
    assert state.broken and state.unobserved() == SWITCHES
    assert {f.key for f in findings} == SWITCHES  # the freshness check alone would call all of them stale
    assert db.row(c.id) == frozen  # heartbeat_at stopped advancing

    c.proc.send_signal(signal.SIGCONT)
    deadline = time.monotonic() + 30
    while not (ok := healthy(db, c)):
        assert time.monotonic() < deadline, f"no recovery: {seen[-5:]}\n{c.stderr()}"
        explained(db, seen)
        time.sleep(0.25)
    back = db.row(c.id)
    assert back is not None and back.resumed_at > stopped_at  # it noticed it had been frozen
    assert ok.ingest_lag_s is not None and ok.ingest_lag_s < S
    # ... and the fabric is fresh again. Not necessarily at this very instant: a gNMI target that gave
    # up on the frozen reader (its send timeout) is subscribed to again after the resume, and its
    # switch reports within an interval of that, which can be a moment after the collector as a whole
    # reads healthy (CI saw 1-2 s); a stream that stayed open may still be handing over what the
    # target queued while the reader was frozen (a fresh clone's run saw three leaves 8 s behind
    # just after the collector read healthy). So every switch gets one staleness limit to report;
    # past that, any switch still stale must be one that reconnected, which gets two.
    resumed = time.monotonic()
    while stale := db.judge()[1]:
        if time.monotonic() - resumed > S:
            late = [f.summary for f in stale if not _reconnected_since(f, stopped_at)]
            assert not late, f"stale switches that never left: {late}"
        assert time.monotonic() - resumed < 2 * S, f"still stale {2 * S} s after recovery: {[f.summary for f in stale]}"
        time.sleep(0.25)
    c.stop()


def _reconnected_since(f: Finding, t: datetime) -> bool:
    since = f.details.get("state_since")
    return isinstance(since, str) and datetime.fromisoformat(since) > t


def test_a_wedged_writer_shows_in_the_watermark(db: Db, start_collector: Callable[[str], Collector]) -> None:
    c = start_collector(db.dsn)
    until_sync(lambda: healthy(db, c), 40, lambda: f"{db.judge()[0]}\n{c.stderr()}")
    seen: list[str] = []
    db.lock_port_counters()
    try:
        rounds = watch(db, S + 3.0, seen)
        state, _ = rounds[-1]
        one = mine(state, c)
        assert one.heartbeat_age_s <= S  # it still beats ...
        assert one.problem and "behind" in one.problem and one.backlog_rows > 0, one  # ... but writes nothing
        assert state.unobserved() == SWITCHES
    finally:
        db.unlock()
    until_sync(lambda: healthy(db, c), 30, lambda: f"{seen[-5:]}\n{c.stderr()}")
    c.stop()


def test_database_restart_replays_then_healthy(
    private_store: EmbeddedStore, start_collector: Callable[[str], Collector]
) -> None:
    db = Db(private_store.dsn())
    try:
        c = start_collector(db.dsn)
        until_sync(lambda: healthy(db, c), 40, lambda: f"{db.judge()[0]}\n{c.stderr()}")
        before = db.row(c.id)
        db.close()
        private_store.stop()
        time.sleep(4.0)  # the collector spools; its heartbeats are skipped
        # Frozen while the database comes back, and the port_counters writer held up once it does,
        # so the replay is slow enough to watch; otherwise it takes milliseconds.
        c.proc.send_signal(signal.SIGSTOP)
        private_store.start()
        db = Db(private_store.dsn())
        db.lock_port_counters()
        c.proc.send_signal(signal.SIGCONT)
        assert before is not None
        replaying = until_sync(
            lambda: db.row_if(c.id, lambda r: r.replaying and r.heartbeat_at > before.heartbeat_at), 30, c.stderr
        )
        assert replaying.spool_rows > 0 and replaying.backlog_rows >= replaying.spool_rows
        seen: list[str] = []
        state, _ = explained(db, seen)
        one = mine(state, c)
        assert not one.healthy and one.replaying and one.problem and "replaying" in one.problem, one
        assert state.unobserved() == SWITCHES
        db.unlock()
        deadline = time.monotonic() + 30
        while not (ok := healthy(db, c)):  # the replay, then the switches' turn: never blamed on them
            assert time.monotonic() < deadline, f"no recovery: {seen[-5:]}\n{c.stderr()}"
            explained(db, seen)
            time.sleep(0.25)
        assert ok.backlog_rows < 1000 and not ok.replaying
        after = db.row(c.id)
        assert after is not None and after.spool_rows == 0
        assert "heartbeat of" not in c.stderr()  # skipped beats are debug-level; nothing failed
        c.stop()
    finally:
        db.close()


@pytest.mark.asyncio(loop_scope="function")
async def test_the_watermark_is_the_newest_committed_sample(fresh_db: str) -> None:
    pool = await create_pool(fresh_db)
    try:
        async with pool.acquire() as conn:
            await migrate(conn)
        w = BatchWriter(pool, "port_counters", PortSample._fields, WriterConfig(batch_rows=100))

        def mark() -> datetime | None:
            return w.watermark

        now = datetime.now(UTC)
        ago = [now - timedelta(seconds=s) for s in (5, 3, 4)]
        await w.put([PortSample(t, "lf-g1-r1", "swp1") for t in ago])
        assert mark() is None  # buffered is not committed
        await w.flush()
        assert mark() == ago[1]
        # The same rows again (the conflict-safe path), and a row the database refuses: the rest counts.
        later = now - timedelta(seconds=1)
        await w.put([*(PortSample(t, "lf-g1-r1", "swp1") for t in ago), PortSample(later, None, "swp1")])  # type: ignore[arg-type]
        await w.flush()
        assert w.stats.rows_rejected == 1 and mark() == ago[1]
        await w.put([PortSample(later, "lf-g1-r1", "swp1")])
        await w.flush()
        assert mark() == later
        # A clock running ahead cannot push the watermark past the commit.
        await w.put([PortSample(now + timedelta(hours=1), "lf-g1-r1", "swp1")])
        await w.flush()
        assert (m := mark()) is not None and now < m <= datetime.now(UTC)

        # Rows of collectors that stopped cleanly long ago are pruned; live and recent ones stay.
        def row(name: str, stopped: datetime | None) -> Heartbeat:
            return Heartbeat(name, None, now, now, None, 0, 0, False, ("lf-g1-r1",), 1.0, now, stopped)

        async with pool.acquire() as conn:
            for name, stopped in (("a:1", None), ("a:2", now - timedelta(hours=2)), ("a:3", now - timedelta(days=2))):
                await upsert(conn, row(name, stopped))
            assert await prune(conn, now) == 1
            names = await conn.fetch("SELECT collector FROM collector_heartbeats ORDER BY collector")
            assert [r["collector"] for r in names] == ["a:1", "a:2"]
            state = await read_collection(conn, now, S)
            assert [c.collector for c in state.collectors] == ["a:1"] and state.known  # a:2: over an hour ago
    finally:
        await pool.close()
