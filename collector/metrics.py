"""The collector's self-metrics, read at scrape time from the pipeline, writers and collectors.

A prometheus_client custom collector: nothing is counted twice, and the hot path only bumps
plain integers in dataclasses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from collector.clock import ClockGuard
from collector.heartbeat import HeartbeatStats
from collector.pipeline import Pipeline
from collector.records import TargetState
from fabric.supervise import TaskHealth


class CollectorMetrics(Collector):
    """Exposes ``fabricmon_collector_*`` metrics."""

    def __init__(
        self,
        pipeline: Pipeline,
        collectors: Mapping[str, Any],
        heartbeat: HeartbeatStats | None = None,
        clock: ClockGuard | None = None,
        tasks: Callable[[], Sequence[TaskHealth]] | None = None,
    ) -> None:
        """``clock``: the switches' clock guard (default: the pipeline's ``clock``, when it has one);
        ``tasks``: the supervised tasks to report (default: the pipeline's)."""
        self.pipeline = pipeline
        self.collectors = collectors
        self.heartbeat = heartbeat
        self.clock = clock
        self.tasks = tasks or pipeline.tasks

    def collect(self) -> Iterator[Metric]:
        p = self.pipeline
        yield _counter("fabricmon_collector_readings", "port readings received", p.stats.readings)
        yield _counter("fabricmon_collector_values", "counter values received", p.tracker.stats.counter_values)
        yield _counter("fabricmon_collector_lldp_tables", "LLDP tables received", p.stats.lldp_tables)
        yield _counter("fabricmon_collector_unknown_ports", "ports not in the inventory", p.stats.unknown_ports)
        yield _counter(
            "fabricmon_collector_texts_cleaned",
            "text values stored cleaned (NUL, lone surrogates)",
            p.stats.texts_cleaned,
        )
        yield _counter(
            "fabricmon_collector_state_rows_rejected",
            "unknown ports and LLDP tables the database refused on their own", p.stats.state_rows_rejected,
        )  # fmt: skip
        yield _counter(
            "fabricmon_collector_state_writes_deferred",
            "housekeeping rounds the database could not take (all kept)", p.stats.state_writes_deferred,
        )  # fmt: skip
        # reason: collector/gnmi_values.py's kinds (out_of_range, too_long, too_deep, malformed, ...)
        # and the SNMP collector's
        invalid = CounterMetricFamily(
            "fabricmon_collector_invalid_values", "values a switch sent that were skipped as malformed",
            labels=["reason"],
        )  # fmt: skip
        for reason, n in sorted(p.stats.invalid.items()):
            invalid.add_metric([reason], n)
        yield invalid
        t = p.tracker.stats
        # Not ``..._counter_resets``: promtool's lint refuses a counter whose name holds its type.
        yield _counter(
            "fabricmon_collector_reset_readings",
            "port readings whose counters were reset (a reboot, a clear, a counter gone back): no rates",
            t.resets,
        )
        yield _counter("fabricmon_collector_absurd_rates", "rates dropped as physically impossible", t.absurd_rates)
        yield _counter(
            "fabricmon_collector_pfc_unchanged", "PFC samples not stored: no pause counter moved", t.pfc_unchanged
        )
        yield from self._writers()
        yield from self._tasks()
        yield from self._targets()
        yield from self._heartbeat()
        yield from self._clocks()
        for protocol, collector in sorted(self.collectors.items()):
            stats = getattr(collector, "stats", None)
            if stats is None or not dataclasses.is_dataclass(stats):
                continue
            for f in dataclasses.fields(stats):
                value = getattr(stats, f.name)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    yield _counter(f"fabricmon_collector_{protocol}_{f.name}", f"{protocol} collector: {f.name}", value)

    def _writers(self) -> Iterator[Metric]:
        rows = CounterMetricFamily("fabricmon_writer_rows", "rows by outcome", labels=["table", "outcome"])
        pending = GaugeMetricFamily("fabricmon_writer_pending_rows", "rows buffered (the queue)", labels=["table"])
        spool_rows = CounterMetricFamily("fabricmon_spool_rows", "spool rows by outcome", labels=["table", "outcome"])
        spool_bytes = GaugeMetricFamily("fabricmon_spool_bytes", "bytes spooled on disk", labels=["table"])
        spool_pending = GaugeMetricFamily("fabricmon_spool_pending_rows", "rows on disk to replay", labels=["table"])
        watermark = GaugeMetricFamily(
            "fabricmon_writer_watermark_seconds", "Unix time of the newest sample committed", labels=["table"]
        )
        errors = CounterMetricFamily(
            "fabricmon_writer_errors",
            "failed attempts that kept their batch, by error class",
            labels=["table", "class"],
        )
        deferring = GaugeMetricFamily(
            "fabricmon_writer_deferring", "1 while the database cannot take this table's writes", labels=["table"]
        )
        quarantined = CounterMetricFamily(
            "fabricmon_spool_quarantined_batches", "spool batches moved to quarantine (unreadable)", labels=["table"]
        )
        write_errors = CounterMetricFamily(
            "fabricmon_spool_write_errors", "batches the spool's disk refused (full, read-only)", labels=["table"]
        )
        batches = CounterMetricFamily(
            "fabricmon_writer_copy_batches",
            "batches stored by COPY, by encoder: binary (fabricmon's C), asyncpg (no C, or a batch the C handed back)",
            labels=["table", "encoder"],
        )
        for w in self.pipeline.writers:
            batches.add_metric([w.table, "binary"], w.stats.binary_batches)
            batches.add_metric([w.table, "asyncpg"], w.stats.asyncpg_batches)
            rows.add_metric([w.table, "written"], w.stats.rows_written)
            rows.add_metric([w.table, "duplicate"], w.stats.rows_duplicate)
            rows.add_metric([w.table, "rejected"], w.stats.rows_rejected)
            for reason, n in sorted(w.stats.rows_dropped.items()):
                rows.add_metric([w.table, f"dropped_{reason}"], n)
            for name, n in sorted(w.stats.errors.items()):
                errors.add_metric([w.table, name], n)
            deferring.add_metric([w.table], 1 if w.deferring else 0)
            pending.add_metric([w.table], w.pending)
            if w.watermark is not None:
                watermark.add_metric([w.table], w.watermark.timestamp())
            if w.spool is not None:
                s = w.spool.stats
                spool_rows.add_metric([w.table, "spooled"], s.rows_spooled)
                spool_rows.add_metric([w.table, "replayed"], s.rows_replayed)
                spool_rows.add_metric([w.table, "dropped"], s.rows_dropped)
                spool_rows.add_metric([w.table, "quarantined"], s.rows_quarantined)
                spool_bytes.add_metric([w.table], s.bytes)
                spool_pending.add_metric([w.table], s.rows)
                quarantined.add_metric([w.table], s.batches_quarantined)
                write_errors.add_metric([w.table], s.write_errors)
        yield from (rows, errors, deferring, pending, spool_rows, spool_bytes, spool_pending, watermark)
        yield from (quarantined, write_errors, batches)

    def _tasks(self) -> Iterator[Metric]:
        healthy = GaugeMetricFamily(
            "fabricmon_task_healthy", "1 while a supervised background task runs without failing", labels=["task"]
        )
        restarts = CounterMetricFamily(
            "fabricmon_task_restarts", "times a supervised task failed and was started again", labels=["task"]
        )
        for t in self.tasks():
            healthy.add_metric([t.name], 1 if t.healthy else 0)
            restarts.add_metric([t.name], t.restarts)
        yield from (healthy, restarts)

    def _heartbeat(self) -> Iterator[Metric]:
        hb = self.heartbeat
        if hb is None:
            return
        beats = CounterMetricFamily(
            "fabricmon_collector_heartbeats", "heartbeat rows written or skipped", labels=["outcome"]
        )
        beats.add_metric(["written"], hb.written)
        beats.add_metric(["skipped"], hb.skipped)
        yield beats
        if hb.last_written is not None:
            yield GaugeMetricFamily(
                "fabricmon_collector_heartbeat_seconds", "Unix time of the last heartbeat written", hb.last_written
            )

    def _clocks(self) -> Iterator[Metric]:
        guard = self.clock if self.clock is not None else self.pipeline.clock
        if guard is None:
            return
        skew = GaugeMetricFamily(
            "fabricmon_collector_clock_skew_seconds",
            "the switch's clock minus receive time (positive: ahead)",
            labels=["switch"],
        )
        corrected = GaugeMetricFamily(
            "fabricmon_collector_clock_corrected",
            "1 while the switch's timestamps are replaced (off by more than collector.max_clock_skew_s)",
            labels=["switch"],
        )
        replaced = CounterMetricFamily(
            "fabricmon_collector_clock_replaced_timestamps", "readings whose device timestamp was replaced",
            labels=["switch"],
        )  # fmt: skip
        for switch, c in sorted(guard.clocks().items()):
            skew.add_metric([switch], c.skew_s)
            corrected.add_metric([switch], 1 if c.corrected else 0)
            replaced.add_metric([switch], c.replaced)
        yield from (skew, corrected, replaced)

    def _targets(self) -> Iterator[Metric]:
        state = GaugeMetricFamily(
            "fabricmon_target_state", "1 for the target's current state", labels=["switch", "state"]
        )
        seen = GaugeMetricFamily(
            "fabricmon_target_last_seen_seconds", "Unix time of the last reading", labels=["switch"]
        )
        counts = GaugeMetricFamily("fabricmon_targets", "targets per state", labels=["state"])
        by_state = dict.fromkeys((str(s) for s in TargetState), 0)
        for switch, status in sorted(self.pipeline.targets.items()):
            state.add_metric([switch, str(status.state)], 1)
            by_state[str(status.state)] += 1
            if status.last_seen is not None:
                seen.add_metric([switch], status.last_seen)
        for name, n in by_state.items():
            counts.add_metric([name], n)
        yield from (state, seen, counts)


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)
