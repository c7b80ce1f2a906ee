"""Inventory version 1: the AIPod's own names, as ``fabricmon topology`` wrote them before version 2.

Layout::

    version: 1
    params: {gpus: 512, rails: 8, radix: 128, speed_gbps: 400}
    switches:
    - {name: lf-g1-r1, role: leaf, index: 1, group: 1, rail: 1, radix: 128, speed_gbps: 400}
    servers:
    - {name: srv-g1-001, group: 1, index: 1, gpus: 8}
    links:
    - [srv-g1-001, nic1, lf-g1-r1, swp1, server-leaf, 1, 400]

A switch entry needs ``name`` and ``role``; ``index`` defaults to its ordinal within its
role, ``radix`` and ``speed_gbps`` to ``params``; ``group``, ``rail``, ``plane`` and
``mgmt_address`` are optional. A server needs ``name``, ``group`` and ``index``; ``gpus``
defaults to ``params.rails``. A link is ``[a_node, a_port, b_node, b_port, kind, rail,
speed_gbps]`` with the lower tier in ``a``. In this version ports are named by the plan:
``swp1..swp{radix}`` (leaf and spine: lower half down, upper half up) and ``nic1..nic{gpus}``;
files that name ports otherwise are version 2 (:mod:`fabric.inventory_v2`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fabric.errors import TopologyError
from fabric.inventory_fields import EntryError, entries, integer, mapping, node_name, optional_int, switch_head, text
from fabric.model import (
    LEGACY_NIC_PREFIX,
    LINK_ENDS,
    SWITCH_PORT_PREFIX,
    TIER,
    Endpoint,
    Fabric,
    FabricParams,
    Link,
    LinkKind,
    Role,
    Server,
    Switch,
)

VERSION = 1
TOP_KEYS = ("version", "params", "switches", "servers", "links")
_PARAM_KEYS = ("gpus", "rails", "radix", "speed_gbps")
_SWITCH_KEYS = ("name", "role", "index", "group", "rail", "plane", "radix", "speed_gbps", "mgmt_address")
_SERVER_KEYS = ("name", "group", "index", "gpus")
LINK_FIELDS = "[a_node, a_port, b_node, b_port, kind, rail, speed_gbps]"


def is_legacy(fabric: Fabric) -> bool:
    """Whether version 1 can hold ``fabric``: AIPod params, and the plan's own port names."""
    return (
        fabric.params is not None
        and not any(sw.ports or sw.nos for sw in fabric.switches.values())
        and not any(s.nics for s in fabric.servers.values())
    )


def data_v1(fabric: Fabric) -> dict[str, Any]:
    """The version 1 document of a fabric :func:`is_legacy` accepts."""
    p = fabric.params
    assert p is not None
    switches = []
    for sw in fabric.switches.values():
        entry: dict[str, Any] = {"name": sw.name, "role": sw.role.value, "index": sw.index}
        for key in ("group", "rail", "plane"):
            value = getattr(sw, key)
            if value is not None:
                entry[key] = value
        entry["radix"] = sw.radix
        entry["speed_gbps"] = sw.speed_gbps
        if sw.mgmt_address is not None:
            entry["mgmt_address"] = sw.mgmt_address
        switches.append(entry)
    return {
        "version": VERSION,
        "params": {"gpus": p.gpus, "rails": p.rails, "radix": p.radix, "speed_gbps": p.speed_gbps},
        "switches": switches,
        "servers": [
            {"name": s.name, "group": s.group, "index": s.index, "gpus": s.gpus} for s in fabric.servers.values()
        ],
        "links": [
            [ln.a.node, ln.a.port, ln.b.node, ln.b.port, ln.kind.value, ln.rail, ln.speed_gbps] for ln in fabric.links
        ],
    }


def build_v1(raw: Mapping[str, Any]) -> Fabric:
    """The fabric a version 1 document describes; the first bad entry raises."""
    top = mapping(raw, "inventory", TOP_KEYS)
    if "params" not in top:
        raise EntryError("params: missing (gpus, rails, radix, speed_gbps)")
    pm = mapping(top["params"], "params", _PARAM_KEYS, ("params",))
    if "gpus" not in pm:
        raise EntryError("params: gpus is missing", ("params",))
    try:
        params = FabricParams(**pm)
    except TopologyError as exc:
        raise EntryError(f"params: {exc}", ("params",)) from None
    switches = _switches(entries(top, "switches"), params)
    servers = _servers(entries(top, "servers"), params, switches)
    links = _links(entries(top, "links"), switches, servers)
    return Fabric(params, switches, servers, links)


def _switches(items: list[Any], params: FabricParams) -> dict[str, Switch]:
    switches: dict[str, Switch] = {}
    ordinal = dict.fromkeys(Role, 0)
    for i, entry in enumerate(items):
        m, name, role, where, at = switch_head(entry, i, _SWITCH_KEYS, switches)
        ordinal[role] += 1
        radix = integer(where, "radix", m.get("radix", params.radix), 4, at)
        if radix % 2:
            raise EntryError(f"{where}: radix must be even, got {radix}", at)
        mgmt = m.get("mgmt_address")
        switches[name] = Switch(
            name=name,
            role=role,
            index=integer(where, "index", m.get("index", ordinal[role]), at=at),
            group=optional_int(where, "group", m.get("group"), at),
            rail=optional_int(where, "rail", m.get("rail"), at),
            plane=optional_int(where, "plane", m.get("plane"), at),
            radix=radix,
            speed_gbps=integer(where, "speed_gbps", m.get("speed_gbps", params.speed_gbps), at=at),
            mgmt_address=None if mgmt is None else text(where, "mgmt_address", mgmt, at),
        )
    return switches


def _servers(items: list[Any], params: FabricParams, switches: dict[str, Switch]) -> dict[str, Server]:
    servers: dict[str, Server] = {}
    for i, entry in enumerate(items):
        at: tuple[str | int, ...] = ("servers", i)
        where = f"servers[{i}]"
        m = mapping(entry, where, _SERVER_KEYS, at)
        name = node_name(where, "name", m.get("name"), at)
        where = f"{where} ({name})"
        if name in servers or name in switches:
            raise EntryError(f"{where}: duplicate name", at)
        for key in ("group", "index"):
            if key not in m:
                raise EntryError(f"{where}: {key} is missing", at)
        servers[name] = Server(
            name=name,
            group=integer(where, "group", m["group"], at=at),
            index=integer(where, "index", m["index"], at=at),
            gpus=integer(where, "gpus", m.get("gpus", params.rails), at=at),
        )
    return servers


def _links(items: list[Any], switches: dict[str, Switch], servers: dict[str, Server]) -> list[Link]:
    links: list[Link] = []
    used: set[Endpoint] = set()
    kinds = {k.value: k for k in LinkKind}
    for i, entry in enumerate(items):
        at: tuple[str | int, ...] = ("links", i)
        where = f"links[{i}]"
        if not isinstance(entry, list) or len(entry) != 7:
            raise EntryError(f"{where}: expected {LINK_FIELDS}, got {entry!r}", at)
        a_node, a_port, b_node, b_port, kind_s, rail, speed = entry
        for key, value in (("a_node", a_node), ("a_port", a_port), ("b_node", b_node), ("b_port", b_port)):
            text(where, key, value, at)
        where = f"{where} ({a_node} {a_port} -> {b_node} {b_port})"
        kind = kinds.get(kind_s) if isinstance(kind_s, str) else None
        if kind is None:
            raise EntryError(f"{where}: kind must be one of {', '.join(kinds)}, got {kind_s!r}", at)
        a, b = Endpoint(a_node, a_port), Endpoint(b_node, b_port)
        lower, upper = LINK_ENDS[kind]
        try:
            _check_end(where, a, lower, switches, servers, upper_end=False)
            _check_end(where, b, upper, switches, servers, upper_end=True)
        except TopologyError as exc:
            raise EntryError(str(exc), at) from None
        for end in (a, b):
            if end in used:
                raise EntryError(f"{where}: port {end.node} {end.port} is used by an earlier link", at)
            used.add(end)
        links.append(
            Link(a, b, kind, optional_int(where, "rail", rail, at), integer(where, "speed_gbps", speed, at=at))
        )
    return links


def _plan_number(name: str, prefix: str) -> int | None:
    """The number of a plan port name (``swp12`` → 12); None for any other name."""
    digits = name[len(prefix) :] if name.startswith(prefix) else ""
    return int(digits) if digits.isdigit() and not digits.startswith("0") else None


def _check_end(
    where: str,
    end: Endpoint,
    role: Role | None,
    switches: dict[str, Switch],
    servers: dict[str, Server],
    *,
    upper_end: bool,
) -> None:
    """Check that ``end`` is an existing node of the right tier and a port its plan has."""
    if role is None:
        server = servers.get(end.node)
        if server is None:
            what = "a switch" if end.node in switches else "unknown"
            raise TopologyError(f"{where}: {end.node} should be a server but is {what}")
        nic = _plan_number(end.port, LEGACY_NIC_PREFIX)
        if nic is None or nic > server.gpus:
            raise TopologyError(
                f"{where}: {end.node} has ports nic1..nic{server.gpus}, not {end.port!r} "
                "(an inventory that names its ports otherwise is version 2)"
            )
        return
    sw = switches.get(end.node)
    if sw is None:
        what = "a server" if end.node in servers else "an unknown switch"
        raise TopologyError(f"{where}: {end.node} should be a {role.value} but is {what}")
    if sw.role is not role:
        raise TopologyError(f"{where}: {end.node} is a {sw.role.value}, expected a {role.value} (tier {TIER[role]})")
    number = _plan_number(end.port, SWITCH_PORT_PREFIX)
    if number is None or number > sw.radix:
        raise TopologyError(
            f"{where}: {end.node} has ports swp1..swp{sw.radix}, not {end.port!r} "
            "(an inventory that names its ports otherwise is version 2)"
        )
    direction = "down" if sw.role is Role.SUPERSPINE or number <= sw.radix // 2 else "up"
    needed = "down" if upper_end else "up"
    if direction != needed:
        raise TopologyError(f"{where}: {end.node} {end.port} faces {direction}; this link needs a port facing {needed}")
