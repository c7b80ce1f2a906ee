"""Switches' LLDP tables turned into cables: remote ports resolved, each cable once, disagreements found.

Pure logic over :class:`~discovery.tables.SwitchTable` records. What it decides, and why:

* **who is a switch**: a node that was polled (answered or not), that a role pattern names a
  switch, or that some switch sees with a switch-like port id (a name or a local number). A
  node seen only with MAC port ids is a server: lldpd on a Linux host sends the NIC's MAC as
  its port id and the NIC's name (``mlx5_0``) as the port description, which names the cable's
  server end. A server end without a description cannot be named: that entry is left out.
* **remote ports**: a name is the port; a local number (Junos: its ifIndex) goes through the
  remote switch's own ifIndex → name map when that switch was read, else through the port
  description (Junos puts the port's name there). A switch that gives its port id as a MAC is
  matched through its own LLDP table (its port that sees this end); when it was not read, or its
  table does not show this end, the entry is reported ("port id given as a MAC") and its cable
  left out: a MAC says nothing of which port it is, and a guess would be a wrong cable.
* **one cable per pair of ends**: a switch-to-switch cable is seen from both ends and kept
  once. Two ends that disagree (A says its port sees B x, B says x sees C y) are a conflict:
  the cable both of its ends report is kept, the other left out; when neither is confirmed by
  both ends, both are left out. Every conflict is reported.
* **speeds**: the ends' reported speeds (ifHighSpeed, port-speed); ends that differ are noted
  and the lower is taken (the link runs at it).
* **node names**: a neighbour named by its FQDN (``lf-1.pod.example``) is the switch polled as
  ``lf-1``, and a switch's sysName is its own alias.
"""

from __future__ import annotations

import functools
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from discovery.tables import Neighbor, SwitchTable
from fabric.model import Endpoint, natural_key
from fabric.plan import Cable

#: natural_key, cached: a 16K-GPU fabric sorts ~100K ends whose names repeat (``Ethernet1/1`` on every switch).
_key = functools.lru_cache(maxsize=1 << 18)(natural_key)


def _end_key(e: Endpoint) -> tuple[object, ...]:
    return (_key(e.node), _key(e.port))


@dataclass(slots=True)
class GraphReport:
    """What the tables could not turn into cables, or showed wrong, one line each."""

    conflicts: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)
    #: Switch neighbours whose MAC port id could not be matched: their cables are left out.
    mac_port_ids: list[str] = field(default_factory=list)
    #: Those matched through the remote switch's own table (cables kept), and how many per switch.
    mac_matched: list[str] = field(default_factory=list)
    mac_matched_by: Counter[str] = field(default_factory=Counter)
    one_sided: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class CableGraph:
    """The cables, which nodes are switches, and the report."""

    cables: list[Cable]
    switches: set[str]
    report: GraphReport


class Names:
    """Neighbour system names → the names switches were polled by (sysName aliases, FQDNs)."""

    def __init__(self, tables: Mapping[str, SwitchTable], known: Iterable[str]) -> None:
        self.known = set(known) | set(tables)
        self._alias = {t.system_name: name for name, t in tables.items() if t.system_name and t.system_name != name}

    def __call__(self, name: str) -> str:
        if name in self.known:
            return name
        alias = self._alias.get(name)
        if alias is not None:
            return alias
        short = name.partition(".")[0]
        return short if short in self.known else name


def switch_like(tables: Mapping[str, SwitchTable], known: Iterable[str], names: Names | None = None) -> set[str]:
    """Polled or otherwise known switches, and every node some switch sees with a switch-like port id."""
    canon = names or Names(tables, known)
    out = set(known) | set(tables)
    for t in tables.values():
        for entries in t.neighbors.values():
            out.update(canon(n.system_name) for n in entries if n.kind != "mac" and n.system_name)
    return out


def cable_graph(tables: Mapping[str, SwitchTable], known_switches: Iterable[str] = ()) -> CableGraph:
    """The cables the tables describe; ``known_switches`` adds switches that did not answer or that
    a role pattern names (see the module docstring for every rule)."""
    names = Names(tables, known_switches)
    switches = switch_like(tables, known_switches, names)
    report = GraphReport()
    claims: dict[Endpoint, Endpoint] = {}
    pending: list[tuple[Endpoint, Neighbor, str]] = []
    for name in sorted(tables, key=_key):
        t = tables[name]
        for port in sorted(t.neighbors, key=_key):
            near = Endpoint(name, port)
            n = _one_neighbor(near, t.neighbors[port], names, report)
            if n is None:
                continue
            remote = names(n.system_name)
            if remote in switches and n.kind == "mac":
                pending.append((near, n, remote))
                continue
            far = _far_end(near, n, remote, remote in switches, tables.get(remote), report)
            if far is not None:
                claims[near] = far
    _resolve_macs(pending, claims, tables, report)
    cables = _pair(claims, tables, switches, report)
    return CableGraph(cables, switches, report)


def _one_neighbor(near: Endpoint, entries: tuple[Neighbor, ...], names: Names, report: GraphReport) -> Neighbor | None:
    """The port's one neighbour; several distinct ones (a device in between, stale entries) are reported."""
    if len(entries) != 1:
        distinct = {(names(n.system_name), n.port_id): n for n in entries}
        if len(distinct) > 1:
            seen = ", ".join(f"{s} {p}" for s, p in sorted(distinct))
            report.unresolved.append(f"{near.node} {near.port}: {len(distinct)} LLDP neighbours ({seen}): left out")
            return None
        if not distinct:
            return None
        entries = tuple(distinct.values())
    n = entries[0]
    if not n.system_name:
        report.unresolved.append(
            f"{near.node} {near.port}: a neighbour without a system name (chassis {n.chassis_id or '?'}, "
            f"port {n.port_id or '?'}): left out"
        )
        return None
    if names(n.system_name) == near.node:
        report.unresolved.append(f"{near.node} {near.port}: sees {near.node} itself (port {n.port_id}): left out")
        return None
    return n


def _far_end(
    near: Endpoint, n: Neighbor, remote: str, is_switch: bool, table: SwitchTable | None, report: GraphReport
) -> Endpoint | None:
    """The remote end of a non-MAC switch neighbour, or of a server; None (reported) when it cannot be named."""
    where = f"{near.node} {near.port}"
    if not is_switch:
        nic = n.port_description if n.kind == "mac" else n.port_id
        if not nic:
            report.unresolved.append(
                f"{where}: server {remote} gave its port id as a MAC ({n.port_id}) with no port description "
                "(lldpd puts the NIC's name there): left out"
            )
            return None
        return Endpoint(remote, nic)
    if n.kind == "name":
        return Endpoint(remote, n.port_id)
    port = _local_port(n, table)
    if port is None:
        report.unresolved.append(
            f"{where}: {remote} gave port id {n.port_id} (a local number) that names no port of it, "
            "and no port description: left out"
        )
        return None
    return Endpoint(remote, port)


def _local_port(n: Neighbor, table: SwitchTable | None) -> str | None:
    """A local port id (Junos: its ifIndex) as a port name: the remote's own map, else the description."""
    if table is not None:
        number = int(n.port_id)
        if number in table.if_names:
            return table.if_names[number]
        known = table.known_ports()
        if n.port_id in known:
            return n.port_id
        if n.port_description in known:
            return n.port_description
    return n.port_description or None


def _resolve_macs(
    pending: list[tuple[Endpoint, Neighbor, str]],
    claims: dict[Endpoint, Endpoint],
    tables: Mapping[str, SwitchTable],
    report: GraphReport,
) -> None:
    """Switch neighbours that gave a MAC port id, matched through the remote's own table when it shows us."""
    pointing: dict[Endpoint, list[Endpoint]] = defaultdict(list)
    for near, far in claims.items():
        pointing[far].append(near)
    for near, n, remote in pending:
        where = f"{near.node} {near.port}: {remote} gave its port id as a MAC ({n.port_id})"
        back = [e for e in pointing.get(near, []) if e.node == remote]
        if len(back) == 1:
            claims[near] = back[0]
            report.mac_matched.append(f"{where}; {remote}'s own LLDP table names the port: {back[0].port}")
            report.mac_matched_by[remote] += 1
            continue
        if remote not in tables:
            why = "and was not read, so which of its ports it is cannot be told"
        elif not back:
            why = f"and its own LLDP table shows no port that sees {near.node} {near.port}"
        else:
            why = f"and its own LLDP table shows {len(back)} ports that see {near.node} {near.port}"
        report.mac_port_ids.append(f"{where} {why}: cable left out")


def _pair(
    claims: Mapping[Endpoint, Endpoint],
    tables: Mapping[str, SwitchTable],
    switches: set[str],
    report: GraphReport,
) -> list[Cable]:
    """Each pair of ends once; conflicting claims resolved in favour of what both ends report."""
    reporters: dict[frozenset[Endpoint], set[Endpoint]] = defaultdict(set)
    for near, far in claims.items():
        reporters[frozenset((near, far))].add(near)
    by_end: dict[Endpoint, list[frozenset[Endpoint]]] = defaultdict(list)
    for key in reporters:
        for end in key:
            by_end[end].append(key)
    confirmed = {key for key, who in reporters.items() if len(who) == 2}
    kept: list[frozenset[Endpoint]] = []
    for key in reporters:
        rivals = {other for end in key for other in by_end[end] if other != key}
        if not rivals or (key in confirmed and not rivals & confirmed):
            kept.append(key)
    keep = set(kept)
    for cluster in _clusters(by_end):
        report.conflicts.append(_conflict(cluster, reporters, keep))
    cables = [_cable(key, reporters[key], tables, switches, report) for key in kept]
    return sorted(cables, key=lambda c: (_key(c.a_node), _key(c.a_port)))


def _clusters(by_end: Mapping[Endpoint, list[frozenset[Endpoint]]]) -> list[list[frozenset[Endpoint]]]:
    """Groups of cables that claim a common end (connected through shared ends), in a stable order."""
    seen: set[frozenset[Endpoint]] = set()
    out: list[list[frozenset[Endpoint]]] = []
    for end in sorted((e for e, keys in by_end.items() if len(keys) > 1), key=_end_key):
        if by_end[end][0] in seen:
            continue
        group: list[frozenset[Endpoint]] = []
        stack = list(by_end[end])
        while stack:
            key = stack.pop()
            if key in seen:
                continue
            seen.add(key)
            group.append(key)
            stack.extend(k for e in key for k in by_end[e] if k not in seen)
        out.append(group)
    return out


def _describe(key: frozenset[Endpoint], who: set[Endpoint]) -> str:
    a, b = sorted(key, key=_end_key)
    if len(who) == 2:
        return f"{a.node} {a.port} and {b.node} {b.port} see each other"
    near = next(iter(who))
    far = b if near == a else a
    return f"{near.node} {near.port} sees {far.node} {far.port}"


def _conflict(
    cluster: list[frozenset[Endpoint]],
    reporters: Mapping[frozenset[Endpoint], set[Endpoint]],
    keep: set[frozenset[Endpoint]],
) -> str:
    parts = sorted(_describe(k, reporters[k]) for k in cluster)
    kept = sorted(_describe(k, reporters[k]) for k in cluster if k in keep)
    verdict = f"kept what both ends report ({kept[0]}), left out the rest" if kept else "all left out"
    return f"ends disagree: {'; but '.join(parts)}: {verdict}"


def _cable(
    key: frozenset[Endpoint],
    who: set[Endpoint],
    tables: Mapping[str, SwitchTable],
    switches: set[str],
    report: GraphReport,
) -> Cable:
    near = min(who, key=_end_key)
    a, b = key
    far = b if a == near else a
    if far.node not in switches:  # a server: its end first (the lower tier)
        return Cable(far.node, far.port, near.node, near.port, _speed(near, None, tables, report), _source(near))
    if len(who) == 1 and far.node in tables:
        seen = tables[far.node].neighbors.get(far.port)
        what = "an LLDP neighbour it could not name" if seen else "no LLDP neighbour"
        report.one_sided.append(f"{near.node} {near.port} sees {far.node} {far.port}, where {far.node} shows {what}")
    return Cable(near.node, near.port, far.node, far.port, _speed(near, far, tables, report), _source(near))


def _source(near: Endpoint) -> str:
    return f"{near.node} {near.port} (LLDP)"


def _speed(a: Endpoint, b: Endpoint | None, tables: Mapping[str, SwitchTable], report: GraphReport) -> int | None:
    speeds: dict[Endpoint, int] = {}
    for e in (a, b):
        if e is not None and e.node in tables and (s := tables[e.node].speeds_gbps.get(e.port)):
            speeds[e] = s
    if len(set(speeds.values())) > 1:
        text = " and ".join(f"{e.node} {e.port} at {s}G" for e, s in speeds.items())
        report.notes.append(f"the ends of one cable report different speeds: {text} (the lower taken)")
    return min(speeds.values(), default=None)
