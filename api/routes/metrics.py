"""``GET /metrics``: Prometheus text format (see :mod:`api.metrics`)."""

from __future__ import annotations

from aiohttp import web

from api.metrics import metrics_response
from api.routes.base import METRICS, Endpoint


async def metrics(request: web.Request) -> web.Response:
    return metrics_response(request.app[METRICS])


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
