"""Checks that run at their own cadence: their findings kept between runs (issue 26).

Some evidence moves slowly. Link health fits hours of transceiver DOM sampled every 60 s
(``collector.dom_interval_s``): fitting it again every 10 s round costs seconds at a few thousand
ports (docs/benchmarks.md) and changes nothing. A :class:`Kept` holds one check's last findings
and when they were computed; :func:`analyzer.engine.run_check` returns them unchanged (each with
its own ``observed_at``) while they are younger than the check's interval, and runs the check
again after it. A check that breaks keeps nothing: the next round runs it again.

The cost is latency: a change shows at most one interval late (60 s by default), against the
hours of lead a degrading link gives (``alerts.checkpoint_lead_s``, 2 h). An incident's "fails
by" time stays honest: it counts from the finding's ``observed_at``, not from the round.

In the analyzer service a fit never holds a round up: with a :data:`Beside` in the context (the
service's :class:`analyzer.fits.Fits`), a due check (:meth:`Kept.due`) is started beside the
rounds on a connection of its own, one fit per check at a time, and the rounds return the last
completed findings until it ends (:meth:`Kept.ready`; None before the first: the check's rules are
then not evaluated, so their open alerts stay as they are). A fit that fails keeps the findings
it would have replaced; the next is tried an interval after the failed one started.

:func:`cadences` is the table of the checks that have one (no discovery), keyed by check name;
the analyzer service keeps it across rounds; a one-shot evaluation (``fabricmon check``, tests)
has none, so every check runs every time, inline.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime

from analyzer.config import AnalyzerConfig
from analyzer.findings import Finding
from store.db import UNAVAILABLE_ERRORS, Connection
from store.link_rollup import roll

log = logging.getLogger(__name__)

#: One fit of a check at a round's time, on the connection it is given.
Fit = Callable[[Connection], Awaitable[list[Finding]]]
#: What a check needs done before each of its fits, on the fit's connection (the link-health rollup).
Prepare = Callable[[Connection, datetime], Awaitable[None]]
#: Starts ``fit`` beside the rounds (check name, its state, the round's time, the fit); when it
#: ends, however it ends, it must call :meth:`Kept.finish`.
Beside = Callable[[str, "Kept", datetime, Fit], None]


@dataclass(slots=True)
class Kept:
    """One check's last findings and when they were computed; ``interval_s`` 0: never kept."""

    interval_s: float
    at: datetime | None = None
    findings: list[Finding] = field(default_factory=list)
    #: The round's time of the last fit started beside the rounds; None: none yet.
    tried: datetime | None = None
    #: A fit runs beside the rounds now.
    fitting: bool = False
    #: Seconds the last fit beside the rounds took (completed or not); None: none ended yet.
    fit_s: float | None = None
    #: Run before each fit (inline or beside the rounds), on its connection.
    prepare: Prepare | None = None

    def reuse(self, now: datetime) -> list[Finding] | None:
        """The kept findings while younger than the interval, else None (the check must run).
        A clock that went back (``now`` before the kept time) runs it too."""
        if self.at is None or self.interval_s <= 0:
            return None
        age = (now - self.at).total_seconds()
        return list(self.findings) if 0 <= age < self.interval_s else None

    def keep(self, now: datetime, findings: list[Finding]) -> None:
        """Remember what the check found at ``now``."""
        self.at, self.findings = now, list(findings)

    def due(self, now: datetime) -> bool:
        """Whether a fit beside the rounds starts now: none is running, and the last one started an
        interval ago or more (or never, or the clock went back before it)."""
        if self.fitting:
            return False
        if self.tried is None or self.interval_s <= 0:
            return True
        age = (now - self.tried).total_seconds()
        return not 0 <= age < self.interval_s

    def begin(self, now: datetime) -> None:
        """A fit at ``now`` starts beside the rounds."""
        self.fitting, self.tried = True, now

    def finish(self, now: datetime, findings: list[Finding] | None, seconds: float | None = None) -> None:
        """The fit started at ``now`` ended: with its ``findings``, or None (it failed or was
        cancelled: the findings it would have replaced stay)."""
        self.fitting, self.fit_s = False, seconds
        if findings is not None:
            self.keep(now, findings)

    def ready(self) -> list[Finding] | None:
        """The last completed fit's findings (each with its own ``observed_at``); None: none yet."""
        return None if self.at is None else list(self.findings)


def cadences(config: AnalyzerConfig) -> dict[str, Kept]:
    """The checks with a cadence of their own, by check name, each with nothing kept yet."""
    window_s = config.thresholds.link_window_s

    async def roll_link_rollup(conn: Connection, now: datetime) -> None:
        # A roll that breaks must not blind link health: the summary reads the rows instead.
        try:
            await roll(conn, now, window_s)
        except UNAVAILABLE_ERRORS:
            raise
        except Exception:
            log.exception("link health: rolling the rollup failed; this fit reads the rows")

    return {"check_link_health": Kept(config.link_health_interval_s, prepare=roll_link_rollup)}
