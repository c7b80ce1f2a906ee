"""The clock guard on the collector's /metrics: skew, corrected and replaced per switch."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from collector.clock import ClockGuard
from collector.metrics import CollectorMetrics
from collector.pipeline import Pipeline
from collector.records import PortReading
from fabric.topology import FabricParams, build_aipod

S = 1_000_000_000
T0 = 1_790_000_000 * S


def test_clock_metrics_per_switch() -> None:
    pool: Any = None  # never used: metrics read memory only
    pipeline = Pipeline(pool, build_aipod(FabricParams(gpus=16, rails=2, radix=8)))
    guard = ClockGuard(30.0)
    for k in range(2):  # a change of clock is believed from its second batch
        t = T0 + k * 10 * S
        samples = [
            PortReading("lf-g1-r1", "swp1", t - 300 * S, in_octets=k),
            PortReading("lf-g1-r2", "swp1", t - S, in_octets=k),
        ]
        guard.correct(samples, t)
    registry = CollectorRegistry()
    registry.register(CollectorMetrics(pipeline, {}, clock=guard))
    text = generate_latest(registry).decode()
    assert 'fabricmon_collector_clock_skew_seconds{switch="lf-g1-r1"} -300.0' in text
    assert 'fabricmon_collector_clock_skew_seconds{switch="lf-g1-r2"} -1.0' in text
    assert 'fabricmon_collector_clock_corrected{switch="lf-g1-r1"} 1.0' in text
    assert 'fabricmon_collector_clock_replaced_timestamps_total{switch="lf-g1-r1"} 2.0' in text
    assert 'fabricmon_collector_clock_replaced_timestamps_total{switch="lf-g1-r2"} 0.0' in text
    # without a guard (nor one on the pipeline), no clock families at all
    bare = CollectorRegistry()
    bare.register(CollectorMetrics(pipeline, {}))
    assert "clock_skew" not in generate_latest(bare).decode()
