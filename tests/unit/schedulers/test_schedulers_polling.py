"""The Slurm readers' one poll loop (schedulers/polling.py): an outage is said once and counted,
the recovery once, a bug with its traceback, and none of them ends the loop."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime

import pytest

from schedulers.polling import PollWords, poll_forever

WORDS = PollWords(again="back: %d", changed="%d held, %d gone", failed="away: %s", bug="bug")


class Away(OSError):
    pass


@dataclass
class Stats:
    failures: int = 0
    last_error: str | None = None


async def test_outages_are_said_once_recoveries_once_and_bugs_never_end_the_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    script: list[tuple[int, int] | BaseException] = [
        (3, 0), Away("slurmctld"), Away("slurmctld"), (3, 1), KeyError("bug"), (2, 0),
    ]  # fmt: skip
    done = asyncio.Event()
    seen: list[datetime] = []

    async def poll_once(now: datetime) -> tuple[int, int]:
        seen.append(now)
        step = script[len(seen) - 1]
        if len(seen) == len(script):
            done.set()
        if isinstance(step, BaseException):
            raise step
        return step

    stats = Stats()
    logger = logging.getLogger("tests.polling")
    with caplog.at_level(logging.DEBUG, logger="tests.polling"):
        task = asyncio.create_task(poll_forever(poll_once, 0, stats, WORDS, (Away,), logger))
        await done.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    said = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "tests.polling"]
    assert said == [
        (logging.WARNING, "away: slurmctld"),
        (logging.DEBUG, "away: slurmctld"),  # the same outage: said once
        (logging.INFO, "back: 3"),
        (logging.INFO, "3 held, 1 gone"),
        (logging.ERROR, "bug"),
    ]
    assert (stats.failures, stats.last_error) == (3, "slurmctld")
    assert all(t.tzinfo is not None for t in seen)
