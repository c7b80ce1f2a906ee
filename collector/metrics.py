"""The collector's self-metrics, read at scrape time from the pipeline, writers and collectors.

A prometheus_client custom collector: nothing is counted twice, and the hot path only bumps
plain integers in dataclasses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from collector.heartbeat import HeartbeatStats
from collector.pipeline import Pipeline
from collector.records import TargetState


class CollectorMetrics(Collector):
    """Exposes ``fabricmon_collector_*`` metrics."""

    def __init__(
        self, pipeline: Pipeline, collectors: Mapping[str, Any], heartbeat: HeartbeatStats | None = None
    ) -> None:
        self.pipeline = pipeline
        self.collectors = collectors
        self.heartbeat = heartbeat

    def collect(self) -> Iterator[Metric]:
        p = self.pipeline
        yield _counter("fabricmon_collector_readings", "port readings received", p.stats.readings)
        yield _counter("fabricmon_collector_values", "counter values received", p.stats.values)
        yield _counter("fabricmon_collector_lldp_tables", "LLDP tables received", p.stats.lldp_tables)
        yield _counter("fabricmon_collector_unknown_ports", "ports not in the inventory", p.stats.unknown_ports)
        invalid = CounterMetricFamily(
            "fabricmon_collector_invalid_values", "values skipped as malformed", labels=["kind"]
        )
        for kind, n in sorted(p.stats.invalid.items()):
            invalid.add_metric([kind], n)
        yield invalid
        t = p.tracker.stats
        yield _counter("fabricmon_collector_counter_resets", "counter resets detected", t.resets)
        yield _counter("fabricmon_collector_absurd_rates", "rates dropped as physically impossible", t.absurd_rates)
        yield _counter(
            "fabricmon_collector_pfc_unchanged", "PFC samples not stored: no pause counter moved", t.pfc_unchanged
        )
        yield from self._writers()
        yield from self._targets()
        yield from self._heartbeat()
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
        for w in self.pipeline.writers:
            rows.add_metric([w.table, "written"], w.stats.rows_written)
            rows.add_metric([w.table, "duplicate"], w.stats.rows_duplicate)
            rows.add_metric([w.table, "rejected"], w.stats.rows_rejected)
            pending.add_metric([w.table], w.pending)
            if w.watermark is not None:
                watermark.add_metric([w.table], w.watermark.timestamp())
            if w.spool is not None:
                s = w.spool.stats
                spool_rows.add_metric([w.table, "spooled"], s.rows_spooled)
                spool_rows.add_metric([w.table, "replayed"], s.rows_replayed)
                spool_rows.add_metric([w.table, "dropped"], s.rows_dropped)
                spool_bytes.add_metric([w.table], s.bytes)
                spool_pending.add_metric([w.table], s.rows)
        yield from (rows, pending, spool_rows, spool_bytes, spool_pending, watermark)

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
