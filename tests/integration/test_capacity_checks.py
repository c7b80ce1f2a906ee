"""Oversubscription, rail symmetry and cabling checks on data the pipeline wrote from a simulated fabric."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from analyzer.cabling import check_cabling
from analyzer.config import ThresholdsConfig
from analyzer.context import CheckContext, RoundResults
from analyzer.engine import CHECKS as HEALTH_CHECKS
from analyzer.engine import RULES_OF
from analyzer.findings import Finding
from analyzer.oversubscription import check_oversubscription
from analyzer.rails import check_ecmp, check_rail_capacity, check_rail_load
from analyzer.round_data import Ratio
from analyzer.snapshot import check_unreported_ports
from collector.pipeline import Pipeline
from fabric.model import FabricParams
from fabric.topology import build_aipod
from simulator.fabric_state import FabricState
from simulator.feed import feed, reading
from store.db import Pool, create_pool
from store.inventory import ensure_fabric
from store.migrate import migrate

S = 1_000_000_000
FABRIC = build_aipod(FabricParams(gpus=512))
CHECKS = (
    check_oversubscription,
    check_rail_capacity,
    check_rail_load,
    check_ecmp,
    check_cabling,
    check_unreported_ports,
)


@dataclass
class Lab:
    pool: Pool
    state: FabricState
    clock: list[int]
    results: RoundResults = field(default_factory=RoundResults)

    async def run(
        self, steps: int = 3, *, late_s: float = 0.0, unreported: Sequence[tuple[str, str | None]] = ()
    ) -> list[Finding]:
        """Feed ``steps`` rounds, then run the checks; ``unreported`` (switch, port or None for
        all its ports) are removed from the store first, as if they had never reported."""
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
            for switch, port in unreported:
                await conn.execute(
                    "DELETE FROM port_counters WHERE switch = $1 AND ($2::text IS NULL OR port = $2)", switch, port
                )
            for check in CHECKS:
                found += await check(conn, ctx)
        self.results = ctx.results
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


async def test_a_lost_uplink_shows_in_its_rail_and_fabric_roll_ups(lab: Lab) -> None:
    lab.apply({"kind": "link_down", "switch": "lf-g1-r3"})
    await lab.run()
    ratios: list[Ratio] = lab.results.ratios
    up = {r.name: r for r in ratios if r.scope != "switch"}
    # One group: rail 3 is lf-g1-r3 (64 down, 63 up) over sp-r3-1, which lost a downlink instead.
    assert up["rail-3"].ratio == pytest.approx(64 / 63) and up["rail-3/leaf"].ratio == pytest.approx(64 / 63)
    assert up["rail-3/spine"].ratio == pytest.approx(63 / 64)
    assert up["fabric"].ratio == pytest.approx(8 * 64 / (8 * 64 - 1)) and up["group-1"].ratio > 1
    assert up["rail-4"].ratio == 1.0


async def test_a_cabled_port_that_stops_reporting_is_one_finding_for_its_switch(lab: Lab) -> None:
    # lf-g1-r3 lost an uplink, and two of its ports (that uplink and a server port) went silent:
    # its drift can no longer be judged, and that is said, once for the switch.
    lab.apply({"kind": "link_down", "switch": "lf-g1-r3"})
    rules = by_rule(await lab.run(unreported=[("lf-g1-r3", "swp65"), ("lf-g1-r3", "swp2")]))
    assert "oversubscription_drift" not in rules  # never guessed ...
    (f,) = rules["ports_unreported"]  # ... but never silent either
    assert f.key == "lf-g1-r3" and f.severity == "warning"
    assert f.details["unreported_ports"] == ["swp2", "swp65"]
    assert f.details["cabled_ports"] == 128 and f.details["reported_ports"] == 126
    assert f.scope.ports == ("lf-g1-r3:swp2", "lf-g1-r3:swp65")
    assert f.scope.rails == (3,) and f.scope.gpus == 64  # the uplink carries the rail-3 GPUs of all its servers
    assert "2 of 128 cabled ports" in f.summary and "swp65" in f.summary


async def test_a_switch_silent_altogether_is_not_ports_unreported(lab: Lab) -> None:
    rules = by_rule(await lab.run(unreported=[("sp-r2-1", None), ("ssp-1", None)]))
    assert "ports_unreported" not in rules  # stale_switch speaks for them (the freshness check)


def test_ports_unreported_is_a_collection_rule() -> None:
    assert check_unreported_ports in HEALTH_CHECKS["collection"]
    assert RULES_OF[check_unreported_ports] == frozenset({"ports_unreported"})


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


async def test_a_spine_uplink_at_half_speed_is_the_spine_s_drift(lab: Lab) -> None:
    uplink = next(p for p in FABRIC.ports("sp-r2-1") if p.peer is not None and p.direction == "up")
    lab.apply({"kind": "speed_degrade", "switch": "sp-r2-1", "port": uplink.name, "speed_gbps": 200})
    rules = by_rule(await lab.run())
    assert [(f.key, f.details["uplinks_lost"]) for f in rules["oversubscription_drift"]] == [("sp-r2-1", [uplink.name])]


async def _rail_load_rounds(
    lab: Lab, phases_s: dict[str, float], seconds: int, fault_at: int | None = None
) -> tuple[list[set[int]], list[set[int]]]:
    """Every switch sampled each second at its own phase (``phases_s``, default 0) and the
    straggler check run each second at 1 s sampling: the rails it names round by round, with the
    default window (12 s) and with the last sample alone (``rail_load_window_s: 0``, the check
    until 2026-12-07).
    ``fault_at``: the second sp-r3-1 reboots (rail 3's leaf loses every uplink)."""
    pipe = Pipeline(lab.pool, FABRIC)
    pipe.start()
    base = lab.clock[0]
    order = sorted(lab.state.switch_names(), key=lambda name: phases_s.get(name, 0.0))
    windowed: list[set[int]] = []
    last_sample: list[set[int]] = []
    for k in range(1, seconds + 1):
        if k == fault_at:
            lab.state.tick(base + k * S)
            lab.apply({"kind": "reboot", "switch": "sp-r3-1", "boot_s": 600})
        for name in order:
            at = base + k * S + int(phases_s.get(name, 0.0) * S)
            lab.state.tick(at)
            info = lab.state.switch(name)
            if info is not None and info.reachable:
                await pipe.put_ports([reading(name, p, at) for p in lab.state.ports(name, at)])
        await pipe.ports_writer.flush(force=True)
        now = datetime.fromtimestamp((base + (k + 1) * S) / 1e9, tz=UTC)  # past every phase of second k
        async with lab.pool.acquire() as conn:
            for thresholds, out in (
                (ThresholdsConfig(), windowed),
                (ThresholdsConfig(rail_load_window_s=0), last_sample),
            ):
                ctx = CheckContext(FABRIC, thresholds, now, collect_interval_s=1, window_s=3)
                out.append({f.details["rail"] for f in await check_rail_load(conn, ctx)})
    await pipe.close()
    return windowed, last_sample


async def test_a_rail_sampled_at_another_phase_of_the_training_step_is_no_straggler(lab: Lab) -> None:
    # A step communicates ~40 % of 2-4 s; rail 3's leaf samples half a second after the others, so
    # its last 1 s sample falls in another part of the step than theirs (issue 11's stray stragglers).
    assert 2 * S <= lab.state.params.period_ns <= 4 * S
    windowed, last_sample = await _rail_load_rounds(lab, {"lf-g1-r3": 0.5}, 45)
    assert any(3 in r for r in last_sample[5:]), last_sample  # the last sample alone cries wolf
    assert windowed[5:] == [set()] * 40, windowed


async def test_a_rail_that_lost_its_spine_is_a_straggler_within_the_window(lab: Lab) -> None:
    # its servers' cross-leaf traffic (75 %) stops: the rail carries a quarter of the others'
    windowed, _ = await _rail_load_rounds(lab, {"lf-g1-r3": 0.5}, 55, fault_at=35)
    assert all(3 not in r for r in windowed[:34]), windowed
    assert all(r == {3} for r in windowed[40:]), windowed  # from half the 12 s window past the loss on
