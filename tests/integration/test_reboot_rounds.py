"""A rebooting spine, round by round, on a real TimescaleDB: one incident, sent once with its final action.

The spine's peers tell of its reboot at different instants: its leaf over gNMI, each superspine at
its own SNMP poll, and the collector's writers flush link events and port samples apart. The
analyzer's first round after the reboot sees whichever came first: a part of it. At 512 GPUs the
one spine of a rail carries every uplink of its leaf, so the reboot is a ``checkpoint`` of
``switch:sp-r4-1`` (README, the action table), and that must be its first delivery: not an
``observe`` escalated a round later, nor a second incident about the leaf that saw it (the demo's
spine-reboot step, ``make demo``, showed both).

The rows come from the simulator through the collectors' pipeline at chosen instants
(:mod:`simulator.feed`), and the analyzer's rounds run at chosen instants
(:meth:`AnalyzerService.evaluate_once`), so each order is reproduced exactly.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

from analyzer.service import AnalyzerService
from collector.pipeline import Pipeline
from config.model import Config
from fabric.model import FabricParams
from fabric.topology import build_aipod
from simulator.fabric_state import FabricState
from simulator.feed import reading
from store.config import WriterConfig
from store.inventory import ensure_fabric
from store.records import Reachability

pytestmark = pytest.mark.db

S = 1_000_000_000
T0 = 1_790_000_000 * S
FABRIC = build_aipod(FabricParams(gpus=512))
LEAVES = [s for s in FABRIC.switches if s.startswith("lf-")]
SNMP = [s for s in FABRIC.switches if not s.startswith("lf-")]  # spines and superspines, as the demo polls them
SUPERSPINES = [s for s in SNMP if s.startswith("ssp-")]
#: The demo's pace (demo/runner.py): 2 s sampling and evaluation, its hold-down and windows.
CONFIG = Config.model_validate(
    {
        "collector": {"gnmi_interval_s": 2, "snmp_interval_s": 2},
        "analyzer": {
            "interval_s": 2,
            "resolve_hold_down_s": 4,
            "thresholds": {"pfc_storm_min_s": 4, "flap_window_s": 20},
        },
        "alerts": {"webhooks": [{"url": "http://127.0.0.1:9/hooks", "secret": "s"}]},
    }
)
#: What the analyzer's first round after the reboot holds: (switches, the writers flushed).
FIRST_VIEWS: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "its leaf": (["lf-g1-r4"], ("port_counters", "link_events")),
    "its leaf's link events only": (["lf-g1-r4"], ("link_events",)),
    "its leaf's samples only": (["lf-g1-r4"], ("port_counters",)),
    "one superspine": (["ssp-1"], ("port_counters", "link_events")),
    "every superspine": (SUPERSPINES, ("port_counters", "link_events")),
}


def at(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / S, tz=UTC)


@dataclass
class Rig:
    pool: asyncpg.Pool
    state: FabricState
    pipe: Pipeline
    service: AnalyzerService
    clock: list[int]

    async def feed(self, names: list[str], ns: int, tables: tuple[str, ...] = ("port_counters", "link_events")) -> None:
        """Every reachable switch of ``names`` sampled at ``ns``, then the writers of ``tables`` flushed."""
        self.clock[0] = max(self.clock[0], ns)
        self.state.tick(ns)
        for name in names:
            info = self.state.switch(name)
            if info is not None and info.reachable:
                await self.pipe.put_ports([reading(name, p, ns) for p in self.state.ports(name, ns)])
        for w in self.pipe.writers:
            if w.table in tables:
                await w.flush()

    async def round(self, start: int, first: tuple[list[str], tuple[str, ...]] | None = None) -> dict[str, Any]:
        """One sampling interval from ``start``: leaves at +0.1 s, SNMP switches at +0.7 s (or only
        ``first``), then the analyzer's round at +1.9 s; its report."""
        if first is not None:
            await self.feed(first[0], start + S // 10, first[1])
        else:
            await self.feed(LEAVES, start + S // 10)
            await self.feed(SNMP, start + 7 * S // 10)
        return await self.service.evaluate_once(at(start + 19 * S // 10))

    async def reachability(self, ns: int, reachable: bool) -> None:
        """What the SNMP collector records of the rebooting spine: a poll timed out, or answered again."""
        state, detail = ("connected", None) if reachable else ("unreachable", "poll took over 6s")
        row = Reachability(at(ns), "sp-r4-1", reachable, state, "snmp", detail)
        async with self.pool.acquire() as conn:
            await conn.copy_records_to_table("switch_reachability", records=[row], columns=Reachability._fields)

    async def deliveries(self) -> list[dict[str, Any]]:
        rows = await self.pool.fetch("SELECT body FROM webhook_deliveries ORDER BY seq")
        return [json.loads(bytes(r["body"])) for r in rows]


@pytest.fixture
async def rig(pool: asyncpg.Pool) -> AsyncIterator[Rig]:
    async with pool.acquire() as conn:
        await ensure_fabric(conn, FABRIC)
    clock = [T0]
    state = FabricState(FABRIC, seed=5, clock=lambda: clock[0])
    pipe = Pipeline(pool, FABRIC, WriterConfig(batch_rows=100_000, flush_interval_s=3600))
    r = Rig(pool, state, pipe, AnalyzerService(CONFIG, FABRIC, pool), clock)
    try:
        for k in range(2):  # two samples of a healthy fabric, then a healthy round
            await r.feed(LEAVES, T0 + k * 2 * S + S // 10)
            await r.feed(SNMP, T0 + k * 2 * S + 7 * S // 10)
        report = await r.round(T0 + 4 * S)
        assert report["status"] == "healthy" and not report["incidents"]
        yield r
    finally:
        await pipe.close()


def summary(bodies: list[dict[str, Any]]) -> list[tuple[str, str, str, bool]]:
    return [
        (b["event"], b["alert"]["root_cause"]["switch"], b["recommended_action"], b["needs_review"]) for b in bodies
    ]


@pytest.mark.parametrize("first", sorted(FIRST_VIEWS))
async def test_a_rebooting_spine_is_sent_once_as_its_checkpoint_whichever_peer_tells_first(
    rig: Rig, first: str
) -> None:
    reboot = T0 + 6 * S
    rig.state.tick(reboot)
    rig.state.apply({"kind": "reboot", "switch": "sp-r4-1", "boot_s": 12})
    await rig.round(reboot, FIRST_VIEWS[first])
    for k in (1, 2):
        report = await rig.round(reboot + k * 2 * S)
    assert summary(await rig.deliveries()) == [("alert.firing", "sp-r4-1", "checkpoint", False)]
    assert [(i["rule"], i["recommended_action"]) for i in report["incidents"]] == [("link_outage", "checkpoint")]


async def test_a_spine_reboot_first_seen_from_one_superspine_is_one_firing_and_one_resolved(rig: Rig) -> None:
    """The demo's order (an SNMP superspine polled before the leaf's samples are in), to the end:
    the spine boots for 12 s, its SNMP poll times out meanwhile, it answers again, its links come
    back; the incident resolves once, holding the action it was sent with."""
    reboot = T0 + 6 * S
    rig.state.tick(reboot)
    rig.state.apply({"kind": "reboot", "switch": "sp-r4-1", "boot_s": 12})
    await rig.round(reboot, FIRST_VIEWS["one superspine"])
    for k in range(1, 30):
        start = reboot + k * 2 * S
        if k in (3, 7):
            await rig.reachability(start, reachable=k == 7)
        report = await rig.round(start)
        if not report["incidents"]:
            break
    assert report["status"] == "healthy" and not report["incidents"]
    assert summary(await rig.deliveries()) == [
        ("alert.firing", "sp-r4-1", "checkpoint", False),
        ("alert.resolved", "sp-r4-1", "checkpoint", False),
    ]
