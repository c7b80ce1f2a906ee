"""``/metrics``: the API's own request metrics and the fabric's health as gauges.

Each app has its own :class:`~prometheus_client.CollectorRegistry` (two apps in one process, as
in tests, never collide). It holds

* ``fabricmon_api_requests_total{method,route,status}``, ``fabricmon_api_request_duration_seconds``
  (histogram) and ``fabricmon_api_requests_in_flight``: ``route`` is the route's template
  (``/v1/switches/{name}``), never the raw path, so cardinality is bounded;
* :class:`FabricCollector`: gauges read at scrape time from the latest verdict the app holds
  (no database round trip): overall and per-check status (0 healthy, 1 degraded, 2 critical),
  the verdict's time and age, per-rail capacity, load and PFC pause ratio, the worst
  oversubscription ratio, SLO figures, and the firing alerts per severity;
* :class:`WebhookOutboxCollector`: per webhook receiver (label ``webhook``, the outbox key, and
  ``url``, the configured URL without credentials or query), the deliveries given up
  (``fabricmon_webhook_deliveries_failed_total``) and those still pending
  (``fabricmon_webhook_deliveries_pending``). They are read from the outbox table on each scrape
  (:meth:`WebhookOutboxCollector.refresh`, one small indexed query), not from a sender's memory:
  the analyzer that sends usually runs in another process, and the table is what every sender
  shares and what survives restarts;
* :class:`SchedulerActionsCollector`: ``fabricmon_scheduler_actions{scheduler,status}``, the
  scheduler actions table by status, read the same way;
* whatever extra collectors the caller passes (``fabricmon run`` adds the collector's and the
  analyzer's, :mod:`analyzer.metrics`).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence

from aiohttp import web
from aiohttp.typedefs import Middleware
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from analyzer.config import WebhookConfig
from analyzer.outbox import outbox_counts, unique_webhooks, webhook_key
from analyzer.payloads import redact_url
from api.cache import ReportCache
from api.problems import Handler
from store.db import UNAVAILABLE_ERRORS, Pool, PostgresError
from store.scheduler_actions import STATUSES, status_counts

STATUS_VALUE = {"healthy": 0, "degraded": 1, "critical": 2}
SEVERITIES = ("info", "warning", "critical")
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: A scrape waits at most this long for the outbox counts, then shows the last ones read.
OUTBOX_TIMEOUT_S = 2.0


class FabricCollector(Collector):
    """Fabric health gauges from the app's :class:`ReportCache` (nothing until it exists)."""

    def __init__(self, cache: Callable[[], ReportCache | None]) -> None:
        self._cache = cache

    def collect(self) -> Iterator[Metric]:
        cache = self._cache()
        if cache is None:
            return
        firing = GaugeMetricFamily("fabricmon_alerts_firing", "firing alerts by severity", labels=["severity"])
        for sev in SEVERITIES:
            firing.add_metric([sev], cache.alerts_firing.get(sev, 0))
        yield firing
        yield CounterMetricFamily(
            "fabricmon_api_verdict_refresh_errors", "failed reads of the latest verdict", value=cache.refresh_errors
        )
        verdict = cache.verdict
        if verdict is None:
            return
        report = verdict.report
        yield _gauge(
            "fabricmon_fabric_status",
            "fabric health: 0 healthy, 1 degraded, 2 critical",
            STATUS_VALUE[report["status"]],
        )
        checks = GaugeMetricFamily(
            "fabricmon_check_status", "per check: 0 healthy, 1 degraded, 2 critical", labels=["check"]
        )
        findings = GaugeMetricFamily("fabricmon_check_findings", "findings per check", labels=["check"])
        for name, check in sorted(report.get("checks", {}).items()):
            checks.add_metric([name], STATUS_VALUE.get(check.get("status"), 0))
            findings.add_metric([name], len(check.get("findings", [])))
        yield from (checks, findings)
        yield _gauge(
            "fabricmon_fabric_evaluation_timestamp_seconds", "when the verdict was evaluated", verdict.time.timestamp()
        )
        yield _gauge("fabricmon_fabric_evaluation_age_seconds", "age of the verdict", cache.age_s() or 0.0)
        yield _gauge(
            "fabricmon_fabric_evaluation_duration_seconds",
            "how long the evaluation took",
            float(report.get("duration_s", 0.0)),
        )
        yield from self._rails(cache)
        over = report.get("oversubscription", {})
        ratios = [r.get("ratio") for r in over.get("worst", [])]
        worst = math.inf if any(r is None for r in ratios) else max((float(r) for r in ratios), default=1.0)
        yield _gauge("fabricmon_oversubscription_worst_ratio", "highest live down:up ratio of any leaf or spine", worst)
        yield _gauge(
            "fabricmon_oversubscription_design_ratio", "the design down:up ratio", float(over.get("design_ratio", 1.0))
        )
        yield from _slo(report.get("slo", []))

    def _rails(self, cache: ReportCache) -> Iterator[Metric]:
        assert cache.verdict is not None
        fams = {
            "capacity": GaugeMetricFamily(
                "fabricmon_rail_capacity_fraction", "live/design uplink capacity", labels=["rail"]
            ),
            "bottleneck": GaugeMetricFamily(
                "fabricmon_rail_bottleneck_fraction",
                "live/design uplinks of the rail's weakest switch",
                labels=["rail"],
            ),
            "live": GaugeMetricFamily("fabricmon_rail_live_gbps", "live uplink capacity (Gbit/s)", labels=["rail"]),
            "load": GaugeMetricFamily(
                "fabricmon_rail_load_gbps", "traffic toward the rail's GPUs (Gbit/s)", labels=["rail"]
            ),
            "pfc": GaugeMetricFamily(
                "fabricmon_rail_pfc_pause_ratio", "mean share of time ports are paused", labels=["rail"]
            ),
        }
        for r in cache.verdict.report.get("rails", []):
            rail = [str(r["rail"])]
            design = float(r.get("design_gbps") or 0.0)
            if design > 0:
                fams["capacity"].add_metric(rail, float(r["live_gbps"]) / design)
            fams["bottleneck"].add_metric(rail, float(r["bottleneck_fraction"]))
            fams["live"].add_metric(rail, float(r["live_gbps"]))
            if r.get("load_gbps") is not None:  # unknown (a leaf unreported): no sample, not a zero
                fams["load"].add_metric(rail, float(r["load_gbps"]))
        for rail_no, ratio in sorted(cache.verdict.rail_pfc.items()):
            fams["pfc"].add_metric([str(rail_no)], ratio)
        yield from fams.values()


class WebhookOutboxCollector(Collector):
    """Failed and pending webhook deliveries per receiver, as last read by :meth:`refresh`."""

    def __init__(self) -> None:
        self._urls: dict[str, str] = {}
        self._counts: dict[tuple[str, str], int] | None = None  # (webhook, status) -> rows; None: never read
        self.read_errors = 0

    async def refresh(self, pool: Pool, webhooks: Sequence[WebhookConfig]) -> None:
        """Read the counts (bounded by :data:`OUTBOX_TIMEOUT_S`); on failure keep the last ones."""
        self._urls = {webhook_key(w): redact_url(str(w.url)) for w in unique_webhooks(webhooks)}
        try:
            async with asyncio.timeout(OUTBOX_TIMEOUT_S):
                rows = await outbox_counts(pool)
        except (*UNAVAILABLE_ERRORS, PostgresError, TimeoutError):
            self.read_errors += 1  # /metrics must answer while the database is away
            return
        self._counts = {(r["webhook"], r["status"]): int(r["count"]) for r in rows}

    def collect(self) -> Iterator[Metric]:
        yield CounterMetricFamily(
            "fabricmon_webhook_outbox_read_errors", "failed reads of the webhook outbox counts", value=self.read_errors
        )
        if self._counts is None:
            return
        labels = ["webhook", "url"]
        failed = CounterMetricFamily(
            "fabricmon_webhook_deliveries_failed",
            "deliveries given up: max_attempts spent, or max_attempts_4xx client errors in a row",
            labels=labels,
        )
        pending = GaugeMetricFamily(
            "fabricmon_webhook_deliveries_pending", "deliveries not yet delivered", labels=labels
        )
        keys = sorted({*self._urls, *(key for key, _ in self._counts)})
        for key in keys:
            url = self._urls.get(key, "")  # "": a receiver no longer configured
            failed.add_metric([key, url], self._counts.get((key, "failed"), 0))
            pending.add_metric([key, url], self._counts.get((key, "pending"), 0))
        yield from (failed, pending)


class SchedulerActionsCollector(Collector):
    """Scheduler actions by status (``fabricmon_scheduler_actions{scheduler,status}``), read from
    ``scheduler_actions`` on each scrape like the webhook outbox: ``failed`` only grows (a drain or
    resume given up), ``pending`` is what waits for the scheduler, ``withheld`` what a circuit
    breaker left to a person."""

    def __init__(self) -> None:
        self._counts: list[tuple[str, str, int]] | None = None
        self.read_errors = 0

    async def refresh(self, pool: Pool) -> None:
        try:
            async with asyncio.timeout(OUTBOX_TIMEOUT_S):
                self._counts = await status_counts(pool)
        except (*UNAVAILABLE_ERRORS, PostgresError, TimeoutError):
            self.read_errors += 1

    def collect(self) -> Iterator[Metric]:
        if self._counts is None:
            return
        family = GaugeMetricFamily(
            "fabricmon_scheduler_actions", "stored scheduler actions by status", labels=["scheduler", "status"]
        )
        seen = {(sched, status): n for sched, status, n in self._counts}
        for sched in sorted({sched for sched, _ in seen}):
            for status in STATUSES:
                family.add_metric([sched, status], seen.get((sched, status), 0))
        yield family


def _slo(objectives: Iterable[dict[str, object]]) -> Iterator[Metric]:
    current = GaugeMetricFamily("fabricmon_slo_current", "the objective's measured value", labels=["objective"])
    target = GaugeMetricFamily("fabricmon_slo_target", "the objective's target", labels=["objective"])
    budget = GaugeMetricFamily(
        "fabricmon_slo_error_budget_remaining", "unspent error budget share", labels=["objective"]
    )
    burn = GaugeMetricFamily("fabricmon_slo_burn_rate", "error budget burn rate", labels=["objective", "window"])
    for o in objectives:
        name = [str(o["name"])]
        current.add_metric(name, float(str(o["current"])))
        target.add_metric(name, float(str(o["target"])))
        budget.add_metric(name, float(str(o["error_budget_remaining"])))
        rates = o.get("burn_rates")
        if isinstance(rates, dict):
            for window, value in sorted(rates.items()):
                burn.add_metric([*name, str(window)], float(value))
    yield from (current, target, budget, burn)


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


class ApiMetrics:
    """The app's registry: request metrics, fabric gauges and any extra collectors."""

    def __init__(self, cache: Callable[[], ReportCache | None], extra: Iterable[Collector] = ()) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "fabricmon_api_requests", "HTTP requests answered", ["method", "route", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "fabricmon_api_request_duration_seconds",
            "time to answer a request",
            ["method", "route"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.in_flight = Gauge("fabricmon_api_requests_in_flight", "requests being answered", registry=self.registry)
        self.registry.register(FabricCollector(cache))
        self.outbox = WebhookOutboxCollector()
        self.registry.register(self.outbox)
        self.actions = SchedulerActionsCollector()
        self.registry.register(self.actions)
        for collector in extra:
            self.registry.register(collector)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def middleware(self) -> Middleware:
        """Counts and times every request by route template."""

        @web.middleware
        async def measure(request: web.Request, handler: Handler) -> web.StreamResponse:
            started = time.perf_counter()
            self.in_flight.inc()
            status = 500
            try:
                response = await handler(request)
                status = response.status
                return response
            except web.HTTPException as exc:
                status = exc.status
                raise
            finally:
                self.in_flight.dec()
                resource = request.match_info.route.resource
                route = resource.canonical if resource is not None else "unmatched"
                method = request.method if request.method in METHODS else "other"
                self.requests.labels(method, route, str(status)).inc()
                self.latency.labels(method, route).observe(time.perf_counter() - started)

        return measure


def metrics_response(metrics: ApiMetrics) -> web.Response:
    return web.Response(body=metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})
