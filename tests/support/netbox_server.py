"""A NetBox stand-in on loopback that answers with what a real NetBox answered.

It serves the responses recorded from NetBox 4.4.10 (``tests/fixtures/netbox/responses/``,
README.md there) as NetBox does: ``/api/dcim/{devices,interfaces,cables}/`` filtered by ``site``
(and ``cabled``), paginated by ``limit``/``offset`` with NetBox's ``{count, next, previous,
results}`` and absolute ``next`` links, a page capped at ``max_page_size`` (NetBox's
MAX_PAGE_SIZE), the token checked (``Token <key>``, or ``Bearer <v2 token>``). Refusals are
NetBox's own recorded answers: 403 for a bad or missing token, 400 for an unknown site, an HTML
404 for a path that is no API. A request for anything not recorded is a 500 naming it, so a
test never passes on an answer NetBox would not give.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "netbox"
RESPONSES = FIXTURES / "responses"
TOKEN = "e1b67f46b43658f8c59cc7202e041be693ebb6bf"  # the recording's token, in no real NetBox
V2_TOKEN = "nbt_4kT9x2Qb7Lm1.Zr8Yc3Vw6Np0Hs5Jd2Gf9Ka"
LISTS = ("dcim/devices/", "dcim/interfaces/", "dcim/cables/")
SITES = ("ams1", "fra2")


def file_name(path: str, filters: dict[str, str]) -> str:
    """The recorded file for a list and its filters (as ``record.py`` names it)."""
    return path.strip("/").replace("/", ".") + "".join(f".{k}-{v}" for k, v in sorted(filters.items())) + ".json"


def recorded(path: str, filters: dict[str, str]) -> dict[str, Any]:
    """A recorded answer, whole (one page)."""
    doc: dict[str, Any] = json.loads((RESPONSES / file_name(path, filters)).read_text(encoding="utf-8"))
    return doc


def errors() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = json.loads((RESPONSES / "errors.json").read_text(encoding="utf-8"))
    return out


@dataclass
class NetboxStandIn:
    """How the stand-in answers, and what it was asked."""

    max_page_size: int = 1000
    next_origin: str | None = None  # write next links on this origin (a proxy that forgets https)
    html_everywhere: bool = False  # a web page at every path (a login portal in front of NetBox)
    cables: list[dict[str, Any]] | None = None  # answer these cables instead of the recorded ones
    asked: Counter[str] = field(default_factory=Counter)
    url: str = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.asked[request.path] += 1
        if self.html_everywhere:
            return web.Response(text="<!DOCTYPE html><html><head><title>Sign in</title></head></html>",
                                content_type="text/html")  # fmt: skip
        path = request.path.removeprefix("/api/")
        if path not in LISTS:
            return _answer(errors()["not-the-api"])
        auth = request.headers.get("Authorization")
        if auth is None:
            return _answer(errors()["no-token"])
        if auth not in (f"Token {TOKEN}", f"Bearer {V2_TOKEN}"):
            return _answer(errors()["invalid-token"])
        query = dict(request.query)
        limit = min(int(query.pop("limit", "50")) or self.max_page_size, self.max_page_size)
        offset = int(query.pop("offset", "0"))
        site = query.get("site")
        if site is not None and site not in SITES:
            err = errors()["unknown-site"]
            return _answer({**err, "body": err["body"].replace("nowhere", site)})
        try:
            doc = recorded(path, query)
        except FileNotFoundError:
            return web.Response(status=500, text=f"not recorded: {path} {query}")
        results = doc["results"] if self.cables is None or path != "dcim/cables/" else self.cables
        origin = self.next_origin or f"{request.scheme}://{request.host}"

        def link(at: int) -> str:
            return f"{origin}/api/{path}?{urlencode({**query, 'limit': limit, 'offset': at})}"

        page = {
            "count": len(results),
            "next": link(offset + limit) if offset + limit < len(results) else None,
            "previous": link(max(offset - limit, 0)) if offset > 0 else None,
            "results": results[offset : offset + limit],
        }
        return web.json_response(page)


def _answer(recorded_error: dict[str, Any]) -> web.Response:
    kind, _, charset = recorded_error["content_type"].partition("; charset=")
    return web.Response(status=recorded_error["status"], text=recorded_error["body"], content_type=kind,
                        charset=charset or None)  # fmt: skip


@asynccontextmanager
async def netbox(stand_in: NetboxStandIn | None = None) -> AsyncIterator[NetboxStandIn]:
    """The stand-in serving on a free loopback port; its ``url`` is NetBox's address."""
    nb = stand_in or NetboxStandIn()
    app = web.Application()
    app.router.add_get("/{path:.*}", nb.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    nb.url = f"http://127.0.0.1:{port}"
    try:
        yield nb
    finally:
        await runner.cleanup()
