"""The simulator's control endpoint (SPEC §7): inject, list and clear faults over HTTP.

Routes (JSON; errors are RFC 9457 ``application/problem+json`` with type, title, status, detail):

=======================  ================================================================
``POST /faults``         a fault object (simulator.faults) → 201, the fault as applied
                         (``id``, chosen ``port``, ``started_at``), ``Location: /faults/{id}``;
                         400 for bad input, 409 for an id in use or a cable already miswired
``GET /faults``          ``{"faults": [...]}``, the active faults, oldest first
``GET /faults/{id}``     one active fault, or 404
``DELETE /faults/{id}``  204 when cleared, 404 when no such fault is active
=======================  ================================================================
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from aiohttp import web

from simulator.fabric_state import FabricState
from simulator.faults import FaultConflict, FaultError

log = logging.getLogger(__name__)

FABRIC_STATE = web.AppKey("fabric_state", FabricState)
PROBLEM_TYPE = "application/problem+json"
_PROBLEM_BASE = "https://fabricmon.dev/problems/"


def create_control_app(state: FabricState, *, run_state: bool = False) -> web.Application:
    """The control app for ``state``; with ``run_state``, the app also owns the state's timer task."""
    app = web.Application(middlewares=[_problems])
    app[FABRIC_STATE] = state
    app.router.add_post("/faults", _post_fault)
    app.router.add_get("/faults", _list_faults)
    app.router.add_get("/faults/{id}", _get_fault)
    app.router.add_delete("/faults/{id}", _delete_fault)
    if run_state:
        app.cleanup_ctx.append(_state_task)
    return app


async def _state_task(app: web.Application) -> AsyncIterator[None]:
    state = app[FABRIC_STATE]
    state.start()
    yield
    await state.stop()


def problem(status: int, title: str, detail: str, slug: str | None = None) -> web.Response:
    """An RFC 9457 problem response."""
    body = {
        "type": _PROBLEM_BASE + slug if slug else "about:blank",
        "title": title,
        "status": status,
        "detail": detail,
    }
    return web.json_response(body, status=status, content_type=PROBLEM_TYPE)


@web.middleware
async def _problems(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Every error as a problem document: unknown routes, wrong methods, and our own bugs."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return problem(exc.status, exc.reason, exc.text or exc.reason)
    except Exception:
        log.exception("control endpoint failed on %s %s", request.method, request.path)
        return problem(500, "Internal Server Error", "the simulator failed to handle the request")


async def _post_fault(request: web.Request) -> web.Response:
    try:
        data: Any = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return problem(400, "Invalid JSON", f"the body is not JSON: {exc}", "invalid-json")
    if not isinstance(data, dict):
        return problem(400, "Invalid fault", "a fault must be a JSON object", "invalid-fault")
    try:
        fault = request.app[FABRIC_STATE].apply(data)
    except FaultConflict as exc:
        return problem(409, "Fault conflict", str(exc), "fault-conflict")
    except FaultError as exc:
        return problem(400, "Invalid fault", str(exc), "invalid-fault")
    return web.json_response(fault.to_dict(), status=201, headers={"Location": f"/faults/{fault.id}"})


async def _list_faults(request: web.Request) -> web.Response:
    faults = request.app[FABRIC_STATE].active()
    return web.json_response({"faults": [f.to_dict() for f in faults]})


async def _get_fault(request: web.Request) -> web.Response:
    fault_id = request.match_info["id"]
    fault = request.app[FABRIC_STATE].get(fault_id)
    if fault is None:
        return problem(404, "Fault not found", f"no active fault {fault_id!r}", "fault-not-found")
    return web.json_response(fault.to_dict())


async def _delete_fault(request: web.Request) -> web.Response:
    fault_id = request.match_info["id"]
    if not request.app[FABRIC_STATE].clear(fault_id):
        return problem(404, "Fault not found", f"no active fault {fault_id!r}", "fault-not-found")
    return web.Response(status=204)
