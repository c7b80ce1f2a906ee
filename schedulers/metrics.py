"""The running schedulers' in-memory figures as Prometheus metrics (``fabricmon run``'s ``/metrics``).

What lives in the ``scheduler_actions`` table is read by the API (:mod:`api.metrics`); what only
the running executor and job discovery know is here:

* ``fabricmon_scheduler_executions_total{scheduler,action}`` (commands run),
  ``fabricmon_scheduler_retries_total`` (attempts that found the scheduler away),
  ``fabricmon_scheduler_unavailable`` (1 while it is), and job discovery's
  ``fabricmon_scheduler_discovery_polls_total``, ``..._failures_total``, ``fabricmon_scheduler_jobs``
  (running jobs on fabric servers) and ``..._last_success_timestamp_seconds``.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from schedulers.executor import SCHEDULER
from schedulers.service import Schedulers


class SchedulerMetrics(Collector):
    """Read at scrape time from the schedulers a leading analyzer runs (nothing without Slurm)."""

    def __init__(self, schedulers: Schedulers) -> None:
        self.schedulers = schedulers

    def collect(self) -> Iterator[Metric]:
        ex, disc = self.schedulers.executor, self.schedulers.discovery
        if ex is None:
            return
        runs = CounterMetricFamily(
            "fabricmon_scheduler_executions", "scheduler commands run for incidents", labels=["scheduler", "action"]
        )
        for action in ("drain", "resume", "checkpoint"):
            runs.add_metric([SCHEDULER, action], ex.stats.by_action.get(action, 0))
        retries = CounterMetricFamily(
            "fabricmon_scheduler_retries", "action attempts that found the scheduler away", labels=["scheduler"]
        )
        retries.add_metric([SCHEDULER], ex.stats.retries)
        away = GaugeMetricFamily("fabricmon_scheduler_unavailable", "1 while the scheduler cannot be reached",
                                 labels=["scheduler"])  # fmt: skip
        away.add_metric([SCHEDULER], 1 if ex.stats.unavailable else 0)
        yield from (runs, retries, away)
        if disc is None:
            return
        polls = CounterMetricFamily("fabricmon_scheduler_discovery_polls", "job discovery polls that worked",
                                    labels=["scheduler"])  # fmt: skip
        polls.add_metric([SCHEDULER], disc.stats.polls)
        failed = CounterMetricFamily(
            "fabricmon_scheduler_discovery_failures", "job discovery polls that failed (known jobs kept)",
            labels=["scheduler"],
        )  # fmt: skip
        failed.add_metric([SCHEDULER], disc.stats.failures)
        jobs = GaugeMetricFamily("fabricmon_scheduler_jobs", "running jobs on fabric servers", labels=["scheduler"])
        jobs.add_metric([SCHEDULER], disc.stats.jobs)
        yield from (polls, failed, jobs)
        if disc.stats.last_success is not None:
            last = GaugeMetricFamily(
                "fabricmon_scheduler_discovery_last_success_timestamp_seconds",
                "when job discovery last worked",
                labels=["scheduler"],
            )
            last.add_metric([SCHEDULER], disc.stats.last_success.timestamp())
            yield last


__all__ = ["SchedulerMetrics"]
