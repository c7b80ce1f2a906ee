"""The demo's webhook receiver: what a training scheduler would run, verifying every signature.

A delivery is applied only when its ``X-Fabricmon-Signature`` matches and its
``X-Fabricmon-Timestamp`` is within ``max_age_s`` (five minutes) of this machine's clock, either
way: a request captured on the wire cannot be replayed later. Anything else is a 401, which the
sender retries with a fresh timestamp and signature.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from analyzer.payloads import MAX_SIGNATURE_AGE_S, verify_signature
from fabric.waits import wait_event


@dataclass(slots=True)
class Delivery:
    """One webhook as received."""

    at: float
    event: str
    delivery_id: str
    signed: bool
    body: dict[str, Any]


@dataclass(slots=True)
class Receiver:
    """An aiohttp app on 127.0.0.1 that records (and dedupes) deliveries."""

    secret: str
    on_delivery: Callable[[Delivery], None] | None = None
    #: Timestamps further than this from the clock (past or future) are refused.
    max_age_s: float = MAX_SIGNATURE_AGE_S
    deliveries: list[Delivery] = field(default_factory=list)
    url: str = ""
    _runner: web.AppRunner | None = None
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)
    _sock: socket.socket | None = None

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/hooks/fabricmon", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        sock = self._sock = socket.create_server(("127.0.0.1", 0))
        await web.SockSite(self._runner, sock).start()
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}/hooks/fabricmon"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._sock is not None:
            self._sock.close()

    async def _handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        signed = verify_signature(
            self.secret,
            request.headers.get("X-Fabricmon-Timestamp", ""),
            raw,
            request.headers.get("X-Fabricmon-Signature", ""),
            max_age_s=self.max_age_s,
        )
        if not signed:
            return web.Response(status=401, text="bad signature, or a timestamp more than max_age_s away")
        delivery_id = request.headers.get("X-Fabricmon-Delivery", "")
        if any(d.delivery_id == delivery_id for d in self.deliveries):
            return web.Response(status=204)  # a retry of what we already applied
        d = Delivery(
            time.monotonic(), request.headers.get("X-Fabricmon-Event", ""), delivery_id, signed, json.loads(raw)
        )
        self.deliveries.append(d)
        self._arrived.set()
        if self.on_delivery is not None:
            self.on_delivery(d)
        return web.Response(status=204)

    async def wait_for(self, event: str, fingerprint: str, timeout_s: float) -> Delivery | None:
        """The first ``event`` delivery for an alert, waiting up to ``timeout_s`` for it."""
        deadline = time.monotonic() + timeout_s
        while (found := self.first(event, fingerprint)) is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self._arrived.clear()
            await wait_event(self._arrived, left)
        return found

    def first(self, event: str, fingerprint: str) -> Delivery | None:
        """The first delivery of ``event`` for an alert fingerprint."""
        return next(
            (
                d
                for d in self.deliveries
                if d.event == event and d.body.get("alert", {}).get("fingerprint") == fingerprint
            ),
            None,
        )
