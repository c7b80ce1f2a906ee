"""``GET /metrics``: Prometheus text format (see :mod:`api.metrics`)."""

from __future__ import annotations

from aiohttp import web

from api.metrics import metrics_response
from api.routes.base import CONFIG, METRICS, POOL, Endpoint


async def metrics(request: web.Request) -> web.Response:
    metrics = request.app[METRICS]
    await metrics.outbox.refresh(request.app[POOL], request.app[CONFIG].alerts.webhooks)
    await metrics.actions.refresh(request.app[POOL])
    return metrics_response(metrics)


ENDPOINTS = (
    Endpoint(
        "GET",
        "/metrics",
        metrics,
        "Prometheus metrics: the service's own and the fabric's health gauges",
        None,
        media="text/plain",
        tag="service",
    ),
)
