"""Scheduler actions: ``GET /v1/actions`` (SPEC §9.3), every drain, resume and checkpoint taken,
pending, failed or withheld, newest first. The rows are written by :mod:`store.scheduler_actions`."""

from __future__ import annotations

from aiohttp import web

from api.inputs import ActionsQuery
from api.routes.base import POOL, Endpoint, parse_query, respond
from api.schemas_alerts import ActionList, ActionOut
from store.scheduler_actions import list_actions


async def actions(request: web.Request) -> web.Response:
    q = parse_query(request, ActionsQuery)
    rows, total = await list_actions(
        request.app[POOL], limit=q.limit, offset=q.offset, incident=q.incident, status=q.status
    )
    return respond(
        ActionList(
            items=[ActionOut.model_validate(r.as_json()) for r in rows], total=total, limit=q.limit, offset=q.offset
        )
    )


ENDPOINTS = (
    Endpoint(
        "GET",
        "/v1/actions",
        actions,
        "Scheduler actions (newest first): time, incident, scheduler, action, status, nodes, commands, result",
        ActionList,
        query=ActionsQuery,
        tag="alerts",
        description="Every drain, resume and checkpoint fabricmon took, is retrying, gave up, or withheld "
        "(a circuit breaker, a dry run), with the command it ran and what happened per host.",
    ),
)
