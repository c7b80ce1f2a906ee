"""The analyzer's in-memory figures as Prometheus metrics (``fabricmon run``'s ``/metrics``).

What lives in tables (webhook deliveries, scheduler actions) is read from them by the API
(:mod:`api.metrics`), wherever the analyzer runs. What only the running analyzer knows is here:

* ``fabricmon_analyzer_leader`` (1 while it leads, 0 as standby of an analyzer pair) and
  ``fabricmon_analyzer_leader_transitions_total``;
* per Alertmanager (label ``alertmanager``: its ``host:port``, never credentials):
  ``fabricmon_alertmanager_pushes_total`` (attempts, one evaluation's state each),
  ``fabricmon_alertmanager_push_failures_total``, ``fabricmon_alertmanager_pushes_superseded_total``
  (a newer state replaced one not yet sent), ``fabricmon_alertmanager_alerts`` (in the last accepted
  push) and ``fabricmon_alertmanager_last_success_timestamp_seconds``;
* Slurm's executor and job discovery: :mod:`schedulers.metrics`.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from analyzer.service import AnalyzerService


class AnalyzerMetrics(Collector):
    """Read at scrape time from the running analyzer: its role and its pusher."""

    def __init__(self, service: AnalyzerService) -> None:
        self.service = service
        self.alertmanagers = service.alertmanagers

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "fabricmon_analyzer_leader", "1 while this analyzer leads (evaluates and sends), 0 as standby",
            value=1 if self.service.leader else 0,
        )  # fmt: skip
        yield CounterMetricFamily(
            "fabricmon_analyzer_leader_transitions", "times this analyzer took or lost leadership",
            value=self.service.transitions,
        )  # fmt: skip
        yield from self._alertmanagers()

    def _alertmanagers(self) -> Iterator[Metric]:
        label = ["alertmanager"]
        pushes = CounterMetricFamily("fabricmon_alertmanager_pushes", "incident states pushed (attempts)", labels=label)
        failures = CounterMetricFamily(
            "fabricmon_alertmanager_push_failures", "pushes not accepted in time (sent again next round)", labels=label
        )
        superseded = CounterMetricFamily(
            "fabricmon_alertmanager_pushes_superseded", "states replaced by a newer one before they were sent",
            labels=label,
        )  # fmt: skip
        alerts = GaugeMetricFamily("fabricmon_alertmanager_alerts", "alerts in the last accepted push", labels=label)
        last = GaugeMetricFamily(
            "fabricmon_alertmanager_last_success_timestamp_seconds", "when a push was last accepted", labels=label
        )
        for s in self.alertmanagers.stats:
            key = [s.alertmanager]
            pushes.add_metric(key, s.pushes)
            failures.add_metric(key, s.failures)
            superseded.add_metric(key, s.superseded)
            alerts.add_metric(key, s.alerts)
            if s.last_success_at is not None:
                last.add_metric(key, s.last_success_at)
        yield from (pushes, failures, superseded, alerts, last)
