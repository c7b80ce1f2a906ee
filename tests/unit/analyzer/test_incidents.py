"""Correlation and the action table on the 512-GPU AIPod: one incident per root cause, one action.

Findings are shaped as the checks make them (rule, key, details the checks set, blast radius from
the same helpers); the integration suites produce them from the simulator end to end.
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzer.actions import ActionPolicy, Held, decide, decide_all, merge_decision
from analyzer.correlation import correlate
from analyzer.findings import Finding, blast_radius
from analyzer.incident_memory import Waits, blind, held_links, hold_unconfirmed, memory_of, ongoing_storms
from analyzer.incident_model import Incident, Observation
from analyzer.links import link_end, links_scope
from fabric.model import Endpoint, Fabric, FabricParams
from fabric.topology import build_aipod
from store.incident_memory import IncidentMemory

FABRIC = build_aipod(FabricParams(gpus=512))
BIG = build_aipod(FabricParams(gpus=16384))


def outage(switch: str, port: str, *, down_for: float = 30.0, down_now: bool = True, critical: bool = True) -> Finding:
    return Finding(
        "link_outage",
        f"{switch}:{port}",
        "critical" if critical else "warning",
        f"{switch}:{port} down",
        links_scope(FABRIC, [(switch, port)]),
        {"down_now": down_now, "down_for_s": down_for if down_now else 0.0, "longest_completed_s": 0.0},
    )


def flapping(switch: str, port: str, flaps: int = 4) -> Finding:
    scope = links_scope(FABRIC, [(switch, port)])
    return Finding("link_flapping", f"{switch}:{port}", "warning", f"{switch}:{port} flapped", scope, {"flaps": flaps})


def drift(switch: str, lost: list[str], loss: float = 0.0007, severity: str = "warning") -> Finding:
    return Finding(
        "oversubscription_drift", switch, severity,  # type: ignore[arg-type]
        f"{switch} drifts", blast_radius(FABRIC, switches=[switch], ports=[(switch, p) for p in lost]),
        {"uplinks_lost": lost, "efficiency_loss": loss},
    )  # fmt: skip


def asymmetry(rail: int, bottleneck: str, lost: list[str], loss: float = 0.0007) -> Finding:
    return Finding(
        "rail_capacity_asymmetry", f"rail-{rail}", "warning", f"rail {rail} short",
        blast_radius(FABRIC, switches=[bottleneck], ports=[(bottleneck, p) for p in lost]),
        {"rail": rail, "bottleneck": bottleneck, "lost_ports": [f"{bottleneck}:{p}" for p in lost],
         "efficiency_loss": loss},
    )  # fmt: skip


def straggler(rail: int) -> Finding:
    leaves = [s for s, sw in FABRIC.switches.items() if sw.rail == rail and s.startswith("lf-")]
    return Finding(
        "rail_load_straggler", f"rail-{rail}", "warning", f"rail {rail} slow",
        blast_radius(FABRIC, switches=leaves), {"rail": rail},
    )  # fmt: skip


def ecmp(switch: str) -> Finding:
    return Finding("ecmp_imbalance", switch, "warning", f"{switch} uneven", blast_radius(FABRIC, switches=[switch]))


def stale(switch: str, **peers: int) -> Finding:
    return Finding(
        "stale_switch", switch, "critical", f"{switch} silent", blast_radius(FABRIC, switches=[switch]),
        {"age_s": 60.0, **peers},
    )  # fmt: skip


def switch_flapping(switch: str) -> Finding:
    return Finding(
        "switch_flapping", switch, "warning", f"{switch} dropped its ports",
        links_scope(FABRIC, [(switch, f"swp{i}") for i in range(1, 65)], [switch]), {"port_count": 64},
    )  # fmt: skip


def switch_outage(switch: str, links: list[tuple[str, str]], down_now: bool = True) -> Finding:
    return Finding(
        "link_outage", switch, "critical", f"{switch}: links down",
        links_scope(FABRIC, links, [switch]),
        {"links": [{"link": f"{s}:{p} ↔ x", "down_now": down_now} for s, p in links],
         "down_now": len(links) if down_now else 0},
    )  # fmt: skip


def miswire(server: str, gpu: int, actual: str, expected: str) -> Finding:
    port = f"swp{int(server[-3:])}"
    return Finding(
        "miswire", f"{server}:gpu{gpu}", "critical", f"{server} GPU {gpu} on {actual}",
        blast_radius(FABRIC, ports=[(actual, port)], gpus=[(server, gpu)]),
        {"server": server, "gpu": gpu, "expected_leaf": expected, "actual_leaf": actual, "actual_port": port},
    )  # fmt: skip


def pfc(switch: str, port: str, held: tuple[str, ...] = ()) -> Finding:
    """A storm from ``switch:port``; ``held``: more ports its pause tree holds."""
    peer = FABRIC.peer(Endpoint(switch, port))
    assert peer is not None
    ports = [(switch, port), (peer.node, peer.port), *(tuple(h.split(":", 1)) for h in held)]
    return Finding(
        "pfc_storm", f"{switch}:{port}:3", "critical", f"PFC storm from {switch}:{port}",
        links_scope(FABRIC, ports),  # type: ignore[arg-type]
        {"origin": {"port": f"{switch}:{port}", "kind": "sender"}, "priority": 3,
         "affected_ports": sorted({f"{s}:{p}" for s, p in ports})},
    )  # fmt: skip


def decided(
    findings: list[Finding], obs: Observation | None = None, policy: ActionPolicy | None = None, fabric: Fabric = FABRIC
) -> list[Incident]:
    return decide_all(correlate(findings, fabric, obs), fabric, policy)


def one(findings: list[Finding], **kw: object) -> Incident:
    incidents = decided(findings, **kw)  # type: ignore[arg-type]
    assert len(incidents) == 1, [(i.key, i.rule, [f.rule for f in i.symptoms]) for i in incidents]
    return incidents[0]


# --- one incident per root cause ----------------------------------------------------------------


def test_a_downed_leaf_uplink_is_one_incident_that_ecmp_carries() -> None:
    inc = one([outage("lf-g1-r3", "swp65"), drift("lf-g1-r3", ["swp65"]), asymmetry(3, "lf-g1-r3", ["swp65"])])
    assert inc.key == "link:lf-g1-r3:swp65" and inc.rule == "link_outage"
    assert sorted(f.rule for f in inc.symptoms) == ["oversubscription_drift", "rail_capacity_asymmetry"]
    # 63 of 64 uplinks left: 0.07 % of training speed, far below the 5 % checkpoint threshold
    assert (inc.action, inc.severity, inc.needs_review) == ("observe", "warning", False)


def test_a_slowed_uplink_has_drift_as_its_root_and_the_same_place_as_its_outage() -> None:
    inc = one([drift("lf-g1-r5", ["swp65"]), asymmetry(5, "lf-g1-r5", ["swp65"])])
    assert inc.key == "link:lf-g1-r5:swp65" and inc.rule == "oversubscription_drift"
    assert [f.rule for f in inc.symptoms] == ["rail_capacity_asymmetry"]
    assert inc.action == "observe"
    assert one([outage("lf-g1-r5", "swp65")]).fingerprint == inc.fingerprint


def test_a_spine_reboot_is_one_incident_with_every_symptom() -> None:
    links = [("lf-g1-r4", f"swp{i}") for i in range(65, 129)]
    inc = one(
        [
            stale("sp-r4-1"),
            switch_flapping("sp-r4-1"),
            switch_outage("sp-r4-1", links),
            drift("lf-g1-r4", [p for _, p in links], loss=1.0, severity="critical"),
            asymmetry(4, "lf-g1-r4", [p for _, p in links], loss=1.0),
            straggler(4),
            outage("lf-g1-r4", "swp70"),
        ]
    )
    assert inc.key == "switch:sp-r4-1" and inc.rule == "link_outage"
    assert len(inc.symptoms) == 6
    # at 512 GPUs the one spine of rail 4 carries all of lf-g1-r4's uplinks: the jobs must checkpoint,
    # and no host lost its only path (its leaf is up), so nothing is drained
    assert inc.action == "checkpoint" and inc.severity == "critical"
    assert not inc.needs_review


def test_the_flapping_nic_cable_is_one_incident_that_drains_its_host() -> None:
    inc = one([outage("lf-g1-r1", "swp2"), flapping("lf-g1-r1", "swp2")])
    assert inc.key == "link:lf-g1-r1:swp2"
    assert (inc.action, inc.action_hosts) == ("drain", ("srv-g1-002",))
    only_flaps = one([flapping("lf-g1-r1", "swp2")])
    assert only_flaps.fingerprint == inc.fingerprint and only_flaps.action == "drain"


def test_a_server_link_down_for_less_than_the_fatal_outage_is_pending() -> None:
    inc = one([outage("lf-g1-r1", "swp2", down_for=2.0, critical=False)])
    assert inc.pending and inc.action == "observe"
    fatal = one([outage("lf-g1-r1", "swp2")])
    assert not fatal.pending and (fatal.action, fatal.action_hosts) == ("drain", ("srv-g1-002",))
    back = one([outage("lf-g1-r1", "swp2", down_now=False, critical=False)])
    assert not back.pending and back.action == "observe"


def test_a_cable_swap_is_one_incident_draining_its_server() -> None:
    inc = one(
        [
            miswire("srv-g1-003", 3, actual="lf-g1-r6", expected="lf-g1-r3"),
            miswire("srv-g1-003", 6, actual="lf-g1-r3", expected="lf-g1-r6"),
            straggler(3),
        ]
    )
    assert inc.kind == "miswire" and inc.key == "miswire:srv-g1-003"
    assert (inc.action, inc.action_hosts) == ("drain", ("srv-g1-003",))


def test_a_pfc_storm_takes_the_paused_leafs_ecmp_imbalance_and_checkpoints_the_jobs_behind_it() -> None:
    inc = one([pfc("lf-g1-r2", "swp65"), ecmp("lf-g1-r2")])
    assert inc.rule == "pfc_storm" and [f.rule for f in inc.symptoms] == ["ecmp_imbalance"]
    assert inc.action == "checkpoint"
    assert set(inc.action_hosts) == FABRIC.servers_on("lf-g1-r2")


def _spine_port(spine: str, towards: str) -> str:
    """A port of ``spine`` cabled to ``towards``."""
    return next(p.name for p in FABRIC.ports(spine) if p.peer is not None and p.peer.node == towards)


def remembered(*incidents: Incident) -> dict[str, frozenset[str]]:
    """The storms the next round knows of firing ``incidents`` (their memory)."""
    return ongoing_storms([memory_of(i, n) for n, i in enumerate(incidents)])


def test_a_storm_named_by_another_origin_while_it_fires_stays_the_same_incident() -> None:
    # Round 1: the storm from lf-g1-r2:swp65 holds sp-r2-1 and the superspines behind it. Round 2
    # (the storm ending, the leaf's samples already quiet, the spine's SNMP polls late): only the
    # superspines' received pauses are on record, so their strongest root, a spine port, is named.
    spine = FABRIC.peer(Endpoint("lf-g1-r2", "swp65"))
    assert spine is not None
    up = _spine_port(spine.node, "ssp-1")
    ssp = FABRIC.peer(Endpoint(spine.node, up))
    assert ssp is not None
    first = one([pfc("lf-g1-r2", "swp65", held=(f"{spine.node}:{up}", f"{ssp.node}:{ssp.port}"))])
    storms = remembered(first)
    tail = pfc(spine.node, up)
    alone = decide_all(correlate([tail], FABRIC), FABRIC)
    assert [i.fingerprint for i in alone] != [first.fingerprint]  # without the memory: a second incident
    (again,) = decide_all(correlate([tail], FABRIC, storms=storms), FABRIC)
    assert (again.key, again.fingerprint) == (first.key, first.fingerprint)
    assert (again.rule, again.action) == ("pfc_storm", "checkpoint")
    # both in one round: one incident, the firing storm's own finding its root
    (both,) = decide_all(correlate([tail, pfc("lf-g1-r2", "swp65")], FABRIC, storms=storms), FABRIC)
    assert both.fingerprint == first.fingerprint and both.root.key == "lf-g1-r2:swp65:3"
    assert [f.key for f in both.symptoms] == [tail.key]


def test_a_storm_sharing_no_port_with_a_firing_one_is_an_incident_of_its_own() -> None:
    first = one([pfc("lf-g1-r2", "swp65")])
    storms = remembered(first)
    (other,) = decide_all(correlate([pfc("lf-g1-r5", "swp65")], FABRIC, storms=storms), FABRIC)
    assert other.fingerprint != first.fingerprint and other.location["switch"] == "lf-g1-r5"


def test_a_second_storm_sharing_only_spread_ports_is_its_own_incident_with_its_own_hosts() -> None:
    # Spread trees of one rail share the spine's ports; a storm from another leaf's port, which
    # the firing storm does not pause, is another storm: its jobs must be told to checkpoint.
    spine = FABRIC.peer(Endpoint("lf-g1-r2", "swp65"))
    assert spine is not None
    shared = f"{spine.node}:{_spine_port(spine.node, 'ssp-1')}"
    first = one([pfc("lf-g1-r2", "swp65", held=(shared,))])
    second = pfc("lf-g1-r5", "swp1", held=(shared,))  # a stuck NIC whose tree reaches that port too
    (inc,) = decide_all(correlate([second], FABRIC, storms=remembered(first)), FABRIC)
    assert inc.fingerprint != first.fingerprint and inc.root.key == second.key
    assert set(inc.action_hosts) == set(second.scope.servers) and inc.action == "checkpoint"


def test_a_storm_joined_by_an_outage_of_its_link_is_still_remembered_as_a_storm() -> None:
    storm, down = pfc("lf-g1-r2", "swp65"), outage("lf-g1-r2", "swp65")
    (inc,) = decided([storm, down])
    assert inc.rule == "link_outage" and [f.rule for f in inc.symptoms] == ["pfc_storm"]
    assert remembered(inc) == {inc.key: frozenset(storm.details["affected_ports"])}


def test_only_incidents_remembered_with_storm_ports_are_ongoing_storms() -> None:
    ports = ("lf-g1-r2:swp65",)
    assert ongoing_storms([
        IncidentMemory(1, "link:lf-g1-r2:swp65", storm_ports=ports),
        IncidentMemory(2, "link:lf-g1-r2:swp66"),  # no storm in it
        IncidentMemory(3, "switch:sp-r1-1", switch_links=ports),  # links, not a storm
    ]) == {"link:lf-g1-r2:swp65": frozenset(ports)}  # fmt: skip


def test_two_faults_on_different_rails_stay_two_incidents() -> None:
    incidents = decided(
        [
            outage("lf-g1-r3", "swp65"),
            drift("lf-g1-r3", ["swp65"]),
            asymmetry(3, "lf-g1-r3", ["swp65"]),
            outage("lf-g1-r1", "swp2"),
            flapping("lf-g1-r1", "swp2"),
        ]
    )
    assert sorted(i.key for i in incidents) == ["link:lf-g1-r1:swp2", "link:lf-g1-r3:swp65"]


def test_two_faults_on_one_rail_do_not_merge_through_a_shared_symptom() -> None:
    incidents = decided(
        [
            outage("lf-g1-r3", "swp65"),
            outage("lf-g1-r3", "swp2"),
            asymmetry(3, "lf-g1-r3", ["swp65"]),
        ]
    )
    assert len(incidents) == 2
    by_key = {i.key: i for i in incidents}
    assert [f.rule for f in by_key["link:lf-g1-r3:swp65"].symptoms] == ["rail_capacity_asymmetry"]
    assert by_key["link:lf-g1-r3:swp2"].action == "drain"


# --- monitoring failure is not fabric failure ---------------------------------------------------


def test_a_silent_collector_is_one_collection_incident_that_never_drains() -> None:
    everything = [stale(s) for s in FABRIC.switches]
    obs = Observation(frozenset(FABRIC.switches), ("collector h:1 silent for 42 s",), known=True)
    inc = one(everything, obs=obs)
    assert inc.kind == "collection" and inc.rule == "collection"
    assert (inc.action, inc.action_hosts, inc.severity) == ("observe", (), "critical")
    assert len(inc.symptoms) == len(FABRIC.switches)


def test_a_collection_incident_waits_its_confirmation_so_a_restart_that_passes_pages_no_one() -> None:
    """The 300-fault drill (2026-12-06) sent two collection incidents for a collector restart and a
    database blip that were over in under 5 s: fabricmon's own blindness asks nothing of a
    scheduler, so it waits like any observe-only incident, from when it was first seen."""
    everything = [stale(s) for s in FABRIC.switches]
    obs = Observation(frozenset(FABRIC.switches), ("40 switch(es) assigned to no running collector",), known=True)
    inc = one(everything, obs=obs)
    assert inc.kind == "collection"
    now = datetime(2026, 12, 6, tzinfo=UTC)
    first = Waits()
    assert hold_unconfirmed([inc], first, now, 8.0)[0].pending
    assert hold_unconfirmed([inc], first, now + timedelta(seconds=7.9), 8.0)[0].pending
    assert not hold_unconfirmed([inc], first, now + timedelta(seconds=8), 8.0)[0].pending
    # the wait counts from the first round that saw it
    assert first.by_key and min(w.since for w in first.by_key.values()) == now


def test_without_heartbeats_half_the_fabric_silent_at_once_is_our_collection() -> None:
    half = [stale(s) for s in sorted(FABRIC.switches)[:10]]
    assert one(half).kind == "collection"
    few = decided([stale("sp-r1-1"), stale("sp-r2-1")])
    assert {i.kind for i in few} == {"switch"}


def test_a_switch_silent_while_its_collector_reports_is_the_switch() -> None:
    obs = Observation(frozenset(), (), known=True)
    up = one([stale("lf-g1-r2", peer_links_up=64, peer_links_down=0)], obs=obs)
    assert up.kind == "switch" and up.action == "observe" and not up.needs_review
    unknown = one([stale("lf-g1-r2", peer_links_up=0, peer_links_down=0, peer_links_unknown=64)], obs=obs)
    assert unknown.action == "observe" and unknown.needs_review


def test_many_switches_silent_at_once_while_they_forward_are_our_collection() -> None:
    # An SNMP collector too busy to finish its polls calls every spine unreachable at once; their
    # peers still see every link up. Five at once is our side of the wire, four are four switches.
    obs = Observation(frozenset(), (), known=True)
    spines = sorted(s for s in FABRIC.switches if not s.startswith("lf-"))
    forwarding = [replace(stale(s, peer_links_up=64, peer_links_down=0),
                          details={**stale(s).details, "peer_links_up": 64, "peer_links_down": 0,
                                   "state": "unreachable"}) for s in spines]  # fmt: skip
    mass = one(forwarding[:5], obs=obs)
    assert (mass.kind, mass.action, mass.action_hosts) == ("collection", "observe", ())
    assert "5 switches silent at once while their peers see their links up" in mass.root.summary
    assert not mass.root.details.get("lag_only")
    assert {i.kind for i in decided(forwarding[:4], obs=obs)} == {"switch"}
    # a switch its peers see gone is its own incident, mass silence or not
    gone = stale("sp-r1-1", peer_links_up=0, peer_links_down=64)
    incidents = decided([gone, *forwarding[1:6]], obs=obs)
    assert sorted(i.kind for i in incidents) == ["collection", "switch"]
    assert next(i for i in incidents if i.kind == "switch").key == "switch:sp-r1-1"


def test_a_switch_silent_while_it_forwards_waits_its_confirmation_a_gone_one_does_not() -> None:
    # Staggered polls of a busy collector make switches silent one round apart: the first few
    # must not go out as switch incidents before the fifth makes them one collection incident.
    obs = Observation(frozenset(), (), known=True)
    now = datetime(2026, 12, 3, tzinfo=UTC)
    quiet = one([stale("sp-r1-1", peer_links_up=64, peer_links_down=0)], obs=obs)
    first = Waits()
    assert hold_unconfirmed([quiet], first, now, 8.0)[0].pending
    assert not hold_unconfirmed([quiet], first, now + timedelta(seconds=8), 8.0)[0].pending
    gone = one([stale("sp-r1-1", peer_links_up=0, peer_links_down=64)], obs=obs)
    assert not hold_unconfirmed([gone], Waits(), now, 8.0)[0].pending


def spine_uplinks(spine: str, superspine: str | None = None) -> list[tuple[str, str]]:
    """The naming ends (the spine's: the lower tier) of ``spine``'s links to ``superspine`` (or to all)."""
    return [
        link_end(FABRIC, spine, p.name)
        for p in FABRIC.ports(spine)
        if p.peer is not None and p.peer.node.startswith("ssp-") and superspine in (None, p.peer.node)
    ]


def test_a_spine_down_is_a_checkpoint_at_512_gpus_and_an_observe_at_16k() -> None:
    # Every link of the spine down. At 512 GPUs its leaf loses every uplink; at 16K each leaf loses
    # the few it had to that spine, ECMP carries the rest. The spine's own uplinks cost nothing:
    # nothing reaches a dead spine to be sent up.
    links = [link_end(FABRIC, "sp-r4-1", p.name) for p in FABRIC.ports("sp-r4-1") if p.peer is not None]
    assert one([switch_outage("sp-r4-1", links)]).action == "checkpoint"
    big = [link_end(BIG, "sp-r1-1", p.name) for p in BIG.ports("sp-r1-1") if p.peer is not None]
    finding = Finding(
        "link_outage", "sp-r1-1", "critical", "sp-r1-1: links down", links_scope(BIG, big, ["sp-r1-1"]),
        {"links": [{"link": f"{s}:{p} ↔ x", "down_now": True} for s, p in big], "down_now": len(big)},
    )  # fmt: skip
    (inc,) = decide_all(correlate([finding], BIG), BIG)
    assert (inc.key, inc.action) == ("switch:sp-r1-1", "observe")


def test_an_observe_switch_incident_waits_its_confirmation_its_checkpoint_does_not() -> None:
    # A rebooting spine seen first from one superspine (its SNMP poll came first): 16 of its 64
    # uplinks, an observe. Sent at once, it is followed a round later by the checkpoint its leaf's
    # view brings: two firing deliveries for one fault. It waits, as an uplink incident does.
    now = datetime(2026, 12, 3, tzinfo=UTC)
    first = Waits()
    early = one([switch_flapping("sp-r4-1"), switch_outage("sp-r4-1", spine_uplinks("sp-r4-1", "ssp-1"))])
    assert early.action == "observe" and not early.needs_review
    assert hold_unconfirmed([early], first, now, 8.0)[0].pending
    links = [("lf-g1-r4", f"swp{i}") for i in range(65, 129)]
    whole = one([switch_flapping("sp-r4-1"), switch_outage("sp-r4-1", links + spine_uplinks("sp-r4-1"))])
    assert whole.fingerprint == early.fingerprint and whole.action == "checkpoint"
    assert not hold_unconfirmed([whole], first, now + timedelta(seconds=2), 8.0)[0].pending
    # a spine that stays an observe (at 16K GPUs it is one of many) is sent once its wait is over
    first.clear()
    assert hold_unconfirmed([early], first, now, 8.0)[0].pending
    assert not hold_unconfirmed([early], first, now + timedelta(seconds=8), 8.0)[0].pending
    # inside a maintenance window it is observed whatever comes next: sent as soon as seen
    assert not hold_unconfirmed([replace(early, maintenance=True)], Waits(), now, 8.0)[0].pending
    # review is never held: a person decides
    obs = Observation(frozenset(), (), known=True)
    lost_leaf = one([stale("lf-g1-r2", peer_links_up=0, peer_links_down=64)], obs=obs)
    assert lost_leaf.needs_review and not hold_unconfirmed([lost_leaf], Waits(), now, 8.0)[0].pending


def test_a_fault_named_anew_while_it_waits_does_not_start_its_wait_over() -> None:
    # Four uplinks of a leaf down are gathered into one switch incident; a round in which one of
    # them is late leaves three link incidents; then four again. The wait counts from the first.
    now = datetime(2026, 12, 3, tzinfo=UTC)
    downs = [outage("lf-g1-r3", f"swp{p}") for p in (65, 66, 67, 68)]
    four, three = decided(downs), decided(downs[:3])
    assert [i.kind for i in four] == ["switch"] and [i.kind for i in three] == ["link"] * 3
    assert all(i.action == "observe" for i in four + three)
    first = Waits()
    assert hold_unconfirmed(four, first, now, 8.0)[0].pending
    assert all(i.pending for i in hold_unconfirmed(three, first, now + timedelta(seconds=4), 8.0))
    assert not hold_unconfirmed(four, first, now + timedelta(seconds=8), 8.0)[0].pending
    # gone for a round: it waits anew
    assert hold_unconfirmed([], first, now + timedelta(seconds=10), 8.0) == [] and not first.by_key
    assert hold_unconfirmed(four, first, now + timedelta(seconds=12), 8.0)[0].pending


def crc_errors(switch: str, port: str) -> Finding:
    scope = links_scope(FABRIC, [(switch, port)])
    return Finding("error_rate", f"{switch}:{port}", "warning", f"{switch}:{port} FCS errors", scope, {"rate": 400.0})


def test_a_finding_its_switchs_silence_hid_for_a_round_keeps_its_wait() -> None:
    # The 300-fault drill's f132: a spine's CRC burst, its collector lagging. Every third or fourth
    # round the spine was stale, that round had no error_rate finding (no fresh samples to take a
    # rate of), and the wait started over: the burst was never sent. One stale switch late in our
    # own pipeline makes no incident, yet the round could not judge it.
    now = datetime(2026, 12, 6, tzinfo=UTC)
    spine = "sp-r8-1"
    crc = decided([crc_errors(spine, _spine_port(spine, "lf-g1-r8"))])
    assert [(i.kind, i.action) for i in crc] == [("link", "observe")]
    late = replace(stale(spine), details={**stale(spine).details, "state": "connected"})
    obs = Observation(frozenset(), (), known=True)
    assert decided([late], obs=obs) == [] and blind([late], obs) == {spine}
    first = Waits()
    assert hold_unconfirmed(crc, first, now, 8.0)[0].pending
    assert hold_unconfirmed(crc, first, now + timedelta(seconds=2), 8.0)[0].pending
    assert hold_unconfirmed([], first, now + timedelta(seconds=4), 8.0, blind([late], obs)) == []
    assert hold_unconfirmed(crc, first, now + timedelta(seconds=6), 8.0)[0].pending
    assert not hold_unconfirmed(crc, first, now + timedelta(seconds=8), 8.0)[0].pending
    # a switch behind a collector we cannot observe is as blind
    assert blind([], Observation(frozenset({spine}), ("collector h:1 silent for 9 s",), known=True)) == {spine}


def test_a_wait_outlives_its_switchs_silence_by_no_more_than_the_confirmation() -> None:
    now = datetime(2026, 12, 6, tzinfo=UTC)
    spine = "sp-r8-1"
    crc = decided([crc_errors(spine, _spine_port(spine, "lf-g1-r8"))])
    first = Waits()
    assert hold_unconfirmed(crc, first, now, 8.0)[0].pending
    # silent long after: the finding last seen more than a confirmation ago has passed
    assert hold_unconfirmed([], first, now + timedelta(seconds=6), 8.0, frozenset({spine})) == []
    assert first.by_key
    assert hold_unconfirmed([], first, now + timedelta(seconds=9), 8.0, frozenset({spine})) == []
    assert not first.by_key
    assert hold_unconfirmed(crc, first, now + timedelta(seconds=10), 8.0)[0].pending
    # another switch's silence does not keep it: it passed
    assert hold_unconfirmed([], first, now + timedelta(seconds=12), 8.0, frozenset({"sp-r1-1"})) == []
    assert not first.by_key


def test_a_drift_from_one_slowed_uplink_names_that_port() -> None:
    (one_port,) = decided([drift("lf-g1-r3", ["swp65"])])
    assert (one_port.root_cause["switch"], one_port.root_cause["port"]) == ("lf-g1-r3", "swp65")
    (two,) = decided([drift("lf-g1-r3", ["swp65", "swp66"])])
    assert two.root_cause["port"] is None  # two uplinks: the switch is the place


def test_a_lost_leaf_trips_the_circuit_breaker() -> None:
    obs = Observation(frozenset(), (), known=True)
    inc = one([stale("lf-g1-r2", peer_links_up=0, peer_links_down=64)], obs=obs)
    assert len(inc.action_hosts) == 64
    assert (inc.action, inc.needs_review, inc.severity) == ("observe", True, "critical")
    assert "circuit breaker" in inc.reason
    permissive = ActionPolicy(max_drain_hosts=100, max_drain_fraction=1.0)
    assert one([stale("lf-g1-r2", peer_links_up=0, peer_links_down=64)], obs=obs, policy=permissive).action == "drain"


@pytest.mark.parametrize(
    ("servers", "policy", "limit"),
    [
        (64, ActionPolicy(), 1),  # 1 % of 64 is under one host: one host may still be drained
        (2048, ActionPolicy(), 8),  # 16K GPUs: 1 % is 20, the host cap of 8 binds
        (400, ActionPolicy(), 4),
        (2048, ActionPolicy(max_drain_hosts=0), 0),  # never drain
    ],
)
def test_drain_limit(servers: int, policy: ActionPolicy, limit: int) -> None:
    assert policy.drain_limit(servers) == limit


# --- properties ----------------------------------------------------------------------------------

POOL = [
    outage("lf-g1-r3", "swp65"),
    drift("lf-g1-r3", ["swp65"]),
    asymmetry(3, "lf-g1-r3", ["swp65"]),
    outage("lf-g1-r1", "swp2"),
    flapping("lf-g1-r1", "swp2"),
    pfc("lf-g1-r2", "swp65"),
    ecmp("lf-g1-r2"),
    miswire("srv-g1-003", 3, actual="lf-g1-r6", expected="lf-g1-r3"),
    miswire("srv-g1-003", 6, actual="lf-g1-r3", expected="lf-g1-r6"),
    stale("sp-r4-1"),
    switch_flapping("sp-r4-1"),
    straggler(4),
    straggler(7),
    drift("lf-g1-r8", ["swp100"]),
    stale("lf-g1-r5", peer_links_up=0, peer_links_down=64),
]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(POOL), max_size=len(POOL)), st.randoms(use_true_random=False))
def test_every_finding_lands_in_exactly_one_incident_whatever_the_order(
    findings: list[Finding], rnd: random.Random
) -> None:
    a = decided(findings)
    shuffled = list(findings)
    rnd.shuffle(shuffled)
    b = decided(shuffled)
    members = [f.fingerprint for i in a for f in i.findings]
    assert sorted(members) == sorted({f.fingerprint for f in findings})
    assert {(i.key, i.rule, i.action, frozenset(f.fingerprint for f in i.findings)) for i in a} == {
        (i.key, i.rule, i.action, frozenset(f.fingerprint for f in i.findings)) for i in b
    }
    limit = ActionPolicy().drain_limit(len(FABRIC.servers))
    for i in a:
        assert i.action != "drain" or len(i.action_hosts) <= limit
        assert (i.severity == "critical") == (i.action != "observe" or i.needs_review) or i.kind == "collection"


@settings(max_examples=60, deadline=None)
@given(st.sets(st.sampled_from(sorted(FABRIC.switches)), min_size=1))
def test_nothing_fabricmon_cannot_observe_is_ever_drained_or_checkpointed(silent: set[str]) -> None:
    obs = Observation(frozenset(silent), ("collector silent",), known=True)
    for inc in decided([stale(s, peer_links_up=0, peer_links_down=64) for s in sorted(silent)], obs=obs):
        assert inc.kind == "collection" and inc.action == "observe" and not inc.action_hosts


def test_a_16k_leaf_loss_never_drains_more_than_eight_hosts() -> None:
    f = Finding(
        "stale_switch", "lf-g3-r5", "critical", "silent", blast_radius(BIG, switches=["lf-g3-r5"]),
        {"peer_links_up": 0, "peer_links_down": 64},
    )  # fmt: skip
    inc = decide(correlate([f], BIG, Observation(known=True))[0], BIG)
    assert inc.action == "observe" and inc.needs_review and len(inc.action_hosts) == 64


def test_many_links_of_one_switch_down_at_once_are_the_switch_before_anything_names_it() -> None:
    links = [outage("lf-g1-r4", f"swp{i}", critical=False, down_for=2.0) for i in range(65, 129)]
    inc = one(links)
    assert inc.key == "switch:sp-r4-1" and inc.root_cause["switch"] == "sp-r4-1"
    assert inc.action == "checkpoint"  # all of lf-g1-r4's uplinks: the rail's cross-leaf traffic stops
    three = decided(links[:3])
    assert len(three) == 3


@pytest.mark.parametrize(("loss", "action"), [(0.05, "checkpoint"), (0.049, "observe"), (float("nan"), "observe")])
def test_the_efficiency_model_decides_capacity_incidents(loss: float, action: str) -> None:
    assert one([drift("lf-g1-r8", ["swp100"], loss=loss)]).action == action


# --- what a review found: paths around the breaker, flip-flops, blind spots ----------------------


def test_a_drain_after_a_checkpoint_takes_its_own_hosts_and_the_breaker_sees_the_union() -> None:
    every = tuple(f"srv-g1-{i:03d}" for i in range(1, 65))
    after = merge_decision(Held("checkpoint", every, False), Held("drain", ("srv-g1-003",), False), drain_limit=1)
    assert after == Held("drain", ("srv-g1-003",), False)
    grown = merge_decision(after, Held("drain", ("srv-g1-004",), False), drain_limit=1)
    assert grown.action == "observe" and grown.needs_review and grown.hosts == ("srv-g1-003", "srv-g1-004")
    # actions never fall while open; review, once needed, stays
    assert merge_decision(after, Held("observe", (), False), drain_limit=1) == after
    assert merge_decision(grown, Held("drain", ("srv-g1-003",), False), drain_limit=1).needs_review


def test_four_flapping_server_cables_of_one_leaf_are_its_incident_and_a_person_decides() -> None:
    inc = one([flapping("lf-g1-r1", f"swp{i}") for i in range(2, 6)])
    assert inc.key == "switch:lf-g1-r1"
    assert (inc.action, inc.needs_review) == ("observe", True)
    assert inc.action_hosts == ("srv-g1-002", "srv-g1-003", "srv-g1-004", "srv-g1-005")
    roomy = ActionPolicy(max_drain_hosts=8, max_drain_fraction=1.0)
    assert one([flapping("lf-g1-r1", f"swp{i}") for i in range(2, 6)], policy=roomy).action == "drain"


def test_a_leaf_whose_every_uplink_is_down_is_gone_before_it_is_called_stale() -> None:
    inc = one([switch_outage("lf-g1-r2", [("lf-g1-r2", f"swp{i}") for i in range(65, 129)])])
    assert inc.key == "switch:lf-g1-r2" and inc.needs_review and len(inc.action_hosts) == 64


def test_a_slowed_uplink_and_a_server_cable_on_one_leaf_are_two_incidents() -> None:
    incidents = {i.key: i for i in decided([outage("lf-g1-r1", "swp3"), drift("lf-g1-r1", ["swp70"], loss=0.2)])}
    assert set(incidents) == {"link:lf-g1-r1:swp3", "link:lf-g1-r1:swp70"}
    assert incidents["link:lf-g1-r1:swp3"].action == "drain"
    assert incidents["link:lf-g1-r1:swp70"].action == "checkpoint"


def test_a_server_link_back_up_after_a_fatal_outage_drains_as_while_it_was_down() -> None:
    back = outage("lf-g1-r1", "swp2", down_now=False, critical=False)
    back = replace(back, details={**back.details, "longest_completed_s": 12.0, "fatal_outage_s": 7.0})
    assert one([back]).action == "drain"


def test_findings_read_from_switches_we_cannot_observe_are_the_collection_incident() -> None:
    obs = Observation(frozenset({"lf-g1-r1"}), ("collector h:1 silent for 9 s",), known=True)
    inc = one([outage("lf-g1-r1", "swp2"), stale("lf-g1-r1")], obs=obs)
    assert inc.kind == "collection" and inc.action == "observe"
    starting = Observation(frozenset(), (), known=True, starting=frozenset({"lf-g1-r1"}))
    assert decided([stale("lf-g1-r1")], obs=starting) == []


def test_only_incidents_that_ask_nothing_wait_for_confirmation() -> None:
    now = datetime(2026, 12, 1, tzinfo=UTC)
    uplink, nic = decided([outage("lf-g1-r3", "swp65")]), decided([flapping("lf-g1-r1", "swp2")])
    first = Waits()
    assert hold_unconfirmed(uplink, first, now, 10.0)[0].pending
    assert not hold_unconfirmed(uplink, first, now + timedelta(seconds=10), 10.0)[0].pending
    assert not hold_unconfirmed(nic, Waits(), now, 10.0)[0].pending  # a drain is never held


def test_a_few_switches_late_in_our_own_pipeline_are_not_judged_many_are_collection() -> None:
    obs = Observation(frozenset(), (), known=True)
    late = [replace(stale(s), details={**stale(s).details, "state": "connected"}) for s in sorted(FABRIC.switches)]
    assert decided(late[:1], obs=obs) == []  # one of 20: not the switch's fault, too little to page
    many = one(late[:4], obs=obs)
    assert many.kind == "collection" and many.action == "observe" and many.root.details["lag_only"]
    first = Waits()
    assert hold_unconfirmed([many], first, datetime(2026, 12, 1, tzinfo=UTC), 10.0)[0].pending


def test_a_rebooted_spines_last_links_seen_late_from_one_superspine_stay_the_spines_incident() -> None:
    # Round 1: sp-r4-1 reboots, every link of it down (named by the lower-tier end). A later round,
    # the spine back up: only one superspine, polled late, still has its links to the spine down in
    # the window. Alone they are 16 of that superspine's 128 links and 16 of the spine's 128: a tie
    # the higher tier takes, so a switch incident of the superspine, a second one.
    spine_links = [p for p in FABRIC.ports("sp-r4-1") if p.peer is not None]
    every = [outage(*end) for p in spine_links if (end := link_end(FABRIC, "sp-r4-1", p.name)) is not None]
    first = one([stale("sp-r4-1"), *every])
    assert first.key == "switch:sp-r4-1" and len(first.links) == len(spine_links)
    late = [outage("sp-r4-1", p.name, down_now=False) for p in spine_links if p.peer and p.peer.node == "ssp-2"]
    alone = one(late)
    assert alone.key == "switch:ssp-2"  # without the memory: a second incident
    held = held_links([memory_of(first, 1)])
    (again,) = decide_all(correlate(late, FABRIC, held=held), FABRIC)
    assert (again.key, again.fingerprint) == (first.key, first.fingerprint)
    assert set(again.links) < set(first.links) and again.action == "observe"
    # an outage of a link the firing spine incident does not hold is its own incident
    (other,) = decide_all(correlate([outage("lf-g1-r3", "swp65")], FABRIC, held=held), FABRIC)
    assert other.key == "link:lf-g1-r3:swp65"


def test_one_link_of_a_firing_switch_incident_is_its_own_incident_with_its_own_action() -> None:
    # A leaf rebooted (every link of it held by its firing incident); later one server cable
    # flaps: that host is drained, as without the memory, not folded into the leaf's observe.
    links = [p for p in FABRIC.ports("lf-g1-r1") if p.peer is not None]
    leaf = one([stale("lf-g1-r1"), *(outage(*e) for p in links if (e := link_end(FABRIC, "lf-g1-r1", p.name)))])
    held = held_links([memory_of(leaf, 1)])
    assert "lf-g1-r1:swp2" in held["switch:lf-g1-r1"]
    (flap,) = decide_all(correlate([flapping("lf-g1-r1", "swp2")], FABRIC, held=held), FABRIC)
    assert flap.key == "link:lf-g1-r1:swp2" and (flap.action, flap.action_hosts) == ("drain", ("srv-g1-002",))
    (short,) = decide_all(
        correlate([outage("lf-g1-r1", "swp2", down_for=2.0, critical=False)], FABRIC, held=held), FABRIC
    )
    assert short.key == "link:lf-g1-r1:swp2" and short.pending


def test_only_firing_switch_incidents_remembered_with_their_links_are_held() -> None:
    links = ("lf-g1-r4:swp65",)
    assert held_links([
        IncidentMemory(1, "switch:sp-r4-1", switch_links=links),
        IncidentMemory(2, "link:lf-g1-r4:swp65", switch_links=links),  # not a switch's
        IncidentMemory(3, "switch:sp-r2-1"),
    ]) == {"switch:sp-r4-1": frozenset(links)}  # fmt: skip


def test_an_incident_is_remembered_by_its_storms_ports_and_a_switch_by_its_links() -> None:
    storm = one([pfc("lf-g1-r2", "swp65")])
    assert memory_of(storm, 7) == IncidentMemory(7, storm.key, tuple(sorted(storm.root.details["affected_ports"])), ())
    links = [p for p in FABRIC.ports("lf-g1-r1") if p.peer is not None]
    leaf = one([stale("lf-g1-r1"), *(outage(*e) for p in links if (e := link_end(FABRIC, "lf-g1-r1", p.name)))])
    mem = memory_of(leaf, 8)
    assert mem.incident_key == "switch:lf-g1-r1" and mem.switch_links == leaf.links and not mem.storm_ports


def test_a_superspine_seeing_a_rebooting_spines_uplinks_drop_is_the_spines_victim() -> None:
    spine_up = [p for p in FABRIC.ports("sp-r4-1") if p.direction == "up" and p.peer is not None]
    ssp = spine_up[0].peer.node  # type: ignore[union-attr]
    to_ssp = [(ssp, p.peer.port) for p in spine_up if p.peer is not None and p.peer.node == ssp]
    victim = Finding(
        "switch_flapping", ssp, "warning", f"{ssp} dropped ports", links_scope(FABRIC, to_ssp, [ssp]),
        {"port_count": len(to_ssp)},
    )  # fmt: skip
    links = [("lf-g1-r4", f"swp{i}") for i in range(65, 129)]
    inc = one([stale("sp-r4-1"), switch_outage("sp-r4-1", links), victim])
    assert inc.key == "switch:sp-r4-1" and victim in inc.symptoms
