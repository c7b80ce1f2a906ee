"""The pure parts of ``collect --workers`` (collector/workers.py): the worker count, the restart
backoff, and the one /metrics made of many."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from collector.workers import (
    Backoff,
    Supervisor,
    WorkersError,
    auto_workers,
    describe_exit,
    merge_metrics,
    parse_metrics,
    parse_workers,
    render,
)

PROMTOOL = shutil.which("promtool")


def test_auto_is_the_usable_cores_minus_one_at_least_one() -> None:
    assert [auto_workers(n) for n in (1, 2, 3, 8, 128)] == [1, 1, 2, 7, 64]
    assert auto_workers() == max(1, len(os.sched_getaffinity(0)) - 1)
    assert parse_workers("auto") == auto_workers()


@pytest.mark.parametrize("value", ["0", "65", "-1", "two", "", "1.5", 0, 65])
def test_a_worker_count_out_of_range_is_refused(value: int | str) -> None:
    with pytest.raises(WorkersError, match=r"^--workers must be 1 to 64 or 'auto', got "):
        parse_workers(value)


def test_a_worker_count_in_range_is_taken() -> None:
    assert [parse_workers(v) for v in ("1", " 2 ", 64, "64")] == [1, 2, 64, 64]


def test_backoff_doubles_to_the_cap_and_resets_after_a_healthy_run() -> None:
    b = Backoff()
    assert [b.after_exit(0.5) for _ in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    assert b.after_exit(60.0) == 1  # it ran 60 s healthy: from the start again
    assert b.after_exit(59.9) == 2
    quick = Backoff(initial_s=0.1, cap_s=0.25, healthy_s=5)
    assert [quick.after_exit(1) for _ in range(4)] == [0.1, 0.2, 0.25, 0.25]


def test_exits_are_described_for_a_person() -> None:
    assert describe_exit(0) == "exited with 0"
    assert describe_exit(2) == "exited with 2"
    assert describe_exit(-signal.SIGKILL) == "was killed by SIGKILL"
    assert describe_exit(None) == "did not start"


def _worker_text(readings: int, *, gauge_type: str = "gauge") -> str:
    """What a worker's /metrics looks like: custom-collector counters, labelled gauges, a histogram."""
    registry = CollectorRegistry()
    c = Counter("fabricmon_collector_readings", "port readings received", registry=registry)
    c.inc(readings)
    g = Gauge("fabricmon_target_state", "1 for the target's current state", ["switch", "state"], registry=registry)
    g.labels("lf-g1-r1", "connected").set(1)
    h = Histogram("fabricmon_write_seconds", "batch write time", buckets=(0.1, 1.0), registry=registry)
    h.observe(0.05)
    text = generate_latest(registry).decode()
    text += f"# HELP fabricmon_odd odd\n# TYPE fabricmon_odd {gauge_type}\nfabricmon_odd 1.0\n"
    return text


def test_merged_metrics_have_one_family_each_and_a_shard_label_on_every_sample() -> None:
    merged = merge_metrics(
        {"0": parse_metrics(_worker_text(3)), "1": parse_metrics(_worker_text(5, gauge_type="counter"))}
    )
    text = render(merged).decode()
    assert text.count("# TYPE fabricmon_collector_readings_total counter") == 1
    assert text.count("# HELP fabricmon_target_state ") == 1
    assert 'fabricmon_collector_readings_total{shard="0"} 3.0' in text
    assert 'fabricmon_collector_readings_total{shard="1"} 5.0' in text
    assert 'fabricmon_target_state{shard="1",state="connected",switch="lf-g1-r1"} 1.0' in text
    assert 'fabricmon_write_seconds_bucket{le="0.1",shard="0"} 1.0' in text
    assert 'fabricmon_write_seconds_count{shard="1"} 1.0' in text
    # A family another shard declares with another type: the first shard's only.
    assert "fabricmon_odd" in text and 'fabricmon_odd{shard="1"}' not in text
    samples = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert all('shard="' in line for line in samples)
    if PROMTOOL is not None:
        lint = subprocess.run([PROMTOOL, "check", "metrics"], input=text.encode(), capture_output=True, timeout=60)
        assert lint.returncode == 0 and lint.stdout == lint.stderr == b"", (lint.stdout, lint.stderr)


def test_a_shard_label_a_worker_already_has_is_replaced() -> None:
    fams = parse_metrics('# HELP x_g g\n# TYPE x_g gauge\nx_g{shard="9",a="b"} 1\n')
    assert 'x_g{a="b",shard="2"} 1.0' in render(merge_metrics({"2": fams})).decode()


def test_text_that_is_not_the_format_is_an_error() -> None:
    with pytest.raises(ValueError):
        parse_metrics("<html>not metrics</html>\n")


def test_the_supervisors_own_metrics_before_any_worker_answers() -> None:
    sup = Supervisor([0, 2], 3, lambda w: ["true"])
    sup.workers[0].state = "running"
    sup.workers[1].restarts = 2
    sup.workers[1].state = "restarting"
    text = render(sup.own_metrics(answered={0})).decode()
    assert 'fabricmon_collector_workers{state="running"} 1.0' in text
    assert 'fabricmon_collector_workers{state="restarting"} 1.0' in text
    assert 'fabricmon_collector_worker_up{shard="0"} 0.0' in text  # answered, but no process runs
    assert 'fabricmon_collector_worker_up{shard="2"} 0.0' in text
    assert 'fabricmon_collector_worker_restarts_total{shard="2"} 2.0' in text
    if PROMTOOL is not None:
        lint = subprocess.run([PROMTOOL, "check", "metrics"], input=text.encode(), capture_output=True, timeout=60)
        assert lint.returncode == 0 and lint.stdout == lint.stderr == b"", (lint.stdout, lint.stderr)
