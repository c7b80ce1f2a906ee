"""Errors as ``application/problem+json`` (RFC 9457): ``type, title, status, detail``.

Handlers raise :class:`Problem` (or a subclass); :func:`problem_middleware` turns it, aiohttp's
own HTTP errors (unknown route, wrong method, body too large) and anything unexpected into a
problem body. Bad input is always a 4xx. An unexpected error is logged with an id and answered
with a 500 that carries that id and nothing else (no exception text, no SQL, no DSN); a database
that is away is a 503 with ``Retry-After``.

Exception tree::

    Problem (FabricmonError)
    ├── BadRequest          400
    ├── Unauthorized        401
    ├── NotFound            404
    ├── Conflict            409
    ├── Unprocessable       422  (with ``errors``: [{loc, msg}])
    └── Unavailable         503
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any
from urllib.parse import unquote_to_bytes

from aiohttp import web
from pydantic import ValidationError

from fabric.errors import FabricmonError
from store.db import UNAVAILABLE_ERRORS

log = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"
TYPE_BASE = "https://fabricmon.dev/problems/"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Problem(FabricmonError):
    """An error answered as a problem document."""

    status = 500
    title = "Internal Server Error"

    def __init__(
        self,
        detail: str,
        *,
        kind: str | None = None,
        headers: Mapping[str, str] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.kind = kind or self.title.lower().replace(" ", "-")
        self.headers = dict(headers or {})
        self.extra = dict(extra or {})

    def body(self) -> dict[str, Any]:
        """The problem document."""
        return {
            "type": TYPE_BASE + self.kind,
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
            **self.extra,
        }


class BadRequest(Problem):
    status = 400
    title = "Bad Request"


class Unauthorized(Problem):
    status = 401
    title = "Unauthorized"


class NotFound(Problem):
    status = 404
    title = "Not Found"


class Conflict(Problem):
    status = 409
    title = "Conflict"


class Unprocessable(Problem):
    status = 422
    title = "Unprocessable Content"


class Unavailable(Problem):
    status = 503
    title = "Service Unavailable"


def problem_response(problem: Problem) -> web.Response:
    """The HTTP response for ``problem``."""
    return web.Response(
        status=problem.status,
        body=json.dumps(problem.body(), ensure_ascii=False).encode(),
        content_type=PROBLEM_JSON,
        headers=problem.headers,
    )


def from_validation(exc: ValidationError, what: str) -> Unprocessable:
    """A pydantic error as a 422 naming each bad field (never echoing the input)."""
    errors = [
        {"loc": [str(p) for p in e["loc"]], "msg": e["msg"]}
        for e in exc.errors(include_url=False, include_input=False, include_context=False)
    ]
    first = errors[0] if errors else {"loc": [], "msg": "invalid"}
    where = ".".join(first["loc"]) or what
    return Unprocessable(f"invalid {what}: {where}: {first['msg']}", kind="validation", extra={"errors": errors})


def unknown(what: str, names: Sequence[str], *, limit: int = 20) -> Unprocessable:
    """A 422 listing unknown names (the first ``limit`` of them)."""
    shown = ", ".join(names[:limit]) + (f" (+{len(names) - limit} more)" if len(names) > limit else "")
    return Unprocessable(f"unknown {what}: {shown}", kind=f"unknown-{what}", extra={"unknown": list(names[:limit])})


def _check_utf8(request: web.Request) -> None:
    """Percent-encoded bytes in the path or query must decode as UTF-8 (yarl would substitute U+FFFD)."""
    for part in (request.rel_url.raw_path, request.rel_url.raw_query_string):
        if "%" not in part:
            continue
        try:
            unquote_to_bytes(part).decode("utf-8")
        except UnicodeDecodeError:
            raise BadRequest("the request URI is not valid UTF-8 once percent-decoded", kind="bad-encoding") from None


_HTTP_KIND = {404: "not-found", 405: "method-not-allowed", 413: "payload-too-large"}


@web.middleware
async def problem_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error leaves as a problem document; nothing internal leaks."""
    try:
        _check_utf8(request)
        return await handler(request)
    except Problem as exc:
        return problem_response(exc)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        detail = exc.text if exc.status != 404 else f"no route for {request.method} {request.rel_url.raw_path}"
        headers = {k: v for k, v in exc.headers.items() if k.lower() in ("allow", "www-authenticate", "retry-after")}
        problem = Problem(detail or exc.reason, kind=_HTTP_KIND.get(exc.status, f"http-{exc.status}"), headers=headers)
        problem.status, problem.title = exc.status, exc.reason
        return problem_response(problem)
    except UNAVAILABLE_ERRORS as exc:
        log.warning("%s %s: database unavailable: %s", request.method, request.rel_url.raw_path, type(exc).__name__)
        return problem_response(
            Unavailable("the database is not answering; retry shortly", kind="database", headers={"Retry-After": "5"})
        )
    except Exception:
        incident = uuid.uuid4().hex[:12]
        log.exception("%s %s failed (incident %s)", request.method, request.rel_url.raw_path, incident)
        return problem_response(
            Problem(
                f"unexpected error; the server log has incident {incident}",
                kind="internal",
                extra={"incident": incident},
            )
        )
