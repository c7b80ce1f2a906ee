"""How each simulated NOS puts the same data on the gNMI wire (the shapes of SPEC §9.2).

A :class:`Shape` answers four questions for a Subscribe or Get session: what a request path
selects (:meth:`Shape.selections`), which leaves are ON_CHANGE under TARGET_DEFINED
(:meth:`Shape.leaves`), the Notification groups of a selection (:meth:`Shape.render`), and the
``delete`` that removes an interface (:meth:`Shape.delete`). Timing quirks are data:
:attr:`Shape.offsets` (a family read and stamped later than the rest: EOS's PFC) and
:attr:`Shape.status_heartbeat` (EOS re-sends ON_CHANGE interface state between samples).

* ``openconfig`` / ``cumulus``: :class:`simulator.gnmi_wire.Renderer` as it always was.
* ``eos``: the same leaves cut per container (:data:`EOS_LAYOUT`): prefix
  ``/interfaces/interface[name=X]/state/counters`` with leaves ``in-octets`` ..., another
  Notification for ``.../state`` (``oper-status``, ``last-change``, ...), another for
  ``.../ethernet/state`` (``port-speed``, ``counters/in-mac-pause-frames``); PFC and LLDP keep
  one Notification per interface, PFC :data:`EOS_PFC_LAG_NS` after the interface counters:
  read from the view 10 ms ahead of the clock, so its values are those of its own timestamp (a
  timed fault transition due within those 10 ms happens that much early, for every reader).
* ``xr``: :class:`XrRenderer`: prefix ``origin`` only (plus the request's target), one update
  per YANG ``state`` container (``interfaces/interface[name=X]/state``,
  ``.../ethernet/state``, ``qos/interfaces/interface[interface-id=X]/switch-priority[priority=P]
  /state``, ``lldp/.../neighbors/neighbor[id=N]/state``) whose ``json_ietf_val`` holds the
  selected leaves, uint64 as JSON strings (RFC 7951 §6.1), one Notification per interface.
  The PFC family is the Cumulus ``/qos`` one in XR's container form: a simplification, XR has
  no such model. Values are JSON whatever encoding is asked for.
* ``sonic``: :mod:`simulator.gnmi_sonic`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import attrgetter
from typing import Any

from simulator.gnmi_optics import (
    CUMULUS_OPTICS,
    OPENCONFIG_OPTICS,
    OPTICS_LEAVES,
    OpticsRenderer,
    SonicOpticsRenderer,
    select_optics,
    sonic_fec_texts,
)
from simulator.gnmi_paths import (
    IF_FIELDS,
    LEAVES,
    LLDP_FIELDS,
    ROOTS,
    Elem,
    Family,
    Kind,
    Leaf,
    Selection,
    UnknownPathError,
    merge,
    path_elems,
    select,
)
from simulator.gnmi_sonic import SONIC_LEAVES, SonicRenderer, select_sonic
from simulator.gnmi_wire import (
    SPEEDS,
    Encoding,
    Group,
    JsonTexts,
    Layout,
    Renderer,
    json_ietf,
    path_bytes,
    prefix_field,
    update_field,
)
from simulator.nos import Nos
from simulator.optics import OpticReading
from simulator.view import LldpNeighbor, PortCounters

#: Every leaf table, OpenConfig and SONiC (plans look leaves up here).
ALL_LEAVES: dict[Family, tuple[Leaf, ...]] = {**LEAVES, **SONIC_LEAVES, **OPTICS_LEAVES}

#: EOS sends one Notification per container (relative leaves below it).
EOS_LAYOUT = Layout(
    "eos",
    {
        Family.INTERFACES: (
            (Elem("state"), Elem("counters")),
            (Elem("state"),),
            (Elem("ethernet"), Elem("state")),
        )
    },
)
#: How much later than the interface counters an EOS switch reads and stamps its PFC counters.
EOS_PFC_LAG_NS = 10_000_000
#: The origin an XR switch puts in its prefixes, per family.
XR_ORIGINS: dict[Family, str] = {
    Family.INTERFACES: "openconfig-interfaces",
    Family.PFC: "openconfig-qos",
    Family.LLDP: "openconfig-lldp",
}
_MAX_MEMO = 200_000
_ETHERNET = "openconfig-if-ethernet:"


def interface_elems(family: Family, port: str) -> list[Elem]:
    """The family root with the interface key filled in (``/interfaces/interface[name=X]``)."""
    root = list(ROOTS.get(family) or ROOTS[Family.INTERFACES])  # link health: the interface itself
    last = root[-1]
    root[-1] = Elem(last.name, tuple((k, port) for k, _ in last.keys))
    return root


class Shape:
    """One NOS's wire form (the base: OpenConfig, one Notification per interface and family)."""

    #: ns after the snapshot at which a family is read and stamped.
    offsets: Mapping[Family, int] = {}
    #: Whether ON_CHANGE interface state is re-sent, unchanged, between samples.
    status_heartbeat = False
    #: The link-health families it serves (simulator.gnmi_optics).
    optics_families: tuple[Family, ...] = OPENCONFIG_OPTICS
    #: The counters families whose answer also carries fields read from the transceivers
    #: (:meth:`render_with_optics`): SONiC's COUNTERS hash has the port's FEC fields.
    counters_optics: frozenset[Family] = frozenset()

    def __init__(self, nos: Nos, renderer: Renderer, layout: Layout | None = None) -> None:
        self.nos = nos
        self.renderer = renderer
        self.layout = layout
        self._targets: dict[str, bytes] = {}
        self.optics = OpticsRenderer()

    def selections(self, prefix: Any, path: Any) -> list[Selection]:
        """What ``prefix`` + ``path`` selects; raises PathError / UnknownPathError."""
        elems = path_elems(prefix) + path_elems(path)
        optics = select_optics(elems, self.optics_families)
        try:
            found = select(elems)
        except UnknownPathError:
            if not optics:
                raise
            found = []
        return merge(found + optics)

    def render_optics(
        self, target: str, sel: Selection, encoding: Encoding, readings: Sequence[OpticReading]
    ) -> list[Group]:
        """The groups of a link-health selection (simulator.gnmi_optics), from transceiver readings."""
        return self.optics.render(target, sel, encoding, readings)

    def render_with_optics(
        self,
        target: str,
        sel: Selection,
        encoding: Encoding,
        ports: Sequence[PortCounters],
        readings: Sequence[OpticReading],
    ) -> list[Group]:
        """The groups of a :attr:`counters_optics` selection: the counters and the transceivers' fields."""
        return self.render(target, sel, encoding, ports, ())

    def leaves(self, family: Family) -> tuple[Leaf, ...]:
        """The leaf table of a family."""
        return ALL_LEAVES[family]

    def render(
        self,
        target: str,
        sel: Selection,
        encoding: Encoding,
        ports: Sequence[PortCounters],
        lldp: Sequence[LldpNeighbor],
    ) -> list[Group]:
        """The Notification groups of one selection."""
        if self.layout is None:
            return self.renderer.render(target, sel, encoding, ports, lldp)
        return self.renderer.render(target, sel, encoding, ports, lldp, self.layout)

    def delete(self, target: str, family: Family, port: str) -> tuple[bytes, bytes]:
        """(prefix field, Path bytes) of the ``delete`` that removes ``port`` from a family."""
        found = self._targets.get(target)
        if found is None:
            found = self._targets[target] = prefix_field(path_bytes((), target))
        return found, path_bytes(interface_elems(family, port))


class CumulusShape(Shape):
    """NVIDIA Cumulus Linux: OpenConfig, plus its own ``phy`` FEC leaves and FEC histogram (5.15)."""

    optics_families = CUMULUS_OPTICS

    def __init__(self, renderer: Renderer) -> None:
        super().__init__(Nos.CUMULUS, renderer)


class EosShape(Shape):
    """Arista EOS: per-container Notifications, PFC 10 ms later, status heartbeats."""

    offsets = {Family.PFC: EOS_PFC_LAG_NS}
    status_heartbeat = True

    def __init__(self, renderer: Renderer) -> None:
        super().__init__(Nos.EOS, renderer, EOS_LAYOUT)

    def render_optics(
        self, target: str, sel: Selection, encoding: Encoding, readings: Sequence[OpticReading]
    ) -> list[Group]:
        return self.optics.render(target, sel, encoding, readings, EOS_LAYOUT)


class XrShape(Shape):
    """Cisco IOS XR: origin prefixes, JSON_IETF ``state`` containers with uint64 strings."""

    def __init__(self, renderer: Renderer) -> None:
        super().__init__(Nos.XR, renderer)
        self.xr = XrRenderer()

    def render(
        self,
        target: str,
        sel: Selection,
        encoding: Encoding,
        ports: Sequence[PortCounters],
        lldp: Sequence[LldpNeighbor],
    ) -> list[Group]:
        return self.xr.render(target, sel, ports, lldp)

    def delete(self, target: str, family: Family, port: str) -> tuple[bytes, bytes]:
        return self.xr.prefix(target, family), path_bytes(interface_elems(family, port))


class SonicShape(Shape):
    """SONiC's DB targets (the prefix target is the database)."""

    counters_optics = frozenset({Family.SONIC_COUNTERS})

    def __init__(self, renderer: Renderer) -> None:
        super().__init__(Nos.SONIC, renderer)
        self.sonic = SonicRenderer()
        self.sonic_optics = SonicOpticsRenderer()

    def render_with_optics(
        self,
        target: str,
        sel: Selection,
        encoding: Encoding,
        ports: Sequence[PortCounters],
        readings: Sequence[OpticReading],
    ) -> list[Group]:
        return self.sonic.render(target, sel, ports, (), sonic_fec_texts(readings))

    def render_optics(
        self, target: str, sel: Selection, encoding: Encoding, readings: Sequence[OpticReading]
    ) -> list[Group]:
        return self.sonic_optics.render(target, sel, readings)

    def selections(self, prefix: Any, path: Any) -> list[Selection]:
        return select_sonic(str(prefix.target or path.target), path_elems(prefix) + path_elems(path))

    def render(
        self,
        target: str,
        sel: Selection,
        encoding: Encoding,
        ports: Sequence[PortCounters],
        lldp: Sequence[LldpNeighbor],
    ) -> list[Group]:
        return self.sonic.render(target, sel, ports, lldp)

    def delete(self, target: str, family: Family, port: str) -> tuple[bytes, bytes]:
        return self.sonic.delete(target, family, port)


def make_shapes(renderer: Renderer) -> dict[Nos, Shape]:
    """One shape per NOS, sharing the server's OpenConfig renderer (and its caches)."""
    return {
        Nos.OPENCONFIG: Shape(Nos.OPENCONFIG, renderer),
        Nos.CUMULUS: CumulusShape(renderer),
        Nos.EOS: EosShape(renderer),
        Nos.XR: XrShape(renderer),
        Nos.SONIC: SonicShape(renderer),
    }


# --- XR: JSON_IETF containers -----------------------------------------------------------------

_IF_ROW = attrgetter(*IF_FIELDS)
_LLDP_ROW = attrgetter(*(f for _, f in LLDP_FIELDS))


class _Container:
    """One ``state`` container of a selection: its path below the root and its JSON template."""

    __slots__ = ("columns", "convert", "fmt", "rel")

    def __init__(self, rel: tuple[Elem, ...], inner: list[tuple[tuple[str, ...], Leaf]]) -> None:
        self.rel = rel
        tree: dict[str, Any] = {}
        for names, leaf in inner:
            node = tree
            for n in names[:-1]:
                node = node.setdefault(n, {})
            node[names[-1]] = leaf
        order: list[Leaf] = []
        self.fmt = _json_template(tree, order)
        self.columns = [leaf.column for leaf in order]
        #: (position, kind) of the values that are not plain uint64 (placed as %s, pre-encoded)
        self.convert = [(i, leaf.kind) for i, leaf in enumerate(order) if leaf.kind is not Kind.UINT]


def _json_template(tree: dict[str, Any], order: list[Leaf]) -> bytes:
    parts = []
    for name, node in tree.items():
        if isinstance(node, dict):
            value = _json_template(node, order)
        else:
            order.append(node)
            value = b'"%d"' if node.kind is Kind.UINT else b"%s"
        parts.append(b'"%s":%s' % (name.encode(), value))
    return b"{" + b",".join(parts) + b"}"


class XrRenderer:
    """IOS XR answers as groups: one per interface, one update per ``state`` container."""

    def __init__(self) -> None:
        self._containers: dict[tuple[Family, tuple[int, ...]], list[_Container]] = {}
        self._prefixes: dict[tuple[str, Family], bytes] = {}
        self._paths: dict[tuple[Family, str, tuple[Elem, ...], str], bytes] = {}
        self._text = JsonTexts()

    def prefix(self, target: str, family: Family) -> bytes:
        """The prefix field: the family's module as origin, the request's target, no elements."""
        key = (target, family)
        found = self._prefixes.get(key)
        if found is None:
            found = self._prefixes[key] = prefix_field(path_bytes((), target, XR_ORIGINS[family]))
        return found

    def render(
        self, target: str, sel: Selection, ports: Sequence[PortCounters], lldp: Sequence[LldpNeighbor]
    ) -> list[Group]:
        """The groups of one selection (ports or LLDP neighbours as the family needs)."""
        containers = self._layout(sel)
        prefix = self.prefix(target, sel.family)
        rows: list[tuple[str, list[tuple[str, tuple[Any, ...]]]]] = []
        if sel.family is Family.LLDP:
            by_port: dict[str, list[tuple[str, tuple[Any, ...]]]] = {}
            counts: dict[str, int] = {}
            for nb in lldp:
                number = counts[nb.local_port] = counts.get(nb.local_port, 0) + 1
                nid = str(number)
                if (sel.port is None or nb.local_port == sel.port) and (sel.neighbor in (None, nid)):
                    by_port.setdefault(nb.local_port, []).append((nid, _LLDP_ROW(nb)))
            rows = list(by_port.items())
        else:
            getter = _IF_ROW if sel.family is Family.INTERFACES else _pfc_row
            rows = [(p.name, [("", getter(p))]) for p in ports if sel.port is None or p.name == sel.port]
        # One Notification per interface and selection: two subscriptions reaching one container
        # (counters SAMPLE, oper-status ON_CHANGE, both in .../state) are two Notifications.
        tag = b"|%s%r" % (sel.family.value.encode(), sel.leaves)
        groups: list[Group] = []
        for port, entries in rows:
            keys: list[bytes] = []
            ups: list[bytes] = []
            for nid, row in entries:
                for c in containers:
                    path = self._path(sel.family, port, c.rel, nid)
                    keys.append(path)
                    ups.append(update_field(path, json_ietf(c.fmt % self._values(c, row))))
            if ups:
                groups.append(Group(port, prefix, keys, ups, port.encode() + tag))
        return groups

    def _values(self, c: _Container, row: tuple[Any, ...]) -> tuple[Any, ...]:
        values = [row[i] for i in c.columns]
        for i, kind in c.convert:
            v = values[i]
            if kind is Kind.STATUS:
                values[i] = b'"UP"' if v else b'"DOWN"'
            elif kind is Kind.SPEED:
                values[i] = self._text(_ETHERNET + (SPEEDS.get(int(v), "SPEED_UNKNOWN") if v else "SPEED_UNKNOWN"))
            else:
                values[i] = self._text(str(v))
        return tuple(values)

    def _path(self, family: Family, port: str, rel: tuple[Elem, ...], neighbor: str) -> bytes:
        key = (family, port, rel, neighbor)
        found = self._paths.get(key)
        if found is None:
            elems = interface_elems(family, port) + [
                Elem(e.name, tuple((k, neighbor if v == "*" else v) for k, v in e.keys)) for e in rel
            ]
            if len(self._paths) >= 4 * _MAX_MEMO:
                self._paths.clear()
            found = self._paths[key] = path_bytes(elems)
        return found

    def _layout(self, sel: Selection) -> list[_Container]:
        key = (sel.family, sel.leaves)
        found = self._containers.get(key)
        if found is None:
            leaves = LEAVES[sel.family]
            by_container: dict[tuple[Elem, ...], list[tuple[tuple[str, ...], Leaf]]] = {}
            for i in sel.leaves:
                leaf = leaves[i]
                names = [e.name for e in leaf.rel]
                cut = len(names) - 1 - names[::-1].index("state")  # the innermost ``state``
                by_container.setdefault(leaf.rel[: cut + 1], []).append((tuple(names[cut + 1 :]), leaf))
            found = self._containers[key] = [_Container(rel, inner) for rel, inner in by_container.items()]
        return found


def _pfc_row(p: PortCounters) -> tuple[int, ...]:
    return p.pfc_rx + p.pfc_tx
