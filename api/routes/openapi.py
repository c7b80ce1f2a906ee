"""``GET /openapi.json``: OpenAPI 3.1, written from the :class:`~api.routes.base.Endpoint` list and
the pydantic models it names (JSON Schema 2020-12, which OpenAPI 3.1 uses as is). It is built
once per app, for that app's auth settings: with tokens, the protected operations carry the
``bearer`` security requirement and a 401 response.

The document states every rule the server applies to a single value (bounds, lengths, patterns,
enums, required fields), so a request that matches it is refused only for a rule about the data.
Those refusals are each operation's :attr:`~api.routes.base.Endpoint.refusals`: listed in its
description, named in the response they come with, and given as ``x-fabricmon-refusals``
(``[{status, type, when}]``, ``type`` being the problem document's) for clients and tests.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from importlib import metadata
from typing import Any

from aiohttp import web
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from api.auth import is_open
from api.problems import PROBLEM_JSON, TYPE_BASE
from api.routes.base import OPENAPI, Endpoint, Refusal, cached_json
from api.schemas import ProblemOut

REF = "#/components/schemas/{model}"
DESCRIPTIONS = {
    400: "Malformed request (bad encoding, bad JSON)",
    401: "Missing or wrong bearer token",
    404: "No such resource",
    415: "The body is not JSON",
    422: "Parameters or body do not validate",
    503: "The database is not answering, or there is no evaluation yet",
}


def _version() -> str:
    try:
        return metadata.version("fabricmon")
    except metadata.PackageNotFoundError:
        return "0.0.0"


def _plain(schema: dict[str, Any]) -> dict[str, Any]:
    """A parameter's schema without the ``null`` branch of an optional (absent is how to say null)."""
    options = schema.get("anyOf")
    if isinstance(options, list):
        rest = [o for o in options if o != {"type": "null"}]
        if len(rest) == 1:
            merged = {k: v for k, v in schema.items() if k != "anyOf"}
            merged.update(rest[0])
            if merged.get("default", 0) is None:
                merged.pop("default")
            return merged
    return schema


def parameters(model: type[BaseModel] | None, where: str) -> list[dict[str, Any]]:
    """OpenAPI parameters from a query or path model."""
    if model is None:
        return []
    schema = model.model_json_schema(by_alias=True, mode="validation")
    required = set(schema.get("required", []))
    out = []
    for name, prop in schema.get("properties", {}).items():
        prop = _plain(dict(prop))
        description = prop.pop("description", None)
        prop.pop("title", None)
        param: dict[str, Any] = {"name": name, "in": where, "required": where == "path" or name in required}
        if description:
            param["description"] = description
        param["schema"] = prop
        out.append(param)
    return out


def _problem(status: int, refusals: Sequence[Refusal] = ()) -> dict[str, Any]:
    description = DESCRIPTIONS.get(status, "Error")
    kinds = [f"`{r.kind}`" for r in refusals if r.status == status]
    if kinds:
        description += "; or a request that matches the schema, refused: " + ", ".join(kinds)
    return {
        "description": description,
        "content": {PROBLEM_JSON: {"schema": {"$ref": REF.format(model="ProblemOut")}}},
    }


def _refusals_text(refusals: Sequence[Refusal]) -> str:
    lines = [f"- {r.status} `{r.kind}`: {r.when}" for r in refusals]
    return "Refused although the request matches this schema (rules about the data):\n\n" + "\n".join(lines)


Refs = Mapping[tuple[Any, JsonSchemaMode], Any]


def _operation(e: Endpoint, refs: Refs, *, auth: bool, open_routes: Sequence[str]) -> dict[str, Any]:
    op: dict[str, Any] = {
        "operationId": e.handler.__module__.rsplit(".", 1)[-1] + "_" + e.handler.__name__,
        "summary": e.summary,
        "tags": [e.tag],
    }
    description = [e.description.strip()] if e.description else []
    if e.refusals:
        description.append(_refusals_text(e.refusals))
        op["x-fabricmon-refusals"] = [
            {"status": r.status, "type": TYPE_BASE + r.kind, "when": r.when} for r in e.refusals
        ]
    if description:
        op["description"] = "\n\n".join(description)
    params = parameters(e.path_model, "path") + parameters(e.query, "query")
    if params:
        op["parameters"] = params
    if e.body is not None:
        op["requestBody"] = {
            "required": e.body_required,
            "content": {"application/json": {"schema": refs[(e.body, "validation")]}},
        }
    ok: dict[str, Any] = {"description": e.summary}
    if e.media is not None:
        ok["content"] = {e.media: {"schema": {"type": "object" if e.media == "application/json" else "string"}}}
    elif e.response is not None:
        ok["content"] = {"application/json": {"schema": refs[(e.response, "serialization")]}}
    statuses = {400, *e.errors, *(r.status for r in e.refusals)}
    if params or e.body is not None:
        statuses.add(422)
    if e.path not in ("/healthz", "/", "/openapi.json"):
        statuses.add(503)
    if auth and not is_open(e.path, open_routes):
        statuses.add(401)
        op["security"] = [{"bearer": []}]
    op["responses"] = {str(e.status): ok} | {str(s): _problem(s, e.refusals) for s in sorted(statuses)}
    return op


def build(endpoints: Sequence[Endpoint], *, auth: bool, open_routes: Sequence[str]) -> dict[str, Any]:
    """The OpenAPI document."""
    wanted: list[tuple[type[BaseModel], JsonSchemaMode]] = [(ProblemOut, "serialization")]
    for e in endpoints:
        if e.response is not None and e.media is None:
            wanted.append((e.response, "serialization"))
        if e.body is not None:
            wanted.append((e.body, "validation"))
    refs, defs = models_json_schema(list(dict.fromkeys(wanted)), ref_template=REF)
    paths: dict[str, dict[str, Any]] = {}
    for e in endpoints:
        paths.setdefault(e.path, {})[e.method.lower()] = _operation(e, refs, auth=auth, open_routes=open_routes)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "fabricmon",
            "version": _version(),
            "description": "Fabric health for AI training clusters: rail symmetry, oversubscription drift, "
            "stability SLOs, alerts and jobs. Errors are application/problem+json.",
        },
        "paths": paths,
        "components": {
            "schemas": defs.get("$defs", {}),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


def render(endpoints: Sequence[Endpoint], *, auth: bool, open_routes: Sequence[str]) -> bytes:
    return json.dumps(build(endpoints, auth=auth, open_routes=open_routes), indent=1).encode()


async def openapi(request: web.Request) -> web.Response:
    return cached_json(request.app[OPENAPI])


ENDPOINTS = (
    Endpoint(
        "GET", "/openapi.json", openapi, "This API, as OpenAPI 3.1", None, media="application/json", tag="service"
    ),
)
