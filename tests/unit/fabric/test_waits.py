"""wait_event keeps a cancellation that arrives as the event is set (fabric/waits.py), and so do
the loops built on it: a writer's timer stopped by its owner as a last put wakes it."""

from __future__ import annotations

import asyncio

import pytest

from fabric.supervise import TaskHealth, supervise
from fabric.waits import wait_event


async def test_set_and_cancelled_in_the_same_iteration_is_cancelled() -> None:
    event = asyncio.Event()
    task = asyncio.create_task(wait_event(event, 60))
    await asyncio.sleep(0)  # parked in the wait
    event.set()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)


async def test_it_tells_set_from_timed_out() -> None:
    event = asyncio.Event()
    assert await wait_event(event, 0.01) is False
    event.set()
    assert await wait_event(event, 0.01) is True


async def test_a_supervised_loop_woken_as_it_is_cancelled_ends() -> None:
    wake, steps = asyncio.Event(), []

    async def step() -> None:
        steps.append(1)

    task = asyncio.create_task(supervise(TaskHealth("t"), step, interval_s=60, wake=wake))
    for _ in range(3):  # each round: parked, then woken and cancelled at once (a close racing a put)
        await asyncio.sleep(0)
    wake.set()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)  # with asyncio.wait_for inside, this waited for ever on 3.11
    assert task.cancelled()
