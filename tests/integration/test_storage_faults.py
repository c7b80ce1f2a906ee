"""Storage faults caused for real, then counted: what the simulator sent against what is stored.

Each test streams a gNMI fabric (64 GPUs, 20 switches, 320 ports, a sample a second) into a real
collector and TimescaleDB, causes one fault — PostgreSQL SIGKILLed, the database read-only, the
disk under a tablespace full, the collector SIGKILLed while spooling, a spool batch corrupted
on disk, a spool left by the previous format version — and then compares, per switch, port
and sample time, the simulator's sent-ledger with ``port_counters``: every sample stored once,
or counted as dropped, and no gap over 2.5 sampling intervals on a port that lost nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from collector.pipeline import Pipeline
from collector.runner import CollectorService
from config.model import Config
from fabric.model import Fabric, FabricParams
from simulator.ledger import LedgerSnapshot, SentLedger
from simulator.runner import RunningSim, SimOptions, start_sim, stop_sim
from simulator.sim_config import sim_config
from store.db import Pool, create_pool
from store.inventory import ensure_fabric
from store.migrate import migrate
from store.pgserver import EmbeddedStore
from store.spool_format import read
from tests.support.collecting import running_collector
from tests.support.faults import fill, free, kill_postgres, read_only, small_filesystem, tablespace_on
from tests.support.ledger import LedgerReport, assert_complete, settle
from tests.support.waiting import until

pytestmark = pytest.mark.asyncio(loop_scope="function")

PARAMS = FabricParams(gpus=64, radix=16)  # 20 switches, 320 ports
INTERVAL_S = 1.0
ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "spool" / "v1"


@dataclass
class Lab:
    sim: RunningSim
    ledger: SentLedger
    fabric: Fabric
    pool: Pool
    config: Config
    spool: Path
    dsn: str


def _config(sim: RunningSim, spool: Path, dsn: str | None = None) -> dict[str, Any]:
    gnmi = sim.addresses(SimOptions(gnmi="127.0.0.1:0", snmp=None, control=None))["gnmi"]
    data: dict[str, Any] = sim_config(
        gnmi_address=gnmi, snmp_address=None, protocols="gnmi", params=PARAMS, gnmi_interval_s=INTERVAL_S
    )
    writer = {"flush_interval_s": 0.2, "retry_max_s": 1.0, "spool_dir": str(spool)}
    data["database"] = {"writer": writer} | ({"dsn": dsn} if dsn else {})
    return data


@contextlib.asynccontextmanager
async def lab(dsn: str, tmp_path: Path) -> AsyncIterator[Lab]:
    sim = await start_sim(SimOptions(params=PARAMS, gnmi="127.0.0.1:0", snmp=None, control=None, seed=3, ledger=True))
    pool = await create_pool(dsn)
    try:
        assert sim.fabric is not None and sim.ledger is not None
        async with pool.acquire() as conn:
            await migrate(conn)
            await ensure_fabric(conn, sim.fabric)
        spool = tmp_path / "spool"
        config = Config.model_validate(_config(sim, spool))
        yield Lab(sim, sim.ledger, sim.fabric, pool, config, spool, dsn)
    finally:
        await pool.close()
        await stop_sim(sim)


def collecting(lab: Lab) -> contextlib.AbstractAsyncContextManager[CollectorService]:
    return running_collector(lab.config, lab.fabric, lab.pool)


async def stored(pool: Pool) -> int:
    return int(await pool.fetchval("SELECT count(*) FROM port_counters"))


async def verdict(lab: Lab, snap: LedgerSnapshot, pipeline: Pipeline | None = None, **kw: Any) -> LedgerReport:
    """Wait for what was sent to be stored; check it all is, once, without gaps."""
    report = await settle(lab.pool, snap, interval_s=INTERVAL_S, timeout_s=60)
    dropped = kw.pop("dropped", 0)
    if pipeline is not None:
        for w in pipeline.writers:
            assert w.stats.rows_rejected == 0, (w.table, w.stats)
            assert not w.stats.rows_dropped and (w.spool is None or w.spool.stats.rows_dropped == 0)
    assert_complete(report, dropped=dropped, max_gap_intervals=2.5, **kw)
    if pipeline is not None:  # the figures, for -s
        w = pipeline.ports_writer
        print(f"{report.summary()}; port_counters: {w.stats.errors} failed attempts, {w.stats.outages} outage(s), "
              f"{w.spool.stats.rows_spooled if w.spool is not None else 0} rows spooled")  # fmt: skip
    return report


def spooled(pipeline: Pipeline) -> int:
    w = pipeline.ports_writer
    assert w.spool is not None
    return w.spool.stats.rows_spooled


# -- PostgreSQL killed --------------------------------------------------------------------------


async def test_postgres_killed_mid_stream_loses_no_sample(private_store: EmbeddedStore, tmp_path: Path) -> None:
    async with lab(private_store.dsn(), tmp_path) as lb:
        async with collecting(lb) as service:
            await until(lambda: _more_than(lb.pool, 320), 30, "rows stored")
            kill_postgres(private_store, wait=False)  # as the OOM killer would
            await asyncio.sleep(4)
            assert spooled(service.pipeline) > 0  # the collector went on, to disk
            await asyncio.to_thread(private_store.start)  # crash recovery
            await asyncio.sleep(4)
            snap = lb.ledger.freeze()
            report = await verdict(lb, snap, service.pipeline)
        assert report.sent == report.stored > 320 * 8
        errors = service.pipeline.ports_writer.stats.errors
        assert set(errors) <= {"connection", "operator"} and errors, errors


async def _more_than(pool: Pool, n: int) -> bool:
    with contextlib.suppress(OSError):
        return await stored(pool) > n
    return False


# -- read-only ----------------------------------------------------------------------------------


async def _read_only(private_store: EmbeddedStore, tmp_path: Path, seconds: float) -> None:
    async with lab(private_store.dsn(), tmp_path) as lb:
        async with collecting(lb) as service:
            await until(lambda: _more_than(lb.pool, 320), 30, "rows stored")
            async with read_only(private_store.dsn()):
                await asyncio.sleep(seconds)
                writer = service.pipeline.ports_writer
                assert writer.deferring and writer.stats.errors.get("read_only", 0) >= 2
                assert spooled(service.pipeline) > 0 and writer.stats.rows_rejected == 0
            await asyncio.sleep(3)
            snap = lb.ledger.freeze()
            report = await verdict(lb, snap, service.pipeline)
        # Each failed attempt kept its batch whole: attempts, not rows.
        failures = sum(w.stats.errors.get("read_only", 0) for w in service.pipeline.writers)
        assert failures < 4 * (seconds / 0.2 + 2), failures
        assert report.sent == report.stored >= 320 * (seconds + 4)


async def test_a_read_only_database_loses_no_sample(private_store: EmbeddedStore, tmp_path: Path) -> None:
    await _read_only(private_store, tmp_path, seconds=8)


@pytest.mark.slow
async def test_a_read_only_minute_loses_no_sample(private_store: EmbeddedStore, tmp_path: Path) -> None:
    """The finding that opened the issue: 60 s of ``default_transaction_read_only``."""
    await _read_only(private_store, tmp_path, seconds=60)


# -- a full disk under the data --------------------------------------------------------------


async def test_a_full_tablespace_loses_no_sample(fresh_db: str, tmp_path: Path) -> None:
    with small_filesystem("24m") as disk:
        async with lab(fresh_db, tmp_path) as lb, tablespace_on(fresh_db, disk / "ts"), collecting(lb) as service:
            await until(lambda: _more_than(lb.pool, 320), 30, "rows stored")
            filler = fill(disk)
            try:
                writer = service.pipeline.ports_writer
                await until(lambda: _errors(writer, "resources"), 30, "a full disk")
                await asyncio.sleep(3)
                assert writer.deferring and spooled(service.pipeline) > 0
            finally:
                free(filler)
            await asyncio.sleep(3)
            snap = lb.ledger.freeze()
            await verdict(lb, snap, service.pipeline)


async def _errors(writer: Any, name: str) -> bool:
    return bool(writer.stats.errors.get(name, 0))


# -- the spool on disk --------------------------------------------------------------------------


async def _spool_an_outage(lb: Lab, store: EmbeddedStore, service: CollectorService, batches: int) -> None:
    """Stop the database until port_counters has ``batches`` batches on disk."""
    await until(lambda: _more_than(lb.pool, 320), 30, "rows stored")
    await asyncio.to_thread(store.stop)
    spool = service.pipeline.ports_writer.spool
    assert spool is not None
    await until(lambda: _at_least(spool, batches), 60, f"{batches} batches spooled")


def _missing(report: LedgerReport) -> set[tuple[str, str, Any]]:
    """(switch, port, time) of every sample sent and not stored."""
    return {(sw, port, t) for (sw, port), p in report.ports.items() for t in p.missing}


async def _at_least(spool: Any, n: int) -> bool:
    return len(spool) >= n


async def test_a_corrupted_spool_batch_is_quarantined_and_the_rest_replays(
    private_store: EmbeddedStore, tmp_path: Path
) -> None:
    async with lab(private_store.dsn(), tmp_path) as lb:
        async with collecting(lb) as service:
            await _spool_an_outage(lb, private_store, service, batches=4)
            spool = service.pipeline.ports_writer.spool
            assert spool is not None
            victim = sorted(spool.directory.glob("*.batch"))[1]
            lost = {(r[1], r[2], r[0]) for r in read(victim).rows}
            data = bytearray(victim.read_bytes())
            data[len(data) // 2] ^= 0x40  # one bit flips on disk
            victim.write_bytes(bytes(data))
            await asyncio.to_thread(private_store.start)
            await asyncio.sleep(4)
            snap = lb.ledger.freeze()
            # Settled once nothing but that batch is missing (it never comes: no waiting out the timeout).
            report = await settle(
                lb.pool, snap, interval_s=INTERVAL_S, timeout_s=60, settled=lambda r: _missing(r) <= lost
            )
        # Exactly that batch's samples are missing, counted as quarantined; everything else replayed.
        assert spool.stats.batches_quarantined == 1 and spool.stats.rows_quarantined == len(lost) > 0
        assert _missing(report) == lost
        assert_complete(report, dropped=len(lost), max_gap_intervals=2.5)
        quarantined = lb.spool / "quarantine" / "port_counters" / victim.name
        assert quarantined.exists() and "checksum" in quarantined.with_name(victim.name + ".reason").read_text()


async def test_a_spool_from_the_previous_version_replays_after_an_upgrade(fresh_db: str, tmp_path: Path) -> None:
    async with lab(fresh_db, tmp_path) as lb:
        old_umask = os.umask(0o002)  # the old spool made its directories under the process's umask
        try:
            (lb.spool / "port_counters").mkdir(parents=True)
        finally:
            os.umask(old_umask)
        old = sorted(p for p in FIXTURES.glob("*.batch") if _rows_of(p)[0] == "port_counters")
        assert old, "no version 1 port_counters fixture"
        for p in old:
            shutil.copy(p, lb.spool / "port_counters" / p.name)
        expected = {row for p in old for row in _rows_of(p)[1]}
        async with collecting(lb) as service:
            await asyncio.sleep(4)
            snap = lb.ledger.freeze()
            await verdict(lb, snap, service.pipeline)
        rows = await lb.pool.fetch(
            "SELECT time, switch, port, in_octets FROM port_counters WHERE (switch, port, time) IN "
            "(SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[]))",
            [r[1] for r in expected], [r[2] for r in expected], [r[0] for r in expected],
        )  # fmt: skip
        assert {(r["time"], r["switch"], r["port"], r["in_octets"]) for r in rows} == {(*r[:3], r[5]) for r in expected}
        assert not list((lb.spool / "port_counters").glob("*.batch"))  # replayed and gone


def _rows_of(path: Path) -> tuple[str, set[tuple[Any, ...]]]:
    rows = read(path).rows
    table = "port_counters" if rows and len(rows[0]) > 20 else "other"
    return table, set(rows)


# -- the collector killed while spooling ------------------------------------------------------


@contextlib.contextmanager
def collector_process(config: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "collect", "--config", str(config), "-v"],
            stdout=out, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


async def test_the_collector_killed_while_spooling_loses_only_what_it_held(
    private_store: EmbeddedStore, tmp_path: Path
) -> None:
    async with lab(private_store.dsn(), tmp_path) as lb:
        config = tmp_path / "fabricmon.yaml"
        config.write_text(json.dumps(_config(lb.sim, lb.spool, private_store.dsn())))
        log = tmp_path / "collector.log"
        port_spool = lb.spool / "port_counters"
        with collector_process(config, log) as first:
            await until(lambda: _more_than(lb.pool, 320), 60, "rows stored")
            await asyncio.to_thread(private_store.stop)
            await until(lambda: _files_at_least(port_spool, 3), 60, "3 batches spooled")
            first.send_signal(signal.SIGKILL)
            first.wait(10)
            killed_at = time.time()
        on_disk = {(r[1], r[2], r[0]) for p in sorted(port_spool.glob("*.batch")) for r in read(p).rows}
        newest_on_disk = max((t for *_, t in on_disk), default=None)
        assert newest_on_disk is not None

        def held_only(missing: set[tuple[str, str, Any]]) -> bool:
            """What is missing is what the dead process held in memory: the last flush interval or
            so before the kill, per port; never a sample it had put on disk."""
            window = (newest_on_disk.timestamp() - 2.5, killed_at + 1)
            return not on_disk & missing and all(window[0] <= t.timestamp() <= window[1] for *_, t in missing)

        await asyncio.to_thread(private_store.start)
        with collector_process(config, log):
            await asyncio.sleep(6)
            snap = lb.ledger.freeze()
            # Settled once only the held samples are missing and the spool is replayed: the held
            # ones never come, so waiting for nothing missing would wait out the whole timeout.
            report = await settle(
                lb.pool, snap, interval_s=INTERVAL_S, timeout_s=60,
                settled=lambda r: held_only(_missing(r)) and not list(port_spool.glob("*.batch")),
            )  # fmt: skip
        assert "Traceback" not in log.read_text()
        assert not list(port_spool.glob("*.tmp")) and not list(port_spool.glob("*.batch"))  # replayed
        missing = _missing(report)
        assert on_disk and held_only(missing), sorted(missing)[:5]  # everything it had spooled, stored
        assert report.extra == 0 and report.duplicates == 0
        assert len(missing) <= 320 * 3, len(missing)


async def _files_at_least(directory: Path, n: int) -> bool:
    return len(await asyncio.to_thread(lambda: list(directory.glob("*.batch")))) >= n


async def test_a_spool_directory_others_can_write_is_refused(fresh_db: str, tmp_path: Path) -> None:
    """Whoever can write the spool decides what the collector replays: refused, in one line."""
    async with lab(fresh_db, tmp_path) as lb:
        lb.spool.mkdir()
        lb.spool.chmod(0o777)
        config = tmp_path / "fabricmon.yaml"
        config.write_text(json.dumps(_config(lb.sim, lb.spool, fresh_db)))
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cli.main", "collect", "--config", str(config), "--duration", "5",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
        )  # fmt: skip
        _, err = await asyncio.wait_for(proc.communicate(), 60)
    text = err.decode()
    assert proc.returncode == 2, text
    assert "Traceback" not in text
    assert text.startswith(f"fabricmon collect: error: spool directory {lb.spool} has mode") and text.count("\n") == 1
    assert "can write it and forge batches" in text and f"chmod 700 {lb.spool}" in text
