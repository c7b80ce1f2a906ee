"""Alerts: ``GET /v1/alerts?state=firing|resolved|all`` and ``POST /v1/alerts/{id}/ack``.

The lifecycle belongs to the analyzer (:mod:`analyzer.alerts`); the API lists and acknowledges
(:mod:`analyzer.alert_queries`).
Acknowledging records who and when (the first acknowledgement stands) and sends nothing.
"""

from __future__ import annotations

from aiohttp import web

from analyzer.alert_queries import ack_alert, get_alert, incident_timeline, list_alerts
from analyzer.outbox import deliveries_of
from api.inputs import AckIn, AlertPath, AlertsQuery
from api.problems import NotFound
from api.routes.base import POOL, Endpoint, Refusal, parse_body, parse_path, parse_query, respond
from api.schemas_alerts import AlertList, AlertOut, IncidentOut


async def alerts(request: web.Request) -> web.Response:
    q = parse_query(request, AlertsQuery)
    pool = request.app[POOL]
    items = await list_alerts(pool, q.state, q.limit, q.offset)
    total = await pool.fetchval("SELECT count(*) FROM alerts WHERE $1 = 'all' OR state = $1", q.state)
    return respond(
        AlertList(
            state=q.state,
            items=[AlertOut.model_validate(a) for a in items],
            total=total,
            limit=q.limit,
            offset=q.offset,
        )
    )


async def ack(request: web.Request) -> web.Response:
    alert_id = parse_path(request, AlertPath).id
    body = await parse_body(request, AckIn, optional=True)
    row = await ack_alert(request.app[POOL], alert_id, body.by)
    if row is None:
        raise NotFound(f"no alert with id {alert_id}", kind="unknown-alert")
    return respond(AlertOut.model_validate(row.as_json()))


async def incident(request: web.Request) -> web.Response:
    alert_id = parse_path(request, AlertPath).id
    pool = request.app[POOL]
    row = await get_alert(pool, alert_id)
    if row is None:
        raise NotFound(f"no incident with id {alert_id}", kind="unknown-alert")
    timeline = await incident_timeline(pool, alert_id)
    deliveries = await deliveries_of(pool, alert_id)
    return respond(IncidentOut.model_validate({**row.as_json(), "timeline": timeline, "deliveries": deliveries}))


INCIDENTS_DOC = (
    "An incident is the findings that share one root cause (SPEC §9.1): its rule is the root cause's, "
    "its symptoms the findings it explains, with one severity, one recommended action and the hosts it "
    "applies to. /v1/incidents and /v1/alerts serve the same objects."
)

ENDPOINTS = (
    Endpoint(
        "GET",
        "/v1/alerts",
        alerts,
        "Alerts (newest first): id, fingerprint, rule, severity, state, summary, scope, started_at, ended_at",
        AlertList,
        query=AlertsQuery,
        tag="alerts",
    ),
    Endpoint(
        "POST",
        "/v1/alerts/{id}/ack",
        ack,
        "Acknowledge an alert (the first acknowledgement stands; nothing is sent)",
        AlertOut,
        path_model=AlertPath,
        body=AckIn,
        body_required=False,
        errors=(415,),
        tag="alerts",
        refusals=(Refusal(404, "unknown-alert", "no alert has that id"),),
    ),
    Endpoint(
        "GET",
        "/v1/incidents",
        alerts,
        "Incidents (newest first), the same objects as /v1/alerts: root cause, symptoms, action",
        AlertList,
        query=AlertsQuery,
        tag="alerts",
        description=INCIDENTS_DOC,
    ),
    Endpoint(
        "GET",
        "/v1/incidents/{id}",
        incident,
        "One incident with its timeline (opened, escalated, changed, resolved) and webhook deliveries",
        IncidentOut,
        path_model=AlertPath,
        errors=(404,),
        tag="alerts",
        refusals=(Refusal(404, "unknown-alert", "no incident has that id"),),
    ),
    Endpoint(
        "POST",
        "/v1/incidents/{id}/ack",
        ack,
        "Acknowledge an incident (the first acknowledgement stands; nothing is sent)",
        AlertOut,
        path_model=AlertPath,
        body=AckIn,
        body_required=False,
        errors=(415,),
        tag="alerts",
        refusals=(Refusal(404, "unknown-alert", "no incident has that id"),),
    ),
)
