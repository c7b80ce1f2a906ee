"""The simulated switches' gNMI schema: path parsing, wildcard matching and the leaf tables.

Three families of data are served, each grouped per interface (one gNMI Notification per
interface, prefix = target + the family root with the interface key, updates relative):

* ``/interfaces/interface[name=N]/...`` (openconfig-interfaces, openconfig-if-ethernet):
  ``state/counters/*``, ``state/{oper-status,admin-status,last-change,description}``,
  ``ethernet/state/port-speed`` and ``ethernet/state/counters/{in,out}-mac-pause-frames``.
* ``/qos/interfaces/interface[interface-id=N]/switch-priority[priority=P]/state/counters/
  {in,out}-pause-pkts``: per-priority PFC pause frames. No public OpenConfig model carries
  PFC counters (openconfig-qos has no 802.1Qbb leaves), so this follows the NVIDIA Cumulus
  Linux gNMI path family, which is what a RoCE fabric of Spectrum switches reports.
* ``/lldp/interfaces/interface[name=N]/neighbors/neighbor[id=I]/state/{system-name,port-id,
  port-description,chassis-id}`` (openconfig-lldp); ``id`` is the 1-based position of the
  neighbour in the port's remote table.

A request path may use ``*`` for an element name or a key value, omit keys (a wildcard),
use ``...`` for any number of elements, and carry YANG module prefixes
(``openconfig-interfaces:interfaces``). A path that names a container selects every leaf
below it. The origins accepted are ``""``, ``openconfig`` and the module names a Cisco IOS XR
client sends (``openconfig-interfaces``, and the same for the other models served), for any
path: a client sends one origin for all its subscriptions.

SONiC's DB paths (target ``COUNTERS_DB``/``APPL_DB``) are another schema, in
:mod:`simulator.gnmi_sonic`; its families are members of :class:`Family` too, so that plans and
diffs treat both alike, but :data:`LEAVES` and :func:`select` are the OpenConfig tree only.
Errors::

    FabricmonError
    ├── PathError (ValueError)          a malformed path: the server answers INVALID_ARGUMENT
    └── UnknownPathError (LookupError)  well-formed, but no served leaf matches: NOT_FOUND
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from fabric.errors import FabricmonError

#: Origins accepted in a request path: all mean the OpenConfig tree (IOS XR clients name the module).
ORIGINS = frozenset(
    {
        "",
        "openconfig",
        "openconfig-interfaces",
        "openconfig-if-ethernet",
        "openconfig-lldp",
        "openconfig-qos",
        "openconfig-platform",  # link health: /components (simulator.gnmi_optics)
        "openconfig-platform-transceiver",
    }
)


class PathError(FabricmonError, ValueError):
    """A request path that is not well-formed (or uses something this target does not parse)."""


class UnknownPathError(FabricmonError, LookupError):
    """A well-formed path that selects no leaf this target serves."""


@dataclass(frozen=True, slots=True)
class Elem:
    """One path element: a name and its keys, sorted by key name; ``*`` is a wildcard."""

    name: str
    keys: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        return self.name + "".join(f"[{k}={v}]" for k, v in self.keys)


def format_path(elems: Iterable[Elem]) -> str:
    """``/a/b[k=v]`` text of a path (for messages and logs)."""
    return "/" + "/".join(str(e) for e in elems)


def path_elems(path: Any) -> tuple[Elem, ...]:
    """The elements of a ``gnmi_pb2.Path``, module prefixes stripped; raises :class:`PathError`."""
    if path.element:
        raise PathError("the deprecated Path.element field is not supported; use Path.elem")
    if path.origin not in ORIGINS:
        raise PathError(f"unsupported origin {path.origin!r} (use '', 'openconfig' or an openconfig module name)")
    out: list[Elem] = []
    for pe in path.elem:
        name = _strip_module(pe.name)
        if not name or any(c in name for c in "/[]="):
            raise PathError(f"malformed path element name {pe.name!r}")
        keys = tuple(sorted(pe.key.items()))
        for key, value in keys:
            if not key or not value:
                raise PathError(f"empty key name or value in element {pe.name!r}")
        if name == "..." and keys:
            raise PathError("'...' cannot carry keys")
        out.append(Elem(name, keys))
    return tuple(out)


def _strip_module(name: str) -> str:
    return name.partition(":")[2] if ":" in name else name


def parse_xpath(text: str) -> list[Elem]:
    """Parse ``/a/b[k=v][k2=v2]/c`` into elements; ``\\`` escapes ``]`` and ``\\`` in key values."""
    elems: list[Elem] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] == "/":
            i += 1
            continue
        j = i
        while j < n and text[j] not in "/[":
            j += 1
        name = text[i:j]
        if not name:
            raise PathError(f"empty element name in {text!r}")
        keys: dict[str, str] = {}
        while j < n and text[j] == "[":
            eq = text.find("=", j)
            close = text.find("]", j)
            if eq < 0 or 0 <= close < eq:
                raise PathError(f"key without '=' in {text!r}")
            key = text[j + 1 : eq]
            value: list[str] = []
            j = eq + 1
            while j < n and text[j] != "]":
                if text[j] == "\\" and j + 1 < n:
                    j += 1
                value.append(text[j])
                j += 1
            if j >= n:
                raise PathError(f"unterminated '[' in {text!r}")
            keys[key] = "".join(value)
            j += 1
        if j < n and text[j] != "/":
            raise PathError(f"unexpected {text[j]!r} after ']' in {text!r}")
        elems.append(Elem(name, tuple(sorted(keys.items()))))
        i = j
    return elems


# --- the leaf tables ------------------------------------------------------------------------


class Family(Enum):
    """A group of leaves sharing one per-interface root (one Notification per interface)."""

    INTERFACES = "interfaces"
    PFC = "pfc"
    LLDP = "lldp"
    # SONiC's Redis tables (simulator.gnmi_sonic): not in LEAVES, ROOTS or select()
    SONIC_COUNTERS = "sonic-counters"  # COUNTERS_DB COUNTERS/<port>: SAI port stats incl. PFC
    SONIC_PORTS = "sonic-ports"  # APPL_DB PORT_TABLE/<port>
    SONIC_LLDP = "sonic-lldp"  # APPL_DB LLDP_ENTRY_TABLE/<port>
    # Link health (simulator.gnmi_optics): rendered from transceiver readings, not port rows
    OPTICS_INTERFACES = "optics-interfaces"  # /interfaces/interface[name]: FEC, BER, state/transceiver
    OPTICS_COMPONENTS = "optics-components"  # /components/component[name]: DOM and thresholds
    OPTICS_CUMULUS = "optics-cumulus"  # /interfaces/interface[name]/phy: Cumulus's FEC, BER, histogram
    SONIC_FEC = "sonic-fec"  # COUNTERS_DB COUNTERS/<port>/SAI_PORT_STAT_IF_IN_FEC_*
    SONIC_DOM = "sonic-dom"  # STATE_DB TRANSCEIVER_DOM_SENSOR/<port>
    SONIC_DOM_LIMITS = "sonic-dom-limits"  # STATE_DB TRANSCEIVER_DOM_THRESHOLD/<port>


#: The OpenConfig families (the keys of LEAVES and ROOTS).
OPENCONFIG_FAMILIES: tuple[Family, ...] = (Family.INTERFACES, Family.PFC, Family.LLDP)


class Kind(Enum):
    """How a leaf's value is typed on the wire."""

    FLOAT = "float"  # a measurement: double_val / an RFC 7951 decimal string (link health)
    UINT = "uint"  # counters and timeticks64 (ns since the epoch): uint_val / JSON string
    STATUS = "status"  # bool → "UP" | "DOWN"
    TEXT = "text"  # string
    SPEED = "speed"  # bits/s → openconfig-if-ethernet ETHERNET_SPEED identity


@dataclass(frozen=True, slots=True)
class Leaf:
    """One served leaf: its path below the family root, how to read and type it."""

    rel: tuple[Elem, ...]
    kind: Kind
    column: int  # index into the family row (see gnmi_wire: one tuple per port or neighbour)
    on_change: bool  # what TARGET_DEFINED picks: ON_CHANGE for state, SAMPLE for counters


#: The keyed list element of each family root; its key value is the interface name.
ROOTS: dict[Family, tuple[Elem, ...]] = {
    Family.INTERFACES: (Elem("interfaces"), Elem("interface", (("name", "*"),))),
    Family.PFC: (Elem("qos"), Elem("interfaces"), Elem("interface", (("interface-id", "*"),))),
    Family.LLDP: (Elem("lldp"), Elem("interfaces"), Elem("interface", (("name", "*"),))),
}

#: openconfig-interfaces counters under state/counters, with the PortCounters field behind each.
IF_COUNTERS: tuple[tuple[str, str], ...] = (
    ("in-octets", "in_octets"),
    ("out-octets", "out_octets"),
    ("in-unicast-pkts", "in_unicast_pkts"),
    ("out-unicast-pkts", "out_unicast_pkts"),
    ("in-multicast-pkts", "in_multicast_pkts"),
    ("out-multicast-pkts", "out_multicast_pkts"),
    ("in-broadcast-pkts", "in_broadcast_pkts"),
    ("out-broadcast-pkts", "out_broadcast_pkts"),
    ("in-errors", "in_errors"),
    ("out-errors", "out_errors"),
    ("in-discards", "in_discards"),
    ("out-discards", "out_discards"),
    ("in-fcs-errors", "in_fcs_errors"),
    ("carrier-transitions", "carrier_transitions"),
    ("last-clear", "last_clear_ns"),
)

#: (path below interface[name], kind, PortCounters field, TARGET_DEFINED is ON_CHANGE).
_IF_OTHER: tuple[tuple[str, Kind, str, bool], ...] = (
    ("state/oper-status", Kind.STATUS, "oper_up", True),
    ("state/admin-status", Kind.STATUS, "admin_up", True),
    ("state/last-change", Kind.UINT, "last_change_ns", True),
    ("state/description", Kind.TEXT, "description", True),
    ("ethernet/state/port-speed", Kind.SPEED, "speed_bps", True),
    ("ethernet/state/counters/in-mac-pause-frames", Kind.UINT, "in_pause_frames", False),
    ("ethernet/state/counters/out-mac-pause-frames", Kind.UINT, "out_pause_frames", False),
)

#: PortCounters fields in the order of the interfaces row (one tuple per port).
IF_FIELDS: tuple[str, ...] = tuple(f for _, f in IF_COUNTERS) + tuple(f for _, _, f, _ in _IF_OTHER)

#: LldpNeighbor fields in the order of the LLDP row (one tuple per neighbour).
LLDP_FIELDS: tuple[tuple[str, str], ...] = (
    ("system-name", "system_name"),
    ("port-id", "port_id"),
    ("port-description", "port_description"),
    ("chassis-id", "chassis_id"),
)

PFC_PRIORITIES = 8


def _rel(text: str) -> tuple[Elem, ...]:
    return tuple(parse_xpath(text))


def _build_leaves() -> dict[Family, tuple[Leaf, ...]]:
    ifl = [Leaf(_rel(f"state/counters/{n}"), Kind.UINT, i, False) for i, (n, _) in enumerate(IF_COUNTERS)]
    base = len(IF_COUNTERS)
    ifl += [Leaf(_rel(p), k, base + i, oc) for i, (p, k, _, oc) in enumerate(_IF_OTHER)]
    # The PFC row is pfc_rx + pfc_tx: received pauses are in-pause-pkts.
    pfc = [
        Leaf(_rel(f"switch-priority[priority={p}]/state/counters/{d}-pause-pkts"), Kind.UINT, off + p, False)
        for p in range(PFC_PRIORITIES)
        for d, off in (("in", 0), ("out", PFC_PRIORITIES))
    ]
    lldp = [
        Leaf(_rel(f"neighbors/neighbor[id=*]/state/{n}"), Kind.TEXT, i, True) for i, (n, _) in enumerate(LLDP_FIELDS)
    ]
    return {Family.INTERFACES: tuple(ifl), Family.PFC: tuple(pfc), Family.LLDP: tuple(lldp)}


#: Every served leaf, per family, in a stable order (a selection refers to them by index).
LEAVES: dict[Family, tuple[Leaf, ...]] = _build_leaves()


# --- matching -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Selection:
    """What one request path selects in one family: leaf indexes plus key filters (None = all).

    ``glob`` is the wildcard port element of a SONiC virtual path (``Ethernet*``), which the
    answer repeats.
    """

    family: Family
    leaves: tuple[int, ...]
    port: str | None = None
    neighbor: str | None = None
    glob: str | None = None


def select(elems: Sequence[Elem]) -> list[Selection]:
    """The leaves a full request path selects, one Selection per family and key filter.

    Raises :class:`UnknownPathError` when nothing matches. Dynamic keys of the templates
    (interface name, neighbour id) are stored as ``*``; a request key there becomes a filter.
    """
    found: dict[tuple[Family, str | None, str | None], list[int]] = {}
    for family, leaves in LEAVES.items():
        root = ROOTS[family]
        for index, leaf in enumerate(leaves):
            binds = _match(tuple(elems), root + leaf.rel, len(root) - 1)
            if binds is not None:
                found.setdefault((family, binds[0], binds[1]), []).append(index)
    if not found:
        raise UnknownPathError(f"no served leaf matches {format_path(elems)}")
    return [Selection(f, tuple(ix), port, nbr) for (f, port, nbr), ix in found.items()]


def merge(selections: Iterable[Selection]) -> list[Selection]:
    """Union the leaves of selections with the same family and filters (one Notification each)."""
    found: dict[tuple[Family, str | None, str | None, str | None], set[int]] = {}
    for s in selections:
        found.setdefault((s.family, s.port, s.neighbor, s.glob), set()).update(s.leaves)
    return [Selection(f, tuple(sorted(ix)), port, nbr, glob) for (f, port, nbr, glob), ix in found.items()]


_Binds = tuple[str | None, str | None]


def match_template(path: tuple[Elem, ...], template: tuple[Elem, ...], port_at: int) -> _Binds | None:
    """:func:`_match` for other leaf tables (simulator.gnmi_optics): (port, neighbour) filters or None."""
    return _match(path, template, port_at)


def _match(path: tuple[Elem, ...], template: tuple[Elem, ...], port_at: int) -> _Binds | None:
    """Whether ``path`` selects ``template`` (equals it or a container above it), with key filters.

    ``port_at`` is the index of the template element whose key is the interface name; a
    dynamic key elsewhere is the LLDP neighbour id.
    """
    return _walk(path, 0, template, 0, port_at, (None, None))


def _walk(path: tuple[Elem, ...], i: int, tpl: tuple[Elem, ...], j: int, port_at: int, binds: _Binds) -> _Binds | None:
    if i == len(path):
        return binds
    pe = path[i]
    if pe.name == "...":
        for k in range(j, len(tpl) + 1):
            got = _walk(path, i + 1, tpl, k, port_at, binds)
            if got is not None:
                return got
        return None
    if j == len(tpl):
        return None
    te = tpl[j]
    if pe.name not in ("*", te.name):
        return None
    bound = _bind(pe, te, j == port_at, binds)
    return None if bound is None else _walk(path, i + 1, tpl, j + 1, port_at, bound)


def _bind(pe: Elem, te: Elem, is_port: bool, binds: _Binds) -> _Binds | None:
    """Check the request keys of one element against the template's; a dynamic key binds a filter."""
    template_keys = dict(te.keys)
    for key, value in pe.keys:
        if key not in template_keys:
            return None
        fixed = template_keys[key]
        if value == "*":
            continue
        if fixed != "*":
            if fixed != value:
                return None
        elif is_port:
            binds = (value, binds[1])
        else:
            binds = (binds[0], value)
    return binds
