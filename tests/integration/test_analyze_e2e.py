"""Simulator → collectors → TimescaleDB → analyzer, all real: each fault kind is found with the
right blast radius and resolves after it clears; alerts reach a signed webhook; jobs see only
the faults under them."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from analyzer.findings import Finding
from analyzer.service import AnalyzerService, assess
from collector.runner import CollectorService, plan
from config.model import Config
from fabric.model import Fabric, FabricParams
from fabric.topology import build_aipod
from simulator.nos import Nos
from store.db import Pool, create_pool
from store.inventory import ensure_fabric
from store.migrate import migrate
from tests.support.receiver import receiver
from tests.support.sim_process import SimControl, started_sim
from tests.support.waiting import until

# Radix 64: two groups of 32 servers (so a fault can miss a job) on 40 switches, sampled every
# second. The simulator is a process of its own, as in production: sharing one event loop with the
# collectors and the analyzer it fell seconds behind on a busy 2-core CI machine, and every switch
# read stale. Faults go through its control endpoint, as the demo's do.
pytestmark = pytest.mark.asyncio(loop_scope="function")

PARAMS = FabricParams(gpus=512, radix=64)
SWITCHES = 40
FAST = {
    "interval_s": 1.0,
    "resolve_hold_down_s": 2.0,
    "window_intervals": 3.0,
    # stale after 5 s, not 3: on a busy 2-core CI machine the 1 s samples land a few seconds late,
    # and freshness is not what most of these tests are about
    "thresholds": {"flap_window_s": 8.0, "pfc_storm_min_s": 2.0, "fatal_outage_s": 3.0, "stale_intervals": 5.0},
}


@dataclass(frozen=True)
class LabSim:
    """The simulator process as the tests see it: the fabric it simulates and its fault control."""

    fabric: Fabric
    state: SimControl


@dataclass
class Lab:
    sim: LabSim
    config: Config
    pool: Pool

    async def findings(self) -> list[Finding]:
        async with self.pool.acquire() as conn:
            ev, _, _ = await assess(conn, self.sim.fabric, self.config, datetime.now(UTC))
        return ev.all_findings

    async def wait_for(self, cond: Callable[[list[Finding]], bool], within_s: float) -> list[Finding]:
        found: list[Finding] = []
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            found = await self.findings()
            if cond(found):
                return found
            await asyncio.sleep(0.5)
        raise AssertionError(f"not met within {within_s}s; findings: {[f.summary for f in found]}")


def _config(written: dict[str, Any], tmp: Path, webhook: str | None = None) -> Config:
    """The simulator's own config (targets and profiles per NOS): gNMI sampled every second, SNMP
    polled every 2 s (each second, a busy 2-core machine fell 3 polls behind: a stale spine)."""
    data = {**written, "collector": {"gnmi_interval_s": 1.0, "snmp_interval_s": 2.0}}
    data["database"] = {"writer": {"flush_interval_s": 0.2, "spool_dir": str(tmp / "spool")}}
    data["analyzer"] = FAST
    if webhook:
        data["alerts"] = {
            "webhooks": [
                {"url": webhook, "secret": "s3cret", "timeout_s": 2, "backoff_initial_s": 0.2, "backoff_max_s": 1}
            ]
        }
    return Config.model_validate(data)


@contextlib.asynccontextmanager
async def lab(
    dsn: str, tmp: Path, webhook: str | None = None, nos: tuple[Nos, ...] = (Nos.OPENCONFIG,), naming: str = "swp"
) -> AsyncIterator[Lab]:
    """Simulator process + collector + database; ``nos``: the switches' notification shapes;
    ``naming``: the fabric's port names (``mixed``: each switch its NOS's names and shape)."""
    args = ["--gpus", str(PARAMS.gpus), "--radix", str(PARAMS.radix), "--seed", "11"]
    args += ["--gnmi", "127.0.0.1:0", "--snmp", "127.0.0.1:0", "--control", "127.0.0.1:0"]
    args += ["--nos", ",".join(n.value for n in nos), "--naming", naming]
    fabric = build_aipod(PARAMS, naming)
    with started_sim(tmp, args, SWITCHES) as sim:
        pool = await create_pool(dsn)
        stop = asyncio.Event()
        task: asyncio.Task[None] | None = None
        try:
            async with pool.acquire() as conn:
                await migrate(conn)
                await ensure_fabric(conn, fabric)
            config = _config(sim.config, tmp, webhook)
            service = CollectorService(config, fabric, pool, plan(config, fabric))
            task = asyncio.create_task(service.run(stop))
            the_lab = Lab(LabSim(fabric, sim.control), config, pool)
            await the_lab.wait_for(lambda f: not f, 60)  # all switches fresh, nothing wrong
            yield the_lab
        finally:
            stop.set()
            if task is not None:
                await asyncio.wait_for(task, 30)
            await pool.close()


def rules(found: list[Finding]) -> dict[str, Finding]:
    return {f"{f.rule}/{f.key}": f for f in found}


@pytest.mark.slow  # every fault kind in turn through real collectors: ~70 s and timing-heavy (make test-slow)
async def test_each_fault_is_found_and_resolves(fresh_db: str, tmp_path: Path) -> None:
    async with lab(fresh_db, tmp_path) as lb:
        state = lb.sim.state
        assert state is not None

        async def episode(
            fault: dict[str, Any], expect: Callable[[dict[str, Finding]], bool], forbid: tuple[str, ...] = ()
        ) -> dict[str, Finding]:
            applied = state.apply(fault)
            found = rules(await lb.wait_for(lambda f: expect(rules(f)), 15))
            assert not [k for k in found if k.split("/")[0] in forbid], found
            state.clear(applied.id)
            await lb.wait_for(lambda f: not f, 25)
            return found

        # A leaf uplink down: drift on that leaf, rail 3 asymmetric, an outage; group 1's rail-3 GPUs.
        f = await episode(
            {"kind": "link_down", "switch": "lf-g1-r3"},
            lambda r: {"oversubscription_drift/lf-g1-r3", "rail_capacity_asymmetry/rail-3"} <= set(r),
        )
        drift = f["oversubscription_drift/lf-g1-r3"]
        assert drift.scope.rails == (3,) and drift.scope.gpus == 32 and drift.scope.groups == (1,)
        # 200G: drift and rail capacity asymmetry.
        await episode(
            {"kind": "speed_degrade", "switch": "lf-g2-r6", "speed_gbps": 200},
            lambda r: {"oversubscription_drift/lf-g2-r6", "rail_capacity_asymmetry/rail-6"} <= set(r),
        )
        # A PFC storm: one finding naming the origin port.
        f = await episode(
            {"kind": "pfc_storm", "switch": "lf-g1-r2", "port": "swp33", "rate_pps": 20000},
            lambda r: any(k.startswith("pfc_storm/") for k in r),
        )
        (storm,) = [v for k, v in f.items() if k.startswith("pfc_storm/")]
        assert storm.key.startswith("lf-g1-r2:swp33")
        # A flapping link: one aggregated finding, not one per flap.
        f = await episode(
            {"kind": "link_flap", "switch": "lf-g2-r1", "period_s": 1.0}, lambda r: "link_flapping/lf-g2-r1:swp33" in r
        )
        assert sum(1 for k in f if k.startswith("link_flapping/")) == 1
        # A miswire: named, server and GPU.
        f = await episode(
            {"kind": "miswire", "server": "srv-g2-005", "gpu": 4, "to_leaf": "lf-g2-r7"},
            lambda r: "miswire/srv-g2-005:gpu4" in r,
        )
        m = f["miswire/srv-g2-005:gpu4"].details
        assert (m["expected_leaf"], m["actual_leaf"]) == ("lf-g2-r4", "lf-g2-r7")
        # A silent switch: freshness.
        await episode({"kind": "switch_unreachable", "switch": "sp-r5-1"}, lambda r: "stale_switch/sp-r5-1" in r)
        # A reboot: counters restart, and no error-rate finding comes of it.
        applied = state.apply({"kind": "reboot", "switch": "lf-g1-r8", "boot_s": 2})
        await asyncio.sleep(8)
        found = await lb.findings()
        assert not [x for x in found if x.rule == "error_rate"], [(x.rule, x.key) for x in found]
        state.clear(applied.id)


async def test_alerts_reach_the_scheduler_with_the_jobs_they_touch(fresh_db: str, tmp_path: Path) -> None:
    async with receiver() as (url, got), lab(fresh_db, tmp_path, webhook=url) as lb:
        assert lb.sim.fabric is not None and lb.sim.state is not None
        await lb.pool.execute(
            "INSERT INTO jobs (id, hosts, expected_days) VALUES "
            "('llm-a', ARRAY['srv-g1-001','srv-g1-002'], 20), ('llm-b', ARRAY['srv-g2-001'], 20)"
        )
        service = AnalyzerService(lb.config, lb.sim.fabric, lb.pool)
        stop = asyncio.Event()
        task = asyncio.create_task(service.run(stop))
        try:
            fault = lb.sim.state.apply({"kind": "link_down", "switch": "lf-g1-r3"})

            def drift(g: dict[str, Any]) -> bool:  # the incident the drift is part of (root or symptom)
                return "oversubscription_drift" in {g["alert"]["rule"], *(s["rule"] for s in g["alert"]["symptoms"])}

            # warm-up (5 s) + a symptom-only incident's confirmation wait (6 s) + detection: 15 s was
            # too tight on a slow 2-core machine; the assertions below are unchanged
            for _ in range(120):
                if any(g["event"] == "alert.firing" and drift(g) for g in got):
                    break
                await asyncio.sleep(0.25)
            firing = next((g for g in got if drift(g)), None)
            assert firing is not None, f"no drift incident within 30 s: {[g['alert']['summary'] for g in got]}"
            # The sender delivers while the round that sent it still writes its report: the report
            # read below is that round's or a later one's, never the one before (the flake at 23e875e)
            seen = service.rounds
            await until(lambda: service.rounds > seen, 10, lambda: "no evaluation round finished within 10 s")
            assert firing["affected"]["rails"] == [3] and firing["affected"]["gpus"] == 32
            assert [j["id"] for j in firing["jobs"]] == ["llm-a"]  # llm-b runs in group 2
            assert firing["jobs"][0]["affected_hosts"] == ["srv-g1-001", "srv-g1-002"]
            # one uplink of 32: ECMP carries on, nothing for the scheduler to do but watch
            assert firing["recommended_action"] == "observe"
            report = service.last_report
            assert report is not None
            jobs = {j["id"]: j for j in report["jobs"]}
            assert jobs["llm-a"]["status"] == "degraded" and report["status"] == "degraded"
            # The drifting leaf serves group 1 only: job llm-b (group 2) does not see it.
            assert [f["fingerprint"] for f in jobs["llm-a"]["faults"]] == [firing["alert"]["fingerprint"]]
            assert jobs["llm-b"]["faults"] == [] and jobs["llm-b"]["status"] == "healthy"
            lb.sim.state.clear(fault.id)
            # The incident itself resolves (a resolved payload names no symptoms, so it is known by
            # its fingerprint: waiting on drift(g) waited out all 20 s, then took any resolution).
            incident = firing["alert"]["fingerprint"]
            await until(
                lambda: any(g["event"] == "alert.resolved" and g["alert"]["fingerprint"] == incident for g in got),
                20, lambda: f"{incident} not resolved: {[(g['event'], g['alert']['rule']) for g in got]}",
            )  # fmt: skip
            # the outage, the drift and the rail asymmetry are one incident, not three
            drifting = {g["alert"]["fingerprint"] for g in got if drift(g) or g["alert"]["rule"] == "link_outage"}
            assert drifting == {firing["alert"]["fingerprint"]}, [g["alert"]["summary"] for g in got]
        finally:
            stop.set()
            await asyncio.wait_for(task, 20)
