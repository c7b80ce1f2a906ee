"""Bearer-token authentication for the API (SPEC §4).

With ``api.tokens`` empty, everything is open. With tokens set, a request needs
``Authorization: Bearer <token>`` matching one of them, except:

* the paths in ``api.open_routes`` (default ``/healthz``, ``/readyz``, ``/metrics``; an entry
  ending in ``*`` is a prefix), and
* the public assets: the dashboard page and its files (``/``, ``/dashboard/*``) and
  ``/openapi.json``. They hold no fabric data; the dashboard asks for a token when the API
  answers 401.

The comparison is constant-time: each configured token's SHA-256 digest is compared with the
presented one's using :func:`hmac.compare_digest`, against every token, so neither the length
nor the position of a match shows in the timing. Tokens never appear in logs or responses.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

from aiohttp import web
from aiohttp.typedefs import Middleware

from api.config import ApiConfig
from api.problems import Handler, Unauthorized, problem_response

PUBLIC_PATHS = frozenset({"/", "/openapi.json", "/favicon.ico"})
PUBLIC_PREFIXES = ("/dashboard/",)
CHALLENGE = {"WWW-Authenticate": 'Bearer realm="fabricmon"'}


class TokenCheck:
    """The configured tokens, kept only as digests."""

    def __init__(self, tokens: Sequence[str]) -> None:
        self._digests = tuple(hashlib.sha256(t.encode()).digest() for t in tokens if t)

    @property
    def enabled(self) -> bool:
        return bool(self._digests)

    def accepts(self, header: str | None) -> bool:
        """Whether ``header`` (the Authorization value) carries one of the tokens."""
        if not header:
            return False
        scheme, _, presented = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not presented.strip():
            return False
        digest = hashlib.sha256(presented.strip().encode("utf-8", "surrogateescape")).digest()
        ok = False
        for known in self._digests:  # no early exit: the time does not depend on which token matched
            ok |= hmac.compare_digest(known, digest)
        return ok


def is_open(path: str, open_routes: Sequence[str]) -> bool:
    """Whether ``path`` needs no token."""
    if path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES):
        return True
    return any(path == route or (route.endswith("*") and path.startswith(route[:-1])) for route in open_routes)


def auth_middleware(config: ApiConfig) -> Middleware:
    """The middleware enforcing ``config.tokens`` (a no-op when there are none)."""
    check = TokenCheck([t.get_secret_value() for t in config.tokens])
    open_routes = tuple(config.open_routes)

    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        if check.enabled and not is_open(request.path, open_routes):
            header = request.headers.get("Authorization")
            if not check.accepts(header):
                detail = "a bearer token is required" if not header else "the bearer token is not valid"
                return problem_response(Unauthorized(detail, kind="unauthorized", headers=CHALLENGE))
        return await handler(request)

    return authenticate
