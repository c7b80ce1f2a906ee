"""A drill's campaign: seeded random faults and benign events at places of a fabric.

Every fault kind of the simulator (SPEC §7) is drawn at random places on every tier it applies
to, each with what a correct fabricmon does about it (README, "Actions"):

==================  ==========================  =======================================
kind                place                       acceptable actions (blast radius)
==================  ==========================  =======================================
link_down           a server cable              drain (that server)
link_down           a switch-to-switch cable    observe, checkpoint
link_flap           any cable, until cleared    as link_down
speed_degrade       a switch-to-switch cable    observe, checkpoint
pfc_storm           a leaf's server port        checkpoint
error_burst         any cable                   observe, checkpoint
miswire             a GPU NIC → another rail    drain (that server)
switch_unreachable  any switch                  observe
reboot              a spine or superspine       observe, checkpoint
reboot              a leaf                      observe, checkpoint, drain (its servers)
snmp_slow           an SNMP-polled switch       observe; need not be reported
==================  ==========================  =======================================

Benign events must lead to no checkpoint and no drain (and, ideally, no incident): one flap that
recovers at once, a PFC burst shorter than the storm threshold, a collector restart, a planned
reboot of a switch inside a maintenance window that covers it (its incidents, if any, say
``maintenance`` and observe), a short burst of FEC errors that recovers (``fec_burst``), a dirty
connector (a step of optical loss, then stable: nothing to predict), a database blip (every
fabricmon session to the database cut at once, as a failover or a restart does), a counter clear
(an operator's ``clear counters`` on a switch: every port restarts from 0) and a clock step (a
gNMI switch's clock jumps 5 to 120 s either way, as an NTP step does, and back when it clears;
the larger steps are past the collector's skew bound).

A campaign is a list of :class:`Planned` events; the runner applies them, up to K at once at
unrelated places (:attr:`Planned.footprint` disjoint), and times them.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fabric.model import Fabric, PortInfo, Role

FAULT_KINDS = ("link_down", "link_flap", "speed_degrade", "pfc_storm", "error_burst", "miswire",
               "switch_unreachable", "reboot", "snmp_slow")  # fmt: skip
BENIGN_KINDS = ("flap_once", "pfc_burst", "collector_restart", "planned_reboot", "fec_burst", "dirty_connector",
                "db_blip", "counter_clear", "clock_step")  # fmt: skip
#: The clock steps drawn (seconds): small ones within the collector's skew bound (30 s), large past it.
CLOCK_STEPS_S = (-120.0, -45.0, -5.0, 5.0, 45.0, 120.0)
#: A footprint that conflicts with every other: the event touches the whole fabric.
EVERYWHERE = "*"


@dataclass(frozen=True, slots=True)
class Planned:
    """One event to inject, before it is timed."""

    id: str
    kind: str
    benign: bool
    #: The simulator fault, or for a benign event its own description (``kind`` + fields).
    spec: Mapping[str, Any]
    places: frozenset[str]
    roots: frozenset[tuple[str, str | None]] = frozenset()
    hosts: frozenset[str] = frozenset()
    actions: frozenset[str] = frozenset({"observe"})
    must_detect: bool = True
    #: Switches and servers whose state it changes, with their neighbours: two events whose
    #: footprints meet are never on at once.
    footprint: frozenset[str] = field(default_factory=frozenset)


class _Places:
    """The fabric's cables and switches, by kind, for drawing places."""

    def __init__(self, fabric: Fabric, snmp_switches: Sequence[str]) -> None:
        self.fabric = fabric
        self.switches = sorted(fabric.switches)
        self.leaves = [s for s in self.switches if fabric.switches[s].role == Role.LEAF]
        self.upper = [s for s in self.switches if fabric.switches[s].role != Role.LEAF]
        self.snmp = sorted(snmp_switches)
        self.gnmi = sorted(set(self.switches) - set(self.snmp))
        self.server_ports: list[PortInfo] = []
        self.fabric_ports: list[PortInfo] = []
        for sw in self.switches:
            for p in fabric.ports(sw):
                if p.peer is None:
                    continue
                if p.peer.node in fabric.servers:
                    self.server_ports.append(p)
                elif p.peer.node in fabric.switches and sw < p.peer.node:  # each cable once
                    self.fabric_ports.append(p)

    def neighbours(self, switch: str) -> set[str]:
        return {p.peer.node for p in self.fabric.ports(switch) if p.peer is not None}


def plan_campaign(
    fabric: Fabric,
    *,
    faults: int,
    benign: int,
    seed: int,
    snmp_switches: Sequence[str] = (),
    kinds: Sequence[str] = (),
) -> list[Planned]:
    """``faults`` faults (the kinds in turn, shuffled) and ``benign`` benign events, interleaved.

    ``kinds``: only these fault and benign kinds (empty: all), to replay one class of miss.
    Raises ``ValueError`` for a kind no table here names, or faults (benign events) asked for
    while ``kinds`` names none.
    """
    if unknown := sorted(set(kinds) - set(FAULT_KINDS) - set(BENIGN_KINDS)):
        known = ", ".join((*FAULT_KINDS, *BENIGN_KINDS))
        raise ValueError(f"unknown event kind(s) {', '.join(unknown)} (known: {known})")
    rng = random.Random(seed)
    places = _Places(fabric, snmp_switches)
    fault_pool = [k for k in FAULT_KINDS if (k != "snmp_slow" or places.snmp) and (not kinds or k in kinds)]
    benign_pool = [k for k in BENIGN_KINDS if not kinds or k in kinds]
    for n, pool, what in ((faults, fault_pool, "fault"), (benign, benign_pool, "benign")):
        if n and not pool:
            raise ValueError(f"{n} {what} event(s) asked for, but the kinds given name no {what} kind")
    fault_kinds = [fault_pool[i % len(fault_pool)] for i in range(faults)]
    benign_kinds = [benign_pool[i % len(benign_pool)] for i in range(benign)]
    rng.shuffle(fault_kinds)
    rng.shuffle(benign_kinds)
    out = [_fault(places, rng, kind, f"f{i + 1}") for i, kind in enumerate(fault_kinds)]
    out += [_benign(places, rng, kind, f"b{i + 1}") for i, kind in enumerate(benign_kinds)]
    rng.shuffle(out)
    return out


def _cable(p: PortInfo) -> tuple[frozenset[tuple[str, str | None]], frozenset[str]]:
    """Roots (either end) and places of the cable at ``p``."""
    assert p.peer is not None
    roots = {(p.switch, p.name), (p.peer.node, p.peer.port)}
    return frozenset(roots), frozenset({p.switch, p.peer.node})


def _fault(places: _Places, rng: random.Random, kind: str, id_: str) -> Planned:
    fabric = places.fabric
    if kind in ("link_down", "link_flap", "error_burst"):
        p = rng.choice(places.server_ports if rng.random() < 0.5 else places.fabric_ports)
        return _port_fault(places, p, kind, id_)
    if kind == "speed_degrade":
        return _port_fault(places, rng.choice(places.fabric_ports), kind, id_)
    if kind == "pfc_storm":
        return _port_fault(places, rng.choice(places.server_ports), kind, id_)
    if kind == "miswire":
        server = rng.choice(sorted(fabric.servers))
        rails = [r for _, r in fabric.servers[server].nic_rails()]
        gpu = rng.choice(rails)
        leaf = fabric.leaf_for(server, gpu)
        group = fabric.switches[leaf].group
        others = sorted(s for s in places.leaves if fabric.switches[s].group == group and s != leaf)
        to_leaf = rng.choice(others)
        wire = {"kind": "miswire", "server": server, "gpu": gpu, "to_leaf": to_leaf}
        at = frozenset({server, leaf, to_leaf})
        return Planned(id_, kind, False, wire, at, frozenset({(server, f"rail:{gpu}")}), frozenset({server}),
                       frozenset({"drain"}), footprint=at | _near(places, at))  # fmt: skip
    if kind in ("switch_unreachable", "reboot", "snmp_slow"):
        pool = places.snmp if kind == "snmp_slow" else (places.upper if kind == "reboot" and rng.random() < 0.6
                                                          else places.switches)  # fmt: skip
        sw = rng.choice(pool)
        near = places.neighbours(sw)
        roots: set[tuple[str, str | None]] = {(sw, None)}
        spec: dict[str, Any] = {"kind": kind, "switch": sw}
        hosts: frozenset[str] = frozenset()
        actions = frozenset({"observe"})
        must = True
        if kind == "reboot":
            spec["boot_s"] = 5
            for p in fabric.ports(sw):  # its links, seen down from either end
                if p.peer is not None:
                    roots |= {(sw, p.name), (p.peer.node, p.peer.port)}
            is_leaf = fabric.switches[sw].role == Role.LEAF
            hosts = frozenset(fabric.servers_on(sw)) if is_leaf else frozenset()
            actions = frozenset({"observe", "checkpoint", "drain"} if is_leaf else {"observe", "checkpoint"})
        elif kind == "snmp_slow":
            spec["delay_s"] = 1.0
            must = False
        return Planned(id_, kind, False, spec, frozenset({sw} | (near if kind == "reboot" else set())),
                       frozenset(roots), hosts, actions, must, frozenset({sw} | near))  # fmt: skip
    raise ValueError(f"unknown fault kind {kind!r}")


def _port_fault(places: _Places, p: PortInfo, kind: str, id_: str) -> Planned:
    fabric = places.fabric
    assert p.peer is not None
    roots, at = _cable(p)
    spec: dict[str, Any] = {"kind": kind, "switch": p.switch, "port": p.name}
    server = p.peer.node if p.peer.node in fabric.servers else None
    if kind == "link_flap":
        spec["period_s"] = 2.0
    elif kind == "pfc_storm":
        spec["rate_pps"] = 20000
    elif kind == "error_burst":
        spec["rate_pps"] = 500
    elif kind == "speed_degrade":
        spec["speed_gbps"] = max(1, p.speed_gbps // 2)
    if server is not None and kind in ("link_down", "link_flap"):
        hosts, actions = frozenset({server}), frozenset({"drain"})
    elif kind == "pfc_storm":
        hosts, actions = frozenset(), frozenset({"checkpoint"})
    else:
        hosts, actions = frozenset(), frozenset({"observe", "checkpoint"})
    return Planned(id_, kind, False, spec, at, roots, hosts, actions, footprint=at | _near(places, at))


def _near(places: _Places, at: frozenset[str]) -> frozenset[str]:
    return frozenset(n for s in at if s in places.fabric.switches for n in places.neighbours(s))


def _benign(places: _Places, rng: random.Random, kind: str, id_: str) -> Planned:
    if kind in ("collector_restart", "db_blip"):
        return Planned(id_, kind, True, {"kind": kind}, frozenset({EVERYWHERE}), must_detect=False,
                       footprint=frozenset({EVERYWHERE}))  # fmt: skip
    if kind in ("planned_reboot", "counter_clear", "clock_step"):
        sw = rng.choice(places.gnmi if kind == "clock_step" and places.gnmi else places.switches)
        near = frozenset(places.neighbours(sw))
        spec: dict[str, Any] = {"kind": "reboot", "switch": sw, "boot_s": 5}
        if kind == "counter_clear":
            spec = {"kind": "counter_clear", "switch": sw}
        elif kind == "clock_step":
            spec = {"kind": "clock_step", "switch": sw, "step_s": rng.choice(CLOCK_STEPS_S)}
        return Planned(id_, kind, True, spec, frozenset({sw}) | near, must_detect=False,
                       footprint=frozenset({sw}) | near)  # fmt: skip
    p = rng.choice(places.server_ports)
    _, at = _cable(p)
    if kind == "flap_once":
        spec = {"kind": "link_flap", "switch": p.switch, "port": p.name, "period_s": 1.0, "count": 1}
    elif kind == "pfc_burst":
        spec = {"kind": "pfc_storm", "switch": p.switch, "port": p.name, "rate_pps": 20000}
    elif kind == "fec_burst":
        spec = {"kind": "fec_burst", "switch": p.switch, "port": p.name, "duration_s": 10.0}
    elif kind == "dirty_connector":
        spec = {"kind": "dirty_connector", "switch": p.switch, "port": p.name, "loss_db": 2.0}
    else:
        raise ValueError(f"unknown benign kind {kind!r}")
    return Planned(id_, kind, True, spec, at, must_detect=False, footprint=at | _near(places, at))


def miswire_roots(applied: Mapping[str, Any]) -> frozenset[tuple[str, str | None]]:
    """Where a miswire, as the simulator applied it, put the NIC: (``to_leaf``, ``to_port``). An
    incident naming it names the fault, as does one naming the server and the rail it is on
    (``roots`` of the planned event), which a swapped partner landing on the designed port also
    names. The designed port itself is no root: left dark, it is the fault's symptom."""
    leaf, port = applied.get("to_leaf"), applied.get("to_port")
    return frozenset({(str(leaf), str(port))}) if leaf and port else frozenset()


def footprints_meet(a: Planned, b: Planned) -> bool:
    """Whether two events may not be on at once."""
    return EVERYWHERE in a.footprint or EVERYWHERE in b.footprint or bool(a.footprint & b.footprint)
