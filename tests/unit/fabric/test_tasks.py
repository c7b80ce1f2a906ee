"""One task owner (fabric/tasks.py): a block's tasks are cancelled and awaited when it ends, and
what failed is logged and raised, never swallowed."""

from __future__ import annotations

import asyncio
import logging

import pytest

from fabric.tasks import owned_tasks, stop_task


class Boom(RuntimeError):
    pass


async def _forever(started: asyncio.Event, cleaned: list[str], name: str) -> None:
    started.set()
    try:
        await asyncio.Event().wait()
    finally:
        await asyncio.sleep(0)  # a cleanup that itself awaits: still awaited before the block ends
        cleaned.append(name)


async def _fail_when(go: asyncio.Event) -> None:
    await go.wait()
    raise Boom("the sender's bug")


async def test_leaving_the_block_cancels_and_awaits_every_task() -> None:
    cleaned: list[str] = []
    started = [asyncio.Event(), asyncio.Event()]
    async with owned_tasks("svc") as tasks:
        a = tasks.start(_forever(started[0], cleaned, "a"), "a")
        b = tasks.start(_forever(started[1], cleaned, "b"), "b")
        await started[0].wait()
        await started[1].wait()
    assert a.cancelled() and b.cancelled()  # nothing left running: no leak
    assert sorted(cleaned) == ["a", "b"]  # their cleanups ran before the block ended
    assert tasks.tasks == (a, b)


async def test_a_failing_task_is_logged_cancels_its_siblings_and_the_block_and_is_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cleaned: list[str] = []
    started, go = asyncio.Event(), asyncio.Event()
    body_cancelled = False
    with caplog.at_level(logging.ERROR, logger="fabric.tasks"), pytest.raises(Boom, match="the sender's bug"):
        async with owned_tasks("analyzer term") as tasks:
            sibling = tasks.start(_forever(started, cleaned, "rounds"), "rounds")
            tasks.start(_fail_when(go), "webhook-sender")
            await started.wait()
            go.set()
            try:
                await asyncio.Event().wait()  # the block waits for its end, as a service does
            except asyncio.CancelledError:
                body_cancelled = True
                raise
    assert body_cancelled and sibling.cancelled() and cleaned == ["rounds"]
    (record,) = [r for r in caplog.records if r.name == "fabric.tasks"]
    assert record.getMessage() == "analyzer term: task webhook-sender failed"
    assert record.exc_info is not None and isinstance(record.exc_info[1], Boom)  # with its traceback


async def test_two_failures_are_raised_together() -> None:
    go = asyncio.Event()

    async def fail(msg: str) -> None:
        await go.wait()
        raise Boom(msg)

    with pytest.raises(ExceptionGroup) as caught:
        async with owned_tasks("svc") as tasks:
            tasks.start(fail("one"), "one")
            tasks.start(fail("two"), "two")
            go.set()
            await asyncio.Event().wait()
    assert sorted(str(e) for e in caught.value.exceptions) == ["one", "two"]


async def test_the_blocks_own_error_is_raised_as_itself_after_the_tasks_stopped() -> None:
    cleaned: list[str] = []
    started = asyncio.Event()
    with pytest.raises(KeyError):
        async with owned_tasks("svc") as tasks:
            t = tasks.start(_forever(started, cleaned, "loop"), "loop")
            await started.wait()
            raise KeyError("the body's")
    assert t.cancelled() and cleaned == ["loop"]


async def test_the_callers_cancellation_reaches_the_tasks_and_propagates() -> None:
    cleaned: list[str] = []
    started, inside = asyncio.Event(), asyncio.Event()

    async def service() -> None:
        async with owned_tasks("svc") as tasks:
            tasks.start(_forever(started, cleaned, "loop"), "loop")
            inside.set()
            await asyncio.Event().wait()

    outer = asyncio.create_task(service())
    await inside.wait()
    await started.wait()
    outer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outer
    assert cleaned == ["loop"]


async def test_a_task_that_ends_on_its_own_is_kept_with_its_result() -> None:
    async def answer() -> int:
        return 42

    async with owned_tasks("svc") as tasks:
        t = tasks.start(answer(), "answer")
        assert await t == 42
    assert t.result() == 42


async def test_stop_task_logs_a_failure_instead_of_hiding_it(caplog: pytest.LogCaptureFixture) -> None:
    go = asyncio.Event()
    failing = asyncio.create_task(_fail_when(go))
    go.set()
    await asyncio.wait([failing])
    with caplog.at_level(logging.ERROR, logger="fabric.tasks"):
        await stop_task(failing, "alertmanager pusher")
    (record,) = [r for r in caplog.records if r.name == "fabric.tasks"]
    assert record.getMessage() == "alertmanager pusher failed" and record.exc_info is not None
    cleaned: list[str] = []
    started = asyncio.Event()
    running = asyncio.create_task(_forever(started, cleaned, "pusher"))
    await started.wait()
    await stop_task(running, "pusher")
    assert running.cancelled() and cleaned == ["pusher"]
    await stop_task(None, "nothing")  # nothing started: nothing to stop


async def test_stop_task_gives_a_task_told_to_stop_its_grace_first() -> None:
    stop = asyncio.Event()
    finished: list[str] = []

    async def service() -> None:
        await stop.wait()
        await asyncio.sleep(0)  # a drain that awaits
        finished.append("drained")

    task = asyncio.create_task(service())
    stop.set()
    await stop_task(task, "the collector", grace_s=30)
    assert finished == ["drained"] and not task.cancelled()  # it ended by itself, not cancelled
