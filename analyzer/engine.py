"""One evaluation of the whole fabric: every check, grouped into the four health checks of the API.

``CHECKS`` is the explicit table of what runs (no discovery). An :class:`Evaluation` holds the
findings per health check, each check's own status, and what the checks computed on the way
(oversubscription ratios, rail capacities and loads) for the series and the API.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from analyzer.cabling import check_cabling
from analyzer.cadence import Beside, Kept
from analyzer.config import AnalyzerConfig
from analyzer.context import Check, CheckContext, RoundResults
from analyzer.coverage import Coverage
from analyzer.findings import SEVERITY_ORDER, Finding
from analyzer.link_health import check_link_health
from analyzer.oversubscription import check_oversubscription
from analyzer.pfc import check_pfc_storms
from analyzer.rails import check_ecmp, check_rail_capacity, check_rail_load
from analyzer.rules import RULES_BY_CHECK
from analyzer.snapshot import check_unreported_ports
from analyzer.stability import check_errors, check_flaps, check_freshness, check_outages
from fabric.model import Fabric
from store.db import UNAVAILABLE_ERRORS, Connection

log = logging.getLogger(__name__)

Status = Literal["healthy", "degraded", "critical"]

WORK_MEM = "128MB"

#: The health checks of ``GET /v1/health`` and the checks behind each.
CHECKS: dict[str, tuple[Check, ...]] = {
    "rail_symmetry": (check_cabling, check_rail_capacity, check_rail_load, check_ecmp),
    "oversubscription": (check_oversubscription,),
    "stability": (check_flaps, check_outages, check_pfc_storms, check_errors, check_link_health),
    "collection": (check_freshness, check_unreported_ports),
}


#: The rules each check can produce (from :data:`analyzer.rules.RULES`): a rule whose check broke
#: this round is not "absent".
RULES_OF: dict[Check, frozenset[str]] = {
    check: RULES_BY_CHECK.get(check.__name__, frozenset()) for checks in CHECKS.values() for check in checks
}


def status_of(findings: list[Finding]) -> Status:
    """critical if any finding is critical, degraded if any is a warning, else healthy."""
    worst = max((SEVERITY_ORDER[f.severity] for f in findings), default=0)
    return "critical" if worst >= 2 else "degraded" if worst >= 1 else "healthy"


@dataclass(slots=True)
class Evaluation:
    """The result of one evaluation."""

    at: datetime
    findings: dict[str, list[Finding]]
    duration_s: float
    #: What the checks computed on the way (ratios, rail capacities and loads, errors, timings).
    results: RoundResults = field(default_factory=RoundResults)
    #: Rules whose checks ran to the end this round (alerts of other rules are left as they are).
    evaluated_rules: frozenset[str] = frozenset()

    @property
    def all_findings(self) -> list[Finding]:
        return [f for fs in self.findings.values() for f in fs]


def context_for(
    fabric: Fabric,
    config: AnalyzerConfig,
    now: datetime,
    collect_interval_s: float,
    maintenance: Coverage | None = None,
    kept: dict[str, Kept] | None = None,
    beside: Beside | None = None,
) -> CheckContext:
    """The evaluation context: the window spans a few sampling intervals (at least two samples);
    ``maintenance``: the windows whose covered evidence the checks leave out; ``kept``: the
    service's checks with a cadence of their own (analyzer/cadence.py), ``beside`` what runs their
    fits beside the rounds (None: inline)."""
    window = max(config.window_intervals * collect_interval_s, 2.5 * collect_interval_s)
    return CheckContext(
        fabric,
        config.thresholds,
        now,
        collect_interval_s=collect_interval_s,
        window_s=window,
        maintenance=maintenance,
        kept=kept,
        beside=beside,
    )


def lookback_s(config: AnalyzerConfig, collect_interval_s: float) -> float:
    """How far back any check reads evidence (the flap window, or the rate window when longer):
    maintenance windows that ended within it still matter."""
    return max(config.thresholds.flap_window_s, config.window_intervals * collect_interval_s, 2.5 * collect_interval_s)


async def run_check(conn: Connection, ctx: CheckContext, check: Check) -> list[Finding] | None:
    """``check``'s findings: what it found last while that is younger than its own cadence
    (``ctx.kept``, analyzer/cadence.py), else a fresh run (kept for the next rounds).

    With ``ctx.beside`` such a check never runs in the round: a due fit is started beside it, and
    the round gets the last completed fit's findings, None before the first one ends."""
    name = check.__name__
    kept = ctx.kept.get(name) if ctx.kept is not None else None
    if kept is None:
        return await check(conn, ctx)
    prepare = kept.prepare

    async def fit(own: Connection) -> list[Finding]:
        if prepare is not None:
            await prepare(own, ctx.now)
        return await check(own, ctx)

    if ctx.beside is not None:
        if kept.due(ctx.now):
            kept.begin(ctx.now)
            ctx.beside(name, kept, ctx.now, fit)
        return kept.ready()
    found = kept.reuse(ctx.now)
    if found is None:
        found = await fit(conn)
        kept.keep(ctx.now, found)
    return found


async def session(conn: Connection) -> None:
    """Set up a connection for the checks (an evaluation's, or a fit's beside the rounds)."""
    # The port snapshot groups ~82K ports at 16K GPUs: enough memory lets it hash instead of
    # sorting on disk (measured 0.75 s → see docs/benchmarks.md). Pool connections RESET ALL on release.
    await conn.execute(f"SET work_mem = '{WORK_MEM}'")
    # Parallel workers cost more than they save on these ~100 ms queries, and take cores the
    # collectors need: one backend per evaluation.
    await conn.execute("SET max_parallel_workers_per_gather = 0")


async def evaluate(conn: Connection, ctx: CheckContext) -> Evaluation:
    """Run every check. A check that breaks is logged and listed in ``results.errors``; the others
    still run (one bug must not blind the rest). Losing the database ends the evaluation."""
    started = time.perf_counter()
    await session(conn)
    results: dict[str, list[Finding]] = {}
    errors = ctx.results.errors
    evaluated: set[str] = set()
    timings = ctx.results.check_seconds
    for name, checks in CHECKS.items():
        found: list[Finding] = []
        for check in checks:
            t0 = time.perf_counter()
            try:
                got = await run_check(conn, ctx, check)
                if got is not None:  # None: its first fit beside the rounds has not ended yet
                    found.extend(got)
                    evaluated |= RULES_OF.get(check, frozenset())
            except UNAVAILABLE_ERRORS:
                raise
            except Exception as exc:
                log.exception("check %s failed", check.__name__)
                errors.append(f"{check.__name__}: {exc}")
            finally:
                timings[check.__name__] = round(time.perf_counter() - t0, 4)
        results[name] = found
    return Evaluation(ctx.now, results, time.perf_counter() - started, ctx.results, frozenset(evaluated))
