"""A cable graph turned into a cabling plan: roles, rails and NICs decided, as a version 2 document.

Both ways of getting a real fabric's inventory end here: ``inventory import csv`` (cables from a
spreadsheet) and ``inventory discover`` (cables from the switches' LLDP tables). They hand over
:class:`Cable` records and what they know of the nodes; :func:`plan_document` decides the rest
and says what it could not decide:

* **roles**: a ``--role-pattern ROLE=REGEX`` wins (``server``, ``leaf``, ``spine``,
  ``superspine``); else a known switch with a server neighbour is a leaf, a switch above leaves
  a spine, a switch above spines only a superspine; without known switches (a spreadsheet),
  the cables' "lower tier first" order layers the nodes: a node no cable names second is a
  server, then each node sits one tier above the highest node cabled below it;
* **rails**: a server's rail NICs are numbered in natural order of the NIC names the servers
  use (``mlx5_0`` rail 1 ... ``mlx5_7`` rail 8), the same for every server when they share
  names; a leaf's rail is the one its servers' NICs mostly have (in :mod:`fabric.inventory_v2`);
* **groups**: the sets of servers and leaves that cables join (in :mod:`fabric.inventory_v2`).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fabric.errors import TopologyError
from fabric.model import Role, natural_key

ROLE_NAMES = ("server", "leaf", "spine", "superspine")
_TIER_ROLE = {1: Role.LEAF, 2: Role.SPINE, 3: Role.SUPERSPINE}


@dataclass(frozen=True, slots=True)
class Cable:
    """One cable as a source saw it: two ends and, when known, its speed (Gbit/s)."""

    a_node: str
    a_port: str
    b_node: str
    b_port: str
    speed_gbps: int | None = None
    source: str = ""  # where it came from, for messages: "row 12", "leaf-a01 Ethernet1/1 (LLDP)"


@dataclass(slots=True)
class PlanReport:
    """What the plan could not decide, or found wrong, in words a person acts on."""

    undecided: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"undecided": self.undecided, "problems": self.problems}


def parse_role_patterns(items: Iterable[str]) -> dict[str, re.Pattern[str]]:
    """``["leaf=^lf-", "spine=^sp-"]`` → role → compiled pattern; a bad item is a TopologyError."""
    out: dict[str, re.Pattern[str]] = {}
    for item in items:
        role, sep, pattern = item.partition("=")
        role = role.strip().lower()
        if not sep or role not in ROLE_NAMES:
            roles = ", ".join(ROLE_NAMES)
            raise TopologyError(f"--role-pattern {item!r}: expected ROLE=REGEX with ROLE one of {roles}")
        try:
            out[role] = re.compile(pattern)
        except re.error as exc:
            raise TopologyError(f"--role-pattern {item!r}: not a regular expression: {exc}") from None
    return out


def _pattern_role(name: str, patterns: Mapping[str, re.Pattern[str]]) -> str | None:
    for role in ROLE_NAMES:
        pattern = patterns.get(role)
        if pattern is not None and pattern.search(name):
            return role
    return None


def decide_roles(
    cables: Sequence[Cable],
    patterns: Mapping[str, re.Pattern[str]],
    switches: Iterable[str] | None = None,
    report: PlanReport | None = None,
) -> dict[str, str]:
    """Node → role (``server``/``leaf``/``spine``/``superspine``) for every node the cables name.

    ``switches``, when given, are the nodes known to be switches (the ones discovery polled);
    every other node is a server unless a pattern says otherwise.
    """
    report = report if report is not None else PlanReport()
    neighbours: dict[str, set[str]] = defaultdict(set)
    for c in cables:
        neighbours[c.a_node].add(c.b_node)
        neighbours[c.b_node].add(c.a_node)
    roles = {n: r for n in neighbours if (r := _pattern_role(n, patterns)) is not None}
    if switches is not None:
        known = set(switches)
        for n in neighbours:
            roles.setdefault(n, "server" if n not in known else "")
        tiers = _tiers_from_servers(neighbours, {n for n, r in roles.items() if r == "server"})
    else:
        tiers = _tiers_from_order(cables, report)
    for n in sorted(neighbours, key=natural_key):
        if roles.get(n):
            continue
        tier = tiers.get(n)
        if tier is None or (tier not in _TIER_ROLE and tier != 0):
            why = "not joined to a server" if tier is None else "above tier 3"
            report.undecided.append(f"{n}: no role (it is {why})")
            roles.pop(n, None)
            continue
        roles[n] = "server" if tier == 0 else _TIER_ROLE[tier].value
    return roles


def _tiers_from_servers(neighbours: Mapping[str, set[str]], servers: set[str]) -> dict[str, int]:
    """Each node's distance from the nearest server: servers 0, leaves 1, spines 2, superspines 3."""
    tiers = dict.fromkeys(servers, 0)
    frontier = sorted(servers)
    while frontier:
        nxt: list[str] = []
        for node in frontier:
            for other in neighbours[node]:
                if other not in tiers:
                    tiers[other] = tiers[node] + 1
                    nxt.append(other)
        frontier = nxt
    return tiers


def _tiers_from_order(cables: Sequence[Cable], report: PlanReport) -> dict[str, int]:
    """Layers from "lower tier first": a node no cable names second is tier 0, each other node one
    above the highest node cabled below it. A cycle (a cable written upside down) is reported."""
    below: dict[str, set[str]] = defaultdict(set)
    nodes: set[str] = set()
    for c in cables:
        below[c.b_node].add(c.a_node)
        nodes |= {c.a_node, c.b_node}
    tiers: dict[str, int] = {}
    for start in sorted(nodes, key=natural_key):
        stack: list[tuple[str, bool]] = [(start, False)]
        on_path: set[str] = set()
        while stack:
            node, done = stack.pop()
            if done:
                on_path.discard(node)
                tiers[node] = 1 + max((tiers.get(x, 0) for x in below[node]), default=-1)
                continue
            if node in tiers:
                continue
            if node in on_path:
                report.problems.append(f"{node}: cables written both ways round form a loop through it")
                tiers[node] = 0
                continue
            on_path.add(node)
            stack.append((node, True))
            stack.extend((x, False) for x in below[node] if x not in tiers)
    return tiers


def nic_rails(server_nics: Mapping[str, Iterable[str]]) -> dict[str, dict[str, int]]:
    """Server → {NIC: rail}: NICs numbered in natural order of their names, 1 first.

    When the servers share one set of NIC names, every server numbers from that set (a server
    missing a cable keeps its other NICs on their rails); otherwise each server numbers its own.
    """
    sets = {s: sorted(set(nics), key=natural_key) for s, nics in server_nics.items()}
    names = Counter(n for nics in sets.values() for n in nics)
    widest = max((len(n) for n in sets.values()), default=0)
    shared = sorted(names, key=natural_key)
    if len(shared) == widest:
        rank = {n: k for k, n in enumerate(shared, 1)}
        return {s: {n: rank[n] for n in nics} for s, nics in sets.items()}
    return {s: {n: k for k, n in enumerate(nics, 1)} for s, nics in sets.items()}


def plan_document(
    cables: Sequence[Cable],
    roles: Mapping[str, str],
    *,
    name: str | None = None,
    switch_facts: Mapping[str, Mapping[str, Any]] | None = None,
    default_speed: int | None = None,
    report: PlanReport | None = None,
) -> dict[str, Any]:
    """The version 2 document of ``cables`` with ``roles`` decided (see :func:`decide_roles`).

    ``switch_facts`` adds known fields to switch entries (``nos``, ``mgmt_address``). Cables
    touching a node without a role are left out and reported. The document still goes through
    :func:`fabric.inventory_v2.build_v2`, which checks every cable.
    """
    report = report if report is not None else PlanReport()
    facts = switch_facts or {}
    server_nics: dict[str, list[str]] = defaultdict(list)
    links: list[list[Any]] = []
    for c in cables:
        missing = [n for n in (c.a_node, c.b_node) if n not in roles]
        if missing:
            report.undecided.append(f"{c.source or 'a cable'}: left out, {' and '.join(missing)} has no role")
            continue
        for node, port in ((c.a_node, c.a_port), (c.b_node, c.b_port)):
            if roles[node] == "server":
                server_nics[node].append(port)
        entry: list[Any] = [c.a_node, c.a_port, c.b_node, c.b_port]
        speed = c.speed_gbps or default_speed
        if speed is not None:
            entry.append(speed)
        links.append(entry)
    switches = []
    for node in sorted((n for n, r in roles.items() if r != "server"), key=natural_key):
        entry_: dict[str, Any] = {"name": node, "role": roles[node]}
        entry_.update({k: v for k, v in facts.get(node, {}).items() if v is not None})
        switches.append(entry_)
    rails = nic_rails(server_nics)
    servers = [{"name": s, "nics": rails[s]} for s in sorted(server_nics, key=natural_key)]
    width = max((len(n) for n in rails.values()), default=1)
    head: dict[str, Any] = {"rails": width}
    if name:
        head["name"] = name
    if default_speed is not None:
        head["speed_gbps"] = default_speed
    return {"version": 2, "fabric": head, "switches": switches, "servers": servers, "links": links}
