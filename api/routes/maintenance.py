"""Maintenance windows (SPEC §10.4): ``POST /v1/maintenance``, ``GET /v1/maintenance``,
``DELETE /v1/maintenance/{id}``.

A window names switches, servers and rails (at least one) from the inventory, and a time: RFC 3339
``start`` and ``end``, ``end`` after ``start``. While it is in force, an incident whose root cause
is on one of its places is marked ``maintenance`` and its action is ``observe``: nothing is drained
or checkpointed for planned work. Link events and error counts inside it on its places are not
judged, during the window or after it (a planned reboot is no flap an hour later). ``DELETE``
cancels a window: one in progress ends now (it stays listed, no longer active: what happened in
it was planned), one not started or already ended is removed. Slurm
reservations with the ``MAINT`` flag are windows too (``source: slurm:<name>``), kept by the
analyzer's Slurm poller: they are listed here, and deleting one lasts until Slurm's next poll.
The body is :class:`analyzer.maintenance.WindowIn`; :mod:`analyzer.maintenance` stores it.
"""

from __future__ import annotations

from aiohttp import web

from analyzer import maintenance
from analyzer.maintenance import Window, WindowIn
from api.inputs import MaintenanceQuery, WindowPath
from api.problems import NotFound, Unprocessable
from api.routes.base import FABRIC, POOL, Endpoint, Refusal, now, parse_body, parse_path, parse_query, respond
from api.schemas_alerts import WindowList, WindowOut
from fabric.model import Fabric

#: How many unknown names a refusal lists.
SHOWN = 20
UNKNOWN_PLACES = Refusal(
    422,
    "unknown-places",
    "a switch, server or rail is not in the inventory (the problem's `unknown` names them by kind)",
)
EMPTY = Refusal(422, "empty-window", "the window names no switch, server or rail")
ORDER = Refusal(422, "window-order", "`end` is not after `start`")
UNKNOWN_WINDOW = Refusal(404, "unknown-window", "no maintenance window has that id")


def _out(window: Window) -> WindowOut:
    return WindowOut.model_validate(window.as_json(now()))


def check_places(fabric: Fabric, window: Window) -> None:
    """422 ``empty-window``, ``window-order`` or ``unknown-places`` (naming each unknown name)."""
    if window.empty:
        raise Unprocessable("a maintenance window names at least one switch, server or rail", kind=EMPTY.kind)
    if not window.end > window.start:
        raise Unprocessable(
            f"end ({window.end.isoformat()}) must be after start ({window.start.isoformat()})", kind=ORDER.kind
        )
    rails = {sw.rail for sw in fabric.switches.values() if sw.rail is not None}
    unknown = {
        "switches": [s for s in window.switches if s not in fabric.switches],
        "servers": [s for s in window.servers if s not in fabric.servers],
        "rails": [str(r) for r in window.rails if r not in rails],
    }
    if any(unknown.values()):
        parts = []
        for kind, names in unknown.items():
            if names:
                more = f" (+{len(names) - SHOWN} more)" if len(names) > SHOWN else ""
                parts.append(f"{kind} {', '.join(names[:SHOWN])}{more}")
        raise Unprocessable(
            "not in the inventory: " + "; ".join(parts),
            kind=UNKNOWN_PLACES.kind,
            extra={"unknown": {kind: names[:SHOWN] for kind, names in unknown.items() if names}},
        )


async def create(request: web.Request) -> web.Response:
    window = (await parse_body(request, WindowIn)).to_window()
    check_places(request.app[FABRIC], window)
    stored = await maintenance.add_window(request.app[POOL], window)
    return respond(_out(stored), status=201, headers={"Location": f"/v1/maintenance/{stored.id}"})


async def list_windows(request: web.Request) -> web.Response:
    q = parse_query(request, MaintenanceQuery)
    windows, total = await maintenance.list_windows(
        request.app[POOL], now(), active=q.active, limit=q.limit, offset=q.offset
    )
    return respond(WindowList(items=[_out(w) for w in windows], total=total, limit=q.limit, offset=q.offset))


async def delete(request: web.Request) -> web.Response:
    window_id = parse_path(request, WindowPath).id
    if not await maintenance.delete_window(request.app[POOL], window_id, now()):
        raise NotFound(f"no maintenance window with id {window_id}", kind=UNKNOWN_WINDOW.kind)
    return web.Response(status=204)


ENDPOINTS = (
    Endpoint(
        "POST",
        "/v1/maintenance",
        create,
        "Open a maintenance window: incidents on its places are observed, never drained or checkpointed",
        WindowOut,
        status=201,
        body=WindowIn,
        errors=(415,),
        tag="maintenance",
        description=__doc__ or "",
        refusals=(EMPTY, ORDER, UNKNOWN_PLACES),
    ),
    Endpoint(
        "GET",
        "/v1/maintenance",
        list_windows,
        "Maintenance windows (by start), from the API and from Slurm MAINT reservations",
        WindowList,
        query=MaintenanceQuery,
        tag="maintenance",
    ),
    Endpoint(
        "DELETE",
        "/v1/maintenance/{id}",
        delete,
        "Cancel a maintenance window: one in progress ends now, any other is removed",
        None,
        status=204,
        path_model=WindowPath,
        tag="maintenance",
        refusals=(UNKNOWN_WINDOW,),
    ),
)
