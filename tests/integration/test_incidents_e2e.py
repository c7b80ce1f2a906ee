"""Incidents end to end: simulator → collectors → TimescaleDB → analyzer → a signed webhook receiver.

The scenario matrix: each fault kind alone becomes exactly one incident with the expected root
cause and action, announced once (plus at most one escalation) and resolved once, every delivery
with the same action; two faults on different rails at once are two incidents; a clean run sends
nothing. Counted from what the receiver got, not from what the analyzer thinks it sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from analyzer.service import AnalyzerService
from simulator.nos import parse_nos
from tests.integration.test_analyze_e2e import Lab, lab
from tests.support.receiver import Got, receiver
from tests.support.waiting import until

pytestmark = pytest.mark.asyncio(loop_scope="function")

#: Resolve hold-down here: the lab samples every second on a busy machine, where a finding can miss
#: a round or two (a sample late past the window); 2 s would resolve and re-open it (production: 60 s).
HOLD_DOWN_S = 6.0


@contextlib.asynccontextmanager
async def analyzing(lb: Lab) -> AsyncIterator[AnalyzerService]:
    assert lb.sim.fabric is not None
    analyzer = lb.config.analyzer.model_copy(update={"resolve_hold_down_s": HOLD_DOWN_S})
    service = AnalyzerService(lb.config.model_copy(update={"analyzer": analyzer}), lb.sim.fabric, lb.pool)
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(stop))
    try:
        yield service
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)


def _open(service: AnalyzerService) -> list[dict[str, Any]]:
    return list((service.last_report or {}).get("incidents", []))


async def episode(lb: Lab, service: AnalyzerService, got: Got, faults: list[dict[str, Any]], incidents: int = 1,
                  settle_s: float = 6.0) -> dict[str, list[dict[str, Any]]]:  # fmt: skip
    """Apply ``faults``, wait for ``incidents`` announced incidents, let them settle, clear, wait
    for every one to resolve and the fabric to be healthy; what the receiver got meanwhile."""
    assert lb.sim.state is not None
    start = len(got.items)
    applied = [lb.sim.state.apply(f) for f in faults]
    watcher = asyncio.create_task(_watch(service))

    def fired() -> set[str]:
        return {g["alert"]["fingerprint"] for g in got.since(start) if g["event"] == "alert.firing"}

    await until(lambda: len(fired()) >= incidents, 40, f"{incidents} incident(s) announced for {faults}")
    await asyncio.sleep(settle_s)  # room for a second, wrong incident to show up
    for a in applied:
        lb.sim.state.clear(a.id)

    def resolved() -> set[str]:
        return {g["alert"]["fingerprint"] for g in got.since(start) if g["event"] == "alert.resolved"}

    await until(lambda: fired() <= resolved(), 60, f"every incident of {faults} resolved")
    await until(lambda: (service.last_report or {}).get("status") == "healthy", 30, "a healthy fabric again")
    watcher.cancel()
    return Got.by_incident(got.since(start))


#: Every rule seen in each incident (by fingerprint) while an episode ran: symptoms come and go.
SEEN: dict[str, set[str]] = {}


async def _watch(service: AnalyzerService) -> None:
    while True:
        for inc in (service.last_report or {}).get("incidents", []):
            SEEN.setdefault(inc["fingerprint"], set()).update(inc["rules"])
        await asyncio.sleep(0.25)


def clean(sent: list[dict[str, Any]]) -> tuple[str, str, set[str]]:
    """One firing (+ at most one escalation) and one resolved, one action: (root rule, action, symptoms)."""
    events = [g["event"] for g in sent]
    assert 1 <= events.count("alert.firing") <= 2 and events.count("alert.resolved") == 1, events
    assert events[-1] == "alert.resolved", events
    actions = {g["recommended_action"] for g in sent}
    assert len(actions) == 1, [(g["event"], g["alert"]["rule"], g["recommended_action"]) for g in sent]
    symptoms = {s["rule"] for g in sent for s in g["alert"]["symptoms"]}
    symptoms |= SEEN.get(sent[0]["alert"]["fingerprint"], set())
    return sent[0]["alert"]["rule"], actions.pop(), symptoms


@pytest.mark.slow  # every fault kind of the simulator in turn through real collectors: ~3 min (make test-slow)
@pytest.mark.parametrize(
    "nos",
    [
        "openconfig",
        "named",  # --naming mixed: each switch its NOS's port names, gNMI shape, ifIndex and LLDP
        pytest.param(
            "mixed",
            marks=pytest.mark.xfail(
                strict=False,
                reason="at 1 s sampling over every NOS shape the lab once split a PFC storm in two (issue 11 note); "
                "its stray rail_load_straggler incidents ended with 12 s rail loads (it passed once since, 2026-12-07)",
            ),
        ),
    ],
)
async def test_scenario_matrix_one_incident_per_fault(fresh_db: str, tmp_path: Path, nos: str) -> None:
    """Every fault kind, one incident each, whatever the switches send (``mixed``: every NOS shape)."""
    naming = "mixed" if nos == "named" else "swp"
    shapes = parse_nos("openconfig" if nos == "named" else nos)
    async with (
        receiver() as (url, got),
        lab(fresh_db, tmp_path, url, shapes, naming=naming) as lb,
        analyzing(lb) as service,
    ):
        await until(lambda: service.rounds > 8, 30, "the analyzer past its warm-up")

        def at(switch: str, place: int) -> str:  # a port by its place, named as this fabric names it
            return lb.sim.fabric.ports(switch)[place - 1].name

        expected: list[tuple[dict[str, Any], set[str], set[str]]] = [
            # fault, acceptable root rules, acceptable actions
            ({"kind": "link_down", "switch": "lf-g1-r3"}, {"link_outage", "oversubscription_drift"}, {"observe"}),
            ({"kind": "speed_degrade", "switch": "lf-g2-r6", "speed_gbps": 200}, {"oversubscription_drift"},
             {"observe"}),
            ({"kind": "pfc_storm", "switch": "lf-g1-r2", "port": at("lf-g1-r2", 33), "rate_pps": 20000}, {"pfc_storm"},
             {"checkpoint"}),
            ({"kind": "link_flap", "switch": "lf-g2-r1", "port": at("lf-g2-r1", 2), "period_s": 1.0},
             {"link_flapping", "link_outage"}, {"drain"}),
            ({"kind": "miswire", "server": "srv-g2-005", "gpu": 4, "to_leaf": "lf-g2-r7"}, {"miswire"}, {"drain"}),
            ({"kind": "error_burst", "switch": "lf-g1-r5", "port": at("lf-g1-r5", 33), "rate_pps": 500},
             {"error_rate"},
             {"observe", "checkpoint"}),
            ({"kind": "switch_unreachable", "switch": "sp-r5-1"}, {"stale_switch"}, {"observe"}),
            ({"kind": "reboot", "switch": "sp-r4-1", "boot_s": 6},
             {"link_outage", "switch_flapping", "stale_switch"}, {"observe", "checkpoint"}),
        ]  # fmt: skip
        for fault, roots, actions in expected:
            by_incident = await episode(lb, service, got, [fault])
            assert len(by_incident) == 1, {fp: [(g["event"], g["alert"]["rule"]) for g in s]
                                           for fp, s in by_incident.items()}  # fmt: skip
            (sent,) = by_incident.values()
            rule, action, _ = clean(sent)
            assert rule in roots and action in actions, (fault, rule, action)


@pytest.mark.slow  # timing-heavy on 2 busy cores (1 s sampling, one shared loop): make test-slow
async def test_two_faults_on_two_rails_are_two_incidents_each_with_its_own_action(
    fresh_db: str, tmp_path: Path
) -> None:
    async with receiver() as (url, got), lab(fresh_db, tmp_path, webhook=url) as lb, analyzing(lb) as service:
        await until(lambda: service.rounds > 6, 30, "the analyzer past its warm-up")
        by_incident = await episode(
            lb,
            service,
            got,
            [
                {"kind": "link_down", "switch": "lf-g1-r3"},  # a leaf uplink: ECMP carries on
                {"kind": "link_flap", "switch": "lf-g2-r1", "port": "swp2", "period_s": 1.0},  # a NIC cable
            ],
            incidents=2,
        )
        assert len(by_incident) == 2, {fp: [(g["alert"]["rule"], g["alert"]["summary"]) for g in s]
                                       for fp, s in by_incident.items()}  # fmt: skip
        outcomes = {}
        for sent in by_incident.values():
            rule, action, symptoms = clean(sent)
            outcomes[sent[0]["alert"]["root_cause"]["switch"]] = (rule, action, symptoms)
            if action == "drain":
                # the flapping cable: the same host in every delivery about it
                assert {tuple(g["action_hosts"]) for g in sent} == {("srv-g2-002",)}
        assert outcomes["lf-g1-r3"][1] == "observe"
        assert outcomes["lf-g2-r1"][1] == "drain"
        assert "oversubscription_drift" in outcomes["lf-g1-r3"][2] | {outcomes["lf-g1-r3"][0]}


@pytest.mark.slow  # its startup wait is timing-heavy on 2 busy cores: make test-slow
async def test_a_clean_run_sends_nothing(fresh_db: str, tmp_path: Path) -> None:
    async with receiver() as (url, got), lab(fresh_db, tmp_path, webhook=url) as lb, analyzing(lb) as service:
        await until(lambda: service.rounds > 15, 40, "fifteen evaluations")
        assert got.items == [], [(g["event"], g["alert"]["summary"]) for g in got.items]
        assert (service.last_report or {}).get("status") == "healthy"
        assert [i["summary"] for i in _open(service) if not i["pending"]] == []


@pytest.mark.slow  # five minutes of a healthy fabric (make test-slow)
@pytest.mark.timeout(600)
async def test_a_clean_five_minute_run_sends_nothing(fresh_db: str, tmp_path: Path) -> None:
    async with receiver() as (url, got), lab(fresh_db, tmp_path, webhook=url) as lb, analyzing(lb) as service:
        started = time.monotonic()
        while time.monotonic() - started < 300:
            assert got.items == [], [(g["event"], g["alert"]["summary"]) for g in got.items]
            await asyncio.sleep(5)
        assert got.items == [] and service.rounds > 100


async def test_a_lost_leaf_is_never_drained_a_person_decides(fresh_db: str, tmp_path: Path) -> None:
    """A leaf gone (rebooting, silent, its spines see its uplinks down): its 32 servers lost their
    rail-2 path, more than the circuit breaker lets one incident drain (one host on this 64-server
    fabric): observe, needs_review, critical, and the hosts it would drain listed for the person."""
    async with receiver() as (url, got), lab(fresh_db, tmp_path, webhook=url) as lb, analyzing(lb) as service:
        assert lb.sim.state is not None and lb.sim.fabric is not None
        await until(lambda: service.rounds > 6, 30, "the analyzer past its warm-up")
        fault = lb.sim.state.apply({"kind": "reboot", "switch": "lf-g1-r2", "boot_s": 30})
        await until(lambda: any(g["needs_review"] for g in got.items), 40, "an incident that needs review")
        lb.sim.state.clear(fault.id)
        about = [g for g in got.items if g["alert"]["root_cause"].get("switch") == "lf-g1-r2"]
        assert about and not [g for g in got.items if g["recommended_action"] == "drain"], [
            (g["alert"]["rule"], g["recommended_action"]) for g in got.items
        ]
        review = next(g for g in about if g["needs_review"])
        assert review["recommended_action"] == "observe" and review["alert"]["severity"] == "critical"
        assert set(review["action_hosts"]) == lb.sim.fabric.servers_on("lf-g1-r2")
        assert "circuit breaker" in (review["alert"]["reason"] or "")
