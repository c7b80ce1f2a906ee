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
    assert check.runs == [T0] and first is not None and again is not None
    assert again == first and again[0].observed_at == T0  # the evidence's own time, not the round's
    later = T0 + timedelta(seconds=60)
    fresh = await run_check(NO_CONN, ctx(later, kept), check)
    assert check.runs == [T0, later] and fresh is not None and fresh[0].observed_at == later


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


# --- fits beside the rounds (analyzer/fits.py runs them as tasks in the service) ------------------


class Held:
    """A :data:`analyzer.cadence.Beside` that holds each started fit until the test ends it (the
    service runs it as a task on a connection of its own)."""

    def __init__(self) -> None:
        self.started: list[tuple[Kept, datetime, Any]] = []

    def __call__(self, name: str, kept: Kept, now: datetime, fit: Any) -> None:
        assert name == "check_link_health"
        self.started.append((kept, now, fit))

    async def end(self, *, fail: bool = False) -> None:
        kept, now, fit = self.started.pop(0)
        try:
            found = await fit(NO_CONN)
        except RuntimeError:
            found = None
        kept.finish(now, None if fail else found, 1.0)


def beside_ctx(at: datetime, kept: dict[str, Kept], held: Held) -> CheckContext:
    return CheckContext(FABRIC, ThresholdsConfig(), at, 10.0, 30.0, kept=kept, beside=held)


async def test_beside_the_rounds_a_due_fit_starts_and_rounds_get_the_last_completed_findings() -> None:
    check, held = Counting(), Held()
    kept = cadences(AnalyzerConfig(link_health_interval_s=60.0))
    at = [T0 + timedelta(seconds=10 * i) for i in range(12)]
    # before the first fit ends the round has nothing (its rules are not evaluated), and no second
    # fit starts however long the first one takes
    assert await run_check(NO_CONN, beside_ctx(at[0], kept, held), check) is None
    assert check.runs == [] and len(held.started) == 1  # started, not run in the round
    for t in at[1:8]:
        assert await run_check(NO_CONN, beside_ctx(t, kept, held), check) is None
    assert len(held.started) == 1
    await held.end()  # the fit of T0 ends at T0 + 70 s
    (found,) = await run_check(NO_CONN, beside_ctx(at[8], kept, held), check) or []
    assert found.observed_at == T0  # its own time, not the round's
    # the last fit started 80 s ago: due again at once; the rounds keep the findings meanwhile
    assert len(held.started) == 1 and held.started[0][1] == at[8]
    assert await run_check(NO_CONN, beside_ctx(at[9], kept, held), check) == [found]
    await held.end()
    (newer,) = await run_check(NO_CONN, beside_ctx(at[10], kept, held), check) or []
    assert newer.observed_at == at[8] and held.started == []  # the next is due at at[8] + 60 s


async def test_a_failed_fit_beside_the_rounds_keeps_the_findings_and_is_retried_when_next_due() -> None:
    check, held = Counting(), Held()
    kept = cadences(AnalyzerConfig(link_health_interval_s=60.0))
    await run_check(NO_CONN, beside_ctx(T0, kept, held), check)
    await held.end()
    first = await run_check(NO_CONN, beside_ctx(T0 + timedelta(seconds=60), kept, held), check)
    assert first is not None and len(held.started) == 1
    check.fail = True
    await held.end(fail=True)
    for s in (70, 80, 110):  # not retried every round: the failed fit started at 60 s
        assert await run_check(NO_CONN, beside_ctx(T0 + timedelta(seconds=s), kept, held), check) == first
        assert held.started == []
    await run_check(NO_CONN, beside_ctx(T0 + timedelta(seconds=120), kept, held), check)
    assert [now for _, now, _ in held.started] == [T0 + timedelta(seconds=120)]


@given(
    interval=st.floats(0, 600),
    rounds=st.lists(st.tuples(st.floats(0.0, 200.0), st.sampled_from(["run", "end", "fail"])), max_size=40),
)
async def test_beside_the_rounds_one_fit_at_a_time_each_when_due_rounds_see_the_last_completed(
    interval: float, rounds: list[tuple[float, str]]
) -> None:
    check, held = Counting(), Held()
    kept = {"check_link_health": Kept(interval)}
    t, tried, completed = 0.0, None, None
    for step, what in rounds:
        if what != "run" and held.started:
            ends_at = held.started[0][1]
            await held.end(fail=what == "fail")
            completed = ends_at if what == "end" else completed
            continue
        t += step
        now = T0 + timedelta(seconds=t)
        due = not held.started and (tried is None or interval <= 0 or not 0 <= (now - tried).total_seconds() < interval)
        got = await run_check(NO_CONN, beside_ctx(now, kept, held), check)
        assert len(held.started) <= 1
        if due:
            tried = now
            assert held.started[-1][1] == now
        assert (None if got is None else got[0].observed_at) == completed


async def test_what_a_check_needs_before_a_fit_runs_first_on_the_fits_connection_inline_or_beside() -> None:
    order: list[tuple[str, Any]] = []

    async def prepare(conn: Any, now: datetime) -> None:
        order.append(("prepare", conn))

    class Recording(Counting):
        async def __call__(self, conn: Any, ctx: CheckContext) -> list[Finding]:
            order.append(("fit", conn))
            return await super().__call__(conn, ctx)

    check, held = Recording(), Held()
    kept = {"check_link_health": Kept(60.0, prepare=prepare)}
    await run_check("round's", ctx(T0, kept), check)  # inline: on the round's connection
    assert order == [("prepare", "round's"), ("fit", "round's")]
    order.clear()
    await run_check("round's", beside_ctx(T0 + timedelta(seconds=60), kept, held), check)
    assert order == []  # nothing in the round
    await held.end()  # beside: on the connection the fit is given
    assert order == [("prepare", NO_CONN), ("fit", NO_CONN)]
