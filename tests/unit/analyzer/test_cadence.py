"""A check at its own cadence (analyzer/cadence.py, analyzer.engine.run_check; issue 26): within
its interval a round reuses what it found last, with that round's ``observed_at``; after it, or
after the clock went back, the check runs again; a check that breaks keeps nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analyzer.cadence import Kept, cadences
from analyzer.config import AnalyzerConfig, ThresholdsConfig
from analyzer.context import CheckContext
from analyzer.engine import run_check
from analyzer.findings import Finding, Scope
from fabric.model import FabricParams
from fabric.topology import build_aipod

FABRIC = build_aipod(FabricParams(gpus=128, radix=16))
T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
NO_CONN: Any = None  # the counting check never reads


class Counting:
    """A check that counts its runs and finds one thing, observed at its round's time. It never
    touches the connection: what is under test is whether it runs at all."""

    __name__ = "check_link_health"

    def __init__(self, fail: bool = False) -> None:
        self.runs: list[datetime] = []
        self.fail = fail

    async def __call__(self, conn: Any, ctx: CheckContext) -> list[Finding]:
        self.runs.append(ctx.now)
        if self.fail:
            raise RuntimeError("broken")
        return [Finding("link_degrading", "sw:p", "warning", f"run {len(self.runs)}", Scope(), {}, ctx.now)]


def ctx(at: datetime, kept: dict[str, Kept] | None) -> CheckContext:
    return CheckContext(FABRIC, ThresholdsConfig(), at, 10.0, 30.0, kept=kept)


async def test_a_round_within_the_interval_reuses_the_findings_and_after_it_runs_again() -> None:
    check = Counting()
    kept = cadences(AnalyzerConfig(link_health_interval_s=60.0))
    first = await run_check(NO_CONN, ctx(T0, kept), check)
    again = await run_check(NO_CONN, ctx(T0 + timedelta(seconds=50), kept), check)
    assert check.runs == [T0]
    assert again == first and again[0].observed_at == T0  # the evidence's own time, not the round's
    later = T0 + timedelta(seconds=60)
    fresh = await run_check(NO_CONN, ctx(later, kept), check)
    assert check.runs == [T0, later] and fresh[0].observed_at == later


async def test_without_kept_state_or_with_interval_zero_every_round_runs_the_check() -> None:
    check = Counting()
    for kept in (None, cadences(AnalyzerConfig(link_health_interval_s=0.0))):
        for s in (0, 10, 20):
            await run_check(NO_CONN, ctx(T0 + timedelta(seconds=s), kept), check)
    assert len(check.runs) == 6


async def test_a_clock_that_went_back_runs_the_check() -> None:
    check = Counting()
    kept = cadences(AnalyzerConfig())
    await run_check(NO_CONN, ctx(T0, kept), check)
    await run_check(NO_CONN, ctx(T0 - timedelta(seconds=5), kept), check)
    assert len(check.runs) == 2


async def test_a_broken_check_keeps_nothing_and_runs_again_next_round() -> None:
    broken = Counting(fail=True)
    kept = cadences(AnalyzerConfig())
    with pytest.raises(RuntimeError):
        await run_check(NO_CONN, ctx(T0, kept), broken)
    broken.fail = False
    await run_check(NO_CONN, ctx(T0 + timedelta(seconds=10), kept), broken)
    assert len(broken.runs) == 2


def test_only_link_health_has_a_cadence_and_it_defaults_to_the_dom_interval() -> None:
    assert {name: k.interval_s for name, k in cadences(AnalyzerConfig()).items()} == {"check_link_health": 60.0}


@given(
    interval=st.floats(0, 600),
    steps=st.lists(st.floats(0.0, 200.0), min_size=1, max_size=40),
)
def test_the_check_runs_exactly_when_its_last_run_is_an_interval_old(interval: float, steps: list[float]) -> None:
    kept = Kept(interval)
    last: float | None = None
    t = 0.0
    for step in steps:
        t += step
        now = T0 + timedelta(seconds=t)
        due = last is None or interval <= 0 or (now - (T0 + timedelta(seconds=last))).total_seconds() >= interval
        assert (kept.reuse(now) is None) == due
        if due:
            kept.keep(now, [])
            last = t
