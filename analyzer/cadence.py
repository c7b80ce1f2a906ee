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

:func:`cadences` is the table of the checks that have one (no discovery), keyed by check name;
the analyzer service keeps it across rounds; a one-shot evaluation (``fabricmon check``, tests)
has none, so every check runs every time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from analyzer.config import AnalyzerConfig
from analyzer.findings import Finding


@dataclass(slots=True)
class Kept:
    """One check's last findings and when they were computed; ``interval_s`` 0: never kept."""

    interval_s: float
    at: datetime | None = None
    findings: list[Finding] = field(default_factory=list)

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


def cadences(config: AnalyzerConfig) -> dict[str, Kept]:
    """The checks with a cadence of their own, by check name, each with nothing kept yet."""
    return {"check_link_health": Kept(config.link_health_interval_s)}
