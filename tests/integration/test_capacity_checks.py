"""Oversubscription, rail symmetry and cabling checks on data the pipeline wrote from a simulated fabric."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from analyzer.cabling import check_cabling
from analyzer.config import ThresholdsConfig
from analyzer.context import CheckContext
from analyzer.findings import Finding
from analyzer.oversubscription import check_oversubscription
from analyzer.rails import check_ecmp, check_rail_capacity, check_rail_load
from collector.pipeline import Pipeline
from fabric.model import FabricParams
from fabric.topology import build_aipod
from simulator.fabric_state import FabricState
from simulator.feed import feed
from store.db import Pool, create_pool
from store.inventory import ensure_fabric
from store.migrate import migrate

S = 1_000_000_000
FABRIC = build_aipod(FabricParams(gpus=512))
CHECKS = (check_oversubscription, check_rail_capacity, check_rail_load, check_ecmp, check_cabling)


@dataclass
class Lab:
    pool: Pool
    state: FabricState
    clock: list[int]

    async def run(self, steps: int = 3, *, late_s: float = 0.0) -> list[Finding]:
        pipe = Pipeline(self.pool, FABRIC)
        pipe.start()
        for _ in range(steps):
            self.clock[0] += 10 * S
            self.state.tick(self.clock[0])
            await feed(self.state, pipe, self.clock[0])
        await pipe.close()
        now = datetime.fromtimestamp(self.clock[0] / 1e9 + late_s, tz=UTC)
        ctx = CheckContext(FABRIC, ThresholdsConfig(), now, collect_interval_s=10, window_s=25)
        found: list[Finding] = []
        async with self.pool.acquire() as conn:
            for check in CHECKS:
                found += await check(conn, ctx)
        return found

    def apply(self, fault: dict[str, Any]) -> Any:
        return self.state.apply(fault)


@pytest.fixture
async def lab(fresh_db: str) -> AsyncIterator[Lab]:
    pool = await create_pool(fresh_db)
    async with pool.acquire() as conn:
        await migrate(conn)
        await ensure_fabric(conn, FABRIC)
    clock = [1_795_000_000 * S]
    state = FabricState(FABRIC, seed=7, clock=lambda: clock[0])
    try:
        yield Lab(pool, state, clock)
    finally:
        await pool.close()


def by_rule(findings: list[Finding]) -> dict[str, list[Finding]]:
    out: dict[str, list[Finding]] = {}
    for f in findings:
        out.setdefault(f.rule, []).append(f)
    return out


async def test_a_clean_fabric_has_no_findings(lab: Lab) -> None:
    assert await lab.run() == []


async def test_uplink_down_is_drift_on_that_leaf_and_rail_asymmetry(lab: Lab) -> None:
    lab.apply({"kind": "link_down", "switch": "lf-g1-r3"})
    rules = by_rule(await lab.run())
    (drift,) = rules["oversubscription_drift"]
    assert drift.key == "lf-g1-r3" and drift.details["uplinks_lost"] == ["swp65"]
    assert drift.details["ratio"] == pytest.approx(64 / 63, abs=1e-3)
    assert drift.scope.rails == (3,) and drift.scope.gpus == 64  # the rail-3 GPU of each of 64 servers
    (rail,) = rules["rail_capacity_asymmetry"]
    assert rail.key == "rail-3" and rail.details["bottleneck"] == "lf-g1-r3"
    assert rail.details["efficiency_loss"] > 0
    # The spine at the other end lost a downlink, not an uplink: no drift there.
    assert all(f.key != "sp-r3-1" for f in rules["oversubscription_drift"])


async def test_late_samples_are_read_not_skipped(lab: Lab) -> None:
    """The evaluation runs 16 s after the last round (10 s interval): outside the 15 s snapshot
    window but inside the 30 s freshness reach, so the downed uplink is still counted."""
    lab.apply({"kind": "link_down", "switch": "lf-g1-r3"})
    rules = by_rule(await lab.run(late_s=16))
    assert [f.key for f in rules["oversubscription_drift"]] == ["lf-g1-r3"]
    assert [f.key for f in rules["rail_capacity_asymmetry"]] == ["rail-3"]


async def test_silence_beyond_the_freshness_reach_is_not_guessed(lab: Lab) -> None:
    lab.apply({"kind": "link_down", "switch": "lf-g1-r3"})
    rules = by_rule(await lab.run(late_s=31))
    assert "oversubscription_drift" not in rules and "rail_capacity_asymmetry" not in rules


async def test_speed_drop_to_200g_is_drift_and_asymmetry(lab: Lab) -> None:
    lab.apply({"kind": "speed_degrade", "switch": "lf-g1-r5", "speed_gbps": 200})
    rules = by_rule(await lab.run())
    assert [f.key for f in rules["oversubscription_drift"]] == ["lf-g1-r5"]
    assert [f.key for f in rules["rail_capacity_asymmetry"]] == ["rail-5"]
    assert rules["rail_capacity_asymmetry"][0].details["bottleneck_fraction"] == pytest.approx(  # rounded to 4 places
        (63 * 400 + 200) / (64 * 400), abs=1e-4
    )


async def test_miswire_is_named(lab: Lab) -> None:
    lab.apply({"kind": "miswire", "server": "srv-g1-001", "gpu": 1, "to_leaf": "lf-g1-r2"})
    rules = by_rule(await lab.run())
    keys = {f.key: f for f in rules["miswire"]}
    assert "srv-g1-001:gpu1" in keys
    f = keys["srv-g1-001:gpu1"]
    assert f.details["expected_leaf"] == "lf-g1-r1" and f.details["actual_leaf"] == "lf-g1-r2"
    assert f.scope.servers == ("srv-g1-001",)
    # The swapped cable (that server's GPU 2 now on leaf 1) is named too.
    assert keys["srv-g1-001:gpu2"].details["actual_leaf"] == "lf-g1-r1"
