"""Inventory files: a fabric as YAML, written by ``fabricmon topology`` or by hand.

Layout (``version: 1``)::

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
speed_gbps]`` with the lower tier in ``a``; ``rail`` may be null. Switch ports are
``swp1..swp{radix}`` (leaf and spine: lower half down, upper half up), server ports
``nic1..nic{gpus}``. A hand-written inventory may leave links out or add some; loading
checks every entry and raises :class:`~fabric.errors.TopologyError` naming the first bad one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import IO, Any

import yaml

from fabric.errors import TopologyError
from fabric.model import (
    LINK_ENDS,
    NIC_PORT_PREFIX,
    TIER,
    Endpoint,
    Fabric,
    FabricParams,
    Link,
    LinkKind,
    Role,
    Server,
    Switch,
    port_direction,
    port_number,
)

try:  # libyaml makes a 16K-GPU inventory several times faster to read and write
    from yaml import CSafeDumper as _Dumper
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeDumper as _Dumper  # type: ignore[assignment]
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

VERSION = 1
_TOP_KEYS = ("version", "params", "switches", "servers", "links")
_PARAM_KEYS = ("gpus", "rails", "radix", "speed_gbps")
_SWITCH_KEYS = ("name", "role", "index", "group", "rail", "plane", "radix", "speed_gbps", "mgmt_address")
_SERVER_KEYS = ("name", "group", "index", "gpus")
_ROLES = {r.value: r for r in Role}
_LINK_FIELDS = "[a_node, a_port, b_node, b_port, kind, rail, speed_gbps]"

PathOrStream = str | os.PathLike[str] | IO[str]


def inventory_data(fabric: Fabric) -> dict[str, Any]:
    """The plain-data form of an inventory (what :func:`dump_inventory` writes as YAML)."""
    p = fabric.params
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


def dump_inventory(fabric: Fabric, path_or_stream: PathOrStream) -> None:
    """Write ``fabric`` as an inventory YAML file (or to an open text stream)."""
    p = fabric.params
    header = (
        f"# fabricmon inventory: {p.gpus} GPUs, {p.rails} rails, radix {p.radix}, {p.speed_gbps}G\n"
        f"# links: {_LINK_FIELDS}, lower tier first\n"
    )
    data = inventory_data(fabric)
    if isinstance(path_or_stream, str | os.PathLike):
        with open(path_or_stream, "w", encoding="utf-8") as stream:
            _write(stream, header, data)
    else:
        _write(path_or_stream, header, data)


def _write(stream: IO[str], header: str, data: dict[str, Any]) -> None:
    stream.write(header)
    # default_flow_style=None: one line per switch, server and link, block style above them
    yaml.dump(data, stream, Dumper=_Dumper, sort_keys=False, default_flow_style=None, width=200)


def load_inventory(path_or_stream: PathOrStream) -> Fabric:
    """Read and check an inventory file; every problem is a TopologyError naming the entry."""
    if isinstance(path_or_stream, str | os.PathLike):
        source = os.fspath(path_or_stream)
        try:
            with open(path_or_stream, encoding="utf-8") as stream:
                raw = _parse(stream, source)
        except OSError as exc:
            raise TopologyError(f"{source}: cannot read inventory: {exc.strerror or exc}") from exc
    else:
        source = str(getattr(path_or_stream, "name", "<inventory>"))
        raw = _parse(path_or_stream, source)
    try:
        return _build(raw)
    except TopologyError as exc:
        raise TopologyError(f"{source}: {exc}") from None


def _parse(stream: IO[str], source: str) -> Any:
    try:
        return yaml.load(stream, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or exc
        raise TopologyError(f"{source}: not valid YAML{where}: {problem}") from exc


def _mapping(value: Any, where: str, allowed: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TopologyError(f"{where}: expected a mapping, got {type(value).__name__}")
    unknown = [str(k) for k in value if k not in allowed]
    if unknown:
        raise TopologyError(f"{where}: unknown key {unknown[0]!r} (expected {', '.join(allowed)})")
    return value


def _int(where: str, key: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TopologyError(f"{where}: {key} must be an integer, got {value!r}")
    if value < minimum:
        raise TopologyError(f"{where}: {key} must be >= {minimum}, got {value}")
    return value


def _opt_int(where: str, key: str, value: Any) -> int | None:
    return None if value is None else _int(where, key, value)


def _str(where: str, key: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise TopologyError(f"{where}: {key} must be a non-empty string, got {value!r}")
    return value


def _list(raw: Mapping[str, Any], key: str) -> list[Any]:
    value = raw.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise TopologyError(f"{key}: expected a list, got {type(value).__name__}")
    return value


def _build(raw: Any) -> Fabric:
    top = _mapping(raw, "inventory", _TOP_KEYS)
    if top.get("version") != VERSION:
        raise TopologyError(f"version: expected {VERSION}, got {top.get('version')!r}")
    if "params" not in top:
        raise TopologyError("params: missing (gpus, rails, radix, speed_gbps)")
    pm = _mapping(top["params"], "params", _PARAM_KEYS)
    if "gpus" not in pm:
        raise TopologyError("params: gpus is missing")
    try:
        params = FabricParams(**pm)
    except TopologyError as exc:
        raise TopologyError(f"params: {exc}") from None
    switches = _switches(_list(top, "switches"), params)
    servers = _servers(_list(top, "servers"), params, switches)
    links = _links(_list(top, "links"), params, switches, servers)
    return Fabric(params, switches, servers, links)


def _switches(entries: list[Any], params: FabricParams) -> dict[str, Switch]:
    switches: dict[str, Switch] = {}
    ordinal = dict.fromkeys(Role, 0)
    for i, entry in enumerate(entries):
        where = f"switches[{i}]"
        m = _mapping(entry, where, _SWITCH_KEYS)
        name = _str(where, "name", m.get("name"))
        where = f"{where} ({name})"
        role = _ROLES.get(m["role"]) if isinstance(m.get("role"), str) else None
        if role is None:
            raise TopologyError(f"{where}: role must be one of {', '.join(_ROLES)}, got {m.get('role')!r}")
        if name in switches:
            raise TopologyError(f"{where}: duplicate switch name")
        ordinal[role] += 1
        radix = _int(where, "radix", m.get("radix", params.radix), 4)
        if radix % 2:
            raise TopologyError(f"{where}: radix must be even, got {radix}")
        mgmt = m.get("mgmt_address")
        switches[name] = Switch(
            name=name,
            role=role,
            index=_int(where, "index", m.get("index", ordinal[role])),
            group=_opt_int(where, "group", m.get("group")),
            rail=_opt_int(where, "rail", m.get("rail")),
            plane=_opt_int(where, "plane", m.get("plane")),
            radix=radix,
            speed_gbps=_int(where, "speed_gbps", m.get("speed_gbps", params.speed_gbps)),
            mgmt_address=None if mgmt is None else _str(where, "mgmt_address", mgmt),
        )
    return switches


def _servers(entries: list[Any], params: FabricParams, switches: dict[str, Switch]) -> dict[str, Server]:
    servers: dict[str, Server] = {}
    for i, entry in enumerate(entries):
        where = f"servers[{i}]"
        m = _mapping(entry, where, _SERVER_KEYS)
        name = _str(where, "name", m.get("name"))
        where = f"{where} ({name})"
        if name in servers or name in switches:
            raise TopologyError(f"{where}: duplicate name")
        for key in ("group", "index"):
            if key not in m:
                raise TopologyError(f"{where}: {key} is missing")
        servers[name] = Server(
            name=name,
            group=_int(where, "group", m["group"]),
            index=_int(where, "index", m["index"]),
            gpus=_int(where, "gpus", m.get("gpus", params.rails)),
        )
    return servers


def _links(
    entries: list[Any], params: FabricParams, switches: dict[str, Switch], servers: dict[str, Server]
) -> list[Link]:
    links: list[Link] = []
    used: set[Endpoint] = set()
    kinds = {k.value: k for k in LinkKind}
    for i, entry in enumerate(entries):
        where = f"links[{i}]"
        if not isinstance(entry, list) or len(entry) != 7:
            raise TopologyError(f"{where}: expected {_LINK_FIELDS}, got {entry!r}")
        a_node, a_port, b_node, b_port, kind_s, rail, speed = entry
        for key, value in (("a_node", a_node), ("a_port", a_port), ("b_node", b_node), ("b_port", b_port)):
            _str(where, key, value)
        where = f"{where} ({a_node} {a_port} -> {b_node} {b_port})"
        kind = kinds.get(kind_s) if isinstance(kind_s, str) else None
        if kind is None:
            raise TopologyError(f"{where}: kind must be one of {', '.join(kinds)}, got {kind_s!r}")
        a, b = Endpoint(a_node, a_port), Endpoint(b_node, b_port)
        lower, upper = LINK_ENDS[kind]
        _check_end(where, a, lower, switches, servers, upper_end=False)
        _check_end(where, b, upper, switches, servers, upper_end=True)
        for end in (a, b):
            if end in used:
                raise TopologyError(f"{where}: port {end.node} {end.port} is used by an earlier link")
            used.add(end)
        links.append(Link(a, b, kind, _opt_int(where, "rail", rail), _int(where, "speed_gbps", speed)))
    return links


def _check_end(
    where: str,
    end: Endpoint,
    role: Role | None,
    switches: dict[str, Switch],
    servers: dict[str, Server],
    *,
    upper_end: bool,
) -> None:
    """Check that ``end`` is an existing node of the right tier and a port it has."""
    if role is None:
        server = servers.get(end.node)
        if server is None:
            what = "a switch" if end.node in switches else "unknown"
            raise TopologyError(f"{where}: {end.node} should be a server but is {what}")
        nic = port_number(end.port, NIC_PORT_PREFIX)
        if nic is None or nic > server.gpus:
            raise TopologyError(f"{where}: {end.node} has ports nic1..nic{server.gpus}, not {end.port!r}")
        return
    sw = switches.get(end.node)
    if sw is None:
        what = "a server" if end.node in servers else "an unknown switch"
        raise TopologyError(f"{where}: {end.node} should be a {role.value} but is {what}")
    if sw.role is not role:
        raise TopologyError(f"{where}: {end.node} is a {sw.role.value}, expected a {role.value} (tier {TIER[role]})")
    number = port_number(end.port)
    if number is None or number > sw.radix:
        raise TopologyError(f"{where}: {end.node} has ports swp1..swp{sw.radix}, not {end.port!r}")
    direction = port_direction(sw, number)
    needed = "down" if upper_end else "up"
    if direction != needed:
        raise TopologyError(f"{where}: {end.node} {end.port} faces {direction}; this link needs a port facing {needed}")
