"""A signed webhook receiver for end-to-end tests: a real aiohttp server on 127.0.0.1 that
verifies every signature and records what it was sent."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from analyzer.payloads import verify_signature

SECRET = "s3cret"


@dataclass
class Got:
    """What the receiver was sent."""

    items: list[dict[str, Any]]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.items)

    def since(self, n: int) -> list[dict[str, Any]]:
        return self.items[n:]

    @staticmethod
    def by_incident(items: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for g in items:
            out.setdefault(g["alert"]["fingerprint"], []).append(g)
        return out


@contextlib.asynccontextmanager
async def receiver() -> AsyncIterator[tuple[str, Got]]:
    got = Got([])

    async def hook(request: web.Request) -> web.Response:
        body = await request.read()
        ts, sig = request.headers["X-Fabricmon-Timestamp"], request.headers["X-Fabricmon-Signature"]
        if not verify_signature(SECRET, ts, body, sig):
            return web.Response(status=401)
        got.items.append({"event": request.headers["X-Fabricmon-Event"], **json.loads(body)})
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/hook", hook)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/hook", got
    finally:
        await runner.cleanup()
