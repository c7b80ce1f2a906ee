"""``GET /``: the dashboard page (static files under ``api/dashboard/``, no build step).

The page is public (it holds no data); it reads the API like any client, with the bearer token
a person types in when the API asks for one.
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from api.routes.base import Endpoint

STATIC = Path(__file__).resolve().parent.parent / "dashboard"
NO_CACHE = {"Cache-Control": "no-cache"}


async def index(_: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html", headers=NO_CACHE)


ENDPOINTS = (Endpoint("GET", "/", index, "The dashboard page", None, media="text/html", tag="service"),)
