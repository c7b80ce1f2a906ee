"""``fabricmon drill`` end to end: a CI-sized campaign (20 faults, 10 benign events, seed 1) on
the 512-GPU AIPod with every NOS's port names, through the real simulator, collectors,
analyzer, TimescaleDB and a signed-webhook receiver.

The first test checks the drill itself: every event injected and timed, every incident sent
counted once, the report consistent. The second asserts the issue's goals, the same figures
``make bench-drill`` reports at 1,024 GPUs; it is an expected failure until they hold
(docs/benchmarks.md has the figures), strict so that it says so the day they do.
"""

from __future__ import annotations

import pytest

from drill.goals import DEFAULT_GOALS
from drill.report import report_dict
from drill.runner import DrillOptions, DrillResult, run_drill

# The drill takes 10-12 minutes on 2 cores; the suite's 300 s would fire inside it (a signal
# raised in whichever task runs then: once the SNMP collector's, leaving a false collection incident).
pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(1800)]

CI = DrillOptions(gpus=512, faults=20, benign=10, concurrency=4, seed=1)


@pytest.fixture(scope="module")
async def drilled(module_db: str) -> DrillResult:
    return await run_drill(CI, module_db, lambda line: None)


async def test_the_drill_injects_times_and_scores_every_event(drilled: DrillResult) -> None:
    s = drilled.score
    assert (s.faults, s.benign) == (20, 10) and len(drilled.events) == 30
    assert all(e.end_s >= e.start_s for e in drilled.events)
    assert s.matched + len(s.false_incidents) + s.maintenance == s.incidents > 0  # announced work apart
    assert s.detected + len(s.misses) == s.must_detect
    report = report_dict(drilled)
    assert report["seed"] == 1 and report["faults"] == 20 and report["benign"] == 10
    assert {g["name"] for g in report["goals"]} == set(DEFAULT_GOALS)
    assert {"precision", "recall", "localization", "false_drains", "detection_intervals", "missed"} <= set(report)
    assert sorted(e["id"] for e in report["events"]) == sorted([f"f{i}" for i in range(1, 21)] +
                                                               [f"b{i}" for i in range(1, 11)])  # fmt: skip


@pytest.mark.xfail(strict=True, reason="the drill's goals do not all hold yet: docs/benchmarks.md, 'Trust, measured'")
async def test_the_goals_hold(drilled: DrillResult) -> None:
    assert [g for g in drilled.goals if not g.ok] == []
