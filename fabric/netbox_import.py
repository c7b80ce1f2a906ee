"""A cabling plan as NetBox holds it (``fabricmon inventory import netbox``, SPEC §10.2), pure logic.

:mod:`discovery.netbox` reads three lists from NetBox's REST API (``dcim/devices``,
``dcim/interfaces`` and ``dcim/cables`` of a site); this module turns them into a version 2
inventory through the same :func:`fabric.plan.plan_document` path as ``inventory import csv``.

* **cables**: NetBox ≥ 3.3 gives each end as a list of terminations (``a_terminations``:
  ``[{object_type: dcim.interface, object: {device: {name}, name}}]``); older NetBox gives one
  ``termination_a``/``termination_a_type``. Only ``connected`` cables between one interface and
  one interface are the fabric's: a power, console or circuit cable, a patch panel's port, a
  cable with several terminations on an end, a ``planned`` cable, a cable on a management-only
  interface are left out, each named in the report, never fatal;
* **roles**: a device's role slug through ``--role-map ROLE=SLUG`` first, else guessed from its
  words (``leaf``/``tor``, ``spine``, ``superspine``, ``server``/``gpu``/``compute``). A device
  whose role is neither is not in the fabric: its cables are left out, named once per device.
  When no device's role says anything, roles come from the cables as in a spreadsheet (the A
  end the lower tier);
* **speeds**: an interface's ``speed`` (Kbit/s) when set, else its ``type`` (``400gbase-x-osfp``
  is 400G); a cable runs at its slower end. A cable no end gives a speed for takes
  ``--speed-gbps``, else the most common speed (reported);
* **facts**: a switch's ``primary_ip`` is its ``mgmt_address``, its platform slug its ``nos``
  when it names one fabricmon knows (``arista-eos`` → ``eos``).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fabric.errors import TopologyError
from fabric.inventory_fields import EntryError
from fabric.inventory_v2 import build_v2
from fabric.model import Fabric, natural_key
from fabric.plan import ROLE_NAMES, Cable, PlanReport, decide_roles, plan_document

#: Words in a role slug that name a fabric role, checked in this order (a word is a run of
#: letters and digits; ``super-spine`` and ``superspine`` are both the superspine).
_ROLE_WORDS: tuple[tuple[str, frozenset[str]], ...] = (
    ("superspine", frozenset({"superspine", "ssp"})),
    ("spine", frozenset({"spine"})),
    ("leaf", frozenset({"leaf", "tor"})),
    ("server", frozenset({"server", "gpu", "compute", "dgx", "hgx"})),
)
#: Words that make a role slug none of the fabric's, whatever else it says (``console-server``,
#: ``oob-switch``, ``mgmt-leaf``): their cables are management, not the fabric.
_NOT_FABRIC = frozenset({"console", "oob", "mgmt", "management", "pdu", "power", "patch", "bmc", "ipmi"})
#: NetBox platform slug words → the ``nos`` fabricmon knows (:data:`fabric.naming.NOS_NAMINGS`).
_NOS_WORDS = {
    "eos": "eos", "arista": "eos", "sonic": "sonic", "junos": "junos", "juniper": "junos", "iosxr": "xr",
    "xr": "xr", "srlinux": "srlinux", "srl": "srlinux", "cumulus": "cumulus", "openconfig": "openconfig",
}  # fmt: skip
#: InfiniBand interface types (NetBox ``infiniband-ndr``) → Gbit/s of a 4x port.
_IB_SPEEDS = {"sdr": 10, "ddr": 20, "qdr": 40, "fdr10": 40, "fdr": 56, "edr": 100, "hdr": 200, "ndr": 400, "xdr": 800}
_TYPE_SPEED = re.compile(r"^(\d+(?:\.\d+)?)(g?)base-")
_CONNECTED = "connected"


@dataclass(frozen=True, slots=True)
class NetboxData:
    """What NetBox answered: the ``results`` of each list, every page joined."""

    devices: Sequence[Mapping[str, Any]]
    interfaces: Sequence[Mapping[str, Any]]
    cables: Sequence[Mapping[str, Any]]


@dataclass(slots=True)
class NetboxReport:
    """What the import left out of NetBox, and what the plan could not decide."""

    left_out: list[str] = field(default_factory=list)
    plan: PlanReport = field(default_factory=PlanReport)

    def lines(self) -> list[str]:
        return self.left_out + self.plan.undecided + self.plan.problems


def parse_role_map(items: Iterable[str]) -> dict[str, str]:
    """``["leaf=tor,spine=spine", "server=gpu-node"]`` → NetBox role slug → fabric role."""
    out: dict[str, str] = {}
    for item in items:
        for part in filter(None, (p.strip() for p in item.split(","))):
            role, sep, slug = (s.strip() for s in part.partition("="))
            if not sep or role.lower() not in ROLE_NAMES or not slug:
                raise TopologyError(f"--role-map {part!r}: expected ROLE=SLUG with ROLE one of {', '.join(ROLE_NAMES)}")
            if out.get(slug, role.lower()) != role.lower():
                raise TopologyError(f"--role-map: role slug {slug!r} is given two roles ({out[slug]}, {role.lower()})")
            out[slug] = role.lower()
    return out


def guess_role(slug: str) -> str | None:
    """The fabric role a NetBox role slug names by its words, or None (``gpu-server`` → server)."""
    words = set(re.findall(r"[a-z0-9]+", slug.lower()))
    joined = slug.lower().replace("-", "").replace("_", "")
    if words & _NOT_FABRIC:
        return None
    if "superspine" in joined:
        return "superspine"
    for role, names in _ROLE_WORDS:
        if words & names:
            return role
    return None


def interface_speed_gbps(interface: Mapping[str, Any]) -> int | None:
    """An interface's speed in Gbit/s: ``speed`` (Kbit/s) when set, else from its ``type``."""
    speed = interface.get("speed")
    if isinstance(speed, int) and not isinstance(speed, bool) and speed >= 1_000_000:
        return speed // 1_000_000
    kind = _choice(interface.get("type"))
    if kind.startswith("infiniband-"):
        return _IB_SPEEDS.get(kind.removeprefix("infiniband-"))
    m = _TYPE_SPEED.match(kind)
    if m is None:
        return None
    gbps = float(m.group(1)) if m.group(2) else float(m.group(1)) / 1000
    return int(gbps) if gbps >= 1 else None


def import_netbox(
    data: NetboxData,
    *,
    role_map: Mapping[str, str] | None = None,
    site: str | None = None,
    name: str | None = None,
    speed: int | None = None,
) -> tuple[Fabric, NetboxReport]:
    """The fabric NetBox's devices and cables describe, and what was left out or undecided.

    Raises a :class:`TopologyError` naming the cable when the plan cannot hold one (a port the
    v2 loader refuses, a cable skipping a tier), and when no cable is left.
    """
    report = NetboxReport()
    devices = _devices(data.devices)
    device_roles = {n: r for n, d in devices.items() if (r := _device_role(d, role_map or {})) is not None}
    interfaces = {i["id"]: i for i in data.interfaces if isinstance(i, Mapping) and isinstance(i.get("id"), int)}
    cables = _cables(data.cables, devices, interfaces, device_roles, site, report)
    if not cables:
        where = f" at site {site}" if site else ""
        raise TopologyError(f"NetBox{where}: no cable between two fabric devices' interfaces (see the notes above)")
    if any(device_roles.get(c.a_node) for c in cables):
        cabled = {n for c in cables for n in (c.a_node, c.b_node)}
        roles = {n: r for n, r in device_roles.items() if n in cabled}
        cables = _drop_within_tier(cables, roles, report)
    else:
        report.left_out.append(
            "no device role slug names a fabric role (--role-map ROLE=SLUG): roles inferred from the cables, "
            "the A end of each the lower tier"
        )
        roles = decide_roles(cables, {}, None, report.plan)
    default = speed if speed is not None else _common_speed(cables, report)
    facts = {n: _facts(devices[n]) for n, r in roles.items() if r != "server" and n in devices}
    doc = plan_document(cables, roles, name=name or site, switch_facts=facts, default_speed=default, report=report.plan)
    kept = [c for c in cables if c.a_node in roles and c.b_node in roles]
    try:
        fabric, anomalies = build_v2(doc)
    except EntryError as exc:
        raise TopologyError(f"NetBox: {_by_cable(str(exc), exc.at, kept)}") from None
    if anomalies:
        lines = [_by_cable(a.message, a.at, kept) for a in anomalies]
        raise TopologyError(f"NetBox: {len(lines)} cable(s) the plan cannot hold:\n  " + "\n  ".join(lines[:20]))
    return fabric, report


def _choice(value: Any) -> str:
    """A NetBox choice field (``{value, label}``) or plain value, as its value."""
    if isinstance(value, Mapping):
        value = value.get("value")
    return value if isinstance(value, str) else ""


def _slug(value: Any) -> str:
    return value.get("slug") or "" if isinstance(value, Mapping) else ""


def _devices(items: Iterable[Any]) -> dict[str, Mapping[str, Any]]:
    return {d["name"]: d for d in items if isinstance(d, Mapping) and isinstance(d.get("name"), str) and d["name"]}


def _device_role(device: Mapping[str, Any], role_map: Mapping[str, str]) -> str | None:
    slug = _slug(device.get("role") or device.get("device_role"))  # device_role before NetBox 4.0
    return role_map.get(slug) or (guess_role(slug) if slug else None)


def _facts(device: Mapping[str, Any]) -> dict[str, Any]:
    ip = device.get("primary_ip") or device.get("primary_ip4") or device.get("primary_ip6")
    address = ip.get("address") if isinstance(ip, Mapping) else None
    platform = _slug(device.get("platform"))
    nos = next((n for w, n in _NOS_WORDS.items() if w in re.findall(r"[a-z0-9]+", platform)), None)
    return {"mgmt_address": address.partition("/")[0] if isinstance(address, str) else None, "nos": nos}


@dataclass(frozen=True, slots=True)
class _End:
    """One termination of a cable: its type and, for an interface, its device, name and id."""

    kind: str
    device: str | None
    port: str | None
    interface_id: int | None
    what: str  # in messages: "ams1-leaf-a01 PSU1" or "DF-1001: Termination A"


def _ends(cable: Mapping[str, Any], side: str) -> list[_End]:
    """The terminations of one side (``a`` or ``b``), in either NetBox shape."""
    items = cable.get(f"{side}_terminations")
    if isinstance(items, list):
        pairs = [(t.get("object_type"), t.get("object")) for t in items if isinstance(t, Mapping)]
    elif f"termination_{side}_type" in cable:  # NetBox before 3.3: one termination per side
        pairs = [(cable.get(f"termination_{side}_type"), cable.get(f"termination_{side}"))]
    else:
        pairs = []
    return [_end(kind if isinstance(kind, str) else "?", obj) for kind, obj in pairs]


def _end(kind: str, obj: Any) -> _End:
    obj = obj if isinstance(obj, Mapping) else {}
    dev = obj.get("device")
    device = (dev.get("name") or dev.get("display_name") or dev.get("display")) if isinstance(dev, Mapping) else None
    port = obj.get("name")
    ident = obj.get("id")
    what = " ".join(str(x) for x in (device, port) if x) or str(obj.get("display") or kind)
    return _End(
        kind,
        device if isinstance(device, str) else None,
        port if isinstance(port, str) else None,
        ident if isinstance(ident, int) else None,
        what,
    )


def _cables(  # noqa: C901 - one pass, one reason per cable left out
    items: Iterable[Any],
    devices: Mapping[str, Mapping[str, Any]],
    interfaces: Mapping[int, Mapping[str, Any]],
    roles: Mapping[str, str],
    site: str | None,
    report: NetboxReport,
) -> list[Cable]:
    out: list[Cable] = []
    statuses: Counter[str] = Counter()
    mgmt: list[str] = []
    outside: dict[str, list[str]] = defaultdict(list)
    for cable in items:
        if not isinstance(cable, Mapping):
            continue
        label = cable.get("label") or ""
        source = f"cable #{cable.get('id')}" + (f" ({label})" if label else "")
        status = _choice(cable.get("status")) or _CONNECTED
        if status != _CONNECTED:
            statuses[status] += 1
            continue
        a, b = _ends(cable, "a"), _ends(cable, "b")
        if len(a) != 1 or len(b) != 1:
            ends = " to ".join(", ".join(e.what for e in side) or "nothing" for side in (a, b))
            report.left_out.append(f"{source}: {len(a)} termination(s) to {len(b)} ({ends}): left out, the fabric "
                                   "has one port at each end of a cable (cable each lane on its own)")  # fmt: skip
            continue
        (ea,), (eb,) = a, b
        if ea.kind != "dcim.interface" or eb.kind != "dcim.interface":
            kinds = " to ".join(f"{e.what} ({e.kind})" for e in (ea, eb))
            report.left_out.append(f"{source}: {kinds} is not interface to interface: left out")
            continue
        if not (ea.device and eb.device and ea.port and eb.port):
            report.left_out.append(f"{source}: an end without a device or interface name: left out")
            continue
        nodes = (ea.device, eb.device)
        if nodes[0] == nodes[1]:
            report.left_out.append(f"{source}: from {nodes[0]} to itself ({ea.port} -> {eb.port}): left out")
            continue
        ia, ib = interfaces.get(ea.interface_id or -1, {}), interfaces.get(eb.interface_id or -1, {})
        if ia.get("mgmt_only") is True or ib.get("mgmt_only") is True:
            mgmt.append(source)
            continue
        if missing := [n for n in nodes if n not in devices]:
            where = f"site {site}" if site else "NetBox's devices"
            report.left_out.append(f"{source}: {' and '.join(missing)} is not among {where}: left out")
            continue
        if roles and (strays := [n for n in nodes if n not in roles]):
            for n in strays:
                outside[n].append(source)
            continue
        speeds = [s for s in (interface_speed_gbps(ia), interface_speed_gbps(ib)) if s is not None]
        out.append(Cable(nodes[0], ea.port, nodes[1], eb.port, min(speeds) if speeds else None, source))
    for status, count in sorted(statuses.items()):
        report.left_out.append(
            f"{count} cable(s) with status {status!r} left out (only connected cables are the fabric)"
        )
    if mgmt:
        report.left_out.append(f"{len(mgmt)} cable(s) on management-only interfaces left out ({_few(mgmt)})")
    for d in sorted(outside, key=natural_key):
        slug = _slug(devices[d].get("role") or devices[d].get("device_role")) or "none"
        report.left_out.append(f"{d} (role {slug}) is not a fabric device: {len(outside[d])} cable(s) left out "
                               f"({_few(outside[d])}); --role-map ROLE={slug} puts it in")  # fmt: skip
    return out


def _few(items: Sequence[str], n: int = 3) -> str:
    return ", ".join(items[:n]) + (f" and {len(items) - n} more" if len(items) > n else "")


def _drop_within_tier(cables: list[Cable], roles: Mapping[str, str], report: NetboxReport) -> list[Cable]:
    """Cables between two devices of one role (an MLAG peer link, two servers) are no fabric link."""
    out = []
    for c in cables:
        role = roles.get(c.a_node)
        if role is not None and role == roles.get(c.b_node):
            report.left_out.append(f"{c.source}: {c.a_node} {c.a_port} to {c.b_node} {c.b_port} joins two "
                                   f"{role}s (a peer link?): left out")  # fmt: skip
            continue
        out.append(c)
    return out


def _common_speed(cables: Sequence[Cable], report: NetboxReport) -> int | None:
    speeds = Counter(c.speed_gbps for c in cables if c.speed_gbps)
    unknown = [c.source for c in cables if not c.speed_gbps]
    if not unknown:
        return None
    if not speeds:
        raise TopologyError(
            f"NetBox: no interface gives a speed ({_few(unknown)}): set the interfaces' speed or type, or --speed-gbps"
        )
    common = speeds.most_common(1)[0][0]
    report.left_out.append(f"{len(unknown)} cable(s) with no speed on either interface taken as {common}G, the most "
                           f"common speed ({_few(unknown)}; --speed-gbps to set it)")  # fmt: skip
    return common


def _by_cable(message: str, at: tuple[str | int, ...], kept: list[Cable]) -> str:
    """A message of the v2 loader about ``links[i]`` told by the NetBox cable instead."""
    if len(at) == 2 and at[0] == "links" and isinstance(at[1], int) and at[1] < len(kept):
        return f"{kept[at[1]].source}: {message.partition(': ')[2] or message}"
    return message
