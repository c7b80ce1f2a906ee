"""What every route module shares: the :class:`Endpoint` description, the app's typed state keys,
and parsing of path, query and body into the models of :mod:`api.schemas`."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from api.cache import ReportCache, Verdict
from api.live import Placement, SwitchStates
from api.metrics import ApiMetrics
from api.problems import BadRequest, NotFound, Problem, Unavailable, Unprocessable, from_validation
from config.model import Config
from fabric.model import Fabric
from store.db import Connection, Pool

M = TypeVar("M", bound=BaseModel)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

POOL = web.AppKey("pool", Pool)
CONFIG = web.AppKey("config", Config)
FABRIC = web.AppKey("fabric", Fabric)
CACHE = web.AppKey("cache", ReportCache)
OPENAPI = web.AppKey("openapi", bytes)
METRICS = web.AppKey("metrics", ApiMetrics)
STATES = web.AppKey("switch_states", SwitchStates)
PLACEMENT = web.AppKey("placement", Placement)


@dataclass(frozen=True, slots=True)
class Refusal:
    """A way a route refuses a request that matches its schema: a rule about the data (an unknown
    name, two parameters that do not fit together), which no schema can state. ``/openapi.json``
    lists each one in the operation's description and in ``x-fabricmon-refusals``."""

    status: int
    #: The problem document's ``type``, after :data:`api.problems.TYPE_BASE`.
    kind: str
    #: When it happens, as a sentence.
    when: str


#: Every route that looks a switch up by name.
UNKNOWN_SWITCH = Refusal(404, "unknown-switch", "no switch of that name is in the inventory or has reported")


def unknown_switch(name: str) -> NotFound:
    """The problem of :data:`UNKNOWN_SWITCH`."""
    return NotFound(f"no switch named {name!r}", kind="unknown-switch")


async def require_switch(conn: Connection, name: str) -> None:
    """404 ``unknown-switch`` unless ``name`` is a row of ``switches``."""
    if await conn.fetchval("SELECT 1 FROM switches WHERE name = $1", name) is None:
        raise unknown_switch(name)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One route: how it is served and how ``/openapi.json`` describes it."""

    method: str
    path: str
    handler: Handler
    summary: str
    response: type[BaseModel] | None
    status: int = 200
    path_model: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    body: type[BaseModel] | None = None
    body_required: bool = True
    #: Problem statuses besides the ones every route can answer (400, 422, 500, 503; 401 with tokens).
    errors: tuple[int, ...] = ()
    tag: str = "fabric"
    #: Media type of a non-JSON success body (the metrics text, the dashboard page).
    media: str | None = None
    description: str = ""
    #: Refusals of schema-valid requests (see :class:`Refusal`); other problems mean bad shape.
    refusals: tuple[Refusal, ...] = ()


def query_names(model: type[BaseModel] | None) -> frozenset[str]:
    """The parameter names a query model accepts (aliases where set)."""
    if model is None:
        return frozenset()
    return frozenset(f.alias or name for name, f in model.model_fields.items())


def strict_query(endpoint: Endpoint) -> Handler:
    """``endpoint.handler``, refusing query parameters it does not know (422): a typo such as
    ``?limt=5`` is an error, not a silently ignored wish."""
    known = query_names(endpoint.query)
    handler = endpoint.handler

    async def checked(request: web.Request) -> web.StreamResponse:
        unknown = sorted(set(request.query) - known)
        if unknown:
            names = ", ".join(repr(u) for u in unknown[:5])
            raise Unprocessable(f"unknown query parameter(s): {names}", kind="unknown-parameter")
        return await handler(request)

    return checked


def respond(model: BaseModel, *, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    """A JSON response from a model (serialized by pydantic-core)."""
    return web.Response(
        status=status, body=model.model_dump_json().encode(), content_type="application/json", headers=headers
    )


def cached_json(body: bytes, *, status: int = 200) -> web.Response:
    """A JSON response from bytes rendered earlier."""
    return web.Response(status=status, body=body, content_type="application/json")


def parse_path(request: web.Request, model: type[M]) -> M:
    """The path parameters as ``model`` (422 when they do not fit)."""
    try:
        return model.model_validate(dict(request.match_info))
    except ValidationError as exc:
        raise from_validation(exc, "path") from None


def parse_query(request: web.Request, model: type[M]) -> M:
    """The query string as ``model`` (422 when it does not fit, or a parameter comes twice)."""
    twice = sorted({k for k in request.query if len(request.query.getall(k)) > 1})
    if twice:
        raise Unprocessable(
            f"query parameter(s) given more than once: {', '.join(twice[:5])}", kind="repeated-parameter"
        )
    try:
        return model.model_validate(dict(request.query))
    except ValidationError as exc:
        raise from_validation(exc, "query") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


async def parse_body(request: web.Request, model: type[M], *, optional: bool = False) -> M:
    """The JSON body as ``model``: 415 if not JSON, 400 if not UTF-8 JSON, 422 if it does not fit."""
    raw = await request.read()
    if not raw.strip():
        if optional:
            return model.model_validate({})
        raise BadRequest("a JSON body is required", kind="missing-body")
    if request.content_type not in ("application/json", "application/octet-stream", "") and not (
        request.content_type.endswith("+json")
    ):
        problem = Problem(f"the body must be application/json, not {request.content_type}", kind="media-type")
        problem.status, problem.title = 415, "Unsupported Media Type"
        raise problem
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError:
        raise BadRequest("the body is not valid UTF-8", kind="bad-encoding") from None
    except (ValueError, RecursionError) as exc:
        raise BadRequest(f"the body is not valid JSON: {str(exc)[:120]}", kind="bad-json") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise from_validation(exc, "body") from None


async def verdict_of(request: web.Request) -> Verdict:
    """The latest verdict, or 503 while the analyzer has not evaluated the fabric yet."""
    verdict = await request.app[CACHE].current()
    if verdict is None:
        raise Unavailable(
            "the analyzer has not evaluated the fabric yet (no row in analyzer_runs); retry after its first round",
            kind="no-evaluation",
            headers={"Retry-After": str(int(request.app[CONFIG].analyzer.interval_s) or 1)},
        )
    return verdict


def now() -> datetime:
    return datetime.now(UTC)
