"""The analyzer service's fits beside its rounds (analyzer/cadence.py, issue 26).

Link health fits hours of DOM and FEC: seconds at a few thousand ports, more at 16K GPUs
(docs/benchmarks.md). Run in the round, one fit would hold every other check's findings up for
as long. :class:`Fits` is the :data:`analyzer.cadence.Beside` the service gives its rounds while
it leads: a due fit runs as a task of the leader's term (fabric/tasks.py), on a pool connection
of its own set up as the round's (analyzer.engine.session), and its findings replace the kept
ones when it ends. A fit never fails its term: an error is logged and the kept findings stay;
losing the term (or stopping) cancels it, and a cancelled fit keeps nothing either.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime

from analyzer.cadence import Fit, Kept
from analyzer.engine import session
from analyzer.findings import Finding
from fabric.tasks import OwnedTasks
from store.db import UNAVAILABLE_ERRORS, Pool

log = logging.getLogger(__name__)


class Fits:
    """Starts the due fits of the checks with a cadence as tasks of one :class:`OwnedTasks`."""

    def __init__(self, pool: Pool, tasks: OwnedTasks) -> None:
        self.pool = pool
        self.tasks = tasks

    def __call__(self, name: str, kept: Kept, now: datetime, fit: Fit) -> None:
        """Run ``fit`` (of check ``name``, at the round's time ``now``) beside the rounds."""
        self.tasks.start(self._run(name, kept, now, fit), f"fit-{name}")

    async def _run(self, name: str, kept: Kept, now: datetime, fit: Fit) -> None:
        started = time.perf_counter()
        found: list[Finding] | None = None
        try:
            async with self.pool.acquire() as conn:
                await session(conn)
                found = await fit(conn)
        except asyncio.CancelledError:
            log.info("%s: the fit of %s was cancelled", name, now.isoformat())
            raise
        except UNAVAILABLE_ERRORS as exc:
            log.warning("%s: fit skipped, database unavailable (the last findings stay): %s", name, exc)
        except Exception:  # a broken fit must not end the term: the last findings stay
            log.exception("%s: fit failed; the last findings stay, retried when next due", name)
        finally:
            took = time.perf_counter() - started
            kept.finish(now, found, took)
        if found is not None:
            log.info("%s: fitted in %.2f s, %d finding(s)", name, took, len(found))
