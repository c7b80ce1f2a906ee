"""The aiohttp application: routes, middlewares, the pool and the background task it owns.

:func:`create_app` wires the :data:`api.routes.ENDPOINTS` (each route described once, which also
writes ``/openapi.json``), the middlewares (request metrics → problem documents → bearer
tokens), the dashboard's static files, and two cleanup contexts:

* the database pool: created from ``dsn`` and closed at shutdown, or, when the caller passes
  ``pool``, borrowed and left open (``fabricmon run`` shares its pool; the caller migrated it);
* the verdict refresher (:meth:`api.cache.ReportCache.run`) and the switch-state snapshot
  (:class:`api.live.SwitchStates`), started after the pool; the refresher is stopped (then
  awaited) before the pool closes.

State lives under typed :class:`aiohttp.web.AppKey` keys (:mod:`api.routes.base`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterable

from aiohttp import web
from prometheus_client.registry import Collector

from api.auth import auth_middleware
from api.cache import ReportCache
from api.live import Placement, SwitchStates
from api.metrics import ApiMetrics
from api.problems import problem_middleware
from api.routes import ENDPOINTS
from api.routes.base import CACHE, CONFIG, FABRIC, METRICS, OPENAPI, PLACEMENT, POOL, STATES, strict_query
from api.routes.dashboard import STATIC
from api.routes.openapi import render
from config.model import Config
from fabric.model import Fabric
from fabric.tasks import stop_task
from store.db import Pool, create_pool

log = logging.getLogger(__name__)

#: Request bodies above this are refused (413): a 65,536-host job is well under it.
MAX_BODY_BYTES = 4 * 1024 * 1024
STOP_TIMEOUT_S = 5.0

CleanupCtx = Callable[[web.Application], AsyncIterator[None]]


def create_app(
    config: Config,
    fabric: Fabric,
    *,
    pool: Pool | None = None,
    dsn: str | None = None,
    extra_collectors: Iterable[Collector] = (),
    refresh_s: float = 1.0,
) -> web.Application:
    """The API application. Give it a ``pool`` to share, or a ``dsn`` for a pool of its own."""
    if pool is None and dsn is None:
        raise ValueError("create_app needs a pool or a dsn")
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    metrics = ApiMetrics(lambda: app.get(CACHE), extra_collectors)
    app.middlewares.extend([metrics.middleware(), problem_middleware, auth_middleware(config.api)])
    app[CONFIG] = config
    app[FABRIC] = fabric
    app[METRICS] = metrics
    app[PLACEMENT] = Placement(fabric)
    app[OPENAPI] = render(ENDPOINTS, auth=bool(config.api.tokens), open_routes=config.api.open_routes)
    for endpoint in ENDPOINTS:
        handler = strict_query(endpoint) if endpoint.path.startswith("/v1/") else endpoint.handler
        app.router.add_route(endpoint.method, endpoint.path, handler)
    app.router.add_static("/dashboard/", STATIC)
    app.cleanup_ctx.append(_database(config, pool, dsn))
    app.cleanup_ctx.append(_refresher(refresh_s))
    return app


def _database(config: Config, pool: Pool | None, dsn: str | None) -> CleanupCtx:
    async def ctx(app: web.Application) -> AsyncIterator[None]:
        if pool is not None:
            app[POOL] = pool
            yield
            return
        assert dsn is not None
        own = await create_pool(dsn, config.database)
        app[POOL] = own
        try:
            yield
        finally:
            await own.close()

    return ctx


def _refresher(refresh_s: float) -> CleanupCtx:
    async def ctx(app: web.Application) -> AsyncIterator[None]:
        cache = ReportCache(app[POOL], app[FABRIC], app[CONFIG], refresh_s=refresh_s)
        app[CACHE] = cache
        app[STATES] = SwitchStates(app[POOL], 1.5 * cache.interval_s)
        stop = asyncio.Event()
        task = asyncio.create_task(cache.run(stop), name="api-verdict-refresher")
        try:
            yield
        finally:
            stop.set()
            _, late = await asyncio.wait([task], timeout=STOP_TIMEOUT_S)
            if late:
                log.warning("the verdict refresher did not stop in %s s; cancelled", STOP_TIMEOUT_S)
            await stop_task(task, "the verdict refresher", log)

    return ctx
