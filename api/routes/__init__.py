"""The API's routes: one module per resource, each declaring its :class:`Endpoint` list.

An :class:`Endpoint` is the one place a route is described: method, path, handler, and the
pydantic models of its path, query, body and response. The app registers the handlers from it
and :mod:`api.routes.openapi` writes ``/openapi.json`` from the same objects. ``ENDPOINTS`` is
the explicit list of every resource module's endpoints (no discovery).
"""

from __future__ import annotations

from api.routes import (
    actions,
    alerts,
    dashboard,
    health,
    history,
    jobs,
    links,
    maintenance,
    metrics,
    openapi,
    optics,
    rails,
    series,
    slo,
    switches,
)
from api.routes.base import Endpoint

ENDPOINTS: tuple[Endpoint, ...] = (
    *health.ENDPOINTS,
    *switches.ENDPOINTS,
    *rails.ENDPOINTS,
    *links.ENDPOINTS,
    *slo.ENDPOINTS,
    *alerts.ENDPOINTS,
    *actions.ENDPOINTS,
    *jobs.ENDPOINTS,
    *maintenance.ENDPOINTS,
    *series.ENDPOINTS,
    *optics.ENDPOINTS,
    *history.ENDPOINTS,
    *metrics.ENDPOINTS,
    *openapi.ENDPOINTS,
    *dashboard.ENDPOINTS,
)

__all__ = ["ENDPOINTS", "Endpoint"]
