"""Incidents: one evaluation's findings grouped by root cause, the unit alerts and actions work in.

A fault shows in many checks at once (a downed uplink is a ``link_outage``, an
``oversubscription_drift`` on its leaf and a ``rail_capacity_asymmetry`` on its rail). Sending
each as an alert floods receivers with mixed advice; :func:`correlate` turns the findings into
incidents instead: one per root cause, with the findings it explains as symptoms. It is pure
(no I/O) and deterministic: the same findings give the same incidents, whatever their order.

An incident is identified by its **place** (``key``), not by its rule, so it keeps its id while
the evidence changes (a cable first seen down, then flapping, is one incident):

=====================  ==========================================  ============================
place (``key``)        root findings                               symptoms it can take
=====================  ==========================================  ============================
``collection``         fabricmon's own collection is broken: a     ``stale_switch`` and
                       collector silent, ingest behind, a spool    ``ports_unreported`` of the
                       replaying (:mod:`analyzer.collection`),     switches it cannot observe
                       switches silent that their collector still
                       calls connected, or (no heartbeats at all)
                       half the fabric silent at once
``switch:NAME``        ``stale_switch``, ``switch_flapping``,      link findings on its links;
                       a switch-level ``link_outage``              drift, rail, ECMP findings on
                                                                   it, its neighbours, its rail
``link:SW:PORT``       ``link_outage``, ``link_flapping``,         drift on either end, its
                       ``error_rate``, ``pfc_storm`` (the storm's  rail's asymmetry and load,
                       origin link), ``link_degrading``, named     ECMP on the switches touched
                       by the lower-tier end
``miswire:SERVER``     ``miswire`` of server NICs; the GPUs of     the rails' load and asymmetry
                       one server, or one leaf pair, are one
``capacity:NAME``      ``oversubscription_drift`` that no link or  its rail's asymmetry and load
                       switch incident explains (a slowed uplink)
``RULE:KEY``           any other finding no incident explains      —
=====================  ==========================================  ============================

A link incident whose link ends on a switch that has a switch incident joins that incident
(a rebooting spine's links); while a switch incident fires, several links it held, gathered
again, are its own whichever end names them (its last links back up, seen late from one end),
remembered in its alert like a firing PFC storm's ports; a single link is never taken so.
A symptom that several incidents could explain goes to one: the incident at its own place
first, then a switch incident, a link, a miswire, a capacity incident; ties by key. Roots
never merge through a shared symptom, so two faults on one rail stay two incidents. Silence
of switches whose collector is still starting or catching up is not judged at all. Severity
and action are decided per incident by :mod:`analyzer.actions`; :func:`analyzer.incident_memory.hold_unconfirmed` keeps
incidents of symptoms only pending until their root had time to show.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from analyzer.evidence import CapacityEvidence, MiswireEvidence, StormEvidence
from analyzer.findings import SEVERITY_ORDER, Finding
from analyzer.incident_model import Incident, Observation, place_of
from analyzer.links import link_end
from analyzer.rules import CUTS_PATH, KIND_ORDER, LINK_RULES, SWITCH_RULES, evidence_of, explains, precedence
from analyzer.silence import collection as _collection_findings
from fabric.model import TIER, Endpoint, Fabric

#: This many links of one switch down or flapping at once are the switch's fault (the default of
#: ``thresholds.switch_flap_min_ports``, the flap correlation's own bar).
SWITCH_LINKS = 4


@dataclass(slots=True)
class _Group:
    key: str
    kind: str
    findings: list[Finding]
    #: Switches at the incident's own place.
    own: set[str]
    #: Switches whose findings it explains beyond its own (a switch incident's neighbours).
    near: set[str]
    rails: set[int]
    #: Links (naming ends) it holds.
    links: set[tuple[str, str]] = field(default_factory=set)


def correlate(
    findings: Sequence[Finding],
    fabric: Fabric,
    observation: Observation | None = None,
    switch_links: int = SWITCH_LINKS,
    storms: Mapping[str, frozenset[str]] | None = None,
    held: Mapping[str, frozenset[str]] | None = None,
) -> list[Incident]:
    """Group ``findings`` into incidents (see the module docstring). ``switch_links`` links of one
    switch down or flapping at once are that switch (``thresholds.switch_flap_min_ports``).
    ``storms``: the incidents with PFC storms still firing, incident key -> the ports their pause
    trees hold (:func:`ongoing_storms`); a storm finding whose origin one of them pauses is that
    storm, wherever its origin is named this round. ``held``: the firing switch incidents, key ->
    the links they hold (:func:`held_links`); ``switch_links`` or more links gathered into a
    switch go to the firing one that holds them all, whichever end this round would name (a
    rebooted spine's last links back up, seen late from one superspine). Severity and action are
    not set here: :func:`analyzer.actions.decide` does that for each."""
    observation = observation or Observation()
    storms = storms or {}
    held = held or {}
    rest = _dedupe(findings)
    groups: list[_Group] = []
    ours, rest = _collection_findings(rest, fabric, observation)
    if ours is not None:
        groups.append(_Group("collection", "collection", ours, {f.key for f in ours[1:]}, set(), set()))
    switch_groups = _switch_groups([f for f in rest if _is_switch_root(f)], fabric)
    rest = [f for f in rest if not _is_switch_root(f)]
    link_groups: dict[str, _Group] = {}
    miswires: list[Finding] = []
    derived: list[Finding] = []
    for f in rest:
        if f.rule in LINK_RULES:
            _add_link(f, fabric, switch_groups, link_groups, storms)
        elif f.rule == "miswire":
            miswires.append(f)
        else:
            derived.append(f)
    _gather_links(link_groups, switch_groups, fabric, switch_links, held)
    _merge_victims(switch_groups)
    groups += [switch_groups[k] for k in sorted(switch_groups)]
    groups += [link_groups[k] for k in sorted(link_groups)]
    groups += _miswire_groups(miswires, fabric)
    # Drift no root explains is a root of its own (a slowed uplink has no other finding).
    drifts = [f for f in derived if f.rule == "oversubscription_drift"]
    others = [f for f in derived if f.rule != "oversubscription_drift"]
    for f in sorted(drifts, key=_order):
        if (g := _explainer(f, groups, fabric)) is not None:
            g.findings.append(f)
        else:
            groups.append(_capacity_group(f, fabric))
    for f in sorted(others, key=_order):
        if (g := _explainer(f, groups, fabric)) is not None:
            g.findings.append(f)
        else:
            groups.append(_Group(f"{f.rule}:{f.key}", "other", [f], set(), set(), set()))
    return [_incident(g, fabric) for g in groups]


def _order(f: Finding) -> tuple[str, str]:
    return (f.rule, f.key)


def _dedupe(findings: Sequence[Finding]) -> list[Finding]:
    """One finding per fingerprint (the most severe), in a stable order."""
    best: dict[str, Finding] = {}
    for f in findings:
        seen = best.get(f.fingerprint)
        if seen is None or SEVERITY_ORDER[f.severity] > SEVERITY_ORDER[seen.severity]:
            best[f.fingerprint] = f
    return sorted(best.values(), key=_order)


def _is_switch_root(f: Finding) -> bool:
    return f.rule in SWITCH_RULES or (f.rule == "link_outage" and ":" not in f.key)


def _neighbours(fabric: Fabric, switch: str) -> set[str]:
    if switch not in fabric.switches:
        return set()
    return {p.peer.node for p in fabric.ports(switch) if p.peer is not None and p.peer.node in fabric.switches}


def _rails(fabric: Fabric, switches: Iterable[str]) -> set[int]:
    return {r for s in switches if s in fabric.switches and (r := fabric.switches[s].rail) is not None}


def _switch_groups(findings: list[Finding], fabric: Fabric) -> dict[str, _Group]:
    groups: dict[str, _Group] = {}
    for f in findings:
        key = f"switch:{f.key}"
        g = groups.get(key)
        if g is None:
            g = groups[key] = _Group(key, "switch", [], {f.key}, _neighbours(fabric, f.key), _rails(fabric, [f.key]))
        g.findings.append(f)
    return groups


def _link_ports(f: Finding, fabric: Fabric) -> tuple[str, str] | None:
    """The naming end of the link a link finding is about."""
    place = place_of(f, fabric)
    switch, port = place["switch"], place["port"]
    if not isinstance(switch, str) or not isinstance(port, str):
        return None
    return link_end(fabric, switch, port)


def _storm_key(f: Finding, key: str, storms: Mapping[str, frozenset[str]]) -> str:
    """The key of the firing storm ``f`` continues, else ``key``. A storm's origin is named anew
    every round, from samples the two ends of each link took at other instants: while it starts
    and ends, a switch sampled late can leave only the spread on record for a round, whose
    strongest root is then a spine port the firing storm pauses. That is the same storm, not a
    second one. A storm whose origin the firing one does not pause is another storm, even when
    their trees share spine ports (spread trees of one rail do): its own incident, its own hosts."""
    ev = evidence_of(f)
    if not isinstance(ev, StormEvidence) or key in storms:
        return key
    named = {p for p in (ev.origin_port, ev.origin_peer) if p}
    mine = set(ev.affected_ports)
    overlap = [(-len(mine & tree), k) for k, tree in storms.items() if named & tree]
    return min(overlap)[1] if overlap else key  # the one sharing most ports; ties by key


def _add_link(
    f: Finding,
    fabric: Fabric,
    switches: dict[str, _Group],
    links: dict[str, _Group],
    storms: Mapping[str, frozenset[str]],
) -> None:
    end = _link_ports(f, fabric)
    if end is None:
        key = f"{f.rule}:{f.key}"
        links.setdefault(key, _Group(key, "other", [], set(), set(), set())).findings.append(f)
        return
    peer = fabric.peer(Endpoint(*end))
    ends = {end[0]} | ({peer.node} if peer is not None and peer.node in fabric.switches else set())
    for name in sorted(ends):
        if (g := switches.get(f"switch:{name}")) is not None:  # a link of a switch that failed
            g.findings.append(f)
            g.links.add(end)
            return
    key = _storm_key(f, f"link:{end[0]}:{end[1]}", storms)
    g = links.get(key)
    if g is None:
        g = links[key] = _Group(key, "link", [], set(ends), set(), _rails(fabric, ends), {end})
    if f.rule == "pfc_storm":  # the paused switches' ECMP and load are the storm's doing
        g.near |= set(f.scope.switches) - g.own
    g.findings.append(f)


def _gather_links(
    links: dict[str, _Group],
    switches: dict[str, _Group],
    fabric: Fabric,
    needed: int,
    held: Mapping[str, frozenset[str]],
) -> None:
    """Many links of one switch down or flapping at once are that switch's fault, even before the
    flap correlation or the staleness check names it (a rebooting spine's first round). Links a
    firing switch incident holds every one of (``held``) are that incident's, whichever of their
    ends this round's share would name (a rebooted spine's last links, seen late from one
    superspine). A link alone is never gathered: its own incident decides its own action."""
    by_switch: dict[str, list[str]] = {}
    for key, g in links.items():
        if g.kind != "link" or not any(f.rule in CUTS_PATH for f in g.findings):
            continue
        for name in g.own:
            by_switch.setdefault(name, []).append(key)

    def rank(item: tuple[str, list[str]]) -> tuple[float, int, str]:
        name, keys = item
        cabled = sum(p.peer is not None for p in fabric.ports(name)) if name in fabric.switches else 0
        tier = TIER[fabric.switches[name].role] if name in fabric.switches else 0
        # the switch with most of its links in trouble; on a tie the higher tier (parallel links of
        # one leaf to one spine drop together when the spine fails, not when the leaf does)
        return (-len(keys) / max(cabled, 1), -tier, name)

    for name, keys in sorted(by_switch.items(), key=rank):
        keys = [k for k in keys if k in links]
        if len(keys) < needed:
            continue
        named = {k.split(":", 1)[1] for k in keys}  # "link:SW:PORT" -> "SW:PORT"
        holders = sorted(k for k, held_here in held.items() if named <= held_here)
        key = holders[0] if holders else f"switch:{name}"
        name = key.split(":", 1)[1]
        if key not in switches:
            switches[key] = _Group(key, "switch", [], {name}, _neighbours(fabric, name), _rails(fabric, [name]))
        group = switches[key]
        for k in keys:
            taken = links.pop(k)
            group.findings += taken.findings
            group.links |= taken.links


def _merge_victims(switches: dict[str, _Group]) -> None:
    """A switch whose every finding is about its links to one other failed switch is that
    switch's victim (a superspine seeing a rebooting spine's parallel uplinks drop): one incident,
    the one whose trouble reaches further."""
    involved = {k: {s for f in g.findings for s in f.scope.switches} for k, g in switches.items()}
    for key in sorted(switches):
        name = key.split(":", 1)[1]
        others = involved[key] - {name}
        if len(others) != 1:
            continue
        (cause,) = others
        target = f"switch:{cause}"
        if target in switches and target != key and involved[target] - {cause, name}:
            switches[target].findings += switches[key].findings
            switches[target].links |= switches[key].links
            del switches[key]
            involved[target] |= involved.pop(key)


def _miswire_groups(findings: list[Finding], fabric: Fabric) -> list[_Group]:
    """Miswires of one server, or of one leaf pair (a cable swap), are one incident."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    def tokens(f: Finding) -> list[str]:
        ev = evidence_of(f)
        out = [f"server:{ev.server}"] if ev.server is not None else [f"finding:{f.key}"]
        leaves = sorted(ev.leaves) if isinstance(ev, MiswireEvidence) else []
        if len(leaves) == 2 and leaves[0] != leaves[1]:
            out.append("pair:" + "+".join(leaves))
        return out

    for f in findings:
        ts = tokens(f)
        for t in ts[1:]:
            parent[find(t)] = find(ts[0])
    by_root: dict[str, list[Finding]] = {}
    for f in findings:
        by_root.setdefault(find(tokens(f)[0]), []).append(f)
    out: list[_Group] = []
    for members in by_root.values():
        members.sort(key=_order)
        evidence = [evidence_of(f) for f in members]
        servers = sorted({ev.server for ev in evidence if ev.server is not None})
        name = servers[0] if servers else members[0].key
        own = {str(s) for f in members for s in f.scope.switches}
        own |= {x for ev in evidence if isinstance(ev, MiswireEvidence) for x in ev.leaves}
        out.append(_Group(f"miswire:{name}", "miswire", members, own, set(), _rails(fabric, own)))
    return sorted(out, key=lambda g: g.key)


def _capacity_group(f: Finding, fabric: Fabric) -> _Group:
    ev = evidence_of(f)
    lost = ev.uplinks_lost if isinstance(ev, CapacityEvidence) else ()
    if len(lost) == 1 and f.key in fabric.switches:
        end = link_end(fabric, f.key, lost[0])
        peer = fabric.peer(Endpoint(*end))
        ends = {end[0]} | ({peer.node} if peer is not None and peer.node in fabric.switches else set())
        return _Group(f"link:{end[0]}:{end[1]}", "capacity", [f], ends, set(), _rails(fabric, ends), {end})
    return _Group(f"capacity:{f.key}", "capacity", [f], {f.key}, set(), _rails(fabric, [f.key]))


def _explainer(f: Finding, groups: list[_Group], fabric: Fabric) -> _Group | None:
    """The incident that explains a derived finding, by the preference of the module docstring."""
    place = place_of(f, fabric)
    at = place["switch"] if isinstance(place["switch"], str) else None
    ev = evidence_of(f)
    if f.rule in ("rail_capacity_asymmetry", "rail_load_straggler"):
        rail = place["rail"]
        touched = set(f.scope.switches) | ({at} if at else set())
        if isinstance(ev, CapacityEvidence):
            touched |= {p.split(":", 1)[0] for p in ev.lost_ports}
    else:
        rail = None
        touched = {at} if at else set(f.scope.switches)
    links = _lost_links(f, fabric)
    best: tuple[int, int, str] | None = None
    chosen: _Group | None = None
    for g in groups:
        if not explains(g.kind, f.rule):
            continue
        if links & g.links:
            rank = -1  # the very links it counts as lost
        elif links and not (g.kind == "switch" and g.own & {s for e in links for s in _ends(fabric, e)}):
            continue  # it names its lost links, and they are not this incident's
        elif touched & g.own:
            rank = 0
        elif touched & g.near:
            rank = 1
        elif rail is not None and rail in g.rails and (f.rule == "rail_load_straggler" or g.kind != "miswire"):
            rank = 2
        else:
            continue
        score = (rank, KIND_ORDER[g.kind], g.key)
        if best is None or score < best:
            best, chosen = score, g
    return chosen


def _ends(fabric: Fabric, end: tuple[str, str]) -> set[str]:
    """The switches at both ends of the link named by ``end``."""
    peer = fabric.peer(Endpoint(*end))
    return {end[0]} | ({peer.node} if peer is not None and peer.node in fabric.switches else set())


def _lost_links(f: Finding, fabric: Fabric) -> set[tuple[str, str]]:
    """The links (naming ends) a capacity finding counts as lost or slowed."""
    out: set[tuple[str, str]] = set()
    ev = evidence_of(f)
    if not isinstance(ev, CapacityEvidence):
        return out
    for item in ev.lost_ports:
        switch, _, port = item.partition(":")
        if port:
            out.add(link_end(fabric, switch, port))
    if f.rule == "oversubscription_drift":
        out |= {link_end(fabric, f.key, p) for p in ev.uplinks_lost}
    return out


def _incident(g: _Group, fabric: Fabric) -> Incident:
    def own(f: Finding) -> int:  # a storm continued from elsewhere: its own finding is the root
        if f.rule != "pfc_storm" or g.kind != "link":
            return 0
        end = _link_ports(f, fabric)
        return 0 if end is not None and f"link:{end[0]}:{end[1]}" == g.key else 1

    ordered = sorted(g.findings, key=lambda f: (precedence(f.rule), own(f), -SEVERITY_ORDER[f.severity], f.key))
    root, symptoms = ordered[0], tuple(ordered[1:])
    if g.kind == "collection":
        location: dict[str, Any] = dict.fromkeys(("switch", "port", "server", "rail"))
    elif g.kind == "switch":
        name = g.key.split(":", 1)[1]
        sw = fabric.switches.get(name)
        location = {"switch": name, "port": None, "server": None, "rail": sw.rail if sw is not None else None}
    else:
        location = place_of(root, fabric)
    links = tuple(sorted(f"{sw}:{port}" for sw, port in g.links))
    return Incident(key=g.key, kind=g.kind, root=root, symptoms=symptoms, location=location, links=links)
