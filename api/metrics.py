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
* whatever extra collectors the caller passes (``fabricmon run`` adds the collector's,
  analyzer's and webhook sender's self-metrics).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator

from aiohttp import web
from aiohttp.typedefs import Middleware
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from api.cache import ReportCache
from api.problems import Handler

STATUS_VALUE = {"healthy": 0, "degraded": 1, "critical": 2}
SEVERITIES = ("info", "warning", "critical")
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


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
            fams["load"].add_metric(rail, float(r.get("load_gbps") or 0.0))
        for rail_no, ratio in sorted(cache.verdict.rail_pfc.items()):
            fams["pfc"].add_metric([str(rail_no)], ratio)
        yield from fams.values()


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
