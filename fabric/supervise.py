"""Background work that never dies silently: a loop restarted with backoff when it fails.

The writers' flush timers (which replay the spool too) and the collector's housekeeping are
long-lived asyncio tasks. A task that raises ends, and nobody awaits it until shutdown: its
table would stop flushing on the timer, and nothing would say so. :func:`supervise` runs the
loop's body again after an unexpected exception, with exponential backoff; the first failure of
a streak is logged with its traceback, repeats of the same error only counted, the recovery
logged once. :class:`TaskHealth` is what /metrics reads (``fabricmon_task_healthy``,
``fabricmon_task_restarts_total``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from fabric.waits import wait_event

log = logging.getLogger(__name__)

#: First and longest wait before a failed task runs again.
RESTART_BACKOFF_S = 1.0
RESTART_BACKOFF_MAX_S = 30.0


@dataclass(slots=True)
class TaskHealth:
    """One supervised task, as /metrics shows it."""

    name: str
    #: False from a failure until the body runs again without one for a whole round.
    healthy: bool = True
    restarts: int = 0
    last_error: str | None = None
    last_failure: float | None = None
    #: Failures since the last success (the backoff grows with it).
    streak: int = 0

    def failed(self, exc: BaseException) -> None:
        self.healthy = False
        self.streak += 1
        self.last_error = f"{type(exc).__name__}: {exc}"
        self.last_failure = time.time()

    def recovered(self) -> None:
        self.healthy = True
        self.streak = 0


def backoff_s(streak: int, first_s: float = RESTART_BACKOFF_S, max_s: float = RESTART_BACKOFF_MAX_S) -> float:
    """The wait after the ``streak``-th failure in a row (1, 2, 4, ... up to ``max_s``)."""
    if streak <= 0:
        return 0.0
    return float(min(max_s, first_s * 2 ** min(streak - 1, 30)))


async def supervise(
    health: TaskHealth,
    step: Callable[[], Awaitable[None]],
    *,
    interval_s: float,
    first_backoff_s: float = RESTART_BACKOFF_S,
    max_backoff_s: float = RESTART_BACKOFF_MAX_S,
    wake: asyncio.Event | None = None,
) -> None:
    """Run ``step`` every ``interval_s`` forever; a step that raises is run again after a backoff.

    ``wake``, when set, starts the next round early (and is cleared). Cancellation ends it (the
    owner's ``close``). ``step`` keeps its own state between rounds, so a restart loses nothing
    but time."""
    while True:
        if wake is None:
            await asyncio.sleep(interval_s)
        else:
            await wait_event(wake, interval_s)  # (not wait_for: on 3.11 it can swallow our cancel)
            wake.clear()
        try:
            await step()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            same = health.last_error == f"{type(exc).__name__}: {exc}" and health.streak > 0
            health.failed(exc)
            health.restarts += 1
            wait = backoff_s(health.streak, first_backoff_s, max_backoff_s)
            if not same:
                log.error("%s failed (%s); restarting in %.0f s", health.name, health.last_error, wait, exc_info=exc)
            else:
                log.debug("%s failed again (%d in a row): %s", health.name, health.streak, health.last_error)
            await asyncio.sleep(wait)
            continue
        if not health.healthy:
            log.warning("%s runs again after %d failure(s)", health.name, health.streak)
        health.recovered()
