"""The one poll loop of the Slurm readers (job discovery, MAINT reservations): ask every
``poll_s``, keep what was last known when Slurm or the database cannot be asked, and say so once
per outage (repeats at debug level), the recovery once, and a bug with its traceback."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

log = logging.getLogger(__name__)


class PollStats(Protocol):
    """What every poller counts (for ``/metrics``)."""

    failures: int
    last_error: str | None


@dataclass(frozen=True, slots=True)
class PollWords:
    """What a poller logs: ``again`` (%d: what it holds now), ``changed`` (%d held, %d gone),
    ``failed`` (%s: the error; the last known state is kept) and ``bug``."""

    again: str
    changed: str
    failed: str
    bug: str


async def poll_forever(
    poll_once: Callable[[datetime], Awaitable[tuple[int, int]]],
    every_s: float,
    stats: PollStats,
    words: PollWords,
    errors: tuple[type[BaseException], ...],
    logger: logging.Logger = log,
) -> None:
    """Call ``poll_once(now)`` (returning (held, gone)) every ``every_s`` until cancelled; ``errors``
    are an outage (counted, the last known state kept), any other exception a bug (counted, logged
    with its traceback); neither ends the loop."""
    failing = False
    while True:
        try:
            held, gone = await poll_once(datetime.now().astimezone())
            if failing:
                logger.info(words.again, held)
            failing = False
            if gone:
                logger.info(words.changed, held, gone)
        except errors as exc:
            stats.failures += 1
            stats.last_error = str(exc)
            logger.log(logging.DEBUG if failing else logging.WARNING, words.failed, exc)
            failing = True
        except Exception:  # a bug: log it, keep polling
            stats.failures += 1
            logger.exception(words.bug)
        await asyncio.sleep(every_s)


__all__ = ["PollStats", "PollWords", "poll_forever"]
