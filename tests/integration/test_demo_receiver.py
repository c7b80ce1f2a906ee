"""The demo's webhook receiver on 127.0.0.1: it applies signed, fresh deliveries once and refuses
bad signatures and timestamps more than five minutes old or ahead (a replayed capture)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest

from analyzer.payloads import delivery_headers
from demo.receiver import Receiver

SECRET = "demo-secret"
BODY = json.dumps({"event": "alert.firing", "alert": {"fingerprint": "f1"}}).encode()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    rx = Receiver(SECRET)
    await rx.start()
    try:
        yield rx
    finally:
        await rx.stop()


async def post(rx: Receiver, delivery: str, *, skew_s: float = 0, secret: str = SECRET) -> int:
    headers = delivery_headers("alert.firing", delivery, BODY, secret, timestamp=int(time.time() + skew_s))
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
        session.post(rx.url, data=BODY, headers=headers) as resp,
    ):
        return resp.status


async def test_fresh_signed_delivery_is_applied_once(receiver: Receiver) -> None:
    assert await post(receiver, "d-1") == 204
    assert await post(receiver, "d-1") == 204  # a retry: acknowledged, not applied again
    assert [d.delivery_id for d in receiver.deliveries] == ["d-1"]


@pytest.mark.parametrize("skew_s", [-301, 301, -3600])
async def test_stale_or_future_timestamps_are_refused(receiver: Receiver, skew_s: float) -> None:
    assert await post(receiver, "d-old", skew_s=skew_s) == 401
    assert receiver.deliveries == []


async def test_within_five_minutes_is_accepted(receiver: Receiver) -> None:
    assert await post(receiver, "d-early", skew_s=-240) == 204
    assert await post(receiver, "d-late", skew_s=240) == 204


async def test_bad_signature_is_refused(receiver: Receiver) -> None:
    assert await post(receiver, "d-forged", secret="not-the-secret") == 401
    assert receiver.deliveries == []


async def test_a_tighter_window_can_be_configured() -> None:
    rx = Receiver(SECRET, max_age_s=30)
    await rx.start()
    try:
        assert await post(rx, "d-1", skew_s=-60) == 401
        assert await post(rx, "d-2", skew_s=-5) == 204
    finally:
        await rx.stop()
