"""Liveness, readiness and the fabric's health verdict (``/healthz``, ``/readyz``, ``/v1/health``).

``/v1/health`` serves the analyzer's latest stored verdict. Before the analyzer's first
evaluation there is no verdict to give: the answer is a 503 problem (``no-evaluation``, with
``Retry-After``) rather than a guessed status, so a scheduler gating on "healthy" never
proceeds on nothing. A verdict older than three analyzer intervals is still served, marked
``stale: true``; treat it as unknown.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from analyzer.findings import SEVERITY_ORDER
from api.cache import Verdict
from api.problems import Unavailable
from api.routes.base import CACHE, POOL, Endpoint, cached_json, respond, verdict_of
from api.schemas import CheckOut, Checks, FindingOut, HealthOut, Liveness
from store.db import UNAVAILABLE_ERRORS, PostgresError

MAX_FINDINGS_PER_CHECK = 100
READY_TIMEOUT_S = 2.0
CHECK_NAMES = ("rail_symmetry", "oversubscription", "stability", "collection")


async def healthz(_: web.Request) -> web.Response:
    return respond(Liveness(status="ok"))


async def readyz(request: web.Request) -> web.Response:
    try:
        async with asyncio.timeout(READY_TIMEOUT_S):
            await request.app[POOL].fetchval("SELECT 1")
    except (*UNAVAILABLE_ERRORS, PostgresError) as exc:
        raise Unavailable(f"the database is not answering ({type(exc).__name__})", kind="not-ready") from None
    return respond(Liveness(status="ready"))


def render_checks(report: dict[str, Any]) -> Checks:
    """The four checks of a stored report, most severe findings first."""
    out: dict[str, CheckOut] = {}
    for name in CHECK_NAMES:
        check = report.get("checks", {}).get(name, {"status": "healthy", "findings": []})
        found = sorted(check.get("findings", []), key=lambda f: -SEVERITY_ORDER.get(f["severity"], 0))
        out[name] = CheckOut(
            status=check["status"],
            findings=[FindingOut.model_validate(f) for f in found[:MAX_FINDINGS_PER_CHECK]],
            findings_total=len(found),
        )
    return Checks(**out)


def render_health(verdict: Verdict) -> tuple[bytes, bytes]:
    """The body of :class:`HealthOut` around its two per-request fields (``age_s``, ``stale``).

    The checks carry every finding's blast radius (thousands of server names at 16K GPUs), so they
    are serialized once per verdict; a request only writes the two fields that age.
    """
    whole = HealthOut(
        status=verdict.report["status"],
        updated_at=verdict.time,
        age_s=0.0,
        stale=False,
        checks=render_checks(verdict.report),
        errors=[str(e) for e in verdict.report.get("errors", [])],
    ).model_dump_json()
    head, _, tail = whole.partition(',"age_s":0.0,"stale":false')
    assert tail, "HealthOut's field order changed"
    return head.encode(), tail.encode()


async def health(request: web.Request) -> web.Response:
    verdict = await verdict_of(request)
    cache = request.app[CACHE]
    head, tail = verdict.memoized("health", lambda: render_health(verdict))
    live = f',"age_s":{round(cache.age_s() or 0.0, 3)!r},"stale":{"true" if cache.stale() else "false"}'
    return cached_json(head + live.encode() + tail)


ENDPOINTS = (
    Endpoint("GET", "/healthz", healthz, "The process is alive", Liveness, tag="service"),
    Endpoint("GET", "/readyz", readyz, "The database answers", Liveness, errors=(503,), tag="service"),
    Endpoint(
        "GET",
        "/v1/health",
        health,
        "The fabric's health: overall status and the four checks with their findings",
        HealthOut,
        errors=(503,),
        description=__doc__ or "",
    ),
)
