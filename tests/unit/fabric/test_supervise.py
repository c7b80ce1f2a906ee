"""Supervised loops: a failing step is logged once, counted, and run again with backoff."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest

from fabric.supervise import TaskHealth, backoff_s, supervise


def test_backoff_doubles_up_to_its_cap() -> None:
    assert [backoff_s(n, 1.0, 30.0) for n in range(8)] == [0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert backoff_s(10_000, 0.5, 5.0) == 5.0


async def test_a_failing_step_restarts_and_recovers(caplog: pytest.LogCaptureFixture) -> None:
    health = TaskHealth("flusher")
    rounds: list[int] = []

    async def step() -> None:
        rounds.append(len(rounds))
        if 1 <= len(rounds) <= 3:
            raise OSError(28, "No space left on device")

    caplog.set_level(logging.DEBUG, logger="fabric.supervise")
    task = asyncio.create_task(supervise(health, step, interval_s=0.001, first_backoff_s=0.01, max_backoff_s=0.02))
    for _ in range(500):
        if len(rounds) >= 6:
            break
        await asyncio.sleep(0.005)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert len(rounds) >= 6  # it ran on after three failures
    assert health.restarts == 3 and health.healthy and health.streak == 0
    assert health.last_error == "OSError: [Errno 28] No space left on device"
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is not None  # the first of a streak, with its traceback
    assert any("runs again after 3 failure(s)" in r.getMessage() for r in caplog.records)


def healthy(health: TaskHealth) -> bool:
    return health.healthy  # read afresh: the task changes it while the test waits


async def test_health_shows_a_failing_task_until_it_succeeds() -> None:
    health = TaskHealth("housekeeping")
    gate = asyncio.Event()

    async def step() -> None:
        if not gate.is_set():
            raise RuntimeError("bad row")

    task = asyncio.create_task(supervise(health, step, interval_s=0.001, first_backoff_s=0.005, max_backoff_s=0.005))
    for _ in range(200):
        if health.restarts >= 2:
            break
        await asyncio.sleep(0.005)
    assert not healthy(health) and health.restarts >= 2
    gate.set()
    for _ in range(200):
        if healthy(health):
            break
        await asyncio.sleep(0.005)
    assert healthy(health)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert task.cancelled()  # cancellation ends it, never counted as a failure


async def test_wake_starts_the_next_round_at_once() -> None:
    health = TaskHealth("writer")
    wake = asyncio.Event()
    rounds = 0

    async def step() -> None:
        nonlocal rounds
        rounds += 1

    task = asyncio.create_task(supervise(health, step, interval_s=3600, wake=wake))
    await asyncio.sleep(0.01)
    assert rounds == 0
    wake.set()
    for _ in range(100):
        if rounds:
            break
        await asyncio.sleep(0.001)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert rounds == 1 and not wake.is_set()
