"""Waiting for an event with a timeout, without losing a cancellation.

On Python 3.11, ``asyncio.wait_for(event.wait(), t)`` returns normally when the task running it
is cancelled in the same loop iteration as the event is set: the cancellation is swallowed
(CPython gh-86296, rewritten in 3.12). A loop that waits so and is stopped by ``cancel()``
(a writer's flush timer woken by a last put as its owner closes) then waits again, and the
owner's ``await`` of it never ends: measured as a `fabricmon collect` that did not drain after
SIGTERM (docs/decisions.md). ``asyncio.timeout`` tells its own cancellation from the caller's.
"""

from __future__ import annotations

import asyncio


async def wait_event(event: asyncio.Event, timeout_s: float) -> bool:
    """Wait up to ``timeout_s`` for ``event``; whether it is set. A cancellation always propagates."""
    try:
        async with asyncio.timeout(timeout_s):
            await event.wait()
    except TimeoutError:
        return event.is_set()
    return True
