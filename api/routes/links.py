"""Link health: ``GET /v1/links/health`` (SPEC §10.5, issue 26).

Every link with transceiver or FEC data in the trend window (``analyzer.thresholds.
link_window_s``), computed when asked from the ``transceiver_dom`` and ``port_fec`` tables by
:func:`analyzer.link_health.link_health` (the same computation as the ``link_health`` check),
one item per link: its worst end. Ranked by predicted time to failure, soonest first; links
without a trend (``time_to_failure_s`` null) last. A link without transceiver data is not listed.
Each item's ``optics`` is the measured end's ``GET /v1/optics`` (its series and thresholds).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from urllib.parse import urlencode

from aiohttp import web

from analyzer.link_health import LinkLimits, PortHealth, by_link, link_health, peer_of
from api.inputs import PageQuery
from api.routes.base import CONFIG, FABRIC, POOL, Endpoint, parse_query, respond
from api.schemas import LinkHealthOut, LinksHealthOut


def _rank(item: tuple[tuple[str, str], PortHealth]) -> tuple[float, float, str, str]:
    end, h = item
    ttf = math.inf if h.time_to_failure_s is None else h.time_to_failure_s
    return (ttf, -h.confidence, end[0], end[1])


async def links_health(request: web.Request) -> web.Response:
    q = parse_query(request, PageQuery)
    fabric, config = request.app[FABRIC], request.app[CONFIG]
    now = datetime.now(UTC)
    async with request.app[POOL].acquire() as conn:
        ports = await link_health(conn, now, LinkLimits.of(config.analyzer.thresholds))
    ranked = sorted(by_link(fabric, ports).items(), key=_rank)
    items = [
        LinkHealthOut(
            link=f"{end[0]}:{end[1]}",
            switch=h.switch,
            port=h.port,
            peer=peer_of(fabric, h.switch, h.port),
            time_to_failure_s=h.time_to_failure_s,
            confidence=h.confidence,
            basis=h.basis,
            evidence=h.evidence,
            optics=f"/v1/optics?{urlencode({'switch': h.switch, 'port': h.port})}",
        )
        for end, h in ranked[q.offset : q.offset + q.limit]
    ]
    return respond(LinksHealthOut(updated_at=now, items=items, total=len(ranked), limit=q.limit, offset=q.offset))


ENDPOINTS = (
    Endpoint(
        "GET",
        "/v1/links/health",
        links_health,
        "Links ranked by predicted time to failure, each with its confidence and evidence (optics, FEC)",
        LinksHealthOut,
        query=PageQuery,
        errors=(503,),
        description=__doc__ or "",
    ),
)
