"""Inventory version 2: a fabric described by its cabling plan, in its devices' own names (SPEC §10.1).

Layout::

    version: 2
    fabric: {name: pod-a, rails: 8}
    switches:
    - {name: leaf-a01, role: leaf, group: 1, rail: 1, mgmt_address: 10.0.1.11, nos: eos}
    servers:
    - {name: gpu-a01-n01, group: 1, nics: {mlx5_0: 1, mlx5_1: 2}}
    links:
    - [gpu-a01-n01, mlx5_0, leaf-a01, Ethernet1/1, 400]

What it decides, so the file need not say it:

* a cable may name either end first: the lower tier becomes ``a``; its kind comes from the
  tiers it joins, which must be adjacent (server-leaf, leaf-spine, spine-superspine);
* a port's direction is its cable's side; a switch's ports are the ones its cables name (plus
  any it lists under ``ports``), in natural order (``Ethernet2`` before ``Ethernet10``);
* a leaf without ``rail`` takes the rail most of its servers' NICs are on; a spine without one
  the rail all its leaves share, if they share one;
* a server or leaf without ``group`` takes its neighbours' group; when no entry names any group,
  the groups are the sets of servers and leaves that cables join, numbered in file order;
* a switch's ``speed_gbps`` (for ports no cable names) is its most common cable speed;
* a link's ``speed_gbps`` may be left out when ``fabric.speed_gbps`` gives it.

Problems come in two kinds. A malformed entry (a wrong type, an unknown key, a missing name)
raises :class:`~fabric.inventory_fields.EntryError`. A cable that cannot be part of the fabric
(an unknown node, a port used twice, a cable within a tier, a server port that is no rail NIC)
is left out and reported as an :class:`~fabric.anomaly.Anomaly`; the loader refuses a file
that has any, ``inventory check`` lists them all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from fabric.anomaly import Anomaly
from fabric.inventory_fields import (
    EntryError,
    entries,
    integer,
    mapping,
    node_name,
    optional_int,
    port,
    switch_head,
    text,
)
from fabric.model import TIER, Endpoint, Fabric, Link, LinkKind, Role, Server, Switch, natural_key

VERSION = 2
TOP_KEYS = ("version", "fabric", "switches", "servers", "links")
FABRIC_KEYS = ("name", "rails", "speed_gbps")
SWITCH_KEYS = ("name", "role", "index", "group", "rail", "plane", "mgmt_address", "nos", "speed_gbps", "ports")
SERVER_KEYS = ("name", "group", "index", "nics")
LINK_FIELDS = "[a_node, a_port, b_node, b_port, speed_gbps]"
_KIND = {
    (0, 1): LinkKind.SERVER_LEAF,
    (1, 2): LinkKind.LEAF_SPINE,
    (2, 3): LinkKind.SPINE_SUPERSPINE,
}


def build_v2(raw: Mapping[str, Any]) -> tuple[Fabric, list[Anomaly]]:
    """The fabric a version 2 document describes, and the cables it had to leave out."""
    top = mapping(raw, "inventory", TOP_KEYS)
    head = mapping(top.get("fabric") or {}, "fabric", FABRIC_KEYS, ("fabric",))
    rails = optional_int("fabric", "rails", head.get("rails"), ("fabric",))
    default_speed = optional_int("fabric", "speed_gbps", head.get("speed_gbps"), ("fabric",))
    name = head.get("name")
    name = None if name is None else text("fabric", "name", name, ("fabric",))
    switch_entries = _switch_entries(entries(top, "switches"))
    servers = _servers(entries(top, "servers"), switch_entries)
    anomalies: list[Anomaly] = []
    cables = _cables(entries(top, "links"), switch_entries, servers, default_speed, anomalies)
    rails = rails or max((r for s in servers.values() for _, r in s.nics), default=1)
    for s in servers.values():
        for nic, rail in s.nics:
            if rail > rails:
                raise EntryError(f"servers ({s.name}): NIC {nic} is on rail {rail}, beyond fabric.rails = {rails}")
    switches = _complete_switches(switch_entries, servers, cables)
    servers = _complete_servers(servers, switches, cables)
    links = [Link(a, b, kind, _rail(kind, a, b, switches, servers), speed) for a, b, kind, speed, _ in cables]
    return Fabric(None, switches, servers, links, name=name, rails=rails), anomalies


# -- entries ------------------------------------------------------------------------------


def _switch_entries(items: list[Any]) -> dict[str, tuple[Switch, tuple[str, ...], Mapping[str, Any]]]:
    """Switch → (its entry as a Switch with what the file says, listed ports, the raw entry)."""
    out: dict[str, tuple[Switch, tuple[str, ...], Mapping[str, Any]]] = {}
    ordinal = dict.fromkeys(Role, 0)
    for i, entry in enumerate(items):
        m, name, role, where, at = switch_head(entry, i, SWITCH_KEYS, out)
        ordinal[role] += 1
        listed = m.get("ports") or []
        if not isinstance(listed, list):
            raise EntryError(f"{where}: ports must be a list of port names", at)
        ports = tuple(port(where, "ports[]", p, at) for p in listed)
        if len(set(ports)) != len(ports):
            raise EntryError(f"{where}: ports lists a port twice", at)
        mgmt, nos = m.get("mgmt_address"), m.get("nos")
        sw = Switch(
            name=name,
            role=role,
            index=integer(where, "index", m.get("index", ordinal[role]), at=at),
            group=optional_int(where, "group", m.get("group"), at),
            rail=optional_int(where, "rail", m.get("rail"), at),
            plane=optional_int(where, "plane", m.get("plane"), at),
            radix=0,
            speed_gbps=0,
            mgmt_address=None if mgmt is None else text(where, "mgmt_address", mgmt, at),
            nos=None if nos is None else text(where, "nos", nos, at),
        )
        out[name] = (sw, ports, m)
    return out


def _servers(items: list[Any], switches: Mapping[str, object]) -> dict[str, Server]:
    servers: dict[str, Server] = {}
    per_group = Counter[int | None]()
    for i, entry in enumerate(items):
        at: tuple[str | int, ...] = ("servers", i)
        where = f"servers[{i}]"
        m = mapping(entry, where, SERVER_KEYS, at)
        name = node_name(where, "name", m.get("name"), at)
        where = f"{where} ({name})"
        if name in servers or name in switches:
            raise EntryError(f"{where}: duplicate name", at)
        raw_nics = m.get("nics")
        if not isinstance(raw_nics, Mapping) or not raw_nics:
            raise EntryError(f"{where}: nics must map each rail NIC's name to its rail, e.g. {{mlx5_0: 1}}", at)
        nics = tuple(
            (port(where, "nics", nic, at), integer(where, f"nics.{nic}", rail, at=at)) for nic, rail in raw_nics.items()
        )
        seen = Counter(rail for _, rail in nics)
        if (twice := next((r for r, n in seen.items() if n > 1), None)) is not None:
            raise EntryError(f"{where}: two NICs on rail {twice}; each rail has one NIC", at)
        group = optional_int(where, "group", m.get("group"), at)
        per_group[group] += 1
        index = integer(where, "index", m.get("index", per_group[group]), at=at)
        # group 0 marks "not given yet": completed from the leaves below
        servers[name] = Server(name, group or 0, index, len(nics), tuple(sorted(nics, key=lambda n: n[1])))
    return servers


_Cable = tuple[Endpoint, Endpoint, LinkKind, int, tuple[str | int, ...]]
_Problem = tuple[str, str, tuple[str, ...]]


class _CablePlan:
    """What a cable is checked against: the nodes, the servers' rail NICs and the ports taken."""

    def __init__(
        self, switches: Mapping[str, tuple[Switch, tuple[str, ...], Mapping[str, Any]]], servers: Mapping[str, Server]
    ) -> None:
        self.switches, self.servers = switches, servers
        self.nics = {Endpoint(s.name, nic) for s in servers.values() for nic, _ in s.nics}
        self.used: dict[Endpoint, int] = {}

    def tier(self, node: str) -> int | None:
        if node in self.servers:
            return 0
        hit = self.switches.get(node)
        return TIER[hit[0].role] if hit is not None else None

    def check(self, a: Endpoint, b: Endpoint) -> tuple[Endpoint, Endpoint, LinkKind] | _Problem:
        """The cable lower tier first with its kind, or (anomaly kind, message, nodes)."""
        if a.node == b.node:
            return "self_loop", f"a cable from {a.node} to itself", (a.node,)
        ta, tb = self.tier(a.node), self.tier(b.node)
        if ta is None or tb is None:
            unknown = tuple(e.node for e, t in ((a, ta), (b, tb)) if t is None)
            return "unknown_node", f"{' and '.join(unknown)} is in no switches or servers entry", unknown
        if ta > tb:
            a, b, ta, tb = b, a, tb, ta
        kind = _KIND.get((ta, tb))
        if kind is None:
            what = "two servers" if ta == tb == 0 else f"tiers {ta} and {tb}"
            return "tier_skip", f"the cable joins {what}; cables join adjacent tiers", (a.node, b.node)
        if ta == 0 and a not in self.nics:
            return "not_a_rail_nic", f"{a.node} lists no rail NIC {a.port} (add it to the server's nics)", (a.node,)
        for e in (a, b):
            listed = self.switches[e.node][1] if e.node in self.switches else ()
            if listed and e.port not in listed:
                return "unlisted_port", f"{e.node} does not list port {e.port} under ports", (e.node,)
            if e in self.used:
                return "port_used_twice", f"{e.node} {e.port} is already cabled by links[{self.used[e]}]", (e.node,)
        return a, b, kind


def _cables(
    items: list[Any],
    switches: Mapping[str, tuple[Switch, tuple[str, ...], Mapping[str, Any]]],
    servers: Mapping[str, Server],
    default_speed: int | None,
    anomalies: list[Anomaly],
) -> list[_Cable]:
    """Each cable checked and put lower tier first; the ones that cannot be are reported."""
    out: list[_Cable] = []
    plan = _CablePlan(switches, servers)
    for i, entry in enumerate(items):
        at: tuple[str | int, ...] = ("links", i)
        where = f"links[{i}]"
        if not isinstance(entry, list) or len(entry) not in (4, 5):
            raise EntryError(f"{where}: expected {LINK_FIELDS}, got {entry!r}", at)
        a = Endpoint(node_name(where, "a_node", entry[0], at), port(where, "a_port", entry[1], at))
        b = Endpoint(node_name(where, "b_node", entry[2], at), port(where, "b_port", entry[3], at))
        named = f"{where} ({a.node} {a.port} -> {b.node} {b.port})"
        if len(entry) == 5:
            speed = integer(named, "speed_gbps", entry[4], at=at)
        elif default_speed is not None:
            speed = default_speed
        else:
            raise EntryError(f"{named}: speed_gbps is missing and fabric.speed_gbps gives no default", at)
        checked = plan.check(a, b)
        if isinstance(checked[2], LinkKind):
            a, b, kind = checked
            plan.used[a] = plan.used[b] = i
            out.append((a, b, kind, speed, at))
        else:
            problem, message, nodes = checked
            anomalies.append(Anomaly(problem, f"{named}: {message}", nodes, where=where, at=at))
    return out


# -- completing what the file leaves out --------------------------------------------------------


def _complete_switches(
    entries_: Mapping[str, tuple[Switch, tuple[str, ...], Mapping[str, Any]]],
    servers: Mapping[str, Server],
    cables: list[_Cable],
) -> dict[str, Switch]:
    cabled: dict[str, list[tuple[str, int]]] = {name: [] for name in entries_}
    nic_rails: dict[str, Counter[int]] = {name: Counter() for name in entries_}
    below: dict[str, list[str]] = {name: [] for name in entries_}
    rails_of = {(s.name, nic): r for s in servers.values() for nic, r in s.nics}
    for a, b, kind, speed, _ in cables:
        for end in (a, b):
            if end.node in cabled:
                cabled[end.node].append((end.port, speed))
        if kind is LinkKind.SERVER_LEAF:
            nic_rails[b.node][rails_of[(a.node, a.port)]] += 1
        below[b.node].append(a.node)
    out: dict[str, Switch] = {}
    for name, (sw, listed, m) in entries_.items():
        ports = listed or tuple(sorted({p for p, _ in cabled[name]}, key=natural_key))
        speeds = Counter(s for _, s in cabled[name])
        given = m.get("speed_gbps")
        own = integer(f"switches ({name})", "speed_gbps", given) if given is not None else None
        rail = sw.rail
        if rail is None and sw.role is Role.LEAF and nic_rails[name]:
            rail = nic_rails[name].most_common(1)[0][0]
        default = speeds.most_common(1)[0][0] if speeds else 400
        out[name] = replace(sw, rail=rail, radix=len(ports), speed_gbps=own or default, ports=ports)
    for name, sw in out.items():
        if sw.role is Role.SPINE and sw.rail is None:
            rails = {out[n].rail for n in below[name] if n in out}
            if len(rails) == 1 and None not in rails:
                out[name] = replace(sw, rail=rails.pop())
    return _complete_groups(out, servers, cables)


def _complete_groups(
    switches: dict[str, Switch], servers: Mapping[str, Server], cables: list[_Cable]
) -> dict[str, Switch]:
    """Leaves without a group take their servers' (given) group, else their cable-joined set's."""
    given = {s.group for s in servers.values() if s.group} | {sw.group for sw in switches.values() if sw.group}
    server_groups: dict[str, Counter[int]] = {}
    for a, b, kind, _, _ in cables:
        if kind is LinkKind.SERVER_LEAF:
            server_groups.setdefault(b.node, Counter())
            if group := servers[a.node].group:
                server_groups[b.node][group] += 1
    if given:
        for name, counts in server_groups.items():
            sw = switches[name]
            if sw.group is None and counts:
                switches[name] = replace(sw, group=counts.most_common(1)[0][0])
        return switches
    for name, group in _components(servers, cables).items():
        if name in switches and switches[name].role is Role.LEAF:
            switches[name] = replace(switches[name], group=group)
    return switches


def _components(servers: Mapping[str, Server], cables: list[_Cable]) -> dict[str, int]:
    """Servers and leaves joined by cables, numbered 1.. in the servers' file order."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b, kind, _, _ in cables:
        if kind is LinkKind.SERVER_LEAF:
            parent[find(a.node)] = find(b.node)
    numbers: dict[str, int] = {}
    out: dict[str, int] = {}
    for name in servers:
        root = find(name)
        out[name] = numbers.setdefault(root, len(numbers) + 1)
    for node in list(parent):
        if node not in out and find(node) in numbers:
            out[node] = numbers[find(node)]
    return out


def _complete_servers(
    servers: dict[str, Server], switches: Mapping[str, Switch], cables: list[_Cable]
) -> dict[str, Server]:
    """Servers without a group take the group most of their leaves are in (else 1)."""
    leaf_groups: dict[str, Counter[int]] = {}
    for a, b, kind, _, _ in cables:
        if kind is LinkKind.SERVER_LEAF and (group := switches[b.node].group):
            leaf_groups.setdefault(a.node, Counter())[group] += 1
    per_group = Counter[int]()
    out: dict[str, Server] = {}
    for name, s in servers.items():
        group = s.group or (leaf_groups[name].most_common(1)[0][0] if name in leaf_groups else 1)
        per_group[group] += 1
        out[name] = s if s.group else replace(s, group=group, index=per_group[group])
    return out


def _rail(
    kind: LinkKind, a: Endpoint, b: Endpoint, switches: Mapping[str, Switch], servers: Mapping[str, Server]
) -> int | None:
    """A cable's rail: its NIC's, else its lower switch's."""
    if kind is LinkKind.SERVER_LEAF:
        return dict(servers[a.node].nics).get(a.port)
    return switches[a.node].rail


# -- writing --------------------------------------------------------------------------------------


def data_v2(fabric: Fabric) -> dict[str, Any]:
    """The version 2 document of ``fabric`` (any fabric, generated or read)."""
    cabled = {e for ln in fabric.links for e in (ln.a, ln.b)}
    switches = []
    for sw in fabric.switches.values():
        entry: dict[str, Any] = {"name": sw.name, "role": sw.role.value}
        for key in ("group", "rail", "plane", "mgmt_address", "nos"):
            value = getattr(sw, key)
            if value is not None:
                entry[key] = value
        names = sw.port_names()
        if any(Endpoint(sw.name, p) not in cabled for p in names):
            entry["speed_gbps"] = sw.speed_gbps
            entry["ports"] = list(names)
        switches.append(entry)
    return {
        "version": VERSION,
        "fabric": {"name": fabric.label, "rails": fabric.rails},
        "switches": switches,
        "servers": [
            {"name": s.name, "group": s.group, "index": s.index, "nics": dict(s.nic_rails())}
            for s in fabric.servers.values()
        ],
        "links": [[ln.a.node, ln.a.port, ln.b.node, ln.b.port, ln.speed_gbps] for ln in fabric.links],
    }
