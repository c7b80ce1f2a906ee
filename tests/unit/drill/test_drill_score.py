"""The drill's scorer on hand-made truth and incidents, and the campaign it draws."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drill.campaign import BENIGN_KINDS, FAULT_KINDS, footprints_meet, miswire_roots, plan_campaign
from drill.score import Injected, Seen, percentile, score, seen_from
from fabric.model import FabricParams
from fabric.topology import build_aipod

CABLE = frozenset({("lf-g1-r4", "et-0/0/3:0"), ("srv-g1-004", "mlx5_3")})
LINK = Injected("f1", "link_down", False, 10.0, 40.0, frozenset({"lf-g1-r4", "srv-g1-004"}), CABLE,
                frozenset({"srv-g1-004"}), frozenset({"drain"}))  # fmt: skip
UPLINK = Injected("f2", "link_down", False, 12.0, 40.0, frozenset({"lf-g2-r1", "sp-r1-3"}),
                  frozenset({("lf-g2-r1", "Ethernet1/33"), ("sp-r1-3", "Ethernet2/1")}), frozenset(),
                  frozenset({"observe", "checkpoint"}))  # fmt: skip
FLAP_ONCE = Injected("b1", "flap_once", True, 50.0, 52.0, frozenset({"lf-g1-r2", "srv-g1-007"}), must_detect=False)
MISWIRE = Injected("f3", "miswire", False, 60.0, 80.0, frozenset({"srv-g1-009", "lf-g1-r2", "lf-g1-r5"}),
                   frozenset({("srv-g1-009", "rail:2")}), frozenset({"srv-g1-009"}), frozenset({"drain"}))  # fmt: skip


def seen(fp: str, rule: str, root: dict[str, Any], fired: float, *, actions: tuple[tuple[str, tuple[str, ...]], ...]
         = (("observe", ()),), resolved: float | None = None, places: set[str] | None = None) -> Seen:  # fmt: skip
    at = places if places is not None else {v for k, v in root.items() if k in ("switch", "server") and v}
    return Seen(fp, fp, rule, f"{rule} at {root}", root, frozenset(at), fired, resolved, len(actions), actions)


def drained(*hosts: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return (("drain", hosts), ("drain", hosts))


def test_a_fault_found_at_its_port_with_its_action_is_precise_recalled_and_localized() -> None:
    link = seen("a", "link_outage", {"switch": "lf-g1-r4", "port": "et-0/0/3:0", "server": "srv-g1-004"}, 17.5,
                actions=drained("srv-g1-004"), resolved=44.0)  # fmt: skip
    s = score([LINK], [link], grace_s=6)
    assert (s.precision, s.recall, s.localization) == (1.0, 1.0, 1.0)
    assert s.detection_s == [7.5] and s.resolution_s == [4.0] and s.deliveries_per_fault == 2
    assert s.false_actions == s.missed_actions == s.misses == s.false_incidents == []
    assert s.pairs == {"f1": "a"}


def test_each_fault_kind_is_figured_apart() -> None:
    link = seen("a", "link_outage", {"switch": "lf-g1-r4", "port": "et-0/0/3:0", "server": "srv-g1-004"}, 17.5,
                actions=drained("srv-g1-004"), resolved=44.0)  # fmt: skip
    drift = seen("b", "oversubscription_drift", {"switch": "lf-g2-r1", "port": None}, 22.0)
    s = score([LINK, UPLINK, MISWIRE], [link, drift], grace_s=6)
    down, miswire = s.by_kind["link_down"], s.by_kind["miswire"]
    assert (down.faults, down.detected, down.must_detect, down.localized) == (2, 2, 2, 1)
    assert down.detection_s == [7.5, 10.0] and down.deliveries == 3
    assert (miswire.faults, miswire.detected, miswire.detection_s) == (1, 0, [])
    assert sum(k.detected for k in s.by_kind.values()) == s.detected


def test_either_end_of_the_cable_localizes_it_and_the_switch_alone_does_not() -> None:
    far_end = seen("a", "link_outage", {"switch": "sp-r1-3", "port": "Ethernet2/1"}, 15.0)
    assert score([UPLINK], [far_end], grace_s=6).localization == 1.0
    just_the_switch = seen("b", "oversubscription_drift", {"switch": "lf-g2-r1", "port": None}, 15.0)
    s = score([UPLINK], [just_the_switch], grace_s=6)
    assert s.recall == 1.0 and s.localization == 0.0  # found (it touches the place), not localized


def test_a_misplaced_root_cause_is_found_but_not_localized() -> None:
    # the right leaf, the wrong port: the incident touches the fault, its root names another cable
    wrong = seen("a", "link_outage", {"switch": "lf-g1-r4", "port": "et-0/0/9:0", "server": "srv-g1-010"}, 16.0,
                 actions=drained("srv-g1-010"))  # fmt: skip
    s = score([LINK], [wrong], grace_s=6)
    assert s.recall == 1.0 and s.precision == 1.0 and s.localization == 0.0
    # and its drain names a host the fault never touched: a false drain
    assert s.false_drains == 1 and "srv-g1-010" in s.false_actions[0].detail


def test_a_second_incident_for_one_fault_costs_precision() -> None:
    first = seen("a", "pfc_storm", {"switch": "lf-g1-r4", "port": "et-0/0/3:0"}, 14.0,
                 actions=(("checkpoint", ()),))  # fmt: skip
    second = seen("b", "pfc_storm", {"switch": "lf-g1-r4", "port": "et-0/0/3:0"}, 20.0,
                  actions=(("checkpoint", ()),))  # fmt: skip
    storm = Injected("f1", "pfc_storm", False, 10.0, 40.0, LINK.places, CABLE, frozenset(), frozenset({"checkpoint"}))
    s = score([storm], [first, second], grace_s=6)
    assert s.recall == 1.0 and s.precision == 0.5
    (dup,) = s.false_incidents
    assert (dup.what, dup.event, dup.incident) == ("duplicate", "f1", "b")
    assert s.false_checkpoints == 0  # the duplicate's checkpoint is one the fault justifies


def test_an_incident_during_a_benign_event_is_false_and_so_are_its_actions() -> None:
    stray = seen("a", "link_flapping", {"switch": "lf-g1-r2", "port": "Ethernet8", "server": "srv-g1-007"}, 51.0,
                 actions=drained("srv-g1-007"))  # fmt: skip
    s = score([FLAP_ONCE], [stray], grace_s=6)
    assert s.faults == 0 and s.benign == 1 and s.precision == 0.0 and s.recall == 1.0
    assert [(f.what, f.event) for f in s.false_incidents] == [("false_incident", "b1")]
    assert s.false_drains == 1 and s.false_actions[0].detail.endswith("on benign b1")


def test_an_incident_outside_every_window_or_place_matches_nothing() -> None:
    late = seen("a", "link_outage", {"switch": "lf-g1-r4", "port": "et-0/0/3:0"}, 40.0 + 6.5)
    elsewhere = seen("b", "link_outage", {"switch": "lf-g7-r1", "port": "Ethernet1"}, 20.0,
                     actions=(("checkpoint", ()),))  # fmt: skip
    s = score([LINK], [late, elsewhere], grace_s=6)
    assert s.matched == 0 and s.recall == 0.0 and s.precision == 0.0
    assert [f.event for f in s.misses] == ["f1"] and [f.event for f in s.missed_actions] == ["f1"]
    assert s.false_checkpoints == 1 and s.false_actions[0].detail.endswith("on no injected fault")
    assert score([LINK], [seen("c", "link_outage", dict(late.root), 40.0 + 5.5)], grace_s=6).matched == 1


def test_a_wrong_action_is_a_missed_one_and_a_miswire_localizes_by_server_and_rail() -> None:
    swap = seen("a", "miswire", {"switch": "lf-g1-r5", "port": "Ethernet9", "server": "srv-g1-009", "rail": 2}, 63.0)
    s = score([MISWIRE], [swap], grace_s=6)
    assert s.localization == 1.0 and s.recall == 1.0
    (missed,) = s.missed_actions
    assert missed.event == "f3" and "wanted drain, got observe" in missed.detail


def test_the_fault_it_localizes_wins_when_two_are_on() -> None:
    both = frozenset({"lf-g1-r4", "srv-g1-004", "lf-g2-r1", "sp-r1-3"})
    wide = seen("a", "link_outage", {"switch": "sp-r1-3", "port": "Ethernet2/1"}, 20.0, places=set(both))
    s = score([LINK, UPLINK], [wide], grace_s=6)
    assert s.pairs == {"f2": "a"} and s.localization == 1.0
    assert [f.event for f in s.misses] == ["f1"]


def test_seen_from_deliveries_groups_by_incident_and_skips_the_never_fired() -> None:
    def body(fp: str, action: str, hosts: list[str]) -> dict[str, Any]:
        return {"alert": {"fingerprint": fp, "id": 7, "rule": "link_outage", "summary": "s",
                          "root_cause": {"switch": "lf-g1-r4", "port": "et-0/0/3:0", "server": "srv-g1-004"},
                          "scope": {"switches": ["lf-g1-r4"], "servers": ["srv-g1-004"]}},
                "recommended_action": action, "action_hosts": hosts}  # fmt: skip

    out = seen_from([(12.0, "alert.firing", body("a", "drain", ["srv-g1-004"])),
                     (30.0, "alert.resolved", body("a", "drain", ["srv-g1-004"])),
                     (5.0, "alert.resolved", body("z", "observe", []))])  # fmt: skip
    (a,) = out
    assert (a.fingerprint, a.alert_id, a.fired_s, a.resolved_s, a.deliveries) == ("a", "7", 12.0, 30.0, 2)
    assert a.places == {"lf-g1-r4", "srv-g1-004"} and a.actions[0] == ("drain", ("srv-g1-004",))


def test_a_fingerprint_that_fires_again_after_it_resolved_is_a_new_incident() -> None:
    """A spine rebooted twice: fabricmon's fingerprint names the root cause (as Alertmanager's
    names labels), so the second reboot fires the same one again. It once folded into the first
    incident, and the second reboot counted as missed."""
    root = {"switch": "sp-r1-2", "port": None}

    def d(t: float, event: str, alert_id: int) -> tuple[float, str, dict[str, Any]]:
        alert = {"fingerprint": "fp", "id": alert_id, "rule": "switch_flapping", "root_cause": root}
        return (t, event, {"alert": alert})

    # (an older incident's resolution first; the second incident's escalation keeps its id)
    first, second = seen_from([d(2.0, "alert.resolved", 3), d(33.5, "alert.firing", 7),
                               d(42.0, "alert.resolved", 7), d(50.4, "alert.firing", 9),
                               d(51.0, "alert.firing", 9), d(61.0, "alert.resolved", 9)])  # fmt: skip
    assert (first.fingerprint, first.fired_s, first.resolved_s, first.deliveries) == ("fp", 33.5, 42.0, 2)
    assert (second.fingerprint, second.fired_s, second.resolved_s, second.deliveries) == ("fp#2", 50.4, 61.0, 3)
    reboots = [Injected(f"f{n}", "reboot", False, t, t + 6, frozenset({"sp-r1-2"}), frozenset({("sp-r1-2", None)}))
               for n, t in ((1, 32.0), (2, 49.0))]  # fmt: skip
    s = score(reboots, [first, second], grace_s=6)
    assert s.recall == s.precision == 1.0 and s.pairs == {"f1": "fp", "f2": "fp#2"}


def test_a_swapped_miswire_is_localized_by_either_nic_it_moved() -> None:
    """The simulator swaps cables when the target port is taken: two NICs are then on the wrong
    rail, and fabricmon may name either, by where it landed (its root's rail is the leaf's). Three
    of five such miswires once counted as mislocalized."""
    applied = {"kind": "miswire", "switch": "lf-g2-r3", "port": "et-0/0/21:0", "server": "srv-g2-043", "gpu": 3,
               "to_leaf": "lf-g2-r4", "to_port": "FourHundredGigE0/0/0/42",
               "swapped_with": "srv-g2-043:mlx5_3"}  # fmt: skip
    roots = frozenset({("srv-g2-043", "rail:3")}) | miswire_roots(applied)
    assert roots == {("srv-g2-043", "rail:3"), ("lf-g2-r4", "FourHundredGigE0/0/0/42")}
    fault = Injected("f7", "miswire", False, 10.0, 30.0, frozenset({"srv-g2-043", "lf-g2-r3", "lf-g2-r4"}), roots,
                     frozenset({"srv-g2-043"}), frozenset({"drain"}))  # fmt: skip
    moved = seen("a", "miswire", {"server": "srv-g2-043", "rail": 4, "switch": "lf-g2-r4",
                                  "port": "FourHundredGigE0/0/0/42"}, 14.0, actions=drained("srv-g2-043"))  # fmt: skip
    partner = seen("b", "miswire", {"server": "srv-g2-043", "rail": 3, "switch": "lf-g2-r3", "port": "et-0/0/21:0"},
                   14.0, actions=drained("srv-g2-043"))  # fmt: skip
    elsewhere = seen("c", "miswire", {"server": "srv-g2-043", "rail": 4, "switch": "lf-g2-r4", "port": "Ethernet9"},
                     14.0, actions=drained("srv-g2-043"))  # fmt: skip
    dark = seen("d", "link_outage", {"switch": "lf-g2-r3", "port": "et-0/0/21:0"}, 14.0)  # left empty, no swap
    assert score([fault], [moved], grace_s=6).localization == 1.0
    assert score([fault], [dark], grace_s=6).localization == 0.0
    assert score([fault], [partner], grace_s=6).localization == 1.0
    assert score([fault], [elsewhere], grace_s=6).localization == 0.0
    assert miswire_roots({"kind": "miswire", "server": "srv-g1-001", "gpu": 1}) == frozenset()  # not applied: none


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 95) is None
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0 and percentile([float(i) for i in range(1, 101)], 95) == 95.0


_events = st.lists(
    st.tuples(st.booleans(), st.floats(0, 100), st.floats(0, 30), st.sampled_from(["a", "b", "c"])), max_size=8
)
_incidents = st.lists(st.tuples(st.floats(0, 140), st.sampled_from(["a", "b", "c", "d"]),
                                st.sampled_from(["observe", "drain", "checkpoint"]), st.booleans()),
                      max_size=10)  # fmt: skip


@settings(max_examples=200)
@given(_events, _incidents)
def test_every_incident_is_counted_once_and_figures_are_ratios(events: list[Any], incidents: list[Any]) -> None:
    truth = [Injected(f"e{i}", "k", benign, start, start + length, frozenset({place}), frozenset({(place, None)}),
                      frozenset({place}), frozenset({"drain"}), not benign, {"switch": place})
             for i, (benign, start, length, place) in enumerate(events)]  # fmt: skip
    got = [replace(seen(f"i{i}", "r", {"switch": place}, at, actions=((action, (place,)),)), maintenance=maint)
           for i, (at, place, action, maint) in enumerate(incidents)]  # fmt: skip
    s = score(truth, got, grace_s=5)
    assert s.matched + len(s.false_incidents) + s.maintenance == len(got)
    assert s.maintenance <= sum(i.maintenance for i in got)
    assert len(s.pairs) == s.matched and len(set(s.pairs.values())) == s.matched
    assert s.detected + len(s.misses) == s.must_detect
    for ratio in (s.precision, s.recall, s.localization):
        assert 0.0 <= ratio <= 1.0
    assert all(d >= 0 for d in s.detection_s)


def test_the_campaign_is_seeded_draws_every_kind_and_places_them_on_the_fabric() -> None:
    fabric = build_aipod(FabricParams(gpus=512), naming="mixed")
    spines = [s for s in fabric.switches if s.startswith("sp-")]
    one = plan_campaign(fabric, faults=36, benign=9, seed=7, snmp_switches=spines)
    assert one == plan_campaign(fabric, faults=36, benign=9, seed=7, snmp_switches=spines)
    assert one != plan_campaign(fabric, faults=36, benign=9, seed=8, snmp_switches=spines)
    assert {e.kind for e in one if not e.benign} == set(FAULT_KINDS)
    assert {e.kind for e in one if e.benign} == set(BENIGN_KINDS)
    for e in one:
        spec = e.spec
        if "port" in spec:  # a real port of the switch, by the fabric's own name
            assert spec["port"] in {p.name for p in fabric.ports(spec["switch"])}
        if e.kind == "miswire":
            assert fabric.switches[spec["to_leaf"]].rail != spec["gpu"]
        if "drain" in e.actions:
            assert e.hosts and e.hosts <= set(fabric.servers)
        assert footprints_meet(e, e)
    only = plan_campaign(fabric, faults=6, benign=2, seed=7, snmp_switches=spines, kinds=("speed_degrade", "pfc_burst"))
    assert sorted(e.kind for e in only) == ["pfc_burst"] * 2 + ["speed_degrade"] * 6
    with pytest.raises(ValueError, match="unknown event kind"):
        plan_campaign(fabric, faults=1, benign=0, seed=7, kinds=("reboots",))
    with pytest.raises(ValueError, match="name no benign kind"):
        plan_campaign(fabric, faults=1, benign=1, seed=7, kinds=("reboot",))
    restarts = [e for e in one if e.kind in ("collector_restart", "db_blip")]
    assert {e.kind for e in restarts} == {"collector_restart", "db_blip"}
    assert all(footprints_meet(r, e) for r in restarts for e in one)


def test_an_incident_naming_the_cable_wins_over_an_earlier_rail_wide_one() -> None:
    # a rail straggler whose scope holds the server fires first; the storm's own incident later
    storm = Injected("f1", "pfc_storm", False, 10.0, 40.0, LINK.places, CABLE, frozenset(), frozenset({"checkpoint"}))
    rail = seen("a", "rail_load_straggler", {"rail": 4}, 12.0, places={"srv-g1-004", "lf-g1-r4", "sp-r4-1"})
    own = seen("b", "pfc_storm", {"switch": "lf-g1-r4", "port": "et-0/0/3:0"}, 16.0, actions=(("checkpoint", ()),))
    s = score([storm], [rail, own], grace_s=6)
    assert s.pairs == {"f1": "b"} and s.localization == 1.0 and s.missed_actions == []
    assert [(f.what, f.incident) for f in s.false_incidents] == [("duplicate", "a")]


def test_an_incident_said_to_be_in_maintenance_is_not_false_but_its_actions_are_judged() -> None:
    reboot = Injected("b1", "planned_reboot", True, 50.0, 70.0, frozenset({"lf-g1-r2", "sp-r2-1"}), must_detect=False)
    announced = Seen("a", "a", "link_outage", "s", {"switch": "sp-r2-1", "port": "Ethernet1"}, frozenset({"sp-r2-1"}),
                     55.0, 75.0, 2, (("observe", ()), ("observe", ())), maintenance=True)  # fmt: skip
    s = score([reboot], [announced], grace_s=6)
    assert (s.incidents, s.maintenance, s.false_incidents, s.precision) == (1, 1, [], 1.0)
    drain = (("drain", ("srv-g1-003",)),)
    drained_anyway = Seen("b", "b", "link_outage", "s", {"switch": "lf-g1-r2", "port": "Ethernet3"},
                          frozenset({"lf-g1-r2"}), 56.0, None, 1, drain, maintenance=True)  # fmt: skip
    s = score([reboot], [drained_anyway], grace_s=6)
    assert s.false_drains == 1 and s.false_actions[0].detail.endswith("on benign b1")


def test_a_maintenance_incident_rooted_on_the_planned_switch_is_not_a_duplicate_of_a_fault_it_touches() -> None:
    # a rebooting spine's scope holds its rail's servers, among them a storm's (drill seed 1, after a db blip)
    reboot = Injected("b5", "planned_reboot", True, 50.0, 63.0, frozenset({"sp-r5-2", "lf-g1-r5"}), must_detect=False,
                      spec={"kind": "reboot", "switch": "sp-r5-2"})  # fmt: skip
    storm = Injected("f20", "pfc_storm", False, 50.0, 62.0, LINK.places | {"srv-g1-012"}, CABLE, frozenset(),
                     frozenset({"checkpoint"}))  # fmt: skip
    own = seen("s", "pfc_storm", {"switch": "lf-g1-r4", "port": "et-0/0/3:0"}, 56.0, actions=(("checkpoint", ()),))
    spine = Seen("m", "m", "link_outage", "s", {"switch": "sp-r5-2", "port": None},
                 frozenset({"sp-r5-2", "lf-g1-r5", "srv-g1-012"}), 52.0, 60.0, 2, (("observe", ()), ("observe", ())),
                 maintenance=True)  # fmt: skip
    s = score([reboot, storm], [spine, own], grace_s=6)
    assert (s.maintenance, s.false_incidents, s.precision, s.pairs) == (1, [], 1.0, {"f20": "s"})
    # not flagged, the same incident is a second one for the storm it touches
    s = score([reboot, storm], [replace(spine, maintenance=False), own], grace_s=6)
    assert [(f.what, f.event) for f in s.false_incidents] == [("duplicate", "f20")]
    # flagged but rooted elsewhere than the planned switch: still a duplicate
    elsewhere = Seen("e", "e", "link_outage", "s", {"switch": "lf-g1-r4", "port": "Ethernet9"},
                     frozenset({"lf-g1-r4"}), 57.0, 60.0, 2, (("observe", ()),), maintenance=True)  # fmt: skip
    s = score([reboot, storm], [own, elsewhere], grace_s=6)
    assert [(f.what, f.incident) for f in s.false_incidents] == [("duplicate", "e")]
    # and never the detection of a fault that went unseen
    s = score([reboot, storm], [spine], grace_s=6)
    assert s.recall == 0.0 and s.maintenance == 1 and [f.what for f in s.misses] == ["miss"]
    # a planned reboot of that switch long before is not this incident's announced work
    earlier = replace(reboot, start_s=0.0, end_s=10.0)
    s = score([earlier, storm], [spine], grace_s=6)
    assert s.pairs == {"f20": "m"} and s.maintenance == 0


def test_seen_from_reads_the_maintenance_flag() -> None:
    body = {"alert": {"fingerprint": "m", "rule": "link_outage", "root_cause": {"switch": "sp-r2-1"}},
            "recommended_action": "observe", "maintenance": True}  # fmt: skip
    (m,) = seen_from([(3.0, "alert.firing", body)])
    assert m.maintenance
