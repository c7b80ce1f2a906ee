"""The collector's heartbeat row as the task builds it (no database: nothing here is written)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from collector.config import CollectorConfig
from collector.heartbeat import HeartbeatTask, heartbeat_period, sampling_interval
from collector.pipeline import Pipeline
from fabric.topology import FabricParams, build_aipod
from store.config import WriterConfig
from store.records import PortSample

FABRIC = build_aipod(FabricParams(gpus=16, rails=2, radix=8))


def task(tmp_path: Path, interval_s: float = 10.0) -> HeartbeatTask:
    # The pool is never used: snapshots and stall notes are pure bookkeeping.
    pool: Any = None
    pipeline = Pipeline(pool, FABRIC, WriterConfig(batch_rows=1000), spool_dir=tmp_path / "spool")
    return HeartbeatTask(pool, pipeline, switches=lambda: ["lf-g1-r2", "lf-g1-r1"], interval_s=interval_s, shard=(1, 4))


def test_period_and_interval() -> None:
    assert [heartbeat_period(i) for i in (0.5, 1.0, 4.0, 10.0, 60.0)] == [1.0, 1.0, 2.0, 5.0, 5.0]
    config = CollectorConfig(gnmi_interval_s=10.0, snmp_interval_s=60.0)
    assert sampling_interval(config, ["gnmi"]) == 10.0
    assert sampling_interval(config, ["gnmi", "snmp"]) == 60.0


async def test_the_row_counts_what_waits_in_buffers_and_spool(tmp_path: Path) -> None:
    t = task(tmp_path)
    now = datetime.now(UTC)
    row = t.snapshot(now)
    assert row.collector.endswith("/shard-1-of-4") and row.shard == "1/4"
    assert row.switches == ("lf-g1-r1", "lf-g1-r2") and row.interval_s == 10.0
    assert row.watermark is None and row.backlog_rows == 0 and not row.replaying and row.stopped_at is None
    assert row.resumed_at == row.started_at == t.started_at
    await t.pipeline.ports_writer.put([PortSample(now, "lf-g1-r1", f"swp{i}") for i in range(1, 4)])
    spool = t.pipeline.pfc_writer.spool
    assert spool is not None
    spool.push([("x",)] * 5)
    row = t.snapshot(now, stopped=True)
    assert row.backlog_rows == 3 + 5 and row.spool_rows == 5 and row.replaying and row.stopped_at == now


def test_a_freeze_and_a_pause_in_committing_move_resumed_at(tmp_path: Path) -> None:
    t = task(tmp_path, interval_s=2.0)  # period 1 s
    now = datetime.now(UTC)
    t._note_stalls(now)
    t._note_stalls(now + timedelta(seconds=1))
    assert t.resumed_at == t.started_at  # beats on time, nothing committed yet: still its start
    t._last_beat = time.monotonic() - 10.0  # the process was frozen for 10 s
    t._note_stalls(later := now + timedelta(seconds=11))
    assert t.resumed_at == later
    # The writer commits again after standing still for more than two intervals.
    t.pipeline.ports_writer.watermark = now
    t._watermark_moved = time.monotonic() - 1.0
    t._note_stalls(now + timedelta(seconds=12))
    assert t.resumed_at == later  # a normal cadence
    t.pipeline.ports_writer.watermark = now + timedelta(seconds=20)
    t._watermark_moved = time.monotonic() - 6.0
    t._note_stalls(again := now + timedelta(seconds=20))
    assert t.resumed_at == again
